// Kernel variants (MANIFEST.md, variant entries): what kiln.toml may say (each refusal at its
// line and column), how the kernel record stores them (round trip, canonical bytes, hostile
// records refused), the per-call choice, and the pack-time rule that a variant is the same kind
// of code for the same targets as the kernel's own.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "core/archive_semantics.hpp"
#include "core/error.hpp"
#include "core/kernel_table.hpp"
#include "core/manifest.hpp"
#include "engine/variant_choice.hpp"
#include "pack_plan.hpp"
#include "test_support.hpp"

namespace {

using namespace kiln;

// Line numbers below count from this text's first line.
const char* kGemm = R"TOML([package]
name = "gemm"
kernel_revision = "1"
sequence = 1

[[kernel]]
name = "gemm"
entry = "add_f32"
backend = "cuda"
params = [
  { name = "a", type = "ptr", dtype = "f16", access = "read" },
  { name = "m", type = "i32" },
  { name = "k", type = "i32" },
]
code = [{ arch = "compute_80", file = "g.80.ptx" }, { arch = "compute_90", file = "g.90.ptx" }]

[[kernel.variant]]
name = "mk16"
when = ["m % 16 == 0", "k % 16 == 0"]
code = [{ arch = "compute_90", file = "g.90.mk16.ptx" }, { arch = "compute_80", file = "g.80.mk16.ptx" }]

[[kernel.variant]]
name = "k16"
when = ["k % 16 == 0"]
code = [{ arch = "compute_80", file = "g.80.k16.ptx" }, { arch = "compute_90", file = "g.90.k16.ptx" }]

[[kernel.shape]]
name = "any"
ranges = { m = [1, 8192], k = [1, 8192] }
grid = ["cdiv(m, 64)"]
block = [128]
)TOML";

