// kiln's one home for JSON: a strict reader for documents an attacker may have written (OCI
// image layouts, registry replies) and a writer for every JSON document kiln prints or stores
// (CLI reports, preflight, OCI manifests). The quoting rule is shared with the TOML diagnostic
// reports: JSON's escapes are valid in TOML's basic strings.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace kiln::json {

// ---- reading ----------------------------------------------------------------------------------
// Objects, arrays, strings, integers, booleans and null, with bounded depth and size; every
// error names the document (`what`) and the byte where reading stopped.
struct Value {
  // `number` is an integer; `real` a number written with a fraction or an exponent (a reader
  // that wants an integer sees another type and refuses it).
  enum class Type { null, boolean, number, string, array, object, real } type = Type::null;
  bool boolean = false;
  std::int64_t number = 0;
  double real = 0;
  std::string string;
  std::vector<Value> array;
  std::map<std::string, Value> object;

  const Value* get(const std::string& key) const;  // null unless an object holding key
  const std::string* get_string(const std::string& key) const;
  const std::int64_t* get_number(const std::string& key) const;
};

Value parse(const std::string& text, const std::string& what);  // throws Errc::malformed

// ---- writing ----------------------------------------------------------------------------------
// A string literal: \" \\ \n \r \t short escapes, \u00XX for other control bytes and DEL (TOML
// forbids a raw DEL), and U+FFFD for each byte that is not part of valid UTF-8, so the output
// always parses whatever a file name or an error message held.
std::string quote(std::string_view s);

// Builds one document in order; commas and nesting are its business, not the caller's.
//   Writer w; w.begin_object().field("ok", true).key("run").begin_array() ... .end_array().end_object();
// Misuse (a value where a key is due, an unclosed container at str()) is a programming error
// and throws std::logic_error, which tests catch; it never produces malformed JSON.
class Writer {
 public:
  Writer& begin_object();
  Writer& end_object();
  Writer& begin_array();
  Writer& end_array();
  Writer& key(std::string_view name);
  Writer& value(std::string_view s);
  Writer& value(const char* s) { return value(std::string_view(s)); }
  Writer& value(const std::string& s) { return value(std::string_view(s)); }
  Writer& value(bool b);
  template <typename Int, std::enable_if_t<std::is_integral_v<Int> && !std::is_same_v<Int, bool>, int> = 0>
  Writer& value(Int n) {
    if constexpr (std::is_signed_v<Int>) return integer(static_cast<std::int64_t>(n));
    else return unsigned_integer(static_cast<std::uint64_t>(n));
  }
  Writer& value(double d);  // shortest round-trip form; NaN and infinities become null
  Writer& null();
  // A value that is already a JSON document this writer (or another kiln::json::Writer) made,
  // inserted as it is: for reports that embed libkiln's own reports. Never for foreign text.
  Writer& embed(std::string_view document);
  template <typename T>
  Writer& field(std::string_view name, const T& v) {
    return key(name).value(v);
  }
  // The finished document; throws std::logic_error while a container is still open.
  const std::string& str() const;

 private:
  Writer& integer(std::int64_t n);
  Writer& unsigned_integer(std::uint64_t n);
  void before_value();
  struct Level {
    bool object;
    bool empty = true;
    bool key_pending = false;
  };
  std::string out_;
  std::vector<Level> open_;
  bool done_ = false;  // a top-level value was written
};

}  // namespace kiln::json
