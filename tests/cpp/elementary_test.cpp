// Tessera's elementary functions (tessera/numerics/elementary.h) against the
// C library's long double versions (64-bit mantissas, so an independent
// reference 11 bits finer than the double results), with the ulp bounds the
// header states, and their special values.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "tessera/numerics/elementary.h"
#include "ulp_error.h"

namespace el = tessera::elementary;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

using tessera::testing::ulp_error;

template <class Fn, class Ref>
double worst_ulp(Fn fn, Ref ref, double lo, double hi, int samples) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(lo, hi);
  double worst = 0.0;
  for (int i = 0; i < samples; ++i) {
    const double x = u(rng);
    const double e = ulp_error(fn(x), ref(static_cast<long double>(x)));
    EXPECT_LE(e, 1e6) << "x = " << x;  // names the first wild input
    if (e > 1e6) break;
    worst = std::max(worst, e);
  }
  return worst;
}

auto ref_exp = [](long double x) { return expl(x); };
auto ref_expm1 = [](long double x) { return expm1l(x); };
auto ref_log = [](long double x) { return logl(x); };
auto ref_tanh = [](long double x) { return tanhl(x); };
auto ref_erf = [](long double x) { return erfl(x); };

TEST(Elementary, ExpWithinOneUlpOverItsWholeRange) {
  auto f = [](double x) { return el::exp(x); };
  EXPECT_LE(worst_ulp(f, ref_exp, -1.0, 1.0, 200000), 1.0);
  EXPECT_LE(worst_ulp(f, ref_exp, -708.0, 709.78, 200000), 1.0);
  // Subnormal results: rounded once.
  EXPECT_LE(worst_ulp(f, ref_exp, -745.1, -708.5, 100000), 1.0);
}

TEST(Elementary, Expm1WithinTwoUlpAlsoNearZero) {
  auto f = [](double x) { return el::expm1(x); };
  EXPECT_LE(worst_ulp(f, ref_expm1, -1e-6, 1e-6, 100000), 2.0);
  EXPECT_LE(worst_ulp(f, ref_expm1, -2.0, 2.0, 200000), 2.0);
  EXPECT_LE(worst_ulp(f, ref_expm1, -60.0, 709.0, 100000), 2.0);
}

TEST(Elementary, LogWithinOneUlpIncludingSubnormalInputs) {
  auto f = [](double x) { return el::log(x); };
  EXPECT_LE(worst_ulp(f, ref_log, 0.5, 2.0, 200000), 1.0);
  EXPECT_LE(worst_ulp(f, ref_log, 1e-300, 1e300, 200000), 1.0);
  EXPECT_LE(worst_ulp(f, ref_log, 1e-320, 2e-308, 100000), 1.0);
}

TEST(Elementary, TanhWithinThreeUlp) {
  auto f = [](double x) { return el::tanh(x); };
  EXPECT_LE(worst_ulp(f, ref_tanh, -1e-3, 1e-3, 100000), 3.0);
  EXPECT_LE(worst_ulp(f, ref_tanh, -25.0, 25.0, 200000), 3.0);
}

TEST(Elementary, ErfWithinFiveUlpOnEveryRange) {
  auto f = [](double x) { return el::erf(x); };
  EXPECT_LE(worst_ulp(f, ref_erf, -1e-6, 1e-6, 100000), 5.0);
  EXPECT_LE(worst_ulp(f, ref_erf, -2.0, 2.0, 300000), 5.0);  // the Taylor form
  EXPECT_LE(worst_ulp(f, ref_erf, 1.9, 2.1, 100000), 5.0);   // both sides of the switch
  EXPECT_LE(worst_ulp(f, ref_erf, 2.0, 6.0, 300000), 5.0);   // the Chebyshev form
  EXPECT_LE(worst_ulp(f, ref_erf, -6.5, -1.5, 100000), 5.0);
  EXPECT_LE(worst_ulp(f, ref_erf, 5.5, 40.0, 100000), 5.0);  // +1 past 6
}

