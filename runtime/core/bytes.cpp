#include "core/bytes.hpp"

#include "core/error.hpp"

namespace kiln {

void ByteView::out_of_range(std::uint64_t offset, std::uint64_t length) const {
  fail(Errc::malformed, "range [" + std::to_string(offset) + ", +" + std::to_string(length) + ") lies outside " +
                            std::to_string(size) + " bytes");
}

std::uint16_t load_le16(const std::uint8_t* p) {
  return static_cast<std::uint16_t>(p[0] | (p[1] << 8));
}
std::uint32_t load_le24(const std::uint8_t* p) {
  return static_cast<std::uint32_t>(p[0]) | static_cast<std::uint32_t>(p[1]) << 8 | static_cast<std::uint32_t>(p[2]) << 16;
}
std::uint32_t load_le32(const std::uint8_t* p) {
  return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
         (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
}
std::uint64_t load_le64(const std::uint8_t* p) {
  return static_cast<std::uint64_t>(load_le32(p)) | (static_cast<std::uint64_t>(load_le32(p + 4)) << 32);
}
void store_le32(std::uint8_t* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}
void store_le64(std::uint8_t* p, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}

std::string ByteReader::what() const {
  if (borrowed_what_ != nullptr) return *borrowed_what_;
  if (literal_what_ == nullptr) return what_;
  return numbered_ ? literal_what_ + std::to_string(number_) : std::string(literal_what_);
}

void ByteReader::ran_out(std::size_t n) const {
  fail_here("needs " + std::to_string(n) + " more bytes but only " + std::to_string(remaining()) + " remain");
}

void ByteReader::fail_here(const std::string& message) const {
  fail(Errc::malformed, what() + " at offset " + std::to_string(pos_) + ": " + message);
}

void ByteWriter::u16(std::uint16_t v) {
  out_.push_back(static_cast<std::uint8_t>(v));
  out_.push_back(static_cast<std::uint8_t>(v >> 8));
}
void ByteWriter::u32(std::uint32_t v) {
  std::uint8_t b[4];
  store_le32(b, v);
  bytes(b, 4);
}
void ByteWriter::u64(std::uint64_t v) {
  std::uint8_t b[8];
  store_le64(b, v);
  bytes(b, 8);
}
void ByteWriter::bytes(const void* p, std::size_t n) {
  auto* b = static_cast<const std::uint8_t*>(p);
  out_.insert(out_.end(), b, b + n);
}
void ByteWriter::string16(std::string_view s) {
  // The last line of defence: a length that does not fit would be stored modulo 65,536 and the
  // writer would seal what every reader refuses. Callers check their own, friendlier limits first.
  if (s.size() > 0xffff) {
    fail(Errc::limit, "a string of " + std::to_string(s.size()) + " bytes does not fit a 16-bit length (at most 65535): '" +
                          std::string(s.substr(0, 40)) + "...'");
  }
  u16(static_cast<std::uint16_t>(s.size()));
  bytes(s.data(), s.size());
}

std::string to_hex(const std::uint8_t* p, std::size_t n) {
  static const char digits[] = "0123456789abcdef";
  std::string s(2 * n, '0');
  for (std::size_t i = 0; i < n; ++i) {
    s[2 * i] = digits[p[i] >> 4];
    s[2 * i + 1] = digits[p[i] & 0xf];
  }
  return s;
}

}  // namespace kiln
