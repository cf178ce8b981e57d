// The store against whoever can write its folder: forged or cut histories, planted links and
// FIFOs, a source changed during `store add`, a full disk, killed inits, hostile OCI layouts.
// Each test names the refusal it expects; see schema/SECURITY.md for the claims they hold.
#include <gtest/gtest.h>
#include <pwd.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "core/error.hpp"
#include "core/file_io.hpp"
#include "store/oci.hpp"
#include "store/store.hpp"
#include "store_fixture.hpp"

namespace kiln {
namespace {



// The message of the kiln::Failure `f` throws, and that it has `code`; "" if it throws nothing.
template <typename F>
std::string error_of(F&& f, Errc code) {
  try {
    f();
  } catch (const Failure& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}


// A store with v1, v2, v3 added; v2 then v3 activated (highest 3).
struct Activated : Fixture {
  std::string state;
  Activated() {
    store::Store::init(store, kKeys + "/test.pub");
    store::Store s(store);
    s.add(v1);
    s.add(v2);
    s.add(v3);
    s.activate(d2, "ops", "");
    s.activate(d3, "ops", "");
    state = store + "/packages/scale.state";
  }
  std::vector<std::string> lines() const {
    std::vector<std::string> out;
    std::istringstream in(slurp(state));
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
  }
  void write_lines(const std::vector<std::string>& ls) const {
    std::string text;
    for (const std::string& l : ls) text += l + "\n";
    spit(state, text);
  }
};

std::string replace_line(const std::string& text, const std::string& prefix, const std::string& line) {
  std::size_t at = text.find("\n" + prefix) + 1;
  std::size_t end = text.find('\n', at);
  return text.substr(0, at) + line + text.substr(end);
}

// Every reader refuses the same forged state: the library, `store verify`, and the writers.
void expect_refused_everywhere(const Activated& f, const std::string& what) {
  std::string why = error_of([&] { store::Store(f.store).state("scale"); }, Errc::integrity);
  EXPECT_TRUE(contains(why, what)) << why;
  EXPECT_TRUE(contains(why, f.state)) << why;
  std::vector<std::string> problems = store::Store(f.store).verify();
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_TRUE(contains(problems[0], what)) << problems[0];
  why = error_of([&] { store::Store(f.store).activate(f.d1, "mallory", ""); }, Errc::integrity);
  EXPECT_TRUE(contains(why, what)) << why;
  CliRun r = kiln("store verify --store " + f.store);
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(contains(r.output, what)) << r.output;
}

TEST(StoreChain, AnEditedHighestIsRefusedByEveryReader) {
  Activated f;
  spit(f.state, replace_line(slurp(f.state), "highest\t", "highest\t1"));
  expect_refused_everywhere(f, "highest 1 disagrees with the history, which leaves 3");
}

TEST(StoreChain, AnEditedActiveIsRefusedByEveryReader) {
  Activated f;
  spit(f.state, replace_line(slurp(f.state), "active\t", "active\t" + f.d2));
  expect_refused_everywhere(f, "active " + f.d2 + " disagrees with the history, which leaves " + f.d3 + " active");
}

TEST(StoreChain, ATruncatedHistoryIsRefused) {
  Activated f;
  std::vector<std::string> ls = f.lines();
  ls.pop_back();  // the last record
  f.write_lines(ls);
  expect_refused_everywhere(f, "the head line says 2 record(s)");
}

TEST(StoreChain, ADuplicatedRecordIsRefused) {
  Activated f;
  std::vector<std::string> ls = f.lines();
  ls.insert(ls.begin() + 6, ls[5]);  // record 1 twice
  f.write_lines(ls);
  expect_refused_everywhere(f, "history record 2 is numbered 1");
}

TEST(StoreChain, ReorderedRecordsAreRefusedRenumberedOrNot) {
  Activated f;
  std::vector<std::string> ls = f.lines();
  std::swap(ls[5], ls[6]);
  f.write_lines(ls);
  expect_refused_everywhere(f, "history record 1 is numbered 2");
  std::swap(ls[5], ls[6]);
  std::string r1 = ls[5], r2 = ls[6];  // "record\t1\t..." and "record\t2\t..."
  ls[5] = "record\t1" + r2.substr(8);
  ls[6] = "record\t2" + r1.substr(8);
  f.write_lines(ls);
  expect_refused_everywhere(f, "history record 1 does not follow the genesis value");
}

TEST(StoreChain, AnEditedRecordIsRefused) {
  Activated f;
  std::vector<std::string> ls = f.lines();
  std::size_t who = ls[5].find("\tops\t");
  ls[5].replace(who, 5, "\teve\t");
  f.write_lines(ls);
  expect_refused_everywhere(f, "history record 2 does not follow record 1");
}

// A forger who recomputes every hash still cannot record a decision the rules forbid: the
// replay refuses a chain whose activation lowers the highest sequence.
TEST(StoreChain, AConsistentChainThatBreaksTheRulesIsRefused) {
  Activated f;
  store::PackageState s;
  s.package = "scale";
  auto add = [&](const std::string& action, const std::string& digest, std::uint64_t seq, std::uint64_t highest) {
    store::HistoryEntry h;
    h.number = s.history.size() + 1;
    h.previous = s.head().hash;
    h.action = action, h.digest = digest, h.sequence = seq, h.who = "eve", h.reason = "-";
    h.active_after = digest, h.highest_after = highest;
    s.history.push_back(h);
    s.active = digest, s.highest_sequence = highest;
  };
  add("activate", f.d3, 3, 3);
  add("activate", f.d1, 1, 1);  // hashes all correct, the rule broken
  spit(f.state, store::encode_state(s));
  expect_refused_everywhere(f, "history record 2 breaks the store's rules: it activates sequence 1, not above the highest 3");

  // At the boundary: another activation at the highest sequence is not "above" it either (the
  // rule is strict; a replay that allowed equality would accept any number of "latest" releases).
  s.history.clear();
  s.active.clear(), s.highest_sequence = 0;
  add("activate", f.d3, 3, 3);
  add("activate", f.d2, 3, 3);  // another release given the highest sequence (a lie verify also names)
  spit(f.state, store::encode_state(s));
  expect_refused_everywhere(f, "history record 2 breaks the store's rules: it activates sequence 3, not above the highest 3");
}

// A forger who recomputes every hash and gives an older archive a higher sequence in the
// history: the archive's signed sequence disagrees, and verify says so.
TEST(StoreChain, AHistoryThatLiesAboutAnArchivesSequenceIsCaughtByVerify) {
  Activated f;
  store::PackageState s;
  s.package = "scale";
  store::HistoryEntry h;
  h.time = 1, h.who = "eve", h.reason = "-";
  h.action = "activate", h.digest = f.d3, h.sequence = 3;
  store::append_record(s, h);
  h.digest = f.d1, h.sequence = 10;  // v1 is sequence 1
  store::append_record(s, h);
  spit(f.state, store::encode_state(s));
  std::vector<std::string> problems = store::Store(f.store).verify();
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_TRUE(contains(problems[0], "history record 2 gives " + f.d1 + " package scale sequence 10; the archive is package scale sequence 1"))
      << problems[0];
}

// What the chain cannot see: the whole file put back to an earlier, consistent state. Only a
// head witnessed elsewhere catches it.
TEST(StoreChain, AWholeStateRolledBackConsistentlyIsCaughtOnlyByAWitnessedHead) {
  Activated f;
  store::Store s(f.store);
  std::string earlier = slurp(f.state);
  store::ChainHead before = s.head("scale");
  EXPECT_EQ(before.records, 2u);
  s.rollback("scale", "", "ops", "");
  CliRun head = kiln("store head scale --store " + f.store);
  ASSERT_EQ(head.rc, 0) << head.output;
  store::ChainHead witnessed = s.head("scale");
  EXPECT_EQ(head.output, witnessed.hash + " 3\n");
  EXPECT_EQ(s.check_witness("scale", witnessed.hash), 3u);
  EXPECT_EQ(s.check_witness("scale", before.hash), 2u);  // a witness from before still matches a longer chain

  spit(f.state, earlier);  // consistent: the local checks pass
  EXPECT_TRUE(s.verify().empty());
  std::string why = error_of([&] { s.check_witness("scale", witnessed.hash); }, Errc::integrity);
  EXPECT_TRUE(contains(why, "the witnessed head " + witnessed.hash + " is not in its history (2 record(s)")) << why;
  CliRun r = kiln("store verify --store " + f.store + " --package scale --head " + witnessed.hash);
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(contains(r.output, "the history was truncated, rolled back or rewritten")) << r.output;
}

TEST(StoreRules, ANeverActiveSequenceJustBelowTheHighestIsRefusedAndTheHighestNeverGoesDown) {
  Fixture f;
  store::Store::init(f.store, kKeys + "/test.pub");
  store::Store s(f.store);
  s.add(f.v1);
  s.add(f.v2);
  s.add(f.v3);
  s.activate(f.d3, "ops", "");
  for (const std::string& older : {f.d2, f.d1}) {
    std::string why = error_of([&] { s.activate(older, "mallory", ""); }, Errc::refused);
    EXPECT_TRUE(contains(why, "is below 3, the highest ever activated for scale; this archive was never active")) << why;
    EXPECT_EQ(s.state("scale").active, f.d3);
    EXPECT_EQ(s.state("scale").highest_sequence, 3u);
  }
}

TEST(StoreRules, ActivatingADigestNotInTheStoreSaysSo) {
  Fixture f;
  store::Store::init(f.store, kKeys + "/test.pub");
  std::string why = error_of([&] { store::Store(f.store).activate(f.d1, "ops", ""); }, Errc::not_found);
  EXPECT_TRUE(contains(why, f.d1 + " is not in this store")) << why;
  CliRun r = kiln("store activate " + f.d1 + " --store " + f.store);
  EXPECT_EQ(r.rc, 3);  // kiln's exit code for not found (kExitBadInput), as `store active` gives
  EXPECT_TRUE(contains(r.output, f.d1 + " is not in this store")) << r.output;
  // A rollback to a digest the store does not hold is not recorded: refusals stay bounded.
  store::Store s(f.store);
  s.add(f.v2);
  s.activate(f.d2, "ops", "");
  why = error_of([&] { s.rollback("scale", f.d1, "ops", ""); }, Errc::not_found);
  EXPECT_TRUE(contains(why, f.d1 + " is not in this store")) << why;
  EXPECT_EQ(s.state("scale").history.size(), 1u);
}

TEST(StoreHistory, RepeatedRefusalsAreCountedNotAppended) {
  Activated f;
  store::Store s(f.store);
  for (int i = 0; i < 100; ++i) {
    EXPECT_THROW(s.activate(f.d1, "bot", std::to_string(i)), Failure);
    EXPECT_THROW(s.rollback("scale", f.d1, "bot", ""), Failure);
  }
  store::PackageState st = s.state("scale");
  ASSERT_EQ(st.history.size(), 4u);  // two activations, two distinct refusals
  EXPECT_EQ(st.history[2].repeats, 99u);
  EXPECT_EQ(st.history[3].repeats, 99u);
  EXPECT_LT(slurp(f.state).size(), 4096u);
  EXPECT_TRUE(s.verify().empty());
  // After an accepted decision the same refusal is a new record: the count never spans one.
  s.rollback("scale", "", "ops", "");
  EXPECT_THROW(s.activate(f.d1, "bot", ""), Failure);
  EXPECT_EQ(s.state("scale").history.size(), 6u);
  CliRun r = kiln("store history scale --store " + f.store);
  EXPECT_TRUE(contains(r.output, "repeated 99 more time(s)")) << r.output;
  // Without $USER (cron, containers) the decision is recorded as the account's name, not "unknown".
  CliRun back = kiln("store rollback scale --store " + f.store, "env -u USER");
  ASSERT_EQ(back.rc, 0) << back.output;
  const std::string who = store::Store(f.store).state("scale").history.back().who;
  const struct passwd* account = ::getpwuid(::geteuid());
  EXPECT_EQ(who, account != nullptr ? std::string(account->pw_name) : "uid " + std::to_string(::geteuid()));
}

TEST(StoreFiles, ASymbolicLinkAtTheLockIsRefusedNotFollowed) {
  Activated f;
  std::string target = f.dir + "/victim";
  spit(target, "precious");
  ::unlink((f.store + "/lock").c_str());
  ASSERT_EQ(::symlink(target.c_str(), (f.store + "/lock").c_str()), 0);
  std::string why = error_of([&] { store::Store(f.store).rollback("scale", "", "ops", ""); }, Errc::invalid_argument);
  EXPECT_TRUE(contains(why, f.store + "/lock: the lock is a symbolic link; refused")) << why;
  EXPECT_EQ(slurp(target), "precious");
}

TEST(StoreFiles, ALinkPlantedAtTheStateFileIsNeitherReadNorWrittenThrough) {
  Activated f;
  std::string target = f.dir + "/victim";
  spit(target, "precious");
  ::unlink(f.state.c_str());
  ASSERT_EQ(::symlink(target.c_str(), f.state.c_str()), 0);
  std::string why = error_of([&] { store::Store(f.store).rollback("scale", "", "ops", ""); }, Errc::invalid_argument);
  EXPECT_TRUE(contains(why, f.state + ": is a symbolic link; refused")) << why;
  EXPECT_EQ(slurp(target), "precious");
  struct stat st {};
  ASSERT_EQ(::lstat(f.state.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
}

TEST(StoreFiles, ALinkPlantedAsAnArchiveIsRefused) {
  Activated f;
  std::string path = store::Store(f.store).archive_path(f.d1);
  ::unlink(path.c_str());
  ASSERT_EQ(::symlink(f.v1.c_str(), path.c_str()), 0);
  std::string why = error_of([&] { store::Store(f.store).info(f.d1); }, Errc::invalid_argument);
  EXPECT_TRUE(contains(why, path + ": is a symbolic link; refused")) << why;
}

// A FIFO where an archive or a state file should be: every command answers at once, naming it.
TEST(StoreFiles, AFifoPlantedAsAnArchiveOrAStateIsRefusedNotWaitedOn) {
  Activated f;
  std::string path = store::Store(f.store).archive_path(f.d1);
  ::unlink(path.c_str());
  ASSERT_EQ(::mkfifo(path.c_str(), 0644), 0);
  for (const char* command : {"verify", "list", "gc"}) {
    CliRun r = kiln(std::string("store ") + command + " --store " + f.store);
    EXPECT_NE(r.rc, 124) << command << " hung on the FIFO";
    EXPECT_NE(r.rc, 0) << command;
    EXPECT_TRUE(contains(r.output, path + ": is not a regular file; refused")) << command << ": " << r.output;
  }
  ::unlink(f.state.c_str());
  ASSERT_EQ(::mkfifo(f.state.c_str(), 0644), 0);
  CliRun r = kiln("store active scale --store " + f.store);
  EXPECT_NE(r.rc, 124);
  EXPECT_TRUE(contains(r.output, f.state + ": is not a regular file; refused")) << r.output;
}

TEST(StoreFiles, TemporaryFilesHaveUnpredictableNamesAndAreExclusive) {
  Fixture f;
  std::string target = f.dir + "/file";
  AtomicFileWriter a(target, 0644), b(target, 0644);
  EXPECT_NE(a.temp_path(), b.temp_path());
  std::string suffix = a.temp_path().substr(target.size());
  ASSERT_EQ(suffix.size(), 5u + 32u) << suffix;  // ".tmp-" and 128 random bits in hex
  EXPECT_EQ(suffix.find(std::to_string(::getpid())), std::string::npos);
}

// In a child whose files may not grow past `limit` bytes (RLIMIT_FSIZE: writes fail with EFBIG,
// a full disk's ENOSPC by another name): runs f and returns the error message it threw.
template <typename F>
std::string with_file_size_limit(rlim_t limit, F&& f) {
  int pipe_fds[2];
  EXPECT_EQ(::pipe(pipe_fds), 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(pipe_fds[0]);
    ::signal(SIGXFSZ, SIG_IGN);
    rlimit rl{limit, limit};
    ::setrlimit(RLIMIT_FSIZE, &rl);
    std::string out = "no error";
    try {
      f();
    } catch (const Failure& e) {
      out = std::string(e.code() == Errc::refused ? "refused: " : "other: ") + e.what();
    }
    (void)!::write(pipe_fds[1], out.data(), out.size());
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(pipe_fds[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<std::size_t>(n));
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return out;
}

std::vector<std::string> temporaries(const std::string& dir) {
  std::vector<std::string> out;
  for (const std::string& n : list_directory(dir)) {
    if (contains(n, ".tmp-")) out.push_back(n);
  }
  return out;
}

TEST(StoreFiles, AFullDiskKeepsTheRefusalsReasonAndLeavesNoTemporaryFile) {
  Activated f;
  std::string before = slurp(f.state);
  std::string why = with_file_size_limit(256, [&] { store::Store(f.store).activate(f.d1, "ops", ""); });
  EXPECT_TRUE(contains(why, "refused: sequence 1 is below 3")) << why;
  EXPECT_TRUE(contains(why, "(and recording this refusal in the history failed: ")) << why;
  EXPECT_TRUE(contains(why, "File too large")) << why;
  EXPECT_EQ(slurp(f.state), before);
  EXPECT_TRUE(temporaries(f.store + "/packages").empty());
  // An accepted decision that cannot be written fails naming the write, leaves nothing behind,
  // and the next one goes through.
  why = with_file_size_limit(256, [&] { store::Store(f.store).rollback("scale", "", "ops", ""); });
  EXPECT_TRUE(contains(why, "other: " + f.state + ": write failed: File too large")) << why;
  EXPECT_TRUE(temporaries(f.store + "/packages").empty());
  EXPECT_EQ(store::Store(f.store).rollback("scale", "", "ops", "").digest, f.d2);
  struct stat st {};
  ASSERT_EQ(::stat(f.v1.c_str(), &st), 0);
  why = with_file_size_limit(static_cast<rlim_t>(st.st_size / 2), [&] { store::Store(f.store).add(f.v1); });
  EXPECT_TRUE(contains(why, "write failed: File too large")) << why;
  EXPECT_TRUE(temporaries(f.store + "/archives").empty());
}

// `store add` while another process keeps flipping a byte of the source: whatever the add
// returns, what it stored verifies under the digest it reported.
TEST(StoreAdd, TheBytesVerifiedAreTheBytesStoredWhileTheSourceChanges) {
  Fixture f;
  store::Store::init(f.store, kKeys + "/test.pub");
  std::string source = f.dir + "/changing.kiln";
  std::string good = slurp(f.v1);
  spit(source, good);
  pid_t flipper = ::fork();
  if (flipper == 0) {
    int fd = ::open(source.c_str(), O_WRONLY);
    const off_t at = static_cast<off_t>(good.size() / 2);
    char bytes[2] = {good[good.size() / 2], static_cast<char>(good[good.size() / 2] ^ 1)};
    for (unsigned i = 0;; ++i) (void)!::pwrite(fd, &bytes[i & 1], 1, at);
  }
  int added = 0, refused = 0;
  for (int i = 0; i < 30; ++i) {
    try {
      store::Store(f.store).add(source);
      ++added;
    } catch (const Failure&) {
      ++refused;
    }
    std::vector<std::string> problems = store::Store(f.store).verify();
    EXPECT_TRUE(problems.empty()) << "try " << i << ": " << problems[0];
  }
  ::kill(flipper, SIGKILL);
  ::waitpid(flipper, nullptr, 0);
  std::printf("%d adds stored the verified bytes, %d refused a source that changed\n", added, refused);
}

int init_killed_at(const std::string& store, long at) {
  return kiln("store init --trust " + kKeys + "/test.pub --store " + store, "KILN_STORE_CRASH_AT=" + std::to_string(at)).rc;
}

TEST(StoreInit, SigkillAtEveryStepLeavesNoStoreOrAWholeOneAndASecondInitSucceeds) {
  Fixture f;
  int kills = 0;
  for (long at = 1;; ++at) {
    std::string store = f.dir + "/init-" + std::to_string(at);
    int rc = init_killed_at(store, at);
    if (rc == 0) break;
    ASSERT_EQ(rc, -SIGKILL) << "init failed without a kill at step " << at;
    ++kills;
    struct stat st {};
    if (::stat((store + "/store.toml").c_str(), &st) == 0) {  // killed after the rename: a whole store
      EXPECT_TRUE(store::Store(store).verify().empty());
      continue;
    }
    CliRun again = kiln("store init --trust " + kKeys + "/test.pub --store " + store);
    ASSERT_EQ(again.rc, 0) << "second init after a kill at step " << at << ": " << again.output;
    EXPECT_TRUE(store::Store(store).verify().empty());
  }
  EXPECT_GE(kills, 5);
}

TEST(StoreOci, ExportIntoALayoutKeepsItsEarlierEntries) {
  Fixture f;
  store::Store::init(f.store, kKeys + "/test.pub");
  store::Store s(f.store);
  s.add(f.v1);
  s.add(f.v2);
  store::export_oci(s, f.dir + "/oci", {f.d1});
  store::export_oci(s, f.dir + "/oci", {f.d2});
  store::export_oci(s, f.dir + "/oci", {f.d2});  // again: replaces its own entry, no duplicate
  std::string index = slurp(f.dir + "/oci/index.json");
  EXPECT_TRUE(contains(index, "\"dev.kiln.digest\":\"" + f.d1 + "\"")) << index;
  EXPECT_TRUE(contains(index, "\"dev.kiln.digest\":\"" + f.d2 + "\"")) << index;
  store::Store::init(f.dir + "/dst", kKeys + "/test.pub");
  store::Store dst(f.dir + "/dst");
  EXPECT_EQ(store::import_oci(dst, f.dir + "/oci").imported.size(), 2u);
}

TEST(StoreOci, ExportIntoALayoutWhoseIndexIsMalformedIsRefused) {
  Fixture f;
  store::Store::init(f.store, kKeys + "/test.pub");
  store::Store s(f.store);
  s.add(f.v1);
  store::export_oci(s, f.dir + "/oci", {f.d1});
  for (const std::string& bad : {std::string("{not json"), std::string("{\"manifests\":3}")}) {
    spit(f.dir + "/oci/index.json", bad);
    std::string why = error_of([&] { store::export_oci(s, f.dir + "/oci", {f.d1}); }, Errc::malformed);
    EXPECT_TRUE(contains(why, f.dir + "/oci/index.json")) << why;
    EXPECT_TRUE(contains(why, "refusing to export into this layout (its index would be lost)")) << why;
    EXPECT_EQ(slurp(f.dir + "/oci/index.json"), bad);
  }
  ::mkdir((f.dir + "/other").c_str(), 0755);
  spit(f.dir + "/other/notes.txt", "mine");
  std::string why = error_of([&] { store::export_oci(s, f.dir + "/other", {}); }, Errc::invalid_argument);
  EXPECT_TRUE(contains(why, "not empty and not an OCI image layout")) << why;
}

TEST(StoreOci, ExportNeverWritesThroughAPlantedLink) {
  Fixture f;
  store::Store::init(f.store, kKeys + "/test.pub");
  store::Store s(f.store);
  s.add(f.v1);
  std::string outside = f.dir + "/outside";
  ::mkdir(outside.c_str(), 0755);
  spit(outside + "/file", "precious");
  struct Case {
    std::string name, link_to, expect;
  };
  for (const Case& c : {Case{"blobs", outside, "/blobs: is a symbolic link; refused"},
                        Case{"blobs/sha256", outside, "/blobs/sha256: is a symbolic link; refused"},
                        Case{"index.json", outside + "/file", "/index.json: is a symbolic link; refused"},
                        Case{"oci-layout", outside + "/file", "/oci-layout: is a symbolic link; refused"}}) {
    std::string oci = f.dir + "/oci-" + std::to_string(std::hash<std::string>()(c.name));
    store::export_oci(s, oci, {f.d1});
    std::system(("rm -rf '" + oci + "/" + c.name + "'").c_str());
    ASSERT_EQ(::symlink(c.link_to.c_str(), (oci + "/" + c.name).c_str()), 0);
    std::string why = error_of([&] { store::export_oci(s, oci, {f.d1}); }, Errc::invalid_argument);
    EXPECT_TRUE(contains(why, oci + c.expect)) << c.name << ": " << why;
    EXPECT_EQ(list_directory(outside), std::vector<std::string>{"file"}) << c.name;
    EXPECT_EQ(slurp(outside + "/file"), "precious") << c.name;
  }
}

// Makes `store` a format-1 store as the previous kiln wrote it (v1 and v2 in it; v1 activated,
// v2 activated, a refusal, a rollback to v1); returns the format-1 state file's text.
std::string make_format1_store(const Fixture& f, const std::string& store) {
  store::Store::init(store, kKeys + "/test.pub");
  store::Store(store).add(f.v1);
  store::Store(store).add(f.v2);
  spit(store + "/store.toml", "# kiln store, format 1. Do not edit: use `kiln store`.\nformat = 1\ntrust = \"trust\"\n");
  std::string v1 = "kiln-store-state\t1\npackage\tscale\nactive\t" + f.d1 + "\nhighest\t2\n" +
                   "history\t1\t100\tactivate\t" + f.d1 + "\t1\tops\t-\n" +
                   "history\t2\t101\tactivate\t" + f.d2 + "\t2\tops\t-\n" +
                   "history\t3\t102\trefused\t" + f.d1 + "\t1\tbot\tactivate: no\n" +
                   "history\t4\t103\trollback\t" + f.d1 + "\t1\tops\tslow\n";
  spit(store + "/packages/scale.state", v1);
  return v1;
}

// A format-1 store is refused with the way out, and `kiln store migrate` chains its history.
TEST(StoreFormat, AFormatOneStoreIsRefusedWithHowToMigrateAndMigrateChainsIt) {
  Fixture f;
  std::string v1 = make_format1_store(f, f.store);
  std::string why = error_of([&] { store::Store s(f.store); }, Errc::unsupported);
  EXPECT_TRUE(contains(why, "a format-1 kiln store")) << why;
  EXPECT_TRUE(contains(why, "kiln store migrate --store " + f.store)) << why;

  // A format-1 history that disagrees with its state is not blessed into a chain.
  spit(f.store + "/packages/scale.state", replace_line(v1, "highest\t", "highest\t1"));
  CliRun r = kiln("store migrate --store " + f.store);
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(contains(r.output, "disagrees with its history")) << r.output;

  spit(f.store + "/packages/scale.state", v1);
  r = kiln("store migrate --store " + f.store);
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "migrated package scale")) << r.output;
  store::PackageState s = store::Store(f.store).state("scale");
  EXPECT_EQ(s.active, f.d1);
  EXPECT_EQ(s.highest_sequence, 2u);
  ASSERT_EQ(s.history.size(), 4u);
  EXPECT_EQ(s.history[3].reason, "slow");
  EXPECT_TRUE(store::Store(f.store).verify().empty());
}

TEST(StoreFormat, SigkillAtEveryStepOfMigrateLeavesAStoreASecondMigrateFinishes) {
  Fixture f;
  int kills = 0;
  for (long at = 1;; ++at) {
    std::string store = f.dir + "/migrate-" + std::to_string(at);
    make_format1_store(f, store);
    CliRun r = kiln("store migrate --store " + store, "KILN_STORE_CRASH_AT=" + std::to_string(at));
    if (r.rc == 0) break;
    ASSERT_EQ(r.rc, -SIGKILL) << "migrate failed without a kill at step " << at << ": " << r.output;
    ++kills;
    r = kiln("store migrate --store " + store);
    ASSERT_EQ(r.rc, 0) << "second migrate after a kill at step " << at << ": " << r.output;
    store::PackageState s = store::Store(store).state("scale");
    EXPECT_EQ(s.active, f.d1);
    EXPECT_EQ(s.history.size(), 4u);
  }
  EXPECT_GE(kills, 8);
}

}  // namespace
}  // namespace kiln
