#include "sigbus_guard.hpp"

#include <signal.h>
#include <unistd.h>

#include <cstring>

#include "cli_common.hpp"

namespace kiln::cli {
namespace {

void on_sigbus(int signal, siginfo_t* info, void*) {
  if (info != nullptr && info->si_code == BUS_ADRERR) {
    // Async-signal-safe only: write(2) and _exit(2). Nothing is flushed and no destructor runs: a
    // file being written stays under its temporary name (<name>.tmp-...), never its final one.
    static const char kMessage[] =
        "kiln: error: a file kiln was reading through a memory mapping was truncated underneath it "
        "(SIGBUS); nothing was verified or written. Run the command again once nothing else writes the file.\n";
    ssize_t written = ::write(STDERR_FILENO, kMessage, sizeof kMessage - 1);
    (void)written;
    ::_exit(kExitIo);
  }
  // Not a read past a file's end: the default action, as if no handler had been installed.
  ::signal(signal, SIG_DFL);
  ::raise(signal);
}

}  // namespace

void guard_against_truncated_mappings() {
  struct sigaction action;
  std::memset(&action, 0, sizeof action);
  action.sa_sigaction = on_sigbus;
  // Not SA_RESETHAND: with -j threads, several may fault at once, and each must take this path.
  action.sa_flags = SA_SIGINFO;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGBUS, &action, nullptr);
}

}  // namespace kiln::cli
