// The host-side half of kiln's benchmark harness (Google Benchmark). Every kiln figure has its
// baseline registered beside it, measured in the same run on the same bytes:
//   open+load-one/SHAPE/kernels:N  open + authenticate + load one kernel (its record and its
//                                  sm_90a code member) of an archive of N kernels, uncached: the
//                                  curve against kernel count
//   open+load-one-pair/SHAPE/kernels:N  the same for the N-kernel archive and the 1-kernel one,
//                                  alternating within every iteration, both uncached (counters
//                                  many_us and one_us): the scale goal
//   read-plain-cubin/SHAPE         that code object read from its own file (open, fstat, one
//                                  read, close): what a program shipping bare cubins does
//   memory/SHAPE/kernels:N         resident memory added by open + load one kernel in a fresh
//                                  process (kiln_bench --memory, below): heap (heap_kib: malloc's
//                                  mappings, the mean over 16 heap phases; anon_kib: all
//                                  anonymous memory) and file-backed (file_kib) apart, against
//                                  what the reader has to hold (bound_kib); the time of this row
//                                  is the spawns, not a figure
//   verify-in-process/SHAPE/kernels:N  full verification on one thread, for the curves
//   verify-pair/threads:1          `kiln verify -j 1` and `openssl dgst -sha256` in turn, same file
//   verify/kiln/threads:T          `kiln verify -j T` (T > 1), against that openssl
//   pack-pair/threads:T            `kiln pack -l L -j T` against `zstd -L -T T` on the same bytes,
//                                  the two in turn in each repetition (counters kiln_ms, baseline_ms)
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
// Every timed benchmark runs repeatedly (9 repetitions; the commands and full verifications 3)
// and the figure is the MEDIAN of the repetitions (Google Benchmark's `_median` aggregate, which
// tests/bench/report.py reads; each repetition is itself a mean over its iterations). Nothing
// reads memory inside a timed loop: memory is measured in fresh processes only.
// usage: kiln_bench BENCH_DIR [google benchmark flags]
//        kiln_bench --memory TRUST ARCHIVE KERNEL MEMBER [PHASE]   (what the memory rows run)
// BENCH_DIR is what tests/bench/run.sh prepares: scale/{small,big}-N.kiln (N kernels x 4 code
// objects), verify.kiln, pack/ (a kiln.toml and its files) and pack.concat (the same bytes as one
// file), and test.pub. The GPU half is kiln_runtime_bench.
#include <benchmark/benchmark.h>

#include <fcntl.h>
#include <malloc.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.hpp"
#include "core/archive_reader.hpp"
#include "core/kernel_table.hpp"
#include "core/manifest.hpp"
#include "core/trust.hpp"
#include "engine/kernel_abi.hpp"
#include "engine/shape_match.hpp"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
std::string bench_dir;
constexpr int kRepetitions = 9;      // timed benchmarks: the median of 9
constexpr int kSlowRepetitions = 3;  // commands and full verifications (seconds each): the median of 3

// Repeated, the console showing the aggregates (mean, median, stddev, cv); the JSON file keeps
// every repetition too, so that report.py sees a repetition that failed.
benchmark::internal::Benchmark* repeated(benchmark::internal::Benchmark* b, int repetitions = kRepetitions) {
  return b->Repetitions(repetitions)->DisplayAggregatesOnly(true);
}

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// The record's copy of the entry of its code member `member` (FORMAT.md §4.1), or null where
// the record carries none (an older kernel table).
const kiln::format::Entry* code_copy(const kiln::KernelSpec& spec, const std::string& member) {
  for (const kiln::CodeObjectRef& c : spec.code) {
    if (c.file.path == member && c.member) return &*c.member;
  }
  return nullptr;
}

// The kernel's code member, as the runtime reads it: through the record's copy of its entry
// where there is one, else looked up in the index.
std::vector<std::uint8_t> read_code(const kiln::ArchiveReader& a, const kiln::KernelSpec& spec, const std::string& member) {
  const kiln::format::Entry* copy = code_copy(spec, member);
  return copy != nullptr ? a.read_member(*copy) : a.read_member(member);
}

// Loads one kernel as the runtime does: opens (and authenticates) the archive, reads the kernel's
// record and its code member.
void load_one(const std::string& archive, const std::string& kernel, const std::string& member,
              const kiln::ReadOptions& options) {
  std::unique_ptr<kiln::ArchiveReader> a = kiln::ArchiveReader::open_file(archive, options);
  kiln::KernelSpec spec = a->kernel(kernel);
  std::vector<std::uint8_t> code = read_code(*a, spec, member);
  benchmark::DoNotOptimize(spec);
  benchmark::DoNotOptimize(code.data());
}

// Open + load one kernel, uncached, timed alone (the verification cache cleared outside the timed
// part of each iteration). Time only: memory is measured by memory_fresh_process.
void open_load_one(benchmark::State& state, const std::string& archive, const std::string& kernel,
                   const std::string& member) {
  kiln::TrustSet trust = kiln::TrustSet::load(bench_dir + "/test.pub");
  kiln::ReadOptions options;
  options.policy = kiln::TrustPolicy{&trust, 1};
  for (auto _ : state) {
    kiln_bench::start_uncached();
    auto t0 = Clock::now();
    load_one(archive, kernel, member, options);
    state.SetIterationTime(seconds(t0, Clock::now()));
  }
  state.counters["archive_mib"] = static_cast<double>(fs::file_size(archive)) / (1 << 20);
}

// The scale goal: the N-kernel archive and the 1-kernel one opened and loaded alternately in
// every iteration (which goes first alternates too), each uncached, so that drift of the machine
// hits both alike. many_us and one_us are the means per iteration of each.
//
// Each archive's signature costs its own time to verify: OpenSSL's Ed25519 verification is
// variable-time, and signatures of one key took 101.8-103.7 us here (tests/bench/RESULTS.md), a
// fixed offset of about ±1 us per archive in the uncached figures. So each iteration also loads
// both again with the signature memo kept (no Ed25519), untimed for the goal: many_kept_us and
// one_kept_us are what the archives themselves cost, for reading the goal's ratio.
void open_load_pair(benchmark::State& state, const std::string& one, const std::string& many,
                    const std::string& many_kernel, const std::string& many_member) {
  kiln::TrustSet trust = kiln::TrustSet::load(bench_dir + "/test.pub");
  kiln::ReadOptions options;
  options.policy = kiln::TrustPolicy{&trust, 1};
  double one_s = 0, many_s = 0, one_kept_s = 0, many_kept_s = 0;
  bool many_first = false;
  auto load = [&](bool is_many) {
    if (is_many) {
      load_one(many, many_kernel, many_member, options);
    } else {
      load_one(one, "noop_00000", "code/noop.00000.sm_90a.cubin", options);
    }
  };
  for (auto _ : state) {
    double t[2] = {0, 0};
    for (int i = 0; i < 2; ++i) {
      const bool is_many = (i == 0) == many_first;
      kiln_bench::start_uncached();
      auto t0 = Clock::now();
      load(is_many);
      t[is_many ? 1 : 0] = seconds(t0, Clock::now());
      // Again, its signature now in the memo.
      auto t1 = Clock::now();
      load(is_many);
      (is_many ? many_kept_s : one_kept_s) += seconds(t1, Clock::now());
    }
    one_s += t[0];
    many_s += t[1];
    state.SetIterationTime(t[0] + t[1]);
    many_first = !many_first;
  }
  state.counters["one_us"] = benchmark::Counter(one_s * 1e6, benchmark::Counter::kAvgIterations);
  state.counters["many_us"] = benchmark::Counter(many_s * 1e6, benchmark::Counter::kAvgIterations);
  state.counters["one_kept_us"] = benchmark::Counter(one_kept_s * 1e6, benchmark::Counter::kAvgIterations);
  state.counters["many_kept_us"] = benchmark::Counter(many_kept_s * 1e6, benchmark::Counter::kAvgIterations);
  state.counters["archive_mib"] = static_cast<double>(fs::file_size(many)) / (1 << 20);
}

