#include "pack_plan.hpp"

#include <cstdio>
#include <deque>
#include <iterator>
#include <map>

#include "code_object.hpp"
#include "kernel_table.hpp"
#include "npy.hpp"
#include "error.hpp"
#include "file_io.hpp"
#include "format.hpp"

namespace kiln::cli {
namespace {

constexpr std::uint64_t kMaxManifestSize = 4ull << 20;
constexpr std::uint64_t kMaxInputFileSize = 4ull << 30;

std::string run_and_capture(const std::string& command) {
  std::string out;
  FILE* p = ::popen(command.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0 && out.size() < 65536) out.append(buf, n);
  int status = ::pclose(p);
  return status == 0 ? out : std::string();
}

std::string release_line(const std::string& text) {
  std::size_t pos = 0;
  std::string first;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    std::string line = text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    if (first.empty() && !line.empty()) first = line;
    if (line.find("release") != std::string::npos || line.find("version") != std::string::npos) return line;
    pos = nl == std::string::npos ? text.size() : nl + 1;
  }
  return first;
}

std::string where(const std::string& manifest_name, SourcePos pos) {
  return manifest_name + ":" + std::to_string(pos.line) + ":" + std::to_string(pos.column);
}

class MemberSet {
 public:
  explicit MemberSet(std::string base, std::string manifest_name)
      : base_(std::move(base)), manifest_name_(std::move(manifest_name)) {}

  // Reads a file the manifest names and returns its member. A file named twice with the
  // same role is stored once (two kernels may share one code object); named with two roles
  // it is an error, except PTX listed as code and as IR.
  MemberInput* add(const FileRef& ref, format::Role role) {
    if (ref.path == format::kManifestPath || ref.path.rfind("kiln/", 0) == 0) {
      fail(Errc::manifest, where(manifest_name_, ref.pos) + ": '" + ref.path +
                               "' is reserved: kiln.toml and the kiln/ folder hold what kiln itself records");
    }
    auto it = positions_.find(ref.path);
    if (it != positions_.end()) {
      MemberInput& existing = members_[it->second];
      // PTX is both IR and a code object: listing it under `ir` too is not a conflict.
      bool ptx_as_ir = existing.role == format::Role::code && role == format::Role::ir;
      if (existing.role != role && !ptx_as_ir) {
        fail(Errc::manifest, where(manifest_name_, ref.pos) + ": '" + ref.path + "' is already listed as " +
                                 format::role_name(existing.role) + "; one file has one role");
      }
      return &existing;
    }
    MemberInput m;
    m.path = ref.path;
    m.role = role;
    try {
      m.mapped = MappedFile::open_regular_nofollow(base_ + "/" + ref.path, kMaxInputFileSize);
    } catch (const Error& e) {
      fail(e.code() == Errc::io ? Errc::io : Errc::manifest, where(manifest_name_, ref.pos) + ": " + e.what());
    }
    positions_[ref.path] = members_.size();
    members_.push_back(std::move(m));
    return &members_.back();
  }

  void add_generated(MemberInput m) { members_.push_back(std::move(m)); }
  std::vector<MemberInput> take() {
    return std::vector<MemberInput>(std::make_move_iterator(members_.begin()), std::make_move_iterator(members_.end()));
  }

 private:
  std::string base_;
  std::string manifest_name_;
  std::deque<MemberInput> members_;  // a deque: pointers handed out stay valid as it grows
  std::map<std::string, std::size_t> positions_;
};

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ",") + p;
  return out;
}

// Compares a declared toolchain version with the one a tool on PATH reports, loosely:
// "13.0" is satisfied by "Cuda compilation tools, release 13.0, V13.0.88".
void compare_declared(const Manifest& m, const std::vector<ObservedTool>& observed, std::vector<std::string>& warnings) {
  static const std::map<std::string, std::string> declared_key = {{"nvcc", "cuda"}, {"hipcc", "rocm"}};
  for (const ObservedTool& t : observed) {
    const std::string* declared = m.toolchain_value(declared_key.at(t.tool));
    if (declared == nullptr) declared = m.toolchain_value(t.tool);
    if (declared != nullptr && t.version.find(*declared) == std::string::npos) {
      warnings.push_back("kiln.toml declares " + declared_key.at(t.tool) + " '" + *declared + "' but " + t.tool +
                         " on PATH reports '" + t.version + "'; both are recorded in the archive");
    }
  }
}

}  // namespace

std::vector<ObservedTool> observe_toolchain() {
  std::vector<ObservedTool> out;
  for (const char* tool : {"nvcc", "hipcc"}) {
    std::string text = run_and_capture(std::string(tool) + " --version 2>/dev/null");
    if (!text.empty()) out.push_back({tool, release_line(text)});
  }
  return out;
}

