// The kernel's own parameters built from a call (engine/kernel_abi): what each entry puts in the
// frame, the tensor map cache, scratch sizes, and every refusal of a value a launch cannot take,
// named. The driver's part is stood in for by a recorder (the real driver's, on the H200, is in
// tests/gpu: Gpu.TensorMapCluster... and Gpu.ScratchMemory...).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/manifest.hpp"
#include "engine/kernel_abi.hpp"

namespace {

using namespace kiln;

// Records what libkiln asks of the driver; encodes a map as 128 copies of the address's low byte.
class RecordingCode final : public backend::Code {
 public:
  int launch(const LaunchConfig&, void*, void**) const override { return 0; }
  int encode_tensor_map(const TensorMapRequest& r, void* out) const override {
    encodes.push_back(r);
    std::memset(out, static_cast<int>(r.address & 0xff), kTensorMapBytes);
    return fail_encode;
  }
  int scratch(std::size_t slot, std::uint64_t bytes, std::uint32_t align, void*, std::uint64_t* address) const override {
    scratch_asks.push_back({slot, bytes, align});
    *address = bytes == 0 ? 0 : 0x5000;
    return 0;
  }
  struct Ask {
    std::size_t slot;
    std::uint64_t bytes;
    std::uint32_t align;
  };
  mutable std::vector<TensorMapRequest> encodes;
  mutable std::vector<Ask> scratch_asks;
  int fail_encode = 0;
};

const char* kKernel = R"TOML([package]
name = "abi"
kernel_revision = "1"
sequence = 1
[[kernel]]
name = "mm"
entry = "mm"
backend = "cuda"
params = [
  { name = "a", type = "ptr", dtype = "f16", access = "read" },
  { name = "c", type = "ptr", dtype = "f16", access = "write" },
  { name = "m", type = "i32" },
  { name = "k", type = "i32" },
]
kernel_args = [
  { name = "a_desc", tensor_map = { pointer = "a", dims = ["k", "m"], strides = ["k * 2"], box = [64, 64] } },
  "c",
  { name = "lda", type = "i8", value = "k - 1000" },
  { name = "ws", scratch = { bytes = "k", align = 128 } },
  "m",
]
code = [{ arch = "sm_90a", file = "k.cubin" }]
)TOML";

struct Call {
  std::uint64_t a = 0x10000, c = 0x20000;
  std::int32_t m = 256, k = 1024;
  void* args[4] = {&a, &c, &m, &k};
};

class KernelAbiTest : public ::testing::Test {
 protected:
  KernelSpec spec = parse_manifest(kKernel, "kiln.toml").kernels[0];
  engine::KernelAbi abi{spec};
  RecordingCode code;
  LaunchConfig launch;
  engine::KernelAbi::Frame frame;
  void SetUp() override {
    launch.grid[0] = 4;
    launch.grid[1] = 2;
  }
  std::string refusal(Call& call) {
    try {
      abi.build(call.args, launch, nullptr, code, nullptr, &frame);
    } catch (const Failure& e) {
      return e.what();
    }
    return "accepted";
  }
};

TEST_F(KernelAbiTest, EachEntryPutsWhatTheKernelTakesInTheFrame) {
  Call call;
  call.k = 1096;  // lda = 96 fits i8; rows of 2192 bytes
  ASSERT_EQ(abi.build(call.args, launch, nullptr, code, nullptr, &frame), 1u);
  ASSERT_EQ(code.encodes.size(), 1u);
  EXPECT_EQ(code.encodes[0].address, 0x10000u);
  EXPECT_EQ(code.encodes[0].dims[0], 1096u);  // innermost first: k, then m
  EXPECT_EQ(code.encodes[0].dims[1], 256u);
  EXPECT_EQ(code.encodes[0].strides[0], 2192u);
  EXPECT_EQ(static_cast<const unsigned char*>(frame.args[0])[0], 0x00);  // the encoded map's bytes
  EXPECT_EQ(frame.args[1], call.args[1]);  // pass-through: the caller's own pointer
  std::int8_t lda = 0;
  std::memcpy(&lda, frame.args[2], 1);
  EXPECT_EQ(lda, 96);
  ASSERT_EQ(code.scratch_asks.size(), 1u);
  EXPECT_EQ(code.scratch_asks[0].bytes, 1096u * 4 * 2);  // per program, grid 4 x 2 x 1
  EXPECT_EQ(code.scratch_asks[0].align, 128u);
  std::uint64_t scratch = 0;
  std::memcpy(&scratch, frame.args[3], 8);
  EXPECT_EQ(scratch, 0x5000u);
  EXPECT_EQ(frame.args[4], call.args[2]);
}

