#include "attestation.hpp"

#include "error.hpp"
#include "json.hpp"
#include "sha256.hpp"
#include "kiln/kiln.h"

namespace kiln::cli {

namespace {

std::string hex_of(const Sha256& d) { return digest_string(d).substr(7); }  // without "sha256:"

const format::Entry* entry_named(const Archive& archive, const std::string& path) {
  for (const format::Entry& e : archive.index().entries) {
    if (e.path == path) return &e;
  }
  return nullptr;
}

}  // namespace

std::string gpu_run_statement(const Archive& archive, const RunDevice& device, const std::vector<TestResult>& results,
                              std::uint64_t unix_time) {
  const format::Index& index = archive.index();
  json::Writer w;
  w.begin_object().field("_type", kInTotoStatementType).key("subject").begin_array();
  w.begin_object().field("name", index.package + ".kiln").key("digest").begin_object();
  w.field("sha256", hex_of(archive.digest())).end_object().end_object();
  w.end_array().field("predicateType", kGpuRunPredicateType).key("predicate").begin_object();
  w.field("kiln", kiln_version_string()).field("ran_at", unix_time);
  w.key("archive").begin_object().field("package", index.package).field("kernel_revision", index.kernel_revision);
  w.field("sequence", index.sequence).end_object();
  w.key("device").begin_object().field("vendor", device.vendor).field("name", device.name).field("arch", device.arch);
  w.field("compute_capability", device.compute_capability).field("driver", device.driver);
  w.field("memory_bytes", device.memory_bytes).end_object();
  bool passed = true;
  w.key("results").begin_array();
  for (const TestResult& r : results) {
    if (!r.ran) continue;
    passed = passed && r.passed;
    w.begin_object().field("kernel", r.kernel).field("test", r.test).field("route", r.route).field("target", r.target);
    w.field("variant", r.variant).key("code").begin_object().field("path", r.code_path);
    const format::Entry* e = entry_named(archive, r.code_path);
    w.field("sha256", e != nullptr ? hex_of(e->content_sha256) : std::string()).end_object();
    w.field("passed", r.passed).field("elements", r.elements).field("mismatches", r.mismatches);
    w.field("unwritten", r.unwritten).field("max_abs_error", r.max_abs_error).field("max_rel_error", r.max_rel_error);
    w.field("median_us", r.median_us).end_object();
  }
  w.end_array().field("passed", passed).end_object().end_object();
  return w.str();
}

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

}  // namespace kiln::cli
