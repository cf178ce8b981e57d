#include "archive.hpp"

#include <algorithm>
#include <thread>

#include "code_object.hpp"
#include "diagnostics.hpp"
#include "cuda_target.hpp"
#include "error.hpp"
#include "runtime.hpp"

namespace {

using kiln::Errc;
using kiln::Error;

struct Candidate {
  std::size_t member = 0;
  std::string path;
  kiln::format::CodeKind kind = kiln::format::CodeKind::none;
  kiln::cuda::Target target;  // the best-fitting tag of the member
  kiln::cuda::Judgement judgement;
  std::vector<std::uint8_t> content;  // PTX read (and verified) while judging, kept for the load
};

std::string candidate_text(const Candidate& c) {
  return c.target.tag + " " + kiln::format::code_kind_name(c.kind) + " '" + c.path + "' (" + c.judgement.why + ")";
}

std::vector<std::string> split_tags(const std::string& tags) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= tags.size()) {
    std::size_t comma = tags.find(',', start);
    if (comma == std::string::npos) comma = tags.size();
    if (comma > start) out.push_back(tags.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

}  // namespace

kiln::ReadOptions kiln_archive::read_options() const {
  kiln::ReadOptions options;
  options.policy = kiln::TrustPolicy{&runtime_.trust(), runtime_.threshold()};
  options.max_member_size = runtime_.max_member_size();
  return options;
}

kiln_archive::kiln_archive(kiln_runtime& runtime, const std::string& path) : runtime_(runtime) {
  reader_ = kiln::Archive::open_file(path, read_options());
  digest_ = kiln::digest_string(reader_->digest());
}

kiln_archive::kiln_archive(kiln_runtime& runtime, std::vector<std::uint8_t> bytes)
    : runtime_(runtime), owned_bytes_(std::move(bytes)) {
  reader_ = kiln::Archive::open_memory(owned_bytes_.data(), owned_bytes_.size(), read_options());
  digest_ = kiln::digest_string(reader_->digest());
}

kiln_archive::~kiln_archive() {
  for (auto& [key, slot] : slots_) {
    if (slot->kernel) {
      runtime_.cuda().unload(slot->kernel->code);
      runtime_.hip().unload(slot->kernel->hip_code);
    }
  }
}

kiln_kernel* kiln_archive::kernel(const std::string& name, int device) {
  if (!reader_->has_kernel(name)) {
    throw Error(Errc::not_found, "archive " + digest_ + " (" + reader_->package() + ") has no kernel named '" + name + "'");
  }
  if (device < 0) throw Error(Errc::invalid_argument, "device must be 0 or above, not " + std::to_string(device));
  Slot* slot;
  {
    std::lock_guard<std::mutex> lock(slots_mutex_);
    auto& entry = slots_[{name, device}];
    if (!entry) entry = std::make_unique<Slot>();
    slot = entry.get();
  }
  // Resolution (which may JIT-compile PTX for a second or more) runs outside the map's lock,
  // once per kernel and device; if it throws, the next request tries again. (A mutex, not
  // std::call_once: an exception leaving call_once aborts where libstdc++ is linked statically.)
  std::lock_guard<std::mutex> resolving(slot->resolving);
  if (!slot->kernel) {
    auto k = std::make_unique<kiln_kernel>();
    k->archive = this;
    k->spec = reader_->kernel(name);
    k->device = device;
    k->shapes = kiln::engine::ShapeTable(k->spec);
    k->reference_allowed =
        runtime_.policy() == KILN_POLICY_FALLBACK && k->spec.fallback == kiln::FallbackPolicy::reference;
    resolve(*k);
    slot->kernel = std::move(k);
  }
  return slot->kernel.get();
}

void kiln_archive::warm(int device) {
  const std::vector<std::string>& names = reader_->kernel_names();
  std::atomic<std::size_t> next{0};
  std::mutex error_mutex;
  std::string first_error;
  Errc first_code = Errc::internal;
  auto worker = [&] {
    for (std::size_t i = next.fetch_add(1); i < names.size(); i = next.fetch_add(1)) {
      try {
        kernel(names[i], device);
      } catch (const Error& e) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (first_error.empty()) {
          first_error = e.what();
          first_code = e.code();
        }
      }
    }
  };
  // The driver loads modules concurrently; a few threads hide JIT and load latency without
  // oversubscribing the host a serving process shares.
  unsigned threads = std::min<unsigned>(8, std::max(1u, std::thread::hardware_concurrency()));
  threads = std::min<unsigned>(threads, static_cast<unsigned>(std::max<std::size_t>(1, names.size())));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  if (!first_error.empty()) throw Error(first_code, first_error);
}

