// The host-side half of kiln's benchmark harness (Google Benchmark). Every kiln figure has its
// baseline registered beside it, measured in the same run on the same bytes:
//   open+load-one/SHAPE/kernels:N  open + authenticate + read one code member of an archive of N
//                                  kernels (against N = 1, and against reading that code object
//                                  from a plain file); resident memory added (counter rss_kib)
//                                  against the index, kernel table and member read (bound_kib)
//   verify-in-process/SHAPE/kernels:N  full verification on one thread, for the curves
//   verify/threads:T               `kiln verify -j T` against `openssl dgst -sha256`, same file
//   pack/threads:T                 `kiln pack -l L -j T` against `zstd -L -T T` on the same bytes
//   shape-match/range/...          the per-launch match of a range shape (ranges, where, seven
//                                  launch expressions) against the fixed-point match it replaces
//                                  (shape-match/fixed/shapes:N, the call matching the last of N);
//                                  needs no BENCH_DIR files
//   (shape-match rows alternate two calls, so the per-thread memo of the last match never answers,
//   except ...-repeated-call, where it does)
//   kernel-args/...                the per-launch building of a kernel's own parameters
//                                  (examples/cuda_tma_cluster: a cached tensor map and three
//                                  pass-throughs) against passing the call as it is; the driver's
//                                  encode is stood in for by a 128-byte copy (the H200 figure of
//                                  the real one is kiln_runtime_bench's); needs no BENCH_DIR files
// usage: kiln_bench BENCH_DIR [google benchmark flags]
// BENCH_DIR is what tests/bench/run.sh prepares: scale/{small,big}-N.kiln (N kernels x 4 code
// objects), verify.kiln, pack/ (a kiln.toml and its files) and pack.concat (the same bytes as one
// file), and test.pub. The GPU half is kiln_runtime_bench.
#include <benchmark/benchmark.h>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "archive_reader.hpp"
#include "kernel_abi.hpp"
#include "manifest.hpp"
#include "shape_match.hpp"
#include "trust.hpp"

extern char** environ;

