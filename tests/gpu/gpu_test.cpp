// The GPU suite: real kernels launched through libkiln on a real device. Every test skips,
// saying why, on a machine without a CUDA driver or device; ci/gpu-run.sh runs it on the H200.
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <stdlib.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../unit/attestation_text.hpp"
#include "../unit/temp_dirs.hpp"
#include "core/dsse.hpp"
#include "core/ed25519.hpp"
#include "cuda/cuda_driver.hpp"
#include "engine/archive.hpp"
#include "engine/runtime.hpp"
#include "kiln/kiln.h"
#include "store/store.hpp"

namespace {

using namespace kiln::cuda;

// Paths baked in at build time, overridable where the build folder has moved (the GPU runner).
std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && v[0] != '\0' ? v : fallback;
}
const std::string kArchives = env_or("KILN_TEST_ARCHIVES", KILN_TEST_ARCHIVES);
const std::string kTrust = env_or("KILN_TEST_KEYS", KILN_TEST_KEYS) + "/test.pub";

// The driver for the test's own allocations and copies (libkiln loads its own).
const Driver* test_driver(std::string* why) {
  bool no_device = false;
  const Driver* d = Driver::get("", why, &no_device);
  if (d == nullptr) return nullptr;
  int count = 0;
  if (d->api().cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0) {
    *why = "the CUDA driver reports no device";
    return nullptr;
  }
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  d->api().cuDeviceGet(&dev, 0);
  d->api().cuDevicePrimaryCtxRetain(&ctx, dev);
  d->api().cuCtxSetCurrent(ctx);
  return d;
}

#define REQUIRE_GPU()                                                   \
  std::string why_no_gpu;                                               \
  const Driver* driver = test_driver(&why_no_gpu);                      \
  if (driver == nullptr) GTEST_SKIP() << "no CUDA GPU here: " << why_no_gpu; \
  const DriverApi& cu = driver->api()

#define CU_OK(call) ASSERT_EQ((call), CUDA_SUCCESS) << #call

struct DeviceBuffer {
  const DriverApi* api = nullptr;
  CUdeviceptr ptr = 0;
  ~DeviceBuffer() {
    if (ptr) api->cuMemFree(ptr);
  }
};

// C = relu(A x B) in double precision on the CPU.
std::vector<double> cpu_matmul_relu(const std::vector<float>& a, const std::vector<float>& b, int m, int n, int k) {
  std::vector<double> c(static_cast<size_t>(m) * n);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double acc = 0;
      for (int p = 0; p < k; ++p) acc += static_cast<double>(a[static_cast<size_t>(i) * k + p]) * b[static_cast<size_t>(p) * n + j];
      c[static_cast<size_t>(i) * n + j] = acc > 0 ? acc : 0;
    }
  }
  return c;
}

class Runtime {
 public:
  explicit Runtime(uint32_t policy = KILN_POLICY_FALLBACK) {
    kiln_runtime_options o;
    kiln_runtime_options_init(&o, sizeof o);
    o.trust_path = kTrust.c_str();
    o.policy = policy;
    status = kiln_runtime_create(&rt, &o);
  }
  ~Runtime() {
    kiln_archive_destroy(archive);
    kiln_runtime_destroy(rt);
  }
  kiln_kernel* open_kernel(const std::string& archive_name, int device = 0, const char* kernel = "matmul_relu") {
    if (kiln_archive_open(rt, (kArchives + "/" + archive_name).c_str(), &archive) != KILN_OK) return nullptr;
    kiln_kernel* k = nullptr;
    kiln_archive_get_kernel(archive, kernel, device, &k);
    return k;
  }
  std::string error() const {
    char buf[4096];
    kiln_runtime_last_error(rt, buf, sizeof buf, nullptr);
    return buf;
  }
  kiln_status status;
  kiln_runtime* rt = nullptr;
  kiln_archive* archive = nullptr;
};

struct MatmulRun {
  double max_abs_error = 0;
  double max_rel_error = 0;
  size_t unwritten = 0;  // outputs still holding the poison
  kiln_status status = KILN_ERR_INTERNAL;
  kiln_route route = KILN_ROUTE_REFUSED;
};

// Runs C = relu(A x B) for m x n x k through `kernel` on fresh random data, C poisoned first.
MatmulRun run_matmul(const DriverApi& cu, kiln_kernel* kernel, int m, int n, int k, unsigned seed) {
  MatmulRun out;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> a(static_cast<size_t>(m) * k), b(static_cast<size_t>(k) * n), c(static_cast<size_t>(m) * n);
  for (float& v : a) v = dist(rng);
  for (float& v : b) v = dist(rng);
  DeviceBuffer da{&cu}, db{&cu}, dc{&cu};
  if (cu.cuMemAlloc(&da.ptr, a.size() * 4) || cu.cuMemAlloc(&db.ptr, b.size() * 4) || cu.cuMemAlloc(&dc.ptr, c.size() * 4) ||
      cu.cuMemcpyHtoD(da.ptr, a.data(), a.size() * 4) || cu.cuMemcpyHtoD(db.ptr, b.data(), b.size() * 4) ||
      cu.cuMemsetD8(dc.ptr, 0xff, c.size() * 4)) {  // 0xffffffff is a NaN: unwritten outputs show
    return out;
  }
  void* args[] = {&da.ptr, &db.ptr, &dc.ptr, &m, &n, &k};
  out.status = kiln_kernel_launch(kernel, args, 6, nullptr, &out.route);
  if (out.status != KILN_OK || cu.cuCtxSynchronize() != CUDA_SUCCESS ||
      cu.cuMemcpyDtoH(c.data(), dc.ptr, c.size() * 4) != CUDA_SUCCESS) {
    if (out.status == KILN_OK) out.status = KILN_ERR_DRIVER;
    return out;
  }
  std::vector<double> ref = cpu_matmul_relu(a, b, m, n, k);
  for (size_t i = 0; i < c.size(); ++i) {
    if (std::isnan(c[i])) {
      ++out.unwritten;
      continue;
    }
    double err = std::fabs(c[i] - ref[i]);
    out.max_abs_error = std::max(out.max_abs_error, err);
    out.max_rel_error = std::max(out.max_rel_error, err / std::max(1e-6, std::fabs(ref[i])));
  }
  return out;
}

