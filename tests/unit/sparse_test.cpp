// The sparse form (schema/FORMAT.md §9): the complete archive's digest and signatures over some
// of its members. A reader reads what it holds, refuses what it lacks by name (never reading
// anything in its place), and refuses every extent table §9 does not allow.
#include <gtest/gtest.h>

#include <cstring>

#include "core/archive_reader.hpp"
#include "core/error.hpp"
#include "core/format.hpp"
#include "core/sparse.hpp"
#include "core/sparse_writer.hpp"
#include "test_support.hpp"

namespace kiln {
namespace {

class Sparse : public ::testing::Test {
 protected:
  void SetUp() override {
    complete = test::build_signed({&key});
    trust = test::trust_of({&key});
    ReadOptions options;
    options.policy = TrustPolicy{&trust, 1};
    reader = ArchiveReader::open_memory(complete.data(), complete.size(), options);
    entries = reader->index().entries;
  }
  // The positions of kiln.toml, the meta members and the code: what a pull for a target keeps.
  std::vector<bool> runtime_members() const {
    std::vector<bool> keep(entries.size());
    for (std::size_t i = 0; i < entries.size(); ++i) keep[i] = entries[i].role != format::Role::source && entries[i].role != format::Role::testdata;
    return keep;
  }
  std::size_t position(const std::string& path) const { return static_cast<std::size_t>(reader->index().find(path)); }
  // A sparse archive of `extents`, each filled from the complete archive (or by `fill`).
  std::vector<std::uint8_t> sparse_of(const std::vector<format::Extent>& extents, format::Header h,
                                      const ExtentFill& fill = {}) {
    std::vector<std::uint8_t> out;
    write_sparse([&out](const std::uint8_t* d, std::size_t n) { out.insert(out.end(), d, d + n); }, h, extents,
                 fill ? fill : ExtentFill([this](const format::Extent& x, const ExtentWrite& write) {
                   write(complete.data() + x.offset, x.size);
                 }));
    return out;
  }
  std::vector<std::uint8_t> sparse_keeping(const std::vector<bool>& keep) {
    return sparse_of(format::extents_for(entries, keep, reader->header()), reader->header());
  }
  std::unique_ptr<ArchiveReader> open(const std::vector<std::uint8_t>& bytes) {
    ReadOptions options;
    options.policy = TrustPolicy{&trust, 1};
    return ArchiveReader::open_memory(bytes.data(), bytes.size(), options);
  }
  // The message of the kiln::Failure `f` throws, with its code; "" when it throws none.
  template <typename F>
  std::string refusal(F f, Errc* code = nullptr) {
    try {
      f();
    } catch (const Failure& e) {
      if (code) *code = e.code();
      return e.what();
    }
    return "";
  }

