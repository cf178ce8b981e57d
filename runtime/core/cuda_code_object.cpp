// NVIDIA code objects: cubin (ELF, EM_CUDA), PTX (text), fatbin (NVIDIA's container).
#include <algorithm>
#include <cstring>
#include <string>

#include "core/code_object.hpp"
#include "core/elf64.hpp"
#include "core/error.hpp"

namespace kiln {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Finds "sm_<digits>[a|f]" in the ptxas command line that nvcc and Triton record in the
// .note.nv.tkinfo section. e_flags carries only the number, not the a/f suffix.
std::string arch_from_tool_note(ByteView note) {
  std::string_view s = note.as_chars();
  for (std::size_t pos = s.find("sm_"); pos != std::string_view::npos; pos = s.find("sm_", pos + 1)) {
    std::size_t end = pos + 3;
    while (end < s.size() && is_digit(s[end])) ++end;
    if (end == pos + 3) continue;
    if (end < s.size() && (s[end] == 'a' || s[end] == 'f')) ++end;
    return std::string(s.substr(pos, end - pos));
  }
  return "";
}

}  // namespace

namespace {

// `first`: the cubin's first bytes (at least its 64-byte header, or all it has), from `bytes`.
template <typename Bytes>
CodeObjectInfo inspect_cubin_in(const Bytes& bytes, ByteView first, const std::string& what) {
  elf64::Header h = elf64::read_header(first, what);
  if (h.machine != elf64::kMachineCuda) fail(Errc::code_object, what + ": ELF machine " + std::to_string(h.machine) + " is not EM_CUDA (190)");
  // CUDA 13's ELF ABI (version 8 and up) moved the SM number from bits 0-7 to bits 8-15,
  // and the arch-specific 'a' flag from EF_CUDA_ACCELERATORS_V1 (0x800) to bit 3 (0x8).
  // ptxas 13.0 does not always set the flag (its sm_90a cubins lack it), so the ptxas
  // command line in .note.nv.tkinfo is read as well where it is present.
  bool v8 = h.abi_version >= 8;
  unsigned sm = v8 ? (h.flags >> 8) & 0xff : h.flags & 0xff;
  if (sm < 10) fail(Errc::code_object, what + ": cubin e_flags 0x" + to_hex(first.data + 48, 4) + " name no SM");
  std::string arch = "sm_" + std::to_string(sm);
  if (h.flags & (v8 ? 0x8u : 0x800u)) arch += "a";
  std::string noted = arch_from_tool_note(elf64::find_section(bytes, h, ".note.nv.tkinfo", what));
  if (!noted.empty()) {
    std::string number = noted.substr(0, noted.find_first_of("af", 3));
    if (number != "sm_" + std::to_string(sm) || (arch.back() == 'a' && noted.back() != 'a')) {
      fail(Errc::code_object, what + ": e_flags say " + arch + " but the ptxas note says " + noted);
    }
    arch = noted;
  }
  CodeObjectInfo info;
  info.backend = format::Vendor::cuda;
  info.kind = format::CodeKind::cubin;
  info.targets.push_back(arch);
  info.detail = "cubin, ELF ABI v" + std::to_string(h.abi_version);
  return info;
}

}  // namespace

CodeObjectInfo inspect_cubin(ByteView bytes, const std::string& what) { return inspect_cubin_in(bytes, bytes, what); }

CodeObjectInfo inspect_held_cubin(const HeldBytes& bytes, const std::string& what) {
  return inspect_cubin_in(bytes, bytes.head(), what);
}

