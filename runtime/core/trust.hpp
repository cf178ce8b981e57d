// Which keys are trusted, and how many distinct trusted signers an archive needs.
#pragma once

#include <string>
#include <vector>

#include "core/ed25519.hpp"
#include "core/format.hpp"
#include "core/trust_file.hpp"

namespace kiln {

class TrustSet {
 public:
  // A PEM public key file; a trust file (trust_file.hpp), whose keys of `role` that are valid
  // now count; a directory holding trust.json (that trust file, and nothing else); or a
  // directory whose *.pub and *.pem files are each one key. An empty directory or an unreadable
  // key is an error: a trust set that silently trusts nothing would turn every verification
  // into a puzzle. An expired trust file, or one its root did not sign, is refused.
  static TrustSet load(const std::string& path, const std::string& role = kReleaseRole);
  // The keys of `role` a verified trust document makes usable at `now`; the others it lists, and
  // those it revokes, are remembered with why (unusable()).
  static TrustSet from_document(const TrustDocument& doc, const std::string& role, std::uint64_t now,
                                const std::string& origin);
  void add(const PublicKey& key, const std::string& origin);
  const PublicKey* find(const std::string& key_id) const;
  const std::string* origin_of(const std::string& key_id) const;
  // Why a key the trust file names is not trusted ("was revoked in trust version 3 (trust.json):
  // compromised"), or null for a key it does not name.
  const std::string* unusable(const std::string& key_id) const;
  std::size_t size() const { return keys_.size(); }
  // The trust file it came from (version 0: a key file or folder).
  std::uint64_t version() const { return version_; }

 private:
  std::vector<PublicKey> keys_;
  std::vector<std::string> origins_;
  std::vector<std::pair<std::string, std::string>> unusable_;  // key id, why
  std::uint64_t version_ = 0;
};

struct TrustPolicy {
  const TrustSet* trust = nullptr;
  unsigned threshold = 1;  // distinct trusted keys that must have signed
};

enum class SignatureStatus {
  valid,          // by a trusted key, over this archive
  untrusted_key,  // by a key outside the trust set: not counted, not an error by itself
  bad_signature,  // claims a trusted key but does not verify: the archive is refused
  wrong_archive,  // signed attributes name another digest, package or sequence: refused
};
const char* signature_status_name(SignatureStatus s);

struct SignatureCheck {
  std::size_t position = 0;
  std::string key_id;
  std::string signer;
  std::uint64_t created = 0;
  SignatureStatus status = SignatureStatus::untrusted_key;
  std::string detail;
};

struct TrustReport {
  std::vector<SignatureCheck> checks;
  unsigned distinct_trusted_signers = 0;
  unsigned threshold = 0;
  bool satisfied = false;
  std::string failure;  // why not satisfied, in words
};

// Checks every signature of an archive whose index digest is `digest`. Never throws for
// a bad signature: the report says what was found and whether the policy holds.
TrustReport evaluate_signatures(const std::vector<format::SignatureRecord>& records, const Sha256& digest,
                                const TrustPolicy& policy);

}  // namespace kiln
