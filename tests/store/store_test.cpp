// The store: its rules (anti-rollback, history, gc) through the library, and crash safety
// through the kiln command killed with SIGKILL at every durable step of every operation.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <cctype>
#include <fstream>
#include <sstream>
#include <string>

#include "core/error.hpp"
#include "core/sparse_writer.hpp"
#include "store/oci.hpp"
#include "store/store.hpp"
#include "store_fixture.hpp"

namespace kiln {
namespace {

TEST(StoreRules, ActivateRollbackAndTheAntiRollbackRefusals) {
  Fixture f;
  store::Store::init(f.store, kKeys + "/test.pub");
  store::Store s(f.store);
  s.add(f.v1);
  s.add(f.v2);
  s.add(f.v3);
  s.activate(f.d2, "ops", "v2 first");
  s.activate(f.d3, "ops", "v3");
  EXPECT_EQ(s.state("scale").active, f.d3);
  // v1 (sequence 1) was never active: refused by activate and by rollback, each recorded.
  try {
    s.activate(f.d1, "mallory", "");
    FAIL();
  } catch (const Failure& e) {
    EXPECT_EQ(e.code(), Errc::refused);
    EXPECT_NE(std::string(e.what()).find("never active for scale"), std::string::npos) << e.what();
  }
  EXPECT_THROW(s.rollback("scale", f.d1, "mallory", ""), Failure);
  EXPECT_EQ(s.state("scale").active, f.d3);
  // Rollback with no target: the previously active archive.
  store::HistoryEntry back = s.rollback("scale", "", "ops", "v3 is slow");
  EXPECT_EQ(back.digest, f.d2);
  EXPECT_EQ(s.state("scale").active, f.d2);
  EXPECT_EQ(s.state("scale").highest_sequence, 3u);
  // Forward again to v3 is a rollback too now (its sequence is not above the highest); activate
  // says so, naming it as this archive's own sequence, not another archive's.
  try {
    s.activate(f.d3, "ops", "");
    FAIL();
  } catch (const Failure& e) {
    EXPECT_NE(std::string(e.what()).find("sequence 3 is this archive's own: it was active for scale before, and going "
                                         "back to it is a roll-forward: `kiln store rollback scale --to " + f.d3 + "`"),
              std::string::npos) << e.what();
  }
  CliRun forward = kiln("store rollback scale --to " + f.d3 + " --store " + f.store + " --who ops --reason forward");
  ASSERT_EQ(forward.rc, 0) << forward.output;
  EXPECT_EQ(forward.output.rfind("rolled scale forward to " + f.d3 + " (sequence 3)", 0), 0u) << forward.output;
  CliRun back_again = kiln("store rollback scale --store " + f.store + " --who ops");
  EXPECT_EQ(back_again.output.rfind("rolled scale back to " + f.d2, 0), 0u) << back_again.output;
  EXPECT_EQ(s.rollback("scale", f.d3, "ops", "back to v3").digest, f.d3);
  store::PackageState st = s.state("scale");
  ASSERT_EQ(st.history.size(), 9u);
  EXPECT_EQ(st.history[2].action, "refused");
  EXPECT_EQ(st.history[2].who, "mallory");
  EXPECT_EQ(st.history[4].action, "rollback");
  EXPECT_TRUE(s.verify().empty());
  // gc keeps the active archive and the previously active one; v1 never ran and is below
  // the highest sequence, so nothing can bring it back: removed.
  std::vector<std::string> removed = s.gc(1);
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0], f.d1);
}

// Sparse copies (FORMAT.md §9) of one archive: the store keeps the whole archive over them, joins
// two that hold different members, and replaces a held copy that no longer verifies instead of
// keeping or joining it.
TEST(StoreSparse, WholeOverSparseCopiesJoinedAndADamagedCopyReplaced) {
  Fixture f;
  store::Store::init(f.store, kKeys + "/test.pub");
  store::Store s(f.store);
  ReadOptions options;
  std::unique_ptr<ArchiveReader> whole = ArchiveReader::open_file(f.v1, options);
  const std::vector<format::Entry>& entries = whole->index().entries;
  // One copy with the code, one with bulk.bin; both with kiln.toml and the kernel table.
  auto sparse_copy = [&](const std::string& name, const std::string& also) {
    std::vector<bool> keep(entries.size());
    for (std::size_t i = 0; i < entries.size(); ++i) {
      keep[i] = entries[i].path == "kiln.toml" || entries[i].path.rfind("kiln/", 0) == 0 || entries[i].path == also;
    }
    AtomicFileWriter out(f.dir + "/" + name, 0644);
    write_sparse_copy({whole.get()}, keep, out);
    out.commit();
    return f.dir + "/" + name;
  };
  const std::string code = sparse_copy("code.kiln", "k.ptx"), bulk = sparse_copy("bulk.kiln", "bulk.bin");
  auto holds = [&](const std::string& path) {
    std::unique_ptr<ArchiveReader> a = ArchiveReader::open_file(s.archive_path(f.d1), options);
    return a->member_present(static_cast<std::size_t>(a->index().find(path)));
  };
  EXPECT_TRUE(s.add(code).sparse);
  EXPECT_TRUE(holds("k.ptx"));
  EXPECT_FALSE(holds("bulk.bin"));
  EXPECT_TRUE(s.add(bulk).sparse);  // joined
  EXPECT_TRUE(holds("k.ptx"));
  EXPECT_TRUE(holds("bulk.bin"));
  EXPECT_TRUE(s.verify().empty());

  // A held copy damaged in a member it holds: the next sparse add replaces it.
  std::string held = slurp(s.archive_path(f.d1));
  held[held.size() / 2] ^= 1;  // inside bulk.bin, most of the file
  ::chmod(s.archive_path(f.d1).c_str(), 0644);
  spit(s.archive_path(f.d1), held);
  EXPECT_FALSE(s.verify().empty());
  s.add(code);
  EXPECT_TRUE(holds("k.ptx"));
  EXPECT_FALSE(holds("bulk.bin"));
  EXPECT_TRUE(s.verify().empty());

  // The whole archive replaces a sparse copy; a sparse add after it keeps the whole one.
  EXPECT_FALSE(s.add(f.v1).sparse);
  EXPECT_FALSE(s.add(bulk).sparse);
  EXPECT_EQ(slurp(s.archive_path(f.d1)), slurp(f.v1));
}

