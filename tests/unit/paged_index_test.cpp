// The paged index (FORMAT.md §3), in both head forms: lookups across pages and levels, lazy
// tamper detection (a changed page is refused when it is first used and by a full verification,
// never silently believed), and heads and reference pages that disagree with what they name
// refused at decode.
#include <gtest/gtest.h>

#include <cstring>

#include "core/archive_writer.hpp"
#include "core/error.hpp"
#include "core/format.hpp"
#include "core/manifest.hpp"
#include "core/ref_table.hpp"
#include "core/sha256.hpp"
#include "test_support.hpp"

namespace kiln {
namespace {

// With kiln.toml and the kernel table: 80 data members make about a dozen entry pages of at most
// 8 (a head of height 1), 1,500 about 190 (more than the head's 16: a tree of height 2).
constexpr int kOneLevelMembers = 80;
constexpr int kTreeMembers = 1500;

std::string data_path(int i) {
  char name[32];
  std::snprintf(name, sizeof name, "data/%04d.bin", i);
  return name;
}

std::string data_content(int i) { return "member " + std::to_string(i) + " of the paged index test\n"; }

format::IndexHead head_of(const std::vector<std::uint8_t>& bytes) {
  format::Header h = format::decode_header(ByteView(bytes.data(), format::kHeaderSize));
  return format::decode_index_head(ByteView(bytes.data() + h.index_offset, h.index_head_size), h.index_size,
                                   h.index_offset);
}

class PagedIndex : public ::testing::TestWithParam<int> {
 protected:
  PackageIdentity id = test::default_identity();
  PrivateKey key = PrivateKey::generate();
  TrustSet trust = test::trust_of({&key});

