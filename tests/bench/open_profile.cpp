// A driver for profilers (perf record), not a benchmark: repeats libkiln's cold start — create
// a runtime, open and authenticate an archive, get one kernel (verify and load its code object),
// launch it once and synchronise, destroy — REPS times, and prints each phase's median. With
// --uncached the process-wide memo of verified signatures is cleared before every repetition,
// so each open pays the Ed25519 verification a first open pays.
//   kiln_open_profile ARCHIVE TRUST KERNEL REPS [--uncached]
// The kernel takes (pointer, int), as tests/bench/noop.cu does; ci/gpu-profile.sh runs it under
// perf on the GPU machine.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/verification_cache.hpp"
#include "cuda/cuda_driver.hpp"
#include "kiln/kiln.h"
#include "kiln_cold_start.hpp"

using namespace kiln::cuda;

using kiln_bench::median;

namespace {

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
  for (long r = 0; r < reps; ++r) {
    if (uncached) kiln::clear_verification_cache();
    kiln_bench::ColdStartPhases p;
    try {
      p = kiln_bench::kiln_cold_start(trust, archive, kernel_name, args, 2, [&] {
        if (cu.cuCtxSynchronize() != CUDA_SUCCESS) throw std::runtime_error("cuCtxSynchronize failed");
      });
    } catch (const std::exception& e) {
      return fail(e.what());
    }
    create.push_back(p.create);
    open.push_back(p.open);
    get.push_back(p.get);
    launch.push_back(p.launch);
    destroy.push_back(p.destroy);
  }
  std::printf("%s, %ld repetitions%s; medians in us: create %.1f, open %.1f, get+load %.1f, launch+sync %.1f, destroy %.1f\n",
              archive, reps, uncached ? ", signature memo cleared each time" : "", median(create), median(open),
              median(get), median(launch), median(destroy));
  cu.cuMemFree(out);
  return 0;
}
