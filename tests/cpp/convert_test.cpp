// Conversion between real numbers and the floating storage formats of 16
// bits or fewer, checked bit for bit against independent references:
//   fp16      the compiler's _Float16 conversions (libgcc's soft-fp code);
//   bf16      the two neighbouring bf16 values, compared in long double;
//   fp8/6/4   the brute-force tables of reference_formats.h.
// Both entry points are checked: the bulk float path (vectorized for
// nearest-even) and the scalar encode_value path. Stochastic rounding, e8m0,
// integers, fp32 and fp64 are in convert_special_test.cpp.
#include "tessera/numerics/convert.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "convert_helpers.h"
#include "reference_formats.h"

namespace tessera {
namespace {

using tessera_test::bulk_encode;
using tessera_test::from_bits;
using tessera_test::Mismatches;
using tessera_test::opts;
using tessera_test::RefFormat;
using tessera_test::RefRounder;
using tessera_test::strided_sweep;
using tessera_test::to_bits;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

// Checks bulk and scalar paths on every input against expected(x).
template <typename Expected, typename Same>
void check_both_paths(const std::vector<float>& xs, DType dtype, const EncodeOptions& o, Expected expected, Same same,
                      Mismatches& bad) {
  const std::vector<std::uint64_t> bulk = bulk_encode(xs, dtype, o);
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const std::uint64_t want = expected(xs[i]);
    if (!same(want, bulk[i])) bad.add(xs[i], want, bulk[i], "bulk");
    const std::uint64_t scalar = encode_value(static_cast<double>(xs[i]), dtype, o);
    if (!same(want, scalar)) bad.add(xs[i], want, scalar, "scalar");
  }
}

// Each value of a format, the midpoint to the next one (the largest finite
// value's "next" is the unbounded-exponent value after it) and the float32
// neighbours of both, with both signs; plus zeros, infinities, NaNs and the
// float32 extremes.
std::vector<float> boundary_inputs(const RefRounder& r) {
  std::vector<float> xs;
  const std::vector<double>& v = r.values();
  for (std::size_t i = 0; i < v.size(); ++i) {
    const double points[2] = {v[i], i + 1 < v.size() ? (v[i] + v[i + 1]) / 2 : 2 * v[i]};
    for (double p : points) {
      float up = static_cast<float>(p), down = up;
      for (int k = 0; k < 3; ++k) {
        for (float x : {up, down}) {
          xs.push_back(x);
          xs.push_back(-x);
        }
        up = std::nextafter(up, kInf);
        down = std::nextafter(down, 0.0f);
      }
    }
  }
  for (float x : {0.0f, kInf, kNan, std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min(),
                  std::numeric_limits<float>::max()}) {
    xs.push_back(x);
    xs.push_back(-x);
  }
  return xs;
}

const std::vector<EncodeOptions>& all_modes() {
  static const std::vector<EncodeOptions> modes{
      opts(Rounding::nearest_even, Overflow::inf_nan), opts(Rounding::nearest_even, Overflow::saturate),
      opts(Rounding::toward_zero, Overflow::inf_nan), opts(Rounding::toward_zero, Overflow::saturate)};
  return modes;
}
std::string mode_name(const EncodeOptions& o) {
  return std::string(rounding_name(o.rounding)) + "/" + std::string(overflow_name(o.overflow));
}

// ---------------------------------------------------------------- fp16 ----

std::uint32_t f16_bits(_Float16 h) {
  std::uint16_t b = 0;
  std::memcpy(&b, &h, 2);
  return b;
}
float f16_value(std::uint32_t bits) {
  const auto b = static_cast<std::uint16_t>(bits);
  _Float16 h;
  std::memcpy(&h, &b, 2);
  return static_cast<float>(h);
}

// The compiler's float -> _Float16 (round to nearest even, overflow to
// infinity), adapted to the other modes: saturate replaces the infinity of
// an overflow by the largest finite value; toward zero steps the nearest
// value down one encoding when it lies above |x|.
template <typename Real>
std::uint32_t fp16_expected(Real x, const EncodeOptions& o) {
  const std::uint32_t nearest = f16_bits(static_cast<_Float16>(x));
  if (std::isnan(x)) return nearest;
  const std::uint32_t sign = nearest & 0x8000u;
  std::uint32_t magnitude = nearest & 0x7FFFu;
  const bool saturate = o.overflow == Overflow::saturate;
  if (std::isinf(x)) return sign | (saturate ? 0x7BFFu : 0x7C00u);
  if (o.rounding == Rounding::toward_zero) {
    if (static_cast<Real>(f16_value(magnitude)) > std::fabs(x)) --magnitude;  // also turns infinity into max
  } else if (magnitude == 0x7C00u && saturate) {
    magnitude = 0x7BFFu;
  }
  return sign | magnitude;
}

TEST(Fp16, StridedSweepOfAllFloat32MatchesCompiler) {
  const RefRounder fp16(tessera_test::fp16_format());
  auto same = [&](std::uint64_t a, std::uint64_t b) {
    return fp16.same(static_cast<std::uint32_t>(a), static_cast<std::uint32_t>(b));
  };
  // Nearest-even, the vectorized path, on 44 million patterns; the other modes on 4 million.
  for (const EncodeOptions& o : all_modes()) {
    SCOPED_TRACE(mode_name(o));
    const std::uint64_t stride = o.rounding == Rounding::nearest_even && o.overflow == Overflow::inf_nan ? 97 : 997;
    Mismatches bad;
    strided_sweep(stride, [&](const std::vector<float>& xs) {
      check_both_paths(
          xs, DType::fp16, o, [&](float x) { return fp16_expected(x, o); }, same, bad);
    });
    EXPECT_EQ(bad.count(), 0u) << bad.report();
  }
}

TEST(Fp16, EveryBoundaryAndMidpointMatchesBothReferences) {
  const RefRounder fp16(tessera_test::fp16_format());
  auto same = [&](std::uint64_t a, std::uint64_t b) {
    return fp16.same(static_cast<std::uint32_t>(a), static_cast<std::uint32_t>(b));
  };
  const std::vector<float> xs = boundary_inputs(fp16);
  for (const EncodeOptions& o : all_modes()) {
    SCOPED_TRACE(mode_name(o));
    Mismatches bad, refs_disagree;
    check_both_paths(
        xs, DType::fp16, o, [&](float x) { return fp16_expected(x, o); }, same, bad);
    // The two references must agree with each other too.
    for (float x : xs) {
      if (!same(fp16_expected(x, o), fp16.encode(x, o.rounding, o.overflow))) {
        refs_disagree.add(x, fp16_expected(x, o), fp16.encode(x, o.rounding, o.overflow), "references");
      }
    }
    EXPECT_EQ(bad.count(), 0u) << bad.report();
    EXPECT_EQ(refs_disagree.count(), 0u) << refs_disagree.report();
  }
}

TEST(Fp16, FromDoubleRoundsOnceNotTwice) {
  // Doubles a hair off an fp16 midpoint: rounding to float first would land
  // on the midpoint and then tie to even, the wrong way.
  std::vector<double> xs;
  const RefRounder fp16(tessera_test::fp16_format());
  for (std::size_t i = 0; i + 1 < fp16.values().size(); ++i) {
    const double mid = (fp16.values()[i] + fp16.values()[i + 1]) / 2;
    for (double d :
         {mid, mid * (1 + 0x1p-40), mid * (1 - 0x1p-40), std::nextafter(mid, 0.0), std::nextafter(mid, 1e300)}) {
      xs.push_back(d);
      xs.push_back(-d);
    }
  }
  std::mt19937_64 rng(12345);
  for (int i = 0; i < 200000; ++i) xs.push_back(std::bit_cast<double>(rng()));
  std::vector<std::uint16_t> bulk(xs.size());
  for (const EncodeOptions& o : all_modes()) {
    SCOPED_TRACE(mode_name(o));
    encode(xs.data(), xs.size(), DType::fp16, bulk.data(), o);
    Mismatches bad;
    for (std::size_t i = 0; i < xs.size(); ++i) {
      const std::uint32_t want = fp16_expected(xs[i], o);
      const std::uint64_t scalar = encode_value(xs[i], DType::fp16, o);
      if (!fp16.same(want, static_cast<std::uint32_t>(scalar))) bad.add(xs[i], want, scalar, "scalar");
      if (!fp16.same(want, bulk[i])) bad.add(xs[i], want, bulk[i], "bulk double");
    }
    EXPECT_EQ(bad.count(), 0u) << bad.report();
  }
}

TEST(Fp16, DecodeEveryEncodingMatchesCompiler) {
  std::vector<std::uint16_t> codes(65536);
  for (std::uint32_t c = 0; c < 65536; ++c) codes[c] = static_cast<std::uint16_t>(c);
  std::vector<float> bulk(65536);
  decode(codes.data(), codes.size(), DType::fp16, bulk.data());
  for (std::uint32_t c = 0; c < 65536; ++c) {
    const float want = f16_value(c);
    const double scalar = decode_value(c, DType::fp16);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(bulk[c]) && std::isnan(scalar)) << std::hex << c;
      EXPECT_TRUE(is_nan_encoding(c, DType::fp16)) << std::hex << c;
      // Decoding a NaN keeps its sign, as the compiler's conversion does.
      EXPECT_EQ(std::signbit(bulk[c]), std::signbit(want)) << std::hex << c;
      EXPECT_EQ(std::signbit(scalar), std::signbit(want)) << std::hex << c;
    } else {
      EXPECT_EQ(to_bits(bulk[c]), to_bits(want)) << std::hex << c;
      EXPECT_EQ(std::bit_cast<std::uint64_t>(scalar), std::bit_cast<std::uint64_t>(static_cast<double>(want)))
          << std::hex << c;
      EXPECT_FALSE(is_nan_encoding(c, DType::fp16)) << std::hex << c;
    }
  }
}