// A reference that runs the same computation on the CPU through the device pointers, as a
// host's PyTorch fallback would run on the GPU.
int host_reference(const kiln_call_info* info, void* const* args, size_t n_args, void*, void* user) {
  auto* calls = static_cast<std::vector<std::string>*>(user);
  calls->push_back(std::string(kiln_reason_string(static_cast<kiln_reason>(info->reason))) + ": " + info->reason_text);
  if (n_args != 6) return 1;
  std::string why;
  const DriverApi& cu = test_driver(&why)->api();
  CUdeviceptr a = *static_cast<CUdeviceptr*>(args[0]), b = *static_cast<CUdeviceptr*>(args[1]),
              c = *static_cast<CUdeviceptr*>(args[2]);
  int m = *static_cast<int*>(args[3]), n = *static_cast<int*>(args[4]), k = *static_cast<int*>(args[5]);
  std::vector<float> ha(static_cast<size_t>(m) * k), hb(static_cast<size_t>(k) * n), hc(static_cast<size_t>(m) * n);
  if (cu.cuMemcpyDtoH(ha.data(), a, ha.size() * 4) || cu.cuMemcpyDtoH(hb.data(), b, hb.size() * 4)) return 2;
  std::vector<double> ref = cpu_matmul_relu(ha, hb, m, n, k);
  for (size_t i = 0; i < hc.size(); ++i) hc[i] = static_cast<float>(ref[i]);
  return cu.cuMemcpyHtoD(c, hc.data(), hc.size() * 4) == CUDA_SUCCESS ? 0 : 3;
}

TEST(Gpu, NativeCubinComputesMatmulReluCorrectly) {
  REQUIRE_GPU();
  Runtime r;
  ASSERT_EQ(r.status, KILN_OK);
  kiln_kernel* k = r.open_kernel("matmul-relu.kiln");
  ASSERT_NE(k, nullptr) << r.error();
  std::printf("matmul-relu.kiln: route %s, target %s: %s\n", kiln_route_string(kiln_kernel_route(k)), kiln_kernel_target(k),
              kiln_kernel_reason_text(k));
  ASSERT_EQ(kiln_kernel_route(k), KILN_ROUTE_NATIVE) << kiln_kernel_reason_text(k);
  int major = 0;
  CUdevice dev = 0;
  cu.cuDeviceGet(&dev, 0);
  cu.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
  if (major == 9) EXPECT_STREQ(kiln_kernel_target(k), "sm_90a") << "an exact 'a' cubin is preferred on cc 9.0";
  for (auto [m, n, kk] : {std::tuple<int, int, int>{256, 256, 256}, {1024, 1024, 1024}}) {
    MatmulRun run = run_matmul(cu, k, m, n, kk, 1234u + static_cast<unsigned>(m));
    ASSERT_EQ(run.status, KILN_OK) << r.error();
    EXPECT_EQ(run.route, KILN_ROUTE_NATIVE);
    EXPECT_EQ(run.unwritten, 0u);
    EXPECT_LT(run.max_abs_error, 1e-4) << m << "x" << n << "x" << kk;
    std::printf("  native %dx%dx%d: max abs error %.3g, max rel error %.3g, unwritten %zu\n", m, n, kk, run.max_abs_error,
                run.max_rel_error, run.unwritten);
  }
}

// One range shape, m = 1..8192 (n = k = 256), grid y = cdiv(m, 16) computed per call: every m of
// the sweep runs natively and writes exactly its m rows; m outside the range goes to the
// reference with the range in the reason.
TEST(Gpu, OneRangeShapeServesEveryM) {
  REQUIRE_GPU();
  Runtime r;
  ASSERT_EQ(r.status, KILN_OK);
  kiln_kernel* k = r.open_kernel("matmul-relu-m-range.kiln");
  ASSERT_NE(k, nullptr) << r.error();
  ASSERT_EQ(kiln_kernel_route(k), KILN_ROUTE_NATIVE) << kiln_kernel_reason_text(k);
  for (int m : {1, 2, 15, 16, 17, 100, 255, 256, 257, 1000, 4095, 4096, 8191, 8192}) {
    MatmulRun run = run_matmul(cu, k, m, 256, 256, 99u + static_cast<unsigned>(m));
    ASSERT_EQ(run.status, KILN_OK) << "m=" << m << ": " << r.error();
    EXPECT_EQ(run.route, KILN_ROUTE_NATIVE) << "m=" << m;
    EXPECT_EQ(run.unwritten, 0u) << "m=" << m;
    EXPECT_LT(run.max_abs_error, 1e-4) << "m=" << m;
  }
  std::vector<std::string> calls;
  ASSERT_EQ(kiln_runtime_register_reference(r.rt, "matmul_relu", host_reference, &calls), KILN_OK);
  MatmulRun outside = run_matmul(cu, k, 8193, 256, 256, 7u);
  EXPECT_EQ(outside.route, KILN_ROUTE_REFERENCE);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_NE(calls[0].find("any_m: m=8193 is outside its range [1, 8192]"), std::string::npos) << calls[0];
}

// scale-variants: a variant whose `when` asks for aligned tensors takes a call on aligned
// buffers; the same call on buffers 4 bytes in runs the kernel's own code, on the device, and
// computes the same y = a * x; an address the shape's own `where` refuses goes to the reference.
TEST(Gpu, AVariantForAlignedTensorsTakesOnlyAlignedCalls) {
  REQUIRE_GPU();
  Runtime r;
  kiln_kernel* k = r.open_kernel("scale-variants.kiln", 0, "scale");
  ASSERT_NE(k, nullptr) << r.error();
  ASSERT_EQ(kiln_kernel_route(k), KILN_ROUTE_PTX_JIT) << kiln_kernel_reason_text(k);
  const unsigned n = 4096;
  DeviceBuffer dx{&cu}, dy{&cu};
  CU_OK(cu.cuMemAlloc(&dx.ptr, (n + 4) * 4));
  CU_OK(cu.cuMemAlloc(&dy.ptr, (n + 4) * 4));
  std::vector<float> x(n + 4);
  for (unsigned i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) - 7.5f;
  CU_OK(cu.cuMemcpyHtoD(dx.ptr, x.data(), x.size() * 4));
  float a = 3.0f;
  unsigned count = n;
  for (unsigned offset : {0u, 1u}) {  // in floats: 0 bytes, then 4 bytes into each buffer
    CUdeviceptr y = dy.ptr + offset * 4, xp = dx.ptr + offset * 4;
    void* args[] = {&y, &xp, &a, &count};
    char text[2048];
    ASSERT_EQ(kiln_kernel_explain(k, args, 4, text, sizeof text, nullptr), KILN_OK) << r.error();
    std::printf("offset %u bytes: %s\n", offset * 4, text);
    if (offset == 0) {
      EXPECT_NE(std::string(text).find("variant d16.n"), std::string::npos) << text;
    } else {
      EXPECT_NE(std::string(text).find("the kernel's own code"), std::string::npos) << text;
      EXPECT_NE(std::string(text).find("'addr(y) % 16 == 0 && addr(x) % 16 == 0' does not hold"), std::string::npos)
          << text;
    }
    CU_OK(cu.cuMemsetD8(dy.ptr, 0xff, (n + 4) * 4));
    kiln_route route = KILN_ROUTE_REFUSED;
    ASSERT_EQ(kiln_kernel_launch(k, args, 4, nullptr, &route), KILN_OK) << r.error();
    EXPECT_EQ(route, KILN_ROUTE_PTX_JIT);
    CU_OK(cu.cuCtxSynchronize());
    std::vector<float> got(n);
    CU_OK(cu.cuMemcpyDtoH(got.data(), y, n * 4));
    for (unsigned i = 0; i < n; ++i) ASSERT_EQ(got[i], a * x[i + offset]) << "offset " << offset << " i " << i;
  }
  // 2 bytes in: not even an f32 boundary, which the shape's `where` refuses.
  std::vector<std::string> calls;
  ASSERT_EQ(kiln_runtime_register_reference(r.rt, "scale", [](const kiln_call_info* info, void* const*, size_t, void*,
                                                              void* user) {
    static_cast<std::vector<std::string>*>(user)->push_back(info->reason_text);
    return 0;
  }, &calls), KILN_OK);
  CUdeviceptr y = dy.ptr, xp = dx.ptr + 2;
  void* args[] = {&y, &xp, &a, &count};
  kiln_route route = KILN_ROUTE_NATIVE;
  ASSERT_EQ(kiln_kernel_launch(k, args, 4, nullptr, &route), KILN_OK) << r.error();
  EXPECT_EQ(route, KILN_ROUTE_REFERENCE);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_NE(calls[0].find("any_n: where[0] 'addr(x) % 4 == 0' does not hold"), std::string::npos) << calls[0];
}

