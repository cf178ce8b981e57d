// Attestations required at load (kiln.h: attestation_trust_path, kiln_archive_add_attestation):
// an attestation is taken only when the runtime's attestation keys signed it, its subject is the
// archive and its run passed; a kernel then runs only on the kinds of device an attestation
// covers, and elsewhere routes as KILN_REASON_UNATTESTED with the reason. Judged here without a
// GPU through a described target (kiln_archive_preflight_target, the same resolver); the GPU
// suite checks a real device (tests/gpu/gpu_test.cpp).
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "../unit/attestation_text.hpp"
#include "../unit/temp_dirs.hpp"
#include "api_test_env.hpp"
#include "core/dsse.hpp"
#include "core/ed25519.hpp"
#include "kiln/kiln.h"
#include "store/store.hpp"

namespace {

using kiln_test::thread_last_error;

struct AttestedRuntime {
  kiln::PrivateKey verifier = kiln::PrivateKey::generate();
  std::string dir = kiln::test::make_temp_dir("kiln-attest-policy");
  std::string verifier_pub = dir + "/verifier.pub";
  std::string trust = kiln_test::keys() + "/test.pub";
  kiln_runtime* rt = nullptr;
  kiln_archive* archive = nullptr;
  kiln_status created = KILN_ERR_INTERNAL;

