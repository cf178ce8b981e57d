// libFuzzer target: the .npy reader behind [[kernel.test]] vectors, and element access on
// whatever it accepts.
#include <cstdint>

#include "core/error.hpp"
#include "core/npy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    kiln::NpyArray array = kiln::parse_npy(kiln::ByteView(data, size), "fuzz.npy");
    std::uint64_t n = array.count();
    if (n > 0) {
      (void)kiln::npy_element(array, 0);
      (void)kiln::npy_element(array, n - 1);
    }
  } catch (const kiln::Failure&) {
  }
  return 0;
}
