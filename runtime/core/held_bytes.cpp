#include "core/held_bytes.hpp"

namespace kiln {

void HeldBytes::reset(std::uint64_t size) {
  size_ = size;
  spans_.clear();
  used_ = 0;
}

std::uint8_t* HeldBytes::add(std::uint64_t offset, std::size_t length) {
  if (bytes_.size() < used_ + length) bytes_.resize(used_ + length);
  spans_.push_back(Span{offset, used_, length});
  used_ += length;
  return bytes_.data() + spans_.back().at;
}

ByteView HeldBytes::sub(std::uint64_t offset, std::uint64_t length) const {
  // Past the member's end: the message a whole member's view would give.
  if (offset > size_ || length > size_ - offset) ByteView(nullptr, static_cast<std::size_t>(size_)).sub(offset, length);
  for (const Span& s : spans_) {
    if (offset >= s.offset && offset - s.offset <= s.length && length <= s.length - (offset - s.offset)) {
      return ByteView(bytes_.data() + s.at + (offset - s.offset), static_cast<std::size_t>(length));
    }
  }
  throw NotHeld{};
}

ByteView HeldBytes::head() const {
  if (spans_.empty() || spans_.front().offset != 0) return {};
  return span_bytes(spans_.front());
}

}  // namespace kiln
