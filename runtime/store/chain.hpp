// A package's state file, format 2: every decision as one record of a SHA-256 hash chain, and
// the state (the active digest, the highest sequence ever activated) bound to the chain's head.
// Decoding verifies all of it: that each record follows the previous one, that replaying the
// records under the store's rules gives what each record says it left, and that the state lines
// and the head agree with the last record. So an edit of one line, a truncated, duplicated or
// reordered history is refused, naming what disagrees. Only a whole consistent rewrite passes,
// and only a head witnessed elsewhere catches that (schema/STORE.md, schema/SECURITY.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::store {

struct HistoryEntry {
  std::uint64_t number = 0;    // 1, 2, 3... per package
  std::uint64_t time = 0;      // seconds since the epoch
  std::string action;          // "activate", "rollback", "attest", "refused"
  std::string digest;          // "sha256:...", or "" (a rollback refused for want of a target)
  std::uint64_t sequence = 0;  // the archive's sequence
  std::string who;
  std::string reason;
  // What the record left: chained, so that the state can be checked against the history.
  std::string active_after;          // "" while nothing is active
  std::uint64_t highest_after = 0;
  std::string previous;              // hex SHA-256 of the previous record; the genesis value for #1
  // The same refusal repeated after this record was written: counted here, not appended
  // (STORE.md "Repeated refusals"); outside the chain, so not tamper-evident.
  std::uint64_t repeats = 0;
  std::uint64_t last_repeat_time = 0;
};

// A new decision, before append_record numbers and chains it.
HistoryEntry decision(std::uint64_t time, const std::string& action, const std::string& digest, std::uint64_t sequence,
                      const std::string& who, const std::string& reason);

struct ChainHead {
  std::string hash;           // hex SHA-256 of the last record, or the genesis value
  std::uint64_t records = 0;  // how many records the chain holds
};

struct PackageState {
  std::string package;
  std::string active;                  // digest, or "" before the first activation
  std::uint64_t highest_sequence = 0;  // the highest sequence ever activated
  std::vector<HistoryEntry> history;
  ChainHead head() const;
  // The sequence the history records for the active archive (its last accepted record); 0 if none.
  std::uint64_t active_sequence() const;
};

// SHA-256 of "kiln-store-genesis\t<package>\n", in hex: the "previous" of record 1, so that a
// chain cannot be moved from one package to another.
std::string genesis_hash(const std::string& package);
// The record's line, byte for byte, its "\n" included; the record's hash is SHA-256 of it.
std::string encode_record(const HistoryEntry& h);
std::string record_hash(const HistoryEntry& h);

// Appends a decision: numbers and chains it, fills in what it leaves, and applies the same
// replay rules decode_state checks (a decision the rules forbid is an Errc::internal error,
// never a record). Who and reason are cleaned (no tab or line break, at most 512 bytes).
void append_record(PackageState& s, HistoryEntry h);

// Who and reason as a record keeps them: tabs and line breaks become spaces, at most 512
// bytes, "-" when empty.
std::string clean_text(const std::string& s);

std::string encode_state(const PackageState& s);
// Parses and verifies a format-2 state file of `package`; errors start with `where`.
PackageState decode_state(const std::string& text, const std::string& package, const std::string& where);

}  // namespace kiln::store
