// One kiln cold start through the C API, timed phase by phase: the one sequence that
// kiln_runtime_bench's cold-start and scale rows, kiln_cold_anatomy and kiln_open_profile all
// time, so that the three measure the same thing. Also the median their figures are.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "kiln/kiln.h"

namespace kiln_bench {

// The middle value; the mean of the two middle ones for an even count; 0 for none.
inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// Microseconds, as every phase here is reported.
struct ColdStartPhases {
  double create = 0;       // the runtime and its trust keys (a server does this once per process)
  double open = 0;         // map, hash the index, check the signature, read the kernel table
  double get = 0;          // verify and load the code object (driver_load of it is the driver's)
  double driver_load = 0;  // kiln_stats.load_time_ns: cuLibraryLoadData and cuLibraryGetKernel
  double launch = 0;       // the first launch and `sync`
  double destroy = 0;      // archive and runtime
  double timed() const { return open + get + launch; }  // what the cold-start rows compare
};

// Creates a runtime trusting `trust`, opens `archive`, gets `kernel` (which must take the native
// route), launches it once with `args` and calls `sync()`, then destroys both. Throws
// std::runtime_error naming the step that failed, with libkiln's message.
template <typename Sync>
ColdStartPhases kiln_cold_start(const std::string& trust, const std::string& archive, const char* kernel, void** args,
                                std::size_t arg_count, Sync sync) {
  using Clock = std::chrono::steady_clock;
  auto us = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::micro>(b - a).count(); };
  kiln_runtime_options o;
  kiln_runtime_options_init(&o, sizeof o);
  o.trust_path = trust.c_str();
  kiln_runtime* rt = nullptr;
  kiln_archive* a = nullptr;
  kiln_kernel* k = nullptr;
  // `what` went wrong; with `step`, libkiln's last error is added ("<step> failed: <message>").
  auto fail = [&](const std::string& what, bool step = true) {
    char message[2048] = "";
    if (step && rt != nullptr) kiln_runtime_last_error(rt, message, sizeof message, nullptr);
    std::string text = step ? what + " failed" + (message[0] ? std::string(": ") + message : std::string()) : what;
    kiln_archive_destroy(a);
    kiln_runtime_destroy(rt);
    throw std::runtime_error(text);
  };
  ColdStartPhases p;
  auto t0 = Clock::now();
  if (kiln_runtime_create(&rt, &o) != KILN_OK) fail("kiln_runtime_create");
  auto t1 = Clock::now();
  if (kiln_archive_open(rt, archive.c_str(), &a) != KILN_OK) fail("kiln_archive_open of " + archive);
  auto t2 = Clock::now();
  if (kiln_archive_get_kernel(a, kernel, 0, &k) != KILN_OK) fail(std::string("kiln_archive_get_kernel of ") + kernel);
  if (kiln_kernel_route(k) != KILN_ROUTE_NATIVE) {
    fail(std::string("kernel ") + kernel + " is not on the native route: " + kiln_kernel_reason_text(k), false);
  }
  auto t3 = Clock::now();
  if (kiln_kernel_launch(k, args, arg_count, nullptr, nullptr) != KILN_OK) fail(std::string("kiln_kernel_launch of ") + kernel);
  sync();
  auto t4 = Clock::now();
  kiln_stats s;
  kiln_stats_init(&s, sizeof s);
  kiln_runtime_stats(rt, &s);
  kiln_archive_destroy(a);
  kiln_runtime_destroy(rt);
  auto t5 = Clock::now();
  p.create = us(t0, t1);
  p.open = us(t1, t2);
  p.get = us(t2, t3);
  p.driver_load = static_cast<double>(s.load_time_ns) / 1e3;
  p.launch = us(t3, t4);
  p.destroy = us(t4, t5);
  return p;
}

}  // namespace kiln_bench
