// kiln_launch_ab: kiln_kernel_launch of two builds of libkiln (say, before and after a change)
// in one process, on one GPU: the plain no-op kernel of tests/bench/noop.cu (small-1.kiln, as
// tests/bench/run.sh makes it) and examples/cuda_tma_cluster's tensor-map + cluster + range-shape
// kernel (tma-pair-sum.kiln). Each build's loop of 2,000 launches alternates with the other's,
// which goes first alternating too, 31 times; medians. Both builds run in the primary context of
// device 0, so the buffers the second one allocates serve both.
//   kiln_launch_ab OLD_LIBKILN NEW_LIBKILN TRUST SMALL1_ARCHIVE TMA_ARCHIVE
// Each libkiln is dlopen()ed RTLD_LOCAL: two copies of the library, each with its own state.
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "kiln/kiln_experimental.h"

namespace {

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "kiln_launch_ab: %s\n", what.c_str());
  std::exit(1);
}

struct Lib {
  std::string path;
  decltype(&kiln_runtime_options_init) options_init = nullptr;
  decltype(&kiln_runtime_create) create = nullptr;
  decltype(&kiln_archive_open) open = nullptr;
  decltype(&kiln_archive_get_kernel) get = nullptr;
  decltype(&kiln_kernel_route) route = nullptr;
  decltype(&kiln_kernel_launch) launch = nullptr;
  decltype(&kiln_x_device_alloc) alloc = nullptr;
  decltype(&kiln_x_device_synchronize) sync = nullptr;
  kiln_runtime* rt = nullptr;
  kiln_kernel* noop = nullptr;
  kiln_kernel* tma = nullptr;
};

template <class F>
void bind(void* handle, const Lib& lib, const char* name, F* f) {
  *f = reinterpret_cast<F>(dlsym(handle, name));
  if (*f == nullptr) die(lib.path + " has no " + name);
}

Lib load(const char* path, const char* trust, const char* small1, const char* tma) {
  Lib l;
  l.path = path;
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) die(dlerror());
  bind(h, l, "kiln_runtime_options_init", &l.options_init);
  bind(h, l, "kiln_runtime_create", &l.create);
  bind(h, l, "kiln_archive_open", &l.open);
  bind(h, l, "kiln_archive_get_kernel", &l.get);
  bind(h, l, "kiln_kernel_route", &l.route);
  bind(h, l, "kiln_kernel_launch", &l.launch);
  bind(h, l, "kiln_x_device_alloc", &l.alloc);
  bind(h, l, "kiln_x_device_synchronize", &l.sync);
  kiln_runtime_options o;
  l.options_init(&o, sizeof o);
  o.trust_path = trust;
  kiln_archive *a = nullptr, *b = nullptr;
  if (l.create(&l.rt, &o) != KILN_OK || l.open(l.rt, small1, &a) != KILN_OK ||
      l.get(a, "noop_00000", 0, &l.noop) != KILN_OK || l.open(l.rt, tma, &b) != KILN_OK ||
      l.get(b, "tma_pair_sum", 0, &l.tma) != KILN_OK) {
    die(l.path + ": could not open the archives and get both kernels");
  }
  if (l.route(l.noop) != KILN_ROUTE_NATIVE || l.route(l.tma) != KILN_ROUTE_NATIVE) {
    die(l.path + ": a kernel is not on the native route (no GPU, or not an sm_90 one?)");
  }
  return l;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) die("usage: kiln_launch_ab OLD_LIBKILN NEW_LIBKILN TRUST SMALL1_ARCHIVE TMA_ARCHIVE");
  Lib libs[2] = {load(argv[1], argv[3], argv[4], argv[5]), load(argv[2], argv[3], argv[4], argv[5])};
  uint64_t out = 0, in = 0, tma_out = 0;
  if (libs[1].alloc(libs[1].noop, 4096, &out) != KILN_OK || libs[1].alloc(libs[1].tma, 4096 * 4, &in) != KILN_OK ||
      libs[1].alloc(libs[1].tma, 4096 * 4, &tma_out) != KILN_OK) {
    die("device allocation failed");
  }
  int value = 7, rows = 32, cols = 64;  // one 2x1x1 cluster of 32x32 tiles, as kiln_runtime_bench
  void* noop_args[] = {&out, &value};
  void* tma_args[] = {&in, &tma_out, &rows, &cols};
  const int launches = 2000, reps = 31;
  for (int kind = 0; kind < 2; ++kind) {
    std::vector<double> times[2];
    for (int r = 0; r <= reps; ++r) {  // round 0 warms both up and is not counted
      for (int turn = 0; turn < 2; ++turn) {
        const int which = (r + turn) % 2;
        Lib& l = libs[which];
        kiln_kernel* k = kind == 0 ? l.noop : l.tma;
        void** args = kind == 0 ? noop_args : tma_args;
        const size_t count = kind == 0 ? 2 : 4;
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < launches; ++i) {
          if (l.launch(k, args, count, nullptr, nullptr) != KILN_OK) die(l.path + ": a launch failed");
        }
        double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / launches;
        if (l.sync(k) != KILN_OK) die(l.path + ": synchronize failed");
        if (r > 0) times[which].push_back(us);
      }
    }
    std::printf("%s launch: old %.3f us, new %.3f us, new/old %.3f (medians of %d x %d)\n", kind == 0 ? "plain " : "hopper",
                median(times[0]), median(times[1]), median(times[1]) / median(times[0]), reps, launches);
  }
  return 0;
}