namespace {

namespace fs = std::filesystem;
std::string bench_dir;

// Resident set in KiB from /proc/self/smaps_rollup: `Rss` (file-backed pages of the mapping
// included: a member that was read counts) or `Anonymous` (the process's own heap). On kernels
// with large page-cache folios, touching one byte of a mapped file maps its whole folio, so the
// file-backed part depends on how the page cache holds the archive; the heap part does not.
long smaps_kib(const char* key) {
  std::ifstream rollup("/proc/self/smaps_rollup");
  std::string field;
  long value = 0;
  while (rollup >> field) {
    if (field == key) {
      rollup >> value;
      return value;
    }
  }
  return -1;
}

// Drops the archive's pages from this process's view between iterations is not possible
// without root, so memory is measured on the first open only (cold mapping), and time as the
// median of warm-cache iterations, for kiln and its baseline alike.
void open_load_one(benchmark::State& state, const std::string& archive, const std::string& member) {
  kiln::TrustSet trust = kiln::TrustSet::load(bench_dir + "/test.pub");
  kiln::ReadOptions options;
  options.policy = kiln::TrustPolicy{&trust, 1};
  long rss_added = -1, anon_added = -1;
  double bound_kib = 0;
  for (auto _ : state) {
    const bool first = rss_added < 0;  // memory is read on the first iteration only (reading it costs)
    long before = first ? smaps_kib("Rss:") : 0, anon_before = first ? smaps_kib("Anonymous:") : 0;
    std::unique_ptr<kiln::Archive> a = kiln::Archive::open_file(archive, options);
    std::vector<std::uint8_t> code = a->read_member(member);
    benchmark::DoNotOptimize(code.data());
    if (first) {
      rss_added = smaps_kib("Rss:") - before;
      anon_added = smaps_kib("Anonymous:") - anon_before;
      // Through the lazy lookup, not index(): decoding every page here would inflate the
      // resident set of the next measurement (freed heap stays resident).
      double stored = static_cast<double>(a->entry(static_cast<std::size_t>(a->find(member))).stored_size);
      bound_kib = (static_cast<double>(a->header().index_size) + stored + static_cast<double>(code.size()) +
                   static_cast<double>(a->kernel_table().bytes().size())) / 1024.0;
    }
  }
  state.counters["rss_kib"] = static_cast<double>(rss_added);
  state.counters["anon_kib"] = static_cast<double>(anon_added);
  state.counters["bound_kib"] = bound_kib;
  state.counters["archive_mib"] = static_cast<double>(fs::file_size(archive)) / (1 << 20);
}

// Full verification in-process on one thread (what `kiln verify -j 1` does after start-up),
// for the curve of verify time against archive size and kernel count.
void verify_in_process(benchmark::State& state, const std::string& archive) {
  kiln::TrustSet trust = kiln::TrustSet::load(bench_dir + "/test.pub");
  kiln::ReadOptions options;
  options.policy = kiln::TrustPolicy{&trust, 1};
  for (auto _ : state) {
    std::unique_ptr<kiln::Archive> a = kiln::Archive::open_file(archive, options);
    a->verify_all(1, false, nullptr);
  }
  state.counters["archive_mib"] = static_cast<double>(fs::file_size(archive)) / (1 << 20);
}

// The baseline of a load: the code object read from its own file, as a program that ships
// bare cubins does before handing them to the driver.
void read_plain_file(benchmark::State& state, const std::string& path) {
  for (auto _ : state) {
    std::ifstream in(path, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    benchmark::DoNotOptimize(bytes.data());
  }
}

// Runs a command to completion, output discarded; a failure fails the benchmark (a baseline
// that did not run must not produce a ratio).
void run_command(benchmark::State& state, const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  int status = 0;
  if (rc != 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    state.SkipWithError(("command failed: " + argv[0] + " " + (argv.size() > 1 ? argv[1] : "")).c_str());
  }
}

void command_benchmark(benchmark::State& state, std::vector<std::string> argv) {
  for (auto _ : state) run_command(state, argv);
}

std::string kiln_binary() {
  const char* env = std::getenv("KILN_BINARY");
  return env != nullptr ? env : "kiln";
}

void register_scale(const std::string& shape) {
  // Archives named <shape>-<kernels>.kiln; the member read is the middle kernel's sm_90a cubin.
  std::vector<std::pair<long, fs::path>> found;
  for (const fs::directory_entry& e : fs::directory_iterator(bench_dir + "/scale")) {
    std::string name = e.path().filename().string();
    if (name.rfind(shape + "-", 0) == 0 && e.path().extension() == ".kiln") {
      found.emplace_back(std::stol(name.substr(shape.size() + 1)), e.path());
    }
  }
  std::sort(found.begin(), found.end());
  for (const auto& [kernels, path] : found) {
    char member[64];
    std::snprintf(member, sizeof member, "code/noop.%05ld.sm_90a.cubin", kernels / 2);
    std::string label = "open+load-one/" + shape + "/kernels:" + std::to_string(kernels);
    benchmark::RegisterBenchmark(label.c_str(), open_load_one, path.string(), std::string(member))
        ->Unit(benchmark::kMicrosecond)->MinTime(0.2);
    benchmark::RegisterBenchmark(("verify-in-process/" + shape + "/kernels:" + std::to_string(kernels)).c_str(),
                                 verify_in_process, path.string())
        ->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.2);
  }
  std::string plain = bench_dir + "/scale/" + shape + ".sm_90a.cubin";
  if (fs::exists(plain)) {
    benchmark::RegisterBenchmark(("read-plain-cubin/" + shape).c_str(), read_plain_file, plain)
        ->Unit(benchmark::kMicrosecond)->MinTime(0.2);
  }
}

void register_commands() {
  const std::string kiln = kiln_binary(), dir = bench_dir;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  std::vector<unsigned> threads;
  for (unsigned t = 1; t <= cores; t *= 2) threads.push_back(t);
  if (threads.back() != cores) threads.push_back(cores);
  const int level = 9;
  if (fs::exists(dir + "/verify.kiln")) {
    benchmark::RegisterBenchmark("verify/openssl-dgst-sha256", command_benchmark,
                                 std::vector<std::string>{"openssl", "dgst", "-sha256", dir + "/verify.kiln"})
        ->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);
    for (unsigned t : threads) {
      benchmark::RegisterBenchmark(("verify/kiln/threads:" + std::to_string(t)).c_str(), command_benchmark,
                                   std::vector<std::string>{kiln, "verify", dir + "/verify.kiln", "--trust",
                                                            dir + "/test.pub", "-j", std::to_string(t)})
          ->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);
    }
  }
  if (fs::exists(dir + "/pack/kiln.toml")) {
    for (unsigned t : threads) {
      std::string ts = std::to_string(t);
      benchmark::RegisterBenchmark(("pack/zstd/threads:" + ts).c_str(), command_benchmark,
                                   std::vector<std::string>{"zstd", "-q", "-f", "-" + std::to_string(level), "-T" + ts,
                                                            dir + "/pack.concat", "-o", dir + "/pack.concat.zst"})
          ->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);
      benchmark::RegisterBenchmark(("pack/kiln/threads:" + ts).c_str(), command_benchmark,
                                   std::vector<std::string>{kiln, "pack", dir + "/pack/kiln.toml", "--key",
                                                            dir + "/test.key", "-o", dir + "/pack.out.kiln", "-l",
                                                            std::to_string(level), "-j", ts, "-q"})
          ->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);
    }
  }
}

}  // namespace

