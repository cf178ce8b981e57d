// AMD code objects: AMDGPU ELF (EM_AMDGPU, HSA OS ABI) and clang offload bundles.
// Encodings from LLVM's AMDGPUUsage and ClangOffloadBundler documents.
#include <cstring>
#include <string>

#include "core/code_object.hpp"
#include "core/elf64.hpp"
#include "core/error.hpp"

namespace kiln {
namespace {

constexpr std::uint8_t kOsAbiHsa = 64;

struct Processor {
  std::uint32_t mach;
  const char* name;
};

// EF_AMDGPU_MACH values (e_flags & 0xff) for the processors a HIP build targets today.
constexpr Processor kProcessors[] = {
    {0x20, "gfx600"},  {0x21, "gfx601"},  {0x22, "gfx700"},  {0x23, "gfx701"},  {0x24, "gfx702"},
    {0x25, "gfx703"},  {0x26, "gfx704"},  {0x28, "gfx801"},  {0x29, "gfx802"},  {0x2a, "gfx803"},
    {0x2b, "gfx810"},  {0x2c, "gfx900"},  {0x2d, "gfx902"},  {0x2e, "gfx904"},  {0x2f, "gfx906"},
    {0x30, "gfx908"},  {0x31, "gfx909"},  {0x32, "gfx90c"},  {0x33, "gfx1010"}, {0x34, "gfx1011"},
    {0x35, "gfx1012"}, {0x36, "gfx1030"}, {0x37, "gfx1031"}, {0x38, "gfx1032"}, {0x39, "gfx1033"},
    {0x3a, "gfx602"},  {0x3b, "gfx705"},  {0x3c, "gfx805"},  {0x3d, "gfx1035"}, {0x3e, "gfx1034"},
    {0x3f, "gfx90a"},  {0x40, "gfx940"},  {0x41, "gfx1100"}, {0x42, "gfx1013"}, {0x43, "gfx1150"},
    {0x44, "gfx1103"}, {0x45, "gfx1036"}, {0x46, "gfx1101"}, {0x47, "gfx1102"}, {0x48, "gfx1200"},
    {0x4a, "gfx1151"}, {0x4b, "gfx941"},  {0x4c, "gfx942"},  {0x4e, "gfx1201"}, {0x4f, "gfx950"},
    {0x55, "gfx1152"}, {0x58, "gfx1153"},
    // Generic targets (code object v6): one code object for a family of processors.
    {0x51, "gfx9-generic"}, {0x52, "gfx10-1-generic"}, {0x53, "gfx10-3-generic"}, {0x54, "gfx11-generic"},
    {0x59, "gfx12-generic"}, {0x5f, "gfx9-4-generic"},
};

const char* processor_name(std::uint32_t mach) {
  for (const Processor& p : kProcessors) {
    if (p.mach == mach) return p.name;
  }
  return nullptr;
}

std::string feature(const char* name, std::uint32_t bits, std::uint32_t any, std::uint32_t off, std::uint32_t on) {
  if (bits == on) return std::string(":") + name + "+";
  if (bits == off) return std::string(":") + name + "-";
  (void)any;  // "any" and "unsupported" leave the feature out of the target ID
  return "";
}

}  // namespace

bool amdgpu_processor_known(const std::string& name) {
  for (const Processor& p : kProcessors) {
    if (name == p.name) return true;
  }
  return false;
}

// Reads the 64-byte ELF header alone: a full verification gives it a member's first bytes only
// (inspect_held_code_object).
CodeObjectInfo inspect_amdgpu_elf(ByteView bytes, const std::string& what) {
  elf64::Header h = elf64::read_header(bytes, what);
  if (h.machine != elf64::kMachineAmdgpu) fail(Errc::code_object, what + ": ELF machine " + std::to_string(h.machine) + " is not EM_AMDGPU (0xE0)");
  if (h.os_abi != kOsAbiHsa) fail(Errc::code_object, what + ": OS ABI " + std::to_string(h.os_abi) + " is not AMDGPU HSA (64)");
  if (h.abi_version < 2 || h.abi_version > 4) {
    fail(Errc::code_object, what + ": ABI version " + std::to_string(h.abi_version) + " is not code object v4, v5 or v6");
  }
  const char* proc = processor_name(h.flags & 0xff);
  if (proc == nullptr) fail(Errc::code_object, what + ": unknown EF_AMDGPU_MACH 0x" + to_hex(bytes.data + 48, 1));
  // Code object v4+: sramecc in bits 0xc00 (any 0x400, off 0x800, on 0xc00), xnack in
  // bits 0x300 (any 0x100, off 0x200, on 0x300). The target ID lists sramecc first.
  std::string id = proc;
  id += feature("sramecc", h.flags & 0xc00, 0x400, 0x800, 0xc00);
  id += feature("xnack", h.flags & 0x300, 0x100, 0x200, 0x300);
  CodeObjectInfo info;
  info.backend = format::Vendor::hip;
  info.kind = format::CodeKind::amdgpu_elf;
  info.targets.push_back(id);
  info.detail = "AMDGPU code object v" + std::to_string(h.abi_version + 2);
  return info;
}

CodeObjectInfo inspect_offload_bundle(ByteView bytes, const std::string& what) {
  static const char kMagic[] = "__CLANG_OFFLOAD_BUNDLE__";
  if (bytes.size >= 4 && std::memcmp(bytes.data, "CCOB", 4) == 0) {
    fail(Errc::code_object, what + ": compressed clang offload bundles (CCOB) are not read by this kiln; "
                                   "bundle without --offload-compress");
  }
  ByteReader r(bytes, what + " (offload bundle)");
  ByteView magic = r.take(24);
  if (std::memcmp(magic.data, kMagic, 24) != 0) fail(Errc::code_object, what + ": not a clang offload bundle");
  std::uint64_t count = r.u64();
  if (count == 0 || count > 1024) fail(Errc::code_object, what + ": offload bundle entry count " + std::to_string(count) + " is out of range");
  CodeObjectInfo info;
  info.backend = format::Vendor::hip;
  info.kind = format::CodeKind::offload_bundle;
  for (std::uint64_t i = 0; i < count; ++i) {
    std::uint64_t offset = r.u64(), size = r.u64(), id_len = r.u64();
    if (id_len > 1024) fail(Errc::code_object, what + ": offload bundle entry id is too long");
    std::string id(r.take(static_cast<std::size_t>(id_len)).as_chars());
    static const std::string kHip = "hipv4-amdgcn-amd-amdhsa--";
    if (id.rfind(kHip, 0) != 0) continue;  // the host entry and others carry no device code
    ByteView entry;
    try {
      entry = bytes.sub(offset, size);
    } catch (const Failure&) {
      fail(Errc::code_object, what + ": offload bundle entry '" + id + "' lies outside the file");
    }
    std::string claimed = id.substr(kHip.size());
    std::string actual = inspect_amdgpu_elf(entry, what + " (bundle entry '" + id + "')").targets[0];
    if (claimed != actual) {
      fail(Errc::code_object, what + ": bundle entry '" + id + "' holds a code object for " + actual);
    }
    info.targets.push_back(actual);
  }
  if (info.targets.empty()) fail(Errc::code_object, what + ": the offload bundle holds no hipv4 device code");
  info.detail = "clang offload bundle, " + std::to_string(info.targets.size()) + " device entries";
  return info;
}

}  // namespace kiln
