#include "progress.hpp"

#include <unistd.h>

#include <cstdio>

#include "cli_common.hpp"

namespace kiln::cli {

ProgressBar::ProgressBar(std::string label, std::uint64_t total_bytes)
    : label_(std::move(label)),
      enabled_(::isatty(STDERR_FILENO) == 1 && total_bytes >= (64ull << 20)),
      start_(std::chrono::steady_clock::now()),
      last_(start_) {}

ProgressBar::~ProgressBar() {
  if (drawn_) std::fprintf(stderr, "\r\033[K");
}

ProgressFn ProgressBar::callback() {
  if (!enabled_) return nullptr;
  return [this](std::uint64_t done, std::uint64_t total) { update(done, total); };
}

void ProgressBar::update(std::uint64_t done, std::uint64_t total) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto now = std::chrono::steady_clock::now();
  if (done < total && now - last_ < std::chrono::milliseconds(100)) return;
  last_ = now;
  double fraction = total == 0 ? 1.0 : static_cast<double>(done) / static_cast<double>(total);
  double seconds = std::chrono::duration<double>(now - start_).count();
  double rate = seconds > 0 ? static_cast<double>(done) / seconds : 0;
  constexpr int kWidth = 30;
  int filled = static_cast<int>(fraction * kWidth);
  std::string bar(static_cast<std::size_t>(filled), '#');
  bar.append(static_cast<std::size_t>(kWidth - filled), '.');
  std::fprintf(stderr, "\r%s [%s] %3d%%  %s/%s  %s/s\033[K", label_.c_str(), bar.c_str(), static_cast<int>(fraction * 100),
               human_size(done).c_str(), human_size(total).c_str(), human_size(static_cast<std::uint64_t>(rate)).c_str());
  std::fflush(stderr);
  drawn_ = true;
}

}  // namespace kiln::cli
