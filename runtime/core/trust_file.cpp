#include "core/trust_file.hpp"

#include <algorithm>
#include <ctime>
#include <set>

#include "core/dsse.hpp"
#include "core/error.hpp"
#include "core/json.hpp"

namespace kiln {
namespace {

constexpr std::size_t kMaxRootKeys = 64;
constexpr std::size_t kMaxKeys = 1024;
constexpr std::size_t kMaxReasonText = 512;

bool known_role(const std::string& r) { return r == kReleaseRole || r == kAttestationRole; }

// The key ids of `keys` that signed `envelope` (verified), distinct.
std::set<std::string> signed_by(const DsseEnvelope& envelope, const std::vector<PublicKey>& keys) {
  std::string pae = dsse_pae(envelope.payload_type, envelope.payload);
  std::set<std::string> out;
  for (const DsseSignature& s : envelope.signatures) {
    for (const PublicKey& k : keys) {
      if (k.key_id() == s.key_id && k.verify(reinterpret_cast<const std::uint8_t*>(pae.data()), pae.size(), s.sig)) {
        out.insert(s.key_id);
      }
    }
  }
  return out;
}

class Reader {
 public:
  Reader(const json::Value& v, std::string where, std::string what) : v_(v), where_(std::move(where)), what_(std::move(what)) {
    if (v_.type != json::Value::Type::object) bad("must be an object");
  }
  [[noreturn]] void bad(const std::string& why) const { fail(Errc::malformed, what_ + ": " + where_ + " " + why); }
  const json::Value& need(const std::string& key) const {
    const json::Value* f = v_.get(key);
    if (f == nullptr) bad("has no '" + key + "'");
    return *f;
  }
  std::uint64_t number(const std::string& key, bool required, std::uint64_t lo) const {
    const json::Value* f = v_.get(key);
    if (f == nullptr) {
      if (required) bad("has no '" + key + "'");
      return 0;
    }
    if (f->type != json::Value::Type::number || f->number < static_cast<std::int64_t>(lo)) {
      bad("'" + key + "' must be an integer of at least " + std::to_string(lo));
    }
    return static_cast<std::uint64_t>(f->number);
  }
  std::string string(const std::string& key) const {
    const json::Value& f = need(key);
    if (f.type != json::Value::Type::string) bad("'" + key + "' must be a string");
    return f.string;
  }
  const std::vector<json::Value>& array(const std::string& key, std::size_t max) const {
    const json::Value& f = need(key);
    if (f.type != json::Value::Type::array) bad("'" + key + "' must be an array");
    if (f.array.size() > max) bad("'" + key + "' holds more than " + std::to_string(max) + " entries");
    return f.array;
  }
  // A field this reader does not know is refused: an older kiln must not ignore a restriction.
  void only(const std::set<std::string>& known) const {
    for (const auto& [k, _] : v_.object) {
      if (known.count(k) == 0) bad("has an unknown field '" + k + "'");
    }
  }

