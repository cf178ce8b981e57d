// Which CUDA code objects can run on which device, decided by kiln from the documented
// rules (and what the H200's driver was measured to do: tests/gpu/RESULTS.md), so that the choice
// can be explained before anything is handed to the driver. Pure functions: no driver calls.
#pragma once

#include <string>
#include <vector>

namespace kiln::cuda {

struct DeviceSpec {
  int cc_major = 0;
  int cc_minor = 0;
  int driver_version = 0;  // as cuDriverGetVersion reports it: 13000 for CUDA 13.0
};

// A target tag as the index records it: sm_XY, sm_XYa, sm_XYf (cubin) or compute_XY[a|f] (PTX).
struct Target {
  bool is_ptx = false;
  int major = 0;
  int minor = 0;
  char suffix = 0;  // 0, 'a' or 'f'
  std::string tag;
};
bool parse_target(const std::string& tag, Target* out);

// The CUDA driver version (e.g. 12040) needed to JIT-compile a PTX ISA version; 0 when the
// ISA is newer than any kiln knows (then it is assumed to need a driver newer than 13.0's
// successors kiln knows, and the JIT itself decides).
int driver_for_ptx_isa(int isa_major, int isa_minor);
// Parses "MAJOR.MINOR" (as in `.version 9.0` or min_cuda_driver = "13.0"); false otherwise.
bool parse_version_pair(const std::string& text, int* major, int* minor);
std::string driver_version_text(int driver_version);  // 13000 -> "13.0"

enum class Verdict { fits, arch_mismatch, driver_too_old };

struct Judgement {
  Verdict verdict = Verdict::arch_mismatch;
  // Higher is preferred: exact cubin > compatible cubin > PTX (newest first).
  int rank = 0;
  std::string why;  // "exact match", "needs cc 8.x", "PTX ISA 9.0 needs driver 13.0"
};

// Judges one target for a device. For PTX, `ptx_isa` is the ISA version from the verified
// PTX text ("9.0"); empty when unknown (then only the architecture is judged).
Judgement judge(const Target& target, const DeviceSpec& device, const std::string& ptx_isa = "");

}  // namespace kiln::cuda
