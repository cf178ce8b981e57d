// libkiln against the raw CUDA driver on the same kernel, in the same run, on a GPU:
//   launch overhead  kiln_kernel_launch vs cuLaunchKernel (goal: within 2%)
//   cold start       open + verify + get + first launch + sync, uncached (the runtime made
//                    before, as the baseline makes its key before), vs what a
//                    program shipping signed cubins does: read the cubin, SHA-256 it, verify one
//                    Ed25519 signature over the digest (OpenSSL), cuLibraryLoadData, get, first
//                    launch, sync (goal: within 1.1x; CUDA initialisation excluded from both);
//                    and a second open in the same process (its signature already verified)
//                    against the same without the digest and the signature (reported)
//   scale            open + load one kernel of the largest big-N archive (5,000 kernels x 4
//                    targets, gigabytes) vs the 1-kernel one, interleaved, both uncached (goal:
//                    within 1.1x); the same for small-N
//   memory           resident memory added by open + get + first launch in a fresh process
//                    (kiln_runtime_bench --memory), heap and file-backed apart, against loading
//                    the same cubin with the raw driver in a fresh process
//   warm-up          kiln_archive_warm of a 100-kernel archive vs getting its kernels one by one
//   hot swap         p99.9 launch latency while the store switches archives vs quiet windows of
//                    the same length in the same process (goal: within 1.2x)
// usage: kiln_runtime_bench BENCH_DIR JSON_OUT   (BENCH_DIR as tests/bench/run.sh prepares it).
//        kiln_runtime_bench --memory kiln TRUST ARCHIVE KERNEL | --memory raw CUBIN ENTRY
//                                                (one fresh-process memory figure, a JSON line)
// Prints a table last and writes the same rows to JSON_OUT for tests/bench/report.py.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.hpp"
#include "cuda/cuda_driver.hpp"
#include "cuda/cuda_target.hpp"
#include "kiln/kiln.h"
#include "kiln_cold_start.hpp"
#include "signed_baseline.hpp"

using namespace kiln::cuda;
using Clock = std::chrono::steady_clock;

namespace {

using kiln_bench::median;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "runtime_bench: %s\n", what.c_str());
  std::exit(1);
}

void check(CUresult r, const char* what, const Driver* d) {
  if (r != CUDA_SUCCESS) die(std::string(what) + ": " + d->describe(r));
}

// The whole file, read once into a buffer sized once (bench_util.hpp).
std::vector<char> read_file(const std::string& path) {
  try {
    return kiln_bench::read_whole_file(path);
  } catch (const std::exception& e) {
    die(e.what());
  }
}

// Every kiln cold open starts uncached. This program links the C API statically (kiln_c_api,
// the sources of libkiln.so), so the memo it clears is the one its opens use; libkiln.so keeps
// its copy of kiln_core to itself.
void start_uncached() { kiln_bench::start_uncached(); }

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


// Archives named <shape>-<N>.kiln in `dir`: the largest N, or 0.
long largest_count(const std::string& dir, const std::string& shape) {
  long best = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::string f = e.path().filename().string();
    if (f.rfind(shape + "-", 0) == 0 && e.path().extension() == ".kiln") best = std::max(best, std::stol(f.substr(shape.size() + 1)));
  }
  return best;
}

double file_mib(const std::string& path) { return static_cast<double>(std::filesystem::file_size(path)) / (1 << 20); }

// The p-th percentile by nearest rank (p = 1: the largest) of sorted samples.
double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  auto rank = static_cast<std::size_t>(std::ceil(p * static_cast<double>(sorted.size())));
  return sorted[std::min(sorted.size(), std::max<std::size_t>(rank, 1)) - 1];
}

// Hot swap. One thread launches through a kiln_package without pause, as a server does. In the
// same process, the main thread alternates windows of the same wall-clock length kWindow: a quiet
// one (nothing else happens), then a switching one in which the store's active archive switches
// twice (the kiln CLI, as an operator would: `store activate`, then `store rollback`, each
// followed by kiln_package_reload) and the thread then sleeps out the rest of the window; kPairs
// pairs. kWindow is fixed, long enough for two switches (a CLI run plus a reload); a switching
// window that overran it is counted and named in the row. Each launch belongs to the window it
// started in. Goal: the 99.9th percentile launch while switching within 1.2x of quiet's.
void hot_swap(const std::string& dir, const std::string& trust, void** args, CUcontext ctx, std::vector<Row>& rows,
              const DriverApi& cu) {
  constexpr int kPairs = 10, kSwitchesPerWindow = 2;
  constexpr auto kWindow = std::chrono::milliseconds(150);
  std::ifstream in(dir + "/swap.digests");
  std::string first, second;
  in >> first >> second;
  const std::string store = dir + "/store";
  const char* kiln_env = std::getenv("KILN_BINARY");
  const std::string kiln = kiln_env != nullptr ? kiln_env : "kiln";
  kiln_runtime_options o;
  kiln_runtime_options_init(&o, sizeof o);
  o.trust_path = trust.c_str();
  kiln_runtime* rt = nullptr;
  kiln_package* pkg = nullptr;
  if (kiln_runtime_create(&rt, &o) != KILN_OK) die("kiln_runtime_create failed");
  if (kiln_package_open(rt, store.c_str(), "noop-1", 0, &pkg) != KILN_OK) die("kiln_package_open failed");
  enum Phase { kWarmUp, kQuiet, kSwitching, kStop };
  std::atomic<int> phase{kWarmUp};
  std::atomic<bool> failed{false};
  std::vector<double> quiet, switching;
  quiet.reserve(1 << 23);
  switching.reserve(1 << 23);
  std::thread launcher([&] {
    cu.cuCtxSetCurrent(ctx);
    for (long n = 1;; ++n) {
      int p = phase.load(std::memory_order_acquire);
      if (p == kStop) break;
      auto t0 = Clock::now();
      kiln_route route = KILN_ROUTE_REFUSED;
      kiln_status st = kiln_package_launch(pkg, "noop_00000", args, 2, nullptr, &route);
      double us = seconds_since(t0) * 1e6;
      if (st != KILN_OK || route != KILN_ROUTE_NATIVE) {
        failed = true;
        break;
      }
      if (p == kQuiet) quiet.push_back(us);
      if (p == kSwitching) switching.push_back(us);
      if (n % 256 == 0) cu.cuCtxSynchronize();  // keeps the launch queue from filling (not timed)
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the launcher's first launches, not counted
  int switches = 0, overran = 0;
  double longest_ms = 0;
  for (int pair = 0; pair < kPairs && !failed; ++pair) {
    auto start = Clock::now();
    phase = kQuiet;
    std::this_thread::sleep_until(start + kWindow);
    start = Clock::now();
    phase = kSwitching;
    for (int i = 0; i < kSwitchesPerWindow && !failed; ++i, ++switches) {
      const std::string& to = switches % 2 == 0 ? second : first;
      std::string command = switches == 0 ? kiln + " store activate " + to + " --store " + store
                                          : kiln + " store rollback noop-1 --to " + to + " --store " + store;
      if (std::system((command + " >/dev/null").c_str()) != 0) die("failed: " + command);
      int switched = 0;
      if (kiln_package_reload(pkg, &switched) != KILN_OK || !switched) die("reload did not switch");
    }
    double busy_ms = seconds_since(start) * 1e3;
    longest_ms = std::max(longest_ms, busy_ms);
    if (busy_ms > std::chrono::duration<double, std::milli>(kWindow).count()) ++overran;
    std::this_thread::sleep_until(start + kWindow);
  }
  phase = kStop;
  launcher.join();
  if (failed) die("a launch failed or left the native route during the switches");
  kiln_package_destroy(pkg);
  kiln_runtime_destroy(rt);
  std::sort(quiet.begin(), quiet.end());
  std::sort(switching.begin(), switching.end());
  const double window_ms = std::chrono::duration<double, std::milli>(kWindow).count();
  auto show = [](const char* what, const std::vector<double>& v) {
    std::printf("  %-9s %9zu launches: p50 %.2f, p99 %.2f, p99.9 %.2f, max %.1f us\n", what, v.size(), percentile(v, 0.5),
                percentile(v, 0.99), percentile(v, 0.999), percentile(v, 1.0));
  };
  std::printf("hot swap: %d pairs of %.0f ms windows, quiet then %d switches (%d in all; the slowest window's switches took %.1f ms, "
              "%d windows overran)\n", kPairs, window_ms, kSwitchesPerWindow, switches, longest_ms, overran);
  show("quiet", quiet);
  show("switching", switching);
  if (quiet.empty() || switching.empty()) die("hot swap: a population has no launch");
  std::string note = overran == 0 ? "" : " (" + std::to_string(overran) + " switching windows overran)";
  rows.push_back({"hot swap: p99.9 launch, switching vs quiet" + note, percentile(switching, 0.999),
                  percentile(quiet, 0.999), "us", "<= 1.20", 1.20});
  rows.push_back({"hot swap: slowest launch, switching vs quiet" + note, percentile(switching, 1.0), percentile(quiet, 1.0),
                  "us", "report", 0});
}

void write_json(const std::string& path, const char* device, const Driver* d, const std::vector<Row>& rows) {
  std::ofstream out(path);
  out << "{\"device\": \"" << device << "\", \"driver\": \"" << driver_version_text(d->version())
      << "\", \"cpu_model\": \"" << kiln_bench::cpu_model() << "\", \"date_utc\": \"" << kiln_bench::utc_now()
      << "\", \"rows\": [";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    out << (i ? ", " : "") << "{\"name\": \"" << r.name << "\", \"kiln\": " << r.kiln << ", \"baseline\": " << r.baseline
        << ", \"unit\": \"" << r.unit << "\", \"goal\": \"" << r.goal << "\", \"goal_ratio\": " << r.goal_ratio << "}";
  }
  out << "]}\n";
}

}  // namespace

// ---- Hopper launches: a tensor map, a 2x1x1 cluster and a range shape ----------------------
// kiln_kernel_launch of tma-pair-sum.kiln (examples/cuda_tma_cluster: the grid computed from the
// call, the CUtensorMap from the cache, cuLaunchKernelEx with the cluster attribute) against the
// same cubin launched by hand with cuLaunchKernelEx and a tensor map encoded once. Launches go
// in batches small enough that the GPU never backs the queue up: the figure is the host's cost.
// Also what one cuTensorMapEncodeTiled costs: what the cache saves each launch.
void hopper_launch(const std::string& trust, const std::string& archive, const std::string& cubin_path, const Driver* d,
                   std::vector<Row>& rows) {
  const DriverApi& cu = d->api();
  if (!cu.cuLaunchKernelEx || !cu.cuTensorMapEncodeTiled) die("the driver lacks cuLaunchKernelEx or cuTensorMapEncodeTiled");
  int rows_n = 32, cols_n = 64;  // one 2x1x1 cluster of 32x32 tiles: the kernel itself is tiny
  CUdeviceptr in = 0, out = 0;
  check(cu.cuMemAlloc(&in, 4096 * 4), "cuMemAlloc", d);
  check(cu.cuMemAlloc(&out, 4096 * 4), "cuMemAlloc", d);
  std::vector<char> cubin = read_file(cubin_path);
  CUlibrary lib = nullptr;
  CUkernel raw = nullptr;
  CUdevice dev = 0;
  check(cu.cuDeviceGet(&dev, 0), "cuDeviceGet", d);
  check(cu.cuLibraryLoadData(&lib, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0), "cuLibraryLoadData", d);
  check(cu.cuLibraryGetKernel(&raw, lib, "tma_pair_sum"), "cuLibraryGetKernel", d);
  check(cu.cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 69632, raw, dev), "cuKernelSetAttribute", d);
  CUtensorMap map{};
  unsigned long long dims[2] = {static_cast<unsigned long long>(cols_n), static_cast<unsigned long long>(rows_n)};
  unsigned long long strides[1] = {static_cast<unsigned long long>(cols_n) * 4};
  unsigned box[2] = {32, 32}, element_strides[2] = {1, 1};
  auto encode = [&] {
    return cu.cuTensorMapEncodeTiled(&map, 7 /* FLOAT32 */, 2, reinterpret_cast<void*>(in), dims, strides, box,
                                     element_strides, 0, 0, 0, 0);
  };
  check(encode(), "cuTensorMapEncodeTiled", d);
  CUlaunchAttribute cluster{};
  cluster.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  cluster.value.clusterDim.x = 2;
  cluster.value.clusterDim.y = cluster.value.clusterDim.z = 1;
  CUlaunchConfig config{2 * ((static_cast<unsigned>(cols_n) + 63) / 64), (static_cast<unsigned>(rows_n) + 31) / 32, 1,
                        256, 1, 1, 69632, nullptr, &cluster, 1};
  void* raw_args[] = {&map, &out, &rows_n, &cols_n};
  void* call_args[] = {&in, &out, &rows_n, &cols_n};
  Kiln k(trust, archive, "tma_pair_sum");
  const int launches = 256, reps = 41;
  auto raw_loop = [&] {
    for (int i = 0; i < launches; ++i) cu.cuLaunchKernelEx(&config, reinterpret_cast<CUfunction>(raw), raw_args, nullptr);
  };
  auto kiln_loop = [&] {
    for (int i = 0; i < launches; ++i) kiln_kernel_launch(k.kernel, call_args, 4, nullptr, nullptr);
  };
  std::vector<double> raw_t, kiln_t;
  raw_loop();
  kiln_loop();
  check(cu.cuCtxSynchronize(), "sync", d);
  for (int r = 0; r < reps; ++r) {
    for (int which = 0; which < 2; ++which) {
      auto t0 = Clock::now();
      which == 0 ? raw_loop() : kiln_loop();
      (which == 0 ? raw_t : kiln_t).push_back(seconds_since(t0) / launches * 1e6);
      check(cu.cuCtxSynchronize(), "sync", d);
    }
  }
  kiln_stats s{};
  s.size = sizeof s;
  kiln_runtime_stats(k.rt, &s);
  if (s.launches_native != static_cast<uint64_t>(launches) * (reps + 1)) die("tma_pair_sum launches were not all native");
  std::vector<double> encode_t;
  for (int r = 0; r < 15; ++r) {
    auto t0 = Clock::now();
    for (int i = 0; i < 1000; ++i) encode();
    encode_t.push_back(seconds_since(t0) / 1000 * 1e6);
  }
  std::printf("tensor map + cluster launch: raw cuLaunchKernelEx %.3f us, kiln %.3f us; cuTensorMapEncodeTiled %.3f us\n",
              median(raw_t), median(kiln_t), median(encode_t));
  rows.push_back({"launch overhead: tensor map+cluster+range shape vs cuLaunchKernelEx", median(kiln_t), median(raw_t), "us",
                  "<= 1.05", 1.05});
  rows.push_back({"cuTensorMapEncodeTiled per call (what the cache saves)", median(encode_t), median(raw_t), "us", "report", 0});
  cu.cuLibraryUnload(lib);
  cu.cuMemFree(in);
  cu.cuMemFree(out);
}

