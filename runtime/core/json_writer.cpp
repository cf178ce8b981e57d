#include <charconv>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "core/json.hpp"

namespace kiln::json {
namespace {

// Length of the valid UTF-8 sequence starting at s[i], or 0 if the bytes there are not one
// (overlong forms, surrogates and code points past U+10FFFF are not).
std::size_t utf8_sequence(std::string_view s, std::size_t i) {
  auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = byte(i);
  std::size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  std::uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1f) : n == 3 ? (c & 0x0f) : (c & 0x07);
  for (std::size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3f);
  }
  static const std::uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

}  // namespace

std::string quote(std::string_view s) {
  std::string out = "\"";
  out.reserve(s.size() + 2);
  for (std::size_t i = 0; i < s.size();) {
    char c = s[i];
    std::size_t n = utf8_sequence(s, i);
    if (n == 0) {
      out += "\\ufffd";  // not UTF-8: the replacement character keeps the document valid
      ++i;
      continue;
    }
    if (n > 1) {
      out.append(s.substr(i, n));
      i += n;
      continue;
    }
    ++i;
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

void Writer::before_value() {
  if (open_.empty()) {
    if (done_) throw std::logic_error("json::Writer: a second top-level value");
    done_ = true;
    return;
  }
  Level& level = open_.back();
  if (level.object) {
    if (!level.key_pending) throw std::logic_error("json::Writer: a value in an object needs a key first");
    level.key_pending = false;
    return;
  }
  if (!level.empty) out_ += ',';
  level.empty = false;
}

Writer& Writer::key(std::string_view name) {
  if (open_.empty() || !open_.back().object || open_.back().key_pending) {
    throw std::logic_error("json::Writer: a key outside an object or after another key");
  }
  Level& level = open_.back();
  if (!level.empty) out_ += ',';
  level.empty = false;
  level.key_pending = true;
  out_ += quote(name);
  out_ += ':';
  return *this;
}

Writer& Writer::begin_object() {
  before_value();
  out_ += '{';
  open_.push_back(Level{true});
  return *this;
}

Writer& Writer::begin_array() {
  before_value();
  out_ += '[';
  open_.push_back(Level{false});
  return *this;
}

Writer& Writer::end_object() {
  if (open_.empty() || !open_.back().object || open_.back().key_pending) {
    throw std::logic_error("json::Writer: end_object without an open object, or after a key");
  }
  open_.pop_back();
  out_ += '}';
  return *this;
}

Writer& Writer::end_array() {
  if (open_.empty() || open_.back().object) throw std::logic_error("json::Writer: end_array without an open array");
  open_.pop_back();
  out_ += ']';
  return *this;
}

Writer& Writer::value(std::string_view s) {
  before_value();
  out_ += quote(s);
  return *this;
}

Writer& Writer::value(bool b) {
  before_value();
  out_ += b ? "true" : "false";
  return *this;
}

Writer& Writer::integer(std::int64_t n) {
  before_value();
  out_ += std::to_string(n);
  return *this;
}

Writer& Writer::unsigned_integer(std::uint64_t n) {
  before_value();
  out_ += std::to_string(n);
  return *this;
}

Writer& Writer::value(double d) {
  if (!std::isfinite(d)) return null();
  before_value();
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, d);  // shortest form that reads back exactly
  out_.append(buf, r.ptr);
  return *this;
}

Writer& Writer::embed(std::string_view document) {
  before_value();
  out_.append(document);
  return *this;
}

Writer& Writer::null() {
  before_value();
  out_ += "null";
  return *this;
}

const std::string& Writer::str() const {
  if (!open_.empty()) throw std::logic_error("json::Writer: a container is still open");
  return out_;
}

}  // namespace kiln::json
