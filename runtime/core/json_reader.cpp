#include "core/json.hpp"

#include <charconv>

#include "core/error.hpp"

namespace kiln::json {
namespace {

class Parser {
 public:
  Parser(const std::string& text, const std::string& what) : s_(text), what_(what) {}
  Value document() {
    Value v = value(0);
    skip();
    if (pos_ != s_.size()) bad("bytes after the value");
    return v;
  }

 private:
  [[noreturn]] void bad(const std::string& why) {
    fail(Errc::malformed, what_ + ": invalid JSON at byte " + std::to_string(pos_) + ": " + why);
  }
  void skip() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\r' || s_[pos_] == '\t')) ++pos_;
  }
  bool literal(const char* word) {
    std::size_t n = std::char_traits<char>::length(word);
    if (s_.compare(pos_, n, word) != 0) return false;
    pos_ += n;
    return true;
  }
  Value value(int depth) {
    if (depth > 32) bad("nested too deeply");
    skip();
    if (pos_ >= s_.size()) bad("unexpected end");
    Value v;
    char c = s_[pos_];
    if (c == '{') {
      v.type = Value::Type::object;
      ++pos_;
      skip();
      if (pos_ < s_.size() && s_[pos_] == '}') return ++pos_, v;
      for (;;) {
        skip();
        if (pos_ >= s_.size() || s_[pos_] != '"') bad("expected a key");
        std::string key = string();
        skip();
        if (pos_ >= s_.size() || s_[pos_++] != ':') bad("expected ':'");
        if (v.object.count(key)) bad("duplicate key '" + key + "'");
        v.object[key] = value(depth + 1);
        skip();
        if (pos_ < s_.size() && s_[pos_] == ',') { ++pos_; continue; }
        if (pos_ < s_.size() && s_[pos_] == '}') return ++pos_, v;
        bad("expected ',' or '}'");
      }
    }
    if (c == '[') {
      v.type = Value::Type::array;
      ++pos_;
      skip();
      if (pos_ < s_.size() && s_[pos_] == ']') return ++pos_, v;
      for (;;) {
        v.array.push_back(value(depth + 1));
        skip();
        if (pos_ < s_.size() && s_[pos_] == ',') { ++pos_; continue; }
        if (pos_ < s_.size() && s_[pos_] == ']') return ++pos_, v;
        bad("expected ',' or ']'");
      }
    }
    if (c == '"') {
      v.type = Value::Type::string;
      v.string = string();
      return v;
    }
    if (literal("true")) { v.type = Value::Type::boolean; v.boolean = true; return v; }
    if (literal("false")) { v.type = Value::Type::boolean; return v; }
    if (literal("null")) return v;
    if (c == '-' || (c >= '0' && c <= '9')) {
      std::size_t start = pos_;
      if (s_[pos_] == '-') ++pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '.' || s_[pos_] == 'e' || s_[pos_] == 'E')) return real(start);
      std::string digits = s_.substr(start, pos_ - start);
      if (digits.empty() || digits == "-" || digits.size() > 18) bad("bad number");
      v.type = Value::Type::number;
      v.number = std::stoll(digits);
      return v;
    }
    bad(std::string("unexpected '") + c + "'");
  }
  // A number with a fraction or an exponent (RFC 8259's grammar), read without the locale.
  Value real(std::size_t start) {
    auto digits = [&] {
      std::size_t from = pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
      return pos_ > from;
    };
    std::size_t int_start = start + (s_[start] == '-' ? 1 : 0);
    if (pos_ == int_start || (s_[int_start] == '0' && pos_ - int_start > 1)) bad("bad number");
    if (pos_ < s_.size() && s_[pos_] == '.') {
      ++pos_;
      if (!digits()) bad("bad number");
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (!digits()) bad("bad number");
    }
    Value v;
    v.type = Value::Type::real;
    auto [end, ec] = std::from_chars(s_.data() + start, s_.data() + pos_, v.real);
    if (ec != std::errc() || end != s_.data() + pos_) bad("bad number");
    return v;
  }
  std::string string() {
    ++pos_;  // the opening quote
    std::string out;
    while (pos_ < s_.size()) {
      char c = s_[pos_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) bad("control character in a string");
      if (c != '\\') { out += c; continue; }
      if (pos_ >= s_.size()) break;
      char e = s_[pos_++];
      switch (e) {
        case '"': case '\\': case '/': out += e; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          if (pos_ + 4 > s_.size()) bad("short \\u escape");
          if (s_.substr(pos_, 4).find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) bad("bad \\u escape");
          unsigned cp = static_cast<unsigned>(std::stoul(s_.substr(pos_, 4), nullptr, 16));
          pos_ += 4;
          if (cp < 0x80) out += static_cast<char>(cp);
          else if (cp < 0x800) out += static_cast<char>(0xc0 | (cp >> 6)), out += static_cast<char>(0x80 | (cp & 0x3f));
          else out += static_cast<char>(0xe0 | (cp >> 12)), out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f)),
               out += static_cast<char>(0x80 | (cp & 0x3f));
          break;
        }
        default: bad("bad escape");
      }
    }
    bad("unterminated string");
  }
  const std::string& s_;
  const std::string& what_;
  std::size_t pos_ = 0;
};

}  // namespace

const Value* Value::get(const std::string& key) const {
  if (type != Type::object) return nullptr;
  auto it = object.find(key);
  return it == object.end() ? nullptr : &it->second;
}
const std::string* Value::get_string(const std::string& key) const {
  const Value* v = get(key);
  return v && v->type == Type::string ? &v->string : nullptr;
}
const std::int64_t* Value::get_number(const std::string& key) const {
  const Value* v = get(key);
  return v && v->type == Type::number ? &v->number : nullptr;
}

Value parse(const std::string& text, const std::string& what) {
  if (text.size() > (16u << 20)) fail(Errc::limit, what + ": JSON over 16 MiB");
  return Parser(text, what).document();
}

}  // namespace kiln::json
