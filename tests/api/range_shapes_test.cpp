// Range shapes through the C API, without a GPU: the reference route checks each call against
// the declared shapes as the native route does, and tells the reference the launch a matching
// range shape computed from that call (tests/data/scale/kiln.ranges.toml).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "api_test_env.hpp"
#include "kiln/kiln.h"

namespace {

using kiln_test::thread_last_error;

struct RangeSeen {
  std::vector<unsigned> reasons;
  std::vector<std::string> texts;
};
int remember_range(kiln_call_info* info, void**, size_t, void*, void* user) {
  auto* s = static_cast<RangeSeen*>(user);
  s->reasons.push_back(info->reason);
  s->texts.push_back(info->reason_text);
  return 0;
}

class RangeShapes : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(k.open("scale-ranges.kiln", "scale"), KILN_OK) << thread_last_error();
    ASSERT_EQ(kiln_runtime_set_reference(k.rt, "scale", remember_range, &seen, nullptr), KILN_OK);
    rt = k.rt;
    archive = k.archive;
    kernel = k.kernel;
  }
  // Launches scale with n and returns the reason text the reference was given.
  std::string launch(unsigned n) {
    float y = 0, x = 0, a = 1;
    float *yp = &y, *xp = &x;
    void* args[] = {&yp, &xp, &a, &n};
    EXPECT_EQ(kiln_kernel_launch(kernel, args, 4, nullptr, nullptr), KILN_OK) << thread_last_error();
    return seen.texts.empty() ? "" : seen.texts.back();
  }
  kiln_test::DriverlessKernel k;
  kiln_runtime* rt = nullptr;
  kiln_archive* archive = nullptr;
  kiln_kernel* kernel = nullptr;
  RangeSeen seen;
};

TEST_F(RangeShapes, EachCallGetsTheLaunchItsShapeComputes) {
  std::string t = launch(100);
  EXPECT_NE(t.find("shape 'small_n' computes grid(1,1,1) block(100,1,1) smem 0"), std::string::npos) << t;
  t = launch(256);  // small_n's upper bound, inclusive; any_n would match too but comes second
  EXPECT_NE(t.find("shape 'small_n' computes grid(1,1,1) block(256,1,1) smem 0"), std::string::npos) << t;
  t = launch(1000);
  EXPECT_NE(t.find("shape 'any_n' computes grid(4,1,1) block(256,1,1) smem 4000"), std::string::npos) << t;
  t = launch(16777216);  // any_n's upper bound: shared memory capped by min()
  EXPECT_NE(t.find("shape 'any_n' computes grid(65536,1,1) block(256,1,1) smem 49152"), std::string::npos) << t;
  ASSERT_EQ(seen.reasons.size(), 4u);
  for (unsigned r : seen.reasons) EXPECT_EQ(r, static_cast<unsigned>(KILN_REASON_NO_DRIVER));
}

TEST_F(RangeShapes, AnUndeclaredCallNamesItsValuesAndWhyEachRangeShapeRefusedIt) {
  std::string t = launch(1001);
  ASSERT_EQ(seen.reasons.size(), 1u);
  EXPECT_EQ(seen.reasons[0], static_cast<unsigned>(KILN_REASON_UNDECLARED_SHAPE));
  EXPECT_NE(t.find("the call (n=1001) matches no declared shape of kernel 'scale' (declared: small_n, any_n)"),
            std::string::npos) << t;
  EXPECT_NE(t.find("small_n: n=1001 is outside its range [1, 256]"), std::string::npos) << t;
  EXPECT_NE(t.find("any_n: where[0] 'n % 4 == 0' does not hold"), std::string::npos) << t;
  t = launch(0);
  EXPECT_NE(t.find("any_n: n=0 is outside its range [1, 16777216]"), std::string::npos) << t;
  t = launch(16777220);
  EXPECT_NE(t.find("any_n: n=16777220 is outside its range [1, 16777216]"), std::string::npos) << t;
  kiln_stats stats;
  kiln_stats_init(&stats, sizeof stats);
  ASSERT_EQ(kiln_runtime_stats(rt, &stats), KILN_OK);
  EXPECT_EQ(stats.undeclared_shape_calls, 3u);
}

