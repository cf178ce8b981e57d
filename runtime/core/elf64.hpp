// The few ELF64 fields kiln reads from NVIDIA cubins and AMDGPU code objects.
#pragma once

#include <cstdint>
#include <string>

#include "core/bytes.hpp"
#include "core/held_bytes.hpp"

namespace kiln::elf64 {

constexpr std::uint16_t kMachineCuda = 190;    // EM_CUDA
constexpr std::uint16_t kMachineAmdgpu = 0xE0;  // EM_AMDGPU

struct Header {
  std::uint8_t os_abi = 0;
  std::uint8_t abi_version = 0;
  std::uint16_t type = 0;
  std::uint16_t machine = 0;
  std::uint32_t flags = 0;
  std::uint64_t section_offset = 0;
  std::uint16_t section_entry_size = 0;
  std::uint16_t section_count = 0;
  std::uint16_t section_names_index = 0;
};

bool has_magic(ByteView bytes);
// Throws Errc::code_object naming `what` if the header is not a little-endian ELF64 one.
Header read_header(ByteView bytes, const std::string& what);
// The bytes of the section called `name`, or an empty view if there is none.
ByteView find_section(ByteView bytes, const Header& h, const std::string& name, const std::string& what);
// The same in a member of which only some bytes are held: throws NotHeld where the section table,
// the names or the section lie outside them.
ByteView find_section(const HeldBytes& bytes, const Header& h, const std::string& name, const std::string& what);

}  // namespace kiln::elf64
