// Reads archive format v2 (either index head, FORMAT.md §3) from a file or from memory, in the
// order that keeps unverified bytes away from parsers: header, then the index head's SHA-256
// (the archive's digest) and the signatures over it, and only then the head and the kernel
// table header. Index pages (one per level on the way to an entry), kernel records and members
// are hashed and decoded lazily, right before first use, so opening an archive of thousands of
// kernels costs little more than opening one of a single kernel; kiln.toml is parsed only when
// asked for (tools, full verification), never on the runtime's path.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/bytes.hpp"
#include "core/format.hpp"
#include "core/held_bytes.hpp"
#include "core/kernel_table.hpp"
#include "core/manifest.hpp"
#include "core/once.hpp"
#include "core/ref_table.hpp"
#include "core/sparse.hpp"
#include "core/trust.hpp"

namespace kiln {

class MappedFile;

// The largest member a reader decompresses unless told otherwise: libkiln's default option and
// the CLI's, one number.
constexpr std::uint64_t kDefaultMaxMemberSize = 4ull << 30;

struct ReadOptions {
  // Signatures are required to satisfy this policy before the index is parsed. Without a
  // trust set the archive is opened unauthenticated (inspect, digest): nothing read from
  // it may then be treated as trusted.
  TrustPolicy policy;
  // The largest member a reader will decompress; beyond it a member is refused before any
  // allocation, which bounds the memory a decompression bomb can claim.
  std::uint64_t max_member_size = kDefaultMaxMemberSize;
  // false: open_file refuses a symbolic link and anything not a regular file (a store's
  // archives: whoever can write the folder must not redirect a read or stall it on a FIFO).
  bool follow_links = true;
};

using ProgressFn = std::function<void(std::uint64_t done, std::uint64_t total)>;

class ArchiveReader {
 public:
  // A reference page whose span (itself and every page under it) is at most this many bytes is
  // read with its span in one read, and the pages under it are taken from that copy (each still
  // hashed against its own reference before it is parsed).
  static constexpr std::uint32_t kSmallSpan = 4096;

  static std::unique_ptr<ArchiveReader> open_file(const std::string& path, const ReadOptions& options);
  // Borrows the bytes: the caller keeps them alive and unchanged while the ArchiveReader lives.
  static std::unique_ptr<ArchiveReader> open_memory(const std::uint8_t* data, std::size_t size, const ReadOptions& options,
                                              const std::string& name = "<memory>");
  ~ArchiveReader();

  const std::string& name() const { return name_; }
  // The file's own size (for a sparse archive, less than complete_size()).
  std::uint64_t file_size() const { return file_size_; }
  // A sparse archive (FORMAT.md §9): the complete archive's digest and signatures, some of its
  // members. The size of the complete archive, and the byte ranges of it this file holds.
  bool sparse() const { return header_.sparse; }
  std::uint64_t complete_size() const { return sparse() ? format::complete_size(header_) : file_size_; }
  const format::ExtentTable& extents() const { return extents_; }
  // Whether member i's bytes are in the file (always, in a complete archive). A member an extent
  // cuts is refused (Errc::malformed).
  bool member_present(std::size_t i) const;
  // Errc::not_found naming member i unless its bytes are in the file.
  void require_present(std::size_t i) const;
  const format::Header& header() const { return header_; }
  const Sha256& digest() const { return digest_; }
  const std::string& package() const { return head_.package; }
  const std::string& kernel_revision() const { return head_.kernel_revision; }
  std::uint64_t sequence() const { return head_.sequence; }
  // The largest member content this reader decompresses (ReadOptions::max_member_size).
  std::uint64_t max_member_size() const { return max_member_size_; }
  std::size_t member_count() const { return head_.entry_count; }
  // The index head's form (FORMAT.md §3): tree (KILNIDX3) or one-level (KILNIDX2), its height
  // (levels of pages below it, 1 for one-level) and how many references it holds.
  bool index_is_tree() const { return head_.tree; }
  unsigned index_height() const { return head_.height; }
  // Whether the head carries kiln/kernels.bin's entry (KILNIDX4, FORMAT.md §3).
  bool index_head_has_table_entry() const { return head_.has_kernel_table_entry; }
  std::size_t index_head_references() const { return top_refs_.size(); }
  // Position of the member at `path`, or -1; hashes and checks (once) only the page that would
  // hold it, and compares paths where they lie in it.
  long find(const std::string& path) const;
  // One member's index entry, made (once) from its page, which is hashed and checked (once).
  const format::Entry& entry(std::size_t i) const;
  // Index pages hashed and decoded so far, and their bytes (what the reader holds of the index
  // besides the head): for benchmarks and diagnostics.
  std::size_t index_pages_read() const { return pages_read_.load(std::memory_order_relaxed); }
  std::uint64_t index_page_bytes_read() const { return page_bytes_read_.load(std::memory_order_relaxed); }
  // Every entry, every page hashed and decoded, the manifest rule checked (once): for tools.
  const format::Index& index() const;

