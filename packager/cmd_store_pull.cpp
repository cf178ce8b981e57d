// kiln store pull: fetch from a registry, verify with the store's keys, add, optionally activate.
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "attestation_options.hpp"
#include "cli_common.hpp"
#include "commands.hpp"
#include "registry_cli.hpp"
#include "store_pull.hpp"

namespace kiln::cli {

void add_store_pull_command(CLI::App* store) {
  struct Options {
    std::string dir, reference, who, reason;
    AttestationRequirement required;
    bool activate = false;
    RegistryCli registry;
  };
  auto o = std::make_shared<Options>();
  CLI::App* pull = store->add_subcommand("pull", "Fetch an archive from an OCI registry, verify it with the store's keys, add it");
  pull->add_option("--store,-s", o->dir, "The store folder (default: $KILN_STORE)");
  pull->add_option("reference", o->reference,
                   "REGISTRY/REPO:TAG, REGISTRY/REPO@sha256:<manifest digest> or REGISTRY/REPO@kiln:sha256:<kiln digest>")
      ->required();
  pull->add_flag("--activate", o->activate, "Then make it its package's active archive (only if everything before succeeded)");
  pull->add_option("--who", o->who, "Recorded in the history with --activate (default: $USER)");
  pull->add_option("--reason", o->reason, "Recorded in the history with --activate");
  o->required.add_to(pull, "With --activate: as kiln store activate --require-attestation (the archive's "
                           "attestations in the registry are kept beside it first)")
      ->needs("--activate");
  o->registry.add_to(pull);
  pull->callback([o] {
    registry::Reference ref = registry::parse_reference(o->reference);
    store::Store s(store_dir(o->dir));
    registry::Client client(ref, o->registry.http(ref));
    registry::FetchOptions options;
    options.max_blob = o->registry.max_blob;
    registry::StorePullResult r = registry::pull_into_store(client, ref, s, options, o->activate, actor_name(o->who), o->reason,
                                                            o->required.policy());
    std::cout << "pulled " << ref.str() << " into " << s.dir() << "\n"
              << "  manifest digest  " << r.fetched.manifest_digest << "\n"
              << "  kiln digest      " << r.added.digest << "  " << r.added.package << " " << r.added.kernel_revision
              << " (sequence " << r.added.sequence << ")\n"
              << "  attestations     " << r.attestations_kept << " kept beside it\n";
    for (const std::string& why : r.attestations_ignored) std::cout << "    ignored: " << registry::escape_control(why) << "\n";
    if (r.activated) {
      std::cout << "activated " << r.decision.digest << " (sequence " << r.decision.sequence << "), history #"
                << r.decision.number << "\n";
    } else if (r.already_active) {
      std::cout << "already active: " << r.added.digest << " (nothing recorded)\n";
    }
    o->registry.report(client);
  });
}

}  // namespace kiln::cli
