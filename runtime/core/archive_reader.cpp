#include "core/archive_reader.hpp"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>

#include "core/archive_semantics.hpp"
#include "core/compress.hpp"
#include "core/error.hpp"
#include "core/file_io.hpp"
#include "core/held_bytes.hpp"
#include "core/parallel.hpp"
#include "core/zstd_layout.hpp"

namespace kiln {

struct ArchiveReader::Page {
  Page() = default;
  Page(const Page&) = delete;
  Page& operator=(const Page&) = delete;
  ~Page() {
    delete_children(refs);
    for (std::size_t i = 0; entries && i < entry_at.size(); ++i) delete entries[i].load(std::memory_order_relaxed);
  }

  Once once;
  // The page's bytes as read and hashed: its references or its entries are read from them. A
  // reference page whose span is small (kSmallSpan) was read with every page under it in one
  // read: `bytes` then holds the whole span, the page itself its first `size` bytes, and its
  // children copy theirs from here (each still hashed against its own reference when used).
  std::vector<std::uint8_t> bytes;
  std::uint64_t position = 0;  // where `bytes` begin in the index
  // A reference page's references; the cell of each holds the page it names, made on first use
  // (a lookup pays for the pages on its way, not for a page per sibling).
  format::RefTable refs;
  // An entry page's: where each entry's encoding starts in `bytes`, and one cell per entry, the
  // Entry made on first use (entry() hands out references that live as long as the reader). A
  // lookup compares paths where they lie: the page costs its bytes and 13 bytes per entry, not
  // every entry decoded with its own strings.
  std::vector<std::uint32_t> entry_at;
  std::uint32_t first_entry = 0;  // the position in the index of its first entry
  std::unique_ptr<std::atomic<format::Entry*>[]> entries;
  // Per entry, what was found so far (kStoredChecked: its stored bytes match, by verify_member or
  // a read; kPaddingChecked: the padding after it is zero, by a full verification). Kept with the
  // page, so that a reader holds flags only for the pages it decoded.
  std::unique_ptr<std::atomic<std::uint8_t>[]> checked;
};

namespace {

// The object in `cell` (a page, an entry, the tool views), made by `make` now if no thread has
// made it yet; a thread that loses the race drops its own and takes the winner's. A reference
// table's cells are untyped (ref_table.hpp): they hold pages.
template <typename T, typename Cell, typename Make>
T& made_once(Cell& cell, Make make) {
  auto made = cell.load(std::memory_order_acquire);
  if (made != nullptr) return *static_cast<T*>(made);
  std::unique_ptr<T> fresh = make();
  if (cell.compare_exchange_strong(made, fresh.get(), std::memory_order_acq_rel)) return *fresh.release();
  return *static_cast<T*>(made);  // another thread's, made meanwhile
}

template <typename T, typename Cell>
T& made_once(Cell& cell) {
  return made_once<T>(cell, [] { return std::make_unique<T>(); });
}

}  // namespace

// The page reference i of `refs` names: its cell, made empty on first use (filled by page()).
ArchiveReader::Page& ArchiveReader::child(const format::RefTable& refs, std::size_t i) {
  return made_once<Page>(refs.cell(i));
}

void ArchiveReader::delete_children(const format::RefTable& refs) {
  for (std::size_t i = 0; i < refs.size(); ++i) delete static_cast<Page*>(refs.cell(i).load(std::memory_order_relaxed));
}

struct ArchiveReader::ToolViews {
  Once index_once;
  format::Index index;
  Once names_once;
  std::vector<std::string> kernel_names;
  Once manifest_once;
  Manifest manifest;
  Once signatures_once;
  std::vector<format::SignatureRecord> signatures;
};

ArchiveReader::ToolViews& ArchiveReader::tool_views() const { return made_once<ToolViews>(tool_views_); }

const std::vector<format::SignatureRecord>& ArchiveReader::signatures() const {
  ToolViews& views = tool_views();
  views.signatures_once.run([&] { views.signatures = format::decode_signature_block(ByteView(signature_block_)); });
  return views.signatures;
}

ArchiveReader::~ArchiveReader() {
  delete tool_views_.load(std::memory_order_relaxed);
  delete_children(top_refs_);
}

std::unique_ptr<ArchiveReader> ArchiveReader::open_file(const std::string& path, const ReadOptions& options) {
  std::unique_ptr<ArchiveReader> a(new ArchiveReader);
  a->name_ = path;
  a->mapping_ = std::make_unique<MappedFile>(path, options.follow_links);
  a->file_size_ = a->mapping_->size();
  a->parse(options);
  return a;
}

std::unique_ptr<ArchiveReader> ArchiveReader::open_memory(const std::uint8_t* data, std::size_t size, const ReadOptions& options,
                                              const std::string& name) {
  std::unique_ptr<ArchiveReader> a(new ArchiveReader);
  a->name_ = name;
  a->memory_ = ByteView(data, size);
  a->file_size_ = size;
  a->parse(options);
  return a;
}

std::vector<std::uint8_t> ArchiveReader::copy_out(std::uint64_t offset, std::uint64_t size) const {
  return copy_physical(file_offset(offset, size), size);
}

std::uint64_t ArchiveReader::file_offset(std::uint64_t offset, std::uint64_t size) const {
  if (!header_.sparse) return offset;
  format::Located at = format::locate(extents_, offset, size);
  if (at.coverage != format::Coverage::present) {
    fail(at.coverage == format::Coverage::absent ? Errc::not_found : Errc::malformed,
         name_ + ": bytes " + std::to_string(offset) + " to " + std::to_string(offset + size) +
             " of the complete archive are " + (at.coverage == format::Coverage::absent ? "absent from" : "cut by an extent of") +
             " this sparse archive");
  }
  return at.at;
}

bool ArchiveReader::member_present(std::size_t i) const {
  const format::EntryView e = entry_view(i);
  return bytes_present(e.offset, e.stored_size, [&] { return member_label(i); });
}

bool ArchiveReader::member_present(const format::Entry& e) const {
  return bytes_present(e.offset, e.stored_size, [&] { return name_ + ": member '" + e.path + "'"; });
}

bool ArchiveReader::bytes_present(std::uint64_t offset, std::uint64_t size, const std::function<std::string()>& label) const {
  if (!header_.sparse) return true;
  format::Located at = format::locate(extents_, offset, size);
  if (at.coverage == format::Coverage::partial) {
    fail(Errc::malformed, label() + ": an extent of this sparse archive holds part of it (FORMAT.md §9: "
                                    "members are whole or absent)");
  }
  return at.coverage == format::Coverage::present;
}

void ArchiveReader::require_present(std::size_t i) const {
  if (!member_present(i)) refuse_absent(member_label(i));
}

void ArchiveReader::refuse_absent(const std::string& label) const {
  fail(Errc::not_found, label + " is absent from this sparse archive (it holds " + std::to_string(extents_.present_bytes) +
                            " of the complete archive's " + std::to_string(complete_size()) +
                            " bytes); pull the archive whole, or for this GPU's target");
}

std::vector<std::uint8_t> ArchiveReader::copy_physical(std::uint64_t offset, std::uint64_t size) const {
  std::vector<std::uint8_t> out(static_cast<std::size_t>(size));
  if (out.empty()) return out;  // an empty file has no bytes to point at (memcpy from NULL is UB)
  if (mapping_) {
    mapping_->read_at(offset, out.size(), out.data());
  } else {
    ByteView view = memory_.sub(offset, size);
    std::memcpy(out.data(), view.data, view.size);
  }
  return out;
}

ByteView ArchiveReader::unchecked_file_bytes() const { return mapping_ ? mapping_->bytes() : memory_; }

std::string ArchiveReader::member_label(std::size_t i) const {
  return name_ + ": member '" + std::string(entry_view(i).path) + "'";
}

// The three regions of a complete archive tile the file exactly: [header][members][index][signatures].
void ArchiveReader::check_tiling() const {
  auto refuse = [&](const std::string& why) { fail(Errc::malformed, name_ + ": " + why); };
  const std::uint64_t size = file_size_;
  if (header_.index_size == 0 || header_.index_size > format::kMaxIndexSize) {
    refuse("header: index size " + std::to_string(header_.index_size) + " is outside 1.." +
           std::to_string(format::kMaxIndexSize));
  }
  if (header_.signature_block_size > format::kMaxSignatureBlockSize) {
    refuse("header: signature block size " + std::to_string(header_.signature_block_size) + " is over 1 MiB");
  }
  if (header_.index_offset < format::kHeaderSize || header_.index_offset % format::kMemberAlignment != 0 ||
      header_.index_offset > size || header_.index_size > size - header_.index_offset ||
      header_.signature_block_size != size - header_.index_offset - header_.index_size) {
    refuse("header: index at " + std::to_string(header_.index_offset) + " (+" + std::to_string(header_.index_size) +
           ") and signature block of " + std::to_string(header_.signature_block_size) + " bytes do not tile a file of " +
           std::to_string(size) + " bytes (truncated or extended?)");
  }
  if (header_.index_head_size == 0 || header_.index_head_size > header_.index_size) {
    refuse("header: index head size " + std::to_string(header_.index_head_size) + " is outside 1.." +
           std::to_string(header_.index_size) + " (the index size)");
  }
}

// A sparse archive: its header's fields bounded on their own (there is no file for them to tile),
// then the extent table after the header, which must account for every byte of the file.
void ArchiveReader::parse_extent_table() {
  try {
    format::check_sparse_header(header_);
    if (file_size_ < format::kHeaderSize + format::kExtentTablePrefix) {
      fail(Errc::malformed, "extent table: the file ends at " + std::to_string(file_size_) + " bytes, inside it");
    }
    std::uint32_t count = format::decode_extent_count(ByteView(copy_physical(format::kHeaderSize, format::kExtentTablePrefix)));
    std::uint64_t table_size = format::sparse_data_start(count) - format::kHeaderSize;
    if (table_size > file_size_ - format::kHeaderSize) {
      fail(Errc::malformed, "extent table: " + std::to_string(count) + " extents do not fit a file of " +
                                std::to_string(file_size_) + " bytes");
    }
    extents_ = format::decode_extent_table(ByteView(copy_physical(format::kHeaderSize, table_size)), header_, file_size_);
  } catch (const Failure& e) {
    fail(Errc::malformed, name_ + ": " + e.what());
  }
}

void ArchiveReader::parse(const ReadOptions& options) {
  max_member_size_ = options.max_member_size;
  auto refuse = [&](const std::string& why) { fail(Errc::malformed, name_ + ": " + why); };

  try {
    std::vector<std::uint8_t> header = copy_physical(0, std::min<std::uint64_t>(file_size_, format::kHeaderSize));
    header_ = format::decode_header(ByteView(header));
  } catch (const Failure& e) {
    refuse(e.what());
  }
  if (header_.sparse) {
    parse_extent_table();
  } else {
    check_tiling();
  }

  // The head is copied out of the mapping before it is hashed, and parsed from the copy, so
  // that a file changed underneath cannot show the parser other bytes than the hash saw.
  head_bytes_ = copy_out(header_.index_offset, header_.index_head_size);
  const std::vector<std::uint8_t>& head = head_bytes_;  // kept: the head's references are read from it
  digest_ = sha256(head.data(), head.size());

  std::vector<format::SignatureRecord> signatures;
  try {
    signature_block_ = copy_out(header_.index_offset + header_.index_size, header_.signature_block_size);
    signatures = format::decode_signature_block(ByteView(signature_block_));
  } catch (const Failure& e) {
    refuse(e.what());
  }

  if (options.policy.trust != nullptr) {
    trust_report_ = evaluate_signatures(signatures, digest_, options.policy);
    if (!trust_report_.satisfied) {
      fail(Errc::signature, name_ + ": signature check failed for " + digest_string(digest_) + ": " + trust_report_.failure);
    }
    authenticated_ = true;
  }

  format::IndexHead decoded;
  try {
    decoded = format::decode_index_head(ByteView(head), header_.index_size, header_.index_offset);
  } catch (const Failure& e) {
    refuse(e.what());
  }
  // The references are read in place from then on (ref_table.hpp): the decoded list goes.
  top_refs_ = format::RefTable(decoded.refs, ByteView(head_bytes_), decoded.tree);
  std::vector<format::PageRef>().swap(decoded.refs);
  head_.package = std::move(decoded.package);
  head_.kernel_revision = std::move(decoded.kernel_revision);
  head_.sequence = decoded.sequence;
  head_.entry_count = decoded.entry_count;
  head_.height = decoded.height;
  head_.tree = decoded.tree;
  head_.has_kernel_table_entry = decoded.kernel_table.has_value();

  // A signature binds the package and sequence as well as the digest, so that it cannot
  // be presented as approval of another release of the same bytes' package.
  for (const format::SignatureRecord& rec : signatures) {
    if (rec.attributes.package != head_.package || rec.attributes.sequence != head_.sequence) {
      fail(Errc::signature, name_ + ": a signature by key " + rec.attributes.key_id + " names package '" +
                                rec.attributes.package + "' sequence " + std::to_string(rec.attributes.sequence) +
                                " but the archive is '" + head_.package + "' sequence " + std::to_string(head_.sequence));
    }
  }

  // The kernel table header is what the runtime reads: checked, decoded, and bound to the index.
  // Read through the head's copy of its entry where the head carries one (no lookup: no index
  // page read at open), else found in the index.
  std::vector<std::uint8_t> table_bytes;
  if (decoded.kernel_table) {
    table_bytes = read_member(*decoded.kernel_table, "the index head");
  } else {
    long table = find(kKernelTablePath);
    if (table < 0 || entry_view(static_cast<std::size_t>(table)).role != format::Role::meta) {
      refuse(std::string("index: no '") + kKernelTablePath + "' member with role meta");
    }
    table_bytes = read_member(static_cast<std::size_t>(table));
  }
  try {
    kernel_table_ = KernelTable::decode(ByteView(table_bytes), kKernelTablePath);
  } catch (const Failure& e) {
    fail(e.code(), name_ + ": " + e.what());  // the archive named only when a message is made
  }
  if (kernel_table_.package() != head_.package || kernel_table_.kernel_revision() != head_.kernel_revision ||
      kernel_table_.sequence() != head_.sequence) {
    fail(Errc::integrity, name_ + ": the index says package '" + head_.package + "' revision '" + head_.kernel_revision +
                              "' sequence " + std::to_string(head_.sequence) + " but " + kKernelTablePath + " says '" +
                              kernel_table_.package() + "' '" + kernel_table_.kernel_revision() + "' " +
                              std::to_string(kernel_table_.sequence()));
  }
}

const ArchiveReader::Page& ArchiveReader::page(Page& slot, const format::PageRef& ref, unsigned level,
                                   const format::PageBounds& bounds, const Page* parent) const {
  slot.once.run([&] {
    // Copied before hashing, parsed from the copy (as the head is): from the parent's copy where
    // it read this page with itself, else from the file, with every page under this one where
    // they are few bytes (the reference page on every open's way to the kernel table, which
    // the writer gives a page of its own: one read instead of two).
    std::vector<std::uint8_t> bytes;
    const std::uint64_t within = parent != nullptr ? ref.index_position - parent->position : 0;
    if (parent != nullptr && ref.index_position >= parent->position && within <= parent->bytes.size() &&
        ref.span <= parent->bytes.size() - within) {
      bytes.assign(parent->bytes.begin() + static_cast<std::ptrdiff_t>(within),
                   parent->bytes.begin() + static_cast<std::ptrdiff_t>(within + ref.span));
    } else {
      bytes = copy_out(header_.index_offset + ref.index_position, level > 0 && ref.span <= kSmallSpan ? ref.span : ref.size);
    }
    if (sha256(bytes.data(), ref.size) != ref.sha256) {
      fail(Errc::integrity, name_ + ": index page at " + std::to_string(ref.index_position) +
                                ": its bytes do not match the SHA-256 its reference gives");
    }
    try {
      slot.bytes = std::move(bytes);
      slot.position = ref.index_position;
      const ByteView page_bytes(slot.bytes.data(), ref.size);
      if (level == 0) {
        slot.entry_at = format::check_entry_page(page_bytes, ref, bounds);
        slot.first_entry = ref.first_entry;
        slot.entries.reset(new std::atomic<format::Entry*>[slot.entry_at.size()]());
        slot.checked.reset(new std::atomic<std::uint8_t>[slot.entry_at.size()]());
      } else {
        slot.refs = format::RefTable(format::decode_reference_page(page_bytes, ref, level, bounds, header_.index_size),
                                     page_bytes, true);
      }
    } catch (const Failure& e) {
      fail(Errc::malformed, name_ + ": " + e.what());
    }
    pages_read_.fetch_add(1, std::memory_order_relaxed);
    page_bytes_read_.fetch_add(ref.size, std::memory_order_relaxed);
  });
  return slot;
}

// Both lookups walk from the head down, one page per level, each page hashed and decoded once;
// `choose` picks the reference to follow in a list, or -1 when no page can hold what is sought.
template <typename Choose>
ArchiveReader::EntryPage ArchiveReader::descend(Choose choose) const {
  const format::RefTable* refs = &top_refs_;
  const Page* parent = nullptr;
  format::PageBounds bounds{header_.index_offset, false, {}};
  for (unsigned level = head_.height - 1;; --level) {
    const long i = choose(*refs);
    if (i < 0) return {};
    const format::PageRef ref = refs->at(static_cast<std::size_t>(i));
    bounds = refs->child_bounds(static_cast<std::size_t>(i), bounds);
    const Page& p = page(child(*refs, static_cast<std::size_t>(i)), ref, level, bounds, parent);
    if (level == 0) return {&p};
    refs = &p.refs;
    parent = &p;
  }
}

ArchiveReader::EntryPage ArchiveReader::entry_page_for_path(const std::string& path) const {
  return descend([&](const format::RefTable& refs) { return refs.for_path(path); });
}

ArchiveReader::EntryPage ArchiveReader::entry_page_for_position(std::size_t position) const {
  // The entry page of the last lookup by position, when it holds this one: reading a member
  // asks for its entry several times (its sizes, its digest, its flag), and a full verification
  // walks the members in index order, so most lookups need no descent. A page, once made, lives
  // as long as the reader, so a pointer read here is never stale; it is published only after
  // the page was checked.
  const Page* last = last_entry_page_.load(std::memory_order_acquire);
  if (last != nullptr && position >= last->first_entry && position - last->first_entry < last->entry_at.size()) {
    return {last};
  }
  EntryPage at = descend([&](const format::RefTable& refs) { return static_cast<long>(refs.for_position(position)); });
  if (at.page != nullptr) last_entry_page_.store(at.page, std::memory_order_release);
  return at;
}

format::EntryView ArchiveReader::entry_view(std::size_t i) const {
  if (i >= head_.entry_count) fail(Errc::invalid_argument, name_ + ": no member at position " + std::to_string(i));
  EntryPage at = entry_page_for_position(i);
  return format::reread_entry_view(ByteView(at.page->bytes), at.page->entry_at[i - at.page->first_entry]);
}

const format::Entry& ArchiveReader::entry(std::size_t i) const {
  if (i >= head_.entry_count) fail(Errc::invalid_argument, name_ + ": no member at position " + std::to_string(i));
  EntryPage at = entry_page_for_position(i);
  const std::size_t k = i - at.page->first_entry;
  return made_once<format::Entry>(at.page->entries[k], [&] {
    return std::make_unique<format::Entry>(format::reread_entry(ByteView(at.page->bytes), at.page->entry_at[k]));
  });
}

std::atomic<std::uint8_t>& ArchiveReader::checked_flags(std::size_t i) const {
  EntryPage at = entry_page_for_position(i);  // entry_view(i) has checked i and read the page
  return at.page->checked[i - at.page->first_entry];
}

long ArchiveReader::find(const std::string& path) const {
  EntryPage at = entry_page_for_path(path);
  if (at.page == nullptr) return -1;
  const ByteView bytes(at.page->bytes);
  const std::vector<std::uint32_t>& starts = at.page->entry_at;
  auto it = std::lower_bound(starts.begin(), starts.end(), path, [&](std::uint32_t start, const std::string& key) {
    return format::reread_entry_path(bytes, start) < key;
  });
  if (it == starts.end() || format::reread_entry_path(bytes, *it) != path) return -1;
  return static_cast<long>(at.page->first_entry) + (it - starts.begin());
}

void ArchiveReader::collect_entries(const format::RefTable& refs, const Page* parent, unsigned level,
                                    const format::PageBounds& outer, std::vector<format::Entry>& out) const {
  refs.walk([&](std::size_t i, const format::PageRef& ref) {
    const format::PageBounds bounds = refs.child_bounds(i, outer);
    const Page& p = page(child(refs, i), ref, level, bounds, parent);
    if (level == 0) {
      for (std::size_t k = 0; k < p.entry_at.size(); ++k) {
        out.push_back(format::reread_entry(ByteView(p.bytes), p.entry_at[k]));
      }
    } else {
      collect_entries(p.refs, &p, level - 1, bounds, out);
    }
  });
}

const format::Index& ArchiveReader::index() const {
  ToolViews& views = tool_views();
  views.index_once.run([&] {
    format::Index index;
    index.package = head_.package;
    index.kernel_revision = head_.kernel_revision;
    index.sequence = head_.sequence;
    index.entries.reserve(head_.entry_count);
    collect_entries(top_refs_, nullptr, head_.height - 1, format::PageBounds{header_.index_offset, false, {}}, index.entries);
    // The rules between paths (case, file beside folder) and the head's copy of the kernel
    // table's entry need every entry, so they are checked here, where every page has been
    // decoded, and not per page: a lookup by exact bytes never confuses such names, and an open
    // reads the table through the copy, digests checked; every caller that lists, verifies or
    // writes the members comes here.
    // The head's copy of the kernel table's entry, decoded again from the bytes the digest covers.
    const std::optional<format::Entry> table_entry =
        head_.has_kernel_table_entry
            ? format::decode_index_head(ByteView(head_bytes_), header_.index_size, header_.index_offset).kernel_table
            : std::nullopt;
    if (auto p = format::whole_index_problem(index, table_entry); !p.empty()) fail(Errc::malformed, name_ + ": " + p);
    views.index = std::move(index);
  });
  return views.index;
}

KernelSpec ArchiveReader::kernel(const std::string& name) const {
  long i = find_kernel(name);
  if (i < 0) fail(Errc::not_found, name_ + " (" + head_.package + ") has no kernel named '" + name + "'");
  return kernel_at(static_cast<std::size_t>(i), name);
}

KernelSpec ArchiveReader::kernel_at(std::size_t i, const std::string& name) const {
  const std::string path = kernel_record_path(name);
  const format::EntryView entry = entry_view(i);
  if (entry.path != path) {  // a caller's mix-up, never the archive's
    fail(Errc::internal, name_ + ": member " + std::to_string(i) + " is not the record of kernel '" + name + "'");
  }
  if (entry.role != format::Role::meta) {
    fail(Errc::malformed, name_ + ": member '" + path + "' must have role meta");
  }
  std::vector<std::uint8_t> record = read_member(i);
  try {
    return decode_kernel_record(ByteView(record), name, path, kernel_table_.code_entries());
  } catch (const Failure& e) {
    fail(e.code(), name_ + ": " + e.what());  // the archive named only when a message is made
  }
}

const std::vector<std::string>& ArchiveReader::kernel_names() const {
  ToolViews& views = tool_views();
  views.names_once.run([&] {
    const std::string prefix = kKernelRecordPrefix;
    std::vector<std::string> names;
    for (const format::Entry& e : index().entries) {
      if (e.path.compare(0, prefix.size(), prefix) != 0) continue;
      std::string name = e.path.substr(prefix.size());
      if (name.find('/') != std::string::npos || e.role != format::Role::meta) {
        fail(Errc::malformed, name_ + ": member '" + e.path + "' is not a kernel record (kiln/kernels/<name>, role meta)");
      }
      names.push_back(std::move(name));
    }
    if (names.size() != kernel_table_.size()) {
      fail(Errc::integrity, name_ + ": " + kKernelTablePath + " declares " + std::to_string(kernel_table_.size()) +
                                " kernels but the archive holds " + std::to_string(names.size()) + " kernel records");
    }
    views.kernel_names = std::move(names);
  });
  return views.kernel_names;
}

const Manifest& ArchiveReader::manifest() const {
  ToolViews& views = tool_views();
  views.manifest_once.run([&] {
    std::size_t position = static_cast<std::size_t>(index().find(format::kManifestPath));
    // Read unauthenticated too (inspect without --trust): capped before anything is allocated.
    if (entry_view(position).content_size > format::kMaxManifestSize) {
      fail(Errc::limit, member_label(position) + ": " + std::to_string(entry_view(position).content_size) +
                            " bytes, over the format's limit of " + std::to_string(format::kMaxManifestSize) + " for kiln.toml");
    }
    std::vector<std::uint8_t> bytes = read_member(position);
    Manifest m;
    try {
      m = parse_manifest(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), name_ + ":kiln.toml");
    } catch (const Failure& e) {
      // The author's mistake when packing (Errc::manifest, "bad input"); inside a sealed archive
      // it is a malformed archive, refused like any other.
      if (e.code() != Errc::manifest) throw;
      fail(Errc::malformed, std::string("the archive's kiln.toml is not a valid manifest: ") + e.what());
    }
    if (m.package != head_.package || m.kernel_revision != head_.kernel_revision || m.sequence != head_.sequence) {
      fail(Errc::integrity, name_ + ": the index says package '" + head_.package + "' revision '" +
                                head_.kernel_revision + "' sequence " + std::to_string(head_.sequence) +
                                " but kiln.toml says '" + m.package + "' '" + m.kernel_revision + "' " +
                                std::to_string(m.sequence));
    }
    // The packer derives the table from kiln.toml; a signer who shipped two descriptions
    // that disagree gets the archive refused rather than one of them believed.
    // Every table member must be present and byte-identical, and no other kernel record
    // may exist (kernel_names() counts them against kernels.bin, which must match too).
    auto disagree = [&](const std::string& path) {
      fail(Errc::integrity, name_ + ": kiln.toml and " + path + " describe different kernels (the kernel table was not " +
                                (kernel_table_.code_entries() ? "derived from this manifest and index" : "derived from this manifest") + ")");
    };
    // A KILNKTB3 table's records also copy their code members' entries: made again from this
    // index, a copy that differs from its entry in any field fails the comparison, as a record
    // that differs from kiln.toml does. A record whose code is not all in the index as code
    // cannot be made again; full verification's semantic rules refuse it and name what is missing.
    const bool code_entries = kernel_table_.code_entries();
    auto code_member = [&](const std::string& path) -> long {
      long i = find(path);
      return i >= 0 && entry(static_cast<std::size_t>(i)).role == format::Role::code ? i : -1;
    };
    const CodeEntryLookup entries = [&](const std::string& path) -> const format::Entry& {
      long i = code_member(path);
      if (i < 0) fail(Errc::internal, "no code member '" + path + "' to copy");
      return entry(static_cast<std::size_t>(i));
    };
    auto same = [&](const std::string& path, const std::vector<std::uint8_t>& content) {
      long i = find(path);
      if (i < 0 || read_member(static_cast<std::size_t>(i)) != content) disagree(path);
    };
    same(kKernelTablePath, encode_kernel_table_head(m, code_entries));
    for (const KernelSpec& k : m.kernels) {
      bool indexed = true;
      for (const CodeObjectRef& c : k.code) indexed = indexed && code_member(c.file.path) >= 0;
      for (const VariantSpec& v : k.variants) {
        for (const CodeObjectRef& c : v.code) indexed = indexed && code_member(c.file.path) >= 0;
      }
      if (code_entries && !indexed) continue;
      same(kernel_record_path(k.name), encode_kernel_record(k, code_entries ? &entries : nullptr));
    }
    if (kernel_names().size() != m.kernels.size()) disagree(kKernelRecordPrefix);
    views.manifest = std::move(m);
  });
  return views.manifest;
}