// ---------------------------------------------------------------- bf16 ----

// Nearest-even bf16 of a float32: the bf16 values at or below |x| and the
// next one up are found by truncating the float's bits; whichever is nearer
// in long double wins, ties to the even encoding. Infinity and saturation
// come from the IEEE rules.
std::uint32_t bf16_expected(float x, const EncodeOptions& o) {
  const std::uint32_t u = to_bits(x);
  const std::uint32_t sign = (u >> 16) & 0x8000u;
  if (std::isnan(x)) return sign | 0x7FC0u;
  const bool saturate = o.overflow == Overflow::saturate;
  if (std::isinf(x)) return sign | (saturate ? 0x7F7Fu : 0x7F80u);
  const std::uint32_t lo = (u & 0x7FFFFFFFu) >> 16;  // largest bf16 magnitude <= |x|
  if (o.rounding == Rounding::toward_zero) return sign | lo;
  const std::uint32_t hi = lo + 1;
  const long double lo_value = from_bits(lo << 16);
  const long double hi_value = hi == 0x7F80u ? 0x1p128L : static_cast<long double>(from_bits(hi << 16));
  const long double a = std::fabs(static_cast<long double>(x));
  const long double below = a - lo_value, above = hi_value - a;  // exact in long double
  std::uint32_t pick = below < above ? lo : above < below ? hi : (lo % 2 == 0 ? lo : hi);
  if (pick == 0x7F80u && saturate) pick = 0x7F7Fu;
  return sign | pick;
}

