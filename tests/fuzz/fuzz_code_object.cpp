// libFuzzer target: the code-object readers (cubin and AMDGPU ELF headers and notes, PTX
// directives, fatbin and clang offload-bundle containers), through the sniffing entry point
// and each reader directly, so that a reader is exercised even on bytes another would claim.
#include <cstdint>

#include "core/code_object.hpp"
#include "core/error.hpp"

namespace {

template <typename Reader>
void attempt(Reader reader, kiln::ByteView bytes) {
  try {
    kiln::CodeObjectInfo info = reader(bytes, "fuzz");
    (void)kiln::target_claim_matches("sm_90a", info);
    (void)kiln::target_claim_matches("gfx90a:xnack+", info);
  } catch (const kiln::Failure&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  kiln::ByteView bytes(data, size);
  attempt(kiln::inspect_code_object, bytes);
  attempt(kiln::inspect_cubin, bytes);
  attempt(kiln::inspect_ptx, bytes);
  attempt(kiln::inspect_fatbin, bytes);
  attempt(kiln::inspect_amdgpu_elf, bytes);
  attempt(kiln::inspect_offload_bundle, bytes);
  return 0;
}
