#include "pack_plan.hpp"

#include <chrono>
#include <cstdio>
#include <deque>
#include <exception>
#include <iterator>
#include <map>
#include <thread>

#include "core/archive_semantics.hpp"
#include "core/code_object.hpp"
#include "core/error.hpp"
#include "core/file_io.hpp"
#include "core/format.hpp"
#include "core/json.hpp"
#include "core/kernel_table.hpp"
#include "core/npy.hpp"
#include "core/parallel.hpp"

namespace kiln::cli {
namespace {

constexpr std::uint64_t kMaxInputFileSize = 4ull << 30;
// Smaller inputs are read by the writer's workers (InputFile); larger ones are mapped, so that
// no worker's buffer grows past this and a gigabyte input is not copied.
constexpr std::uint64_t kReadBelow = 2ull << 20;

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
      // PTX is both IR and a code object: listed under `code` and `ir`, in either order, it is
      // stored once, as code (the rule archive_semantics.cpp checks on the sealed archive).
      auto is = [&](format::Role a, format::Role b) { return existing.role == a && role == b; };
      bool code_and_ir = is(format::Role::code, format::Role::ir) || is(format::Role::ir, format::Role::code);
      if (existing.role != role && !code_and_ir) {
        fail(Errc::manifest, where(manifest_name_, ref.pos) + ": '" + ref.path + "' is already listed as " +
                                 format::role_name(existing.role) + "; one file has one role");
      }
      if (role == format::Role::code) existing.role = format::Role::code;
      return &existing;
    }
    MemberInput m;
    m.path = ref.path;
    m.role = role;
    positions_[ref.path] = members_.size();
    members_.push_back(std::move(m));
    pending_.push_back({&members_.back(), ref});
    return &members_.back();
  }

  // Opens every file add() named, on `threads` threads (thousands of code objects are
  // thousands of open/fstat calls): a small one is left for the writer to read, a large one
  // mapped. The first failure in manifest order is thrown.
  void open_all(unsigned threads) {
    std::vector<std::string> errors(pending_.size());
    std::vector<Errc> codes(pending_.size(), Errc::manifest);
    parallel_for(pending_.size(), threads, [&](std::size_t i) {
      try {
        std::string path = base_ + "/" + pending_[i].ref.path;
        std::uint64_t size = regular_file_size_nofollow(path, kMaxInputFileSize);
        MemberInput& m = *pending_[i].member;
        if (size < kReadBelow) {
          m.file = InputFile{path, size, std::nullopt};
        } else {
          m.mapped = MappedFile::open_regular_nofollow(path, kMaxInputFileSize);
        }
      } catch (const Failure& e) {
        codes[i] = e.code() == Errc::io ? Errc::io : Errc::manifest;
        errors[i] = where(manifest_name_, pending_[i].ref.pos) + ": " + e.what();
      }
    });
    for (std::size_t i = 0; i < errors.size(); ++i) {
      if (!errors[i].empty()) fail(codes[i], errors[i]);
    }
    pending_.clear();
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
  struct Pending {
    MemberInput* member;
    FileRef ref;
  };
  std::vector<Pending> pending_;  // named by add(), opened by open_all()
};

// The bytes of a member planning checks (a code object, a test vector). A file input is read
// here into `buffer`, and the digest of what was read is kept: the writer refuses the member
// if it then reads anything else.
ByteView bytes_to_check(MemberInput& m, std::vector<std::uint8_t>& buffer) {
  if (!m.file) return m.bytes();
  read_regular_file_exact_nofollow(m.file->path, m.file->size, buffer);
  m.file->checked = sha256(buffer.data(), buffer.size());
  return ByteView(buffer);
}

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

// What the manifest's kernels claim of their files: each code object with its kernel, each test
// vector with its kernel and parameter.
struct CodeClaim {
  const KernelSpec* kernel;
  const CodeObjectRef* code;
  MemberInput* member;
};
struct VectorCheck {
  const KernelSpec* kernel;
  const std::string* param_name;
  const FileRef* file;
  MemberInput* member;
};
struct Claims {
  std::vector<CodeClaim> code;
  std::vector<VectorCheck> vectors;
};

// Every file the manifest names becomes a member (not yet opened); what the kernels claim of
// them is returned for the checks below.
Claims name_members(const Manifest& manifest, MemberSet& members) {
  Claims out;
  std::vector<CodeClaim>& claims = out.code;
  std::vector<VectorCheck>& vectors = out.vectors;
  for (const KernelSpec& k : manifest.kernels) {
    for (const CodeObjectRef& c : k.code) claims.push_back({&k, &c, members.add(c.file, format::Role::code)});
    for (const VariantSpec& v : k.variants) {
      for (const CodeObjectRef& c : v.code) claims.push_back({&k, &c, members.add(c.file, format::Role::code)});
    }
    for (const TestSpec& test : k.tests) {
      for (const auto* list : {&test.inputs, &test.outputs}) {
        for (const auto& [param_name, file] : *list) {
          vectors.push_back({&k, &param_name, &file, members.add(file, format::Role::testdata)});
        }
      }
    }
    for (const FileRef& f : k.sources) members.add(f, format::Role::source);
    for (const FileRef& f : k.ir) members.add(f, format::Role::ir);
  }
  for (const FileRef& f : manifest.extra_files) members.add(f, format::Role::meta);
  return out;
}

