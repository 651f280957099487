// graph.fft's reference kernel (graph/fft_ops.cpp, graph/fft_plan.h) against
// a direct DFT in long double, its determinism, and its errors.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstring>
#include <numbers>
#include <random>
#include <vector>

#include "graph/fft_plan.h"
#include "tessera/graph/executor.h"
#include "tessera/support/error.h"

namespace tessera {
namespace {

using C = std::complex<double>;

std::vector<C> random_values(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> d;
  std::vector<C> v(n);
  for (C& z : v) z = C(d(gen), d(gen));
  return v;
}

std::vector<C> direct_dft(const std::vector<C>& x, bool inverse) {
  const auto n = static_cast<long double>(x.size());
  std::vector<C> out(x.size());
  for (std::size_t k = 0; k < x.size(); ++k) {
    std::complex<long double> acc = 0;
    for (std::size_t j = 0; j < x.size(); ++j) {
      const long double angle = (inverse ? 2 : -2) * std::numbers::pi_v<long double> *
                                static_cast<long double>((j * k) % x.size()) / n;
      acc += std::complex<long double>(x[j].real(), x[j].imag()) * std::polar(1.0L, angle);
    }
    out[k] = C(static_cast<double>(acc.real()), static_cast<double>(acc.imag()));
  }
  return out;
}

Tensor fft(const Tensor& x, std::int64_t n, bool inverse, const std::string& kind = "c2c",
           const std::string& norm = "backward") {
  return graph::execute_op("graph.fft", std::vector<Tensor>{x},
                           ir::AttrMap{{"axis", std::int64_t{-1}}, {"n", n}, {"inverse", inverse},
                                       {"kind", kind}, {"norm", norm}})
      .at(0);
}

double relative_error(const std::vector<C>& got, const std::vector<C>& want) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    num += std::norm(got[i] - want[i]);
    den += std::norm(want[i]);
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

TEST(Fft, Complex128MatchesADirectDftForStockhamAndBluesteinLengths) {
  for (std::int64_t n : {1, 2, 3, 4, 5, 6, 7, 8, 11, 13, 16, 17, 49, 97, 128, 210, 211, 343}) {
    SCOPED_TRACE(n);
    const auto x = random_values(static_cast<std::size_t>(n), static_cast<unsigned>(n));
    const Tensor t = Tensor::from_complex_values(x, {n}, default_policy(DType::complex128));
    for (bool inverse : {false, true}) {
      const auto got = fft(t, n, inverse, "c2c", "forward").to_complex_values();
      auto want = direct_dft(x, inverse);
      if (!inverse) {
        for (C& z : want) z /= static_cast<double>(n);  // "forward": 1/n on the forward transform
      }
      const double bound = 4 * std::max(1.0, std::log2(static_cast<double>(n))) * 0x1p-52;
      EXPECT_LE(relative_error(got, want), bound);
    }
  }
}

TEST(Fft, Complex64ComputesInFp32AndIsReproducible) {
  const std::int64_t n = 97;
  const auto x = random_values(2 * static_cast<std::size_t>(n), 3);
  const Tensor t = Tensor::from_complex_values(x, {2, n}, default_policy(DType::complex64));
  const Tensor first = fft(t, n, false);
  EXPECT_EQ(first.dtype(), DType::complex64);
  const auto a = first.to_complex_values();
  for (int run = 0; run < 10; ++run) {
    const auto b = fft(t, n, false).to_complex_values();
    ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(C)), 0);
  }
  // fp32 parts: about 1e-7 relative, far above fp64's 1e-16
  const std::vector<C> stored = t.to_complex_values();  // x rounded to complex64
  const std::vector<C> row(stored.begin(), stored.begin() + n);
  const std::vector<C> got(a.begin(), a.begin() + n);
  const double err = relative_error(got, direct_dft(row, false));
  EXPECT_LE(err, 4 * std::log2(97.0) * 0x1p-23);
  EXPECT_GT(err, 1e-12);
}