// ---- memory: what open + load one kernel adds to a fresh process ----------------------------
// Resident pages of this process's mappings of `path` (the archive's own pages, where it is
// mapped), in KiB, from /proc/self/smaps.
long mapped_rss_kib(const std::string& path) {
  const std::string real = fs::canonical(path).string();
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  long total = 0;
  while (std::getline(smaps, line)) {
    std::size_t dash = line.find('-'), space = line.find(' ');
    if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) && dash != std::string::npos && dash < space) {
      inside = line.size() >= real.size() && line.compare(line.size() - real.size(), real.size(), real) == 0;
    } else if (inside && line.rfind("Rss:", 0) == 0) {
      total += std::strtol(line.c_str() + 4, nullptr, 10);
    }
  }
  return total;
}

// kiln_bench --memory TRUST ARCHIVE KERNEL MEMBER [PHASE]: run by memory_fresh_process as a
// fresh process (/proc/self/exe). It loads the trust set (a runtime does that once, at creation),
// holds a block of PHASE bytes (0 if not given; see memory_fresh_process), reads
// its resident set, opens the archive and loads one kernel (record + code member, as load_one),
// reads the resident set again with the archive still open and the code in hand, and prints one
// JSON line. Nothing else is warmed up first (loading the trust set sets OpenSSL's digest and
// signature code up, as libkiln does for each key it loads): what the first open of a fresh
// process brings in (the allocator growing its arena, the signature memo, the zstd context, the
// reader's code pages executed for the first time) is part of the figure.
//
// The bound is what the reader has to hold for that: the index head (what the digest covers),
// the signature block, the index pages it decoded for its lookups (kiln/kernels.bin at open
// where the head carries no copy of its entry, the record kiln/kernels/<name>, and the code
// member where the record carries no copy of its entry: one page per level of the index on each path, shared pages once, as
// ArchiveReader::index_page_bytes_read() counts them) and the three
// members it read (content, plus the stored copy where it is compressed, which is a second
// buffer while it is decompressed). It is not the whole index: an archive of 5,000 kernels has a
// ~3 MB index of which a lookup needs a head of at most 16 references and one small page per
// level.
int memory_mode(const std::string& trust_path, const std::string& archive, const std::string& kernel,
                const std::string& member, std::size_t phase) {
  kiln::TrustSet trust = kiln::TrustSet::load(trust_path);
  kiln::ReadOptions options;
  options.policy = kiln::TrustPolicy{&trust, 1};
  // A block whose malloc chunk is `phase` bytes (its 8-byte header with them): it moves where the
  // heap's top lies within its page.
  std::vector<std::uint8_t> shift(phase >= 16 ? phase - 8 : 0, 1);
  const kiln_bench::Resident before = kiln_bench::resident_now();
  const std::size_t live_before = mallinfo2().uordblks;
  std::unique_ptr<kiln::ArchiveReader> a = kiln::ArchiveReader::open_file(archive, options);
  kiln::KernelSpec spec = a->kernel(kernel);
  std::vector<std::uint8_t> code = read_code(*a, spec, member);
  const kiln_bench::Resident after = kiln_bench::resident_now();
  const std::size_t live_after = mallinfo2().uordblks;
  // The index pages its lookups decoded (one per level on each path, shared ones once), before
  // anything below looks more up.
  const double page_bytes = static_cast<double>(a->index_page_bytes_read());
  const std::size_t pages = a->index_pages_read();
  benchmark::DoNotOptimize(spec);
  benchmark::DoNotOptimize(code.data());
  // The same again beside it (a second reader of the same file, its signature memo hit): the
  // live heap it adds is what each further archive costs once the process's one-time state
  // (the signature memo, the allocator's arena) exists.
  std::unique_ptr<kiln::ArchiveReader> again = kiln::ArchiveReader::open_file(archive, options);
  kiln::KernelSpec spec_again = again->kernel(kernel);
  std::vector<std::uint8_t> code_again = read_code(*again, spec_again, member);
  const std::size_t live_again = mallinfo2().uordblks;
  benchmark::DoNotOptimize(spec_again);
  benchmark::DoNotOptimize(code_again.data());
  benchmark::DoNotOptimize(shift.data());
  const long archive_kib = mapped_rss_kib(archive);  // after both readings: this read allocates

  const kiln::format::Header& h = a->header();
  const std::string paths[3] = {kiln::kKernelTablePath, kiln::kernel_record_path(kernel), member};
  double members = 0;
  for (const std::string& path : paths) {
    long i = a->find(path);
    if (i < 0) throw std::runtime_error(archive + ": no member " + path);
    const kiln::format::Entry& e = a->entry(static_cast<std::size_t>(i));
    members += static_cast<double>(e.content_size) +
               (e.compression == kiln::format::Compression::none ? 0.0 : static_cast<double>(e.stored_size));
  }
  const double head_bytes = static_cast<double>(h.index_head_size) + static_cast<double>(h.signature_block_size);
  std::printf("{\"rss_kib\": %ld, \"anon_kib\": %ld, \"heap_kib\": %ld, \"file_kib\": %ld, "
              "\"archive_kib\": %ld, \"bound_kib\": %.1f, "
              "\"head_kib\": %.1f, \"pages\": %zu, \"pages_kib\": %.1f, \"members_kib\": %.1f, \"index_kib\": %.1f, "
              "\"live_kib\": %.1f, \"again_live_kib\": %.1f}\n",
              after.rss_kib - before.rss_kib, after.anon_kib - before.anon_kib, after.heap_kib - before.heap_kib,
              after.file_kib() - before.file_kib(),
              archive_kib, (head_bytes + page_bytes + members) / 1024, head_bytes / 1024, pages,
              page_bytes / 1024, members / 1024, static_cast<double>(h.index_size) / 1024,
              (static_cast<double>(live_after) - static_cast<double>(live_before)) / 1024,
              (static_cast<double>(live_again) - static_cast<double>(live_after)) / 1024);
  return 0;
}

