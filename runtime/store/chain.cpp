#include "store/chain.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/sha256.hpp"

namespace kiln::store {
namespace {

constexpr std::size_t kMaxText = 512;  // who and reason: a record stays small whatever is passed

}  // namespace

std::string clean_text(const std::string& s) {
  std::string out = s.empty() ? "-" : s.substr(0, kMaxText);
  for (char& c : out) {
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
  }
  return out;
}

namespace {

std::string hex_sha256(const std::string& bytes) { return sha256_hex(sha256(bytes.data(), bytes.size())); }

bool is_hex64(const std::string& s) {
  return s.size() == 64 && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

std::uint64_t to_u64(const std::string& s, const std::string& where) {
  if (s.empty() || s.size() > 20 || s.find_first_not_of("0123456789") != std::string::npos ||
      (s.size() > 1 && s[0] == '0')) {
    fail(Errc::malformed, where + ": '" + s + "' is not a number in canonical form");
  }
  try {
    return std::stoull(s);
  } catch (const std::exception&) {
    fail(Errc::malformed, where + ": '" + s + "' is out of range");
  }
}

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> f;
  std::size_t pos = 0;
  while (true) {
    std::size_t tab = line.find('\t', pos);
    f.push_back(line.substr(pos, tab == std::string::npos ? std::string::npos : tab - pos));
    if (tab == std::string::npos) break;
    pos = tab + 1;
  }
  return f;
}

std::string dash(const std::string& s) { return s.empty() ? "-" : s; }

// A record that changed the active archive (an attest or a refusal does not).
bool decides(const HistoryEntry& e) { return e.action == "activate" || e.action == "rollback"; }
std::string undash(const std::string& s) { return s == "-" ? "" : s; }

// The rules as a replay: what `h` leaves after `s`, or the reason it cannot follow `s`. The
// writer's own checks decide first (with the messages users see); this is the same rule set,
// applied again to every record when a state file is read.
std::string replay(const PackageState& s, const HistoryEntry& h, std::string* active, std::uint64_t* highest) {
  *active = s.active;
  *highest = s.highest_sequence;
  if (!h.digest.empty() && !is_digest_string(h.digest)) return "its digest '" + h.digest + "' is not sha256:<64 lowercase hex>";
  if (h.action == "refused") return "";
  if (h.digest.empty()) return "an " + h.action + " names no digest";
  const HistoryEntry* named = nullptr;  // the last record that gave this digest a sequence
  const HistoryEntry* earlier = nullptr;  // the last that made it active
  for (const HistoryEntry& e : s.history) {
    if (e.action != "refused" && e.digest == h.digest) named = &e;
    if (decides(e) && e.digest == h.digest) earlier = &e;
  }
  if (named != nullptr && named->sequence != h.sequence) {
    return "it gives " + h.digest + " sequence " + std::to_string(h.sequence) + ", record " +
           std::to_string(named->number) + " gave it " + std::to_string(named->sequence);
  }
  if (h.action == "attest") {
    // An attestation kept beside the archive (STORE.md): it changes what is known, not what runs.
    if (h.reason.compare(0, 7, "sha256:") != 0 || !is_digest_string(h.reason.substr(0, 71))) {
      return "an attest record's reason must begin with the attestation's sha256:<64 lowercase hex>";
    }
    return "";
  }
  if (h.digest == s.active) return h.digest + " was already active";
  if (h.action == "activate") {
    bool first = s.highest_sequence == 0;
    if (!(h.sequence > s.highest_sequence || (first && h.sequence == 0))) {
      return "it activates sequence " + std::to_string(h.sequence) + ", not above the highest " +
             std::to_string(s.highest_sequence) + " (anti-rollback)";
    }
    *active = h.digest;
    *highest = h.sequence;
    return "";
  }
  if (h.action == "rollback") {
    if (earlier == nullptr) return "it rolls back to " + h.digest + ", which was never active";
    *active = h.digest;  // the highest stays: it never goes down
    return "";
  }
  return "unknown action '" + h.action + "'";
}

std::string state_summary(const std::string& active, std::uint64_t highest) {
  return "active " + dash(active) + ", highest " + std::to_string(highest);
}

}  // namespace

ChainHead PackageState::head() const {
  if (history.empty()) return ChainHead{genesis_hash(package), 0};
  return ChainHead{record_hash(history.back()), history.size()};
}

HistoryEntry decision(std::uint64_t time, const std::string& action, const std::string& digest, std::uint64_t sequence,
                      const std::string& who, const std::string& reason) {
  HistoryEntry h;
  h.time = time;
  h.action = action;
  h.digest = digest;
  h.sequence = sequence;
  h.who = who;
  h.reason = reason;
  return h;
}

std::uint64_t PackageState::active_sequence() const {
  for (auto it = history.rbegin(); it != history.rend(); ++it) {
    if (it->action == "activate" || it->action == "rollback") return it->sequence;
  }
  return 0;
}

std::string genesis_hash(const std::string& package) { return hex_sha256("kiln-store-genesis\t" + package + "\n"); }

std::string encode_record(const HistoryEntry& h) {
  return "record\t" + std::to_string(h.number) + "\t" + h.previous + "\t" + std::to_string(h.time) + "\t" + h.action +
         "\t" + dash(h.digest) + "\t" + std::to_string(h.sequence) + "\t" + h.who + "\t" + h.reason + "\t" +
         dash(h.active_after) + "\t" + std::to_string(h.highest_after) + "\n";
}

std::string record_hash(const HistoryEntry& h) { return hex_sha256(encode_record(h)); }

void append_record(PackageState& s, HistoryEntry h) {
  h.number = s.history.size() + 1;
  h.previous = s.head().hash;
  h.who = clean_text(h.who);
  h.reason = clean_text(h.reason);
  h.repeats = 0;
  h.last_repeat_time = 0;
  std::string why = replay(s, h, &h.active_after, &h.highest_after);
  if (!why.empty()) fail(Errc::internal, "package " + s.package + ": refusing to record a decision the rules forbid: " + why);
  s.active = h.active_after;
  s.highest_sequence = h.highest_after;
  s.history.push_back(std::move(h));
}

std::string encode_state(const PackageState& s) {
  ChainHead head = s.head();
  std::string out = "kiln-store-state\t2\npackage\t" + s.package + "\nactive\t" + dash(s.active) + "\nhighest\t" +
                    std::to_string(s.highest_sequence) + "\nhead\t" + head.hash + "\t" + std::to_string(head.records) + "\n";
  for (const HistoryEntry& h : s.history) out += encode_record(h);
  for (const HistoryEntry& h : s.history) {
    if (h.repeats > 0) {
      out += "repeated\t" + std::to_string(h.number) + "\t" + std::to_string(h.repeats) + "\t" +
             std::to_string(h.last_repeat_time) + "\n";
    }
  }
  return out;
}

PackageState decode_state(const std::string& text, const std::string& package, const std::string& where) {
  if (text.empty()) fail(Errc::malformed, where + ": empty state file");
  if (text.back() != '\n') fail(Errc::malformed, where + ": the last line is cut short (no line end)");
  std::vector<std::string> lines;
  for (std::size_t pos = 0; pos < text.size();) {
    std::size_t nl = text.find('\n', pos);
    lines.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  auto at = [&](std::size_t i) { return where + ":" + std::to_string(i + 1); };
  if (lines[0] == "kiln-store-state\t1") {
    fail(Errc::unsupported, where + ": a format-1 state file (history without a hash chain); run `kiln store migrate`");
  }
  if (lines[0] != "kiln-store-state\t2") fail(Errc::malformed, at(0) + ": not a kiln store state file (format 2)");
  auto field = [&](std::size_t i, const char* name, std::size_t count) {
    if (i >= lines.size()) fail(Errc::malformed, where + ": ends before its '" + name + "' line");
    std::vector<std::string> f = split_tabs(lines[i]);
    if (f.size() != count || f[0] != name) fail(Errc::malformed, at(i) + ": expected the '" + name + "' line");
    return f;
  };
  PackageState s;
  s.package = field(1, "package", 2)[1];
  if (s.package != package) fail(Errc::malformed, at(1) + ": names package '" + s.package + "', not '" + package + "'");
  std::string active = undash(field(2, "active", 2)[1]);
  if (!active.empty() && !is_digest_string(active)) fail(Errc::malformed, at(2) + ": bad active digest");
  std::uint64_t highest = to_u64(field(3, "highest", 2)[1], at(3));
  std::vector<std::string> head = field(4, "head", 3);
  if (!is_hex64(head[1])) fail(Errc::malformed, at(4) + ": the head is not 64 lowercase hex");
  std::uint64_t head_records = to_u64(head[2], at(4));

  // The records: each follows the previous one, and replaying them under the rules gives what
  // each says it left.
  std::size_t i = 5;
  for (; i < lines.size() && lines[i].compare(0, 7, "record\t") == 0; ++i) {
    std::vector<std::string> f = split_tabs(lines[i]);
    if (f.size() != 11) fail(Errc::malformed, at(i) + ": a record has 11 fields, this one " + std::to_string(f.size()));
    HistoryEntry h;
    h.number = to_u64(f[1], at(i));
    h.previous = f[2];
    h.time = to_u64(f[3], at(i));
    h.action = f[4];
    h.digest = undash(f[5]);
    h.sequence = to_u64(f[6], at(i));
    h.who = f[7];
    h.reason = f[8];
    h.active_after = undash(f[9]);
    h.highest_after = to_u64(f[10], at(i));
    std::string n = std::to_string(s.history.size() + 1);
    if (h.number != s.history.size() + 1) {
      fail(Errc::integrity, at(i) + ": history record " + n + " is numbered " + std::to_string(h.number) +
                                " (records removed, duplicated or reordered)");
    }
    if (encode_record(h) != lines[i] + "\n") fail(Errc::malformed, at(i) + ": record " + n + " is not in canonical form");
    ChainHead before = s.head();
    if (h.previous != before.hash) {
      fail(Errc::integrity, at(i) + ": history record " + n + " does not follow " +
                                (s.history.empty() ? std::string("the genesis value") : "record " + std::to_string(before.records)) +
                                ": it names " + h.previous + " as previous, which hashes to " + before.hash +
                                " (a record edited, removed, duplicated or reordered)");
    }
    std::string after_active;
    std::uint64_t after_highest = 0;
    std::string why = replay(s, h, &after_active, &after_highest);
    if (!why.empty()) fail(Errc::integrity, at(i) + ": history record " + n + " breaks the store's rules: " + why);
    if (after_active != h.active_after || after_highest != h.highest_after) {
      fail(Errc::integrity, at(i) + ": history record " + n + " says it left " + state_summary(h.active_after, h.highest_after) +
                                "; replaying the history gives " + state_summary(after_active, after_highest));
    }
    s.active = after_active;
    s.highest_sequence = after_highest;
    s.history.push_back(std::move(h));
  }
  // Repeat counts of refusals: outside the chain, each names a refused record, in order.
  std::uint64_t last = 0;
  for (; i < lines.size(); ++i) {
    std::vector<std::string> f = split_tabs(lines[i]);
    if (f.size() != 4 || f[0] != "repeated") fail(Errc::malformed, at(i) + ": unexpected line");
    std::uint64_t n = to_u64(f[1], at(i));
    if (n <= last || n > s.history.size() || s.history[n - 1].action != "refused") {
      fail(Errc::malformed, at(i) + ": a repeat count must name a refused record, in increasing order");
    }
    s.history[n - 1].repeats = to_u64(f[2], at(i));
    s.history[n - 1].last_repeat_time = to_u64(f[3], at(i));
    if (s.history[n - 1].repeats == 0) fail(Errc::malformed, at(i) + ": a repeat count of 0");
    last = n;
  }
  // The state is bound to the chain: the head line and the state lines agree with the last record.
  ChainHead real = s.head();
  if (head[1] != real.hash || head_records != real.records) {
    fail(Errc::integrity, at(4) + ": the head line says " + std::to_string(head_records) + " record(s) ending at " + head[1] +
                              ", the history holds " + std::to_string(real.records) + " ending at " + real.hash +
                              " (history truncated, extended or edited)");
  }
  if (highest != s.highest_sequence) {
    fail(Errc::integrity, at(3) + ": highest " + std::to_string(highest) + " disagrees with the history, which leaves " +
                              std::to_string(s.highest_sequence));
  }
  if (active != s.active) {
    fail(Errc::integrity, at(2) + ": active " + dash(active) + " disagrees with the history, which leaves " + dash(s.active) +
                              " active");
  }
  return s;
}

}  // namespace kiln::store
