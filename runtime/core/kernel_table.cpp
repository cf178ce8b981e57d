#include "core/kernel_table.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <set>

#include "core/bytes.hpp"
#include "core/error.hpp"
#include "core/format.hpp"
#include "core/shape_expr.hpp"

namespace kiln {
namespace {

// KILNKTB3 marks a table whose records carry their code members' index entries; KILNKTB2 one
// whose records name their code by path alone (kiln before that; still read).
constexpr std::array<std::uint8_t, 8> kMagic = {'K', 'I', 'L', 'N', 'K', 'T', 'B', '2'};
constexpr std::array<std::uint8_t, 8> kMagicWithEntries = {'K', 'I', 'L', 'N', 'K', 'T', 'B', '3'};
constexpr std::uint32_t kMaxCount = 1u << 20;

std::uint64_t double_bits(double d) {
  std::uint64_t u;
  std::memcpy(&u, &d, 8);
  return u;
}
double bits_double(std::uint64_t u) {
  double d;
  std::memcpy(&d, &u, 8);
  return d;
}

// Bit 31 of a shape's value_count marks a range shape (FORMAT.md §4.1). kiln 0.2 readers see a
// count above 2^20 there and refuse the record, so they never misread one; fixed shapes keep
// their 0.2 bytes.
constexpr std::uint32_t kRangeShapeFlag = 0x80000000u;

void put_expr(ByteWriter& w, const ExprCode& code) {
  w.u16(static_cast<std::uint16_t>(code.size()));
  w.bytes(code.data(), code.size());
}

ExprCode get_expr(ByteReader& r, const std::vector<KernelParam>& params, ExprKind kind, const std::string& what) {
  std::uint16_t size = r.u16();
  if (size == 0 || size > kMaxExprCode) r.fail_here("bad expression size " + std::to_string(size) + " in " + what);
  ByteView bytes = r.take(size);
  ExprCode code(bytes.data, bytes.data + bytes.size);
  std::string problem = expr_code_problem(code, params, kind);
  if (!problem.empty()) r.fail_here(what + ": " + problem);
  return code;
}

void put_list(ByteWriter& w, const std::vector<FileRef>& files) {
  w.u32(static_cast<std::uint32_t>(files.size()));
  for (const FileRef& f : files) w.string16(f.path);
}

// A code reference: its arch, then its path, or (a KILNKTB3 table) the code member's index entry,
// which holds the path.
void put_code_ref(ByteWriter& w, const CodeObjectRef& c, const CodeEntryLookup* entries) {
  w.string16(c.arch);
  if (entries == nullptr) {
    w.string16(c.file.path);
    return;
  }
  const format::Entry& e = (*entries)(c.file.path);
  if (e.path != c.file.path) fail(Errc::internal, "the entry given for '" + c.file.path + "' is '" + e.path + "'");
  format::encode_entry(w, e);
}

void get_code_ref(ByteReader& r, CodeObjectRef& c, bool with_entry, std::size_t position) {
  c.arch = r.string16();
  if (!with_entry) {
    c.file.path = r.string16();
    return;
  }
  format::Entry e = format::decode_entry(r, position, "code entry");
  // What a reader of the copy relies on beyond one entry's own rules: it is a code member's, at a
  // member's offset (after the header, 64-aligned). Whether it equals the index's entry for that
  // path is full verification's (the table is derived again from kiln.toml and the index).
  if (e.role != format::Role::code) r.fail_here("code entry " + std::to_string(position) + " ('" + e.path + "'): not a code member's entry");
  if (e.offset < format::kHeaderSize || e.offset % format::kMemberAlignment != 0) {
    r.fail_here("code entry " + std::to_string(position) + " ('" + e.path + "'): offset " + std::to_string(e.offset) +
                " is not a member's (64-aligned, after the header)");
  }
  c.file.path = e.path;
  c.member = std::move(e);
}

// kernel_args entries: the count, then each entry (FORMAT.md §4.1, the launch extension).
void put_kernel_args(ByteWriter& w, const std::vector<KernelArg>& args) {
  w.u32(static_cast<std::uint32_t>(args.size()));
  for (const KernelArg& a : args) {
    w.u8(static_cast<std::uint8_t>(a.kind));
    w.string16(a.name);
    switch (a.kind) {
      case KernelArgKind::param: w.u16(a.param); break;
      case KernelArgKind::value:
        w.u8(static_cast<std::uint8_t>(a.type));
        put_expr(w, a.value);
        break;
      case KernelArgKind::tensor_map: {
        const TensorMapRecipe& r = a.tensor_map;
        w.u16(r.pointer);
        w.u8(r.dtype);
        w.u8(static_cast<std::uint8_t>(r.dims.size()));
        for (const ExprCode& c : r.dims) put_expr(w, c);
        for (const ExprCode& c : r.strides) put_expr(w, c);
        for (std::uint32_t v : r.box) w.u32(v);
        for (std::uint32_t v : r.element_strides) w.u32(v);
        w.u8(r.interleave);
        w.u8(r.swizzle);
        w.u8(r.l2_promotion);
        w.u8(r.oob_fill);
        break;
      }
      case KernelArgKind::scratch:
        put_expr(w, a.scratch.bytes);
        w.u32(a.scratch.align);
        w.u8(a.scratch.per_program ? 0 : 1);
        break;
    }
  }
}

// The launch extension (FORMAT.md §4.1): kernel_args and shape clusters, after the tolerance,
// then the variants. Written only when the kernel has any of them, so every other record keeps
// its 0.2 bytes; a reader without it refuses the record ("trailing bytes") rather than launching
// it without them.
void put_launch_extension(ByteWriter& w, const KernelSpec& k, const CodeEntryLookup* entries) {
  std::uint32_t clusters = 0;
  for (const ShapeSpec& s : k.shapes) clusters += s.has_cluster ? 1 : 0;
  if (k.kernel_args.empty() && clusters == 0 && k.variants.empty()) return;
  put_kernel_args(w, k.kernel_args);
  w.u32(clusters);
  for (std::size_t i = 0; i < k.shapes.size(); ++i) {
    const ShapeSpec& s = k.shapes[i];
    if (!s.has_cluster) continue;
    w.u32(static_cast<std::uint32_t>(i));
    for (std::uint32_t v : s.cluster) w.u32(v);
  }
  if (k.variants.empty()) return;
  w.u32(static_cast<std::uint32_t>(k.variants.size()));
  for (const VariantSpec& v : k.variants) {
    w.string16(v.name);
    w.u32(static_cast<std::uint32_t>(v.when.size()));
    for (const ExprCode& c : v.when) put_expr(w, c);
    w.u32(static_cast<std::uint32_t>(v.code.size()));
    for (const CodeObjectRef& c : v.code) put_code_ref(w, c, entries);
    w.u8(v.has_kernel_args ? 1 : 0);
    if (v.has_kernel_args) put_kernel_args(w, v.kernel_args);
  }
}


void get_tensor_map(ByteReader& r, KernelArg& a, const std::vector<KernelParam>& params, const std::string& what) {
  TensorMapRecipe& m = a.tensor_map;
  m.pointer = r.u16();
  if (m.pointer >= params.size() || !params[m.pointer].is_pointer) r.fail_here(what + ": 'pointer' is not a pointer parameter");
  m.dtype = r.u8();
  if (tensor_map_dtype_size(m.dtype) != scalar_type_size(params[m.pointer].type)) {
    r.fail_here(what + ": dtype " + std::to_string(m.dtype) + " does not describe the pointer's elements");
  }
  std::uint8_t rank = r.u8();
  if (rank < 1 || rank > 5) r.fail_here(what + ": bad rank " + std::to_string(rank));
  for (std::uint8_t d = 0; d < rank; ++d) m.dims.push_back(get_expr(r, params, ExprKind::integer, what + " dims"));
  for (std::uint8_t d = 1; d < rank; ++d) m.strides.push_back(get_expr(r, params, ExprKind::integer, what + " strides"));
  for (std::uint8_t d = 0; d < rank; ++d) {
    m.box.push_back(r.u32());
    if (m.box.back() < 1 || m.box.back() > 256) r.fail_here(what + ": bad box dimension");
  }
  for (std::uint8_t d = 0; d < rank; ++d) {
    m.element_strides.push_back(r.u32());
    if (m.element_strides.back() < 1 || m.element_strides.back() > 8) r.fail_here(what + ": bad element stride");
  }
  m.interleave = r.u8();
  m.swizzle = r.u8();
  m.l2_promotion = r.u8();
  m.oob_fill = r.u8();
  if (m.interleave > 2 || m.swizzle > 3 || m.l2_promotion > 3 || m.oob_fill > 1) r.fail_here(what + ": bad encode option");
}

// kernel_args entries, as put_kernel_args writes them; the count is returned (0 allowed here).
std::uint32_t get_kernel_args(ByteReader& r, const KernelSpec& k, std::vector<KernelArg>* out) {
  std::uint32_t args = r.u32();
  if (args > kMaxKernelArgs) r.fail_here("bad kernel_args count");
  std::size_t maps = 0, scratch = 0;
  for (std::uint32_t i = 0; i < args; ++i) {
    KernelArg a;
    std::uint8_t kind = r.u8();
    if (kind > static_cast<std::uint8_t>(KernelArgKind::scratch)) r.fail_here("bad kernel_args kind " + std::to_string(kind));
    a.kind = static_cast<KernelArgKind>(kind);
    a.name = r.string16();
    std::string what = "kernel_args entry '" + a.name + "'";
    switch (a.kind) {
      case KernelArgKind::param:
        a.param = r.u16();
        if (a.param >= k.params.size()) r.fail_here(what + ": no such parameter");
        break;
      case KernelArgKind::value: {
        std::uint8_t type = r.u8();
        if (type > static_cast<std::uint8_t>(ScalarType::u64)) r.fail_here(what + ": not an integer type");
        a.type = static_cast<ScalarType>(type);
        a.value = get_expr(r, k.params, ExprKind::integer, what);
        break;
      }
      case KernelArgKind::tensor_map:
        get_tensor_map(r, a, k.params, what);
        ++maps;
        break;
      case KernelArgKind::scratch: {
        a.scratch.bytes = get_expr(r, k.params, ExprKind::integer, what);
        a.scratch.align = r.u32();
        std::uint8_t per = r.u8();
        if (a.scratch.align < 1 || a.scratch.align > 4096 || (a.scratch.align & (a.scratch.align - 1)) != 0 || per > 1) {
          r.fail_here(what + ": bad alignment or 'per'");
        }
        a.scratch.per_program = per == 0;
        ++scratch;
        break;
      }
    }
    out->push_back(std::move(a));
  }
  if (maps > kMaxTensorMaps || scratch > kMaxScratchArgs) r.fail_here("too many tensor maps or scratch entries");
  return args;
}

void get_variants(ByteReader& r, KernelSpec& k, bool with_entries) {
  std::uint32_t variants = r.u32();
  if (variants == 0 || variants > kMaxVariants) r.fail_here("bad variant count " + std::to_string(variants));
  std::set<std::string> names;
  for (std::uint32_t i = 0; i < variants; ++i) {
    VariantSpec v;
    v.name = r.string16();
    if (v.name.empty() || !names.insert(v.name).second) r.fail_here("bad or repeated variant name '" + v.name + "'");
    std::string what = "variant '" + v.name + "'";
    std::uint32_t conditions = r.u32();
    if (conditions == 0 || conditions > kMaxVariantConditions) r.fail_here(what + ": bad condition count");
    for (std::uint32_t c = 0; c < conditions; ++c) v.when.push_back(get_expr(r, k.params, ExprKind::condition, what + " when"));
    std::uint32_t code = r.u32();
    if (code != k.code.size()) r.fail_here(what + ": " + std::to_string(code) + " code entries for the kernel's " + std::to_string(k.code.size()));
    v.code.resize(code);
    for (std::size_t c = 0; c < v.code.size(); ++c) {
      get_code_ref(r, v.code[c], with_entries, c);
      if (v.code[c].arch != k.code[c].arch) r.fail_here(what + ": code entry " + std::to_string(c) + " is for '" + v.code[c].arch + "', the kernel's for '" + k.code[c].arch + "'");
    }
    std::uint8_t own = r.u8();
    if (own > 1) r.fail_here(what + ": bad kernel_args flag");
    if (own == 1 && get_kernel_args(r, k, &v.kernel_args) == 0) r.fail_here(what + ": empty kernel_args (a writer gives the flag 0)");
    v.has_kernel_args = own == 1;
    k.variants.push_back(std::move(v));
  }
}

void get_launch_extension(ByteReader& r, KernelSpec& k, bool with_entries) {
  std::uint32_t args = get_kernel_args(r, k, &k.kernel_args);
  std::uint32_t clusters = r.u32();
  if (clusters > k.shapes.size()) r.fail_here("bad cluster count");
  // Variants follow the clusters; without them, an empty extension is one a writer leaves out.
  if (args == 0 && clusters == 0 && r.remaining() == 0) r.fail_here("an empty launch extension (a writer leaves it out)");
  long previous = -1;
  for (std::uint32_t i = 0; i < clusters; ++i) {
    std::uint32_t shape = r.u32();
    if (static_cast<long>(shape) <= previous || shape >= k.shapes.size()) r.fail_here("bad cluster shape index");
    previous = shape;
    ShapeSpec& s = k.shapes[shape];
    for (std::uint32_t& v : s.cluster) v = r.u32();
    std::uint64_t blocks = std::uint64_t{s.cluster[0]} * s.cluster[1] * s.cluster[2];
    if (s.cluster[0] == 0 || s.cluster[1] == 0 || s.cluster[2] == 0 || blocks > kMaxClusterBlocks) {
      r.fail_here("bad cluster of shape '" + s.name + "'");
    }
    s.has_cluster = true;
  }
  if (r.remaining() != 0) get_variants(r, k, with_entries);
}

std::vector<std::uint8_t> encode_record(const KernelSpec& k, const CodeEntryLookup* entries) {
  ByteWriter w;
  w.string16(k.entry);
  w.string16(k.backend);
  w.u8(k.fallback == FallbackPolicy::reference ? 0 : 1);
  put_list(w, k.sources);
  put_list(w, k.ir);
  w.u32(static_cast<std::uint32_t>(k.params.size()));
  for (const KernelParam& p : k.params) {
    w.string16(p.name);
    w.u8(p.is_pointer ? 1 : 0);
    w.u8(static_cast<std::uint8_t>(p.type));
    w.u8(static_cast<std::uint8_t>(p.access));
  }
  w.u32(static_cast<std::uint32_t>(k.code.size()));
  for (const CodeObjectRef& c : k.code) put_code_ref(w, c, entries);
  w.u32(static_cast<std::uint32_t>(k.shapes.size()));
  for (const ShapeSpec& s : k.shapes) {
    w.string16(s.name);
    w.u32(static_cast<std::uint32_t>(s.values.size()) | (s.dynamic ? kRangeShapeFlag : 0));
    for (const auto& [name, value] : s.values) {
      w.string16(name);
      w.u64(static_cast<std::uint64_t>(value));
    }
    if (!s.dynamic) {
      for (std::uint32_t v : s.grid) w.u32(v);
      for (std::uint32_t v : s.block) w.u32(v);
      w.u32(s.shared_mem);
      continue;
    }
    w.u32(static_cast<std::uint32_t>(s.ranges.size()));
    for (const ShapeRange& r : s.ranges) {
      w.string16(r.name);
      w.u64(static_cast<std::uint64_t>(r.min));
      w.u64(static_cast<std::uint64_t>(r.max));
    }
    w.u32(static_cast<std::uint32_t>(s.where.size()));
    for (const ExprCode& c : s.where) put_expr(w, c);
    for (const ExprCode& c : s.grid_code) put_expr(w, c);
    for (const ExprCode& c : s.block_code) put_expr(w, c);
    put_expr(w, s.shared_mem_code);
  }
  w.u64(double_bits(k.tolerance.rtol));
  w.u64(double_bits(k.tolerance.atol));
  put_launch_extension(w, k, entries);
  return std::move(w.buffer());
}

std::uint32_t checked_count(ByteReader& r, std::uint32_t n, const char* what) {
  // Every listed item takes at least two bytes, so a count the bytes cannot hold is refused
  // before anything is reserved for it.
  if (n > kMaxCount || static_cast<std::uint64_t>(n) * 2 > r.remaining()) r.fail_here(std::string("bad ") + what + " count");
  return n;
}

std::uint32_t count(ByteReader& r, const char* what) { return checked_count(r, r.u32(), what); }

std::vector<FileRef> get_list(ByteReader& r, const char* what) {
  std::vector<FileRef> out(count(r, what));
  for (FileRef& f : out) f.path = r.string16();
  return out;
}

}  // namespace

std::vector<std::uint8_t> encode_kernel_table_head(const Manifest& m, bool code_entries) {
  ByteWriter w;
  const auto& magic = code_entries ? kMagicWithEntries : kMagic;
  w.bytes(magic.data(), magic.size());
  w.string16(m.package);
  w.string16(m.kernel_revision);
  w.u64(m.sequence);
  w.u32(static_cast<std::uint32_t>(m.toolchain.size()));
  for (const auto& [key, value] : m.toolchain) {
    w.string16(key);
    w.string16(value);
  }
  w.u32(static_cast<std::uint32_t>(m.kernels.size()));
  return std::move(w.buffer());
}

std::vector<std::uint8_t> encode_kernel_record(const KernelSpec& k, const CodeEntryLookup* entries) {
  return encode_record(k, entries);
}

std::vector<KernelTableMember> encode_kernel_table(const Manifest& m, const CodeEntryLookup* entries) {
  std::vector<const KernelSpec*> kernels;
  kernels.reserve(m.kernels.size());
  for (const KernelSpec& k : m.kernels) kernels.push_back(&k);
  std::sort(kernels.begin(), kernels.end(), [](const KernelSpec* a, const KernelSpec* b) { return a->name < b->name; });
  std::vector<KernelTableMember> out;
  out.reserve(kernels.size() + 1);
  out.push_back({kKernelTablePath, encode_kernel_table_head(m, entries != nullptr)});
  for (const KernelSpec* k : kernels) out.push_back({kernel_record_path(k->name), encode_record(*k, entries)});
  return out;
}

KernelTable KernelTable::decode(ByteView bytes, const char* what) {
  KernelTable t;
  ByteReader r(bytes, what);
  ByteView magic = r.take(8);
  t.code_entries_ = std::memcmp(magic.data, kMagicWithEntries.data(), 8) == 0;
  if (!t.code_entries_ && std::memcmp(magic.data, kMagic.data(), 8) != 0) {
    r.fail_here("bad magic: not a kiln kernel table (KILNKTB2 or KILNKTB3)");
  }
  t.package_ = r.string16();
  t.revision_ = r.string16();
  t.sequence_ = r.u64();
  std::uint32_t tools = count(r, "toolchain");
  for (std::uint32_t i = 0; i < tools; ++i) {
    std::string key = r.string16();
    t.toolchain_.emplace_back(key, r.string16());
  }
  t.kernel_count_ = r.u32();
  if (t.kernel_count_ > kMaxCount) r.fail_here("bad kernel count");
  if (r.remaining() != 0) r.fail_here("trailing bytes after the kernel count");
  return t;
}

const std::string* KernelTable::toolchain_value(const std::string& key) const {
  for (const auto& kv : toolchain_) {
    if (kv.first == key) return &kv.second;
  }
  return nullptr;
}

KernelSpec decode_kernel_record(ByteView bytes, const std::string& name, const std::string& what, bool code_entries) {
  ByteReader r = ByteReader::borrowing(bytes, what);
  bool identifier = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0]));
  for (char c : name) identifier = identifier && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
  if (!identifier) r.fail_here("kernel name '" + name + "' is not an identifier");
  KernelSpec k;
  k.name = name;
  k.entry = r.string16();
  k.backend = r.string16();
  std::uint8_t fallback = r.u8();
  if (fallback > 1) r.fail_here("bad fallback");
  k.fallback = fallback == 0 ? FallbackPolicy::reference : FallbackPolicy::refuse;
  k.sources = get_list(r, "source");
  k.ir = get_list(r, "ir");
  k.params.resize(count(r, "param"));
  for (KernelParam& p : k.params) {
    p.name = r.string16();
    std::uint8_t is_pointer = r.u8(), type = r.u8(), access = r.u8();
    if (is_pointer > 1 || type > static_cast<std::uint8_t>(kLastScalarType) || access > 2) r.fail_here("bad parameter");
    p.is_pointer = is_pointer == 1;
    p.type = static_cast<ScalarType>(type);
    p.access = static_cast<ParamAccess>(access);
  }
  k.code.resize(count(r, "code"));
  for (std::size_t c = 0; c < k.code.size(); ++c) get_code_ref(r, k.code[c], code_entries, c);
  k.shapes.resize(count(r, "shape"));
  for (ShapeSpec& s : k.shapes) {
    s.name = r.string16();
    std::uint32_t word = r.u32();
    s.dynamic = (word & kRangeShapeFlag) != 0;
    std::uint32_t values = checked_count(r, word & ~kRangeShapeFlag, "value");
    for (std::uint32_t v = 0; v < values; ++v) {
      std::string value_name = r.string16();
      s.values.emplace_back(value_name, static_cast<std::int64_t>(r.u64()));
    }
    if (!s.dynamic) {
      for (std::uint32_t& v : s.grid) v = r.u32();
      for (std::uint32_t& v : s.block) v = r.u32();
      s.shared_mem = r.u32();
      continue;
    }
    std::string where = "shape '" + s.name + "'";
    s.ranges.resize(count(r, "range"));
    for (ShapeRange& range : s.ranges) {
      range.name = r.string16();
      range.min = static_cast<std::int64_t>(r.u64());
      range.max = static_cast<std::int64_t>(r.u64());
      bool known = false;
      for (const KernelParam& p : k.params) {
        known = known || (p.name == range.name && !p.is_pointer && static_cast<int>(p.type) <= static_cast<int>(ScalarType::u64));
      }
      if (!known || range.min > range.max) r.fail_here("bad range '" + range.name + "' in " + where);
    }
    s.where.resize(count(r, "where"));
    for (ExprCode& c : s.where) c = get_expr(r, k.params, ExprKind::condition, where + " where");
    for (ExprCode& c : s.grid_code) c = get_expr(r, k.params, ExprKind::integer, where + " grid");
    for (ExprCode& c : s.block_code) c = get_expr(r, k.params, ExprKind::integer, where + " block");
    s.shared_mem_code = get_expr(r, k.params, ExprKind::integer, where + " shared_mem");
  }
  k.tolerance.rtol = bits_double(r.u64());
  k.tolerance.atol = bits_double(r.u64());
  if (r.remaining() != 0) get_launch_extension(r, k, code_entries);
  if (r.remaining() != 0) r.fail_here("trailing bytes in the kernel record");
  return k;
}

}  // namespace kiln
