// The dtype table: names, aliases, parse errors, layouts and ranges.
#include "tessera/numerics/dtype.h"
#include "tessera/numerics/policy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "tessera/support/error.h"

namespace tessera {
namespace {

struct NameCase {
  const char* text;
  DType dtype;
};

TEST(DtypeParse, EveryCanonicalNameAndAlias) {
  const std::vector<NameCase> cases{
      {"fp64", DType::fp64},
      {"fp32", DType::fp32},
      {"fp16", DType::fp16},
      {"bf16", DType::bf16},
      {"fp8_e4m3", DType::fp8_e4m3},
      {"fp8_e5m2", DType::fp8_e5m2},
      {"fp6_e2m3", DType::fp6_e2m3},
      {"fp6_e3m2", DType::fp6_e3m2},
      {"fp4_e2m1", DType::fp4_e2m1},
      {"e8m0", DType::e8m0},
      {"int4", DType::int4},
      {"int8", DType::int8},
      {"int16", DType::int16},
      {"int32", DType::int32},
      {"int64", DType::int64},
      {"uint8", DType::uint8},
      {"bool", DType::bool_},
      // Aliases.
      {"f64", DType::fp64},
      {"f32", DType::fp32},
      {"f16", DType::fp16},
      {"float32", DType::fp32},
      {"float16", DType::fp16},
      {"half", DType::fp16},
      {"bfloat16", DType::bf16},
  };
  for (const NameCase& c : cases) {
    SCOPED_TRACE(c.text);
    EXPECT_EQ(parse_dtype(c.text), c.dtype);
    DType out = DType::int8;
    EXPECT_TRUE(try_parse_dtype(c.text, out));
    EXPECT_EQ(out, c.dtype);
  }
}

TEST(DtypeParse, CanonicalNamesRoundTrip) {
  std::set<std::string_view> seen;
  ASSERT_EQ(all_dtypes().size(), 19u);
  for (DType dtype : all_dtypes()) {
    EXPECT_EQ(parse_dtype(name(dtype)), dtype) << name(dtype);
    EXPECT_EQ(info(dtype).dtype, dtype);
    EXPECT_TRUE(seen.insert(name(dtype)).second) << "duplicate name " << name(dtype);
  }
}

TEST(DtypeParse, UnknownNameRaisesWithHint) {
  try {
    parse_dtype("bflaot16");
    FAIL() << "no error";
  } catch (const DtypeError& error) {
    EXPECT_EQ(error.code(), ErrorCode::DtypeUnknown);
    EXPECT_NE(error.message().find("did you mean 'bfloat16'?"), std::string::npos) << error.message();
    // The message lists what may be written instead.
    EXPECT_NE(error.message().find("fp8_e4m3"), std::string::npos);
  }
  try {
    parse_dtype("fp8");
    FAIL() << "no error";
  } catch (const DtypeError& error) {
    EXPECT_EQ(error.code(), ErrorCode::DtypeUnknown);
    EXPECT_NE(error.message().find("did you mean 'fp8_e4m3'?"), std::string::npos) << error.message();
  }
  // Nothing plausible: no hint, still an error.
  try {
    parse_dtype("quaternion");
    FAIL() << "no error";
  } catch (const DtypeError& error) {
    EXPECT_EQ(error.code(), ErrorCode::DtypeUnknown);
    EXPECT_EQ(error.message().find("did you mean"), std::string::npos) << error.message();
    EXPECT_NE(error.message().find("unknown dtype 'quaternion'. Storage dtypes are: fp64, fp32,"), std::string::npos)
        << error.message();
  }
  // Names are case-sensitive and exact.
  EXPECT_THROW(parse_dtype("FP32"), DtypeError);
  EXPECT_THROW(parse_dtype("fp32 "), DtypeError);
  EXPECT_THROW(parse_dtype(""), DtypeError);
  DType out = DType::int8;
  EXPECT_FALSE(try_parse_dtype("fp33", out));
  EXPECT_EQ(out, DType::int8);  // untouched on failure
}

TEST(DtypeParse, Tf32IsAMathModeNotAStorageType) {
  try {
    parse_dtype("tf32");
    FAIL() << "no error";
  } catch (const DtypeError& error) {
    EXPECT_EQ(error.code(), ErrorCode::DtypeNotStorage);
    EXPECT_NE(error.message().find("math_mode"), std::string::npos) << error.message();
  }
  DType out{};
  EXPECT_FALSE(try_parse_dtype("tf32", out));
}

TEST(DtypeInfo, MaxFiniteMatchesTheFormatSpecifications) {
  // Values from IEEE 754 (fp16), the bfloat16 definition, the OCP 8-bit
  // floating point spec (e4m3, e5m2) and OCP MX v1.0 (fp6, fp4, e8m0).
  EXPECT_EQ(info(DType::fp8_e4m3).format.max_finite(), 448.0);
  EXPECT_EQ(info(DType::fp8_e5m2).format.max_finite(), 57344.0);
  EXPECT_EQ(info(DType::fp6_e2m3).format.max_finite(), 7.5);
  EXPECT_EQ(info(DType::fp6_e3m2).format.max_finite(), 28.0);
  EXPECT_EQ(info(DType::fp4_e2m1).format.max_finite(), 6.0);
  EXPECT_EQ(info(DType::fp16).format.max_finite(), 65504.0);
  EXPECT_EQ(info(DType::e8m0).format.max_finite(), 0x1p127);
  EXPECT_EQ(info(DType::bf16).format.max_finite(), 0x1.FEp127);
  EXPECT_EQ(info(DType::fp32).format.max_finite(), static_cast<double>(3.4028234663852886e38f));
  EXPECT_EQ(info(DType::fp64).format.max_finite(), 1.7976931348623157e308);
}

TEST(DtypeInfo, SpecialEncodings) {
  // OCP fp8: e4m3 has one NaN per sign (S.1111.111) and no infinity; e5m2 is IEEE-like.
  EXPECT_EQ(info(DType::fp8_e4m3).format.nan_bits(false), 0x7Fu);
  EXPECT_EQ(info(DType::fp8_e4m3).format.nan_bits(true), 0xFFu);
  EXPECT_FALSE(info(DType::fp8_e4m3).format.has_infinity());
  EXPECT_EQ(info(DType::fp8_e5m2).format.infinity_bits(false), 0x7Cu);
  EXPECT_EQ(info(DType::fp8_e5m2).format.infinity_bits(true), 0xFCu);
  EXPECT_EQ(info(DType::fp16).format.infinity_bits(false), 0x7C00u);
  EXPECT_EQ(info(DType::bf16).format.infinity_bits(true), 0xFF80u);
  EXPECT_EQ(info(DType::e8m0).format.nan_bits(false), 0xFFu);
  EXPECT_FALSE(info(DType::fp4_e2m1).format.has_nan());
  EXPECT_FALSE(info(DType::fp6_e2m3).format.has_nan());
  EXPECT_FALSE(info(DType::e8m0).format.has_sign);
}

struct LayoutCase {
  DType dtype;
  int bits;
  int storage_bytes;
  bool is_float;
  bool is_signed;
  int exponent_bits;
  int mantissa_bits;
  int bias;
};

TEST(DtypeInfo, ComplexParts) {
  EXPECT_TRUE(is_complex(DType::complex64));
  EXPECT_TRUE(is_complex(DType::complex128));
  EXPECT_FALSE(is_complex(DType::fp64));
  EXPECT_EQ(complex_part(DType::complex64), DType::fp32);
  EXPECT_EQ(complex_part(DType::complex128), DType::fp64);
  EXPECT_EQ(complex_of(DType::fp32), DType::complex64);
  EXPECT_EQ(complex_of(DType::fp64), DType::complex128);
  EXPECT_THROW(complex_of(DType::fp16), Error);
  EXPECT_EQ(default_policy(DType::complex64).accum, DType::fp32);
  EXPECT_EQ(default_policy(DType::complex128).accum, DType::fp64);
}

TEST(DtypeInfo, Layouts) {
  const std::vector<LayoutCase> cases{
      {DType::fp64, 64, 8, true, true, 11, 52, 1023}, {DType::fp32, 32, 4, true, true, 8, 23, 127},
      {DType::fp16, 16, 2, true, true, 5, 10, 15},    {DType::bf16, 16, 2, true, true, 8, 7, 127},
      {DType::fp8_e4m3, 8, 1, true, true, 4, 3, 7},   {DType::fp8_e5m2, 8, 1, true, true, 5, 2, 15},
      {DType::fp6_e2m3, 6, 1, true, true, 2, 3, 1},   {DType::fp6_e3m2, 6, 1, true, true, 3, 2, 3},
      {DType::fp4_e2m1, 4, 1, true, true, 2, 1, 1},   {DType::e8m0, 8, 1, true, false, 8, 0, 127},
      {DType::int4, 4, 1, false, true, 0, 0, 0},      {DType::int8, 8, 1, false, true, 0, 0, 0},
      {DType::int16, 16, 2, false, true, 0, 0, 0},    {DType::int32, 32, 4, false, true, 0, 0, 0},
      {DType::int64, 64, 8, false, true, 0, 0, 0},    {DType::uint8, 8, 1, false, false, 0, 0, 0},
      {DType::bool_, 8, 1, false, false, 0, 0, 0},
      {DType::complex64, 64, 8, false, true, 0, 0, 0}, {DType::complex128, 128, 16, false, true, 0, 0, 0},
  };
  for (const LayoutCase& c : cases) {
    SCOPED_TRACE(std::string(name(c.dtype)));
    EXPECT_EQ(bit_width(c.dtype), c.bits);
    EXPECT_EQ(storage_bytes(c.dtype), c.storage_bytes);
    EXPECT_EQ(is_float(c.dtype), c.is_float);
    EXPECT_EQ(info(c.dtype).is_signed, c.is_signed);
    if (c.is_float) {
      const FloatFormat& f = info(c.dtype).format;
      EXPECT_EQ(f.exponent_bits, c.exponent_bits);
      EXPECT_EQ(f.mantissa_bits, c.mantissa_bits);
      EXPECT_EQ(f.bias, c.bias);
      EXPECT_EQ(f.total_bits(), c.bits);
    }
  }
}

}  // namespace
}  // namespace tessera
