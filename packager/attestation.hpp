// Attestations of a GPU run: `kiln verify --run --attest KEY` records what ran where as an
// in-toto Statement (v1) in a DSSE envelope signed with Ed25519, so the proof that an archive
// passed its test vectors on a kind of GPU travels with the archive and any DSSE implementation
// can check it. `kiln attest verify` checks one. schema/ATTESTATION.md is the specification.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "archive_reader.hpp"
#include "dsse.hpp"
#include "trust.hpp"
#include "verify_run.hpp"

namespace kiln::cli {

constexpr const char* kInTotoPayloadType = "application/vnd.in-toto+json";
constexpr const char* kInTotoStatementType = "https://in-toto.io/Statement/v1";
// A URN: kiln owns no web domain to name its predicate with a URL.
constexpr const char* kGpuRunPredicateType = "urn:kiln:attestation:gpu-run:v1";

// The Statement's JSON for a run of `archive`'s test vectors on `device` at `unix_time`.
std::string gpu_run_statement(const Archive& archive, const RunDevice& device, const std::vector<TestResult>& results,
                              std::uint64_t unix_time);

// What `kiln attest verify` found in a checked attestation.
struct AttestationFacts {
  std::string subject_digest;  // "sha256:<hex>"
  std::string package, kernel_revision;
  std::uint64_t sequence = 0;
  std::string device_name, arch, compute_capability, driver;
  std::uint64_t ran_at = 0;
  std::size_t tests_passed = 0, tests_run = 0;
  bool passed = false;
  std::vector<std::string> signed_by;     // verified key ids (verify_attestation)
  std::vector<std::string> claimed_keys;  // the key ids the signatures name, verified or not
};

// What an envelope attests, its signatures not checked (their key ids listed as claimed): for a
// store that keeps attestations as data and judges their keys when a policy asks. Throws
// Errc::malformed naming `what` for anything but kiln's gpu-run Statement in a DSSE envelope.
AttestationFacts read_attestation(const std::string& envelope_json, const std::string& what);

// Checks an envelope: at least `threshold` distinct keys of `trust` signed it, it holds an
// in-toto Statement v1 with exactly one subject and kiln's gpu-run predicate. Throws Errc::refused
// (signatures) or Errc::malformed (content) naming `what`.
AttestationFacts verify_attestation(const std::string& envelope_json, const TrustSet& trust, unsigned threshold,
                                    const std::string& what);

}  // namespace kiln::cli
