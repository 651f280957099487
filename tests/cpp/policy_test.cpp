// Numerics policies: defaults, the canonical text form, and parse errors
// with their codes and locations.
#include "tessera/numerics/policy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "tessera/support/error.h"

namespace tessera {
namespace {

TEST(Policy, DefaultAccumulation) {
  EXPECT_EQ(default_accumulation(DType::fp64), DType::fp64);
  EXPECT_EQ(default_accumulation(DType::int64), DType::int64);
  for (DType d : {DType::int4, DType::int8, DType::int16, DType::int32, DType::uint8, DType::bool_}) {
    EXPECT_EQ(default_accumulation(d), DType::int32) << name(d);
  }
  for (DType d : {DType::fp32, DType::fp16, DType::bf16, DType::fp8_e4m3, DType::fp8_e5m2, DType::fp6_e2m3,
                  DType::fp6_e3m2, DType::fp4_e2m1, DType::e8m0}) {
    EXPECT_EQ(default_accumulation(d), DType::fp32) << name(d);
  }
  const NumericsPolicy p = default_policy(DType::int8);
  EXPECT_EQ(p.storage, DType::int8);
  EXPECT_EQ(p.accum, DType::int32);
  EXPECT_EQ(p.rounding, Rounding::nearest_even);
  EXPECT_EQ(p.overflow, Overflow::inf_nan);
  EXPECT_FALSE(p.loss_scale.has_value());
}

TEST(Policy, ParseTheDocumentedExample) {
  const NumericsPolicy p = parse_policy("fp8_e4m3 @accum(fp32) @stochastic_round @loss_scale(2.0)");
  EXPECT_EQ(p.storage, DType::fp8_e4m3);
  EXPECT_EQ(p.accum, DType::fp32);
  EXPECT_EQ(p.rounding, Rounding::stochastic);
  EXPECT_EQ(p.overflow, Overflow::inf_nan);
  ASSERT_TRUE(p.loss_scale.has_value());
  EXPECT_EQ(*p.loss_scale, 2.0);
}

TEST(Policy, CanonicalText) {
  // Hand-written canonical forms: accumulation always spelled out, modifiers
  // in a fixed order, defaults omitted, aliases replaced by canonical names.
  const std::vector<std::pair<const char*, const char*>> cases{
      {"fp16", "fp16 @accum(fp32)"},
      {"int8", "int8 @accum(int32)"},
      {"fp64", "fp64 @accum(fp64)"},
      {"bfloat16 @saturate @accum(f32)", "bf16 @accum(fp32) @saturate"},
      {"  half\t@toward_zero   ", "fp16 @accum(fp32) @toward_zero"},
      {"fp8_e5m2 @loss_scale(65536) @saturate @stochastic_round",
       "fp8_e5m2 @accum(fp32) @stochastic_round @saturate @loss_scale(65536.0)"},
      {"fp32 @nearest_even @inf_nan", "fp32 @accum(fp32)"},
      {"fp16 @loss_scale(0.5)", "fp16 @accum(fp32) @loss_scale(0.5)"},
      {"fp16 @loss_scale(1e-3)", "fp16 @accum(fp32) @loss_scale(0.001)"},
      {"fp16 @loss_scale( 2 )", "fp16 @accum(fp32) @loss_scale(2.0)"},
      {"fp16@accum ( fp16 )", "fp16 @accum(fp16)"},
      {"fp4_e2m1 @accum(bf16)", "fp4_e2m1 @accum(bf16)"},
  };
  for (const auto& [text, canonical] : cases) {
    EXPECT_EQ(print_policy(parse_policy(text)), canonical) << text;
    EXPECT_EQ(print_policy(parse_policy(canonical)), canonical) << canonical;
  }
}

TEST(Policy, RoundTripForManyPolicies) {
  std::vector<NumericsPolicy> policies;
  for (DType storage : all_dtypes()) {
    for (Rounding rounding : {Rounding::nearest_even, Rounding::stochastic, Rounding::toward_zero}) {
      for (Overflow overflow : {Overflow::inf_nan, Overflow::saturate}) {
        for (double scale : {0.0, 2.0, 0.5, 1e-3, 65536.0, 1e20, 3.0e-300}) {
          NumericsPolicy p = default_policy(storage);
          p.rounding = rounding;
          p.overflow = overflow;
          if (scale != 0.0) p.loss_scale = scale;
          policies.push_back(p);
          p.accum = storage;  // any dtype may be named as the accumulation type
          policies.push_back(p);
        }
      }
    }
  }
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> exponent(-30, 30);
  for (int i = 0; i < 2000; ++i) {
    NumericsPolicy p;
    p.loss_scale = std::pow(2.0, exponent(rng)) * (1 + static_cast<double>(rng() % 1000) / 7.0);
    policies.push_back(p);
  }
  for (const NumericsPolicy& p : policies) {
    const std::string text = print_policy(p);
    EXPECT_EQ(parse_policy(text), p) << text;
  }
}

// Parses `text`, expecting an error of type E with `code` at line 1, `column`.
template <typename E>
E expect_error(const std::string& text, ErrorCode code, int column, int span = -1) {
  try {
    parse_policy(text);
  } catch (const E& error) {
    EXPECT_EQ(error.code(), code) << text << "\n" << error.what();
    EXPECT_EQ(error.where().line, 1) << text;
    EXPECT_EQ(error.where().column, column) << text << "\n" << error.what();
    if (span >= 0) {
      EXPECT_EQ(error.where().span, span) << text;
    }
    EXPECT_EQ(error.where().file, "<policy>");
    EXPECT_EQ(error.where().line_text, text);
    return error;
  } catch (const Error& other) {
    ADD_FAILURE() << text << ": wrong error class: " << other.what();
    return E(code, "");
  }
  ADD_FAILURE() << text << ": no error";
  return E(code, "");
}

TEST(PolicyErrors, UnknownModifierPointsAtItAndSuggests) {
  const ParseError error = expect_error<ParseError>("fp16 @stochastic", ErrorCode::ParseUnknownModifier, 7, 10);
  EXPECT_NE(error.message().find("did you mean '@stochastic_round'?"), std::string::npos) << error.message();
  EXPECT_EQ(std::string(error.what()), "<policy>:1:7: error[TE3002]: " + error.message() +
                                           "\n"
                                           "  fp16 @stochastic\n"
                                           "        ^~~~~~~~~~\n");
  const ParseError far = expect_error<ParseError>("fp16 @accum(fp32) @saturat", ErrorCode::ParseUnknownModifier, 20);
  EXPECT_NE(far.message().find("did you mean '@saturate'?"), std::string::npos) << far.message();
  const ParseError none = expect_error<ParseError>("fp16 @xyzzy", ErrorCode::ParseUnknownModifier, 7);
  EXPECT_EQ(none.message().find("did you mean"), std::string::npos) << none.message();
  EXPECT_EQ(none.message().rfind("unknown policy modifier '@xyzzy'. Modifiers are @accum(dtype),", 0), 0u)
      << none.message();
}

TEST(PolicyErrors, DuplicateModifiers) {
  expect_error<ParseError>("fp16 @saturate @inf_nan", ErrorCode::ParseDuplicateModifier, 17, 7);
  expect_error<ParseError>("fp16 @accum(fp32) @accum(fp64)", ErrorCode::ParseDuplicateModifier, 20, 5);
  expect_error<ParseError>("fp16 @toward_zero @stochastic_round", ErrorCode::ParseDuplicateModifier, 20);
  expect_error<ParseError>("fp16 @loss_scale(2.0) @loss_scale(4.0)", ErrorCode::ParseDuplicateModifier, 24);
  expect_error<ParseError>("fp16 @saturate @saturate", ErrorCode::ParseDuplicateModifier, 17);
}

TEST(PolicyErrors, BadDtypesCarryTheirLocation) {
  const DtypeError accum = expect_error<DtypeError>("fp16 @accum(fp33)", ErrorCode::DtypeUnknown, 13, 4);
  EXPECT_NE(accum.message().find("did you mean 'fp32'?"), std::string::npos) << accum.message();
  EXPECT_NE(std::string(accum.what()).find("<policy>:1:13: error[TE1001]"), std::string::npos) << accum.what();
  expect_error<DtypeError>("fp16 @accum( tf32 )", ErrorCode::DtypeNotStorage, 14, 4);
  expect_error<DtypeError>("float8 @accum(fp32)", ErrorCode::DtypeUnknown, 1, 6);
  expect_error<DtypeError>("  tf32", ErrorCode::DtypeNotStorage, 3, 4);
}

TEST(PolicyErrors, Syntax) {
  const ParseError paren = expect_error<ParseError>("fp16 @accum(fp32", ErrorCode::ParseSyntax, 17);
  EXPECT_NE(paren.message().find("expected ')'"), std::string::npos) << paren.message();
  expect_error<ParseError>("fp16 @accum fp32)", ErrorCode::ParseSyntax, 13);
  expect_error<ParseError>("fp16 @loss_scale(2.0", ErrorCode::ParseSyntax, 21);
  const ParseError negative = expect_error<ParseError>("fp16 @loss_scale(-2.0)", ErrorCode::ParseSyntax, 18, 4);
  EXPECT_NE(negative.message().find("positive"), std::string::npos) << negative.message();
  expect_error<ParseError>("fp16 @loss_scale(0)", ErrorCode::ParseSyntax, 18);
  expect_error<ParseError>("fp16 @loss_scale(inf)", ErrorCode::ParseSyntax, 18);
  expect_error<ParseError>("fp16 @loss_scale(nan)", ErrorCode::ParseSyntax, 18);
  expect_error<ParseError>("fp16 @loss_scale(abc)", ErrorCode::ParseSyntax, 18);
  expect_error<ParseError>("fp16 @loss_scale()", ErrorCode::ParseSyntax, 18);
  const ParseError trailing = expect_error<ParseError>("fp16 @saturate xyz", ErrorCode::ParseSyntax, 16);
  EXPECT_NE(trailing.message().find("expected '@'"), std::string::npos) << trailing.message();
  expect_error<ParseError>("fp16)", ErrorCode::ParseSyntax, 5);
  expect_error<ParseError>("fp16 @saturate @", ErrorCode::ParseSyntax, 17);
  expect_error<ParseError>("@accum(fp32)", ErrorCode::ParseSyntax, 1);
  expect_error<ParseError>("", ErrorCode::ParseSyntax, 1);
}

TEST(PolicyErrors, LocationOnLaterLinesAndCustomFile) {
  try {
    parse_policy("fp16\n  @accum(fp32)\n  @bogus", "model.tsr");
    FAIL() << "no error";
  } catch (const ParseError& error) {
    EXPECT_EQ(error.code(), ErrorCode::ParseUnknownModifier);
    EXPECT_EQ(error.where().file, "model.tsr");
    EXPECT_EQ(error.where().line, 3);
    EXPECT_EQ(error.where().column, 4);
    EXPECT_EQ(error.where().line_text, "  @bogus");
    EXPECT_NE(std::string(error.what()).find("model.tsr:3:4: error[TE3002]"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace tessera
