// kiln preflight --target / --fleet: the route each kernel of the test archives would take on
// GPUs this host does not have, judged by libkiln's resolver from the archive alone. (That
// `--target sm_90` agrees with a real H200's own preflight is checked on the GPU: ci/gpu-run.sh.)
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <string>

#include "attestation_text.hpp"
#include "core/dsse.hpp"
#include "core/ed25519.hpp"
#include "core/json.hpp"
#include "run_command.hpp"
#include "temp_dirs.hpp"

namespace {

using Result = kiln::test::CommandResult;

Result run_kiln(const std::string& args) { return kiln::test::run_command(std::string(KILN_BINARY) + " " + args); }

std::string archive(const std::string& name) { return std::string(KILN_TEST_ARCHIVES) + "/" + name; }
const std::string kTrust = std::string(KILN_TEST_KEYS) + "/test.pub";

// "target/kernel" -> "route reason chosen-target" from a --json report.
std::map<std::string, std::string> routes(const std::string& json_text) {
  kiln::json::Value doc = kiln::json::parse(json_text, "preflight --json");
  std::map<std::string, std::string> out;
  for (const kiln::json::Value& t : doc.get("targets")->array) {
    for (const kiln::json::Value& k : t.get("kernels")->array) {
      out[*t.get_string("target") + "/" + *k.get_string("kernel")] =
          *k.get_string("route") + " " + *k.get_string("reason") + " " + *k.get_string("target");
    }
  }
  return out;
}

#define NEED(file)                                                                              \
  if (!std::ifstream(archive(file))) GTEST_SKIP() << file << " needs nvcc/hipcc at build time"

TEST(PreflightTarget, CudaTargetsGetTheRouteTheMatchingRulesGive) {
  NEED("matmul-relu.kiln");  // sm_80 and sm_90a cubins, compute_90 PTX
  Result r = run_kiln("preflight " + archive("matmul-relu.kiln") + " --trust " + kTrust +
                  " --target sm_75,sm_80,sm_86 --target sm_90,sm_100 --json");
  ASSERT_EQ(r.code, 0) << r.out;
  auto got = routes(r.out);
  EXPECT_EQ(got["sm_75/matmul_relu"], "reference arch-mismatch ");
  EXPECT_EQ(got["sm_80/matmul_relu"], "native match sm_80");
  EXPECT_EQ(got["sm_86/matmul_relu"], "native match sm_80");  // cc 8.0 code on cc 8.6
  EXPECT_EQ(got["sm_90/matmul_relu"], "native match sm_90a");
  EXPECT_EQ(got["sm_100/matmul_relu"], "ptx-jit match compute_90");
  EXPECT_EQ(got.size(), 5u);
}

// Which fleet targets are attested: judged as a runtime that requires attestations judges them.
TEST(PreflightTarget, SaysWhichTargetsTheGivenAttestationsCover) {
  std::string dir = kiln::test::make_temp_dir("kiln-preflight-attest");
  kiln::PrivateKey verifier = kiln::PrivateKey::generate();
  std::ofstream(dir + "/verifier.pub") << verifier.public_key().to_pem();
  std::string digest = run_kiln("digest " + archive("scale.kiln")).out;
  digest = digest.substr(0, digest.find_first_of(" \n"));
  std::ofstream(dir + "/h100.json") << kiln::dsse_envelope_json(
      "application/vnd.in-toto+json", kiln::test::gpu_run_statement_text(digest, "sm_90", "9.0", true), {&verifier});
  std::string common = "preflight " + archive("scale.kiln") + " --trust " + kTrust + " --target sm_80,sm_90 --json" +
                       " --require-attestation " + dir + "/verifier.pub";
  Result r = run_kiln(common + " --attestation " + dir + "/h100.json");
  ASSERT_EQ(r.code, 0) << r.out;
  auto got = routes(r.out);
  EXPECT_EQ(got["sm_80/scale"], "reference unattested ");
  EXPECT_EQ(got["sm_90/scale"], "ptx-jit match compute_80");
  // An attestation the keys did not sign is refused by name, not silently left out.
  kiln::PrivateKey stranger = kiln::PrivateKey::generate();
  std::ofstream(dir + "/other.json") << kiln::dsse_envelope_json(
      "application/vnd.in-toto+json", kiln::test::gpu_run_statement_text(digest, "sm_90", "9.0", true), {&stranger});
  Result bad = run_kiln(common + " --attestation " + dir + "/other.json");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.out.find(dir + "/other.json: the attestation given: 0 distinct trusted signer(s), 1 required"), std::string::npos) << bad.out;
}

