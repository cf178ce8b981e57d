#include "core/ref_table.hpp"

#include <algorithm>

namespace kiln::format {

// A slot keeps where a reference's encoding starts and its first entry in 32 bits each, and
// the table the first page's position.
static_assert(kMaxIndexSize <= UINT32_MAX && kMaxEntries <= UINT32_MAX, "positions must fit a slot");

RefTable::RefTable(const std::vector<PageRef>& refs, ByteView bytes, bool tree)
    : bytes_(bytes), slots_(new Slot[refs.size()]), count_(refs.size()), tree_(tree) {
  if (!refs.empty()) first_position_ = static_cast<std::uint32_t>(refs.front().index_position);
  for (std::size_t i = 0; i < refs.size(); ++i) {
    slots_[i].encoded_at = refs[i].encoded_at;
    slots_[i].first_entry = refs[i].first_entry;
  }
}

PageRef RefTable::at(std::size_t i) const {
  std::uint64_t position = first_position_;
  for (std::size_t j = 0; j < i; ++j) position += reread_span(bytes_, slots_[j].encoded_at, tree_);
  PageRef r = reread_ref(bytes_, slots_[i].encoded_at, tree_);
  r.index_position = position;
  r.first_entry = slots_[i].first_entry;
  return r;
}

long RefTable::for_path(std::string_view path) const {
  // First paths increase strictly (checked when the list was decoded).
  std::size_t low = 0, high = count_;
  while (low < high) {
    std::size_t mid = low + (high - low) / 2;
    if (path < reread_ref(bytes_, slots_[mid].encoded_at, tree_).first_path) {
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
  const PageRef next = reread_ref(bytes_, slots_[i + 1].encoded_at, tree_);
  return PageBounds{next.first_offset, true, next.first_path};
}

}  // namespace kiln::format
