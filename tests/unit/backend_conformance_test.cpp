// One conformance suite over backend::Backend, run for every implementation: the CUDA and HIP
// backends of this host (a real device where there is one: the H200 run stages this binary),
// each with its library missing, and the described-target backends `kiln preflight --target`
// uses. Whatever the vendor, a backend names itself consistently, either finds a device or says
// why not with the right reason, recognises only its own target tags, judges its own device's
// arch as fitting and another arch of its vendor with a reason, loads real code of its vendor
// for its device or explains the failure, and offers device tools (memory, copies, timing) for
// a device that is there, or says why not. The resolver relies on exactly these answers.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "cuda/cuda_backend.hpp"
#include "engine/backends.hpp"
#include "engine/described_target.hpp"
#include "hip/hip_backend.hpp"
#include "hip/hip_driver.hpp"

namespace kiln {
namespace {

constexpr const char* kAbsentCuda = "libcuda-absent-for-this-test.so.1";
constexpr const char* kAbsentHip = "libamdhip64-absent-for-this-test.so.5";

struct Case {
  std::string name;
  std::function<std::unique_ptr<backend::Backend>()> make;
  format::Vendor vendor;
  // What must be true of its device: "present" (described targets), "absent: <text the why names>",
  // or "either" (this host's real backends: a device where the machine has one).
  std::string device;
};

std::ostream& operator<<(std::ostream& os, const Case& c) { return os << c.name; }

engine::DescribedTarget described(const char* target) { return engine::parse_described_target(target, ""); }

std::vector<Case> cases() {
  return {
      {"cuda_this_host", [] { return std::make_unique<cuda::CudaBackend>(""); }, format::Vendor::cuda, "either"},
      {"cuda_without_its_driver", [] { return std::make_unique<cuda::CudaBackend>(kAbsentCuda); }, format::Vendor::cuda,
       std::string("absent: ") + kAbsentCuda},
      {"hip_this_host", [] { return std::make_unique<hip::HipBackend>(""); }, format::Vendor::hip, "either"},
      {"hip_without_its_runtime", [] { return std::make_unique<hip::HipBackend>(kAbsentHip); }, format::Vendor::hip,
       std::string("absent: ") + kAbsentHip},
      {"described_sm_90a", [] { return engine::described_cuda(described("sm_90a")); }, format::Vendor::cuda, "present"},
      {"described_sm_80", [] { return engine::described_cuda(described("sm_80")); }, format::Vendor::cuda, "present"},
      {"described_gfx90a", [] { return engine::described_hip(described("gfx90a:xnack-")); }, format::Vendor::hip, "present"},
      {"described_sm_90_as_seen_by_hip",
       [] {
         backend::BackendList list = engine::described_backends(described("sm_90"));
         for (auto& b : list) {
           if (b->format_vendor() == format::Vendor::hip) return std::move(b);
         }
         return std::unique_ptr<backend::Backend>();
       },
       format::Vendor::hip, "absent: target sm_90 is an NVIDIA GPU"},
  };
}

class BackendConformance : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    backend_ = GetParam().make();
    ASSERT_NE(backend_, nullptr);
    device_ = backend_->device(0, &reason_, &why_);
  }
  bool cuda() const { return GetParam().vendor == format::Vendor::cuda; }
  // A tag of this vendor for an architecture other than the device's, and one of the other vendor.
  std::string other_arch_of_this_vendor() const {
    if (cuda()) return device_->arch == "sm_80" ? "sm_90a" : "sm_80";
    return device_->arch.rfind("gfx1030", 0) == 0 ? "gfx90a" : "gfx1030";
  }
  std::string tag_of_the_other_vendor() const { return cuda() ? "gfx90a:xnack-" : "sm_90a"; }

  std::unique_ptr<backend::Backend> backend_;
  kiln_reason reason_ = KILN_REASON_MATCH;
  std::string why_;
  const backend::DeviceInfo* device_ = nullptr;
};

TEST_P(BackendConformance, NamesItsVendorConsistently) {
  EXPECT_EQ(backend_->format_vendor(), GetParam().vendor);
  EXPECT_STREQ(backend_->vendor(), cuda() ? "CUDA" : "HIP");
  EXPECT_STREQ(backend_->launch_call(), cuda() ? "cuLaunchKernel" : "hipModuleLaunchKernel");
}