TEST(PreflightTarget, AnOldDriverAndAMissingFeatureAreNamed) {
  NEED("matmul-relu.kiln");
  Result old = run_kiln("preflight " + archive("matmul-relu.kiln") + " --trust " + kTrust + " --target sm_100 --driver 12.0");
  EXPECT_EQ(old.code, 0) << old.out;
  EXPECT_NE(old.out.find("driver-too-old"), std::string::npos) << old.out;
  EXPECT_NE(old.out.find("needs a CUDA 13.0 driver"), std::string::npos) << old.out;
  Result gate = run_kiln("preflight " + archive("matmul-relu.kiln") + " --trust " + kTrust +
                     " --target sm_90,sm_75 --require-device");
  EXPECT_NE(gate.code, 0) << gate.out;
  EXPECT_NE(gate.out.find("1 kernel(s) would not run on their target's GPU"), std::string::npos) << gate.out;
  NEED("tma-pair-sum.kiln");
  Result tma = run_kiln("preflight " + archive("tma-pair-sum.kiln") + " --trust " + kTrust + " --target sm_80,sm_90 --json");
  auto got = routes(tma.out);
  EXPECT_EQ(got["sm_80/tma_pair_sum"], "reference device-feature ");
  EXPECT_EQ(got["sm_90/tma_pair_sum"], "native match sm_90a");
}

TEST(PreflightTarget, AmdTargetIdsAndTheOtherVendor) {
  NEED("scale-amd.kiln");  // kernel scale: AMD code objects; scale_cuda: PTX
  Result r = run_kiln("preflight " + archive("scale-amd.kiln") + " --trust " + kTrust +
                  " --target gfx90a:xnack-,gfx90a:sramecc+:xnack-,gfx942,sm_90 --json");
  ASSERT_EQ(r.code, 0) << r.out;
  auto got = routes(r.out);
  EXPECT_EQ(got["gfx90a:xnack-/scale"], "native match gfx90a:xnack-");
  EXPECT_EQ(got["gfx90a:sramecc+:xnack-/scale"], "native match gfx90a:sramecc+:xnack-");
  EXPECT_EQ(got["gfx942/scale"], "reference arch-mismatch ");
  EXPECT_EQ(got["gfx942/scale_cuda"], "reference no-device ");
  EXPECT_EQ(got["sm_90/scale"], "reference no-device ");
  EXPECT_EQ(got["sm_90/scale_cuda"], "ptx-jit match compute_80");
}

TEST(PreflightTarget, AFleetFileNamesItsPools) {
  NEED("matmul-relu.kiln");
  std::string dir = kiln::test::make_temp_dir("kiln-fleet-test");
  std::ofstream(dir + "/fleet.toml") << "[[fleet]]\nname = \"a100-pool\"\ntarget = \"sm_80\"\ndriver = \"13.0\"\n\n"
                                        "[[fleet]]\nname = \"h200-pool\"\ntarget = \"sm_90\"\n";
  Result r = run_kiln("preflight " + archive("matmul-relu.kiln") + " --trust " + kTrust + " --fleet " + dir + "/fleet.toml --json");
  ASSERT_EQ(r.code, 0) << r.out;
  kiln::json::Value doc = kiln::json::parse(r.out, "fleet report");
  const auto& targets = doc.get("targets")->array;
  ASSERT_EQ(targets.size(), 2u);
  EXPECT_EQ(*targets[0].get_string("name"), "a100-pool");
  EXPECT_EQ(*targets[0].get_string("driver"), "13.0");
  EXPECT_EQ(targets[1].get("driver")->type, kiln::json::Value::Type::null);
  Result text = run_kiln("preflight " + archive("matmul-relu.kiln") + " --trust " + kTrust + " --fleet " + dir + "/fleet.toml");
  EXPECT_NE(text.out.find("a100-pool (sm_80)"), std::string::npos) << text.out;

  std::ofstream(dir + "/bad.toml") << "[[fleet]]\nname = \"x\"\ntarjet = \"sm_80\"\n";
  Result bad = run_kiln("preflight " + archive("matmul-relu.kiln") + " --trust " + kTrust + " --fleet " + dir + "/bad.toml");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.out.find("bad.toml: fleet[0]: unknown key 'tarjet' (known: name, target, driver)"), std::string::npos) << bad.out;
}

