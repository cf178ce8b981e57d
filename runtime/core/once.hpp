// Lazy, thread-safe, run-once initialisation whose failure is remembered.
//
// Why not std::call_once directly: an exception thrown by the callable must unwind through
// glibc's pthread_once, and with libstdc++ linked statically (KILN_STATIC_DEPS, the build
// that travels to GPU machines) that unwinding aborts the process instead. Here the callable's
// kiln::Failure (or any std::exception) is caught inside, kept, and thrown again after
// std::call_once has returned, to this caller and every later one: the bytes a lazy step
// reads were copied before they were checked, so trying again would not give another answer.
#pragma once

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
    std::call_once(flag_, [&]() noexcept {
      try {
        std::forward<Fn>(fn)();
      } catch (const Failure& e) {
        remember(e.code(), e.what());
      } catch (const std::exception& e) {
        remember(Errc::internal, e.what());
      }
    });
    if (failed_) throw Failure(code_, message_ ? *message_ : std::string("out of memory recording a failure"));
  }

 private:
  // The message is kept out of line: a reader has a Once per index page it read, and 24 bytes
  // each instead of the 48 an inline std::string takes.
  void remember(Errc code, const char* message) noexcept {
    failed_ = true, code_ = code;
    try {
      message_ = std::make_unique<std::string>(message);
    } catch (...) {  // no memory for the words: the failure itself is still remembered
    }
  }
  std::once_flag flag_;
  bool failed_ = false;  // written once inside call_once, read after it (which synchronises)
  Errc code_ = Errc::internal;
  std::unique_ptr<std::string> message_;
};

}  // namespace kiln