TEST(Fft, RealTransformsRoundTrip) {
  const std::int64_t n = 15;
  std::vector<double> x(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<double>(i) * 0.7) + 0.25;
  const Tensor t = Tensor::from_values(x, {n}, default_policy(DType::fp64));
  const Tensor half = fft(t, n, false, "r2c");
  ASSERT_EQ(half.shape(), (std::vector<std::int64_t>{n / 2 + 1}));
  const Tensor back = fft(half, n, true, "c2r");
  ASSERT_EQ(back.dtype(), DType::fp64);
  const auto y = back.to_values();
  for (std::size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(y[i], x[i], 1e-14);
}

TEST(Fft, BadAttributesAndOperandsAreErrors) {
  const Tensor z = Tensor::from_complex_values(random_values(8, 1), {8}, default_policy(DType::complex64));
  const Tensor r = Tensor::from_values(std::vector<double>(8, 1.0), {8}, default_policy(DType::fp32));
  EXPECT_THROW(fft(z, 0, false), Error);                 // n < 1
  EXPECT_THROW(fft(z, 9, false), Error);                 // the axis holds 8, not 9
  EXPECT_THROW(fft(z, 8, false, "c2x"), Error);          // unknown kind
  EXPECT_THROW(fft(z, 8, false, "c2c", "unit"), Error);  // unknown norm
  EXPECT_THROW(fft(z, 8, false, "r2c"), Error);          // r2c of a complex input
  EXPECT_THROW(fft(r, 14, true, "c2r"), Error);          // c2r of a real input
  try {
    fft(z, 9, false);
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("has length 8 but a transform of length 9 reads 9"), std::string::npos) << e.message();
  }
}

Tensor fft_passes(const Tensor& x, std::int64_t n, std::int64_t first, std::int64_t last, bool inverse = false,
                  const std::string& norm = "backward") {
  return graph::execute_op("graph.fft_passes", std::vector<Tensor>{x},
                           ir::AttrMap{{"axis", std::int64_t{-1}}, {"n", n}, {"inverse", inverse}, {"norm", norm},
                                       {"first", first}, {"last", last}})
      .at(0);
}

TEST(Fft, PassRangesInStagesGiveTheWholeTransformsBits) {
  // graph.fft_passes: passes [0, a) then [a, p) of 1000 = 5 5 5 4 2 (and
  // 4096 = 4^6) store the Stockham array between them exactly, so every
  // split gives graph.fft's bits, the normalization on the last stage.
  for (const auto& [n, dtype] : {std::pair{std::int64_t{1000}, DType::complex128}, std::pair{std::int64_t{4096}, DType::complex64}}) {
    const Tensor t = Tensor::from_complex_values(random_values(static_cast<std::size_t>(3 * n), 7), {3, n}, default_policy(dtype));
    const auto whole = fft(t, n, true, "c2c", "ortho").to_complex_values();
    const std::int64_t passes = n == 1000 ? 5 : 6;
    for (std::int64_t a = 1; a < passes; ++a) {
      const auto staged = fft_passes(fft_passes(t, n, 0, a, true, "ortho"), n, a, passes, true, "ortho").to_complex_values();
      ASSERT_EQ(staged.size(), whole.size());
      EXPECT_EQ(std::memcmp(staged.data(), whole.data(), whole.size() * sizeof(C)), 0) << n << " split after pass " << a;
    }
  }
}

TEST(Fft, PassRangesOutsideThePlanAreErrors) {
  const Tensor z = Tensor::from_complex_values(random_values(8, 1), {8}, default_policy(DType::complex64));
  EXPECT_THROW(fft_passes(z, 8, 1, 1), Error);  // empty range
  EXPECT_THROW(fft_passes(z, 8, 0, 3), Error);  // 8 = 4 2: two passes
  EXPECT_THROW(fft_passes(z, 16, 0, 1), Error);  // the axis has 8 points
  const Tensor r = Tensor::from_values(std::vector<double>(8, 1.0), {8}, default_policy(DType::fp32));
  EXPECT_THROW(fft_passes(r, 8, 0, 1), Error);  // real operand
  const Tensor q = Tensor::from_complex_values(random_values(11, 1), {11}, default_policy(DType::complex64));
  EXPECT_THROW(fft_passes(q, 11, 0, 1), Error);  // Bluestein length: no passes
}

