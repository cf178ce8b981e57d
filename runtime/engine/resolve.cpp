// Resolving a kernel for a device, the same way for every backend: the device's backend judges
// each code object the manifest lists for the kernel (every tag of it, the best one kept); the
// fitting ones are loaded best first until the driver accepts one; code whose bytes must be read
// to be judged (CUDA PTX, for its ISA version) is judged only when no other code fits or all of
// it failed to load; and the route and its reason say what was chosen, what failed and what
// was rejected, and why.
#include <algorithm>

#include "core/archive_semantics.hpp"
#include "core/code_object.hpp"
#include "core/error.hpp"
#include "engine/archive.hpp"
#include "engine/backends.hpp"
#include "engine/runtime.hpp"

namespace kiln::engine {

using kiln::Errc;
using kiln::Failure;

// One code object of the kernel with the tag of it that suits the device best.
struct Candidate {
  CodeMember member;
  const std::string& path() const { return member.entry->path; }  // the entry outlives the resolution
  kiln::format::CodeKind kind = kiln::format::CodeKind::none;
  std::string tag;
  kiln::backend::TagFit fit;
  std::vector<std::uint8_t> content;  // read (and verified) while judging, kept for the load
};

namespace {

// "<tag> <kind> '<path>' (<why>)", appended to `out`: a resolution's reason text is built in
// one string, not from a temporary per piece.
void append_candidate(std::string& out, const Candidate& c) {
  out += c.tag;
  out += ' ';
  out += kiln::format::code_kind_name(c.kind);
  out += " '";
  out += c.path();
  out += "' (";
  out += c.fit.why;
  out += ')';
}

std::string candidate_text(const Candidate& c) {
  std::string out;
  append_candidate(out, c);
  return out;
}

// The candidates' texts, "; " between them.
void append_texts(std::string& out, const std::vector<Candidate>& candidates) {
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (i > 0) out += "; ";
    append_candidate(out, candidates[i]);
  }
}

// "; rejected: <texts>" where any candidate was rejected.
void append_rejected(std::string& out, const std::vector<Candidate>& rejected) {
  if (rejected.empty()) return;
  out += "; rejected: ";
  append_texts(out, rejected);
}

std::string join_texts(const std::vector<Candidate>& candidates) {
  std::string out;
  append_texts(out, candidates);
  return out;
}

// What a route chosen for `c` on `device` says first: "<device>: native <candidate>".
std::string chosen_text(const kiln::backend::DeviceInfo& device, const Candidate& c) {
  std::string out;
  out.reserve(256);
  out += device.describe;
  out += c.fit.jit ? ": PTX-JIT " : ": native ";
  append_candidate(out, c);
  return out;
}

// fn(tag) for each non-empty tag of a comma-separated list, in order.
template <typename Fn>
void for_each_tag(const std::string& tags, Fn fn) {
  std::size_t start = 0;
  while (start <= tags.size()) {
    std::size_t comma = tags.find(',', start);
    if (comma == std::string::npos) comma = tags.size();
    if (comma > start) fn(std::string(tags, start, comma - start));
    start = comma + 1;
  }
}

bool better(const kiln::backend::TagFit& a, const kiln::backend::TagFit& b) {
  return a.fits && (!b.fits || a.rank > b.rank);
}

}  // namespace

void Archive::settle_without_code(Kernel& k, kiln_reason reason, const std::string& text) {
  k.route_ = k.reference_allowed_ ? KILN_ROUTE_REFERENCE : KILN_ROUTE_REFUSED;
  k.reason_ = reason;
  k.reason_text_ = text;
  if (runtime_.logs(KILN_LOG_INFO)) {
    runtime_.log(KILN_LOG_INFO, "kernel '" + k.spec_.name + "' routes to " + kiln_route_string(k.route_) + ": " + text);
  }
}

// The code member a reference names: the record's copy of its entry where the record carries
// one (FORMAT.md §4.1), so that no index page is read for it; else its entry in the index.
CodeMember Archive::code_member(const kiln::CodeObjectRef& ref, const Kernel& k, const kiln::VariantSpec* v) const {
  if (ref.member) return CodeMember{-1, &*ref.member};
  long m = reader_->find(ref.file.path);
  if (m < 0) {
    const std::string who = (v != nullptr ? "variant '" + v->name + "' of " : std::string()) + "kernel '" + k.spec_.name + "'";
    throw Failure(Errc::integrity, "archive " + digest_ + ": " + who + " names '" + ref.file.path + "', which is not a member");
  }
  return CodeMember{m, &reader_->entry(static_cast<std::size_t>(m))};
}

