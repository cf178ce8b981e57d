#include "engine/stats.hpp"

#include <cstddef>
#include <cstring>

namespace kiln::engine {

void Stats::count(int device, Outcome outcome) {
  const std::size_t o = static_cast<std::size_t>(outcome);
  if (device < 0 || device >= kDevicesCounted) {
    bump(other_devices_.by_outcome[o]);
    return;
  }
  bump(devices_[static_cast<std::size_t>(device)].by_outcome[o]);
  const std::uint64_t bit = std::uint64_t{1} << device;
  // read first: after its first call a device's bit is set, and the hot path stays a load
  if ((devices_seen_.load(std::memory_order_relaxed) & bit) == 0) devices_seen_.fetch_or(bit, std::memory_order_relaxed);
}

std::uint64_t Stats::launches(Outcome outcome) const {
  const std::size_t o = static_cast<std::size_t>(outcome);
  std::uint64_t total = other_devices_.by_outcome[o].load(std::memory_order_relaxed);
  for (const DeviceCounters& d : devices_) total += d.by_outcome[o].load(std::memory_order_relaxed);
  return total;
}

void Stats::snapshot(kiln_stats* out) const {
  kiln_stats full{};
  full.size = static_cast<std::uint32_t>(sizeof(kiln_stats));
  auto get = [](const std::atomic<std::uint64_t>& c) { return c.load(std::memory_order_relaxed); };
  full.archives_opened = get(archives_opened);
  full.archive_open_failures = get(archive_open_failures);
  full.loads = get(loads);
  full.load_failures = get(load_failures);
  full.load_time_ns = get(load_time_ns);
  full.jit_compiles = get(jit_compiles);
  full.jit_failures = get(jit_failures);
  full.jit_time_ns = get(jit_time_ns);
  full.launches_native = launches(Outcome::native);
  full.launches_ptx_jit = launches(Outcome::ptx_jit);
  full.launches_reference = launches(Outcome::reference);
  full.launches_refused = launches(Outcome::refused);
  full.launch_failures = launches(Outcome::failure);
  full.undeclared_shape_calls = get(undeclared_shape_calls);
  std::size_t n = out->size < sizeof(kiln_stats) ? out->size : sizeof(kiln_stats);
  std::uint32_t caller_size = out->size;
  std::memcpy(out, &full, n);
  out->size = caller_size;
}

std::string Stats::prometheus() const {
  auto get = [](const std::atomic<std::uint64_t>& c) { return std::to_string(c.load(std::memory_order_relaxed)); };
  auto seconds = [](const std::atomic<std::uint64_t>& ns) {
    return std::to_string(static_cast<double>(ns.load(std::memory_order_relaxed)) / 1e9);
  };
  std::string s;
  s += "# HELP kiln_archives_opened_total Archives opened and verified.\n# TYPE kiln_archives_opened_total counter\n";
  s += "kiln_archives_opened_total " + get(archives_opened) + "\n";
  s += "# HELP kiln_archive_open_failures_total Archives refused at open.\n# TYPE kiln_archive_open_failures_total counter\n";
  s += "kiln_archive_open_failures_total " + get(archive_open_failures) + "\n";
  s += "# HELP kiln_code_loads_total Code objects loaded, by kind.\n# TYPE kiln_code_loads_total counter\n";
  s += "kiln_code_loads_total{kind=\"binary\"} " + get(loads) + "\n";
  s += "kiln_code_loads_total{kind=\"ptx_jit\"} " + get(jit_compiles) + "\n";
  s += "# HELP kiln_code_load_failures_total Code object loads the driver refused, by kind.\n# TYPE kiln_code_load_failures_total counter\n";
  s += "kiln_code_load_failures_total{kind=\"binary\"} " + get(load_failures) + "\n";
  s += "kiln_code_load_failures_total{kind=\"ptx_jit\"} " + get(jit_failures) + "\n";
  s += "# HELP kiln_code_load_seconds_total Time spent loading code objects, by kind.\n# TYPE kiln_code_load_seconds_total counter\n";
  s += "kiln_code_load_seconds_total{kind=\"binary\"} " + seconds(load_time_ns) + "\n";
  s += "kiln_code_load_seconds_total{kind=\"ptx_jit\"} " + seconds(jit_time_ns) + "\n";
  s += "# HELP kiln_launches_total Kernel calls, by the route each took.\n# TYPE kiln_launches_total counter\n";
  auto total = [&](Outcome o) { return std::to_string(launches(o)); };
  s += "kiln_launches_total{route=\"native\"} " + total(Outcome::native) + "\n";
  s += "kiln_launches_total{route=\"ptx_jit\"} " + total(Outcome::ptx_jit) + "\n";
  s += "kiln_launches_total{route=\"reference\"} " + total(Outcome::reference) + "\n";
  s += "kiln_launches_total{route=\"refused\"} " + total(Outcome::refused) + "\n";
  s += "# HELP kiln_launch_failures_total Calls that failed in the driver or in the reference.\n# TYPE kiln_launch_failures_total counter\n";
  s += "kiln_launch_failures_total " + total(Outcome::failure) + "\n";
  s += "# HELP kiln_undeclared_shape_calls_total Calls whose arguments matched no declared shape.\n# TYPE kiln_undeclared_shape_calls_total counter\n";
  s += "kiln_undeclared_shape_calls_total " + get(undeclared_shape_calls) + "\n";
  s += "# HELP kiln_tensor_map_encodes_total Tensor maps encoded at launch (cache misses).\n# TYPE kiln_tensor_map_encodes_total counter\n";
  s += "kiln_tensor_map_encodes_total " + get(tensor_map_encodes) + "\n";
  const std::uint64_t seen = devices_seen_.load(std::memory_order_relaxed);
  if (seen != 0) {
    static const char* const kOutcomes[] = {"native", "ptx_jit", "reference", "refused"};
    s += "# HELP kiln_device_launches_total Kernel calls on each device, by the route each took.\n"
         "# TYPE kiln_device_launches_total counter\n";
    for (int d = 0; d < kDevicesCounted; ++d) {
      if ((seen >> d & 1) == 0) continue;
      for (std::size_t o = 0; o < 4; ++o) {
        s += "kiln_device_launches_total{device=\"" + std::to_string(d) + "\",route=\"" + kOutcomes[o] + "\"} " +
             get(devices_[static_cast<std::size_t>(d)].by_outcome[o]) + "\n";
      }
    }
    s += "# HELP kiln_device_launch_failures_total Calls on each device that failed in the driver or the reference.\n"
         "# TYPE kiln_device_launch_failures_total counter\n";
    for (int d = 0; d < kDevicesCounted; ++d) {
      if ((seen >> d & 1) == 0) continue;
      s += "kiln_device_launch_failures_total{device=\"" + std::to_string(d) + "\"} " +
           get(devices_[static_cast<std::size_t>(d)].by_outcome[4]) + "\n";
    }
  }
  return s;
}

}  // namespace kiln::engine
