// Table-driven checks of kiln's CUDA compatibility rules, including every case the H200's
// own driver was measured on (tests/gpu/RESULTS.md): kiln must decide what the driver would.
#include <gtest/gtest.h>

#include "cuda/cuda_target.hpp"

namespace kiln::cuda {
namespace {

struct Case {
  const char* tag;
  int cc_major, cc_minor;
  int driver;
  const char* ptx_isa;
  Verdict expected;
  const char* why = nullptr;  // where given, the exact reason judge() must give
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.tag << " on cc " << c.cc_major << "." << c.cc_minor << " driver " << c.driver;
}

class Rules : public ::testing::TestWithParam<Case> {};

TEST_P(Rules, Verdict) {
  const Case& c = GetParam();
  Target t;
  ASSERT_TRUE(parse_target(c.tag, &t)) << c.tag;
  Judgement j = judge(t, DeviceSpec{c.cc_major, c.cc_minor, c.driver}, c.ptx_isa);
  EXPECT_EQ(static_cast<int>(j.verdict), static_cast<int>(c.expected)) << j.why;
  EXPECT_FALSE(j.why.empty());
  if (c.why != nullptr) {
    EXPECT_EQ(j.why, c.why);
  }
}

INSTANTIATE_TEST_SUITE_P(
    MeasuredOnH200, Rules,
    ::testing::Values(
        // cubins the H200 (cc 9.0, driver 13.0) refused with CUDA_ERROR_NO_BINARY_FOR_GPU
        Case{"sm_75", 9, 0, 13000, "", Verdict::arch_mismatch}, Case{"sm_80", 9, 0, 13000, "", Verdict::arch_mismatch},
        Case{"sm_86", 9, 0, 13000, "", Verdict::arch_mismatch}, Case{"sm_89", 9, 0, 13000, "", Verdict::arch_mismatch},
        Case{"sm_100", 9, 0, 13000, "", Verdict::arch_mismatch}, Case{"sm_100f", 9, 0, 13000, "", Verdict::arch_mismatch},
        // cubins and PTX it ran
        Case{"sm_90", 9, 0, 13000, "", Verdict::fits}, Case{"sm_90a", 9, 0, 13000, "", Verdict::fits},
        Case{"compute_80", 9, 0, 13000, "9.0", Verdict::fits}, Case{"compute_90", 9, 0, 13000, "9.0", Verdict::fits},
        Case{"compute_90a", 9, 0, 13000, "9.0", Verdict::fits},
        // PTX it refused (CUDA_ERROR_INVALID_PTX)
        Case{"compute_100", 9, 0, 13000, "9.0", Verdict::arch_mismatch}));

INSTANTIATE_TEST_SUITE_P(
    DocumentedRules, Rules,
    ::testing::Values(
        // sm_XY runs on X.z, z >= Y
        Case{"sm_80", 8, 6, 12040, "", Verdict::fits}, Case{"sm_86", 8, 0, 12040, "", Verdict::arch_mismatch},
        // 'a' only on exactly X.Y
        Case{"sm_90a", 9, 1, 13000, "", Verdict::arch_mismatch}, Case{"sm_100a", 10, 3, 13000, "", Verdict::arch_mismatch},
        Case{"sm_100a", 10, 0, 13000, "", Verdict::fits},
        // 'f' within the family: same major, minor >= Y
        Case{"sm_100f", 10, 3, 13000, "", Verdict::fits}, Case{"sm_103f", 10, 0, 13000, "", Verdict::arch_mismatch},
        Case{"sm_100f", 12, 0, 13000, "", Verdict::arch_mismatch},
        // PTX: any newer cc, if the driver knows the ISA
        Case{"compute_80", 12, 0, 13000, "8.0", Verdict::fits}, Case{"compute_90a", 10, 0, 13000, "8.0", Verdict::arch_mismatch},
        Case{"compute_90", 9, 0, 12040, "9.0", Verdict::driver_too_old},
        Case{"compute_90", 9, 0, 12040, "8.4", Verdict::fits},
        Case{"compute_90", 9, 0, 13000, "9.9", Verdict::driver_too_old}));

// PTX with the 'a' suffix is JIT-compiled only on exactly its major.minor: a device of the same
// major and a higher minor (the case a '>=' instead of '==' would let through) is refused, and
// so is a lower minor; 'f' PTX runs on the higher minor of its family, not on another major.
INSTANTIATE_TEST_SUITE_P(
    ArchSpecificPtx, Rules,
    ::testing::Values(
        Case{"compute_90a", 9, 1, 13000, "9.0", Verdict::arch_mismatch, "PTX for cc 9.0a cannot be compiled for cc 9.1"},
        Case{"compute_100a", 10, 3, 13000, "8.8", Verdict::arch_mismatch,
             "PTX for cc 10.0a cannot be compiled for cc 10.3"},
        Case{"compute_103a", 10, 0, 13000, "8.8", Verdict::arch_mismatch,
             "PTX for cc 10.3a cannot be compiled for cc 10.0"},
        Case{"compute_100a", 10, 0, 13000, "8.8", Verdict::fits, "PTX JIT-compiled for cc 10.0"},
        Case{"compute_90a", 9, 0, 13000, "9.0", Verdict::fits, "PTX JIT-compiled for cc 9.0"},
        Case{"compute_100f", 10, 3, 13000, "8.8", Verdict::fits, "PTX JIT-compiled for cc 10.3"},
        Case{"compute_100f", 11, 0, 13000, "8.8", Verdict::arch_mismatch,
             "PTX for cc 10.0f cannot be compiled for cc 11.0"},
        // plain PTX, for contrast: any newer cc, minor or major
        Case{"compute_90", 9, 1, 13000, "9.0", Verdict::fits, "PTX JIT-compiled for cc 9.1"}));

TEST(Ranking, ExactBeforeCompatibleBeforePtxAndSpecificFirst) {
  DeviceSpec h200{9, 0, 13000};
  auto rank = [&](const char* tag) {
    Target t;
    EXPECT_TRUE(parse_target(tag, &t));
    return judge(t, h200, "8.0").rank;
  };
  EXPECT_GT(rank("sm_90a"), rank("sm_90"));
  EXPECT_GT(rank("sm_90"), rank("compute_90"));
  EXPECT_GT(rank("compute_90"), rank("compute_80"));
  DeviceSpec ampere{8, 6, 13000};
  Target exact, older;
  ASSERT_TRUE(parse_target("sm_86", &exact));
  ASSERT_TRUE(parse_target("sm_80", &older));
  EXPECT_GT(judge(exact, ampere).rank, judge(older, ampere).rank);
}

TEST(Parsing, TargetsAndVersions) {
  Target t;
  ASSERT_TRUE(parse_target("sm_121a", &t));
  EXPECT_EQ(t.major, 12);
  EXPECT_EQ(t.minor, 1);
  EXPECT_EQ(t.suffix, 'a');
  EXPECT_FALSE(t.is_ptx);
  ASSERT_TRUE(parse_target("compute_100f", &t));
  EXPECT_TRUE(t.is_ptx);
  EXPECT_EQ(t.major, 10);
  for (const char* bad : {"sm_", "sm_9", "gfx90a", "compute_x0", "sm_90b", ""}) EXPECT_FALSE(parse_target(bad, &t)) << bad;
  EXPECT_EQ(driver_for_ptx_isa(9, 0), 13000);
  EXPECT_EQ(driver_for_ptx_isa(8, 4), 12040);
  EXPECT_EQ(driver_for_ptx_isa(9, 7), 0);
  EXPECT_EQ(driver_version_text(12040), "12.4");
  int major = 0, minor = 0;
  EXPECT_TRUE(parse_version_pair("13.0", &major, &minor));
  EXPECT_EQ(major, 13);
  EXPECT_FALSE(parse_version_pair("13", &major, &minor));
}

}  // namespace
}  // namespace kiln::cuda