std::string refusal(const std::string& text) {
  try {
    test::parse_kiln_toml(text);
  } catch (const Failure& e) {
    EXPECT_EQ(e.code(), Errc::manifest) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "accepted";
  return "";
}

std::string with(std::string text, const std::string& from, const std::string& to) {
  std::size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

TEST(Variants, ParsedInFileOrderWithCodeInTheKernelsArchOrder) {
  Manifest m = test::parse_kiln_toml(kGemm);
  const KernelSpec& k = m.kernels.at(0);
  ASSERT_EQ(k.variants.size(), 2u);
  EXPECT_EQ(k.variants[0].name, "mk16");
  EXPECT_EQ(k.variants[0].when.size(), 2u);
  // Written compute_90 first; stored in the kernel's order (compute_80, compute_90).
  EXPECT_EQ(k.variants[0].code[0].arch, "compute_80");
  EXPECT_EQ(k.variants[0].code[0].file.path, "g.80.mk16.ptx");
  EXPECT_EQ(k.variants[0].code[1].file.path, "g.90.mk16.ptx");
  EXPECT_EQ(expr_text(k.variants[1].when[0], k.params), "k % 16 == 0");
}

TEST(Variants, MistakesAreRefusedAtTheirPlace) {
  EXPECT_NE(refusal(with(kGemm, "{ arch = \"compute_90\", file = \"g.90.mk16.ptx\" }",
                         "{ arch = \"sm_90a\", file = \"g.90.mk16.ptx\" }"))
                .find("kiln.toml:20:9: arch 'sm_90a' in kernel 'gemm' variant 'mk16' is not an arch of the code of kernel "
                      "'gemm' (compute_80, compute_90)"),
            std::string::npos);
  EXPECT_NE(refusal(with(kGemm, "code = [{ arch = \"compute_80\", file = \"g.80.k16.ptx\" }, ",
                         "code = ["))
                .find("kiln.toml:25:8: kernel 'gemm' variant 'k16' has no code for arch 'compute_80'"),
            std::string::npos);
  EXPECT_NE(refusal(with(kGemm, "name = \"k16\"", "name = \"mk16\"")).find("kiln.toml:22:1: variant 'mk16' appears twice"),
            std::string::npos);
  EXPECT_NE(refusal(with(kGemm, "when = [\"k % 16 == 0\"]", "when = []")).find("must hold 1 to 16 conditions, found 0"),
            std::string::npos);
  EXPECT_NE(refusal(with(kGemm, "when = [\"k % 16 == 0\"]", "when = [\"k % 16\"]")).find("kiln.toml:24:"),
            std::string::npos);
  EXPECT_NE(refusal(with(kGemm, "when = [\"k % 16 == 0\"]", "when = [\"q % 16 == 0\"]")).find("unknown name 'q'"),
            std::string::npos);
  EXPECT_NE(refusal(with(kGemm, "when = [\"k % 16 == 0\"]", "wehn = [\"k % 16 == 0\"]")).find("did you mean 'when'"),
            std::string::npos);
  EXPECT_NE(refusal(with(kGemm, "name = \"k16\"", "name = \"k/16\"")).find("variant name 'k/16' must use only"),
            std::string::npos);
}

TEST(Variants, TheRecordRoundTripsCanonicallyAndHostileOnesAreRefused) {
  Manifest m = test::parse_kiln_toml(kGemm);
  std::vector<std::uint8_t> good = encode_kernel_table(m)[1].content;
  KernelSpec back = decode_kernel_record(ByteView(good), "gemm", "record");
  ASSERT_EQ(back.variants.size(), 2u);
  EXPECT_EQ(back.variants[1].name, "k16");
  EXPECT_EQ(back.variants[0].when, m.kernels[0].variants[0].when);
  EXPECT_EQ(back.variants[0].code[1].file.path, "g.90.mk16.ptx");
  Manifest again = m;
  again.kernels[0].variants = back.variants;
  EXPECT_EQ(encode_kernel_table(again)[1].content, good);

  // Without variants the record ends at the tolerance (no launch extension), as before.
  Manifest plain = m;
  plain.kernels[0].variants.clear();
  std::vector<std::uint8_t> plain_bytes = encode_kernel_table(plain)[1].content;
  const std::size_t ext = plain_bytes.size();
  ASSERT_EQ(std::vector<std::uint8_t>(good.begin(), good.begin() + static_cast<long>(ext)), plain_bytes);
  // The extension: no kernel_args (u32 0), no clusters (u32 0), then the variants.
  EXPECT_EQ(std::vector<std::uint8_t>(good.begin() + static_cast<long>(ext), good.begin() + static_cast<long>(ext) + 8),
            std::vector<std::uint8_t>(8, 0));

  auto refused = [&](const std::vector<std::uint8_t>& bytes, const std::string& why, const std::string& says) {
    try {
      decode_kernel_record(ByteView(bytes), "gemm", "record");
      ADD_FAILURE() << "accepted: " << why;
    } catch (const Failure& e) {
      EXPECT_EQ(e.code(), Errc::malformed) << why;
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << why << ": " << e.what();
    }
  };
  // A variant for another arch than the kernel's code entry at its position.
  std::vector<std::uint8_t> bad = good;
  std::string text(bad.begin(), bad.end());
  std::size_t at = text.find("compute_80", ext);
  bad[at + 9] = '6';
  refused(bad, "arch order", "is for 'compute_86', the kernel's for 'compute_80'");
  // Zero variants; a repeated name; zero conditions.
  bad = good;
  bad[ext + 8] = 0;
  refused(bad, "zero variants", "bad variant count 0");
  // A repeated name, written by hand (the writer takes what the parser allows).
  Manifest twice = m;
  twice.kernels[0].variants[1].name = "mk16";
  refused(encode_kernel_table(twice)[1].content, "a repeated name", "bad or repeated variant name 'mk16'");
  // Truncated anywhere inside the variants; every single-byte change decodes or is refused.
  for (std::size_t cut = ext + 1; cut < good.size(); cut += 5) {
    refused(std::vector<std::uint8_t>(good.begin(), good.begin() + static_cast<long>(cut)), "cut " + std::to_string(cut), "");
  }
  for (std::size_t i = ext; i < good.size(); ++i) {
    bad = good;
    bad[i] ^= 0x5a;
    try {
      decode_kernel_record(ByteView(bad), "gemm", "record");
    } catch (const Failure& e) {
      EXPECT_EQ(e.code(), Errc::malformed) << "byte " << i;
    }
  }
}

// A variant built with an argument folded in as a constant (Triton compiles a value of 1 that
// way) takes fewer parameters: it gives its own kernel_args, stored after its code and checked as
// the kernel's are.
TEST(Variants, AVariantMayTakeItsOwnParameters) {
  std::string text = with(kGemm, "[[kernel.variant]]\nname = \"mk16\"", R"([[kernel.variant]]
name = "m1"
when = ["m == 1"]
code = [{ arch = "compute_80", file = "g.80.m1.ptx" }, { arch = "compute_90", file = "g.90.m1.ptx" }]
kernel_args = ["a", "k"]

[[kernel.variant]]
name = "mk16")");
  Manifest m = test::parse_kiln_toml(text);
  const VariantSpec& v = m.kernels[0].variants.at(0);
  ASSERT_TRUE(v.has_kernel_args);
  ASSERT_EQ(v.kernel_args.size(), 2u);
  EXPECT_EQ(v.kernel_args[1].param, 2);  // k
  EXPECT_FALSE(m.kernels[0].variants.at(1).has_kernel_args);
  std::vector<std::uint8_t> bytes = encode_kernel_table(m)[1].content;
  KernelSpec back = decode_kernel_record(ByteView(bytes), "gemm", "record");
  ASSERT_TRUE(back.variants.at(0).has_kernel_args);
  EXPECT_EQ(back.variants[0].kernel_args.size(), 2u);
  EXPECT_FALSE(back.variants[1].has_kernel_args);
  Manifest again = m;
  again.kernels[0].variants = back.variants;
  for (std::size_t i = 0; i < 2; ++i) again.kernels[0].variants[0].kernel_args[i].pos = m.kernels[0].variants[0].kernel_args[i].pos;
  EXPECT_EQ(encode_kernel_table(again)[1].content, bytes);
  EXPECT_NE(refusal(with(text, "kernel_args = [\"a\", \"k\"]", "kernel_args = [\"a\", \"q\"]"))
                .find("kiln.toml:21:21: 'q' in kernel 'gemm' variant 'm1' is not a parameter"),
            std::string::npos);
  EXPECT_NE(refusal(with(text, "kernel_args = [\"a\", \"k\"]", "kernel_args = [\"a\", { name = \"x\", type = \"u64\", value = \"0 - 1\" }]"))
                .find("which no call can bring into its type u64"),
            std::string::npos);
}

TEST(Variants, ACallTakesTheFirstVariantWhoseConditionsAllHold) {
  Manifest m = test::parse_kiln_toml(kGemm);
  engine::VariantChoice choice(m.kernels[0]);
  ASSERT_EQ(choice.size(), 2u);
  std::uint64_t a = 0;
  std::int32_t mv = 0, kv = 0;
  void* args[] = {&a, &mv, &kv};
  auto first = [&](std::int32_t m_value, std::int32_t k_value) {
    mv = m_value, kv = k_value;
    for (std::size_t i = 0; i < choice.size(); ++i) {
      if (choice.holds(i, args)) return static_cast<int>(i);
    }
    return -1;
  };
  EXPECT_EQ(first(64, 128), 0);   // both: the most specialised, listed first
  EXPECT_EQ(first(63, 128), 1);   // k only
  EXPECT_EQ(first(64, 127), -1);  // m alone has no variant: the kernel's own code
  EXPECT_EQ(first(0, -16), 0);    // 0 and negatives are multiples too, as Triton counts them
  mv = 63, kv = 128;
  EXPECT_EQ(choice.mismatch(0, args), "'m % 16 == 0' does not hold");
  EXPECT_EQ(choice.mismatch(1, args), "");
  EXPECT_EQ(choice.describe(0), "mk16 (m % 16 == 0 && k % 16 == 0)");
}

TEST(Variants, AConditionMayAskForAPointersAlignment) {
  // A build that assumes an aligned tensor (Triton's `tt.divisibility` on a pointer) takes only
  // the calls whose address is a multiple of 16; an offset view runs the general code.
  Manifest m = test::parse_kiln_toml(with(kGemm, "when = [\"k % 16 == 0\"]", "when = [\"k % 16 == 0\", \"addr(a) % 16 == 0\"]"));
  engine::VariantChoice choice(m.kernels[0]);
  std::uint64_t a = 0x7f0000000100;
  std::int32_t mv = 3, kv = 32;
  void* args[] = {&a, &mv, &kv};
  EXPECT_TRUE(choice.holds(1, args));
  a += 2;  // a view starting one f16 in
  EXPECT_FALSE(choice.holds(1, args));
  EXPECT_EQ(choice.mismatch(1, args), "'addr(a) % 16 == 0' does not hold");
  EXPECT_EQ(choice.describe(1), "k16 (k % 16 == 0 && addr(a) % 16 == 0)");
  // In a launch expression an address is refused at its place.
  EXPECT_NE(refusal(with(kGemm, "grid = [\"cdiv(m, 64)\"]", "grid = [\"addr(a) % 64 + 1\"]"))
                .find("addr() is allowed only in conditions"),
            std::string::npos);
}

TEST(Variants, APackRefusesAVariantThatIsNotTheKernelsKindOfCodeForItsTargets) {
  std::string dir = test::make_temp_dir();
  auto write = [&](const std::string& name, const std::string& content) {
    std::ofstream(dir + "/" + name, std::ios::binary) << content;
  };
  write("kiln.toml", kGemm);
  for (const char* f : {"g.80.ptx", "g.80.mk16.ptx", "g.80.k16.ptx"}) write(f, test::small_ptx("sm_80"));
  for (const char* f : {"g.90.ptx", "g.90.mk16.ptx", "g.90.k16.ptx"}) write(f, test::small_ptx("sm_90"));
  cli::PackPlan plan = cli::plan_pack(dir + "/kiln.toml");
  EXPECT_EQ(plan.manifest.kernels.at(0).variants.size(), 2u);
  // The claim is checked against the file as for the kernel's own code...
  write("g.90.k16.ptx", test::small_ptx("sm_86"));
  try {
    cli::plan_pack(dir + "/kiln.toml");
    ADD_FAILURE() << "packed a variant built for another target";
  } catch (const Failure& e) {
    EXPECT_NE(std::string(e.what()).find("kiln.toml:25:57: kernel 'gemm' claims arch 'compute_90' for 'g.90.k16.ptx' but the "
                                         "file is built for compute_86"),
              std::string::npos)
        << e.what();
  }
  // ...and the variant must be what the kernel's own code is for that arch (the rule pack,
  // verify and the runtime share): the same kind of code for the same targets.
  format::Entry own, variant;
  own.path = "g.90.ptx", variant.path = "g.90.k16.cubin";
  own.backend = variant.backend = format::Vendor::cuda;
  own.kind = format::CodeKind::ptx, variant.kind = format::CodeKind::cubin;
  own.arch = variant.arch = "compute_90";
  const KernelSpec& k = plan.manifest.kernels.at(0);
  EXPECT_EQ(variant_code_problem(k, k.variants[1], 1, own, variant),
            "variant 'k16' of kernel 'gemm' gives 'g.90.k16.cubin' (cuda cubin for compute_90) for arch 'compute_90', where "
            "the kernel's own code 'g.90.ptx' is cuda ptx for compute_90 (a variant must be the same kind of code for the "
            "same targets)");
  variant.kind = format::CodeKind::ptx;
  EXPECT_EQ(variant_code_problem(k, k.variants[1], 1, own, variant), "");
  variant.arch = "compute_90,sm_90";
  EXPECT_NE(variant_code_problem(k, k.variants[1], 1, own, variant), "");
}

}  // namespace