TEST(PreflightTarget, WhatIsNotAGpuIsRefusedByName) {
  NEED("matmul-relu.kiln");
  const std::string base = "preflight " + archive("matmul-relu.kiln") + " --trust " + kTrust;
  struct Case {
    std::string args, message;
  } cases[] = {
      {" --target compute_90", "target 'compute_90' names PTX, not a GPU: give sm_90"},
      {" --target h100", "target 'h100' is neither a CUDA GPU (sm_80, sm_90, sm_100, ...) nor an AMD target ID"},
      {" --target gfx9-generic", "is a generic code target, not a GPU"},
      {" --target gfx942 --driver 12.4", "--driver is a CUDA driver version; target 'gfx942' is an AMD GPU"},
      {" --target sm_90 --driver twelve", "driver 'twelve' is not a CUDA version such as 12.4"},
      {" --target sm_90,,sm_80", "has an empty item"},
      {" --target sm_90 --device 1", "--device is this host's GPU; with --target or --fleet there is none"},
      {" --target sm_999", "target 'sm_999' names compute capability 99.9, which no NVIDIA GPU has (known: sm_50,"},
      {" --target sm_90,sm_91", "target 'sm_91' names compute capability 9.1, which no NVIDIA GPU has"},
      {" --target gfx999", "target 'gfx999' names AMD processor gfx999, which LLVM's AMDGPU target does not know"},
  };
  for (const Case& c : cases) {
    Result r = run_kiln(base + c.args);
    EXPECT_NE(r.code, 0) << c.args;
    EXPECT_NE(r.out.find(c.message), std::string::npos) << c.args << ": " << r.out;
  }
}

// A target that cannot be a GPU is the command line's mistake: exit 2, before a line of the table.
TEST(PreflightTarget, ABadTargetIsAUsageErrorCaughtBeforeAnythingIsPrinted) {
  NEED("matmul-relu.kiln");
  const std::string base = "preflight " + archive("matmul-relu.kiln") + " --trust " + kTrust;
  for (const std::string& target : {"sm_999", "h100", "sm_90,gfx999"}) {
    Result r = run_kiln(base + " --target " + target);
    EXPECT_EQ(r.code, 2) << target << ": " << r.out;
    EXPECT_EQ(r.out.find(" route "), std::string::npos) << target << ": the table's header came before the check: " << r.out;
    EXPECT_EQ(r.out.rfind("kiln preflight: --target: target '", 0), 0u) << r.out;  // the command, then what is wrong
  }
  EXPECT_EQ(run_kiln(base + " --target sm_121,sm_88,gfx950").code, 0);
}

}  // namespace

// A kernel with variants: the target is chosen from the kernel's own code, and its variants
// (one with its own kernel_args) are judged for the same target; inspect lists them.
TEST(PreflightTarget, VariantsAreJudgedWithTheKernelsTargetAndListed) {
  NEED("scale-variants.kiln");
  Result r = run_kiln("preflight " + archive("scale-variants.kiln") + " --trust " + kTrust + " --target sm_90 --json");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(routes(r.out)["sm_90/scale"], "ptx-jit match compute_80");
  EXPECT_NE(r.out.find("and its 2 variant(s) for the same target"), std::string::npos) << r.out;
  Result shown = run_kiln("inspect " + archive("scale-variants.kiln"));
  EXPECT_NE(shown.out.find("one.n  when n == 1"), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("d16.n  when n % 16 == 0 && n >= 16"), std::string::npos) << shown.out;
}
