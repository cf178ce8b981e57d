// Runs fn(0) .. fn(n - 1) on up to `threads` threads (the calling thread among them), each
// index once, in no particular order. fn must not throw: callers keep per-index results and
// errors and report them in index order afterwards, so output does not depend on scheduling.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/error.hpp"

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

// The same for work that may fail with kiln::Failure: once one fn(i) throws, no index starts
// that was not started already, the running ones finish, and the first error thrown is
// rethrown on the calling thread. The one thread pool with first-error capture.
template <class Fn>
void parallel_for_or_fail(std::size_t n, unsigned threads, Fn&& fn) {
  std::atomic<bool> failed{false};
  std::mutex mutex;
  std::unique_ptr<Failure> first;
  parallel_for(n, threads, [&](std::size_t i) {
    if (failed.load()) return;
    try {
      fn(i);
    } catch (const Failure& e) {
      std::lock_guard<std::mutex> lock(mutex);
      if (!failed.exchange(true)) first = std::make_unique<Failure>(e);
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(mutex);
      if (!failed.exchange(true)) first = std::make_unique<Failure>(Errc::internal, e.what());
    }
  });
  if (first) throw *first;
}

}  // namespace kiln
