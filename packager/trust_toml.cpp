#include "trust_toml.hpp"

#include <ctime>
#include <set>

#include "core/error.hpp"
#include "core/file_io.hpp"
#include "core/manifest_toml.hpp"

namespace kiln::cli {
namespace {

struct Source {
  std::string path, folder;

  [[noreturn]] void bad(const toml::node* n, const std::string& why) const {
    std::string at = path;
    if (n != nullptr && n->source().begin.line > 0) {
      at += ":" + std::to_string(n->source().begin.line) + ":" + std::to_string(n->source().begin.column);
    }
    fail(Errc::invalid_argument, at + ": " + why);
  }
  void only(const toml::table& t, const std::set<std::string>& known, const std::string& what) const {
    for (auto&& [k, v] : t) {
      if (known.count(std::string(k.str())) == 0) bad(&v, what + " has an unknown key '" + std::string(k.str()) + "'");
    }
  }
  std::uint64_t seconds(const toml::node* n, const std::string& what) const {
    const toml::date_time* dt = n != nullptr ? n->as_date_time() ? &n->as_date_time()->get() : nullptr : nullptr;
    if (dt == nullptr || !dt->offset) bad(n, what + " must be a date-time with its offset (2027-06-01T00:00:00Z)");
    std::tm tm{};
    tm.tm_year = dt->date.year - 1900;
    tm.tm_mon = dt->date.month - 1;
    tm.tm_mday = dt->date.day;
    tm.tm_hour = dt->time.hour;
    tm.tm_min = dt->time.minute;
    tm.tm_sec = dt->time.second;
    std::int64_t t = static_cast<std::int64_t>(timegm(&tm)) - static_cast<std::int64_t>(dt->offset->minutes) * 60;
    if (t <= 0) bad(n, what + " must be after 1970");
    return static_cast<std::uint64_t>(t);
  }
  PublicKey key_file(const toml::node* n, const std::string& what) const {
    const std::string* file = n != nullptr && n->is_string() ? &n->as_string()->get() : nullptr;
    if (file == nullptr || file->empty()) bad(n, what + " must name a PEM public key file");
    std::string full = !file->empty() && (*file)[0] == '/' ? *file : folder + "/" + *file;
    return PublicKey::from_pem(read_small_file(full, 64 * 1024), full);
  }
};

}  // namespace

TrustDocument read_trust_source(const std::string& path) {
  Source src{path, path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/'))};
  toml::table doc;
  try {
    doc = toml::parse(read_small_file(path, 1 << 20), path);
  } catch (const toml::parse_error& e) {
    const auto& at = e.source().begin;
    fail(Errc::invalid_argument, path + ":" + std::to_string(at.line) + ":" + std::to_string(at.column) + ": " +
                                     std::string(e.description()));
  }
  src.only(doc, {"version", "expires", "root", "key", "revoked"}, "the trust file");
  TrustDocument out;
  const toml::node* version = doc.get("version");
  if (version == nullptr || !version->is_integer() || version->as_integer()->get() < 1) {
    src.bad(version, "version must be an integer of at least 1 (each new trust file a higher one)");
  }
  out.version = static_cast<std::uint64_t>(version->as_integer()->get());
  out.expires = src.seconds(doc.get("expires"), "expires");
  const toml::table* root = doc.get("root") != nullptr ? doc.get("root")->as_table() : nullptr;
  if (root == nullptr) src.bad(doc.get("root"), "needs a [root] table: threshold and keys");
  src.only(*root, {"threshold", "keys"}, "[root]");
  const toml::array* roots = root->get("keys") != nullptr ? root->get("keys")->as_array() : nullptr;
  if (roots == nullptr || roots->empty()) src.bad(root->get("keys"), "[root] keys must list PEM public key files");
  for (const toml::node& k : *roots) out.root_keys.push_back(src.key_file(&k, "a root key"));
  const toml::node* threshold = root->get("threshold");
  if (threshold == nullptr || !threshold->is_integer() || threshold->as_integer()->get() < 1 ||
      static_cast<std::size_t>(threshold->as_integer()->get()) > out.root_keys.size()) {
    src.bad(threshold, "[root] threshold must be 1 to the number of root keys (" + std::to_string(out.root_keys.size()) + ")");
  }
  out.root_threshold = static_cast<unsigned>(threshold->as_integer()->get());
  if (const toml::node* keys = doc.get("key")) {
    if (!keys->is_array_of_tables()) src.bad(keys, "key must be [[key]] tables");
    for (const toml::node& n : *keys->as_array()) {
      const toml::table& t = *n.as_table();
      src.only(t, {"public_key", "roles", "not_before", "not_after"}, "[[key]]");
      TrustedKey k{src.key_file(t.get("public_key"), "public_key"), {}, 0, 0};
      const toml::array* roles = t.get("roles") != nullptr ? t.get("roles")->as_array() : nullptr;
      if (roles == nullptr || roles->empty()) src.bad(&n, "[[key]] needs roles = [\"release\"] and/or \"attestation\"");
      for (const toml::node& r : *roles) {
        if (!r.is_string()) src.bad(&r, "a role is a string");
        k.roles.push_back(r.as_string()->get());
      }
      if (t.get("not_before") != nullptr) k.not_before = src.seconds(t.get("not_before"), "not_before");
      if (t.get("not_after") != nullptr) k.not_after = src.seconds(t.get("not_after"), "not_after");
      out.keys.push_back(std::move(k));
    }
  }
  if (const toml::node* revoked = doc.get("revoked")) {
    if (!revoked->is_array_of_tables()) src.bad(revoked, "revoked must be [[revoked]] tables");
    for (const toml::node& n : *revoked->as_array()) {
      const toml::table& t = *n.as_table();
      src.only(t, {"key_id", "reason"}, "[[revoked]]");
      const toml::node* id = t.get("key_id");
      const toml::node* reason = t.get("reason");
      if (id == nullptr || !id->is_string() || reason == nullptr || !reason->is_string()) {
        src.bad(&n, "[[revoked]] needs key_id and reason strings");
      }
      out.revoked.push_back({id->as_string()->get(), reason->as_string()->get()});
    }
  }
  // The same rules a reader applies to the signed payload, checked before anything is signed.
  parse_trust_payload(trust_payload_json(out), path);
  return out;
}

}  // namespace kiln::cli
