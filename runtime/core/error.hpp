// The one error type of kiln's core. Core code throws kiln::Failure; the C API and the CLI
// catch it at their boundary and turn it into a status code and a message.
#pragma once

#include <stdexcept>
#include <string>

namespace kiln {

// Broad classes of failure. Each maps to one public status code and one CLI exit code,
// so the classes are about what the caller should do, not about where it happened.
enum class Errc {
  invalid_argument,  // the caller passed something unusable (empty path, bad option)
  io,                // the operating system refused (missing file, permission, disk full)
  malformed,         // bytes do not follow the archive format (truncated, bad magic, bad field)
  integrity,         // bytes follow the format but a digest does not match
  signature,         // no signature, an invalid signature, or too few trusted signers
  manifest,          // kiln.toml is not valid
  code_object,       // a code object's content disagrees with what the manifest claims
  limit,             // an input exceeds a fixed bound (size, count, decompressed size)
  unsupported,       // a valid input using a feature this build does not have
  not_found,         // no kernel, member or reference by that name
  refused,           // a call cannot run: no fitting kernel and no usable reference
  driver,            // the GPU driver failed a call
  reference_failed,  // the host's reference function reported failure
  internal,          // a library (OpenSSL, zstd) failed in a way input cannot explain
};

const char* errc_name(Errc code) noexcept;

// What the library and the kiln command throw inside; the C boundary turns it into a status and
// the thread's message (runtime/api). Not kiln::Error, the public C++ face's exception
// (include/kiln/kiln.hpp), so that a file of the command can use both.
class Failure : public std::runtime_error {
 public:
  Failure(Errc code, const std::string& message) : std::runtime_error(message), code_(code) {}
  Errc code() const noexcept { return code_; }

 private:
  Errc code_;
};

[[noreturn]] inline void fail(Errc code, const std::string& message) { throw Failure(code, message); }

}  // namespace kiln
