#include "engine/archive.hpp"

#include <algorithm>
#include <thread>

#include "core/error.hpp"
#include "core/parallel.hpp"
#include "engine/runtime.hpp"

namespace kiln::engine {

using kiln::Errc;
using kiln::Failure;

kiln::ReadOptions Archive::read_options() const {
  kiln::ReadOptions options;
  options.policy = kiln::TrustPolicy{&runtime_.trust(), runtime_.threshold()};
  options.max_member_size = runtime_.max_member_size();
  return options;
}

Archive::Archive(Runtime& runtime, const std::string& path, bool follow_links) : runtime_(runtime) {
  kiln::ReadOptions options = read_options();
  options.follow_links = follow_links;
  reader_ = kiln::ArchiveReader::open_file(path, options);
  digest_ = kiln::digest_string(reader_->digest());
}

Archive::Archive(Runtime& runtime, std::vector<std::uint8_t> bytes)
    : runtime_(runtime), owned_bytes_(std::move(bytes)) {
  reader_ = kiln::ArchiveReader::open_memory(owned_bytes_.data(), owned_bytes_.size(), read_options());
  digest_ = kiln::digest_string(reader_->digest());
}

// The kernels' loaded code unloads itself as the slots go (backend::Code's destructor).
Archive::~Archive() = default;

void Archive::add_attestation(const std::string& envelope, const std::string& what) {
  const kiln::TrustSet* keys = runtime_.attestation_trust();
  if (keys == nullptr) {
    throw Failure(Errc::invalid_argument, "this runtime requires no attestations (kiln_runtime_options.attestation_trust_path "
                                        "names the keys that sign them)");
  }
  if (envelope.size() > kMaxAttestationBytes) {
    throw Failure(Errc::invalid_argument, what + ": " + std::to_string(envelope.size()) + " bytes; an attestation is at most " +
                                            std::to_string(kMaxAttestationBytes));
  }
  kiln::AttestationFacts f = kiln::verify_attestation(envelope, *keys, runtime_.attestation_threshold(), what);
  if (f.subject_digest != digest_) throw Failure(Errc::refused, what + " attests " + f.subject_digest + ", not " + digest_);
  if (!f.passed) throw Failure(Errc::refused, what + ": the attested run on " + f.arch + " did not pass every test");
  std::lock_guard<std::mutex> lock(attestations_mutex_);
  attestations_.push_back(std::move(f));
}

std::string Archive::attestation_gap(const backend::DeviceInfo& device) const {
  std::lock_guard<std::mutex> lock(attestations_mutex_);
  std::string seen;
  for (const kiln::AttestationFacts& f : attestations_) {
    std::string why = kiln::attestation_mismatch(f, device.arch, device.cc_major, device.cc_minor, device.driver_version);
    if (why.empty()) return "";
    seen += (seen.empty() ? "" : "; ") + f.device_name + " " + why;
  }
  return "unattested: no attestation of " + digest_ + " signed by the runtime's attestation keys reports a passing run "
         "on this kind of device (" + std::to_string(attestations_.size()) + " given" + (seen.empty() ? "" : ": " + seen) + ")";
}

Kernel* Archive::kernel(const std::string& name, int device) {
  Slot* slot = nullptr;
  {
    std::lock_guard<std::mutex> lock(slots_mutex_);
    auto found = slots_.find({name, device});
    if (found != slots_.end()) slot = found->second.get();
  }
  if (slot == nullptr) {  // the first request for this kernel and device: its record is looked up once
    long record = reader_->find_kernel(name);
    if (record < 0) {
      throw Failure(Errc::not_found, "archive " + digest_ + " (" + reader_->package() + ") has no kernel named '" + name + "'");
    }
    if (device < 0) throw Failure(Errc::invalid_argument, "device must be 0 or above, not " + std::to_string(device));
    std::lock_guard<std::mutex> lock(slots_mutex_);
    auto& entry = slots_[{name, device}];
    if (!entry) {
      entry = std::make_unique<Slot>();
      entry->record = static_cast<std::size_t>(record);
    }
    slot = entry.get();
  }
  // Resolution (which may JIT-compile PTX for a second or more) runs outside the map's lock,
  // once per kernel and device; if it throws, the next request tries again. (A mutex, not
  // std::call_once: an exception leaving call_once aborts where libstdc++ is linked statically.)
  std::lock_guard<std::mutex> resolving(slot->resolving);
  if (!slot->kernel) {
    kiln::KernelSpec spec = reader_->kernel_at(slot->record, name);
    bool reference_allowed =
        runtime_.policy() == KILN_POLICY_FALLBACK && spec.fallback == kiln::FallbackPolicy::reference;
    auto k = std::make_unique<Kernel>(*this, std::move(spec), device, reference_allowed);
    resolve(*k);
    slot->kernel = std::move(k);
  }
  return slot->kernel.get();
}

void Archive::warm(int device) {
  const std::vector<std::string>& names = reader_->kernel_names();
  // The driver loads modules concurrently; a few threads hide JIT and load latency without
  // oversubscribing the host a serving process shares. The first failure stops the warm-up.
  unsigned threads = std::min<unsigned>(8, std::max(1u, std::thread::hardware_concurrency()));
  kiln::parallel_for_or_fail(names.size(), threads, [&](std::size_t i) { kernel(names[i], device); });
}

}  // namespace kiln::engine