TEST(Bf16, StridedSweepOfAllFloat32MatchesNeighbourReference) {
  const RefRounder bf16(tessera_test::bf16_format());
  auto same = [&](std::uint64_t a, std::uint64_t b) {
    return bf16.same(static_cast<std::uint32_t>(a), static_cast<std::uint32_t>(b));
  };
  for (const EncodeOptions& o : all_modes()) {
    SCOPED_TRACE(mode_name(o));
    const std::uint64_t stride = o.rounding == Rounding::nearest_even && o.overflow == Overflow::inf_nan ? 97 : 997;
    Mismatches bad;
    strided_sweep(stride, [&](const std::vector<float>& xs) {
      check_both_paths(
          xs, DType::bf16, o, [&](float x) { return bf16_expected(x, o); }, same, bad);
    });
    EXPECT_EQ(bad.count(), 0u) << bad.report();
  }
}

TEST(Bf16, EveryBoundaryAndMidpoint) {
  const RefRounder bf16(tessera_test::bf16_format());
  auto same = [&](std::uint64_t a, std::uint64_t b) {
    return bf16.same(static_cast<std::uint32_t>(a), static_cast<std::uint32_t>(b));
  };
  const std::vector<float> xs = boundary_inputs(bf16);
  for (const EncodeOptions& o : all_modes()) {
    SCOPED_TRACE(mode_name(o));
    Mismatches bad;
    check_both_paths(
        xs, DType::bf16, o, [&](float x) { return bf16_expected(x, o); }, same, bad);
    // The brute-force table reference agrees with the neighbour reference.
    check_both_paths(
        xs, DType::bf16, o, [&](float x) { return bf16.encode(x, o.rounding, o.overflow); }, same, bad);
    EXPECT_EQ(bad.count(), 0u) << bad.report();
  }
}

