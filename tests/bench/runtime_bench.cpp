// libkiln against the raw CUDA driver on the same kernel, in the same run, on a GPU:
//   launch overhead  kiln_kernel_launch vs cuLaunchKernel (goal: within 2%)
//   cold start       open + verify + get + first launch vs read cubin + load + launch
//                    (goal: within 1.1x; CUDA initialisation excluded from both)
//   scale            open + load one kernel from a 3,000-kernel archive vs a 1-kernel one
//                    (goal: within 1.2x)
// usage: kiln_runtime_bench BENCH_DIR TRUSTED_KEY   (BENCH_DIR holds noop-1.kiln,
// noop-3000.kiln and noop.sm_90a.cubin, as the build makes them). Prints a table last.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "cuda_driver.hpp"
#include "cuda_target.hpp"
#include "kiln/kiln.h"

using namespace kiln::cuda;
using Clock = std::chrono::steady_clock;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "runtime_bench: %s\n", what.c_str());
  std::exit(1);
}

void check(CUresult r, const char* what, const Driver* d) {
  if (r != CUDA_SUCCESS) die(std::string(what) + ": " + d->describe(r));
}

std::vector<char> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) die("cannot read " + path);
  return std::vector<char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

struct Kiln {
  kiln_runtime* rt = nullptr;
  kiln_archive* archive = nullptr;
  kiln_kernel* kernel = nullptr;
  Kiln(const std::string& trust, const std::string& path, const char* kernel_name) {
    kiln_runtime_options o;
    kiln_runtime_options_init(&o, sizeof o);
    o.trust_path = trust.c_str();
    if (kiln_runtime_create(&rt, &o) != KILN_OK) die("kiln_runtime_create failed");
    if (kiln_archive_open(rt, path.c_str(), &archive) != KILN_OK) die("kiln_archive_open failed: " + error());
    if (kiln_archive_get_kernel(archive, kernel_name, 0, &kernel) != KILN_OK) die("get_kernel failed: " + error());
    if (kiln_kernel_route(kernel) != KILN_ROUTE_NATIVE) die(std::string("not native: ") + kiln_kernel_reason_text(kernel));
  }
  ~Kiln() {
    kiln_archive_destroy(archive);
    kiln_runtime_destroy(rt);
  }
  std::string error() const {
    char buf[2048];
    kiln_runtime_last_error(rt, buf, sizeof buf, nullptr);
    return buf;
  }
};

