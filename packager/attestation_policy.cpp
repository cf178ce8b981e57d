#include "attestation_policy.hpp"

#include <cctype>
#include <memory>

#include "core/error.hpp"

namespace kiln::cli {

namespace {

// "sm_90a" -> "9.0"; "" for anything that is not a CUDA target.
std::string cuda_capability(const std::string& target) {
  if (target.compare(0, 3, "sm_") != 0) return "";
  std::size_t end = 3;
  while (end < target.size() && std::isdigit(static_cast<unsigned char>(target[end]))) ++end;
  std::string digits = target.substr(3, end - 3);
  std::string suffix = target.substr(end);
  if (digits.size() < 2 || digits.size() > 3 || !(suffix.empty() || suffix == "a" || suffix == "f")) return "";
  return digits.substr(0, digits.size() - 1) + "." + digits.substr(digits.size() - 1);
}

}  // namespace

bool attested_for(const AttestationFacts& facts, const std::string& target) {
  std::string cc = cuda_capability(target);
  if (!cc.empty()) return facts.compute_capability == cc && facts.arch.compare(0, 3, "sm_") == 0;
  return facts.arch == target;
}

std::string attestation_refusal(const std::vector<store::StoredAttestation>& stored, const std::string& digest,
                                const TrustSet& trust, unsigned threshold, const std::vector<std::string>& targets) {
  std::vector<AttestationFacts> good;
  std::string seen;
  for (const store::StoredAttestation& a : stored) {
    std::string what = "attestation " + a.envelope_digest + " (history #" + std::to_string(a.record.number) + ")";
    try {
      AttestationFacts f = verify_attestation(a.envelope, trust, threshold, what);
      if (f.subject_digest != digest) {
        seen += "; " + what + " attests " + f.subject_digest;
      } else if (!f.passed) {
        seen += "; " + what + ": its run on " + f.arch + " did not pass every test";
      } else {
        seen += "; " + what + ": " + f.arch + " (cc " + f.compute_capability + ")";
        good.push_back(std::move(f));
      }
    } catch (const Failure& e) {
      seen += "; " + std::string(e.what());
    }
  }
  for (const std::string& target : targets) {
    bool found = false;
    for (const AttestationFacts& f : good) found = found || attested_for(f, target);
    if (!found) {
      return "not attested for " + target + ": no attestation of " + digest + " verified by " +
             std::to_string(threshold) + " of the required key(s) reports a passing run on that kind of GPU (" +
             std::to_string(stored.size()) + " kept" + (seen.empty() ? "" : ": " + seen.substr(2)) + ")";
    }
  }
  return "";
}

store::AttestationPolicy attestation_policy(const std::string& keys, unsigned threshold, const std::vector<std::string>& targets) {
  if (keys.empty()) return {};
  auto trust = std::make_shared<TrustSet>(TrustSet::load(keys, kAttestationRole));
  return [trust, threshold, targets](const std::string& digest, const std::vector<store::StoredAttestation>& stored) {
    return attestation_refusal(stored, digest, *trust, threshold, targets);
  };
}

}  // namespace kiln::cli