ByteView ArchiveReader::unchecked_stored_bytes(std::size_t i) const {
  const format::EntryView e = entry_view(i);
  require_present(i);
  return unchecked_file_bytes().sub(file_offset(e.offset, e.stored_size), e.stored_size);
}

void ArchiveReader::verify_member(std::size_t i) const {
  if (checked_flags(i).load(std::memory_order_acquire) & kStoredChecked) return;
  thread_local HeldBytes held;
  if (verify_member_in_place(i, kHeldFrameHeader, 0, held)) return;
  // A frame the walk does not settle (not one kiln's writer or zstd makes) is judged by zstd where
  // it lies, as it was before the walk: no copy of a member that may be gigabytes.
  check_zstd_frame(unchecked_stored_bytes(i), entry_view(i).content_size, member_label(i));
}

bool ArchiveReader::verify_member_in_place(std::size_t i, std::size_t head, std::size_t tail, HeldBytes& held) const {
  const format::EntryView e = entry_view(i);
  require_within_limit(i);
  require_present(i);
  const std::uint64_t size = e.stored_size;
  const std::uint64_t end = e.offset + size;
  const std::size_t padding = checking_padding_.load(std::memory_order_relaxed) && size > 0 ? padding_after(end) : 0;
  // The member where it lies: read only by the hash below and by the private copies taken first.
  // (A file truncated underneath makes this a SIGBUS, not an error: SECURITY.md, Known gaps.)
  const ByteView in_file = unchecked_file_bytes().sub(file_offset(e.offset, size + padding), size + padding);
  const bool zstd = e.compression == format::Compression::zstd;
  if (zstd) tail = 0;  // a frame ends in a block, found by the walk
  if (head >= size || tail >= size - head) {
    head = static_cast<std::size_t>(size);
    tail = 0;
  }
  held.reset(size);
  if (head > 0) std::memcpy(held.add(0, head), in_file.data, head);
  ZstdLayout layout;
  if (zstd) {
    // The walk reads each block header from a private copy of it, so that the digest below covers
    // exactly what the walk went by; nothing it found is used unless that digest matches.
    const std::size_t first = std::min<std::size_t>(head, 18);  // the largest frame header
    std::uint8_t first_bytes[18] = {};
    if (first > 0) std::memcpy(first_bytes, held.head().data, first);
    layout = walk_zstd_frame(size, ByteView(first_bytes, first), kMaxHeldBlocks, [&](std::uint64_t at) -> std::uint32_t {
      if (at + 3 <= head) return load_le24(held.head().data + at);
      const std::size_t from_head = at < head ? static_cast<std::size_t>(head - at) : 0;  // a header across the head's end
      std::uint8_t* copy = held.add(at + from_head, 3 - from_head);
      std::memcpy(copy, in_file.data + at + from_head, 3 - from_head);
      std::uint8_t bytes[3];
      std::memcpy(bytes, held.head().data + at, from_head);
      std::memcpy(bytes + from_head, copy, 3 - from_head);
      return load_le24(bytes);
    });
  }
  if (tail > 0) std::memcpy(held.add(size - tail, tail), in_file.data + size - tail, tail);
  Sha256Stream hash;
  std::uint64_t at = 0;
  for (const HeldBytes::Span& span : held.spans()) {
    if (span.offset > at) hash.update(in_file.data + at, static_cast<std::size_t>(span.offset - at));
    const ByteView copy = held.span_bytes(span);
    hash.update(copy.data, copy.size);
    at = span.offset + span.length;
  }
  if (size > at) hash.update(in_file.data + at, static_cast<std::size_t>(size - at));
  std::uint8_t padding_bytes[64];
  if (padding > 0) std::memcpy(padding_bytes, in_file.data + size, padding);
  check_stored_digest(i, hash.finish());
  if (padding > 0) {
    check_padding(i, end, ByteView(padding_bytes, padding));
    checked_flags(i).fetch_or(kPaddingChecked, std::memory_order_acq_rel);
  }
  return !zstd || check_zstd_frame_held(held.head(), layout, size, e.content_size, member_label(i));
}

