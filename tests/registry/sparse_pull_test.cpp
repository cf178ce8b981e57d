// kiln pull --target / kiln store pull --target against the real registry: a sparse archive
// (schema/FORMAT.md §9) fetched with range requests, with the complete archive's digest and
// signatures, holding only what the named GPUs' routes use. The multi-vendor archive is the test
// suite's matmul-relu-mixed.kiln (nvcc's sm_90a cubin and PTX, hipcc's three AMD code objects);
// the tests are skipped, saying why, where it could not be built.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <map>
#include <string>

#include "../store/store_fixture.hpp"
#include "../unit/run_command.hpp"
#include "core/json.hpp"
#include "registry_fixture.hpp"
#include "store/store.hpp"

namespace kiln {
namespace {

using test::read_text;
using Outcome = kiln::test::CommandResult;

using test::exists;
using test::field;
using test::shell;
std::uint64_t stat_value(const std::string& out, const std::string& key) {
  std::size_t at = out.find(key + "=");
  return at == std::string::npos ? 0 : std::stoull(out.substr(at + key.size() + 1));
}

const std::string kMixed = std::string(KILN_TEST_ARCHIVES) + "/matmul-relu-mixed.kiln";

struct SparsePullTest : ::testing::Test {
  Fixture f;
  std::unique_ptr<test::Registry> registry;
  std::string docker_config, digest, tag;
  void SetUp() override {
    if (!test::executable(test::kRegistryBinary)) GTEST_SKIP() << "docker-registry is not installed (ci/install-deps.sh installs it)";
    if (!exists(kMixed)) GTEST_SKIP() << kMixed << " was not built (it needs nvcc and hipcc)";
    ::mkdir((f.dir + "/registry").c_str(), 0755);
    registry = std::make_unique<test::Registry>(f.dir + "/registry");
    ASSERT_TRUE(registry->ready()) << registry->log();
    docker_config = f.dir + "/docker";
    ::mkdir(docker_config.c_str(), 0755);
    Outcome push = kiln("push " + kMixed + " " + repo() + ":mixed --trust " + pub());
    ASSERT_EQ(push.code, 0) << push.out;
    digest = field(push.out, "kiln digest");
  }
  Outcome kiln(const std::string& args) { return shell("DOCKER_CONFIG='" + docker_config + "' " + KILN_BINARY + " " + args); }
  std::string repo() const { return registry->address() + "/kiln/mixed"; }
  std::string pub() const { return kKeys + "/test.pub"; }
  // Which members the archive at `path` holds, by path (kiln inspect --json).
  std::map<std::string, bool> presence(const std::string& path) {
    Outcome o = shell(std::string(KILN_BINARY) + " inspect --json " + path);
    EXPECT_EQ(o.code, 0) << o.out;
    std::map<std::string, bool> out;
    json::Value doc = json::parse(o.out, "inspect");
    for (const json::Value& m : doc.get("members")->array) out[*m.get_string("path")] = m.get("present")->boolean;
    return out;
  }
};

TEST_F(SparsePullTest, OneTargetGetsItsCodeWithTheSameDigestAndSignatures) {
  const std::string out = f.dir + "/sm90.kiln";
  Outcome pull = kiln("pull " + repo() + ":mixed -o " + out + " --trust " + pub() + " --target sm_90 --stats");
  ASSERT_EQ(pull.code, 0) << pull.out;
  EXPECT_EQ(field(pull.out, "kiln digest"), digest) << pull.out;
  EXPECT_NE(pull.out.find("  sparse "), std::string::npos) << pull.out;
  EXPECT_NE(pull.out.find("sm_90: 1 code object(s)"), std::string::npos) << pull.out;
  // The same digest, verified with the same key, from fewer bytes than the archive has.
  EXPECT_EQ(shell(std::string(KILN_BINARY) + " digest " + out).out, digest + "\n");
  Outcome verify = shell(std::string(KILN_BINARY) + " verify " + out + " --deep --trust " + pub());
  EXPECT_EQ(verify.code, 0) << verify.out;
  EXPECT_NE(verify.out.find("member(s) absent"), std::string::npos) << verify.out;
  struct stat whole {}, part {};
  ::stat(kMixed.c_str(), &whole);
  ::stat(out.c_str(), &part);
  EXPECT_LT(part.st_size, whole.st_size / 2);
  EXPECT_LT(stat_value(pull.out, "bytes_received"), static_cast<std::uint64_t>(whole.st_size) * 2 / 3) << pull.out;

  std::map<std::string, bool> held = presence(out);
  EXPECT_TRUE(held.at("kiln.toml"));
  EXPECT_TRUE(held.at("kiln/kernels/matmul_relu"));
  EXPECT_TRUE(held.at("matmul_relu.sm_90a.cubin"));  // what preflight --target sm_90 chooses
  EXPECT_FALSE(held.at("matmul_relu.compute_90.ptx"));
  EXPECT_FALSE(held.at("matmul_relu.gfx908.co"));
  EXPECT_FALSE(held.at("matmul_relu.cu"));  // sources are not fetched

  // Asked for what it lacks, a reader refuses by name, before writing anything.
  Outcome extract = shell(std::string(KILN_BINARY) + " extract " + out + " -C " + f.dir + "/x --trust " + pub() +
                          " -m matmul_relu.gfx908.co");
  EXPECT_NE(extract.code, 0);
  EXPECT_NE(extract.out.find("member 'matmul_relu.gfx908.co' is absent from this sparse archive"), std::string::npos)
      << extract.out;
  EXPECT_FALSE(exists(f.dir + "/x"));
  // The resolver takes what it holds and names what it lacks.
  Outcome pre = shell(std::string(KILN_BINARY) + " preflight " + out + " --trust " + pub() + " --target sm_90,gfx908");
  EXPECT_NE(pre.out.find("native sm_90a cubin 'matmul_relu.sm_90a.cubin'"), std::string::npos) << pre.out;
  EXPECT_NE(pre.out.find("'matmul_relu.gfx908.co' (absent from this sparse archive)"), std::string::npos) << pre.out;
  // A registry holds archives whole: the sparse copy is not pushed.
  Outcome push = kiln("push " + out + " " + repo() + ":sparse");
  EXPECT_EQ(push.code, 3) << push.out;
  EXPECT_NE(push.out.find("is a sparse archive"), std::string::npos) << push.out;
}

TEST_F(SparsePullTest, AnAmdTargetGetsOnlyItsCodeObject) {
  const std::string out = f.dir + "/gfx908.kiln";
  Outcome pull = kiln("pull " + repo() + "@kiln:" + digest + " -o " + out + " --trust " + pub() + " --target gfx908");
  ASSERT_EQ(pull.code, 0) << pull.out;
  std::map<std::string, bool> held = presence(out);
  EXPECT_TRUE(held.at("matmul_relu.gfx908.co"));
  EXPECT_FALSE(held.at("matmul_relu.gfx90a_xnack-.co"));
  EXPECT_FALSE(held.at("matmul_relu.sm_90a.cubin"));
}

TEST_F(SparsePullTest, TargetsNeedTheKeysTheResolverReadsWith) {
  Outcome pull = kiln("pull " + repo() + ":mixed -o " + f.dir + "/x.kiln --target sm_90");
  EXPECT_EQ(pull.code, 3) << pull.out;
  EXPECT_NE(pull.out.find("give --trust KEYS"), std::string::npos) << pull.out;
  EXPECT_FALSE(exists(f.dir + "/x.kiln"));
  Outcome tests_alone = kiln("pull " + repo() + ":mixed -o " + f.dir + "/x.kiln --trust " + pub() + " --tests");
  EXPECT_EQ(tests_alone.code, 3) << tests_alone.out;
  EXPECT_NE(tests_alone.out.find("--tests goes with --target or --device"), std::string::npos) << tests_alone.out;
  EXPECT_FALSE(exists(f.dir + "/x.kiln"));
}

TEST_F(SparsePullTest, ARegistryWithoutRangesGivesTheWholeArchiveAndSaysSo) {
  test::CuttingProxy proxy(registry->port(), ~0ull, /*hide_range=*/true);
  const std::string out = f.dir + "/whole.kiln";
  Outcome pull = kiln("pull 127.0.0.1:" + std::to_string(proxy.port()) + "/kiln/mixed:mixed -o " + out + " --trust " + pub() +
                      " --target sm_90");
  ASSERT_EQ(pull.code, 0) << pull.out;
  EXPECT_NE(pull.out.find("does not serve range requests"), std::string::npos) << pull.out;
  EXPECT_EQ(pull.out.find("  sparse "), std::string::npos) << pull.out;
  EXPECT_TRUE(read_text(out) == read_text(kMixed));
}

TEST_F(SparsePullTest, BytesChangedInTheRegistryAreRefusedAndNothingIsWritten) {
  // The layer on the registry's disk, changed: once inside the code sm_90 fetches, once in the
  // index head (refused on its digest, before any of the index is parsed).
  Outcome push = kiln("push " + kMixed + " " + repo() + ":again --stats");
  std::string layer = field(push.out, "layer");
  const std::string blob = registry->blob_path(layer);
  std::string bytes = read_text(blob);
  const std::string original = bytes;
  // The head begins at index_offset (header bytes 16..23).
  std::uint64_t index_offset = 0;
  for (int i = 0; i < 8; ++i) index_offset |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[16 + i])) << (8 * i);
  bytes[index_offset + 40] ^= 1;
  ::chmod(blob.c_str(), 0644);
  spit(blob, bytes);
  const std::string out = f.dir + "/bad.kiln";
  Outcome head = kiln("pull " + repo() + ":mixed -o " + out + " --trust " + pub() + " --target sm_90");
  EXPECT_EQ(head.code, 1) << head.out;
  EXPECT_NE(head.out.find("the archive's index head hashes to"), std::string::npos) << head.out;
  EXPECT_FALSE(exists(out));

