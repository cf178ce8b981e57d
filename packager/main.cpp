// The kiln command: one binary, one subcommand per job.
#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>

#include "cli_common.hpp"
#include "commands.hpp"
#include "sigbus_guard.hpp"

namespace {

const char* kExitCodes =
    "\nExit codes:\n"
    "  0  success\n"
    "  1  refused: the archive failed verification (format, digest, signature, size limit),\n"
    "     or verify --run could not prove it on this host (no test vector ran natively)\n"
    "  2  usage: the command line is wrong\n"
    "  3  bad input: the manifest, a code object or a key is wrong\n"
    "  4  I/O: a file could not be read or written\n"
    "  5  internal error\n";

}  // namespace

int main(int argc, char** argv) {
  kiln::cli::guard_against_truncated_mappings();
  CLI::App app{"kiln: seal GPU kernels into signed archives, verify them, and inspect them"};
  app.footer(kExitCodes);
  app.require_subcommand(1);
  app.set_version_flag("--version", "kiln " KILN_VERSION_STRING);
  kiln::cli::add_keygen_command(app);
  kiln::cli::add_pack_command(app);
  kiln::cli::add_sign_command(app);
  kiln::cli::add_verify_command(app);
  kiln::cli::add_attest_command(app);
  kiln::cli::add_trust_command(app);
  kiln::cli::add_inspect_command(app);
  kiln::cli::add_extract_command(app);
  kiln::cli::add_digest_command(app);
  kiln::cli::add_preflight_command(app);
  kiln::cli::add_diag_command(app);
  kiln::cli::add_store_command(app);
#ifdef KILN_HAVE_REGISTRY
  kiln::cli::add_push_command(app);
  kiln::cli::add_pull_command(app);
#endif

  std::string command = "kiln";
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    return kiln::cli::usage_error(app, e);
  } catch (const kiln::Failure& e) {
    for (CLI::App* sub : app.get_subcommands()) command += " " + sub->get_name();
    int code = kiln::cli::exit_code_for(e.code());
    std::cerr << command << ": " << (code == kiln::cli::kExitRefused ? "refused" : "error") << ": " << e.what() << "\n";
    return code;
  } catch (const std::exception& e) {
    std::cerr << command << ": internal error: " << e.what() << "\n";
    return kiln::cli::kExitInternal;
  }
  return kiln::cli::kExitOk;
}