// ---- shape matching: what every launch pays to find its shape ------------------------------
namespace {

// A matmul-like kernel: a, m, n, k. `shapes` is its [[kernel.shape]] text.
kiln::KernelSpec shape_kernel(const std::string& shapes) {
  std::string text = "[package]\nname = \"bench\"\nkernel_revision = \"1\"\nsequence = 1\n[[kernel]]\nname = \"mm\"\n"
                     "entry = \"mm\"\nbackend = \"cuda\"\nparams = [{ name = \"a\", type = \"ptr\", dtype = \"f32\" }, "
                     "{ name = \"m\", type = \"i32\" }, { name = \"n\", type = \"i32\" }, { name = \"k\", type = \"i32\" }]\n"
                     "code = [{ arch = \"compute_90\", file = \"k.ptx\" }]\n" + shapes;
  return kiln::parse_manifest(text, "bench.toml").kernels[0];
}

// Calls alternate between m and m2: each call differs from the one before, so the per-thread
// memo of the last match never answers and the shapes are evaluated every time. With m2 == m
// the call repeats (a server serving one batch size) and the memo answers.
void run_match(benchmark::State& state, const kiln::KernelSpec& kernel, std::int32_t m, std::int32_t m2) {
  kiln::engine::ShapeTable table(kernel);
  float a = 0;
  std::int32_t mv = m, n = 4096, k = 4096;
  void* args[] = {&a, &mv, &n, &k};
  kiln::LaunchConfig config;
  for (auto _ : state) {
    mv = mv == m ? m2 : m;
    benchmark::DoNotOptimize(args);
    const kiln::ShapeProgram* hit = table.match(args, &config);
    if (hit == nullptr) state.SkipWithError("no shape matched");
    benchmark::DoNotOptimize(config);
  }
}

void BM_shape_match_fixed(benchmark::State& state) {
  std::string shapes;
  auto count = static_cast<int>(state.range(0));
  for (int i = 1; i <= count; ++i) {
    shapes += "[[kernel.shape]]\nname = \"m" + std::to_string(16 * i) + "\"\nvalues = { m = " + std::to_string(16 * i) +
              ", n = 4096, k = 4096 }\ngrid = [32, " + std::to_string(i) + ", 1]\nblock = [256]\nshared_mem = 65536\n";
  }
  // The last two declared shapes (the one shape twice when there is one: a repeated call).
  run_match(state, shape_kernel(shapes), 16 * count, 16 * (count > 1 ? count - 1 : count));
}
BENCHMARK(BM_shape_match_fixed)->Name("shape-match/fixed/shapes")->Arg(1)->Arg(64)->Arg(512);

const char* kAnyM =
    "[[kernel.shape]]\nname = \"any_m\"\nranges = { m = [1, 8192] }\nvalues = { n = 4096, k = 4096 }\n"
    "where = [\"m % 16 == 0\"]\ngrid = [\"cdiv(n, 128)\", \"cdiv(m, 128)\", 1]\nblock = [256, 1, 1]\n"
    "shared_mem = \"min(65536, 1024 * cdiv(k, 64))\"\n";

void BM_shape_match_range(benchmark::State& state) { run_match(state, shape_kernel(kAnyM), 4096, 4080); }
BENCHMARK(BM_shape_match_range)->Name("shape-match/range/one-shape");
void BM_shape_match_range_repeated(benchmark::State& state) { run_match(state, shape_kernel(kAnyM), 4096, 4096); }
BENCHMARK(BM_shape_match_range_repeated)->Name("shape-match/range/one-shape-repeated-call");

// A small-M specialisation declared first, which the call (m = 4096) falls through.
void BM_shape_match_range_second(benchmark::State& state) {
  std::string small = "[[kernel.shape]]\nname = \"small_m\"\nranges = { m = [1, 64] }\nvalues = { n = 4096, k = 4096 }\n"
                      "grid = [\"cdiv(n, 128)\", 1]\nblock = [128]\n";
  run_match(state, shape_kernel(small + kAnyM), 4096, 4080);
}
BENCHMARK(BM_shape_match_range_second)->Name("shape-match/range/second-of-two");

}  // namespace

