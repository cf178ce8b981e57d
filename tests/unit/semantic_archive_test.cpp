// Validly signed archives whose parts disagree — kiln.toml, the kernel table, the index and the
// code objects' own bytes — are refused by verification at its default level (what `kiln
// verify`, `kiln store add` and the release gate run), each with the reason it means; and the
// zstd rules of FORMAT.md §4 hold without --deep.
#include <gtest/gtest.h>

#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>

#include "core/archive_semantics.hpp"
#include "core/bytes.hpp"
#include "core/compress.hpp"
#include "core/error.hpp"
#include "core/kernel_table.hpp"
#include "core/zstd_layout.hpp"
#include "engine/archive.hpp"
#include "engine/runtime.hpp"
#include "kiln/kiln.h"
#include "temp_dirs.hpp"
#include "test_support.hpp"

namespace kiln {
namespace {

class Semantic : public ::testing::Test {
 protected:
  PackageIdentity id = test::default_identity();
  PrivateKey key = PrivateKey::generate();
  TrustSet trust = test::trust_of({&key});

  // The small archive with `manifest` as its kiln.toml (and the kernel table derived from it),
  // without its code object where `keep_code` is false, with `extra` members beside.
  test::RawArchive with_manifest(const std::string& manifest, bool keep_code = true, std::vector<MemberInput> extra = {}) {
    std::vector<MemberInput> members;
    for (MemberInput& m : test::small_members(id)) {
      if (m.path == "kiln.toml" || m.path.rfind("kiln/", 0) == 0) continue;
      if (m.path == "k.ptx" && !keep_code) continue;
      members.push_back(std::move(m));
    }
    for (MemberInput& m : extra) members.push_back(std::move(m));
    MemberInput toml;
    toml.path = "kiln.toml";
    toml.role = format::Role::manifest;
    toml.content = test::bytes_of(manifest);
    members.push_back(toml);
    for (MemberInput& table : kernel_table_inputs(parse_manifest(manifest, "kiln.toml"))) members.push_back(std::move(table));
    test::RawArchive raw = test::raw_from_members(id, std::move(members));
    raw.signers = {Signer{&key, "hostile", 0}};
    return raw;
  }
  test::RawArchive base() { return with_manifest(test::small_manifest(id)); }
  std::size_t position(const test::RawArchive& raw, const std::string& path) {
    for (std::size_t i = 0; i < raw.index.entries.size(); ++i) {
      if (raw.index.entries[i].path == path) return i;
    }
    throw std::runtime_error("no member " + path);
  }
  void replace_stored(test::RawArchive& raw, std::size_t i, std::vector<std::uint8_t> stored, bool zstd) {
    format::Entry& e = raw.index.entries[i];
    e.compression = zstd ? format::Compression::zstd : format::Compression::none;
    e.stored_size = stored.size();
    e.stored_sha256 = sha256(stored.data(), stored.size());
    if (!zstd) {
      e.content_size = stored.size();
      e.content_sha256 = e.stored_sha256;
    }
    raw.stored[i] = std::move(stored);
  }
  // Member i stored as `frame`, the index declaring `content` (size and digest) as what it holds.
  void replace_with_frame(test::RawArchive& raw, std::size_t i, std::vector<std::uint8_t> frame,
                          const std::vector<std::uint8_t>& content) {
    replace_stored(raw, i, std::move(frame), true);
    raw.index.entries[i].content_size = content.size();
    raw.index.entries[i].content_sha256 = sha256(content.data(), content.size());
  }
  std::unique_ptr<ArchiveReader> open_trusted(const std::vector<std::uint8_t>& bytes) {
    ReadOptions options;
    options.policy = TrustPolicy{&trust, 1};
    return ArchiveReader::open_memory(bytes.data(), bytes.size(), options);
  }
  // Refused by verification without --deep (and so with it), with `code` and `reason`.
  void expect_refused(const test::RawArchive& raw, Errc code, const std::string& reason) {
    std::vector<std::uint8_t> bytes = test::assemble(raw);
    for (bool deep : {false, true}) {
      ReadOptions options;
      options.policy = TrustPolicy{&trust, 1};
      try {
        std::unique_ptr<ArchiveReader> a = ArchiveReader::open_memory(bytes.data(), bytes.size(), options);
        a->verify_all(2, deep, nullptr);
        ADD_FAILURE() << "accepted (deep " << deep << "); expected: " << reason;
      } catch (const Failure& e) {
        EXPECT_EQ(e.code(), code) << e.what();
        EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << "deep " << deep << ": " << e.what();
      }
    }
  }
  // Refused by the runtime judging `bytes` for a described sm_90 (resolution runs every check a
  // real load does before it, the load itself simulated), with `code` and `reason`.
  // A runtime trusting the test key (its public key written to a fresh folder).
  std::unique_ptr<engine::Runtime> runtime_trusting_key() {
    std::string pub = test::make_temp_dir("kiln-semantic-runtime") + "/hostile.pub";
    std::string pem = key.public_key().to_pem();
    test::write_file(pub, std::vector<std::uint8_t>(pem.begin(), pem.end()));
    kiln_runtime_options options{};  // kiln_runtime_options_init's defaults (that function is libkiln's)
    options.size = sizeof options;
    options.signature_threshold = 1;
    options.log_level = KILN_LOG_WARN;
    options.max_member_size = 4ull << 30;
    options.trust_path = pub.c_str();
    return std::make_unique<engine::Runtime>(options);  // the keys are loaded now: the path may go
  }
  void expect_runtime_refuses(const std::vector<std::uint8_t>& bytes, Errc code, const std::string& reason) {
    std::unique_ptr<engine::Runtime> runtime = runtime_trusting_key();
    engine::Archive archive(*runtime, bytes);
    try {
      archive.preflight_target_json("sm_90", "13.0");
      ADD_FAILURE() << "judged loadable; expected: " << reason;
    } catch (const Failure& e) {
      EXPECT_EQ(e.code(), code) << e.what();
      EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << e.what();
    }
  }
  std::string manifest_with(const std::string& kernel_lines, const std::string& files = "[files]\nextra = [\"tests/vector.bin\"]\n") {
    return "[package]\nname = \"" + id.package + "\"\nkernel_revision = \"" + id.kernel_revision + "\"\nsequence = " +
           std::to_string(id.sequence) + "\n\n[[kernel]]\nname = \"add\"\nentry = \"add_f32\"\nbackend = \"cuda\"\n" +
           "params = [{ name = \"x\", type = \"ptr\", dtype = \"f32\" }, { name = \"n\", type = \"i32\" }]\n" + kernel_lines +
           "\n" + files;
  }
};

TEST_F(Semantic, TheConsistentArchiveIsAccepted) {
  std::vector<std::uint8_t> bytes = test::assemble(base());
  std::unique_ptr<ArchiveReader> a = open_trusted(bytes);
  EXPECT_NO_THROW(a->verify_all(1, false, nullptr));
  EXPECT_NO_THROW(a->verify_all(1, true, nullptr));
}

TEST_F(Semantic, AnArchTagTheBytesContradictIsRefused) {
  test::RawArchive raw = base();
  raw.index.entries[position(raw, "k.ptx")].arch = "compute_80";  // the PTX says .target sm_90
  expect_refused(raw, Errc::integrity, "member 'k.ptx' is indexed as cuda ptx for compute_80 but its bytes are cuda ptx for compute_90");
}

// The runtime re-reads a code object's header from the verified bytes before it loads it
// (engine/resolve.cpp) rather than trusting the signed index's tags alone: a signer that lied about
// the target is refused at load, not only by `kiln verify`. Judged here for a described sm_90, where
// the load is simulated after that check.
TEST_F(Semantic, AnArchTagTheBytesContradictIsRefusedWhenTheRuntimeLoadsIt) {
  // kiln.toml and the index agree on compute_80 (so every cross-check of the signed metadata
  // passes); only the bytes, which say .target sm_90, tell the truth.
  std::string manifest = test::small_manifest(id);
  const std::string claim = "arch = \"compute_90\"";
  manifest.replace(manifest.find(claim), claim.size(), "arch = \"compute_80\"");
  test::RawArchive raw = with_manifest(manifest);
  raw.index.entries[position(raw, "k.ptx")].arch = "compute_80";
  expect_runtime_refuses(test::assemble(raw), Errc::code_object,
                         "member 'k.ptx' is indexed as cuda ptx for compute_80 but its bytes are cuda ptx for compute_90");
}

// The runtime reads a kernel's code through its record's copy of the code member's entry, never
// the index (FORMAT.md §4.1): a signed record whose copy gives another digest, or bytes outside
// the members, is refused when the code is read, whatever the index says. (Full verification
// refuses both before: KernelRecordWhoseCodeEntryDiffersFromTheIndexIsRefusedByFullVerification.)
TEST_F(Semantic, TheRuntimeReadsCodeOnlyAsItsRecordsCopyOfTheEntryGivesIt) {
  const Manifest m = parse_manifest(test::small_manifest(id), "kiln.toml");
  auto forged = [&](std::function<void(format::Entry&)> forge) {
    test::RawArchive raw = base();
    raw.derived[kernel_record_path("add")] = [kernel = m.kernels[0], forge](const CodeEntryLookup& entries) {
      format::Entry copy = entries("k.ptx");
      forge(copy);
      const CodeEntryLookup one = [&copy](const std::string&) -> const format::Entry& { return copy; };
      return encode_kernel_record(kernel, &one);
    };
    return test::assemble(raw);
  };
  auto other_digest = [](format::Entry& e) {  // a raw member's two digests are one
    e.stored_sha256[0] ^= 1;
    e.content_sha256 = e.stored_sha256;
  };
  expect_runtime_refuses(forged(other_digest), Errc::integrity, "member 'k.ptx': stored bytes do not match the index");
  expect_runtime_refuses(forged(other_digest), Errc::integrity, "the expected digest is its kernel record's copy of its entry");
  // The index's own entry is changed instead, consistently with the bytes: the record's copy,
  // which still names the old digest, is what the runtime goes by.
  test::RawArchive raw = base();
  const std::size_t code = position(raw, "k.ptx");
  std::string changed = test::small_ptx();
  changed[changed.find("Generated")] = 'g';  // the same size: only the digest tells
  raw.stored[code] = test::bytes_of(changed);
  raw.derived[kernel_record_path("add")] = [kernel = m.kernels[0], old = raw.index.entries[code]](const CodeEntryLookup& entries) {
    format::Entry copy = entries("k.ptx");
    copy.stored_size = copy.content_size = old.stored_size;
    copy.stored_sha256 = copy.content_sha256 = old.stored_sha256;
    const CodeEntryLookup one = [&copy](const std::string&) -> const format::Entry& { return copy; };
    return encode_kernel_record(kernel, &one);
  };
  expect_runtime_refuses(test::assemble(raw), Errc::integrity, "member 'k.ptx': stored bytes do not match the index");
  // Bytes past the members (the index's own) are refused whatever the digest.
  expect_runtime_refuses(forged([](format::Entry& e) { e.offset += 1u << 20; }), Errc::malformed,
                         "member 'k.ptx': its kernel record places it at bytes");
}

// An archive of the older table form (KILNKTB2: records name their code by path) is read as
// before: verified, and its code found and checked through the index.
TEST_F(Semantic, AnArchiveOfTheOlderTableFormIsReadItsCodeFoundThroughTheIndex) {
  const Manifest m = parse_manifest(test::small_manifest(id), "kiln.toml");
  auto older = [&](test::RawArchive raw) {
    for (const KernelTableMember& t : encode_kernel_table(m)) {  // no entries given: KILNKTB2
      raw.derived.erase(t.path);
      const std::size_t i = position(raw, t.path);
      raw.stored[i] = t.content;
      raw.index.entries[i].stored_size = raw.index.entries[i].content_size = t.content.size();
      raw.index.entries[i].stored_sha256 = raw.index.entries[i].content_sha256 = sha256(t.content.data(), t.content.size());
    }
    return raw;
  };
  const std::vector<std::uint8_t> bytes = test::assemble(older(base()));
  std::unique_ptr<ArchiveReader> a = test::open_and_verify(bytes, trust);
  EXPECT_FALSE(a->kernel_table().code_entries());
  EXPECT_FALSE(a->kernel("add").code.at(0).member.has_value());
  std::unique_ptr<engine::Runtime> runtime = runtime_trusting_key();
  engine::Archive archive(*runtime, bytes);
  const std::string report = archive.preflight_target_json("sm_90", "13.0");
  EXPECT_NE(report.find("'k.ptx'"), std::string::npos) << report;
  EXPECT_NE(report.find("\"route\":\"ptx-jit\""), std::string::npos) << report;
  // Its code changed (the index's digest kept): refused against the index, as ever.
  test::RawArchive changed = older(base());
  std::string ptx = test::small_ptx();
  ptx[ptx.find("Generated")] = 'g';
  changed.stored[position(changed, "k.ptx")] = test::bytes_of(ptx);
  const std::vector<std::uint8_t> tampered = test::assemble(changed);
  engine::Archive hostile(*runtime, tampered);
  try {
    hostile.preflight_target_json("sm_90", "13.0");
    ADD_FAILURE() << "judged loadable";
  } catch (const Failure& e) {
    EXPECT_NE(std::string(e.what()).find("member 'k.ptx': stored bytes do not match the index"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("kernel record's copy"), std::string::npos) << e.what();
  }
}

// A variant is loaded for the target the runtime chose from the kernel's own code, so its file
// must be code for that same target: a signed archive whose variant is PTX for sm_80 beside the
// kernel's sm_90 PTX is refused by verification and, from the index alone, by the runtime
// before anything is loaded (judged for a described sm_90, where a load would be simulated).
TEST_F(Semantic, AVariantBuiltForAnotherTargetIsRefusedByVerifyAndByTheRuntime) {
  std::string manifest = test::small_manifest(id);
  const std::string files = "\n[files]";
  manifest.replace(manifest.find(files), files.size(),
                   "\n[[kernel.variant]]\nname = \"n16\"\nwhen = [\"n % 16 == 0\"]\n"
                   "code = [{ arch = \"compute_90\", file = \"v.ptx\" }]\n" + files);
  MemberInput v;
  v.path = "v.ptx";
  v.role = format::Role::code;
  v.backend = format::Vendor::cuda;
  v.kind = format::CodeKind::ptx;
  v.arch = "compute_80";  // the truth: the bytes say .target sm_80
  v.content = test::bytes_of(test::small_ptx("sm_80"));
  test::RawArchive raw = with_manifest(manifest, true, {v});
  expect_refused(raw, Errc::integrity, "kernel 'add' names 'v.ptx' as code for arch 'compute_90', but the member is indexed for compute_80");
  expect_runtime_refuses(test::assemble(raw), Errc::integrity,
                         "names 'v.ptx' as code for arch 'compute_90', but the member is indexed for compute_80");
}

TEST_F(Semantic, PtxIndexedAsACubinIsRefused) {
  test::RawArchive raw = base();
  raw.index.entries[position(raw, "k.ptx")].kind = format::CodeKind::cubin;
  expect_refused(raw, Errc::integrity, "member 'k.ptx' is indexed as cuda cubin for compute_90 but its bytes are cuda ptx");
}

TEST_F(Semantic, AKernelNamingAFileThatIsNotAMemberIsRefused) {
  test::RawArchive raw = with_manifest(test::small_manifest(id, "gone.ptx"), /*keep_code=*/false);
  expect_refused(raw, Errc::integrity, "kernel 'add' names 'gone.ptx', which is not a member of the archive");
}

TEST_F(Semantic, ACodeEntryPointingAtTheSourceIsRefused) {
  // kiln.toml lists the .cu file as the kernel's code; the index calls it PTX for compute_90.
  test::RawArchive raw = with_manifest(manifest_with("code = [{ arch = \"compute_90\", file = \"src/add.cu\" }]\n"),
                                       /*keep_code=*/false);
  format::Entry& e = raw.index.entries[position(raw, "src/add.cu")];
  e.role = format::Role::code;
  e.backend = format::Vendor::cuda;
  e.kind = format::CodeKind::ptx;
  e.arch = "compute_90";
  expect_refused(raw, Errc::integrity, "member 'src/add.cu'");
  expect_refused(raw, Errc::integrity, "(indexed as ptx for compute_90)");
}

TEST_F(Semantic, AFileNamedTwiceWithTwoRolesIsRefused) {
  test::RawArchive raw =
      with_manifest(manifest_with("sources = [\"k.ptx\"]\ncode = [{ arch = \"compute_90\", file = \"k.ptx\" }]\n"));
  expect_refused(raw, Errc::integrity, "kiln.toml names 'k.ptx' as code (kernel 'add') and as source (kernel 'add')");
}

TEST_F(Semantic, AMemberKilnTomlNeverNamesIsRefused) {
  test::RawArchive raw = with_manifest(test::small_manifest(id), true);
  std::size_t i = position(raw, "tests/vector.bin");
  raw.index.entries[i].path = "tests/vector.bim";  // still sorted: kiln.toml names the .bin
  expect_refused(raw, Errc::integrity, "member 'tests/vector.bim' is not named by kiln.toml");
}

TEST_F(Semantic, ARoleOtherThanKilnTomlGivesIsRefused) {
  test::RawArchive raw = base();
  raw.index.entries[position(raw, "src/add.cu")].role = format::Role::ir;
  expect_refused(raw, Errc::integrity, "member 'src/add.cu' has role ir but kiln.toml names it as source (kernel 'add')");
}

TEST_F(Semantic, ABrokenZstdFrameInACodeMemberIsRefusedWithoutDeep) {
  // A frame whose header and block structure are sound but whose compressed payload is not:
  // only decompressing finds it, and code members are decompressed at the default level
  // (their bytes are read to check their targets), so verify fails where warm-up would.
  test::RawArchive raw = base();
  std::size_t i = position(raw, "k.ptx");
  std::vector<std::uint8_t> content = raw.stored[i];
  std::vector<std::uint8_t> frame = zstd_compress(ByteView(content), 3);
  frame[frame.size() - 4] ^= 0xff;  // the last bytes of the last block's payload
  ASSERT_THROW(zstd_decompress_exact(ByteView(frame), content.size(), "probe"), Failure) << "the change must break the frame";
  replace_with_frame(raw, i, frame, content);
  std::vector<std::uint8_t> bytes = test::assemble(raw);
  std::unique_ptr<ArchiveReader> a = open_trusted(bytes);
  try {
    a->verify_all(1, false, nullptr);
    ADD_FAILURE() << "a broken code member passed verification without --deep";
  } catch (const Failure& e) {
    EXPECT_NE(std::string(e.what()).find("member 'k.ptx': zstd refused the frame"), std::string::npos) << e.what();
  }
}

// PTX whose first 4 KiB end inside its `.target` line ("sm_9" of "sm_90"), after a long comment:
// the default level decodes the first 4 KiB, finds no whole `.target` line there, and reads on
// to 64 KiB, identifying it as what it is. (Read as "sm_9", it would be refused as not PTX.)
std::vector<std::uint8_t> ptx_with_target_across(std::size_t cut) {
  const std::string head = "//\n// Generated for a kiln test\n//\n.version 8.0\n";
  std::string comment = "// ";
  const std::string target = ".target sm_9";  // the cut falls after this
  while (head.size() + comment.size() + 1 + target.size() < cut) comment += 'x';
  std::string text = head + comment + "\n" + target + "0\n.address_size 64\n";
  text += ".visible .entry add_f32(\n\t.param .u64 add_f32_param_0,\n\t.param .u32 add_f32_param_1\n)\n{\n\tret;\n}\n";
  for (int i = 0; i < 2000; ++i) text += "// padding so the member compresses and runs past the first block\n";
  return test::bytes_of(text);
}

TEST_F(Semantic, PtxWhoseTargetLineCrossesTheFirstFourKibIsIdentifiedWithoutDeep) {
  test::RawArchive raw = base();
  std::size_t i = position(raw, "k.ptx");
  std::vector<std::uint8_t> content = ptx_with_target_across(kZstdFirstBlock);
  ASSERT_EQ(std::string(content.begin() + kZstdFirstBlock - 12, content.begin() + kZstdFirstBlock), ".target sm_9");
  replace_with_frame(raw, i, zstd_compress(ByteView(content), 3), content);
  std::vector<std::uint8_t> bytes = test::assemble(raw);
  EXPECT_NO_THROW(open_trusted(bytes)->verify_all(1, false, nullptr));
}

TEST(ZstdWriter, AFramesFirstBlockHoldsExactlyTheFirstFourKibOfContent) {
  // A reader telling a member by its first bytes decodes the frame's first block only; the
  // writer makes that block the first kZstdFirstBlock bytes (FORMAT.md §4).
  std::string text;
  for (int i = 0; text.size() < 200000; ++i) text += "line " + std::to_string(i * 7919 % 1000) + " of a member\n";
  std::vector<std::uint8_t> content(text.begin(), text.end());
  std::vector<std::uint8_t> frame = zstd_compress(ByteView(content), 9);
  EXPECT_EQ(zstd_decompress_exact(ByteView(frame), content.size(), "frame"), content);
  // The frame header: magic, descriptor, [window], [dictionary id], content size.
  const std::uint8_t fhd = frame[4];
  const bool single = fhd & 0x20;
  const std::size_t fcs[] = {single ? 1u : 0u, 2, 4, 8};
  const std::size_t dict[] = {0, 1, 2, 4};
  std::size_t at = 4 + 1 + (single ? 0 : 1) + dict[fhd & 3] + fcs[fhd >> 6];
  const std::uint32_t block = frame[at] | frame[at + 1] << 8 | frame[at + 2] << 16;
  const std::uint32_t type = (block >> 1) & 3, size = block >> 3;
  ASSERT_FALSE(block & 1) << "the first block must not be the last";
  // Decoding the frame up to the end of its first block gives exactly the first 4 KiB.
  const std::size_t first_block_end = at + 3 + (type == 1 ? 1 : size);
  ZstdStreamDecoder decoder(content.size(), "frame");
  std::vector<std::uint8_t> got;
  decoder.feed(ByteView(frame.data(), first_block_end), [&](ByteView out) { got.insert(got.end(), out.data, out.data + out.size); });
  ASSERT_EQ(got.size(), kZstdFirstBlock);
  EXPECT_TRUE(std::equal(got.begin(), got.end(), content.begin()));
  // Small content is one block, as before.
  std::vector<std::uint8_t> small(content.begin(), content.begin() + 1000);
  EXPECT_EQ(zstd_decompress_exact(ByteView(zstd_compress(ByteView(small), 9)), small.size(), "small"), small);
}

// The walk a full verification makes of a frame's headers while it hashes the member where it lies.
ZstdLayout walk(const std::vector<std::uint8_t>& frame, std::size_t max_blocks = 1000) {
  return walk_zstd_frame(frame.size(), ByteView(frame.data(), std::min<std::size_t>(frame.size(), 18)), max_blocks,
                         [&](std::uint64_t at) { return load_le24(frame.data() + at); });
}

TEST(ZstdLayout, AWalkEndsWhereZstdSaysTheFrameEndsOrIsNotFollowed) {
  std::string text;
  for (int i = 0; text.size() < 600000; ++i) text += "line " + std::to_string(i * 7919 % 100000) + " of a member\n";
  std::vector<std::uint8_t> frame = zstd_compress(ByteView(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()), 3);
  ZstdLayout layout = walk(frame);
  ASSERT_TRUE(layout.followed);
  EXPECT_EQ(layout.end, frame.size());
  EXPECT_EQ(layout.end, ZSTD_findFrameCompressedSize(frame.data(), frame.size()));
  EXPECT_FALSE(walk(frame, 2).followed) << "more block headers than allowed: not followed";
  // Two frames: the walk ends where the first does.
  std::vector<std::uint8_t> two = frame;
  two.insert(two.end(), frame.begin(), frame.end());
  ASSERT_TRUE(walk(two).followed);
  EXPECT_EQ(walk(two).end, frame.size());
  // Cut short, or a block of the reserved type: not followed.
  EXPECT_FALSE(walk(std::vector<std::uint8_t>(frame.begin(), frame.end() - 1)).followed);
  std::vector<std::uint8_t> reserved = frame;
  reserved[layout.header_size] |= 0x06;
  EXPECT_FALSE(walk(reserved).followed);
  // A frame with zstd's content checksum ends 4 bytes after its last block, as zstd says.
  std::vector<std::uint8_t> checked(ZSTD_compressBound(text.size()));
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
  checked.resize(ZSTD_compress2(cctx, checked.data(), checked.size(), text.data(), text.size()));
  ZSTD_freeCCtx(cctx);
  ASSERT_TRUE(walk(checked).followed);
  EXPECT_TRUE(walk(checked).checksum);
  EXPECT_EQ(walk(checked).end, ZSTD_findFrameCompressedSize(checked.data(), checked.size()));
  // A skippable frame is not a data frame.
  std::vector<std::uint8_t> skippable = {0x50, 0x2A, 0x4D, 0x18, 4, 0, 0, 0, 1, 2, 3, 4};
  EXPECT_FALSE(walk(skippable).followed);
}

TEST_F(Semantic, ACubinIsJudgedFromItsEndsOrWholeAndEveryByteOfItCounts) {
  for (std::size_t table_after : {std::size_t{0}, std::size_t{20000}}) {
    SCOPED_TRACE(table_after == 0 ? "section table within the held last bytes" : "section table between the held ends");
    MemberInput cubin;
    cubin.path = "k.cubin";
    cubin.role = format::Role::code;
    cubin.backend = format::Vendor::cuda;
    cubin.kind = format::CodeKind::cubin;
    cubin.arch = "sm_90a";
    cubin.content = test::synthetic_cubin(90, "sm_90a", 100000, table_after);
    test::RawArchive raw = with_manifest(manifest_with("sources = [\"src/add.cu\"]\ncode = [{ arch = \"sm_90a\", file = \"k.cubin\" }]\n"), false, {cubin});
    const std::size_t i = position(raw, "k.cubin");
    EXPECT_NO_THROW(open_trusted(test::assemble(raw))->verify_all(1, false, nullptr));
    // A byte in the middle, hashed where it lies and never copied: refused by its digest.
    test::RawArchive changed = raw;
    changed.stored[i][50000] ^= 1;
    expect_refused(changed, Errc::integrity, "member 'k.cubin': stored bytes do not match the index");
    // The index tagging the bytes as another target: what the held bytes (or the whole copy) say counts.
    test::RawArchive mistagged = raw;
    mistagged.index.entries[i].arch = "sm_90";
    expect_refused(mistagged, Errc::integrity,
                   "member 'k.cubin' is indexed as cuda cubin for sm_90 but its bytes are cuda cubin for sm_90a");
  }
}

TEST_F(Semantic, EveryCompressedMembersFrameIsCheckedWithoutDeep) {
  // A source and a PTX code member, each two frames back to back: the walk ends at the first
  // frame's end, before the member's, and zstd then refuses it as it always did.
  for (const char* path : {"src/add.cu", "k.ptx"}) {
    SCOPED_TRACE(path);
    test::RawArchive raw = base();
    std::size_t i = position(raw, path);
    std::vector<std::uint8_t> content = raw.stored[i];
    std::vector<std::uint8_t> frame = zstd_compress(ByteView(content), 3);
    std::vector<std::uint8_t> two = frame;
    two.insert(two.end(), frame.begin(), frame.end());
    replace_with_frame(raw, i, two, content);
    expect_refused(raw, Errc::malformed, "member '" + std::string(path) + "': bytes follow the zstd frame; exactly one frame is allowed");
    // One frame whose header declares another content size: refused from the held header.
    test::RawArchive lying = base();
    replace_with_frame(lying, i, frame, content);
    lying.index.entries[i].content_size = content.size() + 1;
    expect_refused(lying, Errc::malformed,
                   "the zstd frame declares " + std::to_string(content.size()) + " bytes but the index says " +
                       std::to_string(content.size() + 1));
  }
}

// A frame header (magic, descriptor, window descriptor, 8-byte content size) followed by the
// blocks of a real frame: the header alone decides whether the window is acceptable.
std::vector<std::uint8_t> frame_with_header(std::uint8_t descriptor, int window_exponent, std::uint64_t content_size,
                                            const std::vector<std::uint8_t>& real) {
  const std::uint8_t real_descriptor = real[4];
  std::size_t fcs_bytes[] = {0, 2, 4, 8};
  bool single = real_descriptor & 0x20;
  std::size_t fcs = fcs_bytes[real_descriptor >> 6];
  if (fcs == 0 && single) fcs = 1;
  std::size_t header = 4 + 1 + (single ? 0 : 1) + fcs;  // no dictionary id in kiln's frames
  std::vector<std::uint8_t> out(real.begin(), real.begin() + 4);
  out.push_back(descriptor);
  if (!(descriptor & 0x20)) out.push_back(static_cast<std::uint8_t>(window_exponent << 3));
  for (int b = 0; b < 8; ++b) out.push_back(static_cast<std::uint8_t>(content_size >> (8 * b)));
  out.insert(out.end(), real.begin() + static_cast<long>(header), real.end());
  return out;
}

TEST_F(Semantic, AZstdWindowOverTwoToThe27IsRefusedWithoutDeep) {
  test::RawArchive raw = base();
  std::size_t i = position(raw, "src/add.cu");
  std::vector<std::uint8_t> content = raw.stored[i];
  std::vector<std::uint8_t> real = zstd_compress(ByteView(content), 3);
  // Not single-segment, 8-byte content size, window 2^(10+18) = 2^28.
  replace_with_frame(raw, i, frame_with_header(0xC0, 18, content.size(), real), content);
  expect_refused(raw, Errc::limit, "member 'src/add.cu': the zstd frame needs a 268435456-byte window, over the format's limit of 2^27");
}

TEST_F(Semantic, ASingleSegmentFrameOfOneGibibyteIsRefusedForItsWindow) {
  test::RawArchive raw = base();
  std::size_t i = position(raw, "src/add.cu");
  std::vector<std::uint8_t> content = raw.stored[i];
  std::vector<std::uint8_t> real = zstd_compress(ByteView(content), 3);
  replace_stored(raw, i, frame_with_header(0xE0, 0, 1ull << 30, real), true);  // single segment, 1 GiB
  raw.index.entries[i].content_size = 1ull << 30;
  expect_refused(raw, Errc::limit, "needs a 1073741824-byte window");
}

TEST_F(Semantic, ContentThatDoesNotHashToTheIndexIsRefusedByDeepVerificationAndByReading) {
  test::RawArchive raw = base();
  std::size_t i = position(raw, "src/add.cu");
  std::vector<std::uint8_t> content = raw.stored[i];
  std::vector<std::uint8_t> other = content;
  other[0] ^= 1;  // the index's content digest is of other bytes
  replace_with_frame(raw, i, zstd_compress(ByteView(content), 3), other);
  std::vector<std::uint8_t> bytes = test::assemble(raw);
  std::unique_ptr<ArchiveReader> a = open_trusted(bytes);
  EXPECT_NO_THROW(a->verify_all(1, false, nullptr));  // the frame itself is sound: only decompressing tells
  try {
    a->verify_all(1, true, nullptr);
    ADD_FAILURE() << "deep verification accepted a content digest mismatch";
  } catch (const Failure& e) {
    EXPECT_NE(std::string(e.what()).find("member 'src/add.cu': decompressed content does not match the index"), std::string::npos)
        << e.what();
  }
  try {
    a->read_member(i);
    ADD_FAILURE() << "read_member returned content that does not match the index";
  } catch (const Failure& e) {
    EXPECT_NE(std::string(e.what()).find("decompressed content does not match the index"), std::string::npos) << e.what();
  }
}

TEST_F(Semantic, AKilnTomlThatIsNotValidTomlIsAMalformedArchiveNotBadInput) {
  std::string bad = test::small_manifest(id) + "\nname = \"\xff\xfe\"\n";  // not UTF-8
  test::RawArchive raw = base();
  std::size_t i = position(raw, "kiln.toml");
  replace_stored(raw, i, test::bytes_of(bad), false);
  expect_refused(raw, Errc::malformed, "the archive's kiln.toml is not a valid manifest");
}

TEST_F(Semantic, AKilnTomlOverTheCapIsRefusedBeforeReadingEvenWithoutTrust) {
  test::RawArchive raw = base();
  std::size_t i = position(raw, "kiln.toml");
  std::vector<std::uint8_t> content = raw.stored[i];
  std::vector<std::uint8_t> real = zstd_compress(ByteView(content), 3);
  replace_stored(raw, i, real, true);
  raw.index.entries[i].content_size = format::kMaxManifestSize + 1;
  std::vector<std::uint8_t> bytes = test::assemble(raw);
  std::unique_ptr<ArchiveReader> a = ArchiveReader::open_memory(bytes.data(), bytes.size(), ReadOptions{});  // inspect: no trust
  try {
    a->manifest();
    ADD_FAILURE() << "an over-sized kiln.toml was read";
  } catch (const Failure& e) {
    EXPECT_EQ(e.code(), Errc::limit) << e.what();
    EXPECT_NE(std::string(e.what()).find("over the format's limit of 16777216 for kiln.toml"), std::string::npos) << e.what();
  }
}

TEST_F(Semantic, SequenceZeroIsRefusedByTheHeadDecoderAsTheRuntimeReadsIt) {
  test::RawArchive raw = base();
  raw.index.sequence = 0;
  std::vector<std::uint8_t> bytes = test::assemble(raw);
  try {
    open_trusted(bytes);  // what kiln_archive_open does
    ADD_FAILURE() << "an index head with sequence 0 was opened";
  } catch (const Failure& e) {
    EXPECT_EQ(e.code(), Errc::malformed) << e.what();
    EXPECT_NE(std::string(e.what()).find("sequence 0 is outside 1..2^63-1"), std::string::npos) << e.what();
  }
}

TEST(ByteWriter, AStringTooLongForItsSixteenBitLengthIsRefusedNotTruncated) {
  ByteWriter w;
  EXPECT_NO_THROW(w.string16(std::string(65535, 'a')));
  try {
    w.string16(std::string(65536 + 3, 'b'));
    ADD_FAILURE() << "a 65,539-byte string was written with a 16-bit length";
  } catch (const Failure& e) {
    EXPECT_EQ(e.code(), Errc::limit);
    EXPECT_NE(std::string(e.what()).find("65539 bytes does not fit a 16-bit length"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln
