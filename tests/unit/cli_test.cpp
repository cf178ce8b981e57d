// The kiln command as a user runs it: exit codes, outputs and messages.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "core/file_io.hpp"
#include "core/json.hpp"
#include "run_command.hpp"
#include "test_support.hpp"

namespace {

using Result = kiln::test::CommandResult;

// Runs a shell command line (sh), stdout and stderr together.
Result shell(const std::string& line) { return kiln::test::run_command(line); }

Result run(const std::string& args) { return shell(std::string(KILN_BINARY) + " " + args); }

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_file(const std::string& path, const std::string& content) { std::ofstream(path, std::ios::binary) << content; }

const char* kPtx =
    ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry add_f32(.param .u64 p0)\n{\n\tret;\n}\n";

const char* kManifest = R"([package]
name = "cli-demo"
kernel_revision = "r1"
sequence = 2

[[kernel]]
name = "add"
entry = "add_f32"
backend = "cuda"
sources = ["add.cu"]
params = [{ name = "x", type = "ptr", dtype = "f32" }]
code = [{ arch = "compute_90", file = "add.ptx" }]
)";

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = kiln::test::make_temp_dir("kiln-cli");
    write_file(dir + "/kiln.toml", kManifest);
    write_file(dir + "/add.ptx", kPtx);
    write_file(dir + "/add.cu", "// source\n");
    ASSERT_EQ(run("keygen --out " + dir + "/ci").code, 0);
    archive = dir + "/demo.kiln";
    Result packed = run("pack " + dir + "/kiln.toml --key " + dir + "/ci.key -o " + archive);
    ASSERT_EQ(packed.code, 0) << packed.out;
  }
  std::string dir, archive;
};