// ---- kernel args: what every launch of a kernel with kernel_args pays to build them ----------
namespace {

// Stands in for the driver: "encodes" by copying 128 bytes, allocates nothing. The launch path's
// own work is what is timed; the driver's is measured on the GPU (kiln_runtime_bench).
class HostOnlyCode final : public kiln::engine::Code {
 public:
  int launch(const kiln::LaunchConfig&, void*, void**) const override { return 0; }
  int encode_tensor_map(const kiln::TensorMapRequest& r, void* out) const override {
    std::memset(out, static_cast<int>(r.address & 0xff), kiln::kTensorMapBytes);
    return 0;
  }
  int scratch(std::size_t, std::uint64_t, std::uint32_t, void*, std::uint64_t* address) const override {
    *address = 0;
    return 0;
  }
};

const char* kTmaKernel = R"TOML([package]
name = "bench"
kernel_revision = "1"
sequence = 1
[[kernel]]
name = "tma_pair_sum"
entry = "tma_pair_sum"
backend = "cuda"
params = [
  { name = "in", type = "ptr", dtype = "f32", access = "read" },
  { name = "out", type = "ptr", dtype = "f32", access = "write" },
  { name = "rows", type = "i32" },
  { name = "cols", type = "i32" },
]
kernel_args = [
  { name = "in_map", tensor_map = { pointer = "in", dims = ["cols", "rows"], strides = ["cols * 4"], box = [32, 32] } },
  "out",
  "rows",
  "cols",
]
code = [{ arch = "sm_90a", file = "k.cubin" }]
[[kernel.shape]]
name = "any"
ranges = { rows = [1, 4096], cols = [4, 4096] }
where = ["cols % 4 == 0"]
grid = ["2 * cdiv(cols, 64)", "cdiv(rows, 32)", 1]
block = [256, 1, 1]
shared_mem = 69632
cluster = [2, 1, 1]
)TOML";

void BM_kernel_args(benchmark::State& state) {
  kiln::KernelSpec kernel = kiln::parse_manifest(kTmaKernel, "bench.toml").kernels[0];
  kiln::engine::ShapeTable shapes(kernel);
  kiln::engine::KernelAbi abi(kernel);
  HostOnlyCode code;
  std::uint64_t in = 0x7f0000000000ull, out = 0x7f0000100000ull;
  std::int32_t rows = 32, cols = 64;
  void* args[] = {&in, &out, &rows, &cols};
  kiln::engine::KernelAbi::Frame frame;
  kiln::LaunchConfig config;
  const bool build = state.range(0) >= 1, alternate = state.range(0) == 2;
  for (auto _ : state) {
    if (alternate) rows = rows == 32 ? 64 : 32;  // two tensor maps, both cached; no memo hit
    benchmark::DoNotOptimize(args);
    if (shapes.match(args, &config) == nullptr) state.SkipWithError("no shape matched");
    if (build) abi.build(args, config, nullptr, code, nullptr, &frame);
    benchmark::DoNotOptimize(frame.args[0]);
    benchmark::DoNotOptimize(config);
  }
}
BENCHMARK(BM_kernel_args)->Name("kernel-args/tma-cluster-range/match-only")->Arg(0);
BENCHMARK(BM_kernel_args)->Name("kernel-args/tma-cluster-range/match+build")->Arg(1);
BENCHMARK(BM_kernel_args)->Name("kernel-args/tma-cluster-range/match+build-alternating-calls")->Arg(2);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (argc != 2) {
    std::fprintf(stderr, "usage: kiln_bench BENCH_DIR [--benchmark_* flags]\n");
    return 2;
  }
  bench_dir = argv[1];
  if (fs::exists(bench_dir + "/scale")) {
    register_scale("small");
    register_scale("big");
  }
  register_commands();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