// Reads each distinct code object once, in parallel (a file two kernels share is read once),
// checks it against every claim on it in manifest order, and records its backend, kind and arch.
void check_code_objects(const std::vector<CodeClaim>& claims, const std::string& manifest_name, unsigned threads) {
  // Each distinct code object read once, in parallel; a file two kernels share is read once.
  std::map<const MemberInput*, std::size_t> code_slot;
  std::vector<const CodeClaim*> first_claim;
  for (const CodeClaim& c : claims) {
    if (code_slot.emplace(c.member, first_claim.size()).second) first_claim.push_back(&c);
  }
  std::vector<CodeObjectInfo> infos(first_claim.size());
  std::vector<std::string> inspect_errors(first_claim.size());
  std::vector<Errc> inspect_codes(first_claim.size(), Errc::code_object);
  parallel_for(first_claim.size(), threads, [&](std::size_t i) {
    const CodeClaim& c = *first_claim[i];
    thread_local std::vector<std::uint8_t> buffer;  // one per planning thread, reused
    ByteView bytes;
    try {
      bytes = bytes_to_check(*c.member, buffer);
    } catch (const Failure& e) {  // the file, not its content: it changed since it was opened
      inspect_codes[i] = e.code() == Errc::io ? Errc::io : Errc::manifest;  // as open_all reports it
      inspect_errors[i] = where(manifest_name, c.code->file.pos) + ": " + e.what();
      return;
    }
    try {
      infos[i] = inspect_code_object(bytes, "'" + c.code->file.path + "'");
    } catch (const Failure& e) {
      inspect_errors[i] = where(manifest_name, c.code->file.pos) + ": " + e.what();
    }
  });
  for (const CodeClaim& c : claims) {
    std::size_t slot = code_slot.at(c.member);
    if (!inspect_errors[slot].empty()) fail(inspect_codes[slot], inspect_errors[slot]);
    const CodeObjectInfo& info = infos[slot];
    // The same rule verify and the runtime apply to the sealed archive (archive_semantics.hpp).
    if (std::string p = code_claim_problem(*c.kernel, *c.code, info); !p.empty()) {
      fail(Errc::code_object, where(manifest_name, c.code->pos) + ": " + p);
    }
    c.member->backend = info.backend;
    c.member->kind = info.kind;
    c.member->arch = join(info.targets);
  }
}

void check_variants(const Manifest& manifest, const std::vector<CodeClaim>& claims, const std::string& manifest_name) {
  // A variant's code is what the kernel's own code is for the same arch, specialised: the same
  // kind, the same targets (so the runtime's choice of target holds for every variant).
  std::map<const CodeObjectRef*, const MemberInput*> member_of;
  for (const CodeClaim& c : claims) member_of[c.code] = c.member;
  auto indexed = [&](const CodeObjectRef& c) {
    const MemberInput& m = *member_of.at(&c);
    format::Entry e;
    e.path = c.file.path;
    e.backend = m.backend;
    e.kind = m.kind;
    e.arch = m.arch;
    return e;
  };
  for (const KernelSpec& k : manifest.kernels) {
    for (const VariantSpec& v : k.variants) {
      for (std::size_t i = 0; i < v.code.size(); ++i) {
        if (std::string p = variant_code_problem(k, v, i, indexed(k.code[i]), indexed(v.code[i])); !p.empty()) {
          fail(Errc::code_object, where(manifest_name, v.code[i].pos) + ": " + p);
        }
      }
    }
  }
}

