// Tessera's sine and cosine (tessera/numerics/trigonometric.h) against the C
// library's long double sinl/cosl (64-bit mantissas and a full argument
// reduction: an independent reference 11 bits finer than the results), over
// every binade of the doubles, near multiples of pi/2 (where the reduction
// cancels), and at the special values.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <random>

#include "tessera/numerics/trigonometric.h"
#include "ulp_error.h"

namespace el = tessera::elementary;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

using tessera::testing::ulp_error;

struct Worst {
  double sin = 0.0, cos = 0.0;
  void check(double x) {
    const el::SinCos sc = el::sincos(x);
    const double es = ulp_error(sc.sin, sinl(static_cast<long double>(x)));
    const double ec = ulp_error(sc.cos, cosl(static_cast<long double>(x)));
    EXPECT_LE(es, 1.0) << "sin(" << std::hexfloat << x << ")";
    EXPECT_LE(ec, 1.0) << "cos(" << std::hexfloat << x << ")";
    sin = std::max(sin, es);
    cos = std::max(cos, ec);
    // The one-function forms are the same computation.
    EXPECT_EQ(std::bit_cast<std::uint64_t>(el::sin(x)), std::bit_cast<std::uint64_t>(sc.sin));
    EXPECT_EQ(std::bit_cast<std::uint64_t>(el::cos(x)), std::bit_cast<std::uint64_t>(sc.cos));
  }
};

TEST(Trigonometric, WithinOneUlpInEveryBinade) {
  std::mt19937_64 rng(11);
  Worst w;
  // Every exponent from the subnormals to the largest doubles, both signs:
  // Cody-Waite below 2^20, Payne-Hanek above.
  for (int e = -1074; e <= 1023; ++e) {
    for (int i = 0; i < 40; ++i) {
      const double m = 1.0 + static_cast<double>(rng() >> 11) * 0x1p-53;
      const double x = std::ldexp(m, e);
      if (!std::isfinite(x)) continue;
      w.check(i % 2 ? -x : x);
    }
  }
  std::uniform_real_distribution<double> small(-10.0, 10.0), medium(-2e6, 2e6);
  for (int i = 0; i < 200000; ++i) w.check(small(rng));
  for (int i = 0; i < 100000; ++i) w.check(medium(rng));
  std::printf("worst: sin %.3f ulp, cos %.3f ulp\n", w.sin, w.cos);
}

TEST(Trigonometric, WithinOneUlpNearMultiplesOfHalfPi) {
  Worst w;
  // x = k pi/2 and its neighbours, where x - k pi/2 cancels to a tiny r, on
  // both sides of the Cody-Waite limit.
  for (std::int64_t k = 1; k < 3000000; k += 97) {
    const double x = static_cast<double>(static_cast<long double>(k) * (std::numbers::pi_v<long double> / 2));
    for (double y : {x, std::nextafter(x, 0.0), std::nextafter(x, kInf)}) {
      w.check(y);
      w.check(-y);
    }
  }
  // The double closest to a multiple of pi/2 (x mod pi/2 is about 2^-61).
  w.check(6381956970095103.0 * std::ldexp(1.0, 797));
}

TEST(Trigonometric, SpecialValues) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(std::signbit(el::sin(-0.0)));
  EXPECT_EQ(el::sin(-0.0), 0.0);
  EXPECT_FALSE(std::signbit(el::sin(0.0)));
  EXPECT_EQ(el::cos(-0.0), 1.0);
  EXPECT_EQ(el::sin(0x1p-1074), 0x1p-1074);
  EXPECT_EQ(el::sin(-1e-300), -1e-300);
  for (double x : {kInf, -kInf, nan}) {
    EXPECT_TRUE(std::isnan(el::sin(x))) << x;
    EXPECT_TRUE(std::isnan(el::cos(x))) << x;
  }
  // sin(10^22) = -0.85220084976718880177..., a published value that needs
  // the whole reduction (10^22 is exact in double).
  EXPECT_LE(ulp_error(el::sin(1e22), -0.852200849767188801772705893L), 0.5);
  EXPECT_LE(ulp_error(el::sin(-1e22), 0.852200849767188801772705893L), 0.5);
}

}  // namespace