  // kiln/kernels.bin (identity, toolchain, kernel count), read at open.
  const KernelTable& kernel_table() const { return kernel_table_; }
  // The index position of the kernel's record, or -1 where the archive has no such kernel.
  long find_kernel(const std::string& name) const { return find(kernel_record_path(name)); }
  bool has_kernel(const std::string& name) const { return find_kernel(name) >= 0; }
  // The kernel's record, read and checked now. Throws Errc::not_found for an unknown name.
  KernelSpec kernel(const std::string& name) const;
  // The same for a record find_kernel(name) found at `record`: no second lookup.
  KernelSpec kernel_at(std::size_t record, const std::string& name) const;
  // Every kernel name, sorted, from the index (once); refused unless there are exactly as
  // many as kiln/kernels.bin declares.
  const std::vector<std::string>& kernel_names() const;
  // kiln.toml, parsed on first call (thread-safe), and checked against the index and the
  // kernel table: an archive whose two descriptions disagree is refused (Errc::integrity).
  const Manifest& manifest() const;
  const std::vector<format::SignatureRecord>& signatures() const;
  bool authenticated() const { return authenticated_; }
  const TrustReport& trust_report() const { return trust_report_; }

  // Checks one member's stored bytes against the index, and a compressed member's zstd frame
  // (FORMAT.md §4, all but the content digest), once: later calls are free. Hashes the member
  // where it lies in the file (verify_member_in_place).
  void verify_member(std::size_t i) const;
  // Full verification's reading of member i: its stored digest checked (and flagged) while only
  // some of its bytes are copied privately into `held` (its first `head` and last `tail` bytes,
  // and a compressed member's zstd frame header and block headers) and the rest is hashed where it
  // lies in the file, never parsed; the padding after it is checked too. Whatever is parsed later
  // is read from `held`, so it is what was hashed. A member of at most head + tail bytes is held
  // whole; one over the reader's limit is refused (Errc::limit), as a whole read refuses it.
  // Returns whether a compressed member's frame was checked from the held bytes
  // (check_zstd_frame_held); where it returns false, that is the caller's, on a whole copy.
  bool verify_member_in_place(std::size_t i, std::size_t head, std::size_t tail, HeldBytes& held) const;
  // What verify_member holds of a member: enough for the largest zstd frame header.
  static constexpr std::size_t kHeldFrameHeader = 32;
  // The most block headers verify_member_in_place holds of a frame (27 bytes each, spans and
  // copies): 8 GiB of content in zstd's 128 KiB blocks. A frame of more is checked unwalked.
  static constexpr std::size_t kMaxHeldBlocks = 65536;
  // Returns one member's content: stored bytes copied out of the file, their SHA-256
  // checked, decompressed within the bound, and the content's SHA-256 checked. The copy
  // comes first so that a file changed underneath cannot swap bytes after the check.
  std::vector<std::uint8_t> read_member(std::size_t i) const;
  std::vector<std::uint8_t> read_member(const std::string& path) const;
  // The same for the member an entry describes that the caller holds: a kernel record's copy of
  // its code member's entry (FORMAT.md §4.1), or the index head's of the kernel table's (§3),
  // read without looking the member up in the index. The bytes must lie among the members
  // (Errc::malformed otherwise) and be present; they are checked against the copy's digests,
  // which full verification checks against the index. `holder` names what carries the copy in
  // errors ("its kernel record").
  std::vector<std::uint8_t> read_member(const format::Entry& e, const char* holder = "its kernel record") const;
  // Whether the bytes that entry describes are in the file (always, in a complete archive).
  bool member_present(const format::Entry& e) const;
  // The same for a member stored raw, into `buffer` (grown when too small, never shrunk), and the
  // bytes as a view into it: a caller reading many members reuses one buffer instead of
  // allocating, zeroing and freeing one per member. A compressed member is read_member's.
  ByteView read_member_into(std::size_t i, std::vector<std::uint8_t>& buffer) const;
  // A member's content for telling what it is (the default verification level's semantic checks):
  // its stored bytes copied into `stored` and checked against their signed digest, then
  // decompressed into `buffer` (both grown when smaller, never shrunk), without checking the
  // content's own SHA-256 (--deep and read_member do). A raw member is read_member_into's.
  ByteView decode_member_into(std::size_t i, std::vector<std::uint8_t>& buffer, std::vector<std::uint8_t>& stored) const;
  // Member i's stored bytes checked as read_member checks them (digest, and the zstd frame's
  // header), and the first `limit` bytes of its content, decompressing no further: what telling a
  // code object by its headers needs at the default verification level. The content digest is
  // checked only where the prefix is the whole content (read_member and --deep check it always).
  // A compressed member's stored bytes go through `stored` (grown when smaller, never shrunk), as
  // decode_member_into's do: one buffer per reading thread instead of a zeroed one per member.
  std::vector<std::uint8_t> read_member_prefix(std::size_t i, std::size_t limit, std::vector<std::uint8_t>& stored) const;
  // Checks one member's stored digest (verify_member's way), then, only if it matched, decodes a
  // compressed member from private 1 MiB pieces and checks its content digest (verify_all's deep
  // level): zstd sees no byte of a member whose stored digest does not match.
  void verify_member_deep(std::size_t i) const;