// Attestations required at load, on the real device: an archive attested only for sm_80 routes
// to the reference as unattested on this GPU, one attested for this GPU's compute capability
// runs, and a package's store-kept attestation counts the same way through kiln_package_open.
TEST(Gpu, ARuntimeRequiringAttestationsRunsOnlyWhatWasProvenOnThisKindOfGpu) {
  REQUIRE_GPU();
  CUdevice dev = 0;
  int major = 0, minor = 0, version = 0;
  CU_OK(cu.cuDeviceGet(&dev, 0));
  CU_OK(cu.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
  CU_OK(cu.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
  CU_OK(cu.cuDriverGetVersion(&version));
  std::string here_cc = std::to_string(major) + "." + std::to_string(minor);
  std::string here_arch = "sm_" + std::to_string(major) + std::to_string(minor);
  std::string driver_text = std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
  auto kiln_test_error = [] {
    char buf[2048];
    kiln_last_error(buf, sizeof buf, nullptr);
    return std::string(buf);
  };
  kiln::PrivateKey verifier = kiln::PrivateKey::generate();
  std::string dir = kiln::test::make_temp_dir("kiln-gpu-attest");
  std::string keys = dir + "/verifier.pub";
  std::ofstream(keys) << verifier.public_key().to_pem();
  kiln_runtime_options o;
  kiln_runtime_options_init(&o, sizeof o);
  o.trust_path = kTrust.c_str();
  o.attestation_trust_path = keys.c_str();
  kiln_runtime* rt = nullptr;
  ASSERT_EQ(kiln_runtime_create(&rt, &o), KILN_OK) << kiln_test_error();
  auto envelope = [&](const std::string& digest, const std::string& arch, const std::string& cc) {
    return kiln::dsse_envelope_json("application/vnd.in-toto+json",
                                    kiln::test::gpu_run_statement_text(digest, arch, cc, true, driver_text), {&verifier});
  };
  for (bool proven_here : {false, true}) {
    kiln_archive* a = nullptr;
    ASSERT_EQ(kiln_archive_open(rt, (kArchives + "/scale.kiln").c_str(), &a), KILN_OK) << kiln_test_error();
    std::string e = proven_here ? envelope(kiln_archive_digest(a), here_arch, here_cc) : envelope(kiln_archive_digest(a), "sm_80", "8.0");
    ASSERT_EQ(kiln_archive_add_attestation(a, e.data(), e.size()), KILN_OK) << kiln_test_error();
    kiln_kernel* k = nullptr;
    ASSERT_EQ(kiln_archive_get_kernel(a, "scale", 0, &k), KILN_OK) << kiln_test_error();
    std::printf("attested for %s: %s: %s\n", proven_here ? here_arch.c_str() : "sm_80", kiln_route_string(kiln_kernel_route(k)),
                kiln_kernel_reason_text(k));
    if (proven_here) {
      EXPECT_EQ(kiln_kernel_route(k), KILN_ROUTE_PTX_JIT) << kiln_kernel_reason_text(k);
    } else {
      EXPECT_EQ(kiln_kernel_route(k), KILN_ROUTE_REFERENCE);
      EXPECT_EQ(kiln_kernel_reason(k), KILN_REASON_UNATTESTED);
      EXPECT_NE(std::string(kiln_kernel_reason_text(k)).find("ran on sm_80 (cc 8.0), not cc " + here_cc), std::string::npos)
          << kiln_kernel_reason_text(k);
    }
    kiln_archive_destroy(a);
  }
  // The same through a store: the attestation kept beside the active archive counts at open.
  std::string store_dir = dir + "/store";
  kiln::store::Store::init(store_dir, kTrust);
  kiln::store::Store store(store_dir);
  kiln::store::ArchiveInfo info = store.add(kArchives + "/scale.kiln");
  store.attest(info.digest, envelope(info.digest, here_arch, here_cc), "gpu test", "gpu-test");
  store.activate(info.digest, "gpu-test", "");
  kiln_package* p = nullptr;
  ASSERT_EQ(kiln_package_open(rt, store_dir.c_str(), info.package.c_str(), 0, &p), KILN_OK) << kiln_test_error();
  DeviceBuffer dx{&cu}, dy{&cu};
  CU_OK(cu.cuMemAlloc(&dx.ptr, 1024 * 4));
  CU_OK(cu.cuMemAlloc(&dy.ptr, 1024 * 4));
  float a = 2;
  unsigned n = 1024;  // scale.kiln's one shape
  void* args[] = {&dy.ptr, &dx.ptr, &a, &n};
  kiln_route route = KILN_ROUTE_REFUSED;
  std::vector<std::string> calls;
  kiln_runtime_register_reference(rt, "scale", host_reference, &calls);
  EXPECT_EQ(kiln_package_launch(p, "scale", args, 4, nullptr, &route), KILN_OK) << kiln_test_error();
  EXPECT_EQ(route, KILN_ROUTE_PTX_JIT) << (calls.empty() ? "" : calls[0]);
  CU_OK(cu.cuCtxSynchronize());
  kiln_package_destroy(p);
  kiln_runtime_destroy(rt);
}

TEST(Gpu, PtxOnlyArchiveTakesTheJitRouteAndComputesCorrectly) {
  REQUIRE_GPU();
  Runtime r;
  kiln_kernel* k = r.open_kernel("matmul-relu-ptx-only.kiln");
  ASSERT_NE(k, nullptr) << r.error();
  std::printf("matmul-relu-ptx-only.kiln: route %s: %s\n", kiln_route_string(kiln_kernel_route(k)), kiln_kernel_reason_text(k));
  ASSERT_EQ(kiln_kernel_route(k), KILN_ROUTE_PTX_JIT) << kiln_kernel_reason_text(k);
  EXPECT_STREQ(kiln_kernel_target(k), "compute_90");
  MatmulRun run = run_matmul(cu, k, 256, 256, 256, 99);
  ASSERT_EQ(run.status, KILN_OK) << r.error();
  EXPECT_EQ(run.route, KILN_ROUTE_PTX_JIT);
  EXPECT_EQ(run.unwritten, 0u);
  EXPECT_LT(run.max_abs_error, 1e-4);
  std::printf("  ptx-jit 256x256x256: max abs error %.3g, unwritten %zu\n", run.max_abs_error, run.unwritten);
  kiln_stats s{};
  s.size = sizeof s;
  kiln_runtime_stats(r.rt, &s);
  EXPECT_EQ(s.jit_compiles, 1u);
  EXPECT_GT(s.jit_time_ns, 0u);
  EXPECT_EQ(s.launches_ptx_jit, 1u);
}

TEST(Gpu, ForeignArchesRouteToTheRegisteredReference) {
  REQUIRE_GPU();
  Runtime r;
  std::vector<std::string> calls;
  ASSERT_EQ(kiln_runtime_register_reference(r.rt, "matmul_relu", host_reference, &calls), KILN_OK);
  kiln_kernel* k = r.open_kernel("matmul-relu-foreign.kiln");
  ASSERT_NE(k, nullptr) << r.error();
  std::printf("matmul-relu-foreign.kiln: route %s (%s): %s\n", kiln_route_string(kiln_kernel_route(k)),
              kiln_reason_string(kiln_kernel_reason(k)), kiln_kernel_reason_text(k));
  ASSERT_EQ(kiln_kernel_route(k), KILN_ROUTE_REFERENCE);
  EXPECT_EQ(kiln_kernel_reason(k), KILN_REASON_ARCH_MISMATCH);
  std::string text = kiln_kernel_reason_text(k);
  EXPECT_NE(text.find("sm_80"), std::string::npos) << text;
  EXPECT_NE(text.find("sm_100"), std::string::npos) << text;
  EXPECT_NE(text.find("compute_100"), std::string::npos) << text;
  MatmulRun run = run_matmul(cu, k, 256, 256, 256, 7);
  ASSERT_EQ(run.status, KILN_OK) << r.error();
  EXPECT_EQ(run.route, KILN_ROUTE_REFERENCE);
  EXPECT_EQ(run.unwritten, 0u);
  EXPECT_LT(run.max_abs_error, 1e-4);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].rfind("arch-mismatch: ", 0), 0u) << calls[0];
}

