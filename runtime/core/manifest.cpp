#include "core/manifest.hpp"

#include "core/float_formats.hpp"

#include "core/manifest_pieces.hpp"
#include "core/manifest_toml.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <set>
#include <unordered_set>

#include "core/error.hpp"
#include "core/format.hpp"
#include "core/parallel.hpp"
#include "core/shape_expr.hpp"
#include "core/shape_program.hpp"

namespace kiln {
namespace {

using namespace manifest_toml;

// [toolchain] keys and values: stored as 16-bit-length strings in the kernel table; a version
// string is a few dozen bytes, so 1 KiB is generous and keeps every table record small.
constexpr std::size_t kMaxToolchainText = 1024;
// The address a test's tensors are judged at when a condition reads one (check_test_values).
constexpr std::int64_t kTestTensorAddress = 256;

constexpr ScalarType kAllScalarTypes[] = {ScalarType::i8,  ScalarType::i16, ScalarType::i32,  ScalarType::i64,
                                          ScalarType::u8,  ScalarType::u16, ScalarType::u32,  ScalarType::u64,
                                          ScalarType::f16, ScalarType::bf16, ScalarType::f32, ScalarType::f64,
                                          ScalarType::f8e4m3, ScalarType::f8e5m2};


KernelParam parse_param(TableReader& kt, const toml::node& n, std::size_t i) {
  std::string where = kt.where() + " params[" + std::to_string(i) + "]";
  if (!n.is_table()) kt.fail_at(n, where + " must be a table such as { name = \"a\", type = \"ptr\", dtype = \"f32\" }");
  TableReader t(kt.file(), *n.as_table(), where);
  KernelParam p;
  p.name = identifier(t, "name", "\"a\"");
  const toml::node& type_node = t.require("type", "\"ptr\" or a scalar type such as \"i32\"");
  std::string type = t.as_string(type_node, "type", "\"ptr\"");
  std::string scalar_list = "i8, i16, i32, i64, u8, u16, u32, u64, f16, bf16, f32, f64, f8e4m3, f8e5m2";
  if (type == "ptr") {
    p.is_pointer = true;
    const toml::node& dn = t.require("dtype", "the element type, one of " + scalar_list);
    std::string dtype = t.as_string(dn, "dtype", "\"f32\"");
    if (!parse_scalar_type(dtype, &p.type)) t.fail_at(dn, "unknown dtype '" + dtype + "' (expected one of " + scalar_list + ")");
    std::string access = t.optional_string("access", "\"read\"", "read_write");
    if (access == "read") p.access = ParamAccess::read;
    else if (access == "write") p.access = ParamAccess::write;
    else if (access == "read_write") p.access = ParamAccess::read_write;
    else t.fail_at(*t.get("access"), "unknown access '" + access + "' (expected read, write or read_write)");
  } else if (!parse_scalar_type(type, &p.type)) {
    t.fail_at(type_node, "unknown parameter type '" + type + "' (expected ptr or one of " + scalar_list + ")");
  }
  t.no_unknown_keys("name, type, dtype, access");
  return p;
}

std::array<std::uint32_t, 3> dim3(TableReader& t, std::string_view key_view) {
  const std::string key(key_view);
  const toml::node& n = t.require(key_view, "an array of 1 to 3 positive integers such as [16, 16, 1]");
  const toml::array& a = t.array(n, key, "1 to 3 positive integers");
  if (a.empty() || a.size() > 3) t.fail_at(n, "'" + key + "' in " + t.where() + " must have 1 to 3 elements, found " + std::to_string(a.size()));
  std::array<std::uint32_t, 3> out{1, 1, 1};
  for (std::size_t i = 0; i < a.size(); ++i) {
    out[i] = static_cast<std::uint32_t>(t.integer(a[i], key, 1, 0x7fffffff));
  }
  return out;
}

// The floating-point scalar parameter `name` of `k`, or nullptr.
const KernelParam* float_scalar(const KernelSpec& k, const std::string& name) {
  for (const KernelParam& p : k.params) {
    if (p.name == name && !p.is_pointer && is_float_type(p.type)) {
      return &p;
    }
  }
  return nullptr;
}

const KernelParam* integer_scalar(TableReader& t, const toml::node& at, const std::string& name, const KernelSpec& k,
                                  const char* what) {
  const KernelParam* param = nullptr;
  for (const KernelParam& p : k.params) {
    if (p.name == name && !p.is_pointer) param = &p;
  }
  if (param == nullptr) t.fail_at(at, std::string(what) + " '" + name + "' is not a scalar parameter of kernel '" + k.name + "'");
  if (is_float_type(param->type)) {
    t.fail_at(at, std::string(what) + " '" + name + "' names a " + scalar_type_name(param->type) +
                      " parameter; only integer parameters can fix a shape");
  }
  return param;
}


// A launch dimension of a range shape: 1 to 3 elements, each an integer or an expression.
// `constants` gets each element's value when it is an integer (1 for a left-out one) and -1
// for an expression, so that a block of three integers is checked for 1024 threads at pack.
// The launch dimensions a call can have (MANIFEST.md "Range shapes"): grid x 1..2^31-1, y and z
// 1..65535; each block dimension 1..1024 (and at most 1024 threads in all, checked below).
std::int64_t dim_max(std::string_view key, std::size_t i) {
  if (key == "block") return 1024;
  return i == 0 ? 0x7fffffff : 65535;
}

// Refuses an expression no call of the shape can make valid: one that faults for every call
// (`m / 0`), or whose value is always outside the dimension's range (`0 * m`, `1025 + 0 * m`).
// The bound is interval arithmetic over the shape's values and ranges (`where` ignored, which
// only widens it), so a refusal is a proof, never a guess.
void check_reachable_dim(TableReader& t, const toml::node& n, const std::string& what, const ExprCode& code,
                         const KernelSpec& k, const ShapeSpec& s, std::int64_t max, std::int64_t* lowest) {
  std::int64_t lo = 0, hi = 0;
  if (!expr_bounds(code, k.params, s, &lo, &hi)) {
    t.fail_at(n, what + " '" + expr_text(code, k.params) + "' in " + t.where() +
                     " faults for every call the shape allows (division by zero or overflow): no call can match it");
  }
  if (hi < 1 || lo > max) {
    t.fail_at(n, what + " '" + expr_text(code, k.params) + "' in " + t.where() + " is always in [" + std::to_string(lo) +
                     ", " + std::to_string(hi) + "] for the calls the shape allows, outside 1.." + std::to_string(max) +
                     ": no call can match it");
  }
  *lowest = std::max<std::int64_t>(lo, 1);
}

void dim3_exprs(TableReader& t, std::string_view key_view, const KernelSpec& k, const ShapeSpec& s,
                std::array<ExprCode, 3>* out, std::array<std::int64_t, 3>* constants, std::array<std::int64_t, 3>* lowest) {
  const std::string key(key_view);
  const toml::node& n = t.require(key_view, "an array of 1 to 3 positive integers or expressions such as [\"cdiv(m, 128)\", 1]");
  const toml::array& a = t.array(n, key, "1 to 3 positive integers or expression strings");
  if (a.empty() || a.size() > 3) t.fail_at(n, "'" + key + "' in " + t.where() + " must have 1 to 3 elements, found " + std::to_string(a.size()));
  for (std::size_t i = 0; i < 3; ++i) {
    (*constants)[i] = i < a.size() ? -1 : 1;
    (*lowest)[i] = 1;
    if (i >= a.size()) {
      (*out)[i] = constant_expr(1);
    } else if (a[i].is_string()) {
      const std::string what = key + "[" + std::to_string(i) + "]";
      (*out)[i] = expression(t, a[i], what, ExprKind::integer, k);
      check_reachable_dim(t, a[i], what, (*out)[i], k, s, dim_max(key, i), &(*lowest)[i]);
    } else {
      std::int64_t v = t.integer(a[i], key, 1, 0x7fffffff);
      if (v > dim_max(key, i) && key == "block") {
        t.fail_at(a[i], key + "[" + std::to_string(i) + "] in " + t.where() + " is " + std::to_string(v) +
                            " threads; at most 1024 are allowed in all");
      }
      (*constants)[i] = v;
      (*lowest)[i] = v;
      (*out)[i] = constant_expr(v);
    }
  }
}

ShapeSpec parse_shape(TableReader& kt, const toml::node& n, std::size_t i, const KernelSpec& k) {
  std::string where = kt.where() + " shape[" + std::to_string(i) + "]";
  if (!n.is_table()) kt.fail_at(n, where + " must be a table");
  TableReader t(kt.file(), *n.as_table(), where);
  ShapeSpec s;
  s.pos = pos_of(n);
  s.name = t.string("name", "\"m256n256k256\"");
  if (auto p = format::member_path_problem(s.name); !p.empty() || s.name.find('/') != std::string::npos) {
    t.fail_at(t.require("name", ""), "shape name '" + s.name + "' must use only [A-Za-z0-9._+@=-]" + (p.empty() ? "" : ": " + p));
  }
  if (const toml::node* vn = t.get("values")) {
    for (auto&& [key, value] : t.table(*vn, "values")) {
      std::string name(key.str());
      integer_scalar(t, value, name, k, "shape value");
      s.values.emplace_back(name, t.integer(value, name, INT64_MIN, INT64_MAX));
    }
  }
  // A shape is a range shape when anything in it is more than a fixed point; a fixed shape
  // keeps the encoding of kiln 0.2 byte for byte.
  const toml::node* rn = t.get("ranges");
  const toml::node* wn = t.get("where");
  const toml::node* gn = t.get("grid");
  const toml::node* bn = t.get("block");
  const toml::node* sn = t.get("shared_mem");
  auto has_string = [](const toml::node* d) {
    if (d == nullptr || !d->is_array()) return false;
    for (const toml::node& e : *d->as_array()) {
      if (e.is_string()) return true;
    }
    return false;
  };
  s.dynamic = (rn && !(rn->is_table() && rn->as_table()->empty())) || (wn && !(wn->is_array() && wn->as_array()->empty())) ||
              has_string(gn) || has_string(bn) || (sn && sn->is_string());
  if (!s.dynamic) {
    s.grid = dim3(t, "grid");
    s.block = dim3(t, "block");
    if (sn) s.shared_mem = static_cast<std::uint32_t>(t.integer(*sn, "shared_mem", 0, 0x7fffffff));
    std::uint64_t threads = static_cast<std::uint64_t>(s.block[0]) * s.block[1] * s.block[2];
    if (threads > 1024) t.fail_at(n, where + ": block has " + std::to_string(threads) + " threads; at most 1024 are allowed");
    parse_cluster(t, t.get("cluster"), &s);
    for (std::size_t d = 0; d < 3 && s.has_cluster; ++d) {
      if (s.grid[d] % s.cluster[d] != 0) {
        t.fail_at(*t.get("cluster"), where + ": grid " + "xyz"[d] + " = " + std::to_string(s.grid[d]) +
                                         " is not a multiple of cluster " + "xyz"[d] + " = " + std::to_string(s.cluster[d]));
      }
    }
    t.no_unknown_keys("name, values, ranges, where, grid, block, shared_mem, cluster");
    return s;
  }
  if (rn) {
    for (auto&& [key, value] : t.table(*rn, "ranges")) {
      std::string name(key.str());
      const KernelParam* param = integer_scalar(t, value, name, k, "shape range");
      for (const auto& v : s.values) {
        if (v.first == name) t.fail_at(value, "'" + name + "' is in both values and ranges of " + where);
      }
      const toml::array& a = t.array(value, name, "two integers [min, max]");
      if (a.size() != 2) t.fail_at(value, "range of '" + name + "' in " + where + " must be [min, max], found " + std::to_string(a.size()) + " elements");
      ShapeRange r{name, t.integer(a[0], name, INT64_MIN, INT64_MAX), t.integer(a[1], name, INT64_MIN, INT64_MAX)};
      if (r.min > r.max) t.fail_at(value, "range of '" + name + "' in " + where + " is empty: " + std::to_string(r.min) + " > " + std::to_string(r.max));
      // A range reaching outside the parameter's type promises calls that cannot be made.
      std::int64_t type_lo = 0, type_hi = 0;
      scalar_type_bounds(param->type, &type_lo, &type_hi);
      if (r.min < type_lo || r.max > type_hi) {
        t.fail_at(value, "range of '" + name + "' in " + where + " [" + std::to_string(r.min) + ", " + std::to_string(r.max) +
                             "] reaches outside its type " + scalar_type_name(param->type) + " (" + std::to_string(type_lo) +
                             ".." + std::to_string(type_hi) + ")");
      }
      s.ranges.push_back(r);
    }
    std::sort(s.ranges.begin(), s.ranges.end(), [](const ShapeRange& a, const ShapeRange& b) { return a.name < b.name; });
  }
  if (wn) {
    const toml::array& a = t.array(*wn, "where", "condition strings such as \"m % 16 == 0\"");
    for (std::size_t j = 0; j < a.size(); ++j) {
      if (!a[j].is_string()) t.fail_at(a[j], "'where' in " + where + " must hold condition strings, found " + toml_type_name(a[j]));
      s.where.push_back(expression(t, a[j], "where[" + std::to_string(j) + "]", ExprKind::condition, k));
    }
  }
  std::array<std::int64_t, 3> grid_constants{}, block_constants{}, grid_lowest{}, block_lowest{};
  dim3_exprs(t, "grid", k, s, &s.grid_code, &grid_constants, &grid_lowest);
  dim3_exprs(t, "block", k, s, &s.block_code, &block_constants, &block_lowest);
  if (block_constants[0] > 0 && block_constants[1] > 0 && block_constants[2] > 0 &&
      block_constants[0] * block_constants[1] * block_constants[2] > 1024) {
    t.fail_at(n, where + ": block has " + std::to_string(block_constants[0] * block_constants[1] * block_constants[2]) +
                     " threads; at most 1024 are allowed");
  }
  // Each block dimension is at most 1024 (checked in dim3_exprs), so the products fit in 64 bits.
  if (block_lowest[0] * block_lowest[1] * block_lowest[2] > 1024) {
    t.fail_at(n, where + ": block has at least " + std::to_string(block_lowest[0] * block_lowest[1] * block_lowest[2]) +
                     " threads for every call the shape allows; at most 1024 are allowed, so no call can match it");
  }
  if (sn == nullptr) {
    s.shared_mem_code = constant_expr(0);
  } else if (sn->is_string()) {
    s.shared_mem_code = expression(t, *sn, "shared_mem", ExprKind::integer, k);
  } else {
    s.shared_mem_code = constant_expr(t.integer(*sn, "shared_mem", 0, 0x7fffffff));
  }
  // The runtime sets the kernel's dynamic shared memory limit once, at load, to the largest
  // value any call can compute (FORMAT.md §4.1): that needs a finite bound.
  std::int64_t hi = 0;
  if (!expr_upper_bound(s.shared_mem_code, k.params, s, &hi)) {
    t.fail_at(sn ? *sn : n, "shared_mem in " + where + " can never be computed (it faults for every call: overflow or division by zero)");
  }
  if (hi > 0x7fffffff) {
    t.fail_at(*sn, "shared_mem in " + where + " has no bound within 2147483647 bytes over the shape's values and ranges "
                   "(interval bound " + std::to_string(hi) + "); give the parameters it uses a range, or cap it with min(...)");
  }
  parse_cluster(t, t.get("cluster"), &s);
  t.no_unknown_keys("name, values, ranges, where, grid, block, shared_mem, cluster");
  return s;
}

// A test of a range shape runs one call: every integer scalar needs a value, and the call must
// belong to the shape (kiln verify --run launches exactly what the shape computes for it).
void check_test_values(TableReader& t, const toml::node& n, const std::string& where, const KernelSpec& k,
                       const ShapeSpec& shape, const TestSpec& test) {
  std::vector<std::int64_t> storage(k.params.size(), 0);
  std::vector<void*> args(k.params.size(), nullptr);
  std::vector<ScalarType> types(k.params.size(), ScalarType::i64);
  for (std::size_t i = 0; i < k.params.size(); ++i) {
    const KernelParam& p = k.params[i];
    args[i] = &storage[i];
    // A test's tensors are judged at address 256: verify --run gives each its own allocation,
    // and cuMemAlloc / hipMalloc align those to 256 bytes at least (MANIFEST.md, tests).
    if (p.is_pointer) storage[i] = kTestTensorAddress;
    if (p.is_pointer || is_float_type(p.type)) continue;
    bool given = false;
    for (const auto& v : shape.values) given = given || (v.first == p.name && (storage[i] = v.second, true));
    for (const auto& v : test.values) given = given || (v.first == p.name && (storage[i] = v.second, true));
    if (!given) t.fail_at(n, where + " gives no value for '" + p.name + "' (range shape '" + shape.name + "' fixes none; add values = { " + p.name + " = ... })");
  }
  ShapeProgram program(shape, k.params);
  std::string why = program.mismatch(ExprArgs{args.data(), types.data()});
  if (!why.empty()) t.fail_at(n, where + ": its values do not belong to shape '" + shape.name + "': " + why);
}

TestSpec parse_test(TableReader& kt, const toml::node& n, std::size_t i, const KernelSpec& k) {
  std::string where = kt.where() + " test[" + std::to_string(i) + "]";
  if (!n.is_table()) kt.fail_at(n, where + " must be a table such as { shape = \"m256\", inputs = { a = \"a.npy\" }, outputs = { c = \"c.npy\" } }");
  TableReader t(kt.file(), *n.as_table(), where);
  TestSpec test;
  test.pos = pos_of(n);
  const toml::node& sn = t.require("shape", "the name of a declared [[kernel.shape]]");
  test.shape = t.as_string(sn, "shape", "\"m256n256k256\"");
  const ShapeSpec* shape = nullptr;
  for (const ShapeSpec& s : k.shapes) {
    if (s.name == test.shape) shape = &s;
  }
  if (shape == nullptr) t.fail_at(sn, "test shape '" + test.shape + "' is not a declared shape of kernel '" + k.name + "'");
  if (const toml::node* vn = t.get("values")) {
    for (auto&& [key, value] : t.table(*vn, "values")) {
      std::string name(key.str());
      if (const KernelParam* f = float_scalar(k, name)) {
        if (!value.is_number() || !std::isfinite(*value.value<double>())) {
          t.fail_at(value, "test value '" + name + "' must be a finite number, found " + toml_type_name(value));
        }
        std::uint32_t bits = 0;
        if (is_narrow_float(f->type) && !narrow_float_bits(f->type, *value.value<double>(), &bits)) {
          t.fail_at(value, "test value '" + name + "' = " + std::to_string(*value.value<double>()) + " is outside the " +
                               scalar_type_name(f->type) + " range (it would round to infinity or NaN)");
        }
        test.float_values.emplace_back(name, *value.value<double>());
        continue;
      }
      const KernelParam* param = integer_scalar(t, value, name, k, "test value");
      for (const auto& v : shape->values) {
        if (v.first == name) t.fail_at(value, "'" + name + "' is fixed by shape '" + shape->name + "'; the test cannot set it");
      }
      std::int64_t lo = 0, hi = 0;
      scalar_type_bounds(param->type, &lo, &hi);
      test.values.emplace_back(name, t.integer(value, name, lo, hi));
    }
  }
  if (shape->dynamic) check_test_values(t, n, where, k, *shape, test);
  auto files = [&](const char* key, std::vector<std::pair<std::string, FileRef>>& out) {
    const toml::node* fn = t.get(key);
    if (fn == nullptr) return;
    for (auto&& [name_key, value] : t.table(*fn, key)) {
      std::string name(name_key.str());
      const KernelParam* param = nullptr;
      for (const KernelParam& p : k.params) {
        if (p.name == name) param = &p;
      }
      if (param == nullptr || !param->is_pointer) {
        t.fail_at(value, "'" + name + "' in " + where + " " + key + " is not a pointer parameter of kernel '" + k.name + "'");
      }
      out.emplace_back(name, file_ref(t, value, name));
    }
  };
  files("inputs", test.inputs);
  files("outputs", test.outputs);
  for (const KernelParam& p : k.params) {
    if (!p.is_pointer) continue;
    bool in = false, out = false;
    for (const auto& f : test.inputs) in = in || f.first == p.name;
    for (const auto& f : test.outputs) out = out || f.first == p.name;
    // A read_write buffer may go without an input (scratch space, passed as NULL); a buffer
    // the kernel only reads may not.
    if (p.access == ParamAccess::read && !in) t.fail_at(n, where + " gives no input for '" + p.name + "', which the kernel reads");
    if (p.access == ParamAccess::write && !out) t.fail_at(n, where + " gives no expected output for '" + p.name + "', which the kernel writes");
  }
  if (test.outputs.empty()) t.fail_at(n, where + " checks no output");
  if (const toml::node* tn = t.get("tolerance")) {
    TableReader tt(kt.file(), t.table(*tn, "tolerance"), where + " tolerance");
    test.has_tolerance = true;
    test.tolerance = k.tolerance;
    if (const toml::node* r = tt.get("rtol")) test.tolerance.rtol = tt.number(*r, "rtol");
    if (const toml::node* a = tt.get("atol")) test.tolerance.atol = tt.number(*a, "atol");
    tt.no_unknown_keys("rtol, atol");
  }
  t.no_unknown_keys("shape, values, inputs, outputs, tolerance");
  return test;
}

// The rules of kernel_args that need the whole kernel (its shapes, its backend), for the kernel's
// own entries and for each variant's: a computed argument no call can bring into its type ("0 -
// 1" for a u64) is a mistake in the manifest, not a launch-time surprise, refused when under
// every shape (or over the parameters' types where there is none) its interval lies outside the
// type or it always faults; tensor maps and scratch are CUDA's.
void check_kernel_args(TableReader& t, const KernelSpec& k, const std::vector<KernelArg>& args) {
  for (const KernelArg& a : args) {
    if (a.kind != KernelArgKind::value) continue;
    std::int64_t type_lo = 0, type_hi = 0;
    computed_value_bounds(a.type, &type_lo, &type_hi);
    std::vector<ShapeSpec> over = k.shapes;
    if (over.empty()) over.emplace_back();
    std::string why;
    bool reachable = false;
    for (const ShapeSpec& s : over) {
      std::int64_t lo = 0, hi = 0;
      if (!expr_bounds(a.value, k.params, s, &lo, &hi)) {
        why += (why.empty() ? "" : "; ") + (s.name.empty() ? std::string("it") : "under shape '" + s.name + "' it") +
               " faults for every call";
      } else if (hi < type_lo || lo > type_hi) {
        why += (why.empty() ? "" : "; ") + (s.name.empty() ? std::string("it") : "under shape '" + s.name + "' it") +
               " is always in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
      } else {
        reachable = true;
      }
    }
    if (!reachable) {
      t.fail_at_pos(a.pos, "kernel_args entry '" + a.name + "' of kernel '" + k.name + "' computes '" +
                               expr_text(a.value, k.params) + "', which no call can bring into its type " +
                               scalar_type_name(a.type) + " (" + std::to_string(type_lo) + ".." +
                               std::to_string(type_hi) + "): " + why);
    }
  }
  if (k.backend != "cuda") {
    for (const KernelArg& a : args) {
      if (a.kind == KernelArgKind::tensor_map || a.kind == KernelArgKind::scratch) {
        t.fail_at_pos(a.pos, "kernel_args entry '" + a.name + "' of kernel '" + k.name + "' is a " +
                                 (a.kind == KernelArgKind::scratch ? "scratch" : "tensor_map") +
                                 " entry, which needs backend = \"cuda\" (the kernel's is \"" + k.backend + "\")");
      }
    }
  }
}

KernelSpec parse_kernel(const std::string& file, const toml::node& n, std::size_t i) {
  std::string where = "kernel[" + std::to_string(i) + "]";
  if (!n.is_table()) {
    fail(Errc::manifest, file + ":" + std::to_string(pos_of(n).line) + ":" + std::to_string(pos_of(n).column) + ": " + where + " must be a table");
  }
  TableReader t(file, *n.as_table(), where);
  KernelSpec k;
  k.pos = pos_of(n);
  k.name = identifier(t, "name", "\"matmul_relu\"");
  TableReader named(file, *n.as_table(), "kernel '" + k.name + "'");
  k.entry = identifier(t, "entry", "\"matmul_relu_f32\"", 1024);
  const toml::node& bn = t.require("backend", "\"cuda\", \"hip\" or \"any\"");
  k.backend = t.as_string(bn, "backend", "\"cuda\"");
  if (k.backend != "cuda" && k.backend != "hip" && k.backend != "any") {
    t.fail_at(bn, "'backend' must be \"cuda\", \"hip\" or \"any\" (code for both), found '" + k.backend + "'");
  }
  if (const toml::node* fn = t.get("fallback")) {
    std::string f = t.as_string(*fn, "fallback", "\"reference\"");
    if (f == "reference") k.fallback = FallbackPolicy::reference;
    else if (f == "refuse") k.fallback = FallbackPolicy::refuse;
    else t.fail_at(*fn, "'fallback' must be \"reference\" or \"refuse\", found '" + f + "'");
  }
  k.sources = file_list(t, "sources");
  k.ir = file_list(t, "ir");
  if (const toml::node* pn = t.get("params")) {
    const toml::array& a = t.array(*pn, "params", "parameter tables");
    std::set<std::string> names;
    for (std::size_t j = 0; j < a.size(); ++j) {
      KernelParam p = parse_param(named, a[j], j);
      if (!names.insert(p.name).second) t.fail_at(a[j], "parameter '" + p.name + "' is declared twice");
      k.params.push_back(p);
    }
  }
  if (const toml::node* an = t.get("kernel_args")) k.kernel_args = parse_kernel_args(named, *an, k);
  const toml::node& cn = t.require("code", "[[kernel.code]] tables naming each code object");
  const toml::array& ca = t.array(cn, "code", "code object tables");
  if (ca.empty()) t.fail_at(cn, "kernel '" + k.name + "' lists no code object");
  std::set<std::string> arches;
  for (std::size_t j = 0; j < ca.size(); ++j) {
    CodeObjectRef c = parse_code(named, ca[j], j);
    if (!arches.insert(c.arch).second) t.fail_at(ca[j], "arch '" + c.arch + "' appears twice in kernel '" + k.name + "'");
    k.code.push_back(c);
  }
  if (const toml::node* sn = t.get("shape")) {
    const toml::array& sa = t.array(*sn, "shape", "shape tables");
    std::set<std::string> names;
    for (std::size_t j = 0; j < sa.size(); ++j) {
      ShapeSpec s = parse_shape(named, sa[j], j, k);
      if (!names.insert(s.name).second) t.fail_at(sa[j], "shape '" + s.name + "' appears twice in kernel '" + k.name + "'");
      k.shapes.push_back(s);
    }
  }
  if (const toml::node* vn = t.get("variant")) k.variants = parse_variants(named, *vn, k);
  check_kernel_args(t, k, k.kernel_args);
  for (const VariantSpec& v : k.variants) check_kernel_args(t, k, v.kernel_args);
  // Clusters are CUDA's (cuLaunchKernelEx).
  if (k.backend != "cuda") {
    for (const ShapeSpec& s : k.shapes) {
      if (s.has_cluster) {
        t.fail_at_pos(s.pos, "shape '" + s.name + "' of kernel '" + k.name + "' gives a cluster, which needs backend = \"cuda\" (the kernel's is \"" + k.backend + "\")");
      }
    }
  }
  if (const toml::node* tn = t.get("tolerance")) {
    TableReader tt(file, t.table(*tn, "tolerance"), "kernel '" + k.name + "' tolerance");
    if (const toml::node* r = tt.get("rtol")) k.tolerance.rtol = tt.number(*r, "rtol");
    if (const toml::node* a = tt.get("atol")) k.tolerance.atol = tt.number(*a, "atol");
    tt.no_unknown_keys("rtol, atol");
  }
  if (const toml::node* tn = t.get("test")) {
    const toml::array& ta = t.array(*tn, "test", "test tables");
    for (std::size_t j = 0; j < ta.size(); ++j) k.tests.push_back(parse_test(named, ta[j], j, k));
  }
  t.no_unknown_keys("name, entry, backend, fallback, sources, ir, params, kernel_args, code, variant, shape, tolerance, test");
  return k;
}

}  // namespace

namespace manifest_toml {

CodeObjectRef parse_code(TableReader& kt, const toml::node& n, std::size_t i) {
  std::string where = kt.where() + " code[" + std::to_string(i) + "]";
  if (!n.is_table()) kt.fail_at(n, where + " must be a table such as { arch = \"sm_90a\", file = \"k.sm_90a.cubin\" }");
  TableReader t(kt.file(), *n.as_table(), where);
  CodeObjectRef c;
  c.pos = pos_of(n);
  const toml::node& an = t.require("arch", "a target such as \"sm_90a\", \"compute_90\" or \"gfx90a:xnack+\"");
  c.arch = t.as_string(an, "arch", "\"sm_90a\"");
  if (c.arch.empty() || c.arch.find(',') != std::string::npos || !format::arch_tags_problem(c.arch).empty()) {
    t.fail_at(an, "'arch' in " + where + " must be one target such as \"sm_90a\", \"compute_90\" or \"gfx90a:xnack+\", found '" + c.arch + "'");
  }
  c.file = file_ref(t, t.require("file", "the code object's path"), "file");
  t.no_unknown_keys("arch, file");
  return c;
}

}  // namespace manifest_toml

bool is_float_type(ScalarType t) {
  return t == ScalarType::f32 || t == ScalarType::f64 || is_narrow_float(t);
}

const char* scalar_type_name(ScalarType t) {
  static const char* const names[] = {"i8",  "i16", "i32", "i64", "u8",  "u16",    "u32",
                                      "u64", "f16", "bf16", "f32", "f64", "f8e4m3", "f8e5m2"};
  return names[static_cast<int>(t)];
}

std::size_t scalar_type_size(ScalarType t) {
  static const std::size_t sizes[] = {1, 2, 4, 8, 1, 2, 4, 8, 2, 2, 4, 8, 1, 1};
  return sizes[static_cast<int>(t)];
}

bool parse_scalar_type(const std::string& s, ScalarType* out) {
  for (ScalarType t : kAllScalarTypes) {
    if (s == scalar_type_name(t)) {
      *out = t;
      return true;
    }
  }
  return false;
}

const char* param_access_name(ParamAccess a) {
  switch (a) {
    case ParamAccess::read: return "read";
    case ParamAccess::write: return "write";
    case ParamAccess::read_write: return "read_write";
  }
  return "?";
}

const std::string* Manifest::toolchain_value(const std::string& key) const {
  for (const auto& kv : toolchain) {
    if (kv.first == key) return &kv.second;
  }
  return nullptr;
}

namespace {

// kiln.toml is ASCII. Debian 12's toml++ (3.3.0) reaches __builtin_unreachable, undefined
// behaviour, on some non-ASCII code points where it looks for whitespace (upstream issues
// #190 and #295, fixed after 3.4; found here by tests/fuzz). Refusing non-ASCII bytes before
// the parser sees them closes that path; strings can still hold any character as \uXXXX.
void refuse_non_ascii(std::string_view text, const std::string& source_name) {
  std::size_t line = 1, column = 1;
  for (char c : text) {
    auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x80) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02X", byte);
      fail(Errc::manifest, source_name + ":" + std::to_string(line) + ":" + std::to_string(column) +
                               ": non-ASCII byte " + hex + "; kiln.toml must be ASCII (write other "
                               "characters in strings as \\uXXXX escapes)");
    }
    if (c == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
}

}  // namespace

Manifest parse_manifest(std::string_view text, const std::string& source_name, unsigned threads) {
  refuse_non_ascii(text, source_name);
  toml::table root;
  std::vector<toml::table> groups;  // the kernels, in pieces, when parsed in pieces
  constexpr std::size_t kPiecesFrom = 256 << 10;  // below this a whole parse takes a few ms
  bool in_pieces = threads > 1 && text.size() >= kPiecesFrom && parse_manifest_in_pieces(text, source_name, threads, &root, &groups);
  if (!in_pieces) groups.clear();
  if (!in_pieces) try {
    root = toml::parse(text, source_name);
  } catch (const toml::parse_error& e) {
    fail(Errc::manifest, source_name + ":" + std::to_string(e.source().begin.line) + ":" +
                             std::to_string(e.source().begin.column) + ": " + std::string(e.description()));
  }
  TableReader top(source_name, root, "the manifest");
  Manifest m;

  const toml::node& pn = top.require("package", "a [package] table");
  TableReader pkg(source_name, top.table(pn, "package"), "[package]");
  const toml::node& name_node = pkg.require("name", "a string such as \"matmul-relu\"");
  m.package = pkg.as_string(name_node, "name", "\"matmul-relu\"");
  if (auto p = format::package_name_problem(m.package); !p.empty()) pkg.fail_at(name_node, p);
  const toml::node& rev_node = pkg.require("kernel_revision", "a string such as \"2026.11.30-1\"");
  m.kernel_revision = pkg.as_string(rev_node, "kernel_revision", "\"2026.11.30-1\"");
  if (auto p = format::revision_problem(m.kernel_revision); !p.empty()) pkg.fail_at(rev_node, p);
  m.sequence = static_cast<std::uint64_t>(
      pkg.integer(pkg.require("sequence", "a positive integer that grows with every release"), "sequence", 1, INT64_MAX));
  m.description = pkg.optional_string("description", "\"what this package is\"", "");
  pkg.no_unknown_keys("name, kernel_revision, sequence, description");

  if (const toml::node* tn = top.get("toolchain")) {
    const toml::table& tt = top.table(*tn, "toolchain");
    TableReader tool(source_name, tt, "[toolchain]");
    for (auto&& [key, value] : tt) {
      std::string k(key.str());
      std::string v = tool.as_string(value, k, "\"13.0\"");
      // Stored in the kernel table as 16-bit-length strings; a version is a few dozen bytes.
      if (k.size() > kMaxToolchainText || v.size() > kMaxToolchainText) {
        tool.fail_at(value, "[toolchain] " + k.substr(0, 64) + ": keys and values are at most " +
                                std::to_string(kMaxToolchainText) + " bytes");
      }
      m.toolchain.emplace_back(k, std::move(v));
    }
  }

  if (const toml::node* fn = top.get("files")) {
    TableReader files(source_name, top.table(*fn, "files"), "[files]");
    m.extra_files = file_list(files, "extra");
    files.no_unknown_keys("extra");
  }

  std::vector<const toml::node*> ka;
  if (in_pieces) {
    for (const toml::table& g : groups) {
      for (const toml::node& k : *g.get("kernel")->as_array()) ka.push_back(&k);
    }
  } else {
    const toml::node& kn = top.require("kernel", "one or more [[kernel]] tables");
    const toml::array& all = top.array(kn, "kernel", "[[kernel]] tables");
    if (all.empty()) top.fail_at(kn, "the manifest declares no kernel");
    for (const toml::node& k : all) ka.push_back(&k);
  }
  // Each kernel is parsed on its own (reading the tree toml++ built, never changing it), so
  // thousands of them are parsed on `threads` threads; the first error in file order is thrown,
  // as a serial parse would.
  m.kernels.resize(ka.size());
  std::vector<std::exception_ptr> errors(ka.size());
  parallel_for(ka.size(), threads, [&](std::size_t i) {
    try {
      m.kernels[i] = parse_kernel(source_name, *ka[i], i);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  });
  std::unordered_set<std::string_view> names;
  names.reserve(ka.size());
  for (std::size_t i = 0; i < ka.size(); ++i) {
    if (errors[i]) std::rethrow_exception(errors[i]);
    const std::string& name = m.kernels[i].name;
    if (!names.insert(name).second) top.fail_at(*ka[i], "kernel '" + name + "' is declared twice");
  }
  // toml++'s tree is thousands of small allocations: the pieces are freed on the threads.
  parallel_for(groups.size(), threads, [&](std::size_t g) { groups[g] = toml::table(); });
  top.no_unknown_keys("package, toolchain, files, kernel");
  return m;
}

}  // namespace kiln
