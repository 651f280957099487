// Errors of double results in units in the last place, against a long
// double reference (the C library's 64-bit-mantissa functions): shared by
// the elementary and trigonometric function tests.
#pragma once

#include <cmath>
#include <limits>

namespace tessera::testing {

// |got - want| in units of the last place of want rounded to double; 0 when
// they are equal, infinity for an infinite or NaN result that is not.
inline double ulp_error(double got, long double want) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const double w = static_cast<double>(want);
  if (got == w) return 0.0;
  if (std::isinf(w) || std::isinf(got) || std::isnan(got)) return kInf;
  const double a = std::fabs(w);
  const double spacing = a == 0.0 ? std::numeric_limits<double>::denorm_min() : std::nextafter(a, kInf) - a;
  return static_cast<double>(std::fabs(static_cast<long double>(got) - want) / spacing);
}

}  // namespace tessera::testing
