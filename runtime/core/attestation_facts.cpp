#include "core/attestation_facts.hpp"

#include "core/error.hpp"
#include "core/json.hpp"

namespace kiln {

namespace {

// What the envelope's Statement says (its signatures are the caller's to judge).
AttestationFacts facts_of(const DsseEnvelope& envelope, const std::string& what) {
  AttestationFacts f;
  auto bad = [&](const std::string& why) { fail(Errc::malformed, what + ": " + why); };
  if (envelope.payload_type != kInTotoPayloadType) {
    bad("payloadType is '" + envelope.payload_type + "', not '" + kInTotoPayloadType + "'");
  }
  json::Value st = json::parse(envelope.payload, what + " payload");
  const std::string* type = st.get_string("_type");
  if (type == nullptr || *type != kInTotoStatementType) bad("the payload is not an in-toto Statement v1");
  const std::string* predicate_type = st.get_string("predicateType");
  if (predicate_type == nullptr || *predicate_type != kGpuRunPredicateType) {
    bad("predicateType is not kiln's '" + std::string(kGpuRunPredicateType) + "'");
  }
  const json::Value* subjects = st.get("subject");
  if (subjects == nullptr || subjects->type != json::Value::Type::array || subjects->array.size() != 1) {
    bad("the Statement must have exactly one subject (the archive)");
  }
  const json::Value* digest = subjects->array[0].get("digest");
  const std::string* sha = digest != nullptr ? digest->get_string("sha256") : nullptr;
  if (sha == nullptr || sha->size() != 64) bad("the subject has no sha256 digest");
  f.subject_digest = "sha256:" + *sha;
  const json::Value* p = st.get("predicate");
  if (p == nullptr || p->type != json::Value::Type::object) bad("no predicate object");
  const json::Value* archive = p->get("archive");
  const json::Value* device = p->get("device");
  const json::Value* results = p->get("results");
  if (archive == nullptr || device == nullptr || results == nullptr || results->type != json::Value::Type::array) {
    bad("the predicate needs 'archive', 'device' and 'results'");
  }
  auto text = [&](const json::Value* v, const char* key) {
    const std::string* s = v->get_string(key);
    if (s == nullptr) bad(std::string("the predicate has no string '") + key + "'");
    return *s;
  };
  f.package = text(archive, "package");
  f.kernel_revision = text(archive, "kernel_revision");
  const std::int64_t* seq = archive->get_number("sequence");
  const std::int64_t* ran_at = p->get_number("ran_at");
  if (seq == nullptr || *seq < 1 || ran_at == nullptr || *ran_at < 0) bad("the predicate's sequence or ran_at is missing");
  f.sequence = static_cast<std::uint64_t>(*seq);
  f.ran_at = static_cast<std::uint64_t>(*ran_at);
  f.device_name = text(device, "name");
  f.arch = text(device, "arch");
  f.compute_capability = text(device, "compute_capability");
  f.driver = text(device, "driver");
  for (const json::Value& r : results->array) {
    const json::Value* ok = r.get("passed");
    if (ok == nullptr || ok->type != json::Value::Type::boolean) bad("a result has no boolean 'passed'");
    ++f.tests_run;
    f.tests_passed += ok->boolean ? 1 : 0;
  }
  const json::Value* passed = p->get("passed");
  if (passed == nullptr || passed->type != json::Value::Type::boolean) bad("the predicate has no boolean 'passed'");
  f.passed = passed->boolean && f.tests_run > 0 && f.tests_passed == f.tests_run;
  return f;
}

}  // namespace

AttestationFacts read_attestation(const std::string& envelope_json, const std::string& what) {
  DsseEnvelope envelope = dsse_parse(envelope_json, what);
  AttestationFacts f = facts_of(envelope, what);
  for (const DsseSignature& s : envelope.signatures) f.claimed_keys.push_back(s.key_id);
  return f;
}

AttestationFacts verify_attestation(const std::string& envelope_json, const TrustSet& trust, unsigned threshold,
                                    const std::string& what) {
  DsseEnvelope envelope = dsse_parse(envelope_json, what);
  std::vector<std::string> rejected;
  std::vector<std::string> signed_by = dsse_verified_keys(envelope, trust, &rejected);
  if (signed_by.size() < threshold) {
    std::string why;
    for (const std::string& r : rejected) why += (why.empty() ? "" : "; ") + r;
    fail(Errc::refused, what + ": " + std::to_string(signed_by.size()) + " distinct trusted signer(s), " +
                            std::to_string(threshold) + " required" + (why.empty() ? "" : " (" + why + ")"));
  }
  AttestationFacts f = facts_of(envelope, what);
  f.signed_by = std::move(signed_by);
  for (const DsseSignature& s : envelope.signatures) f.claimed_keys.push_back(s.key_id);
  return f;
}

namespace {

// "13.0" -> {13, 0}; a part that is not a number ends the list.
std::vector<long> version_parts(const std::string& v) {
  std::vector<long> out;
  std::size_t at = 0;
  while (at < v.size()) {
    std::size_t end = v.find('.', at);
    if (end == std::string::npos) end = v.size();
    std::string part = v.substr(at, end - at);
    if (part.empty() || part.size() > 9 || part.find_first_not_of("0123456789") != std::string::npos) break;
    out.push_back(std::stol(part));
    at = end + 1;
  }
  return out;
}

}  // namespace

std::string attestation_summary(const AttestationFacts& f) {
  std::string keys;
  for (const std::string& k : f.claimed_keys) keys += (keys.empty() ? "" : ", ") + k;
  return "gpu-run on " + f.device_name + " (" + f.arch + ", cc " + f.compute_capability + ", driver " + f.driver + "), " +
         std::to_string(f.tests_passed) + "/" + std::to_string(f.tests_run) + " tests passed, signed by " +
         (keys.empty() ? "nobody" : keys);
}

std::string attestation_mismatch(const AttestationFacts& f, const std::string& arch, int cc_major, int cc_minor,
                                 const std::string& driver) {
  if (!f.passed) return "its run did not pass every test";
  bool cuda = arch.compare(0, 3, "sm_") == 0;
  if (cuda) {
    std::string cc = std::to_string(cc_major) + "." + std::to_string(cc_minor);
    if (f.arch.compare(0, 3, "sm_") != 0 || f.compute_capability != cc) {
      return "ran on " + f.arch + " (cc " + f.compute_capability + "), not cc " + cc;
    }
  } else if (f.arch != arch) {
    return "ran on " + f.arch + ", not " + arch;
  }
  if (!driver.empty()) {
    std::vector<long> attested = version_parts(f.driver), here = version_parts(driver);
    if (attested.empty()) return "its driver '" + f.driver + "' is not a version";
    if (here < attested) return "ran with driver " + f.driver + ", newer than this device's " + driver;
  }
  return "";
}

}  // namespace kiln
