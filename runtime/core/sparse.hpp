// The sparse form of an archive (schema/FORMAT.md §9): the same header, index and signature
// block as the complete archive, so the same digest and signatures, but only some members'
// bytes. An extent table after the header says which byte ranges of the complete archive the
// file holds; everything else is absent, and a reader asked for an absent member refuses by
// name instead of reading anything in its place.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/bytes.hpp"
#include "core/format.hpp"

namespace kiln::format {

constexpr std::array<std::uint8_t, 8> kExtentTableMagic = {'K', 'I', 'L', 'N', 'S', 'P', 'X', '1'};
constexpr std::uint64_t kExtentTablePrefix = 12;  // magic, then the u32 count
constexpr std::uint64_t kExtentSize = 16;         // offset u64, size u64

// A byte range of the complete archive.
struct Extent {
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  std::uint64_t end() const { return offset + size; }
};

struct ExtentTable {
  std::vector<Extent> extents;
  std::vector<std::uint64_t> data_at;  // where each extent's bytes begin in the sparse file
  std::uint64_t present_bytes = 0;     // the extents' sizes added up
};

// The complete archive's size, from its header (index_offset + index_size + signatures).
std::uint64_t complete_size(const Header& h);
// The header fields a sparse header may hold (no file to tile them against): throws
// Errc::malformed naming the field.
void check_sparse_header(const Header& h);
// The extent count from the table's first 12 bytes (magic, count), bounded by kMaxEntries + 1.
std::uint32_t decode_extent_count(ByteView prefix);
// Where the extents' bytes begin: after the header and the table, rounded up to 64.
std::uint64_t sparse_data_start(std::uint32_t count);
// Decodes `table` (the whole table region: prefix, extents and the zero padding after them) and
// checks it against the header and the file's size (FORMAT.md §9's rules, in order).
ExtentTable decode_extent_table(ByteView table, const Header& h, std::uint64_t file_size);
// The table region for these extents, zero padding included.
std::vector<std::uint8_t> encode_extent_table(const std::vector<Extent>& extents);

enum class Coverage { present, absent, partial };
// Whether [offset, offset + size) of the complete archive is in the file, and where (`at`) when
// it is. An empty range is present.
struct Located {
  Coverage coverage = Coverage::absent;
  std::uint64_t at = 0;
};
Located locate(const ExtentTable& table, std::uint64_t offset, std::uint64_t size);

// The extents a sparse archive of the complete archive `h` holds when it keeps the members
// flagged in `keep` (index order): each kept member with the padding after it, adjacent ones
// merged, and the index with the signature block as the last extent.
std::vector<Extent> extents_for(const std::vector<Entry>& entries, const std::vector<bool>& keep, const Header& h);

}  // namespace kiln::format
