#include "sigbus_guard.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

#include "cli_common.hpp"

namespace kiln::cli {
namespace {

// Everything below runs inside the signal handler: async-signal-safe calls only (open, read,
// write, close, _exit), no allocation, no locale, no stdio.

void write_text(const char* text, std::size_t size) {
  while (size > 0) {
    ssize_t n = ::write(STDERR_FILENO, text, size);
    if (n <= 0) return;
    text += n, size -= static_cast<std::size_t>(n);
  }
}

void write_text(const char* text) { write_text(text, std::strlen(text)); }

// Reads a hexadecimal number at `p` (up to `end`); moves `p` past it.
std::uintptr_t read_hex(const char*& p, const char* end) {
  std::uintptr_t v = 0;
  for (; p < end; ++p) {
    char c = *p;
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) break;
    v = v * 16 + static_cast<std::uintptr_t>(d);
  }
  return v;
}

// Whether the /proc/self/maps line [line, end) ("start-end perms offset dev inode   path") maps
// `address`; if so, writes its path (the sixth field, to the line's end).
bool write_path_if_it_maps(const char* line, const char* end, std::uintptr_t address) {
  const char* p = line;
  std::uintptr_t start = read_hex(p, end);
  if (p >= end || *p != '-') return false;
  ++p;
  std::uintptr_t stop = read_hex(p, end);
  if (address < start || address >= stop) return false;
  for (int field = 1; field < 5; ++field) {  // past perms, offset, dev and inode
    while (p < end && *p == ' ') ++p;
    while (p < end && *p != ' ') ++p;
  }
  while (p < end && *p == ' ') ++p;
  if (p >= end) return false;  // an anonymous mapping: no name to give
  write_text("'");
  write_text(p, static_cast<std::size_t>(end - p));
  write_text("' ");
  return true;
}

// Writes the path of the file mapped at `address`, from /proc/self/maps, read in pieces into the
// handler's own stack. Lines longer than the buffer (paths over ~4 KiB) are skipped: the message
// then names no file, as before.
void write_mapped_path(std::uintptr_t address) {
  int fd = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  char buffer[4096];
  std::size_t held = 0;
  for (;;) {
    ssize_t n = ::read(fd, buffer + held, sizeof buffer - held);
    if (n <= 0) break;
    held += static_cast<std::size_t>(n);
    std::size_t begin = 0;
    for (std::size_t i = 0; i < held; ++i) {
      if (buffer[i] != '\n') continue;
      if (write_path_if_it_maps(buffer + begin, buffer + i, address)) {
        ::close(fd);
        return;
      }
      begin = i + 1;
    }
    if (begin == 0 && held == sizeof buffer) {
      held = 0;  // a line longer than the buffer: dropped
    } else {
      std::memmove(buffer, buffer + begin, held - begin);
      held -= begin;
    }
  }
  ::close(fd);
}

void on_sigbus(int signal, siginfo_t* info, void*) {
  if (info != nullptr && info->si_code == BUS_ADRERR) {
    // Nothing is flushed and no destructor runs: a file being written stays under its temporary
    // name (<name>.tmp-...), never its final one.
    write_text("kiln: error: the file ");
    write_mapped_path(reinterpret_cast<std::uintptr_t>(info->si_addr));
    write_text(
        "that kiln was reading through a memory mapping was truncated underneath it (SIGBUS); nothing was verified "
        "or written. Run the command again once nothing else writes the file.\n");
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
