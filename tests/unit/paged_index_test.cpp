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
  // kiln.toml and kiln/kernels.bin, which every open reads, sit alone in a page of two (FORMAT.md §3).
  long table_page = head.page_for("kiln/kernels.bin");
  ASSERT_GE(table_page, 0);
  EXPECT_EQ(head.pages[static_cast<std::size_t>(table_page)].first_path, "kiln.toml");
  EXPECT_EQ(head.pages[static_cast<std::size_t>(table_page)].entry_count, 2u);
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

  // Each case breaks one rule of FORMAT.md §3 and must be refused by that rule's message.
  std::vector<std::uint8_t> counts = encoded.bytes;  // page 0 claims one entry more
  counts[page_ref(0)] += 1;
  EXPECT_EQ(refusal(counts, encoded.head_size), "index head: its pages hold 301 entries, not the 300 it declares");

  std::vector<std::uint8_t> digest = encoded.bytes;  // page 1's digest changed
  digest[page_ref(1) + 16] ^= 1;
  EXPECT_EQ(refusal(digest, encoded.head_size), "index page 1: its bytes do not match the SHA-256 in the index head");

  const std::size_t first_path_digit = page_ref(1) + 4 + 4 + 8 + 32 + 2 + 8;  // the '9' of "data/0129.bin"
  ASSERT_EQ(encoded.bytes[first_path_digit], '9');
  std::vector<std::uint8_t> first = encoded.bytes;  // page 1's first path after its first entry's
  first[first_path_digit] = ':';  // "data/012:.bin": still after every path of page 0
  EXPECT_EQ(refusal(first, encoded.head_size),
            "index page 1 at offset 117: index entry 128 ('data/0129.bin'): is not the page's first path in the "
            "index head");
  std::vector<std::uint8_t> before = encoded.bytes;  // page 1's first path is page 0's last entry
  before[first_path_digit] = '8';  // "data/0128.bin"
  EXPECT_EQ(refusal(before, encoded.head_size),
            "index page 0 at offset 13960: index entry 127 ('data/0128.bin'): must sort before the next page's first "
            "path 'data/0128.bin'");

  std::vector<std::uint8_t> offset = encoded.bytes;  // page 1 starts its members 64 bytes early
  offset[page_ref(1) + 8] ^= 64;
  EXPECT_EQ(refusal(offset, encoded.head_size),
            "index page 0 at offset 13960: index entry 127 ('data/0128.bin'): its bytes run to 8202, past 8192 where "
            "the next page's members (or the index) begin");

  // A head size that cuts a page reference, or that moves the pages past the end of the index.
  EXPECT_EQ(refusal(encoded.bytes, encoded.head_size - 1), "index head at offset 269: needs 9 more bytes but only 8 remain");
  EXPECT_EQ(refusal(encoded.bytes, encoded.head_size + 1),
            "index head at offset 278: index page 3: 113 bytes cannot hold 1 entries within the index");
  EXPECT_EQ(refusal(encoded.bytes, 0), "header: index head size 0 is outside 1..33006 (the index size)");
  // A byte after the last page reference (the pages moved along with it, so that only the
  // head is wrong), and a byte after the last page that no page covers.
  std::vector<std::uint8_t> trailing = encoded.bytes;
  trailing.insert(trailing.begin() + static_cast<std::ptrdiff_t>(encoded.head_size), 0);
  EXPECT_EQ(refusal(trailing, encoded.head_size + 1), "index head at offset 278: 1 trailing bytes after the last page reference");
  std::vector<std::uint8_t> uncovered = encoded.bytes;
  uncovered.push_back(0);
  EXPECT_EQ(refusal(uncovered, encoded.head_size),
            "index head: its pages cover " + std::to_string(encoded.bytes.size() - encoded.head_size) + " bytes but " +
                std::to_string(encoded.bytes.size() + 1 - encoded.head_size) + " follow the head");
}

}  // namespace
}  // namespace kiln
