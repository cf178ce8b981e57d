// DSSE v1 envelopes (Dead Simple Signing Envelope, github.com/secure-systems-lab/dsse): what an
// attestation travels in. A signature covers PAE(payloadType, payload) =
//   "DSSEv1" SP LEN(payloadType) SP payloadType SP LEN(payload) SP payload
// (LEN: the byte length in ASCII decimal, no leading zeros), never the JSON around it, so any DSSE
// implementation verifies kiln's envelopes. schema/ATTESTATION.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/ed25519.hpp"
#include "core/trust.hpp"

namespace kiln {

struct DsseSignature {
  std::string key_id;  // kiln's key id of the signing key (PublicKey::key_id)
  Ed25519Signature sig{};
};

struct DsseEnvelope {
  std::string payload_type;
  std::string payload;  // the bytes signed (decoded from base64)
  std::vector<DsseSignature> signatures;
};

std::string dsse_pae(const std::string& payload_type, const std::string& payload);

// The envelope as JSON, signed by each key in order: {"payloadType", "payload" (base64),
// "signatures": [{"keyid", "sig" (base64)}]}.
std::string dsse_envelope_json(const std::string& payload_type, const std::string& payload,
                               const std::vector<const PrivateKey*>& keys);

// Parses an envelope: the three fields, strict base64, 64-byte signatures, at most 64 of them.
// Throws Errc::malformed naming `what` and the field.
DsseEnvelope dsse_parse(const std::string& json, const std::string& what);

// The key ids (distinct, in the envelope's order) of the signatures that verify with a key of
// `trust`; untrusted key ids and failed signatures are not counted (`rejected` gets why).
std::vector<std::string> dsse_verified_keys(const DsseEnvelope& envelope, const TrustSet& trust,
                                            std::vector<std::string>* rejected);

}  // namespace kiln
