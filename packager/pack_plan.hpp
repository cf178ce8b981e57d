// Turns a kiln.toml and the files it names into the members of an archive, checking each
// code object's real target against what the manifest claims.
#pragma once

#include <string>
#include <vector>

#include "core/archive_writer.hpp"
#include "core/manifest.hpp"

namespace kiln::cli {

struct ObservedTool {
  std::string tool;     // "nvcc", "hipcc"
  std::string version;  // first line naming a release, as the tool printed it
};

struct PackPlan {
  Manifest manifest;
  PackageIdentity identity;
  std::vector<MemberInput> members;
  std::vector<ObservedTool> observed;
  std::vector<std::string> warnings;  // printed by the command, never fatal
  // Where planning's time went, in seconds (kiln pack --timings prints them).
  struct Timings {
    double parse = 0;     // reading and parsing kiln.toml
    double inputs = 0;    // naming and opening every input, reading and checking code objects and test vectors
    double probe = 0;     // nvcc/hipcc --version, run beside the steps above
    double probe_wait = 0;  // how long planning waited for the probe at its end
    double table = 0;     // the kernel table members
  } timings;
};

// Reads the manifest at `manifest_path` and every file it names (relative to its
// directory; symbolic links and special files refused). Throws Errc::manifest or
// Errc::code_object with "kiln.toml:LINE:COL: ..." where the problem is in the manifest
// (the first in manifest order). Files are opened and code objects read on `threads` threads.
PackPlan plan_pack(const std::string& manifest_path, unsigned threads = 1);

// Runs `nvcc --version` and `hipcc --version` where they exist on PATH.
std::vector<ObservedTool> observe_toolchain();

}  // namespace kiln::cli
