// A store that follows a trust file (schema/SECURITY.md, "Trust files"), through the CLI as an
// operator runs it: `kiln trust sign` makes versions from TOML, `kiln store init --trust` takes
// the first, `kiln store trust` moves to a newer one the root signed. A revoked key's archive is
// then refused with the revocation's reason; an older version, a new root the old one did not
// sign and an expired file are refused, and the store keeps the file it held.
#include <gtest/gtest.h>

#include <unistd.h>

#include <ctime>
#include <string>

#include "store_fixture.hpp"

namespace kiln {
namespace {

struct TrustFixture : Fixture {
  std::string keys = dir + "/keys";
  TrustFixture() {
    std::system(("mkdir -p '" + keys + "' && cp '" + kKeys + "/test.pub' '" + keys + "/release.pub'").c_str());
    for (const char* name : {"root", "other-root", "spare"}) {
      EXPECT_EQ(kiln("keygen --out " + keys + "/" + name).rc, 0);
    }
  }
  // Writes version `v`'s source and signs it with `signer`'s key; returns the trust file.
  std::string version(int v, const std::string& extra, const std::string& signer = "root",
                      const std::string& expires = "2099-01-01T00:00:00Z", const std::string& root = "root") {
    std::string src = keys + "/v" + std::to_string(v) + ".toml";
    spit(src, "version = " + std::to_string(v) + "\nexpires = " + expires + "\n[root]\nthreshold = 1\nkeys = [\"" + root +
                  ".pub\"]\n[[key]]\npublic_key = \"release.pub\"\nroles = [\"release\"]\n[[key]]\npublic_key = \"spare.pub\"\n"
                  "roles = [\"release\", \"attestation\"]\n" + extra);
    std::string out = keys + "/v" + std::to_string(v) + ".json";
    CliRun r = kiln("trust sign " + src + " --key " + keys + "/" + signer + ".key -o " + out + " --force");
    EXPECT_EQ(r.rc, 0) << r.output;
    return out;
  }
  std::string release_id() {
    std::string out = kiln("verify " + v1 + " --trust " + kKeys + "/test.pub").output;
    std::size_t at = out.find("key ");
    return at == std::string::npos ? "" : out.substr(at + 4, 32);
  }
};

TEST(StoreTrust, AStoreFollowsItsRootsTrustFilesAndRefusesWhatTheyRevoke) {
  TrustFixture f;
  std::string v1 = f.version(1, "");
  CliRun init = kiln("store init --store " + f.store + " --trust " + v1);
  ASSERT_EQ(init.rc, 0) << init.output;
  ASSERT_EQ(kiln("store add " + f.v1 + " --store " + f.store).rc, 0);
  // `kiln verify` takes the trust file as --trust too.
  CliRun verified = kiln("verify " + f.v1 + " --trust " + v1);
  EXPECT_EQ(verified.rc, 0) << verified.output;

  std::string id = f.release_id();
  ASSERT_EQ(id.size(), 32u);
  std::string v2 = f.version(2, "[[revoked]]\nkey_id = \"" + id + "\"\nreason = \"laptop stolen\"\n");
  CliRun moved = kiln("store trust " + v2 + " --store " + f.store);
  ASSERT_EQ(moved.rc, 0) << moved.output;
  EXPECT_TRUE(contains(moved.output, "trust version 2")) << moved.output;
  CliRun refused = kiln("store add " + f.v2 + " --store " + f.store);
  EXPECT_NE(refused.rc, 0);
  EXPECT_TRUE(contains(refused.output, "was revoked in trust version 2")) << refused.output;
  EXPECT_TRUE(contains(refused.output, "laptop stolen")) << refused.output;
  EXPECT_TRUE(contains(kiln("trust show " + v2).output, "revoked " + id + ": laptop stolen"));

  // Version 1 again (a replay), a version a stranger's root signed, an expired one: all refused.
  CliRun replay = kiln("store trust " + v1 + " --store " + f.store);
  EXPECT_NE(replay.rc, 0);
  EXPECT_TRUE(contains(replay.output, "is version 1, not above version 2 already trusted")) << replay.output;
  std::string foreign = f.version(3, "", "other-root", "2099-01-01T00:00:00Z", "other-root");
  CliRun takeover = kiln("store trust " + foreign + " --store " + f.store);
  EXPECT_NE(takeover.rc, 0);
  EXPECT_TRUE(contains(takeover.output, "a new root is trusted only when the old one signs it over")) << takeover.output;
  std::string stale = f.version(4, "", "root", "2001-01-01T00:00:00Z");
  CliRun expired = kiln("store trust " + stale + " --store " + f.store);
  EXPECT_NE(expired.rc, 0);
  EXPECT_TRUE(contains(expired.output, "expired at 2001-01-01 00:00:00 UTC")) << expired.output;
  // Through all that the store kept version 2.
  EXPECT_EQ(slurp(f.store + "/trust/trust.json"), slurp(v2));
}

// The held trust file expires: the store refuses what needs its keys, saying so, and a renewal
// the root signed is still taken (the one operation an expired file must not block).
TEST(StoreTrust, AnExpiredTrustFileIsRenewedInPlace) {
  TrustFixture f;
  std::time_t soon = std::time(nullptr) + 3;
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&soon));
  ASSERT_EQ(kiln("store init --store " + f.store + " --trust " + f.version(1, "", "root", when)).rc, 0);
  ::sleep(4);
  CliRun stale = kiln("store add " + f.v1 + " --store " + f.store);
  EXPECT_NE(stale.rc, 0);
  EXPECT_TRUE(contains(stale.output, "(version 1) expired at")) << stale.output;
  CliRun renewed = kiln("store trust " + f.version(2, "") + " --store " + f.store);
  ASSERT_EQ(renewed.rc, 0) << renewed.output;
  CliRun added = kiln("store add " + f.v1 + " --store " + f.store);
  EXPECT_EQ(added.rc, 0) << added.output;
}

TEST(StoreTrust, TrustFilesAreCheckedBeforeAnythingIsWritten) {
  TrustFixture f;
  // A key-folder store has no root to check a trust file against.
  ASSERT_EQ(kiln("store init --store " + f.store + " --trust " + kKeys + "/test.pub").rc, 0);
  CliRun plain = kiln("store trust " + f.version(1, "") + " --store " + f.store);
  EXPECT_NE(plain.rc, 0);
  EXPECT_TRUE(contains(plain.output, "this store trusts a folder of keys")) << plain.output;
  // A source naming an unknown role, or signed by a key that is not its root, is not written.
  spit(f.keys + "/bad.toml", "version = 1\nexpires = 2099-01-01T00:00:00Z\n[root]\nthreshold = 1\nkeys = [\"root.pub\"]\n"
                             "[[key]]\npublic_key = \"release.pub\"\nroles = [\"admin\"]\n");
  CliRun role = kiln("trust sign " + f.keys + "/bad.toml --key " + f.keys + "/root.key -o " + f.keys + "/bad.json");
  EXPECT_NE(role.rc, 0);
  EXPECT_TRUE(contains(role.output, "has a role that is not 'release' or 'attestation'")) << role.output;
  f.version(1, "");
  CliRun wrong = kiln("trust sign " + f.keys + "/v1.toml --key " + f.keys + "/spare.key -o " + f.keys + "/w.json");
  EXPECT_NE(wrong.rc, 0);
  EXPECT_TRUE(contains(wrong.output, "0 distinct root key(s) of its own signed it, 1 required")) << wrong.output;
  EXPECT_NE(::access((f.keys + "/w.json").c_str(), F_OK), 0);
}

}  // namespace
}  // namespace kiln