 private:
  const json::Value& v_;
  std::string where_, what_;
};

}  // namespace

std::string utc_text(std::uint64_t seconds) {
  std::time_t t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

std::string trust_payload_json(const TrustDocument& doc) {
  json::Writer w;
  w.begin_object().field("_type", kTrustDocumentType).field("version", doc.version).field("expires", doc.expires);
  w.key("root").begin_object().field("threshold", doc.root_threshold).key("keys").begin_array();
  for (const PublicKey& k : doc.root_keys) w.value(k.to_pem());
  w.end_array().end_object().key("keys").begin_array();
  for (const TrustedKey& k : doc.keys) {
    w.begin_object().field("public_key", k.key.to_pem()).key("roles").begin_array();
    for (const std::string& r : k.roles) w.value(r);
    w.end_array();
    if (k.not_before != 0) w.field("not_before", k.not_before);
    if (k.not_after != 0) w.field("not_after", k.not_after);
    w.end_object();
  }
  w.end_array().key("revoked").begin_array();
  for (const RevokedKey& r : doc.revoked) w.begin_object().field("key_id", r.key_id).field("reason", r.reason).end_object();
  w.end_array().end_object();
  return w.str();
}

TrustDocument parse_trust_payload(const std::string& text, const std::string& what) {
  json::Value v = json::parse(text, what + " payload");
  Reader top(v, "the trust document", what);
  top.only({"_type", "version", "expires", "root", "keys", "revoked"});
  if (top.string("_type") != kTrustDocumentType) top.bad("is not a " + std::string(kTrustDocumentType) + " document");
  TrustDocument doc;
  doc.version = top.number("version", true, 1);
  doc.expires = top.number("expires", true, 1);
  Reader root(top.need("root"), "its root", what);
  root.only({"threshold", "keys"});
  std::set<std::string> ids;
  for (const json::Value& k : root.array("keys", kMaxRootKeys)) {
    if (k.type != json::Value::Type::string) root.bad("keys must be PEM strings");
    doc.root_keys.push_back(PublicKey::from_pem(k.string, what + " root key"));
    if (!ids.insert(doc.root_keys.back().key_id()).second) root.bad("lists key " + doc.root_keys.back().key_id() + " twice");
  }
  std::uint64_t threshold = root.number("threshold", true, 1);
  if (doc.root_keys.empty() || threshold > doc.root_keys.size()) {
    root.bad("threshold " + std::to_string(threshold) + " needs at least that many root keys (it lists " +
             std::to_string(doc.root_keys.size()) + ")");
  }
  doc.root_threshold = static_cast<unsigned>(threshold);
  ids.clear();
  const std::vector<json::Value>& keys = top.array("keys", kMaxKeys);
  for (std::size_t i = 0; i < keys.size(); ++i) {
    Reader k(keys[i], "keys[" + std::to_string(i) + "]", what);
    k.only({"public_key", "roles", "not_before", "not_after"});
    TrustedKey t{PublicKey::from_pem(k.string("public_key"), what + " keys[" + std::to_string(i) + "]"), {}, 0, 0};
    if (!ids.insert(t.key.key_id()).second) k.bad("is key " + t.key.key_id() + " again");
    for (const json::Value& r : k.array("roles", 2)) {
      if (r.type != json::Value::Type::string || !known_role(r.string)) k.bad("has a role that is not 'release' or 'attestation'");
      if (std::find(t.roles.begin(), t.roles.end(), r.string) != t.roles.end()) k.bad("lists role '" + r.string + "' twice");
      t.roles.push_back(r.string);
    }
    if (t.roles.empty()) k.bad("has no role");
    t.not_before = k.number("not_before", false, 1);
    t.not_after = k.number("not_after", false, 1);
    if (t.not_before != 0 && t.not_after != 0 && t.not_before >= t.not_after) k.bad("has not_before at or after not_after");
    doc.keys.push_back(std::move(t));
  }
  const std::vector<json::Value>& revoked = top.array("revoked", kMaxKeys);
  for (std::size_t i = 0; i < revoked.size(); ++i) {
    Reader r(revoked[i], "revoked[" + std::to_string(i) + "]", what);
    r.only({"key_id", "reason"});
    RevokedKey rk{r.string("key_id"), r.string("reason")};
    if (rk.key_id.size() != 32 || rk.key_id.find_first_not_of("0123456789abcdef") != std::string::npos) {
      r.bad("key_id must be a key id (32 lowercase hex digits, as `kiln keys` prints them)");
    }
    if (rk.reason.size() > kMaxReasonText) r.bad("reason is longer than " + std::to_string(kMaxReasonText) + " bytes");
    for (char c : rk.reason) {
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) r.bad("reason holds a control character");
    }
    doc.revoked.push_back(std::move(rk));
  }
  return doc;
}

bool looks_like_trust_file(const std::string& text) {
  std::size_t at = text.find_first_not_of(" \t\r\n");
  return at != std::string::npos && text[at] == '{';
}

TrustDocument verify_trust_file(const std::string& text, const std::string& what, std::uint64_t now,
                                const TrustDocument* previous) {
  if (text.size() > kMaxTrustFileBytes) {
    fail(Errc::malformed, what + ": " + std::to_string(text.size()) + " bytes; a trust file is at most " +
                              std::to_string(kMaxTrustFileBytes));
  }
  DsseEnvelope envelope = dsse_parse(text, what);
  if (envelope.payload_type != kTrustPayloadType) {
    fail(Errc::malformed, what + ": payloadType is '" + envelope.payload_type + "', not '" + kTrustPayloadType + "'");
  }
  TrustDocument doc = parse_trust_payload(envelope.payload, what);
  std::size_t own = signed_by(envelope, doc.root_keys).size();
  if (own < doc.root_threshold) {
    fail(Errc::refused, what + " (version " + std::to_string(doc.version) + "): " + std::to_string(own) +
                            " distinct root key(s) of its own signed it, " + std::to_string(doc.root_threshold) + " required");
  }
  if (previous != nullptr) {
    if (doc.version <= previous->version) {
      fail(Errc::refused, what + " is version " + std::to_string(doc.version) + ", not above version " +
                              std::to_string(previous->version) + " already trusted: an older or replayed trust file "
                              "(rollback of trust data) is refused");
    }
    std::size_t old_root = signed_by(envelope, previous->root_keys).size();
    if (old_root < previous->root_threshold) {
      fail(Errc::refused, what + " (version " + std::to_string(doc.version) + "): " + std::to_string(old_root) +
                              " distinct key(s) of the trusted version " + std::to_string(previous->version) +
                              "'s root signed it, " + std::to_string(previous->root_threshold) +
                              " required: a new root is trusted only when the old one signs it over");
    }
  }
  if (now != 0 && now >= doc.expires) {
    fail(Errc::refused, what + " (version " + std::to_string(doc.version) + ") expired at " + utc_text(doc.expires) +
                            ": renew it (a new version signed by the root); a trust file nobody renews may be an "
                            "attacker holding this node on old keys (freeze)");
  }
  return doc;
}

}  // namespace kiln
