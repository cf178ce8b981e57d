// Some of a member's stored bytes, copied privately while the rest of the member was only hashed
// where it lies in the file: what a full verification's header checks read (FORMAT.md §4, §6).
#pragma once

#include <cstdint>
#include <vector>

#include "core/bytes.hpp"

namespace kiln {

// Thrown by HeldBytes::sub for a range inside the member that was not copied: not a refusal
// (the member is fine as far as anyone knows), the caller's cue to copy the whole member instead.
struct NotHeld {};

// A member of `size()` bytes of which only some spans are held, each a private copy taken before
// the member's digest was computed over it (so once the digest matches, every held byte is one
// the signer signed). Readers of headers ask for ranges as they would of the whole member.
class HeldBytes {
 public:
  // Forgets the spans and sets the member's size; keeps the buffer's capacity for the next member.
  void reset(std::uint64_t size);
  std::uint64_t size() const { return size_; }
  // Appends a span at `offset` (spans come in increasing order and do not overlap) and returns
  // where to copy its `length` bytes; valid until the next call.
  std::uint8_t* add(std::uint64_t offset, std::size_t length);
  // The held bytes [offset, offset + length). A range past the member's end fails as
  // ByteView::sub fails (Errc::malformed); one inside it but not held throws NotHeld.
  ByteView sub(std::uint64_t offset, std::uint64_t length) const;
  // The first held span when it starts at 0 (the member's first bytes), else an empty view.
  ByteView head() const;

  struct Span {
    std::uint64_t offset;  // in the member
    std::size_t at;        // in bytes_
    std::size_t length;
  };
  const std::vector<Span>& spans() const { return spans_; }
  ByteView span_bytes(const Span& s) const { return ByteView(bytes_.data() + s.at, s.length); }

 private:
  std::uint64_t size_ = 0;
  std::vector<Span> spans_;
  std::vector<std::uint8_t> bytes_;
  std::size_t used_ = 0;
};

}  // namespace kiln