TEST(Elementary, SpecialValues) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double tiny = std::numeric_limits<double>::denorm_min();
  EXPECT_EQ(el::exp(0.0), 1.0);
  EXPECT_EQ(el::exp(-0.0), 1.0);
  EXPECT_EQ(el::exp(kInf), kInf);
  EXPECT_EQ(el::exp(-kInf), 0.0);
  EXPECT_EQ(el::exp(709.79), kInf);
  EXPECT_EQ(el::exp(-746.0), 0.0);
  EXPECT_EQ(el::exp(-745.13), tiny);
  EXPECT_TRUE(std::isnan(el::exp(nan)));

  EXPECT_TRUE(std::signbit(el::expm1(-0.0)));
  EXPECT_EQ(el::expm1(-kInf), -1.0);
  EXPECT_EQ(el::expm1(kInf), kInf);
  EXPECT_EQ(el::expm1(tiny), tiny);
  EXPECT_TRUE(std::isnan(el::expm1(nan)));

  EXPECT_EQ(el::log(1.0), 0.0);
  EXPECT_EQ(el::log(0.0), -kInf);
  EXPECT_EQ(el::log(-0.0), -kInf);
  EXPECT_EQ(el::log(kInf), kInf);
  EXPECT_TRUE(std::isnan(el::log(-1.0)));
  EXPECT_TRUE(std::isnan(el::log(-kInf)));
  EXPECT_TRUE(std::isnan(el::log(nan)));
  EXPECT_EQ(el::log(tiny), static_cast<double>(logl(static_cast<long double>(tiny))));

  EXPECT_EQ(el::tanh(0.0), 0.0);
  EXPECT_TRUE(std::signbit(el::tanh(-0.0)));
  EXPECT_EQ(el::tanh(kInf), 1.0);
  EXPECT_EQ(el::tanh(-kInf), -1.0);
  EXPECT_EQ(el::tanh(19.2), 1.0);
  EXPECT_EQ(el::tanh(-400.0), -1.0);
  EXPECT_EQ(el::tanh(tiny), tiny);
  EXPECT_TRUE(std::isnan(el::tanh(nan)));

  EXPECT_EQ(el::erf(0.0), 0.0);
  EXPECT_TRUE(std::signbit(el::erf(-0.0)));
  EXPECT_EQ(el::erf(kInf), 1.0);
  EXPECT_EQ(el::erf(-kInf), -1.0);
  EXPECT_EQ(el::erf(6.5), 1.0);
  EXPECT_EQ(el::erf(-1e300), -1.0);
  EXPECT_EQ(el::erf(1e-300), static_cast<double>(erfl(1e-300L)));
  EXPECT_TRUE(std::isnan(el::erf(nan)));
}

// Rounded to fp32 (what fp32 tensors store), the results are the correctly
// rounded float nearly always.
TEST(Elementary, Fp32ResultsAreAlmostAlwaysCorrectlyRounded) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-20.0f, 20.0f);
  int off = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const float x = u(rng);
    off += static_cast<float>(el::exp(x)) != static_cast<float>(expl(x));
    off += static_cast<float>(el::tanh(x)) != static_cast<float>(tanhl(x));
    off += static_cast<float>(el::log(std::fabs(x))) != static_cast<float>(logl(std::fabs(x)));
  }
  EXPECT_LE(off, 3) << off << " of " << 3 * n << " fp32 results differ from the correctly rounded float";
}

// exp_f32_or_nan gives exp's fp32 bits or NaN (unsure), in both its forms
// (the series form, a CPU's, and the table form, a GPU's). Checked here on
// every 61st fp32 bit pattern (70 million inputs, both signs, every
// exponent; the whole 2^32 were checked once for each form when it was
// written, with no difference, and 253 unsure answers in [-87, 0] for the
// series form, 489 in [-87, 88] for the table form); the unsure answers are
// rare.
TEST(Elementary, ExpF32OrNanIsExpsBitsOrNan) {
  for (auto form : {el::exp_f32_or_nan_series, el::exp_f32_or_nan_table}) {
    std::uint64_t checked = 0, unsure = 0, in_range = 0, unsure_in_range = 0;
    for (std::uint64_t bits = 0; bits <= 0xffffffffull; bits += 61) {
      const float x = std::bit_cast<float>(static_cast<std::uint32_t>(bits));
      const float got = form(x);
      const bool range = x >= -87.0f && x <= 88.0f;
      in_range += range;
      if (std::isnan(got)) {
        ++unsure;
        unsure_in_range += range;
        continue;
      }
      const float want = static_cast<float>(el::exp(static_cast<double>(x)));
      ASSERT_EQ(std::bit_cast<std::uint32_t>(got), std::bit_cast<std::uint32_t>(want)) << "x = " << x;
      ++checked;
    }
    EXPECT_GT(checked, 30000000u);
    EXPECT_LE(unsure_in_range, in_range / 100000) << unsure_in_range << " unsure of " << in_range;
    // The cases it answers outright: far below (0) and the sure middle.
    EXPECT_EQ(form(-200.0f), 0.0f);
    EXPECT_EQ(form(-std::numeric_limits<float>::infinity()), 0.0f);
    EXPECT_EQ(form(0.0f), 1.0f);
    EXPECT_TRUE(std::isnan(form(std::numeric_limits<float>::quiet_NaN())));
    EXPECT_TRUE(std::isnan(form(100.0f)));  // overflow: the caller's exact exp decides
  }
}

}  // namespace

// The integer steps of the reductions go through bits, not conversions (so
// that lane loops vectorize on AVX2): they must give the conversions' values.
TEST(Elementary, IntegerStepsEqualTheConversions) {
  using namespace tessera::elementary::detail;
  for (std::int64_t k = -4096; k <= 4096; ++k) {
    const double d = static_cast<double>(k);
    ASSERT_EQ(integer_of(d), k);
    ASSERT_EQ(double_of(k), d);
    ASSERT_EQ(integer_of(trunc_half(d)), k / 2) << k;
  }
  std::mt19937_64 rng(7);
  for (int i = 0; i < 100000; ++i) {
    const std::int64_t k = static_cast<std::int64_t>(rng() % (std::uint64_t{1} << 51)) * (i % 2 ? 1 : -1);
    ASSERT_EQ(integer_of(static_cast<double>(k)), k);
    ASSERT_EQ(double_of(k), static_cast<double>(k));
  }
  EXPECT_EQ(std::bit_cast<std::uint64_t>(double_of(0)), 0u);  // +0, not -0
}
