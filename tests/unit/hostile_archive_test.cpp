// Archives a hostile signer or packer could produce — structurally wrong but validly
// signed — are refused at open or at first use, each with a reason naming the problem.
#include <gtest/gtest.h>

#include "core/compress.hpp"
#include "core/error.hpp"
#include "core/kernel_table.hpp"
#include "temp_dirs.hpp"
#include "test_support.hpp"

namespace kiln {
namespace {

class Hostile : public ::testing::Test {
 protected:
  PackageIdentity id = test::default_identity();
  PrivateKey key = PrivateKey::generate();
  TrustSet trust = test::trust_of({&key});

  test::RawArchive base() {
    test::RawArchive raw = test::raw_from_members(id, test::small_members(id));
    raw.signers = {Signer{&key, "hostile", 0}};
    return raw;
  }
  // Expects the archive to be refused with `code` and a message containing `reason`.
  void expect_refused(const test::RawArchive& raw, Errc code, const std::string& reason, std::uint64_t limit = 4ull << 30) {
    std::vector<std::uint8_t> bytes = test::assemble(raw);
    ReadOptions options;
    options.policy = TrustPolicy{&trust, 1};
    options.max_member_size = limit;
    try {
      std::unique_ptr<ArchiveReader> a = ArchiveReader::open_memory(bytes.data(), bytes.size(), options);
      a->verify_all(1, true, nullptr);
      FAIL() << "accepted; expected: " << reason;
    } catch (const Failure& e) {
      EXPECT_EQ(e.code(), code) << e.what();
      EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << e.what();
    }
  }
  std::size_t position(const test::RawArchive& raw, const std::string& path) {
    for (std::size_t i = 0; i < raw.index.entries.size(); ++i) {
      if (raw.index.entries[i].path == path) return i;
    }
    throw std::runtime_error("no member " + path);
  }
  // The same through ArchiveReader::read_member (behind kiln_archive_read_member and every code load).
  void expect_read_refused(const test::RawArchive& raw, const std::string& path, Errc code, const std::string& reason,
                           std::uint64_t limit = 4ull << 30) {
    std::vector<std::uint8_t> bytes = test::assemble(raw);
    ReadOptions options;
    options.policy = TrustPolicy{&trust, 1};
    options.max_member_size = limit;
    std::unique_ptr<ArchiveReader> a = ArchiveReader::open_memory(bytes.data(), bytes.size(), options);
    try {
      a->read_member(path);
      FAIL() << "read; expected: " << reason;
    } catch (const Failure& e) {
      EXPECT_EQ(e.code(), code) << e.what();
      EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << e.what();
    }
  }
  // Member i stored as `frame`, the index declaring `content` (size and digest) as what it holds.
  static void store_frame(test::RawArchive& raw, std::size_t i, const std::vector<std::uint8_t>& frame,
                          const std::vector<std::uint8_t>& content) {
    format::Entry& e = raw.index.entries[i];
    e.compression = format::Compression::zstd;
    e.stored_size = frame.size();
    e.stored_sha256 = sha256(frame.data(), frame.size());
    e.content_size = content.size();
    e.content_sha256 = sha256(content.data(), content.size());
    raw.stored[i] = frame;
  }
  // src/add.cu as 64 MiB of zeros in a frame of a few KiB, every digest right.
  test::RawArchive with_bomb() {
    test::RawArchive raw = base();
    std::size_t i = position(raw, "src/add.cu");
    std::vector<std::uint8_t> zeros(64u << 20, 0);
    std::vector<std::uint8_t> frame = zstd_compress(ByteView(zeros), 19);
    EXPECT_LT(frame.size(), 64u * 1024) << "64 MiB of zeros should compress to a few KiB";
    store_frame(raw, i, frame, zeros);
    return raw;
  }
  // src/add.cu as a whole signed archive, every digest right.
  test::RawArchive with_nested_archive() {
    std::vector<std::uint8_t> inner = test::assemble(base());
    test::RawArchive raw = base();
    std::size_t i = position(raw, "src/add.cu");
    format::Entry& e = raw.index.entries[i];
    e.stored_size = e.content_size = inner.size();
    e.stored_sha256 = e.content_sha256 = sha256(inner.data(), inner.size());
    raw.stored[i] = inner;
    return raw;
  }
  // The base archive plus one source member at `path`, every entry in order: only the path
  // rule under test is broken.
  test::RawArchive with_member(const std::string& path) {
    std::vector<MemberInput> members = test::small_members(id);
    MemberInput extra;
    extra.path = path;
    extra.role = format::Role::source;
    extra.content = test::bytes_of("// planted\n");
    members.push_back(extra);
    test::RawArchive raw = test::raw_from_members(id, members);
    raw.signers = {Signer{&key, "hostile", 0}};
    return raw;
  }
};

TEST_F(Hostile, BaseArchiveIsAccepted) {
  std::vector<std::uint8_t> bytes = test::assemble(base());
  EXPECT_NO_THROW(test::open_and_verify(bytes, trust));
}

TEST_F(Hostile, PathAttacksAreRefusedAtOpen) {
  const std::pair<std::string, std::string> attacks[] = {
      {"../../etc/cron.d/x", "'..' component"},
      {"/etc/passwd", "absolute"},
      {"src\\..\\x", "backslash"},
      {"src/./x", "'.' component"},
      {"caf\xc3\xa9.cu", "Unicode normalisation"},
  };
  for (const auto& [path, reason] : attacks) {
    test::RawArchive raw = base();
    raw.index.entries[position(raw, "src/add.cu")].path = path;
    // The path rule is checked before the order rule, so the order does not matter here.
    expect_refused(raw, Errc::malformed, reason);
  }
}

// Names one file system cannot hold as they are, or would hold as another file: a validly
// signed archive carrying one is refused when its index page is decoded: by every tool that
// lists, verifies or extracts it (index(), here). The runtime decodes only the pages it reads
// from, so it never meets the member (FORMAT.md §3).
TEST_F(Hostile, PathsThatExtractDifferentlyOnSomeSystemAreRefusedWhenTheirPageIsDecoded) {
  const std::pair<std::string, std::string> attacks[] = {
      {"src/" + std::string(1000, 'a'), "has a component of 1000 bytes, over 255"},
      {"src/" + std::string(256, 'a'), "has a component of 256 bytes, over 255"},
      {"nul.txt", "has the component 'nul.txt', a Windows device name"},
      {"src/CON", "has the component 'CON', a Windows device name"},
      {"lib/com7.so", "has the component 'com7.so', a Windows device name"},
      {"README.", "has a component ending in '.'"},
      {"kiln/evil.sh", "is inside the reserved folder 'kiln/'"},
      {"KILN/evil.sh", "is inside the reserved folder 'kiln/'"},
      {"kiln/kernels/add/x", "is inside the reserved folder 'kiln/'"},
  };
  for (const auto& [path, reason] : attacks) {
    test::RawArchive raw = with_member(path);
    std::vector<std::uint8_t> bytes = test::assemble(raw);
    ReadOptions options;
    options.policy = TrustPolicy{&trust, 1};
    try {
      ArchiveReader::open_memory(bytes.data(), bytes.size(), options)->index();
      ADD_FAILURE() << "listed an archive holding '" << path.substr(0, 40) << "'";
    } catch (const Failure& e) {
      EXPECT_EQ(e.code(), Errc::malformed) << e.what();
      EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << e.what();
    }
  }
}

// Two names one on a case-insensitive file system, and a file where another member needs a
// folder (which used to fail only midway through kiln extract): refused by a full decode,
// through ArchiveReader::index() (verify, inspect, extract) and format::decode_index alike.
TEST_F(Hostile, CaseTwinsAndAFileWhereAFolderMustBeAreRefusedByAFullDecode) {
  const std::pair<std::string, std::string> attacks[] = {
      {"K.ptx", "the member paths 'K.ptx' and 'k.ptx' differ only in ASCII case"},
      {"Src/evil.cu", "the member paths 'Src/evil.cu' and 'src/add.cu' use the names 'Src' and 'src', which differ only"},
      {"src/ADD.cu", "the member paths 'src/ADD.cu' and 'src/add.cu' differ only in ASCII case"},
      {"KILN.toml", "the member paths 'KILN.toml' and 'kiln.toml' differ only in ASCII case"},
      {"src", "the member path 'src' is a file, but 'src/add.cu' needs a folder of that name"},
      {"tests", "the member path 'tests' is a file, but 'tests/vector.bin' needs a folder of that name"},
      {"k.ptx/x", "the member path 'k.ptx' is a file, but 'k.ptx/x' needs a folder of that name"},
  };
  for (const auto& [path, reason] : attacks) {
    test::RawArchive raw = with_member(path);
    expect_refused(raw, Errc::malformed, "<memory>: index: " + reason);
    std::vector<std::uint8_t> bytes = test::assemble(raw);
    format::Header h = format::decode_header(ByteView(bytes));
    try {
      format::decode_index(ByteView(bytes).sub(h.index_offset, h.index_size), h.index_head_size, h.index_offset);
      ADD_FAILURE() << "decode_index accepted '" << path << "'";
    } catch (const Failure& e) {
      EXPECT_EQ(e.code(), Errc::malformed) << e.what();
      EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << e.what();
    }
  }
}

// The rules between paths hold across index pages: the twins here sit on different pages.
TEST_F(Hostile, CaseTwinsOnDifferentIndexPagesAreRefused) {
  std::vector<MemberInput> members = test::small_members(id);
  for (int i = 0; i < 300; ++i) {
    MemberInput m;
    m.path = "data/" + std::to_string(1000 + i) + ".bin";
    m.role = format::Role::testdata;
    m.content = test::bytes_of(std::to_string(i));
    members.push_back(m);
  }
  // Uppercase sorts before lowercase: "Zeta.bin" is the first entry, "zeta.bin" the last.
  for (const char* name : {"Zeta.bin", "zeta.bin"}) {
    MemberInput twin = members.back();
    twin.path = name;
    members.push_back(twin);
  }
  test::RawArchive raw = test::raw_from_members(id, members);
  raw.signers = {Signer{&key, "hostile", 0}};
  ASSERT_EQ(raw.index.entries.front().path, "Zeta.bin");
  ASSERT_EQ(raw.index.entries.back().path, "zeta.bin");
  ASSERT_GT(raw.index.entries.size(), 2 * format::kEntriesPerPage);
  expect_refused(raw, Errc::malformed, "the member paths 'Zeta.bin' and 'zeta.bin' differ only in ASCII case");
}

TEST_F(Hostile, DuplicateAndUnsortedNamesAreRefused) {
  test::RawArchive dup = base();
  std::size_t i = position(dup, "src/add.cu");
  dup.index.entries.insert(dup.index.entries.begin() + static_cast<long>(i) + 1, dup.index.entries[i]);
  dup.stored.insert(dup.stored.begin() + static_cast<long>(i) + 1, dup.stored[i]);
  expect_refused(dup, Errc::malformed, "paths must be unique and sorted");

  test::RawArchive unsorted = base();
  // Two members within one page (the kernel record, src/add.cu, tests/vector.bin share one).
  std::size_t j = position(unsorted, "src/add.cu");
  std::swap(unsorted.index.entries[j], unsorted.index.entries[j + 1]);
  std::swap(unsorted.stored[j], unsorted.stored[j + 1]);
  expect_refused(unsorted, Errc::malformed, "paths must be unique and sorted");
}

TEST_F(Hostile, IndexThatDisagreesWithTheManifestIsRefused) {
  test::RawArchive raw = base();
  raw.index.kernel_revision = "rev-forged";
  expect_refused(raw, Errc::integrity, "the index says package 'demo-pkg' revision 'rev-forged'");
}

TEST_F(Hostile, KernelTableThatDisagreesWithKilnTomlIsRefusedByFullVerification) {
  test::RawArchive raw = base();
  // A signer ships a kernel table naming another entry symbol than kiln.toml does.
  Manifest m = parse_manifest(test::small_manifest(id), "kiln.toml");
  m.kernels[0].entry = "evil_entry";
  const std::string path = kernel_record_path("add");
  raw.derived[path] = [kernel = m.kernels[0]](const CodeEntryLookup& entries) { return encode_kernel_record(kernel, &entries); };
  expect_refused(raw, Errc::integrity, "kiln.toml and " + path + " describe different kernels");
}

TEST_F(Hostile, KernelRecordWhoseCodeEntryDiffersFromTheIndexIsRefusedByFullVerification) {
  // A signer ships a record whose copy of its code member's entry is not the index's: each field
  // changed in turn (the record's size kept), and full verification refuses every one.
  Manifest m = parse_manifest(test::small_manifest(id), "kiln.toml");
  const std::function<void(format::Entry&)> forgeries[] = {
      [](format::Entry& e) { e.offset += 64; },
      [](format::Entry& e) { e.stored_size -= 1; },
      [](format::Entry& e) { e.content_size += 1; },
      [](format::Entry& e) { e.stored_sha256[5] ^= 1; },
      [](format::Entry& e) { e.content_sha256[31] ^= 1; },
      [](format::Entry& e) { e.compression = format::Compression::zstd; },
      [](format::Entry& e) { e.kind = format::CodeKind::cubin; },
      [](format::Entry& e) { e.arch = "compute_80"; },
  };
  for (std::size_t f = 0; f < std::size(forgeries); ++f) {
    SCOPED_TRACE("forgery " + std::to_string(f));
    test::RawArchive raw = base();
    raw.derived[kernel_record_path("add")] = [kernel = m.kernels[0], forge = forgeries[f]](const CodeEntryLookup& entries) {
      format::Entry copy = entries("k.ptx");
      forge(copy);
      const CodeEntryLookup forged = [&copy](const std::string&) -> const format::Entry& { return copy; };
      return encode_kernel_record(kernel, &forged);
    };
    expect_refused(raw, Errc::integrity, "kiln.toml and kiln/kernels/add describe different kernels (the kernel table was not derived from this manifest and index)");
  }
}

// The index head carries kiln/kernels.bin's entry (FORMAT.md §3), and an open reads the kernel
// table through it, its digests checked, without the index's entry. A signer ships a head whose
// copy names other bytes: where they are the same bytes (another member's), the open reads them
// and full verification refuses the copy; otherwise the open refuses, naming the rule.
TEST_F(Hostile, HeadWhoseKernelTableEntryIsNotTheIndexsIsRefused) {
  std::vector<MemberInput> members = test::small_members(id);
  MemberInput twin;
  twin.path = "data/table-twin.bin";
  for (const MemberInput& m : members) {
    if (m.path == kKernelTablePath) twin.content = m.content;
  }
  ASSERT_FALSE(twin.content.empty());
  const auto entry_of = [](const format::Index& index, const std::string& path) {
    return index.entries.at(static_cast<std::size_t>(index.find(path)));
  };
  const auto with_copy = [&](std::function<void(format::Entry&, const format::Index&)> forge) {
    test::RawArchive raw = test::raw_from_members(id, test::small_members_with(id, {twin}));
    raw.signers = {Signer{&key, "hostile", 0}};
    raw.forge_head_table_entry = std::move(forge);
    return raw;
  };
  ReadOptions options;
  options.policy = TrustPolicy{&trust, 1};

  // The twin's offset: the same bytes, read and accepted at open; full verification refuses.
  test::RawArchive twin_copy = with_copy([&](format::Entry& e, const format::Index& index) {
    e.offset = entry_of(index, "data/table-twin.bin").offset;
  });
  std::vector<std::uint8_t> bytes = test::assemble(twin_copy);
  std::unique_ptr<ArchiveReader> a = ArchiveReader::open_memory(bytes.data(), bytes.size(), options);
  EXPECT_EQ(a->kernel_table().size(), 1u);
  EXPECT_EQ(a->kernel("add").entry, "add_f32");
  expect_refused(twin_copy, Errc::malformed,
                 "index head: the kernel table entry it carries is not the index's entry of 'kiln/kernels.bin'");

  // Other bytes than its digest says (the source's): refused at open by the copy's digest.
  expect_refused(with_copy([&](format::Entry& e, const format::Index& index) { e.offset = entry_of(index, "src/add.cu").offset; }),
                 Errc::integrity, "member 'kiln/kernels.bin': stored bytes do not match the index");
  expect_refused(with_copy([&](format::Entry& e, const format::Index& index) { e.offset = entry_of(index, "src/add.cu").offset; }),
                 Errc::integrity, "the expected digest is the index head's copy of its entry");
  // Bytes outside the members, and a copy of another member's entry: refused by the head's rules.
  expect_refused(with_copy([](format::Entry& e, const format::Index&) { e.offset += 1ull << 20; }), Errc::malformed,
                 "kernel table entry: places the member at bytes");
  expect_refused(with_copy([](format::Entry& e, const format::Index&) { e.offset += 1; }), Errc::malformed,
                 "not at a 64-byte boundary among the members");
  expect_refused(with_copy([&](format::Entry& e, const format::Index& index) { e = entry_of(index, "kiln/kernels/add"); }),
                 Errc::malformed, "kernel table entry: must be 'kiln/kernels.bin' with role meta, not 'kiln/kernels/add'");
}

TEST_F(Hostile, KernelRecordNotInKilnTomlIsRefusedByFullVerification) {
  test::RawArchive raw = base();
  // A signer adds a kernel record (and raises the count in kiln/kernels.bin) that kiln.toml lacks.
  Manifest m = parse_manifest(test::small_manifest(id), "kiln.toml");
  KernelSpec extra = m.kernels.at(0);
  extra.name = "zz_extra";
  m.kernels.push_back(extra);
  for (const KernelTableMember& member : encode_kernel_table(m)) {
    format::Entry e;
    e.path = member.path;
    e.role = format::Role::meta;
    e.stored_size = e.content_size = member.content.size();
    e.stored_sha256 = e.content_sha256 = sha256(member.content.data(), member.content.size());
    auto at = std::lower_bound(raw.index.entries.begin(), raw.index.entries.end(), e.path,
                               [](const format::Entry& x, const std::string& p) { return x.path < p; });
    std::size_t i = static_cast<std::size_t>(at - raw.index.entries.begin());
    if (at != raw.index.entries.end() && at->path == e.path) {
      raw.index.entries[i] = e;
      raw.stored[i] = member.content;
    } else {
      raw.index.entries.insert(at, e);
      raw.stored.insert(raw.stored.begin() + static_cast<long>(i), member.content);
    }
  }
  expect_refused(raw, Errc::integrity, "describe different kernels");
}

TEST_F(Hostile, MalformedKernelTableIsRefusedAtOpen) {
  test::RawArchive raw = base();
  std::size_t i = position(raw, kKernelTablePath);
  std::vector<std::uint8_t> broken = raw.stored[i];
  broken.resize(broken.size() - 3);  // the last record now overruns the table
  raw.index.entries[i].stored_size = raw.index.entries[i].content_size = broken.size();
  raw.index.entries[i].stored_sha256 = raw.index.entries[i].content_sha256 = sha256(broken.data(), broken.size());
  raw.stored[i] = broken;
  expect_refused(raw, Errc::malformed, "kiln/kernels.bin");
}

TEST_F(Hostile, MemberWhoseDeclaredSizeLiesIsRefused) {
  test::RawArchive raw = base();
  std::size_t i = position(raw, "tests/vector.bin");
  ASSERT_EQ(i + 1, raw.index.entries.size()) << "the last member: the index follows it";
  raw.index.entries[i].stored_size += 1000;
  raw.index.entries[i].content_size += 1000;
  // Where it starts, and where the index begins (assemble() packs members from offset 64, each
  // 64-byte aligned, and the index right after the last).
  std::uint64_t offset = format::kHeaderSize;
  for (std::size_t j = 0; j < i; ++j) offset = format::align_up(offset + raw.stored[j].size());
  const std::uint64_t index_offset = format::align_up(offset + raw.stored[i].size());
  expect_refused(raw, Errc::malformed,
                 "index entry " + std::to_string(i) + " ('tests/vector.bin'): its bytes run to " +
                     std::to_string(offset + raw.stored[i].size() + 1000) + ", past " + std::to_string(index_offset) +
                     " where the next page's members (or the index) begin");
}

TEST_F(Hostile, ZstdFrameWhoseContentSizeLiesIsRefused) {
  test::RawArchive raw = base();
  std::size_t i = position(raw, "src/add.cu");
  std::vector<std::uint8_t> big(1 << 20, 'x');
  std::vector<std::uint8_t> frame = zstd_compress(ByteView(big), 3);
  format::Entry& e = raw.index.entries[i];
  e.compression = format::Compression::zstd;
  e.stored_size = frame.size();
  e.stored_sha256 = sha256(frame.data(), frame.size());
  e.content_size = 1000;  // the index claims 1000 bytes; the frame holds 1 MiB
  raw.stored[i] = frame;
  expect_refused(raw, Errc::malformed, "the zstd frame declares 1048576 bytes but the index says 1000");
}

TEST_F(Hostile, DecompressionBombIsRefusedBeforeAllocating) {
  test::RawArchive raw = with_bomb();
  // With a 16 MiB cap, the member is refused on its declared size alone: by full verification,
  // and on the read path the runtime uses (each holds the bound on its own).
  expect_refused(raw, Errc::limit, "over the reader's limit of 16777216", 16u << 20);
  expect_read_refused(raw, "src/add.cu", Errc::limit,
                      "member 'src/add.cu': declares 67108864 bytes of content, over the reader's limit of 16777216", 16u << 20);
}

TEST_F(Hostile, TwoFramesInOneMemberAreRefused) {
  test::RawArchive raw = base();
  std::size_t i = position(raw, "src/add.cu");
  std::vector<std::uint8_t> content = raw.stored[i];
  std::vector<std::uint8_t> frame = zstd_compress(ByteView(content), 3);
  std::vector<std::uint8_t> two = frame;
  two.insert(two.end(), frame.begin(), frame.end());
  format::Entry& e = raw.index.entries[i];
  e.compression = format::Compression::zstd;
  e.stored_size = two.size();
  e.stored_sha256 = sha256(two.data(), two.size());
  raw.stored[i] = two;
  expect_refused(raw, Errc::malformed, "exactly one frame is allowed");
}

TEST_F(Hostile, AChangedFrameIsRefusedByItsDigestBeforeZstdDecodesIt) {
  // A compressed member changed after signing, where zstd would refuse the change too: every level
  // names the stored digest, because zstd is given a member's bytes only once they match it.
  test::RawArchive raw = base();
  std::size_t i = position(raw, "src/add.cu");
  std::vector<std::uint8_t> content = raw.stored[i];
  for (int k = 0; k < 200; ++k) content.insert(content.end(), raw.stored[i].begin(), raw.stored[i].end());
  std::vector<std::uint8_t> frame = zstd_compress(ByteView(content), 3);
  store_frame(raw, i, frame, content);
  frame[frame.size() - 4] ^= 0xff;  // in the last block's payload: the digest no longer matches
  ASSERT_THROW(zstd_decompress_exact(ByteView(frame), content.size(), "probe"), Failure) << "zstd must refuse it too";
  raw.stored[i] = frame;
  expect_refused(raw, Errc::integrity, "member 'src/add.cu': stored bytes do not match the index");
  std::vector<std::uint8_t> bytes = test::assemble(raw);
  ReadOptions options;
  options.policy = TrustPolicy{&trust, 1};
  try {
    ArchiveReader::open_memory(bytes.data(), bytes.size(), options)->verify_all(1, false, nullptr);
    FAIL() << "accepted at the default level";
  } catch (const Failure& error) {
    EXPECT_NE(std::string(error.what()).find("member 'src/add.cu': stored bytes do not match the index"), std::string::npos)
        << error.what();
  }
}

TEST_F(Hostile, UnknownRoleAndCodeWithoutArchAreRefused) {
  test::RawArchive raw = base();
  raw.index.entries[position(raw, "k.ptx")].arch = "";
  expect_refused(raw, Errc::malformed, "arch tags are set exactly for code members");
  test::RawArchive role = base();
  role.index.entries[position(role, "src/add.cu")].role = static_cast<format::Role>(9);
  expect_refused(role, Errc::malformed, "unknown role 9");
}

TEST_F(Hostile, SecondManifestRoleIsRefused) {
  test::RawArchive raw = base();
  raw.index.entries[position(raw, "src/add.cu")].role = format::Role::manifest;
  expect_refused(raw, Errc::malformed, "only 'kiln.toml' may");
}

TEST_F(Hostile, TwoNamesEqualAfterUnicodeNormalisationAreRefused) {
  // "café.cu" precomposed (NFC) and decomposed (NFD): distinct bytes, one file on macOS.
  test::RawArchive raw = base();
  std::size_t i = position(raw, "src/add.cu");
  for (const char* name : {"src/caf\xc3\xa9.cu", "src/cafe\xcc\x81.cu"}) {
    raw.index.entries.push_back(raw.index.entries[i]);
    raw.index.entries.back().path = name;
    raw.stored.push_back(raw.stored[i]);
  }
  expect_refused(raw, Errc::malformed, "Unicode normalisation");
}

TEST_F(Hostile, ArchiveWithinAnArchiveIsRefusedWhenRead) {
  // A validly signed archive whose source member is itself a whole signed archive: the
  // outer signature must not pass for the inner one, so the member is never handed out, by full
  // verification nor by the read path the runtime uses.
  test::RawArchive raw = with_nested_archive();
  expect_refused(raw, Errc::malformed, "member 'src/add.cu' is itself a kiln archive");
  expect_read_refused(raw, "src/add.cu", Errc::malformed, "member 'src/add.cu' is itself a kiln archive");
}

// The padding after a member is covered by no digest, so full verification requires it zero:
// at both levels, whether the verification reads the member (the code member: its padding comes
// with its last piece) or finds it read before (a source the caller read first: checked at the
// end), each refusal naming the member and the offset. A lazy read never looks at it.
TEST_F(Hostile, NonZeroPaddingIsRefusedByFullVerificationAndNamed) {
  const std::vector<std::uint8_t> bytes = test::assemble(base());
  ReadOptions options;
  options.policy = TrustPolicy{&trust, 1};
  const format::Index index = ArchiveReader::open_memory(bytes.data(), bytes.size(), options)->index();
  for (const auto& [path, read_first] : {std::pair<std::string, bool>{"k.ptx", false}, {"src/add.cu", true}}) {
    const long i = index.find(path);
    ASSERT_GE(i, 0) << path;
    const format::Entry& e = index.entries[static_cast<std::size_t>(i)];
    const std::uint64_t end = e.offset + e.stored_size;
    ASSERT_NE(end % 64, 0u) << path << " ends on a multiple of 64: no padding to change";
    for (const std::uint64_t at : {end, end + (63 - end % 64)}) {  // the first and the last byte of its padding
      std::vector<std::uint8_t> changed = bytes;
      changed[at] = 0x20;
      for (bool deep : {false, true}) {
        std::unique_ptr<ArchiveReader> a = ArchiveReader::open_memory(changed.data(), changed.size(), options);
        if (read_first) {
          EXPECT_NO_THROW(a->read_member(path)) << path;  // a lazy read never looks at padding
        }
        try {
          a->verify_all(1, deep, nullptr);
          ADD_FAILURE() << "padding byte " << at << " after " << path << " accepted (deep " << deep << ")";
        } catch (const Failure& error) {
          EXPECT_EQ(error.code(), Errc::integrity) << error.what();
          const std::string want = "member '" + path + "': padding byte at offset " + std::to_string(at) + " is not zero";
          EXPECT_NE(std::string(error.what()).find(want), std::string::npos) << error.what();
        }
      }
    }
  }
}

// The same from a file large enough to be read piece by piece rather than whole (over 256 KiB):
// the padding after a member of two pieces comes with the last one, in the same read.
TEST_F(Hostile, NonZeroPaddingAfterALargeMemberInAFileIsRefused) {
  MemberInput big;
  big.path = "data/big.bin";
  big.role = format::Role::meta;
  for (std::uint32_t x = 12345; big.content.size() < 300001;) big.content.push_back(static_cast<std::uint8_t>((x = x * 1103515245u + 12345u) >> 24));
  test::RawArchive raw = test::raw_from_members(id, test::small_members_with(id, {big}));
  raw.signers = {Signer{&key, "hostile", 0}};
  std::vector<std::uint8_t> bytes = test::assemble(raw);
  ReadOptions options;
  options.policy = TrustPolicy{&trust, 1};
  const format::Index index = ArchiveReader::open_memory(bytes.data(), bytes.size(), options)->index();
  const format::Entry& e = index.entries[static_cast<std::size_t>(index.find(big.path))];
  const std::uint64_t end = e.offset + e.stored_size;
  ASSERT_NE(end % 64, 0u);
  const std::string file = test::make_temp_dir() + "/padding.kiln";
  test::write_file(file, bytes);
  EXPECT_NO_THROW(ArchiveReader::open_file(file, options)->verify_all(1, false, nullptr));
  const std::uint64_t last = end + (63 - end % 64);  // the last byte of its padding
  bytes[last] = 0xff;
  test::write_file(file, bytes);
  try {
    ArchiveReader::open_file(file, options)->verify_all(1, false, nullptr);
    ADD_FAILURE() << "a padding byte that is not zero was accepted";
  } catch (const Failure& error) {
    EXPECT_EQ(error.code(), Errc::integrity) << error.what();
    EXPECT_NE(std::string(error.what()).find("member 'data/big.bin': padding byte at offset " + std::to_string(last) + " is not zero"),
              std::string::npos)
        << error.what();
  }
}

TEST_F(Hostile, LazyVerificationCatchesAMemberAtFirstUse) {
  // Opening checks the signature and the manifest only; a broken code member is caught
  // when it is first read, not silently passed on.
  test::RawArchive raw = base();
  std::vector<std::uint8_t> bytes = test::assemble(raw);
  ReadOptions options;
  options.policy = TrustPolicy{&trust, 1};
  std::unique_ptr<ArchiveReader> a = ArchiveReader::open_memory(bytes.data(), bytes.size(), options);
  std::size_t i = static_cast<std::size_t>(a->index().find("k.ptx"));
  bytes[a->index().entries[i].offset] ^= 1;
  try {
    a->read_member(i);
    FAIL();
  } catch (const Failure& e) {
    EXPECT_EQ(e.code(), Errc::integrity);
    EXPECT_NE(std::string(e.what()).find("member 'k.ptx': stored bytes do not match"), std::string::npos);
  }
}

}  // namespace
}  // namespace kiln
