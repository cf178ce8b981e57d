#include "trust.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <set>

#include "error.hpp"
#include "file_io.hpp"

namespace kiln {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

TrustSet TrustSet::load(const std::string& path) {
  TrustSet set;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail(Errc::io, path + ": cannot read the trust keys: " + errno_text(errno));
  if (S_ISDIR(st.st_mode)) {
    std::vector<std::string> names;
    for (std::string& name : list_directory(path)) {
      if (ends_with(name, ".pub") || ends_with(name, ".pem")) names.push_back(std::move(name));
    }
    for (const std::string& name : names) {
      std::string file = path + "/" + name;
      set.add(PublicKey::from_pem(read_small_file(file, 64 * 1024), file), file);
    }
    if (set.size() == 0) fail(Errc::invalid_argument, path + ": the trust directory holds no *.pub or *.pem key");
  } else {
    set.add(PublicKey::from_pem(read_small_file(path, 64 * 1024), path), path);
  }
  return set;
}

void TrustSet::add(const PublicKey& key, const std::string& origin) {
  if (find(key.key_id()) != nullptr) return;  // the same key twice is still one key
  keys_.push_back(key);
  origins_.push_back(origin);
}

const PublicKey* TrustSet::find(const std::string& key_id) const {
  for (const PublicKey& k : keys_) {
    if (k.key_id() == key_id) return &k;
  }
  return nullptr;
}

const std::string* TrustSet::origin_of(const std::string& key_id) const {
  for (std::size_t i = 0; i < keys_.size(); ++i) {
    if (keys_[i].key_id() == key_id) return &origins_[i];
  }
  return nullptr;
}

const char* signature_status_name(SignatureStatus s) {
  switch (s) {
    case SignatureStatus::valid: return "valid";
    case SignatureStatus::untrusted_key: return "untrusted-key";
    case SignatureStatus::bad_signature: return "bad-signature";
    case SignatureStatus::wrong_archive: return "wrong-archive";
  }
  return "?";
}

TrustReport evaluate_signatures(const std::vector<format::SignatureRecord>& records, const Sha256& digest,
                                const TrustPolicy& policy) {
  TrustReport report;
  report.threshold = policy.threshold;
  std::set<std::string> trusted_signers;
  bool refused = false;
  for (std::size_t i = 0; i < records.size(); ++i) {
    const format::SignatureRecord& rec = records[i];
    SignatureCheck check;
    check.position = i;
    check.key_id = rec.attributes.key_id;
    check.signer = rec.attributes.signer;
    check.created = rec.attributes.created;
    const PublicKey* key = policy.trust ? policy.trust->find(rec.attributes.key_id) : nullptr;
    if (rec.attributes.archive_digest != digest) {
      check.status = SignatureStatus::wrong_archive;
      check.detail = "it was made over " + digest_string(rec.attributes.archive_digest) + " but this archive's index hashes to " +
                     digest_string(digest) + ": the index was altered, or the signature belongs to another archive";
    } else if (key == nullptr) {
      check.status = SignatureStatus::untrusted_key;
      check.detail = "key " + rec.attributes.key_id + " is not in the trust set";
    } else if (!key->verify(reinterpret_cast<const std::uint8_t*>(rec.attributes_text.data()),
                            rec.attributes_text.size(), rec.signature)) {
      check.status = SignatureStatus::bad_signature;
      check.detail = "the Ed25519 signature does not verify with trusted key " + rec.attributes.key_id + " (" +
                     *policy.trust->origin_of(rec.attributes.key_id) + ")";
    } else {
      check.status = SignatureStatus::valid;
      trusted_signers.insert(rec.attributes.key_id);
    }
    if (check.status == SignatureStatus::bad_signature || check.status == SignatureStatus::wrong_archive) {
      if (!refused) report.failure = "signature " + std::to_string(i) + ": " + check.detail;
      refused = true;
    }
    report.checks.push_back(std::move(check));
  }
  report.distinct_trusted_signers = static_cast<unsigned>(trusted_signers.size());
  if (!refused && report.distinct_trusted_signers < policy.threshold) {
    if (records.empty()) {
      report.failure = "the archive carries no signature";
    } else {
      report.failure = std::to_string(report.distinct_trusted_signers) + " distinct trusted signer(s), " +
                       std::to_string(policy.threshold) + " required (" + std::to_string(records.size()) +
                       " signature(s) present; a key counts once however often it signed)";
      // Who did sign, so that a missing key in the trust set can be told from a stranger's
      // archive. Key ids are hex and signer names printable ASCII (checked when the record was
      // decoded); at most four are named.
      std::string strangers;
      std::size_t named = 0, untrusted = 0;
      for (const SignatureCheck& c : report.checks) {
        if (c.status != SignatureStatus::untrusted_key) continue;
        ++untrusted;
        if (named++ < 4) strangers += (strangers.empty() ? "" : ", ") + std::string("key ") + c.key_id + " (signer '" + c.signer + "')";
      }
      if (untrusted > 0) {
        report.failure += "; signed by " + strangers + (untrusted > 4 ? " and " + std::to_string(untrusted - 4) + " more" : "") +
                          ", not in the trust set";
      }
    }
  }
  report.satisfied = !refused && report.distinct_trusted_signers >= policy.threshold;
  return report;
}

}  // namespace kiln
