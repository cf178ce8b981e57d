// Exhaustive tampering: every single-byte change and every truncation of a small signed
// archive must be refused by open + full verification, with a kiln::Failure (never a crash
// and never a different exception).
#include <gtest/gtest.h>

#include <cstring>

#include "core/archive_reader.hpp"
#include "core/archive_writer.hpp"
#include "core/error.hpp"
#include "core/format.hpp"
#include "core/sha256.hpp"
#include "test_support.hpp"

namespace kiln {
namespace {

class Tamper : public ::testing::Test {
 protected:
  void SetUp() override {
    bytes = test::build_signed({&key});
    trust = test::trust_of({&key});
  }
  // Returns "" when refused, or a description of what was accepted.
  std::string accepted(const std::vector<std::uint8_t>& candidate) {
    try {
      test::open_and_verify(candidate, trust);
    } catch (const Failure&) {
      return "";
    }
    return "accepted";
  }
  PrivateKey key = PrivateKey::generate();
  std::vector<std::uint8_t> bytes;
  TrustSet trust;
};

TEST_F(Tamper, UnmodifiedArchiveVerifies) { EXPECT_EQ(accepted(bytes), "accepted"); }

TEST_F(Tamper, EverySingleByteChangeAtEveryOffsetIsRefused) {
  ASSERT_GT(bytes.size(), 1000u);
  // Three different changes per offset: the lowest bit, the highest bit, and every bit.
  const std::uint8_t flips[] = {0x01, 0x80, 0xff};
  std::size_t refused = 0;
  for (std::size_t offset = 0; offset < bytes.size(); ++offset) {
    for (std::uint8_t flip : flips) {
      std::vector<std::uint8_t> copy = bytes;
      copy[offset] ^= flip;
      ASSERT_EQ(accepted(copy), "") << "changing byte " << offset << " by xor 0x" << std::hex << int(flip)
                                    << " was not noticed";
      ++refused;
    }
  }
  EXPECT_EQ(refused, bytes.size() * 3);
}

TEST_F(Tamper, EveryTruncationIsRefused) {
  for (std::size_t length = 0; length < bytes.size(); ++length) {
    std::vector<std::uint8_t> copy(bytes.begin(), bytes.begin() + static_cast<long>(length));
    ASSERT_EQ(accepted(copy), "") << "truncation to " << length << " bytes was accepted";
  }
}

TEST_F(Tamper, AppendedBytesAreRefused) {
  for (std::uint8_t extra : {0x00, 0x41}) {
    std::vector<std::uint8_t> copy = bytes;
    copy.push_back(extra);
    EXPECT_EQ(accepted(copy), "");
  }
}

TEST_F(Tamper, ChangedMemberIsNamedInTheError) {
  std::unique_ptr<ArchiveReader> a = test::open_and_verify(bytes, trust);
  const format::Entry& code = a->index().entries.at(static_cast<std::size_t>(a->index().find("k.ptx")));
  std::vector<std::uint8_t> copy = bytes;
  copy[code.offset + 3] ^= 0x20;
  try {
    test::open_and_verify(copy, trust);
    FAIL() << "accepted";
  } catch (const Failure& e) {
    EXPECT_EQ(e.code(), Errc::integrity);
    EXPECT_NE(std::string(e.what()).find("member 'k.ptx'"), std::string::npos) << e.what();
  }
}

// The tree form of the index (FORMAT.md §3): a change to any byte of the head or of the pages on
// the way to the kernel table, and to a sample of every other page, is refused by a full
// verification (a reference page's change by its digest in the head, an entry page's by its
// digest in a reference page).
class TamperTree : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<MemberInput> data;
    for (int i = 0; i < 1100; ++i) {
      MemberInput m;
      m.path = "data/" + std::to_string(10000 + i) + ".bin";
      m.content = test::bytes_of("member " + std::to_string(i));
      data.push_back(std::move(m));
    }
    const PackageIdentity id = test::default_identity();
    bytes = build_archive(id, test::small_members_with(id, std::move(data)), {Signer{&key, "tree", 0}}, WriteOptions{});
    h = format::decode_header(ByteView(bytes.data(), format::kHeaderSize));
    head = format::decode_index_head(ByteView(bytes.data() + h.index_offset, h.index_head_size), h.index_size,
                                     h.index_offset);
  }
  PrivateKey key = PrivateKey::generate();
  TrustSet trust = test::trust_of({&key});
  std::vector<std::uint8_t> bytes;
  format::Header h;
  format::IndexHead head;  // points into bytes
};

