// kiln store pull: fetch from a registry, verify with the store's keys, add, optionally activate.
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "attestation_options.hpp"
#include "cli_common.hpp"
#include "commands.hpp"
#include "registry/store_pull.hpp"
#include "registry_cli.hpp"

namespace kiln::cli {

void add_store_pull_command(CLI::App* store) {
  struct Options {
    std::string dir, reference, who, reason;
    AttestationRequirement required;
    bool activate = false;
    RegistryCli registry;
    SparseCli sparse;
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
                           "attestations in the registry are kept beside it first)",
                     std::string(SparseCli::kTargetHelp) + "; with --require-attestation, the GPUs its attestations must cover")
      ->needs("--activate");
  o->registry.add_to(pull);
  o->sparse.add_to(pull, false);
  pull->callback([o] {
    registry::Reference ref = registry::parse_reference(o->reference);
    store::Store s(store_dir(o->dir));
    o->sparse.targets = o->required.targets;
    o->sparse.check();
    registry::Client client(ref, o->registry.http(ref));
    registry::FetchOptions options;
    options.max_blob = o->registry.max_blob;
    auto said = std::make_shared<std::vector<std::string>>();
    if (o->sparse.wanted()) options.choose = o->sparse.choice(s.dir() + "/trust", 1, said);
    registry::StorePullResult r = registry::pull_into_store(client, ref, s, options, o->activate, actor_name(o->who), o->reason,
                                                            o->required.policy());
    std::cout << "pulled " << ref.str() << " into " << s.dir() << "\n"
              << "  manifest digest  " << r.fetched.manifest_digest << "\n"
              << "  kiln digest      " << r.added.digest << "  " << r.added.package << " " << r.added.kernel_revision
              << " (sequence " << r.added.sequence << ")\n"
              << "  attestations     " << r.attestations_kept << " kept beside it\n";
    print_sparse_outcome(r.fetched, *said);
    if (r.fetched.archive.sparse && !r.added.sparse) {
      std::cout << "  held whole       the store already held this archive whole, and keeps it\n";
    } else if (r.added.sparse && r.added.size != r.fetched.archive.size) {
      std::cout << "  joined           with the sparse copy the store held: it now holds " << human_size(r.added.size) << "\n";
    }
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
