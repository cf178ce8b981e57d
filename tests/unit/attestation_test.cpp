// Attestations of a GPU run (schema/ATTESTATION.md): the DSSE envelope kiln writes verifies with
// an independent verifier written from the DSSE specification (tests/unit/dsse_verify.py, Python's
// cryptography) and with `kiln attest verify`'s own check; a changed byte anywhere, an untrusted
// key, a lower threshold than asked, another payload type or another archive are refused. (The
// run itself needs a GPU: ci/gpu-run.sh attests one on the H200.)
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "attestation.hpp"
#include "core/base64.hpp"
#include "core/error.hpp"
#include "core/json.hpp"
#include "run_command.hpp"
#include "test_support.hpp"

namespace kiln {
namespace {

class Attestation : public ::testing::Test {
 protected:
  void SetUp() override {
    bytes = test::build_signed({&key});
    archive = test::open_and_verify(bytes, trust);
    device.known = true;
    device.vendor = "cuda";
    device.name = "NVIDIA H200";
    device.arch = "sm_90";
    device.compute_capability = "9.0";
    device.driver = "13.0";
    device.memory_bytes = 150ull << 30;
    cli::TestResult r;
    r.kernel = "add";
    r.test = "n1024";
    r.route = "native";
    r.target = "sm_90a";
    r.ran = r.passed = true;
    r.elements = 1024;
    r.max_abs_error = 0.00390625;
    r.max_rel_error = 1.5e-3;
    r.median_us = 8.25;
    r.code_path = "k.ptx";
    results = {r};
  }
  std::string envelope() {
    return dsse_envelope_json(cli::kInTotoPayloadType, cli::gpu_run_statement(*archive, device, results, 1796200000), {&key});
  }
  PrivateKey key = PrivateKey::generate();
  TrustSet trust = test::trust_of({&key});
  std::vector<std::uint8_t> bytes;
  std::unique_ptr<ArchiveReader> archive;
  cli::RunDevice device;
  std::vector<cli::TestResult> results;
};

TEST_F(Attestation, TheStatementSaysWhatRanWhere) {
  DsseEnvelope e = dsse_parse(envelope(), "attestation");
  EXPECT_EQ(e.payload_type, "application/vnd.in-toto+json");
  json::Value st = json::parse(e.payload, "statement");
  EXPECT_EQ(*st.get_string("_type"), "https://in-toto.io/Statement/v1");
  EXPECT_EQ("sha256:" + *st.get("subject")->array.at(0).get("digest")->get_string("sha256"), digest_string(archive->digest()));
  const json::Value* p = st.get("predicate");
  EXPECT_EQ(*p->get("device")->get_string("arch"), "sm_90");
  EXPECT_EQ(*p->get("device")->get_number("memory_bytes"), static_cast<std::int64_t>(150ull << 30));
  const json::Value& r = p->get("results")->array.at(0);
  EXPECT_EQ(*r.get("code")->get_string("path"), "k.ptx");
  EXPECT_EQ(r.get("code")->get_string("sha256")->size(), 64u);  // the member's content digest
  EXPECT_EQ(r.get("max_abs_error")->type, json::Value::Type::real);
  EXPECT_EQ(r.get("max_abs_error")->real, 0.00390625);
  cli::AttestationFacts f = cli::verify_attestation(envelope(), trust, 1, "a.json");
  EXPECT_TRUE(f.passed);
  EXPECT_EQ(f.subject_digest, digest_string(archive->digest()));
  EXPECT_EQ(f.signed_by, std::vector<std::string>{key.public_key().key_id()});
}

TEST_F(Attestation, AnIndependentDsseVerifierAcceptsItAndRefusesAChangedByte) {
  std::string dir = test::make_temp_dir("kiln-attest");
  std::string pem = key.public_key().to_pem();
  test::write_file(dir + "/k.pub", std::vector<std::uint8_t>(pem.begin(), pem.end()));
  auto verify = [&](const std::string& text) {
    test::write_file(dir + "/a.json", std::vector<std::uint8_t>(text.begin(), text.end()));
    return test::run_command("python3 " + std::string(KILN_SOURCE_DIR) + "/tests/unit/dsse_verify.py " + dir + "/a.json " +
                             dir + "/k.pub");
  };
  test::CommandResult ok = verify(envelope());
  if (ok.out.find("No module named 'cryptography'") != std::string::npos) GTEST_SKIP() << "python3-cryptography missing";
  ASSERT_EQ(ok.code, 0) << ok.out;
  // One changed byte of the signed payload (inside its base64), then of the payload type.
  DsseEnvelope e = dsse_parse(envelope(), "a");
  std::string changed = e.payload;
  changed[changed.find("\"passed\":true")] ^= 1;  // a quote becomes '#'... any byte will do
  json::Writer w;
  w.begin_object().field("payloadType", e.payload_type).field("payload", base64_encode(changed)).key("signatures").begin_array();
  w.begin_object().field("keyid", e.signatures[0].key_id);
  w.field("sig", base64_encode(std::string(e.signatures[0].sig.begin(), e.signatures[0].sig.end()))).end_object();
  w.end_array().end_object();
  EXPECT_EQ(verify(w.str()).code, 1);
  try {
    cli::verify_attestation(w.str(), trust, 1, "a.json");
    ADD_FAILURE() << "kiln accepted a changed payload";
  } catch (const Failure& err) {
    EXPECT_EQ(err.code(), Errc::refused);
    EXPECT_NE(std::string(err.what()).find("the signature does not verify"), std::string::npos) << err.what();
  }
}

TEST_F(Attestation, UntrustedKeysThresholdsAndOtherPayloadsAreRefused) {
  PrivateKey other = PrivateKey::generate();
  TrustSet others = test::trust_of({&other});
  try {
    cli::verify_attestation(envelope(), others, 1, "a.json");
    ADD_FAILURE() << "accepted an untrusted key";
  } catch (const Failure& e) {
    EXPECT_NE(std::string(e.what()).find("0 distinct trusted signer(s), 1 required (key " + key.public_key().key_id() +
                                         " is not trusted)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(cli::verify_attestation(envelope(), trust, 2, "a.json"), Failure);
  std::string statement = cli::gpu_run_statement(*archive, device, results, 1796200000);
  try {
    cli::verify_attestation(dsse_envelope_json("application/json", statement, {&key}), trust, 1, "a.json");
    ADD_FAILURE() << "accepted another payload type";
  } catch (const Failure& e) {
    EXPECT_EQ(e.code(), Errc::malformed);
  }
  results[0].passed = false;
  EXPECT_FALSE(cli::verify_attestation(envelope(), trust, 1, "a.json").passed);
  // Not an envelope at all; a signature of the wrong size.
  EXPECT_THROW(dsse_parse("[]", "a"), Failure);
  EXPECT_THROW(dsse_parse(R"({"payloadType":"x","payload":"eA==","signatures":[{"keyid":"k","sig":"eA=="}]})", "a"), Failure);
}

}  // namespace
}  // namespace kiln
