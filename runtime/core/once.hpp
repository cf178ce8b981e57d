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
        failed_ = true, code_ = e.code(), message_ = e.what();
      } catch (const std::exception& e) {
        failed_ = true, code_ = Errc::internal, message_ = e.what();
      }
    });
    if (failed_) throw Failure(code_, message_);
  }

 private:
  std::once_flag flag_;
  bool failed_ = false;  // written once inside call_once, read after it (which synchronises)
  Errc code_ = Errc::internal;
  std::string message_;
};

}  // namespace kiln
