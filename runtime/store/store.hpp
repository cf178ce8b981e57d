// The content-addressed store: a folder where an operator keeps signed archives by digest,
// one active archive per package, and a hash-chained history of every decision (chain.hpp).
// Every change is made crash-safe (write a temporary file, fsync, rename, fsync the folder)
// under an exclusive flock that the kernel releases when its holder dies. Nothing in the folder
// is opened unless it is a regular file (no link followed, no FIFO waited on): whoever can write
// the folder can break it, but not redirect a write or stall a reader. schema/STORE.md
// documents the layout and the rules (anti-rollback, gc), schema/SECURITY.md what holds.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/archive_reader.hpp"
#include "core/attestation_facts.hpp"
#include "core/trust.hpp"
#include "store/chain.hpp"

namespace kiln::store {

struct ArchiveInfo {
  std::string digest, package, kernel_revision;
  std::uint64_t sequence = 0;
  std::uint64_t size = 0;           // of the file
  bool sparse = false;              // FORMAT.md §9: some members absent
  std::uint64_t complete_size = 0;  // of the complete archive (= size unless sparse)
};

// What an opened archive says of itself.
ArchiveInfo archive_info(const ArchiveReader& a);

// An attestation kept beside an archive: the history record that took it in (its reason begins
// with the envelope's digest) and the envelope's bytes, checked against that digest.
struct StoredAttestation {
  HistoryEntry record;
  std::string envelope_digest;  // "sha256:<hex>"
  std::string envelope;
  std::string path;
};

// Judges an archive's attestations before it is activated (its digest, what the store keeps for
// it): "" lets the activation go on, any other text refuses it (recorded like every refusal).
using AttestationPolicy = std::function<std::string(const std::string& digest, const std::vector<StoredAttestation>&)>;

using kiln::kMaxAttestationBytes;

class Store {
 public:
  // Creates a store at `dir` (absent or an empty folder), copying the trust keys (a PEM file or a
  // folder of them) in. Built in a hidden folder beside `dir` and renamed into place: a crash
  // leaves no store or the whole store, never a folder a second init refuses.
  static void init(const std::string& dir, const std::string& trust_path);
  // Converts a format-1 store (history without a hash chain) to format 2 in place; returns the
  // packages converted. Resumable: a crash part-way leaves files a second migrate finishes.
  static std::vector<std::string> migrate(const std::string& dir);
  explicit Store(std::string dir);  // opens; throws if `dir` is not a store

  const std::string& dir() const { return dir_; }
  // The keys the store trusts; throws why there are none usable (an expired trust file: only
  // update_trust, which repairs that, works without them).
  const TrustSet& trust() const;
  std::string archive_path(const std::string& digest) const;

  // Replaces the store's trust file with `file`, a newer version signed by the root of the one
  // held (and by its own), not expired, leaving a release key usable; returns it. Refuses a
  // store made with a key folder, the same file, an older or equal version, another root.
  TrustDocument update_trust(const std::string& file);
  // Verifies (signatures against the store's keys, every member) and copies in; returns it. A
  // sparse archive (FORMAT.md §9) never replaces the same digest held whole; beside a sparse copy
  // of it, the store keeps one sparse archive holding every member either holds.
  ArchiveInfo add(const std::string& file);
  // Makes `digest` the package's active archive, refusing rollbacks the rules forbid and, with a
  // policy, an archive whose attestations it does not accept.
  HistoryEntry activate(const std::string& digest, const std::string& who, const std::string& reason,
                        const AttestationPolicy& policy = {});
  // Keeps `envelope` (an attestation the caller has read: its subject is `digest`) beside the
  // archive, as attestations/<archive hex>.<envelope hex>.json, and records it in the package's
  // history, its digest first in the record's reason, `summary` after it. The same envelope
  // again records nothing and returns the record that took it in.
  HistoryEntry attest(const std::string& digest, const std::string& envelope, const std::string& summary,
                      const std::string& who);
  // The attestations the history records for `digest`, oldest first, each file checked against
  // the digest its record gives (Errc::integrity naming the file and record otherwise).
  std::vector<StoredAttestation> attestations(const std::string& digest) const;
  // Goes back to the previously active archive of `package`, or to `to` (which must be in
  // the package's history of activations).
  HistoryEntry rollback(const std::string& package, const std::string& to, const std::string& who,
                        const std::string& reason);
  // Reads and verifies the package's state file (chain.hpp: every record, the head, the state).
  PackageState state(const std::string& package) const;
  // The head of the package's history: what a witness kept elsewhere records.
  ChainHead head(const std::string& package) const;
  // Checks that the package's history still holds the witnessed head (a record's hash, or the
  // genesis value) and returns how many records it has at that point; Errc::integrity if not.
  std::uint64_t check_witness(const std::string& package, const std::string& head_hash) const;
  // The same on a state already read (one read and verification of the state file, not two).
  static std::uint64_t check_witness(const PackageState& state, const std::string& head_hash);
  std::vector<std::string> packages() const;
  std::vector<ArchiveInfo> archives() const;
  // Re-verifies every archive; returns one line per problem (empty when all hold).
  std::vector<std::string> verify() const;
  // Removes what no rule keeps (see STORE.md); returns the removed digests.
  std::vector<std::string> gc(unsigned keep);

  // Opens and authenticates it; Errc::not_found "<digest> is not in this store" when absent.
  ArchiveInfo info(const std::string& digest) const;

 private:
  void write_state(const PackageState& s);
  // Records a refused activate/rollback in the package's history (durably; a repeat of a
  // refusal since the last accepted decision is counted, not appended), then throws it. If
  // recording fails, the refusal is still what is thrown, with the recording's failure added.
  [[noreturn]] void refuse(PackageState& s, HistoryEntry h, const std::string& refusal);
  void require_present(const std::string& digest) const;
  std::string attestation_path(const std::string& digest, const std::string& envelope_digest) const;
  std::vector<StoredAttestation> attestations_in(const PackageState& s, const std::string& digest) const;
  std::string dir_;
  TrustSet trust_;
  std::string trust_problem_;  // why trust_ is unusable ("" when it is)
  Errc trust_problem_code_ = Errc::internal;
};

// Crash-test support: when KILN_STORE_CRASH_AT=N is set, the Nth durable step of a store
// operation kills the process with SIGKILL (steps counted from 1 by each process).
void crash_point(const char* what);

}  // namespace kiln::store