TEST(Gpu, UndeclaredShapeGoesToTheReference) {
  REQUIRE_GPU();
  Runtime r;
  std::vector<std::string> calls;
  kiln_runtime_register_reference(r.rt, "matmul_relu", host_reference, &calls);
  kiln_kernel* k = r.open_kernel("matmul-relu.kiln");
  ASSERT_NE(k, nullptr) << r.error();
  ASSERT_EQ(kiln_kernel_route(k), KILN_ROUTE_NATIVE);
  MatmulRun run = run_matmul(cu, k, 300, 256, 256, 5);  // m = 300 is not a declared shape
  ASSERT_EQ(run.status, KILN_OK) << r.error();
  EXPECT_EQ(run.route, KILN_ROUTE_REFERENCE);
  EXPECT_EQ(run.unwritten, 0u);
  EXPECT_LT(run.max_abs_error, 1e-4);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_NE(calls[0].find("undeclared-shape: the call (m=300 n=256 k=256) matches no declared shape"), std::string::npos)
      << calls[0];
}

TEST(Gpu, StrictPolicyRefusesForeignArchesEvenWithAReference) {
  REQUIRE_GPU();
  Runtime r(KILN_POLICY_STRICT);
  std::vector<std::string> calls;
  kiln_runtime_register_reference(r.rt, "matmul_relu", host_reference, &calls);
  kiln_kernel* k = r.open_kernel("matmul-relu-foreign.kiln");
  ASSERT_NE(k, nullptr) << r.error();
  EXPECT_EQ(kiln_kernel_route(k), KILN_ROUTE_REFUSED);
  MatmulRun run = run_matmul(cu, k, 256, 256, 256, 8);
  EXPECT_EQ(run.status, KILN_ERR_REFUSED);
  EXPECT_TRUE(calls.empty());
}

TEST(Gpu, WarmUpLoadsEveryKernelBeforeTheFirstCall) {
  REQUIRE_GPU();
  Runtime r;
  ASSERT_EQ(kiln_archive_open(r.rt, (kArchives + "/matmul-relu.kiln").c_str(), &r.archive), KILN_OK) << r.error();
  ASSERT_EQ(kiln_archive_warm(r.archive, 0), KILN_OK) << r.error();
  kiln_stats before{};
  before.size = sizeof before;
  kiln_runtime_stats(r.rt, &before);
  EXPECT_EQ(before.loads, 1u);
  kiln_kernel* k = nullptr;
  ASSERT_EQ(kiln_archive_get_kernel(r.archive, "matmul_relu", 0, &k), KILN_OK);
  MatmulRun run = run_matmul(cu, k, 256, 256, 256, 3);
  ASSERT_EQ(run.status, KILN_OK);
  kiln_stats after{};
  after.size = sizeof after;
  kiln_runtime_stats(r.rt, &after);
  EXPECT_EQ(after.loads, 1u) << "the launch must not load anything";
  EXPECT_EQ(after.launches_native, 1u);
}