void kiln_archive::settle_without_code(kiln_kernel& k, kiln_reason reason, const std::string& text) {
  k.route = k.reference_allowed ? KILN_ROUTE_REFERENCE : KILN_ROUTE_REFUSED;
  k.reason = reason;
  k.reason_text = text;
  runtime_.log(KILN_LOG_INFO, "kernel '" + k.spec.name + "' routes to " + kiln_route_string(k.route) + ": " + text);
}

void kiln_archive::resolve(kiln_kernel& k) {
  if (k.spec.backend == "cuda") return resolve_cuda(k);
  if (k.spec.backend == "hip") return resolve_hip(k);
  if (k.spec.backend == "any") {
    // One kernel with code for both vendors: the CUDA device of this ordinal first, then the
    // AMD one; where neither fits, the reason names both.
    resolve_cuda(k);
    if (k.route == KILN_ROUTE_NATIVE || k.route == KILN_ROUTE_PTX_JIT) return;
    kiln_reason cuda_reason = k.reason;
    std::string cuda_text = k.reason_text;
    resolve_hip(k);
    if (k.route == KILN_ROUTE_NATIVE) return;
    bool cuda_had_a_device = cuda_reason != KILN_REASON_NO_DRIVER && cuda_reason != KILN_REASON_NO_DEVICE;
    return settle_without_code(k, cuda_had_a_device ? cuda_reason : k.reason, "CUDA: " + cuda_text + "; HIP: " + k.reason_text);
  }
  settle_without_code(k, KILN_REASON_BACKEND_UNAVAILABLE,
                      "kernel '" + k.spec.name + "' has backend '" + k.spec.backend + "', which this libkiln cannot run");
}

