// kiln.toml's `kernel_args` (the kernel's own parameters: pass-through, computed scalars, tensor
// maps, scratch) and a shape's `cluster`. MANIFEST.md, "kernel_args", is the specification;
// everything checkable without a call is checked here, at pack, with its position.
#include <set>

#include "core/manifest_toml.hpp"

namespace kiln {

namespace {

struct DtypeName {
  const char* name;
  std::size_t size;
};
// CUtensorMapDataType's values are the indices (cuda.h).
constexpr DtypeName kTensorMapDtypes[] = {{"u8", 1},  {"u16", 2}, {"u32", 4},  {"i32", 4},     {"u64", 8},
                                          {"i64", 8}, {"f16", 2}, {"f32", 4},  {"f64", 8},     {"bf16", 2},
                                          {"f32_ftz", 4}, {"tf32", 4}, {"tf32_ftz", 4}};
constexpr std::size_t kTensorMapDtypeCount = sizeof kTensorMapDtypes / sizeof kTensorMapDtypes[0];

}  // namespace

const char* tensor_map_dtype_name(std::uint8_t dtype) {
  return dtype < kTensorMapDtypeCount ? kTensorMapDtypes[dtype].name : "?";
}
std::size_t tensor_map_dtype_size(std::uint8_t dtype) {
  return dtype < kTensorMapDtypeCount ? kTensorMapDtypes[dtype].size : 0;
}

namespace manifest_toml {
namespace {

constexpr std::int64_t kMaxTensorDim = std::int64_t{1} << 32;
constexpr std::int64_t kMaxTensorStride = std::int64_t{1} << 40;

// The tensor map dtype a pointer's element type gives when the recipe names none.
bool default_tensor_map_dtype(ScalarType t, std::uint8_t* out) {
  switch (t) {
    case ScalarType::u8: *out = 0; return true;
    case ScalarType::u16: *out = 1; return true;
    case ScalarType::u32: *out = 2; return true;
    case ScalarType::i32: *out = 3; return true;
    case ScalarType::u64: *out = 4; return true;
    case ScalarType::i64: *out = 5; return true;
    case ScalarType::f16: *out = 6; return true;
    case ScalarType::f32: *out = 7; return true;
    case ScalarType::f64: *out = 8; return true;
    case ScalarType::bf16: *out = 9; return true;
    default: return false;  // i8, i16: no CUDA type of that signedness; f8: none at all (u8 moves the bytes)
  }
}

// One of `names` (their index is the stored value), or the default when the key is absent.
std::uint8_t choice(TableReader& t, std::string_view key, std::initializer_list<const char*> names) {
  const toml::node* n = t.get(key);
  if (n == nullptr) return 0;
  std::string v = t.as_string(*n, key, std::string("\"") + *names.begin() + "\"");
  std::string list;
  std::uint8_t i = 0;
  for (const char* name : names) {
    if (v == name) return i;
    list += (list.empty() ? "" : ", ") + std::string(name);
    ++i;
  }
  t.fail_at(*n, "'" + std::string(key) + "' in " + t.where() + " must be one of " + list + ", found '" + v + "'");
}

const KernelParam& call_param(TableReader& t, const toml::node& at, const std::string& name, const KernelSpec& k,
                              std::uint16_t* index) {
  for (std::size_t i = 0; i < k.params.size(); ++i) {
    if (k.params[i].name == name) {
      *index = static_cast<std::uint16_t>(i);
      return k.params[i];
    }
  }
  std::string known;
  for (const KernelParam& p : k.params) known += (known.empty() ? "" : ", ") + p.name;
  t.fail_at(at, "'" + name + "' in " + t.where() + " is not a parameter of kernel '" + k.name + "' (params: " +
                    (known.empty() ? "none" : known) + ")");
}

// An integer or an expression: the integer within [lo, hi] and, when `multiple` > 1, a
// multiple of it.
ExprCode int_or_expr(TableReader& t, const toml::node& n, const std::string& what, const KernelSpec& k, std::int64_t lo,
                     std::int64_t hi, std::int64_t multiple = 1) {
  if (n.is_string()) return expression(t, n, what, ExprKind::integer, k);
  std::int64_t v = t.integer(n, what, lo, hi);
  if (v % multiple != 0) t.fail_at(n, what + " in " + t.where() + " must be a multiple of " + std::to_string(multiple) + ", found " + std::to_string(v));
  return constant_expr(v);
}

std::vector<std::uint32_t> small_ints(TableReader& t, const toml::node& n, const std::string& key, std::size_t count,
                                      std::int64_t lo, std::int64_t hi) {
  const toml::array& a = t.array(n, key, std::to_string(count) + " integers");
  if (a.size() != count) {
    t.fail_at(n, "'" + key + "' in " + t.where() + " must have " + std::to_string(count) + " elements (one per dimension), found " + std::to_string(a.size()));
  }
  std::vector<std::uint32_t> out;
  for (const toml::node& e : a) out.push_back(static_cast<std::uint32_t>(t.integer(e, key, lo, hi)));
  return out;
}

TensorMapRecipe parse_tensor_map(TableReader& kt, const toml::node& n, const std::string& arg, const KernelSpec& k) {
  TableReader t(kt.file(), kt.table(n, "tensor_map"), "tensor_map of kernel_args entry '" + arg + "'");
  TensorMapRecipe r;
  const toml::node& pn = t.require("pointer", "the name of the pointer parameter the map describes");
  const KernelParam& pointer = call_param(t, pn, t.as_string(pn, "pointer", "\"A\""), k, &r.pointer);
  if (!pointer.is_pointer) t.fail_at(pn, "'pointer' in " + t.where() + " names '" + pointer.name + "', which is not a pointer parameter");
  std::size_t pointee = scalar_type_size(pointer.type);
  if (const toml::node* dn = t.get("dtype")) {
    std::string d = t.as_string(*dn, "dtype", "\"f16\"");
    std::uint8_t i = 0;
    while (i < kTensorMapDtypeCount && d != kTensorMapDtypes[i].name) ++i;
    if (i == kTensorMapDtypeCount) {
      t.fail_at(*dn, "'dtype' in " + t.where() + " must be one of u8, u16, u32, i32, u64, i64, f16, f32, f64, bf16, f32_ftz, tf32, tf32_ftz; found '" + d + "'");
    }
    if (kTensorMapDtypes[i].size != pointee) {
      t.fail_at(*dn, "'dtype' " + d + " in " + t.where() + " has " + std::to_string(kTensorMapDtypes[i].size) +
                         "-byte elements but '" + pointer.name + "' points at " + scalar_type_name(pointer.type));
    }
    r.dtype = i;
  } else if (!default_tensor_map_dtype(pointer.type, &r.dtype)) {
    t.fail_at(pn, t.where() + " needs 'dtype': '" + pointer.name + "' points at " + scalar_type_name(pointer.type) +
                      ", which no tensor map type matches by name (u8 describes i8 bytes)");
  }
  const toml::node& dims = t.require("dims", "1 to 5 sizes, innermost first, such as [\"k\", \"m\"]");
  const toml::array& da = t.array(dims, "dims", "integers or expressions");
  if (da.empty() || da.size() > 5) t.fail_at(dims, "'dims' in " + t.where() + " must have 1 to 5 elements, found " + std::to_string(da.size()));
  const std::size_t rank = da.size();
  for (std::size_t i = 0; i < rank; ++i) r.dims.push_back(int_or_expr(t, da[i], "dims[" + std::to_string(i) + "]", k, 1, kMaxTensorDim));
  const toml::node* sn = t.get("strides");
  if (sn == nullptr && rank > 1) t.fail_at(n, t.where() + " is missing 'strides' (the byte strides of dimensions 1.." + std::to_string(rank - 1) + ")");
  if (sn != nullptr) {
    const toml::array& sa = t.array(*sn, "strides", "integers or expressions");
    if (sa.size() != rank - 1) {
      t.fail_at(*sn, "'strides' in " + t.where() + " must have " + std::to_string(rank - 1) + " elements (dimension 0 is contiguous), found " + std::to_string(sa.size()));
    }
    for (std::size_t i = 0; i < sa.size(); ++i) {
      r.strides.push_back(int_or_expr(t, sa[i], "strides[" + std::to_string(i) + "]", k, 16, kMaxTensorStride - 1, 16));
    }
  }
  r.box = small_ints(t, t.require("box", "the tile's size per dimension, such as [64, 128]"), "box", rank, 1, 256);
  if (const toml::node* en = t.get("element_strides")) r.element_strides = small_ints(t, *en, "element_strides", rank, 1, 8);
  else r.element_strides.assign(rank, 1);
  r.interleave = choice(t, "interleave", {"none", "16B", "32B"});
  r.swizzle = choice(t, "swizzle", {"none", "32B", "64B", "128B"});
  r.l2_promotion = choice(t, "l2_promotion", {"none", "64B", "128B", "256B"});
  r.oob_fill = choice(t, "oob_fill", {"zero", "nan"});
  t.no_unknown_keys("pointer, dtype, dims, strides, box, element_strides, interleave, swizzle, l2_promotion, oob_fill");
  // cuTensorMapEncodeTiled's own rules, where they need no call.
  std::size_t inner = r.box[0] * tensor_map_dtype_size(r.dtype);
  if (r.interleave != 0 && rank < 3) t.fail_at(n, t.where() + ": an interleaved tensor map needs rank 3 or more, this one has " + std::to_string(rank));
  if (r.interleave == 0 && inner % 16 != 0) {
    t.fail_at(n, t.where() + ": box[0] spans " + std::to_string(inner) + " bytes, which must be a multiple of 16");
  }
  if (r.interleave == 0 && r.swizzle != 0 && inner > (16u << r.swizzle)) {
    t.fail_at(n, t.where() + ": box[0] spans " + std::to_string(inner) + " bytes, more than the " +
                     std::to_string(16u << r.swizzle) + "-byte swizzle span");
  }
  return r;
}

ScratchSpec parse_scratch(TableReader& kt, const toml::node& n, const std::string& arg, const KernelSpec& k) {
  TableReader t(kt.file(), kt.table(n, "scratch"), "scratch of kernel_args entry '" + arg + "'");
  ScratchSpec s;
  s.bytes = int_or_expr(t, t.require("bytes", "the bytes each program (block) needs, an integer or an expression"), "bytes",
                        k, 0, 0x7fffffff);
  if (const toml::node* an = t.get("align")) {
    std::int64_t a = t.integer(*an, "align", 1, 4096);
    if ((a & (a - 1)) != 0) t.fail_at(*an, "'align' in " + t.where() + " must be a power of two, found " + std::to_string(a));
    s.align = static_cast<std::uint32_t>(a);
  }
  s.per_program = choice(t, "per", {"program", "launch"}) == 0;
  t.no_unknown_keys("bytes, align, per");
  return s;
}

KernelArg parse_kernel_arg(TableReader& kt, const toml::node& n, std::size_t i, const KernelSpec& k) {
  std::string where = kt.where() + " kernel_args[" + std::to_string(i) + "]";
  KernelArg a;
  a.pos = pos_of(n);
  if (n.is_string()) {  // "c": the call's parameter, as is
    a.name = std::string(*n.value<std::string_view>());
    call_param(kt, n, a.name, k, &a.param);
    return a;
  }
  if (!n.is_table()) kt.fail_at(n, where + " must be a parameter's name or a table such as { name = \"a_desc\", tensor_map = { ... } }");
  TableReader t(kt.file(), *n.as_table(), where);
  a.name = identifier(t, "name", "\"a_desc\"");
  const toml::node* tm = t.get("tensor_map");
  const toml::node* sc = t.get("scratch");
  const toml::node* vn = t.get("value");
  const toml::node* ty = t.get("type");
  if ((tm != nullptr) + (sc != nullptr) + (vn != nullptr) > 1) {
    t.fail_at(n, where + " gives more than one of tensor_map, scratch and value");
  }
  if (tm != nullptr) {
    a.kind = KernelArgKind::tensor_map;
    a.tensor_map = parse_tensor_map(t, *tm, a.name, k);
  } else if (sc != nullptr) {
    a.kind = KernelArgKind::scratch;
    a.scratch = parse_scratch(t, *sc, a.name, k);
  } else if (vn != nullptr) {
    a.kind = KernelArgKind::value;
    if (ty == nullptr) t.fail_at(n, where + " computes a value and needs its 'type' (an integer type such as \"i64\")");
    std::string type = t.as_string(*ty, "type", "\"i64\"");
    if (!parse_scalar_type(type, &a.type) || static_cast<int>(a.type) > static_cast<int>(ScalarType::u64)) {
      t.fail_at(*ty, "'type' in " + where + " must be an integer type (i8 i16 i32 i64 u8 u16 u32 u64), found '" + type + "'");
    }
    if (vn->is_string()) {
      a.value = expression(t, *vn, "value", ExprKind::integer, k);
    } else {
      std::int64_t lo = 0, hi = 0;
      scalar_type_bounds(a.type, &lo, &hi);
      a.value = constant_expr(t.integer(*vn, "value", lo, hi));
    }
  } else {
    call_param(t, t.require("name", ""), a.name, k, &a.param);
  }
  if (a.kind != KernelArgKind::value && ty != nullptr) t.fail_at(*ty, "'type' in " + where + " is only for a computed value");
  t.no_unknown_keys("name, tensor_map, scratch, value, type");
  return a;
}

}  // namespace

std::vector<KernelArg> parse_kernel_args(TableReader& kt, const toml::node& n, const KernelSpec& k) {
  const toml::array& a = kt.array(n, "kernel_args", "parameter names or tables");
  if (a.empty()) kt.fail_at(n, "'kernel_args' of " + kt.where() + " is empty; leave it out when the kernel takes params as they are");
  if (a.size() > kMaxKernelArgs) {
    kt.fail_at(n, "'kernel_args' of " + kt.where() + " has " + std::to_string(a.size()) + " entries; at most " + std::to_string(kMaxKernelArgs) + " are allowed");
  }
  std::vector<KernelArg> out;
  std::set<std::string> names;
  std::size_t maps = 0, scratch = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    KernelArg arg = parse_kernel_arg(kt, a[i], i, k);
    if (!names.insert(arg.name).second) kt.fail_at(a[i], "kernel_args entry '" + arg.name + "' appears twice in " + kt.where());
    if (arg.kind != KernelArgKind::param) {
      for (const KernelParam& p : k.params) {
        if (p.name == arg.name) kt.fail_at(a[i], "kernel_args entry '" + arg.name + "' of " + kt.where() + " has the name of a call parameter; name what libkiln builds differently");
      }
    }
    maps += arg.kind == KernelArgKind::tensor_map;
    scratch += arg.kind == KernelArgKind::scratch;
    if (maps > kMaxTensorMaps) kt.fail_at(a[i], kt.where() + " has more than " + std::to_string(kMaxTensorMaps) + " tensor maps");
    if (scratch > kMaxScratchArgs) kt.fail_at(a[i], kt.where() + " has more than " + std::to_string(kMaxScratchArgs) + " scratch entries");
    out.push_back(std::move(arg));
  }
  return out;
}

void parse_cluster(TableReader& t, const toml::node* n, ShapeSpec* s) {
  if (n == nullptr) return;
  const toml::array& a = t.array(*n, "cluster", "1 to 3 positive integers such as [2, 1, 1]");
  if (a.empty() || a.size() > 3) t.fail_at(*n, "'cluster' in " + t.where() + " must have 1 to 3 elements, found " + std::to_string(a.size()));
  for (std::size_t i = 0; i < a.size(); ++i) s->cluster[i] = static_cast<std::uint32_t>(t.integer(a[i], "cluster", 1, kMaxClusterBlocks));
  std::uint64_t blocks = std::uint64_t{s->cluster[0]} * s->cluster[1] * s->cluster[2];
  if (blocks > kMaxClusterBlocks) {
    t.fail_at(*n, "'cluster' in " + t.where() + " has " + std::to_string(blocks) + " blocks; at most " + std::to_string(kMaxClusterBlocks) + " (the portable cluster size)");
  }
  s->has_cluster = true;
}

}  // namespace manifest_toml
}  // namespace kiln