  // A byte of a member the pull fetches: found by its digest.
  bytes = original;
  Outcome inspect = shell(std::string(KILN_BINARY) + " inspect --json " + kMixed);
  json::Value doc = json::parse(inspect.out, "inspect");
  std::uint64_t at = 0;
  for (const json::Value& m : doc.get("members")->array) {
    if (*m.get_string("path") == "matmul_relu.sm_90a.cubin") at = static_cast<std::uint64_t>(m.get("offset")->number);
  }
  ASSERT_GT(at, 0u);
  bytes[at + 8] ^= 1;
  spit(blob, bytes);
  Outcome member = kiln("pull " + repo() + ":mixed -o " + out + " --trust " + pub() + " --target sm_90");
  EXPECT_EQ(member.code, 1) << member.out;
  EXPECT_NE(member.out.find("matmul_relu.sm_90a.cubin': stored bytes do not match the index"), std::string::npos) << member.out;
  EXPECT_FALSE(exists(out));
}

TEST_F(SparsePullTest, AStoreKeepsSparseCopiesJoinedAndTheWholeArchiveOverThem) {
  store::Store::init(f.store, pub());
  Outcome first = kiln("store pull --store " + f.store + " " + repo() + ":mixed --target sm_90");
  ASSERT_EQ(first.code, 0) << first.out;
  EXPECT_NE(first.out.find("  sparse "), std::string::npos) << first.out;
  const std::string held = f.store + "/archives/" + digest.substr(7) + ".kiln";
  EXPECT_FALSE(presence(held).at("matmul_relu.gfx908.co"));
  Outcome second = kiln("store pull --store " + f.store + " " + repo() + ":mixed --target gfx908");
  ASSERT_EQ(second.code, 0) << second.out;
  EXPECT_NE(second.out.find("joined"), std::string::npos) << second.out;
  std::map<std::string, bool> both = presence(held);
  EXPECT_TRUE(both.at("matmul_relu.gfx908.co"));
  EXPECT_TRUE(both.at("matmul_relu.sm_90a.cubin"));
  EXPECT_FALSE(both.at("matmul_relu.gfx1030.co"));
  EXPECT_EQ(shell(std::string(KILN_BINARY) + " store verify --store " + f.store).code, 0);
  Outcome list = shell(std::string(KILN_BINARY) + " store list --store " + f.store);
  EXPECT_NE(list.out.find(" sparse (of "), std::string::npos) << list.out;
  // The whole archive replaces them; a sparse pull after it keeps the whole one.
  ASSERT_EQ(kiln("store pull --store " + f.store + " " + repo() + ":mixed").code, 0);
  EXPECT_TRUE(read_text(held) == read_text(kMixed));
  Outcome after = kiln("store pull --store " + f.store + " " + repo() + ":mixed --target sm_90");
  ASSERT_EQ(after.code, 0) << after.out;
  EXPECT_NE(after.out.find("held whole"), std::string::npos) << after.out;
  EXPECT_TRUE(read_text(held) == read_text(kMixed));
}

}  // namespace
}  // namespace kiln