std::vector<std::uint8_t> ArchiveReader::read_member(std::size_t i) const {
  const format::EntryView e = entry_view(i);
  require_within_limit(i);
  require_present(i);
  return content_of(copy_stored_checked(i), e, [this, i] { return member_label(i); });
}

template <typename Text>
std::vector<std::uint8_t> ArchiveReader::content_of(std::vector<std::uint8_t> stored, const format::BasicEntry<Text>& e,
                                                    const std::function<std::string()>& label) const {
  std::vector<std::uint8_t> content;
  if (e.compression == format::Compression::none) {
    content = std::move(stored);
  } else {
    content = zstd_decompress_exact(ByteView(stored), e.content_size, label());
    Sha256 content_hash = sha256(content.data(), content.size());
    if (content_hash != e.content_sha256) {
      fail(Errc::integrity, label() + ": decompressed content does not match the index (expected sha256:" +
                                sha256_hex(e.content_sha256) + ", found sha256:" + sha256_hex(content_hash) + ")");
    }
  }
  if (auto p = format::nested_archive_problem(e.path, ByteView(content)); !p.empty()) fail(Errc::malformed, name_ + ": " + p);
  return content;
}

std::vector<std::uint8_t> ArchiveReader::read_member(const format::Entry& e, const char* holder) const {
  // Named only when a message is made: a load reads its code through here.
  const auto label = [&] { return name_ + ": member '" + e.path + "'"; };
  // A copy is checked where it is used: its bytes must lie among the members (after the header,
  // 64-aligned, ending where the index begins at the latest), whatever its digest says.
  const std::uint64_t members_end = header_.index_offset;
  if (e.offset < format::kHeaderSize || e.offset % format::kMemberAlignment != 0 || e.stored_size > members_end ||
      e.offset > members_end - e.stored_size) {
    fail(Errc::malformed, label() + ": " + holder + " places it at bytes " + std::to_string(e.offset) + " to " +
                              std::to_string(e.offset + e.stored_size) + ", not among the members (64 to " +
                              std::to_string(members_end) + "; the archive is malformed, and full verification refuses it)");
  }
  if (e.content_size > max_member_size_) refuse_over_limit(label(), e.content_size);
  if (!member_present(e)) refuse_absent(label());
  std::vector<std::uint8_t> stored = copy_out(e.offset, e.stored_size);
  const Sha256 got = sha256(stored.data(), stored.size());
  if (got != e.stored_sha256) {
    fail(Errc::integrity, label() + ": stored bytes do not match the index (expected sha256:" + sha256_hex(e.stored_sha256) +
                              ", found sha256:" + sha256_hex(got) + "; the expected digest is " + holder + "'s copy of its entry)");
  }
  return content_of(std::move(stored), e, label);
}