TEST(StoreRules, AnArchiveSignedByAKeyTheStoreDoesNotTrustIsRefusedAtAdd) {
  Fixture f;
  PrivateKey other = PrivateKey::generate();
  std::string pub = f.dir + "/other.pub";
  std::ofstream(pub) << other.public_key().to_pem();
  store::Store::init(f.store, pub);
  try {
    store::Store(f.store).add(f.v1);
    FAIL();
  } catch (const Failure& e) {
    EXPECT_EQ(e.code(), Errc::signature);
    // The refusal names the file given, not the temporary copy it verified.
    EXPECT_NE(std::string(e.what()).find(f.v1 + " (as copied into the store)"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find(".tmp-"), std::string::npos) << e.what();
  }
}

int run_kiln(const std::string& args, long crash_at) {
  std::string cmd = "KILN_STORE_CRASH_AT=" + std::to_string(crash_at) + " " + KILN_BINARY + " " + args + " >/dev/null 2>&1";
  int status = std::system(cmd.c_str());
  if (WIFSIGNALED(status)) return -WTERMSIG(status);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGKILL) return -SIGKILL;  // reported by the shell
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(StoreCrashSafety, SigkillAtEveryDurableStepLeavesTheOldOrTheNewState) {
  Fixture f;
  struct Op {
    const char* name;
    std::string args;
    std::string before, after;  // the active digest before and after the operation
  };
  const std::vector<Op> ops = {
      {"add", "store add " + f.v3 + " --store STORE", f.d2, f.d2},
      {"activate", "store activate " + f.d3 + " --store STORE", f.d2, f.d3},
      {"rollback", "store rollback scale --store STORE", f.d2, f.d1},
      {"gc", "store gc --keep 1 --store STORE", f.d2, f.d2},
  };
  int kills = 0;
  for (const Op& op : ops) {
    // Each operation from stores of several history depths (longer state files, other steps).
    for (int depth = 0; depth < (std::string(op.name) == "add" ? 1 : 12); ++depth) {
      for (long at = 1;; ++at) {
        std::string store = f.dir + "/s-" + op.name + "-" + std::to_string(depth) + "-" + std::to_string(at);
        store::Store::init(store, kKeys + "/test.pub");
        {
          store::Store s(store);
          s.add(f.v1);
          s.add(f.v2);
          if (std::string(op.name) != "add") s.add(f.v3);
          s.activate(f.d1, "setup", "");
          s.activate(f.d2, "setup", "");
          for (int i = 0; i < depth; ++i) {  // back and forth: the same state, a longer history
            s.rollback("scale", f.d1, "setup", "");
            s.rollback("scale", f.d2, "setup", "");
          }
        }
        std::string args = op.args;
        args.replace(args.find("STORE"), 5, store);
        int rc = run_kiln(args, at);
        // Whatever happened, the store opens, verifies, and is in the old or the new state.
        store::Store s(store);
        std::vector<std::string> problems = s.verify();
        EXPECT_TRUE(problems.empty()) << op.name << " killed at step " << at << ": " << problems[0];
        std::string active = s.state("scale").active;
        EXPECT_TRUE(active == op.before || active == op.after) << op.name << " at step " << at << ": active " << active;
        s.info(active);  // the active archive still authenticates
        if (rc == -SIGKILL) {
          ++kills;
          continue;
        }
        ASSERT_EQ(rc, 0) << op.name << " failed without a kill at step " << at;
        EXPECT_EQ(active, op.after) << op.name;
        break;
      }
    }
  }
  std::printf("%d SIGKILLs across add, activate, rollback and gc; every one left a valid store\n", kills);
  EXPECT_GE(kills, 100);
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {


TEST(StoreOci, ExportThenImportMovesArchivesByDigest) {
  Fixture f;
  store::Store::init(f.store, kKeys + "/test.pub");
  store::Store src(f.store);
  src.add(f.v1);
  src.add(f.v2);
  std::vector<std::string> exported = store::export_oci(src, f.dir + "/oci", {});
  ASSERT_EQ(exported.size(), 2u);
  EXPECT_NE(slurp(f.dir + "/oci/oci-layout").find("\"imageLayoutVersion\":\"1.0.0\""), std::string::npos);
  std::string index = slurp(f.dir + "/oci/index.json");
  EXPECT_NE(index.find("application/vnd.oci.image.manifest.v1+json"), std::string::npos);
  EXPECT_NE(index.find("\"dev.kiln.digest\":\"" + f.d1 + "\""), std::string::npos);

  store::Store::init(f.dir + "/dst", kKeys + "/test.pub");
  store::Store dst(f.dir + "/dst");
  store::ImportResult r = store::import_oci(dst, f.dir + "/oci");
  ASSERT_EQ(r.imported.size(), 2u);
  EXPECT_TRUE(r.skipped.empty());
  EXPECT_EQ(dst.info(f.d1).sequence, 1u);
  EXPECT_EQ(dst.info(f.d2).sequence, 2u);
}

TEST(StoreOci, ImportChecksSizeBeforeHashAndHashBeforeUseAndToleratesUnknownTypes) {
  Fixture f;
  store::Store::init(f.store, kKeys + "/test.pub");
  store::Store src(f.store);
  src.add(f.v1);
  store::export_oci(src, f.dir + "/oci", {});
  std::string index = slurp(f.dir + "/oci/index.json");
  // An unknown artifact beside ours: skipped with a note, not an error.
  std::string unknown = "{\"mediaType\":\"application/vnd.example.other+json\",\"digest\":\"sha256:" + std::string(64, 'a') +
                        "\",\"size\":3},";
  std::string with_unknown = index;
  with_unknown.insert(with_unknown.find("[") + 1, unknown);
  spit(f.dir + "/oci/index.json", with_unknown);
  store::Store::init(f.dir + "/dst1", kKeys + "/test.pub");
  store::Store dst1(f.dir + "/dst1");
  store::ImportResult r = store::import_oci(dst1, f.dir + "/oci");
  EXPECT_EQ(r.imported.size(), 1u);
  ASSERT_EQ(r.skipped.size(), 1u);
  EXPECT_NE(r.skipped[0].find("application/vnd.example.other+json"), std::string::npos);

  // The archive blob changed by one byte (same size): refused on its hash before the store
  // reads it as an archive.
  std::string manifest_list = slurp(f.dir + "/oci/index.json");
  std::size_t at = manifest_list.find("\"digest\":\"sha256:", manifest_list.find("image.manifest.v1+json"));
  std::string manifest_hex = manifest_list.substr(at + 17, 64);
  std::string manifest = slurp(f.dir + "/oci/blobs/sha256/" + manifest_hex);
  std::size_t layer_at = manifest.find("\"digest\":\"sha256:", manifest.find("vnd.kiln.archive.v2\",\"digest"));
  std::string layer_hex = manifest.substr(layer_at + 17, 64);
  std::string blob = slurp(f.dir + "/oci/blobs/sha256/" + layer_hex);
  std::string tampered = blob;
  tampered[100] ^= 1;
  spit(f.dir + "/oci/blobs/sha256/" + layer_hex, tampered);
  store::Store::init(f.dir + "/dst2", kKeys + "/test.pub");
  store::Store dst2(f.dir + "/dst2");
  try {
    store::import_oci(dst2, f.dir + "/oci");
    FAIL() << "a tampered blob was imported";
  } catch (const Failure& e) {
    EXPECT_EQ(e.code(), Errc::integrity);
    EXPECT_NE(std::string(e.what()).find("does not hash to"), std::string::npos) << e.what();
  }
  // A blob whose size differs from its descriptor: refused before hashing.
  spit(f.dir + "/oci/blobs/sha256/" + layer_hex, blob + "x");
  try {
    store::import_oci(dst2, f.dir + "/oci");
    FAIL() << "a blob of the wrong size was imported";
  } catch (const Failure& e) {
    EXPECT_NE(std::string(e.what()).find("the descriptor says"), std::string::npos) << e.what();
  }
  // A digest outside OCI's grammar for sha256 (uppercase hex): refused.
  spit(f.dir + "/oci/blobs/sha256/" + layer_hex, blob);
  std::string upper = index;
  std::size_t d = upper.find("sha256:") + 7;
  for (std::size_t i = d; i < d + 64; ++i) upper[i] = static_cast<char>(std::toupper(upper[i]));
  spit(f.dir + "/oci/index.json", upper);
  try {
    store::import_oci(dst2, f.dir + "/oci");
    FAIL() << "an uppercase digest was accepted";
  } catch (const Failure& e) {
    // Refused by the grammar check, not later for want of a blob under that name.
    EXPECT_EQ(e.code(), Errc::malformed);
    EXPECT_NE(std::string(e.what()).find("descriptor digest is not sha256:<64 lowercase hex>"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln
