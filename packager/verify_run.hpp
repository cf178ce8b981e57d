// kiln verify --run: runs every test vector of every kernel that routes natively on this host
// and compares the outputs with the expected ones; lists the kernels that would fall back.
#pragma once

#include <cstdint>
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
  std::string code_path;  // the code object member that ran it
  // On a kernel's last test: its variants that no test's call took (their code unchecked here).
  std::vector<std::string> unreached_variants;
};

// The GPU the tests ran on, as an attestation records it.
struct RunDevice {
  bool known = false;     // false: no kernel found a device
  std::string vendor;     // "cuda"
  std::string name;       // "NVIDIA H200"
  std::string arch;       // "sm_90"
  std::string compute_capability;  // "9.0"
  std::string driver;     // "13.0"
  std::uint64_t memory_bytes = 0;  // 0 when the driver could not say
};

// Returns one result per (kernel, test), and per kernel without tests; `device` (may be null)
// gets the GPU they ran on. Throws kiln::Failure when the archive cannot be opened at all.
std::vector<TestResult> run_test_vectors(const RunOptions& options, RunDevice* device = nullptr);

}  // namespace kiln::cli
