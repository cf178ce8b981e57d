// kernel_args and clusters through the C API, without a GPU (tests/data/scale/kiln.kernel-args.toml):
// the call is what `params` declares (a host-only scalar included), the reference receives it
// unchanged, and a range shape's cluster takes part in matching and in the launch it reports.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "api_test_env.hpp"
#include "kiln/kiln.h"

namespace {

using kiln_test::thread_last_error;

struct ArgsSeen {
  std::vector<std::string> texts;
  std::vector<size_t> arg_counts;
  std::vector<std::vector<void*>> args;
};
int remember_args(kiln_call_info* info, void** args, size_t count, void*, void* user) {
  auto* s = static_cast<ArgsSeen*>(user);
  s->texts.push_back(info->reason_text);
  s->arg_counts.push_back(count);
  s->args.emplace_back(args, args + count);
  return 0;
}

class KernelArgs : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(k.open("scale-kernel-args.kiln", "scale"), KILN_OK) << thread_last_error();
    ASSERT_EQ(kiln_runtime_set_reference(k.rt, "scale", remember_args, &seen, nullptr), KILN_OK);
    rt = k.rt;
    archive = k.archive;
    kernel = k.kernel;
  }
  kiln_test::DriverlessKernel k;
  kiln_runtime* rt = nullptr;
  kiln_archive* archive = nullptr;
  kiln_kernel* kernel = nullptr;
  ArgsSeen seen;
};

TEST_F(KernelArgs, TheCallIsTheParamsAndTheReferenceReceivesItUnchanged) {
  ASSERT_EQ(kiln_kernel_param_count(kernel), 5u);  // the call's, not the kernel's six
  kiln_param_info info;
  kiln_param_info_init(&info, sizeof info);
  ASSERT_EQ(kiln_kernel_param(kernel, 4, &info), KILN_OK);
  EXPECT_STREQ(info.name, "rows");
  float y = 0, x = 0, a = 2;
  float *yp = &y, *xp = &x;
  unsigned n = 1024;
  int rows = 3;
  void* args[] = {&yp, &xp, &a, &n, &rows};
  size_t sizes[] = {8, 8, 4, 4, 4};
  ASSERT_EQ(kiln_kernel_launch_checked(kernel, args, sizes, 5, nullptr, nullptr), KILN_OK) << thread_last_error();
  ASSERT_EQ(seen.arg_counts.size(), 1u);
  EXPECT_EQ(seen.arg_counts[0], 5u);
  EXPECT_EQ(seen.args[0], std::vector<void*>(args, args + 5));  // the host's own pointers
  EXPECT_NE(seen.texts[0].find("shape 'clustered' computes grid(4,3,1) block(256,1,1) smem 0 cluster(2,1,1)"),
            std::string::npos) << seen.texts[0];
  // Six arguments (as the kernel takes them) are refused: the call has five.
  void* six[] = {&yp, &xp, &a, &n, &rows, &rows};
  EXPECT_EQ(kiln_kernel_launch(kernel, six, 6, nullptr, nullptr), KILN_ERR_INVALID_ARGUMENT);
}

TEST_F(KernelArgs, AGridTheClusterDoesNotDivideMatchesNoShape) {
  float y = 0, x = 0, a = 2;
  float *yp = &y, *xp = &x;
  unsigned n = 256;  // grid x = cdiv(256, 256) = 1: not a multiple of the 2x1x1 cluster
  int rows = 3;
  void* args[] = {&yp, &xp, &a, &n, &rows};
  ASSERT_EQ(kiln_kernel_launch(kernel, args, 5, nullptr, nullptr), KILN_OK) << thread_last_error();
  ASSERT_EQ(seen.texts.size(), 1u);
  EXPECT_NE(seen.texts[0].find("clustered: grid[0] 'cdiv(n, 256)' = 1 is not a multiple of the cluster's 2"),
            std::string::npos) << seen.texts[0];
  kiln_stats stats;
  kiln_stats_init(&stats, sizeof stats);
  ASSERT_EQ(kiln_runtime_stats(rt, &stats), KILN_OK);
  EXPECT_EQ(stats.undeclared_shape_calls, 1u);
  std::vector<char> text(16384);
  ASSERT_EQ(kiln_runtime_stats_prometheus(rt, text.data(), text.size(), nullptr), KILN_OK);
  // Nothing is encoded on the reference route.
  EXPECT_NE(std::string(text.data()).find("\nkiln_tensor_map_encodes_total 0\n"), std::string::npos) << text.data();
}

TEST_F(KernelArgs, PreflightNamesWhatTheLaunchNeedsAndTheKernelArgs) {
  std::vector<char> buffer(8192);
  size_t needed = 0;
  ASSERT_EQ(kiln_archive_preflight(archive, 0, buffer.data(), buffer.size(), &needed), KILN_OK) << thread_last_error();
  std::string json(buffer.data());
  EXPECT_NE(json.find("\"needs\":[\"tensor_map\",\"cluster\",\"scratch\"]"), std::string::npos) << json;
  EXPECT_NE(json.find("{\"name\":\"x_map\",\"kind\":\"tensor_map\",\"pointer\":\"x\",\"dtype\":\"f32\",\"dims\":[\"n\",\"rows\"],"
                      "\"strides\":[\"n * 4\"],\"box\":[32,8],\"element_strides\":[1,1],\"interleave\":\"none\","
                      "\"swizzle\":\"128B\",\"l2_promotion\":\"256B\",\"oob_fill\":\"nan\"}"),
            std::string::npos) << json;
  EXPECT_NE(json.find("{\"name\":\"ws\",\"kind\":\"scratch\",\"bytes\":\"4 * n\",\"per\":\"program\",\"align\":128}"),
            std::string::npos) << json;
}

}  // namespace