TEST_P(BackendConformance, FindsItsDeviceOrSaysWhyNotWithTheRightReason) {
  const std::string& expected = GetParam().device;
  if (expected == "present") {
    ASSERT_NE(device_, nullptr) << why_;
  }
  if (expected.rfind("absent: ", 0) == 0) {
    ASSERT_EQ(device_, nullptr);
    EXPECT_NE(why_.find(expected.substr(8)), std::string::npos) << why_;
  }
  if (device_ == nullptr) {
    EXPECT_TRUE(reason_ == KILN_REASON_NO_DRIVER || reason_ == KILN_REASON_NO_DEVICE) << reason_;
    EXPECT_FALSE(why_.empty());
    if (expected.find("absent-for-this-test") != std::string::npos) {
      EXPECT_EQ(reason_, KILN_REASON_NO_DRIVER);
    }
    return;
  }
  EXPECT_EQ(device_->ordinal, 0);
  EXPECT_FALSE(device_->arch.empty());
  EXPECT_FALSE(device_->describe.empty());
  // Found once, then the same answer: the resolver keeps the pointer in every kernel it resolves.
  kiln_reason again_reason = KILN_REASON_MATCH;
  std::string again_why;
  EXPECT_EQ(backend_->device(0, &again_reason, &again_why), device_);
}

TEST_P(BackendConformance, RecognisesOnlyItsOwnTargetTags) {
  if (device_ == nullptr) GTEST_SKIP() << GetParam().name << " has no device: " << why_;
  for (const std::string& foreign : {tag_of_the_other_vendor(), std::string("not-a-target"), std::string("")}) {
    backend::TagFit fit = backend_->judge(*device_, foreign, cuda() ? format::CodeKind::cubin : format::CodeKind::offload_bundle,
                                          ByteView(), "x");
    EXPECT_FALSE(fit.recognised) << "'" << foreign << "'";
    EXPECT_FALSE(fit.fits) << "'" << foreign << "'";
  }
}

