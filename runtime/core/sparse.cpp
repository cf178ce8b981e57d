#include "core/sparse.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/error.hpp"

namespace kiln::format {

namespace {

// A logical offset of a sparse header: at most 2^62 (as stored sizes are), so that no sum of
// the header's fields can overflow.
constexpr std::uint64_t kMaxLogicalOffset = 1ull << 62;

}  // namespace

std::uint64_t complete_size(const Header& h) { return h.index_offset + h.index_size + h.signature_block_size; }

void check_sparse_header(const Header& h) {
  auto refuse = [](const std::string& why) { fail(Errc::malformed, "header (sparse): " + why); };
  if (h.index_offset < kHeaderSize || h.index_offset % kMemberAlignment != 0 || h.index_offset > kMaxLogicalOffset) {
    refuse("index offset " + std::to_string(h.index_offset) + " is not a multiple of 64 in 64..2^62");
  }
  if (h.index_size == 0 || h.index_size > kMaxIndexSize) {
    refuse("index size " + std::to_string(h.index_size) + " is outside 1.." + std::to_string(kMaxIndexSize));
  }
  if (h.signature_block_size > kMaxSignatureBlockSize) {
    refuse("signature block size " + std::to_string(h.signature_block_size) + " is over 1 MiB");
  }
  if (h.index_head_size == 0 || h.index_head_size > h.index_size) {
    refuse("index head size " + std::to_string(h.index_head_size) + " is outside 1.." + std::to_string(h.index_size));
  }
}

std::uint32_t decode_extent_count(ByteView prefix) {
  ByteReader r(prefix, "extent table");
  ByteView magic = r.take(kExtentTableMagic.size());
  if (std::memcmp(magic.data, kExtentTableMagic.data(), kExtentTableMagic.size()) != 0) {
    r.fail_here("bad magic: not a sparse archive's extent table (KILNSPX1)");
  }
  std::uint32_t count = r.u32();
  if (count == 0 || count > kMaxEntries + 1) {
    r.fail_here("extent count " + std::to_string(count) + " is outside 1.." + std::to_string(kMaxEntries + 1));
  }
  return count;
}

std::uint64_t sparse_data_start(std::uint32_t count) {
  return align_up(kHeaderSize + kExtentTablePrefix + kExtentSize * count);
}

ExtentTable decode_extent_table(ByteView table, const Header& h, std::uint64_t file_size) {
  const std::uint32_t count = decode_extent_count(table);
  const std::uint64_t data_start = sparse_data_start(count);
  ByteReader r(table, "extent table");
  if (table.size != data_start - kHeaderSize) r.fail_here("holds " + std::to_string(table.size) + " bytes, not its size");
  r.take(kExtentTablePrefix);
  const std::uint64_t full = complete_size(h);
  ExtentTable t;
  t.extents.reserve(count);
  t.data_at.reserve(count);
  std::uint64_t at = data_start;
  for (std::uint32_t i = 0; i < count; ++i) {
    Extent e;
    e.offset = r.u64();
    e.size = r.u64();
    const std::string name = "extent " + std::to_string(i);
    if (e.offset < kHeaderSize || e.offset % kMemberAlignment != 0) {
      r.fail_here(name + ": offset " + std::to_string(e.offset) + " is not a multiple of 64 of at least 64");
    }
    if (e.size == 0 || e.offset > full || e.size > full - e.offset) {
      r.fail_here(name + ": " + std::to_string(e.offset) + " +" + std::to_string(e.size) +
                  " is empty or runs past the complete archive's " + std::to_string(full) + " bytes");
    }
    if (i > 0 && e.offset <= t.extents.back().end()) {
      r.fail_here(name + ": begins at " + std::to_string(e.offset) + ", not after the previous extent's end " +
                  std::to_string(t.extents.back().end()) + " (extents are in order, apart, adjacent ones merged)");
    }
    const bool last = i + 1 == count;
    if (!last && e.end() % kMemberAlignment != 0) r.fail_here(name + ": ends at " + std::to_string(e.end()) + ", not a multiple of 64");
    if (last && (e.end() != full || e.offset > h.index_offset)) {
      r.fail_here(name + " (the last): " + std::to_string(e.offset) + " +" + std::to_string(e.size) +
                  " does not hold the index and signature block, " + std::to_string(h.index_offset) + " to " +
                  std::to_string(full));
    }
    t.extents.push_back(e);
    t.data_at.push_back(at);
    at += e.size;  // extents are apart inside the complete archive: the sum stays below its size
    t.present_bytes += e.size;
  }
  while (r.remaining() > 0) {
    if (r.u8() != 0) r.fail_here("padding after the extents is not zero");
  }
  if (at != file_size) {
    fail(Errc::malformed, "extent table: the extents hold " + std::to_string(t.present_bytes) + " bytes after " +
                              std::to_string(data_start) + " bytes of header and table, " + std::to_string(at) +
                              " in all, but the file has " + std::to_string(file_size) + " (truncated or extended?)");
  }
  return t;
}

std::vector<std::uint8_t> encode_extent_table(const std::vector<Extent>& extents) {
  ByteWriter w;
  w.bytes(kExtentTableMagic.data(), kExtentTableMagic.size());
  w.u32(static_cast<std::uint32_t>(extents.size()));
  for (const Extent& e : extents) {
    w.u64(e.offset);
    w.u64(e.size);
  }
  std::vector<std::uint8_t> out = std::move(w.buffer());
  out.resize(sparse_data_start(static_cast<std::uint32_t>(extents.size())) - kHeaderSize, 0);
  return out;
}

Located locate(const ExtentTable& t, std::uint64_t offset, std::uint64_t size) {
  if (size == 0) return {Coverage::present, 0};
  // The last extent whose offset is <= offset.
  auto it = std::upper_bound(t.extents.begin(), t.extents.end(), offset,
                             [](std::uint64_t o, const Extent& e) { return o < e.offset; });
  if (it != t.extents.begin()) {
    const Extent& e = *(it - 1);
    if (offset < e.end()) {
      if (size <= e.end() - offset) {
        return {Coverage::present, t.data_at[static_cast<std::size_t>(it - 1 - t.extents.begin())] + (offset - e.offset)};
      }
      return {Coverage::partial, 0};
    }
  }
  // Not inside an extent: absent unless the next extent begins within the range.
  if (it != t.extents.end() && it->offset - offset < size) return {Coverage::partial, 0};
  return {Coverage::absent, 0};
}

std::vector<Extent> extents_for(const std::vector<Entry>& entries, const std::vector<bool>& keep, const Header& h) {
  std::vector<Extent> out;
  auto add = [&out](std::uint64_t from, std::uint64_t to) {
    if (to == from) return;
    if (!out.empty() && out.back().end() == from) {
      out.back().size += to - from;
    } else {
      out.push_back({from, to - from});
    }
  };
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (!keep[i]) continue;
    // A member's slot runs to the next member's offset (its zero padding included).
    std::uint64_t next = i + 1 < entries.size() ? entries[i + 1].offset : h.index_offset;
    add(entries[i].offset, next);
  }
  add(h.index_offset, complete_size(h));
  return out;
}

}  // namespace kiln::format