// The driver loaded and device 0's primary context made current: CUDA's own initialisation,
// which every figure here leaves out (kiln and the raw driver alike).
const Driver* init_cuda(CUdevice* dev, CUcontext* ctx) {
  std::string why;
  bool no_device = false;
  const Driver* d = Driver::get("", &why, &no_device);
  if (d == nullptr) die("no CUDA driver: " + why);
  const DriverApi& cu = d->api();
  check(cu.cuDeviceGet(dev, 0), "cuDeviceGet", d);
  check(cu.cuDevicePrimaryCtxRetain(ctx, *dev), "cuDevicePrimaryCtxRetain", d);
  check(cu.cuCtxSetCurrent(*ctx), "cuCtxSetCurrent", d);
  return d;
}

// ---- memory in a fresh process ---------------------------------------------------------------
// kiln_runtime_bench --memory kiln TRUST ARCHIVE KERNEL | --memory raw CUBIN ENTRY, run by
// fresh_memory as a fresh process (/proc/self/exe). CUDA is initialised first (driver, device,
// primary context, the kernel's output buffer) and, for kiln, the runtime created (its trust keys):
// neither is counted. Then the resident set is read (bench_util.hpp), the kernel opened, got
// (loaded) and launched once, the context synchronised, and the resident set read again with all
// of it still open; one JSON line. Nothing else is warmed up first: what the first open of a fresh
// process brings in (the allocator growing its arena, OpenSSL's and zstd's set-up, the code of
// libkiln and the driver run for the first time, the driver's module) is part of the figure, for
// kiln and the raw load alike.
int memory_mode(int argc, char** argv) {
  const std::string mode = argc > 2 ? argv[2] : "";
  if (!((mode == "kiln" && argc == 6) || (mode == "raw" && argc == 5))) {
    die("usage: kiln_runtime_bench --memory kiln TRUST ARCHIVE KERNEL | --memory raw CUBIN ENTRY");
  }
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  const Driver* d = init_cuda(&dev, &ctx);
  const DriverApi& cu = d->api();
  CUdeviceptr out = 0;
  check(cu.cuMemAlloc(&out, 4), "cuMemAlloc", d);
  int value = 7;
  void* args[] = {&out, &value};
  kiln_bench::Resident before, after;
  if (mode == "kiln") {
    kiln_runtime_options o;
    kiln_runtime_options_init(&o, sizeof o);
    o.trust_path = argv[3];
    kiln_runtime* rt = nullptr;
    kiln_archive* a = nullptr;
    kiln_kernel* k = nullptr;
    if (kiln_runtime_create(&rt, &o) != KILN_OK) die("kiln_runtime_create failed");
    before = kiln_bench::resident_now();
    if (kiln_archive_open(rt, argv[4], &a) != KILN_OK) die(std::string("open failed: ") + argv[4]);
    if (kiln_archive_get_kernel(a, argv[5], 0, &k) != KILN_OK || kiln_kernel_route(k) != KILN_ROUTE_NATIVE) die("get failed");
    if (kiln_kernel_launch(k, args, 2, nullptr, nullptr) != KILN_OK) die("launch failed");
    check(cu.cuCtxSynchronize(), "sync", d);
    after = kiln_bench::resident_now();
    kiln_archive_destroy(a);
    kiln_runtime_destroy(rt);
  } else {
    before = kiln_bench::resident_now();
    std::vector<char> cubin = read_file(argv[3]);
    CUlibrary lib = nullptr;
    CUkernel kernel = nullptr;
    check(cu.cuLibraryLoadData(&lib, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0), "load", d);
    check(cu.cuLibraryGetKernel(&kernel, lib, argv[4]), "get", d);
    check(cu.cuLaunchKernel(reinterpret_cast<CUfunction>(kernel), 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr), "launch", d);
    check(cu.cuCtxSynchronize(), "sync", d);
    after = kiln_bench::resident_now();
    cu.cuLibraryUnload(lib);
  }
  std::printf("{\"rss_kib\": %ld, \"anon_kib\": %ld, \"file_kib\": %ld}\n", after.rss_kib - before.rss_kib,
              after.anon_kib - before.anon_kib, after.file_kib() - before.file_kib());
  cu.cuMemFree(out);
  return 0;
}

