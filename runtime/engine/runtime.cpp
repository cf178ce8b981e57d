#include "engine/runtime.hpp"

#include <cstdlib>

#include "core/error.hpp"
#include "engine/backends.hpp"

namespace kiln::engine {

Runtime::Runtime(const kiln_runtime_options& o)
    : trust_(o.trust_path != nullptr && o.trust_path[0] != '\0'
                 ? kiln::TrustSet::load(o.trust_path)
                 : throw kiln::Failure(kiln::Errc::invalid_argument,
                                     "kiln_runtime_options.trust_path is required: a PEM public key or a folder of them")),
      threshold_(o.signature_threshold),
      policy_(static_cast<kiln_policy>(o.policy)),
      log_level_(static_cast<kiln_log_level>(o.log_level)),
      log_fn_(o.log_fn),
      log_user_(o.log_user),
      max_member_size_(o.max_member_size),
      backends_(device_backends(o)) {
  if (threshold_ < 1 || threshold_ > 64) {
    throw kiln::Failure(kiln::Errc::invalid_argument, "signature_threshold must be 1 to 64, not " + std::to_string(threshold_));
  }
  if (o.policy != KILN_POLICY_FALLBACK && o.policy != KILN_POLICY_STRICT) {
    throw kiln::Failure(kiln::Errc::invalid_argument, "policy must be KILN_POLICY_FALLBACK or KILN_POLICY_STRICT");
  }
  if (max_member_size_ == 0) throw kiln::Failure(kiln::Errc::invalid_argument, "max_member_size must be above zero");
  // Fields of 0.6: zero in a shorter (older) options struct, which kiln_runtime_create copies
  // over defaults.
  if (o.attestation_trust_path != nullptr && o.attestation_trust_path[0] != '\0') {
    attestation_trust_ = std::make_unique<kiln::TrustSet>(kiln::TrustSet::load(o.attestation_trust_path, kiln::kAttestationRole));
  }
  // 0 is the field of a caller that never set it (a zeroed struct): the default, 1. Never "no
  // signature needed".
  attestation_threshold_ = o.attestation_threshold == 0 ? 1 : o.attestation_threshold;
  if (attestation_threshold_ > 64) {
    throw kiln::Failure(kiln::Errc::invalid_argument,
                      "attestation_threshold must be 1 to 64, not " + std::to_string(attestation_threshold_));
  }
  const char* env = std::getenv("KILN_DIAG_DIR");
  diag_dir_ = o.diag_dir != nullptr ? o.diag_dir : env != nullptr ? env : "";
}

void Runtime::set_reference(const std::string& kernel, ReferenceFn fn, void* user, kiln_release_cb release) {
  std::shared_ptr<const Reference> added;
  if (!fn.empty()) {
    added = std::make_shared<const Reference>(fn, user, release);
  } else if (release != nullptr) {
    release(user);  // nothing registered with it: released at once
  }
  std::shared_ptr<const Reference> replaced;  // dropped after the lock: its release may call back in
  {
    std::unique_lock<std::shared_mutex> lock(references_mutex_);
    auto it = references_.find(kernel);
    if (it != references_.end()) {
      replaced = std::move(it->second);
      if (added) it->second = std::move(added);
      else references_.erase(it);
    } else if (added) {
      references_.emplace(kernel, std::move(added));
    }
  }
}

std::shared_ptr<const Runtime::Reference> Runtime::reference(const std::string& kernel) const {
  std::shared_lock<std::shared_mutex> lock(references_mutex_);
  auto it = references_.find(kernel);
  return it == references_.end() ? nullptr : it->second;
}

void Runtime::log(kiln_log_level level, const std::string& message) const {
  if (logs(level)) log_fn_(level, message.c_str(), log_user_);
}

void Runtime::set_error(const std::string& message) const {
  std::lock_guard<std::mutex> lock(error_mutex_);
  last_error_ = message;
}

std::string Runtime::last_error() const {
  std::lock_guard<std::mutex> lock(error_mutex_);
  return last_error_;
}

backend::Backend* Runtime::backend(format::Vendor vendor) const { return find_backend(backends_, vendor); }

}  // namespace kiln::engine
