// The strict reading of kiln.toml shared by the manifest parser's files (manifest.cpp, the
// parameters and kernel_args in manifest_kernel_args.cpp): a table reader that refuses unknown
// keys and says FILE:LINE:COLUMN, and the helpers built on it. Internal to libkiln's core.
#pragma once

// toml++ is compiled into libkiln (header-only), so libkiln carries no runtime dependency on a
// shared toml++ (the GPU machines do not have Debian's).
#define TOML_HEADER_ONLY 1
#define TOML_EXCEPTIONS 1
#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "core/format.hpp"
#include "core/manifest.hpp"
#include "core/shape_expr.hpp"

namespace kiln::manifest_toml {

inline const char* toml_type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::array: return "an array";
    case toml::node_type::table: return "a table";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    default: return "nothing";
  }
}

inline SourcePos pos_of(const toml::node& n) {
  return {static_cast<std::uint32_t>(n.source().begin.line), static_cast<std::uint32_t>(n.source().begin.column)};
}

// A key's own position when toml++ recorded one, else its value's.
inline SourcePos pos_of_key(const toml::key& key, const toml::node& value) {
  if (key.source().begin.line != 0) {
    return {static_cast<std::uint32_t>(key.source().begin.line), static_cast<std::uint32_t>(key.source().begin.column)};
  }
  return pos_of(value);
}

// Edits (insertions, deletions, substitutions, adjacent swaps) between two short keys.
inline std::size_t key_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

// Whether `typed` looks like a misspelling of `known`: at most 1 edit for short keys, 2 from 6
// characters on.
inline bool looks_like(std::string_view typed, std::string_view known) {
  std::size_t limit = known.size() >= 6 ? 2 : 1;
  return typed != known && typed.size() < 64 && key_distance(typed, known) <= limit;
}

// Reads one table strictly: every key must be one the caller asked for, so a typo such
// as `sequnce` is an error at its own line rather than a silently missing field.
class TableReader {
 public:
  TableReader(const std::string& file, const toml::table& table, std::string where)
      : file_(file), table_(table), where_(std::move(where)) {
    seen_.reserve(16);  // the keys of most tables, without growing the list key by key
  }

  [[noreturn]] void fail_at(const toml::node& n, const std::string& message) const {
    fail_at_pos(pos_of(n), message);
  }
  [[noreturn]] void fail_at_pos(SourcePos p, const std::string& message) const {
    fail(Errc::manifest, file_ + ":" + std::to_string(p.line) + ":" + std::to_string(p.column) + ": " + message);
  }

  const toml::node* get(std::string_view key) {
    seen_.push_back(key);
    return table_.get(key);
  }

  const toml::node& require(std::string_view key, std::string_view expected) {
    const toml::node* n = get(key);
    if (n == nullptr) missing(key, expected);
    return *n;
  }

  // require()'s failure: a missing key with a look-alike present is a typo, reported at the
  // typo's own line. Messages are built here only, never for a key that is there.
  [[noreturn]] void missing(std::string_view key, std::string_view expected) const {
    for (auto&& [other, node] : table_) {
      if (looks_like(other.str(), key)) {
        fail_at_pos(pos_of_key(other, node), "unknown key '" + std::string(other.str()) + "' in " + where_ +
                                                 "; did you mean '" + std::string(key) + "'? (" + where_ +
                                                 " is missing '" + std::string(key) + "')");
      }
    }
    fail_at(table_, where_ + " is missing '" + std::string(key) + "' (expected " + std::string(expected) + ")");
  }

  std::string string(std::string_view key, std::string_view example) {
    const toml::node* n = get(key);
    if (n == nullptr) missing(key, "a string such as " + std::string(example));
    return as_string(*n, key, example);
  }

  std::string optional_string(std::string_view key, std::string_view example, std::string_view fallback) {
    const toml::node* n = get(key);
    return n ? as_string(*n, key, example) : std::string(fallback);
  }

  // The parameters naming things are views: a manifest of thousands of kernels reads tens of
  // thousands of values, and only a problem needs their names as strings.
  std::string as_string(const toml::node& n, std::string_view key, std::string_view example) const {
    if (!n.is_string()) {
      fail_at(n, "'" + std::string(key) + "' in " + where_ + " must be a string such as " + std::string(example) + ", found " +
                     toml_type_name(n));
    }
    return std::string(*n.value<std::string_view>());
  }

  std::int64_t integer(const toml::node& n, std::string_view key, std::int64_t min, std::int64_t max) const {
    if (!n.is_integer()) {
      fail_at(n, "'" + std::string(key) + "' in " + where_ + " must be an integer, found " + toml_type_name(n));
    }
    std::int64_t v = *n.value<std::int64_t>();
    if (v < min || v > max) {
      fail_at(n, "'" + std::string(key) + "' in " + where_ + " must be between " + std::to_string(min) + " and " +
                     std::to_string(max) + ", found " + std::to_string(v));
    }
    return v;
  }

  double number(const toml::node& n, std::string_view key) const {
    if (!n.is_number()) fail_at(n, "'" + std::string(key) + "' in " + where_ + " must be a number, found " + toml_type_name(n));
    double v = *n.value<double>();
    if (!std::isfinite(v) || v < 0) fail_at(n, "'" + std::string(key) + "' in " + where_ + " must be a finite number >= 0");
    return v;
  }