TEST_F(Cli, KeygenWritesAPrivateKeyOnlyTheOwnerCanRead) {
  struct stat st {};
  ASSERT_EQ(::stat((dir + "/ci.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_NE(read_file(dir + "/ci.key").find("BEGIN PRIVATE KEY"), std::string::npos);
  EXPECT_NE(read_file(dir + "/ci.pub").find("BEGIN PUBLIC KEY"), std::string::npos);
  Result again = run("keygen --out " + dir + "/ci");
  EXPECT_EQ(again.code, 4);
  EXPECT_NE(again.out.find("already exists"), std::string::npos) << again.out;
}

TEST_F(Cli, VerifyDigestAndInspect) {
  Result verify = run("verify " + archive + " --trust " + dir + "/ci.pub");
  EXPECT_EQ(verify.code, 0) << verify.out;
  EXPECT_NE(verify.out.find("verified"), std::string::npos);

  Result digest = run("digest " + archive);
  EXPECT_EQ(digest.code, 0);
  ASSERT_EQ(digest.out.size(), 7u + 64u + 1u) << digest.out;  // "sha256:" + hex + newline, nothing else
  EXPECT_EQ(digest.out.rfind("sha256:", 0), 0u);
  EXPECT_NE(verify.out.find(digest.out.substr(0, 71)), std::string::npos);

  Result json = run("verify " + archive + " --trust " + dir + "/ci.pub --json");
  EXPECT_EQ(json.code, 0);
  EXPECT_NE(json.out.find("\"ok\":true"), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("\"package\":\"cli-demo\""), std::string::npos);

  Result inspect = run("inspect " + archive + " --json");
  EXPECT_EQ(inspect.code, 0);
  EXPECT_NE(inspect.out.find("\"arch\":\"compute_90\""), std::string::npos) << inspect.out;
  // Every archive's head carries the kernel table's entry, a tree head of one level where the
  // entry pages fit (FORMAT.md §3).
  EXPECT_NE(inspect.out.find("\"index\":{\"form\":\"tree\",\"levels\":1,\"head_references\":3,\"kernel_table_entry\":true,"),
            std::string::npos)
      << inspect.out;
  Result human = run("inspect " + archive);
  EXPECT_NE(human.out.find("not checked: pass --trust"), std::string::npos) << human.out;
  // Each size says what it measures: inspect the file, verify the stored bytes, pack the content.
  EXPECT_NE(human.out.find(" file)\n"), std::string::npos) << human.out;
  EXPECT_NE(verify.out.find(" stored"), std::string::npos) << verify.out;
  Result repacked = run("pack " + dir + "/kiln.toml --key " + dir + "/ci.key -o " + dir + "/again.kiln");
  EXPECT_NE(repacked.out.find(" of content\n"), std::string::npos) << repacked.out;
  EXPECT_NE(human.out.find("; tree (KILNIDX4, with the kernel table's entry): a head of 3 references, 1 level of pages below it"),
            std::string::npos)
      << human.out;
}

// A range shape packs, verifies (the kernel table re-derived from kiln.toml) and reads back in
// inspect as text and as JSON; an unbounded shared_mem is refused at pack with its place.
TEST_F(Cli, RangeShapesPackVerifyAndInspect) {
  std::string manifest = std::string(kManifest);
  manifest.replace(manifest.find("params = [{ name = \"x\", type = \"ptr\", dtype = \"f32\" }]"),
                   std::string("params = [{ name = \"x\", type = \"ptr\", dtype = \"f32\" }]").size(),
                   "params = [{ name = \"x\", type = \"ptr\", dtype = \"f32\" }, { name = \"m\", type = \"i32\" }]");
  std::string shape = "\n[[kernel.shape]]\nname = \"any_m\"\nranges = { m = [1, 8192] }\nwhere = [\"m % 16 == 0\"]\n"
                      "grid = [\"cdiv(m, 128)\", 1]\nblock = [256]\nshared_mem = \"min(65536, 8 * m)\"\n";
  write_file(dir + "/kiln.toml", manifest + shape);
  std::string ranged = dir + "/ranged.kiln";
  Result packed = run("pack " + dir + "/kiln.toml --key " + dir + "/ci.key -o " + ranged);
  ASSERT_EQ(packed.code, 0) << packed.out;
  Result verify = run("verify " + ranged + " --trust " + dir + "/ci.pub");
  EXPECT_EQ(verify.code, 0) << verify.out;
  Result human = run("inspect " + ranged);
  EXPECT_NE(human.out.find("shape  any_m  (range shape) m in [1, 8192] where m % 16 == 0"), std::string::npos) << human.out;
  EXPECT_NE(human.out.find("grid(cdiv(m, 128), 1, 1) block(256, 1, 1) smem min(65536, 8 * m) (at most 65536)"),
            std::string::npos) << human.out;
  Result json = run("inspect " + ranged + " --json");
  EXPECT_NE(json.out.find("\"shapes\":[\"any_m\"],\"shape_specs\":[{\"name\":\"any_m\",\"range\":true,\"values\":{},"
                          "\"ranges\":{\"m\":[1,8192]},\"where\":[\"m % 16 == 0\"],\"grid\":[\"cdiv(m, 128)\",1,1],"
                          "\"block\":[256,1,1],\"shared_mem\":\"min(65536, 8 * m)\",\"max_shared_mem\":65536}]"),
            std::string::npos) << json.out;

  std::string unbounded = shape;
  unbounded.replace(unbounded.find("\"min(65536, 8 * m)\""), std::string("\"min(65536, 8 * m)\"").size(), "\"8 * m * m * m\"");
  write_file(dir + "/kiln.toml", manifest + unbounded);
  Result refused = run("pack " + dir + "/kiln.toml --key " + dir + "/ci.key -o " + dir + "/no.kiln");
  EXPECT_NE(refused.code, 0);
  EXPECT_NE(refused.out.find("kiln.toml:"), std::string::npos) << refused.out;
  EXPECT_NE(refused.out.find("shared_mem in kernel 'add' shape[0] has no bound within 2147483647 bytes"), std::string::npos)
      << refused.out;
}

// Every --json report is one document a strict reader accepts, whatever the file is called: a
// name with a quote, a newline and a byte that is not UTF-8 comes back escaped (U+FFFD).
TEST_F(Cli, JsonReportsParseEvenForAStrangeFileName) {
  std::string odd = dir + "/we\"ird\n\xff.kiln";
  write_file(odd, read_file(archive));
  std::string quoted = "'" + odd + "'";
  for (const std::string& command : {"verify " + quoted + " --trust " + dir + "/ci.pub --json", "inspect " + quoted + " --json",
                                     "preflight " + quoted + " --trust " + dir + "/ci.pub --json"}) {
    Result r = run(command);
    ASSERT_EQ(r.code, 0) << command << "\n" << r.out;
    kiln::json::Value doc;
    ASSERT_NO_THROW(doc = kiln::json::parse(r.out, command)) << r.out;
    ASSERT_NE(doc.get_string("file"), nullptr) << r.out;
    EXPECT_EQ(*doc.get_string("file"), dir + "/we\"ird\n\xef\xbf\xbd.kiln");
  }
  write_file(odd, "not an archive");
  Result bad = run("verify " + quoted + " --trust " + dir + "/ci.pub --json");
  EXPECT_EQ(bad.code, 1) << bad.out;
  kiln::json::Value doc = kiln::json::parse(bad.out.substr(0, bad.out.find("}}") + 2), "verify --json");
  ASSERT_NE(doc.get("error"), nullptr) << bad.out;
  EXPECT_FALSE(doc.get("ok")->boolean);
}

TEST_F(Cli, OneChangedByteIsRefusedWithExitCodeOneAndNamesTheMember) {
  std::string bytes = read_file(archive);
  bytes[200] = static_cast<char>(bytes[200] ^ 1);  // inside the first member
  write_file(dir + "/bad.kiln", bytes);
  Result r = run("verify " + dir + "/bad.kiln --trust " + dir + "/ci.pub");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("refused"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("member '"), std::string::npos) << r.out;
  Result json = run("verify " + dir + "/bad.kiln --trust " + dir + "/ci.pub --json");
  EXPECT_NE(json.out.find("\"ok\":false"), std::string::npos) << json.out;
}

TEST_F(Cli, WrongKeyIsRefused) {
  ASSERT_EQ(run("keygen --out " + dir + "/other").code, 0);
  Result r = run("verify " + archive + " --trust " + dir + "/other.pub");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("0 distinct trusted signer(s), 1 required"), std::string::npos) << r.out;
}

TEST_F(Cli, SignAddsASecondSignerWithoutChangingTheDigest) {
  std::string before = run("digest " + archive).out;
  ASSERT_EQ(run("keygen --out " + dir + "/release").code, 0);
  Result signed_ = run("sign " + archive + " --key " + dir + "/release.key --signer 'release team'");
  EXPECT_EQ(signed_.code, 0) << signed_.out;
  EXPECT_EQ(run("digest " + archive).out, before);
  ::mkdir((dir + "/trust").c_str(), 0755);
  write_file(dir + "/trust/ci.pub", read_file(dir + "/ci.pub"));
  write_file(dir + "/trust/release.pub", read_file(dir + "/release.pub"));
  Result two = run("verify " + archive + " --trust " + dir + "/trust --threshold 2");
  EXPECT_EQ(two.code, 0) << two.out;
  EXPECT_NE(two.out.find("signer 'release team'"), std::string::npos) << two.out;
  Result twice = run("sign " + archive + " --key " + dir + "/release.key");
  EXPECT_EQ(twice.code, 3);
  EXPECT_NE(twice.out.find("already signed"), std::string::npos);
}

// A second signature is someone's decision: packing over the archive with only the first key
// must not drop it without a word. A rebuild signed by the same keys replaces the file as before.
TEST_F(Cli, PackRefusesToDropASignatureItDoesNotMakeUnlessForced) {
  ASSERT_EQ(run("keygen --out " + dir + "/release").code, 0);
  ASSERT_EQ(run("sign " + archive + " --key " + dir + "/release.key --signer 'release team'").code, 0);
  const std::string before = read_file(archive);
  Result over = run("pack " + dir + "/kiln.toml --key " + dir + "/ci.key -o " + archive);
  EXPECT_EQ(over.code, 3) << over.out;
  EXPECT_NE(over.out.find("signer 'release team'"), std::string::npos) << over.out;
  EXPECT_NE(over.out.find("--force"), std::string::npos) << over.out;
  EXPECT_EQ(read_file(archive), before);  // untouched
  // The same keys: a rebuild, replaced.
  EXPECT_EQ(run("pack " + dir + "/kiln.toml --key " + dir + "/ci.key --key " + dir + "/release.key -o " + archive).code, 0);
  EXPECT_EQ(run("pack " + dir + "/kiln.toml --key " + dir + "/ci.key -o " + archive + " --force").code, 0);
  EXPECT_EQ(run("pack " + dir + "/kiln.toml --key " + dir + "/ci.key -o " + archive).code, 0);  // one key, its own
}

TEST_F(Cli, ExtractWritesVerifiedMembersAndNeverOverwrites) {
  Result r = run("extract " + archive + " -C " + dir + "/out --trust " + dir + "/ci.pub");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(read_file(dir + "/out/add.ptx"), kPtx);
  EXPECT_EQ(read_file(dir + "/out/kiln.toml"), kManifest);
  Result again = run("extract " + archive + " -C " + dir + "/out --trust " + dir + "/ci.pub");
  EXPECT_EQ(again.code, 4);
  EXPECT_NE(again.out.find("never overwrites"), std::string::npos) << again.out;
  Result unsigned_ = run("extract " + archive + " -C " + dir + "/out2");
  EXPECT_EQ(unsigned_.code, 3);
  EXPECT_NE(unsigned_.out.find("--skip-signatures"), std::string::npos);
}

// The destination must be new or an empty folder: a folder holding anything (a planted link
// included) is refused before any member is written, and a link or a file in its place too.
TEST_F(Cli, ExtractDoesNotFollowALinkPlantedInTheTarget) {
  write_file(dir + "/kiln.toml", std::string(kManifest) + "ir = [\"ir/add.ll\"]\n");
  ::mkdir((dir + "/ir").c_str(), 0755);
  write_file(dir + "/ir/add.ll", "; llvm ir\n");
  ASSERT_EQ(run("pack " + dir + "/kiln.toml --key " + dir + "/ci.key -o " + archive).code, 0);
  ::mkdir((dir + "/out").c_str(), 0755);
  ::mkdir((dir + "/elsewhere").c_str(), 0755);
  ASSERT_EQ(::symlink((dir + "/elsewhere").c_str(), (dir + "/out/ir").c_str()), 0);
  Result r = run("extract " + archive + " -C " + dir + "/out --trust " + dir + "/ci.pub");
  EXPECT_EQ(r.code, 4) << r.out;
  EXPECT_NE(r.out.find(dir + "/out: already exists and is not empty; kiln extract never overwrites"), std::string::npos) << r.out;
  EXPECT_EQ(kiln::list_directory(dir + "/elsewhere"), std::vector<std::string>{});

  ASSERT_EQ(::symlink((dir + "/elsewhere").c_str(), (dir + "/linked").c_str()), 0);
  Result linked = run("extract " + archive + " -C " + dir + "/linked --trust " + dir + "/ci.pub");
  EXPECT_EQ(linked.code, 4) << linked.out;
  EXPECT_NE(linked.out.find(dir + "/linked: already exists and is not a folder (a file or a link)"), std::string::npos) << linked.out;
  EXPECT_EQ(kiln::list_directory(dir + "/elsewhere"), std::vector<std::string>{});

  ::mkdir((dir + "/empty").c_str(), 0750);
  Result empty = run("extract " + archive + " -C " + dir + "/empty --trust " + dir + "/ci.pub");
  EXPECT_EQ(empty.code, 0) << empty.out;
  EXPECT_EQ(read_file(dir + "/empty/ir/add.ll"), "; llvm ir\n");
  struct stat st {};
  ASSERT_EQ(::stat((dir + "/empty").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0750u);  // the empty folder's mode is kept
}

// Incompressible bytes (stored raw, so a test can find and change them in the archive).
std::string noise(std::size_t size, std::uint32_t seed) {
  std::string out;
  for (std::size_t i = 0; i < size; ++i) {
    seed = seed * 1664525u + 1013904223u;
    out += static_cast<char>(seed >> 24);
  }
  return out;
}

// What `dir` holds besides the names in `before`: a failed extract must leave none.
std::vector<std::string> left_behind(const std::string& dir, const std::vector<std::string>& before) {
  std::vector<std::string> extra;
  for (const std::string& name : kiln::list_directory(dir)) {
    if (std::find(before.begin(), before.end(), name) == before.end()) extra.push_back(name);
  }
  return extra;
}

TEST_F(Cli, ExtractLeavesNothingWhenAMemberIsCorruptAfterGoodOnes) {
  // The corrupt member sorts last, after add.cu, add.ptx, kiln.toml and the kiln/ members,
  // which the old extract had already written (and left) when it reached it.
  std::string late = noise(4096, 7);
  ::mkdir((dir + "/zz").c_str(), 0755);
  write_file(dir + "/zz/late.bin", late);
  write_file(dir + "/kiln.toml", std::string(kManifest) + "\n[files]\nextra = [\"zz/late.bin\"]\n");
  ASSERT_EQ(run("pack " + dir + "/kiln.toml --key " + dir + "/ci.key -o " + archive).code, 0);
  std::string bytes = read_file(archive);
  std::size_t at = bytes.find(late);
  ASSERT_NE(at, std::string::npos);
  bytes[at + 100] = static_cast<char>(bytes[at + 100] ^ 1);
  write_file(archive, bytes);

  std::vector<std::string> before = kiln::list_directory(dir);
  Result r = run("extract " + archive + " -C " + dir + "/out --trust " + dir + "/ci.pub");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("member 'zz/late.bin': stored bytes do not match the index"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("kiln extract wrote nothing"), std::string::npos) << r.out;
  EXPECT_EQ(left_behind(dir, before), std::vector<std::string>{});
}

// A write that fails midway (the file size limit stops the big last member) leaves no
// destination and no temporary folder, and says so.
TEST_F(Cli, ExtractThatFailsWhileWritingLeavesNothingBehind) {
  ::mkdir((dir + "/zz").c_str(), 0755);
  write_file(dir + "/zz/big.bin", noise(1 << 20, 11));
  write_file(dir + "/kiln.toml", std::string(kManifest) + "\n[files]\nextra = [\"zz/big.bin\"]\n");
  ASSERT_EQ(run("pack " + dir + "/kiln.toml --key " + dir + "/ci.key -o " + archive).code, 0);

  std::vector<std::string> before = kiln::list_directory(dir);
  // SIGXFSZ ignored, so that the write past the limit fails with EFBIG instead of killing kiln.
  Result r = shell("trap '' XFSZ; ulimit -f 256; " + std::string(KILN_BINARY) + " extract " + archive + " -C " + dir +
                   "/out --trust " + dir + "/ci.pub");
  EXPECT_EQ(r.code, 4) << r.out;
  EXPECT_NE(r.out.find(dir + "/out/zz/big.bin: write failed: File too large"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("kiln extract wrote nothing: the temporary folder " + dir + "/.out.kiln-extract-"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("was removed and " + dir + "/out was left as it was"), std::string::npos) << r.out;
  EXPECT_EQ(left_behind(dir, before), std::vector<std::string>{});

  Result unlimited = run("extract " + archive + " -C " + dir + "/out --trust " + dir + "/ci.pub");
  EXPECT_EQ(unlimited.code, 0) << unlimited.out;
  EXPECT_EQ(read_file(dir + "/out/zz/big.bin"), noise(1 << 20, 11));
}

// A validly signed archive with a file where another member needs a folder: refused by verify
// and by extract before anything is written (it used to fail midway, "not a plain folder").
TEST_F(Cli, ArchiveWithAFileWhereAFolderMustBeIsRefusedBeforeExtracting) {
  kiln::PrivateKey key = kiln::PrivateKey::generate();
  write_file(dir + "/hostile.pub", key.public_key().to_pem());
  kiln::PackageIdentity id = kiln::test::default_identity();
  std::vector<kiln::MemberInput> members = kiln::test::small_members(id);
  kiln::MemberInput file;
  file.path = "src";
  file.role = kiln::format::Role::source;
  file.content = kiln::test::bytes_of("not a folder\n");
  members.push_back(file);
  kiln::test::RawArchive raw = kiln::test::raw_from_members(id, members);
  raw.signers = {kiln::Signer{&key, "hostile", 0}};
  std::vector<std::uint8_t> bytes = kiln::test::assemble(raw);
  write_file(dir + "/hostile.kiln", std::string(bytes.begin(), bytes.end()));

  const std::string reason = "the member path 'src' is a file, but 'src/add.cu' needs a folder of that name";
  Result verify = run("verify " + dir + "/hostile.kiln --trust " + dir + "/hostile.pub");
  EXPECT_EQ(verify.code, 1) << verify.out;
  EXPECT_NE(verify.out.find(reason), std::string::npos) << verify.out;
  std::vector<std::string> before = kiln::list_directory(dir);
  Result r = run("extract " + dir + "/hostile.kiln -C " + dir + "/out --trust " + dir + "/hostile.pub");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find(dir + "/hostile.kiln: index: " + reason), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("not a plain folder"), std::string::npos) << r.out;
  EXPECT_EQ(left_behind(dir, before), std::vector<std::string>{});
}

// extract --trust verifies what kiln verify --deep does before writing: here every member's
// digest holds, but the signed kernel table names another entry symbol than kiln.toml (the old
// extract checked member digests only, and wrote this archive out).
TEST_F(Cli, ExtractRefusesAKernelTableThatDisagreesWithKilnTomlBeforeWriting) {
  kiln::PrivateKey key = kiln::PrivateKey::generate();
  write_file(dir + "/hostile.pub", key.public_key().to_pem());
  kiln::PackageIdentity id = kiln::test::default_identity();
  kiln::test::RawArchive raw = kiln::test::raw_from_members(id, kiln::test::small_members(id));
  raw.signers = {kiln::Signer{&key, "hostile", 0}};
  kiln::Manifest m = kiln::parse_manifest(kiln::test::small_manifest(id), "kiln.toml");
  m.kernels[0].entry = "evil_entry";
  const std::string record_path = kiln::kernel_record_path("add");
  raw.derived[record_path] = [kernel = m.kernels[0]](const kiln::CodeEntryLookup& entries) {
    return kiln::encode_kernel_record(kernel, &entries);
  };
  std::vector<std::uint8_t> bytes = kiln::test::assemble(raw);
  write_file(dir + "/hostile.kiln", std::string(bytes.begin(), bytes.end()));

  std::vector<std::string> before = kiln::list_directory(dir);
  Result r = run("extract " + dir + "/hostile.kiln -C " + dir + "/out --trust " + dir + "/hostile.pub");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("kiln.toml and " + record_path + " describe different kernels"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("kiln extract wrote nothing (the archive was refused before any member was written)"),
            std::string::npos) << r.out;
  EXPECT_EQ(left_behind(dir, before), std::vector<std::string>{});
}

// kiln pack refuses, naming the file, every path that would extract differently on some system.
TEST_F(Cli, PackRefusesPathsThatWouldExtractDifferentlyElsewhere) {
  std::string long_name = std::string(253, 'l') + ".cu";
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"add.cu", "ADD.cu"}, "the member paths 'ADD.cu' and 'add.cu' differ only in ASCII case"},
      {{"add.cu", "Src/a.cu", "src/b.cu"}, "the member paths 'Src/a.cu' and 'src/b.cu' use the names 'Src' and 'src'"},
      {{"add.cu", "nul.cu"}, "the path 'nul.cu' has the component 'nul.cu', a Windows device name"},
      {{"add.cu", long_name}, "the path '" + long_name + "' has a component of 256 bytes, over 255"},
      {{"add.cu", "KILN/evil.sh"}, "the path 'KILN/evil.sh' is inside the reserved folder 'kiln/'"},
      {{"add.cu", "kiln/evil.sh"}, "the path 'kiln/evil.sh' is inside the reserved folder 'kiln/'"},
      {{"add.cu", "notes."}, "the path 'notes.' has a component ending in '.'"},
  };
  for (const auto& [sources, reason] : cases) {
    std::string list;
    for (const std::string& s : sources) {
      list += (list.empty() ? "\"" : ", \"") + s + "\"";
      if (s.size() <= 255) {  // a name Linux cannot hold is refused from the manifest alone
        std::size_t slash = s.rfind('/');
        if (slash != std::string::npos) ::mkdir((dir + "/" + s.substr(0, slash)).c_str(), 0755);
        write_file(dir + "/" + s, "// " + s + "\n");
      }
    }
    std::string manifest = kManifest;
    manifest.replace(manifest.find("sources = [\"add.cu\"]"), 20, "sources = [" + list + "]");
    write_file(dir + "/kiln.toml", manifest);
    Result r = run("pack " + dir + "/kiln.toml --key " + dir + "/ci.key -o " + dir + "/refused.kiln");
    EXPECT_EQ(r.code, 3) << r.out;
    EXPECT_NE(r.out.find(reason), std::string::npos) << r.out;
    EXPECT_FALSE(std::ifstream(dir + "/refused.kiln").good()) << reason;
  }
}

TEST_F(Cli, BadManifestExitsThreeWithLocation) {
  write_file(dir + "/kiln.toml", std::string(kManifest).replace(std::string(kManifest).find("sequence = 2"), 12, "sequence = -2"));
  Result r = run("pack " + dir + "/kiln.toml --key " + dir + "/ci.key -o " + dir + "/x.kiln");
  EXPECT_EQ(r.code, 3) << r.out;
  EXPECT_NE(r.out.find("kiln.toml:4:12: 'sequence' in [package] must be between 1 and"), std::string::npos) << r.out;
}

TEST_F(Cli, UsageErrorsExitTwoAndHelpListsExitCodes) {
  EXPECT_EQ(run("").code, 2);
  EXPECT_EQ(run("verify").code, 2);
  EXPECT_EQ(run("frobnicate").code, 2);
  // The command the mistake belongs to, and the nearest command where a word is not one.
  Result typo = run("verfy " + archive);
  EXPECT_EQ(typo.code, 2);
  EXPECT_NE(typo.out.find("kiln: 'verfy' is not a command of kiln; did you mean 'verify'?"), std::string::npos) << typo.out;
  Result nested = run("store activat x");
  EXPECT_NE(nested.out.find("kiln store: 'activat' is not a command of kiln store; did you mean 'activate'?"), std::string::npos)
      << nested.out;
  Result missing = run("verify");
  EXPECT_NE(missing.out.find("kiln verify: "), std::string::npos) << missing.out;
  EXPECT_NE(missing.out.find("Run 'kiln verify --help'"), std::string::npos) << missing.out;
  Result help = run("--help");
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("Exit codes"), std::string::npos) << help.out;
}

