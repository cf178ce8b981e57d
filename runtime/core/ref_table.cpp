#include "core/ref_table.hpp"

#include <algorithm>
#include <cstring>

#include "core/bytes.hpp"

namespace kiln::format {

namespace {

// A reference's fixed fields before its first path (FORMAT.md §3): entry_count, size, span (tree
// form only), first_offset, sha256; then first_path as a str16.
constexpr std::size_t fixed_size(bool tree) { return 4 + 4 + (tree ? 4 : 0) + 8 + 32; }

// A slot keeps a page's position in the index and its first entry in 32 bits each.
static_assert(kMaxIndexSize <= UINT32_MAX && kMaxEntries <= UINT32_MAX, "positions must fit a slot");

}  // namespace

RefTable::RefTable(const std::vector<PageRef>& refs, bool tree)
    : slots_(new Slot[refs.size()]), count_(refs.size()), tree_(tree) {
  for (std::size_t i = 0; i < refs.size(); ++i) {
    const PageRef& r = refs[i];
    // The first path is the encoding's last field: the reference starts before its length.
    const auto* path = reinterpret_cast<const std::uint8_t*>(r.first_path.data());
    slots_[i] = Slot{path - 2 - fixed_size(tree), static_cast<std::uint32_t>(r.index_position), r.first_entry};
  }
}

PageRef RefTable::at(std::size_t i) const {
  const Slot& s = slots_[i];
  const std::uint8_t* p = s.encoded;
  PageRef r;
  r.entry_count = load_le32(p);
  r.size = load_le32(p + 4);
  p += 8;
  if (tree_) {
    r.span = load_le32(p);
    p += 4;
  } else {
    r.span = r.size;
  }
  r.first_offset = load_le64(p);
  std::memcpy(r.sha256.data(), p + 8, 32);
  r.first_path = first_path(i);
  r.index_position = s.index_position;
  r.first_entry = s.first_entry;
  return r;
}

std::string_view RefTable::first_path(std::size_t i) const {
  const std::uint8_t* length = slots_[i].encoded + fixed_size(tree_);
  return {reinterpret_cast<const char*>(length + 2), load_le16(length)};
}

long RefTable::for_path(std::string_view path) const {
  // First paths increase strictly (checked when the list was decoded).
  std::size_t low = 0, high = count_;
  while (low < high) {
    std::size_t mid = low + (high - low) / 2;
    if (path < first_path(mid)) {
      high = mid;
    } else {
      low = mid + 1;
    }
  }
  return static_cast<long>(low) - 1;
}

std::size_t RefTable::for_position(std::size_t position) const {
  const Slot* begin = slots_.get();
  const Slot* it = std::upper_bound(begin, begin + count_, position,
                                    [](std::size_t pos, const Slot& s) { return pos < s.first_entry; });
  return static_cast<std::size_t>(it - begin) - 1;
}

PageBounds RefTable::child_bounds(std::size_t i, const PageBounds& outer) const {
  if (i + 1 >= count_) return outer;
  const std::uint8_t* next = slots_[i + 1].encoded;
  return PageBounds{load_le64(next + 8 + (tree_ ? 4 : 0)), true, first_path(i + 1)};
}

}  // namespace kiln::format