  const toml::array& array(const toml::node& n, std::string_view key, std::string_view of) const {
    if (!n.is_array()) {
      fail_at(n, "'" + std::string(key) + "' in " + where_ + " must be an array of " + std::string(of) + ", found " +
                     toml_type_name(n));
    }
    return *n.as_array();
  }

  const toml::table& table(const toml::node& n, std::string_view key) const {
    if (!n.is_table()) fail_at(n, "'" + std::string(key) + "' in " + where_ + " must be a table, found " + toml_type_name(n));
    return *n.as_table();
  }

  // Call after reading every known key.
  void no_unknown_keys(const std::string& allowed) const {
    for (auto&& [key, node] : table_) {
      std::string_view k = key.str();
      if (std::find(seen_.begin(), seen_.end(), k) != seen_.end()) continue;
      std::string hint;
      for (std::string_view known : seen_) {
        if (hint.empty() && looks_like(k, known)) hint = "; did you mean '" + std::string(known) + "'?";
      }
      fail_at_pos(pos_of_key(key, node), "unknown key '" + std::string(k) + "' in " + where_ + hint + " (known keys: " + allowed + ")");
    }
  }

  const std::string& file() const { return file_; }
  const std::string& where() const { return where_; }
  const toml::table& node() const { return table_; }

 private:
  const std::string& file_;
  const toml::table& table_;
  std::string where_;
  // The keys asked for: string literals at every call site, so views are safe to keep.
  std::vector<std::string_view> seen_;
};

inline FileRef file_ref(TableReader& t, const toml::node& n, std::string_view key) {
  std::string path = t.as_string(n, key, "\"build/kernel.sm_90.cubin\"");
  std::string problem = format::member_path_problem(path);
  if (!problem.empty()) {
    t.fail_at(n, "'" + std::string(key) + "' in " + t.where() + ": " + problem +
                     " (files are named relative to the manifest's directory, inside it)");
  }
  return FileRef{path, pos_of(n)};
}

inline std::vector<FileRef> file_list(TableReader& t, std::string_view key) {
  std::vector<FileRef> out;
  const toml::node* n = t.get(key);
  if (n == nullptr) return out;
  for (const toml::node& item : t.array(*n, key, "file paths")) out.push_back(file_ref(t, item, key));
  return out;
}

// Names kiln gives things (kernels, parameters) are at most 128 characters; a kernel's `entry` is
// the compiler's symbol, which generated code makes long (Inductor names a fused kernel after every
// op it fuses), so it may have up to 1024.
inline std::string identifier(TableReader& t, std::string_view key, std::string_view example,
                              std::size_t max_length = 128) {
  const toml::node* found = t.get(key);
  if (found == nullptr) t.missing(key, "an identifier such as " + std::string(example));
  const toml::node& n = *found;
  std::string v = t.as_string(n, key, example);
  const std::string name(key);
  bool ok = !v.empty() && v.size() <= max_length && !(v[0] >= '0' && v[0] <= '9');
  for (char c : v) ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_');
  if (!ok) {
    t.fail_at(n, "'" + name + "' in " + t.where() + " must be an identifier ([A-Za-z_][A-Za-z0-9_]*) of 1 to " +
                     std::to_string(max_length) + " characters, found '" + v + "' (" + std::to_string(v.size()) +
                     " characters)");
  }
  return v;
}

// Where in kiln.toml character `offset` of a string's text is: the string node begins at its
// opening quote, and launch expressions hold no escapes worth counting.
inline SourcePos expr_pos(const toml::node& n, std::size_t offset) {
  SourcePos p = pos_of(n);
  p.column += static_cast<std::uint32_t>(1 + offset);
  return p;
}

inline ExprCode expression(TableReader& t, const toml::node& n, const std::string& what, ExprKind kind, const KernelSpec& k) {
  std::string text(*n.value<std::string_view>());
  ExprCode code;
  ExprProblem problem;
  if (!compile_expr(text, k.params, kind, &code, &problem)) {
    t.fail_at_pos(expr_pos(n, problem.offset), what + " in " + t.where() + " \"" + text.substr(0, 64) +
                                                   (text.size() > 64 ? "..." : "") + "\": " + problem.message);
  }
  return code;
}

// kernel_args (manifest_kernel_args.cpp): the kernel's own parameters, checked against the call's.
std::vector<KernelArg> parse_kernel_args(TableReader& kt, const toml::node& n, const KernelSpec& k);
// One `code` entry ({ arch, file }); `i` is its index, for the error's place.
CodeObjectRef parse_code(TableReader& kt, const toml::node& n, std::size_t i);
// [[kernel.variant]] (manifest_variants.cpp), after the kernel's params and code are parsed.
std::vector<VariantSpec> parse_variants(TableReader& kt, const toml::node& n, const KernelSpec& k);
// A shape's `cluster`, when given: sets has_cluster and cluster.
void parse_cluster(TableReader& t, const toml::node* n, ShapeSpec* s);

}  // namespace kiln::manifest_toml
