// Where the two sides of the cold-start row spend their time, phase by phase, in the same
// interleaving as kiln_runtime_bench's cold start (raw signed, kiln uncached, raw plain, kiln
// with its signature memo kept: one of each per repetition), so that cache and driver state
// are what that row sees. A diagnostic for the write-up, not a goal: every figure is a median.
//   kiln_cold_anatomy ARCHIVE TRUST KERNEL CUBIN ENTRY REPS
// ARCHIVE holds KERNEL, whose native code for this GPU is CUBIN (entry ENTRY), taking (pointer,
// int) as tests/bench/noop.cu does. Then the driver calls libkiln makes that the raw chain does
// not (device queries and the primary context's reference, once per runtime; the context
// check around a load and a launch) are timed one by one, warm, 2,000 calls each; and the load
// itself with and without the JIT log options libkiln passes, alternately, 1,001 loads each.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "cuda/cuda_driver.hpp"
#include "kiln/kiln.h"
#include "kiln_cold_start.hpp"
#include "signed_baseline.hpp"

using namespace kiln::cuda;
using Clock = std::chrono::steady_clock;

namespace {

using kiln_bench::median;

double us(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::micro>(b - a).count(); }

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "kiln_cold_anatomy: %s\n", what.c_str());
  std::exit(1);
}

void check(CUresult r, const char* what, const Driver* d) {
  if (r != CUDA_SUCCESS) die(std::string(what) + ": " + d->describe(r));
}

