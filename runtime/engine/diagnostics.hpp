// Diagnostic bundles: when a load or a launch fails, everything needed to reproduce it without
// the host application, written into a fresh folder under the configured directory.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kiln::engine {

struct DiagnosticEvent {
  std::string event;  // "load" or "launch"
  std::string archive_digest, package, kernel_revision;
  std::string kernel, entry, target, member;
  int device = 0;
  std::string device_name;
  std::string device_arch;  // "sm_90", "gfx90a:sramecc+:xnack-"
  int cc_major = 0, cc_minor = 0;  // CUDA devices only
  std::string driver_version, kiln_version;
  int cuda_error = 0;      // the driver's status (CUresult, or hipError_t for an AMD device)
  std::string error;      // the driver's description, with the JIT log for PTX
  std::string call;       // for a launch: the scalar arguments and the launch configuration
  std::vector<std::pair<std::string, std::vector<std::uint8_t>>> files;  // kiln.toml, the code object
};

// Writes <dir>/kiln-diag-<seconds>-<pid>-<n>/ with report.toml and the files. Returns the
// folder, or "" with *why set; never throws (a failing diagnostic must not hide the failure).
std::string write_diagnostic_bundle(const std::string& dir, const DiagnosticEvent& event, std::string* why);

}  // namespace kiln::engine
