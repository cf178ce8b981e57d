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
  std::atomic<std::uint64_t> undeclared_shape_calls{0};
  // Prometheus only (kiln_stats keeps its 0.2 layout): CUtensorMaps encoded at launch, the
  // misses of the per-kernel caches; a steady server stops adding to it.
  std::atomic<std::uint64_t> tensor_map_encodes{0};

  // Calls by device and outcome, for a process serving from several GPUs (Prometheus only:
  // kiln_device_launches_total{device, route}). Ordinals from 0 to kDevicesCounted - 1 have
  // their own counters; higher ones count in the totals alone.
  enum class Outcome { native, ptx_jit, reference, refused, failure };
  static constexpr int kDevicesCounted = 64;
  // Counts one call: one atomic add on the launch path, to the device's counter (or to the
  // counter of ordinals without their own). The runtime's totals are the sums, made when read.
  void count(int device, Outcome outcome);
  std::uint64_t launches(Outcome outcome) const;  // the runtime's total, all devices

  static void bump(std::atomic<std::uint64_t>& counter, std::uint64_t by = 1) {
    counter.fetch_add(by, std::memory_order_relaxed);
  }
  // Fills as many fields of `out` as out->size covers (a caller built against an older,
  // shorter kiln_stats gets its fields and nothing past them).
  void snapshot(kiln_stats* out) const;
  std::string prometheus() const;

 private:
  // A cache line each: threads launching on different GPUs do not write the same line.
  struct alignas(64) DeviceCounters {
    std::array<std::atomic<std::uint64_t>, 5> by_outcome{};  // indexed by Outcome
  };
  std::array<DeviceCounters, kDevicesCounted> devices_{};
  DeviceCounters other_devices_;  // ordinals without counters of their own (kDevicesCounted and up)
  std::atomic<std::uint64_t> devices_seen_{0};  // bit d: ordinal d has counted something
};

}  // namespace kiln::engine
