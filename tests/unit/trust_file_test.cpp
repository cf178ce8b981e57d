// Trust files (schema/SECURITY.md, "Trust files"): the root's signed list of keys, their roles and
// validity windows, revocations, a version and an expiry. Each refusal is pinned by its reason: a
// revoked or expired key, a key of the wrong role, an expired file, a root short of its threshold,
// a new root the old one did not sign, an older version, an altered payload, an unknown field.
#include <gtest/gtest.h>

#include <ctime>
#include <functional>
#include <string>
#include <vector>

#include "core/archive_reader.hpp"
#include "core/base64.hpp"
#include "core/dsse.hpp"
#include "core/error.hpp"
#include "core/trust.hpp"
#include "core/trust_file.hpp"
#include "test_support.hpp"

namespace kiln {
namespace {

std::uint64_t now() { return static_cast<std::uint64_t>(std::time(nullptr)); }

struct Keys {
  PrivateKey root_a = PrivateKey::generate(), root_b = PrivateKey::generate(), root_new = PrivateKey::generate();
  PrivateKey release = PrivateKey::generate(), verifier = PrivateKey::generate();
};

TrustDocument document(const Keys& k, std::uint64_t version) {
  TrustDocument d;
  d.version = version;
  d.expires = now() + 86400;
  d.root_threshold = 2;
  d.root_keys = {k.root_a.public_key(), k.root_b.public_key()};
  d.keys = {{k.release.public_key(), {kReleaseRole}, 0, 0}, {k.verifier.public_key(), {kAttestationRole}, 0, 0}};
  return d;
}

std::string sign(const TrustDocument& d, const std::vector<const PrivateKey*>& keys) {
  return dsse_envelope_json(kTrustPayloadType, trust_payload_json(d), keys);
}

std::string refusal(const std::function<void()>& f, Errc code) {
  try {
    f();
  } catch (const Failure& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "accepted";
  return "";
}

TEST(TrustFile, RoundTripsAndGivesEachRoleItsOwnKeys) {
  Keys k;
  TrustDocument d = verify_trust_file(sign(document(k, 3), {&k.root_a, &k.root_b}), "trust.json", now());
  EXPECT_EQ(d.version, 3u);
  EXPECT_EQ(trust_payload_json(d), trust_payload_json(document(k, 3)));
  TrustSet release = TrustSet::from_document(d, kReleaseRole, now(), "trust.json");
  EXPECT_NE(release.find(k.release.public_key().key_id()), nullptr);
  EXPECT_EQ(release.find(k.verifier.public_key().key_id()), nullptr);
  EXPECT_NE(release.unusable(k.verifier.public_key().key_id())->find("is not a release key in trust version 3 (trust.json)"),
            std::string::npos);
  TrustSet attest = TrustSet::from_document(d, kAttestationRole, now(), "trust.json");
  EXPECT_NE(attest.find(k.verifier.public_key().key_id()), nullptr);
  EXPECT_EQ(attest.find(k.release.public_key().key_id()), nullptr);
  // An archive signed by the release key verifies; one by the attestation key does not, saying why.
  test::open_and_verify(test::build_signed({&k.release}), release);
  std::string why = refusal([&] { test::open_and_verify(test::build_signed({&k.verifier}), release); }, Errc::signature);
  EXPECT_NE(why.find("key " + k.verifier.public_key().key_id() + " (signer 'signer-0') is not a release key"), std::string::npos)
      << why;
}

TEST(TrustFile, ARevokedOrExpiredKeyIsRefusedWithThatReason) {
  Keys k;
  TrustDocument d = document(k, 4);
  d.revoked.push_back({k.release.public_key().key_id(), "laptop stolen 2026-11-30"});
  PrivateKey old = PrivateKey::generate();
  const std::uint64_t old_expiry = now() - 3600;  // read once: the message names this second
  d.keys.push_back({old.public_key(), {kReleaseRole}, old_expiry - 3600, old_expiry});
  PrivateKey spare = PrivateKey::generate();
  d.keys.push_back({spare.public_key(), {kReleaseRole}, 0, 0});
  TrustSet release = TrustSet::from_document(verify_trust_file(sign(d, {&k.root_a, &k.root_b}), "t.json", now()),
                                             kReleaseRole, now(), "t.json");
  std::string revoked = refusal([&] { test::open_and_verify(test::build_signed({&k.release}), release); }, Errc::signature);
  EXPECT_NE(revoked.find("was revoked in trust version 4 (t.json): laptop stolen 2026-11-30"), std::string::npos) << revoked;
  std::string expired = refusal([&] { test::open_and_verify(test::build_signed({&old}), release); }, Errc::signature);
  EXPECT_NE(expired.find("expired at " + utc_text(old_expiry)), std::string::npos) << expired;
  test::open_and_verify(test::build_signed({&spare}), release);
  // The same reasons reach attestation checks (DSSE).
  std::vector<std::string> rejected;
  DsseEnvelope e = dsse_parse(dsse_envelope_json("x", "y", {&k.release}), "e");
  EXPECT_TRUE(dsse_verified_keys(e, release, &rejected).empty());
  ASSERT_EQ(rejected.size(), 1u);
  EXPECT_NE(rejected[0].find("was revoked in trust version 4"), std::string::npos) << rejected[0];
}

TEST(TrustFile, AnExpiredFileOrOneItsRootDidNotSignIsRefused) {
  Keys k;
  TrustDocument d = document(k, 5);
  d.expires = now() - 60;  // read once: the message names this second, and a slow build crosses one
  std::string expired = refusal([&] { verify_trust_file(sign(d, {&k.root_a, &k.root_b}), "t.json", now()); }, Errc::refused);
  EXPECT_NE(expired.find("t.json (version 5) expired at " + utc_text(d.expires)), std::string::npos) << expired;
  EXPECT_NE(expired.find("freeze"), std::string::npos);
  std::string short_of = refusal([&] { verify_trust_file(sign(document(k, 5), {&k.root_a}), "t.json", now()); }, Errc::refused);
  EXPECT_NE(short_of.find("1 distinct root key(s) of its own signed it, 2 required"), std::string::npos) << short_of;
  // A signature by the same root key twice counts once.
  EXPECT_THROW(verify_trust_file(sign(document(k, 5), {&k.root_a, &k.root_a}), "t.json", now()), Failure);
  // One changed byte of the signed payload (version 5 -> 6), the root's signatures kept: none verifies.
  std::string good = sign(document(k, 5), {&k.root_a, &k.root_b});
  DsseEnvelope e = dsse_parse(good, "t");
  std::string payload = e.payload;
  payload[payload.find("\"version\":5") + 10] = '6';
  std::string changed = good;
  changed.replace(changed.find(base64_encode(e.payload)), base64_encode(e.payload).size(), base64_encode(payload));
  std::string altered = refusal([&] { verify_trust_file(changed, "t.json", now()); }, Errc::refused);
  EXPECT_NE(altered.find("t.json (version 6): 0 distinct root key(s) of its own signed it, 2 required"), std::string::npos)
      << altered;
}

TEST(TrustFile, RotationNeedsTheOldRootAndAHigherVersion) {
  Keys k;
  TrustDocument v1 = verify_trust_file(sign(document(k, 1), {&k.root_a, &k.root_b}), "v1", now());
  TrustDocument v2 = document(k, 2);
  v2.root_keys = {k.root_new.public_key()};
  v2.root_threshold = 1;
  std::string alone = refusal([&] { verify_trust_file(sign(v2, {&k.root_new}), "v2", now(), &v1); }, Errc::refused);
  EXPECT_NE(alone.find("0 distinct key(s) of the trusted version 1's root signed it, 2 required"), std::string::npos) << alone;
  TrustDocument rotated = verify_trust_file(sign(v2, {&k.root_new, &k.root_a, &k.root_b}), "v2", now(), &v1);
  EXPECT_EQ(rotated.version, 2u);
  // Version 3 under the new root alone now passes; version 1 replayed after 2 does not.
  TrustDocument v3 = v2;
  v3.version = 3;
  verify_trust_file(sign(v3, {&k.root_new}), "v3", now(), &rotated);
  std::string rollback = refusal([&] { verify_trust_file(sign(document(k, 1), {&k.root_a, &k.root_b}), "v1", now(), &rotated); },
                                 Errc::refused);
  EXPECT_NE(rollback.find("is version 1, not above version 2 already trusted"), std::string::npos) << rollback;
}

TEST(TrustFile, MalformedDocumentsAreRefusedByField) {
  Keys k;
  std::string payload = trust_payload_json(document(k, 1));
  std::string extra = payload.substr(0, payload.size() - 1) + ",\"allow_unsigned\":true}";
  EXPECT_NE(refusal([&] { parse_trust_payload(extra, "t"); }, Errc::malformed).find("unknown field 'allow_unsigned'"),
            std::string::npos);
  TrustDocument too_high = document(k, 1);
  too_high.root_threshold = 3;
  EXPECT_NE(refusal([&] { parse_trust_payload(trust_payload_json(too_high), "t"); }, Errc::malformed).find("threshold 3 needs"),
            std::string::npos);
  TrustDocument bad_revoked = document(k, 1);
  bad_revoked.revoked.push_back({"not-a-key-id", "x"});
  EXPECT_NE(refusal([&] { parse_trust_payload(trust_payload_json(bad_revoked), "t"); }, Errc::malformed).find("key_id must be"),
            std::string::npos);
  EXPECT_NE(refusal([&] { verify_trust_file(dsse_envelope_json("text/plain", payload, {&k.root_a}), "t", now()); },
                    Errc::malformed).find("payloadType is 'text/plain'"),
            std::string::npos);
}

}  // namespace
}  // namespace kiln
