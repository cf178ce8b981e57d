// The experimental calls (include/kiln/kiln_experimental.h) and their C++ face on the build's
// test archives, without a GPU: described targets checked and planned, members listed from the
// signed index, and device tools refused with their reasons where a kernel runs on no device.
// The tools themselves run on the H200 (ci/gpu-run.sh: kiln verify --run is built on them).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "api_test_env.hpp"
#include "cxx_test_support.hpp"
#include "kiln/kiln_experimental.hpp"

namespace {

using kiln_test::archives;
using kiln_test::keys;
namespace x = kiln::experimental;

using kiln_test::driverless_options;
using kiln_test::kNoDriver;

using kiln_test::contains;
using kiln_test::error_from;

// The paths of the members at `positions`.
std::vector<std::string> paths(const std::vector<x::Member>& members, const std::vector<std::size_t>& positions) {
  std::vector<std::string> out;
  for (std::size_t i : positions) out.push_back(members.at(i).path);
  return out;
}

TEST(Experimental, ChecksDescribedTargetsNamingTheBadOne) {
  EXPECT_NO_THROW(x::check_target("sm_90"));
  EXPECT_NO_THROW(x::check_target("gfx90a:xnack-", ""));
  EXPECT_NO_THROW(x::check_target("sm_80", "12.4"));
  kiln::Error none = error_from([] { x::check_target("sm_999"); });
  EXPECT_EQ(none.status(), KILN_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(none.what(), "sm_999")) << none.what();
  kiln::Error driver = error_from([] { x::check_target("sm_90", "twelve"); });
  EXPECT_EQ(driver.status(), KILN_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(driver.what(), "twelve")) << driver.what();
  EXPECT_EQ(kiln_x_target_check(nullptr, nullptr), KILN_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(kiln_test::thread_last_error(), "target is NULL"));
}

TEST(Experimental, ListsMembersAsTheSignedIndexStatesThem) {
  kiln::Runtime rt(driverless_options());
  kiln::Archive archive(rt, archives() + "/matmul-relu-mixed.kiln");
  std::vector<x::Member> members = x::members(archive);
  ASSERT_EQ(members.size(), 11u);
  auto manifest = std::find_if(members.begin(), members.end(), [](const x::Member& m) { return m.path == "kiln.toml"; });
  ASSERT_NE(manifest, members.end());
  EXPECT_EQ(manifest->role, "manifest");
  EXPECT_EQ(manifest->content_size, archive.read_member("kiln.toml").size());
  EXPECT_TRUE(manifest->present);
  auto cubin = std::find_if(members.begin(), members.end(),
                            [](const x::Member& m) { return m.path == "matmul_relu.sm_90a.cubin"; });
  ASSERT_NE(cubin, members.end());
  EXPECT_EQ(cubin->role, "code");
  EXPECT_EQ(cubin->stored_size, cubin->content_size) << "machine code under 16 KiB is stored raw (FORMAT.md §4)";
  EXPECT_EQ(cubin->content_size, archive.read_member("matmul_relu.sm_90a.cubin").size());
  auto ptx = std::find_if(members.begin(), members.end(),
                          [](const x::Member& m) { return m.path == "matmul_relu.compute_90.ptx"; });
  ASSERT_NE(ptx, members.end());
  EXPECT_GT(ptx->stored_size, 0u);
  EXPECT_LT(ptx->stored_size, ptx->content_size) << "PTX is stored compressed";

  kiln_x_member_info info;
  ASSERT_EQ(kiln_x_member_info_init(&info, sizeof info), KILN_OK);
  EXPECT_EQ(kiln_x_archive_member(archive.get(), members.size(), &info), KILN_ERR_NOT_FOUND);
  EXPECT_TRUE(contains(kiln_test::thread_last_error(), "has 11 members, index 11 is past them"))
      << kiln_test::thread_last_error();
  info.size = 1;  // not a size of the struct: refused, nothing written
  EXPECT_EQ(kiln_x_archive_member(archive.get(), 0, &info), KILN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kiln_x_archive_member_count(nullptr), 0u);
}

TEST(Experimental, PlansTheCodeEachDescribedTargetReads) {
  kiln::Runtime rt(driverless_options());
  kiln::Archive archive(rt, archives() + "/matmul-relu-mixed.kiln");
  std::vector<x::Member> members = x::members(archive);
  EXPECT_EQ(paths(members, x::plan_target(archive, "sm_90")), std::vector<std::string>{"matmul_relu.sm_90a.cubin"});
  EXPECT_EQ(paths(members, x::plan_target(archive, "gfx90a:xnack-")),
            std::vector<std::string>{"matmul_relu.gfx90a_xnack-.co"});
  EXPECT_EQ(paths(members, x::plan_target(archive, "gfx1030")), std::vector<std::string>{"matmul_relu.gfx1030.co"});
  // No code of this archive runs on an sm_80, but the resolver reads PTX to judge it (its ISA
  // version is in its text): a sparse pull fetches what the route decision needs.
  EXPECT_EQ(paths(members, x::plan_target(archive, "sm_80")), std::vector<std::string>{"matmul_relu.compute_90.ptx"});

  // The size query, then a too-small array: the count is said, nothing is written past it.
  std::size_t count = 0;
  EXPECT_EQ(kiln_x_archive_plan_target(archive.get(), "sm_90", nullptr, nullptr, 0, &count), KILN_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(count, 1u);
  kiln::Error bad = error_from([&] { x::plan_target(archive, "sm_999"); });
  EXPECT_EQ(bad.status(), KILN_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(bad.what(), "sm_999")) << bad.what();
}

TEST(Experimental, PlanningForAHostWithoutAGpuSaysSo) {
  kiln::Runtime rt(driverless_options());
  kiln::Archive archive(rt, archives() + "/matmul-relu-mixed.kiln");
  kiln::Error none = error_from([&] { x::plan_host(archive); });
  EXPECT_EQ(none.status(), KILN_ERR_NOT_FOUND);
  EXPECT_TRUE(contains(none.what(), "no GPU")) << none.what();
}

TEST(Experimental, DeviceToolsRefuseAKernelThatRunsOnNoDevice) {
  kiln::Runtime rt(driverless_options());
  kiln::Archive archive(rt, archives() + "/scale.kiln");
  kiln::Kernel k = archive.kernel("scale", 0);
  ASSERT_EQ(k.route(), KILN_ROUTE_REFERENCE);

  EXPECT_FALSE(x::device_of(k).has_value());
  EXPECT_TRUE(contains(kiln::last_error(), "was judged against no device")) << kiln::last_error();

  kiln::Error alloc = error_from([&] { x::DeviceBuffer buffer(k, 64); });
  EXPECT_EQ(alloc.status(), KILN_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(alloc.what(), "kernel 'scale' does not run on device 0 here (route reference)")) << alloc.what();
  EXPECT_EQ(error_from([&] { x::synchronize(k); }).status(), KILN_ERR_INVALID_ARGUMENT);
  std::uint64_t address = 1;
  EXPECT_EQ(kiln_x_device_alloc(k.get(), 64, &address), KILN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(address, 0u) << "no address is handed out on failure";
  EXPECT_EQ(kiln_x_device_free(nullptr, 0), KILN_ERR_INVALID_ARGUMENT);

  std::uint64_t y = 0, xs = 0;
  float a = 2.0f;
  std::uint32_t n = 1024;
  void* args[] = {&y, &xs, &a, &n};
  kiln::Error timed = error_from([&] { x::time(k, args, 4, 10); });
  EXPECT_EQ(timed.status(), KILN_ERR_INVALID_ARGUMENT);
  double median = -1;
  EXPECT_EQ(kiln_x_kernel_time(k.get(), args, 4, 0, &median), KILN_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(kiln_test::thread_last_error(), "repeats must be 1 to 100000 (got 0)"))
      << kiln_test::thread_last_error();
}

TEST(Experimental, ChoiceNamesTheCodeACallTakes) {
  kiln::Runtime rt(driverless_options());
  kiln::Archive archive(rt, archives() + "/scale.kiln");
  kiln::Kernel k = archive.kernel("scale", 0);
  std::uint64_t y = 0, xs = 0;
  float a = 2.0f;
  std::uint32_t n = 1024;
  void* args[] = {&y, &xs, &a, &n};
  x::Choice c = x::choice(k, args, 4);
  EXPECT_EQ(c.variant, "");
  EXPECT_EQ(c.code_path, "") << "the kernel runs on no device here";
  kiln::Error short_args = error_from([&] { x::choice(k, args, 3); });
  EXPECT_EQ(short_args.status(), KILN_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(short_args.what(), "kernel 'scale' takes 4 arguments, given 3")) << short_args.what();
  void* holes[] = {&y, &xs, nullptr, &n};  // a NULL argument is refused as a launch refuses it, not read
  EXPECT_EQ(error_from([&] { x::choice(k, holes, 4); }).status(), KILN_ERR_INVALID_ARGUMENT);
}

}  // namespace
