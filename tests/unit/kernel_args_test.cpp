// kernel_args and shape clusters: what kiln.toml may say (each refusal at its line and column),
// how the kernel record stores it (round trip, canonical bytes, hostile records refused), and
// the CUDA rules that decide at resolution whether a device can launch it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/kernel_table.hpp"
#include "core/manifest.hpp"
#include "core/shape_program.hpp"
#include "cuda/cuda_features.hpp"
#include "test_support.hpp"

namespace {

using namespace kiln;

// Line numbers below count from this text's first line.
const char* kTma = R"TOML([package]
name = "tma"
kernel_revision = "1"
sequence = 1

[[kernel]]
name = "mm"
entry = "mm_kernel"
backend = "cuda"
params = [
  { name = "a", type = "ptr", dtype = "f16", access = "read" },
  { name = "c", type = "ptr", dtype = "f16", access = "write" },
  { name = "m", type = "i32" },
  { name = "k", type = "i32" },
  { name = "q", type = "i8" },
]
kernel_args = [
  { name = "a_desc", tensor_map = { pointer = "a", dims = ["k", "m"], strides = ["k * 2"], box = [64, 128], swizzle = "128B", l2_promotion = "256B" } },
  "c",
  { name = "lda", type = "i64", value = "k" },
  { name = "ws", scratch = { bytes = 1024, align = 128 } },
  "m",
]
code = [{ arch = "sm_90a", file = "mm.cubin" }]

[[kernel.shape]]
name = "fixed"
values = { m = 256, k = 256 }
grid = [4, 2, 1]
block = [128]
cluster = [2, 1, 1]

[[kernel.shape]]
name = "any_m"
ranges = { m = [1, 8192] }
values = { k = 256 }
grid = ["2 * cdiv(m, 128)", 1, 1]
block = [128]
cluster = [2]
)TOML";

TEST(KernelArgs, ParsesEveryKindOfEntry) {
  Manifest m = test::parse_kiln_toml(kTma);
  const KernelSpec& k = m.kernels[0];
  ASSERT_EQ(k.kernel_args.size(), 5u);
  const KernelArg& map = k.kernel_args[0];
  EXPECT_EQ(map.kind, KernelArgKind::tensor_map);
  EXPECT_EQ(map.tensor_map.pointer, 0);
  EXPECT_EQ(map.tensor_map.dtype, 6);  // CU_TENSOR_MAP_DATA_TYPE_FLOAT16, from a's dtype
  EXPECT_EQ(map.tensor_map.dims.size(), 2u);
  EXPECT_EQ(map.tensor_map.strides.size(), 1u);
  EXPECT_EQ(map.tensor_map.box, (std::vector<std::uint32_t>{64, 128}));
  EXPECT_EQ(map.tensor_map.element_strides, (std::vector<std::uint32_t>{1, 1}));
  EXPECT_EQ(map.tensor_map.swizzle, 3);
  EXPECT_EQ(map.tensor_map.l2_promotion, 3);
  EXPECT_EQ(map.tensor_map.oob_fill, 0);
  EXPECT_EQ(k.kernel_args[1].kind, KernelArgKind::param);
  EXPECT_EQ(k.kernel_args[1].param, 1);
  EXPECT_EQ(k.kernel_args[2].kind, KernelArgKind::value);
  EXPECT_EQ(k.kernel_args[2].type, ScalarType::i64);
  EXPECT_EQ(k.kernel_args[3].kind, KernelArgKind::scratch);
  EXPECT_EQ(k.kernel_args[3].scratch.align, 128u);
  EXPECT_TRUE(k.kernel_args[3].scratch.per_program);
  EXPECT_EQ(k.kernel_args[4].param, 2);
  EXPECT_TRUE(k.shapes[0].has_cluster);
  EXPECT_EQ(k.shapes[1].cluster, (std::array<std::uint32_t, 3>{2, 1, 1}));
}

