// ArchiveReader format v2: the constants and the in-memory form of the index and signature
// block. schema/FORMAT.md is the specification; this file must agree with it byte for byte.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/bytes.hpp"
#include "core/ed25519.hpp"
#include "core/sha256.hpp"

namespace kiln::format {

// "KILN" then CR LF SUB LF, as PNG does, so that text-mode transfers are caught at once.
constexpr std::array<std::uint8_t, 8> kFileMagic = {'K', 'I', 'L', 'N', 0x0d, 0x0a, 0x1a, 0x0a};
constexpr std::array<std::uint8_t, 8> kIndexMagic = {'K', 'I', 'L', 'N', 'I', 'D', 'X', '2'};
constexpr std::array<std::uint8_t, 8> kIndexTreeMagic = {'K', 'I', 'L', 'N', 'I', 'D', 'X', '3'};
// A tree head that also carries kiln/kernels.bin's entry (FORMAT.md §3).
constexpr std::array<std::uint8_t, 8> kIndexTableMagic = {'K', 'I', 'L', 'N', 'I', 'D', 'X', '4'};
constexpr std::array<std::uint8_t, 8> kIndexPageMagic = {'K', 'I', 'L', 'N', 'P', 'G', 'E', '2'};
constexpr std::array<std::uint8_t, 8> kReferencePageMagic = {'K', 'I', 'L', 'N', 'R', 'E', 'F', '3'};
constexpr std::array<std::uint8_t, 8> kSignatureMagic = {'K', 'I', 'L', 'N', 'S', 'I', 'G', '1'};
constexpr std::uint32_t kFormatVersion = 2;
// Header flags: bit 0 marks a sparse archive (§9); every other bit is refused.
constexpr std::uint32_t kFlagSparse = 1;
// What the writer puts in a page (FORMAT.md §3): an entry page holds at most 8 entries (~1 KiB),
// a reference page at most 16 references (~1.3 KiB), the head at most 16 (~1.4 KiB). A lookup
// hashes and decodes one page per level, and every open hashes and decodes the head: at 20,000
// members, two reference pages and an entry page under a head of ~13 references. Small pages
// cost a read more per level but hash and check fewer bytes: open + load of one kernel from
// 5,000 (20,000 members) took 23.9 us with pages of 16 and 32 under a head of 64, and 20.6 us
// with these, signature memo kept (tests/bench/RESULTS.md). (Entries cost more to check than
// references, so entry pages are the smaller.)
constexpr std::uint32_t kEntriesPerPage = 8;
constexpr std::uint32_t kReferencesPerPage = 16;
constexpr std::uint32_t kHeadReferences = 16;
// What a reader accepts.
constexpr std::uint32_t kMaxEntriesPerPage = 4096;
constexpr std::uint32_t kMaxReferencesPerPage = 4096;
constexpr unsigned kMaxTreeHeight = 8;
constexpr std::uint64_t kHeaderSize = 64;
constexpr std::uint64_t kMemberAlignment = 64;  // lets a reader use raw members in place

// Hard bounds on what a reader accepts, so that no field can make it allocate or loop
// without limit. Writers refuse to produce anything beyond them.
constexpr std::uint64_t kMaxIndexSize = 256ull << 20;
constexpr std::uint32_t kMaxEntries = 1u << 20;
constexpr std::size_t kMaxPathLength = 1024;
constexpr std::size_t kMaxPathComponentLength = 255;  // NAME_MAX of every common file system
constexpr std::size_t kMaxArchLength = 1024;
constexpr std::size_t kMaxPackageLength = 128;
constexpr std::size_t kMaxRevisionLength = 128;
constexpr std::uint64_t kMaxSignatureBlockSize = 1ull << 20;
constexpr std::uint32_t kMaxSignatures = 64;
constexpr std::size_t kMaxAttributesLength = 2048;
constexpr std::size_t kMaxSignerLength = 128;
// kiln.toml, packed and read: parsed whole, so capped (about 150 bytes a kernel: ~100,000 kernels).
constexpr std::uint64_t kMaxManifestSize = 16ull << 20;

enum class Role : std::uint8_t { manifest = 1, code = 2, source = 3, ir = 4, testdata = 5, meta = 6 };
// The index's backend byte (§3): whose code a member is. Named Vendor so that it is not
// confused with backend::Backend, the interface a vendor implements.
enum class Vendor : std::uint8_t { none = 0, cuda = 1, hip = 2 };
enum class CodeKind : std::uint8_t {
  none = 0,
  cubin = 1,
  ptx = 2,
  fatbin = 3,
  amdgpu_elf = 4,
  offload_bundle = 5,
};
enum class Compression : std::uint8_t { none = 0, zstd = 1 };

const char* role_name(Role r);
const char* backend_name(Vendor b);
const char* code_kind_name(CodeKind k);
const char* compression_name(Compression c);
bool parse_role(const std::string& s, Role* out);
bool parse_backend(const std::string& s, Vendor* out);

struct Header {
  std::uint64_t index_offset = 0;
  std::uint64_t index_size = 0;
  std::uint64_t signature_block_size = 0;
  std::uint64_t index_head_size = 0;  // the first bytes of the index: what the digest covers
  // Flags bit 0 (FORMAT.md §9): a sparse archive, whose offsets above are the complete archive's
  // and whose extent table (sparse.hpp) says which of its bytes this file holds.
  bool sparse = false;
};

// One index entry (FORMAT.md §3). An Entry owns its two strings; an EntryView's are views into
// the bytes it was read from (an entry page's, which must outlive it): one field list for both.
template <typename Text>
struct BasicEntry {
  Text path;
  Role role = Role::meta;
  Vendor backend = Vendor::none;
  CodeKind kind = CodeKind::none;
  Compression compression = Compression::none;
  Text arch;  // comma-separated target tags for code objects, empty otherwise
  std::uint64_t offset = 0;
  std::uint64_t stored_size = 0;
  std::uint64_t content_size = 0;
  Sha256 stored_sha256{};
  Sha256 content_sha256{};
};
using Entry = BasicEntry<std::string>;
using EntryView = BasicEntry<std::string_view>;

struct Index {
  std::string package;
  std::string kernel_revision;
  std::uint64_t sequence = 0;
  std::vector<Entry> entries;  // sorted by path, bytewise