  std::vector<std::uint8_t> build(int members) {
    std::vector<MemberInput> data;
    for (int i = 0; i < members; ++i) {
      MemberInput m;
      m.path = data_path(i);
      m.content = test::bytes_of(data_content(i));
      data.push_back(std::move(m));
    }
    return build_archive(id, test::small_members_with(id, std::move(data)), {Signer{&key, "paged", 0}}, WriteOptions{});
  }
  std::unique_ptr<ArchiveReader> open(const std::vector<std::uint8_t>& bytes) {
    ReadOptions options;
    options.policy = TrustPolicy{&trust, 1};
    return ArchiveReader::open_memory(bytes.data(), bytes.size(), options);
  }
};

TEST_P(PagedIndex, EveryMemberIsFoundByPathAndPosition) {
  const int members = GetParam();
  std::vector<std::uint8_t> bytes = build(members);
  format::IndexHead head = head_of(bytes);
  // The writer's choice (FORMAT.md §3): a KILNIDX4 head carrying the kernel table's entry, one
  // level of pages while the entry pages fit in the head.
  EXPECT_TRUE(head.tree);
  ASSERT_TRUE(head.kernel_table.has_value());
  EXPECT_EQ(head.kernel_table->path, "kiln/kernels.bin");
  EXPECT_EQ(head.height, members == kTreeMembers ? 2u : 1u);
  EXPECT_LE(head.refs.size(), format::kReferencesPerPage);
  std::unique_ptr<ArchiveReader> a = open(bytes);
  // Opening reads the kernel table through the head's copy of its entry: no index page.
  EXPECT_EQ(a->index_pages_read(), 0u);
  // kiln.toml and kiln/kernels.bin still sit alone in an entry page of two, which the tree gives
  // a reference page of its own at every level (what a reader of a head without the copy reads
  // on its way to the kernel table): the head's reference to it covers those two entries only.
  const long table = format::ref_for_path(head.refs, "kiln/kernels.bin");
  ASSERT_GE(table, 0);
  EXPECT_EQ(head.refs[static_cast<std::size_t>(table)].first_path, "kiln.toml");
  EXPECT_EQ(head.refs[static_cast<std::size_t>(table)].entry_count, 2u);
  for (int i = 0; i < members; ++i) {
    long position = a->find(data_path(i));
    ASSERT_GE(position, 0) << data_path(i);
    EXPECT_EQ(a->entry(static_cast<std::size_t>(position)).path, data_path(i));
    std::vector<std::uint8_t> content = a->read_member(static_cast<std::size_t>(position));
    EXPECT_EQ(std::string(content.begin(), content.end()), data_content(i));
  }
  EXPECT_EQ(a->find("data/9999.bin"), -1);
  EXPECT_EQ(a->find("aaa"), -1);  // before the first page
  EXPECT_EQ(a->find("zzz"), -1);  // after the last
  // Positions and paths agree both ways, and the full index is every entry page in order.
  const format::Index& index = a->index();
  ASSERT_EQ(index.entries.size(), a->member_count());
  std::unique_ptr<ArchiveReader> fresh = open(bytes);
  for (std::size_t i = 0; i < index.entries.size(); i += 7) {
    EXPECT_EQ(fresh->entry(i).path, index.entries[i].path);
    EXPECT_EQ(fresh->find(index.entries[i].path), static_cast<long>(i));
  }
  a->verify_all(2, true, nullptr);
}

// A kernel's record carries its code member's entry (FORMAT.md §4.1): loading the kernel reads
// the record's pages and no other, where looking the code member up reads its own.
TEST_P(PagedIndex, AKernelsCodeIsReadThroughItsRecordWithoutAnIndexPage) {
  std::vector<std::uint8_t> bytes = build(GetParam());
  std::unique_ptr<ArchiveReader> a = open(bytes);
  const KernelSpec k = a->kernel("add");
  ASSERT_TRUE(k.code.at(0).member.has_value());
  const std::size_t after_record = a->index_pages_read();
  const std::vector<std::uint8_t> code = a->read_member(*k.code[0].member);
  EXPECT_EQ(a->index_pages_read(), after_record);
  EXPECT_EQ(code, a->read_member("k.ptx"));
  // In the tree, k.ptx's entry is on a page the record's lookup did not read.
  if (GetParam() == kTreeMembers) {
    EXPECT_GT(a->index_pages_read(), after_record);
  }
}

// A head without the kernel table's entry (KILNIDX3, as writers before 0.7.3 wrote it): the open
// finds kiln/kernels.bin in the index, one page per level, and everything reads as before.
TEST_P(PagedIndex, AHeadWithoutTheKernelTablesEntryIsReadThroughTheIndex) {
  PackageIdentity same = id;
  std::vector<MemberInput> data;
  for (int i = 0; i < GetParam(); ++i) {
    MemberInput m;
    m.path = data_path(i);
    m.content = test::bytes_of(data_content(i));
    data.push_back(std::move(m));
  }
  test::RawArchive raw = test::raw_from_members(same, test::small_members_with(same, std::move(data)));
  raw.signers = {Signer{&key, "paged", 0}};
  raw.head_without_table_entry = true;
  const std::vector<std::uint8_t> bytes = test::assemble(raw);
  const format::IndexHead head = head_of(bytes);
  EXPECT_TRUE(head.tree);
  EXPECT_FALSE(head.kernel_table.has_value());
  std::unique_ptr<ArchiveReader> a = open(bytes);
  EXPECT_EQ(a->index_pages_read(), head.height);
  EXPECT_EQ(a->kernel_table().size(), 1u);
  EXPECT_EQ(a->kernel("add").entry, "add_f32");
  const long position = a->find(data_path(GetParam() - 1));
  ASSERT_GE(position, 0);
  EXPECT_EQ(a->read_member(static_cast<std::size_t>(position)), test::bytes_of(data_content(GetParam() - 1)));
  a->verify_all(2, true, nullptr);
}

INSTANTIATE_TEST_SUITE_P(BothHeights, PagedIndex, ::testing::Values(kOneLevelMembers, kTreeMembers));

// The reader holds references in place (ref_table.hpp): each one read back from the bytes must be
// the reference decoded from them, and the three lookups must choose as the decoded list's do,
// for the head of either form and for a reference page.
void expect_same_as_decoded(const format::RefTable& table, const std::vector<format::PageRef>& refs,
                            const format::PageBounds& outer) {
  ASSERT_EQ(table.size(), refs.size());
  for (std::size_t i = 0; i < refs.size(); ++i) {
    SCOPED_TRACE("reference " + std::to_string(i));
    const format::PageRef r = table.at(i);
    EXPECT_EQ(r.entry_count, refs[i].entry_count);
    EXPECT_EQ(r.size, refs[i].size);
    EXPECT_EQ(r.span, refs[i].span);
    EXPECT_EQ(r.first_offset, refs[i].first_offset);
    EXPECT_EQ(r.sha256, refs[i].sha256);
    EXPECT_EQ(r.first_path, refs[i].first_path);
    EXPECT_EQ(r.index_position, refs[i].index_position);
    EXPECT_EQ(r.first_entry, refs[i].first_entry);
    EXPECT_EQ(r.encoded_at, refs[i].encoded_at);
    const format::PageBounds mine = table.child_bounds(i, outer), theirs = format::child_bounds(refs, i, outer);
    EXPECT_EQ(mine.end_offset, theirs.end_offset);
    EXPECT_EQ(mine.has_path_bound, theirs.has_path_bound);
    EXPECT_EQ(mine.path_bound, theirs.path_bound);
    // Each first path, a path just below it and one just above it.
    const std::string path(refs[i].first_path);
    for (const std::string& probe : {path, path.substr(0, path.size() - 1), path + "~"}) {
      EXPECT_EQ(table.for_path(probe), format::ref_for_path(refs, probe)) << probe;
    }
    for (std::size_t position : {std::size_t{refs[i].first_entry}, std::size_t{refs[i].first_entry} + refs[i].entry_count - 1}) {
      EXPECT_EQ(table.for_position(position), format::ref_for_position(refs, position)) << position;
    }
  }
  EXPECT_EQ(table.for_path(""), -1);
  EXPECT_EQ(table.for_path("zzz"), format::ref_for_path(refs, "zzz"));
}

TEST_P(PagedIndex, ReferencesReadInPlaceAreTheDecodedOnes) {
  const std::vector<std::uint8_t> bytes = build(GetParam());
  const format::Header h = format::decode_header(ByteView(bytes.data(), format::kHeaderSize));
  const format::IndexHead head = head_of(bytes);
  const format::PageBounds outer{h.index_offset, false, {}};
  const ByteView head_bytes(bytes.data() + h.index_offset, h.index_head_size);
  expect_same_as_decoded(format::RefTable(head.refs, head_bytes, head.tree), head.refs, outer);
  if (head.height == 1) return;  // no reference page
  const format::PageRef& first = head.refs[1];  // a full reference page (the first may be kiln.toml's)
  ByteView page(bytes.data() + h.index_offset + first.index_position, first.size);
  const format::PageBounds bounds = format::child_bounds(head.refs, 1, outer);
  const std::vector<format::PageRef> refs = format::decode_reference_page(page, first, head.height - 1, bounds, h.index_size);
  ASSERT_GT(refs.size(), 2u);
  expect_same_as_decoded(format::RefTable(refs, page, true), refs, bounds);
}

// Where, in the index, the page that holds `path` is, at each level from the head down.
std::vector<format::PageRef> path_to(const std::vector<std::uint8_t>& bytes, const std::string& path) {
  format::Header h = format::decode_header(ByteView(bytes.data(), format::kHeaderSize));
  format::IndexHead head = head_of(bytes);
  std::vector<format::PageRef> out;
  std::vector<format::PageRef> refs = head.refs;
  format::PageBounds bounds{h.index_offset, false, {}};
  for (unsigned level = head.height - 1;; --level) {
    long i = format::ref_for_path(refs, path);
    const format::PageRef ref = refs.at(static_cast<std::size_t>(i));
    out.push_back(ref);
    if (level == 0) return out;
    ByteView page(bytes.data() + h.index_offset + ref.index_position, ref.size);
    bounds = format::child_bounds(refs, static_cast<std::size_t>(i), bounds);
    refs = format::decode_reference_page(page, ref, level, bounds, h.index_size);
  }
}

void expect_same_entry(const format::Entry& got, const format::Entry& want) {
  EXPECT_EQ(got.path, want.path);
  EXPECT_EQ(got.role, want.role);
  EXPECT_EQ(got.backend, want.backend);
  EXPECT_EQ(got.kind, want.kind);
  EXPECT_EQ(got.compression, want.compression);
  EXPECT_EQ(got.arch, want.arch);
  EXPECT_EQ(got.offset, want.offset);
  EXPECT_EQ(got.stored_size, want.stored_size);
  EXPECT_EQ(got.content_size, want.content_size);
  EXPECT_EQ(got.stored_sha256, want.stored_sha256);
  EXPECT_EQ(got.content_sha256, want.content_sha256);
}

// An entry page read in place (what ArchiveReader keeps): the page is checked as decoding it
// checks it, and every entry made again from where its encoding starts, and every path read where
// it lies, is the decoded one; a reader's lookups by path and by position answer as the decoded
// index does.
TEST_P(PagedIndex, EntriesReadInPlaceAreTheDecodedOnes) {
  const std::vector<std::uint8_t> bytes = build(GetParam());
  const std::vector<format::PageRef> path = path_to(bytes, data_path(3));
  const format::Header h = format::decode_header(ByteView(bytes.data(), format::kHeaderSize));
  const format::PageRef& ref = path.back();
  const ByteView page(bytes.data() + h.index_offset + ref.index_position, ref.size);
  // The bounds the page was written within: the next page's first path and offset.
  const format::Index whole = format::decode_index(ByteView(bytes.data() + h.index_offset, h.index_size),
                                                   h.index_head_size, h.index_offset);
  const std::size_t end = ref.first_entry + ref.entry_count;
  const format::PageBounds bounds = end < whole.entries.size()
                                        ? format::PageBounds{whole.entries[end].offset, true, whole.entries[end].path}
                                        : format::PageBounds{h.index_offset, false, {}};
  const std::vector<format::Entry> decoded = format::decode_entry_page(page, ref, bounds);
  const std::vector<std::uint32_t> starts = format::check_entry_page(page, ref, bounds);
  ASSERT_EQ(starts.size(), decoded.size());
  ASSERT_GT(starts.size(), 2u);
  for (std::size_t k = 0; k < starts.size(); ++k) {
    SCOPED_TRACE(decoded[k].path);
    const format::Entry again = format::reread_entry(page, starts[k]);
    expect_same_entry(again, decoded[k]);
    EXPECT_EQ(format::reread_entry_path(page, starts[k]), decoded[k].path);
    expect_same_entry(decoded[k], whole.entries[ref.first_entry + k]);
  }
  // A page that breaks a rule is refused by the in-place check with decoding's own words.
  std::vector<std::uint8_t> changed(page.data, page.data + page.size);
  changed[starts[1] + 2 + decoded[1].path.size() + 0] = 9;  // entry 1's role byte: no such role
  try {
    format::check_entry_page(ByteView(changed), ref, bounds);
    ADD_FAILURE() << "a page with an unknown role was accepted";
  } catch (const Failure& e) {
    EXPECT_EQ(e.code(), Errc::malformed);
    EXPECT_NE(std::string(e.what()).find("unknown role 9"), std::string::npos) << e.what();
  }
  // Through the reader: every path found at its position, every entry the decoded one.
  std::unique_ptr<ArchiveReader> a = open(bytes);
  for (std::size_t i = 0; i < whole.entries.size(); ++i) {
    EXPECT_EQ(a->find(whole.entries[i].path), static_cast<long>(i));
    expect_same_entry(a->entry(i), whole.entries[i]);
  }
  // The reader remembers the last entry page it looked a position up in: lookups that jump
  // between pages, backwards and by strides, still land on the right entry.
  std::unique_ptr<ArchiveReader> b = open(bytes);
  for (std::size_t i = whole.entries.size(); i-- > 0;) expect_same_entry(b->entry(i), whole.entries[i]);
  for (std::size_t stride : {7u, 17u, 33u}) {
    for (std::size_t i = 0; i < whole.entries.size(); i += stride) {
      expect_same_entry(b->entry(whole.entries.size() - 1 - i), whole.entries[whole.entries.size() - 1 - i]);
      expect_same_entry(b->entry(i), whole.entries[i]);
    }
  }
  EXPECT_EQ(a->find("data/0003.bim"), -1);
  EXPECT_EQ(a->find("zzz"), -1);
}

TEST_F(PagedIndex, AChangedPageIsRefusedWhenFirstUsedAndByFullVerification) {
  for (int members : {kOneLevelMembers, kTreeMembers}) {
    const std::vector<std::uint8_t> bytes = build(members);
    const std::vector<format::PageRef> path = path_to(bytes, data_path(3));
    const format::Header h = format::decode_header(ByteView(bytes.data(), format::kHeaderSize));
    // A byte of each page on the way to data/0003.bin (the entry page, and in the tree the
    // reference page above it); the open path needs neither.
    for (const format::PageRef& ref : path) {
      SCOPED_TRACE(std::to_string(members) + " members, page at " + std::to_string(ref.index_position));
      std::vector<std::uint8_t> changed = bytes;
      changed[h.index_offset + ref.index_position + 20] ^= 1;
      std::unique_ptr<ArchiveReader> a = open(changed);
      try {
        a->read_member(data_path(3));
        ADD_FAILURE() << "a member under the changed page was read";
      } catch (const Failure& e) {
        EXPECT_EQ(e.code(), Errc::integrity);
        EXPECT_NE(std::string(e.what()).find("index page at " + std::to_string(ref.index_position)), std::string::npos)
            << e.what();
      }
      EXPECT_GE(a->find(data_path(members - 1)), 0);  // pages elsewhere still answer
      try {
        open(changed)->verify_all(1, false, nullptr);
        ADD_FAILURE() << "full verification accepted a changed page";
      } catch (const Failure& e) {
        EXPECT_EQ(e.code(), Errc::integrity) << e.what();
      }
    }
  }
}

// Heads and reference pages that disagree with what they name, checked at decode (a signer
// could ship these). The index alone is built, so each case changes bytes and, where a page
// changed, the digest that names it (decode_index checks pages against references, and no
// signature is involved).
class PagedHead : public ::testing::Test {
 protected:
  format::Index index;
  format::EncodedIndex encoded;
  std::uint64_t index_offset = 0;