// Its bytes, checked against the entry the member was found by (the index's, by position, or the
// record's copy).
std::vector<std::uint8_t> Archive::read_code(const CodeMember& m) const {
  return m.position >= 0 ? reader_->read_member(static_cast<std::size_t>(m.position)) : reader_->read_member(*m.entry);
}

bool Archive::code_present(const CodeMember& m) const {
  return m.position >= 0 ? reader_->member_present(static_cast<std::size_t>(m.position)) : reader_->member_present(*m.entry);
}

std::size_t Archive::position(const CodeMember& m) const {
  if (m.position >= 0) return static_cast<std::size_t>(m.position);
  long found = reader_->find(m.entry->path);
  if (found < 0) {  // full verification refuses such a record; planning names what is in the index
    throw Failure(Errc::integrity, "archive " + digest_ + ": a kernel record copies the entry of '" + m.entry->path +
                                     "', which is not a member");
  }
  return static_cast<std::size_t>(found);
}

// The archive_semantics rules of this one kernel, on its record and whatever the device: verify
// checks every kernel's, on the index; the runtime checks the one it resolves (kiln.toml is never
// parsed here, so opening stays flat in the archive's size). The members found are returned, so
// that resolving does not look each one up again.
std::vector<CodeMember> Archive::check_code_references(const Kernel& k) const {
  std::vector<CodeMember> members;
  members.reserve(k.spec_.code.size());
  for (const kiln::CodeObjectRef& ref : k.spec_.code) {
    CodeMember m = code_member(ref, k, nullptr);
    if (std::string p = kiln::code_reference_problem(k.spec_, ref, *m.entry); !p.empty()) {
      throw Failure(Errc::integrity, "archive " + digest_ + ": " + p);
    }
    members.push_back(m);
  }
  // A variant's code must be the kernel's own kind of code for the same targets (so the target
  // chosen below holds for it), checked here as verify checks every kernel's.
  for (const kiln::VariantSpec& v : k.spec_.variants) {
    for (std::size_t c = 0; c < v.code.size(); ++c) {
      CodeMember m = code_member(v.code[c], k, &v);
      std::string p = kiln::code_reference_problem(k.spec_, v.code[c], *m.entry);
      if (p.empty()) p = kiln::variant_code_problem(k.spec_, v, c, *members[c].entry, *m.entry);
      if (!p.empty()) throw Failure(Errc::integrity, "archive " + digest_ + ": " + p);
    }
  }
  return members;
}

void Archive::resolve(Kernel& k) { resolve(k, runtime_.backends()); }

void Archive::resolve(Kernel& k, const kiln::backend::BackendList& backends) {
  const std::vector<CodeMember> code_members = check_code_references(k);
  kiln::format::Vendor vendor = kiln::format::Vendor::none;
  if (kiln::format::parse_backend(k.spec_.backend, &vendor) && vendor != kiln::format::Vendor::none) {
    if (kiln::backend::Backend* b = find_backend(backends, vendor)) return resolve_on(*b, k, code_members);
  } else if (k.spec_.backend == "any" && !backends.empty()) {
    // One kernel with code for several vendors: this ordinal's device of each vendor in turn
    // (CUDA, then HIP); where none fits, the reason names each. The reason kept is the first
    // vendor's that had a device, else the last one's.
    std::string texts;
    kiln_reason kept = KILN_REASON_NO_DEVICE;
    bool kept_had_a_device = false;
    for (const auto& b : backends) {
      resolve_on(*b, k, code_members);
      if (k.runs_on_device()) return;
      const bool had_a_device = k.reason_ != KILN_REASON_NO_DRIVER && k.reason_ != KILN_REASON_NO_DEVICE;
      if (!kept_had_a_device) kept = k.reason_, kept_had_a_device = had_a_device;
      texts += std::string(texts.empty() ? "" : "; ") + b->vendor() + ": " + k.reason_text_;
    }
    return settle_without_code(k, kept, texts);
  }
  settle_without_code(k, KILN_REASON_BACKEND_UNAVAILABLE,
                      "kernel '" + k.spec_.name + "' has backend '" + k.spec_.backend + "', which this libkiln cannot run");
}

