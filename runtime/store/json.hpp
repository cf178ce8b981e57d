// A small, strict JSON reader for OCI image layouts (index.json, manifests): objects, arrays,
// strings, integers, booleans and null, with bounded depth. Bytes it reads come from a folder
// an attacker may have written, so every error names where it stopped.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kiln::json {

struct Value {
  enum class Type { null, boolean, number, string, array, object } type = Type::null;
  bool boolean = false;
  std::int64_t number = 0;
  std::string string;
  std::vector<Value> array;
  std::map<std::string, Value> object;

  const Value* get(const std::string& key) const;  // null unless an object holding key
  const std::string* get_string(const std::string& key) const;
  const std::int64_t* get_number(const std::string& key) const;
};

Value parse(const std::string& text, const std::string& what);  // throws Errc::malformed
std::string quote(const std::string& s);                        // a JSON string literal

}  // namespace kiln::json
