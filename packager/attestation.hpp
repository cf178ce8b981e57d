// Attestations of a GPU run: `kiln verify --run --attest KEY` records what ran where as an
// in-toto Statement (v1) in a DSSE envelope signed with Ed25519, so the proof that an archive
// passed its test vectors on a kind of GPU travels with the archive and any DSSE implementation
// can check it. `kiln attest verify` checks one. schema/ATTESTATION.md is the specification.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/archive_reader.hpp"
#include "core/attestation_facts.hpp"
#include "core/dsse.hpp"
#include "core/trust.hpp"
#include "verify_run.hpp"

namespace kiln::cli {

using kiln::kGpuRunPredicateType;
using kiln::kInTotoPayloadType;
using kiln::kInTotoStatementType;

// The Statement's JSON for a run of `archive`'s test vectors on `device` at `unix_time`.
std::string gpu_run_statement(const ArchiveReader& archive, const RunDevice& device, const std::vector<TestResult>& results,
                              std::uint64_t unix_time);

using kiln::AttestationFacts;
using kiln::read_attestation;
using kiln::verify_attestation;

}  // namespace kiln::cli
