// A driver for profilers (perf record), not a benchmark: repeats libkiln's cold start — create
// a runtime, open and authenticate an archive, get one kernel (verify and load its code object),
// launch it once and synchronise, destroy — REPS times, and prints each phase's median. With
// --uncached the process-wide memo of verified signatures is cleared before every repetition,
// so each open pays the Ed25519 verification a first open pays.
//   kiln_open_profile ARCHIVE TRUST KERNEL REPS [--uncached]
// The kernel takes (pointer, int), as tests/bench/noop.cu does; ci/gpu-profile.sh runs it under
// perf on the GPU machine.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cuda_driver.hpp"
#include "kiln/kiln.h"
#include "verification_cache.hpp"

using namespace kiln::cuda;
using Clock = std::chrono::steady_clock;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

int fail(const char* what) {
  std::fprintf(stderr, "kiln_open_profile: %s\n", what);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5 || argc > 6 || (argc == 6 && std::strcmp(argv[5], "--uncached") != 0)) {
    return fail("usage: kiln_open_profile ARCHIVE TRUST KERNEL REPS [--uncached]");
  }
  const char *archive = argv[1], *trust = argv[2], *kernel_name = argv[3];
  const long reps = std::strtol(argv[4], nullptr, 10);
  const bool uncached = argc == 6;
  std::string why;
  bool no_device = false;
  const Driver* d = Driver::get("", &why, &no_device);
  if (d == nullptr) return fail(("no CUDA driver: " + why).c_str());
  const DriverApi& cu = d->api();
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  if (cu.cuDeviceGet(&dev, 0) != CUDA_SUCCESS || cu.cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS ||
      cu.cuCtxSetCurrent(ctx) != CUDA_SUCCESS) {
    return fail("CUDA initialisation failed");
  }
  CUdeviceptr out = 0;
  if (cu.cuMemAlloc(&out, 4) != CUDA_SUCCESS) return fail("cuMemAlloc failed");
  int value = 7;
  void* args[] = {&out, &value};
  std::vector<double> create, open, get, launch, destroy;
  auto us = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::micro>(b - a).count(); };
  for (long r = 0; r < reps; ++r) {
    if (uncached) kiln::clear_verification_cache();
    auto t0 = Clock::now();
    kiln_runtime_options o;
    kiln_runtime_options_init(&o, sizeof o);
    o.trust_path = trust;
    kiln_runtime* rt = nullptr;
    kiln_archive* a = nullptr;
    kiln_kernel* k = nullptr;
    if (kiln_runtime_create(&rt, &o) != KILN_OK) return fail("kiln_runtime_create failed");
    auto t1 = Clock::now();
    if (kiln_archive_open(rt, archive, &a) != KILN_OK) return fail("kiln_archive_open failed");
    auto t2 = Clock::now();
    if (kiln_archive_get_kernel(a, kernel_name, 0, &k) != KILN_OK || kiln_kernel_route(k) != KILN_ROUTE_NATIVE) {
      return fail("the kernel is not on the native route");
    }
    auto t3 = Clock::now();
    if (kiln_kernel_launch(k, args, 2, nullptr, nullptr) != KILN_OK || cu.cuCtxSynchronize() != CUDA_SUCCESS) {
      return fail("launch failed");
    }
    auto t4 = Clock::now();
    kiln_archive_destroy(a);
    kiln_runtime_destroy(rt);
    auto t5 = Clock::now();
    create.push_back(us(t0, t1));
    open.push_back(us(t1, t2));
    get.push_back(us(t2, t3));
    launch.push_back(us(t3, t4));
    destroy.push_back(us(t4, t5));
  }
  std::printf("%s, %ld repetitions%s; medians in us: create %.1f, open %.1f, get+load %.1f, launch+sync %.1f, destroy %.1f\n",
              archive, reps, uncached ? ", signature memo cleared each time" : "", median(create), median(open),
              median(get), median(launch), median(destroy));
  cu.cuMemFree(out);
  return 0;
}
