// Two helpers the format's .cpp files share (format.cpp, member_rules.cpp, paged_index.cpp):
// internal to kiln_core, never included by another folder.
#pragma once

#include <array>
#include <cstring>
#include <string>
#include <string_view>

#include "core/bytes.hpp"

namespace kiln::format::detail {

template <std::size_t N>
void expect_magic(ByteReader& r, const std::array<std::uint8_t, N>& magic, const char* what) {
  ByteView got = r.take(N);
  if (std::memcmp(got.data, magic.data(), N) != 0) r.fail_here(std::string("bad magic: not ") + what);
}

inline std::string quoted(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f) {
      static const char digits[] = "0123456789abcdef";
      out += "\\x";
      out += digits[u >> 4];
      out += digits[u & 0xf];
    } else {
      out += c;
    }
  }
  return out + "'";
}

}  // namespace kiln::format::detail