TEST(Gpu, AFailedLoadRoutesToTheReferenceAndLeavesADiagnosticBundle) {
  REQUIRE_GPU();
  // Kept after the run (not a make_temp_dir folder): ci/gpu-run.sh's diag_show step reads the
  // bundle this test leaves there.
  char tmpl[] = "/tmp/kiln-diag-gpu-XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  ::setenv("KILN_DIAG_DIR", dir.c_str(), 1);
  Runtime r;
  ::unsetenv("KILN_DIAG_DIR");
  kiln_kernel* k = r.open_kernel("matmul-relu-bad-entry.kiln");
  ASSERT_NE(k, nullptr) << r.error();
  std::printf("matmul-relu-bad-entry.kiln: route %s (%s): %s\n", kiln_route_string(kiln_kernel_route(k)),
              kiln_reason_string(kiln_kernel_reason(k)), kiln_kernel_reason_text(k));
  EXPECT_EQ(kiln_kernel_route(k), KILN_ROUTE_REFERENCE);
  EXPECT_EQ(kiln_kernel_reason(k), KILN_REASON_LOAD_FAILED);
  EXPECT_NE(std::string(kiln_kernel_reason_text(k)).find("no kernel named 'no_such_symbol'"), std::string::npos);
  kiln_stats s{};
  s.size = sizeof s;
  kiln_runtime_stats(r.rt, &s);
  EXPECT_EQ(s.load_failures, 1u);
  // The bundle: a report with the driver's error and device, the manifest and the code object.
  std::string listing;
  FILE* p = ::popen(("ls " + dir + "/*/ && cat " + dir + "/*/report.toml").c_str(), "r");
  char buf[4096];
  size_t n;
  while (p && (n = std::fread(buf, 1, sizeof buf, p)) > 0) listing.append(buf, n);
  if (p) ::pclose(p);
  std::printf("%s\n", listing.c_str());
  EXPECT_NE(listing.find("cuda_error = 500"), std::string::npos) << listing;
  EXPECT_NE(listing.find("NVIDIA H"), std::string::npos) << listing;
  EXPECT_NE(listing.find("matmul_relu.sm_90a.cubin"), std::string::npos) << listing;
  EXPECT_NE(listing.find("kiln.toml"), std::string::npos) << listing;
}

TEST(Gpu, AMissingDeviceOrdinalRoutesToTheReference) {
  REQUIRE_GPU();
  int count = 0;
  cu.cuDeviceGetCount(&count);
  Runtime r;
  kiln_kernel* k = r.open_kernel("matmul-relu.kiln", count);  // one past the last device
  ASSERT_NE(k, nullptr) << r.error();
  EXPECT_EQ(kiln_kernel_route(k), KILN_ROUTE_REFERENCE);
  EXPECT_EQ(kiln_kernel_reason(k), KILN_REASON_NO_DEVICE);
  EXPECT_NE(std::string(kiln_kernel_reason_text(k)).find("no CUDA device " + std::to_string(count)), std::string::npos);
}

// tma_pair_sum (examples/cuda_tma_cluster): libkiln encodes a CUtensorMap from the call's pointer
// and sizes, launches in 2x1x1 clusters with 68 KiB of dynamic shared memory. The kernel's
// answer is right only when all three work: out[r][c] = in[r][c] + in[r][c ^ 32], 0 past the
// last column (the tensor map's out-of-bounds fill).
struct PairSumRun {
  kiln_status status = KILN_ERR_INTERNAL;
  kiln_route route = KILN_ROUTE_REFUSED;
  size_t wrong = 0;
};

PairSumRun run_pair_sum(const DriverApi& cu, kiln_kernel* k, DeviceBuffer& din, DeviceBuffer& dout, int rows, int cols,
                        int launches = 1) {
  PairSumRun out;
  std::vector<float> in(static_cast<size_t>(rows) * cols), got(in.size());
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>((i * 2654435761u) % 1000) / 8.0f;  // exact sums
  if (cu.cuMemcpyHtoD(din.ptr, in.data(), in.size() * 4) || cu.cuMemsetD8(dout.ptr, 0xff, got.size() * 4)) return out;
  void* args[] = {&din.ptr, &dout.ptr, &rows, &cols};
  for (int i = 0; i < launches; ++i) {
    out.status = kiln_kernel_launch(k, args, 4, nullptr, &out.route);
    if (out.status != KILN_OK) return out;
  }
  if (cu.cuCtxSynchronize() != CUDA_SUCCESS || cu.cuMemcpyDtoH(got.data(), dout.ptr, got.size() * 4) != CUDA_SUCCESS) {
    out.status = KILN_ERR_DRIVER;
    return out;
  }
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      size_t i = static_cast<size_t>(r) * cols + static_cast<size_t>(c);
      int p = c ^ 32;
      float want = in[i] + (p < cols ? in[static_cast<size_t>(r) * cols + static_cast<size_t>(p)] : 0.0f);
      out.wrong += std::memcmp(&got[i], &want, 4) != 0 ? 1 : 0;
    }
  }
  return out;
}

TEST(Gpu, TensorMapClusterAndLargeSharedMemoryLaunchThroughKiln) {
  REQUIRE_GPU();
  Runtime r;
  kiln_kernel* k = r.open_kernel("tma-pair-sum.kiln", 0, "tma_pair_sum");
  ASSERT_NE(k, nullptr) << r.error();
  std::printf("tma-pair-sum.kiln: route %s (%s): %s\n", kiln_route_string(kiln_kernel_route(k)),
              kiln_reason_string(kiln_kernel_reason(k)), kiln_kernel_reason_text(k));
  int major = 0;
  CUdevice dev = 0;
  cu.cuDeviceGet(&dev, 0);
  cu.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
  if (major < 9) {  // resolution must have refused it, with the reason, before any launch
    EXPECT_EQ(kiln_kernel_reason(k), KILN_REASON_DEVICE_FEATURE) << kiln_kernel_reason_text(k);
    GTEST_SKIP() << "cc " << major << ".x: tensor maps and clusters need 9.0";
  }
  ASSERT_EQ(kiln_kernel_route(k), KILN_ROUTE_NATIVE) << kiln_kernel_reason_text(k);
  DeviceBuffer din{&cu}, dout{&cu};
  CU_OK(cu.cuMemAlloc(&din.ptr, 4096u * 4096u * 4u));
  CU_OK(cu.cuMemAlloc(&dout.ptr, 4096u * 4096u * 4u));
  kiln_stats before{}, after{};
  before.size = after.size = sizeof before;
  // The cache's misses are counted in the Prometheus text only (kiln_stats keeps its layout).
  auto encodes = [&] {
    std::vector<char> text(16384);
    kiln_runtime_stats_prometheus(r.rt, text.data(), text.size(), nullptr);
    std::string t(text.data());
    const std::string key = "\nkiln_tensor_map_encodes_total ";
    std::size_t at = t.find(key);
    return at == std::string::npos ? -1L : std::stol(t.substr(at + key.size()));
  };
  for (auto [rows, cols] : {std::pair<int, int>{70, 100}, {1, 4}, {32, 64}, {33, 96}, {129, 260}, {1000, 1000}, {4096, 4096}}) {
    PairSumRun run = run_pair_sum(cu, k, din, dout, rows, cols);
    ASSERT_EQ(run.status, KILN_OK) << rows << "x" << cols << ": " << r.error();
    EXPECT_EQ(run.route, KILN_ROUTE_NATIVE) << rows << "x" << cols;
    EXPECT_EQ(run.wrong, 0u) << rows << "x" << cols;
  }
  // The same tensors again: the cached tensor map serves every launch, nothing is re-encoded.
  kiln_runtime_stats(r.rt, &before);
  long encodes_before = encodes();
  EXPECT_GE(encodes_before, 1L);
  PairSumRun again = run_pair_sum(cu, k, din, dout, 4096, 4096, 50);
  ASSERT_EQ(again.status, KILN_OK) << r.error();
  EXPECT_EQ(again.wrong, 0u);
  kiln_runtime_stats(r.rt, &after);
  EXPECT_EQ(encodes(), encodes_before);
  EXPECT_EQ(after.launches_native, before.launches_native + 50);
  std::printf("  7 sizes up to 4096x4096 exact; %ld tensor map encodes in all, none for 50 repeated launches\n",
              encodes());
  // A row stride the tensor map cannot take (cols = 6: 24 bytes) matches no shape: the reference.
  std::vector<std::string> calls;
  ASSERT_EQ(kiln_runtime_register_reference(r.rt, "tma_pair_sum", [](const kiln_call_info* info, void* const*, size_t, void*, void* user) {
    static_cast<std::vector<std::string>*>(user)->push_back(info->reason_text);
    return 0;
  }, &calls), KILN_OK);
  PairSumRun odd = run_pair_sum(cu, k, din, dout, 8, 6);
  EXPECT_EQ(odd.route, KILN_ROUTE_REFERENCE);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_NE(calls[0].find("where[0] 'cols % 4 == 0' does not hold"), std::string::npos) << calls[0];
}

