// The narrow floating-point formats kernels take, to and from double: IEEE binary16 (f16),
// bfloat16 (bf16), and the two 8-bit formats of the OCP FP8 specification that NVIDIA's Hopper
// and Blackwell tensor cores, Triton (fp8e4nv, fp8e5) and PyTorch (float8_e4m3fn, float8_e5m2)
// use: f8e4m3 (E4M3, bias 7, no infinities, S.1111.111 its only NaN, largest finite 448) and
// f8e5m2 (E5M2, bias 15, IEEE-like with infinities and NaNs, largest finite 57344).
// Test vectors of these types are compared, and test scalars passed, through these.
#pragma once

#include <cstdint>

#include "core/manifest.hpp"

namespace kiln {

// The value of `bits` (the low scalar_type_size(t) bytes, little-endian) of narrow float type t.
double narrow_float_value(ScalarType t, std::uint32_t bits);

// `value` rounded to the nearest value of narrow float type t (ties to even), as its bits.
// False where the result would not be finite (NaN, or a magnitude past the type's largest finite
// value after rounding), which a caller reports: a test value must be representable.
bool narrow_float_bits(ScalarType t, double value, std::uint32_t* bits);

// True for f16, bf16, f8e4m3 and f8e5m2.
bool is_narrow_float(ScalarType t);

}  // namespace kiln
