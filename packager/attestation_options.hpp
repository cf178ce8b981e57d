// `--require-attestation KEYS [--threshold N] --target T,...`: the options `kiln store activate`
// and `kiln store pull --activate` share, and the store policy they ask for.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "store/store.hpp"

namespace kiln::cli {

struct AttestationRequirement {
  std::string keys;  // "" when none is required
  unsigned threshold = 1;
  std::vector<std::string> targets;

  // Adds the three options to `command`; returns --require-attestation, for further `needs`.
  // `target_help` set: --target is also an option on its own (kiln store pull, where it names
  // the GPUs whose code to fetch), described so.
  CLI::Option* add_to(CLI::App* command, const std::string& require_help, const std::string& target_help = "");
  // The store policy asked for (attestation_policy.hpp); empty when --require-attestation is not given.
  store::AttestationPolicy policy() const;
};

}  // namespace kiln::cli