// A launching thread need not have a CUDA context current (a fresh worker of an embedder does
// not): libkiln makes the device's own current for each driver call of a launch, the tensor
// map's host-side encode included, and leaves the thread as it found it.
TEST(Gpu, TensorMapKernelLaunchesFromAThreadWithNoCurrentContext) {
  REQUIRE_GPU();
  Runtime r;
  kiln_kernel* k = r.open_kernel("tma-pair-sum.kiln", 0, "tma_pair_sum");
  ASSERT_NE(k, nullptr) << r.error();
  if (kiln_kernel_route(k) != KILN_ROUTE_NATIVE) GTEST_SKIP() << kiln_kernel_reason_text(k);
  int rows = 70, cols = 100;
  std::vector<float> in(static_cast<size_t>(rows) * cols), got(in.size());
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i % 1000) / 4.0f;
  DeviceBuffer din{&cu}, dout{&cu};
  CU_OK(cu.cuMemAlloc(&din.ptr, in.size() * 4));
  CU_OK(cu.cuMemAlloc(&dout.ptr, in.size() * 4));
  CU_OK(cu.cuMemcpyHtoD(din.ptr, in.data(), in.size() * 4));
  CU_OK(cu.cuMemsetD8(dout.ptr, 0xff, in.size() * 4));
  CU_OK(cu.cuCtxSynchronize());
  kiln_status status = KILN_ERR_INTERNAL;
  CUcontext before = reinterpret_cast<CUcontext>(1), after = reinterpret_cast<CUcontext>(1);
  std::string error;
  std::thread worker([&] {
    cu.cuCtxGetCurrent(&before);
    void* args[] = {&din.ptr, &dout.ptr, &rows, &cols};
    status = kiln_kernel_launch(k, args, 4, nullptr, nullptr);
    if (status != KILN_OK) {
      char buf[2048] = {};
      kiln_last_error(buf, sizeof buf, nullptr);
      error = buf;
    }
    cu.cuCtxGetCurrent(&after);
  });
  worker.join();
  EXPECT_EQ(before, nullptr) << "the worker began with no current context";
  ASSERT_EQ(status, KILN_OK) << error;
  EXPECT_EQ(after, nullptr) << "libkiln left a context current on the worker";
  CU_OK(cu.cuCtxSynchronize());
  CU_OK(cu.cuMemcpyDtoH(got.data(), dout.ptr, got.size() * 4));
  size_t wrong = 0;
  for (int row = 0; row < rows; ++row) {
    for (int c = 0; c < cols; ++c) {
      size_t i = static_cast<size_t>(row) * cols + static_cast<size_t>(c);
      int p = c ^ 32;
      float want = in[i] + (p < cols ? in[static_cast<size_t>(row) * cols + static_cast<size_t>(p)] : 0.0f);
      wrong += std::memcmp(&got[i], &want, 4) != 0 ? 1 : 0;
    }
  }
  EXPECT_EQ(wrong, 0u);
}

