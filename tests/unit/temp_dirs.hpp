// Temporary folders for tests, removed with their contents when the test program exits, so a run
// of the suite leaves nothing in /tmp (a run used to leave ~150 folders behind).
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

namespace kiln::test {

// Made once per program; its destructor runs at normal exit. A test killed by a signal still
// leaves its folder, which is what one wants for looking at a crash.
class TempDirRegistry {
 public:
  static TempDirRegistry& instance() {
    static TempDirRegistry registry;
    return registry;
  }
  void add(const std::string& path) {
    std::lock_guard<std::mutex> lock(mutex_);
    paths_.push_back(path);
  }
  ~TempDirRegistry() {
    for (const std::string& path : paths_) {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  }

 private:
  TempDirRegistry() = default;
  std::mutex mutex_;
  std::vector<std::string> paths_;
};

// Makes /tmp/PREFIX-XXXXXX and returns its path ("" if it could not be made).
inline std::string make_temp_dir(const std::string& prefix = "kiln-test") {
  std::string tmpl = "/tmp/" + prefix + "-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) return std::string();
  TempDirRegistry::instance().add(tmpl);
  return tmpl;
}

}  // namespace kiln::test