std::vector<std::uint8_t> ArchiveReader::read_member(const std::string& path) const {
  long i = find(path);
  if (i < 0) fail(Errc::invalid_argument, name_ + ": no member named '" + path + "'");
  return read_member(static_cast<std::size_t>(i));
}

std::vector<std::uint8_t> ArchiveReader::copy_stored_checked(std::size_t i) const {
  std::vector<std::uint8_t> stored(static_cast<std::size_t>(entry_view(i).stored_size));
  copy_stored_checked_to(i, stored.data());
  return stored;
}

void ArchiveReader::copy_stored_checked_to(std::size_t i, std::uint8_t* out) const {
  read_stored_checked(i, [out](std::uint64_t at) { return out + at; });
}

void ArchiveReader::read_stored_checked(std::size_t i, const std::function<std::uint8_t*(std::uint64_t)>& destination) const {
  const format::EntryView e = entry_view(i);
  // During a full verification the padding after the member comes with its last piece, in the
  // same read, instead of a read of its own per member.
  const std::uint64_t end = e.offset + e.stored_size;
  const std::size_t padding =
      checking_padding_.load(std::memory_order_relaxed) && e.stored_size > 0 ? padding_after(end) : 0;
  std::uint8_t padding_bytes[64];
  // Each piece hashed while it is still in the cache: one pass over memory, as reading a file
  // into a small buffer and hashing it would be. A member of one piece (a kernel's record, most
  // code objects) is hashed in one call, with the thread's context: no stream to make.
  std::optional<Sha256Stream> stream;
  if (e.stored_size > kStoredPiece) stream.emplace();
  Sha256 got{};
  for (std::uint64_t at = 0; at < e.stored_size; at += kStoredPiece) {
    const std::uint64_t n = std::min<std::uint64_t>(kStoredPiece, e.stored_size - at);
    const std::size_t tail = at + n == e.stored_size ? padding : 0;
    std::uint8_t* to = destination(at);
    if (mapping_) {
      mapping_->read_at(file_offset(e.offset + at, n + tail), static_cast<std::size_t>(n), to, tail, padding_bytes);
    } else {
      ByteView view = memory_.sub(file_offset(e.offset + at, n + tail), n + tail);
      std::memcpy(to, view.data, static_cast<std::size_t>(n));
      std::memcpy(padding_bytes, view.data + n, tail);
    }
    if (stream) {
      stream->update(to, static_cast<std::size_t>(n));
    } else {
      got = sha256(to, static_cast<std::size_t>(n));
    }
  }
  if (stream) got = stream->finish();
  if (e.stored_size == 0) got = sha256(nullptr, 0);
  check_stored_digest(i, got);
  if (padding > 0) {
    check_padding(i, end, ByteView(padding_bytes, padding));
    checked_flags(i).fetch_or(kPaddingChecked, std::memory_order_acq_rel);
  }
}