TEST_F(Cli, PackIsReproducible) {
  std::string first = read_file(archive);
  ASSERT_EQ(run("pack " + dir + "/kiln.toml --key " + dir + "/ci.key -o " + dir + "/again.kiln").code, 0);
  EXPECT_EQ(read_file(dir + "/again.kiln"), first);
  ASSERT_EQ(run("pack " + dir + "/kiln.toml --key " + dir + "/ci.key -o " + dir + "/j1.kiln -j 1").code, 0);
  EXPECT_EQ(read_file(dir + "/j1.kiln"), first);
  // --timings says where the time went, and changes nothing in the archive.
  Result timed = run("pack " + dir + "/kiln.toml --key " + dir + "/ci.key -o " + dir + "/timed.kiln -j 3 --timings -q");
  ASSERT_EQ(timed.code, 0) << timed.out;
  EXPECT_NE(timed.out.find("kiln pack: plan "), std::string::npos) << timed.out;
  EXPECT_NE(timed.out.find("members read and checked), write "), std::string::npos) << timed.out;
  EXPECT_NE(timed.out.find("(-j 3, incl. fsync)"), std::string::npos) << timed.out;
  EXPECT_EQ(read_file(dir + "/timed.kiln"), first);
}

}  // namespace

#ifdef KILN_TEST_ARCHIVES
// The test build's package of 1,059 members is written as a tree; inspect says so, and how deep.
TEST(CliInspect, ShowsTheIndexForm) {
  std::string archive = std::string(KILN_TEST_ARCHIVES) + "/tree-index.kiln";
  if (!std::ifstream(archive)) GTEST_SKIP() << "tree-index.kiln needs Python 3 at build time";
  Result human = run("inspect " + archive);
  ASSERT_EQ(human.code, 0) << human.out;
  EXPECT_NE(human.out.find("  index      1059 members; tree (KILNIDX4, with the kernel table's entry): a head of "),
            std::string::npos)
      << human.out;
  EXPECT_NE(human.out.find(", 2 levels of pages below it"), std::string::npos) << human.out;
  Result json = run("inspect " + archive + " --json");
  ASSERT_EQ(json.code, 0) << json.out;
  EXPECT_NE(json.out.find("\"index\":{\"form\":\"tree\",\"levels\":2,\"head_references\":"), std::string::npos)
      << json.out;
  EXPECT_NE(json.out.find("\"members\":1059}"), std::string::npos) << json.out;
}

