// kiln verify --run: runs every test vector of every kernel that routes natively on this host
// and compares the outputs with the expected ones; lists the kernels that would fall back.
#pragma once

#include <string>
#include <vector>

namespace kiln::cli {

struct RunOptions {
  std::string archive;
  std::string trust;
  unsigned threshold = 1;
  int device = 0;
  int repeats = 20;  // timed launches per test after the checked one
};

struct TestResult {
  std::string kernel, test, route, target, reason;
  bool ran = false, passed = false;
  double max_abs_error = 0, max_rel_error = 0;
  unsigned long long unwritten = 0, mismatches = 0, elements = 0;
  double median_us = 0;
  std::string detail;  // why it failed, or why it did not run
  std::string variant;  // the variant the test's call took on the device ("": the kernel's own code)
  // On a kernel's last test: its variants that no test's call took (their code unchecked here).
  std::vector<std::string> unreached_variants;
};

// Returns one result per (kernel, test), and per kernel without tests. Throws kiln::Error
// when the archive cannot be opened at all.
std::vector<TestResult> run_test_vectors(const RunOptions& options);

}  // namespace kiln::cli