TEST(KernelArgs, TheRecordRoundTripsAndOtherKernelsKeepTheirBytes) {
  Manifest m = test::parse_kiln_toml(kTma);
  std::vector<KernelTableMember> table = encode_kernel_table(m);
  KernelSpec back = decode_kernel_record(ByteView(table[1].content), "mm", "record");
  ASSERT_EQ(back.kernel_args.size(), 5u);
  EXPECT_EQ(back.kernel_args[0].tensor_map.dims, m.kernels[0].kernel_args[0].tensor_map.dims);
  EXPECT_EQ(back.kernel_args[3].scratch.bytes, m.kernels[0].kernel_args[3].scratch.bytes);
  EXPECT_TRUE(back.shapes[0].has_cluster && back.shapes[1].has_cluster);
  // Re-encoding the decoded record gives the same bytes (the canonical form).
  Manifest again = m;
  again.kernels[0].kernel_args = back.kernel_args;
  again.kernels[0].shapes = back.shapes;
  again.kernels[0].shapes[0].pos = m.kernels[0].shapes[0].pos;
  EXPECT_EQ(encode_kernel_table(again)[1].content, table[1].content);
  // Without kernel_args and clusters, the record ends at the tolerance, as kiln 0.2 wrote it.
  std::string plain = kTma;
  plain.erase(plain.find("kernel_args = ["), plain.find("code = [") - plain.find("kernel_args = ["));
  while (plain.find("cluster = ") != std::string::npos) {
    std::size_t at = plain.find("cluster = ");
    plain.erase(at, plain.find('\n', at) + 1 - at);
  }
  std::vector<std::uint8_t> bytes = encode_kernel_table(test::parse_kiln_toml(plain))[1].content;
  KernelSpec plain_back = decode_kernel_record(ByteView(bytes), "mm", "record");
  EXPECT_TRUE(plain_back.kernel_args.empty());
  EXPECT_LT(bytes.size(), table[1].content.size());
}

// A record with its launch extension changed byte by byte: every change is refused or decodes
// to something valid (never a crash); these particular ones must be refused.
TEST(KernelArgs, HostileExtensionsAreRefused) {
  std::vector<std::uint8_t> good = encode_kernel_table(test::parse_kiln_toml(kTma))[1].content;
  std::string plain = kTma;
  plain.erase(plain.find("kernel_args = ["), plain.find("code = [") - plain.find("kernel_args = ["));
  while (plain.find("cluster = ") != std::string::npos) {
    std::size_t at = plain.find("cluster = ");
    plain.erase(at, plain.find('\n', at) + 1 - at);
  }
  const std::size_t ext = encode_kernel_table(test::parse_kiln_toml(plain))[1].content.size();  // where the extension starts
  auto refused = [&](std::vector<std::uint8_t> bytes, const std::string& why) {
    try {
      decode_kernel_record(ByteView(bytes), "mm", "record");
      ADD_FAILURE() << "accepted: " << why;
    } catch (const Failure& e) {
      EXPECT_EQ(e.code(), Errc::malformed) << why;
    }
  };
  std::vector<std::uint8_t> bad = good;
  bad[ext + 4] = 9;  // the first entry's kind
  refused(bad, "an unknown kind");
  // An empty extension: zero entries and zero clusters.
  bad.assign(good.begin(), good.begin() + static_cast<long>(ext));
  for (int i = 0; i < 8; ++i) bad.push_back(0);
  refused(bad, "an empty extension");
  // Truncated anywhere inside the extension.
  for (std::size_t cut = ext + 1; cut < good.size(); cut += 7) {
    refused(std::vector<std::uint8_t>(good.begin(), good.begin() + static_cast<long>(cut)), "truncated at " + std::to_string(cut));
  }
  // Every single-byte change decodes or is refused with Errc::malformed.
  for (std::size_t i = ext; i < good.size(); ++i) {
    bad = good;
    bad[i] ^= 0x5a;
    try {
      decode_kernel_record(ByteView(bad), "mm", "record");
    } catch (const Failure& e) {
      EXPECT_EQ(e.code(), Errc::malformed) << "byte " << i;
    }
  }
}

TEST(KernelArgs, ARangeShapeMatchesOnlyGridsTheClusterDivides) {
  Manifest m = test::parse_kiln_toml(kTma);
  const KernelSpec& k = m.kernels[0];
  ShapeProgram any(k.shapes[1], k.params);
  std::uint64_t a = 0, c = 0;
  std::int32_t mm = 100, kk = 256;
  std::int8_t q = 0;
  void* args[] = {&a, &c, &mm, &kk, &q};
  ScalarType types[] = {ScalarType::f16, ScalarType::f16, ScalarType::i32, ScalarType::i32, ScalarType::i8};
  LaunchConfig launch;
  ASSERT_TRUE(any.match(ExprArgs{args, types}, &launch));
  EXPECT_EQ(launch.grid[0], 2u);
  EXPECT_EQ(launch.cluster[0], 2u);
  EXPECT_EQ(launch.cluster[1], 1u);
  ShapeProgram fixed(k.shapes[0], k.params);
  mm = 256;
  ASSERT_TRUE(fixed.match(ExprArgs{args, types}, &launch));
  EXPECT_TRUE(launch.has_cluster());
}

struct BadArgs {
  std::string find;
  std::string replace;
  std::string message;
};
void PrintTo(const BadArgs& c, std::ostream* os) { *os << "'" << c.replace << "'"; }

