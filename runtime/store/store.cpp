#include "store.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <sstream>

#include "archive_reader.hpp"
#include "error.hpp"
#include "file_io.hpp"
#include "format.hpp"
#include "sha256.hpp"

namespace kiln::store {
namespace {

constexpr const char* kStoreFile = "store.toml";
constexpr const char* kStoreHeader = "# kiln store, format 1. Do not edit: use `kiln store`.\nformat = 1\ntrust = \"trust\"\n";

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

std::string clean_field(const std::string& s) {
  std::string out = s.empty() ? "-" : s;
  for (char& c : out) {
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
  }
  return out;
}

std::uint64_t to_u64(const std::string& s, const std::string& where) {
  if (s.empty() || s.size() > 20 || s.find_first_not_of("0123456789") != std::string::npos) {
    fail(Errc::malformed, where + ": '" + s + "' is not a number");
  }
  return std::stoull(s);
}

std::string encode_state(const PackageState& s) {
  std::ostringstream out;
  out << "kiln-store-state\t1\npackage\t" << s.package << "\nactive\t" << (s.active.empty() ? "-" : s.active)
      << "\nhighest\t" << s.highest_sequence << "\n";
  for (const HistoryEntry& h : s.history) {
    out << "history\t" << h.number << "\t" << h.time << "\t" << h.action << "\t" << (h.digest.empty() ? "-" : h.digest)
        << "\t" << h.sequence << "\t" << clean_field(h.who) << "\t" << clean_field(h.reason) << "\n";
  }
  return out.str();
}

PackageState decode_state(const std::string& text, const std::string& where) {
  PackageState s;
  std::istringstream in(text);
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    std::vector<std::string> f;
    std::size_t pos = 0;
    while (true) {
      std::size_t tab = line.find('\t', pos);
      f.push_back(line.substr(pos, tab == std::string::npos ? std::string::npos : tab - pos));
      if (tab == std::string::npos) break;
      pos = tab + 1;
    }
    std::string at = where + ":" + std::to_string(line_no);
    if (line_no == 1) {
      if (f.size() != 2 || f[0] != "kiln-store-state" || f[1] != "1") fail(Errc::malformed, at + ": not a kiln store state file");
    } else if (f[0] == "package" && f.size() == 2) {
      s.package = f[1];
    } else if (f[0] == "active" && f.size() == 2) {
      s.active = f[1] == "-" ? "" : f[1];
    } else if (f[0] == "highest" && f.size() == 2) {
      s.highest_sequence = to_u64(f[1], at);
    } else if (f[0] == "history" && f.size() == 8) {
      HistoryEntry h{to_u64(f[1], at), to_u64(f[2], at), f[3], f[4] == "-" ? "" : f[4], to_u64(f[5], at), f[6], f[7]};
      s.history.push_back(h);
    } else {
      fail(Errc::malformed, at + ": unexpected line");
    }
  }
  if (line_no == 0) fail(Errc::malformed, where + ": empty state file");
  Sha256 check{};
  if (!s.active.empty() && !parse_digest_string(s.active, &check)) fail(Errc::malformed, where + ": bad active digest");
  return s;
}

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

void Store::init(const std::string& dir, const std::string& trust_path) {
  TrustSet keys = TrustSet::load(trust_path);  // refuse unusable keys before creating anything
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) fail(Errc::io, dir + ": cannot create: " + errno_text(errno));
  if (!list_dir(dir).empty()) fail(Errc::invalid_argument, dir + ": not empty; a store is made in a new or empty folder");
  for (const char* sub : {"/trust", "/archives", "/packages"}) {
    if (::mkdir((dir + sub).c_str(), 0755) != 0) fail(Errc::io, dir + sub + ": " + errno_text(errno));
  }
  struct stat st {};
  std::vector<std::string> sources;
  if (::stat(trust_path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
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
    durable_write(dir + "/trust/" + key.key_id() + ".pub", key.to_pem());
  }
  durable_write(dir + "/" + kStoreFile, kStoreHeader);
  (void)keys;
}

Store::Store(std::string dir) : dir_(std::move(dir)) {
  std::string header;
  try {
    header = read_small_file(dir_ + "/" + kStoreFile, 4096);
  } catch (const Error&) {
    fail(Errc::invalid_argument, dir_ + ": not a kiln store (no " + kStoreFile + "; make one with `kiln store init`)");
  }
  if (header != kStoreHeader) fail(Errc::malformed, dir_ + "/" + kStoreFile + ": not a format-1 kiln store");
  trust_ = TrustSet::load(dir_ + "/trust");
}

std::string Store::archive_path(const std::string& digest) const { return dir_ + "/archives/" + hex_of(digest) + ".kiln"; }

ArchiveInfo Store::info(const std::string& digest) const {
  std::string path = archive_path(digest);
  ReadOptions options;
  options.policy = TrustPolicy{&trust_, 1};
  std::unique_ptr<Archive> a = Archive::open_file(path, options);
  if (digest_string(a->digest()) != digest) {
    fail(Errc::integrity, path + ": holds " + digest_string(a->digest()) + ", not " + digest);
  }
  return ArchiveInfo{digest, a->index().package, a->index().kernel_revision, a->index().sequence, a->file_size()};
}

ArchiveInfo Store::add(const std::string& file) {
  ReadOptions options;
  options.policy = TrustPolicy{&trust_, 1};
  std::unique_ptr<Archive> a = Archive::open_file(file, options);  // refused here if signed by an unknown key
  a->verify_all(2, false, nullptr);
  ArchiveInfo info{digest_string(a->digest()), a->index().package, a->index().kernel_revision, a->index().sequence,
                   a->file_size()};
  ByteView bytes = a->unchecked_file_bytes();
  std::string content(reinterpret_cast<const char*>(bytes.data), bytes.size);
  Lock lock(dir_);
  durable_write(archive_path(info.digest), content);
  return info;
}

PackageState Store::state(const std::string& package) const {
  if (auto p = format::package_name_problem(package); !p.empty()) fail(Errc::invalid_argument, p);
  std::string path = dir_ + "/packages/" + package + ".state";
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    PackageState empty;
    empty.package = package;
    return empty;
  }
  return decode_state(read_small_file(path, 64ull << 20), path);
}

