// NumPy .npy files (format versions 1.0, 2.0 and 3.0): the test vectors every ML user can
// write. Little-endian, C order, the dtypes kiln kernels take; anything else is refused.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/bytes.hpp"
#include "core/manifest.hpp"

namespace kiln {

struct NpyArray {
  ScalarType dtype = ScalarType::f32;
  std::vector<std::uint64_t> shape;
  ByteView data;  // a view into the bytes given to parse_npy
  std::uint64_t count() const;
};

// Parses and checks a whole .npy file; throws Errc::malformed naming `what`.
NpyArray parse_npy(ByteView bytes, const std::string& what);
// Writes a C-order little-endian .npy (version 1.0) of `dtype` and `shape`.
std::vector<std::uint8_t> write_npy(ScalarType dtype, const std::vector<std::uint64_t>& shape, const void* data);

// Reads element i of a numeric array as double (f16, bf16 and fp8 converted).
double npy_element(const NpyArray& a, std::uint64_t i);

// Views `a` as holding values of `param`, a parameter's element type: true where its dtype is that
// type, or where it holds that type's raw bits (bf16 as <u2, f8e4m3 and f8e5m2 as |u1: NumPy has
// no dtype for them); false, `a` unchanged, otherwise.
bool npy_view_as(NpyArray* a, ScalarType param);

}  // namespace kiln
