// kiln push, kiln pull: archives to and from an OCI registry (schema/STORE.md, "Pushing to and
// pulling from a registry").
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "cli_common.hpp"
#include "commands.hpp"
#include "core/attestation_facts.hpp"
#include "core/error.hpp"
#include "core/file_io.hpp"
#include "core/sha256.hpp"
#include "registry/transfer.hpp"
#include "registry_cli.hpp"

namespace kiln::cli {

void add_push_command(CLI::App& app) {
  struct Options {
    std::string file, reference;
    bool keep_tags = false;
    std::vector<std::string> attestations;
    OptionalTrust trust;
    RegistryCli registry;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("push", "Upload an archive to an OCI registry as a kiln artifact");
  cmd->add_flag("--keep-tags", o->keep_tags, "Refuse to move a tag that names another kiln archive");
  cmd->add_option("--attestation", o->attestations,
                  "Attestations of it (kiln verify --run --attest) to push beside it, as artifacts whose subject is it");
  cmd->add_option("file", o->file, "The archive")->required();
  cmd->add_option("reference", o->reference, "REGISTRY/REPO[:TAG] (default tag: the archive's kernel_revision)")->required();
  o->trust.add_to(cmd, "Check the archive's signatures against these keys before pushing");
  o->registry.add_to(cmd);
  cmd->callback([o] {
    registry::Reference ref = registry::parse_reference(o->reference);
    if (!ref.digest.empty() || !ref.kiln_digest.empty()) {
      fail(Errc::invalid_argument, o->reference + ": push takes REGISTRY/REPO[:TAG]; the digests are the archive's own");
    }
    std::unique_ptr<TrustSet> trust = o->trust.load();
    registry::Client client(ref, o->registry.http(ref));
    std::vector<std::string> envelopes;
    for (const std::string& f : o->attestations) envelopes.push_back(read_small_file(f, kMaxAttestationBytes));
    registry::PushResult r =
        registry::push_archive(client, o->file, ref.tag, trust.get(), o->trust.threshold, envelopes, o->attestations,
                               o->keep_tags);
    std::cout << "pushed " << o->file << " to " << ref.name() << ":" << r.tag << " (also tagged " << r.kiln_tag << ")\n"
              << "  kiln digest      " << r.archive.digest << "\n"
              << "  manifest digest  " << r.manifest_digest << "\n"
              << "  layer            " << r.layer.digest << " (" << human_size(r.layer.size) << ")\n"
              << "  package          " << r.archive.package << "  revision " << r.archive.kernel_revision << "  sequence "
              << r.archive.sequence << "\n"
              << "  blobs            " << r.blobs_uploaded << " uploaded, " << r.blobs_present << " already there\n";
    if (!r.moved_from.empty()) {
      std::cout << "  moved tag        " << r.tag << " from kiln archive " << r.moved_from
                << " (a release with its own kernel_revision keeps its own tag; --keep-tags refuses this)\n";
    }
    if (r.attestations > 0) std::cout << "  attestations     " << r.attestations << ", listed through " << r.referrers << "\n";
    o->registry.report(client);
  });
}

void add_pull_command(CLI::App& app) {
  struct Options {
    std::string reference, out, attestations;
    OptionalTrust trust;
    RegistryCli registry;
    SparseCli sparse;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("pull", "Download an archive from an OCI registry, checked end to end");
  cmd->add_option("reference", o->reference,
                  "REGISTRY/REPO:TAG, REGISTRY/REPO@sha256:<manifest digest> or REGISTRY/REPO@kiln:sha256:<kiln digest>")
      ->required();
  cmd->add_option("--output,-o", o->out, "The archive file to write (written only once every check has passed)")->required();
  cmd->add_option("--attestations", o->attestations,
                  "Also write the archive's attestations the registry holds into this folder (<sha256>.json each)");
  o->trust.add_to(cmd, "Check the archive's signatures against these keys (as kiln verify)");
  o->registry.add_to(cmd);
  o->sparse.add_to(cmd);
  cmd->callback([o] {
    registry::Reference ref = registry::parse_reference(o->reference);
    o->sparse.check();
    if (o->sparse.wanted() && o->trust.path.empty()) {
      fail(Errc::invalid_argument, "--target and --device choose code with libkiln's resolver, which reads only "
                                   "authenticated archives: give --trust KEYS");
    }
    std::unique_ptr<TrustSet> trust = o->trust.load();
    registry::Client client(ref, o->registry.http(ref));
    registry::FetchOptions options;
    options.trust = trust.get();
    options.threshold = o->trust.threshold;
    options.max_blob = o->registry.max_blob;
    auto said = std::make_shared<std::vector<std::string>>();
    if (o->sparse.wanted()) options.choose = o->sparse.choice(o->trust.path, o->trust.threshold, said);
    // Written beside the target under a temporary name and renamed onto it only when complete
    // and checked: a failure or a kill never leaves a partial archive at the name.
    AtomicFileWriter out(o->out, 0644);
    registry::FetchResult r = registry::fetch_archive(client, ref, out, options);
    out.commit();
    registry::FetchedAttestations found;
    if (!o->attestations.empty()) {
      found = registry::fetch_attestations(client, r.manifest_digest, r.archive.digest);
      for (const std::string& e : found.envelopes) {
        replace_file_durably(o->attestations + "/" + digest_string(sha256(e.data(), e.size())).substr(7) + ".json", e, 0644);
      }
    }
    std::cout << "pulled " << ref.str() << "\n"
              << "  manifest digest  " << r.manifest_digest << "\n"
              << "  kiln digest      " << r.archive.digest << "\n"
              << "  package          " << r.archive.package << "  revision " << r.archive.kernel_revision << "  sequence "
              << r.archive.sequence << "\n"
              << "  signatures       "
              << (trust ? std::to_string(r.trusted_signers) + " distinct trusted signer(s), " + std::to_string(o->trust.threshold) +
                              " required"
                        : std::string("not checked (no --trust)"))
              << "\n"
              << "  wrote            " << o->out << " (" << human_size(r.archive.size) << ")\n";
    print_sparse_outcome(r, *said);
    if (!o->attestations.empty()) {
      std::cout << "  attestations     " << found.envelopes.size() << " written to " << o->attestations << "\n";
      for (const std::string& why : found.ignored) std::cout << "    ignored: " << registry::escape_control(why) << "\n";
    }
    o->registry.report(client);
  });
}

}  // namespace kiln::cli