std::size_t ArchiveReader::padding_after(std::uint64_t end) {
  return static_cast<std::size_t>((format::kMemberAlignment - end % format::kMemberAlignment) % format::kMemberAlignment);
}

void ArchiveReader::check_padding(std::size_t i, std::uint64_t end, ByteView padding) const {
  // Padding between members is covered by no digest, so it must be zero to leave no byte of the
  // file free for an attacker to change unnoticed.
  for (std::size_t p = 0; p < padding.size; ++p) {
    if (padding.data[p] != 0) {
      fail(Errc::integrity, member_label(i) + ": padding byte at offset " + std::to_string(end + p) + " is not zero");
    }
  }
}

void ArchiveReader::check_stored_digest(std::size_t i, const Sha256& got) const {
  const format::EntryView e = entry_view(i);
  if (got != e.stored_sha256) {
    fail(Errc::integrity, member_label(i) + ": stored bytes do not match the index (expected sha256:" +
                              sha256_hex(e.stored_sha256) + ", found sha256:" + sha256_hex(got) + ")");
  }
  checked_flags(i).fetch_or(kStoredChecked, std::memory_order_acq_rel);
}

void ArchiveReader::require_within_limit(std::size_t i) const {
  const format::EntryView e = entry_view(i);
  if (e.content_size > max_member_size_) refuse_over_limit(member_label(i), e.content_size);
}

