// The content-addressed store: a folder where an operator keeps signed archives by digest,
// one active archive per package, and an append-only history of every decision. Every change
// is made crash-safe (write a temporary file, fsync, rename, fsync the folder) under an
// exclusive flock that the kernel releases when its holder dies. schema/STORE.md documents the
// layout and the rules (anti-rollback, gc).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "trust.hpp"

namespace kiln::store {

struct HistoryEntry {
  std::uint64_t number = 0;   // 1, 2, 3... per package
  std::uint64_t time = 0;     // seconds since the epoch
  std::string action;         // "activate", "rollback", "refused"
  std::string digest;         // "sha256:..."
  std::uint64_t sequence = 0; // the archive's sequence
  std::string who;
  std::string reason;
};

struct PackageState {
  std::string package;
  std::string active;                  // digest, or "" before the first activation
  std::uint64_t highest_sequence = 0;  // the highest sequence ever activated
  std::vector<HistoryEntry> history;
};

struct ArchiveInfo {
  std::string digest, package, kernel_revision;
  std::uint64_t sequence = 0;
  std::uint64_t size = 0;
};

class Store {
 public:
  // Creates a store at `dir`, copying the trust keys (a PEM file or a folder of them) in.
  static void init(const std::string& dir, const std::string& trust_path);
  explicit Store(std::string dir);  // opens; throws if `dir` is not a store

  const std::string& dir() const { return dir_; }
  const TrustSet& trust() const { return trust_; }
  std::string archive_path(const std::string& digest) const;

  // Verifies (signatures against the store's keys, every member) and copies in; returns it.
  ArchiveInfo add(const std::string& file);
  // Makes `digest` the package's active archive, refusing rollbacks the rules forbid.
  HistoryEntry activate(const std::string& digest, const std::string& who, const std::string& reason);
  // Goes back to the previously active archive of `package`, or to `to` (which must be in
  // the package's history of activations).
  HistoryEntry rollback(const std::string& package, const std::string& to, const std::string& who,
                        const std::string& reason);
  PackageState state(const std::string& package) const;
  std::vector<std::string> packages() const;
  std::vector<ArchiveInfo> archives() const;
  // Re-verifies every archive; returns one line per problem (empty when all hold).
  std::vector<std::string> verify() const;
  // Removes what no rule keeps (see STORE.md); returns the removed digests.
  std::vector<std::string> gc(unsigned keep);

  ArchiveInfo info(const std::string& digest) const;  // opens and authenticates it

 private:
  void write_state(const PackageState& s);
  // Records a refused activate/rollback in the package's history (durably), then throws it.
  [[noreturn]] void refuse(PackageState& s, HistoryEntry h, const std::string& refusal);
  std::string dir_;
  TrustSet trust_;
};

// Crash-test support: when KILN_STORE_CRASH_AT=N is set, the Nth durable step of a store
// operation kills the process with SIGKILL (steps counted from 1 by each process).
void crash_point(const char* what);

}  // namespace kiln::store
