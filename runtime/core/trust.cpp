#include "core/trust.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <ctime>
#include <set>

#include "core/error.hpp"
#include "core/file_io.hpp"

namespace kiln {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

TrustSet TrustSet::from_document(const TrustDocument& doc, const std::string& role, std::uint64_t now,
                                 const std::string& origin) {
  TrustSet set;
  set.version_ = doc.version;
  std::string in = "trust version " + std::to_string(doc.version) + " (" + origin + ")";
  for (const RevokedKey& r : doc.revoked) set.unusable_.emplace_back(r.key_id, "was revoked in " + in + ": " + r.reason);
  for (const TrustedKey& k : doc.keys) {
    const std::string& id = k.key.key_id();
    if (set.unusable(id) != nullptr) continue;  // revoked: the revocation wins over the listing
    if (std::find(k.roles.begin(), k.roles.end(), role) == k.roles.end()) {
      set.unusable_.emplace_back(id, "is not a " + role + " key in " + in);
    } else if (k.not_before != 0 && now < k.not_before) {
      set.unusable_.emplace_back(id, "is not valid before " + utc_text(k.not_before) + " in " + in);
    } else if (k.not_after != 0 && now >= k.not_after) {
      set.unusable_.emplace_back(id, "expired at " + utc_text(k.not_after) + " in " + in);
    } else {
      set.add(k.key, origin + " (trust version " + std::to_string(doc.version) + ")");
    }
  }
  if (set.size() == 0) {
    fail(Errc::invalid_argument, origin + ": " + in + " makes no " + role + " key usable now");
  }
  return set;
}

const std::string* TrustSet::unusable(const std::string& key_id) const {
  for (const auto& [id, why] : unusable_) {
    if (id == key_id) return &why;
  }
  return nullptr;
}

TrustSet TrustSet::load(const std::string& path, const std::string& role) {
  TrustSet set;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail(Errc::io, path + ": cannot read the trust keys: " + errno_text(errno));
  auto from_trust_file = [&](const std::string& file, const std::string& text) {
    auto now = static_cast<std::uint64_t>(std::time(nullptr));
    return from_document(verify_trust_file(text, file, now), role, now, file);
  };
  if (S_ISDIR(st.st_mode)) {
    std::vector<std::string> names;
    bool trust_file = false;
    for (std::string& name : list_directory(path)) {
      trust_file = trust_file || name == "trust.json";
      if (ends_with(name, ".pub") || ends_with(name, ".pem")) names.push_back(std::move(name));
    }
    if (trust_file) {
      if (!names.empty()) {
        fail(Errc::invalid_argument, path + ": holds trust.json and key files (" + names[0] +
                                         "): a trust folder is one or the other");
      }
      std::string file = path + "/trust.json";
      return from_trust_file(file, read_small_file(file, kMaxTrustFileBytes));
    }
    for (const std::string& name : names) {
      std::string file = path + "/" + name;
      set.add(PublicKey::from_pem(read_small_file(file, 64 * 1024), file), file);
    }
    if (set.size() == 0) fail(Errc::invalid_argument, path + ": the trust directory holds no *.pub or *.pem key");
  } else {
    std::string text = read_small_file(path, kMaxTrustFileBytes);
    if (looks_like_trust_file(text)) return from_trust_file(path, text);
    set.add(PublicKey::from_pem(text, path), path);
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
      const std::string* why = policy.trust ? policy.trust->unusable(rec.attributes.key_id) : nullptr;
      check.detail = "key " + rec.attributes.key_id + (why != nullptr ? " " + *why : " is not in the trust set");
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
      std::string strangers, refused_keys;
      std::size_t named = 0, untrusted = 0;
      for (const SignatureCheck& c : report.checks) {
        if (c.status != SignatureStatus::untrusted_key) continue;
        // A key the trust file names but does not let sign: the reason is the answer.
        const std::string* why = policy.trust ? policy.trust->unusable(c.key_id) : nullptr;
        if (why != nullptr) {
          refused_keys += "; key " + c.key_id + " (signer '" + c.signer + "') " + *why;
          continue;
        }
        ++untrusted;
        if (named++ < 4) strangers += (strangers.empty() ? "" : ", ") + std::string("key ") + c.key_id + " (signer '" + c.signer + "')";
      }
      if (untrusted > 0) {
        report.failure += "; signed by " + strangers + (untrusted > 4 ? " and " + std::to_string(untrusted - 4) + " more" : "") +
                          ", not in the trust set";
      }
      report.failure += refused_keys;
    }
  }
  report.satisfied = !refused && report.distinct_trusted_signers >= policy.threshold;
  return report;
}

}  // namespace kiln
