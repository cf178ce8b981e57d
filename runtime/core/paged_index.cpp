// The paged index (FORMAT.md §3): encoding an index into entry and reference pages, and reading
// it back page by page, each page checked against the digest its reference gives.
#include <algorithm>
#include <cstring>
#include <string_view>
#include <unordered_map>

#include "core/error.hpp"
#include "core/format.hpp"
#include "core/format_detail.hpp"

namespace kiln::format {

using detail::expect_magic;
using detail::quoted;

// ---- index ----------------------------------------------------------------------------

void encode_entry(ByteWriter& w, const Entry& e) {
  w.string16(e.path);
  w.u8(static_cast<std::uint8_t>(e.role));
  w.u8(static_cast<std::uint8_t>(e.backend));
  w.u8(static_cast<std::uint8_t>(e.kind));
  w.u8(static_cast<std::uint8_t>(e.compression));
  w.string16(e.arch);
  w.u64(e.offset);
  w.u64(e.stored_size);
  w.u64(e.content_size);
  w.bytes(e.stored_sha256.data(), 32);
  w.bytes(e.content_sha256.data(), 32);
}

namespace {

// An entry takes at least 2+4+2+24+64 bytes, so a count the remaining bytes cannot hold is
// refused before anything is reserved for it.
constexpr std::size_t kMinEntrySize = 96;

// An entry's name in errors: its label and, unless kUnnumbered (an entry on its own, such as
// the head's copy of the kernel table's), its position.
constexpr std::uint64_t kUnnumbered = UINT64_MAX;
std::string entry_name(const char* label, std::uint64_t position) {
  return position == kUnnumbered ? std::string(label) : label + (" " + std::to_string(position));
}

// One entry's fields in order (FORMAT.md §3), each checked as it is read when kChecked (the path
// first, before the bytes after it are read); `label` and `position` ("index entry" and its place
// in the index) name it in errors, built only when one needs it: every entry of every page read
// passes here. Unchecked, it reads again an entry of a page already checked (reread_entry_view).
template <bool kChecked>
EntryView read_entry(ByteReader& r, std::uint64_t position, const char* label = "index entry") {
  EntryView e;
  e.path = r.string16_view();
  if constexpr (kChecked) {
    if (auto p = member_path_problem(e.path); !p.empty()) r.fail_here(entry_name(label, position) + ": " + p);
  }
  auto where = [&] { return entry_name(label, position) + " ('" + std::string(e.path) + "')"; };
  std::uint8_t role = r.u8(), backend = r.u8(), kind = r.u8(), compression = r.u8();
  if constexpr (kChecked) {
    if (role < 1 || role > 6) r.fail_here(where() + ": unknown role " + std::to_string(role));
    if (backend > 2) r.fail_here(where() + ": unknown backend " + std::to_string(backend));
    if (kind > 5) r.fail_here(where() + ": unknown code kind " + std::to_string(kind));
    if (compression > 1) r.fail_here(where() + ": unknown compression " + std::to_string(compression));
  }
  e.role = static_cast<Role>(role);
  e.backend = static_cast<Vendor>(backend);
  e.kind = static_cast<CodeKind>(kind);
  e.compression = static_cast<Compression>(compression);
  const bool is_code = e.role == Role::code;
  if constexpr (kChecked) {
    if (is_code != (e.kind != CodeKind::none) || is_code != (e.backend != Vendor::none)) {
      r.fail_here(where() + ": backend and code kind are set exactly for code members");
    }
    if (e.role == Role::manifest && e.path != kManifestPath) {
      r.fail_here(where() + ": has role manifest; only 'kiln.toml' may");
    }
  }
  e.arch = r.string16_view();
  if constexpr (kChecked) {
    if (auto p = arch_tags_problem(e.arch); !p.empty()) r.fail_here(where() + ": " + p);
    if (is_code == e.arch.empty()) r.fail_here(where() + ": arch tags are set exactly for code members");
  }
  e.offset = r.u64();
  e.stored_size = r.u64();
  e.content_size = r.u64();
  if constexpr (kChecked) {
    if (e.stored_size > (1ull << 62)) r.fail_here(where() + ": stored size is absurd");
  }
  std::memcpy(e.stored_sha256.data(), r.take(32).data, 32);
  std::memcpy(e.content_sha256.data(), r.take(32).data, 32);
  if constexpr (kChecked) {
    if (e.compression == Compression::none && (e.stored_size != e.content_size || e.stored_sha256 != e.content_sha256)) {
      r.fail_here(where() + ": an uncompressed member's stored and content size and digest must be equal");
    }
  }
  return e;
}

Entry to_entry(const EntryView& f) {
  Entry e;
  e.path = std::string(f.path);
  e.role = f.role;
  e.backend = f.backend;
  e.kind = f.kind;
  e.compression = f.compression;
  e.arch = std::string(f.arch);
  e.offset = f.offset;
  e.stored_size = f.stored_size;
  e.content_size = f.content_size;
  e.stored_sha256 = f.stored_sha256;
  e.content_sha256 = f.content_sha256;
  return e;
}

}  // namespace

long ref_for_path(const std::vector<PageRef>& refs, const std::string& path) {
  auto it = std::upper_bound(refs.begin(), refs.end(), path,
                             [](const std::string& key, const PageRef& ref) { return std::string_view(key) < ref.first_path; });
  return static_cast<long>(it - refs.begin()) - 1;
}

std::size_t ref_for_position(const std::vector<PageRef>& refs, std::size_t position) {
  auto it = std::upper_bound(refs.begin(), refs.end(), position,
                             [](std::size_t pos, const PageRef& ref) { return pos < ref.first_entry; });
  return static_cast<std::size_t>(it - refs.begin()) - 1;
}

PageBounds child_bounds(const std::vector<PageRef>& refs, std::size_t i, const PageBounds& outer) {
  if (i + 1 < refs.size()) return PageBounds{refs[i + 1].first_offset, true, refs[i + 1].first_path};
  return outer;
}

namespace {

// Where the writer ends the entry page that starts at `first`: after kEntriesPerPage entries,
// and also around the two members every open of the archive reads, so that they sit alone in a
// small page: a new page starts at kiln.toml and right after kiln/kernels.bin (kiln.toml sorts
// just before it). Opening an archive of thousands of kernels then hashes and decodes a page
// of two entries, not a full one, to find its kernel table.
std::size_t page_end(const std::vector<Entry>& entries, std::size_t first) {
  constexpr const char* kKernelTablePagePath = "kiln/kernels.bin";  // kernel_table.hpp's kKernelTablePath
  std::size_t end = first + 1;
  while (end < entries.size() && end - first < kEntriesPerPage && entries[end].path != kManifestPath &&
         entries[end - 1].path != kKernelTablePagePath) {
    ++end;
  }
  return end;
}

// A page and everything under it, in the order they are written (depth-first pre-order).
struct Subtree {
  PageRef ref;
  std::vector<std::uint8_t> bytes;
};

// Where the writer ends the reference page over `level` that starts at `first`: after
// kReferencesPerPage references, and also around the page whose first path is kiln.toml (the
// kernel table's page, read at every open), which gets a reference page of its own at every
// level: an open then hashes and decodes one reference per level on its way, not 32.
std::size_t reference_page_end(const std::vector<Subtree>& level, std::size_t first) {
  std::size_t end = first + 1;
  while (end < level.size() && end - first < kReferencesPerPage && level[end].ref.first_path != kManifestPath &&
         level[end - 1].ref.first_path != kManifestPath) {
    ++end;
  }
  return end;
}

void encode_ref(ByteWriter& w, const PageRef& ref, bool tree) {
  w.u32(ref.entry_count);
  w.u32(ref.size);
  if (tree) w.u32(ref.span);
  w.u64(ref.first_offset);
  w.bytes(ref.sha256.data(), 32);
  w.string16(ref.first_path);
}

// One reference page over `children` (consecutive subtrees at one level).
Subtree reference_subtree(std::vector<Subtree>::iterator first, std::vector<Subtree>::iterator last) {
  ByteWriter w;
  w.bytes(kReferencePageMagic.data(), kReferencePageMagic.size());
  w.u32(static_cast<std::uint32_t>(last - first));
  Subtree out;
  out.ref.first_offset = first->ref.first_offset;
  out.ref.first_path = first->ref.first_path;
  std::uint64_t below = 0;
  for (auto it = first; it != last; ++it) {
    encode_ref(w, it->ref, true);
    out.ref.entry_count += it->ref.entry_count;
    below += it->bytes.size();
  }
  out.ref.size = static_cast<std::uint32_t>(w.buffer().size());
  out.ref.span = static_cast<std::uint32_t>(out.ref.size + below);
  out.ref.sha256 = sha256(w.buffer().data(), w.buffer().size());
  out.bytes = std::move(w.buffer());
  out.bytes.reserve(out.ref.span);
  for (auto it = first; it != last; ++it) out.bytes.insert(out.bytes.end(), it->bytes.begin(), it->bytes.end());
  return out;
}

}  // namespace

EncodedIndex encode_index(const Index& index) {
  std::vector<Subtree> level;  // entry pages first, then each level of reference pages over them
  for (std::size_t first = 0, end = 0; first < index.entries.size(); first = end) {
    end = page_end(index.entries, first);
    ByteWriter w;
    w.bytes(kIndexPageMagic.data(), kIndexPageMagic.size());
    for (std::size_t i = first; i < end; ++i) encode_entry(w, index.entries[i]);
    Subtree page;
    page.ref.entry_count = static_cast<std::uint32_t>(end - first);
    page.ref.size = page.ref.span = static_cast<std::uint32_t>(w.buffer().size());
    page.ref.first_offset = index.entries[first].offset;
    page.ref.sha256 = sha256(w.buffer().data(), w.buffer().size());
    page.ref.first_path = index.entries[first].path;
    page.bytes = std::move(w.buffer());
    level.push_back(std::move(page));
  }
  // A head of at most kHeadReferences references, over reference pages level by level where the
  // entry pages do not fit. An index with a kernel table (every archive's) gets a KILNIDX4 head,
  // which carries its entry; one without (synthetic indexes) keeps the earlier forms, one-level
  // where the entry pages fit.
  unsigned height = 1;
  const long table = index.find(kKernelTablePath);
  const Entry* table_entry = table >= 0 && index.entries[static_cast<std::size_t>(table)].role == Role::meta
                                 ? &index.entries[static_cast<std::size_t>(table)]
                                 : nullptr;
  const bool tree = table_entry != nullptr || level.size() > kHeadReferences;
  while (level.size() > kHeadReferences) {
    std::vector<Subtree> up;
    for (std::size_t first = 0, last = 0; first < level.size(); first = last) {
      last = reference_page_end(level, first);
      up.push_back(reference_subtree(level.begin() + static_cast<long>(first), level.begin() + static_cast<long>(last)));
    }
    level = std::move(up);
    ++height;
  }
  ByteWriter head;
  const auto& magic = table_entry != nullptr ? kIndexTableMagic : tree ? kIndexTreeMagic : kIndexMagic;
  head.bytes(magic.data(), magic.size());
  head.u32(static_cast<std::uint32_t>(index.entries.size()));
  head.u64(index.sequence);
  head.string16(index.package);
  head.string16(index.kernel_revision);
  if (tree) head.u8(static_cast<std::uint8_t>(height));
  if (table_entry != nullptr) encode_entry(head, *table_entry);
  head.u32(static_cast<std::uint32_t>(level.size()));
  for (const Subtree& t : level) encode_ref(head, t.ref, tree);
  EncodedIndex out;
  out.bytes = std::move(head.buffer());
  out.head_size = out.bytes.size();
  for (const Subtree& t : level) out.bytes.insert(out.bytes.end(), t.bytes.begin(), t.bytes.end());
  return out;
}

namespace {

// A reference takes at least 4+4+8+32+2+1 bytes (one-level) or 4 more (tree, the span); a
// reference page at least its magic, its count and one tree reference.
constexpr std::uint64_t kMinOneLevelRefSize = 51;
constexpr std::uint64_t kMinTreeRefSize = 55;
constexpr std::uint64_t kMinReferencePageSize = 8 + 4 + kMinTreeRefSize;

// Where a list of references sits: in the head or in a reference page (`parent`), naming pages
// at `level`, the first of which starts at `position` in the index and holds entry `first_entry`.
struct RefList {
  bool tree = false;
  unsigned level = 0;
  std::uint64_t position = 0;
  std::uint64_t first_entry = 0;
  std::uint64_t index_size = 0;
  const PageRef* parent = nullptr;
  PageBounds bounds;
};

// One reference's encoded fields (FORMAT.md §3), in order, unchecked.
PageRef read_ref_fields(ByteReader& r, bool tree) {
  PageRef ref;
  ref.encoded_at = static_cast<std::uint32_t>(r.offset());
  ref.entry_count = r.u32();
  ref.size = r.u32();
  ref.span = tree ? r.u32() : ref.size;
  ref.first_offset = r.u64();
  ByteView digest = r.take(32);
  std::memcpy(ref.sha256.data(), digest.data, 32);
  ref.first_path = r.string16_view();
  return ref;
}

// `count` references, each checked by FORMAT.md §3's reference rules; returns them with their
// derived positions. The caller checks the sums against what names the list.
std::vector<PageRef> decode_refs(ByteReader& r, std::uint32_t count, const RefList& list) {
  std::vector<PageRef> refs;
  refs.reserve(count);
  std::uint64_t position = list.position, entries = list.first_entry;
  for (std::uint32_t i = 0; i < count; ++i) {
    auto where = [&] { return "reference " + std::to_string(i) + " (to a level-" + std::to_string(list.level) + " page)"; };
    // The first path is not validated here: it only steers the search, and a page is used only
    // after the first entry under it (validated with its page) is found equal to it.
    PageRef ref = read_ref_fields(r, list.tree);
    if (ref.entry_count == 0 || (list.level == 0 && ref.entry_count > kMaxEntriesPerPage)) {
      r.fail_here(where() + ": entry count " + std::to_string(ref.entry_count) + " is outside 1.." +
                  (list.level == 0 ? std::to_string(kMaxEntriesPerPage) : std::string("the index's")));
    }
    const std::uint64_t min_size =
        list.level == 0 ? kIndexPageMagic.size() + kMinEntrySize * std::uint64_t{ref.entry_count} : kMinReferencePageSize;
    if (ref.size < min_size || ref.span > list.index_size - std::min(position, list.index_size)) {
      r.fail_here(where() + ": " + std::to_string(ref.size) + " bytes (" + std::to_string(ref.span) +
                  " with the pages under it) cannot hold " + std::to_string(ref.entry_count) + " entries within the index");
    }
    if (list.level == 0 ? ref.span != ref.size : ref.span <= ref.size) {
      r.fail_here(where() + ": span " + std::to_string(ref.span) + " must " +
                  (list.level == 0 ? "equal the size of an entry page" : "exceed the size of a reference page") + " (" +
                  std::to_string(ref.size) + ")");
    }
    if (i == 0) {
      if (list.parent == nullptr ? ref.first_offset != kHeaderSize
                                 : ref.first_offset != list.parent->first_offset || ref.first_path != list.parent->first_path) {
        r.fail_here(where() + (list.parent == nullptr
                                   ? ": the first member must start at offset 64"
                                   : ": first path and first offset must be those of the reference that names this page"));
      }
    } else if (!(refs.back().first_path < ref.first_path)) {
      r.fail_here(where() + ": first paths must be unique and sorted bytewise");
    } else if (!(refs.back().first_offset <= ref.first_offset)) {
      // Not strictly: a page of empty members (stored_size 0) starts where the previous one did.
      r.fail_here(where() + ": member offsets must not decrease from page to page");
    }
    if (ref.first_offset > list.bounds.end_offset || ref.first_offset % kMemberAlignment != 0) {
      r.fail_here(where() + ": first member offset " + std::to_string(ref.first_offset) + " is not 64-byte aligned at or before " +
                  std::to_string(list.bounds.end_offset));
    }
    ref.index_position = position;
    ref.first_entry = static_cast<std::uint32_t>(entries);
    position += ref.span;
    entries += ref.entry_count;
    if (entries > kMaxEntries) r.fail_here(where() + ": more than " + std::to_string(kMaxEntries) + " entries");
    refs.push_back(std::move(ref));
  }
  return refs;
}

std::uint32_t decode_ref_count(ByteReader& r, bool tree, std::uint32_t max) {
  std::uint32_t count = r.u32();
  const std::uint64_t each = tree ? kMinTreeRefSize : kMinOneLevelRefSize;
  if (count == 0 || count > max || count * each > r.remaining()) {
    r.fail_here("reference count " + std::to_string(count) + " is outside 1.." + std::to_string(max) +
                " or cannot fit in the remaining bytes");
  }
  return count;
}

std::uint64_t sum_spans(const std::vector<PageRef>& refs) {
  std::uint64_t total = 0;
  for (const PageRef& ref : refs) total += ref.span;
  return total;
}

std::uint64_t sum_entries(const std::vector<PageRef>& refs) {
  std::uint64_t total = 0;
  for (const PageRef& ref : refs) total += ref.entry_count;
  return total;
}

}  // namespace

PageRef reread_ref(ByteView bytes, std::uint32_t at, bool tree) {
  ByteReader r(bytes.sub(at, bytes.size - std::min<std::uint64_t>(at, bytes.size)), "index reference");
  PageRef ref = read_ref_fields(r, tree);
  ref.encoded_at = at;
  return ref;
}

std::uint32_t reread_span(ByteView bytes, std::uint32_t at, bool tree) {
  // entry_count u32, size u32, then (tree form) span u32: a reference was decoded from these
  // bytes, so its first 12 lie within them; a lookup sums the spans before the one it follows.
  const ByteView fields = bytes.sub(at, 12);
  return load_le32(fields.data + (tree ? 8 : 4));
}

namespace {

// A KILNIDX4 head's copy of kiln/kernels.bin's entry: every rule of one entry, and those that
// make it the kernel table's (its path and role) and place its bytes among the members. That it
// equals the index's entry is for a full decode (decode_index), which has every page.
Entry decode_table_entry(ByteReader& r, std::uint64_t index_offset) {
  Entry e = to_entry(read_entry<true>(r, kUnnumbered, "kernel table entry"));
  if (e.path != kKernelTablePath || e.role != Role::meta) {
    r.fail_here(std::string("kernel table entry: must be '") + kKernelTablePath + "' with role meta, not '" + e.path +
                "' with role " + std::to_string(static_cast<int>(e.role)));
  }
  if (e.offset < kHeaderSize || e.offset % kMemberAlignment != 0 || e.offset > index_offset ||
      e.stored_size > index_offset - e.offset) {
    r.fail_here("kernel table entry: places the member at bytes " + std::to_string(e.offset) + ".." +
                std::to_string(e.offset + e.stored_size) + ", not at a 64-byte boundary among the members (64.." +
                std::to_string(index_offset) + ")");
  }
  return e;
}

}  // namespace

IndexHead decode_index_head(ByteView head_bytes, std::uint64_t index_size, std::uint64_t index_offset) {
  const std::uint64_t head_size = head_bytes.size;
  if (head_size == 0 || head_size > index_size) {
    fail(Errc::malformed, "header: index head size " + std::to_string(head_size) + " is outside 1.." +
                              std::to_string(index_size) + " (the index size)");
  }
  ByteReader r(head_bytes, "index head");
  IndexHead head;
  bool with_table = false;
  {
    ByteView magic = r.take(kIndexMagic.size());
    with_table = std::memcmp(magic.data, kIndexTableMagic.data(), kIndexTableMagic.size()) == 0;
    head.tree = with_table || std::memcmp(magic.data, kIndexTreeMagic.data(), kIndexTreeMagic.size()) == 0;
    if (!head.tree && std::memcmp(magic.data, kIndexMagic.data(), kIndexMagic.size()) != 0) {
      fail(Errc::malformed, "index head: bad magic (not a kiln index, format 2: KILNIDX2, KILNIDX3 or KILNIDX4)");
    }
  }
  head.entry_count = r.u32();
  if (head.entry_count == 0 || head.entry_count > kMaxEntries) {
    r.fail_here("entry count " + std::to_string(head.entry_count) + " is outside 1.." + std::to_string(kMaxEntries));
  }
  head.sequence = r.u64();
  // Every writer starts at 1 (MANIFEST.md); refusing 0 here, not only in kiln.toml, keeps the
  // runtime's view (it never parses kiln.toml) and the release gate's the same.
  if (head.sequence == 0 || head.sequence > static_cast<std::uint64_t>(INT64_MAX)) {
    r.fail_here("sequence " + std::to_string(head.sequence) + " is outside 1..2^63-1");
  }
  head.package = r.string16();
  if (auto p = package_name_problem(head.package); !p.empty()) r.fail_here(p);
  head.kernel_revision = r.string16();
  if (auto p = revision_problem(head.kernel_revision); !p.empty()) r.fail_here(p);
  if (head.tree) {
    head.height = r.u8();
    if (head.height < 1 || head.height > kMaxTreeHeight) {
      r.fail_here("height " + std::to_string(head.height) + " is outside 1.." + std::to_string(kMaxTreeHeight));
    }
  }
  if (with_table) head.kernel_table = decode_table_entry(r, index_offset);
  std::uint32_t count = decode_ref_count(r, head.tree, kMaxEntries);
  RefList list;
  list.tree = head.tree;
  list.level = head.height - 1;
  list.position = head_size;
  list.index_size = index_size;
  list.bounds.end_offset = index_offset;
  head.refs = decode_refs(r, count, list);
  if (r.remaining() != 0) r.fail_here(std::to_string(r.remaining()) + " trailing bytes after the last reference");
  if (head_size + sum_spans(head.refs) != index_size) {
    fail(Errc::malformed, "index head: its pages cover " + std::to_string(sum_spans(head.refs)) + " bytes but " +
                              std::to_string(index_size - head_size) + " follow the head");
  }
  if (sum_entries(head.refs) != head.entry_count) {
    fail(Errc::malformed, "index head: its pages hold " + std::to_string(sum_entries(head.refs)) + " entries, not the " +
                              std::to_string(head.entry_count) + " it declares");
  }
  return head;
}

std::vector<PageRef> decode_reference_page(ByteView page, const PageRef& ref, unsigned level, const PageBounds& bounds,
                                           std::uint64_t index_size) {
  ByteReader r(page, "index reference page at ", ref.index_position);
  expect_magic(r, kReferencePageMagic, "a kiln index reference page");
  std::uint32_t count = decode_ref_count(r, true, kMaxReferencesPerPage);
  RefList list;
  list.tree = true;
  list.level = level - 1;
  list.position = ref.index_position + ref.size;
  list.first_entry = ref.first_entry;
  list.index_size = index_size;
  list.parent = &ref;
  list.bounds = bounds;
  std::vector<PageRef> refs = decode_refs(r, count, list);
  if (r.remaining() != 0) r.fail_here(std::to_string(r.remaining()) + " trailing bytes after the last reference");
  if (ref.size + sum_spans(refs) != ref.span) {
    fail(Errc::malformed, r.what() + ": its size and its pages' spans add up to " + std::to_string(ref.size + sum_spans(refs)) +
                              " bytes, not the " + std::to_string(ref.span) + " its reference gives");
  }
  if (sum_entries(refs) != ref.entry_count) {
    fail(Errc::malformed, r.what() + ": its pages hold " + std::to_string(sum_entries(refs)) + " entries, not the " +
                              std::to_string(ref.entry_count) + " its reference gives");
  }
  return refs;
}

namespace {

// Checks the entry page named by `ref` (FORMAT.md §3.1) and hands each entry to
// `on_entry(fields, at)`, `at` where its encoding starts in `page`.
template <typename OnEntry>
void walk_entry_page(ByteView page, const PageRef& ref, const PageBounds& bounds, OnEntry on_entry) {
  ByteReader r(page, "index page at ", ref.index_position);
  expect_magic(r, kIndexPageMagic, "a kiln index page");
  std::string_view previous;
  std::uint64_t next_offset = ref.first_offset;
  for (std::uint32_t i = 0; i < ref.entry_count; ++i) {
    const auto at = static_cast<std::uint32_t>(r.offset());
    const EntryView e = read_entry<true>(r, ref.first_entry + i);
    auto where = [&] { return "index entry " + std::to_string(ref.first_entry + i) + " ('" + std::string(e.path) + "')"; };
    if (i == 0 ? e.path != ref.first_path : !(previous < e.path)) {
      r.fail_here(where() + (i == 0 ? ": is not the first path its page's reference gives"
                                  : ": paths must be unique and sorted bytewise"));
    }
    if (bounds.has_path_bound && !(e.path < bounds.path_bound)) {
      r.fail_here(where() + ": must sort before the next page's first path '" + std::string(bounds.path_bound) + "'");
    }
    if (e.offset != next_offset) {
      r.fail_here(where() + ": offset " + std::to_string(e.offset) + " should be " + std::to_string(next_offset) +
                  " (members are packed in index order, each 64-byte aligned)");
    }
    next_offset = align_up(e.offset + e.stored_size);
    if (next_offset > bounds.end_offset) {
      r.fail_here(where() + ": its bytes run to " + std::to_string(e.offset + e.stored_size) + ", past " +
                  std::to_string(bounds.end_offset) + " where the next page's members (or the index) begin");
    }
    previous = e.path;
    on_entry(e, at);
  }
  if (r.remaining() != 0) r.fail_here(std::to_string(r.remaining()) + " trailing bytes after the last entry");
  if (next_offset != bounds.end_offset) {
    fail(Errc::malformed, r.what() + ": its members end at " + std::to_string(next_offset) + " but the next ones begin at " +
                              std::to_string(bounds.end_offset));
  }
}

}  // namespace

std::vector<Entry> decode_entry_page(ByteView page, const PageRef& ref, const PageBounds& bounds) {
  std::vector<Entry> entries;
  entries.reserve(ref.entry_count);
  walk_entry_page(page, ref, bounds, [&](const EntryView& e, std::uint32_t) { entries.push_back(to_entry(e)); });
  return entries;
}

std::vector<std::uint32_t> check_entry_page(ByteView page, const PageRef& ref, const PageBounds& bounds) {
  std::vector<std::uint32_t> starts;
  starts.reserve(ref.entry_count);
  walk_entry_page(page, ref, bounds, [&](const EntryView&, std::uint32_t at) { starts.push_back(at); });
  return starts;
}

EntryView reread_entry_view(ByteView page, std::uint32_t at) {
  ByteReader r(page.sub(at, page.size - at), "index entry");
  return read_entry<false>(r, 0);
}

Entry reread_entry(ByteView page, std::uint32_t at) { return to_entry(reread_entry_view(page, at)); }

Entry decode_entry(ByteReader& r, std::uint64_t position, const char* label) {
  return to_entry(read_entry<true>(r, position, label));
}

std::string_view reread_entry_path(ByteView page, std::uint32_t at) {
  ByteReader r(page.sub(at, page.size - at), "index entry");
  return r.string16_view();
}

namespace {

// Two entries are the same when they encode to the same bytes (every field, as §3 gives them).
bool same_encoding(const Entry& a, const Entry& b) {
  ByteWriter x, y;
  encode_entry(x, a);
  encode_entry(y, b);
  return x.buffer() == y.buffer();
}

// Every page under `refs` (at `level`), hashed and decoded, entries appended in index order.
void decode_subtrees(ByteView index_bytes, const std::vector<PageRef>& refs, unsigned level, const PageBounds& outer,
                     std::vector<Entry>& out) {
  for (std::size_t i = 0; i < refs.size(); ++i) {
    const PageRef& ref = refs[i];
    ByteView page = index_bytes.sub(ref.index_position, ref.size);
    if (sha256(page.data, page.size) != ref.sha256) {
      fail(Errc::integrity, "index page at " + std::to_string(ref.index_position) +
                                ": its bytes do not match the SHA-256 its reference gives");
    }
    const PageBounds bounds = child_bounds(refs, i, outer);
    if (level == 0) {
      for (Entry& e : decode_entry_page(page, ref, bounds)) out.push_back(std::move(e));
    } else {
      decode_subtrees(index_bytes, decode_reference_page(page, ref, level, bounds, index_bytes.size), level - 1, bounds, out);
    }
  }
}

}  // namespace

Index decode_index(ByteView index_bytes, std::uint64_t head_size, std::uint64_t index_offset) {
  if (head_size == 0 || head_size > index_bytes.size) {
    fail(Errc::malformed, "header: index head size " + std::to_string(head_size) + " is outside 1.." +
                              std::to_string(index_bytes.size) + " (the index size)");
  }
  IndexHead head = decode_index_head(index_bytes.sub(0, head_size), index_bytes.size, index_offset);
  Index index;
  index.package = head.package;
  index.kernel_revision = head.kernel_revision;
  index.sequence = head.sequence;
  index.entries.reserve(head.entry_count);
  decode_subtrees(index_bytes, head.refs, head.height - 1, PageBounds{index_offset, false, {}}, index.entries);
  if (auto p = whole_index_problem(index, head.kernel_table); !p.empty()) fail(Errc::malformed, p);
  return index;
}

std::string whole_index_problem(const Index& index, const std::optional<Entry>& head_table_entry) {
  long manifest = index.find(kManifestPath);
  if (manifest < 0 || index.entries[static_cast<std::size_t>(manifest)].role != Role::manifest) {
    return "index: no 'kiln.toml' member with role manifest";
  }
  if (head_table_entry) {
    long table = index.find(kKernelTablePath);
    if (table < 0 || !same_encoding(index.entries[static_cast<std::size_t>(table)], *head_table_entry)) {
      return std::string("index head: the kernel table entry it carries is not the index's entry of '") + kKernelTablePath +
             "'" + (table < 0 ? " (the index has none)" : "");
    }
  }
  if (auto p = member_set_problem(index.entries); !p.empty()) return "index: " + p;
  return {};
}

// ---- signed attributes ---------------------------------------------------------------

std::string encode_attributes(const SignedAttributes& a) {
  // Appended in place: every open re-encodes each signature's attributes to check their form.
  std::string s;
  s.reserve(160 + a.package.size() + a.signer.size());
  s.append("kiln-signature: 1\narchive: ").append(digest_string(a.archive_digest));
  s.append("\npackage: ").append(a.package);
  s.append("\nsequence: ").append(std::to_string(a.sequence));
  s.append("\nkey-id: ").append(a.key_id);
  s.append("\nsigner: ").append(a.signer);
  s.append("\ncreated: ").append(std::to_string(a.created)).append("\n");
  return s;
}

namespace {

// Whether `text` is encode_attributes(a), compared piece by piece: every open checks each
// signature's attributes this way, and building the encoding to compare made five allocations.
bool is_encoding_of(const SignedAttributes& a, std::string_view text) {
  std::size_t at = 0;
  auto take = [&](std::string_view piece) {
    if (text.compare(at, piece.size(), piece) != 0 || text.size() - at < piece.size()) return false;
    at += piece.size();
    return true;
  };
  auto take_number = [&](std::uint64_t v) {
    char digits[20];
    std::size_t n = 0;
    do {
      digits[sizeof digits - 1 - n++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v != 0);
    return take(std::string_view(digits + sizeof digits - n, n));
  };
  auto take_digest = [&](const Sha256& d) {
    static const char hex[] = "0123456789abcdef";
    char out[64];
    for (std::size_t i = 0; i < d.size(); ++i) out[2 * i] = hex[d[i] >> 4], out[2 * i + 1] = hex[d[i] & 15];
    return take("sha256:") && take(std::string_view(out, sizeof out));
  };
  return take("kiln-signature: 1\narchive: ") && take_digest(a.archive_digest) && take("\npackage: ") &&
         take(a.package) && take("\nsequence: ") && take_number(a.sequence) && take("\nkey-id: ") && take(a.key_id) &&
         take("\nsigner: ") && take(a.signer) && take("\ncreated: ") && take_number(a.created) && take("\n") &&
         at == text.size();
}

bool parse_decimal_u64(std::string_view s, std::uint64_t* out) {
  if (s.empty() || s.size() > 20 || (s.size() > 1 && s[0] == '0')) return false;
  std::uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    std::uint64_t d = static_cast<std::uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

}  // namespace

SignedAttributes decode_attributes(const std::string& text) {
  // Read as views into `text` (every open decodes each signature): only the fields kept are
  // copied, and errors build their texts.
  static const std::string_view keys[] = {"kiln-signature", "archive", "package", "sequence", "key-id", "signer", "created"};
  const std::string_view all(text);
  std::string_view values[7];
  std::size_t pos = 0;
  for (int i = 0; i < 7; ++i) {
    const std::string_view key = keys[i];
    if (all.compare(pos, key.size(), key) != 0 || all.compare(pos + key.size(), 2, ": ") != 0) {
      fail(Errc::malformed, std::string("signed attributes: line ") + std::to_string(i + 1) + " should start with '" +
                                std::string(key) + ": '");
    }
    pos += key.size() + 2;
    std::size_t nl = all.find('\n', pos);
    if (nl == std::string_view::npos) fail(Errc::malformed, "signed attributes: line " + std::to_string(i + 1) + " has no newline");
    values[i] = all.substr(pos, nl - pos);
    pos = nl + 1;
  }
  if (pos != text.size()) fail(Errc::malformed, "signed attributes: bytes after the 'created' line");
  SignedAttributes a;
  if (values[0] != "1") fail(Errc::malformed, "signed attributes: unsupported kiln-signature version '" + std::string(values[0]) + "'");
  if (!parse_digest_string(std::string(values[1]), &a.archive_digest)) fail(Errc::malformed, "signed attributes: bad archive digest");
  a.package = values[2];
  if (auto p = package_name_problem(a.package); !p.empty()) fail(Errc::malformed, "signed attributes: " + p);
  if (!parse_decimal_u64(values[3], &a.sequence)) fail(Errc::malformed, "signed attributes: bad sequence");
  a.key_id = values[4];
  bool hex_ok = a.key_id.size() == 32;
  for (char c : a.key_id) hex_ok = hex_ok && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
  if (!hex_ok) fail(Errc::malformed, "signed attributes: key-id is not 32 lowercase hex digits");
  a.signer = values[5];
  if (auto p = signer_problem(a.signer); !p.empty()) fail(Errc::malformed, "signed attributes: " + p);
  if (!parse_decimal_u64(values[6], &a.created)) fail(Errc::malformed, "signed attributes: bad created time");
  if (!is_encoding_of(a, all)) fail(Errc::malformed, "signed attributes: not in canonical form");
  return a;
}

// ---- signature block -------------------------------------------------------------------

std::vector<std::uint8_t> encode_signature_block(const std::vector<SignatureRecord>& records) {
  ByteWriter w;
  w.bytes(kSignatureMagic.data(), kSignatureMagic.size());
  w.u32(static_cast<std::uint32_t>(records.size()));
  for (const SignatureRecord& rec : records) {
    w.string16(rec.attributes_text);
    w.bytes(rec.signature.data(), rec.signature.size());
  }
  return std::move(w.buffer());
}

std::vector<SignatureRecord> decode_signature_block(ByteView bytes) {
  if (bytes.size > kMaxSignatureBlockSize) fail(Errc::malformed, "signature block: larger than 1 MiB");
  ByteReader r(bytes, "signature block");
  expect_magic(r, kSignatureMagic, "a kiln signature block");
  std::uint32_t count = r.u32();
  if (count > kMaxSignatures) r.fail_here("more than " + std::to_string(kMaxSignatures) + " signatures");
  std::vector<SignatureRecord> records;
  for (std::uint32_t i = 0; i < count; ++i) {
    SignatureRecord rec;
    rec.attributes_text = r.string16();
    if (rec.attributes_text.size() > kMaxAttributesLength) r.fail_here("signature " + std::to_string(i) + ": attributes too long");
    try {
      rec.attributes = decode_attributes(rec.attributes_text);
    } catch (const Failure& e) {
      r.fail_here("signature " + std::to_string(i) + ": " + e.what());
    }
    ByteView sig = r.take(64);
    std::memcpy(rec.signature.data(), sig.data, 64);
    records.push_back(std::move(rec));
  }
  if (r.remaining() != 0) r.fail_here(std::to_string(r.remaining()) + " trailing bytes after the last signature");
  return records;
}

}  // namespace kiln::format