// The members list keeps its columns whatever the longest kind and targets: the mixed archive's
// AMD bundle for "gfx90a:xnack-" is 28 characters, past the 20 a cubin's take.
TEST(CliInspect, MembersKeepTheirColumnsForLongTargets) {
  std::string archive = std::string(KILN_TEST_ARCHIVES) + "/matmul-relu-mixed.kiln";
  if (!std::ifstream(archive)) GTEST_SKIP() << "matmul-relu-mixed.kiln needs nvcc and hipcc at build time";
  Result human = run("inspect " + archive);
  ASSERT_EQ(human.code, 0) << human.out;
  std::istringstream lines(human.out.substr(human.out.find("  members\n") + 10));
  std::string line;
  std::size_t column = std::string::npos, rows = 0;
  while (std::getline(lines, line) && line.rfind("    ", 0) == 0) {
    // The path is the last field; the compression ("raw" or "zstd", padded to 5) precedes it.
    std::size_t at = line.find(" raw   ");
    if (at == std::string::npos) at = line.find(" zstd  ");
    ASSERT_NE(at, std::string::npos) << line;
    if (column == std::string::npos) column = at;
    EXPECT_EQ(at, column) << human.out;
    ++rows;
  }
  EXPECT_EQ(rows, 11u) << human.out;
}

