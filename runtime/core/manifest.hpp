// kiln.toml: what a package is, what built it, and for each kernel its code objects,
// parameters, supported shapes and fallback policy. schema/MANIFEST.md documents it.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/format.hpp"

namespace kiln {

struct SourcePos {
  std::uint32_t line = 0;
  std::uint32_t column = 0;
};

// The order is part of kiln/kernels.bin (each value is stored as its number); the C API maps
// each one to its kiln_dtype by name (api/kiln_api.cpp, dtype_of), not by position.
// The order is the archive's type code (FORMAT.md): append, never reorder.
enum class ScalarType { i8, i16, i32, i64, u8, u16, u32, u64, f16, bf16, f32, f64, f8e4m3, f8e5m2 };
constexpr ScalarType kLastScalarType = ScalarType::f8e5m2;
const char* scalar_type_name(ScalarType t);
// f16, bf16, f32, f64, f8e4m3, f8e5m2: not integers (no shape can fix one, no expression reads one).
bool is_float_type(ScalarType t);
std::size_t scalar_type_size(ScalarType t);
bool parse_scalar_type(const std::string& s, ScalarType* out);

enum class ParamAccess { read, write, read_write };
const char* param_access_name(ParamAccess a);

struct KernelParam {
  std::string name;
  bool is_pointer = false;
  ScalarType type = ScalarType::i32;  // the scalar's type, or the pointee's for a pointer
  ParamAccess access = ParamAccess::read;  // meaningful for pointers
};

struct FileRef {
  std::string path;  // relative to the manifest's directory, also the member's path
  SourcePos pos;
};

struct CodeObjectRef {
  std::string arch;  // what the author claims: sm_90a, compute_90, gfx90a:xnack+, ...
  FileRef file;
  SourcePos pos;
  // The code member's index entry as the kernel's record copies it (FORMAT.md §4.1, tables
  // marked KILNKTB3), so that the runtime reads the member without looking it up in the index;
  // unset for a reference read from kiln.toml or from an older table.
  std::optional<format::Entry> member;
};

// A compiled launch expression (runtime/core/shape_expr.hpp; FORMAT.md §4.1 "Expressions").
using ExprCode = std::vector<std::uint8_t>;

// An inclusive range of a scalar parameter in a range shape.
struct ShapeRange {
  std::string name;
  std::int64_t min = 0;
  std::int64_t max = 0;
};

struct ShapeSpec {
  std::string name;
  std::vector<std::pair<std::string, std::int64_t>> values;  // scalar parameters that fix the shape
  // A fixed shape (dynamic false) launches with grid, block and shared_mem. A range shape
  // (kiln.toml gives `ranges`, `where` or an expression string) matches any call whose values,
  // ranges and where conditions hold, and computes its launch from the *_code expressions.
  bool dynamic = false;
  std::array<std::uint32_t, 3> grid{1, 1, 1};
  std::array<std::uint32_t, 3> block{1, 1, 1};
  std::uint32_t shared_mem = 0;
  std::vector<ShapeRange> ranges;  // sorted by name, bytewise
  std::vector<ExprCode> where;     // conditions, all must hold
  std::array<ExprCode, 3> grid_code;
  std::array<ExprCode, 3> block_code;
  ExprCode shared_mem_code;
  // Thread block cluster dimensions (kiln.toml `cluster`); has_cluster false: a plain launch.
  bool has_cluster = false;
  std::array<std::uint32_t, 3> cluster{1, 1, 1};
  SourcePos pos;
};

// A CUtensorMap the runtime encodes at launch with cuTensorMapEncodeTiled (MANIFEST.md,
// kernel_args). The enumerations hold CUDA's values of the same names (cuda.h), so the recipe
// is passed to the driver as it is stored.
struct TensorMapRecipe {
  std::uint16_t pointer = 0;   // index of the call's pointer parameter: globalAddress
  std::uint8_t dtype = 0;      // CUtensorMapDataType: 0 u8 .. 12 tf32_ftz
  std::vector<ExprCode> dims;  // rank entries, innermost first: globalDim
  std::vector<ExprCode> strides;  // rank - 1 entries, bytes: globalStrides[0 .. rank-2]
  std::vector<std::uint32_t> box;              // boxDim, 1..256 each
  std::vector<std::uint32_t> element_strides;  // 1..8 each
  std::uint8_t interleave = 0;  // CUtensorMapInterleave: 0 none, 1 16B, 2 32B
  std::uint8_t swizzle = 0;     // CUtensorMapSwizzle: 0 none, 1 32B, 2 64B, 3 128B
  std::uint8_t l2_promotion = 0;  // CUtensorMapL2promotion: 0 none, 1 64B, 2 128B, 3 256B
  std::uint8_t oob_fill = 0;    // CUtensorMapFloatOOBfill: 0 zero (NONE), 1 NaN (NAN_REQUEST_ZERO_FMA)
};

// Scratch memory the runtime provides (MANIFEST.md, kernel_args).
struct ScratchSpec {
  ExprCode bytes;            // per program (per_program) or per launch
  std::uint32_t align = 256; // a power of two, 1..4096
  bool per_program = true;   // multiply by grid x * y * z
};

// One parameter of the kernel's code, built from the call at each launch.
enum class KernelArgKind : std::uint8_t { param = 0, value = 1, tensor_map = 2, scratch = 3 };

struct KernelArg {
  KernelArgKind kind = KernelArgKind::param;
  std::string name;
  std::uint16_t param = 0;               // param: index of the call's parameter passed as is
  ScalarType type = ScalarType::i64;     // value: an integer type
  ExprCode value;                        // value: the expression
  TensorMapRecipe tensor_map;            // tensor_map
  ScratchSpec scratch;                   // scratch
  SourcePos pos;
};

constexpr std::size_t kMaxKernelArgs = 256;
constexpr std::size_t kMaxTensorMaps = 16;
constexpr std::size_t kMaxScratchArgs = 4;
constexpr std::size_t kTensorMapBytes = 128;  // sizeof(CUtensorMap); libkiln aligns it to 128
constexpr std::uint32_t kMaxClusterBlocks = 8;  // the portable cluster size

const char* tensor_map_dtype_name(std::uint8_t dtype);  // "f16"; "?" when out of range
std::size_t tensor_map_dtype_size(std::uint8_t dtype);  // bytes per element; 0 when out of range

enum class FallbackPolicy { reference, refuse };

struct Tolerance {
  double rtol = 1e-5;
  double atol = 1e-6;
};

// A test vector: run the kernel at a declared shape on these inputs and compare the outputs.
struct TestSpec {
  std::string shape;  // a declared shape's name: its values give the scalar arguments
  // Scalar arguments the shape does not fix (a range shape's), checked against it at parse.
  std::vector<std::pair<std::string, std::int64_t>> values;
  // Floating-point scalar arguments (f32, f64: an epsilon, a softmax scale), which no shape fixes.
  std::vector<std::pair<std::string, double>> float_values;
  std::vector<std::pair<std::string, FileRef>> inputs;   // pointer parameter -> .npy
  std::vector<std::pair<std::string, FileRef>> outputs;  // pointer parameter -> expected .npy
  bool has_tolerance = false;
  Tolerance tolerance;  // overrides the kernel's when set; integer outputs are compared exactly
  SourcePos pos;
};

// A build of the kernel's code specialised for some calls (kiln.toml [[kernel.variant]]): a call
// that a shape matches launches the first variant whose conditions all hold, else the kernel's
// own code. A variant has exactly the kernel's code targets (`code`, in the kernel's order).
struct VariantSpec {
  std::string name;
  std::vector<ExprCode> when;       // conditions over integer scalars, all must hold
  std::vector<CodeObjectRef> code;  // code[i] is for the arch of the kernel's code[i]
  // The variant's own kernel parameters, when they differ from the kernel's (an argument a
  // compiler folded into this build as a constant, such as Triton's value 1); else the kernel's.
  bool has_kernel_args = false;
  std::vector<KernelArg> kernel_args;
  SourcePos pos;
};

constexpr std::size_t kMaxVariants = 64;
constexpr std::size_t kMaxVariantConditions = 16;

struct KernelSpec {
  std::string name;
  std::string entry;  // the symbol in the code objects
  std::string backend;  // "cuda" or "hip"
  FallbackPolicy fallback = FallbackPolicy::reference;
  std::vector<FileRef> sources;
  std::vector<FileRef> ir;
  std::vector<KernelParam> params;
  std::vector<CodeObjectRef> code;
  std::vector<ShapeSpec> shapes;
  // The kernel's own parameters when they are not `params` (kiln.toml kernel_args); empty: the
  // kernel takes the call's parameters as they are.
  std::vector<KernelArg> kernel_args;
  std::vector<VariantSpec> variants;  // in file order: the order calls try them
  Tolerance tolerance;
  std::vector<TestSpec> tests;  // from kiln.toml only; not in the binary kernel table
  SourcePos pos;
};

struct Manifest {
  std::string package;
  std::string kernel_revision;
  std::uint64_t sequence = 0;
  std::string description;
  std::vector<std::pair<std::string, std::string>> toolchain;  // in file order
  std::vector<KernelSpec> kernels;
  std::vector<FileRef> extra_files;  // [files] extra = [...]: stored with role "meta"

  const std::string* toolchain_value(const std::string& key) const;
};

// Parses and checks a manifest. Throws Errc::manifest with "NAME:LINE:COLUMN: message"
// saying what was expected there. The kernels are parsed on `threads` threads (the result and
// the error reported, the first in file order, do not depend on it).
Manifest parse_manifest(std::string_view text, const std::string& source_name, unsigned threads = 1);

}  // namespace kiln