// Each test vector is a .npy of its parameter's type, and not empty.
void check_test_vectors(const std::vector<VectorCheck>& vectors, const std::string& manifest_name) {
  std::vector<std::uint8_t> vector_bytes;
  for (const VectorCheck& v : vectors) {
    NpyArray array;
    ByteView bytes;
    try {
      bytes = bytes_to_check(*v.member, vector_bytes);
    } catch (const Failure& e) {
      fail(e.code() == Errc::io ? Errc::io : Errc::manifest, where(manifest_name, v.file->pos) + ": " + e.what());
    }
    try {
      array = parse_npy(bytes, "'" + v.file->path + "'");
    } catch (const Failure& e) {
      fail(Errc::manifest, where(manifest_name, v.file->pos) + ": " + e.what());
    }
    const KernelParam* param = nullptr;
    for (const KernelParam& p : v.kernel->params) {
      if (p.name == *v.param_name) param = &p;
    }
    if (!npy_view_as(&array, param->type)) {
      std::string raw = param->type == ScalarType::bf16 ? " (a bf16 vector holds the raw bits as <u2)"
                        : param->type == ScalarType::f8e4m3 || param->type == ScalarType::f8e5m2
                            ? " (an fp8 vector holds the raw bits as |u1)"
                            : "";
      fail(Errc::manifest, where(manifest_name, v.file->pos) + ": test vector '" + v.file->path + "' holds " +
                               scalar_type_name(array.dtype) + " but parameter '" + *v.param_name + "' of kernel '" +
                               v.kernel->name + "' points to " + scalar_type_name(param->type) + raw);
    }
    if (array.count() == 0) {
      fail(Errc::manifest, where(manifest_name, v.file->pos) + ": test vector '" + v.file->path + "' is empty");
    }
  }

}

// kiln/observed-toolchain.toml: the toolchain kiln pack saw on the packing machine.
MemberInput observed_toolchain_member(const std::vector<ObservedTool>& observed) {
  std::string record = "# The toolchain kiln pack saw on the packing machine, beside kiln.toml's [toolchain].\n";
  for (const ObservedTool& t : observed) {
    record += t.tool + " = " + json::quote(t.version) + "\n";  // JSON's escapes are TOML's: nothing dropped
  }
  if (observed.empty()) record += "# neither nvcc nor hipcc was on PATH\n";
  MemberInput observed_member;
  observed_member.path = "kiln/observed-toolchain.toml";
  observed_member.role = format::Role::meta;
  observed_member.content.assign(record.begin(), record.end());
  return observed_member;
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

PackPlan plan_pack(const std::string& manifest_path, unsigned threads) {
  using Clock = std::chrono::steady_clock;
  auto since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
  // Asking nvcc and hipcc for their versions starts two processes (tens of milliseconds, a
  // second where hipcc is a Perl script); it runs beside the parse and the reads. The thread is
  // joined on every way out.
  std::vector<ObservedTool> probed;
  double probe_seconds = 0;
  std::exception_ptr probe_error;
  std::thread probe([&probed, &probe_seconds, &probe_error, since] {
    Clock::time_point t = Clock::now();
    try {
      probed = observe_toolchain();
    } catch (...) {
      probe_error = std::current_exception();  // rethrown where the probe's result is used
    }
    probe_seconds = since(t);
  });
  struct Join {
    std::thread& t;
    ~Join() {
      if (t.joinable()) t.join();
    }
  } join_probe{probe};

  Clock::time_point step = Clock::now();
  std::string base = manifest_path.rfind('/') == std::string::npos ? "." : manifest_path.substr(0, manifest_path.rfind('/'));
  if (base.empty()) base = "/";
  std::string manifest_name = manifest_path;

  PackPlan plan;
  std::vector<std::uint8_t> manifest_bytes = read_regular_file_nofollow(manifest_path, format::kMaxManifestSize);
  plan.manifest = parse_manifest(std::string_view(reinterpret_cast<const char*>(manifest_bytes.data()), manifest_bytes.size()),
                                 manifest_name, threads);
  plan.timings.parse = since(step);
  step = Clock::now();
  plan.identity = {plan.manifest.package, plan.manifest.kernel_revision, plan.manifest.sequence};

  MemberSet members(base, manifest_name);
  MemberInput manifest_member;
  manifest_member.path = format::kManifestPath;
  manifest_member.role = format::Role::manifest;
  manifest_member.content = std::move(manifest_bytes);
  members.add_generated(std::move(manifest_member));

  // Every file the manifest names becomes a member; their code objects are checked once the
  // files are opened (in parallel), and reported in manifest order.
  Claims claims = name_members(plan.manifest, members);
  members.open_all(threads);

  check_code_objects(claims.code, manifest_name, threads);
  check_variants(plan.manifest, claims.code, manifest_name);
  check_test_vectors(claims.vectors, manifest_name);
  plan.timings.inputs = since(step);
  step = Clock::now();
  probe.join();
  if (probe_error) std::rethrow_exception(probe_error);
  plan.timings.probe_wait = since(step);
  plan.timings.probe = probe_seconds;
  plan.observed = std::move(probed);
  compare_declared(plan.manifest, plan.observed, plan.warnings);
  members.add_generated(observed_toolchain_member(plan.observed));

  step = Clock::now();
  for (MemberInput& table : kernel_table_inputs(plan.manifest)) members.add_generated(std::move(table));
  plan.timings.table = since(step);

  plan.members = members.take();
  return plan;
}

}  // namespace kiln::cli