void kiln_archive::resolve_cuda(kiln_kernel& k) {
  kiln::cuda::Unavailable unavailable = kiln::cuda::Unavailable::none;
  std::string why;
  const kiln::cuda::Device* device = runtime_.cuda().device(k.device, &unavailable, &why);
  if (device == nullptr) {
    return settle_without_code(
        k, unavailable == kiln::cuda::Unavailable::no_driver ? KILN_REASON_NO_DRIVER : KILN_REASON_NO_DEVICE, why);
  }
  k.cuda_device = device;
  const std::string where = device->describe();

  if (const std::string* min = reader_->kernel_table().toolchain_value("min_cuda_driver")) {
    int major = 0, minor = 0;
    if (!kiln::cuda::parse_version_pair(*min, &major, &minor)) {
      runtime_.log(KILN_LOG_WARN, "archive " + digest_ + ": min_cuda_driver '" + *min + "' is not MAJOR.MINOR; ignored");
    } else if (device->spec.driver_version < major * 1000 + minor * 10) {
      return settle_without_code(k, KILN_REASON_DRIVER_TOO_OLD,
                                 where + ": the manifest needs a CUDA " + *min + " driver (min_cuda_driver)");
    }
  }

  // Judge every code object the manifest lists for this kernel against the device. A PTX
  // member's ISA version can only be read from its (verified, decompressed) bytes, so PTX is
  // judged only when no native code object fits or every one failed to load: a PTX member
  // can be hundreds of KiB, and a native cubin always ranks above a JIT.
  std::vector<Candidate> fitting, rejected;
  std::vector<Candidate> ptx_pending;
  for (const kiln::CodeObjectRef& ref : k.spec.code) {
    long m = reader_->find(ref.file.path);
    if (m < 0) {
      throw Error(Errc::malformed, "archive " + digest_ + ": kernel '" + k.spec.name + "' names '" + ref.file.path +
                                       "', which is not a member");
    }
    const kiln::format::Entry& entry = reader_->entry(static_cast<std::size_t>(m));
    Candidate best;
    best.member = static_cast<std::size_t>(m);
    best.path = entry.path;
    best.kind = entry.kind;
    bool have = false;
    for (const std::string& tag : split_tags(entry.arch)) {
      Candidate c = best;
      if (!kiln::cuda::parse_target(tag, &c.target)) continue;
      if (entry.kind == kiln::format::CodeKind::ptx && c.target.is_ptx) {
        ptx_pending.push_back(c);
        continue;
      }
      c.judgement = kiln::cuda::judge(c.target, device->spec, "");
      bool better = c.judgement.verdict == kiln::cuda::Verdict::fits &&
                    (best.judgement.verdict != kiln::cuda::Verdict::fits || c.judgement.rank > best.judgement.rank);
      if (!have || better) {
        best = c;
        have = true;
      }
    }
    if (!have) continue;
    (best.judgement.verdict == kiln::cuda::Verdict::fits ? fitting : rejected).push_back(best);
  }
  // Reads and judges the PTX members; the bytes are kept so that loading does not read and
  // hash the member again.
  auto judge_ptx = [&](std::vector<Candidate>* out) {
    for (Candidate& c : ptx_pending) {
      c.content = reader_->read_member(c.member);
      std::string isa = kiln::inspect_ptx(kiln::ByteView(c.content), c.path).ptx_isa;
      c.judgement = kiln::cuda::judge(c.target, device->spec, isa);
      (c.judgement.verdict == kiln::cuda::Verdict::fits ? *out : rejected).push_back(std::move(c));
    }
    ptx_pending.clear();
  };
  auto by_rank = [](const Candidate& a, const Candidate& b) { return a.judgement.rank > b.judgement.rank; };
  if (fitting.empty()) judge_ptx(&fitting);
  std::stable_sort(fitting.begin(), fitting.end(), by_rank);

  std::string load_failures;
  // Loads the first candidate that the driver accepts and settles the route; false if none did.
  auto try_load = [&](std::vector<Candidate>& candidates) {
    std::string rejected_text;
    for (const Candidate& c : rejected) rejected_text += (rejected_text.empty() ? "" : "; ") + candidate_text(c);
    for (Candidate& c : candidates) {
      std::vector<std::uint8_t> image = c.content.empty() ? reader_->read_member(c.member) : std::move(c.content);
      bool is_ptx = c.target.is_ptx;
      // The index's tags were read from the file at pack time and are signed; reading them
      // again from the verified bytes costs a header parse and catches a packer that lied.
      kiln::CodeObjectInfo info = kiln::inspect_code_object(kiln::ByteView(image), "'" + c.path + "'");
      if (std::find(info.targets.begin(), info.targets.end(), c.target.tag) == info.targets.end()) {
        throw Error(Errc::code_object, "archive " + digest_ + ": member '" + c.path + "' is indexed as " + c.target.tag +
                                           " but holds code for " + info.targets.front());
      }
      if (c.kind == kiln::format::CodeKind::ptx) image.push_back('\0');  // the driver reads PTX as a C string
      kiln::cuda::LoadResult r = runtime_.cuda().load(*device, kiln::ByteView(image), k.spec.entry, k.shapes.max_shared_mem());
      kiln::engine::Stats& s = runtime_.stats();
      if (!r.ok) {
        kiln::engine::Stats::bump(is_ptx ? s.jit_failures : s.load_failures);
        k.cuda_device = device;
        diagnose(k, "load", c.target.tag, c.path, r.cuda_error, r.error, "");
        std::string text = candidate_text(c) + ": " + r.error;
        runtime_.log(KILN_LOG_WARN, "kernel '" + k.spec.name + "' on " + where + ": load failed: " + text);
        load_failures += (load_failures.empty() ? "" : "; ") + text;
        continue;
      }
      kiln::engine::Stats::bump(is_ptx ? s.jit_compiles : s.loads);
      kiln::engine::Stats::bump(is_ptx ? s.jit_time_ns : s.load_time_ns, r.nanoseconds);
      k.code = r.code;
      k.route = is_ptx ? KILN_ROUTE_PTX_JIT : KILN_ROUTE_NATIVE;
      k.reason = KILN_REASON_MATCH;
      k.target = c.target.tag;
      k.reason_text = where + ": " + (is_ptx ? "PTX-JIT " : "native ") + candidate_text(c);
      if (!load_failures.empty()) k.reason_text += "; failed first: " + load_failures;
      if (!rejected_text.empty()) k.reason_text += "; rejected: " + rejected_text;
      runtime_.log(KILN_LOG_INFO, "kernel '" + k.spec.name + "': " + k.reason_text);
      return true;
    }
    return false;
  };
  if (try_load(fitting)) return;
  if (!ptx_pending.empty()) {  // every native code object failed to load: PTX is the next resort
    std::vector<Candidate> jit;
    judge_ptx(&jit);
    std::stable_sort(jit.begin(), jit.end(), by_rank);
    if (try_load(jit)) return;
  }
  std::string rejected_text;
  for (const Candidate& c : rejected) rejected_text += (rejected_text.empty() ? "" : "; ") + candidate_text(c);
  if (!load_failures.empty()) {
    return settle_without_code(k, KILN_REASON_LOAD_FAILED,
                               where + ": every fitting code object failed to load: " + load_failures +
                                   (rejected_text.empty() ? "" : "; rejected: " + rejected_text));
  }
  bool driver_old = std::any_of(rejected.begin(), rejected.end(), [](const Candidate& c) {
    return c.judgement.verdict == kiln::cuda::Verdict::driver_too_old;
  });
  settle_without_code(k, driver_old ? KILN_REASON_DRIVER_TOO_OLD : KILN_REASON_ARCH_MISMATCH,
                      where + " is sm_" + std::to_string(device->spec.cc_major) + std::to_string(device->spec.cc_minor) +
                          "; no code object fits it: " + (rejected_text.empty() ? "none listed" : rejected_text));
}