  explicit AttestedRuntime(unsigned threshold = 1, bool require = true) {
    std::ofstream(verifier_pub) << verifier.public_key().to_pem();
    kiln_runtime_options o;
    kiln_runtime_options_init(&o, sizeof o);
    o.trust_path = trust.c_str();
    o.cuda_driver_path = "libcuda-absent-for-this-test.so.1";
    if (require) o.attestation_trust_path = verifier_pub.c_str();
    o.attestation_threshold = threshold;
    created = kiln_runtime_create(&rt, &o);
    if (created == KILN_OK) kiln_archive_open(rt, (kiln_test::archives() + "/scale.kiln").c_str(), &archive);
  }
  ~AttestedRuntime() {
    kiln_archive_destroy(archive);
    kiln_runtime_destroy(rt);
  }
  std::string envelope(const std::string& arch, const std::string& cc, bool passed, const kiln::PrivateKey& key,
                       const std::string& digest = "") {
    return kiln::dsse_envelope_json("application/vnd.in-toto+json",
                                    kiln::test::gpu_run_statement_text(digest.empty() ? kiln_archive_digest(archive) : digest,
                                                                       arch, cc, passed),
                                    {&key});
  }
  kiln_status add(const std::string& envelope) { return kiln_archive_add_attestation(archive, envelope.data(), envelope.size()); }
  std::string preflight(const char* target, const char* driver = "") {
    char buf[8192];
    EXPECT_EQ(kiln_archive_preflight_target(archive, target, driver, buf, sizeof buf, nullptr), KILN_OK) << thread_last_error();
    return buf;
  }
};

TEST(AttestationPolicy, AKernelRunsOnlyOnTheKindsOfDeviceAnAttestationCovers) {
  AttestedRuntime r;
  ASSERT_EQ(r.created, KILN_OK) << thread_last_error();
  ASSERT_NE(r.archive, nullptr) << thread_last_error();
  // Nothing attested yet: every kind of device is unattested, and no code is judged.
  std::string before = r.preflight("sm_90");
  EXPECT_NE(before.find("\"reason\":\"unattested\""), std::string::npos) << before;
  EXPECT_NE(before.find("no attestation of sha256:"), std::string::npos) << before;
  ASSERT_EQ(r.add(r.envelope("sm_90", "9.0", true, r.verifier)), KILN_OK) << thread_last_error();
  std::string h100 = r.preflight("sm_90");
  EXPECT_EQ(h100.find("unattested"), std::string::npos) << h100;
  EXPECT_NE(h100.find("\"route\":\"ptx-jit\""), std::string::npos) << h100;
  // A driver older than the attested run's is not what was proven.
  std::string old_driver = r.preflight("sm_90", "12.4");
  EXPECT_NE(old_driver.find("ran with driver 13.0, newer than this device's 12.4"), std::string::npos) << old_driver;
  EXPECT_EQ(r.preflight("sm_90", "13.1").find("unattested"), std::string::npos);
  // An A100 is not an H100: the same archive stays unattested there, saying what was given.
  std::string a100 = r.preflight("sm_80");
  EXPECT_NE(a100.find("\"reason\":\"unattested\""), std::string::npos) << a100;
  EXPECT_NE(a100.find("GPU sm_90 ran on sm_90 (cc 9.0), not cc 8.0"), std::string::npos) << a100;
}

TEST(AttestationPolicy, OnlyAttestationsOfThisArchiveByTheKeysOfAPassingRunAreTaken) {
  AttestedRuntime r;
  ASSERT_NE(r.archive, nullptr) << thread_last_error();
  kiln::PrivateKey stranger = kiln::PrivateKey::generate();
  EXPECT_EQ(r.add(r.envelope("sm_90", "9.0", true, stranger)), KILN_ERR_REFUSED);
  EXPECT_NE(thread_last_error().find("0 distinct trusted signer(s), 1 required"), std::string::npos) << thread_last_error();
  EXPECT_EQ(r.add(r.envelope("sm_90", "9.0", false, r.verifier)), KILN_ERR_REFUSED);
  EXPECT_NE(thread_last_error().find("did not pass every test"), std::string::npos) << thread_last_error();
  std::string other = "sha256:" + std::string(64, 'a');
  EXPECT_EQ(r.add(r.envelope("sm_90", "9.0", true, r.verifier, other)), KILN_ERR_REFUSED);
  EXPECT_NE(thread_last_error().find("attests " + other + ", not "), std::string::npos) << thread_last_error();
  EXPECT_EQ(r.add("{not json"), KILN_ERR_MALFORMED);
  // None of them counts.
  EXPECT_NE(r.preflight("sm_90").find("\"reason\":\"unattested\""), std::string::npos);
  // Two distinct keys when the runtime asks for two: one is not enough.
  AttestedRuntime two(2);
  ASSERT_NE(two.archive, nullptr) << thread_last_error();
  EXPECT_EQ(two.add(two.envelope("sm_90", "9.0", true, two.verifier)), KILN_ERR_REFUSED);
  EXPECT_NE(thread_last_error().find("1 distinct trusted signer(s), 2 required"), std::string::npos) << thread_last_error();
}

TEST(AttestationPolicy, TheOptionsAreCheckedAndARuntimeWithoutKeysTakesNone) {
  AttestedRuntime many(65);
  EXPECT_EQ(many.created, KILN_ERR_INVALID_ARGUMENT);
  EXPECT_NE(thread_last_error().find("attestation_threshold must be 1 to 64, not 65"), std::string::npos) << thread_last_error();
  // 0, a field its caller never set, is the default (one key), never "no signature needed".
  AttestedRuntime zero(0);
  ASSERT_NE(zero.archive, nullptr) << thread_last_error();
  kiln::PrivateKey stranger = kiln::PrivateKey::generate();
  EXPECT_EQ(zero.add(zero.envelope("sm_90", "9.0", true, stranger)), KILN_ERR_REFUSED);
  EXPECT_EQ(zero.add(zero.envelope("sm_90", "9.0", true, zero.verifier)), KILN_OK) << thread_last_error();
  AttestedRuntime none(1, false);
  ASSERT_NE(none.archive, nullptr) << thread_last_error();
  EXPECT_EQ(none.add(none.envelope("sm_90", "9.0", true, none.verifier)), KILN_ERR_INVALID_ARGUMENT);
  EXPECT_NE(thread_last_error().find("requires no attestations"), std::string::npos) << thread_last_error();
  EXPECT_EQ(none.preflight("sm_90").find("unattested"), std::string::npos);  // nothing required: nothing changes
  EXPECT_EQ(kiln_archive_add_attestation(nullptr, "", 0), KILN_ERR_INVALID_ARGUMENT);
}

// A package's archive gets the attestations its store keeps; a kept file someone swapped is not
// the one the hash-chained history took in, and the package does not open.
TEST(AttestationPolicy, APackageDoesNotOpenWithAKeptAttestationSwappedUnderItsRecord) {
  AttestedRuntime r;
  ASSERT_EQ(r.created, KILN_OK) << thread_last_error();
  std::string store_dir = r.dir + "/store";
  kiln::store::Store::init(store_dir, r.trust);
  kiln::store::Store store(store_dir);
  kiln::store::ArchiveInfo info = store.add(kiln_test::archives() + "/scale.kiln");
  kiln::store::HistoryEntry kept = store.attest(info.digest, r.envelope("sm_90", "9.0", true, r.verifier, info.digest),
                                                "test", "test");
  store.activate(info.digest, "test", "");
  kiln_package* p = nullptr;
  ASSERT_EQ(kiln_package_open(r.rt, store_dir.c_str(), info.package.c_str(), 0, &p), KILN_OK) << thread_last_error();
  kiln_package_destroy(p);
  std::string path = store.attestations(info.digest).at(0).path;
  std::ofstream(path, std::ios::trunc) << r.envelope("sm_90", "9.0", true, r.verifier, info.digest) << " ";
  EXPECT_NE(kiln_package_open(r.rt, store_dir.c_str(), info.package.c_str(), 0, &p), KILN_OK);
  EXPECT_NE(thread_last_error().find("its bytes are not the attestation history record " + std::to_string(kept.number)),
            std::string::npos) << thread_last_error();
}

}  // namespace