TEST(Bf16, FromDoubleMatchesTableReference) {
  const RefRounder bf16(tessera_test::bf16_format());
  std::mt19937_64 rng(777);
  Mismatches bad;
  for (int i = 0; i < 300000; ++i) {
    // Random doubles within and a little beyond bf16's range, and near midpoints.
    double x = std::bit_cast<double>((rng() & 0x800FFFFFFFFFFFFFull) | ((896ull + rng() % 260) << 52));
    if (i % 2) {
      const std::size_t k = rng() % (bf16.values().size() - 1);
      x = (bf16.values()[k] + bf16.values()[k + 1]) / 2 * (1 + std::ldexp(static_cast<double>(rng() % 64) - 32, -50));
    }
    for (const EncodeOptions& o : all_modes()) {
      const std::uint32_t want = bf16.encode(x, o.rounding, o.overflow);
      const std::uint64_t got = encode_value(x, DType::bf16, o);
      if (!bf16.same(want, static_cast<std::uint32_t>(got))) bad.add(x, want, got, "scalar");
    }
  }
  EXPECT_EQ(bad.count(), 0u) << bad.report();
}

TEST(Bf16, DecodeEveryEncodingIsTheUpperHalfOfFloat32) {
  std::vector<std::uint16_t> codes(65536);
  for (std::uint32_t c = 0; c < 65536; ++c) codes[c] = static_cast<std::uint16_t>(c);
  std::vector<float> bulk(65536);
  decode(codes.data(), codes.size(), DType::bf16, bulk.data());
  for (std::uint32_t c = 0; c < 65536; ++c) {
    const float want = from_bits(c << 16);
    const double scalar = decode_value(c, DType::bf16);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(bulk[c]) && std::isnan(scalar) && is_nan_encoding(c, DType::bf16)) << std::hex << c;
      EXPECT_EQ(std::signbit(scalar), (c & 0x8000u) != 0) << std::hex << c;
      EXPECT_EQ(std::signbit(bulk[c]), (c & 0x8000u) != 0) << std::hex << c;
    } else {
      EXPECT_EQ(to_bits(bulk[c]), to_bits(want)) << std::hex << c;
      EXPECT_EQ(scalar, static_cast<double>(want)) << std::hex << c;
      EXPECT_EQ(std::signbit(scalar), std::signbit(want)) << std::hex << c;
    }
  }
}

