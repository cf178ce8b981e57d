// kiln_launch_ab: kiln_kernel_launch of two builds of libkiln (say, before and after a change)
// in one process, on one GPU: the plain no-op kernel of tests/bench/noop.cu (small-1.kiln, as
// tests/bench/run.sh makes it) and examples/cuda_tma_cluster's tensor-map + cluster + range-shape
// kernel (tma-pair-sum.kiln). Each build's loop of 2,000 launches alternates with the other's,
// which goes first alternating too, 31 times; medians. Both builds run in the primary context of
// device 0, so the buffers the second one allocates serve both.
//   kiln_launch_ab OLD_LIBKILN NEW_LIBKILN TRUST SMALL1_ARCHIVE TMA_ARCHIVE [NOOP_CUBIN]
// Each libkiln is dlopen()ed RTLD_LOCAL: two copies of the library, each with its own state.
// With NOOP_CUBIN (the cubin small-1.kiln holds for the device), the plain launch is also taken
// apart against the driver called directly, in the same rotation: cuLaunchKernel of the CUkernel
// (what kiln_runtime_bench's baseline does), the same after a cuCtxGetCurrent (what a launch
// that must run in the device's context asks first), and of the CUfunction cuKernelGetFunction
// gives for the primary context. It then prints what the driver does with a CUfunction and a
// CUkernel launched on the NULL stream from a thread with no current context and from one whose
// current context is another one of the same device.
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
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

// The driver, called directly: only what the plain launch's anatomy needs.
struct Raw {
  int (*ctx_get_current)(void**) = nullptr;
  int (*ctx_set_current)(void*) = nullptr;
  int (*ctx_create)(void**, unsigned, int) = nullptr;  // cuCtxCreate_v2: (pctx, flags, device)
  int (*primary_retain)(void**, int) = nullptr;
  int (*library_load_data)(void**, const void*, void*, void*, unsigned, void*, void*, unsigned) = nullptr;
  int (*library_get_kernel)(void**, void*, const char*) = nullptr;
  int (*kernel_get_function)(void**, void*) = nullptr;
  int (*launch)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*, void**,
                void**) = nullptr;
  int (*ctx_synchronize)() = nullptr;
  int (*memcpy_dtoh)(void*, unsigned long long, size_t) = nullptr;
  void* primary = nullptr;
  void* kernel = nullptr;
  void* function = nullptr;
};

template <class F>
void bind_raw(void* handle, const char* name, F* f) {
  *f = reinterpret_cast<F>(dlsym(handle, name));
  if (*f == nullptr) die(std::string("libcuda.so.1 has no ") + name);
}

