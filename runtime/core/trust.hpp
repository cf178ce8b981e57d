// Which keys are trusted, and how many distinct trusted signers an archive needs.
#pragma once

#include <string>
#include <vector>

#include "ed25519.hpp"
#include "format.hpp"

namespace kiln {

class TrustSet {
 public:
  // A PEM public key file, or a directory whose *.pub and *.pem files are each one key.
  // An empty directory or an unreadable key is an error: a trust set that silently
  // trusts nothing would turn every verification into a puzzle.
  static TrustSet load(const std::string& path);
  void add(const PublicKey& key, const std::string& origin);
  const PublicKey* find(const std::string& key_id) const;
  const std::string* origin_of(const std::string& key_id) const;
  std::size_t size() const { return keys_.size(); }

 private:
  std::vector<PublicKey> keys_;
  std::vector<std::string> origins_;
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