// An embedder may run its work in a context of its own on the device (cuCtxCreate) rather than
// the primary one. A launch on a stream of that context runs there: libkiln passes the CUkernel,
// which the driver resolves in the stream's context, never the primary context's CUfunction that
// it keeps for the primary context's own streams (the driver refuses that one in another
// context). The NULL-stream launch first makes libkiln keep that function, so the second launch
// would take it if the stream rule were wrong.
TEST(Gpu, AStreamOfAnotherContextOfTheDeviceRunsTheKernelThere) {
  REQUIRE_GPU();
  Runtime r;
  kiln_kernel* k = r.open_kernel("matmul-relu.kiln");
  ASSERT_NE(k, nullptr) << r.error();
  ASSERT_EQ(kiln_kernel_route(k), KILN_ROUTE_NATIVE) << kiln_kernel_reason_text(k);
  MatmulRun primary = run_matmul(cu, k, 256, 256, 256, 77u);  // a shape the archive declares
  ASSERT_EQ(primary.status, KILN_OK) << r.error();
  ASSERT_EQ(primary.unwritten, 0u);

  // Not in libkiln's table (it never creates a context): the test binds what it needs itself.
  // cuCtxCreate_v2 is the CUDA 12 symbol, which driver 580 still exports (it ran there); CUDA
  // 13's cuda.h names cuCtxCreate_v4, tried with no creation parameters only where v2 is gone.
  void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(lib, nullptr) << "libcuda.so.1 is loaded by now";
  using CreateV2 = CUresult (*)(CUcontext*, unsigned, CUdevice);
  using CreateV4 = CUresult (*)(CUcontext*, void*, unsigned, CUdevice);
  auto create_v2 = reinterpret_cast<CreateV2>(::dlsym(lib, "cuCtxCreate_v2"));
  auto create_v4 = reinterpret_cast<CreateV4>(::dlsym(lib, "cuCtxCreate_v4"));
  auto destroy = reinterpret_cast<CUresult (*)(CUcontext)>(::dlsym(lib, "cuCtxDestroy_v2"));
  auto stream_create = reinterpret_cast<CUresult (*)(CUstream*, unsigned)>(::dlsym(lib, "cuStreamCreate"));
  auto stream_destroy = reinterpret_cast<CUresult (*)(CUstream)>(::dlsym(lib, "cuStreamDestroy_v2"));
  ::dlclose(lib);  // the driver stays loaded: libkiln and this test hold it
  ASSERT_TRUE((create_v2 != nullptr || create_v4 != nullptr) && destroy && stream_create && stream_destroy)
      << "libcuda.so.1 lacks one of cuCtxCreate_v2 (or _v4), cuCtxDestroy_v2, cuStreamCreate, cuStreamDestroy_v2";

  CUdevice dev = 0;
  CU_OK(cu.cuDeviceGet(&dev, 0));
  CUcontext primary_ctx = nullptr, own = nullptr;
  CU_OK(cu.cuCtxGetCurrent(&primary_ctx));
  CU_OK(create_v2 != nullptr ? create_v2(&own, 0, dev) : create_v4(&own, nullptr, 0, dev));  // now current
  ASSERT_NE(own, primary_ctx);
  CUstream stream = nullptr;
  CU_OK(stream_create(&stream, 0));
  int m = 256, n = 256, kk = 256;
  std::mt19937 rng(91u);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> a(static_cast<size_t>(m) * kk), b(static_cast<size_t>(kk) * n), c(static_cast<size_t>(m) * n);
  for (float& v : a) v = dist(rng);
  for (float& v : b) v = dist(rng);
  kiln_status status = KILN_ERR_INTERNAL;
  kiln_route route = KILN_ROUTE_REFUSED;
  CUcontext after = nullptr;
  std::string error;
  {
    DeviceBuffer da{&cu}, db{&cu}, dc{&cu};  // the own context's memory, freed while it is current
    CU_OK(cu.cuMemAlloc(&da.ptr, a.size() * 4));
    CU_OK(cu.cuMemAlloc(&db.ptr, b.size() * 4));
    CU_OK(cu.cuMemAlloc(&dc.ptr, c.size() * 4));
    CU_OK(cu.cuMemcpyHtoD(da.ptr, a.data(), a.size() * 4));
    CU_OK(cu.cuMemcpyHtoD(db.ptr, b.data(), b.size() * 4));
    CU_OK(cu.cuMemsetD8(dc.ptr, 0xff, c.size() * 4));
    void* args[] = {&da.ptr, &db.ptr, &dc.ptr, &m, &n, &kk};
    status = kiln_kernel_launch(k, args, 6, stream, &route);
    if (status != KILN_OK) {
      char buf[2048] = {};
      kiln_last_error(buf, sizeof buf, nullptr);
      error = buf;
    }
    cu.cuCtxGetCurrent(&after);
    if (status == KILN_OK) {
      CU_OK(cu.cuStreamSynchronize(stream));
      CU_OK(cu.cuMemcpyDtoH(c.data(), dc.ptr, c.size() * 4));
    }
  }
  EXPECT_EQ(stream_destroy(stream), CUDA_SUCCESS);
  EXPECT_EQ(destroy(own), CUDA_SUCCESS);
  cu.cuCtxSetCurrent(primary_ctx);
  ASSERT_EQ(status, KILN_OK) << error;
  EXPECT_EQ(route, KILN_ROUTE_NATIVE);
  EXPECT_EQ(after, own) << "libkiln left the embedder's context current";
  std::vector<double> ref = cpu_matmul_relu(a, b, m, n, kk);
  size_t wrong = 0;
  for (size_t i = 0; i < c.size(); ++i) wrong += !(std::fabs(c[i] - ref[i]) < 1e-4) ? 1 : 0;
  EXPECT_EQ(wrong, 0u) << "of " << c.size() << " outputs";
}

// scratch_roundtrip (tests/gpu/kernels): the kernel's scratch pointer comes from libkiln's pool,
// 1 KiB per program and 512-byte aligned; the result is right only if it is. Sizes grow (the
// pool's buffer with them) and shrink again (the grown buffer is reused).
TEST(Gpu, ScratchMemoryIsProvidedPerProgramAlignedAndGrown) {
  REQUIRE_GPU();
  Runtime r;
  kiln_kernel* k = r.open_kernel("scratch-roundtrip.kiln", 0, "scratch_roundtrip");
  ASSERT_NE(k, nullptr) << r.error();
  ASSERT_EQ(kiln_kernel_route(k), KILN_ROUTE_NATIVE) << kiln_kernel_reason_text(k);
  const int largest = 1 << 22;
  DeviceBuffer din{&cu}, dout{&cu};
  CU_OK(cu.cuMemAlloc(&din.ptr, largest * 4u));
  CU_OK(cu.cuMemAlloc(&dout.ptr, largest * 4u));
  std::vector<float> in(largest), got(largest);
  for (int i = 0; i < largest; ++i) in[static_cast<size_t>(i)] = static_cast<float>(i % 4093);
  CU_OK(cu.cuMemcpyHtoD(din.ptr, in.data(), in.size() * 4));
  for (int n : {256, 4096, 1 << 16, largest, 512}) {
    CU_OK(cu.cuMemsetD8(dout.ptr, 0xff, static_cast<size_t>(n) * 4));
    void* args[] = {&din.ptr, &dout.ptr, &n};
    kiln_route route = KILN_ROUTE_REFUSED;
    ASSERT_EQ(kiln_kernel_launch(k, args, 3, nullptr, &route), KILN_OK) << "n=" << n << ": " << r.error();
    EXPECT_EQ(route, KILN_ROUTE_NATIVE);
    CU_OK(cu.cuCtxSynchronize());
    CU_OK(cu.cuMemcpyDtoH(got.data(), dout.ptr, static_cast<size_t>(n) * 4));
    size_t wrong = 0;
    for (int i = 0; i < n; ++i) {
      int b = i / 256, t = i % 256;
      wrong += got[static_cast<size_t>(i)] != 2.0f * in[static_cast<size_t>(b * 256 + 255 - t)] ? 1 : 0;
    }
    EXPECT_EQ(wrong, 0u) << "n=" << n;
  }
  std::printf("  scratch: 5 sizes (256 .. 4M elements, 16 KiB of scratch per 16 programs, up to 16 MiB) exact\n");
}

}  // namespace

