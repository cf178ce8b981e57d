#include "attestation_options.hpp"

#include "attestation_policy.hpp"

namespace kiln::cli {

CLI::Option* AttestationRequirement::add_to(CLI::App* command, const std::string& require_help,
                                           const std::string& target_help) {
  CLI::Option* require = command->add_option("--require-attestation", keys, require_help);
  command->add_option("--threshold", threshold, "With --require-attestation: distinct keys each attestation needs")
      ->check(CLI::Range(1u, 64u));
  CLI::Option* target = command->add_option(
      "--target", targets,
      target_help.empty() ? "With --require-attestation: the fleet's GPUs (sm_90, gfx942), comma-separated" : target_help);
  target->delimiter(',');
  if (target_help.empty()) target->needs(require);
  require->needs("--target");
  return require;
}

store::AttestationPolicy AttestationRequirement::policy() const { return attestation_policy(keys, threshold, targets); }

}  // namespace kiln::cli
