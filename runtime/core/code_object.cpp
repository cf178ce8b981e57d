#include "core/code_object.hpp"

#include <cstring>

#include "core/elf64.hpp"
#include "core/error.hpp"

namespace kiln {

bool has_binary_code_magic(ByteView bytes) {
  return elf64::has_magic(bytes) || (bytes.size >= 4 && load_le32(bytes.data) == 0xBA55ED50u) ||
         (bytes.size >= 24 && std::memcmp(bytes.data, "__CLANG_OFFLOAD_BUNDLE__", 24) == 0) ||
         (bytes.size >= 4 && std::memcmp(bytes.data, "CCOB", 4) == 0);
}

CodeObjectInfo inspect_code_object(ByteView bytes, const std::string& what) {
  if (elf64::has_magic(bytes)) {
    elf64::Header h = elf64::read_header(bytes, what);
    if (h.machine == elf64::kMachineCuda) return inspect_cubin(bytes, what);
    if (h.machine == elf64::kMachineAmdgpu) return inspect_amdgpu_elf(bytes, what);
    fail(Errc::code_object, what + ": ELF machine " + std::to_string(h.machine) + " is neither EM_CUDA nor EM_AMDGPU");
  }
  if (bytes.size >= 4 && load_le32(bytes.data) == 0xBA55ED50u) return inspect_fatbin(bytes, what);
  if ((bytes.size >= 24 && std::memcmp(bytes.data, "__CLANG_OFFLOAD_BUNDLE__", 24) == 0) ||
      (bytes.size >= 4 && std::memcmp(bytes.data, "CCOB", 4) == 0)) {
    return inspect_offload_bundle(bytes, what);
  }
  std::string_view text = bytes.as_chars();
  if (text.find(".target") != std::string_view::npos && text.find(".version") != std::string_view::npos) {
    return inspect_ptx(bytes, what);
  }
  fail(Errc::code_object, what + ": not a cubin, PTX, fatbin, AMDGPU code object or offload bundle");
}

std::optional<CodeObjectInfo> inspect_held_code_object(const HeldBytes& bytes, const std::string& what) {
  // Only the ELF kinds are told from a few places of the file (the header; a cubin's section table,
  // section names and ptxas note); fatbins, offload bundles and PTX are read whole.
  ByteView first = bytes.head();
  if (first.size == bytes.size()) return inspect_code_object(first, what);  // held whole
  if (first.size < 64 || !elf64::has_magic(first)) return std::nullopt;
  elf64::Header h = elf64::read_header(first, what);
  try {
    if (h.machine == elf64::kMachineCuda) return inspect_held_cubin(bytes, what);
  } catch (const NotHeld&) {
    return std::nullopt;
  }
  if (h.machine == elf64::kMachineAmdgpu) return inspect_amdgpu_elf(first, what);  // its header alone
  fail(Errc::code_object, what + ": ELF machine " + std::to_string(h.machine) + " is neither EM_CUDA nor EM_AMDGPU");
}

bool target_claim_matches(const std::string& claimed, const CodeObjectInfo& info) {
  for (const std::string& t : info.targets) {
    if (t == claimed) return true;
  }
  return false;
}

}  // namespace kiln
