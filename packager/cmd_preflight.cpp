// kiln preflight: for this host, without launching anything, which kernels run natively, via
// PTX-JIT, via the reference, or are refused, and why. Through libkiln's C API, as a serving
// process sees it: the JSON is kiln_archive_preflight's own. With --target or --fleet, for GPUs
// described rather than present (preflight_targets.hpp), by the same resolver.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>

#include "cli_common.hpp"
#include "commands.hpp"
#include "core/attestation_facts.hpp"
#include "core/file_io.hpp"
#include "core/json.hpp"
#include "core/status.hpp"
#include "kiln/kiln.hpp"
#include "kiln/kiln_experimental.hpp"
#include "preflight_targets.hpp"

namespace kiln::cli {

void add_preflight_command(CLI::App& app) {
  struct Options {
    std::string file, trust, driver, fleet;
    std::vector<std::string> targets;
    AttestationsGiven attestations;
    int device = 0;
    bool json = false, strict = false, require_device = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("preflight", "Say, for this host, the route every kernel will take and why");
  cmd->add_option("file", o->file, "The archive")->required();
  cmd->add_option("--trust,-t", o->trust, "Trusted PEM public key, or a folder of keys")->required();
  cmd->add_option("--device", o->device, "GPU device ordinal")->check(CLI::Range(0, 1023));
  cmd->add_flag("--strict", o->strict, "Judge under the strict policy (no reference fallback)");
  cmd->add_flag("--json", o->json, "Print JSON on stdout");
  CLI::Option* target = cmd->add_option("--target", o->targets,
                                        "Judge for these GPUs instead of this host's (no GPU needed): sm_80,sm_90,sm_100,"
                                        "gfx90a:xnack-,gfx942 (comma-separated or repeated)");
  CLI::Option* fleet = cmd->add_option("--fleet", o->fleet, "Judge for the [[fleet]] targets of this TOML file");
  cmd->add_option("--driver", o->driver, "With --target: the CUDA driver version of those GPUs (e.g. 12.4); "
                                         "default: new enough for every code object")
      ->needs(target);
  cmd->add_flag("--require-device", o->require_device,
                "With --target/--fleet: exit 1 when any kernel would not run on any target's GPU");
  CLI::Option* require = cmd->add_option(
      "--require-attestation", o->attestations.keys,
      "Judge as a runtime that requires attestations signed by these keys (PEM or folder): a GPU no given "
      "attestation covers is 'unattested'");
  cmd->add_option("--attestation", o->attestations.files, "Attestations of the archive (kiln verify --run --attest)")
      ->needs(require);
  cmd->add_option("--attestation-threshold", o->attestations.threshold, "Distinct keys each attestation needs")
      ->check(CLI::Range(1u, 64u))
      ->needs(require);
  target->excludes(fleet);
  cmd->callback([o, cmd] {
    if (!o->targets.empty() || !o->fleet.empty()) {
      if (cmd->count("--device") > 0) throw Failure(Errc::invalid_argument, "--device is this host's GPU; with --target or --fleet there is none");
      std::vector<FleetTarget> targets =
          o->fleet.empty() ? targets_from_list(o->targets, o->driver) : read_fleet_file(o->fleet);
      // Every target checked before anything is printed: a GPU that can exist, a driver version
      // that parses. A bad --target is a usage error (exit 2); a bad fleet file, bad input.
      for (const FleetTarget& t : targets) {
        try {
          kiln::experimental::check_target(t.target, t.driver);
        } catch (const kiln::Error& e) {
          if (o->fleet.empty()) throw CLI::ValidationError("--target", e.what());
          throw Failure(errc_of(e.status()), o->fleet + ": " + (t.name.empty() ? "" : "target '" + t.name + "': ") + e.what());
        }
      }
      int off_device = preflight_targets(o->file, o->trust, o->strict, o->json, o->attestations, targets);
      if (o->require_device && off_device > 0) {
        throw Failure(Errc::refused, std::to_string(off_device) + " kernel(s) would not run on their target's GPU (--require-device)");
      }
      return;
    }
    through_the_api([&] {
      kiln::RuntimeOptions options;
      options.trust_path(o->trust).policy(o->strict ? KILN_POLICY_STRICT : KILN_POLICY_FALLBACK);
      if (!o->attestations.keys.empty()) options.attestation_trust_path(o->attestations.keys);
      options.attestation_threshold(o->attestations.threshold);
      kiln::Runtime runtime(options);
      kiln::Archive archive(runtime, o->file);
      for (const std::string& f : o->attestations.files) {
        std::string envelope = read_small_file(f, kMaxAttestationBytes);
        through_the_api([&] { archive.add_attestation(envelope.data(), envelope.size()); }, f);
      }
      if (o->json) {
        // Resolving loads the chosen code objects (PTX is JIT-compiled) but launches nothing.
        // libkiln's report (one object, built by engine/preflight.cpp) with the file named first.
        std::string report = archive.preflight(o->device);
        std::cout << "{\"file\":" << json::quote(o->file) << "," << report.substr(1) << "\n";
        return;
      }
      std::cout << o->file << " (" << archive.digest() << ") on device " << o->device << ":\n";
      for (std::size_t i = 0; i < archive.kernel_count(); ++i) {
        std::string name;
        try {
          name = archive.kernel_name(i);
        } catch (const std::out_of_range&) {  // the index and the kernel table disagree: warming says how
          archive.warm(o->device);
          throw Failure(Errc::malformed, o->file + ": kernel " + std::to_string(i) + " has no name in the index");
        }
        kiln::Kernel k = archive.kernel(name, o->device);
        std::printf("  %-20s %-9s %-18s %s\n", name.c_str(), kiln_route_string(k.route()), kiln_reason_string(k.reason()),
                    k.reason_text().c_str());
      }
    });
    std::fflush(stdout);
  });
}

}  // namespace kiln::cli