  PrivateKey key = PrivateKey::generate();
  std::vector<std::uint8_t> complete;
  TrustSet trust;
  std::unique_ptr<ArchiveReader> reader;
  std::vector<format::Entry> entries;
};

TEST_F(Sparse, HoldsTheDigestAndSignaturesAndReadsOnlyWhatItHolds) {
  std::vector<std::uint8_t> bytes = sparse_keeping(runtime_members());
  std::unique_ptr<ArchiveReader> a = open(bytes);  // signatures checked against the same key
  EXPECT_LT(a->extents().present_bytes, complete.size() - 64);
  EXPECT_TRUE(a->sparse());
  EXPECT_EQ(a->digest(), reader->digest());
  EXPECT_EQ(a->complete_size(), complete.size());
  a->verify_all(1, true, nullptr);  // every member it holds, deep, and the index's rules
  EXPECT_EQ(a->read_member(std::string("k.ptx")), reader->read_member(std::string("k.ptx")));
  EXPECT_FALSE(a->member_present(position("src/add.cu")));
  Errc code = Errc::internal;
  std::string why = refusal([&] { a->read_member(std::string("src/add.cu")); }, &code);
  EXPECT_EQ(code, Errc::not_found);
  EXPECT_NE(why.find("member 'src/add.cu' is absent from this sparse archive"), std::string::npos) << why;
  EXPECT_NE(refusal([&] { a->verify_member_deep(position("src/add.cu")); }).find("is absent"), std::string::npos);
}

TEST_F(Sparse, AbsentBytesAreNeverReadEvenWhereTheTableIsShortOfThem) {
  // An extent table that holds everything but the source: the bytes after it in the file are the
  // next member's, which a reader that ignored the table would hash and refuse as "changed".
  // The refusal must be "absent", naming the member.
  std::vector<std::uint8_t> bytes = sparse_keeping(runtime_members());
  std::unique_ptr<ArchiveReader> a = open(bytes);
  Errc code = Errc::internal;
  std::string why = refusal([&] { a->unchecked_stored_bytes(position("src/add.cu")); }, &code);
  EXPECT_EQ(code, Errc::not_found) << why;
}

TEST_F(Sparse, ATableThatClaimsAnAbsentMemberGivesItsDigestNotZeros) {
  std::vector<bool> keep = runtime_members();
  keep[position("src/add.cu")] = true;
  const format::Entry& source = entries[position("src/add.cu")];
  std::vector<std::uint8_t> bytes = sparse_of(format::extents_for(entries, keep, reader->header()), reader->header(),
                                              [&](const format::Extent& x, const ExtentWrite& write) {
                                                std::vector<std::uint8_t> piece(complete.begin() + x.offset,
                                                                                complete.begin() + x.end());
                                                if (source.offset >= x.offset && source.offset < x.end()) {
                                                  std::memset(piece.data() + (source.offset - x.offset), 0, source.stored_size);
                                                }
                                                write(piece.data(), piece.size());
                                              });
  std::unique_ptr<ArchiveReader> a = open(bytes);
  Errc code = Errc::internal;
  std::string why = refusal([&] { a->read_member(std::string("src/add.cu")); }, &code);
  EXPECT_EQ(code, Errc::integrity);
  EXPECT_NE(why.find("stored bytes do not match the index"), std::string::npos) << why;
}

TEST_F(Sparse, EverySingleByteChangeAndEveryTruncationIsRefused) {
  std::vector<std::uint8_t> bytes = sparse_keeping(runtime_members());
  auto accepted = [&](const std::vector<std::uint8_t>& candidate) {
    try {
      test::open_and_verify(candidate, trust);
    } catch (const Failure&) {
      return false;
    }
    return true;
  };
  ASSERT_TRUE(accepted(bytes));
  for (std::size_t offset = 0; offset < bytes.size(); ++offset) {
    for (std::uint8_t flip : {std::uint8_t(0x01), std::uint8_t(0x80)}) {
      std::vector<std::uint8_t> copy = bytes;
      copy[offset] ^= flip;
      ASSERT_FALSE(accepted(copy)) << "changing byte " << offset << " by xor " << int(flip) << " was not noticed";
    }
  }
  for (std::size_t length = 0; length < bytes.size(); ++length) {
    ASSERT_FALSE(accepted(std::vector<std::uint8_t>(bytes.begin(), bytes.begin() + static_cast<long>(length)))) << length;
  }
}

TEST_F(Sparse, EachRuleOfTheExtentTableIsARefusalNamingIt) {
  const format::Header h = reader->header();
  const std::uint64_t full = format::complete_size(h);
  auto open_why = [&](const std::vector<std::uint8_t>& bytes) { return refusal([&] { open(bytes); }); };
  // Flags other than bit 0.
  std::vector<std::uint8_t> bytes = sparse_keeping(runtime_members());
  bytes[12] = 3;
  EXPECT_NE(open_why(bytes).find("set bits this kiln does not know"), std::string::npos) << open_why(bytes);
  // The table's magic, and the count.
  bytes = sparse_keeping(runtime_members());
  bytes[64] ^= 1;
  EXPECT_NE(open_why(bytes).find("KILNSPX1"), std::string::npos) << open_why(bytes);
  // Two adjacent extents (one extent written as two).
  format::Extent index{h.index_offset, full - h.index_offset};
  format::Extent head{64, 64}, next{128, entries[1].offset - 128};
  ASSERT_GT(entries[1].offset, 128u);
  EXPECT_NE(open_why(sparse_of({head, next, index}, h)).find("not after the previous extent's end"), std::string::npos)
      << open_why(sparse_of({head, next, index}, h));
  // The last extent must hold the index and the signature block.
  format::Extent short_index{h.index_offset, full - h.index_offset - 1};
  EXPECT_NE(open_why(sparse_of({short_index}, h)).find("does not hold the index"), std::string::npos);
  // An extent past the complete archive.
  format::Extent past{h.index_offset, full - h.index_offset + 64};
  EXPECT_NE(open_why(sparse_of({past}, h, [](const format::Extent& x, const ExtentWrite& w) {
              std::vector<std::uint8_t> zeros(x.size);
              w(zeros.data(), zeros.size());
            })).find("runs past the complete archive"),
            std::string::npos);
  // A file longer or shorter than the table says.
  bytes = sparse_keeping(runtime_members());
  bytes.push_back(0);
  EXPECT_NE(open_why(bytes).find("truncated or extended"), std::string::npos) << open_why(bytes);
  // Padding after the extents.
  std::vector<format::Extent> one{index};
  bytes = sparse_of(one, h);
  ASSERT_LT(12u + 16u, 64u);
  bytes[64 + 12 + 16] = 1;
  EXPECT_NE(open_why(bytes).find("padding after the extents is not zero"), std::string::npos) << open_why(bytes);
}

// The open reads the kernel table through the index head's copy of its entry (FORMAT.md §3): a
// sparse file without the table's bytes is refused at open, naming the member, and reads nothing
// from where the bytes would be.
TEST_F(Sparse, AFileWithoutTheKernelTablesBytesIsRefusedAtOpen) {
  std::vector<bool> keep = runtime_members();
  keep[position("kiln/kernels.bin")] = false;
  const std::vector<std::uint8_t> bytes = sparse_keeping(keep);
  Errc code = Errc::internal;
  const std::string why = refusal([&] { open(bytes); }, &code);
  EXPECT_EQ(code, Errc::not_found) << why;
  EXPECT_NE(why.find("member 'kiln/kernels.bin' is absent from this sparse archive"), std::string::npos) << why;
}

TEST_F(Sparse, AnExtentThatCutsAMemberIsRefused) {
  // kiln.toml's slot is longer than 128 bytes: an extent that ends 64 bytes into it holds part of
  // it. The members before and after it (the code, the kernel table) are held whole.
  const std::size_t toml = position("kiln.toml"), code = position("k.ptx"), table = position("kiln/kernels.bin");
  ASSERT_EQ(code + 1, toml);
  ASSERT_EQ(toml + 1, table);
  const format::Entry& e = entries[toml];
  ASSERT_GT(e.stored_size, 128u);
  const format::Header h = reader->header();
  const std::uint64_t records_end = entries[position("src/add.cu")].offset;
  std::vector<format::Extent> extents{{entries[code].offset, e.offset + 64 - entries[code].offset},
                                      {entries[table].offset, records_end - entries[table].offset},
                                      {h.index_offset, format::complete_size(h) - h.index_offset}};
  std::vector<std::uint8_t> bytes = sparse_of(extents, h);
  std::unique_ptr<ArchiveReader> a = open(bytes);
  Errc code_seen = Errc::internal;
  std::string why = refusal([&] { a->read_member(toml); }, &code_seen);
  EXPECT_EQ(code_seen, Errc::malformed);
  EXPECT_NE(why.find("holds part of it"), std::string::npos) << why;
  why = refusal([&] { a->verify_all(1, false, nullptr); });
  EXPECT_NE(why.find("members are whole or absent"), std::string::npos) << why;
}

TEST_F(Sparse, TwoSparseCopiesJoinIntoOneHoldingBoth) {
  std::vector<bool> code(entries.size()), sources(entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    bool always = entries[i].role == format::Role::manifest || entries[i].role == format::Role::meta;
    code[i] = always || entries[i].role == format::Role::code;
    sources[i] = always || entries[i].role == format::Role::source;
  }
  std::vector<std::uint8_t> a_bytes = sparse_keeping(code), b_bytes = sparse_keeping(sources);
  std::unique_ptr<ArchiveReader> a = open(a_bytes), b = open(b_bytes);
  std::vector<bool> both(entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) both[i] = code[i] || sources[i];
  std::string dir = test::make_temp_dir();
  AtomicFileWriter out(dir + "/joined.kiln", 0644);
  write_sparse_copy({a.get(), b.get()}, both, out);
  out.commit();
  std::vector<std::uint8_t> joined = test::bytes_of(test::read_text_file(dir + "/joined.kiln"));
  std::unique_ptr<ArchiveReader> j = test::open_and_verify(joined, trust);
  EXPECT_TRUE(j->member_present(position("k.ptx")));
  EXPECT_TRUE(j->member_present(position("src/add.cu")));
  EXPECT_EQ(j->read_member(std::string("src/add.cu")), reader->read_member(std::string("src/add.cu")));
  // Every member of both: the complete archive's bytes, the extent table aside.
  EXPECT_EQ(j->digest(), reader->digest());
}

}  // namespace
}  // namespace kiln