// Bluestein's M: a power of two where it is within 5/4 of the smallest
// smooth length and its line takes at most 64 KiB, else the smooth length.
TEST(Fft, BluesteinLengthPrefersNearbyPowersOfTwo) {
  using graph::fft::bluestein_length;
  EXPECT_EQ(bluestein_length(997, 8), 2048);    // smooth 2000
  EXPECT_EQ(bluestein_length(1013, 16), 2048);  // smooth 2025
  EXPECT_EQ(bluestein_length(97, 8), 196);      // 256 > 5/4 of 196
  EXPECT_EQ(bluestein_length(3001, 8), 6048);   // 8192 > 5/4 of 6048
  EXPECT_EQ(bluestein_length(4099, 8), 8232);   // 16384 is twice 8232
  EXPECT_EQ(bluestein_length(7001, 8), 14112);  // 16384 is near but 128 KiB
  EXPECT_EQ(bluestein_length(3500, 8), 8192);   // smooth 7000
  EXPECT_EQ(bluestein_length(3500, 16), 7000);  // 8192 complex128 points take 128 KiB
  for (std::int64_t n = 2; n < 5000; ++n) {
    const std::int64_t m = bluestein_length(n, 8);
    EXPECT_GE(m, 2 * n - 1) << n;
    EXPECT_FALSE(graph::fft::stockham_radices(m).empty()) << n;
  }
}

// The butterfly every backend builds (graph::fft::radix_butterfly) is a DFT
// of its radix, forward and inverse, and takes 4 m^2 real products for an
// odd radix R = 2m + 1 (the direct sum would take 4 (R - 1)^2) and none for
// 2 and 4.
struct CountingParts {
  int products = 0;
  double add(double x, double y) const { return x + y; }
  double sub(double x, double y) const { return x - y; }
  double scale(double x, double c) {
    ++products;
    return c * x;
  }
};

TEST(Fft, RadixButterfliesAreDftsWithFewProducts) {
  struct V {
    double re, im;
  };
  for (int R : {2, 3, 4, 5, 7}) {
    for (bool inverse : {false, true}) {
      const std::vector<C> x = random_values(static_cast<std::size_t>(R), 40u + static_cast<unsigned>(R));
      const std::vector<C> want = direct_dft(x, inverse);
      V v[8], out[8];
      for (int r = 0; r < R; ++r) v[r] = {x[static_cast<std::size_t>(r)].real(), x[static_cast<std::size_t>(r)].imag()};
      const auto inner = [&](int q) {
        const long double angle = (inverse ? 2 : -2) * std::numbers::pi_v<long double> * q / R;
        return std::pair<double, double>{static_cast<double>(std::cos(angle)), static_cast<double>(std::sin(angle))};
      };
      CountingParts parts;
      graph::fft::radix_butterfly(R, v, out, inner, parts);
      for (int k = 0; k < R; ++k) {
        EXPECT_NEAR(out[k].re, want[static_cast<std::size_t>(k)].real(), 1e-14) << "R " << R << " k " << k;
        EXPECT_NEAR(out[k].im, want[static_cast<std::size_t>(k)].imag(), 1e-14) << "R " << R << " k " << k;
      }
      const int m = (R - 1) / 2;
      EXPECT_EQ(parts.products, R % 2 == 1 ? 4 * m * m : 0) << "R " << R;
    }
  }
  V v[8]{}, out[8];
  CountingParts parts;
  EXPECT_THROW(graph::fft::radix_butterfly(6, v, out, [](int) { return std::pair<double, double>{1, 0}; }, parts),
               Error);
}

}  // namespace
}  // namespace tessera