// Several GPUs in one process (nvidia-h200-x2): one archive opened once, the kernel resolved
// and warmed on every device (each in its own primary context), three threads per device
// launching at once, each on its own data; every result checked and every launch counted for its
// device (Prometheus kiln_device_launches_total).
TEST(Gpu, OneArchiveServesEveryDeviceFromSeveralThreadsAtOnce) {
  REQUIRE_GPU();
  int devices = 0;
  CU_OK(cu.cuDeviceGetCount(&devices));
  if (devices < 2) GTEST_SKIP() << "one CUDA device here; this test needs two or more (the device tool's nvidia-h200-x2)";
  Runtime r;
  ASSERT_EQ(r.status, KILN_OK);
  ASSERT_EQ(kiln_archive_open(r.rt, (kArchives + "/matmul-relu.kiln").c_str(), &r.archive), KILN_OK) << r.error();
  std::vector<kiln_kernel*> kernels(static_cast<size_t>(devices), nullptr);
  std::vector<CUcontext> contexts(static_cast<size_t>(devices), nullptr);
  for (int d = 0; d < devices; ++d) {
    ASSERT_EQ(kiln_archive_warm(r.archive, d), KILN_OK) << r.error();
    ASSERT_EQ(kiln_archive_get_kernel(r.archive, "matmul_relu", d, &kernels[static_cast<size_t>(d)]), KILN_OK);
    kiln_kernel* k = kernels[static_cast<size_t>(d)];
    ASSERT_EQ(kiln_kernel_route(k), KILN_ROUTE_NATIVE) << kiln_kernel_reason_text(k);
    std::string said = kiln_kernel_reason_text(k);
    EXPECT_NE(said.find("device " + std::to_string(d) + " '"), std::string::npos) << said;
    CUdevice dev = 0;
    CU_OK(cu.cuDeviceGet(&dev, d));
    CU_OK(cu.cuDevicePrimaryCtxRetain(&contexts[static_cast<size_t>(d)], dev));
  }
  const int per_device = 3, launches = 40, m = 192, n = 160, k = 96;
  std::vector<std::string> failures(static_cast<size_t>(devices * per_device));
  std::vector<std::thread> threads;
  for (int t = 0; t < devices * per_device; ++t) {
    threads.emplace_back([&, t] {
      const int d = t % devices;
      std::string& failed = failures[static_cast<size_t>(t)];
      if (cu.cuCtxSetCurrent(contexts[static_cast<size_t>(d)]) != CUDA_SUCCESS) return void(failed = "cuCtxSetCurrent");
      std::mt19937 rng(1000 + static_cast<unsigned>(t));
      std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
      std::vector<float> a(static_cast<size_t>(m) * k), b(static_cast<size_t>(k) * n), c(static_cast<size_t>(m) * n);
      for (float& v : a) v = dist(rng);
      for (float& v : b) v = dist(rng);
      DeviceBuffer da{&cu}, db{&cu}, dc{&cu};
      if (cu.cuMemAlloc(&da.ptr, a.size() * 4) || cu.cuMemAlloc(&db.ptr, b.size() * 4) ||
          cu.cuMemAlloc(&dc.ptr, c.size() * 4) || cu.cuMemcpyHtoD(da.ptr, a.data(), a.size() * 4) ||
          cu.cuMemcpyHtoD(db.ptr, b.data(), b.size() * 4)) {
        return void(failed = "allocating on device " + std::to_string(d));
      }
      int mm = m, nn = n, kk = k;
      void* args[] = {&da.ptr, &db.ptr, &dc.ptr, &mm, &nn, &kk};
      for (int i = 0; i < launches; ++i) {
        if (cu.cuMemsetD8(dc.ptr, 0xff, c.size() * 4)) return void(failed = "cuMemsetD8");
        kiln_route route = KILN_ROUTE_REFUSED;
        if (kiln_kernel_launch(kernels[static_cast<size_t>(d)], args, 6, nullptr, &route) != KILN_OK ||
            route != KILN_ROUTE_NATIVE) {
          return void(failed = "launch " + std::to_string(i) + " on device " + std::to_string(d) + ": " + r.error());
        }
      }
      if (cu.cuCtxSynchronize() || cu.cuMemcpyDtoH(c.data(), dc.ptr, c.size() * 4)) return void(failed = "sync/copy");
      std::vector<double> ref = cpu_matmul_relu(a, b, m, n, k);
      for (size_t i = 0; i < c.size(); ++i) {
        if (!(std::fabs(c[i] - ref[i]) <= 1e-3 + 1e-3 * std::fabs(ref[i]))) {
          return void(failed = "device " + std::to_string(d) + " thread " + std::to_string(t) + ": c[" +
                               std::to_string(i) + "] = " + std::to_string(c[i]) + ", expected " + std::to_string(ref[i]));
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (const std::string& f : failures) EXPECT_TRUE(f.empty()) << f;
  char prom[16384];
  ASSERT_EQ(kiln_runtime_stats_prometheus(r.rt, prom, sizeof prom, nullptr), KILN_OK);
  std::string text = prom;
  for (int d = 0; d < devices; ++d) {
    std::string line = "kiln_device_launches_total{device=\"" + std::to_string(d) + "\",route=\"native\"} " +
                       std::to_string(per_device * launches) + "\n";
    EXPECT_NE(text.find(line), std::string::npos) << line << "in\n" << text;
  }
  std::printf("%d devices, %d threads each, %d launches per thread: all native, all correct\n", devices, per_device, launches);
  for (int d = 0; d < devices; ++d) {
    CUdevice dev = 0;
    cu.cuDeviceGet(&dev, d);
    cu.cuDevicePrimaryCtxRelease(dev);
  }
}

// `kiln pull --device` fetches what libkiln's resolver, in its planning mode, says this host's
// GPUs' routes read. On a real device that must be exactly the code the device then loads: the
// plan judges on the index alone, the load on the driver.
TEST(Gpu, ASparsePullForThisHostPlansTheCodeTheDeviceLoads) {
  REQUIRE_GPU();
  (void)cu;
  kiln_runtime_options o;
  kiln_runtime_options_init(&o, sizeof o);
  o.trust_path = kTrust.c_str();
  kiln::engine::Runtime runtime(o);
  kiln::engine::Archive archive(runtime, kArchives + "/matmul-relu.kiln");
  std::vector<std::string> found;
  std::vector<std::size_t> planned = archive.code_for_host(&found);
  ASSERT_FALSE(found.empty());
  kiln::engine::Kernel* k = archive.kernel("matmul_relu", 0);
  ASSERT_TRUE(k->runs_on_device()) << k->reason_text();
  std::vector<std::string> paths;
  for (std::size_t i : planned) paths.push_back(archive.reader().entry(i).path);
  // One GPU kind on the host: the plan is that one code object.
  EXPECT_EQ(paths, std::vector<std::string>{k->code_path()}) << found.front();
}


