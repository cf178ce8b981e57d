// kiln store: keep signed archives by digest, activate them per package, roll back.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <memory>

#include "attestation_options.hpp"
#include "attestation_policy.hpp"
#include "cli_common.hpp"
#include "commands.hpp"
#include "core/error.hpp"
#include "core/file_io.hpp"
#include "store/oci.hpp"
#include "store/store.hpp"

namespace kiln::cli {
namespace {

struct StoreOptions {
  std::string dir, trust, file, digest, package, to, who, reason, head;
  std::vector<std::string> attestation_files;
  AttestationRequirement required;
  unsigned keep = 2;
  bool json = false;
  std::string resolve() const { return store_dir(dir); }
  std::string actor() const { return actor_name(who); }
};

std::string when(std::uint64_t t) {
  char buf[32];
  std::time_t tt = static_cast<std::time_t>(t);
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", std::gmtime(&tt));
  return buf;
}

// Reads an attestation file and keeps it beside `digest`: its subject must be that archive (its
// signatures are judged by the policy that requires it, with the keys that policy names).
store::HistoryEntry keep_attestation(store::Store& s, const std::string& digest, const std::string& file,
                                     const std::string& who) {
  std::string envelope = read_small_file(file, store::kMaxAttestationBytes);
  AttestationFacts f = read_attestation(envelope, file);
  if (f.subject_digest != digest) fail(Errc::refused, file + " attests " + f.subject_digest + ", not " + digest);
  return s.attest(digest, envelope, attestation_summary(f), who);
}

CLI::App* sub(CLI::App* store, const char* name, const char* what, const std::shared_ptr<StoreOptions>& o) {
  CLI::App* c = store->add_subcommand(name, what);
  c->add_option("--store,-s", o->dir, "The store folder (default: $KILN_STORE)");
  return c;
}

}  // namespace

void add_store_command(CLI::App& app) {
  auto o = std::make_shared<StoreOptions>();
  CLI::App* store = app.add_subcommand("store", "Keep archives by digest, activate one per package, roll back");
  store->require_subcommand(1);

  CLI::App* init = sub(store, "init", "Create a store that trusts these keys", o);
  init->add_option("--trust,-t", o->trust, "PEM public key or folder of keys the store will trust")->required();
  init->callback([o] {
    store::Store::init(o->resolve(), o->trust);
    store::Store s(o->resolve());
    std::cout << "created store " << s.dir() << " trusting " << s.trust().size() << " key(s)\n";
  });

  CLI::App* add = sub(store, "add", "Verify an archive against the store's keys and keep it by digest", o);
  add->add_option("file", o->file, "The archive")->required();
  add->add_option("--attestation", o->attestation_files,
                  "Attestations of it (kiln verify --run --attest) to keep beside it");
  add->add_option("--who", o->who, "Recorded with each attestation in the history (default: $USER)");
  add->callback([o] {
    store::Store s(o->resolve());
    store::ArchiveInfo a = s.add(o->file);
    std::cout << "added " << a.digest << "  " << a.package << " " << a.kernel_revision << " (sequence " << a.sequence << ")\n";
    for (const std::string& f : o->attestation_files) {
      store::HistoryEntry h = keep_attestation(s, a.digest, f, o->actor());
      std::cout << "kept attestation " << f << ", history #" << h.number << "\n";
    }
  });

  CLI::App* trust = sub(store, "trust", "Move the store to a newer trust file its current root signed (rotation, revocation)", o);
  trust->add_option("file", o->file, "The new trust file (kiln trust sign)")->required();
  trust->callback([o] {
    TrustDocument d = store::Store(o->resolve()).update_trust(o->file);
    std::cout << "the store now trusts " << o->file << ": trust version " << d.version << ", expires " << utc_text(d.expires)
              << "\n";
  });

  CLI::App* attest = sub(store, "attest", "Keep an attestation (kiln verify --run --attest) beside an archive", o);
  attest->add_option("digest", o->digest, "sha256:<hex> of an archive in the store")->required();
  attest->add_option("file", o->file, "The attestation: a DSSE envelope whose subject is that archive")->required();
  attest->add_option("--who", o->who, "Recorded in the history (default: $USER)");
  attest->callback([o] {
    store::Store s(o->resolve());
    store::HistoryEntry h = keep_attestation(s, o->digest, o->file, o->actor());
    std::cout << "kept attestation " << h.reason.substr(0, 71) << " of " << h.digest << ", history #" << h.number << "\n";
  });

  CLI::App* attestations = sub(store, "attestations", "The attestations kept beside an archive, and what each attests", o);
  attestations->add_option("digest", o->digest, "sha256:<hex> of an archive in the store")->required();
  attestations->callback([o] {
    store::Store s(o->resolve());
    for (const store::StoredAttestation& a : s.attestations(o->digest)) {
      std::printf("#%-4llu %s  %s\n", static_cast<unsigned long long>(a.record.number), when(a.record.time).c_str(),
                  a.record.reason.c_str());
    }
  });

  CLI::App* activate = sub(store, "activate", "Make an archive its package's active one (never an older sequence)", o);
  activate->add_option("digest", o->digest, "sha256:<hex> of an archive in the store")->required();
  activate->add_option("--who", o->who, "Recorded in the history (default: $USER)");
  activate->add_option("--reason", o->reason, "Recorded in the history");
  o->required.add_to(activate,
                     "PEM key, folder of keys or trust file: activate only if, for every --target, an attestation "
                     "kept beside the archive and signed by them reports a passing run on that kind of GPU");
  activate->callback([o] {
    store::HistoryEntry h = store::Store(o->resolve()).activate(o->digest, o->actor(), o->reason, o->required.policy());
    std::cout << "activated " << h.digest << " (sequence " << h.sequence << "), history #" << h.number << "\n";
  });

  CLI::App* rollback = sub(store, "rollback",
                           "Go back to the previously active archive, or --to one this package ran (back, or forward "
                           "again after a rollback)", o);
  rollback->add_option("package", o->package, "The package")->required();
  rollback->add_option("--to", o->to, "sha256:<hex> of an archive the package has been active with");
  rollback->add_option("--who", o->who, "Recorded in the history (default: $USER)");
  rollback->add_option("--reason", o->reason, "Recorded in the history");
  rollback->callback([o] {
    store::Store s(o->resolve());
    std::uint64_t before = s.state(o->package).active_sequence();
    store::HistoryEntry h = s.rollback(o->package, o->to, o->actor(), o->reason);
    // --to may name an archive newer than the one it replaces (after a rollback): a roll-forward.
    std::cout << "rolled " << o->package << (h.sequence > before ? " forward" : " back") << " to " << h.digest
              << " (sequence " << h.sequence << "), history #" << h.number << "\n";
  });

  CLI::App* active = sub(store, "active", "Print the active digest of a package, and nothing else", o);
  active->add_option("package", o->package, "The package")->required();
  active->callback([o] {
    store::PackageState s = store::Store(o->resolve()).state(o->package);
    if (s.active.empty()) fail(Errc::not_found, "package " + o->package + " has no active archive in this store");
    std::cout << s.active << "\n";
  });

  CLI::App* list = sub(store, "list", "The archives in the store, and which are active", o);
  list->callback([o] {
    store::Store s(o->resolve());
    for (const store::ArchiveInfo& a : s.archives()) {
      bool is_active = s.state(a.package).active == a.digest;
      std::string size = a.sparse ? human_size(a.size) + " sparse (of " + human_size(a.complete_size) + ")" : human_size(a.size);
      std::printf("%s %s  %-20s %-24s seq %-6llu %s\n", is_active ? "*" : " ", a.digest.c_str(), a.package.c_str(),
                  a.kernel_revision.c_str(), static_cast<unsigned long long>(a.sequence), size.c_str());
    }
  });

  CLI::App* history = sub(store, "history", "Every decision taken for a package, in order", o);
  history->add_option("package", o->package, "The package")->required();
  history->callback([o] {
    store::PackageState s = store::Store(o->resolve()).state(o->package);
    for (const store::HistoryEntry& h : s.history) {
      std::printf("#%-4llu %s  %-8s %s seq %-6llu by %s%s%s\n", static_cast<unsigned long long>(h.number),
                  when(h.time).c_str(), h.action.c_str(), h.digest.empty() ? "-" : h.digest.c_str(),
                  static_cast<unsigned long long>(h.sequence), h.who.c_str(), h.reason == "-" ? "" : ": ",
                  h.reason == "-" ? "" : h.reason.c_str());
      if (h.repeats > 0) {
        std::printf("      repeated %llu more time(s), the last at %s\n", static_cast<unsigned long long>(h.repeats),
                    when(h.last_repeat_time).c_str());
      }
    }
  });

  CLI::App* head = sub(store, "head", "Print the head of a package's hash-chained history: keep it elsewhere as a witness", o);
  head->add_option("package", o->package, "The package")->required();
  head->callback([o] {
    store::ChainHead h = store::Store(o->resolve()).head(o->package);
    std::cout << h.hash << " " << h.records << "\n";
  });

  CLI::App* migrate = sub(store, "migrate", "Convert a format-1 store to format 2 (hash-chained history)", o);
  migrate->callback([o] {
    std::vector<std::string> done = store::Store::migrate(o->resolve());
    for (const std::string& p : done) std::cout << "migrated package " << p << "\n";
    std::cout << "store " << o->resolve() << " is format 2\n";
  });

  CLI::App* verify = sub(store, "verify", "Re-verify every archive, every package's history and active pointer", o);
  verify->add_option("--package", o->package, "With --head: the package whose witnessed head is checked");
  verify->add_option("--head", o->head, "A head printed earlier by `kiln store head`: its history must still hold it");
  verify->callback([o] {
    if (o->head.empty() != o->package.empty()) fail(Errc::invalid_argument, "--head and --package go together");
    store::Store s(o->resolve());
    std::vector<std::string> problems = s.verify();
    for (const std::string& p : problems) std::cerr << "problem: " << p << "\n";
    if (!problems.empty()) fail(Errc::integrity, std::to_string(problems.size()) + " problem(s) in the store");
    if (!o->head.empty()) {
      std::uint64_t at = s.check_witness(o->package, o->head);
      std::cout << "package " << o->package << ": the witnessed head is record " << at << " of "
                << s.head(o->package).records << "\n";
    }
    std::cout << "store verified\n";
  });

  auto oci = std::make_shared<std::string>();
  auto digests = std::make_shared<std::vector<std::string>>();
  CLI::App* exp = sub(store, "export", "Write archives as an OCI image layout (for oras, skopeo, any registry)", o);
  exp->add_option("--oci", *oci, "The OCI layout folder to write (new or empty)")->required();
  exp->add_option("digests", *digests, "Archives to export (default: all)");
  exp->callback([o, oci, digests] {
    std::vector<std::string> done = store::export_oci(store::Store(o->resolve()), *oci, *digests);
    for (const std::string& d : done) std::cout << "exported " << d << "\n";
    std::cout << done.size() << " archive(s) written to the OCI layout " << *oci << "\n";
  });
  CLI::App* imp = sub(store, "import", "Add every kiln archive of an OCI image layout (each verified)", o);
  imp->add_option("--oci", *oci, "The OCI layout folder to read")->required();
  imp->callback([o, oci] {
    store::Store s(o->resolve());
    store::ImportResult r = store::import_oci(s, *oci);
    for (const store::ArchiveInfo& a : r.imported) std::cout << "imported " << a.digest << "  " << a.package << " " << a.kernel_revision << "\n";
    for (const std::string& why : r.skipped) std::cout << "note: " << why << "\n";
    std::cout << r.imported.size() << " archive(s) imported, " << r.attestations << " attestation(s) kept beside them\n";
  });

#ifdef KILN_HAVE_REGISTRY
  add_store_pull_command(store);  // cmd_store_pull.cpp: only in a kiln built with libcurl
#endif

  CLI::App* gc = sub(store, "gc", "Remove archives no rule keeps (see schema/STORE.md)", o);
  gc->add_option("--keep", o->keep, "Previously active archives kept per package for rollback")->check(CLI::Range(1u, 1000u));
  gc->callback([o] {
    std::vector<std::string> removed = store::Store(o->resolve()).gc(o->keep);
    for (const std::string& d : removed) std::cout << "removed " << d << "\n";
    std::cout << removed.size() << " archive(s) removed\n";
  });
}

}  // namespace kiln::cli
