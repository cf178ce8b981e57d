// Trust that can change (schema/SECURITY.md, "Trust files"): a trust file is a DSSE envelope
// whose payload lists root keys with their own threshold, the keys that sign releases and
// attestations with their validity windows, the keys revoked and why, a version and an expiry,
// signed by the root. A new version is accepted only if the previous root's threshold signed it
// too (rotation, TUF's rule), and only if its version is higher (rollback); an expired one is
// refused (a trust file nobody renews may be an attacker freezing a node on old keys).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/ed25519.hpp"

namespace kiln {

constexpr const char* kTrustPayloadType = "application/vnd.kiln.trust.v1+json";
constexpr const char* kTrustDocumentType = "kiln-trust/v1";
constexpr std::uint64_t kMaxTrustFileBytes = 1u << 20;

// A key's roles: which signatures it may make.
constexpr const char* kReleaseRole = "release";          // archives
constexpr const char* kAttestationRole = "attestation";  // attestations of GPU runs

struct TrustedKey {
  PublicKey key;
  std::vector<std::string> roles;
  std::uint64_t not_before = 0;  // seconds since the epoch; 0: no lower bound
  std::uint64_t not_after = 0;   // 0: no upper bound (the file's own expiry still applies)
};

struct RevokedKey {
  std::string key_id;
  std::string reason;
};

struct TrustDocument {
  std::uint64_t version = 0;
  std::uint64_t expires = 0;  // seconds since the epoch
  unsigned root_threshold = 1;
  std::vector<PublicKey> root_keys;
  std::vector<TrustedKey> keys;
  std::vector<RevokedKey> revoked;
};

// The payload's JSON, canonical for a document (what `kiln trust sign` signs).
std::string trust_payload_json(const TrustDocument& doc);
// The payload read and checked for shape (types, ranges, no unknown field, keys distinct);
// signatures are verify_trust_file's. Throws Errc::malformed naming `what`.
TrustDocument parse_trust_payload(const std::string& json, const std::string& what);

// True when a trust-set file's text is a trust file rather than a PEM key.
bool looks_like_trust_file(const std::string& text);

// Reads a trust file and checks it: at least root_threshold distinct root keys of its own signed
// it; not expired at `now` (0: expiry not checked, to read one that is being replaced or shown);
// and with `previous` (the trust file already held), a version above
// previous's, signed by previous's root threshold too. Throws Errc::refused (signatures, expiry,
// version) or Errc::malformed, naming `what`.
TrustDocument verify_trust_file(const std::string& envelope, const std::string& what, std::uint64_t now,
                                const TrustDocument* previous = nullptr);

// "2027-06-01 00:00:00 UTC".
std::string utc_text(std::uint64_t seconds);

}  // namespace kiln