void ArchiveReader::refuse_over_limit(const std::string& label, std::uint64_t content_size) const {
  fail(Errc::limit, label + ": declares " + std::to_string(content_size) + " bytes of content, over the reader's limit of " +
                        std::to_string(max_member_size_));
}

ByteView ArchiveReader::read_member_into(std::size_t i, std::vector<std::uint8_t>& buffer) const {
  const format::EntryView e = entry_view(i);
  if (e.compression != format::Compression::none) {
    buffer = read_member(i);
    return ByteView(buffer);
  }
  require_within_limit(i);
  require_present(i);
  if (buffer.size() < e.stored_size) buffer.resize(static_cast<std::size_t>(e.stored_size));
  copy_stored_checked_to(i, buffer.data());
  ByteView content(buffer.data(), static_cast<std::size_t>(e.stored_size));
  if (auto p = format::nested_archive_problem(e.path, content); !p.empty()) fail(Errc::malformed, name_ + ": " + p);
  return content;
}

ByteView ArchiveReader::decode_member_into(std::size_t i, std::vector<std::uint8_t>& buffer,
                                           std::vector<std::uint8_t>& stored) const {
  const format::EntryView e = entry_view(i);
  if (e.compression == format::Compression::none) return read_member_into(i, buffer);
  require_within_limit(i);
  require_present(i);
  if (stored.size() < e.stored_size) stored.resize(static_cast<std::size_t>(e.stored_size));
  copy_stored_checked_to(i, stored.data());
  ByteView content = zstd_decompress_exact_into(ByteView(stored.data(), static_cast<std::size_t>(e.stored_size)),
                                                e.content_size, member_label(i), buffer);
  if (auto p = format::nested_archive_problem(e.path, content); !p.empty()) fail(Errc::malformed, name_ + ": " + p);
  return content;
}

