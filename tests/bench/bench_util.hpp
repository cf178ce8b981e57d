// Helpers shared by kiln_bench and kiln_runtime_bench: the plain-read baseline, the resident
// set of this process, running this program again as a fresh process, and the machine and date
// a run's figures belong to.
#pragma once

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/verification_cache.hpp"

extern char** environ;

// Every cold open must start with nothing cached in the process: a second open of an archive
// already verified skips its Ed25519 check (the process-wide memo of verification_cache.hpp).
// Programs that time first opens clear it; they must link the runtime statically (kiln_core,
// kiln_c_api), so that the memo cleared is the one their opens consult.
namespace kiln_bench {

inline void start_uncached() { kiln::clear_verification_cache(); }

// The whole file into one buffer sized once: open, fstat, read until every byte is in (a read
// may return fewer bytes than asked), close. What a program that ships bare code objects does.
inline std::vector<char> read_whole_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open " + path + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    throw std::runtime_error("cannot stat " + path + ": " + std::strerror(e));
  }
  std::vector<char> bytes(static_cast<std::size_t>(st.st_size));
  std::size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = errno;
      ::close(fd);
      throw std::runtime_error("cannot read " + path + ": " + (n == 0 ? "the file shrank" : std::strerror(e)));
    }
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
  return bytes;
}

// This process's resident set in KiB from /proc/self/smaps_rollup: `Rss` (everything resident)
// and `Anonymous` (the heap, anonymous mappings, stacks, and the pages of libraries' data written
// to); file-backed = rss - anon. The heap proper is read apart from /proc/self/smaps: the
// `Anonymous` of the [heap] mapping and of anonymous mappings with no name (what malloc takes
// with mmap), without the stack (a first Ed25519 verification reaches about 5 KiB deeper than
// anything before it: one more page or not by where the kernel put the stack in its page) or the
// libraries' written data (first uses of their statics). Both are read into buffers on the
// stack, so that taking the figures allocates nothing on the heap they measure.
struct Resident {
  long rss_kib = -1;
  long anon_kib = -1;
  long heap_kib = -1;
  long file_kib() const { return rss_kib - anon_kib; }
};

// The `Anonymous` KiB of the mappings /proc/self/smaps names [heap] or leaves unnamed, read a
// line at a time through buffers on the stack (-1 if it cannot be read).
inline long heap_anon_kib() {
  int fd = ::open("/proc/self/smaps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char chunk[4096], line[4096];
  std::size_t used = 0;
  bool counting = false;
  long total = 0;
  for (;;) {
    ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (ssize_t k = 0; k < n; ++k) {
      if (chunk[k] != '\n') {
        if (used + 1 < sizeof line) line[used++] = chunk[k];  // a longer line keeps its start
        continue;
      }
      line[used] = '\0';
      used = 0;
      // A mapping's first line is "lo-hi perms offset dev inode [name]"; the lines after it are
      // "Key: value" (a colon before any space).
      const char* colon = std::strchr(line, ':');
      const char* space = std::strchr(line, ' ');
      if (colon == nullptr || (space != nullptr && space < colon)) {
        const char* name = line;
        for (int field = 0; field < 5 && name != nullptr; ++field) {
          name = std::strchr(name, ' ');
          if (name != nullptr) name += std::strspn(name, " ");
        }
        counting = name == nullptr || *name == '\0' || std::strcmp(name, "[heap]") == 0;
      } else if (counting && std::strncmp(line, "Anonymous:", 10) == 0) {
        total += std::strtol(line + 10, nullptr, 10);
      }
    }
  }
  ::close(fd);
  return total;
}

inline Resident resident_now() {
  char buf[8192];
  std::size_t used = 0;
  int fd = ::open("/proc/self/smaps_rollup", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  for (;;) {
    ssize_t n = ::read(fd, buf + used, sizeof buf - 1 - used);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    used += static_cast<std::size_t>(n);
  }
  ::close(fd);
  buf[used] = '\0';
  auto field = [&](const char* key) -> long {
    const char* p = std::strstr(buf, key);
    return p == nullptr ? -1 : std::strtol(p + std::strlen(key), nullptr, 10);
  };
  return {field("\nRss:"), field("\nAnonymous:"), heap_anon_kib()};
}

// Runs this program again (/proc/self/exe) with `args` as a fresh process and returns what it
// wrote on stdout (its stderr goes to ours). Throws if it cannot start or does not exit 0.
inline std::string run_fresh_process(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  std::string out;
  if (rc == 0) {
    char buf[4096];
    for (;;) {
      ssize_t n = ::read(fds[0], buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      out.append(buf, static_cast<std::size_t>(n));
    }
  }
  ::close(fds[0]);
  std::string command;
  for (const std::string& a : args) command += (command.empty() ? "" : " ") + a;
  if (rc != 0) throw std::runtime_error("cannot start " + command + ": " + std::strerror(rc));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw std::runtime_error("failed: " + command);
  return out;
}

// The number after "key": in a JSON line this program printed itself.
inline double json_number(const std::string& line, const std::string& key) {
  std::size_t p = line.find("\"" + key + "\":");
  if (p == std::string::npos) throw std::runtime_error("no '" + key + "' in: " + line);
  return std::strtod(line.c_str() + p + key.size() + 3, nullptr);
}

// The CPU model (/proc/cpuinfo's first "model name"), or "unknown".
inline std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      std::size_t colon = line.find(':');
      std::size_t start = colon == std::string::npos ? colon : line.find_first_not_of(" \t", colon + 1);
      if (start != std::string::npos) return line.substr(start);
    }
  }
  return "unknown";
}

// Now, UTC, as 2026-11-30T07:07:00Z.
inline std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace kiln_bench