struct Row {
  std::string name;
  double kiln, baseline;
  std::string unit, goal;
  double goal_ratio;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) die("usage: kiln_runtime_bench BENCH_DIR TRUSTED_KEY");
  const std::string dir = argv[1], trust = argv[2];
  std::string why;
  bool no_device = false;
  const Driver* d = Driver::get("", &why, &no_device);
  if (d == nullptr) die("no CUDA driver: " + why);
  const DriverApi& cu = d->api();
  // CUDA initialisation, excluded from every figure below: driver, device, primary context.
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  check(cu.cuDeviceGet(&dev, 0), "cuDeviceGet", d);
  check(cu.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain", d);
  check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent", d);
  char name[128] = {};
  cu.cuDeviceGetName(name, sizeof name - 1, dev);
  CUdeviceptr out = 0;
  check(cu.cuMemAlloc(&out, 4), "cuMemAlloc", d);
  int value = 7;
  void* args[] = {&out, &value};
  std::vector<Row> rows;

  // ---- launch overhead ------------------------------------------------------------------
  {
    std::vector<char> cubin = read_file(dir + "/noop.sm_90a.cubin");
    CUlibrary lib = nullptr;
    CUkernel raw = nullptr;
    check(cu.cuLibraryLoadData(&lib, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0), "cuLibraryLoadData", d);
    check(cu.cuLibraryGetKernel(&raw, lib, "noop"), "cuLibraryGetKernel", d);
    Kiln k(trust, dir + "/noop-1.kiln", "noop_00000");
    const int launches = 5000, reps = 15;
    auto raw_loop = [&] {
      for (int i = 0; i < launches; ++i) {
        cu.cuLaunchKernel(reinterpret_cast<CUfunction>(raw), 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr);
      }
    };
    auto kiln_loop = [&] {
      for (int i = 0; i < launches; ++i) kiln_kernel_launch(k.kernel, args, 2, nullptr, nullptr);
    };
    std::vector<double> raw_t, kiln_t, drain_t;
    raw_loop();
    kiln_loop();
    check(cu.cuCtxSynchronize(), "sync", d);
    for (int r = 0; r < reps; ++r) {  // interleaved, so drift in clocks hits both alike
      for (int which = 0; which < 2; ++which) {
        auto t0 = Clock::now();
        which == 0 ? raw_loop() : kiln_loop();
        double enqueue = seconds_since(t0);
        auto t1 = Clock::now();
        check(cu.cuCtxSynchronize(), "sync", d);
        drain_t.push_back(seconds_since(t1));
        (which == 0 ? raw_t : kiln_t).push_back(enqueue / launches * 1e6);
      }
    }
    kiln_stats s{};
    s.size = sizeof s;
    kiln_runtime_stats(k.rt, &s);
    if (s.launches_native < static_cast<uint64_t>(launches) * (reps + 1)) die("kiln launches were not all native");
    std::printf("launch: raw %.3f us, kiln %.3f us per launch (median of %d x %d); GPU drain after a loop %.1f us\n",
                median(raw_t), median(kiln_t), reps, launches, median(drain_t) * 1e6);
    rows.push_back({"launch overhead, per launch", median(kiln_t), median(raw_t), "us", "<= 1.02", 1.02});
    cu.cuLibraryUnload(lib);
  }

  // ---- cold start -----------------------------------------------------------------------
  {
    const int reps = 21;
    auto raw_once = [&] {
      auto t0 = Clock::now();
      std::vector<char> cubin = read_file(dir + "/noop.sm_90a.cubin");
      CUlibrary lib = nullptr;
      CUkernel kernel = nullptr;
      check(cu.cuLibraryLoadData(&lib, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0), "load", d);
      check(cu.cuLibraryGetKernel(&kernel, lib, "noop"), "get", d);
      check(cu.cuLaunchKernel(reinterpret_cast<CUfunction>(kernel), 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr), "launch", d);
      check(cu.cuCtxSynchronize(), "sync", d);
      double t = seconds_since(t0);
      cu.cuLibraryUnload(lib);
      return t;
    };
    // Phases of one kiln cold start, to show where the time goes: create (trust keys),
    // open (map, hash the index, check the signature, read the kernel table), get (verify
    // and load the code object), first launch and synchronise.
    struct Phases {
      std::vector<double> create, open, get, launch;
    };
    Phases one_phases, many_phases;
    auto kiln_once = [&](const std::string& archive, const char* kernel, Phases* phases) {
      auto t0 = Clock::now();
      kiln_runtime_options o;
      kiln_runtime_options_init(&o, sizeof o);
      o.trust_path = trust.c_str();
      kiln_runtime* rt = nullptr;
      kiln_archive* a = nullptr;
      kiln_kernel* k = nullptr;
      if (kiln_runtime_create(&rt, &o) != KILN_OK) die("kiln_runtime_create failed");
      auto t1 = Clock::now();
      if (kiln_archive_open(rt, archive.c_str(), &a) != KILN_OK) die("open failed");
      auto t2 = Clock::now();
      if (kiln_archive_get_kernel(a, kernel, 0, &k) != KILN_OK || kiln_kernel_route(k) != KILN_ROUTE_NATIVE) die("get failed");
      auto t3 = Clock::now();
      if (kiln_kernel_launch(k, args, 2, nullptr, nullptr) != KILN_OK) die("launch failed");
      check(cu.cuCtxSynchronize(), "sync", d);
      auto t4 = Clock::now();
      kiln_archive_destroy(a);
      kiln_runtime_destroy(rt);
      auto us = [](Clock::time_point x, Clock::time_point y) { return std::chrono::duration<double, std::micro>(y - x).count(); };
      phases->create.push_back(us(t0, t1));
      phases->open.push_back(us(t1, t2));
      phases->get.push_back(us(t2, t3));
      phases->launch.push_back(us(t3, t4));
      return std::chrono::duration<double>(t4 - t0).count();
    };
    std::vector<double> raw_t, kiln_t, one_t, many_t;
    Phases discard;
    raw_once();
    kiln_once(dir + "/noop-1.kiln", "noop_00000", &discard);
    kiln_once(dir + "/noop-3000.kiln", "noop_01500", &discard);
    for (int r = 0; r < reps; ++r) {
      raw_t.push_back(raw_once() * 1e6);
      kiln_t.push_back(kiln_once(dir + "/noop-1.kiln", "noop_00000", &one_phases) * 1e6);
      many_t.push_back(kiln_once(dir + "/noop-3000.kiln", "noop_01500", &many_phases) * 1e6);
    }
    for (auto [label, p] : {std::pair<const char*, Phases*>{"1 kernel", &one_phases}, {"3000 kernels", &many_phases}}) {
      std::printf("kiln cold start phases (%s), medians in us: create %.1f, open %.1f, get+load %.1f, launch+sync %.1f\n",
                  label, median(p->create), median(p->open), median(p->get), median(p->launch));
    }
    one_t = kiln_t;
    std::printf("cold start: raw %.1f us, kiln (1 kernel) %.1f us, kiln (3000 kernels) %.1f us (medians of %d)\n",
                median(raw_t), median(kiln_t), median(many_t), reps);
    rows.push_back({"cold start: open+verify+get+first launch", median(kiln_t), median(raw_t), "us", "<= 1.10", 1.10});
    rows.push_back({"open+load one of 3000 kernels vs of 1", median(many_t), median(one_t), "us", "<= 1.20", 1.20});
  }

  cu.cuMemFree(out);
  std::printf("\nkiln runtime benchmark on %s (driver %s), %s\n", name, driver_version_text(d->version()).c_str(),
              "CUDA initialisation excluded");
  std::printf("%-44s %12s %12s %8s %8s %s\n", "benchmark", "kiln", "baseline", "ratio", "goal", "");
  for (const Row& r : rows) {
    double ratio = r.kiln / r.baseline;
    std::printf("%-44s %9.2f %-2s %9.2f %-2s %8.3f %8s %s\n", r.name.c_str(), r.kiln, r.unit.c_str(), r.baseline,
                r.unit.c_str(), ratio, r.goal.c_str(), ratio <= r.goal_ratio ? "met" : "MISSED");
  }
  return 0;
}