// Runs kiln_bench --memory for one archive in 16 fresh processes, one per heap phase. The heap
// is counted in 4 KiB pages, and how many pages an open + load of ~10 KiB touches depends on
// where the heap's top happens to lie within its page before it (the lengths of the paths the
// process was given move it): one process measures the same reader as 12 KiB or 16 KiB. So the
// k-th process first holds k * 256 bytes, which puts the top at each 256-byte step of a page in
// turn, and heap_kib is the mean over the 16, what an open + load adds expected over wherever it
// starts (heap_kib_min and heap_kib_max the extremes). The other counters are the medians.
void memory_fresh_process(benchmark::State& state, const std::string& archive, const std::string& kernel,
                          const std::string& member) {
  const char* keys[] = {"rss_kib", "anon_kib", "heap_kib", "file_kib", "archive_kib", "bound_kib", "head_kib", "pages_kib",
                        "members_kib", "index_kib", "live_kib", "again_live_kib"};
  constexpr int kPhases = 16;
  constexpr std::size_t kPhaseStep = 256;  // kPhases * kPhaseStep is one page
  std::vector<std::vector<double>> values(std::size(keys));
  for (auto _ : state) {
    for (int r = 0; r < kPhases; ++r) {
      try {
        std::string line = kiln_bench::run_fresh_process({"kiln_bench", "--memory", bench_dir + "/test.pub", archive, kernel,
                                                          member, std::to_string(r * kPhaseStep)});
        for (std::size_t k = 0; k < std::size(keys); ++k) values[k].push_back(kiln_bench::json_number(line, keys[k]));
      } catch (const std::exception& e) {
        state.SkipWithError(e.what());
        return;
      }
    }
  }
  for (std::size_t k = 0; k < std::size(keys); ++k) {
    std::vector<double>& v = values[k];
    std::sort(v.begin(), v.end());
    state.counters[keys[k]] = v[v.size() / 2];
    if (std::strcmp(keys[k], "heap_kib") == 0) {
      state.counters["heap_kib"] = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
      state.counters["heap_kib_min"] = v.front();
      state.counters["heap_kib_max"] = v.back();
    }
  }
  state.counters["archive_mib"] = static_cast<double>(fs::file_size(archive)) / (1 << 20);
}