std::vector<std::uint8_t> ArchiveReader::read_member_prefix(std::size_t i, std::size_t limit,
                                                            std::vector<std::uint8_t>& stored_buffer) const {
  const format::EntryView e = entry_view(i);
  if (e.compression == format::Compression::none || e.content_size <= limit) return read_member(i);
  require_within_limit(i);
  require_present(i);
  if (stored_buffer.size() < e.stored_size) stored_buffer.resize(static_cast<std::size_t>(e.stored_size));
  copy_stored_checked_to(i, stored_buffer.data());
  const ByteView stored(stored_buffer.data(), static_cast<std::size_t>(e.stored_size));
  check_zstd_frame(stored, e.content_size, member_label(i));
  std::vector<std::uint8_t> prefix = zstd_decompress_prefix(stored, e.content_size, limit, member_label(i));
  if (auto p = format::nested_archive_problem(e.path, ByteView(prefix)); !p.empty()) fail(Errc::malformed, name_ + ": " + p);
  return prefix;
}

void ArchiveReader::verify_member_deep(std::size_t i) const {
  const format::EntryView e = entry_view(i);
  // First the stored bytes against their signed digest, hashed where they lie (a frame's header
  // and block headers checked from private copies): zstd never decodes a member whose stored
  // bytes do not match the index. A raw member's content is its stored bytes: nothing more to do.
  thread_local HeldBytes held;
  const bool zstd = e.compression == format::Compression::zstd;
  const bool frame_checked = verify_member_in_place(i, kHeldFrameHeader, 0, held);
  if (!zstd) {
    if (auto p = format::nested_archive_problem(e.path, held.head()); !p.empty()) fail(Errc::malformed, name_ + ": " + p);
    return;
  }
  if (!frame_checked) check_zstd_frame(unchecked_stored_bytes(i), e.content_size, member_label(i));
  // Then the content, decoded from private copies of 1 MiB pieces: memory stays one piece plus
  // zstd's window (FORMAT.md §4). These are read again from the file; a writer changing it between
  // the two reads gives zstd changed bytes, which the content digest below refuses.
  constexpr std::uint64_t kPiece = 1u << 20;
  Sha256Stream content_hash;
  ZstdStreamDecoder decoder(e.content_size, member_label(i));
  std::vector<std::uint8_t> first_bytes;  // enough to tell a nested archive by its magic
  auto to_content = [&](ByteView out) {
    content_hash.update(out.data, out.size);
    std::size_t want = format::kFileMagic.size() - std::min(first_bytes.size(), format::kFileMagic.size());
    first_bytes.insert(first_bytes.end(), out.data, out.data + std::min<std::size_t>(want, out.size));
  };
  for (std::uint64_t done = 0; done < e.stored_size; done += kPiece) {
    std::vector<std::uint8_t> piece = copy_out(e.offset + done, std::min(kPiece, e.stored_size - done));
    decoder.feed(ByteView(piece), to_content);
  }
  decoder.finish();
  Sha256 content = content_hash.finish();
  if (content != e.content_sha256) {
    fail(Errc::integrity, member_label(i) + ": decompressed content does not match the index (expected sha256:" +
                              sha256_hex(e.content_sha256) + ", found sha256:" + sha256_hex(content) + ")");
  }
  if (auto p = format::nested_archive_problem(e.path, ByteView(first_bytes)); !p.empty()) fail(Errc::malformed, name_ + ": " + p);
}