  format::EncodedIndex encode(int members) {
    index = format::Index{};
    index.package = "p";
    index.kernel_revision = "r";
    index.sequence = 1;
    for (int i = 0; i < members; ++i) {
      format::Entry e;
      e.path = i == 0 ? "kiln.toml" : data_path(i);
      e.role = i == 0 ? format::Role::manifest : format::Role::testdata;
      e.stored_size = e.content_size = 10;
      index.entries.push_back(e);
    }
    std::sort(index.entries.begin(), index.entries.end(),
              [](const format::Entry& a, const format::Entry& b) { return a.path < b.path; });
    std::uint64_t offset = format::kHeaderSize;
    for (format::Entry& e : index.entries) {
      e.offset = offset;
      offset = format::align_up(offset + e.stored_size);
    }
    index_offset = offset;
    return format::encode_index(index);
  }
  std::string refusal(const std::vector<std::uint8_t>& bytes, std::uint64_t head_size) {
    try {
      format::decode_index(ByteView(bytes), head_size, index_offset);
    } catch (const Failure& e) {
      return e.what();
    }
    return "";
  }
  format::IndexHead head() const {
    return format::decode_index_head(ByteView(encoded.bytes.data(), encoded.head_size), encoded.bytes.size(),
                                     index_offset);
  }
  // Offset in the head of reference `k` (after magic, counts, identity, the tree's height).
  std::size_t head_ref(std::size_t k) const {
    const format::IndexHead h = head();
    std::size_t at = 8 + 4 + 8 + 2 + index.package.size() + 2 + index.kernel_revision.size() + (h.tree ? 1 : 0) + 4;
    for (std::size_t i = 0; i < k; ++i) at += 4 + 4 + (h.tree ? 4 : 0) + 8 + 32 + 2 + h.refs[i].first_path.size();
    return at;
  }
  static bool says(const std::string& refusal, const std::string& rule) {
    return refusal.find(rule) != std::string::npos;
  }
};

TEST_F(PagedHead, OneLevelHeadsThatDisagreeWithTheirPagesAreRefused) {
  encoded = encode(kOneLevelMembers);
  ASSERT_FALSE(head().tree);
  ASSERT_EQ(refusal(encoded.bytes, encoded.head_size), "");
  EXPECT_EQ(format::decode_index(ByteView(encoded.bytes), encoded.head_size, index_offset).entries.size(),
            static_cast<std::size_t>(kOneLevelMembers));

  // Each case breaks one rule of FORMAT.md §3 and must be refused by that rule.
  std::vector<std::uint8_t> counts = encoded.bytes;  // page 0 claims one entry more
  counts[head_ref(0)] += 1;
  EXPECT_EQ(refusal(counts, encoded.head_size), "index head: its pages hold " + std::to_string(kOneLevelMembers + 1) +
                                                    " entries, not the " + std::to_string(kOneLevelMembers) + " it declares");

  std::vector<std::uint8_t> digest = encoded.bytes;  // page 1's digest changed
  digest[head_ref(1) + 16] ^= 1;
  EXPECT_TRUE(says(refusal(digest, encoded.head_size), "its bytes do not match the SHA-256 its reference gives"));

  const format::IndexHead h = head();
  // Page 0 holds data/0001 .. data/0008 (data/0000.bin is kiln.toml here), page 1 starts at data/0009.
  const int per_page = static_cast<int>(format::kEntriesPerPage);
  ASSERT_EQ(h.refs[1].first_path, data_path(per_page + 1));
  // The reference's first path is "data/NNNN.bin": another number of the same length in its place.
  const std::size_t digits = head_ref(1) + 4 + 4 + 8 + 32 + 2 + std::string("data/").size();
  auto with_first_path = [&](int i) {
    std::vector<std::uint8_t> bytes = encoded.bytes;
    std::memcpy(bytes.data() + digits, data_path(i).data() + 5, 4);
    return bytes;
  };
  // Page 1's first path after its first entry's, then the last entry of page 0.
  EXPECT_TRUE(says(refusal(with_first_path(per_page + 2), encoded.head_size),
                   "('" + data_path(per_page + 1) + "'): is not the first path its page's reference gives"));
  EXPECT_TRUE(says(refusal(with_first_path(per_page), encoded.head_size),
                   "('" + data_path(per_page) + "'): must sort before the next page's first path"));

  std::vector<std::uint8_t> offset = encoded.bytes;  // page 1 starts its members 64 bytes early
  offset[head_ref(1) + 8] ^= 64;
  EXPECT_TRUE(says(refusal(offset, encoded.head_size), "where the next page's members (or the index) begin"));

  // A head size that cuts a reference, or that moves the pages past the end of the index.
  EXPECT_TRUE(says(refusal(encoded.bytes, encoded.head_size - 1), "more bytes but only"));
  EXPECT_TRUE(says(refusal(encoded.bytes, encoded.head_size + 1), "cannot hold"));
  EXPECT_TRUE(says(refusal(encoded.bytes, 0), "index head size 0 is outside"));
  // A byte after the last reference (the pages moved along with it, so that only the head is
  // wrong), and a byte after the last page that no page covers.
  std::vector<std::uint8_t> trailing = encoded.bytes;
  trailing.insert(trailing.begin() + static_cast<std::ptrdiff_t>(encoded.head_size), 0);
  EXPECT_TRUE(says(refusal(trailing, encoded.head_size + 1), "1 trailing bytes after the last reference"));
  std::vector<std::uint8_t> uncovered = encoded.bytes;
  uncovered.push_back(0);
  EXPECT_EQ(refusal(uncovered, encoded.head_size),
            "index head: its pages cover " + std::to_string(encoded.bytes.size() - encoded.head_size) + " bytes but " +
                std::to_string(encoded.bytes.size() + 1 - encoded.head_size) + " follow the head");
}

TEST_F(PagedHead, TreeHeadsAndReferencePagesThatDisagreeAreRefused) {
  encoded = encode(kTreeMembers);
  const format::IndexHead h = head();
  ASSERT_TRUE(h.tree);
  ASSERT_EQ(h.height, 2u);
  ASSERT_EQ(refusal(encoded.bytes, encoded.head_size), "");
  EXPECT_EQ(format::decode_index(ByteView(encoded.bytes), encoded.head_size, index_offset).entries.size(),
            static_cast<std::size_t>(kTreeMembers));
  const std::size_t height_at = head_ref(0) - 4 - 1;

  std::vector<std::uint8_t> height = encoded.bytes;
  for (std::uint8_t bad : {0, 9}) {
    height[height_at] = bad;
    EXPECT_EQ(refusal(height, encoded.head_size),
              "index head at offset " + std::to_string(height_at + 1) + ": height " + std::to_string(bad) + " is outside 1..8");
  }
  height[height_at] = 1;  // the head's references would name entry pages of 16 x 8 entries
  const std::string under_first = std::to_string(format::kReferencesPerPage * format::kEntriesPerPage);
  EXPECT_TRUE(says(refusal(height, encoded.head_size), "cannot hold " + under_first + " entries"))
      << refusal(height, encoded.head_size);
  height[height_at] = 3;  // the reference pages' references would name reference pages
  EXPECT_TRUE(says(refusal(height, encoded.head_size), "must exceed the size of a reference page"))
      << refusal(height, encoded.head_size);

  std::vector<std::uint8_t> span = encoded.bytes;  // reference 0 claims 256 bytes fewer under it
  span[head_ref(0) + 8 + 1] -= 1;
  EXPECT_TRUE(says(refusal(span, encoded.head_size), "index head: its pages cover")) << refusal(span, encoded.head_size);

  // Inside reference page 0: change one of its references, then give the page its new digest,
  // so that only the rule under test is broken.
  const format::PageRef& page0 = h.refs[0];
  auto rehashed = [&](std::size_t at_in_page, std::uint8_t xor_with) {
    std::vector<std::uint8_t> bytes = encoded.bytes;
    bytes[page0.index_position + at_in_page] ^= xor_with;
    Sha256 digest = sha256(bytes.data() + page0.index_position, page0.size);
    std::memcpy(bytes.data() + head_ref(0) + 4 + 4 + 4 + 8, digest.data(), 32);
    return bytes;
  };
  const std::size_t child0 = 8 + 4;  // after the reference page's magic and count
  EXPECT_TRUE(says(refusal(rehashed(child0, 1), encoded.head_size), "entries, not the"));  // entry count
  EXPECT_TRUE(says(refusal(rehashed(child0 + 8, 64), encoded.head_size), "must equal the size of an entry page"));
  EXPECT_TRUE(says(refusal(rehashed(child0 + 4 + 4 + 4 + 8 + 32 + 2, 1), encoded.head_size),
                   "first path and first offset must be those of the reference that names this page"));
  EXPECT_TRUE(says(refusal(rehashed(0, 1), encoded.head_size), "bad magic: not a kiln index reference page"));
}

}  // namespace
}  // namespace kiln
