// Policy over the attestations a store keeps beside an archive: `kiln store activate
// --require-attestation KEYS --target T` activates only an archive that, for every target, has
// an attestation verified by those keys of a passing run on that kind of GPU (schema/STORE.md).
#pragma once

#include <string>
#include <vector>

#include "attestation.hpp"
#include "core/trust.hpp"
#include "store/store.hpp"

namespace kiln::cli {

// True when a run on the GPU `facts` describes counts for `target`: for CUDA ("sm_90",
// "sm_90a") the same compute capability, for AMD the same target ID ("gfx942:xnack-").
bool attested_for(const AttestationFacts& facts, const std::string& target);

// "" when every target has an attestation of `digest` verified by at least `threshold` keys of
// `trust`, whose subject is `digest` and whose run passed on that target's kind of GPU; else
// why not, naming the first target that lacks one and what each stored attestation is.
std::string attestation_refusal(const std::vector<store::StoredAttestation>& stored, const std::string& digest,
                                const TrustSet& trust, unsigned threshold, const std::vector<std::string>& targets);

// The store policy `--require-attestation KEYS [--threshold N] --target T...` asks for (the keys
// loaded now, as attestation keys); an empty policy when `keys` is "".
store::AttestationPolicy attestation_policy(const std::string& keys, unsigned threshold, const std::vector<std::string>& targets);

using kiln::attestation_summary;

}  // namespace kiln::cli
