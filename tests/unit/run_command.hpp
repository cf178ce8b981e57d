// Runs a shell command line for the CLI tests: its exit code and its stdout and stderr together.
#pragma once

#include <stdio.h>
#include <sys/wait.h>

#include <string>

namespace kiln::test {

struct CommandResult {
  int code = -1;
  std::string out;  // stdout and stderr together
};

inline CommandResult run_command(const std::string& line) {
  std::string command = line + " 2>&1";
  CommandResult r;
  FILE* p = ::popen(command.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace kiln::test
