// Lazy, thread-safe, run-once initialisation whose failure is remembered.
//
// Why not std::call_once: an exception thrown by the callable must unwind through glibc's
// pthread_once, and with libstdc++ linked statically (KILN_STATIC_DEPS, the build that travels
// to GPU machines) that unwinding aborts the process instead; and glibc's pthread_once wakes
// possible waiters with a futex system call every time it completes, waiters or not, which an
// open of a large archive paid once per index page it read. Here a state read with acquire is
// the fast path; the first caller claims the step by compare-and-swap and runs the callable,
// catches its kiln::Failure (or any std::exception) and keeps it, and the failure is thrown
// again to this caller and every later one: the bytes a lazy step reads were copied before they
// were checked, so trying again would not give another answer. A caller that finds the step
// running waits on one condition variable all Once objects share (once.cpp); the runner
// notifies it only when a caller waits, so an uncontended step makes no system call. No mutex
// of its own: a reader has a Once per index page it read, and a std::mutex would be 40 of its
// 56 bytes.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <utility>

#include "core/error.hpp"

namespace kiln {

class Once {
 public:
  template <class Fn>
  void run(Fn&& fn) {
    if (state_.load(std::memory_order_acquire) != kDone) run_first(fn);
    if (failed_) throw Failure(code_, message_ ? *message_ : std::string("out of memory recording a failure"));
  }

 private:
  static constexpr std::uint8_t kNotRun = 0, kRunning = 1, kDone = 2;

  template <class Fn>
  void run_first(Fn& fn) {
    std::uint8_t seen = kNotRun;
    if (!state_.compare_exchange_strong(seen, kRunning)) {
      if (seen != kDone) wait_until_done(state_);  // another thread runs it
      return;
    }
    try {
      fn();
    } catch (const Failure& e) {
      remember(e.code(), e.what());
    } catch (const std::exception& e) {
      remember(Errc::internal, e.what());
    } catch (...) {
      remember(Errc::internal, "an unknown exception");
    }
    state_.store(kDone);  // publishes what fn made and the failure
    wake_waiters();
  }
  // once.cpp: the shared wait, and the wake that makes a system call only while a caller waits.
  static void wait_until_done(const std::atomic<std::uint8_t>& state);
  static void wake_waiters();

  // The message is kept out of line: a reader has a Once per index page it read.
  void remember(Errc code, const char* message) noexcept {
    failed_ = true, code_ = code;
    try {
      message_ = std::make_unique<std::string>(message);
    } catch (...) {  // no memory for the words: the failure itself is still remembered
    }
  }
  std::atomic<std::uint8_t> state_{kNotRun};
  bool failed_ = false;  // written before state_ is stored, read after it is loaded (acquire)
  Errc code_ = Errc::internal;
  std::unique_ptr<std::string> message_;
};

}  // namespace kiln