class KernelArgErrors : public ::testing::TestWithParam<BadArgs> {};

TEST_P(KernelArgErrors, NameFileLineColumnAndTheProblem) {
  const BadArgs& c = GetParam();
  std::string text = kTma;
  std::size_t at = text.find(c.find);
  ASSERT_NE(at, std::string::npos) << c.find;
  text.replace(at, c.find.size(), c.replace);
  try {
    test::parse_kiln_toml(text);
    FAIL() << "accepted: " << c.replace;
  } catch (const Failure& e) {
    EXPECT_EQ(e.code(), Errc::manifest);
    EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << "got: " << e.what();
  }
}

const char* kMap = "pointer = \"a\"";
const char* kBox = "box = [64, 128]";

INSTANTIATE_TEST_SUITE_P(
    Cases, KernelArgErrors,
    ::testing::Values(
        BadArgs{kMap, "pointer = \"z\"", "kiln.toml:18:47: 'z' in tensor_map of kernel_args entry 'a_desc' is not a parameter of kernel 'mm' (params: a, c, m, k, q)"},
        BadArgs{kMap, "pointer = \"m\"", "kiln.toml:18:47: 'pointer' in tensor_map of kernel_args entry 'a_desc' names 'm', which is not a pointer parameter"},
        BadArgs{kMap, "pointer = \"a\", dtype = \"f32\"", "'dtype' f32 in tensor_map of kernel_args entry 'a_desc' has 4-byte elements but 'a' points at f16"},
        BadArgs{kMap, "pointer = \"a\", dtype = \"f8\"", "'dtype' in tensor_map of kernel_args entry 'a_desc' must be one of u8, u16"},
        BadArgs{"dims = [\"k\", \"m\"]", "dims = []", "'dims' in tensor_map of kernel_args entry 'a_desc' must have 1 to 5 elements, found 0"},
        BadArgs{"dims = [\"k\", \"m\"]", "dims = [\"k\", \"m\", 1]", "'strides' in tensor_map of kernel_args entry 'a_desc' must have 2 elements (dimension 0 is contiguous), found 1"},
        BadArgs{"dims = [\"k\", \"m\"]", "dims = [\"k\", \"z\"]", "dims[1] in tensor_map of kernel_args entry 'a_desc' \"z\": unknown name 'z'"},
        BadArgs{"strides = [\"k * 2\"]", "strides = [24]", "strides[0] in tensor_map of kernel_args entry 'a_desc' must be a multiple of 16, found 24"},
        BadArgs{kBox, "box = [64]", "'box' in tensor_map of kernel_args entry 'a_desc' must have 2 elements (one per dimension), found 1"},
        BadArgs{kBox, "box = [64, 512]", "'box' in tensor_map of kernel_args entry 'a_desc' must be between 1 and 256, found 512"},
        BadArgs{kBox, "box = [4, 128]", "tensor_map of kernel_args entry 'a_desc': box[0] spans 8 bytes, which must be a multiple of 16"},
        BadArgs{kBox, "box = [128, 128]", "tensor_map of kernel_args entry 'a_desc': box[0] spans 256 bytes, more than the 128-byte swizzle span"},
        BadArgs{"swizzle = \"128B\"", "swizzle = \"256B\"", "'swizzle' in tensor_map of kernel_args entry 'a_desc' must be one of none, 32B, 64B, 128B, found '256B'"},
        BadArgs{"swizzle = \"128B\"", "swizzle = \"128B\", interleave = \"16B\"", "an interleaved tensor map needs rank 3 or more, this one has 2"},
        BadArgs{"swizzle = \"128B\"", "swizle = \"128B\"", "unknown key 'swizle' in tensor_map of kernel_args entry 'a_desc'"},
        BadArgs{"{ name = \"lda\", type = \"i64\", value = \"k\" }", "{ name = \"lda\", value = \"k\" }", "kernel_args[2] computes a value and needs its 'type'"},
        BadArgs{"{ name = \"lda\", type = \"i64\", value = \"k\" }", "{ name = \"lda\", type = \"f32\", value = \"k\" }", "'type' in kernel 'mm' kernel_args[2] must be an integer type"},
        BadArgs{"{ name = \"lda\", type = \"i64\", value = \"k\" }", "{ name = \"lda\", type = \"i8\", value = 300 }", "'value' in kernel 'mm' kernel_args[2] must be between -128 and 127, found 300"},
        BadArgs{"{ name = \"lda\", type = \"i64\", value = \"k\" }", "{ name = \"m\", type = \"i64\", value = \"k\" }", "kernel_args entry 'm' of kernel 'mm' has the name of a call parameter"},
        BadArgs{"\"c\",\n", "\"c\", \"c2\",\n", "kiln.toml:19:8: 'c2' in kernel 'mm' is not a parameter of kernel 'mm'"},
        BadArgs{"\"c\",\n", "\"m\",\n", "kernel_args entry 'm' appears twice in kernel 'mm'"},
        BadArgs{"{ name = \"ws\", scratch = { bytes = 1024, align = 128 } }", "{ name = \"ws\", scratch = { bytes = 1024, align = 96 } }", "'align' in scratch of kernel_args entry 'ws' must be a power of two, found 96"},
        BadArgs{"{ name = \"ws\", scratch = { bytes = 1024, align = 128 } }", "{ name = \"ws\", scratch = { bytes = 1024 }, value = \"k\", type = \"i32\" }", "kernel 'mm' kernel_args[3] gives more than one of tensor_map, scratch and value"},
        BadArgs{"{ name = \"ws\", scratch = { bytes = 1024, align = 128 } }", "{ name = \"ws\", scratch = { bytes = 1024, per = \"warp\" } }", "'per' in scratch of kernel_args entry 'ws' must be one of program, launch, found 'warp'"},
        BadArgs{"kernel_args = [", "kernel_args = []\nkernel_argz = [", "'kernel_args' of kernel 'mm' is empty"},
        BadArgs{"backend = \"cuda\"", "backend = \"hip\"", "kernel_args entry 'a_desc' of kernel 'mm' is a tensor_map entry, which needs backend = \"cuda\""},
        BadArgs{"cluster = [2, 1, 1]", "cluster = [4, 4, 1]", "kiln.toml:31:11: 'cluster' in kernel 'mm' shape[0] has 16 blocks; at most 8"},
        BadArgs{"cluster = [2, 1, 1]", "cluster = [1, 4, 1]", "kiln.toml:31:11: kernel 'mm' shape[0]: grid y = 2 is not a multiple of cluster y = 4"},
        BadArgs{"cluster = [2]", "cluster = [0]", "'cluster' in kernel 'mm' shape[1] must be between 1 and 8, found 0"}));