void kiln_archive::diagnose(const kiln_kernel& k, const std::string& event, const std::string& target,
                            const std::string& member, int cuda_error, const std::string& error, const std::string& call) {
  if (runtime_.diag_dir().empty()) return;
  kiln::engine::DiagnosticEvent e;
  e.event = event;
  e.archive_digest = digest_;
  e.package = reader_->package();
  e.kernel_revision = reader_->kernel_revision();
  e.kernel = k.spec.name;
  e.entry = k.spec.entry;
  e.target = target;
  e.member = member;
  e.device = k.device;
  if (k.cuda_device != nullptr) {
    e.device_name = k.cuda_device->name;
    e.cc_major = k.cuda_device->spec.cc_major;
    e.cc_minor = k.cuda_device->spec.cc_minor;
    e.driver_version = kiln::cuda::driver_version_text(k.cuda_device->spec.driver_version);
  }
  e.kiln_version = kiln_version_string();
  e.cuda_error = cuda_error;
  e.error = error;
  e.call = call;
  try {
    e.files.emplace_back(kiln::format::kManifestPath, reader_->read_member(kiln::format::kManifestPath));
    if (!member.empty()) e.files.emplace_back(member, reader_->read_member(member));
  } catch (const Error& ex) {
    e.error += " (and the bundle could not include a member: " + std::string(ex.what()) + ")";
  }
  std::string why;
  std::string folder = kiln::engine::write_diagnostic_bundle(runtime_.diag_dir(), e, &why);
  if (folder.empty()) runtime_.log(KILN_LOG_ERROR, "could not write a diagnostic bundle: " + why);
  else runtime_.log(KILN_LOG_WARN, "diagnostic bundle for the failed " + event + " of kernel '" + k.spec.name + "': " + folder);
}

