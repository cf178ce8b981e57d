// A list of index references (FORMAT.md §3) held in place: the bytes the references were
// decoded and checked from, kept by the owner, and per reference only where its encoding starts
// and what was derived for it (its page's position in the index, its first entry). A lookup
// reads the references it compares or follows again from those bytes (format::reread_ref). A
// reader holding the head and the reference pages on its paths this way keeps 12 bytes per
// reference beside bytes it holds anyway, instead of a decoded PageRef (88 bytes) each: most of
// what opening an archive of thousands of kernels added to the heap beyond the bytes it read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "core/bytes.hpp"
#include "core/format.hpp"

namespace kiln::format {

class RefTable {
 public:
  RefTable() = default;
  // `refs` as decode_index_head or decode_reference_page returned them from `bytes`, which must
  // outlive the table, unchanged.
  RefTable(const std::vector<PageRef>& refs, ByteView bytes, bool tree);

  std::size_t size() const { return count_; }
  // Reference i as decoded (its first path a view into the owner's bytes).
  PageRef at(std::size_t i) const;
  // The last reference whose first path is <= path, or -1 (ref_for_path's rule).
  long for_path(std::string_view path) const;
  // The last reference whose first entry is <= position (ref_for_position's rule).
  std::size_t for_position(std::size_t position) const;
  // The bounds of the page reference i names, inside a list whose own bounds are `outer`
  // (child_bounds' rule).
  PageBounds child_bounds(std::size_t i, const PageBounds& outer) const;

 private:
  struct Slot {
    std::uint32_t encoded_at;
    std::uint32_t index_position;
    std::uint32_t first_entry;
  };

  ByteView bytes_;
  std::unique_ptr<Slot[]> slots_;
  std::size_t count_ = 0;
  bool tree_ = false;
};

}  // namespace kiln::format
