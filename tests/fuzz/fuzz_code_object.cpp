// libFuzzer target: the code-object readers (cubin and AMDGPU ELF headers and notes, PTX
// directives, fatbin and clang offload-bundle containers), through the sniffing entry point
// and each reader directly, so that a reader is exercised even on bytes another would claim; and
// the reader of held bytes (a full verification's first and last 4 KiB of a member), which must
// give the whole file's answer, the whole file's refusal, or none.
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

#include "core/code_object.hpp"
#include "core/error.hpp"
#include "core/held_bytes.hpp"

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

// The ends of `bytes` held as verify_member_in_place holds them, told, against the whole.
void held_agrees(kiln::ByteView bytes) {
  constexpr std::size_t kEnd = 4096;
  kiln::HeldBytes held;
  held.reset(bytes.size);
  const std::size_t head = bytes.size > 2 * kEnd ? kEnd : bytes.size;
  if (head > 0) std::memcpy(held.add(0, head), bytes.data, head);
  if (head < bytes.size) std::memcpy(held.add(bytes.size - kEnd, kEnd), bytes.data + bytes.size - kEnd, kEnd);
  std::optional<kiln::CodeObjectInfo> from_ends;
  std::string ends_refusal, whole_refusal;
  try {
    from_ends = kiln::inspect_held_code_object(held, "fuzz");
  } catch (const kiln::Failure& e) {
    ends_refusal = e.what();
  }
  std::optional<kiln::CodeObjectInfo> whole;
  try {
    whole = kiln::inspect_code_object(bytes, "fuzz");
  } catch (const kiln::Failure& e) {
    whole_refusal = e.what();
  }
  if (!ends_refusal.empty() && ends_refusal != whole_refusal) __builtin_trap();  // refused where the whole is not
  if (from_ends && (!whole || from_ends->targets != whole->targets || from_ends->kind != whole->kind)) __builtin_trap();
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
  held_agrees(bytes);
  return 0;
}
