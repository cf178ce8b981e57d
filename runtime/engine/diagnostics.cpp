#include "engine/diagnostics.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <sstream>

#include "core/file_io.hpp"
#include "core/json.hpp"
#include "engine/archive.hpp"
#include "engine/runtime.hpp"

namespace kiln::engine {
namespace {

// TOML basic strings take JSON's escapes.
std::string toml_string(const std::string& s) { return kiln::json::quote(s); }

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
    std::ostringstream r;
    r << "# A kiln diagnostic bundle: `kiln diag show " << folder << "` prints it.\n"
      << "event = " << toml_string(e.event) << "\n"
      << "time = " << std::time(nullptr) << "\n"
      << "kiln_version = " << toml_string(e.kiln_version) << "\n\n"
      << "[archive]\ndigest = " << toml_string(e.archive_digest) << "\npackage = " << toml_string(e.package)
      << "\nkernel_revision = " << toml_string(e.kernel_revision) << "\n\n"
      << "[kernel]\nname = " << toml_string(e.kernel) << "\nentry = " << toml_string(e.entry)
      << "\ntarget = " << toml_string(e.target) << "\nmember = " << toml_string(e.member)
      << "\ncall = " << toml_string(e.call) << "\n\n"
      << "[device]\nordinal = " << e.device << "\nname = " << toml_string(e.device_name)
      << "\narch = " << toml_string(e.device_arch) << "\ncompute_capability = \"" << e.cc_major << "." << e.cc_minor
      << "\"\ndriver = " << toml_string(e.driver_version) << "\n\n"
      << "[error]\ncuda_error = " << e.cuda_error << "\nmessage = " << toml_string(e.error) << "\n";
    r << "\n[files]\n";
    for (const auto& [name, bytes] : e.files) {
      std::string file = flat(name);
      write_new_file(folder + "/" + file, std::string(bytes.begin(), bytes.end()), 0600);
      r << toml_string(file) << " = " << toml_string(name) << "\n";
    }
    write_new_file(folder + "/report.toml", r.str(), 0600);  // last: a bundle with a report is whole
    return folder;
  } catch (const std::exception& ex) {
    *why = ex.what();
    return "";
  }
}


// The bundle of a failed load or launch of one of an archive's kernels: the event, the archive,
// the kernel, the device as its backend described it, and the manifest and code object.
void Archive::diagnose(const Kernel& k, const std::string& event, const std::string& target,
                            const std::string& member, int driver_error, const std::string& error,
                            const std::string& call) {
  if (runtime_.diag_dir().empty()) return;
  kiln::engine::DiagnosticEvent e;
  e.event = event;
  e.archive_digest = digest_;
  e.package = reader_->package();
  e.kernel_revision = reader_->kernel_revision();
  e.kernel = k.name();
  e.entry = k.spec().entry;
  e.target = target;
  e.member = member;
  e.device = k.device();
  if (const backend::DeviceInfo* info = k.device_info()) {  // every backend's device: CUDA and HIP alike
    e.device_name = info->name;
    e.device_arch = info->arch;
    e.cc_major = info->cc_major;
    e.cc_minor = info->cc_minor;
    e.driver_version = info->driver_version;
  }
  e.kiln_version = kiln_version_string();
  e.cuda_error = driver_error;
  e.error = error;
  e.call = call;
  try {
    e.files.emplace_back(kiln::format::kManifestPath, reader_->read_member(kiln::format::kManifestPath));
    if (!member.empty()) e.files.emplace_back(member, reader_->read_member(member));
  } catch (const kiln::Failure& ex) {
    e.error += " (and the bundle could not include a member: " + std::string(ex.what()) + ")";
  }
  std::string why;
  std::string folder = kiln::engine::write_diagnostic_bundle(runtime_.diag_dir(), e, &why);
  if (folder.empty()) runtime_.log(KILN_LOG_ERROR, "could not write a diagnostic bundle: " + why);
  else runtime_.log(KILN_LOG_WARN, "diagnostic bundle for the failed " + event + " of kernel '" + k.name() + "': " + folder);
}

}  // namespace kiln::engine
