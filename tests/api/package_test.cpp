// kiln_package: following a store's active pointer, swapping archives under load.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../unit/temp_dirs.hpp"
#include "api_test_env.hpp"
#include "kiln/kiln.h"
#include "store/store.hpp"

namespace {

using kiln_test::env_or;
using kiln_test::keys;
const std::string kKiln = env_or("KILN_BINARY", KILN_BINARY);
const std::string kScaleDir = KILN_SCALE_DIR;

std::string sh(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  char buf[512];
  size_t n;
  while (p && (n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  if (p) ::pclose(p);
  while (!out.empty() && (out.back() == '\n')) out.pop_back();
  return out;
}

// A store holding scale v1 (sequence 5) active and v2 (sequence 6) added.
struct StoreWithTwoVersions {
  std::string dir, store, d1, d2;
  StoreWithTwoVersions() {
    dir = kiln::test::make_temp_dir("kiln-package-test");
    store = dir + "/store";
    sh("cp " + kScaleDir + "/scale.ptx " + dir + "/");
    for (int v = 1; v <= 2; ++v) {
      std::string toml = dir + "/kiln.v" + std::to_string(v) + ".toml";
      sh("sed -e 's/test-1/v" + std::to_string(v) + "/' -e 's/sequence = 4/sequence = " + std::to_string(4 + v) + "/' " +
         kScaleDir + "/kiln.toml > " + toml);
      std::string digest = sh(kKiln + " pack " + toml + " --key " + keys() + "/test.key -o " + dir + "/v" +
                              std::to_string(v) + ".kiln -q");
      (v == 1 ? d1 : d2) = digest;
    }
    kiln::store::Store::init(store, keys() + "/test.pub");
    kiln::store::Store s(store);
    s.add(dir + "/v1.kiln");
    s.add(dir + "/v2.kiln");
    s.activate(d1, "test", "");
  }
  ~StoreWithTwoVersions() { sh("rm -rf '" + dir + "'"); }
};

struct Calls {
  std::atomic<long> v1{0}, v2{0}, other{0};
  std::string d1, d2;
};

int count_reference(const kiln_call_info* info, void* const*, size_t, void*, void* user) {
  auto* c = static_cast<Calls*>(user);
  std::string digest = info->archive_digest;
  (digest == c->d1 ? c->v1 : digest == c->d2 ? c->v2 : c->other)++;
  return 0;
}

kiln_runtime* make_runtime() {
  kiln_runtime_options o;
  kiln_runtime_options_init(&o, sizeof o);
  std::string trust = keys() + "/test.pub";
  o.trust_path = trust.c_str();
  o.cuda_driver_path = "libcuda-absent-for-this-test.so.1";
  kiln_runtime* rt = nullptr;
  EXPECT_EQ(kiln_runtime_create(&rt, &o), KILN_OK);
  return rt;
}

std::string digest_of(kiln_package* p) {
  char buf[80];
  EXPECT_EQ(kiln_package_digest(p, buf, sizeof buf), KILN_OK);
  return buf;
}

TEST(Package, FollowsTheStoreOnReloadAndRollsBack) {
  StoreWithTwoVersions s;
  kiln_runtime* rt = make_runtime();
  kiln_package* p = nullptr;
  ASSERT_EQ(kiln_package_open(rt, s.store.c_str(), "scale", 0, &p), KILN_OK);
  EXPECT_EQ(digest_of(p), s.d1);
  int switched = -1;
  ASSERT_EQ(kiln_package_reload(p, &switched), KILN_OK);
  EXPECT_EQ(switched, 0);
  kiln::store::Store(s.store).activate(s.d2, "test", "v2");
  ASSERT_EQ(kiln_package_reload(p, &switched), KILN_OK);
  EXPECT_EQ(switched, 1);
  EXPECT_EQ(digest_of(p), s.d2);
  kiln::store::Store(s.store).rollback("scale", "", "test", "back");
  ASSERT_EQ(kiln_package_reload(p, &switched), KILN_OK);
  EXPECT_EQ(digest_of(p), s.d1);
  kiln_route route;
  EXPECT_EQ(kiln_package_launch(p, "no_such_kernel", nullptr, 0, nullptr, &route), KILN_ERR_NOT_FOUND);
  kiln_package_destroy(p);
  EXPECT_EQ(kiln_package_open(rt, s.store.c_str(), "unknown", 0, &p), KILN_ERR_NOT_FOUND);
  kiln_runtime_destroy(rt);
}

// libkiln follows no forged pointer: a state whose `highest` or `active` line was edited
// disagrees with its hash-chained history, and kiln_package_open and _reload refuse it, saying so.
TEST(Package, OpenAndReloadRefuseAStateThatDisagreesWithItsHistory) {
  StoreWithTwoVersions s;
  kiln::store::Store(s.store).activate(s.d2, "test", "v2");
  std::string state = s.store + "/packages/scale.state";
  std::string good = sh("cat " + state) + "\n";
  kiln_runtime* rt = make_runtime();
  kiln_package* p = nullptr;
  ASSERT_EQ(kiln_package_open(rt, s.store.c_str(), "scale", 0, &p), KILN_OK);
  char why[1024];
  for (const std::string& edit : {std::string("s/^highest\t.*/highest\t5/"), "s/^active\t.*/active\t" + s.d1 + "/"}) {
    sh("sed -i '" + edit + "' " + state);
    kiln_package* forged = nullptr;
    EXPECT_NE(kiln_package_open(rt, s.store.c_str(), "scale", 0, &forged), KILN_OK) << edit;
    ASSERT_EQ(kiln_last_error(why, sizeof why, nullptr), KILN_OK);
    EXPECT_NE(std::string(why).find("disagrees with the history"), std::string::npos) << why;
    int switched = -1;
    EXPECT_NE(kiln_package_reload(p, &switched), KILN_OK) << edit;
    EXPECT_EQ(digest_of(p), s.d2);  // the archive in use stays
    std::ofstream(state, std::ios::binary) << good;
  }
  kiln_package_destroy(p);
  kiln_runtime_destroy(rt);
}

// What the hash chain cannot see: the whole state file put back to an earlier, consistent one (an
// older archive active again). A serving process given a witness of the head refuses it, at open
// and at reload, and keeps the archive in use; a history that grew from the witnessed head passes.
TEST(Package, AWitnessedHeadRefusesAConsistentlyRewrittenHistory) {
  StoreWithTwoVersions s;
  std::string state = s.store + "/packages/scale.state";
  std::string earlier = sh("cat " + state) + "\n";  // v1 active: consistent on its own
  kiln::store::Store(s.store).activate(s.d2, "test", "v2");
  std::string witness = sh(kKiln + " store head scale --store " + s.store);  // "<64 hex> 2"
  ASSERT_EQ(witness.size(), 66u) << witness;
  kiln_runtime* rt = make_runtime();
  kiln_package* p = nullptr;
  ASSERT_EQ(kiln_package_open_witnessed(rt, s.store.c_str(), "scale", 0, witness.c_str(), &p), KILN_OK);
  EXPECT_EQ(digest_of(p), s.d2);
  // The history grows from the witnessed head (a refused activation is a record too): still held.
  try {
    kiln::store::Store(s.store).activate(s.d1, "test", "older sequence");
  } catch (const std::exception&) {
  }
  ASSERT_GT(kiln::store::Store(s.store).head("scale").records, 2u);
  int switched = -1;
  ASSERT_EQ(kiln_package_reload(p, &switched), KILN_OK);
  EXPECT_EQ(switched, 0);
  EXPECT_EQ(digest_of(p), s.d2);

  std::ofstream(state, std::ios::binary) << earlier;  // rewritten: v1 active, every local check passes
  kiln_package* plain = nullptr;
  ASSERT_EQ(kiln_package_open(rt, s.store.c_str(), "scale", 0, &plain), KILN_OK) << "without a witness it opens";
  EXPECT_EQ(digest_of(plain), s.d1);
  kiln_package_destroy(plain);
  char why[1024];
  EXPECT_EQ(kiln_package_reload(p, &switched), KILN_ERR_INTEGRITY);
  ASSERT_EQ(kiln_last_error(why, sizeof why, nullptr), KILN_OK);
  EXPECT_NE(std::string(why).find("the witnessed head " + witness.substr(0, 64) + " is not in its history"),
            std::string::npos) << why;
  EXPECT_EQ(digest_of(p), s.d2) << "the archive in use stays";
  kiln_package* rewritten = nullptr;
  EXPECT_EQ(kiln_package_open_witnessed(rt, s.store.c_str(), "scale", 0, witness.c_str(), &rewritten), KILN_ERR_INTEGRITY);
  EXPECT_EQ(rewritten, nullptr);
  kiln_package_destroy(p);

  kiln_package* bad = nullptr;
  EXPECT_EQ(kiln_package_open_witnessed(rt, s.store.c_str(), "scale", 0, "ABCDEF", &bad), KILN_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(kiln_last_error(why, sizeof why, nullptr), KILN_OK);
  EXPECT_NE(std::string(why).find("witness head 'ABCDEF' is not 64 lower-case hex digits"), std::string::npos) << why;
  EXPECT_EQ(kiln_package_open_witnessed(rt, s.store.c_str(), "scale", 0, nullptr, &bad), KILN_OK) << "NULL: no witness";
  kiln_package_destroy(bad);
  kiln_runtime_destroy(rt);
}

// A history rewritten with every hash right, claiming an older archive is a newer sequence:
// libkiln compares the sequence the archive's signature covers and refuses.
TEST(Package, OpenRefusesAHistoryThatLiesAboutTheActiveArchivesSequence) {
  StoreWithTwoVersions s;  // v1 is sequence 5, v2 sequence 6
  kiln::store::PackageState forged;
  forged.package = "scale";
  kiln::store::HistoryEntry h;
  h.time = 1, h.who = "eve", h.reason = "-", h.action = "activate";
  h.digest = s.d2, h.sequence = 6;
  kiln::store::append_record(forged, h);
  h.digest = s.d1, h.sequence = 7;
  kiln::store::append_record(forged, h);
  std::ofstream(s.store + "/packages/scale.state", std::ios::binary) << kiln::store::encode_state(forged);
  kiln_runtime* rt = make_runtime();
  kiln_package* p = nullptr;
  EXPECT_EQ(kiln_package_open(rt, s.store.c_str(), "scale", 0, &p), KILN_ERR_INTEGRITY);
  char why[1024];
  ASSERT_EQ(kiln_last_error(why, sizeof why, nullptr), KILN_OK);
  EXPECT_NE(std::string(why).find("is sequence 5; the history of package 'scale' records sequence 7 for it"), std::string::npos) << why;
  kiln_runtime_destroy(rt);
}

// A writer of the store folder swaps the file under archives/<digest> for another archive that is
// validly signed, of the same package and the same sequence: only the digest check tells them
// apart, and kiln_package_open and _reload refuse the file, naming both digests.
TEST(Package, OpenAndReloadRefuseAFileThatHoldsAnotherDigestThanItsName) {
  StoreWithTwoVersions s;  // v1 (sequence 5) active, v2 (sequence 6) added
  std::string twin_toml = s.dir + "/kiln.twin.toml";
  sh("sed -e 's/test-1/twin/' -e 's/sequence = 4/sequence = 5/' " + kScaleDir + "/kiln.toml > " + twin_toml);
  std::string twin = sh(kKiln + " pack " + twin_toml + " --key " + keys() + "/test.key -o " + s.dir + "/twin.kiln -q");
  ASSERT_EQ(twin.rfind("sha256:", 0), 0u) << twin;
  ASSERT_NE(twin, s.d1);
  kiln::store::Store store(s.store);
  const std::string v1_file = store.archive_path(s.d1);
  sh("cp " + v1_file + " " + s.dir + "/v1.saved && cp " + s.dir + "/twin.kiln " + v1_file);
  kiln_runtime* rt = make_runtime();
  kiln_package* p = nullptr;
  char why[1024];
  EXPECT_EQ(kiln_package_open(rt, s.store.c_str(), "scale", 0, &p), KILN_ERR_INTEGRITY);
  ASSERT_EQ(kiln_last_error(why, sizeof why, nullptr), KILN_OK);
  EXPECT_NE(std::string(why).find(v1_file + " holds " + twin + ", not " + s.d1), std::string::npos) << why;
  // Reload: the package follows v1, v2 is activated, and v2's file now holds the twin.
  sh("cp " + s.dir + "/v1.saved " + v1_file);
  ASSERT_EQ(kiln_package_open(rt, s.store.c_str(), "scale", 0, &p), KILN_OK);
  store.activate(s.d2, "test", "v2");
  const std::string v2_file = store.archive_path(s.d2);
  std::string twin6_toml = s.dir + "/kiln.twin6.toml";
  sh("sed -e 's/test-1/twin6/' -e 's/sequence = 4/sequence = 6/' " + kScaleDir + "/kiln.toml > " + twin6_toml);
  std::string twin6 = sh(kKiln + " pack " + twin6_toml + " --key " + keys() + "/test.key -o " + s.dir + "/twin6.kiln -q");
  sh("cp " + s.dir + "/twin6.kiln " + v2_file);
  int switched = -1;
  EXPECT_EQ(kiln_package_reload(p, &switched), KILN_ERR_INTEGRITY);
  ASSERT_EQ(kiln_last_error(why, sizeof why, nullptr), KILN_OK);
  EXPECT_NE(std::string(why).find(v2_file + " holds " + twin6 + ", not " + s.d2), std::string::npos) << why;
  EXPECT_EQ(digest_of(p), s.d1);  // the archive in use stays
  kiln_package_destroy(p);
  kiln_runtime_destroy(rt);
}

TEST(Package, ManyThreadsLaunchWhileAnotherSwitchesBackAndForth) {
  StoreWithTwoVersions s;
  kiln_runtime* rt = make_runtime();
  Calls calls;
  calls.d1 = s.d1;
  calls.d2 = s.d2;
  ASSERT_EQ(kiln_runtime_register_reference(rt, "scale", count_reference, &calls), KILN_OK);
  kiln_package* p = nullptr;
  ASSERT_EQ(kiln_package_open(rt, s.store.c_str(), "scale", 0, &p), KILN_OK);
  std::atomic<bool> stop{false};
  std::atomic<long> failures{0}, switches{0};
  std::vector<std::thread> launchers;
  for (int t = 0; t < 6; ++t) {
    launchers.emplace_back([&] {
      float y = 0, x = 0, a = 1;
      unsigned n = 1;
      float* yp = &y;
      float* xp = &x;
      void* args[] = {&yp, &xp, &a, &n};
      while (!stop.load()) {
        if (kiln_package_launch(p, "scale", args, 4, nullptr, nullptr) != KILN_OK) failures++;
      }
    });
  }
  kiln::store::Store store(s.store);
  for (int i = 0; i < 40; ++i) {
    if (i % 2 == 0) {
      if (i == 0) store.activate(s.d2, "test", "");
      else store.rollback("scale", s.d2, "test", "");
    } else {
      store.rollback("scale", s.d1, "test", "");
    }
    int switched = 0;
    ASSERT_EQ(kiln_package_reload(p, &switched), KILN_OK);
    switches += switched;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  stop = true;
  for (auto& t : launchers) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(switches.load(), 40);
  EXPECT_EQ(calls.other.load(), 0) << "every call ran on one whole archive, the old or the new";
  EXPECT_GT(calls.v1.load(), 0);
  EXPECT_GT(calls.v2.load(), 0);
  kiln_package_destroy(p);
  kiln_runtime_destroy(rt);
}

}  // namespace