TEST_F(KernelAbiTest, TheTensorMapCacheEncodesEachTensorOnceAndEvictsTheOldest) {
  Call call;
  call.k = 1096;
  for (int i = 0; i < 3; ++i) EXPECT_EQ(abi.build(call.args, launch, nullptr, code, nullptr, &frame), i == 0 ? 1u : 0u);
  for (std::uint64_t p = 1; p <= 8; ++p) {  // eight more tensors: the first one is evicted
    call.a = 0x10000 + 0x100 * p;
    abi.build(call.args, launch, nullptr, code, nullptr, &frame);
  }
  EXPECT_EQ(code.encodes.size(), 9u);
  call.a = 0x10800;  // the newest: still cached
  EXPECT_EQ(abi.build(call.args, launch, nullptr, code, nullptr, &frame), 0u);
  call.a = 0x10000;  // the first: evicted, encoded again
  EXPECT_EQ(abi.build(call.args, launch, nullptr, code, nullptr, &frame), 1u);
  call.m = 255;      // same pointer, another size: another map
  EXPECT_EQ(abi.build(call.args, launch, nullptr, code, nullptr, &frame), 1u);
}

TEST_F(KernelAbiTest, ValuesALaunchCannotTakeAreRefusedWithTheEntryNamed) {
  Call call;
  call.k = 1096;
  call.a = 0x10008;
  EXPECT_EQ(refusal(call), "kernel 'mm': kernel_args entry 'a_desc': the address of 'a' is not 16-byte aligned, as a tensor map needs");
  call.a = 0;
  EXPECT_EQ(refusal(call), "kernel 'mm': kernel_args entry 'a_desc': the address of 'a' is NULL; a tensor map needs the tensor's memory");
  EXPECT_TRUE(code.encodes.empty());  // refused before the driver is asked to encode it
  call.a = 0x10000;
  call.m = 0;
  EXPECT_EQ(refusal(call), "kernel 'mm': kernel_args entry 'a_desc': dims[1] 'm' = 0 is outside 1..2^32");
  call.m = 256;
  call.k = 1003;  // 2006-byte rows
  EXPECT_EQ(refusal(call), "kernel 'mm': kernel_args entry 'a_desc': strides[0] 'k * 2' = 2006 bytes is not a multiple of 16 in 16..2^40-16");
  call.k = 1200;  // lda = 200 does not fit i8
  EXPECT_EQ(refusal(call), "kernel 'mm': kernel_args entry 'lda': 'k - 1000' = 200 does not fit i8");
  call.k = 1096;
  call.m = 256;
  code.fail_encode = 1;
  std::string driver = refusal(call);
  EXPECT_NE(driver.find("kernel 'mm': kernel_args entry 'a_desc': cuTensorMapEncodeTiled refused dims (1096,256) of 'a': driver status 1"),
            std::string::npos) << driver;
  code.fail_encode = 0;
  EXPECT_EQ(refusal(call), "accepted");  // a failed encode is not cached
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  text.replace(text.find(from), from.size(), to);
  return text;
}

// Values are computed in signed 64-bit arithmetic: a negative result passed as u64 would be
// 2^64 - 1 and up, so it is refused like any value outside its type.
TEST_F(KernelAbiTest, ANegativeValueComputedForAU64IsRefused) {
  std::string text = replaced(kKernel, "type = \"i8\", value = \"k - 1000\"", "type = \"u64\", value = \"k - 1000\"");
  KernelSpec u64 = parse_manifest(text, "kiln.toml").kernels[0];
  engine::KernelAbi abi64(u64);
  Call call;
  call.k = 1096;
  ASSERT_EQ(abi64.build(call.args, launch, nullptr, code, nullptr, &frame), 1u);
  std::uint64_t lda = 0;
  std::memcpy(&lda, frame.args[2], 8);
  EXPECT_EQ(lda, 96u);
  call.k = 992;  // k - 1000 = -8
  try {
    abi64.build(call.args, launch, nullptr, code, nullptr, &frame);
    FAIL() << "a negative u64 value was passed as " << lda;
  } catch (const Failure& e) {
    EXPECT_STREQ(e.what(), "kernel 'mm': kernel_args entry 'lda': 'k - 1000' = -8 does not fit u64");
  }
}