  // Returns the entry's position or -1.
  long find(const std::string& path) const;
};

// The index head (FORMAT.md §3): identity and references to pages. The digest is the SHA-256
// of the head alone; each page is bound to it by its SHA-256 in the reference that names it, so
// a reader hashes and decodes only the pages on its way to an entry. A one-level head
// (KILNIDX2) is held as a tree of height 1 whose references' span equals their size.
struct PageRef {
  std::uint32_t entry_count = 0;    // entries in the entry pages under the page
  std::uint32_t size = 0;           // bytes of the page
  std::uint32_t span = 0;           // bytes of the page and every page under it
  std::uint64_t first_offset = 0;   // file offset of the first member under the page
  Sha256 sha256{};
  // The first entry's path under the page: a view into the bytes the reference was decoded
  // from (the head's, a reference page's) or, when encoding, into the entry's path. Whoever
  // holds a PageRef keeps those bytes alive (ArchiveReader keeps every page it decoded).
  std::string_view first_path;
  std::uint64_t index_position = 0; // bytes from the index start (derived, not encoded)
  std::uint32_t first_entry = 0;    // position of its first entry in the index (derived)
  std::uint32_t encoded_at = 0;     // where its encoding starts in the bytes it was decoded from
};

// What a page must fit below (FORMAT.md §3, "bounds passed down"): the first path and first
// member offset of whatever follows it in the index.
struct PageBounds {
  std::uint64_t end_offset = 0;  // where the next page's members (or the index) begin
  bool has_path_bound = false;   // the last page of the index has none
  std::string_view path_bound;   // every path under the page sorts below it
};

struct IndexHead {
  std::string package;
  std::string kernel_revision;
  std::uint64_t sequence = 0;
  std::uint32_t entry_count = 0;
  unsigned height = 1;            // levels of pages below the head; 1: refs name entry pages
  bool tree = false;              // KILNIDX3 or 4 (refs carry spans) rather than KILNIDX2
  // KILNIDX4: a copy of kiln/kernels.bin's index entry, through which a reader reads the kernel
  // table at open without looking it up; a full decode refuses a copy the index does not hold.
  std::optional<Entry> kernel_table;
  std::vector<PageRef> refs;      // pages at level height - 1
};

// In `refs` (of the head or of a reference page): the last whose first path is <= path, or -1.
long ref_for_path(const std::vector<PageRef>& refs, const std::string& path);
// The last whose first entry is <= position (refs is never empty once decoded).
std::size_t ref_for_position(const std::vector<PageRef>& refs, std::size_t position);
// The bounds of the page refs[i] names, inside a page (or the head) whose own bounds are `outer`.
PageBounds child_bounds(const std::vector<PageRef>& refs, std::size_t i, const PageBounds& outer);

constexpr const char* kManifestPath = "kiln.toml";
constexpr const char* kKernelTablePath = "kiln/kernels.bin";

struct SignedAttributes {
  Sha256 archive_digest{};
  std::string package;
  std::uint64_t sequence = 0;
  std::string key_id;
  std::string signer;
  std::uint64_t created = 0;  // seconds since the Unix epoch
};

struct SignatureRecord {
  std::string attributes_text;  // the exact signed bytes
  SignedAttributes attributes;
  Ed25519Signature signature{};
};

// Encoding and decoding. Decoders accept exactly the bytes the encoders produce and
// throw Errc::malformed for anything else, naming the field.
std::vector<std::uint8_t> encode_header(const Header& h);
Header decode_header(ByteView bytes);

// The index as written: head then pages. `head_size` goes into the file header.
struct EncodedIndex {
  std::vector<std::uint8_t> bytes;
  std::uint64_t head_size = 0;
};
EncodedIndex encode_index(const Index& index);
// The head, either form, checked against the index region it describes: references' spans tile
// the rest of the index exactly, their first paths increase, their member ranges chain from
// offset 64 to `index_offset`. `head` is the head's bytes; `index_size` the whole index's size.
IndexHead decode_index_head(ByteView head, std::uint64_t index_size, std::uint64_t index_offset);
// A reference page at `level` >= 1 named by `ref`, after the caller has checked its SHA-256:
// its references, with their derived positions, checked against `ref` and its bounds.
std::vector<PageRef> decode_reference_page(ByteView page, const PageRef& ref, unsigned level, const PageBounds& bounds,
                                           std::uint64_t index_size);
// The encoded fields of the reference at byte `at` of `bytes` (the head's or a reference page's,
// already decoded and checked by one of the two above, which set `encoded_at`), read again
// without checking them: the derived fields are left for the caller. For a reader that keeps
// those bytes rather than the decoded list (ref_table.hpp).
PageRef reread_ref(ByteView bytes, std::uint32_t at, bool tree);
// The span alone of that reference (its size in the one-level form).
std::uint32_t reread_span(ByteView bytes, std::uint32_t at, bool tree);
// An entry page named by `ref`, after the caller has checked its SHA-256. Checks each entry,
// the order within the page and against the path bound, and the member offsets chaining from
// the page's first offset to its end offset.
std::vector<Entry> decode_entry_page(ByteView page, const PageRef& ref, const PageBounds& bounds);
// The same page checked exactly as decode_entry_page checks it, without making its entries:
// where each entry's encoding starts in `page`. A reader keeps the page's bytes and these
// positions, and makes an Entry only for the entries it is asked for (reread_entry), or compares
// paths where they lie (reread_entry_path).
std::vector<std::uint32_t> check_entry_page(ByteView page, const PageRef& ref, const PageBounds& bounds);
// The entry whose encoding starts at `at` in a page check_entry_page accepted, read again without
// checking it (a reader reads from its own copy, which does not change): as an Entry, or with its
// strings as views into `page` (no allocation: what a reader's own member reads use).
Entry reread_entry(ByteView page, std::uint32_t at);
EntryView reread_entry_view(ByteView page, std::uint32_t at);
// One entry as §3 encodes it, and read back with every rule of a single entry checked (not the
// rules between entries of a page: order, offsets, bounds), `label` and `position` naming it in
// errors ("code entry 2"): what a kernel record's copies of its code members' entries use
// (FORMAT.md §4.1).
void encode_entry(ByteWriter& w, const Entry& e);
Entry decode_entry(ByteReader& r, std::uint64_t position, const char* label);
// That entry's path, a view into `page`.
std::string_view reread_entry_path(ByteView page, std::uint32_t at);
// The whole index (head, every page hashed and decoded, exactly one manifest): for tools and
// tests that want every entry.
Index decode_index(ByteView index, std::uint64_t head_size, std::uint64_t index_offset);
// What a full decode checks once every entry is in hand, or "" when all hold: exactly one
// kiln.toml with role manifest; a KILNIDX4 head's copy of kiln/kernels.bin's entry (where given)
// equal, field by field, to the index's entry of that path; the rules between paths (§3.1).
std::string whole_index_problem(const Index& index, const std::optional<Entry>& head_table_entry);

std::string encode_attributes(const SignedAttributes& a);
SignedAttributes decode_attributes(const std::string& text);

std::vector<std::uint8_t> encode_signature_block(const std::vector<SignatureRecord>& records);
std::vector<SignatureRecord> decode_signature_block(ByteView bytes);

// Name rules shared by writer and reader: each returns why the name is refused, or an
// empty string when it is acceptable. Callers choose the error class (a bad name in a
// manifest is the author's mistake; in an archive it is a malformed or hostile file).
std::string member_path_problem(std::string_view path);
// The rules between paths (FORMAT.md §3.1), over a whole index sorted bytewise: no two files or
// folders whose names differ only in ASCII case, and no path that is a file and also a folder
// of another path. They need every entry, so they hold where a whole index is assembled (the
// writer, decode_index, ArchiveReader::index()); a lazy lookup matches exact bytes and never creates
// files, so no mix-up between such names can reach it.
std::string member_set_problem(const std::vector<Entry>& entries);
std::string package_name_problem(const std::string& name);
std::string revision_problem(const std::string& revision);
std::string arch_tags_problem(std::string_view arch);
std::string signer_problem(const std::string& signer);
// Content rule shared by writer and reader: a member may not itself be a kiln archive. kiln
// never opens a nested archive, so one sealed inside another would carry the outer signers'
// blessing to bytes nobody verified; it has to ship, and be verified, as its own archive.
std::string nested_archive_problem(std::string_view path, ByteView content);

std::uint64_t align_up(std::uint64_t v);

}  // namespace kiln::format