// Full verification in-process on one thread (what `kiln verify -j 1` does after start-up),
// for the curve of verify time against archive size and kernel count.
void verify_in_process(benchmark::State& state, const std::string& archive) {
  kiln::TrustSet trust = kiln::TrustSet::load(bench_dir + "/test.pub");
  kiln::ReadOptions options;
  options.policy = kiln::TrustPolicy{&trust, 1};
  for (auto _ : state) {
    kiln_bench::start_uncached();
    std::unique_ptr<kiln::ArchiveReader> a = kiln::ArchiveReader::open_file(archive, options);
    a->verify_all(1, false, nullptr);
  }
  state.counters["archive_mib"] = static_cast<double>(fs::file_size(archive)) / (1 << 20);
}

// The baseline of a load: the code object read from its own file (bench_util.hpp: open, fstat,
// one read into a buffer sized once, close), as a program that ships bare cubins does before
// handing them to the driver.
void read_plain_file(benchmark::State& state, const std::string& path) {
  for (auto _ : state) {
    std::vector<char> bytes = kiln_bench::read_whole_file(path);
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

// A baseline command and kiln's, run in turn (the first alternating from one repetition to the
// next); counters baseline_ms and kiln_ms, the median aggregate of each the figure compared.
void command_pair(benchmark::State& state, std::vector<std::string> baseline, std::vector<std::string> kiln) {
  static bool kiln_first = false;
  double baseline_s = 0, kiln_s = 0;
  for (auto _ : state) {
    double t[2] = {0, 0};
    for (int i = 0; i < 2; ++i) {
      const bool is_kiln = (i == 0) == kiln_first;
      auto t0 = Clock::now();
      run_command(state, is_kiln ? kiln : baseline);
      t[is_kiln ? 1 : 0] = seconds(t0, Clock::now());
    }
    baseline_s += t[0];
    kiln_s += t[1];
    state.SetIterationTime(t[0] + t[1]);
    kiln_first = !kiln_first;
  }
  state.counters["baseline_ms"] = benchmark::Counter(baseline_s * 1e3, benchmark::Counter::kAvgIterations);
  state.counters["kiln_ms"] = benchmark::Counter(kiln_s * 1e3, benchmark::Counter::kAvgIterations);
}

std::string kiln_binary() {
  const char* env = std::getenv("KILN_BINARY");
  return env != nullptr ? env : "kiln";
}

void register_scale(const std::string& shape) {
  // Archives named <shape>-<kernels>.kiln; the kernel loaded is the middle one, its member the
  // sm_90a cubin.
  std::vector<std::pair<long, fs::path>> found;
  for (const fs::directory_entry& e : fs::directory_iterator(bench_dir + "/scale")) {
    std::string name = e.path().filename().string();
    if (name.rfind(shape + "-", 0) == 0 && e.path().extension() == ".kiln") {
      found.emplace_back(std::stol(name.substr(shape.size() + 1)), e.path());
    }
  }
  std::sort(found.begin(), found.end());
  auto kernel_of = [](long kernels) {
    char name[32];
    std::snprintf(name, sizeof name, "noop_%05ld", kernels / 2);
    return std::string(name);
  };
  auto member_of = [](long kernels) {
    char member[64];
    std::snprintf(member, sizeof member, "code/noop.%05ld.sm_90a.cubin", kernels / 2);
    return std::string(member);
  };
  for (const auto& [kernels, path] : found) {
    const std::string suffix = shape + "/kernels:" + std::to_string(kernels);
    repeated(benchmark::RegisterBenchmark(("open+load-one/" + suffix).c_str(), open_load_one, path.string(),
                                          kernel_of(kernels), member_of(kernels)))
        ->Unit(benchmark::kMicrosecond)->UseManualTime()->MinTime(0.1);
    benchmark::RegisterBenchmark(("memory/" + suffix).c_str(), memory_fresh_process, path.string(), kernel_of(kernels),
                                 member_of(kernels))
        ->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1)->Repetitions(1);
    repeated(benchmark::RegisterBenchmark(("verify-in-process/" + suffix).c_str(), verify_in_process, path.string()),
             kSlowRepetitions)
        ->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.2);
  }
  // The scale goal: the largest archive against the 1-kernel one, interleaved.
  if (found.size() > 1 && found.front().first == 1) {
    const auto& [kernels, path] = found.back();
    repeated(benchmark::RegisterBenchmark(("open+load-one-pair/" + shape + "/kernels:" + std::to_string(kernels)).c_str(),
                                          open_load_pair, found.front().second.string(), path.string(),
                                          kernel_of(kernels), member_of(kernels)))
        ->Unit(benchmark::kMicrosecond)->UseManualTime()->MinTime(0.2);
  }
  std::string plain = bench_dir + "/scale/" + shape + ".sm_90a.cubin";
  if (fs::exists(plain)) {
    repeated(benchmark::RegisterBenchmark(("read-plain-cubin/" + shape).c_str(), read_plain_file, plain))
        ->Unit(benchmark::kMicrosecond)->MinTime(0.1);
  }
}

