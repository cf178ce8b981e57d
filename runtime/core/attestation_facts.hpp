// What a GPU run's attestation says (schema/ATTESTATION.md): kiln's gpu-run predicate in an
// in-toto Statement v1, in a DSSE envelope signed with Ed25519. Read here, below the engine and
// the CLI, so that `kiln attest verify`, a store's activation policy and libkiln's load policy
// judge an attestation the same way; `kiln verify --run --attest` writes them (packager).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dsse.hpp"
#include "core/trust.hpp"

namespace kiln {

constexpr const char* kInTotoPayloadType = "application/vnd.in-toto+json";
constexpr const char* kInTotoStatementType = "https://in-toto.io/Statement/v1";
// A URN: kiln owns no web domain to name its predicate with a URL.
constexpr const char* kGpuRunPredicateType = "urn:kiln:attestation:gpu-run:v1";
// The largest attestation kiln reads: a run's envelope is about 400 bytes per test vector.
constexpr std::uint64_t kMaxAttestationBytes = 16u << 20;

// What an attestation says: its subject, the archive and device it names, the run's results.
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

// One line about an attestation as a store's history records it: "gpu-run on NVIDIA H200
// (sm_90, cc 9.0, driver 13.0), 3/3 tests passed, signed by <key ids>".
std::string attestation_summary(const AttestationFacts& facts);

// Whether a passing run the attestation reports counts for a device: a CUDA device (`arch`
// "sm_90") of the same compute capability, an AMD device of the same target ID, and a driver
// (`driver`, "13.0") not older than the attested one ("" when the device's is not known: not
// compared). "" when it counts, else why not ("ran on cc 8.0", "ran with driver 13.1").
std::string attestation_mismatch(const AttestationFacts& facts, const std::string& arch, int cc_major, int cc_minor,
                                 const std::string& driver);

}  // namespace kiln
