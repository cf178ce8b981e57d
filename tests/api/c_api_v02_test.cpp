// The C API as embedders from other languages met it, each finding as a test:
// errors per thread, argument errors with messages, caller-sized structs of any size, FIFOs
// that must not hang, size queries, double destroys, NULL getters, references replaced under
// load with a release callback, references that explain their failure, launches that carry
// argument sizes, and the reference route checking declared shapes.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "api_test_env.hpp"
#include "kiln/kiln.h"

namespace {

using kiln_test::runtime_last_error;
using kiln_test::thread_last_error;
using kiln_test::keys;
std::string scale_archive() { return kiln_test::archives() + "/scale.kiln"; }

// The arguments of one call of the test archive's `scale` kernel (y = a * x over n floats), at
// its declared shape n = 1024 unless a test changes n.
struct ScaleCall {
  float y = 0, x = 0, a = 1;
  float *yp = &y, *xp = &x;
  unsigned n = 1024;
  void* args[4] = {&yp, &xp, &a, &n};
  ScaleCall() = default;
  ScaleCall(const ScaleCall&) = delete;  // args point into this object
  ScaleCall& operator=(const ScaleCall&) = delete;
};

class CApi : public ::testing::Test {
 protected:
  void SetUp() override {
    rt = kiln_test::runtime_without_driver();  // every kernel routes to the reference
    ASSERT_NE(rt, nullptr) << thread_last_error();
    ASSERT_EQ(kiln_archive_open(rt, scale_archive().c_str(), &archive), KILN_OK) << thread_last_error();
    ASSERT_EQ(kiln_archive_get_kernel(archive, "scale", 0, &kernel), KILN_OK);
  }
  void TearDown() override {
    kiln_archive_destroy(archive);
    kiln_runtime_destroy(rt);
  }
  kiln_runtime* rt = nullptr;
  kiln_archive* archive = nullptr;
  kiln_kernel* kernel = nullptr;
};

// ---- Errors -----------------------------------------------------------------------------

TEST_F(CApi, ConcurrentFailuresEachReadTheirOwnMessage) {
  constexpr int kThreads = 8, kCalls = 400;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::string path = "/nonexistent/thread-" + std::to_string(t) + ".kiln";
      for (int i = 0; i < kCalls; ++i) {
        kiln_archive* a = nullptr;
        if (kiln_archive_open(rt, path.c_str(), &a) != KILN_ERR_IO) wrong++;
        if (thread_last_error().find(path) == std::string::npos) wrong++;
        if (runtime_last_error(rt).find(path) == std::string::npos) wrong++;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0) << "a thread read another thread's message";
}

TEST_F(CApi, ArgumentErrorsHaveMessagesAndSuccessClearsThem) {
  kiln_archive* a = nullptr;
  EXPECT_EQ(kiln_archive_open(rt, nullptr, &a), KILN_ERR_INVALID_ARGUMENT);
  EXPECT_NE(thread_last_error().find("kiln_archive_open"), std::string::npos) << thread_last_error();
  EXPECT_NE(runtime_last_error(rt).find("kiln_archive_open"), std::string::npos);
  EXPECT_EQ(kiln_kernel_launch(nullptr, nullptr, 0, nullptr, nullptr), KILN_ERR_INVALID_ARGUMENT);
  EXPECT_NE(thread_last_error().find("kernel is NULL"), std::string::npos) << thread_last_error();
  EXPECT_EQ(kiln_archive_warm(archive, 0), KILN_OK);
  EXPECT_EQ(thread_last_error(), "") << "a success clears the thread's last error";
  size_t needed = 0;
  EXPECT_EQ(kiln_last_error(nullptr, 0, &needed), KILN_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(needed, 1u);
}

TEST(CApiCreate, AFailedCreateIsExplainedByTheThreadsLastError) {
  kiln_runtime_options o;
  ASSERT_EQ(kiln_runtime_options_init(&o, sizeof o), KILN_OK);
  o.trust_path = "/nonexistent/keys.pub";
  kiln_runtime* rt = nullptr;
  EXPECT_EQ(kiln_runtime_create(&rt, &o), KILN_ERR_IO);
  EXPECT_EQ(rt, nullptr);
  EXPECT_NE(thread_last_error().find("/nonexistent/keys.pub"), std::string::npos) << thread_last_error();
}

// ---- Caller-sized structs ---------------------------------------------------------------

TEST(CApiCreate, EveryOptionsSizeIsHandledWithAMessage) {
  kiln_runtime_options o;
  for (size_t size : {size_t{0}, size_t{1}, size_t{3}, size_t{KILN_MAX_STRUCT_SIZE + 1}, SIZE_MAX / 2, SIZE_MAX}) {
    EXPECT_EQ(kiln_runtime_options_init(&o, size), KILN_ERR_INVALID_ARGUMENT) << size;
    EXPECT_NE(thread_last_error().find("size " + std::to_string(size)), std::string::npos) << thread_last_error();
  }
  ASSERT_EQ(kiln_runtime_options_init(&o, sizeof o), KILN_OK);
  std::string trust = keys() + "/test.pub";
  o.trust_path = trust.c_str();
  char why[512] = "";
  o.error_buffer = why;
  o.error_buffer_size = sizeof why;
  for (uint32_t size : {0u, 2u, 0xFFFFFFFFu, static_cast<uint32_t>(KILN_MAX_STRUCT_SIZE + 1)}) {
    o.size = size;  // read no byte past the caller's struct, whatever it claims
    kiln_runtime* rt = nullptr;
    EXPECT_EQ(kiln_runtime_create(&rt, &o), KILN_ERR_INVALID_ARGUMENT) << size;
    EXPECT_EQ(rt, nullptr);
    EXPECT_NE(thread_last_error().find("options->size " + std::to_string(size)), std::string::npos) << thread_last_error();
    EXPECT_STREQ(why, "") << "error_buffer is a field of a struct whose size is wrong: not written";
  }
}

TEST_F(CApi, StatsAndParamInfoHaveInitFunctions) {
  kiln_stats stats;
  std::memset(&stats, 0xAB, sizeof stats);
  ASSERT_EQ(kiln_stats_init(&stats, sizeof stats), KILN_OK);
  EXPECT_EQ(stats.size, sizeof stats);
  EXPECT_EQ(stats.launches_reference, 0u);
  ASSERT_EQ(kiln_runtime_stats(rt, &stats), KILN_OK);
  EXPECT_EQ(stats.archives_opened, 1u);
  EXPECT_EQ(kiln_stats_init(&stats, SIZE_MAX), KILN_ERR_INVALID_ARGUMENT);

  kiln_param_info info;
  ASSERT_EQ(kiln_param_info_init(&info, sizeof info), KILN_OK);
  ASSERT_EQ(kiln_kernel_param(kernel, 3, &info), KILN_OK);
  EXPECT_STREQ(info.name, "n");
  EXPECT_EQ(info.dtype, static_cast<uint32_t>(KILN_DTYPE_U32));
  EXPECT_EQ(kiln_kernel_param(kernel, 4, &info), KILN_ERR_INVALID_ARGUMENT);
  EXPECT_NE(thread_last_error().find("has 4 parameters, index 4"), std::string::npos) << thread_last_error();
}

// ---- Paths that are not regular files ---------------------------------------------------

TEST(CApiFiles, AFifoAsArchiveOrTrustPathIsRefusedNotWaitedOn) {
  std::string fifo = testing::TempDir() + "/kiln-c-api-fifo-" + std::to_string(::getpid());
  ::unlink(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  kiln_runtime_options o;
  kiln_runtime_options_init(&o, sizeof o);
  o.trust_path = fifo.c_str();
  kiln_runtime* rt = nullptr;
  EXPECT_EQ(kiln_runtime_create(&rt, &o), KILN_ERR_INVALID_ARGUMENT);  // before the fix: blocked forever
  EXPECT_NE(thread_last_error().find("not a regular file"), std::string::npos) << thread_last_error();
  std::string trust = keys() + "/test.pub";
  o.trust_path = trust.c_str();
  ASSERT_EQ(kiln_runtime_create(&rt, &o), KILN_OK);
  kiln_archive* a = nullptr;
  EXPECT_EQ(kiln_archive_open(rt, fifo.c_str(), &a), KILN_ERR_INVALID_ARGUMENT);
  EXPECT_NE(thread_last_error().find(fifo + ": not a regular file"), std::string::npos) << thread_last_error();
  kiln_runtime_destroy(rt);
  ::unlink(fifo.c_str());
}

// ---- Buffers, destroys, NULL getters -------------------------------------------------------

TEST_F(CApi, ASizeQueryOfPreflightSaysBufferTooSmall) {
  size_t needed = 0;
  EXPECT_EQ(kiln_archive_preflight(archive, 0, nullptr, 0, &needed), KILN_ERR_BUFFER_TOO_SMALL);
  EXPECT_GT(needed, 10u);
  std::string report(needed, '\0');
  EXPECT_EQ(kiln_archive_preflight(archive, 0, &report[0], report.size(), nullptr), KILN_OK);
}

TEST(CApiHandles, DestroyingTwiceIsHarmless) {
  kiln_runtime_options o;
  kiln_runtime_options_init(&o, sizeof o);
  std::string trust = keys() + "/test.pub";
  o.trust_path = trust.c_str();
  kiln_runtime* rt = nullptr;
  ASSERT_EQ(kiln_runtime_create(&rt, &o), KILN_OK);
  kiln_archive* a = nullptr;
  ASSERT_EQ(kiln_archive_open(rt, scale_archive().c_str(), &a), KILN_OK);
  kiln_archive_destroy(a);
  kiln_archive_destroy(a);  // ASan reports a double free here if libkiln frees it again
  kiln_runtime_destroy(rt);
  kiln_runtime_destroy(rt);
  int not_a_handle = 0;
  kiln_package_destroy(reinterpret_cast<kiln_package*>(&not_a_handle));  // never made by libkiln: ignored
}

TEST(CApiHandles, NullGettersAreUniform) {
  EXPECT_STREQ(kiln_archive_digest(nullptr), "");
  EXPECT_STREQ(kiln_archive_package(nullptr), "");
  EXPECT_STREQ(kiln_archive_revision(nullptr), "");
  EXPECT_EQ(kiln_archive_sequence(nullptr), 0u);
  EXPECT_EQ(kiln_archive_kernel_count(nullptr), 0u);
  EXPECT_STREQ(kiln_kernel_name(nullptr), "");
  EXPECT_STREQ(kiln_kernel_reason_text(nullptr), "");
  EXPECT_EQ(kiln_kernel_param_count(nullptr), 0u);
}

// ---- References -------------------------------------------------------------------------

struct Blocking {
  std::mutex m;
  std::condition_variable cv;
  bool entered = false, go = false;
};
int blocking_reference(kiln_call_info*, void**, size_t, void*, void* user) {
  auto* b = static_cast<Blocking*>(user);
  std::unique_lock<std::mutex> lock(b->m);
  b->entered = true;
  b->cv.notify_all();
  b->cv.wait(lock, [&] { return b->go; });
  return 0;
}
std::atomic<int> g_released{0};
void count_release(void*) { g_released++; }

TEST_F(CApi, AReplacedReferenceIsReleasedOnceAfterTheCallStillRunningItReturns) {
  g_released = 0;
  Blocking b;
  ASSERT_EQ(kiln_runtime_set_reference(rt, "scale", blocking_reference, &b, count_release), KILN_OK);
  ScaleCall call;
  std::thread caller([&] { EXPECT_EQ(kiln_kernel_launch(kernel, call.args, 4, nullptr, nullptr), KILN_OK); });
  {
    std::unique_lock<std::mutex> lock(b.m);
    b.cv.wait(lock, [&] { return b.entered; });
  }
  ASSERT_EQ(kiln_runtime_set_reference(rt, "scale", nullptr, nullptr, nullptr), KILN_OK);  // removed mid-call
  EXPECT_EQ(g_released.load(), 0) << "released while a call was still running it";
  {
    std::lock_guard<std::mutex> lock(b.m);
    b.go = true;
  }
  b.cv.notify_all();
  caller.join();
  EXPECT_EQ(g_released.load(), 1);
}

struct Payload {
  std::atomic<int>* calls;
  float value;
};
int payload_reference(kiln_call_info*, void** args, size_t, void*, void* user) {
  auto* p = static_cast<Payload*>(user);  // freed by release_payload: ASan sees any use after it
  (*p->calls)++;
  **static_cast<float**>(args[0]) = p->value;
  return 0;
}
void release_payload(void* user) {
  delete static_cast<Payload*>(user);
  g_released++;
}

TEST_F(CApi, ReplacingAReferenceUnderLoadFreesEachUserOnceAndNeverEarly) {
  g_released = 0;
  std::atomic<int> calls{0};
  std::atomic<bool> stop{false};
  ASSERT_EQ(kiln_runtime_set_reference(rt, "scale", payload_reference, new Payload{&calls, 1}, release_payload), KILN_OK);
  std::vector<std::thread> launchers;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    launchers.emplace_back([&] {
      ScaleCall call;
      while (!stop) {
        if (kiln_kernel_launch(kernel, call.args, 4, nullptr, nullptr) != KILN_OK) failures++;
      }
    });
  }
  while (calls.load() < 4) std::this_thread::yield();  // launches under way before the first swap
  constexpr int kReplacements = 2000;
  for (int i = 0; i < kReplacements; ++i) {
    if (i % 50 == 0) std::this_thread::yield();
    ASSERT_EQ(kiln_runtime_set_reference(rt, "scale", payload_reference, new Payload{&calls, float(i)}, release_payload),
              KILN_OK);
  }
  stop = true;
  for (auto& t : launchers) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(g_released.load(), kReplacements) << "each replaced user released exactly once";
  kiln_archive_destroy(archive);
  archive = nullptr;
  kiln_runtime_destroy(rt);  // the last registration goes with the runtime
  rt = nullptr;
  EXPECT_EQ(g_released.load(), kReplacements + 1);
  EXPECT_GT(calls.load(), 0);
}

int explaining_reference(kiln_call_info* info, void**, size_t, void*, void*) {
  kiln_call_set_error(info, "torch.matmul raised: CUDA out of memory");
  return 3;
}

TEST_F(CApi, AReferenceCanSayWhyItFailed) {
  ASSERT_EQ(kiln_runtime_set_reference(rt, "scale", explaining_reference, nullptr, nullptr), KILN_OK);
  ScaleCall call;
  EXPECT_EQ(kiln_kernel_launch(kernel, call.args, 4, nullptr, nullptr), KILN_ERR_REFERENCE_FAILED);
  EXPECT_NE(thread_last_error().find("returned 3: torch.matmul raised: CUDA out of memory"), std::string::npos)
      << thread_last_error();
  kiln_call_info foreign{};
  kiln_call_set_error(&foreign, "ignored");  // outside a reference call: ignored, nothing read through it
  kiln_call_set_error(nullptr, "ignored");
}

int misaddressed_reference(kiln_call_info*, void**, size_t, void*, void*) {
  kiln_call_info other{};
  kiln_call_set_error(&other, "must not be taken");  // not the info this call was given
  return 4;
}

TEST_F(CApi, AnErrorSetThroughAnotherInfoIsIgnored) {
  ASSERT_EQ(kiln_runtime_set_reference(rt, "scale", misaddressed_reference, nullptr, nullptr), KILN_OK);
  ScaleCall call;
  EXPECT_EQ(kiln_kernel_launch(kernel, call.args, 4, nullptr, nullptr), KILN_ERR_REFERENCE_FAILED);
  EXPECT_NE(thread_last_error().find("returned 4"), std::string::npos) << thread_last_error();
  EXPECT_EQ(thread_last_error().find("must not be taken"), std::string::npos) << thread_last_error();
}

// ---- Launch arguments ------------------------------------------------------------------------

struct Reasons {
  std::vector<unsigned> reasons;
  std::string last_text;
};
int reason_reference(kiln_call_info* info, void**, size_t, void*, void* user) {
  auto* r = static_cast<Reasons*>(user);
  r->reasons.push_back(info->reason);
  r->last_text = info->reason_text;
  return 0;
}

TEST_F(CApi, ALaunchWithSizesChecksEachArgumentAgainstTheManifest) {
  Reasons seen;
  ASSERT_EQ(kiln_runtime_set_reference(rt, "scale", reason_reference, &seen, nullptr), KILN_OK);
  ScaleCall call;
  uint64_t n64 = (uint64_t{1} << 32) + 1024;  // what a binding holding a 64-bit int would pass
  void* wide[] = {&call.yp, &call.xp, &call.a, &n64};
  size_t wide_sizes[] = {8, 8, 4, 8};
  EXPECT_EQ(kiln_kernel_launch_checked(kernel, wide, wide_sizes, 4, nullptr, nullptr), KILN_ERR_INVALID_ARGUMENT);
  EXPECT_NE(thread_last_error().find("argument 3 'n' is u32 (4 bytes); the launch passed 8 bytes"), std::string::npos)
      << thread_last_error();
  EXPECT_TRUE(seen.reasons.empty()) << "nothing runs after a size mismatch";
  size_t sizes[] = {8, 8, 4, 4};
  kiln_route route = KILN_ROUTE_REFUSED;
  EXPECT_EQ(kiln_kernel_launch_checked(kernel, call.args, sizes, 4, nullptr, &route), KILN_OK) << thread_last_error();
  EXPECT_EQ(route, KILN_ROUTE_REFERENCE);
  void* with_null[] = {&call.yp, nullptr, &call.a, &call.n};
  EXPECT_EQ(kiln_kernel_launch(kernel, with_null, 4, nullptr, nullptr), KILN_ERR_INVALID_ARGUMENT);
  EXPECT_NE(thread_last_error().find("argument 1 'x' is NULL"), std::string::npos) << thread_last_error();
}

TEST_F(CApi, TheReferenceRouteChecksDeclaredShapesLikeTheNativeRoute) {
  Reasons seen;
  ASSERT_EQ(kiln_runtime_set_reference(rt, "scale", reason_reference, &seen, nullptr), KILN_OK);
  ScaleCall call;
  call.n = 1000;  // scale declares only n = 1024
  ASSERT_EQ(kiln_kernel_launch(kernel, call.args, 4, nullptr, nullptr), KILN_OK);
  call.n = 1024;
  ASSERT_EQ(kiln_kernel_launch(kernel, call.args, 4, nullptr, nullptr), KILN_OK);
  ASSERT_EQ(seen.reasons.size(), 2u);
  EXPECT_EQ(seen.reasons[0], static_cast<unsigned>(KILN_REASON_UNDECLARED_SHAPE));
  EXPECT_EQ(seen.reasons[1], static_cast<unsigned>(KILN_REASON_NO_DRIVER));
  kiln_stats stats;
  kiln_stats_init(&stats, sizeof stats);
  ASSERT_EQ(kiln_runtime_stats(rt, &stats), KILN_OK);
  EXPECT_EQ(stats.undeclared_shape_calls, 1u);
  EXPECT_EQ(stats.launches_reference, 2u);
}

}  // namespace
