// kiln push / kiln pull / kiln store pull against a real registry (Debian's docker-registry,
// CNCF Distribution 2.8) started here on 127.0.0.1, through the kiln command as an operator runs
// it. Skipped, saying why, where docker-registry (or, for its test, skopeo) is not installed.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <cstdio>
#include <string>

#include "../store/store_fixture.hpp"
#include "../unit/attestation_text.hpp"
#include "../unit/run_command.hpp"
#include "core/dsse.hpp"
#include "core/file_io.hpp"
#include "core/sha256.hpp"
#include "registry/client.hpp"
#include "registry_fixture.hpp"
#include "store/oci.hpp"
#include "store/oci_attestation.hpp"
#include "store/oci_manifest.hpp"
#include "store/store.hpp"

namespace kiln {
namespace {

using test::read_text;

using Outcome = kiln::test::CommandResult;

using test::exists;
using test::field;
using test::shell;

// A ~3 MB archive of package `scale` that does not compress (random bytes), packed by the kiln
// command: big enough that a transfer can be cut in the middle of it.
std::string pack_big_archive(const std::string& dir) {
  std::string pkg = dir + "/big";
  ::mkdir(pkg.c_str(), 0755);
  spit(pkg + "/kiln.toml",
       "[package]\nname = \"scale\"\nkernel_revision = \"big\"\nsequence = 9\n[[kernel]]\nname = \"k\"\nentry = \"k\"\n"
       "backend = \"cuda\"\ncode = [{ arch = \"compute_80\", file = \"k.ptx\" }]\n[files]\nextra = [\"bulk.bin\"]\n");
  spit(pkg + "/k.ptx", ".version 7.0\n.target sm_80\n.address_size 64\n.visible .entry k() { ret; }\n");
  spit(pkg + "/bulk.bin", random_hex(1500000));  // 3 MB of hex: compresses to about half, still ~1.5 MB
  std::string out = dir + "/big.kiln";
  Outcome packed = shell(std::string(KILN_BINARY) + " pack " + pkg + "/kiln.toml --key " + kKeys + "/test.key -o " + out + " -q");
  EXPECT_EQ(packed.code, 0) << packed.out;
  return out;
}

// Every test: archives v1..v3 of package `scale` (Fixture), a registry, and an empty docker
// config (so that the user's own credentials are never read).
struct RegistryTest : ::testing::Test {
  Fixture f;
  std::unique_ptr<test::Registry> registry;
  std::string docker_config;
  void SetUp() override {
    if (!test::executable(test::kRegistryBinary)) {
      GTEST_SKIP() << "docker-registry is not installed (Debian package docker-registry; ci/install-deps.sh installs it)";
    }
    ::mkdir((f.dir + "/registry").c_str(), 0755);
    registry = std::make_unique<test::Registry>(f.dir + "/registry", registry_config());
    ASSERT_TRUE(registry->ready()) << "docker-registry did not start:\n" << registry->log();
    docker_config = f.dir + "/docker";
    ::mkdir(docker_config.c_str(), 0755);
  }
  virtual std::string registry_config() { return ""; }
  Outcome kiln(const std::string& args) { return shell("DOCKER_CONFIG='" + docker_config + "' " + KILN_BINARY + " " + args); }
  std::string repo() const { return registry->address() + "/kiln/scale"; }
  std::string pub() const { return kKeys + "/test.pub"; }
  // No file at `path`, and no temporary file beside it either.
  void expect_nothing_written(const std::string& path) {
    EXPECT_FALSE(exists(path)) << path;
    std::string dir = path.substr(0, path.rfind('/'));
    for (const std::string& n : list_directory(dir)) EXPECT_EQ(n.find(".tmp-"), std::string::npos) << dir << "/" << n;
  }
};

TEST_F(RegistryTest, PushThenPullByManifestDigestTagAndKilnDigestGivesTheSameBytes) {
  Outcome push = kiln("push " + f.v1 + " " + repo() + " --trust " + pub());
  ASSERT_EQ(push.code, 0) << push.out;
  EXPECT_EQ(field(push.out, "kiln digest"), f.d1) << push.out;
  std::string manifest = field(push.out, "manifest digest");
  ASSERT_EQ(manifest.size(), 71u) << push.out;
  EXPECT_NE(push.out.find(":v1 (also tagged kiln-" + f.d1.substr(7) + ")"), std::string::npos) << push.out;
  EXPECT_NE(push.out.find("2 uploaded, 0 already there"), std::string::npos) << push.out;

  // The manifest is the one `kiln store export --oci` writes for the same archive, byte for byte.
  store::Store::init(f.store, pub());
  store::Store s(f.store);
  s.add(f.v1);
  store::export_oci(s, f.dir + "/layout", {});
  EXPECT_TRUE(exists(f.dir + "/layout/blobs/sha256/" + manifest.substr(7))) << "export --oci wrote another manifest";

  const std::string original = read_text(f.v1);
  for (const std::string& ref : {repo() + "@" + manifest, repo() + ":v1", repo() + "@kiln:" + f.d1}) {
    std::string out = f.dir + "/pulled.kiln";
    ::unlink(out.c_str());
    Outcome pull = kiln("pull " + ref + " -o " + out + " --trust " + pub());
    ASSERT_EQ(pull.code, 0) << ref << "\n" << pull.out;
    EXPECT_EQ(field(pull.out, "manifest digest"), manifest) << pull.out;
    EXPECT_EQ(field(pull.out, "kiln digest"), f.d1) << pull.out;
    EXPECT_NE(pull.out.find("1 distinct trusted signer(s)"), std::string::npos) << pull.out;
    EXPECT_TRUE(read_text(out) == original) << ref << ": the pulled bytes differ";
    Outcome digest = shell(std::string(KILN_BINARY) + " digest " + out);
    EXPECT_EQ(digest.out, f.d1 + "\n");
  }
  // Pushing again uploads nothing: both blobs are found by HEAD.
  Outcome again = kiln("push " + f.v1 + " " + repo() + ":release --stats");
  ASSERT_EQ(again.code, 0) << again.out;
  EXPECT_NE(again.out.find("0 uploaded, 2 already there"), std::string::npos) << again.out;
  EXPECT_EQ(field(again.out, "manifest digest"), manifest);
  // One GET (what the tag names now), two HEADs, the two manifests.
  EXPECT_NE(again.out.find("kiln-registry-stats requests=5 get=1 head=2 post=0 put=2"), std::string::npos) << again.out;
  EXPECT_EQ(again.out.find("moved tag"), std::string::npos) << again.out;  // it named this archive already

  // A second release under a tag the first one holds: said, or refused with --keep-tags.
  Outcome keep = kiln("push " + f.v2 + " " + repo() + ":release --keep-tags");
  EXPECT_EQ(keep.code, 1) << keep.out;
  EXPECT_NE(keep.out.find(":release names kiln archive " + f.d1 + "; pushing " + f.d2 + " there would move it"),
            std::string::npos) << keep.out;
  Outcome moved = kiln("push " + f.v2 + " " + repo() + ":release");
  ASSERT_EQ(moved.code, 0) << moved.out;
  EXPECT_NE(moved.out.find("moved tag        release from kiln archive " + f.d1), std::string::npos) << moved.out;
}

TEST_F(RegistryTest, PullWithoutTrustSaysSignaturesWereNotCheckedAndAnUntrustedKeyIsRefused) {
  ASSERT_EQ(kiln("push " + f.v1 + " " + repo()).code, 0);
  Outcome pull = kiln("pull " + repo() + ":v1 -o " + f.dir + "/a.kiln");
  ASSERT_EQ(pull.code, 0) << pull.out;
  EXPECT_NE(pull.out.find("not checked (no --trust)"), std::string::npos) << pull.out;
  ASSERT_EQ(shell(std::string(KILN_BINARY) + " keygen --out " + f.dir + "/other").code, 0);
  Outcome refused = kiln("pull " + repo() + ":v1 -o " + f.dir + "/b.kiln --trust " + f.dir + "/other.pub");
  EXPECT_EQ(refused.code, 1) << refused.out;
  expect_nothing_written(f.dir + "/b.kiln");
}

TEST_F(RegistryTest, ATamperedBlobIsRefusedNamingItsDigestAndNothingIsWritten) {
  Outcome push = kiln("push " + f.v1 + " " + repo());
  ASSERT_EQ(push.code, 0) << push.out;
  std::string layer = field(push.out, "layer");
  std::string blob = registry->blob_path(layer);
  std::string bytes = read_text(blob);
  ASSERT_EQ(bytes, read_text(f.v1)) << "the registry's storage layout is not where the test looks";
  bytes[bytes.size() / 2] ^= 1;  // same size: only the hash can tell
  spit(blob, bytes);

  std::string out = f.dir + "/pulled.kiln";
  Outcome pull = kiln("pull " + repo() + ":v1 -o " + out + " --trust " + pub());
  EXPECT_EQ(pull.code, 1) << pull.out;  // refused
  EXPECT_NE(pull.out.find(registry->address() + "/kiln/scale: GET blob " + layer), std::string::npos) << pull.out;
  EXPECT_NE(pull.out.find("hash to"), std::string::npos) << pull.out;
  expect_nothing_written(out);

  store::Store::init(f.store, pub());
  Outcome store_pull = kiln("store pull --store " + f.store + " " + repo() + ":v1 --activate");
  EXPECT_EQ(store_pull.code, 1) << store_pull.out;
  store::Store s(f.store);
  EXPECT_TRUE(s.archives().empty());
  EXPECT_TRUE(s.packages().empty());
  for (const std::string& n : list_directory(f.store + "/archives")) ADD_FAILURE() << "left in the store: " << n;
}

TEST_F(RegistryTest, TheConnectionCutMidPullLeavesNothingAndARetryAfterARestartSucceeds) {
  std::string big = pack_big_archive(f.dir);
  ASSERT_GT(read_text(big).size(), 1000000u);
  ASSERT_EQ(kiln("push " + big + " " + repo() + ":v1").code, 0);
  std::string digest = shell(std::string(KILN_BINARY) + " digest " + big).out;
  digest.pop_back();
  store::Store::init(f.store, pub());
  {
    // 256 KiB reach the client, then every connection is cut: the manifest arrives, the
    // ~1.5 MB archive does not.
    test::CuttingProxy proxy(registry->port(), 256 * 1024);
    std::string via = "127.0.0.1:" + std::to_string(proxy.port()) + "/kiln/scale:v1";
    Outcome pull = kiln("pull " + via + " -o " + f.dir + "/pulled.kiln");
    EXPECT_EQ(pull.code, 4) << pull.out;  // I/O
    EXPECT_NE(pull.out.find("GET blob sha256:"), std::string::npos) << pull.out;
    expect_nothing_written(f.dir + "/pulled.kiln");
    Outcome store_pull = kiln("store pull --store " + f.store + " " + via + " --activate");
    EXPECT_EQ(store_pull.code, 4) << store_pull.out;
    EXPECT_GE(proxy.forwarded(), 256u * 1024);
  }
  store::Store s(f.store);
  EXPECT_TRUE(s.archives().empty());
  EXPECT_TRUE(s.packages().empty()) << "something was activated";
  for (const std::string& n : list_directory(f.store + "/archives")) ADD_FAILURE() << "left in the store: " << n;

  // The registry itself dies: refused connections name it. Restarted on the same storage, the
  // same pull succeeds.
  registry->kill();
  Outcome down = kiln("store pull --store " + f.store + " " + repo() + ":v1 --activate");
  EXPECT_EQ(down.code, 4) << down.out;
  EXPECT_NE(down.out.find(registry->address() + "/kiln/scale: GET manifest v1"), std::string::npos) << down.out;
  registry->start();
  ASSERT_TRUE(registry->ready()) << registry->log();
  Outcome retry = kiln("store pull --store " + f.store + " " + repo() + ":v1 --activate --who test");
  ASSERT_EQ(retry.code, 0) << retry.out;
  EXPECT_NE(retry.out.find("activated " + digest), std::string::npos) << retry.out;
  EXPECT_EQ(store::Store(f.store).state("scale").active, digest);
  EXPECT_TRUE(store::Store(f.store).verify().empty());
}

TEST_F(RegistryTest, StorePullFollowsTheStoreRulesAndActivatesNothingItRefuses) {
  ASSERT_EQ(kiln("push " + f.v1 + " " + repo()).code, 0);
  ASSERT_EQ(kiln("push " + f.v2 + " " + repo()).code, 0);
  store::Store::init(f.store, pub());
  std::string st = "store pull --store " + f.store + " ";
  Outcome one = kiln(st + repo() + ":v1 --activate");
  ASSERT_EQ(one.code, 0) << one.out;
  Outcome two = kiln(st + repo() + "@kiln:" + f.d2 + " --activate");
  ASSERT_EQ(two.code, 0) << two.out;
  EXPECT_EQ(store::Store(f.store).state("scale").active, f.d2);
  // Again: already active, nothing recorded.
  Outcome again = kiln(st + repo() + ":v2 --activate");
  ASSERT_EQ(again.code, 0) << again.out;
  EXPECT_NE(again.out.find("already active"), std::string::npos) << again.out;
  EXPECT_EQ(store::Store(f.store).state("scale").history.size(), 2u);
  // v1 is older than the highest activated: added (it is already there) but refused by the
  // store's anti-rollback rule, and v2 stays active.
  Outcome back = kiln(st + repo() + ":v1 --activate");
  EXPECT_EQ(back.code, 1) << back.out;
  EXPECT_NE(back.out.find("is below 2"), std::string::npos) << back.out;
  EXPECT_EQ(store::Store(f.store).state("scale").active, f.d2);

  // A store that trusts another key refuses the archive before adding it.
  ASSERT_EQ(shell(std::string(KILN_BINARY) + " keygen --out " + f.dir + "/other").code, 0);
  store::Store::init(f.dir + "/other-store", f.dir + "/other.pub");
  Outcome untrusted = kiln("store pull --store " + f.dir + "/other-store " + repo() + ":v1 --activate");
  EXPECT_EQ(untrusted.code, 1) << untrusted.out;
  EXPECT_TRUE(store::Store(f.dir + "/other-store").archives().empty());
}

// Attestations travel with the archive: pushed as artifacts whose OCI subject is the archive's
// manifest (Distribution 2.8 has no referrers API, so through the tag schema's index), pulled
// into a second store that keeps them, and required there by the activation policy; one that
// is not an attestation of this archive is listed as ignored, never kept.
TEST_F(RegistryTest, AttestationsArePushedWithTheArchiveAndRequiredWhereTheyArePulled) {
  PrivateKey verifier = PrivateKey::generate();
  spit(f.dir + "/verifier.pub", verifier.public_key().to_pem());
  auto attestation = [&](const std::string& name, const std::string& digest, const std::string& arch, const std::string& cc) {
    std::string path = f.dir + "/" + name;
    spit(path, dsse_envelope_json("application/vnd.in-toto+json",
                                  test::gpu_run_statement_text(digest, arch, cc, true), {&verifier}));
    return path;
  };
  std::string h200 = attestation("h200.json", f.d1, "sm_90", "9.0");
  // An attestation of another archive is refused before anything is uploaded.
  Outcome wrong = kiln("push " + f.v1 + " " + repo() + " --attestation " + attestation("other.json", f.d2, "sm_90", "9.0"));
  EXPECT_NE(wrong.code, 0);
  EXPECT_NE(wrong.out.find("attests " + f.d2 + ", not"), std::string::npos) << wrong.out;
  Outcome push = kiln("push " + f.v1 + " " + repo() + " --attestation " + h200);
  ASSERT_EQ(push.code, 0) << push.out;
  std::string manifest = field(push.out, "manifest digest");
  EXPECT_NE(push.out.find("attestations     1, listed through the tag sha256-" + manifest.substr(7)), std::string::npos)
      << push.out;
  // A second push adds to the index rather than replacing it.
  ASSERT_EQ(kiln("push " + f.v1 + " " + repo() + " --attestation " + attestation("a100.json", f.d1, "sm_80", "8.0")).code, 0);

  // kiln pull writes them beside the archive.
  ::mkdir((f.dir + "/atts").c_str(), 0755);
  Outcome pulled = kiln("pull " + repo() + ":v1 -o " + f.dir + "/p.kiln --attestations " + f.dir + "/atts");
  ASSERT_EQ(pulled.code, 0) << pulled.out;
  EXPECT_NE(pulled.out.find("attestations     2 written to"), std::string::npos) << pulled.out;

  // A store that requires an sm_90 attestation from the verifier: kept, then activated.
  store::Store::init(f.store, pub());
  std::string st = "store pull --store " + f.store + " " + repo() + ":v1 --activate --require-attestation " + f.dir +
                   "/verifier.pub --target ";
  Outcome blackwell = kiln(st + "sm_100");
  EXPECT_EQ(blackwell.code, 1) << blackwell.out;
  EXPECT_NE(blackwell.out.find("not attested for sm_100"), std::string::npos) << blackwell.out;
  EXPECT_EQ(store::Store(f.store).state("scale").active, "");
  Outcome hopper = kiln(st + "sm_90,sm_80");
  ASSERT_EQ(hopper.code, 0) << hopper.out;
  EXPECT_NE(hopper.out.find("attestations     2 kept beside it"), std::string::npos) << hopper.out;
  EXPECT_EQ(store::Store(f.store).state("scale").active, f.d1);
  EXPECT_EQ(store::Store(f.store).attestations(f.d1).size(), 2u);

  // A publisher lists a referrer whose envelope is not an attestation of this archive: ignored.
  registry::Reference ref = registry::parse_reference(repo());
  registry::Client client(ref, registry::http_options_for(ref, false, false, {}));
  std::string junk = "{\"not\":\"an envelope\"}";
  store::BlobRef blob{digest_string(sha256(junk.data(), junk.size())), junk.size()};
  client.upload_blob(blob, junk);
  std::string m = store::attestation_manifest({manifest, 0}, f.d1, blob);
  std::string md = digest_string(sha256(m.data(), m.size()));
  client.put_manifest(md, m, md);
  // And a good attestation of this archive, but in a manifest whose subject is another one.
  std::string good = read_text(h200);
  store::BlobRef good_blob{digest_string(sha256(good.data(), good.size())), good.size()};
  std::string other_subject = "sha256:" + std::string(64, 'e');
  std::string m2 = store::attestation_manifest({other_subject, 10}, f.d1, good_blob);
  std::string md2 = digest_string(sha256(m2.data(), m2.size()));
  client.put_manifest(md2, m2, md2);
  std::string held;
  std::vector<store::Referrer> listed =
      store::read_referrers_index(client.get_manifest("sha256-" + manifest.substr(7), &held), "index");
  listed.push_back({{md, m.size()}, store::kAttestationArtifactType});
  listed.push_back({{md2, m2.size()}, store::kAttestationArtifactType});
  std::string index = store::referrers_index(listed);
  client.put_manifest("sha256-" + manifest.substr(7), index, digest_string(sha256(index.data(), index.size())),
                      store::kOciIndexType);
  Outcome third = kiln("pull " + repo() + ":v1 -o " + f.dir + "/q.kiln --attestations " + f.dir + "/atts");
  ASSERT_EQ(third.code, 0) << third.out;
  EXPECT_NE(third.out.find("attestations     2 written to"), std::string::npos) << third.out;
  EXPECT_NE(third.out.find("ignored: "), std::string::npos) << third.out;
  EXPECT_NE(third.out.find("its subject is " + other_subject), std::string::npos) << third.out;
}

// What the registry serves is checked against the archive: a manifest whose claims do not
// match the layer it names (pushed here through the client, as a hostile publisher could) is refused.
TEST_F(RegistryTest, AManifestWhoseClaimsDisagreeWithTheArchiveIsRefused) {
  Outcome push = kiln("push " + f.v1 + " " + repo());
  ASSERT_EQ(push.code, 0) << push.out;
  store::BlobRef layer{field(push.out, "layer"), static_cast<std::uint64_t>(read_text(f.v1).size())};
  store::ArchiveInfo lie{f.d2, "scale", "v1", 1, layer.size};  // claims v2's kiln digest for v1's bytes
  std::string manifest = store::artifact_manifest(lie, layer);
  std::string digest = digest_string(sha256(manifest.data(), manifest.size()));
  registry::Reference ref = registry::parse_reference(repo());
  registry::Client client(ref, registry::http_options_for(ref, false, false, {}));
  client.put_manifest(store::kiln_digest_tag(f.d2), manifest, digest);

  Outcome pull = kiln("pull " + repo() + "@kiln:" + f.d2 + " -o " + f.dir + "/x.kiln");
  EXPECT_EQ(pull.code, 1) << pull.out;
  EXPECT_NE(pull.out.find("the archive's kiln digest is " + f.d1 + "; the manifest claims " + f.d2), std::string::npos)
      << pull.out;
  expect_nothing_written(f.dir + "/x.kiln");

  // Asked by a digest the registry does not hold: 404, naming registry, repository and digest.
  std::string absent = "sha256:" + std::string(64, 'e');
  Outcome missing = kiln("pull " + repo() + "@" + absent + " -o " + f.dir + "/y.kiln");
  EXPECT_EQ(missing.code, 3) << missing.out;
  EXPECT_NE(missing.out.find(registry->address() + "/kiln/scale: GET manifest " + absent + ": HTTP 404"), std::string::npos)
      << missing.out;
}

TEST_F(RegistryTest, SkopeoCopiesWhatKilnPushedAndTheLayoutImportsIntoAStore) {
  if (!test::executable("/usr/bin/skopeo")) GTEST_SKIP() << "skopeo is not installed (Debian package skopeo; ci/install-deps.sh installs it)";
  Outcome push = kiln("push " + f.v1 + " " + repo());
  ASSERT_EQ(push.code, 0) << push.out;
  std::string layer = field(push.out, "layer");
  std::string manifest = field(push.out, "manifest digest");
  std::string layout = f.dir + "/skopeo-layout";
  Outcome copy = shell("skopeo --insecure-policy copy --src-tls-verify=false docker://" + repo() + ":v1 oci:" + layout + ":v1");
  ASSERT_EQ(copy.code, 0) << copy.out;
  EXPECT_TRUE(read_text(layout + "/blobs/sha256/" + layer.substr(7)) == read_text(f.v1)) << "the archive blob differs";
  EXPECT_TRUE(exists(layout + "/blobs/sha256/" + manifest.substr(7))) << "skopeo rewrote the manifest";
  store::Store::init(f.store, pub());
  Outcome import = kiln("store import --store " + f.store + " --oci " + layout);
  ASSERT_EQ(import.code, 0) << import.out;
  EXPECT_NE(import.out.find("imported " + f.d1), std::string::npos) << import.out;
}

// A registry that wants a user and password (htpasswd, bcrypt): refused anonymously with the
// registry named, accepted with the docker config's "auths" entry.
// A registry that serves its manifests and blobs from elsewhere (a 307 to another server, as one
// behind a CDN does): pull follows the redirect for both, as STORE.md says, and checks what it
// gets there exactly as it would from the registry itself.
TEST_F(RegistryTest, ManifestAndBlobReadsFollowARedirect) {
  if (!test::executable("/usr/bin/python3")) GTEST_SKIP() << "python3 is needed for the redirecting server";
  ASSERT_EQ(kiln("push " + f.v1 + " " + repo()).code, 0);
  std::string port_file = f.dir + "/redirect.port";
  pid_t server = ::fork();
  if (server == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    std::string to = "http://" + registry->address();
    ::execl("/usr/bin/python3", "python3", KILN_REDIRECT_SERVER, "--to", to.c_str(), "--port-file", port_file.c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  for (int i = 0; i < 200 && !exists(port_file); ++i) ::usleep(50000);
  Outcome pull = kiln("pull 127.0.0.1:" + read_text(port_file) + "/kiln/scale:v1 -o " + f.dir + "/r.kiln --trust " + pub());
  ::kill(server, SIGKILL);
  ::waitpid(server, nullptr, 0);
  ASSERT_EQ(pull.code, 0) << pull.out;
  EXPECT_EQ(field(pull.out, "kiln digest"), f.d1) << pull.out;
  EXPECT_TRUE(read_text(f.dir + "/r.kiln") == read_text(f.v1));
}

struct BasicAuthRegistryTest : RegistryTest {
  std::string registry_config() override {
    std::string file = f.dir + "/htpasswd";
    if (shell("htpasswd -Bbn fleet 's3cret' > " + file).code != 0) return "";
    return "auth:\n  htpasswd:\n    realm: kiln-test\n    path: " + file + "\n";
  }
  void SetUp() override {
    if (!test::executable("/usr/bin/htpasswd")) GTEST_SKIP() << "htpasswd is not installed (Debian package apache2-utils)";
    RegistryTest::SetUp();
  }
};

TEST_F(BasicAuthRegistryTest, RefusedAnonymouslyAcceptedWithDockerConfigCredentials) {
  Outcome anonymous = kiln("push " + f.v1 + " " + repo());
  EXPECT_EQ(anonymous.code, 1) << anonymous.out;
  // The first request (what the tag names now) is the one refused.
  EXPECT_NE(anonymous.out.find(registry->address() + "/kiln/scale: GET manifest v1"), std::string::npos) << anonymous.out;
  EXPECT_NE(anonymous.out.find("HTTP 401"), std::string::npos) << anonymous.out;
  EXPECT_NE(anonymous.out.find("has none for " + registry->address()), std::string::npos) << anonymous.out;

  spit(docker_config + "/config.json", "{\"auths\":{\"" + registry->address() + "\":{\"auth\":\"" +
                                           registry::base64_encode("fleet:wrong") + "\"}}}");
  Outcome wrong = kiln("push " + f.v1 + " " + repo());
  EXPECT_EQ(wrong.code, 1) << wrong.out;
  EXPECT_NE(wrong.out.find("refused with the credentials given (from " + docker_config + "/config.json)"), std::string::npos)
      << wrong.out;

  spit(docker_config + "/config.json", "{\"auths\":{\"http://" + registry->address() + "/v1/\":{\"auth\":\"" +
                                           registry::base64_encode("fleet:s3cret") + "\"}}}");
  Outcome push = kiln("push " + f.v1 + " " + repo());
  ASSERT_EQ(push.code, 0) << push.out;
  Outcome pull = kiln("pull " + repo() + ":v1 -o " + f.dir + "/pulled.kiln --trust " + pub());
  ASSERT_EQ(pull.code, 0) << pull.out;
  EXPECT_TRUE(read_text(f.dir + "/pulled.kiln") == read_text(f.v1));
}

// A registry that hands out Bearer tokens (`auth: token`): tests/registry/token_server.py, the
// spec's token server in a page of Python, issues RS256 tokens the registry verifies against the
// certificate made here. kiln answers the challenge with the docker config's credentials.
struct BearerTokenRegistryTest : RegistryTest {
  pid_t token_server = -1;
  // Where the token server listens; its realm is plain http there.
  virtual std::string token_host() const { return "127.0.0.1"; }
  // What its refusals say.
  virtual std::string token_error() const { return "bad or no credentials"; }
  std::string registry_config() override {
    std::string key = f.dir + "/token.key", cert = f.dir + "/token.crt", port_file = f.dir + "/token.port";
    if (shell("openssl req -x509 -newkey rsa:2048 -nodes -keyout " + key + " -out " + cert +
              " -days 1 -subj /CN=kiln-test-token").code != 0) {
      return "";
    }
    token_server = ::fork();
    if (token_server == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      int fd = ::open((f.dir + "/token.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      ::dup2(fd, 2);
      std::string host = token_host(), message = token_error();
      ::execl("/usr/bin/python3", "python3", KILN_TOKEN_SERVER, "--key", key.c_str(), "--issuer", "kiln-test-issuer", "--user",
              "fleet", "--password", "s3cret", "--port-file", port_file.c_str(), "--host", host.c_str(), "--error-message",
              message.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    for (int i = 0; i < 200 && !exists(port_file); ++i) ::usleep(50000);
    return "auth:\n  token:\n    realm: http://" + token_host() + ":" + read_text(port_file) +
           "/token\n    service: kiln-test\n    issuer: kiln-test-issuer\n    rootcertbundle: " + cert + "\n";
  }
  void SetUp() override {
    if (!test::executable("/usr/bin/python3") || !test::executable("/usr/bin/openssl")) {
      GTEST_SKIP() << "python3 and openssl are needed for the token server";
    }
    RegistryTest::SetUp();
  }
  void TearDown() override {
    if (token_server > 0) {
      ::kill(token_server, SIGKILL);
      ::waitpid(token_server, nullptr, 0);
    }
  }
};

TEST_F(BearerTokenRegistryTest, TheTokenFlowGrantsPullAndPushWithCredentialsAndRefusesWithout) {
  Outcome anonymous = kiln("push " + f.v1 + " " + repo());
  EXPECT_EQ(anonymous.code, 1) << anonymous.out;
  EXPECT_NE(anonymous.out.find("the token server http://127.0.0.1:"), std::string::npos) << anonymous.out;
  EXPECT_NE(anonymous.out.find("answered HTTP 401"), std::string::npos) << anonymous.out;

  spit(docker_config + "/config.json", "{\"auths\":{\"" + registry->address() + "\":{\"auth\":\"" +
                                           registry::base64_encode("fleet:s3cret") + "\"}}}");
  Outcome push = kiln("push " + f.v1 + " " + repo());
  ASSERT_EQ(push.code, 0) << push.out << read_text(f.dir + "/token.log");
  Outcome pull = kiln("pull " + repo() + "@kiln:" + f.d1 + " -o " + f.dir + "/pulled.kiln --trust " + pub());
  ASSERT_EQ(pull.code, 0) << pull.out;
  EXPECT_TRUE(read_text(f.dir + "/pulled.kiln") == read_text(f.v1));
  // The flow really ran: tokens for pull, and for pull and push (the registry lists the two
  // actions in either order from one challenge to the next: Go's map order).
  std::string log = read_text(f.dir + "/token.log");
  EXPECT_TRUE(log.find("scope=repository%3Akiln%2Fscale%3Apull%2Cpush HTTP/1.1\" 200") != std::string::npos ||
              log.find("scope=repository%3Akiln%2Fscale%3Apush%2Cpull HTTP/1.1\" 200") != std::string::npos)
      << log;
  EXPECT_NE(log.find("scope=repository%3Akiln%2Fscale%3Apull HTTP/1.1\" 200"), std::string::npos) << log;
}

// A registry speaking TLS with a certificate made here for 127.0.0.1: with --tls, kiln verifies
// it, refusing it until it is given the certificate's CA (--ca-file).
// A realm on another host over plain http (here 127.0.0.3: loopback, but not the registry's own
// address) gets no credentials: Docker sends them to a token realm only over TLS, and so does kiln,
// except to the registry's own loopback host or with --insecure-http, which names the risk.
struct BearerTokenOtherHostTest : BearerTokenRegistryTest {
  std::string token_host() const override { return "127.0.0.3"; }
};

TEST_F(BearerTokenOtherHostTest, CredentialsAreNotSentToAPlainHttpRealmOnAnotherHost) {
  spit(docker_config + "/config.json", "{\"auths\":{\"" + registry->address() + "\":{\"auth\":\"" +
                                           registry::base64_encode("fleet:s3cret") + "\"}}}");
  Outcome push = kiln("push " + f.v1 + " " + repo());
  EXPECT_NE(push.code, 0) << push.out;
  EXPECT_NE(push.out.find("withheld"), std::string::npos) << push.out;
  std::string log = read_text(f.dir + "/token.log");
  EXPECT_EQ(log.find("authorization: present"), std::string::npos) << log;
  EXPECT_NE(log.find("authorization: absent"), std::string::npos) << log;
  // Named explicitly, the risk is the user's to take.
  Outcome insecure = kiln("push " + f.v1 + " " + repo() + " --insecure-http");
  EXPECT_EQ(insecure.code, 0) << insecure.out;
}

// A registry's (here its token server's) error text reaches the terminal with its control bytes
// escaped: it cannot clear the line and print a forged "pulled ..." of its own.
struct BearerTokenHostileMessageTest : BearerTokenRegistryTest {
  std::string token_error() const override { return "denied\x1b[2K\r\npulled 127.0.0.1/kiln/scale:v1 OK"; }
};

TEST_F(BearerTokenHostileMessageTest, ARegistrysWordsArePrintedWithTheirControlBytesEscaped) {
  Outcome push = kiln("push " + f.v1 + " " + repo());
  EXPECT_NE(push.code, 0) << push.out;
  EXPECT_EQ(push.out.find('\x1b'), std::string::npos) << push.out;
  EXPECT_EQ(push.out.find("\npulled"), std::string::npos) << push.out;
  EXPECT_NE(push.out.find("denied\\x1b[2K\\x0d\\x0apulled"), std::string::npos) << push.out;
}

struct TlsRegistryTest : RegistryTest {
  std::string registry_config() override {
    std::string key = f.dir + "/tls.key", cert = f.dir + "/tls.crt";
    if (shell("openssl req -x509 -newkey rsa:2048 -nodes -keyout " + key + " -out " + cert +
              " -days 1 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1").code != 0) {
      return "";
    }
    return "  tls:\n    certificate: " + cert + "\n    key: " + key + "\n";  // under http:
  }
  void SetUp() override {
    if (!test::executable("/usr/bin/openssl")) GTEST_SKIP() << "openssl is needed to make the registry's certificate";
    RegistryTest::SetUp();
  }
};

TEST_F(TlsRegistryTest, HttpsWithTheCertificateVerified) {
  Outcome untrusted = kiln("push " + f.v1 + " " + repo() + " --tls");
  EXPECT_EQ(untrusted.code, 4) << untrusted.out;
  EXPECT_NE(untrusted.out.find("https://" + registry->address() + "/v2/"), std::string::npos) << untrusted.out;
  EXPECT_NE(untrusted.out.find("certificate"), std::string::npos) << untrusted.out;
  Outcome plain = kiln("pull " + repo() + ":v1 -o " + f.dir + "/x.kiln");  // loopback default: plain http
  EXPECT_NE(plain.code, 0) << plain.out;
  EXPECT_EQ(kiln("push " + f.v1 + " " + repo() + " --tls --insecure-http").code, 2);

  Outcome push = kiln("push " + f.v1 + " " + repo() + " --tls --ca-file " + f.dir + "/tls.crt");
  ASSERT_EQ(push.code, 0) << push.out;
  Outcome pull = kiln("pull " + repo() + "@kiln:" + f.d1 + " -o " + f.dir + "/pulled.kiln --tls --ca-file " + f.dir +
                      "/tls.crt --trust " + pub());
  ASSERT_EQ(pull.code, 0) << pull.out;
  EXPECT_TRUE(read_text(f.dir + "/pulled.kiln") == read_text(f.v1));
  expect_nothing_written(f.dir + "/x.kiln");
}

}  // namespace
}  // namespace kiln
