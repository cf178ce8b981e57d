#include "core/float_formats.hpp"

#include <cmath>

namespace kiln {
namespace {

// A binary floating-point format of 1 sign bit, `exponent` bits and `mantissa` bits.
struct Format {
  int exponent;
  int mantissa;
  bool ieee;  // the all-ones exponent holds infinities and NaNs; else (E4M3) only S.1111.111 is NaN
  int bias() const { return (1 << (exponent - 1)) - 1; }
  std::uint32_t max_field() const { return (1u << exponent) - 1; }
};

bool format_of(ScalarType t, Format* f) {
  switch (t) {
    case ScalarType::f16: *f = {5, 10, true}; return true;
    case ScalarType::bf16: *f = {8, 7, true}; return true;
    case ScalarType::f8e4m3: *f = {4, 3, false}; return true;
    case ScalarType::f8e5m2: *f = {5, 2, true}; return true;
    default: return false;
  }
}

}  // namespace

bool is_narrow_float(ScalarType t) {
  Format f;
  return format_of(t, &f);
}

double narrow_float_value(ScalarType t, std::uint32_t bits) {
  Format f;
  if (!format_of(t, &f)) return NAN;
  const std::uint32_t man_mask = (1u << f.mantissa) - 1;
  const bool negative = (bits >> (f.exponent + f.mantissa)) & 1;
  const std::uint32_t field = (bits >> f.mantissa) & f.max_field();
  const std::uint32_t man = bits & man_mask;
  double v;
  if (f.ieee && field == f.max_field()) {
    v = man ? NAN : INFINITY;
  } else if (!f.ieee && field == f.max_field() && man == man_mask) {
    v = NAN;
  } else if (field == 0) {
    v = std::ldexp(static_cast<double>(man), 1 - f.bias() - f.mantissa);
  } else {
    v = std::ldexp(static_cast<double>(man | (1u << f.mantissa)), static_cast<int>(field) - f.bias() - f.mantissa);
  }
  return negative ? -v : v;
}

bool narrow_float_bits(ScalarType t, double value, std::uint32_t* bits) {
  Format f;
  if (!format_of(t, &f) || !std::isfinite(value)) return false;
  const std::uint32_t sign = std::signbit(value) ? 1u << (f.exponent + f.mantissa) : 0;
  double a = std::fabs(value);
  // The largest field a finite value may use, and the largest mantissa at that field.
  const std::uint32_t top_field = f.ieee ? f.max_field() - 1 : f.max_field();
  const std::uint32_t top_man = f.ieee ? (1u << f.mantissa) - 1 : (1u << f.mantissa) - 2;
  const int min_normal_exp = 1 - f.bias();
  std::uint32_t field, man;
  if (a < std::ldexp(1.0, min_normal_exp)) {
    // Subnormal (or zero): a multiple of 2^(min_normal_exp - mantissa), rounded to nearest even.
    double q = std::nearbyint(std::ldexp(a, f.mantissa - min_normal_exp));  // FE_TONEAREST: ties to even
    if (q >= std::ldexp(1.0, f.mantissa)) {
      field = 1, man = 0;  // rounded up into the smallest normal
    } else {
      field = 0, man = static_cast<std::uint32_t>(q);
    }
  } else {
    int e = std::ilogb(a);
    double q = std::nearbyint(std::ldexp(a, f.mantissa - e));  // in [2^mantissa, 2^(mantissa+1)]
    if (q >= std::ldexp(1.0, f.mantissa + 1)) {
      q = std::ldexp(1.0, f.mantissa);
      ++e;
    }
    if (e + f.bias() > static_cast<int>(top_field)) return false;
    field = static_cast<std::uint32_t>(e + f.bias());
    man = static_cast<std::uint32_t>(q) - (1u << f.mantissa);
    if (field == top_field && man > top_man) return false;
  }
  *bits = sign | (field << f.mantissa) | man;
  return true;
}

}  // namespace kiln
