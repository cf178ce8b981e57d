#include "engine/package.hpp"

#include "core/error.hpp"
#include "core/kernel_table.hpp"
#include "engine/runtime.hpp"
#include "store/store.hpp"

namespace kiln::engine {

using kiln::Errc;
using kiln::Failure;

Package::Package(Runtime& runtime, std::string store_dir, std::string package, int device, std::string witness)
    : runtime_(runtime), store_dir_(std::move(store_dir)), package_(std::move(package)), device_(device),
      witness_(std::move(witness)) {
  if (!witness_.empty() && (witness_.size() != 64 || witness_.find_first_not_of("0123456789abcdef") != std::string::npos)) {
    throw Failure(Errc::invalid_argument, "witness head '" + witness_.substr(0, 80) +
                                            "' is not 64 lower-case hex digits (what `kiln store head " + package_ +
                                            "` prints first)");
  }
  std::atomic_store(&current_, load(active()));
}

// The state is read and verified (hash chain, replay, state bound to the head) by Store::state:
// a forged pointer is refused here, before anything is opened. A consistent rewrite of the
// whole history passes those checks; the witness, where given, is what catches it.
Package::Active Package::active() const {
  kiln::store::PackageState state = kiln::store::Store(store_dir_).state(package_);
  if (!witness_.empty()) kiln::store::Store::check_witness(state, witness_);
  if (state.active.empty()) {
    throw Failure(Errc::not_found, "store " + store_dir_ + " has no active archive for package '" + package_ + "'");
  }
  return Active{state.active, state.active_sequence()};
}

std::shared_ptr<const Package::Generation> Package::load(const Active& active) {
  const std::string& digest = active.digest;
  kiln::store::Store store(store_dir_);
  auto g = std::make_shared<Generation>();
  g->archive = std::make_unique<Archive>(runtime_, store.archive_path(digest), false);
  if (g->archive->digest() != digest) {
    throw Failure(Errc::integrity, store.archive_path(digest) + " holds " + g->archive->digest() + ", not " + digest);
  }
  if (g->archive->reader().package() != package_) {
    throw Failure(Errc::invalid_argument, digest + " is an archive of package '" + g->archive->reader().package() +
                                            "', not '" + package_ + "'");
  }
  // A history rewritten to claim another sequence for an older archive disagrees with the
  // sequence its signature covers.
  if (g->archive->reader().sequence() != active.sequence) {
    throw Failure(Errc::integrity, store.archive_path(digest) + " is sequence " + std::to_string(g->archive->reader().sequence()) +
                                     "; the history of package '" + package_ + "' records sequence " +
                                     std::to_string(active.sequence) + " for it");
  }
  // The attestations the store keeps for it, when the runtime requires them: each file checked
  // against the history's record of it (a swapped file refuses the open), each kept only if it
  // verifies with the runtime's attestation keys (others may be for other keys or other GPUs).
  if (runtime_.attestation_trust() != nullptr) {
    for (const kiln::store::StoredAttestation& a : store.attestations(digest)) {
      try {
        g->archive->add_attestation(a.envelope, a.path);
      } catch (const Failure& e) {
        if (e.code() != Errc::refused && e.code() != Errc::malformed) throw;
        runtime_.log(KILN_LOG_INFO, "package '" + package_ + "': " + e.what() + "; not counted");
      }
    }
  }
  // Warm before the switch: no call on the new archive may pay for a load.
  g->archive->warm(device_);
  for (const std::string& name : g->archive->reader().kernel_names()) g->kernels[name] = g->archive->kernel(name, device_);
  return g;
}

bool Package::reload() {
  std::lock_guard<std::mutex> lock(reload_mutex_);
  Active wanted_active = active();
  const std::string& wanted = wanted_active.digest;
  if (std::atomic_load(&current_)->archive->digest() == wanted) return false;
  std::shared_ptr<const Generation> next = load(wanted_active);
  std::atomic_store(&current_, next);
  runtime_.log(KILN_LOG_INFO, "package '" + package_ + "' switched to " + wanted);
  return true;
}

std::string Package::digest() const { return std::atomic_load(&current_)->archive->digest(); }

kiln_route Package::launch(const std::string& kernel, void* const* args, std::size_t arg_count, void* stream) {
  std::shared_ptr<const Generation> g = std::atomic_load(&current_);  // held for the whole call
  auto it = g->kernels.find(kernel);
  if (it == g->kernels.end()) {
    throw Failure(Errc::not_found, "archive " + g->archive->digest() + " of package '" + package_ + "' has no kernel '" + kernel + "'");
  }
  return it->second->launch(args, arg_count, stream);
}

}  // namespace kiln::engine
