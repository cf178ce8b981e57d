// engine::Runtime: trust, policy, references, logging, statistics and the device
// backends that every archive opened through it shares.
#pragma once

#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>

#include "backend/backend.hpp"
#include "core/trust.hpp"
#include "engine/stats.hpp"
#include "kiln/kiln.h"

namespace kiln::engine {

// The engine's runtime; the C API's kiln_runtime wraps it (runtime/api/handles.hpp).
class Runtime {
 public:
  explicit Runtime(const kiln_runtime_options& options);

  // A reference function as it was registered: through kiln_runtime_set_reference (a
  // kiln_reference_cb) or kiln_runtime_register_reference (a kiln_reference_fn, whose parameters
  // are const). It is called through the type it was registered with: the two differ only in
  // const, but calling a function through a pointer of another type is undefined behaviour.
  struct ReferenceFn {
    kiln_reference_cb cb = nullptr;
    kiln_reference_fn fn = nullptr;
    bool empty() const { return cb == nullptr && fn == nullptr; }
    int operator()(kiln_call_info* info, void* const* args, size_t count, void* stream, void* user) const {
      return fn != nullptr ? fn(info, args, count, stream, user) : cb(info, const_cast<void**>(args), count, stream, user);
    }
  };
  // A registered reference. Calls hold it by shared_ptr while they run it, so replacing or
  // removing it never pulls `user` from under a call in flight; `release(user)` runs when the
  // last holder lets go.
  struct Reference {
    ReferenceFn fn;
    void* user = nullptr;
    kiln_release_cb release = nullptr;
    Reference(ReferenceFn f, void* u, kiln_release_cb r) : fn(f), user(u), release(r) {}
    Reference(const Reference&) = delete;
    Reference& operator=(const Reference&) = delete;
    ~Reference() {
      if (release != nullptr) release(user);
    }
  };
  // An empty fn removes; `release` (may be null) is called once when nothing can use `user` any more.
  void set_reference(const std::string& kernel, ReferenceFn fn, void* user, kiln_release_cb release);
  std::shared_ptr<const Reference> reference(const std::string& kernel) const;

  void log(kiln_log_level level, const std::string& message) const;
  // Whether log(level, ...) would reach a callback: the success path of a cold start builds its
  // messages only then (each is a few allocations of cold memory on every kernel's first get).
  bool logs(kiln_log_level level) const { return log_fn_ != nullptr && level <= log_level_; }
  void set_error(const std::string& message) const;
  std::string last_error() const;

  const kiln::TrustSet& trust() const { return trust_; }
  // The keys attestations must be signed by (kiln_runtime_options.attestation_trust_path), or
  // null when the runtime requires none; and how many distinct ones each needs.
  const kiln::TrustSet* attestation_trust() const { return attestation_trust_.get(); }
  unsigned attestation_threshold() const { return attestation_threshold_; }
  unsigned threshold() const { return threshold_; }
  kiln_policy policy() const { return policy_; }
  std::uint64_t max_member_size() const { return max_member_size_; }
  // The GPU backends, one per vendor (engine/backends.cpp), in the order a kernel with code for
  // several vendors tries them; `backend` finds one vendor's (kiln's own tools: verify --run
  // allocates and times on a CUDA device's context), or null.
  const kiln::backend::BackendList& backends() const { return backends_; }
  kiln::backend::Backend* backend(kiln::format::Vendor vendor) const;
  kiln::engine::Stats& stats() { return stats_; }
  // Where diagnostic bundles go ("" for nowhere): the option, else KILN_DIAG_DIR.
  const std::string& diag_dir() const { return diag_dir_; }
  const kiln::engine::Stats& stats() const { return stats_; }

 private:
  kiln::TrustSet trust_;
  unsigned threshold_;
  std::unique_ptr<kiln::TrustSet> attestation_trust_;
  unsigned attestation_threshold_ = 1;
  kiln_policy policy_;
  kiln_log_level log_level_;
  kiln_log_fn log_fn_;
  void* log_user_;
  std::uint64_t max_member_size_;
  kiln::backend::BackendList backends_;
  kiln::engine::Stats stats_;
  std::string diag_dir_;

  mutable std::shared_mutex references_mutex_;
  std::unordered_map<std::string, std::shared_ptr<const Reference>> references_;
  mutable std::mutex error_mutex_;
  mutable std::string last_error_;
};

}  // namespace kiln::engine
