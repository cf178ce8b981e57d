// kiln preflight --target / --fleet: the route every kernel of an archive would take on GPUs
// described rather than present, judged by libkiln's own resolver (kiln.h,
// kiln_archive_preflight_target), so that no GPU is needed and nothing can drift from what a device
// decides. The fleet file is TOML:
//
//   [[fleet]]
//   name = "a100-pool"      # optional, shown beside the target
//   target = "sm_80"        # a CUDA GPU (sm_XY) or an AMD target ID (gfx90a:xnack-)
//   driver = "12.4"         # optional: the pool's CUDA driver
#pragma once

#include <string>
#include <vector>

namespace kiln::cli {

struct FleetTarget {
  std::string name;    // "" when not given
  std::string target;  // "sm_80", "gfx942"
  std::string driver;  // "" when not given
};

// The targets of a fleet file; throws kiln::Failure naming the file, line and what is wrong.
std::vector<FleetTarget> read_fleet_file(const std::string& path);

// "sm_80,sm_90" (with `driver` for each) as fleet targets; empty items are refused.
std::vector<FleetTarget> targets_from_list(const std::vector<std::string>& lists, const std::string& driver);

// Judges the archive for every target and prints the table (or, with json, one document:
// {"file", "digest", "targets": [{"name"?, report...}]}). Returns how many (target, kernel)
// pairs would not run on the GPU (reference or refused).
// Attestations to judge with (kiln preflight --require-attestation KEYS --attestation FILE...): the
// archive is judged as a runtime that requires them judges it (kiln.h, attestation_trust_path).
struct AttestationsGiven {
  std::string keys;                // "" when none are required
  unsigned threshold = 1;
  std::vector<std::string> files;  // each is given to the archive; one that is not taken fails
};

int preflight_targets(const std::string& file, const std::string& trust, bool strict, bool json,
                      const AttestationsGiven& attestations,
                      const std::vector<FleetTarget>& targets);

}  // namespace kiln::cli
