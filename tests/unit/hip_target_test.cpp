// AMD target IDs: matching tables, and the readers on real hipcc output where hipcc exists.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "core/code_object.hpp"
#include "hip/hip_target.hpp"

namespace kiln::hip {
namespace {

struct Case {
  const char* code;
  const char* device;
  bool fits;
};

class TargetIdRules : public ::testing::TestWithParam<Case> {};

TEST_P(TargetIdRules, Verdict) {
  TargetId code, device;
  ASSERT_TRUE(parse_target_id(GetParam().code, &code)) << GetParam().code;
  ASSERT_TRUE(parse_target_id(GetParam().device, &device)) << GetParam().device;
  Judgement j = judge(code, device);
  EXPECT_EQ(j.fits, GetParam().fits) << GetParam().code << " on " << GetParam().device << ": " << j.why;
}

INSTANTIATE_TEST_SUITE_P(
    LlvmAmdgpuUsage, TargetIdRules,
    ::testing::Values(Case{"gfx90a", "gfx90a:sramecc+:xnack-", true},            // unspecified: any setting
                      Case{"gfx90a:xnack-", "gfx90a:sramecc+:xnack-", true},
                      Case{"gfx90a:xnack+", "gfx90a:sramecc+:xnack-", false},     // pinned to the other setting
                      Case{"gfx90a:sramecc+:xnack-", "gfx90a:sramecc+:xnack-", true},
                      Case{"gfx90a:sramecc-", "gfx90a:sramecc+:xnack-", false},
                      Case{"gfx908", "gfx90a:sramecc+:xnack-", false},            // another processor
                      Case{"gfx1030", "gfx1100", false}, Case{"gfx1100", "gfx1100", true},
                      // generic targets run on their family only
                      Case{"gfx11-generic", "gfx1100", true}, Case{"gfx11-generic", "gfx1151", true},
                      Case{"gfx11-generic", "gfx1030", false}, Case{"gfx9-generic:xnack-", "gfx906:xnack-", true},
                      Case{"gfx9-generic", "gfx90a:sramecc+:xnack-", false},
                      Case{"gfx9-4-generic:sramecc+", "gfx942:sramecc+:xnack-", true}));

TEST(TargetIdRanking, ExactProcessorBeforeGeneric) {
  TargetId device, exact, generic;
  ASSERT_TRUE(parse_target_id("gfx1100", &device));
  ASSERT_TRUE(parse_target_id("gfx1100", &exact));
  ASSERT_TRUE(parse_target_id("gfx11-generic", &generic));
  EXPECT_GT(judge(exact, device).rank, judge(generic, device).rank);
  TargetId t;
  EXPECT_FALSE(parse_target_id("gfx8-generic", &t)) << "not a generic target LLVM defines";
}

TEST(TargetIdRanking, MostSpecificFirst) {
  TargetId device, any, one, both;
  ASSERT_TRUE(parse_target_id("gfx90a:sramecc+:xnack-", &device));
  ASSERT_TRUE(parse_target_id("gfx90a", &any));
  ASSERT_TRUE(parse_target_id("gfx90a:xnack-", &one));
  ASSERT_TRUE(parse_target_id("gfx90a:sramecc+:xnack-", &both));
  EXPECT_GT(judge(both, device).rank, judge(one, device).rank);
  EXPECT_GT(judge(one, device).rank, judge(any, device).rank);
}

TEST(TargetIdParsing, RefusesMalformedIds) {
  TargetId t;
  for (const char* bad : {"", "sm_90", "gfx", "gfx90a:", "gfx90a:xnack", "gfx90a:xnack*", "gfx90a:foo+", "gfx90a:xnack+:xnack-"}) {
    EXPECT_FALSE(parse_target_id(bad, &t)) << bad;
  }
}

TEST(AmdCodeObjectsFromHipcc, EveryTargetIdIsReadFromTheFile) {
#ifndef KILN_AMD_OBJECTS
  GTEST_SKIP() << "hipcc was not found when this build was configured (ci/install-deps.sh installs Debian's)";
#else
  const std::pair<const char*, const char*> cases[] = {
      {"scale.gfx90a_xnack+.co", "gfx90a:xnack+"}, {"scale.gfx90a_xnack-.co", "gfx90a:xnack-"},
      {"scale.gfx90a.co", "gfx90a"},               {"scale.gfx90a_sramecc+_xnack-.co", "gfx90a:sramecc+:xnack-"},
      {"scale.gfx908.co", "gfx908"},               {"scale.gfx1030.co", "gfx1030"},
  };
  for (const auto& [file, id] : cases) {
    std::ifstream in(std::string(KILN_AMD_OBJECTS) + "/" + file, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string bytes = ss.str();
    ASSERT_FALSE(bytes.empty()) << file;
    CodeObjectInfo info = inspect_code_object(ByteView(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()), file);
    EXPECT_EQ(info.backend, format::Vendor::hip) << file;
    EXPECT_EQ(info.kind, format::CodeKind::offload_bundle) << file;
    ASSERT_EQ(info.targets.size(), 1u) << file;
    EXPECT_EQ(info.targets[0], id) << file;
    TargetId parsed;
    EXPECT_TRUE(parse_target_id(info.targets[0], &parsed)) << info.targets[0];
  }
#endif
}

}  // namespace
}  // namespace kiln::hip
