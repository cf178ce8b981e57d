// Runs fn(0) .. fn(n - 1) on up to `threads` threads (the calling thread among them), each
// index once, in no particular order. fn must not throw: callers keep per-index results and
// errors and report them in index order afterwards, so output does not depend on scheduling.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <thread>
#include <vector>

namespace kiln {

template <class Fn>
void parallel_for(std::size_t n, unsigned threads, Fn&& fn) {
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) fn(i);
  };
  const std::size_t wanted = std::min<std::size_t>(std::max(1u, threads), n);
  std::vector<std::thread> pool;
  for (std::size_t t = 1; t < wanted; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
}

}  // namespace kiln
