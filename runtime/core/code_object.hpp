// Reads a code object's real target from its own bytes, so that a manifest cannot claim
// sm_90a for a file built for sm_80. These readers see author-supplied files at pack time
// and verified members at run time; they are bounds-checked either way.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/bytes.hpp"
#include "core/format.hpp"
#include "core/held_bytes.hpp"

namespace kiln {

struct CodeObjectInfo {
  format::Vendor backend = format::Vendor::none;
  format::CodeKind kind = format::CodeKind::none;
  std::vector<std::string> targets;  // sm_90a, compute_90, gfx90a:xnack+, ... as found in the file
  std::string detail;                // e.g. "PTX ISA 9.0", "ELF ABI v8", "code object v5"
  std::string ptx_isa;               // PTX only: the `.version` directive, e.g. "9.0"
};

// PTX's directives (.version, .target) must appear within its first this many bytes:
// inspect_ptx reads no further, so a reader needs no more of a PTX member to tell it.
constexpr std::size_t kPtxDirectivesWithin = 65536;
// Whether `bytes` (PTX, or its first bytes) hold both a .version and a .target directive.
bool has_ptx_directives(ByteView bytes);
// Whether `bytes` begin with a binary code object's magic (ELF, fatbin, offload bundle).
bool has_binary_code_magic(ByteView bytes);

// Identifies the file's kind by its magic and reads its targets. Throws Errc::code_object
// naming `what` when the bytes are not a code object kiln understands.
CodeObjectInfo inspect_code_object(ByteView bytes, const std::string& what);

// The same for a member of which only some bytes are held (its first bytes among them): the
// same answer or the same refusal as inspect_code_object would give on the whole member, or
// nothing where the bytes it needs are not all held (then ask inspect_code_object).
std::optional<CodeObjectInfo> inspect_held_code_object(const HeldBytes& bytes, const std::string& what);

// Backend-specific readers, used by inspect_code_object.
CodeObjectInfo inspect_cubin(ByteView bytes, const std::string& what);
CodeObjectInfo inspect_held_cubin(const HeldBytes& bytes, const std::string& what);  // throws NotHeld
CodeObjectInfo inspect_ptx(ByteView bytes, const std::string& what);
CodeObjectInfo inspect_fatbin(ByteView bytes, const std::string& what);
CodeObjectInfo inspect_amdgpu_elf(ByteView bytes, const std::string& what);
CodeObjectInfo inspect_offload_bundle(ByteView bytes, const std::string& what);

// True for an AMD processor name an AMDGPU code object can name (gfx90a, gfx942, gfx9-generic, ...):
// the EF_AMDGPU_MACH table kiln reads code objects with.
bool amdgpu_processor_known(const std::string& name);

// Whether a target claimed in a manifest is one the file provides, tag for tag: a claim
// of gfx90a:xnack+ is not met by a file built for gfx90a (any xnack), nor the reverse.
bool target_claim_matches(const std::string& claimed, const CodeObjectInfo& info);

}  // namespace kiln
