#include "store/store.hpp"

#include "core/sparse_writer.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <ctime>

#include "core/archive_reader.hpp"
#include "core/error.hpp"
#include "core/file_io.hpp"
#include "core/format.hpp"
#include "core/sha256.hpp"
#include "core/sparse_writer.hpp"
#include "store/layout.hpp"

namespace kiln::store {
namespace {

// A store folder's entries; one not made yet (no package activated) has none.
std::vector<std::string> list_dir(const std::string& dir) { return list_directory(dir, true); }

// write temp -> fsync -> rename -> fsync dir, with a crash point between each step.
void durable_write(const std::string& path, const std::string& content) {
  replace_file_durably(path, content, 0644, crash_point);
}

// An exclusive lock on the store for one operation.
class Lock {
 public:
  explicit Lock(const std::string& dir) : lock_(dir + "/lock") {}

 private:
  FileLock lock_;
};

std::string hex_of(const std::string& digest) {
  Sha256 d{};
  if (!parse_digest_string(digest, &d)) {
    fail(Errc::invalid_argument, "'" + digest + "' is not a digest (expected sha256:<64 lowercase hex>)");
  }
  return digest.substr(7);
}

}  // namespace

void crash_point(const char* what) {
  static const char* env = std::getenv("KILN_STORE_CRASH_AT");
  static long at = env ? std::atol(env) : 0;
  static long count = 0;
  (void)what;
  if (at > 0 && ++count == at) ::raise(SIGKILL);
}

namespace {

// Removes a store folder that init built and did not finish: only the names init makes.
void remove_partial_store(const std::string& dir) {
  for (const char* sub : {"/trust", "/archives", "/packages"}) {
    for (const std::string& n : list_directory(dir + sub, true)) ::unlink((dir + sub + "/" + n).c_str());
    ::rmdir((dir + sub).c_str());
  }
  for (const std::string& n : list_directory(dir, true)) ::unlink((dir + "/" + n).c_str());
  ::rmdir(dir.c_str());
}

}  // namespace

void Store::init(const std::string& dir, const std::string& trust_path) {
  TrustSet keys = TrustSet::load(trust_path);  // refuse unusable keys before creating anything
  std::string target = dir;
  while (target.size() > 1 && target.back() == '/') target.pop_back();
  struct stat st {};
  if (::lstat(target.c_str(), &st) == 0) {
    if (S_ISLNK(st.st_mode)) fail(Errc::invalid_argument, target + ": is a symbolic link; a store is made in a new or empty folder");
    if (!S_ISDIR(st.st_mode)) fail(Errc::invalid_argument, target + ": not a folder");
    if (!list_dir(target).empty()) fail(Errc::invalid_argument, target + ": not empty; a store is made in a new or empty folder");
  } else if (errno != ENOENT) {
    fail(Errc::io, target + ": " + errno_text(errno));
  }
  // Built whole in a hidden folder beside the target, then renamed onto it (rename(2) replaces
  // an empty folder): a crash leaves the target absent or empty, which a second init accepts,
  // and at worst a hidden ".<name>.init-<random>" folder beside it that nothing reads.
  std::size_t slash = target.rfind('/');
  std::string parent = slash == std::string::npos ? "." : slash == 0 ? "/" : target.substr(0, slash);
  std::string base = slash == std::string::npos ? target : target.substr(slash + 1);
  std::string building = parent + "/." + base + ".init-" + random_hex(8);
  if (::mkdir(building.c_str(), 0755) != 0) fail(Errc::io, building + ": cannot create: " + errno_text(errno));
  struct Partial {
    std::string path;
    bool done = false;
    ~Partial() {
      if (done) return;
      try {
        remove_partial_store(path);
      } catch (...) {  // a leftover hidden folder is harmless; the error that got us here matters
      }
    }
  } partial{building};
  crash_point("store folder made");
  for (const char* sub : {"/trust", "/archives", "/packages", "/attestations"}) {
    if (::mkdir((building + sub).c_str(), 0755) != 0) fail(Errc::io, building + sub + ": " + errno_text(errno));
  }
  std::vector<std::string> sources;
  if (keys.version() != 0) {
    // A trust file (checked by TrustSet::load above): kept whole, as trust/trust.json, so that
    // its next version can be checked against its root (update_trust).
    bool folder = ::stat(trust_path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
    std::string file = folder ? trust_path + "/trust.json" : trust_path;
    std::string text = read_small_file(file, kMaxTrustFileBytes);
    verify_trust_file(text, file, static_cast<std::uint64_t>(std::time(nullptr)));  // the bytes kept are the bytes checked
    durable_write(building + "/trust/trust.json", text);
  } else if (::stat(trust_path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    for (const std::string& n : list_dir(trust_path)) {
      if (n.size() > 4 && (n.compare(n.size() - 4, 4, ".pub") == 0 || n.compare(n.size() - 4, 4, ".pem") == 0)) {
        sources.push_back(trust_path + "/" + n);
      }
    }
  } else {
    sources.push_back(trust_path);
  }
  for (const std::string& src : sources) {
    PublicKey key = PublicKey::from_pem(read_small_file(src, 64 * 1024), src);
    durable_write(building + "/trust/" + key.key_id() + ".pub", key.to_pem());
  }
  durable_write(building + "/" + kStoreFile, kStoreHeader);
  for (const char* sub : {"/archives", "/packages", "/attestations"}) sync_directory(building + sub);
  crash_point("store built, not renamed");
  if (::rename(building.c_str(), target.c_str()) != 0) {
    fail(Errc::io, target + ": cannot move the new store into place: " + errno_text(errno));
  }
  partial.done = true;
  sync_directory(parent);
  crash_point("store renamed into place");
  (void)keys;
}

Store::Store(std::string dir) : dir_(std::move(dir)) {
  std::string path = dir_ + "/" + kStoreFile;
  std::string header;
  try {
    header = read_regular_file_text_nofollow(path, 4096);
  } catch (const Failure& e) {
    if (e.code() != Errc::not_found) throw;
    fail(Errc::invalid_argument, dir_ + ": not a kiln store (no " + kStoreFile + "; make one with `kiln store init`)");
  }
  if (header == kFormat1Header) {
    fail(Errc::unsupported, path + ": a format-1 kiln store (its history has no hash chain); this kiln reads format 2: "
                                   "convert it with `kiln store migrate --store " + dir_ + "`");
  }
  if (header != kStoreHeader) fail(Errc::malformed, path + ": not a format-2 kiln store");
  try {
    trust_ = TrustSet::load(dir_ + "/trust");
  } catch (const Failure& e) {
    // A trust file that expired, or whose keys all expired, still opens the store, so that
    // `kiln store trust` can renew it; everything that needs the keys refuses with why.
    if (e.code() != Errc::refused && e.code() != Errc::invalid_argument) throw;
    if (::access((dir_ + "/trust/trust.json").c_str(), F_OK) != 0) throw;
    trust_problem_ = e.what();
    trust_problem_code_ = e.code();
  }
}

const TrustSet& Store::trust() const {
  if (!trust_problem_.empty()) fail(trust_problem_code_, trust_problem_);
  return trust_;
}

TrustDocument Store::update_trust(const std::string& file) {
  std::string text = read_small_file(file, kMaxTrustFileBytes);
  Lock lock(dir_);
  std::string held_path = dir_ + "/trust/trust.json";
  std::string held;
  try {
    held = read_regular_file_text_nofollow(held_path, kMaxTrustFileBytes);
  } catch (const Failure& e) {
    if (e.code() != Errc::not_found) throw;
    fail(Errc::invalid_argument, dir_ + ": this store trusts a folder of keys, not a trust file; make a store that "
                                        "follows trust files with `kiln store init --trust trust.json`");
  }
  // The file held now was checked when it came in; its expiry is exactly what an update repairs.
  TrustDocument current = verify_trust_file(held, held_path, 0);
  if (text == held) fail(Errc::refused, file + " is the trust file this store already holds (version " +
                                            std::to_string(current.version) + ")");
  auto now = static_cast<std::uint64_t>(std::time(nullptr));
  TrustDocument next = verify_trust_file(text, file, now, &current);
  TrustSet::from_document(next, kReleaseRole, now, file);  // refused if it leaves no release key usable
  crash_point("trust update checked");
  durable_write(held_path, text);
  trust_ = TrustSet::load(dir_ + "/trust");
  trust_problem_.clear();
  return next;
}

ArchiveInfo archive_info(const ArchiveReader& a) {
  return ArchiveInfo{digest_string(a.digest()), a.package(), a.kernel_revision(), a.sequence(), a.file_size(), a.sparse(),
                     a.complete_size()};
}

std::string Store::archive_path(const std::string& digest) const { return dir_ + "/archives/" + hex_of(digest) + ".kiln"; }

void Store::require_present(const std::string& digest) const {
  std::string path = archive_path(digest);
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) fail(Errc::not_found, digest + " is not in this store (no " + path + ")");
    fail(Errc::io, path + ": " + errno_text(errno));
  }
}

ArchiveInfo Store::info(const std::string& digest) const {
  require_present(digest);
  std::string path = archive_path(digest);
  ReadOptions options;
  options.policy = TrustPolicy{&trust(), 1};
  options.follow_links = false;
  std::unique_ptr<ArchiveReader> a = ArchiveReader::open_file(path, options);
  if (digest_string(a->digest()) != digest) {
    fail(Errc::integrity, path + ": holds " + digest_string(a->digest()) + ", not " + digest);
  }
  return archive_info(*a);
}

// The bytes verified are the bytes stored: the source is copied into a temporary file in the
// store first, and that copy, not the source, is verified (signatures, every member) and renamed
// into place. A source that changes during the add can make it fail, never store bytes other
// than those verified.
ArchiveInfo Store::add(const std::string& file) {
  FileDescriptor source = open_regular_file(file, true);
  AtomicFileWriter out(dir_ + "/archives/incoming.kiln", 0644);
  std::vector<char> piece(64 * 1024);  // each piece a point where a crash leaves a partial temporary file
  for (std::uint64_t at = 0;;) {
    std::size_t n = pread_some(source.get(), piece.data(), piece.size(), at, file);
    if (n == 0) break;
    if (at > 0) crash_point("partial write");
    out.write(piece.data(), n);
    at += n;
  }
  ReadOptions options;
  options.policy = TrustPolicy{&trust(), 1};
  options.follow_links = false;
  ArchiveInfo info;
  std::unique_ptr<ArchiveReader> incoming;
  auto naming_the_source = [&](const Failure& e) {  // [[noreturn]] in effect: it throws
    // Name what the user gave, not the temporary copy (removed as this unwinds).
    std::string what = e.what();
    for (std::size_t at; (at = what.find(out.temp_path())) != std::string::npos;) {
      what.replace(at, out.temp_path().size(), file + " (as copied into the store)");
    }
    fail(e.code(), what);
  };
  try {
    incoming = ArchiveReader::open_file(out.temp_path(), options);  // refused here if signed by an unknown key
    incoming->verify_all(2, false, nullptr);
    info = archive_info(*incoming);
  } catch (const Failure& e) {
    naming_the_source(e);
  }
  out.set_target(archive_path(info.digest));
  Lock lock(dir_);
  if (info.sparse) {
    // The same digest held already: whole, it stays; sparse, the two copies' members are joined.
    struct stat st {};
    std::unique_ptr<ArchiveReader> held;
    if (::lstat(archive_path(info.digest).c_str(), &st) == 0) {
      try {
        held = ArchiveReader::open_file(archive_path(info.digest), options);
        held->verify_all(2, false, nullptr);
        if (!held->sparse()) return archive_info(*held);
      } catch (const Failure&) {
        held.reset();  // a damaged copy is replaced, as any add replaces it
      }
    }
    if (held) {
      const std::size_t n = held->member_count();
      std::vector<bool> keep(n);
      for (std::size_t i = 0; i < n; ++i) keep[i] = incoming->member_present(i) || held->member_present(i);
      AtomicFileWriter joined(dir_ + "/archives/joined.kiln", 0644);
      write_sparse_copy({incoming.get(), held.get()}, keep, joined);
      try {
        std::unique_ptr<ArchiveReader> both = ArchiveReader::open_file(joined.temp_path(), options);
        both->verify_all(2, false, nullptr);
        info = archive_info(*both);
      } catch (const Failure& e) {
        fail(e.code(), std::string("joining ") + file + " with the sparse copy held: " + e.what());
      }
      joined.set_target(archive_path(info.digest));
      joined.commit(crash_point);
      return info;
    }
  }
  out.commit(crash_point);
  return info;
}

std::string Store::attestation_path(const std::string& digest, const std::string& envelope_digest) const {
  return dir_ + "/attestations/" + hex_of(digest) + "." + hex_of(envelope_digest) + ".json";
}

HistoryEntry Store::attest(const std::string& digest, const std::string& envelope, const std::string& summary,
                           const std::string& who) {
  if (envelope.size() > kMaxAttestationBytes) {
    fail(Errc::invalid_argument, "an attestation of " + std::to_string(envelope.size()) + " bytes; a store takes at most " +
                                     std::to_string(kMaxAttestationBytes));
  }
  Lock lock(dir_);
  ArchiveInfo info = this->info(digest);
  PackageState s = state(info.package);
  std::string envelope_digest = digest_string(sha256(envelope.data(), envelope.size()));
  for (const HistoryEntry& h : s.history) {
    if (h.action == "attest" && h.digest == digest && h.reason.compare(0, envelope_digest.size(), envelope_digest) == 0) {
      return h;  // already kept (a crash after the record was written, or the same file twice)
    }
  }
  // A store made before attestations has no folder for them.
  std::string folder = dir_ + "/attestations";
  if (::mkdir(folder.c_str(), 0755) != 0 && errno != EEXIST) fail(Errc::io, folder + ": " + errno_text(errno));
  struct stat st {};
  if (::lstat(folder.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) fail(Errc::io, folder + ": not a folder");
  // The file first, then the record that names it: a crash between leaves a file no record
  // names, which nothing reads and gc removes.
  durable_write(attestation_path(digest, envelope_digest), envelope);
  crash_point("attestation written, not recorded");
  HistoryEntry h = decision(static_cast<std::uint64_t>(std::time(nullptr)), "attest", digest, info.sequence, who,
                            envelope_digest + " " + summary);
  append_record(s, h);
  write_state(s);
  return s.history.back();
}

std::vector<StoredAttestation> Store::attestations(const std::string& digest) const {
  ArchiveInfo info = this->info(digest);
  return attestations_in(state(info.package), digest);
}

std::vector<StoredAttestation> Store::attestations_in(const PackageState& s, const std::string& digest) const {
  std::vector<StoredAttestation> out;
  for (const HistoryEntry& h : s.history) {
    if (h.action != "attest" || h.digest != digest) continue;
    StoredAttestation a;
    a.record = h;
    a.envelope_digest = h.reason.substr(0, 71);  // the chain's rules: it begins with sha256:<hex>
    a.path = attestation_path(digest, a.envelope_digest);
    a.envelope = read_regular_file_text_nofollow(a.path, kMaxAttestationBytes);
    if (digest_string(sha256(a.envelope.data(), a.envelope.size())) != a.envelope_digest) {
      fail(Errc::integrity, a.path + ": its bytes are not the attestation history record " + std::to_string(h.number) +
                                " of package " + s.package + " took in (" + a.envelope_digest + ")");
    }
    out.push_back(std::move(a));
  }
  return out;
}

PackageState Store::state(const std::string& package) const {
  if (auto p = format::package_name_problem(package); !p.empty()) fail(Errc::invalid_argument, p);
  std::string path = dir_ + "/packages/" + package + ".state";
  std::string text;
  try {
    text = read_regular_file_text_nofollow(path, kMaxStateFile);
  } catch (const Failure& e) {
    if (e.code() != Errc::not_found) throw;
    PackageState empty;
    empty.package = package;
    return empty;
  }
  return decode_state(text, package, path);
}

ChainHead Store::head(const std::string& package) const { return state(package).head(); }

std::uint64_t Store::check_witness(const std::string& package, const std::string& head_hash) const {
  return check_witness(state(package), head_hash);
}

std::uint64_t Store::check_witness(const PackageState& s, const std::string& head_hash) {
  const std::string& package = s.package;
  if (head_hash == genesis_hash(package)) return 0;
  for (const HistoryEntry& h : s.history) {
    if (record_hash(h) == head_hash) return h.number;
  }
  ChainHead now = s.head();
  fail(Errc::integrity, "package " + package + ": the witnessed head " + head_hash + " is not in its history (" +
                            std::to_string(now.records) + " record(s) ending at " + now.hash +
                            "): the history was truncated, rolled back or rewritten since the witness recorded it");
}

void Store::write_state(const PackageState& s) { durable_write(dir_ + "/packages/" + s.package + ".state", encode_state(s)); }

void Store::refuse(PackageState& s, HistoryEntry h, const std::string& refusal) {
  h.reason = clean_text(h.action + ": " + refusal);  // the attempted action, before it becomes "refused"
  h.action = "refused";
  // The same refusal again since the last accepted decision is counted on its record: asking
  // again and again cannot grow the history (STORE.md "Repeated refusals").
  HistoryEntry* same = nullptr;
  for (auto it = s.history.rbegin(); it != s.history.rend() && it->action == "refused"; ++it) {
    if (it->digest == h.digest && it->reason == h.reason) {
      same = &*it;
      break;
    }
  }
  try {
    if (same != nullptr) {
      ++same->repeats;
      same->last_repeat_time = h.time;
    } else {
      append_record(s, h);
    }
    write_state(s);
  } catch (const Failure& e) {
    // The refusal is the answer; failing to record it (a full disk) must not replace it.
    fail(Errc::refused, refusal + " (and recording this refusal in the history failed: " + e.what() + ")");
  }
  fail(Errc::refused, refusal);
}

HistoryEntry Store::activate(const std::string& digest, const std::string& who, const std::string& reason,
                             const AttestationPolicy& policy) {
  Lock lock(dir_);
  ArchiveInfo info = this->info(digest);
  PackageState s = state(info.package);
  HistoryEntry h = decision(static_cast<std::uint64_t>(std::time(nullptr)), "activate", digest, info.sequence, who, reason);
  std::string refusal;
  bool ran_before = std::any_of(s.history.begin(), s.history.end(), [&](const HistoryEntry& e) {
    return (e.action == "activate" || e.action == "rollback") && e.digest == digest;
  });
  if (s.active == digest) {
    refusal = digest + " is already the active archive of " + info.package;
  } else if (info.sequence < s.highest_sequence) {
    refusal = "sequence " + std::to_string(info.sequence) + " is below " + std::to_string(s.highest_sequence) +
              ", the highest ever activated for " + info.package +
              (ran_before ? "; going back to an archive this package ran is a rollback: `kiln store rollback " +
                                info.package + " --to " + digest + "`"
                          : "; this archive was never active for " + info.package +
                                ", so it cannot be rolled back to either (anti-rollback)");
  } else if (info.sequence == s.highest_sequence && s.highest_sequence != 0) {
    refusal = ran_before ? "sequence " + std::to_string(info.sequence) + " is this archive's own: it was active for " +
                               info.package + " before, and going back to it is a roll-forward: `kiln store rollback " +
                               info.package + " --to " + digest + "`"
                         : "sequence " + std::to_string(info.sequence) + " was already activated for " + info.package +
                               " as another archive; a new release needs a higher sequence";
  }
  if (refusal.empty() && policy) refusal = policy(digest, attestations_in(s, digest));
  if (!refusal.empty()) refuse(s, h, refusal);
  append_record(s, h);  // checks the rules once more: a decision they forbid is never recorded
  write_state(s);
  return s.history.back();
}

HistoryEntry Store::rollback(const std::string& package, const std::string& to, const std::string& who,
                             const std::string& reason) {
  Lock lock(dir_);
  PackageState s = state(package);
  std::vector<std::string> activated;  // digests in the order they became active
  for (const HistoryEntry& h : s.history) {
    if (h.action == "activate" || h.action == "rollback") activated.push_back(h.digest);
  }
  std::string target = to;
  std::string refusal;
  if (target.empty()) {
    for (auto it = activated.rbegin(); it != activated.rend(); ++it) {
      if (*it != s.active) {
        target = *it;
        break;
      }
    }
    if (target.empty()) refusal = package + " has no earlier active archive to roll back to";
  } else if (std::find(activated.begin(), activated.end(), target) == activated.end()) {
    // Only archives in the store are refused on the record: the set of distinct refusals, and
    // so the history, stays bounded by what the store holds.
    require_present(target);
    refusal = target + " was never active for " + package + "; rollback goes only to archives this package has run";
  } else if (target == s.active) {
    refusal = target + " is already the active archive of " + package;
  }
  std::uint64_t sequence = 0;
  if (refusal.empty()) {
    ArchiveInfo info = this->info(target);  // still in the store, still trusted
    if (info.package != package) refusal = target + " belongs to package " + info.package;
    sequence = info.sequence;
  }
  HistoryEntry h = decision(static_cast<std::uint64_t>(std::time(nullptr)), "rollback", target, sequence, who, reason);
  if (!refusal.empty()) refuse(s, h, refusal);
  append_record(s, h);
  write_state(s);
  return s.history.back();
}

std::vector<std::string> Store::packages() const {
  std::vector<std::string> out;
  for (const std::string& n : list_dir(dir_ + "/packages")) {
    if (n.size() > 6 && n.compare(n.size() - 6, 6, ".state") == 0) out.push_back(n.substr(0, n.size() - 6));
  }
  return out;
}

std::vector<ArchiveInfo> Store::archives() const {
  std::vector<ArchiveInfo> out;
  for (const std::string& n : list_dir(dir_ + "/archives")) {
    if (n.size() != 64 + 5 || n.compare(64, 5, ".kiln") != 0) continue;
    out.push_back(info("sha256:" + n.substr(0, 64)));
  }
  return out;
}

std::vector<std::string> Store::verify() const {
  std::vector<std::string> problems;
  for (const std::string& n : list_dir(dir_ + "/archives")) {
    if (n.size() != 64 + 5 || n.compare(64, 5, ".kiln") != 0) {
      if (n.find(".tmp-") == std::string::npos) problems.push_back("archives/" + n + ": not an archive name");
      continue;
    }
    try {
      ReadOptions options;
      options.policy = TrustPolicy{&trust(), 1};
      options.follow_links = false;
      std::unique_ptr<ArchiveReader> a = ArchiveReader::open_file(dir_ + "/archives/" + n, options);
      a->verify_all(2, false, nullptr);
      if (sha256_hex(a->digest()) != n.substr(0, 64)) problems.push_back("archives/" + n + ": holds another digest");
    } catch (const Failure& e) {
      problems.push_back(e.what());
    }
  }
  for (const std::string& p : packages()) {
    try {
      PackageState s = state(p);
      if (!s.active.empty()) info(s.active);
      // The history's claims against the signed archives: each digest it decided on, if still
      // here, is of this package and of the sequence the history gives it.
      std::vector<std::string> seen;
      for (const HistoryEntry& h : s.history) {
        if (h.action == "refused" || std::find(seen.begin(), seen.end(), h.digest) != seen.end()) continue;
        seen.push_back(h.digest);
        struct stat st {};
        if (::lstat(archive_path(h.digest).c_str(), &st) != 0) continue;  // removed by gc
        try {
          attestations_in(s, h.digest);  // each kept attestation's bytes against its record
        } catch (const Failure& e) {
          problems.push_back(e.what());
        }
        ArchiveInfo a = info(h.digest);
        if (a.package != p || a.sequence != h.sequence) {
          problems.push_back("package " + p + ": history record " + std::to_string(h.number) + " gives " + h.digest +
                             " package " + p + " sequence " + std::to_string(h.sequence) + "; the archive is package " +
                             a.package + " sequence " + std::to_string(a.sequence));
        }
      }
    } catch (const Failure& e) {
      problems.push_back("package " + p + ": " + e.what());
    }
  }
  return problems;
}

std::vector<std::string> Store::gc(unsigned keep) {
  Lock lock(dir_);
  std::vector<std::string> removed;
  std::vector<std::string> kept;
  std::vector<std::pair<std::string, std::uint64_t>> highest;  // package -> highest activated sequence
  for (const std::string& p : packages()) {
    PackageState s = state(p);
    highest.emplace_back(p, s.highest_sequence);
    if (!s.active.empty()) kept.push_back(s.active);
    unsigned previous = 0;
    for (auto it = s.history.rbegin(); it != s.history.rend() && previous < keep; ++it) {
      if ((it->action == "activate" || it->action == "rollback") && it->digest != s.active &&
          std::find(kept.begin(), kept.end(), it->digest) == kept.end()) {
        kept.push_back(it->digest);
        ++previous;
      }
    }
  }
  for (const ArchiveInfo& a : archives()) {
    if (std::find(kept.begin(), kept.end(), a.digest) != kept.end()) continue;
    auto h = std::find_if(highest.begin(), highest.end(), [&](const auto& x) { return x.first == a.package; });
    // Never activated packages, and releases above everything activated, are still to come.
    if (h == highest.end() || a.sequence > h->second) continue;
    crash_point("removing an archive");
    if (::unlink(archive_path(a.digest).c_str()) != 0) fail(Errc::io, archive_path(a.digest) + ": " + errno_text(errno));
    removed.push_back(a.digest);
  }
  // Attestations of archives no longer here, and files no record names (a crash between an
  // attestation's file and its record).
  std::vector<std::string> named;
  for (const std::string& p : packages()) {
    for (const HistoryEntry& h : state(p).history) {
      if (h.action == "attest") named.push_back(hex_of(h.digest) + "." + h.reason.substr(7, 64) + ".json");
    }
  }
  for (const std::string& n : list_dir(dir_ + "/attestations")) {
    bool archive_kept = n.size() > 64 && ::access(archive_path("sha256:" + n.substr(0, 64)).c_str(), F_OK) == 0;
    if (archive_kept && std::find(named.begin(), named.end(), n) != named.end()) continue;
    ::unlink((dir_ + "/attestations/" + n).c_str());
  }
  // Temporary files left by a writer that was killed mid-change: no writer is running now.
  for (const char* sub : {"/archives/", "/packages/", "/trust/", "/attestations/", "/"}) {
    for (const std::string& n : list_dir(dir_ + sub)) {
      if (n.find(".tmp-") != std::string::npos) ::unlink((dir_ + sub + n).c_str());
    }
  }
  sync_directory(dir_ + "/archives");
  return removed;
}

}  // namespace kiln::store