TEST_P(BackendConformance, JudgesItsDevicesArchAsFittingAndAnotherWithAReason) {
  if (device_ == nullptr) GTEST_SKIP() << GetParam().name << " has no device: " << why_;
  const format::CodeKind kind = cuda() ? format::CodeKind::cubin : format::CodeKind::offload_bundle;
  backend::TagFit own = backend_->judge(*device_, device_->arch, kind, ByteView(), "own");
  EXPECT_TRUE(own.recognised);
  EXPECT_TRUE(own.fits) << own.why;
  EXPECT_FALSE(own.jit);
  EXPECT_FALSE(own.why.empty());
  backend::TagFit other = backend_->judge(*device_, other_arch_of_this_vendor(), kind, ByteView(), "other");
  EXPECT_TRUE(other.recognised);
  EXPECT_FALSE(other.fits);
  EXPECT_FALSE(other.why.empty());
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Real code objects: nvcc's sm_90a cubin and hipcc's gfx90a:xnack- bundle of the example matmul
// (KILN_CODE_OBJECTS: the example's build folder, or the GPU stage's copy of the two).
std::string code_objects() {
  const char* env = std::getenv("KILN_CODE_OBJECTS");
  return env != nullptr ? env : KILN_CODE_OBJECTS_DEFAULT;
}

TEST_P(BackendConformance, LoadsRealCodeForItsDeviceOrExplainsTheFailure) {
  if (device_ == nullptr) GTEST_SKIP() << GetParam().name << " has no device: " << why_;
  const bool hopper = device_->arch == "sm_90";
  const bool mi210 = device_->arch == "gfx90a:xnack-" || device_->arch.rfind("gfx90a", 0) == 0;
  if (!(cuda() ? hopper || device_->arch == "sm_90a" : mi210)) {
    GTEST_SKIP() << "no staged code object is built for " << device_->arch;
  }
  std::string file = code_objects() + (cuda() ? "/matmul_relu.sm_90a.cubin" : "/matmul_relu.gfx90a_xnack-.co");
  std::string image = read_file(file);
  if (image.empty()) GTEST_SKIP() << file << " was not built (nvcc or hipcc missing when configured)";
  const format::CodeKind kind = cuda() ? format::CodeKind::cubin : format::CodeKind::offload_bundle;
  ByteView bytes(reinterpret_cast<const std::uint8_t*>(image.data()), image.size());
  backend::LoadOutcome loaded = backend_->load(*device_, bytes, kind, "matmul_relu_f32", 0);
  ASSERT_NE(loaded.code, nullptr) << loaded.message;
  EXPECT_EQ(loaded.error, 0);
  // An entry the code object lacks is a failed load with the driver's status and a description.
  backend::LoadOutcome missing = backend_->load(*device_, bytes, kind, "no_such_kernel", 0);
  if (!missing.simulated) {  // a described target looks no symbol up (that takes the driver)
    EXPECT_EQ(missing.code, nullptr);
    EXPECT_NE(missing.error, 0);
    EXPECT_FALSE(missing.message.empty());
    EXPECT_FALSE(backend_->describe_error(missing.error).empty());
  }
}

TEST_P(BackendConformance, OffersDeviceToolsThatRoundTripBytesOrSaysWhy) {
  if (device_ == nullptr) GTEST_SKIP() << GetParam().name << " has no device: " << why_;
  std::string why;
  std::unique_ptr<backend::DeviceTools> tools = backend_->tools(*device_, &why);
  if (GetParam().device == "present") {  // a described target: a GPU that is not here has no memory
    EXPECT_EQ(tools, nullptr);
    EXPECT_NE(why.find("offers no device memory"), std::string::npos) << why;
    return;
  }
  ASSERT_NE(tools, nullptr) << why;
  EXPECT_GT(tools->total_memory(), 0u);
  constexpr std::uint64_t kBytes = 4096;
  std::uint64_t address = 0;
  ASSERT_EQ(tools->allocate(kBytes, &address), 0);
  ASSERT_NE(address, 0u);
  std::vector<std::uint8_t> pattern(256);
  for (std::size_t i = 0; i < pattern.size(); ++i) pattern[i] = static_cast<std::uint8_t>(i);
  EXPECT_EQ(tools->fill(address, 0xff, kBytes), 0);
  EXPECT_EQ(tools->write(address, pattern.data(), pattern.size()), 0);
  EXPECT_EQ(tools->synchronize(), 0);
  std::vector<std::uint8_t> back(kBytes, 0);
  EXPECT_EQ(tools->read(back.data(), address, kBytes), 0);
  EXPECT_TRUE(std::equal(pattern.begin(), pattern.end(), back.begin())) << "the bytes written come back";
  EXPECT_TRUE(std::all_of(back.begin() + 256, back.end(), [](std::uint8_t b) { return b == 0xff; })) << "the fill holds";
  std::vector<double> times;
  EXPECT_EQ(tools->time([] {}, 3, &times), 0);
  EXPECT_EQ(times.size(), 3u);
  for (double t : times) EXPECT_GE(t, 0.0);
  EXPECT_EQ(tools->release(address), 0);
  // A failure is the driver's status, which the backend names.
  std::uint64_t huge = 0;
  int refused = tools->allocate(std::uint64_t{1} << 60, &huge);
  EXPECT_NE(refused, 0);
  EXPECT_EQ(huge, 0u);
  EXPECT_FALSE(backend_->describe_error(refused).empty());
}

// The HIP runtime's tool functions are bound by name: each must be a symbol of the real runtime
// (Debian's libamdhip64, where installed; no AMD GPU is needed to look them up).
TEST(HipTools, EveryBoundNameIsASymbolOfTheRuntime) {
  void* lib = ::dlopen("libamdhip64.so.5", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) lib = ::dlopen("libamdhip64.so", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) GTEST_SKIP() << "no HIP runtime on this host";
  std::size_t count = 0;
  const char* const* names = hip::tool_symbols(&count);
  EXPECT_GE(count, 11u);
  for (std::size_t i = 0; i < count; ++i) EXPECT_NE(::dlsym(lib, names[i]), nullptr) << names[i];
  // Not closed: the HIP runtime's LLVM registers its options once per process, and a runtime
  // unloaded and loaded again (by the HIP backend's own cases) aborts on the second registration.
}

INSTANTIATE_TEST_SUITE_P(EveryBackend, BackendConformance, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& param) { return param.param.name; });

}  // namespace
}  // namespace kiln