struct MemoryFigure {
  double anon_kib = 0, file_kib = 0;
};

// One memory figure: the medians of 3 fresh processes running kiln_runtime_bench `args`.
MemoryFigure fresh_memory(const std::vector<std::string>& args) {
  std::vector<double> anon, file;
  for (int r = 0; r < 3; ++r) {
    std::vector<std::string> argv = {"kiln_runtime_bench"};
    argv.insert(argv.end(), args.begin(), args.end());
    try {
      std::string line = kiln_bench::run_fresh_process(argv);
      anon.push_back(kiln_bench::json_number(line, "anon_kib"));
      file.push_back(kiln_bench::json_number(line, "file_kib"));
    } catch (const std::exception& e) {
      die(std::string("memory: ") + e.what());
    }
  }
  return {median(anon), median(file)};
}

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "--memory") return memory_mode(argc, argv);  // first: nothing warmed up
  if (argc != 3) die("usage: kiln_runtime_bench BENCH_DIR JSON_OUT (or --memory ...: see the top of runtime_bench.cpp)");
  const std::string dir = argv[1], json_out = argv[2], trust = dir + "/test.pub";
  const std::string small1 = dir + "/scale/small-1.kiln", raw_cubin = dir + "/scale/small.sm_90a.cubin";
  // CUDA initialisation, excluded from every figure below: driver, device, primary context.
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  const Driver* d = init_cuda(&dev, &ctx);
  const DriverApi& cu = d->api();
  char name[128] = {};
  cu.cuDeviceGetName(name, sizeof name - 1, dev);
  CUdeviceptr out = 0;
  check(cu.cuMemAlloc(&out, 4), "cuMemAlloc", d);
  int value = 7;
  void* args[] = {&out, &value};
  std::vector<Row> rows;

  // ---- launch overhead ------------------------------------------------------------------
  {
    std::vector<char> cubin = read_file(raw_cubin);
    CUlibrary lib = nullptr;
    CUkernel raw = nullptr;
    check(cu.cuLibraryLoadData(&lib, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0), "cuLibraryLoadData", d);
    check(cu.cuLibraryGetKernel(&raw, lib, "noop"), "cuLibraryGetKernel", d);
    Kiln k(trust, small1, "noop_00000");
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
    // The baseline is what a competent engineer shipping signed cubins writes: read the cubin
    // (one read), SHA-256 it, verify one Ed25519 signature over that digest (signed_baseline.hpp:
    // key and signature made beforehand), cuLibraryLoadData, cuLibraryGetKernel, first launch,
    // synchronise.
    std::unique_ptr<kiln_bench::SignedBaseline> signer;
    try {
      signer = std::make_unique<kiln_bench::SignedBaseline>(read_file(raw_cubin));
    } catch (const std::exception& e) {
      die(e.what());
    }
    auto raw_once = [&](bool verify) {
      auto t0 = Clock::now();
      std::vector<char> cubin = read_file(raw_cubin);
      if (verify && !signer->verify(cubin)) die("the baseline's Ed25519 signature does not verify");
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
    // One kiln cold start (kiln_cold_start.hpp); its phases kept, the open + get + launch returned.
    // The runtime (its trust keys, read once per process by a server) is made outside the
    // timed region, as the baseline makes its trusted key once: its cost is the create phase.
    auto kiln_once = [&](const std::string& archive, const char* kernel, Phases* phases) {
      kiln_bench::ColdStartPhases p;
      try {
        p = kiln_bench::kiln_cold_start(trust, archive, kernel, args, 2, [&] { check(cu.cuCtxSynchronize(), "sync", d); });
      } catch (const std::exception& e) {
        die(e.what());
      }
      phases->create.push_back(p.create);
      phases->open.push_back(p.open);
      phases->get.push_back(p.get);
      phases->launch.push_back(p.launch);
      return p.timed() / 1e6;
    };
    // Each repetition: the signed baseline, kiln's first open (uncached), the plain baseline,
    // then kiln's second open of the same archive in the same process (its signature cached).
    std::vector<double> signed_t, plain_t, kiln_t, second_t;
    Phases one_phases, second_phases, discard;
    raw_once(true);
    raw_once(false);
    start_uncached();
    kiln_once(small1, "noop_00000", &discard);
    for (int r = 0; r < reps; ++r) {
      signed_t.push_back(raw_once(true) * 1e6);
      start_uncached();
      kiln_t.push_back(kiln_once(small1, "noop_00000", &one_phases) * 1e6);
      plain_t.push_back(raw_once(false) * 1e6);
      second_t.push_back(kiln_once(small1, "noop_00000", &second_phases) * 1e6);
    }
    auto print_phases = [](const char* what, const Phases& p) {
      std::printf("kiln %s phases, medians in us: create %.1f, open %.1f, get+load %.1f, launch+sync %.1f\n", what,
                  median(p.create), median(p.open), median(p.get), median(p.launch));
    };
    print_phases("cold start", one_phases);
    print_phases("second open", second_phases);
    std::printf("cold start: raw signed (read + SHA-256 + Ed25519 + load + launch) %.1f us, kiln %.1f us; raw plain %.1f us, "
                "kiln second open %.1f us (medians of %d)\n", median(signed_t), median(kiln_t), median(plain_t),
                median(second_t), reps);
    rows.push_back({"cold start: open+verify+get+first launch vs raw read+SHA-256+Ed25519+load", median(kiln_t),
                    median(signed_t), "us", "<= 1.10", 1.10});
    rows.push_back({"cold start, second open in the process (signature cached) vs raw read+load", median(second_t),
                    median(plain_t), "us", "report", 0});

    // ---- scale: the largest archive against the 1-kernel one, same kernel, same route ----
    // Interleaved (1-kernel, then N-kernel, in every repetition), each open uncached.
    for (const char* shape : {"small", "big"}) {
      long largest = largest_count(dir + "/scale", shape);
      if (largest <= 1) continue;
      const std::string one = dir + "/scale/" + shape + "-1.kiln", many = dir + "/scale/" + shape + "-" + std::to_string(largest) + ".kiln";
      char kernel[32];
      std::snprintf(kernel, sizeof kernel, "noop_%05ld", largest / 2);
      std::vector<double> one_t, many_t;
      start_uncached();
      kiln_once(one, "noop_00000", &discard);
      start_uncached();
      kiln_once(many, kernel, &discard);
      for (int r = 0; r < 11; ++r) {
        start_uncached();
        one_t.push_back(kiln_once(one, "noop_00000", &discard) * 1e6);
        start_uncached();
        many_t.push_back(kiln_once(many, kernel, &discard) * 1e6);
      }
      std::printf("scale (%s): 1 kernel %.1f us, %ld kernels (%.0f MiB) %.1f us (medians of 11)\n", shape, median(one_t),
                  largest, file_mib(many), median(many_t));
      rows.push_back({std::string("open+load one, GPU: ") + shape + "-" + std::to_string(largest) + " vs " + shape + "-1",
                      median(many_t), median(one_t), "us", "<= 1.10", 1.10});

      // Memory, each figure in fresh processes (kiln_runtime_bench --memory): what open + get +
      // first launch of that kernel adds, against the raw driver loading the same cubin.
      const std::string cubin = dir + "/scale/" + shape + ".sm_90a.cubin";
      MemoryFigure kiln_mem = fresh_memory({"--memory", "kiln", trust, many, kernel});
      MemoryFigure raw_mem = fresh_memory({"--memory", "raw", cubin, "noop"});
      std::printf("memory (%s-%ld, %.0f MiB), fresh process, medians of 3: kiln heap %.0f KiB, file-backed %.0f KiB; "
                  "raw cubin load heap %.0f KiB, file-backed %.0f KiB\n", shape, largest, file_mib(many), kiln_mem.anon_kib,
                  kiln_mem.file_kib, raw_mem.anon_kib, raw_mem.file_kib);
      const std::string label = std::string(shape) + "-" + std::to_string(largest);
      rows.push_back({"memory, GPU, fresh process: heap added by open+get+launch, " + label + " vs raw load",
                      kiln_mem.anon_kib, raw_mem.anon_kib, "KiB", "report", 0});
      rows.push_back({"memory, GPU, fresh process: file-backed added, " + label + " vs raw load", kiln_mem.file_kib,
                      raw_mem.file_kib, "KiB", "report", 0});
    }
  }

  // ---- warm-up: 100 kernels in parallel (kiln_archive_warm) vs one by one ---------------
  if (std::ifstream(dir + "/scale/small-100.kiln")) {
    const std::string archive = dir + "/scale/small-100.kiln";
    auto warm_once = [&](bool parallel) {
      kiln_runtime_options o;
      kiln_runtime_options_init(&o, sizeof o);
      o.trust_path = trust.c_str();
      kiln_runtime* rt = nullptr;
      kiln_archive* a = nullptr;
      if (kiln_runtime_create(&rt, &o) != KILN_OK || kiln_archive_open(rt, archive.c_str(), &a) != KILN_OK) die("open failed");
      auto t0 = Clock::now();
      if (parallel) {
        if (kiln_archive_warm(a, 0) != KILN_OK) die("warm failed");
      } else {
        for (std::size_t i = 0; i < kiln_archive_kernel_count(a); ++i) {
          kiln_kernel* k = nullptr;
          if (kiln_archive_get_kernel(a, kiln_archive_kernel_name(a, i), 0, &k) != KILN_OK) die("get failed");
        }
      }
      double t = seconds_since(t0) * 1e6;
      kiln_kernel* k = nullptr;
      if (kiln_archive_get_kernel(a, "noop_00050", 0, &k) != KILN_OK || kiln_kernel_route(k) != KILN_ROUTE_NATIVE) die("not warmed natively");
      kiln_archive_destroy(a);
      kiln_runtime_destroy(rt);
      return t;
    };
    std::vector<double> par, ser;
    warm_once(true);
    for (int r = 0; r < 7; ++r) {
      par.push_back(warm_once(true));
      ser.push_back(warm_once(false));
    }
    std::printf("warm-up of 100 kernels: parallel %.1f us, one by one %.1f us (medians of 7)\n", median(par), median(ser));
    rows.push_back({"warm-up 100 kernels: warm vs one by one", median(par), median(ser), "us", "< 1.00", 0.999});
  }

  // ---- hot swap: launch latency while the store switches archives -----------------------
  if (std::ifstream(dir + "/swap.digests")) hot_swap(dir, trust, args, ctx, rows, cu);

  // ---- Hopper launches (where the bench folder holds the TMA archive and its cubin) -----------
  if (std::ifstream(dir + "/tma-pair-sum.kiln") && std::ifstream(dir + "/tma_pair_sum.sm_90a.cubin")) {
    hopper_launch(trust, dir + "/tma-pair-sum.kiln", dir + "/tma_pair_sum.sm_90a.cubin", d, rows);
  }

  cu.cuMemFree(out);
  std::printf("\nkiln runtime benchmark on %s (driver %s), %s\n", name, driver_version_text(d->version()).c_str(),
              "CUDA initialisation excluded");
  std::printf("%-78s %12s %12s %8s %8s %s\n", "benchmark", "kiln", "baseline", "ratio", "goal", "");
  for (const Row& r : rows) {
    double ratio = r.kiln / r.baseline;
    std::printf("%-78s %9.2f %-3s %9.2f %-3s %8.3f %8s %s\n", r.name.c_str(), r.kiln, r.unit.c_str(), r.baseline,
                r.unit.c_str(), ratio, r.goal.c_str(), r.goal_ratio <= 0 ? "" : ratio <= r.goal_ratio ? "met" : "MISSED");
  }
  write_json(json_out, name, d, rows);
  return 0;
}