void Archive::resolve_on(kiln::backend::Backend& backend, Kernel& k, const std::vector<CodeMember>& code_members) {
  kiln_reason unavailable = KILN_REASON_NO_DEVICE;
  std::string why;
  const kiln::backend::DeviceInfo* device = backend.device(k.device_, &unavailable, &why);
  if (device == nullptr) return settle_without_code(k, unavailable, why);
  k.device_info_ = device;
  k.device_backend_ = &backend;
  const std::string& where = device->describe;
  // Required attestations come before any code is judged: unproven code is not loaded at all.
  if (runtime_.attestation_trust() != nullptr) {
    if (std::string gap = attestation_gap(*device); !gap.empty()) {
      return settle_without_code(k, KILN_REASON_UNATTESTED, where + ": " + gap);
    }
  }
  std::string unmet = backend.unmet_requirement(*device, reader_->kernel_table());
  if (!unmet.empty()) return settle_without_code(k, KILN_REASON_DRIVER_TOO_OLD, where + ": " + unmet);
  // Tensor maps, clusters, scratch: decided here, never by a launch that fails later.
  std::string missing = backend.unmet_feature(*device, k.spec_);
  if (!missing.empty()) return settle_without_code(k, KILN_REASON_DEVICE_FEATURE, missing);

  // Judge every code object listed for the kernel; keep each one's best tag.
  std::vector<Candidate> fitting, rejected, pending;
  for (const CodeMember& m : code_members) {
    const kiln::format::Entry& entry = *m.entry;
    // Code of the other vendor (a kernel with backend "any") is the other backend's to judge;
    // code of this vendor that it cannot read is an error, never a silent skip.
    if (entry.backend != backend.format_vendor()) continue;
    // A sparse archive's absent code is judged like any other when planning what to fetch, and
    // otherwise rejected with its reason: nothing absent is read.
    const bool absent = !code_present(m);
    if (absent && !k.planning_) {
      kiln::backend::TagFit fit;
      fit.recognised = true;
      fit.why = "absent from this sparse archive";
      rejected.push_back(Candidate{m, entry.kind, entry.arch, fit, {}});
      continue;
    }
    Candidate best;
    bool have = false;
    for_each_tag(entry.arch, [&](std::string tag) {
      kiln::backend::TagFit fit = backend.judge(*device, tag, entry.kind, kiln::ByteView(), entry.path);
      if (!fit.recognised) {
        throw Failure(Errc::integrity, "archive " + digest_ + ": member '" + entry.path + "' is indexed as " +
                                         backend.vendor() + " code but '" + tag + "' is not a " + backend.vendor() + " target");
      }
      if (fit.needs_content) {
        pending.push_back(Candidate{m, entry.kind, std::move(tag), std::move(fit), {}});
      } else if (!have || better(fit, best.fit)) {
        best = Candidate{m, entry.kind, std::move(tag), std::move(fit), {}};
        have = true;
      }
    });
    if (have) (best.fit.fits ? fitting : rejected).push_back(std::move(best));
  }
  // Reads and judges what needed its bytes; they are kept so that the load reads no member twice.
  auto judge_pending = [&](std::vector<Candidate>* out) {
    for (Candidate& c : pending) {
      if (k.planning_) {  // the route would read it to judge it: it must be fetched, not read here
        k.planned_.push_back(position(c.member));
        continue;
      }
      c.content = read_code(c.member);
      c.fit = backend.judge(*device, c.tag, c.kind, kiln::ByteView(c.content), c.path());
      (c.fit.fits ? *out : rejected).push_back(std::move(c));
    }
    pending.clear();
  };
  auto by_rank = [](const Candidate& a, const Candidate& b) { return a.fit.rank > b.fit.rank; };
  if (fitting.empty()) judge_pending(&fitting);
  std::stable_sort(fitting.begin(), fitting.end(), by_rank);

  std::string load_failures;
  if (load_first(backend, k, *device, fitting, rejected, &load_failures)) return;
  if (!pending.empty()) {  // every native code object failed to load: what is left is the next resort
    std::vector<Candidate> next;
    judge_pending(&next);
    std::stable_sort(next.begin(), next.end(), by_rank);
    if (load_first(backend, k, *device, next, rejected, &load_failures)) return;
  }
  std::string rejected_text = join_texts(rejected);
  if (!load_failures.empty()) {
    return settle_without_code(k, KILN_REASON_LOAD_FAILED,
                               where + ": every fitting code object failed to load: " + load_failures +
                                   (rejected_text.empty() ? "" : "; rejected: " + rejected_text));
  }
  bool driver_old = std::any_of(rejected.begin(), rejected.end(), [](const Candidate& c) { return c.fit.driver_too_old; });
  settle_without_code(k, driver_old ? KILN_REASON_DRIVER_TOO_OLD : KILN_REASON_ARCH_MISMATCH,
                      where + " is " + device->arch + "; no code object fits it: " +
                          (rejected_text.empty() ? "none listed" : rejected_text));
}