void register_commands() {
  const std::string kiln = kiln_binary(), dir = bench_dir;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  std::vector<unsigned> threads;
  for (unsigned t = 1; t <= cores; t *= 2) threads.push_back(t);
  if (threads.back() != cores) threads.push_back(cores);
  const int level = 9;
  // One run per repetition, the median of 3.
  auto command = [](const std::string& name, std::vector<std::string> argv) {
    repeated(benchmark::RegisterBenchmark(name.c_str(), command_benchmark, std::move(argv)), kSlowRepetitions)
        ->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);
  };
  if (fs::exists(dir + "/verify.kiln")) {
    // One thread, the row that sits at parity: openssl and kiln take turns within each
    // repetition (as pack does below), and openssl's median there is the baseline of every row.
    auto verify = [&](unsigned t) {
      return std::vector<std::string>{kiln, "verify", dir + "/verify.kiln", "--trust", dir + "/test.pub", "-j",
                                      std::to_string(t)};
    };
    repeated(benchmark::RegisterBenchmark("verify-pair/threads:1", command_pair,
                                          std::vector<std::string>{"openssl", "dgst", "-sha256", dir + "/verify.kiln"},
                                          verify(1)),
             kSlowRepetitions)
        ->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(1);
    for (unsigned t : threads) {
      if (t > 1) command("verify/kiln/threads:" + std::to_string(t), verify(t));
    }
  }
  if (fs::exists(dir + "/pack/kiln.toml")) {
    // zstd and kiln take turns within each repetition, so that a slow spell of the machine (a
    // neighbour on a shared host) falls on both sides rather than on one side's three runs.
    for (unsigned t : threads) {
      std::string ts = std::to_string(t);
      std::vector<std::string> zstd = {"zstd", "-q", "-f", "-" + std::to_string(level), "-T" + ts,
                                       dir + "/pack.concat", "-o", dir + "/pack.concat.zst"};
      std::vector<std::string> pack = {kiln, "pack", dir + "/pack/kiln.toml", "--key", dir + "/test.key", "-o",
                                       dir + "/pack.out.kiln", "-l", std::to_string(level), "-j", ts, "-q"};
      repeated(benchmark::RegisterBenchmark(("pack-pair/threads:" + ts).c_str(), command_pair, zstd, pack), kSlowRepetitions)
          ->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(1);
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
BENCHMARK(BM_shape_match_fixed)->Name("shape-match/fixed/shapes")->Arg(1)->Arg(64)->Arg(512)
    ->MinTime(0.1)->Repetitions(kRepetitions)->DisplayAggregatesOnly(true);

const char* kAnyM =
    "[[kernel.shape]]\nname = \"any_m\"\nranges = { m = [1, 8192] }\nvalues = { n = 4096, k = 4096 }\n"
    "where = [\"m % 16 == 0\"]\ngrid = [\"cdiv(n, 128)\", \"cdiv(m, 128)\", 1]\nblock = [256, 1, 1]\n"
    "shared_mem = \"min(65536, 1024 * cdiv(k, 64))\"\n";

void BM_shape_match_range(benchmark::State& state) { run_match(state, shape_kernel(kAnyM), 4096, 4080); }
BENCHMARK(BM_shape_match_range)->Name("shape-match/range/one-shape")
    ->MinTime(0.1)->Repetitions(kRepetitions)->DisplayAggregatesOnly(true);
void BM_shape_match_range_repeated(benchmark::State& state) { run_match(state, shape_kernel(kAnyM), 4096, 4096); }
BENCHMARK(BM_shape_match_range_repeated)->Name("shape-match/range/one-shape-repeated-call")
    ->MinTime(0.1)->Repetitions(kRepetitions)->DisplayAggregatesOnly(true);

// A small-M specialisation declared first, which the call (m = 4096) falls through.
void BM_shape_match_range_second(benchmark::State& state) {
  std::string small = "[[kernel.shape]]\nname = \"small_m\"\nranges = { m = [1, 64] }\nvalues = { n = 4096, k = 4096 }\n"
                      "grid = [\"cdiv(n, 128)\", 1]\nblock = [128]\n";
  run_match(state, shape_kernel(small + kAnyM), 4096, 4080);
}
BENCHMARK(BM_shape_match_range_second)->Name("shape-match/range/second-of-two")
    ->MinTime(0.1)->Repetitions(kRepetitions)->DisplayAggregatesOnly(true);

}  // namespace

// ---- kernel args: what every launch of a kernel with kernel_args pays to build them ----------
namespace {

// Stands in for the driver: "encodes" by copying 128 bytes, allocates nothing. The launch path's
// own work is what is timed; the driver's is measured on the GPU (kiln_runtime_bench).
class HostOnlyCode final : public kiln::backend::Code {
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
BENCHMARK(BM_kernel_args)->Name("kernel-args/tma-cluster-range/match-only")->Arg(0)
    ->MinTime(0.1)->Repetitions(kRepetitions)->DisplayAggregatesOnly(true);
BENCHMARK(BM_kernel_args)->Name("kernel-args/tma-cluster-range/match+build")->Arg(1)
    ->MinTime(0.1)->Repetitions(kRepetitions)->DisplayAggregatesOnly(true);
BENCHMARK(BM_kernel_args)->Name("kernel-args/tma-cluster-range/match+build-alternating-calls")->Arg(2)
    ->MinTime(0.1)->Repetitions(kRepetitions)->DisplayAggregatesOnly(true);

}  // namespace

int main(int argc, char** argv) {
  // The memory rows' child: before anything else, so that the process has warmed up nothing.
  if ((argc == 6 || argc == 7) && std::strcmp(argv[1], "--memory") == 0) {
    try {
      return memory_mode(argv[2], argv[3], argv[4], argv[5], argc == 7 ? std::stoul(argv[6]) : 0);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "kiln_bench --memory %s: %s\n", argv[3], e.what());
      return 1;
    }
  }
  benchmark::Initialize(&argc, argv);
  if (argc != 2) {
    std::fprintf(stderr, "usage: kiln_bench BENCH_DIR [--benchmark_* flags]\n       kiln_bench --memory TRUST ARCHIVE KERNEL MEMBER [PHASE]\n");
    return 2;
  }
  bench_dir = argv[1];
  // The machine and the date the figures belong to, in the JSON's context (report.py prints them).
  benchmark::AddCustomContext("cpu_model", kiln_bench::cpu_model());
  benchmark::AddCustomContext("date_utc", kiln_bench::utc_now());
  if (fs::exists(bench_dir + "/scale")) {
    register_scale("small");
    register_scale("big");
  }
  register_commands();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