TEST(CliGpuCommands, RunAndPreflightSayWhatTheyDidOnAHostWithoutAGpu) {
  std::string archive = std::string(KILN_TEST_ARCHIVES) + "/matmul-relu.kiln";
  std::string trust = std::string(KILN_TEST_KEYS) + "/test.pub";
  if (!std::ifstream(archive)) GTEST_SKIP() << "matmul-relu.kiln needs nvcc at build time";
  if (std::ifstream("/dev/nvidiactl")) GTEST_SKIP() << "this host has an NVIDIA device: the GPU suite covers it";
  Result run = ::run("verify " + archive + " --trust " + trust + " --run");
  EXPECT_EQ(run.code, 1) << run.out;
  EXPECT_NE(run.out.find("not run: routes to reference on this host"), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find(" us  not run"), std::string::npos) << "a test that did not run shows no time: " << run.out;
  EXPECT_NE(run.out.find("-  not run"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("--run proves nothing here: kernel 'matmul_relu' routes to reference (the CUDA driver"),
            std::string::npos) << run.out;
  // An archive whose kernels have no vectors: the reason is the archive, not the host.
  Result none = ::run("verify " + std::string(KILN_TEST_ARCHIVES) + "/scale.kiln --trust " + trust + " --run");
  EXPECT_EQ(none.code, 1) << none.out;
  EXPECT_NE(none.out.find("no kernel of this archive declares a test vector ([[kernel.test]] in kiln.toml), so --run had "
                          "nothing to run on device 0 of this host"),
            std::string::npos) << none.out;
  EXPECT_EQ(none.out.find("target GPU"), std::string::npos) << none.out;
  Result json = ::run("verify " + archive + " --trust " + trust + " --run --json");
  EXPECT_NE(json.out.find("\"ran\":false"), std::string::npos) << json.out;
  Result pre = ::run("preflight " + archive + " --trust " + trust + " --json");
  EXPECT_EQ(pre.code, 0) << pre.out;
  EXPECT_NE(pre.out.find("\"route\":\"reference\""), std::string::npos) << pre.out;
  EXPECT_NE(pre.out.find("\"reason\":\"no-driver\""), std::string::npos) << pre.out;
}
#endif

TEST(CliDiag, ShowsABundleReadably) {
  std::string dir = kiln::test::make_temp_dir("kiln-diag-test");
  std::string bundle = dir + "/kiln-diag-1-2-3";
  ::mkdir(bundle.c_str(), 0700);
  write_file(bundle + "/report.toml",
             "# a bundle\nevent = \"load\"\n\n[kernel]\nname = \"matmul_relu\"\n\n[error]\ncuda_error = 500\n"
             "message = \"CUDA_ERROR_NOT_FOUND (named symbol not found)\"\n\n[files]\n\"kiln.toml\" = \"kiln.toml\"\n");
  write_file(bundle + "/kiln.toml", "[package]\n");
  Result r = run("diag show " + bundle);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("event                load"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("message              CUDA_ERROR_NOT_FOUND (named symbol not found)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("kiln.toml"), std::string::npos) << r.out;
  EXPECT_EQ(run("diag show " + dir + "/missing").code, 4);
}

#ifdef KILN_TEST_ARCHIVES
TEST(CliMixedArchive, InspectShowsEveryTargetIdAndPreflightExplainsEachKernel) {
  std::string archive = std::string(KILN_TEST_ARCHIVES) + "/matmul-relu-mixed.kiln";
  if (!std::ifstream(archive)) GTEST_SKIP() << "matmul-relu-mixed.kiln needs nvcc and hipcc at build time";
  Result inspect = run("inspect " + archive + " --json");
  ASSERT_EQ(inspect.code, 0) << inspect.out;
  for (const char* id : {"\"arch\":\"sm_90a\"", "\"arch\":\"compute_90\"", "\"arch\":\"gfx90a:xnack-\"",
                         "\"arch\":\"gfx908\"", "\"arch\":\"gfx1030\"", "\"kind\":\"offload-bundle\""}) {
    EXPECT_NE(inspect.out.find(id), std::string::npos) << id;
  }
  Result pre = run("preflight " + archive + " --trust " + std::string(KILN_TEST_KEYS) + "/test.pub --json");
  ASSERT_EQ(pre.code, 0) << pre.out;
  EXPECT_NE(pre.out.find("\"kernel\":\"matmul_relu\",\"route\":\"reference\""), std::string::npos) << pre.out;
  EXPECT_NE(pre.out.find("CUDA: the CUDA driver"), std::string::npos) << pre.out;
  EXPECT_NE(pre.out.find("; HIP: "), std::string::npos) << pre.out;
}
#endif