// ---------------------------------------------------- fp8, fp6, fp4 ----

TEST(SmallFormats, ReferenceTablesMatchTheSpecifications) {
  // Anchor the reference itself to values quoted by the OCP specifications.
  const auto& f = tessera_test::small_formats();
  const std::vector<double> fp4{0, 0.5, 1, 1.5, 2, 3, 4, 6, 8};  // 8: the unbounded-exponent value after 6
  EXPECT_EQ(RefRounder(f[4]).values(), fp4);
  const RefRounder e4m3(f[0]), e5m2(f[1]), e2m3(f[2]), e3m2(f[3]);
  EXPECT_EQ(e4m3.max_value(), 448);
  EXPECT_EQ(e4m3.values()[1], 0x1p-9);
  EXPECT_EQ(e4m3.values()[8], 0x1p-6);
  EXPECT_EQ(e5m2.max_value(), 57344);
  EXPECT_EQ(e5m2.values()[1], 0x1p-16);
  EXPECT_EQ(e5m2.values()[4], 0x1p-14);
  EXPECT_EQ(e2m3.max_value(), 7.5);
  EXPECT_EQ(e2m3.values()[1], 0.125);
  EXPECT_EQ(e3m2.max_value(), 28);
  EXPECT_EQ(e3m2.values()[1], 0.0625);
  EXPECT_EQ(e4m3.max_code(), 0x7Eu);
  EXPECT_EQ(e5m2.max_code(), 0x7Bu);
  EXPECT_EQ(e2m3.max_code(), 0x1Fu);
}

TEST(SmallFormats, KnownEncodings) {
  EXPECT_EQ(encode_value(1.0, DType::fp8_e4m3), 0x38u);
  EXPECT_EQ(encode_value(-448.0, DType::fp8_e4m3), 0xFEu);
  EXPECT_EQ(encode_value(1.0, DType::fp8_e5m2), 0x3Cu);
  EXPECT_EQ(encode_value(1.0, DType::fp6_e2m3), 0x08u);
  EXPECT_EQ(encode_value(1.0, DType::fp6_e3m2), 0x0Cu);
  EXPECT_EQ(encode_value(6.0, DType::fp4_e2m1), 0x7u);
  EXPECT_EQ(encode_value(-0.5, DType::fp4_e2m1), 0x9u);
  // Ties: 464 lies between 448 (mantissa 110) and the NaN slot; 448 is even.
  EXPECT_EQ(encode_value(464.0, DType::fp8_e4m3), 0x7Eu);
  EXPECT_EQ(encode_value(465.0, DType::fp8_e4m3), 0x7Fu);    // beyond: NaN, e4m3 has no infinity
  EXPECT_EQ(encode_value(61440.0, DType::fp8_e5m2), 0x7Cu);  // tie with 2^16 (even): infinity
  // fp6/fp4 have no NaN: NaN becomes +0 (Tessera's documented choice), overflow saturates.
  EXPECT_EQ(encode_value(-std::nan(""), DType::fp4_e2m1), 0x0u);
  EXPECT_EQ(encode_value(std::nan(""), DType::fp6_e3m2), 0x00u);
  EXPECT_EQ(encode_value(-1e30, DType::fp6_e2m3), 0x3Fu);
  EXPECT_EQ(encode_value(std::numeric_limits<double>::infinity(), DType::fp4_e2m1), 0x7u);
}