// kiln_kernel_explain says what a call would do and launches nothing: here (no driver) the
// shape, its launch and the route's reason; an undeclared call, why; a too-small buffer, the size.
TEST_F(RangeShapes, ExplainSaysWhatACallWouldDoWithoutLaunchingIt) {
  float y = 0, x = 0, a = 1;
  float *yp = &y, *xp = &x;
  unsigned n = 1000;
  void* args[] = {&yp, &xp, &a, &n};
  size_t needed = 0;
  ASSERT_EQ(kiln_kernel_explain(kernel, args, 4, nullptr, 0, &needed), KILN_ERR_BUFFER_TOO_SMALL);
  std::string text(needed, '\0');
  ASSERT_EQ(kiln_kernel_explain(kernel, args, 4, text.data(), text.size(), nullptr), KILN_OK) << thread_last_error();
  text.resize(text.find('\0') == std::string::npos ? text.size() : text.find('\0'));
  EXPECT_EQ(text.rfind("shape 'any_n' (grid(4,1,1) block(256,1,1) smem 4000); reference: ", 0), 0u) << text;
  n = 1001;
  char buf[1024];
  ASSERT_EQ(kiln_kernel_explain(kernel, args, 4, buf, sizeof buf, nullptr), KILN_OK);
  EXPECT_NE(std::string(buf).find("any_n: where[0] 'n % 4 == 0' does not hold"), std::string::npos) << buf;
  EXPECT_TRUE(seen.reasons.empty());  // nothing ran
  EXPECT_EQ(kiln_kernel_explain(kernel, args, 3, buf, sizeof buf, nullptr), KILN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kiln_kernel_explain(nullptr, args, 4, buf, sizeof buf, nullptr), KILN_ERR_INVALID_ARGUMENT);
}

// A `where` may read a tensor's address (addr(x)): scale-variants' any_n takes only calls whose x
// is on an f32 boundary, and a call 2 bytes in is sent to the reference saying which condition.
TEST(RangeShapesAddresses, ACallWhoseTensorBreaksAnAddressConditionGoesToTheReference) {
  kiln_test::DriverlessKernel k;
  ASSERT_EQ(k.open("scale-variants.kiln", "scale"), KILN_OK) << thread_last_error();
  RangeSeen seen;
  ASSERT_EQ(kiln_runtime_set_reference(k.rt, "scale", remember_range, &seen, nullptr), KILN_OK);
  alignas(16) float buffer[8] = {};
  float a = 1;
  unsigned n = 1000;
  float* y = buffer;
  auto* x = reinterpret_cast<float*>(reinterpret_cast<char*>(buffer) + 2);  // never dereferenced: no driver
  void* args[] = {&y, &x, &a, &n};
  ASSERT_EQ(kiln_kernel_launch(k.kernel, args, 4, nullptr, nullptr), KILN_OK) << thread_last_error();
  ASSERT_EQ(seen.reasons.size(), 1u);
  EXPECT_EQ(seen.reasons[0], static_cast<unsigned>(KILN_REASON_UNDECLARED_SHAPE));
  EXPECT_NE(seen.texts[0].find("any_n: where[0] 'addr(x) % 4 == 0' does not hold"), std::string::npos) << seen.texts[0];
  x = buffer + 1;  // 4 bytes in: an f32 boundary, so the shape takes it (here: no driver)
  ASSERT_EQ(kiln_kernel_launch(k.kernel, args, 4, nullptr, nullptr), KILN_OK) << thread_last_error();
  ASSERT_EQ(seen.reasons.size(), 2u);
  EXPECT_EQ(seen.reasons[1], static_cast<unsigned>(KILN_REASON_NO_DRIVER)) << seen.texts[1];
}

}  // namespace