// The CUDA rules at resolution, on made-up devices and drivers.
TEST(KernelArgs, ResolutionRefusesDevicesWithoutTheFeaturesWithTheReason) {
  Manifest m = test::parse_kiln_toml(kTma);
  const KernelSpec& k = m.kernels[0];
  cuda::DriverFeatures all{true, true, true};
  cuda::DeviceSpec h200{9, 0, 13000}, a100{8, 0, 13000};
  EXPECT_EQ(cuda::feature_problem(k, h200, all, "device 0 'H200'"), "");
  EXPECT_EQ(cuda::feature_problem(k, a100, all, "device 0 'NVIDIA A100'"),
            "kernel 'mm' passes kernel_args entry 'a_desc' (a tensor map), which needs compute capability 9.0; device 0 "
            "'NVIDIA A100' is cc 8.0");
  EXPECT_EQ(cuda::feature_problem(k, h200, cuda::DriverFeatures{true, false, true}, "d"),
            "kernel 'mm' passes kernel_args entry 'a_desc' (a tensor map) but the CUDA 13.0 driver lacks cuTensorMapEncodeTiled (CUDA 12.0+)");
  EXPECT_EQ(cuda::feature_problem(k, h200, cuda::DriverFeatures{false, true, true}, "d"),
            "kernel 'mm' launches shape 'fixed' (2x1x1 clusters) but the CUDA 13.0 driver lacks cuLaunchKernelEx (CUDA 12.0+)");
  EXPECT_EQ(cuda::feature_problem(k, h200, cuda::DriverFeatures{true, true, false}, "d"),
            "kernel 'mm' needs kernel_args entry 'ws' (scratch memory) but the CUDA 13.0 driver lacks cuMemAlloc_v2/cuMemFree_v2");
  // Clusters alone also need 9.0; scratch alone runs anywhere with memory.
  KernelSpec clusters_only = k;
  clusters_only.kernel_args.clear();
  EXPECT_EQ(cuda::feature_problem(clusters_only, a100, all, "device 1 'A100'"),
            "kernel 'mm' launches shape 'fixed' (2x1x1 clusters), which needs compute capability 9.0; device 1 'A100' is cc 8.0");
  KernelSpec scratch_only = clusters_only;
  scratch_only.kernel_args = {k.kernel_args[3]};
  for (ShapeSpec& s : scratch_only.shapes) s.has_cluster = false;
  EXPECT_EQ(cuda::feature_problem(scratch_only, cuda::DeviceSpec{7, 5, 12000}, all, "d"), "");
}

}  // namespace
