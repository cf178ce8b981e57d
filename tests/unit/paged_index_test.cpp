// The paged index (FORMAT.md §3): lookups across pages, lazy tamper detection (a changed page
// is refused when it is first used and by a full verification, never silently believed), and
// heads that disagree with their pages refused at decode.
#include <gtest/gtest.h>

#include <cstring>

#include "archive_writer.hpp"
#include "error.hpp"
#include "format.hpp"
#include "manifest.hpp"
#include "test_support.hpp"

namespace kiln {
namespace {

constexpr int kDataMembers = 300;  // with kiln.toml and the kernel table: three pages

std::string data_path(int i) {
  char name[32];
  std::snprintf(name, sizeof name, "data/%04d.bin", i);
  return name;
}

class PagedIndex : public ::testing::Test {
 protected:
  PackageIdentity id = test::default_identity();
  PrivateKey key = PrivateKey::generate();
  TrustSet trust = test::trust_of({&key});

  std::vector<std::uint8_t> build() {
    std::vector<MemberInput> data;
    for (int i = 0; i < kDataMembers; ++i) {
      MemberInput m;
      m.path = data_path(i);
      m.content = test::bytes_of("member " + std::to_string(i) + " of the paged index test\n");
      data.push_back(std::move(m));
    }
    return build_archive(id, test::small_members_with(id, std::move(data)), {Signer{&key, "paged", 0}}, WriteOptions{});
  }
  std::unique_ptr<Archive> open(const std::vector<std::uint8_t>& bytes) {
    ReadOptions options;
    options.policy = TrustPolicy{&trust, 1};
    return Archive::open_memory(bytes.data(), bytes.size(), options);
  }
  static format::Header header(const std::vector<std::uint8_t>& bytes) {
    return format::decode_header(ByteView(bytes.data(), format::kHeaderSize));
  }
};

TEST_F(PagedIndex, EveryMemberIsFoundAcrossPages) {
  std::vector<std::uint8_t> bytes = build();
  std::unique_ptr<Archive> a = open(bytes);
  format::Header h = header(bytes);
  format::IndexHead head =
      format::decode_index_head(ByteView(bytes.data() + h.index_offset, h.index_head_size), h.index_size, h.index_offset);
  ASSERT_GE(head.pages.size(), 3u);
  EXPECT_EQ(head.pages[0].entry_count, format::kEntriesPerPage);
  for (int i = 0; i < kDataMembers; ++i) {
    long position = a->find(data_path(i));
    ASSERT_GE(position, 0) << data_path(i);
    EXPECT_EQ(a->entry(static_cast<std::size_t>(position)).path, data_path(i));
    std::vector<std::uint8_t> content = a->read_member(static_cast<std::size_t>(position));
    EXPECT_EQ(std::string(content.begin(), content.end()), "member " + std::to_string(i) + " of the paged index test\n");
  }
  EXPECT_EQ(a->find("data/9999.bin"), -1);
  EXPECT_EQ(a->find("aaa"), -1);  // before the first page
  EXPECT_EQ(a->find("zzz"), -1);  // after the last
  // The full index is the pages in order.
  EXPECT_EQ(a->index().entries.size(), a->member_count());
  a->verify_all(2, true, nullptr);
}

TEST_F(PagedIndex, AChangedPageIsRefusedWhenFirstUsedAndByFullVerification) {
  std::vector<std::uint8_t> bytes = build();
  format::Header h = header(bytes);
  format::IndexHead head =
      format::decode_index_head(ByteView(bytes.data() + h.index_offset, h.index_head_size), h.index_size, h.index_offset);
  // A byte of page 0 (data/0000..data/0127); kiln.toml and the kernel table live in the last page.
  bytes[h.index_offset + head.pages[0].index_position + 40] ^= 1;
  std::unique_ptr<Archive> a = open(bytes);  // the open path never needs page 0
  try {
    a->read_member(data_path(3));
    FAIL() << "a member of the changed page was read";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::integrity);
    EXPECT_NE(std::string(e.what()).find("index page 0"), std::string::npos) << e.what();
  }
  EXPECT_GE(a->find(data_path(200)), 0);  // other pages still answer
  try {
    open(bytes)->verify_all(1, false, nullptr);
    FAIL() << "full verification accepted a changed page";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::integrity);
    EXPECT_NE(std::string(e.what()).find("index page 0"), std::string::npos) << e.what();
  }
}