void Store::write_state(const PackageState& s) { durable_write(dir_ + "/packages/" + s.package + ".state", encode_state(s)); }

void Store::refuse(PackageState& s, HistoryEntry h, const std::string& refusal) {
  h.reason = h.action + ": " + refusal;  // the attempted action, before it becomes "refused"
  h.action = "refused";
  s.history.push_back(h);
  write_state(s);
  fail(Errc::refused, refusal);
}

HistoryEntry Store::activate(const std::string& digest, const std::string& who, const std::string& reason) {
  Lock lock(dir_);
  ArchiveInfo info = this->info(digest);
  PackageState s = state(info.package);
  HistoryEntry h{s.history.size() + 1, static_cast<std::uint64_t>(std::time(nullptr)), "activate", digest, info.sequence, who, reason};
  std::string refusal;
  if (s.active == digest) {
    refusal = digest + " is already the active archive of " + info.package;
  } else if (info.sequence < s.highest_sequence) {
    bool ran_before = std::any_of(s.history.begin(), s.history.end(), [&](const HistoryEntry& e) {
      return (e.action == "activate" || e.action == "rollback") && e.digest == digest;
    });
    refusal = "sequence " + std::to_string(info.sequence) + " is below " + std::to_string(s.highest_sequence) +
              ", the highest ever activated for " + info.package +
              (ran_before ? "; going back to an archive this package ran is a rollback: `kiln store rollback " +
                                info.package + " --to " + digest + "`"
                          : "; this archive was never active for " + info.package +
                                ", so it cannot be rolled back to either (anti-rollback)");
  } else if (info.sequence == s.highest_sequence && s.highest_sequence != 0) {
    refusal = "sequence " + std::to_string(info.sequence) + " was already activated for " + info.package +
              " as another archive; a new release needs a higher sequence";
  }
  if (!refusal.empty()) refuse(s, h, refusal);
  s.active = digest;
  s.highest_sequence = info.sequence;
  s.history.push_back(h);
  write_state(s);
  return h;
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
    hex_of(target);
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
  HistoryEntry h{s.history.size() + 1, static_cast<std::uint64_t>(std::time(nullptr)), "rollback", target, sequence, who, reason};
  if (!refusal.empty()) refuse(s, h, refusal);
  s.active = target;
  s.history.push_back(h);
  write_state(s);
  return h;
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
      options.policy = TrustPolicy{&trust_, 1};
      std::unique_ptr<Archive> a = Archive::open_file(dir_ + "/archives/" + n, options);
      a->verify_all(2, false, nullptr);
      if (sha256_hex(a->digest()) != n.substr(0, 64)) problems.push_back("archives/" + n + ": holds another digest");
    } catch (const Error& e) {
      problems.push_back(e.what());
    }
  }
  for (const std::string& p : packages()) {
    try {
      PackageState s = state(p);
      if (!s.active.empty()) info(s.active);
    } catch (const Error& e) {
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
  // Temporary files left by a writer that was killed mid-change: no writer is running now.
  for (const char* sub : {"/archives/", "/packages/", "/trust/", "/"}) {
    for (const std::string& n : list_dir(dir_ + sub)) {
      if (n.find(".tmp-") != std::string::npos) ::unlink((dir_ + sub + n).c_str());
    }
  }
  sync_directory(dir_ + "/archives");
  return removed;
}

}  // namespace kiln::store