// The HIP twin of resolve_cuda: the device's target ID against each code object's target IDs
// (as read from the files at pack time and signed), the most specific fit loaded first.
void kiln_archive::resolve_hip(kiln_kernel& k) {
  kiln::cuda::Unavailable unavailable = kiln::cuda::Unavailable::none;
  std::string why;
  const kiln::hip::Device* device = runtime_.hip().device(k.device, &unavailable, &why);
  if (device == nullptr) {
    return settle_without_code(
        k, unavailable == kiln::cuda::Unavailable::no_driver ? KILN_REASON_NO_DRIVER : KILN_REASON_NO_DEVICE, why);
  }
  k.hip_device = device;
  const std::string where = device->describe();
  struct HipCandidate {
    std::size_t member;
    std::string path, tag;
    kiln::hip::Judgement judgement;
  };
  std::vector<HipCandidate> fitting;
  std::string rejected_text;
  for (const kiln::CodeObjectRef& ref : k.spec.code) {
    long m = reader_->find(ref.file.path);
    if (m < 0) throw Error(Errc::malformed, "archive " + digest_ + ": kernel '" + k.spec.name + "' names '" + ref.file.path + "', which is not a member");
    const kiln::format::Entry& entry = reader_->entry(static_cast<std::size_t>(m));
    HipCandidate best{static_cast<std::size_t>(m), entry.path, "", {}};
    for (const std::string& tag : split_tags(entry.arch)) {
      kiln::hip::TargetId id;
      if (!kiln::hip::parse_target_id(tag, &id)) continue;
      kiln::hip::Judgement j = kiln::hip::judge(id, device->target);
      if (best.tag.empty() || (j.fits && (!best.judgement.fits || j.rank > best.judgement.rank))) best.tag = tag, best.judgement = j;
    }
    if (best.tag.empty()) continue;
    if (best.judgement.fits) fitting.push_back(best);
    else rejected_text += (rejected_text.empty() ? "" : "; ") + best.tag + " '" + best.path + "' (" + best.judgement.why + ")";
  }
  std::stable_sort(fitting.begin(), fitting.end(),
                   [](const HipCandidate& a, const HipCandidate& b) { return a.judgement.rank > b.judgement.rank; });
  std::string load_failures;
  for (const HipCandidate& c : fitting) {
    std::vector<std::uint8_t> image = reader_->read_member(c.member);
    kiln::hip::LoadResult r = runtime_.hip().load(*device, kiln::ByteView(image), k.spec.entry);
    kiln::engine::Stats& s = runtime_.stats();
    if (!r.ok) {
      kiln::engine::Stats::bump(s.load_failures);
      diagnose(k, "load", c.tag, c.path, r.hip_error, r.error, "");
      load_failures += (load_failures.empty() ? "" : "; ") + c.tag + " '" + c.path + "': " + r.error;
      continue;
    }
    kiln::engine::Stats::bump(s.loads);
    kiln::engine::Stats::bump(s.load_time_ns, r.nanoseconds);
    k.hip_code = r.code;
    k.route = KILN_ROUTE_NATIVE;
    k.reason = KILN_REASON_MATCH;
    k.target = c.tag;
    k.reason_text = where + ": native " + c.tag + " '" + c.path + "' (" + c.judgement.why + ")" +
                    (rejected_text.empty() ? "" : "; rejected: " + rejected_text);
    return;
  }
  if (!load_failures.empty()) {
    return settle_without_code(k, KILN_REASON_LOAD_FAILED, where + ": every fitting code object failed to load: " + load_failures);
  }
  settle_without_code(k, KILN_REASON_ARCH_MISMATCH, where + ": no code object fits it: " +
                                                        (rejected_text.empty() ? "none listed" : rejected_text));
}
