// Lazy, thread-safe, run-once initialisation whose failure is remembered.
//
// Why not std::call_once: an exception thrown by the callable must unwind through glibc's
// pthread_once, and with libstdc++ linked statically (KILN_STATIC_DEPS, the build that travels
// to GPU machines) that unwinding aborts the process instead; and glibc's pthread_once wakes
// possible waiters with a futex system call every time it completes, waiters or not, which an
// open of a large archive paid once per index page it read. Here a flag read with acquire is
// the fast path; the first caller runs the callable under a mutex (uncontended: no system
// call), catches its kiln::Failure (or any std::exception) and keeps it, and the failure is
// thrown again to this caller and every later one: the bytes a lazy step reads were copied
// before they were checked, so trying again would not give another answer.
#pragma once

#include <atomic>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "core/error.hpp"

namespace kiln {

class Once {
 public:
  template <class Fn>
  void run(Fn&& fn) {
    if (!done_.load(std::memory_order_acquire)) run_first(fn);
    if (failed_) throw Failure(code_, message_ ? *message_ : std::string("out of memory recording a failure"));
  }

 private:
  template <class Fn>
  void run_first(Fn& fn) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (done_.load(std::memory_order_relaxed)) return;  // another thread ran it meanwhile
    try {
      fn();
    } catch (const Failure& e) {
      remember(e.code(), e.what());
    } catch (const std::exception& e) {
      remember(Errc::internal, e.what());
    } catch (...) {
      remember(Errc::internal, "an unknown exception");
    }
    done_.store(true, std::memory_order_release);  // publishes what fn made and the failure
  }
  // The message is kept out of line: a reader has a Once per index page it read.
  void remember(Errc code, const char* message) noexcept {
    failed_ = true, code_ = code;
    try {
      message_ = std::make_unique<std::string>(message);
    } catch (...) {  // no memory for the words: the failure itself is still remembered
    }
  }
  std::mutex mutex_;
  std::atomic<bool> done_{false};
  bool failed_ = false;  // written before done_ is stored (release), read after it is loaded (acquire)
  Errc code_ = Errc::internal;
  std::unique_ptr<std::string> message_;
};

}  // namespace kiln