void ArchiveReader::verify_all(unsigned threads, bool deep, const ProgressFn& progress) const {
  // From here on, each member read brings the padding after it, checked in the same read.
  checking_padding_.store(true, std::memory_order_relaxed);
  // kiln.toml first: parsing it builds and drops a document tree many times its size, and the
  // whole index made after it reuses that memory instead of faulting in fresh pages.
  manifest();
  const auto& entries = index().entries;
  if (header_.sparse) check_extents_on_slots(entries);
  std::vector<std::size_t> present;
  present.reserve(entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (member_present(i)) present.push_back(i);
  }
  // kiln.toml, the kernel table, the index and the code objects' own bytes agree: at every
  // level, since these checks are cheap next to hashing and a release gate must not pass what
  // a GPU host later refuses.
  check_archive_semantics(*this, threads);

  std::uint64_t total = 0;
  for (std::size_t i : present) total += entries[i].stored_size;
  std::atomic<std::uint64_t> done{0};
  // Largest members first, so that one big member does not start last and leave the
  // other threads idle.
  std::vector<std::size_t> order = present;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return entries[a].stored_size > entries[b].stored_size; });
  parallel_for_or_fail(order.size(), threads, [&](std::size_t k) {
    std::size_t i = order[k];
    const format::Entry& e = entries[i];
    if (deep) {
      verify_member_deep(i);
    } else {
      // Without decompressing, a compressed member's frame is still checked against the index (a
      // code member's was, when check_archive_semantics read it).
      verify_member(i);
    }
    std::uint64_t now = done.fetch_add(e.stored_size) + e.stored_size;
    if (progress) progress(now, total);
  });
  // Every held member's padding is zero (in a sparse archive, the padding of the members it
  // holds: an absent member's slot, padding included, is not in the file). The reads above
  // checked most; what remains are members read before this verification began and not read
  // again by it, and those the deep level read.
  for (std::size_t i : present) {
    if (checked_flags(i).load(std::memory_order_acquire) & kPaddingChecked) continue;
    const std::uint64_t end = entries[i].offset + entries[i].stored_size;
    if (const std::size_t padding = padding_after(end); padding > 0) check_padding(i, end, ByteView(copy_out(end, padding)));
  }
}

// Every extent begins where a member's slot begins (its offset) or at the index, and ends where
// one begins or at the end of the complete archive: so each member, with its padding, is held
// whole or not at all (FORMAT.md §9).
void ArchiveReader::check_extents_on_slots(const std::vector<format::Entry>& entries) const {
  auto is_slot_edge = [&](std::uint64_t offset) {
    auto it = std::lower_bound(entries.begin(), entries.end(), offset,
                               [](const format::Entry& e, std::uint64_t o) { return e.offset < o; });
    return it != entries.end() && it->offset == offset;
  };
  for (std::size_t k = 0; k < extents_.extents.size(); ++k) {
    const format::Extent& x = extents_.extents[k];
    bool starts = x.offset == header_.index_offset || is_slot_edge(x.offset);
    bool ends = x.end() == complete_size() || is_slot_edge(x.end());
    if (!starts || !ends) {
      fail(Errc::malformed, name_ + ": extent " + std::to_string(k) + " (" + std::to_string(x.offset) + " +" +
                                std::to_string(x.size) + ") " + (starts ? "ends" : "begins") +
                                " inside a member's bytes or padding (FORMAT.md §9: members are whole or absent)");
    }
  }
}

}  // namespace kiln
