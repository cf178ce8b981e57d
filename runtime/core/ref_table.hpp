// A list of index references (FORMAT.md §3) held in place: the bytes the references were
// decoded and checked from, kept by the owner, and per reference only where its encoding starts,
// its first entry (derived), and a cell for what the owner makes of the page it names. A lookup
// reads the references it compares or follows again from those bytes (format::reread_ref), and
// a page's position in the index from the spans before it. A reader holding the head and the
// reference pages on its paths this way keeps 16 bytes per reference beside bytes it holds
// anyway, its page cells included, instead of a decoded PageRef (88 bytes) and a cell apart.
#pragma once

#include <atomic>
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
  // Reference i as decoded (its first path a view into the owner's bytes). Its page's position is
  // the first page's plus the spans of the references before it: i reads of 4 bytes (a lookup
  // follows one reference per list); walk() gives every reference at one read each.
  PageRef at(std::size_t i) const;
  // fn(i, reference i as at(i) gives it) for each reference in order.
  template <typename Fn>
  void walk(Fn fn) const {
    std::uint64_t position = first_position_;
    for (std::size_t i = 0; i < count_; ++i) {
      PageRef r = reread_ref(bytes_, slots_[i].encoded_at, tree_);
      r.index_position = position;
      r.first_entry = slots_[i].first_entry;
      position += r.span;
      fn(i, r);
    }
  }
  // The last reference whose first path is <= path, or -1 (ref_for_path's rule).
  long for_path(std::string_view path) const;
  // The last reference whose first entry is <= position (ref_for_position's rule).
  std::size_t for_position(std::size_t position) const;
  // The bounds of the page reference i names, inside a list whose own bounds are `outer`
  // (child_bounds' rule).
  PageBounds child_bounds(std::size_t i, const PageBounds& outer) const;
  // Reference i's cell, empty until the owner puts there what it made of the page i names
  // (ArchiveReader: the page, read on first use). The owner frees what it put in the cells.
  std::atomic<void*>& cell(std::size_t i) const { return slots_[i].cell; }

 private:
  struct Slot {
    std::uint32_t encoded_at = 0;
    std::uint32_t first_entry = 0;
    mutable std::atomic<void*> cell{nullptr};
  };

  ByteView bytes_;
  std::unique_ptr<Slot[]> slots_;
  std::size_t count_ = 0;
  std::uint32_t first_position_ = 0;  // the first referenced page's position in the index
  bool tree_ = false;
};

}  // namespace kiln::format