struct Phases {
  std::vector<double> read, verify, load, launch, total;   // raw
  std::vector<double> open, get, driver_load, launch_kiln;  // kiln (get includes driver_load)
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7) die("usage: kiln_cold_anatomy ARCHIVE TRUST KERNEL CUBIN ENTRY REPS");
  const std::string archive = argv[1], trust = argv[2], kernel_name = argv[3], cubin_path = argv[4], entry = argv[5];
  const long reps = std::strtol(argv[6], nullptr, 10);
  std::string why;
  bool no_device = false;
  const Driver* d = Driver::get("", &why, &no_device);
  if (d == nullptr) die("no CUDA driver: " + why);
  const DriverApi& cu = d->api();
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  check(cu.cuDeviceGet(&dev, 0), "cuDeviceGet", d);
  check(cu.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain", d);
  check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent", d);
  CUdeviceptr out = 0;
  check(cu.cuMemAlloc(&out, 4), "cuMemAlloc", d);
  int value = 7;
  void* args[] = {&out, &value};

  // The raw side's key and signature, made once beforehand (signed_baseline.hpp, as
  // kiln_runtime_bench's cold start does).
  std::unique_ptr<kiln_bench::SignedBaseline> signer;
  try {
    signer = std::make_unique<kiln_bench::SignedBaseline>(kiln_bench::read_whole_file(cubin_path));
  } catch (const std::exception& e) {
    die(e.what());
  }

  auto raw_once = [&](bool verify, Phases* p) {
    auto t0 = Clock::now();
    std::vector<char> cubin = kiln_bench::read_whole_file(cubin_path);
    auto t1 = Clock::now();
    if (verify && !signer->verify(cubin)) die("the raw side's signature does not verify");
    auto t2 = Clock::now();
    CUlibrary lib = nullptr;
    CUkernel kernel = nullptr;
    check(cu.cuLibraryLoadData(&lib, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0), "load", d);
    check(cu.cuLibraryGetKernel(&kernel, lib, entry.c_str()), "get", d);
    auto t3 = Clock::now();
    check(cu.cuLaunchKernel(reinterpret_cast<CUfunction>(kernel), 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr), "launch", d);
    check(cu.cuCtxSynchronize(), "sync", d);
    auto t4 = Clock::now();
    cu.cuLibraryUnload(lib);
    p->read.push_back(us(t0, t1));
    p->verify.push_back(us(t1, t2));
    p->load.push_back(us(t2, t3));
    p->launch.push_back(us(t3, t4));
    p->total.push_back(us(t0, t4));
  };
  auto kiln_once = [&](bool uncached, Phases* p) {
    if (uncached) kiln_bench::start_uncached();
    kiln_bench::ColdStartPhases c;
    try {
      c = kiln_bench::kiln_cold_start(trust, archive, kernel_name.c_str(), args, 2,
                                      [&] { check(cu.cuCtxSynchronize(), "sync", d); });
    } catch (const std::exception& e) {
      die(e.what());
    }
    p->open.push_back(c.open);
    p->get.push_back(c.get);
    p->driver_load.push_back(c.driver_load);
    p->launch_kiln.push_back(c.launch);
    p->total.push_back(c.timed());
  };

  Phases raw_signed, raw_plain, kiln_cold, kiln_second, discard;
  raw_once(true, &discard);
  kiln_once(true, &discard);
  for (long r = 0; r < reps; ++r) {
    raw_once(true, &raw_signed);
    kiln_once(true, &kiln_cold);
    raw_once(false, &raw_plain);
    kiln_once(false, &kiln_second);
  }
  std::printf("cold start, phase medians in us over %ld interleaved repetitions\n", reps);
  auto raw_row = [](const char* name, const Phases& p) {
    std::printf("  %-22s total %7.1f = read %6.1f + digest+Ed25519 %6.1f + load+get %6.1f + launch+sync %6.1f\n", name,
                median(p.total), median(p.read), median(p.verify), median(p.load), median(p.launch));
  };
  auto kiln_row = [](const char* name, const Phases& p) {
    std::vector<double> rest;
    for (std::size_t i = 0; i < p.get.size(); ++i) rest.push_back(p.get[i] - p.driver_load[i]);
    std::printf("  %-22s total %7.1f = open %6.1f + get %6.1f (driver load %6.1f, kiln %6.1f) + launch+sync %6.1f\n", name,
                median(p.total), median(p.open), median(p.get), median(p.driver_load), median(rest),
                median(p.launch_kiln));
  };
  raw_row("raw signed", raw_signed);
  kiln_row("kiln, memo cleared", kiln_cold);
  raw_row("raw plain", raw_plain);
  kiln_row("kiln, memo kept", kiln_second);

  // The driver calls libkiln adds to the raw chain, each timed warm.
  auto per_call = [](const std::function<void()>& call) {
    std::vector<double> t;
    for (int r = 0; r < 9; ++r) {
      auto t0 = Clock::now();
      for (int i = 0; i < 2000; ++i) call();
      t.push_back(us(t0, Clock::now()) / 2000);
    }
    return median(t);
  };
  int count = 0, attribute = 0;
  char name[256];
  CUdevice handle = 0;
  CUcontext current = nullptr, popped = nullptr;
  std::printf("driver calls libkiln makes beyond the raw chain, us per call (warm)\n");
  std::printf("  cuDeviceGetCount %.3f, cuDeviceGet %.3f, cuDeviceGetAttribute %.3f, cuDeviceGetName %.3f\n",
              per_call([&] { cu.cuDeviceGetCount(&count); }), per_call([&] { cu.cuDeviceGet(&handle, 0); }),
              per_call([&] { cu.cuDeviceGetAttribute(&attribute, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev); }),
              per_call([&] { cu.cuDeviceGetName(name, sizeof name - 1, dev); }));
  std::printf("  cuDevicePrimaryCtxRetain + Release %.3f, cuCtxGetCurrent %.3f, cuCtxPushCurrent + Pop %.3f\n",
              per_call([&] {
                CUcontext c = nullptr;
                cu.cuDevicePrimaryCtxRetain(&c, dev);
                cu.cuDevicePrimaryCtxRelease(dev);
              }),
              per_call([&] { cu.cuCtxGetCurrent(&current); }), per_call([&] {
                cu.cuCtxPushCurrent(ctx);
                cu.cuCtxPopCurrent(&popped);
              }));
  // The load as the raw chain makes it (no options) and as libkiln does (a JIT error log), one of
  // each in turn; load + get + unload timed, as the cold start's get pays for the first two.
  {
    const std::vector<char> cubin = kiln_bench::read_whole_file(cubin_path);
    std::vector<char> log(16384);
    int options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void* values[] = {log.data(), reinterpret_cast<void*>(static_cast<std::uintptr_t>(log.size() - 1))};
    std::vector<double> plain, with_log;
    for (int i = 0; i < 1001; ++i) {
      for (bool jit_log : {false, true}) {
        CUlibrary lib = nullptr;
        CUkernel kernel = nullptr;
        auto t0 = Clock::now();
        check(jit_log ? cu.cuLibraryLoadData(&lib, cubin.data(), options, values, 2, nullptr, nullptr, 0)
                      : cu.cuLibraryLoadData(&lib, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0),
              "load", d);
        check(cu.cuLibraryGetKernel(&kernel, lib, entry.c_str()), "get", d);
        (jit_log ? with_log : plain).push_back(us(t0, Clock::now()));
        cu.cuLibraryUnload(lib);
      }
    }
    std::printf("cuLibraryLoadData + cuLibraryGetKernel of the cubin, us (median of 1,001 each, alternating): "
                "no options %.2f, with the JIT error log options %.2f\n", median(plain), median(with_log));
  }
  cu.cuMemFree(out);
  return 0;
}
