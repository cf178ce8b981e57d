// The runtime's counters: atomics bumped on the load and launch paths, read as a C struct
// or as Prometheus text.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

#include "kiln/kiln.h"

namespace kiln::engine {

struct Stats {
  std::atomic<std::uint64_t> archives_opened{0};
  std::atomic<std::uint64_t> archive_open_failures{0};
  std::atomic<std::uint64_t> loads{0};
  std::atomic<std::uint64_t> load_failures{0};
  std::atomic<std::uint64_t> load_time_ns{0};
  std::atomic<std::uint64_t> jit_compiles{0};
  std::atomic<std::uint64_t> jit_failures{0};
  std::atomic<std::uint64_t> jit_time_ns{0};
  std::atomic<std::uint64_t> launches_native{0};
  std::atomic<std::uint64_t> launches_ptx_jit{0};
  std::atomic<std::uint64_t> launches_reference{0};
  std::atomic<std::uint64_t> launches_refused{0};
  std::atomic<std::uint64_t> launch_failures{0};
  std::atomic<std::uint64_t> undeclared_shape_calls{0};
  // Prometheus only (kiln_stats keeps its 0.2 layout): CUtensorMaps encoded at launch, the
  // misses of the per-kernel caches; a steady server stops adding to it.
  std::atomic<std::uint64_t> tensor_map_encodes{0};

  // Calls by device and outcome, for a process serving from several GPUs (Prometheus only:
  // kiln_device_launches_total{device, route}). Ordinals from 0 to kDevicesCounted - 1 have
  // their own counters; higher ones count in the totals alone.
  enum class Outcome { native, ptx_jit, reference, refused, failure };
  static constexpr int kDevicesCounted = 64;
  // Bumps the runtime's total for `outcome` and, where it has its own counters, the device's.
  void count(int device, Outcome outcome);

  static void bump(std::atomic<std::uint64_t>& counter, std::uint64_t by = 1) {
    counter.fetch_add(by, std::memory_order_relaxed);
  }
  // Fills as many fields of `out` as out->size covers (a caller built against an older,
  // shorter kiln_stats gets its fields and nothing past them).
  void snapshot(kiln_stats* out) const;
  std::string prometheus() const;

 private:
  struct DeviceCounters {
    std::array<std::atomic<std::uint64_t>, 5> by_outcome{};  // indexed by Outcome
  };
  std::array<DeviceCounters, kDevicesCounted> devices_{};
  std::atomic<std::uint64_t> devices_seen_{0};  // bit d: ordinal d has counted something
};

}  // namespace kiln::engine