Raw load_raw(const char* cubin_path) {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) die(dlerror());
  Raw r;
  bind_raw(h, "cuCtxGetCurrent", &r.ctx_get_current);
  bind_raw(h, "cuCtxSetCurrent", &r.ctx_set_current);
  bind_raw(h, "cuCtxCreate_v2", &r.ctx_create);
  bind_raw(h, "cuDevicePrimaryCtxRetain", &r.primary_retain);
  bind_raw(h, "cuLibraryLoadData", &r.library_load_data);
  bind_raw(h, "cuLibraryGetKernel", &r.library_get_kernel);
  bind_raw(h, "cuKernelGetFunction", &r.kernel_get_function);
  bind_raw(h, "cuLaunchKernel", &r.launch);
  bind_raw(h, "cuCtxSynchronize", &r.ctx_synchronize);
  bind_raw(h, "cuMemcpyDtoH_v2", &r.memcpy_dtoh);
  std::ifstream in(cubin_path, std::ios::binary);
  std::vector<char> cubin((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (cubin.empty()) die(std::string("cannot read ") + cubin_path);
  void* lib = nullptr;
  // kiln has initialised the driver; its calls leave no context current on this thread (they
  // push the primary one and pop it), so the primary context is made current here: the NULL-stream
  // launches below and cuKernelGetFunction run in the current context.
  auto check = [&](int status, const char* call) {
    if (status != 0) die(std::string(call) + " returned " + std::to_string(status) + " for " + cubin_path);
  };
  check(r.primary_retain(&r.primary, 0), "cuDevicePrimaryCtxRetain");
  check(r.ctx_set_current(r.primary), "cuCtxSetCurrent");
  check(r.library_load_data(&lib, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0), "cuLibraryLoadData");
  check(r.library_get_kernel(&r.kernel, lib, "noop"), "cuLibraryGetKernel");
  check(r.kernel_get_function(&r.function, r.kernel), "cuKernelGetFunction");
  return r;
}

// Where does a NULL-stream launch go when the launching thread's current context is not the
// kernel's? Each case launches noop(out, value) and reads `out` back in the primary context.
void context_semantics(Raw& r, unsigned long long out) {
  auto read_back = [&] {
    int got = 0;
    r.ctx_set_current(r.primary);
    r.ctx_synchronize();
    r.memcpy_dtoh(&got, out, sizeof got);
    return got;
  };
  auto report = [&](const char* what, void* f, int value, void* current, bool fresh_thread) {
    int launched = -1, synced = -1;
    void* args[] = {&out, &value};
    auto body = [&] {
      r.ctx_set_current(current);
      launched = r.launch(f, 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr);
      synced = r.ctx_synchronize();
    };
    if (fresh_thread) {
      std::thread t(body);
      t.join();
    } else {
      body();
    }
    int got = read_back();
    std::printf("  %-58s launch %d, sync %d, out %s\n", what, launched, synced, got == value ? "written" : "not written");
  };
  std::printf("NULL-stream launches outside the kernel's context (0 = CUDA_SUCCESS, 201 = INVALID_CONTEXT):\n");
  report("CUfunction, thread with no current context", r.function, 11, nullptr, true);
  report("CUkernel, thread with no current context", r.kernel, 12, nullptr, true);
  void* other = nullptr;
  if (r.ctx_create(&other, 0, 0) != 0) die("cuCtxCreate failed");
  report("CUfunction, another context of the device current", r.function, 13, other, false);
  report("CUkernel, another context of the device current", r.kernel, 14, other, false);
  report("CUfunction, the primary context current", r.function, 15, r.primary, false);
  r.ctx_set_current(r.primary);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6 && argc != 7) die("usage: kiln_launch_ab OLD_LIBKILN NEW_LIBKILN TRUST SMALL1_ARCHIVE TMA_ARCHIVE [NOOP_CUBIN]");
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
  if (argc == 7) {
    Raw raw = load_raw(argv[6]);
    // Five ways to launch the no-op, each loop in turn, the first of each round rotating.
    const char* names[5] = {"old kiln_kernel_launch", "new kiln_kernel_launch", "cuLaunchKernel(CUkernel)",
                            "cuCtxGetCurrent + cuLaunchKernel(CUkernel)", "cuLaunchKernel(CUfunction)"};
    std::vector<double> times[5];
    for (int r = 0; r <= reps; ++r) {
      for (int turn = 0; turn < 5; ++turn) {
        const int which = (r + turn) % 5;
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < launches; ++i) {
          int rc = 0;
          void* current = nullptr;
          switch (which) {
            case 0: case 1: rc = libs[which].launch(libs[which].noop, noop_args, 2, nullptr, nullptr); break;
            case 2: rc = raw.launch(raw.kernel, 1, 1, 1, 32, 1, 1, 0, nullptr, noop_args, nullptr); break;
            case 3:
              rc = raw.ctx_get_current(&current);
              if (rc == 0 && current == raw.primary) rc = raw.launch(raw.kernel, 1, 1, 1, 32, 1, 1, 0, nullptr, noop_args, nullptr);
              break;
            default: rc = raw.launch(raw.function, 1, 1, 1, 32, 1, 1, 0, nullptr, noop_args, nullptr); break;
          }
          if (rc != 0) die(std::string(names[which]) + " failed: " + std::to_string(rc));
        }
        double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / launches;
        if (raw.ctx_synchronize() != 0) die("synchronize failed");
        if (r > 0) times[which].push_back(us);
      }
    }
    std::printf("plain launch taken apart (medians of %d x %d, per launch):\n", reps, launches);
    for (int w = 0; w < 5; ++w) {
      std::printf("  %-44s %.3f us (%.3f of cuLaunchKernel(CUkernel))\n", names[w], median(times[w]),
                  median(times[w]) / median(times[2]));
    }
    context_semantics(raw, out);
  }
  return 0;
}