// Heads that disagree with their pages, checked at decode (a signer could ship these).
class PagedHead : public ::testing::Test {
 protected:
  format::Index index;
  format::EncodedIndex encoded;
  std::uint64_t index_offset = 0;

  void SetUp() override {
    index.package = "p";
    index.kernel_revision = "r";
    index.sequence = 1;
    std::uint64_t offset = format::kHeaderSize;
    for (int i = 0; i < kDataMembers; ++i) {
      format::Entry e;
      e.path = i == 0 ? "kiln.toml" : data_path(i);
      e.role = i == 0 ? format::Role::manifest : format::Role::testdata;
      e.offset = offset;
      e.stored_size = e.content_size = 10;
      offset = format::align_up(offset + e.stored_size);
      index.entries.push_back(e);
    }
    std::sort(index.entries.begin(), index.entries.end(),
              [](const format::Entry& a, const format::Entry& b) { return a.path < b.path; });
    offset = format::kHeaderSize;
    for (format::Entry& e : index.entries) {
      e.offset = offset;
      offset = format::align_up(offset + e.stored_size);
    }
    index_offset = offset;
    encoded = format::encode_index(index);
  }
  std::string refusal(const std::vector<std::uint8_t>& bytes, std::uint64_t head_size) {
    try {
      format::decode_index(ByteView(bytes), head_size, index_offset);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  // Offset in the head of page `p`'s reference (after magic, counts, identity).
  std::size_t page_ref(std::size_t p) const {
    std::size_t at = 8 + 4 + 8 + 2 + index.package.size() + 2 + index.kernel_revision.size() + 4;
    format::IndexHead head = format::decode_index_head(ByteView(encoded.bytes.data(), encoded.head_size),
                                                       encoded.bytes.size(), index_offset);
    for (std::size_t i = 0; i < p; ++i) at += 4 + 4 + 8 + 32 + 2 + head.pages[i].first_path.size();
    return at;
  }
};

TEST_F(PagedHead, RoundTripsAndRefusesHeadsThatDisagreeWithTheirPages) {
  ASSERT_EQ(refusal(encoded.bytes, encoded.head_size), "");
  EXPECT_EQ(format::decode_index(ByteView(encoded.bytes), encoded.head_size, index_offset).entries.size(),
            static_cast<std::size_t>(kDataMembers));

  std::vector<std::uint8_t> counts = encoded.bytes;  // page 0 claims one entry more
  counts[page_ref(0)] += 1;
  EXPECT_NE(refusal(counts, encoded.head_size), "");

  std::vector<std::uint8_t> digest = encoded.bytes;  // page 1's digest changed
  digest[page_ref(1) + 16] ^= 1;
  EXPECT_NE(refusal(digest, encoded.head_size).find("index page 1"), std::string::npos);

  std::vector<std::uint8_t> first = encoded.bytes;  // page 1's first path no longer its first entry's
  first[page_ref(1) + 4 + 4 + 8 + 32 + 2 + 8] ^= 1;  // a digit of "data/0NNN.bin"
  EXPECT_NE(refusal(first, encoded.head_size), "");

  std::vector<std::uint8_t> offset = encoded.bytes;  // page 1 starts its members elsewhere
  offset[page_ref(1) + 8] ^= 64;
  EXPECT_NE(refusal(offset, encoded.head_size), "");

  // A head size that cuts a page reference, or leaves bytes the pages do not cover.
  EXPECT_NE(refusal(encoded.bytes, encoded.head_size - 1), "");
  EXPECT_NE(refusal(encoded.bytes, encoded.head_size + 1), "");
  EXPECT_NE(refusal(encoded.bytes, 0), "");
}

}  // namespace
}  // namespace kiln
