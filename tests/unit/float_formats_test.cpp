// The narrow float formats test vectors and scalars use: every code decoded against the formats'
// definitions, every finite code encoded back to itself, rounding to nearest even at the midpoints,
// and values past the largest finite one refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "core/float_formats.hpp"
#include "core/npy.hpp"

namespace kiln {
namespace {

TEST(FloatFormats, KnownCodesDecodeToTheirValues) {
  EXPECT_EQ(narrow_float_value(ScalarType::f16, 0x3C00), 1.0);
  EXPECT_EQ(narrow_float_value(ScalarType::f16, 0x7BFF), 65504.0);
  EXPECT_EQ(narrow_float_value(ScalarType::f16, 0x0001), std::ldexp(1.0, -24));
  EXPECT_TRUE(std::isinf(narrow_float_value(ScalarType::f16, 0x7C00)));
  EXPECT_EQ(narrow_float_value(ScalarType::bf16, 0x3F80), 1.0);
  EXPECT_EQ(narrow_float_value(ScalarType::bf16, 0xC040), -3.0);
  EXPECT_EQ(narrow_float_value(ScalarType::bf16, 0x7F7F), 0x1.FEp127);
  // E4M3 ("fn"): bias 7, no infinities, S.1111.111 the only NaN, 448 the largest finite.
  EXPECT_EQ(narrow_float_value(ScalarType::f8e4m3, 0x38), 1.0);
  EXPECT_EQ(narrow_float_value(ScalarType::f8e4m3, 0x7E), 448.0);
  EXPECT_EQ(narrow_float_value(ScalarType::f8e4m3, 0x78), 256.0);  // exponent field 15 holds numbers
  EXPECT_EQ(narrow_float_value(ScalarType::f8e4m3, 0x01), std::ldexp(1.0, -9));
  EXPECT_EQ(narrow_float_value(ScalarType::f8e4m3, 0xB8), -1.0);
  EXPECT_TRUE(std::isnan(narrow_float_value(ScalarType::f8e4m3, 0x7F)));
  EXPECT_TRUE(std::isnan(narrow_float_value(ScalarType::f8e4m3, 0xFF)));
  // E5M2: bias 15, IEEE-like, 57344 the largest finite.
  EXPECT_EQ(narrow_float_value(ScalarType::f8e5m2, 0x3C), 1.0);
  EXPECT_EQ(narrow_float_value(ScalarType::f8e5m2, 0x7B), 57344.0);
  EXPECT_EQ(narrow_float_value(ScalarType::f8e5m2, 0x01), std::ldexp(1.0, -16));
  EXPECT_TRUE(std::isinf(narrow_float_value(ScalarType::f8e5m2, 0x7C)));
  EXPECT_TRUE(std::isnan(narrow_float_value(ScalarType::f8e5m2, 0x7D)));
}

TEST(FloatFormats, EveryFiniteCodeEncodesBackToItself) {
  for (ScalarType t : {ScalarType::f16, ScalarType::bf16, ScalarType::f8e4m3, ScalarType::f8e5m2}) {
    std::uint32_t codes = scalar_type_size(t) == 1 ? 256 : 65536;
    int finite = 0;
    for (std::uint32_t c = 0; c < codes; ++c) {
      double v = narrow_float_value(t, c);
      std::uint32_t back = 0;
      if (!std::isfinite(v)) {
        EXPECT_FALSE(narrow_float_bits(t, v, &back)) << scalar_type_name(t) << " code " << c;
        continue;
      }
      ++finite;
      ASSERT_TRUE(narrow_float_bits(t, v, &back)) << scalar_type_name(t) << " code " << c;
      EXPECT_EQ(back, c) << scalar_type_name(t) << " value " << v;
    }
    // All codes but the NaNs (and infinities): f16 2048 non-finite, bf16 256, e4m3 2, e5m2 8.
    int expected = t == ScalarType::f16 ? 65536 - 2048 : t == ScalarType::bf16 ? 65536 - 256
                   : t == ScalarType::f8e4m3 ? 254 : 248;
    EXPECT_EQ(finite, expected) << scalar_type_name(t);
  }
}

TEST(FloatFormats, MidpointsRoundToEvenAndOverflowIsRefused) {
  std::uint32_t b = 0;
  // 1 + 2^-4 lies halfway between E4M3's 1.0 (0x38, even) and 1.125 (0x39): to 0x38.
  ASSERT_TRUE(narrow_float_bits(ScalarType::f8e4m3, 1.0625, &b));
  EXPECT_EQ(b, 0x38u);
  // 1.1875 lies halfway between 1.125 (0x39) and 1.25 (0x3A, even): to 0x3A.
  ASSERT_TRUE(narrow_float_bits(ScalarType::f8e4m3, 1.1875, &b));
  EXPECT_EQ(b, 0x3Au);
  ASSERT_TRUE(narrow_float_bits(ScalarType::bf16, 1.0 + std::ldexp(1.0, -8), &b));  // halfway: to even 0x3F80
  EXPECT_EQ(b, 0x3F80u);
  ASSERT_TRUE(narrow_float_bits(ScalarType::bf16, 1.0 + 3 * std::ldexp(1.0, -8), &b));  // halfway: to even 0x3F82
  EXPECT_EQ(b, 0x3F82u);
  ASSERT_TRUE(narrow_float_bits(ScalarType::f8e4m3, -0.0, &b));
  EXPECT_EQ(b, 0x80u);
  ASSERT_TRUE(narrow_float_bits(ScalarType::f8e4m3, std::ldexp(1.0, -10), &b));  // half the smallest subnormal: to 0
  EXPECT_EQ(b, 0x00u);
  ASSERT_TRUE(narrow_float_bits(ScalarType::f8e4m3, 464.0, &b));  // halfway to the NaN slot: to even 448
  EXPECT_EQ(b, 0x7Eu);
  EXPECT_FALSE(narrow_float_bits(ScalarType::f8e4m3, 470.0, &b));
  EXPECT_FALSE(narrow_float_bits(ScalarType::f8e5m2, 61440.0, &b));  // rounds to infinity
  EXPECT_FALSE(narrow_float_bits(ScalarType::f16, 65520.0, &b));
  EXPECT_FALSE(narrow_float_bits(ScalarType::bf16, NAN, &b));
  EXPECT_FALSE(narrow_float_bits(ScalarType::f32, 1.0, &b));  // not a narrow type
}

TEST(FloatFormats, RawBitVectorsAreViewedAsTheParameterType) {
  std::uint16_t bits[3] = {0x3F80, 0xC040, 0x7FC0};
  std::vector<std::uint8_t> bytes = write_npy(ScalarType::u16, {3}, bits);
  NpyArray a = parse_npy(ByteView(bytes), "a.npy");
  ASSERT_TRUE(npy_view_as(&a, ScalarType::bf16));
  EXPECT_EQ(a.dtype, ScalarType::bf16);
  EXPECT_EQ(npy_element(a, 0), 1.0);
  EXPECT_EQ(npy_element(a, 1), -3.0);
  EXPECT_TRUE(std::isnan(npy_element(a, 2)));
  NpyArray f16 = parse_npy(ByteView(bytes), "a.npy");
  EXPECT_FALSE(npy_view_as(&f16, ScalarType::f16)) << "f16 has a NumPy dtype of its own: <u2 is refused";
  EXPECT_EQ(f16.dtype, ScalarType::u16);
  std::uint8_t eight[2] = {0x7E, 0x3C};
  bytes = write_npy(ScalarType::u8, {2}, eight);
  NpyArray e4 = parse_npy(ByteView(bytes), "e.npy");
  NpyArray e5 = e4;
  ASSERT_TRUE(npy_view_as(&e4, ScalarType::f8e4m3));
  ASSERT_TRUE(npy_view_as(&e5, ScalarType::f8e5m2));
  EXPECT_EQ(npy_element(e4, 0), 448.0);
  EXPECT_EQ(npy_element(e5, 1), 1.0);
  NpyArray wrong = parse_npy(ByteView(bytes), "e.npy");
  EXPECT_FALSE(npy_view_as(&wrong, ScalarType::bf16));
}

}  // namespace
}  // namespace kiln
