#include "core/elf64.hpp"

#include <cstring>

#include "core/error.hpp"

namespace kiln::elf64 {

bool has_magic(ByteView bytes) { return bytes.size >= 4 && std::memcmp(bytes.data, "\x7f" "ELF", 4) == 0; }

Header read_header(ByteView bytes, const std::string& what) {
  if (bytes.size < 64 || !has_magic(bytes)) fail(Errc::code_object, what + ": not an ELF file");
  if (bytes.data[4] != 2 || bytes.data[5] != 1) fail(Errc::code_object, what + ": not a little-endian 64-bit ELF file");
  Header h;
  h.os_abi = bytes.data[7];
  h.abi_version = bytes.data[8];
  h.type = load_le16(bytes.data + 16);
  h.machine = load_le16(bytes.data + 18);
  h.flags = load_le32(bytes.data + 48);
  h.section_offset = load_le64(bytes.data + 40);
  h.section_entry_size = load_le16(bytes.data + 58);
  h.section_count = load_le16(bytes.data + 60);
  h.section_names_index = load_le16(bytes.data + 62);
  return h;
}

template <typename Bytes>
ByteView find_section_in(const Bytes& bytes, const Header& h, const std::string& name, const std::string& what) {
  if (h.section_count == 0) return {};
  if (h.section_entry_size != 64 || h.section_names_index >= h.section_count) {
    fail(Errc::code_object, what + ": ELF section table is malformed");
  }
  auto section = [&](std::uint16_t i) {
    try {
      return bytes.sub(h.section_offset + static_cast<std::uint64_t>(i) * 64, 64);
    } catch (const Failure&) {
      fail(Errc::code_object, what + ": ELF section header " + std::to_string(i) + " lies outside the file");
    }
  };
  auto contents = [&](ByteView sh) {
    std::uint64_t offset = load_le64(sh.data + 24), size = load_le64(sh.data + 32);
    std::uint32_t type = load_le32(sh.data + 4);
    if (type == 8) return ByteView();  // SHT_NOBITS occupies no file space
    try {
      return bytes.sub(offset, size);
    } catch (const Failure&) {
      fail(Errc::code_object, what + ": ELF section contents lie outside the file");
    }
  };
  ByteView names = contents(section(h.section_names_index));
  for (std::uint16_t i = 0; i < h.section_count; ++i) {
    ByteView sh = section(i);
    std::uint32_t name_offset = load_le32(sh.data);
    if (name_offset >= names.size) continue;
    const char* s = reinterpret_cast<const char*>(names.data + name_offset);
    std::size_t max = names.size - name_offset;
    if (strnlen(s, max) == name.size() && std::memcmp(s, name.data(), name.size()) == 0) return contents(sh);
  }
  return {};
}

ByteView find_section(ByteView bytes, const Header& h, const std::string& name, const std::string& what) {
  return find_section_in(bytes, h, name, what);
}

ByteView find_section(const HeldBytes& bytes, const Header& h, const std::string& name, const std::string& what) {
  return find_section_in(bytes, h, name, what);
}

}  // namespace kiln::elf64
