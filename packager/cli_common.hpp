// Shared pieces of the kiln command: exit codes, output helpers, key and time options.
#pragma once

#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "core/status.hpp"
#include "kiln/kiln.hpp"

namespace CLI {
class App;
class ParseError;
}  // namespace CLI

namespace kiln::cli {

// Exit codes, documented in `kiln --help` and the README. Fixed: scripts depend on them.
enum ExitCode : int {
  kExitOk = 0,
  kExitRefused = 1,   // the archive failed verification (format, digest, signature, limit)
  kExitUsage = 2,     // the command line is wrong
  kExitBadInput = 3,  // the manifest, a code object or a key given to kiln is wrong
  kExitIo = 4,        // the system refused (missing file, permission, disk full)
  kExitInternal = 5,  // a bug or a library failure kiln cannot explain
};

int exit_code_for(Errc code);

// Runs `f`, whose failed calls of libkiln's C API (through its C++ face, kiln.hpp) become the
// exception the command's exit codes come from; `where` (may be empty) goes before the message.
template <class F>
void through_the_api(F&& f, const std::string& where = std::string()) {
  try {
    f();
  } catch (const kiln::Error& e) {
    throw Failure(errc_of(e.status()), where.empty() ? std::string(e.what()) : where + ": " + e.what());
  }
}

std::string human_size(std::uint64_t bytes);

// The creation time recorded in new signatures: SOURCE_DATE_EPOCH when set (so that
// builds stay reproducible), otherwise 0 unless the user passed --created now|SECONDS.
std::uint64_t signature_time(const std::string& created_option);

// The signer name recorded in a signature: --signer, or the key file's base name.
std::string default_signer_name(const std::string& key_path);

unsigned default_threads();

// The store a `kiln store` command works on: --store DIR, else $KILN_STORE, else an error.
std::string store_dir(const std::string& option);
// Who a store decision is recorded as: --who, else $USER, else "unknown".
std::string actor_name(const std::string& option);

// A command line CLI11 refused: the message with the command it belongs to ("kiln store pull:
// --store: ..."), the nearest command's name where a word is not one ("did you mean 'verify'?"),
// and where --help is; returns the usage exit code.
int usage_error(const CLI::App& app, const CLI::ParseError& e);

}  // namespace kiln::cli