TEST(SmallFormats, DecodeEveryEncoding) {
  for (const RefFormat& f : tessera_test::small_formats()) {
    SCOPED_TRACE(f.name);
    std::vector<std::uint8_t> codes(f.code_count());
    for (std::uint32_t c = 0; c < f.code_count(); ++c) codes[c] = static_cast<std::uint8_t>(c);
    std::vector<float> bulk(codes.size());
    std::vector<double> bulk64(codes.size());
    decode(codes.data(), codes.size(), f.dtype, bulk.data());
    decode(codes.data(), codes.size(), f.dtype, bulk64.data());
    for (std::uint32_t c = 0; c < f.code_count(); ++c) {
      const double want = f.value(c);
      EXPECT_EQ(is_nan_encoding(c, f.dtype), f.is_nan(c)) << c;
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(decode_value(c, f.dtype)) && std::isnan(bulk[c]) && std::isnan(bulk64[c])) << c;
        EXPECT_EQ(std::signbit(decode_value(c, f.dtype)), f.negative(c)) << c;
        EXPECT_EQ(std::signbit(bulk[c]), f.negative(c)) << c;
        continue;
      }
      EXPECT_EQ(decode_value(c, f.dtype), want) << c;
      EXPECT_EQ(static_cast<double>(bulk[c]), want) << c;
      EXPECT_EQ(bulk64[c], want) << c;
      EXPECT_EQ(std::signbit(bulk[c]), std::signbit(want)) << c;  // -0 decodes to -0
    }
  }
}

// Inputs for one small format: the boundary set, every float32 of the
// surrounding binades at a stride of 256 ulps, and a coarse sweep of all floats.
std::vector<float> small_format_inputs(const RefRounder& r) {
  std::vector<float> xs = boundary_inputs(r);
  const int lo_exp = std::ilogb(r.values()[1]) - 3, hi_exp = std::ilogb(r.values().back()) + 3;
  for (int e = lo_exp; e < hi_exp; ++e) {
    for (std::uint32_t m = 0; m < (1u << 23); m += 256) {
      const float x = from_bits((static_cast<std::uint32_t>(e + 127) << 23) | m);
      xs.push_back(x);
      xs.push_back(-x);
    }
  }
  strided_sweep(9973, [&](const std::vector<float>& chunk) { xs.insert(xs.end(), chunk.begin(), chunk.end()); });
  return xs;
}

TEST(SmallFormats, EncodeDenseSweepMatchesBruteForce) {
  for (const RefFormat& f : tessera_test::small_formats()) {
    SCOPED_TRACE(f.name);
    const RefRounder ref(f);
    const std::vector<float> xs = small_format_inputs(ref);
    auto same = [&](std::uint64_t a, std::uint64_t b) {
      return ref.same(static_cast<std::uint32_t>(a), static_cast<std::uint32_t>(b));
    };
    for (const EncodeOptions& o : all_modes()) {
      SCOPED_TRACE(mode_name(o));
      Mismatches bad;
      check_both_paths(
          xs, f.dtype, o, [&](float x) { return ref.encode(x, o.rounding, o.overflow); }, same, bad);
      EXPECT_EQ(bad.count(), 0u) << bad.report();
    }
  }
}

TEST(TowardZero, NeverOverflowsAFiniteValueButKeepsInfinity) {
  const EncodeOptions tz = opts(Rounding::toward_zero);
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(encode_value(500.0, DType::fp8_e4m3, tz), 0x7Eu);  // 448, not NaN
  EXPECT_EQ(encode_value(-1e6, DType::fp8_e5m2, tz), 0xFBu);   // -57344, not -inf
  EXPECT_EQ(encode_value(inf, DType::fp8_e5m2, tz), 0x7Cu);    // infinity stays infinity
  EXPECT_EQ(encode_value(-inf, DType::fp16, tz), 0xFC00u);
  EXPECT_EQ(encode_value(1e6, DType::fp16, tz), 0x7BFFu);
  EXPECT_EQ(encode_value(3.4e38, DType::bf16, tz), 0x7F7Fu);
  EXPECT_EQ(encode_value(inf, DType::fp8_e4m3, tz), 0x7Fu);   // no infinity: NaN
  EXPECT_EQ(encode_value(5.99, DType::fp4_e2m1, tz), 0x6u);   // 4
  EXPECT_EQ(encode_value(-0.49, DType::fp4_e2m1, tz), 0x8u);  // -0
}

}  // namespace
}  // namespace tessera
