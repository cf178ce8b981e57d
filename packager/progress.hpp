// A progress bar on stderr for long packs and verifies, shown only when stderr is a
// terminal and the work is large enough to be worth watching.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

#include "core/archive_reader.hpp"

namespace kiln::cli {

class ProgressBar {
 public:
  ProgressBar(std::string label, std::uint64_t total_bytes);
  ~ProgressBar();  // clears the line
  ProgressFn callback();  // safe to call from several threads

 private:
  void update(std::uint64_t done, std::uint64_t total);
  std::string label_;
  bool enabled_;
  std::mutex mutex_;
  std::chrono::steady_clock::time_point start_, last_;
  bool drawn_ = false;
};

}  // namespace kiln::cli
