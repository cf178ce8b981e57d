// kiln::Once: a lazy step runs once whatever the number of threads asking, the callers that
// came while it ran wait for it, and a failure is kept and thrown again to every caller.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "core/once.hpp"

namespace kiln {
namespace {

TEST(Once, RunsOnceForManyThreadsAndTheLateOnesWaitForIt) {
  for (int round = 0; round < 50; ++round) {
    Once once;
    std::atomic<int> runs{0};
    std::atomic<bool> go{false};
    int made = 0;  // written by the one run, read by every caller after run() returns
    std::vector<int> seen(8, -1);
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&, t] {
        while (!go.load()) std::this_thread::yield();
        once.run([&] {
          runs.fetch_add(1);
          std::this_thread::sleep_for(std::chrono::milliseconds(2));  // the others arrive meanwhile
          made = 42;
        });
        seen[t] = made;
      });
    }
    go.store(true);
    for (std::thread& th : threads) th.join();
    EXPECT_EQ(runs.load(), 1);
    for (int v : seen) EXPECT_EQ(v, 42);
  }
}

TEST(Once, AFailureIsKeptAndThrownAgainToEveryCaller) {
  Once once;
  int runs = 0;
  auto step = [&] {
    ++runs;
    fail(Errc::integrity, "index page at 4096: its bytes do not match");
  };
  for (int i = 0; i < 3; ++i) {
    try {
      once.run(step);
      FAIL() << "no failure thrown on call " << i;
    } catch (const Failure& e) {
      EXPECT_EQ(e.code(), Errc::integrity);
      EXPECT_STREQ(e.what(), "index page at 4096: its bytes do not match");
    }
  }
  EXPECT_EQ(runs, 1);
}

TEST(Once, AnotherExceptionIsKeptAsAnInternalFailure) {
  Once once;
  int runs = 0;
  for (int i = 0; i < 2; ++i) {
    try {
      once.run([&] {
        ++runs;
        throw std::runtime_error("decoder bug");
      });
      FAIL() << "no failure thrown";
    } catch (const Failure& e) {
      EXPECT_EQ(e.code(), Errc::internal);
      EXPECT_STREQ(e.what(), "decoder bug");
    }
  }
  EXPECT_EQ(runs, 1);
}

TEST(Once, ThreadsWaitingForAFailedStepAllGetItsFailure) {
  Once once;
  std::atomic<int> runs{0}, failures{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      while (!go.load()) std::this_thread::yield();
      try {
        once.run([&] {
          runs.fetch_add(1);
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
          fail(Errc::malformed, "bad page");
        });
      } catch (const Failure& e) {
        if (e.code() == Errc::malformed && std::string(e.what()) == "bad page") failures.fetch_add(1);
      }
    });
  }
  go.store(true);
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(runs.load(), 1);
  EXPECT_EQ(failures.load(), 8);
}

}  // namespace
}  // namespace kiln