namespace {

// The .version and .target directives among the first kPtxDirectivesWithin bytes: they come
// first, before any function.
void ptx_directives(std::string_view text, std::string* version, std::string* target) {
  std::size_t pos = 0;
  while (pos < text.size() && pos < kPtxDirectivesWithin && (version->empty() || target->empty())) {
    std::size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    std::size_t start = line.find_first_not_of(" \t\r");
    if (start == std::string_view::npos) continue;
    line = line.substr(start);
    auto word_after = [&](std::string_view directive) {
      std::string_view rest = line.substr(directive.size());
      std::size_t b = rest.find_first_not_of(" \t");
      if (b == std::string_view::npos) return std::string();
      std::size_t e = rest.find_first_of(" \t\r,/", b);
      return std::string(rest.substr(b, e == std::string_view::npos ? std::string_view::npos : e - b));
    };
    if (line.rfind(".version", 0) == 0) *version = word_after(".version");
    else if (line.rfind(".target", 0) == 0) *target = word_after(".target");
  }
}

}  // namespace

bool has_ptx_directives(ByteView bytes) {
  std::string version, target;
  ptx_directives(bytes.as_chars(), &version, &target);
  return !version.empty() && !target.empty();
}

CodeObjectInfo inspect_ptx(ByteView bytes, const std::string& what) {
  std::string version, target;
  ptx_directives(bytes.as_chars(), &version, &target);
  if (target.rfind("sm_", 0) != 0 || target.size() < 5 || !is_digit(target[3])) {
    fail(Errc::code_object, what + ": no '.target sm_XY' directive found; not PTX");
  }
  if (version.empty()) fail(Errc::code_object, what + ": no '.version' directive found; not PTX");
  CodeObjectInfo info;
  info.backend = format::Vendor::cuda;
  info.kind = format::CodeKind::ptx;
  info.targets.push_back("compute_" + target.substr(3));
  info.detail = "PTX ISA " + version;
  info.ptx_isa = version;
  return info;
}

CodeObjectInfo inspect_fatbin(ByteView bytes, const std::string& what) {
  // NVIDIA's fatbin container: a 16-byte header {u32 magic 0xBA55ED50, u16 version,
  // u16 header size, u64 payload size}, then entries of {u16 kind (1 PTX, 2 ELF), u16,
  // u32 entry header size, u64 payload size, ..., u32 SM at +28, u32 flags at +40}.
  ByteReader r(bytes, what + " (fatbin)");
  if (r.u32() != 0xBA55ED50u) fail(Errc::code_object, what + ": not a fatbin");
  r.u16();
  std::uint16_t header_size = r.u16();
  std::uint64_t body = r.u64();
  if (header_size != 16 || body > bytes.size - 16) fail(Errc::code_object, what + ": fatbin header sizes are inconsistent");
  CodeObjectInfo info;
  info.backend = format::Vendor::cuda;
  info.kind = format::CodeKind::fatbin;
  std::uint64_t off = 16, end = 16 + body;
  while (off < end) {
    if (end - off < 48) fail(Errc::code_object, what + ": fatbin entry at " + std::to_string(off) + " is truncated");
    const std::uint8_t* e = bytes.data + off;
    std::uint16_t kind = load_le16(e);
    std::uint32_t entry_header = load_le32(e + 4);
    std::uint64_t payload = load_le64(e + 8);
    std::uint32_t sm = load_le32(e + 28);
    if (entry_header < 48 || entry_header > end - off || payload > end - off - entry_header) {
      fail(Errc::code_object, what + ": fatbin entry at " + std::to_string(off) + " overruns the container");
    }
    ByteView inner(e + entry_header, static_cast<std::size_t>(payload));
    std::string arch;
    if (kind == 1) {
      arch = "compute_" + std::to_string(sm);
    } else if (kind == 2) {
      arch = "sm_" + std::to_string(sm);
      if (elf64::has_magic(inner)) arch = inspect_cubin(inner, what + " (fatbin entry)").targets[0];
    }
    // Libraries hold many entries per arch; each target is listed once, in file order.
    if (!arch.empty() && std::find(info.targets.begin(), info.targets.end(), arch) == info.targets.end()) {
      info.targets.push_back(arch);
    }
    off += entry_header + payload;
  }
  if (info.targets.empty()) fail(Errc::code_object, what + ": the fatbin holds no PTX or cubin entry");
  info.detail = "fatbin, " + std::to_string(info.targets.size()) + " entries";
  return info;
}

}  // namespace kiln
