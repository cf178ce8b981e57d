#include "core/dsse.hpp"

#include <set>

#include "core/base64.hpp"
#include "core/error.hpp"
#include "core/json.hpp"

namespace kiln {

namespace {
constexpr std::size_t kMaxSignatures = 64;
}  // namespace

std::string dsse_pae(const std::string& payload_type, const std::string& payload) {
  return "DSSEv1 " + std::to_string(payload_type.size()) + " " + payload_type + " " + std::to_string(payload.size()) + " " +
         payload;
}

std::string dsse_envelope_json(const std::string& payload_type, const std::string& payload,
                               const std::vector<const PrivateKey*>& keys) {
  const std::string pae = dsse_pae(payload_type, payload);
  json::Writer w;
  w.begin_object().field("payloadType", payload_type).field("payload", base64_encode(payload)).key("signatures").begin_array();
  for (const PrivateKey* key : keys) {
    Ed25519Signature sig = key->sign(reinterpret_cast<const std::uint8_t*>(pae.data()), pae.size());
    w.begin_object()
        .field("keyid", key->public_key().key_id())
        .field("sig", base64_encode(std::string(sig.begin(), sig.end())))
        .end_object();
  }
  w.end_array().end_object();
  return w.str();
}

DsseEnvelope dsse_parse(const std::string& text, const std::string& what) {
  json::Value doc = json::parse(text, what);
  auto bad = [&](const std::string& why) { fail(Errc::malformed, what + ": not a DSSE envelope: " + why); };
  if (doc.type != json::Value::Type::object) bad("not a JSON object");
  DsseEnvelope e;
  const std::string* type = doc.get_string("payloadType");
  const std::string* payload = doc.get_string("payload");
  const json::Value* sigs = doc.get("signatures");
  if (type == nullptr) bad("no string 'payloadType'");
  if (payload == nullptr) bad("no string 'payload'");
  if (sigs == nullptr || sigs->type != json::Value::Type::array) bad("no array 'signatures'");
  std::optional<std::string> body = base64_decode(*payload);
  if (!body) bad("'payload' is not base64 (RFC 4648, padded)");
  e.payload_type = *type;
  e.payload = std::move(*body);
  if (sigs->array.empty() || sigs->array.size() > kMaxSignatures) {
    bad(std::to_string(sigs->array.size()) + " signatures (1 to " + std::to_string(kMaxSignatures) + " are read)");
  }
  for (std::size_t i = 0; i < sigs->array.size(); ++i) {
    const json::Value& s = sigs->array[i];
    const std::string* keyid = s.get_string("keyid");
    const std::string* sig = s.get_string("sig");
    std::string at = "signatures[" + std::to_string(i) + "]";
    if (keyid == nullptr || sig == nullptr) bad(at + " needs string 'keyid' and 'sig'");
    std::optional<std::string> raw = base64_decode(*sig);
    if (!raw || raw->size() != 64) bad(at + ".sig is not the base64 of a 64-byte Ed25519 signature");
    DsseSignature out;
    out.key_id = *keyid;
    std::copy(raw->begin(), raw->end(), out.sig.begin());
    e.signatures.push_back(out);
  }
  return e;
}

std::vector<std::string> dsse_verified_keys(const DsseEnvelope& envelope, const TrustSet& trust,
                                            std::vector<std::string>* rejected) {
  const std::string pae = dsse_pae(envelope.payload_type, envelope.payload);
  std::vector<std::string> valid;
  std::set<std::string> seen;
  for (const DsseSignature& s : envelope.signatures) {
    const PublicKey* key = trust.find(s.key_id);
    if (key == nullptr) {
      const std::string* why = trust.unusable(s.key_id);
      if (rejected) rejected->push_back("key " + s.key_id + (why != nullptr ? " " + *why : " is not trusted"));
      continue;
    }
    if (!key->verify(reinterpret_cast<const std::uint8_t*>(pae.data()), pae.size(), s.sig)) {
      if (rejected) rejected->push_back("key " + s.key_id + ": the signature does not verify");
      continue;
    }
    if (seen.insert(s.key_id).second) valid.push_back(s.key_id);
  }
  return valid;
}

}  // namespace kiln