  // Verifies every member's stored digest and zstd frame header, that all padding is zero,
  // and every rule of archive_semantics.hpp (kiln.toml, kernel table, index and code bytes
  // agree), on `threads` threads. With `deep`, also decompresses each member, streaming, and
  // checks its content digest: memory per thread is bounded (FORMAT.md §4), not the member.
  void verify_all(unsigned threads, bool deep, const ProgressFn& progress) const;

  // Stored bytes without any check: for tools that show or copy raw bytes they are about
  // to verify themselves. An absent member is refused as read_member refuses it.
  ByteView unchecked_stored_bytes(std::size_t i) const;
  // Bytes [offset, offset + size) of the complete archive, copied out unchecked (Errc::not_found
  // where a sparse file lacks them): for a sparse copy, verified once written.
  std::vector<std::uint8_t> unchecked_bytes(std::uint64_t offset, std::uint64_t size) const { return copy_out(offset, size); }
  // The whole file, unverified: for rewriting the unsigned part when a signature is added, and
  // for full verification. A large file is mapped on the first call (Errc::io if it cannot be).
  // For a sparse archive these are the file's bytes, not the complete archive's.
  ByteView unchecked_file_bytes() const;

 private:
  ArchiveReader() = default;
  void parse(const ReadOptions& options);
  std::string member_label(std::size_t i) const;
  // Where bytes [offset, offset + size) of the complete archive are in the file; refuses them
  // when the file does not hold them all (a sparse archive's absent bytes are never read).
  std::uint64_t file_offset(std::uint64_t offset, std::uint64_t size) const;
  void parse_extent_table();
  void check_tiling() const;
  // verify_all's rules of the sparse form that need the whole index.
  void check_extents_on_slots(const std::vector<format::Entry>& entries) const;
  // One page of the index, hashed and decoded on first use (thread-safe): a reference page's
  // references and a slot for each page they name, or an entry page's entries.
  // `parent` is the reference page that names it (null for the head's), whose copy may hold it.
  struct Page;
  const Page& page(Page& slot, const format::PageRef& ref, unsigned level, const format::PageBounds& bounds,
                   const Page* parent) const;
  // The entry page holding entry `position` (or, by path, the one that would hold `path`: null
  // if none could); the page knows its first entry's position.
  struct EntryPage {
    const Page* page = nullptr;
  };
  EntryPage entry_page_for_position(std::size_t position) const;
  EntryPage entry_page_for_path(const std::string& path) const;
  template <typename Choose>
  EntryPage descend(Choose choose) const;
  // Member i's entry read again from its page where it lies (its strings views into the page's
  // bytes, which live as long as the reader): what the reader's own member reads use, so that
  // they make no Entry (and its two strings) for a member; entry() makes one for whoever asks.
  format::EntryView entry_view(std::size_t i) const;
  // Member i's flags, in its entry page (i checked by entry_view(i) first): what was found of it.
  static constexpr std::uint8_t kStoredChecked = 1;   // its stored bytes match the index
  static constexpr std::uint8_t kPaddingChecked = 2;  // the padding after it is zero
  std::atomic<std::uint8_t>& checked_flags(std::size_t i) const;
  void collect_entries(const format::RefTable& refs, const Page* parent, unsigned level, const format::PageBounds& outer,
                       std::vector<format::Entry>& out) const;
  // The page reference i of `refs` names, kept in the reference's cell (made empty on first use,
  // filled by page()); and every page kept in a table's cells, freed.
  static Page& child(const format::RefTable& refs, std::size_t i);
  static void delete_children(const format::RefTable& refs);
  // Bytes [offset, offset + size) of the complete archive, copied out of the file (pread for a
  // large file opened by path, memcpy otherwise): what is checked and parsed is always a private
  // copy. copy_physical takes the file's own offsets (the header, a sparse file's extent table).
  std::vector<std::uint8_t> copy_out(std::uint64_t offset, std::uint64_t size) const;
  std::vector<std::uint8_t> copy_physical(std::uint64_t offset, std::uint64_t size) const;
  // Member i's stored bytes, copied out and checked against the index (the flag set): the one
  // place read_member and read_member_prefix take them from. The caller has checked presence.
  std::vector<std::uint8_t> copy_stored_checked(std::size_t i) const;
  // The same into `out` (stored_size bytes).
  void copy_stored_checked_to(std::size_t i, std::uint8_t* out) const;
  // Member i's stored bytes read kStoredPiece at a time to `destination(at)` (the piece that
  // starts at byte `at`), each hashed as it arrives, then checked against the index and flagged.
  static constexpr std::uint64_t kStoredPiece = 256 * 1024;
  void read_stored_checked(std::size_t i, const std::function<std::uint8_t*(std::uint64_t)>& destination) const;
  // Throws Errc::integrity naming the member unless `got` is its stored digest; flags it verified.
  void check_stored_digest(std::size_t i, const Sha256& got) const;
  // Throws Errc::integrity naming the member and the offset of the first byte of `padding` (the
  // bytes from `end`, member i's end, on) that is not zero.
  void check_padding(std::size_t i, std::uint64_t end, ByteView padding) const;
  // The zero padding after a member ending at `end`: up to the next multiple of 64, where the
  // next member or the index begins (the offsets a checked index gives, FORMAT.md §3).
  static std::size_t padding_after(std::uint64_t end);
  // Throws Errc::limit when the member declares more content than the reader's limit.
  void require_within_limit(std::size_t i) const;
  // The refusals a member read makes, for a member `label` names: over the reader's limit; absent
  // from a sparse archive.
  [[noreturn]] void refuse_over_limit(const std::string& label, std::uint64_t content_size) const;
  [[noreturn]] void refuse_absent(const std::string& label) const;
  // Whether bytes [offset, offset + size) of the complete archive are in the file; a member an
  // extent cuts is refused (Errc::malformed), named by `label()`, made only then.
  bool bytes_present(std::uint64_t offset, std::uint64_t size, const std::function<std::string()>& label) const;
  // A member's content from its stored bytes, checked: decompressed within the entry's size and
  // its content digest checked where compressed; never an archive itself. `label()` names it,
  // made only where a message or the decompressor needs it.
  template <typename Text>
  std::vector<std::uint8_t> content_of(std::vector<std::uint8_t> stored, const format::BasicEntry<Text>& e,
                                       const std::function<std::string()>& label) const;

