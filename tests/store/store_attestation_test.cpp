// Attestations kept beside archives (schema/STORE.md "Attestations"): `kiln store attest` and
// `store add --attestation` keep a DSSE envelope whose subject is the archive, recorded in the
// package's hash-chained history; `store activate --require-attestation KEYS --target T` refuses
// (and records the refusal) unless, for every target, an attestation verified by those keys
// reports a passing run on that kind of GPU. A file swapped under a record, an envelope for
// another archive, an untrusted key, a failed run and another GPU are each refused.
#include <gtest/gtest.h>

#include <string>

#include "../unit/attestation_text.hpp"
#include "core/dsse.hpp"
#include "core/ed25519.hpp"
#include "core/error.hpp"
#include "store/store.hpp"
#include "store_fixture.hpp"

namespace kiln {
namespace {

std::string statement(const std::string& digest, const std::string& arch, const std::string& cc, bool passed) {
  return test::gpu_run_statement_text(digest, arch, cc, passed);
}

struct AttestFixture : Fixture {
  PrivateKey verifier = PrivateKey::generate();
  std::string verifier_pub = dir + "/verifier.pub";
  AttestFixture() {
    spit(verifier_pub, verifier.public_key().to_pem());
    store::Store::init(store, kKeys + "/test.pub");
  }
  // Writes an attestation signed by `key` and returns its path.
  std::string write(const std::string& name, const std::string& digest, const std::string& arch, const std::string& cc,
                    bool passed, const PrivateKey& key) {
    std::string path = dir + "/" + name;
    spit(path, dsse_envelope_json("application/vnd.in-toto+json", statement(digest, arch, cc, passed), {&key}));
    return path;
  }
  CliRun activate(const std::string& digest, const std::string& targets) {
    return kiln("store activate " + digest + " --store " + store + " --require-attestation " + verifier_pub +
                " --target " + targets);
  }
};

TEST(StoreAttestations, AnAttestedArchiveActivatesForItsGpuAndNoOther) {
  AttestFixture f;
  std::string h200 = f.write("h200.json", f.d1, "sm_90", "9.0", true, f.verifier);
  CliRun added = kiln("store add " + f.v1 + " --store " + f.store + " --attestation " + h200);
  ASSERT_EQ(added.rc, 0) << added.output;
  EXPECT_TRUE(contains(added.output, "kept attestation " + h200 + ", history #1")) << added.output;
  // Kept, recorded in the history (the chain covers it), listed.
  CliRun listed = kiln("store attestations " + f.d1 + " --store " + f.store);
  EXPECT_TRUE(contains(listed.output, "gpu-run on GPU sm_90 (sm_90, cc 9.0, driver 13.0), 1/1 tests passed, signed by " +
                                          f.verifier.public_key().key_id())) << listed.output;
  EXPECT_TRUE(contains(kiln("store history scale --store " + f.store).output, "attest")) ;
  // `kiln inspect --store` lists what the store keeps for the archive.
  CliRun inspected = kiln("inspect " + f.v1 + " --store " + f.store);
  EXPECT_TRUE(contains(inspected.output, "attestations kept by the store: 1")) << inspected.output;
  EXPECT_TRUE(contains(kiln("inspect " + f.v1 + " --store " + f.store + " --json").output,
                       "\"attestations\":[{\"history\":1,")) ;
  // The same file again records nothing new.
  CliRun again = kiln("store attest " + f.d1 + " " + h200 + " --store " + f.store);
  EXPECT_TRUE(contains(again.output, "history #1")) << again.output;

  // An A100 fleet is not attested by an H200 run: refused, and the refusal is recorded.
  CliRun a100 = f.activate(f.d1, "sm_80");
  EXPECT_EQ(a100.rc, 1) << a100.output;
  EXPECT_TRUE(contains(a100.output, "not attested for sm_80")) << a100.output;
  store::Store s(f.store);
  EXPECT_EQ(s.state("scale").active, "");
  EXPECT_EQ(s.state("scale").history.back().action, "refused");
  // sm_90a is the same compute capability as the attested sm_90 run.
  CliRun ok = f.activate(f.d1, "sm_90a,sm_90");
  ASSERT_EQ(ok.rc, 0) << ok.output;
  EXPECT_EQ(s.state("scale").active, f.d1);

  // Through an OCI layout (store export / import) the attestation travels with the archive.
  ASSERT_EQ(kiln("store export --store " + f.store + " --oci " + f.dir + "/layout").rc, 0);
  store::Store::init(f.dir + "/second", kKeys + "/test.pub");
  CliRun imported = kiln("store import --store " + f.dir + "/second --oci " + f.dir + "/layout");
  ASSERT_EQ(imported.rc, 0) << imported.output;
  EXPECT_TRUE(contains(imported.output, "1 archive(s) imported, 1 attestation(s) kept beside them")) << imported.output;
  EXPECT_EQ(store::Store(f.dir + "/second").attestations(f.d1).size(), 1u);
  CliRun second = kiln("store activate " + f.d1 + " --store " + f.dir + "/second --require-attestation " + f.verifier_pub +
                       " --target sm_90");
  EXPECT_EQ(second.rc, 0) << second.output;
}

TEST(StoreAttestations, UntrustedFailedForeignAndSwappedAttestationsAreRefused) {
  AttestFixture f;
  ASSERT_EQ(kiln("store add " + f.v1 + " --store " + f.store).rc, 0);
  ASSERT_EQ(kiln("store add " + f.v2 + " --store " + f.store).rc, 0);
  // An envelope for another archive is not taken.
  std::string other = f.write("other.json", f.d2, "sm_90", "9.0", true, f.verifier);
  CliRun wrong = kiln("store attest " + f.d1 + " " + other + " --store " + f.store);
  EXPECT_NE(wrong.rc, 0);
  EXPECT_TRUE(contains(wrong.output, "attests " + f.d2 + ", not " + f.d1)) << wrong.output;
  // Kept, but signed by a key the policy does not name, or of a run that failed: not enough.
  PrivateKey stranger = PrivateKey::generate();
  ASSERT_EQ(kiln("store attest " + f.d1 + " " + f.write("s.json", f.d1, "sm_90", "9.0", true, stranger) + " --store " +
                 f.store).rc, 0);
  ASSERT_EQ(kiln("store attest " + f.d1 + " " + f.write("x.json", f.d1, "sm_90", "9.0", false, f.verifier) +
                 " --store " + f.store).rc, 0);
  CliRun refused = f.activate(f.d1, "sm_90");
  EXPECT_EQ(refused.rc, 1) << refused.output;
  EXPECT_TRUE(contains(refused.output, "0 distinct trusted signer(s), 1 required")) << refused.output;
  EXPECT_TRUE(contains(refused.output, "did not pass every test")) << refused.output;
  // A good one arrives; then someone with write access swaps its file for the failed run's bytes.
  std::string good = f.write("good.json", f.d1, "sm_90", "9.0", true, f.verifier);
  ASSERT_EQ(kiln("store attest " + f.d1 + " " + good + " --store " + f.store).rc, 0);
  store::Store s(f.store);
  std::vector<store::StoredAttestation> kept = s.attestations(f.d1);
  ASSERT_EQ(kept.size(), 3u);
  spit(kept[2].path, slurp(f.dir + "/x.json"));
  CliRun swapped = f.activate(f.d1, "sm_90");
  EXPECT_NE(swapped.rc, 0);
  EXPECT_TRUE(contains(swapped.output, "its bytes are not the attestation history record")) << swapped.output;
  EXPECT_TRUE(contains(kiln("store verify --store " + f.store).output, "its bytes are not the attestation")) ;
  spit(kept[2].path, slurp(good));
  CliRun restored = f.activate(f.d1, "sm_90");
  EXPECT_EQ(restored.rc, 0) << restored.output;
  // gc keeps what the history names, and removes a file no record names.
  spit(f.store + "/attestations/orphan.json", "{}");
  ASSERT_EQ(kiln("store gc --store " + f.store).rc, 0);
  EXPECT_EQ(s.attestations(f.d1).size(), 3u);
  EXPECT_NE(::access((f.store + "/attestations/orphan.json").c_str(), F_OK), 0);
}

}  // namespace
}  // namespace kiln
