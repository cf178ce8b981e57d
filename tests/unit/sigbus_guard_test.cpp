// The kiln command's guard: a read past the end of a mapped file that shrank underneath it is an
// I/O error (a message, exit code 4), not a crash.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "sigbus_guard.hpp"
#include "temp_dirs.hpp"
#include "test_support.hpp"

namespace kiln {
namespace {

// Maps two pages of `path`, truncates the file to one, and reads the second page.
[[noreturn]] void read_past_a_truncated_mapping(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR);
  if (fd < 0) ::_exit(10);
  void* p = ::mmap(nullptr, 8192, PROT_READ, MAP_PRIVATE, fd, 0);
  if (p == MAP_FAILED) ::_exit(11);
  if (::ftruncate(fd, 4096) != 0) ::_exit(12);
  volatile std::uint8_t byte = static_cast<const std::uint8_t*>(p)[4096 + 10];
  (void)byte;
  ::_exit(0);  // not reached: the read faults
}

TEST(SigbusGuard, AReadPastATruncatedMappingIsAnIoErrorNotACrash) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::string path = test::make_temp_dir("kiln-sigbus") + "/shrinks.kiln";
  test::write_file(path, std::vector<std::uint8_t>(8192, 0x5a));
  EXPECT_EXIT(
      {
        cli::guard_against_truncated_mappings();
        read_past_a_truncated_mapping(path);
      },
      ::testing::ExitedWithCode(4),
      // The file named as the process mapped it (the threadsafe style runs this test again in the
      // child, whose temporary folder has another name).
      "kiln: error: the file '[^']*/shrinks\\.kiln' that kiln was reading through a memory mapping was truncated "
      "underneath it");
  // With SIGBUS's default action (what the guard replaces; a sanitizer's own handler set aside) the
  // same read is a crash.
  test::write_file(path, std::vector<std::uint8_t>(8192, 0x5a));
  EXPECT_EXIT(
      {
        ::signal(SIGBUS, SIG_DFL);
        read_past_a_truncated_mapping(path);
      },
      ::testing::KilledBySignal(SIGBUS), "");
}

}  // namespace
}  // namespace kiln