  std::string name_;
  std::unique_ptr<MappedFile> mapping_;
  ByteView memory_;            // open_memory's bytes; a file is read through mapping_
  std::uint64_t file_size_ = 0;
  format::Header header_;
  format::ExtentTable extents_;  // a sparse archive's; empty otherwise
  Sha256 digest_{};
  std::vector<std::uint8_t> head_bytes_;  // the head as read and hashed; top_refs_ reads from it
  // The head as decoded, less its references (top_refs_ holds them) and the copy of the kernel
  // table's entry, which the open reads the table through and a full decode (index()) decodes
  // from head_bytes_ again: 190 bytes a runtime's reader would hold for nothing.
  struct Head {
    std::string package;
    std::string kernel_revision;
    std::uint64_t sequence = 0;
    std::uint32_t entry_count = 0;
    unsigned height = 1;
    bool tree = false;
    bool has_kernel_table_entry = false;
  };
  Head head_;
  format::RefTable top_refs_;  // each reference's cell holds the page it names, once read
  mutable std::atomic<const Page*> last_entry_page_{nullptr};  // entry_page_for_position's last
  mutable std::atomic<std::size_t> pages_read_{0};
  mutable std::atomic<std::uint64_t> page_bytes_read_{0};
  // What only tools ask for (the whole index, every kernel name, kiln.toml), made on first use:
  // a runtime's reader, which never asks, holds a pointer instead of ~450 bytes.
  struct ToolViews;
  ToolViews& tool_views() const;
  mutable std::atomic<ToolViews*> tool_views_{nullptr};
  KernelTable kernel_table_;
  // The signature block as read (what was checked at open): signatures() decodes it again for
  // whoever asks, so that a runtime's reader holds its bytes rather than the records made of them.
  std::vector<std::uint8_t> signature_block_;
  TrustReport trust_report_;
  bool authenticated_ = false;
  // Set by verify_all: member reads from then on check the padding after the member too.
  mutable std::atomic<bool> checking_padding_{false};
  std::uint64_t max_member_size_ = 0;
};

}  // namespace kiln