PackPlan plan_pack(const std::string& manifest_path) {
  std::string base = manifest_path.rfind('/') == std::string::npos ? "." : manifest_path.substr(0, manifest_path.rfind('/'));
  if (base.empty()) base = "/";
  std::string manifest_name = manifest_path;

  PackPlan plan;
  std::vector<std::uint8_t> manifest_bytes = read_regular_file_nofollow(manifest_path, kMaxManifestSize);
  plan.manifest = parse_manifest(std::string_view(reinterpret_cast<const char*>(manifest_bytes.data()), manifest_bytes.size()),
                                 manifest_name);
  plan.identity = {plan.manifest.package, plan.manifest.kernel_revision, plan.manifest.sequence};

  MemberSet members(base, manifest_name);
  MemberInput manifest_member;
  manifest_member.path = format::kManifestPath;
  manifest_member.role = format::Role::manifest;
  manifest_member.content = std::move(manifest_bytes);
  members.add_generated(std::move(manifest_member));

  for (const KernelSpec& k : plan.manifest.kernels) {
    format::Backend backend = k.backend == "cuda" ? format::Backend::cuda : format::Backend::hip;
    bool any_backend = k.backend == "any";  // code for both vendors: each file's own backend
    for (const CodeObjectRef& c : k.code) {
      MemberInput* m = members.add(c.file, format::Role::code);
      CodeObjectInfo info;
      try {
        info = inspect_code_object(m->bytes(), "'" + c.file.path + "'");
      } catch (const Error& e) {
        fail(Errc::code_object, where(manifest_name, c.file.pos) + ": " + e.what());
      }
      if (!any_backend && info.backend != backend) {
        fail(Errc::code_object, where(manifest_name, c.file.pos) + ": '" + c.file.path + "' is " +
                                    format::backend_name(info.backend) + " code but kernel '" + k.name + "' has backend " + k.backend);
      }
      if (!target_claim_matches(c.arch, info)) {
        fail(Errc::code_object, where(manifest_name, c.pos) + ": kernel '" + k.name + "' claims arch '" + c.arch + "' for '" +
                                    c.file.path + "' but the file is built for " + join(info.targets) + " (" + info.detail + ")");
      }
      m->backend = info.backend;
      m->kind = info.kind;
      m->arch = join(info.targets);
    }
    for (const TestSpec& test : k.tests) {
      for (const auto* list : {&test.inputs, &test.outputs}) {
        for (const auto& [param_name, file] : *list) {
          MemberInput* m = members.add(file, format::Role::testdata);
          NpyArray array;
          try {
            array = parse_npy(m->bytes(), "'" + file.path + "'");
          } catch (const Error& e) {
            fail(Errc::manifest, where(manifest_name, file.pos) + ": " + e.what());
          }
          const KernelParam* param = nullptr;
          for (const KernelParam& p : k.params) {
            if (p.name == param_name) param = &p;
          }
          if (array.dtype != param->type) {
            fail(Errc::manifest, where(manifest_name, file.pos) + ": test vector '" + file.path + "' holds " +
                                     scalar_type_name(array.dtype) + " but parameter '" + param_name + "' of kernel '" +
                                     k.name + "' points to " + scalar_type_name(param->type));
          }
          if (array.count() == 0) {
            fail(Errc::manifest, where(manifest_name, file.pos) + ": test vector '" + file.path + "' is empty");
          }
        }
      }
    }
    for (const FileRef& f : k.sources) members.add(f, format::Role::source);
    for (const FileRef& f : k.ir) members.add(f, format::Role::ir);
  }
  for (const FileRef& f : plan.manifest.extra_files) members.add(f, format::Role::meta);

  plan.observed = observe_toolchain();
  compare_declared(plan.manifest, plan.observed, plan.warnings);
  std::string record = "# The toolchain kiln pack saw on the packing machine, beside kiln.toml's [toolchain].\n";
  for (const ObservedTool& t : plan.observed) {
    std::string escaped;
    for (char ch : t.version) {
      if (ch == '"' || ch == '\\') escaped += '\\';
      if (static_cast<unsigned char>(ch) >= 0x20) escaped += ch;
    }
    record += t.tool + " = \"" + escaped + "\"\n";
  }
  if (plan.observed.empty()) record += "# neither nvcc nor hipcc was on PATH\n";
  MemberInput observed;
  observed.path = "kiln/observed-toolchain.toml";
  observed.role = format::Role::meta;
  observed.content.assign(record.begin(), record.end());
  members.add_generated(std::move(observed));

  for (MemberInput& table : kernel_table_inputs(plan.manifest)) members.add_generated(std::move(table));

  plan.members = members.take();
  return plan;
}

}  // namespace kiln::cli
