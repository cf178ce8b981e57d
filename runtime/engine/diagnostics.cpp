#include "diagnostics.hpp"

#include "text.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>

namespace kiln::engine {
namespace {

// TOML basic strings take JSON's escapes.
std::string toml_string(const std::string& s) { return json_quote(s); }

// Member paths were validated at open (relative, portable characters): flatten them so the
// bundle needs no subfolders.
std::string flat(const std::string& path) {
  std::string out = path;
  for (char& c : out) {
    if (c == '/') c = '_';
  }
  return out;
}

}  // namespace

std::string write_diagnostic_bundle(const std::string& dir, const DiagnosticEvent& e, std::string* why) {
  try {
    static std::atomic<unsigned> counter{0};
    std::string folder = dir + "/kiln-diag-" + std::to_string(std::time(nullptr)) + "-" + std::to_string(::getpid()) +
                         "-" + std::to_string(counter.fetch_add(1));
    ::mkdir(dir.c_str(), 0755);  // may exist already
    if (::mkdir(folder.c_str(), 0700) != 0) {
      *why = folder + ": " + std::strerror(errno);
      return "";
    }
    std::ofstream r(folder + "/report.toml");
    r << "# A kiln diagnostic bundle: `kiln diag show " << folder << "` prints it.\n"
      << "event = " << toml_string(e.event) << "\n"
      << "time = " << std::time(nullptr) << "\n"
      << "kiln_version = " << toml_string(e.kiln_version) << "\n\n"
      << "[archive]\ndigest = " << toml_string(e.archive_digest) << "\npackage = " << toml_string(e.package)
      << "\nkernel_revision = " << toml_string(e.kernel_revision) << "\n\n"
      << "[kernel]\nname = " << toml_string(e.kernel) << "\nentry = " << toml_string(e.entry)
      << "\ntarget = " << toml_string(e.target) << "\nmember = " << toml_string(e.member)
      << "\ncall = " << toml_string(e.call) << "\n\n"
      << "[device]\nordinal = " << e.device << "\nname = " << toml_string(e.device_name) << "\ncompute_capability = \""
      << e.cc_major << "." << e.cc_minor << "\"\ndriver = " << toml_string(e.driver_version) << "\n\n"
      << "[error]\ncuda_error = " << e.cuda_error << "\nmessage = " << toml_string(e.error) << "\n";
    r << "\n[files]\n";
    for (const auto& [name, bytes] : e.files) {
      std::string file = flat(name);
      std::ofstream(folder + "/" + file, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                                  static_cast<std::streamsize>(bytes.size()));
      r << toml_string(file) << " = " << toml_string(name) << "\n";
    }
    if (!r) {
      *why = folder + "/report.toml: write failed";
      return "";
    }
    return folder;
  } catch (const std::exception& ex) {
    *why = ex.what();
    return "";
  }
}

}  // namespace kiln::engine
