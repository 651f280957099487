// Promotion rules of docs/guide/promotion.md, checked case by case, plus the
// "holds exactly" relation against brute force over every encoding.
#include <gtest/gtest.h>

#include <cmath>

#include "tessera/graph/promotion.h"
#include "tessera/numerics/convert.h"
#include "tessera/support/error.h"

namespace tessera::graph {
namespace {

TEST(Promotion, FloatPairsTakeTheSmallestFormatHoldingBoth) {
  EXPECT_EQ(promote_dtypes(DType::bf16, DType::fp16), DType::fp32);
  EXPECT_EQ(promote_dtypes(DType::fp8_e4m3, DType::fp8_e5m2), DType::fp16);
  EXPECT_EQ(promote_dtypes(DType::fp6_e2m3, DType::fp6_e3m2), DType::fp8_e4m3);
  EXPECT_EQ(promote_dtypes(DType::fp4_e2m1, DType::fp8_e5m2), DType::fp8_e5m2);
  EXPECT_EQ(promote_dtypes(DType::fp8_e4m3, DType::bf16), DType::bf16);
  EXPECT_EQ(promote_dtypes(DType::fp16, DType::fp32), DType::fp32);
  EXPECT_EQ(promote_dtypes(DType::fp32, DType::fp64), DType::fp64);
  EXPECT_EQ(promote_dtypes(DType::fp16, DType::fp16), DType::fp16);
}

TEST(Promotion, ComplexTakesTheWiderPart) {
  EXPECT_EQ(promote_dtypes(DType::complex64, DType::complex64), DType::complex64);
  EXPECT_EQ(promote_dtypes(DType::complex64, DType::complex128), DType::complex128);
  EXPECT_EQ(promote_dtypes(DType::complex64, DType::fp32), DType::complex64);
  EXPECT_EQ(promote_dtypes(DType::fp64, DType::complex64), DType::complex128);
  EXPECT_EQ(promote_dtypes(DType::complex64, DType::bf16), DType::complex64);
  EXPECT_EQ(promote_dtypes(DType::fp16, DType::complex128), DType::complex128);
  EXPECT_EQ(promote_dtypes(DType::int64, DType::complex64), DType::complex64);
  EXPECT_EQ(promote_dtypes(DType::complex64, DType::bool_), DType::complex64);
  EXPECT_THROW(promote_dtypes(DType::complex64, DType::e8m0), Error);
  EXPECT_TRUE(represents_exactly(DType::complex128, DType::complex64));
  EXPECT_FALSE(represents_exactly(DType::complex64, DType::complex128));
  EXPECT_TRUE(represents_exactly(DType::complex64, DType::fp16));
  EXPECT_FALSE(represents_exactly(DType::fp64, DType::complex64));
  EXPECT_EQ(promote_policies(default_policy(DType::complex64), default_policy(DType::fp64)).accum, DType::fp64);
}

TEST(Promotion, IntegersBoolsAndMixes) {
  EXPECT_EQ(promote_dtypes(DType::uint8, DType::int8), DType::int16);
  EXPECT_EQ(promote_dtypes(DType::int8, DType::int32), DType::int32);
  EXPECT_EQ(promote_dtypes(DType::int4, DType::uint8), DType::int16);
  EXPECT_EQ(promote_dtypes(DType::int32, DType::fp16), DType::fp16);
  EXPECT_EQ(promote_dtypes(DType::bool_, DType::int8), DType::int8);
  EXPECT_EQ(promote_dtypes(DType::fp8_e4m3, DType::bool_), DType::fp8_e4m3);
  EXPECT_THROW(promote_dtypes(DType::e8m0, DType::fp32), DtypeError);
}

// Every finite value of `narrow` decodes to a value that `wide` encodes back
// to the same number: the definition of "holds exactly", checked by brute force.
bool holds_by_brute_force(DType wide, DType narrow) {
  int bits = bit_width(narrow);
  for (std::uint64_t code = 0; code < (std::uint64_t{1} << bits); ++code) {
    double v = decode_value(code, narrow);
    if (std::isnan(v)) {
      if (!std::isnan(decode_value(encode_value(v, wide), wide))) return false;
      continue;
    }
    double back = decode_value(encode_value(v, wide), wide);
    if (back != v || std::signbit(back) != std::signbit(v)) return false;
  }
  return true;
}

TEST(Promotion, RepresentsExactlyMatchesBruteForce) {
  const DType small[] = {DType::fp4_e2m1, DType::fp6_e2m3, DType::fp6_e3m2, DType::fp8_e4m3,
                         DType::fp8_e5m2, DType::fp16,     DType::bf16,     DType::int8,
                         DType::uint8,    DType::int4};
  const DType all[] = {DType::fp4_e2m1, DType::fp6_e2m3, DType::fp6_e3m2, DType::fp8_e4m3, DType::fp8_e5m2,
                       DType::fp16,     DType::bf16,     DType::fp32,     DType::fp64,     DType::int8,
                       DType::int16,    DType::uint8,    DType::int4};
  for (DType narrow : small) {
    for (DType wide : all) {
      EXPECT_EQ(represents_exactly(wide, narrow), holds_by_brute_force(wide, narrow))
          << name(wide) << " holds " << name(narrow);
    }
  }
}

TEST(Promotion, AccumulationRules) {
  NumericsPolicy bf16 = default_policy(DType::bf16);
  NumericsPolicy fp16 = default_policy(DType::fp16);
  NumericsPolicy fp16_narrow = fp16;
  fp16_narrow.accum = DType::fp16;
  NumericsPolicy p = promote_policies(bf16, fp16);
  EXPECT_EQ(p.storage, DType::fp32);
  EXPECT_EQ(p.accum, DType::fp32);
  EXPECT_EQ(promote_policies(fp16_narrow, fp16_narrow), fp16_narrow);
  // The wider operand accumulation wins.
  EXPECT_EQ(promote_policies(fp16_narrow, fp16).accum, DType::fp32);
  // A new storage gets at least its default accumulation.
  NumericsPolicy e4 = default_policy(DType::fp8_e4m3);
  NumericsPolicy e5 = default_policy(DType::fp8_e5m2);
  e4.accum = DType::fp16;
  e5.accum = DType::fp16;
  EXPECT_EQ(promote_policies(e4, e5).accum, DType::fp32);
}

TEST(Promotion, ModifiersComeFromTheOperandWithTheResultStorage) {
  NumericsPolicy sat = default_policy(DType::fp8_e4m3);
  sat.overflow = Overflow::saturate;
  NumericsPolicy plain32 = default_policy(DType::fp32);
  NumericsPolicy wide_sat = default_policy(DType::fp32);
  wide_sat.rounding = Rounding::toward_zero;
  EXPECT_EQ(promote_policies(sat, sat).overflow, Overflow::saturate);
  EXPECT_EQ(promote_policies(sat, plain32), plain32);
  EXPECT_EQ(promote_policies(sat, wide_sat).rounding, Rounding::toward_zero);
  try {
    promote_policies(plain32, wide_sat);
    FAIL() << "conflicting modifiers must raise";
  } catch (const DtypeError& e) {
    EXPECT_NE(std::string(e.message()).find("cast"), std::string::npos);
  }
}

}  // namespace
}  // namespace tessera::graph
