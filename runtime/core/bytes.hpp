// Bounds-checked little-endian reading and writing of the archive's binary structures.
// Every read names the structure being parsed so an error says where it stopped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"

namespace kiln {

struct ByteView {
  const std::uint8_t* data = nullptr;
  std::size_t size = 0;

  ByteView() = default;
  ByteView(const std::uint8_t* d, std::size_t n) : data(d), size(n) {}
  explicit ByteView(const std::vector<std::uint8_t>& v) : data(v.data()), size(v.size()) {}
  // Throws if out of range. Inline (only the failure is out of line): every lookup in the
  // index takes a few dozen of these.
  ByteView sub(std::uint64_t offset, std::uint64_t length) const {
    if (offset > size || length > size - offset) out_of_range(offset, length);
    return ByteView(data + offset, static_cast<std::size_t>(length));
  }
  std::string_view as_chars() const { return {reinterpret_cast<const char*>(data), size}; }

 private:
  [[noreturn]] void out_of_range(std::uint64_t offset, std::uint64_t length) const;
};

// Reads fields in order; throws Errc::malformed naming `what` and the offset when the
// bytes run out.
class ByteReader {
 public:
  // `what` names the bytes in a failure's message. A literal (static storage only) is kept as a
  // pointer: a lookup in the index makes a reader for each entry or reference it reads again,
  // and copying the name for each was a visible part of a lookup's time.
  ByteReader(ByteView bytes, const char* what) : bytes_(bytes), literal_what_(what) {}
  ByteReader(ByteView bytes, std::string what) : bytes_(bytes), what_(std::move(what)) {}
  // Named by a literal and a number ("index page at " and its position), joined only when a
  // message needs the name: an open decodes a few pages, and each name made was an allocation.
  ByteReader(ByteView bytes, const char* what, std::uint64_t number)
      : bytes_(bytes), literal_what_(what), number_(number), numbered_(true) {}
  // Named by a string the caller keeps alive as long as the reader (a decoder's own parameter):
  // not copied, so that decoding a kernel's record makes no allocation for its name.
  static ByteReader borrowing(ByteView bytes, const std::string& what) {
    ByteReader r(bytes, static_cast<const char*>(nullptr));
    r.borrowed_what_ = &what;
    return r;
  }

  // Inline (little-endian loads by bytes, which compilers fuse): every field of every index
  // entry and reference read passes here; only the failure is out of line.
  std::uint8_t u8() {
    need(1);
    return bytes_.data[pos_++];
  }
  std::uint16_t u16() { return static_cast<std::uint16_t>(little_endian<2>()); }
  std::uint32_t u32() { return static_cast<std::uint32_t>(little_endian<4>()); }
  std::uint64_t u64() { return little_endian<8>(); }
  ByteView take(std::size_t n) {
    need(n);
    ByteView v(bytes_.data + pos_, n);
    pos_ += n;
    return v;
  }
  std::string string16() { return std::string(string16_view()); }  // u16 length, then that many bytes
  // The same field as a view into the bytes being read: valid while they are.
  std::string_view string16_view() { return take(u16()).as_chars(); }

  std::size_t offset() const { return pos_; }
  std::size_t remaining() const { return bytes_.size - pos_; }
  std::string what() const;
  [[noreturn]] void fail_here(const std::string& message) const;

 private:
  // Inline: every field of every index entry read passes here; only the failure is out of line.
  void need(std::size_t n) const {
    if (n > remaining()) ran_out(n);
  }
  [[noreturn]] void ran_out(std::size_t n) const;
  template <std::size_t N>
  std::uint64_t little_endian() {
    need(N);
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < N; ++i) v |= static_cast<std::uint64_t>(bytes_.data[pos_ + i]) << (8 * i);
    pos_ += N;
    return v;
  }
  ByteView bytes_;
  const char* literal_what_ = nullptr;  // the name when given as a literal; what_ otherwise
  const std::string* borrowed_what_ = nullptr;  // the name when borrowed (borrowing())
  std::string what_;
  std::uint64_t number_ = 0;  // appended to literal_what_ where numbered_
  bool numbered_ = false;
  std::size_t pos_ = 0;
};

class ByteWriter {
 public:
  void u8(std::uint8_t v) { out_.push_back(v); }
  void u16(std::uint16_t v);
  void u32(std::uint32_t v);
  void u64(std::uint64_t v);
  void bytes(const void* p, std::size_t n);
  void string16(std::string_view s);  // throws Errc::limit over 65535 bytes
  std::vector<std::uint8_t>& buffer() { return out_; }

 private:
  std::vector<std::uint8_t> out_;
};

std::uint64_t load_le64(const std::uint8_t* p);
std::uint32_t load_le32(const std::uint8_t* p);
std::uint32_t load_le24(const std::uint8_t* p);  // a zstd block header
std::uint16_t load_le16(const std::uint8_t* p);
void store_le64(std::uint8_t* p, std::uint64_t v);
void store_le32(std::uint8_t* p, std::uint32_t v);

std::string to_hex(const std::uint8_t* p, std::size_t n);

}  // namespace kiln