// Loads each variant's code for the code entry `chosen` was listed as, after the kernel's own
// code loaded from it; returns what the reason text says of them ("" without variants). A
// variant that fails to load is left out, logged, counted and diagnosed: the calls it would take
// run the kernel's own code, which assumes less.
std::string Archive::load_variants(kiln::backend::Backend& backend, Kernel& k, const kiln::backend::DeviceInfo& device,
                                   const Candidate& chosen) {
  const kiln::KernelSpec& spec = k.spec_;
  if (spec.variants.empty()) return "";
  std::size_t at = spec.code.size();
  for (std::size_t i = 0; i < spec.code.size(); ++i) {
    if (spec.code[i].file.path == chosen.path() && (at == spec.code.size() || spec.code[i].arch == chosen.tag)) at = i;
  }
  k.variant_code_.resize(spec.variants.size());
  k.variant_paths_.resize(spec.variants.size());
  kiln::engine::Stats& s = runtime_.stats();
  std::string loaded, failed;
  for (std::size_t v = 0; v < spec.variants.size(); ++v) {
    const kiln::CodeObjectRef& ref = spec.variants[v].code[at];
    const CodeMember member = code_member(ref, k, &spec.variants[v]);  // checked by check_code_references
    if (spec.variants[v].has_kernel_args) {  // its own parameters may need what the kernel's do not
      kiln::KernelSpec own = spec;
      own.kernel_args = spec.variants[v].kernel_args;
      if (std::string missing = backend.unmet_feature(device, own); !missing.empty()) {
        failed += (failed.empty() ? "" : "; ") + ("variant '" + spec.variants[v].name + "': " + missing);
        continue;
      }
    }
    std::vector<std::uint8_t> image = read_code(member);
    kiln::CodeObjectInfo info = kiln::inspect_code_object(kiln::ByteView(image), "'" + ref.file.path + "'");
    if (std::string p = kiln::code_entry_problem(*member.entry, info); !p.empty()) {
      throw Failure(Errc::code_object, "archive " + digest_ + ": " + p);
    }
    kiln::backend::LoadOutcome r = backend.load(device, kiln::ByteView(image), chosen.kind, spec.entry, k.shapes_.max_shared_mem());
    if (!r.code) {
      kiln::engine::Stats::bump(chosen.fit.jit ? s.jit_failures : s.load_failures);
      diagnose(k, "load", chosen.tag, ref.file.path, r.error, r.message, "");
      std::string text = "variant '" + spec.variants[v].name + "' ('" + ref.file.path + "'): " + r.message;
      runtime_.log(KILN_LOG_WARN, "kernel '" + spec.name + "' on " + device.describe + ": load failed: " + text +
                                      "; the calls it takes run the kernel's own code");
      failed += (failed.empty() ? "" : "; ") + text;
      continue;
    }
    kiln::engine::Stats::bump(chosen.fit.jit ? s.jit_compiles : s.loads);
    kiln::engine::Stats::bump(chosen.fit.jit ? s.jit_time_ns : s.load_time_ns, r.nanoseconds);
    k.variant_code_[v] = std::move(r.code);
    k.variant_paths_[v] = ref.file.path;
    loaded += (loaded.empty() ? "" : ", ") + k.variants_.describe(v);
  }
  std::string out = loaded.empty() ? "" : "variants " + loaded;
  if (!failed.empty()) out += (out.empty() ? "" : "; ") + std::string("variants that failed to load (their calls run the kernel's own code): ") + failed;
  return out;
}

