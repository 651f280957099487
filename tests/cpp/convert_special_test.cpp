// Conversions with rules of their own, against independent references:
//   stochastic rounding  Random123's Philox known-answer vectors, and the
//                        mean of many draws (unbiased within 4 standard errors);
//   e8m0                 powers of two and the documented tie/overflow rules;
//   integers             std::nearbyint / std::trunc under the default
//                        rounding mode, then clamping;
//   fp32                 the FPU's double -> float conversion;
//   fp64                 identity on bits.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "convert_helpers.h"
#include "reference_formats.h"
#include "tessera/numerics/convert.h"
#include "tessera/numerics/philox.h"
#include "tessera/support/error.h"

namespace tessera {
namespace {

using tessera_test::bulk_encode;
using tessera_test::Mismatches;
using tessera_test::opts;
using tessera_test::strided_sweep;
using tessera_test::to_bits;

// ------------------------------------------------- stochastic rounding ----

TEST(Philox, KnownAnswerVectorsFromRandom123) {
  using Out = std::array<std::uint32_t, 4>;
  EXPECT_EQ(philox4x32({0, 0, 0, 0}, {0, 0}), (Out{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  EXPECT_EQ(philox4x32({~0u, ~0u, ~0u, ~0u}, {~0u, ~0u}), (Out{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  EXPECT_EQ(philox4x32({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, {0xa4093822u, 0x299f31d0u}),
            (Out{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

struct StochasticCase {
  DType dtype;
  double lo;     // representable
  double hi;     // lo's representable neighbour, one step away from zero
  double where;  // v = lo + where * (hi - lo)
};

TEST(Stochastic, UnbiasedAndAlwaysANeighbour) {
  const std::vector<StochasticCase> cases{
      {DType::fp8_e4m3, 1.0, 1.125, 0.3},      {DType::fp8_e4m3, -256.0, -240.0, 0.77},
      {DType::fp8_e4m3, 0x1p-9, 0x2p-9, 0.5},  {DType::fp8_e5m2, 3.0, 3.5, 0.1},
      {DType::fp6_e2m3, 0.25, 0.375, 0.6},     {DType::fp6_e3m2, -12.0, -14.0, 0.4},
      {DType::fp4_e2m1, 4.0, 6.0, 0.25},       {DType::fp4_e2m1, -0.0, -0.5, 0.9},
      {DType::fp16, 1.0, 1.0 + 0x1p-10, 0.35}, {DType::fp16, 0x1p-24, 0x2p-24, 0.5},
      {DType::bf16, 100.0, 100.5, 0.7},        {DType::int8, 2.0, 3.0, 0.3},
      {DType::int8, -2.0, -3.0, 0.3},          {DType::int32, -0.0, -1.0, 0.2},
  };
  constexpr std::size_t kN = 200000;
  for (const StochasticCase& c : cases) {
    const float v = static_cast<float>(c.lo + c.where * (c.hi - c.lo));
    SCOPED_TRACE(std::string(name(c.dtype)) + " v=" + std::to_string(v));
    const double p = (static_cast<double>(v) - c.lo) / (c.hi - c.lo);  // probability of hi
    const std::uint64_t lo_code = encode_value(c.lo, c.dtype), hi_code = encode_value(c.hi, c.dtype);
    ASSERT_EQ(decode_value(lo_code, c.dtype), c.lo);
    ASSERT_EQ(decode_value(hi_code, c.dtype), c.hi);
    const std::vector<float> xs(kN, v);
    const std::vector<std::uint64_t> codes =
        bulk_encode(xs, c.dtype, opts(Rounding::stochastic, Overflow::inf_nan, 42));
    double sum = 0;
    std::size_t strays = 0;
    for (std::size_t i = 0; i < kN; ++i) {
      if (codes[i] != lo_code && codes[i] != hi_code) ++strays;
      sum += decode_value(codes[i], c.dtype);
    }
    EXPECT_EQ(strays, 0u);
    const double standard_error = std::fabs(c.hi - c.lo) * std::sqrt(p * (1 - p) / kN);
    EXPECT_NEAR(sum / kN, static_cast<double>(v), 4 * standard_error);
  }
}

TEST(Stochastic, RepresentableValuesAreExact) {
  const std::vector<float> xs{1.0f, -448.0f, 0.0f, 0x1p-9f};
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    EXPECT_EQ(bulk_encode(xs, DType::fp8_e4m3, opts(Rounding::stochastic, Overflow::inf_nan, seed)),
              (std::vector<std::uint64_t>{0x38, 0xFE, 0x00, 0x01}));
  }
}

TEST(Stochastic, SeedsAndIndicesSelectTheBits) {
  std::vector<float> xs(4096);
  for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = 1.0f + static_cast<float>(i % 97) / 97.0f;
  for (DType dtype : {DType::fp8_e4m3, DType::bf16, DType::fp4_e2m1, DType::int8}) {
    SCOPED_TRACE(std::string(name(dtype)));
    const auto a = bulk_encode(xs, dtype, opts(Rounding::stochastic, Overflow::inf_nan, 7));
    EXPECT_EQ(a, bulk_encode(xs, dtype, opts(Rounding::stochastic, Overflow::inf_nan, 7)));
    EXPECT_NE(a, bulk_encode(xs, dtype, opts(Rounding::stochastic, Overflow::inf_nan, 8)));
    // Element i uses Philox(seed, first_index + i), whichever entry point.
    EncodeOptions shifted = opts(Rounding::stochastic, Overflow::inf_nan, 7);
    shifted.first_index = 1000;
    const auto b = bulk_encode(xs, dtype, shifted);
    for (std::size_t i = 0; i < xs.size(); ++i) {
      ASSERT_EQ(b[i], encode_value(xs[i], dtype, opts(Rounding::stochastic, Overflow::inf_nan, 7), 1000 + i)) << i;
      ASSERT_EQ(a[i], encode_value(xs[i], dtype, opts(Rounding::stochastic, Overflow::inf_nan, 7), i)) << i;
    }
    EXPECT_NE(a, b);
  }
}

// ---------------------------------------------------------------- e8m0 ----

TEST(E8m0, SpecialsPowersTiesAndRange) {
  const double inf = std::numeric_limits<double>::infinity();
  for (double x : {0.0, -0.0, -1.0, -inf, std::nan(""), inf}) EXPECT_EQ(encode_value(x, DType::e8m0), 0xFFu) << x;
  EXPECT_EQ(encode_value(inf, DType::e8m0, opts(Rounding::nearest_even, Overflow::saturate)), 0xFEu);
  for (int k = -127; k <= 127; ++k) {
    SCOPED_TRACE(k);
    EXPECT_EQ(encode_value(std::ldexp(1.0, k), DType::e8m0), static_cast<std::uint64_t>(k + 127));
    EXPECT_EQ(decode_value(static_cast<std::uint64_t>(k + 127), DType::e8m0), std::ldexp(1.0, k));
    // Midway in linear terms (1.5 * 2^k) rounds up; just below it rounds down.
    const std::uint64_t up = k == 127 ? 0xFF : static_cast<std::uint64_t>(k + 128);
    EXPECT_EQ(encode_value(std::ldexp(1.5, k), DType::e8m0), up);
    EXPECT_EQ(encode_value(std::nextafter(std::ldexp(1.5, k), 0.0), DType::e8m0), static_cast<std::uint64_t>(k + 127));
    EXPECT_EQ(encode_value(std::ldexp(1.75, k), DType::e8m0, opts(Rounding::toward_zero)),
              static_cast<std::uint64_t>(k + 127));
  }
  EXPECT_EQ(encode_value(0x1p128, DType::e8m0), 0xFFu);
  EXPECT_EQ(encode_value(0x1p128, DType::e8m0, opts(Rounding::nearest_even, Overflow::saturate)), 0xFEu);
  EXPECT_EQ(encode_value(1.5 * 0x1p127, DType::e8m0, opts(Rounding::nearest_even, Overflow::saturate)), 0xFEu);
  for (double tiny : {0x1p-128, 0x1p-200, 1e-300, 0x1.4p-128})
    EXPECT_EQ(encode_value(tiny, DType::e8m0), 0x00u) << tiny;
  // The bulk float entry point follows the same rules.
  EXPECT_EQ(bulk_encode({0.0f, 1.0f, 3.0f, -2.0f, 1e-40f, 0x1p127f}, DType::e8m0, {}),
            (std::vector<std::uint64_t>{0xFF, 0x7F, 0x81, 0xFF, 0x00, 0xFE}));
  EXPECT_TRUE(std::isnan(decode_value(0xFF, DType::e8m0)));
  EXPECT_TRUE(is_nan_encoding(0xFF, DType::e8m0));
}

// ------------------------------------------------------------ integers ----

struct IntRange {
  DType dtype;
  double lo;
  double hi;
};

// The FPU's rounding (nearest-even under the default mode, or truncation),
// then clamping: an independent statement of the integer rule.
std::uint64_t int_expected(double x, const IntRange& r, Rounding rounding) {
  if (std::isnan(x)) return 0;
  double v = rounding == Rounding::toward_zero ? std::trunc(x) : std::nearbyint(x);
  v = std::clamp(v, r.lo, r.hi);
  const int bits = bit_width(r.dtype);
  const std::uint64_t mask = bits == 64 ? ~0ull : (1ull << bits) - 1;
  // r.hi of int64 is 2^63 as a double: that is INT64_MAX after saturation.
  const auto value = v >= 0x1p63 ? std::numeric_limits<std::int64_t>::max() : static_cast<std::int64_t>(v);
  return static_cast<std::uint64_t>(value) & mask;
}

TEST(Integers, RoundingAndSaturationMatchFpu) {
  ASSERT_EQ(std::fegetround(), FE_TONEAREST);
  const std::vector<IntRange> ranges{{DType::int4, -8, 7},
                                     {DType::int8, -128, 127},
                                     {DType::int16, -32768, 32767},
                                     {DType::int32, -0x1p31, 0x1p31 - 1},
                                     {DType::int64, -0x1p63, 0x1p63},
                                     {DType::uint8, 0, 255}};
  std::vector<double> xs{0.5,
                         1.5,
                         2.5,
                         -0.5,
                         -1.5,
                         -2.5,
                         0.49999999999999994,
                         -0x1p-60,
                         -0x1p-1074,
                         0x1p-60,
                         -0.0,
                         2.7,
                         -2.7,
                         1e300,
                         -1e300,
                         std::numeric_limits<double>::infinity(),
                         -std::numeric_limits<double>::infinity(),
                         std::nan(""),
                         0x1p63,
                         -0x1p63,
                         0x1p52 + 0.5,
                         4503599627370497.0,
                         9007199254740993.0};
  for (const IntRange& r : ranges) {
    for (double edge : {r.lo, r.hi}) {
      for (double d : {-1.0, -0.5, -0.25, 0.0, 0.25, 0.5, 1.0}) xs.push_back(edge + d);
    }
  }
  std::mt19937_64 rng(2024);
  std::uniform_real_distribution<double> small(-300.0, 300.0);
  for (int i = 0; i < 20000; ++i) {
    xs.push_back(small(rng));
    xs.push_back(std::round(small(rng) * 2) / 2);  // many exact ties
    xs.push_back(-std::ldexp(1.0, -static_cast<int>(rng() % 1074)));
    xs.push_back(std::ldexp(small(rng), static_cast<int>(rng() % 64)));
  }
  for (const IntRange& r : ranges) {
    SCOPED_TRACE(std::string(name(r.dtype)));
    for (Rounding rounding : {Rounding::nearest_even, Rounding::toward_zero}) {
      Mismatches bad;
      const EncodeOptions o = opts(rounding);
      std::vector<unsigned char> raw(xs.size() * static_cast<std::size_t>(storage_bytes(r.dtype)));
      encode(xs.data(), xs.size(), r.dtype, raw.data(), o);
      for (std::size_t i = 0; i < xs.size(); ++i) {
        const std::uint64_t want = int_expected(xs[i], r, rounding);
        const std::uint64_t got = encode_value(xs[i], r.dtype, o);
        std::uint64_t got_bulk = 0;
        std::memcpy(&got_bulk, raw.data() + i * static_cast<std::size_t>(storage_bytes(r.dtype)),
                    static_cast<std::size_t>(storage_bytes(r.dtype)));
        if (got != want) bad.add(xs[i], want, got, rounding_name(rounding).data());
        if (got_bulk != want) bad.add(xs[i], want, got_bulk, "bulk double");
      }
      EXPECT_EQ(bad.count(), 0u) << bad.report();
    }
  }
}

TEST(Integers, BoolAndSignExtension) {
  EXPECT_EQ(encode_value(0.5, DType::bool_), 1u);
  EXPECT_EQ(encode_value(-0.0, DType::bool_), 0u);
  EXPECT_EQ(encode_value(std::nan(""), DType::bool_), 1u);  // NaN is truthy, as in C and numpy
  EXPECT_EQ(decode_value(1, DType::bool_), 1.0);
  EXPECT_EQ(decode_value(0, DType::bool_), 0.0);
  for (std::uint64_t c = 0; c < 16; ++c) EXPECT_EQ(decode_value(c, DType::int4), c < 8 ? c : double(c) - 16) << c;
  EXPECT_EQ(decode_value(0xF, DType::int4), -1.0);
  EXPECT_EQ(decode_value(0x80, DType::int8), -128.0);
  EXPECT_EQ(decode_value(0xFF, DType::uint8), 255.0);
  EXPECT_EQ(decode_value(0x8000, DType::int16), -32768.0);
  EXPECT_EQ(decode_value(0xFFFFFFFF, DType::int32), -1.0);
  EXPECT_EQ(decode_value(0x8000000000000000ull, DType::int64), -0x1p63);
  const std::int32_t int32s[3] = {-2147483647 - 1, 2147483647, -5};
  double out[3];
  decode(int32s, 3, DType::int32, out);
  EXPECT_EQ(out[0], -2147483648.0);
  EXPECT_EQ(out[1], 2147483647.0);  // exact through the double overload
  EXPECT_EQ(out[2], -5.0);
}

TEST(Integers, Int4PackingLayout) {
  const std::uint8_t codes[5] = {0x1, 0x2, 0xF, 0x8, 0x7};
  std::uint8_t packed[3] = {0xAA, 0xAA, 0xAA};
  pack_int4(codes, 5, packed);
  EXPECT_EQ(packed[0], 0x21);  // element 0 in the low nibble
  EXPECT_EQ(packed[1], 0x8F);
  EXPECT_EQ(packed[2], 0x07);  // odd length: high nibble of the last byte is zero
  EXPECT_EQ(packed_int4_bytes(5), 3u);
  EXPECT_EQ(packed_int4_bytes(4), 2u);
  std::uint8_t back[5] = {};
  unpack_int4(packed, 5, back);
  EXPECT_TRUE(std::equal(codes, codes + 5, back));
  std::mt19937 rng(99);
  for (std::size_t n : {0u, 1u, 2u, 7u, 64u, 1001u}) {
    std::vector<std::uint8_t> in(n), out(n), bytes(packed_int4_bytes(n));
    for (auto& c : in) c = static_cast<std::uint8_t>(rng() & 0xF);
    pack_int4(in.data(), n, bytes.data());
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ((bytes[i / 2] >> (4 * (i % 2))) & 0xF, in[i]) << n << " " << i;
    unpack_int4(bytes.data(), n, out.data());
    EXPECT_EQ(in, out) << n;
  }
}

// pack_codes / unpack_codes for every packed width: element i at bits
// [i*w, (i+1)*w) of a little-endian stream, checked bit by bit.
TEST(Int4Packing, SubBytePackingOfEveryWidth) {
  std::mt19937 rng(7);
  for (DType d : {DType::int4, DType::fp4_e2m1, DType::fp6_e2m3, DType::fp6_e3m2}) {
    const std::size_t w = static_cast<std::size_t>(bit_width(d));
    for (std::size_t n : {0u, 1u, 3u, 4u, 5u, 63u, 1000u}) {
      std::vector<std::uint8_t> in(n), out(n, 0xFF), bytes((n * w + 7) / 8 + 1, 0xEE);
      for (auto& c : in) c = static_cast<std::uint8_t>(rng() & ((1u << w) - 1));
      pack_codes(d, in.data(), n, bytes.data());
      for (std::size_t i = 0; i < n; ++i) {
        for (std::size_t k = 0; k < w; ++k) {
          const std::size_t bit = i * w + k;
          ASSERT_EQ((bytes[bit / 8] >> (bit % 8)) & 1u, (in[i] >> k) & 1u) << name(d) << " n=" << n << " i=" << i;
        }
      }
      if (n * w % 8 != 0) {
        EXPECT_EQ(bytes[n * w / 8] >> (n * w % 8), 0) << "unused high bits are cleared";
      }
      EXPECT_EQ(bytes[(n * w + 7) / 8], 0xEE) << "nothing written past the stream";
      unpack_codes(d, bytes.data(), n, out.data());
      EXPECT_EQ(in, out) << name(d) << " n=" << n;
    }
  }
}

// ---------------------------------------------------------- fp32, fp64 ----

TEST(Fp64AndFp32, Fp64IsIdentityOnBits) {
  for (std::uint64_t bits : {0x0ull, 0x8000000000000000ull, 0x7FF0000000000000ull, 0x7FF8000000000123ull,
                             0xFFF4000000000001ull, 0x0000000000000001ull, 0x3FF0000000000001ull}) {
    EXPECT_EQ(encode_value(std::bit_cast<double>(bits), DType::fp64), bits);
    EXPECT_EQ(std::bit_cast<std::uint64_t>(decode_value(bits, DType::fp64)), bits);
    double in = std::bit_cast<double>(bits);
    std::uint64_t out = 0;
    encode(&in, 1, DType::fp64, &out);
    EXPECT_EQ(out, bits);
  }
}

TEST(Fp64AndFp32, Fp32FromDoubleRoundsCorrectly) {
  // Hand-derived: 1 + 2^-24 is the tie between 1 and 1 + 2^-23 -> 1 (even);
  // 1 + 3 * 2^-24 ties between 1 + 2^-23 and 1 + 2^-22 -> 1 + 2^-22 (even).
  EXPECT_EQ(encode_value(1 + 0x1p-24, DType::fp32), 0x3F800000u);
  EXPECT_EQ(encode_value(1 + 3 * 0x1p-24, DType::fp32), 0x3F800002u);
  EXPECT_EQ(encode_value(1 + 0x1p-24 + 0x1p-50, DType::fp32), 0x3F800001u);
  EXPECT_EQ(encode_value(1 + 3 * 0x1p-24, DType::fp32, opts(Rounding::toward_zero)), 0x3F800001u);
  EXPECT_EQ(encode_value(1e39, DType::fp32), 0x7F800000u);
  EXPECT_EQ(encode_value(-1e39, DType::fp32, opts(Rounding::nearest_even, Overflow::saturate)), 0xFF7FFFFFu);
  EXPECT_EQ(encode_value(0x1p-150, DType::fp32), 0x0u);          // tie with 0
  EXPECT_EQ(encode_value(0x1.8p-150, DType::fp32), 0x1u);        // above the tie
  EXPECT_EQ(encode_value(-0x1p-149, DType::fp32), 0x80000001u);  // smallest subnormal
  // Random doubles over float's whole range against the FPU's conversion.
  std::mt19937_64 rng(31337);
  Mismatches bad;
  for (int i = 0; i < 500000; ++i) {
    const std::uint64_t exponent = 1023 - 160 + rng() % 300;  // from far below subnormals to overflow
    const double x = std::bit_cast<double>((rng() & 0x800FFFFFFFFFFFFFull) | (exponent << 52));
    const std::uint32_t want = to_bits(static_cast<float>(x));
    const std::uint64_t got = encode_value(x, DType::fp32);
    if (got != want) bad.add(x, want, got, "fp32");
  }
  EXPECT_EQ(bad.count(), 0u) << bad.report();
}

TEST(Fp64AndFp32, Fp32BulkIsIdentity) {
  Mismatches bad;
  strided_sweep(4099, [&](const std::vector<float>& xs) {
    const auto out = bulk_encode(xs, DType::fp32, {});
    for (std::size_t i = 0; i < xs.size(); ++i) {
      if (out[i] != to_bits(xs[i])) bad.add(xs[i], to_bits(xs[i]), out[i], "fp32 bulk");
    }
  });
  EXPECT_EQ(bad.count(), 0u) << bad.report();
}

TEST(RoundingNames, ParseAndPrint) {
  for (Rounding r : {Rounding::nearest_even, Rounding::stochastic, Rounding::toward_zero}) {
    EXPECT_EQ(parse_rounding(rounding_name(r)), r);
  }
  EXPECT_EQ(parse_overflow("saturate"), Overflow::saturate);
  EXPECT_EQ(parse_overflow("inf_nan"), Overflow::inf_nan);
  EXPECT_THROW(parse_rounding("nearest"), ArgumentError);
  EXPECT_THROW(parse_overflow("clamp"), ArgumentError);
}

}  // namespace
}  // namespace tessera
