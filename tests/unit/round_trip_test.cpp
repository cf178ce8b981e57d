// Writing then reading gives back every member, byte for byte, and writing is
// reproducible.
#include <gtest/gtest.h>
#include <cstdio>
#include <unistd.h>

#include <tuple>

#include "core/error.hpp"
#include "core/file_io.hpp"
#include "core/kernel_table.hpp"
#include "test_support.hpp"

namespace kiln {
namespace {

class RoundTrip : public ::testing::Test {
 protected:
  PrivateKey key = PrivateKey::generate();
};

// A record found by find_kernel is read without a second lookup, and a position that is not
// that kernel's record is refused by name rather than decoded as one.
TEST_F(RoundTrip, AKernelRecordIsReadAtThePositionItWasFoundAt) {
  std::vector<std::uint8_t> bytes = test::build_signed({&key});
  TrustSet trust = test::trust_of({&key});
  std::unique_ptr<ArchiveReader> a = test::open_and_verify(bytes, trust);
  const long record = a->find_kernel("add");
  ASSERT_GE(record, 0);
  EXPECT_EQ(a->find_kernel("no-such-kernel"), -1);
  EXPECT_EQ(a->kernel_at(static_cast<std::size_t>(record), "add").name, "add");
  const long other = a->index().find("k.ptx");
  ASSERT_GE(other, 0);
  try {
    a->kernel_at(static_cast<std::size_t>(other), "add");
    FAIL() << "a code member's position was read as the record of kernel 'add'";
  } catch (const Failure& e) {
    EXPECT_EQ(e.code(), Errc::internal);
    EXPECT_NE(std::string(e.what()).find("member " + std::to_string(other) + " is not the record of kernel 'add'"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(RoundTrip, EveryMemberComesBackIdentical) {
  PackageIdentity id = test::default_identity();
  std::vector<std::uint8_t> bytes = test::build_signed({&key});
  TrustSet trust = test::trust_of({&key});
  std::unique_ptr<ArchiveReader> a = test::open_and_verify(bytes, trust);
  EXPECT_TRUE(a->authenticated());
  EXPECT_EQ(a->index().package, id.package);
  EXPECT_EQ(a->index().kernel_revision, id.kernel_revision);
  EXPECT_EQ(a->index().sequence, id.sequence);
  EXPECT_EQ(a->manifest().kernels.at(0).name, "add");

  std::vector<MemberInput> originals = test::small_members(id);
  ASSERT_EQ(a->index().entries.size(), originals.size());
  const CodeEntryLookup written = [&](const std::string& path) -> const format::Entry& {
    return a->index().entries.at(static_cast<std::size_t>(a->index().find(path)));
  };
  bool saw_raw = false, saw_zstd = false;
  for (const MemberInput& m : originals) {
    long i = a->index().find(m.path);
    ASSERT_GE(i, 0) << m.path;
    const format::Entry& e = a->index().entries[static_cast<std::size_t>(i)];
    // A kernel record is made from its code members' entries as written.
    const std::vector<std::uint8_t> content = m.derive ? m.derive(written) : m.content;
    EXPECT_EQ(e.role, m.role);
    EXPECT_EQ(e.arch, m.arch);
    EXPECT_EQ(e.content_size, content.size());
    EXPECT_EQ(e.offset % format::kMemberAlignment, 0u);
    EXPECT_EQ(a->read_member(m.path), content) << m.path;
    saw_raw = saw_raw || e.compression == format::Compression::none;
    saw_zstd = saw_zstd || e.compression == format::Compression::zstd;
  }
  EXPECT_TRUE(saw_raw) << "the random blob and the small text members should have been stored raw";
  EXPECT_FALSE(saw_zstd) << "every member here is too small for a frame to pay (FORMAT.md §4)";

  // The kernel's record carries its code member's index entry, field for field, and the member
  // read through that copy is the member.
  EXPECT_TRUE(a->kernel_table().code_entries());
  const KernelSpec k = a->kernel("add");
  ASSERT_EQ(k.code.size(), 1u);
  ASSERT_TRUE(k.code[0].member.has_value());
  const format::Entry& copy = *k.code[0].member;
  const format::Entry& indexed = written("k.ptx");
  EXPECT_EQ(copy.path, indexed.path);
  EXPECT_EQ(copy.role, indexed.role);
  EXPECT_EQ(copy.backend, indexed.backend);
  EXPECT_EQ(copy.kind, indexed.kind);
  EXPECT_EQ(copy.compression, indexed.compression);
  EXPECT_EQ(copy.arch, indexed.arch);
  EXPECT_EQ(copy.offset, indexed.offset);
  EXPECT_EQ(copy.stored_size, indexed.stored_size);
  EXPECT_EQ(copy.content_size, indexed.content_size);
  EXPECT_EQ(copy.stored_sha256, indexed.stored_sha256);
  EXPECT_EQ(copy.content_sha256, indexed.content_sha256);
  EXPECT_EQ(a->read_member(copy), a->read_member("k.ptx"));
}

// A kernel record is written as planned (zeros where its copies' offsets, sizes and digests go),
// then again over itself once the code is written: it must be stored raw even where the planned
// bytes would compress, and what is read back is the record made from the entries as written.
TEST_F(RoundTrip, AKernelRecordThatWouldCompressIsStoredRawAndCopiesTheEntriesAsWritten) {
  PackageIdentity id = test::default_identity();
  std::string manifest = "[package]\nname = \"" + id.package + "\"\nkernel_revision = \"" + id.kernel_revision +
                         "\"\nsequence = " + std::to_string(id.sequence) +
                         "\n\n[[kernel]]\nname = \"add\"\nentry = \"add_f32\"\nbackend = \"cuda\"\n"
                         "params = [{ name = \"x\", type = \"ptr\", dtype = \"f32\" }]\ncode = [";
  std::vector<MemberInput> members;
  int n = 0;
  for (int sm : {50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90}) {
    // Paths after kiln/kernels/add as well as before: their entries are known only after it is written.
    {
      MemberInput m;
      m.path = std::string(n++ % 2 ? "z" : "a") + "/k" + std::to_string(sm) + ".ptx";
      m.role = format::Role::code;
      m.backend = format::Vendor::cuda;
      m.kind = format::CodeKind::ptx;
      m.arch = "compute_" + std::to_string(sm);
      m.content = test::bytes_of(test::small_ptx("sm_" + std::to_string(sm)));
      manifest += "{ arch = \"" + m.arch + "\", file = \"" + m.path + "\" }, ";
      members.push_back(std::move(m));
    }
  }
  manifest += "]\n";
  MemberInput toml;
  toml.path = "kiln.toml";
  toml.role = format::Role::manifest;
  toml.content = test::bytes_of(manifest);
  members.push_back(std::move(toml));
  for (MemberInput& t : kernel_table_inputs(parse_manifest(manifest, "kiln.toml"))) members.push_back(std::move(t));
  for (unsigned threads : {1u, 4u}) {
    WriteOptions options;
    options.threads = threads;
    options.level = 19;
    std::vector<std::uint8_t> bytes = build_archive(id, members, {Signer{&key, "s", 0}}, options);
    TrustSet trust = test::trust_of({&key});
    std::unique_ptr<ArchiveReader> a = test::open_and_verify(bytes, trust);
    const format::Entry& record = a->entry(static_cast<std::size_t>(a->find("kiln/kernels/add")));
    EXPECT_GT(record.content_size, 1536u);
    EXPECT_EQ(record.compression, format::Compression::none);
    const KernelSpec k = a->kernel("add");
    ASSERT_EQ(k.code.size(), 14u);
    for (const CodeObjectRef& c : k.code) {
      const format::Entry& indexed = a->entry(static_cast<std::size_t>(a->find(c.file.path)));
      ASSERT_TRUE(c.member.has_value());
      EXPECT_EQ(c.member->offset, indexed.offset) << c.file.path;
      EXPECT_EQ(c.member->stored_sha256, indexed.stored_sha256) << c.file.path;
      EXPECT_EQ(a->read_member(*c.member), a->read_member(c.file.path)) << c.file.path;
    }
  }
}

// The writer's compression rule (FORMAT.md §4): a zstd frame is stored exactly when it saves more
// than 1/32 of the member and at least 512 bytes.
TEST_F(RoundTrip, AFrameIsStoredOnlyWhereItSavesEnough) {
  PackageIdentity id = test::default_identity();
  std::string text;
  while (text.size() < 8192) text += "__global__ void kernel_" + std::to_string(text.size()) + "(float* x) {}\n";
  std::vector<std::uint8_t> random(8192);
  std::uint32_t state = 12345;
  for (std::uint8_t& b : random) b = static_cast<std::uint8_t>((state = state * 1664525u + 1013904223u) >> 24);
  std::vector<MemberInput> extra(4);
  extra[0].path = "extra/text-8k.txt";  // compresses well: a frame
  extra[0].content = test::bytes_of(text);
  extra[1].path = "extra/text-300.txt";  // compresses, but saves under 512 bytes: raw
  extra[1].content = test::bytes_of(text.substr(0, 300));
  extra[2].path = "extra/random-8k.bin";  // zstd cannot shrink it: raw
  extra[2].content = random;
  extra[3].path = "extra/empty.bin";  // empty: raw
  for (MemberInput& m : extra) m.role = format::Role::meta;
  std::vector<MemberInput> members = test::small_members_with(id, extra);
  std::vector<std::uint8_t> bytes = build_archive(id, members, {Signer{&key, "t", 0}}, {});
  std::unique_ptr<ArchiveReader> a = test::open_and_verify(bytes, test::trust_of({&key}));
  auto compression = [&](const std::string& path) { return a->entry(static_cast<std::size_t>(a->find(path))).compression; };
  EXPECT_EQ(compression("extra/text-8k.txt"), format::Compression::zstd);
  EXPECT_EQ(compression("extra/text-300.txt"), format::Compression::none);
  EXPECT_EQ(compression("extra/random-8k.bin"), format::Compression::none);
  EXPECT_EQ(compression("extra/empty.bin"), format::Compression::none);
  EXPECT_EQ(compression("kiln/kernels.bin"), format::Compression::none);
  for (const MemberInput& m : extra) EXPECT_EQ(a->read_member(m.path), m.content) << m.path;
}

// Machine code of at most 16 KiB is kept raw however well it compresses (FORMAT.md §4): the
// runtime reads it at every first load, and a frame there costs more than its few saved bytes.
// PTX and larger machine code go through the rule above.
TEST_F(RoundTrip, SmallMachineCodeIsKeptRawAndPtxIsNot) {
  PackageIdentity id = test::default_identity();
  std::string text;
  while (text.size() < 20000) text += "// padding that zstd shrinks " + std::to_string(text.size()) + "\n";
  auto code = [&](const std::string& path, format::CodeKind kind, std::size_t size) {
    MemberInput m;
    m.path = path;
    m.role = format::Role::code;
    m.backend = kind == format::CodeKind::amdgpu_elf ? format::Vendor::hip : format::Vendor::cuda;
    m.kind = kind;
    m.arch = kind == format::CodeKind::amdgpu_elf ? "gfx90a" : "sm_90a";
    m.content = test::bytes_of(text.substr(0, size));
    return m;
  };
  std::vector<MemberInput> extra = {
      code("code/at-limit.cubin", format::CodeKind::cubin, 16384),
      code("code/over-limit.cubin", format::CodeKind::cubin, 16385),
      code("code/small.fatbin", format::CodeKind::fatbin, 4096),
      code("code/small.hsaco", format::CodeKind::amdgpu_elf, 4096),
      code("code/small.ptx", format::CodeKind::ptx, 4096),
  };
  // Code members no kernel names (verify would refuse the archive for that; the reader's open and
  // member reads do not look): the writer's rule looks at an entry's role, kind and size only.
  // build_archive sorts the members by path itself.
  std::vector<MemberInput> members = test::small_members_with(id, {});
  members.insert(members.end(), extra.begin(), extra.end());
  std::vector<std::uint8_t> bytes = build_archive(id, members, {Signer{&key, "t", 0}}, {});
  TrustSet trust = test::trust_of({&key});
  ReadOptions options;
  options.policy = TrustPolicy{&trust, 1};
  std::unique_ptr<ArchiveReader> a = ArchiveReader::open_memory(bytes.data(), bytes.size(), options);
  auto entry = [&](const std::string& path) -> const format::Entry& {
    return a->entry(static_cast<std::size_t>(a->find(path)));
  };
  EXPECT_EQ(entry("code/at-limit.cubin").compression, format::Compression::none);
  EXPECT_EQ(entry("code/at-limit.cubin").stored_size, 16384u);
  EXPECT_EQ(entry("code/over-limit.cubin").compression, format::Compression::zstd);
  EXPECT_EQ(entry("code/small.fatbin").compression, format::Compression::none);
  EXPECT_EQ(entry("code/small.hsaco").compression, format::Compression::none);
  EXPECT_EQ(entry("code/small.ptx").compression, format::Compression::zstd);
  for (const MemberInput& m : extra) EXPECT_EQ(a->read_member(m.path), m.content) << m.path;
}

TEST_F(RoundTrip, SameInputsAndKeyGiveIdenticalBytesWhateverTheThreadCount) {
  std::vector<std::uint8_t> one = test::build_signed({&key}, test::default_identity(), 1);
  std::vector<std::uint8_t> again = test::build_signed({&key}, test::default_identity(), 1);
  std::vector<std::uint8_t> four = test::build_signed({&key}, test::default_identity(), 4);
  EXPECT_EQ(one, again);
  EXPECT_EQ(one, four);
}

// Workers write each member at its offset once every member before it is compressed: the
// bytes must not depend on the thread count, on how many compressed members may wait in
// memory, or on where the output goes, with empty members (several in a row, across a page
// of the index), members stored raw and compressed, and one larger than a zstd job.
TEST_F(RoundTrip, ManyMembersGiveTheSameBytesWhateverTheThreadsAndTheMemoryBound) {
  PackageIdentity id = test::default_identity();
  std::vector<MemberInput> extra;
  std::uint32_t state = 12345;
  auto random_bytes = [&](std::size_t n) {
    std::vector<std::uint8_t> out(n);
    for (auto& b : out) {
      state = state * 1664525u + 1013904223u;
      b = static_cast<std::uint8_t>(state >> 24);
    }
    return out;
  };
  for (int i = 0; i < 400; ++i) {
    MemberInput m;
    char name[32];
    std::snprintf(name, sizeof name, "data/m%03d.bin", i);
    m.path = name;
    if (i % 7 == 0 || (i >= 200 && i < 340)) {
      // empty: 140 in a row fill a whole page of 128 entries
    } else if (i % 3 == 0) {
      m.content = random_bytes(1 + static_cast<std::size_t>(i) * 97);  // stored raw
    } else {
      std::string text;
      while (text.size() < static_cast<std::size_t>(i) * 131) text += "kernel " + std::to_string(i) + " line\n";
      m.content.assign(text.begin(), text.end());  // compressed
    }
    extra.push_back(std::move(m));
  }
  MemberInput big;  // larger than a zstd job of level 9 (and than the smallest memory bound below)
  big.path = "data/big.bin";
  for (int i = 0; big.content.size() < (9u << 20); ++i) {
    std::string line = "row " + std::to_string(i) + " of a large compressible member\n";
    big.content.insert(big.content.end(), line.begin(), line.end());
  }
  extra.push_back(std::move(big));
  std::vector<Signer> signers{Signer{&key, "s", 0}};
  auto build = [&](unsigned threads, std::uint64_t held) {
    WriteOptions options;
    options.threads = threads;
    options.max_held_bytes = held;
    return build_archive(id, test::small_members_with(id, extra), signers, options);
  };
  std::vector<std::uint8_t> one = build(1, 64ull << 20);
  for (unsigned threads : {2u, 3u, 8u, 17u}) {
    for (std::uint64_t held : {0ull, 4096ull, 64ull << 20}) {
      EXPECT_EQ(build(threads, held), one) << threads << " threads, " << held << " bytes held at most";
    }
  }
  std::string dir = test::make_temp_dir();
  WriteOptions options;
  options.threads = 5;
  write_archive_file(dir + "/many.kiln", id, test::small_members_with(id, extra), signers, options);
  std::string on_disk = test::read_text_file(dir + "/many.kiln");
  EXPECT_EQ(std::vector<std::uint8_t>(on_disk.begin(), on_disk.end()), one);
  TrustSet trust = test::trust_of({&key});
  std::unique_ptr<ArchiveReader> a = test::open_and_verify(one, trust);
  EXPECT_EQ(a->read_member("data/m200.bin"), std::vector<std::uint8_t>{});
  EXPECT_EQ(a->read_member("data/m003.bin").size(), 1u + 3 * 97);
  EXPECT_EQ(a->read_member("data/big.bin").size(), extra.back().content.size());
}

// What kiln pack gives the writer for small files (InputFile): read by the worker that packs
// the member, into a buffer it reuses. The archive must be the bytes the same members held in
// memory give, at any thread count and memory bound; an input that changed since it was checked
// (other bytes, another size, a link in its place), or is itself an archive, is refused by name.
TEST_F(RoundTrip, MembersReadFromFilesGiveTheSameBytesAsHeldOnesAndChangedFilesAreRefused) {
  PackageIdentity id = test::default_identity();
  std::string dir = test::make_temp_dir();
  std::uint32_t state = 777;
  std::vector<MemberInput> held;
  for (int i = 0; i < 90; ++i) {
    MemberInput m;
    m.path = "data/f" + std::to_string(100 + i) + ".bin";
    m.role = format::Role::meta;
    if (i % 9 == 0) {
      // empty
    } else if (i % 3 == 0) {
      m.content.resize(1 + static_cast<std::size_t>(i) * 211);  // random: stored raw
      for (auto& b : m.content) b = static_cast<std::uint8_t>((state = state * 1664525u + 1013904223u) >> 24);
    } else {
      std::string text;
      while (text.size() < static_cast<std::size_t>(i) * 173) text += "line " + std::to_string(text.size()) + " of a source\n";
      m.content.assign(text.begin(), text.end());  // compressed
    }
    held.push_back(std::move(m));
  }
  auto from_files = [&](bool checked) {
    std::vector<MemberInput> out;
    for (const MemberInput& h : held) {
      MemberInput m;
      m.path = h.path;
      m.role = h.role;
      std::string file = dir + "/" + h.path.substr(h.path.rfind('/') + 1);
      m.file = InputFile{file, h.content.size(), std::nullopt};
      if (checked) m.file->checked = sha256(h.content.data(), h.content.size());
      out.push_back(std::move(m));
    }
    return out;
  };
  for (const MemberInput& h : held) {
    std::string file = dir + "/" + h.path.substr(h.path.rfind('/') + 1);
    std::FILE* f = std::fopen(file.c_str(), "wb");
    ASSERT_NE(f, nullptr) << file;
    if (!h.content.empty()) {
      ASSERT_EQ(std::fwrite(h.content.data(), 1, h.content.size(), f), h.content.size());
    }
    std::fclose(f);
  }
  std::vector<Signer> signers{Signer{&key, "s", 0}};
  auto build = [&](std::vector<MemberInput> extra, unsigned threads, std::uint64_t bound) {
    WriteOptions options;
    options.threads = threads;
    options.max_held_bytes = bound;
    return build_archive(id, test::small_members_with(id, std::move(extra)), signers, options);
  };
  std::vector<std::uint8_t> expected = build(held, 1, 64ull << 20);
  for (unsigned threads : {1u, 3u, 8u}) {
    for (std::uint64_t bound : {0ull, 64ull << 20}) {
      EXPECT_EQ(build(from_files(threads % 2 == 1), threads, bound), expected) << threads << " threads, bound " << bound;
    }
  }
  std::unique_ptr<ArchiveReader> a = test::open_and_verify(expected, test::trust_of({&key}));
  EXPECT_EQ(a->read_member("data/f103.bin"), held[3].content);
  EXPECT_EQ(a->entry(static_cast<std::size_t>(a->find("data/f103.bin"))).compression, format::Compression::none);
  EXPECT_EQ(a->entry(static_cast<std::size_t>(a->find("data/f185.bin"))).compression, format::Compression::zstd);

  auto refusal = [&](std::vector<MemberInput> extra) -> std::pair<Errc, std::string> {
    try {
      build(std::move(extra), 3, 64ull << 20);
    } catch (const Failure& e) {
      return {e.code(), e.what()};
    }
    return {Errc::internal, "accepted"};
  };
  const std::string victim = dir + "/f104.bin";
  std::vector<std::uint8_t> original = held[4].content;
  ASSERT_GT(original.size(), 2u);
  std::vector<std::uint8_t> changed = original;
  changed[1] ^= 0x20;  // same size, one byte different
  test::write_file(victim, changed);
  auto [code, why] = refusal(from_files(true));
  EXPECT_EQ(code, Errc::io) << why;
  EXPECT_EQ(why, victim + ": changed while kiln pack read it: its bytes are not the ones checked when it was first "
                          "read; pack again once nothing writes it");
  // Unchecked, the same file is packed as it now reads: there was nothing to hold it to.
  EXPECT_NO_THROW(build(from_files(false), 3, 64ull << 20));

  changed.push_back('!');
  test::write_file(victim, changed);
  std::tie(code, why) = refusal(from_files(false));
  EXPECT_EQ(code, Errc::io) << why;
  EXPECT_EQ(why, victim + ": changed while kiln pack read it: " + std::to_string(original.size()) +
                     " bytes when first opened, " + std::to_string(changed.size()) +
                     " now; pack again once nothing writes it");

  ASSERT_EQ(::unlink(victim.c_str()), 0);
  ASSERT_EQ(::symlink((dir + "/f101.bin").c_str(), victim.c_str()), 0);
  std::tie(code, why) = refusal(from_files(false));
  EXPECT_EQ(code, Errc::invalid_argument) << why;
  EXPECT_EQ(why, victim + ": is a symbolic link; kiln packs only regular files");

  ASSERT_EQ(::unlink(victim.c_str()), 0);
  std::vector<std::uint8_t> nested = build(held, 1, 64ull << 20);
  test::write_file(victim, nested);
  std::vector<MemberInput> with_nested = from_files(false);
  with_nested[4].file->size = nested.size();
  std::tie(code, why) = refusal(with_nested);
  EXPECT_EQ(code, Errc::invalid_argument) << why;
  EXPECT_EQ(why, "member 'data/f104.bin' is itself a kiln archive; archives are not nested (ship it as its own archive)");

  MemberInput twice = with_nested[5];
  twice.content = {1, 2, 3};
  std::tie(code, why) = refusal({twice});
  EXPECT_EQ(code, Errc::invalid_argument) << why;
  EXPECT_NE(why.find("member 'data/f105.bin' is given more than one content"), std::string::npos) << why;
}

// The writer's gathered write (pwritev): more pieces than one call takes (IOV_MAX, 1,024 on
// Linux), empty ones among them, at an offset past what was written before: the file holds the
// pieces one after another, and nothing else.
TEST(AtomicFileWriterGather, ManyPiecesLandInOrderAtTheirOffset) {
  std::string dir = test::make_temp_dir();
  std::vector<std::vector<std::uint8_t>> owned;
  std::vector<ByteView> pieces;
  std::vector<std::uint8_t> expected(100, 0x5a);
  for (int i = 0; i < 2500; ++i) {
    owned.emplace_back(static_cast<std::size_t>(i % 7 == 0 ? 0 : 1 + (i * 37) % 300), static_cast<std::uint8_t>(i));
  }
  for (const auto& o : owned) {
    pieces.emplace_back(o.data(), o.size());
    expected.insert(expected.end(), o.begin(), o.end());
  }
  {
    AtomicFileWriter out(dir + "/gathered.bin", 0644);
    out.pwrite_at(0, expected.data(), 100);
    out.pwritev_at(100, pieces);
    out.commit();
  }
  std::string back = test::read_text_file(dir + "/gathered.bin");
  EXPECT_EQ(std::vector<std::uint8_t>(back.begin(), back.end()), expected);
}

TEST_F(RoundTrip, InputOrderDoesNotMatter) {
  PackageIdentity id = test::default_identity();
  std::vector<MemberInput> members = test::small_members(id);
  std::vector<MemberInput> reversed(members.rbegin(), members.rend());
  std::vector<Signer> signers{Signer{&key, "s", 0}};
  EXPECT_EQ(build_archive(id, members, signers, {}), build_archive(id, reversed, signers, {}));
}

TEST_F(RoundTrip, FileWriteMatchesMemoryAndMapsBack) {
  std::string dir = test::make_temp_dir();
  PackageIdentity id = test::default_identity();
  std::vector<Signer> signers{Signer{&key, "s", 0}};
  Sha256 digest = write_archive_file(dir + "/a.kiln", id, test::small_members(id), signers, {});
  std::vector<std::uint8_t> in_memory = build_archive(id, test::small_members(id), signers, {});
  std::string on_disk = test::read_text_file(dir + "/a.kiln");
  EXPECT_EQ(std::vector<std::uint8_t>(on_disk.begin(), on_disk.end()), in_memory);
  TrustSet trust = test::trust_of({&key});
  ReadOptions options;
  options.policy = TrustPolicy{&trust, 1};
  std::unique_ptr<ArchiveReader> a = ArchiveReader::open_file(dir + "/a.kiln", options);
  EXPECT_EQ(a->digest(), digest);
  a->verify_all(2, true, nullptr);
}

// Archives up to 256 KiB opened by path are read into memory; larger ones are mapped and
// read with pread. Both open and verify alike, and a mapped archive truncated under the
// reader gives an error where a read from the mapping would have been a SIGBUS.
TEST_F(RoundTrip, SmallAndLargeArchivesOpenByPathAlikeAndATruncatedOneIsAnError) {
  std::string dir = test::make_temp_dir();
  PackageIdentity id = test::default_identity();
  std::vector<Signer> signers{Signer{&key, "s", 0}};
  MemberInput blob;
  blob.path = "tests/large.bin";
  std::uint32_t state = 7;
  for (int i = 0; i < (600 << 10); ++i) {  // incompressible: stored raw, so the file is > 256 KiB
    state = state * 1664525u + 1013904223u;
    blob.content.push_back(static_cast<std::uint8_t>(state >> 24));
  }
  std::vector<MemberInput> large = test::small_members_with(id, {blob});
  write_archive_file(dir + "/small.kiln", id, test::small_members(id), signers, {});
  write_archive_file(dir + "/large.kiln", id, large, signers, {});
  TrustSet trust = test::trust_of({&key});
  ReadOptions options;
  options.policy = TrustPolicy{&trust, 1};
  std::vector<std::uint8_t> source;
  for (const MemberInput& m : large) {
    if (m.path == "src/add.cu") source = m.content;
  }
  for (const char* name : {"/small.kiln", "/large.kiln"}) {
    std::unique_ptr<ArchiveReader> a = ArchiveReader::open_file(dir + name, options);
    EXPECT_EQ(a->read_member("src/add.cu"), source) << name;
    a->verify_all(1, true, nullptr);
  }
  ASSERT_GT(test::read_text_file(dir + "/large.kiln").size(), 256u << 10);
  std::unique_ptr<ArchiveReader> a = ArchiveReader::open_file(dir + "/large.kiln", options);
  ASSERT_EQ(::truncate((dir + "/large.kiln").c_str(), 4096), 0);
  try {
    a->read_member("tests/large.bin");
    FAIL() << "a member past the new end of the file was read";
  } catch (const Failure& e) {
    EXPECT_EQ(e.code(), Errc::io) << e.what();
    EXPECT_NE(std::string(e.what()).find("shrank"), std::string::npos) << e.what();
  }
}

TEST_F(RoundTrip, AddingASignatureKeepsTheDigestAndBothSignersCount) {
  std::string dir = test::make_temp_dir();
  PackageIdentity id = test::default_identity();
  Sha256 digest = write_archive_file(dir + "/a.kiln", id, test::small_members(id), {Signer{&key, "ci", 0}}, {});
  PrivateKey second = PrivateKey::generate();
  format::SignatureRecord rec = add_signature_to_file(dir + "/a.kiln", Signer{&second, "release", 5}, 1);
  EXPECT_EQ(rec.attributes.archive_digest, digest);

  TrustSet both = test::trust_of({&key, &second});
  ReadOptions options;
  options.policy = TrustPolicy{&both, 2};
  std::unique_ptr<ArchiveReader> a = ArchiveReader::open_file(dir + "/a.kiln", options);
  EXPECT_EQ(a->digest(), digest);
  EXPECT_EQ(a->trust_report().distinct_trusted_signers, 2u);
  EXPECT_EQ(a->signatures().at(1).attributes.signer, "release");

  try {
    add_signature_to_file(dir + "/a.kiln", Signer{&second, "release", 5}, 1);
    FAIL() << "the same key signed twice";
  } catch (const Failure& e) {
    EXPECT_NE(std::string(e.what()).find("already signed by key " + second.public_key().key_id()), std::string::npos);
  }
}

TEST_F(RoundTrip, WriterRefusesBadMembers) {
  PackageIdentity id = test::default_identity();
  std::vector<Signer> signers{Signer{&key, "s", 0}};
  auto expect_refusal = [&](std::vector<MemberInput> members, const std::string& reason) {
    try {
      build_archive(id, std::move(members), signers, {});
      FAIL() << "accepted: " << reason;
    } catch (const Failure& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument);
      EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << e.what();
    }
  };
  auto members = test::small_members(id);
  members[2].path = "../escape.cu";
  expect_refusal(members, "'..'");
  members = test::small_members(id);
  members[2].path = "/abs.cu";
  expect_refusal(members, "absolute");
  members = test::small_members(id);
  members.push_back(members[2]);
  expect_refusal(members, "given twice");
  members = test::small_members(id);
  members.erase(members.begin());
  expect_refusal(members, "kiln.toml");
  members = test::small_members(id);
  members[1].content = build_archive(id, test::small_members(id), signers, {});
  expect_refusal(members, "is itself a kiln archive");
}

// The packer's side of FORMAT.md §3.1: the writer refuses every path rule a reader applies, so
// kiln never produces an archive it would then refuse to open or extract.
TEST_F(RoundTrip, WriterRefusesPathsThatWouldExtractDifferentlyElsewhere) {
  PackageIdentity id = test::default_identity();
  std::vector<Signer> signers{Signer{&key, "s", 0}};
  const std::pair<std::string, std::string> cases[] = {
      {"src/" + std::string(256, 'x'), "has a component of 256 bytes, over 255"},
      {"src/aux.cu", "has the component 'aux.cu', a Windows device name"},
      {"kiln/evil.sh", "is inside the reserved folder 'kiln/'"},
      {"src.", "has a component ending in '.'"},
      {"SRC/add.cu", "the member paths 'SRC/add.cu' and 'src/add.cu' use the names 'SRC' and 'src'"},
      {"K.ptx", "the member paths 'K.ptx' and 'k.ptx' differ only in ASCII case"},
      {"src", "the member path 'src' is a file, but 'src/add.cu' needs a folder of that name"},
  };
  for (const auto& [path, reason] : cases) {
    std::vector<MemberInput> members = test::small_members(id);
    MemberInput extra;
    extra.path = path;
    extra.role = format::Role::source;
    extra.content = test::bytes_of("// hostile\n");
    members.push_back(extra);
    try {
      build_archive(id, std::move(members), signers, {});
      ADD_FAILURE() << "accepted " << path;
    } catch (const Failure& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument) << e.what();
      EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

TEST(KernelTable, RoundTripsEveryFieldTheRuntimeUses) {
  const char* text = R"([package]
name = "p"
kernel_revision = "r"
sequence = 2
[toolchain]
min_cuda_driver = "12.4"
[[kernel]]
name = "zeta"
entry = "zeta_entry"
backend = "cuda"
fallback = "refuse"
params = [{ name = "x", type = "ptr", dtype = "bf16", access = "write" }, { name = "n", type = "u64" },
          { name = "w", type = "ptr", dtype = "f8e4m3", access = "read" }, { name = "s", type = "f8e5m2" }]
code = [{ arch = "sm_90a", file = "z.cubin" }, { arch = "compute_90", file = "z.ptx" }]
tolerance = { rtol = 0.5, atol = 0.25 }
[[kernel.shape]]
name = "big"
values = { n = -3 }
grid = [7, 8, 9]
block = [32, 2]
shared_mem = 65536
[[kernel]]
name = "alpha"
entry = "a"
backend = "hip"
code = [{ arch = "gfx90a", file = "a.co" }]
)";
  Manifest m = parse_manifest(text, "kiln.toml");
  std::vector<KernelTableMember> members = encode_kernel_table(m);
  // kiln/kernels.bin first, then one record per kernel, sorted by name (the index's order).
  ASSERT_EQ(members.size(), 3u);
  EXPECT_EQ(members[0].path, kKernelTablePath);
  EXPECT_EQ(members[1].path, "kiln/kernels/alpha");
  EXPECT_EQ(members[2].path, "kiln/kernels/zeta");
  KernelTable t = KernelTable::decode(ByteView(members[0].content), "table");
  EXPECT_EQ(t.package(), "p");
  EXPECT_EQ(t.sequence(), 2u);
  ASSERT_NE(t.toolchain_value("min_cuda_driver"), nullptr);
  EXPECT_EQ(t.size(), 2u);
  KernelSpec z = decode_kernel_record(ByteView(members[2].content), "zeta", "zeta record");
  EXPECT_EQ(z.name, "zeta");
  EXPECT_EQ(z.entry, "zeta_entry");
  EXPECT_EQ(z.fallback, FallbackPolicy::refuse);
  ASSERT_EQ(z.params.size(), 4u);
  EXPECT_EQ(z.params[0].type, ScalarType::bf16);
  EXPECT_EQ(z.params[0].access, ParamAccess::write);
  EXPECT_EQ(z.params[1].type, ScalarType::u64);
  EXPECT_EQ(z.params[2].type, ScalarType::f8e4m3);  // type codes 12 and 13 (FORMAT.md)
  EXPECT_TRUE(z.params[2].is_pointer);
  EXPECT_EQ(z.params[3].type, ScalarType::f8e5m2);
  EXPECT_FALSE(z.params[3].is_pointer);
  ASSERT_EQ(z.code.size(), 2u);
  EXPECT_EQ(z.code[1].file.path, "z.ptx");
  ASSERT_EQ(z.shapes.size(), 1u);
  EXPECT_EQ(z.shapes[0].values.at(0).second, -3);
  EXPECT_EQ(z.shapes[0].grid[2], 9u);
  EXPECT_EQ(z.shapes[0].block[2], 1u);
  EXPECT_EQ(z.shapes[0].shared_mem, 65536u);
  EXPECT_DOUBLE_EQ(z.tolerance.atol, 0.25);
  EXPECT_EQ(decode_kernel_record(ByteView(members[1].content), "alpha", "alpha record").backend, "hip");
  // A record under a name that is not an identifier is refused.
  EXPECT_THROW(decode_kernel_record(ByteView(members[1].content), "al-pha", "bad name"), Failure);
  // Every truncation of the table header and of each record is refused.
  for (const KernelTableMember& member : members) {
    for (std::size_t n = 0; n < member.content.size(); ++n) {
      std::vector<std::uint8_t> cut(member.content.begin(), member.content.begin() + static_cast<long>(n));
      bool refused = false;
      try {
        if (member.path == kKernelTablePath) {
          KernelTable::decode(ByteView(cut), "cut");
        } else {
          decode_kernel_record(ByteView(cut), "alpha", "cut");
        }
      } catch (const Failure&) {
        refused = true;
      }
      EXPECT_TRUE(refused) << member.path << ": truncation to " << n << " bytes accepted";
    }
  }
}

// A KILNKTB3 table (FORMAT.md §4.1): each code reference carries its member's entry, decoded under
// an entry's rules and refused unless it is a code member's at a member's offset.
TEST(KernelTable, RecordsCopyTheirCodeMembersEntriesAndRefuseCopiesNoCodeMemberCouldHave) {
  Manifest m = parse_manifest(R"([package]
name = "p"
kernel_revision = "r"
sequence = 2
[[kernel]]
name = "k"
entry = "k"
backend = "cuda"
code = [{ arch = "compute_90", file = "k.ptx" }]
)", "kiln.toml");
  format::Entry e;
  e.path = "k.ptx";
  e.role = format::Role::code;
  e.backend = format::Vendor::cuda;
  e.kind = format::CodeKind::ptx;
  e.arch = "compute_90";
  e.offset = 4096;
  e.stored_size = e.content_size = 100;
  e.stored_sha256[0] = e.content_sha256[0] = 7;
  const CodeEntryLookup lookup = [&e](const std::string&) -> const format::Entry& { return e; };
  std::vector<KernelTableMember> table = encode_kernel_table(m, &lookup);
  EXPECT_TRUE(KernelTable::decode(ByteView(table[0].content), "table").code_entries());
  EXPECT_FALSE(KernelTable::decode(ByteView(encode_kernel_table(m)[0].content), "table").code_entries());
  KernelSpec k = decode_kernel_record(ByteView(table[1].content), "k", "record", true);
  ASSERT_TRUE(k.code.at(0).member.has_value());
  EXPECT_EQ(k.code[0].file.path, "k.ptx");
  EXPECT_EQ(k.code[0].member->offset, 4096u);
  EXPECT_EQ(k.code[0].member->stored_sha256, e.stored_sha256);
  // Read as the other form, the same bytes are refused rather than misread.
  EXPECT_THROW(decode_kernel_record(ByteView(table[1].content), "k", "record", false), Failure);
  EXPECT_THROW(decode_kernel_record(ByteView(encode_kernel_table(m)[1].content), "k", "record", true), Failure);
  const std::pair<std::function<void(format::Entry&)>, std::string> bad[] = {
      {[](format::Entry& x) { x.role = format::Role::meta, x.backend = format::Vendor::none, x.kind = format::CodeKind::none, x.arch.clear(); },
       "code entry 0 ('k.ptx'): not a code member's entry"},
      {[](format::Entry& x) { x.offset = 4100; }, "offset 4100 is not a member's (64-aligned, after the header)"},
      {[](format::Entry& x) { x.offset = 0; }, "offset 0 is not a member's"},
      {[](format::Entry& x) { x.content_size = 99; }, "an uncompressed member's stored and content size and digest must be equal"},
  };
  for (const auto& [forge, reason] : bad) {
    format::Entry copy = e;
    forge(copy);
    const CodeEntryLookup forged = [&copy](const std::string&) -> const format::Entry& { return copy; };
    std::vector<std::uint8_t> bytes = encode_kernel_record(m.kernels[0], &forged);
    try {
      decode_kernel_record(ByteView(bytes), "k", "record", true);
      ADD_FAILURE() << "accepted: " << reason;
    } catch (const Failure& f) {
      EXPECT_EQ(f.code(), Errc::malformed) << f.what();
      EXPECT_NE(std::string(f.what()).find(reason), std::string::npos) << f.what();
    }
  }
}

}  // namespace
}  // namespace kiln