// ... and a value no call can bring into its type is refused when the manifest is read.
TEST(KernelAbiManifest, AComputedValueNoCallCanBringIntoItsTypeIsRefused) {
  std::string text = replaced(kKernel, "type = \"i8\", value = \"k - 1000\"", "type = \"u64\", value = \"0 - 1\"");
  try {
    parse_manifest(text, "kiln.toml");
    FAIL() << "accepted a u64 computed as 0 - 1";
  } catch (const Failure& e) {
    EXPECT_NE(std::string(e.what()).find("kiln.toml:18:3: kernel_args entry 'lda' of kernel 'mm' computes '0 - 1', which no "
                                         "call can bring into its type u64 (0..9223372036854775807): it is always in [-1, -1]"),
              std::string::npos) << e.what();
  }
  text = replaced(kKernel, "value = \"k - 1000\"", "value = \"k / 0\"");
  try {
    parse_manifest(text, "kiln.toml");
    FAIL() << "accepted a value that always divides by zero";
  } catch (const Failure& e) {
    EXPECT_NE(std::string(e.what()).find("computes 'k / 0', which no call can bring into its type i8 (-128..127): it faults for every call"),
              std::string::npos) << e.what();
  }
}

// An interleaved map of 32 bytes needs a 32-byte aligned base (cuTensorMapEncodeTiled's rule),
// not only the 16 bytes every other map needs.
TEST(KernelAbiInterleave, A32ByteInterleavedMapNeedsA32ByteAlignedBase) {
  std::string text = replaced(kKernel,
                              "{ name = \"a_desc\", tensor_map = { pointer = \"a\", dims = [\"k\", \"m\"], strides = [\"k * 2\"], box = [64, 64] } }",
                              "{ name = \"a_desc\", tensor_map = { pointer = \"a\", dims = [16, \"k\", \"m\"], strides = [32, \"k * 32\"], "
                              "box = [16, 8, 8], interleave = \"32B\" } }");
  KernelSpec spec = parse_manifest(text, "kiln.toml").kernels[0];
  engine::KernelAbi abi(spec);
  RecordingCode code;
  LaunchConfig launch;
  engine::KernelAbi::Frame frame;
  Call call;
  call.k = 1096;
  call.a = 0x10010;  // 16-byte aligned, not 32
  try {
    abi.build(call.args, launch, nullptr, code, nullptr, &frame);
    FAIL() << "a 16-byte aligned base was encoded for a 32B-interleaved map";
  } catch (const Failure& e) {
    EXPECT_STREQ(e.what(), "kernel 'mm': kernel_args entry 'a_desc': the address of 'a' is not 32-byte aligned, as a tensor map needs");
  }
  EXPECT_TRUE(code.encodes.empty());
  call.a = 0x10020;
  EXPECT_EQ(abi.build(call.args, launch, nullptr, code, nullptr, &frame), 1u);
}

TEST_F(KernelAbiTest, NegativeScratchIsRefusedAndZeroPassesNull) {
  Call call;
  call.k = 992;  // lda = -8
  ASSERT_EQ(refusal(call), "accepted");
  KernelSpec negative = spec;
  negative.kernel_args[3].scratch.bytes = parse_manifest(std::string(kKernel).replace(std::string(kKernel).find("bytes = \"k\""), 11, "bytes = \"k - 2000\""), "kiln.toml").kernels[0].kernel_args[3].scratch.bytes;
  engine::KernelAbi neg(negative);
  try {
    neg.build(call.args, launch, nullptr, code, nullptr, &frame);
    FAIL() << "negative scratch accepted";
  } catch (const Failure& e) {
    EXPECT_NE(std::string(e.what()).find("kernel_args entry 'ws': scratch of -1008 bytes per program is negative or more than 2^40"),
              std::string::npos) << e.what();
  }
}

// The per-thread memo of the last build: a repeated call is answered from it (no expression, no
// cache lookup, no encode), and anything that changes the build (a pointer, a size, another
// kernel's parameter list) is built again. A kernel with scratch is never memoised (its address
// comes from the pool), which the tests above cover through the fixture's kernel.
TEST(KernelAbiMemo, ARepeatedCallReusesTheLastBuildAndAnyChangedParameterRebuildsIt) {
  std::string text = replaced(kKernel, "  { name = \"ws\", scratch = { bytes = \"k\", align = 128 } },\n", "");
  text = replaced(text, "  { name = \"k\", type = \"i32\" },\n", "  { name = \"k\", type = \"i32\" },\n  { name = \"alpha\", type = \"f32\" },\n");
  text = replaced(text, "  \"m\",\n]", "  \"m\",\n  \"alpha\",\n]");
  KernelSpec spec = parse_manifest(text, "kiln.toml").kernels[0];
  ASSERT_EQ(spec.kernel_args.size(), 5u);
  engine::KernelAbi abi(spec), twin(spec);
  RecordingCode code, twin_code;
  LaunchConfig launch;
  struct FloatCall {
    std::uint64_t a = 0x10010, c = 0x20000;
    std::int32_t m = 256, k = 1096;
    float alpha = 1.0f;
    void* args[5] = {&a, &c, &m, &k, &alpha};
  } call;
  auto map_byte = [](const engine::KernelAbi::Frame& f) { return static_cast<const unsigned char*>(f.args[0])[0]; };
  auto lda = [](const engine::KernelAbi::Frame& f) {
    std::int8_t v = 0;
    std::memcpy(&v, f.args[2], 1);
    return v;
  };

  engine::KernelAbi::Frame first;
  ASSERT_EQ(abi.build(call.args, launch, nullptr, code, nullptr, &first), 1u);
  engine::KernelAbi::Frame again;  // a fresh frame: everything in it comes from the memo
  std::memset(&again, 0xee, sizeof again);
  EXPECT_EQ(abi.build(call.args, launch, nullptr, code, nullptr, &again), 0u);
  EXPECT_EQ(code.encodes.size(), 1u);
  EXPECT_EQ(std::memcmp(again.args[0], first.args[0], kTensorMapBytes), 0);
  EXPECT_EQ(map_byte(again), 0x10);
  EXPECT_EQ(lda(again), 96);
  EXPECT_EQ(again.args[1], call.args[1]);
  EXPECT_EQ(again.args[3], call.args[2]);

  call.alpha = 2.0f;  // no entry reads a float: the same build, alpha passed through as it is now
  engine::KernelAbi::Frame scaled;
  EXPECT_EQ(abi.build(call.args, launch, nullptr, code, nullptr, &scaled), 0u);
  EXPECT_EQ(scaled.args[4], call.args[4]);
  EXPECT_EQ(code.encodes.size(), 1u);

  call.k = 1104;  // another size: its own map (dims, stride) and its own lda
  engine::KernelAbi::Frame resized;
  EXPECT_EQ(abi.build(call.args, launch, nullptr, code, nullptr, &resized), 1u);
  ASSERT_EQ(code.encodes.size(), 2u);
  EXPECT_EQ(code.encodes[1].dims[0], 1104u);
  EXPECT_EQ(lda(resized), 104);

  call.a = 0x10020;  // another tensor: its own map
  engine::KernelAbi::Frame moved;
  EXPECT_EQ(abi.build(call.args, launch, nullptr, code, nullptr, &moved), 1u);
  EXPECT_EQ(map_byte(moved), 0x20);

  // The twin has the same parameter list and gets the same call: it builds (and encodes) its own.
  engine::KernelAbi::Frame other;
  EXPECT_EQ(twin.build(call.args, launch, nullptr, twin_code, nullptr, &other), 1u);
  EXPECT_EQ(twin_code.encodes.size(), 1u);

  // A refused call is not remembered, and does not replace what is.
  call.k = 2000;  // lda = 1000: not an i8 (the map, built first, is encoded and cached)
  engine::KernelAbi::Frame refused;
  EXPECT_THROW(twin.build(call.args, launch, nullptr, twin_code, nullptr, &refused), Failure);
  EXPECT_THROW(twin.build(call.args, launch, nullptr, twin_code, nullptr, &refused), Failure);
  call.k = 1104;
  EXPECT_EQ(twin.build(call.args, launch, nullptr, twin_code, nullptr, &refused), 0u);
  EXPECT_EQ(twin_code.encodes.size(), 2u);
  EXPECT_EQ(map_byte(refused), 0x20);
}

}  // namespace