// Loads the first candidate the driver accepts and settles the route on it; false if none did
// (each failure is logged, counted, left in a diagnostic bundle and added to *failures).
bool Archive::load_first(kiln::backend::Backend& backend, Kernel& k, const kiln::backend::DeviceInfo& device,
                              std::vector<Candidate>& candidates, const std::vector<Candidate>& rejected,
                              std::string* failures) {
  kiln::engine::Stats& s = runtime_.stats();
  for (Candidate& c : candidates) {
    if (k.planning_) {  // the first candidate is the one a device would load, with its variants
      k.planned_.push_back(position(c.member));
      const std::vector<kiln::CodeObjectRef>& code = k.spec_.code;
      std::size_t at = code.size();  // the code entry load_variants would take the variants' code for
      for (std::size_t e = 0; e < code.size(); ++e) {
        if (code[e].file.path == c.path() && (at == code.size() || code[e].arch == c.tag)) at = e;
      }
      for (std::size_t v = 0; at < code.size() && v < k.spec_.variants.size(); ++v) {
        const kiln::CodeObjectRef& ref = k.spec_.variants[v].code[at];
        k.planned_.push_back(position(code_member(ref, k, &k.spec_.variants[v])));
      }
      k.route_ = c.fit.jit ? KILN_ROUTE_PTX_JIT : KILN_ROUTE_NATIVE;
      k.reason_ = KILN_REASON_MATCH;
      k.target_ = c.tag;
      return true;
    }
    std::vector<std::uint8_t> image = c.content.empty() ? read_code(c.member) : std::move(c.content);
    // The index's tags were read from the file at pack time and are signed; reading them
    // again from the verified bytes costs a header parse and catches a packer that lied.
    kiln::CodeObjectInfo info = kiln::inspect_code_object(kiln::ByteView(image), "'" + c.path() + "'");
    if (std::string p = kiln::code_entry_problem(*c.member.entry, info); !p.empty()) {
      throw Failure(Errc::code_object, "archive " + digest_ + ": " + p);
    }
    kiln::backend::LoadOutcome r =
        backend.load(device, kiln::ByteView(image), c.kind, k.spec_.entry, k.shapes_.max_shared_mem());
    if (r.simulated) {  // a described target: the route a device of its kind would take, nothing loaded
      k.route_ = c.fit.jit ? KILN_ROUTE_PTX_JIT : KILN_ROUTE_NATIVE;
      k.reason_ = KILN_REASON_MATCH;
      k.target_ = c.tag;
      k.reason_text_ = chosen_text(device, c);
      k.reason_text_ += " (judged from the archive; the driver would load it there)";
      if (!k.spec_.variants.empty()) {
        k.reason_text_ += "; and its " + std::to_string(k.spec_.variants.size()) + " variant(s) for the same target";
      }
      append_rejected(k.reason_text_, rejected);
      return true;
    }
    if (!r.code) {
      kiln::engine::Stats::bump(c.fit.jit ? s.jit_failures : s.load_failures);
      diagnose(k, "load", c.tag, c.path(), r.error, r.message, "");
      std::string text = candidate_text(c) + ": " + r.message;
      runtime_.log(KILN_LOG_WARN, "kernel '" + k.spec_.name + "' on " + device.describe + ": load failed: " + text);
      *failures += (failures->empty() ? "" : "; ") + text;
      continue;
    }
    kiln::engine::Stats::bump(c.fit.jit ? s.jit_compiles : s.loads);
    kiln::engine::Stats::bump(c.fit.jit ? s.jit_time_ns : s.load_time_ns, r.nanoseconds);
    k.backend_ = &backend;
    k.code_ = std::move(r.code);
    k.code_path_ = c.path();
    std::string variants = load_variants(backend, k, device, c);
    k.route_ = c.fit.jit ? KILN_ROUTE_PTX_JIT : KILN_ROUTE_NATIVE;
    k.reason_ = KILN_REASON_MATCH;
    k.target_ = c.tag;
    k.reason_text_ = chosen_text(device, c);
    if (!variants.empty()) {
      k.reason_text_ += "; ";
      k.reason_text_ += variants;
    }
    if (!failures->empty()) {
      k.reason_text_ += "; failed first: ";
      k.reason_text_ += *failures;
    }
    append_rejected(k.reason_text_, rejected);
    if (runtime_.logs(KILN_LOG_INFO)) runtime_.log(KILN_LOG_INFO, "kernel '" + k.spec_.name + "': " + k.reason_text_);
    return true;
  }
  return false;
}

}  // namespace kiln::engine