TEST_F(TamperTree, ChangedIndexBytesAreRefused) {
  ASSERT_TRUE(head.tree);
  ASSERT_EQ(head.height, 2u);
  ASSERT_NO_THROW(test::open_and_verify(bytes, trust));
  // Every byte up to the end of the first page after the head (a reference page and its first
  // entry pages follow it, depth-first), then every 89th byte of the rest of the index.
  const std::uint64_t dense_end = h.index_offset + head.refs[0].index_position + head.refs[0].size + 4096;
  std::size_t tried = 0;
  for (std::uint64_t offset = h.index_offset; offset < h.index_offset + h.index_size;
       offset += offset < dense_end ? 1 : 89) {
    std::vector<std::uint8_t> copy = bytes;
    copy[offset] ^= 0x01;
    try {
      test::open_and_verify(copy, trust);
      ADD_FAILURE() << "changing byte " << offset << " of the index (at " << offset - h.index_offset << ") was not noticed";
      return;
    } catch (const Failure&) {
      ++tried;
    }
  }
  EXPECT_GT(tried, 5000u);
}

// A single changed byte of a reference page also breaks some rule its fields obey, so the test
// above cannot show that reference pages are hashed. Here an entry page is rewritten consistently
// (an entry's stored digest changed, the page given its new digest in the reference page above
// it): only the reference page's own digest, in the head, tells.
TEST_F(TamperTree, ARewrittenSubtreeIsRefusedByTheDigestAboveIt) {
  const format::PageRef& top = head.refs[0];
  const std::uint64_t top_at = h.index_offset + top.index_position;
  const std::vector<format::PageRef> children = format::decode_reference_page(
      ByteView(bytes.data() + top_at, top.size), top, 1, format::child_bounds(head.refs, 0, {h.index_offset, false, {}}),
      h.index_size);
  const format::PageRef& leaf = children[0];
  const std::uint64_t leaf_at = h.index_offset + leaf.index_position;
  std::vector<std::uint8_t> copy = bytes;
  // The first entry's stored digest: after the page magic, its path (str16), four u8s, its arch
  // (str16, empty for data), offset, stored and content sizes.
  const std::uint64_t digest_at = leaf_at + 8 + 2 + leaf.first_path.size() + 4 + 2 + 24;
  copy[digest_at] ^= 0x01;
  const Sha256 leaf_digest = sha256(copy.data() + leaf_at, leaf.size);
  std::memcpy(copy.data() + top_at + 8 + 4 + 4 + 4 + 4 + 8, leaf_digest.data(), 32);  // children[0].sha256
  try {
    test::open_and_verify(copy, trust);
    FAIL() << "a rewritten subtree was accepted";
  } catch (const Failure& e) {
    EXPECT_EQ(e.code(), Errc::integrity) << e.what();
    EXPECT_NE(std::string(e.what()).find("index page at " + std::to_string(top.index_position) + ": its bytes do not match"),
              std::string::npos)
        << e.what();
  }
}

// The reference page on every open's way to the kernel table names only the small page that
// holds kiln.toml and kiln/kernels.bin, and the reader takes that page from its parent's read
// (ArchiveReader::kSmallSpan): a changed byte there is still refused by the page's own digest,
// in the reference page above it, before the page is parsed.
TEST_F(TamperTree, APageReadWithItsParentIsStillCheckedByItsOwnDigest) {
  std::size_t k = 0;
  while (k < head.refs.size() && head.refs[k].first_path != "kiln.toml") ++k;
  ASSERT_LT(k, head.refs.size()) << "the writer gives kiln.toml's page a reference page of its own";
  const format::PageRef& parent = head.refs[k];
  ASSERT_LE(parent.span, ArchiveReader::kSmallSpan);
  const std::vector<format::PageRef> children = format::decode_reference_page(
      ByteView(bytes.data() + h.index_offset + parent.index_position, parent.size), parent, 1,
      format::child_bounds(head.refs, k, {h.index_offset, false, {}}), h.index_size);
  ASSERT_EQ(children.size(), 1u);
  const format::PageRef& leaf = children[0];
  for (std::uint64_t at : {std::uint64_t{0}, std::uint64_t{leaf.size / 2}, std::uint64_t{leaf.size - 1}}) {
    std::vector<std::uint8_t> copy = bytes;
    copy[h.index_offset + leaf.index_position + at] ^= 0x01;
    try {
      test::open_and_verify(copy, trust);
      ADD_FAILURE() << "a changed byte " << at << " of the page read with its parent was accepted";
    } catch (const Failure& e) {
      EXPECT_EQ(e.code(), Errc::integrity) << e.what();
      EXPECT_NE(std::string(e.what()).find("index page at " + std::to_string(leaf.index_position) + ": its bytes do not match"),
                std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace kiln
