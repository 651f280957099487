// Tile IR type kinds: constructors, printing, parsing and round trips.
#include <gtest/gtest.h>

#include "tessera/ir/type.h"
#include "tessera/support/error.h"

namespace tessera::ir {
namespace {

TEST(TileTypes, PrintEachKind) {
  NumericsPolicy f32 = default_policy(DType::fp32);
  EXPECT_EQ(print_type(Type::lane(f32)), "lane<fp32>");
  EXPECT_EQ(print_type(Type::lane(DType::bool_)), "lane<bool>");
  EXPECT_EQ(print_type(Type::tile(fixed_shape({64, 64}), f32)), "tile<[64, 64] fp32>");
  EXPECT_EQ(print_type(Type::smem(fixed_shape({128}), f32)), "smem<[128] fp32>");
  EXPECT_EQ(print_type(Type::smem(fixed_shape({64, 64}), default_policy(DType::bf16), Swizzle::xor_)),
            "smem<[64, 64] bf16 swizzle(xor)>");
  EXPECT_EQ(print_type(Type::gmem({Dim::named("n")}, f32)), "gmem<[n] fp32>");
  EXPECT_EQ(print_type(Type::gmem({Dim::named("M"), Dim::named("K/tp")}, default_policy(DType::fp16), true)),
            "gmem<[M, K/tp] fp16 mut>");
}

TEST(TileTypes, ParseFields) {
  Type g = parse_type("gmem<[M, K/tp] fp16 mut>");
  EXPECT_EQ(g.kind, TypeKind::gmem);
  EXPECT_TRUE(g.mut);
  ASSERT_EQ(g.rank(), 2u);
  EXPECT_EQ(g.shape[1].symbol, "K/tp");
  EXPECT_EQ(g.dtype(), DType::fp16);
  Type s = parse_type("smem<[64, 64] bf16 swizzle(xor)>");
  EXPECT_EQ(s.swizzle, Swizzle::xor_);
  EXPECT_FALSE(s.mut);
  Type l = parse_type("lane<int64>");
  EXPECT_TRUE(l.is_lane());
  EXPECT_EQ(l.rank(), 0u);
  EXPECT_EQ(parse_type("tile<[N*2, 8] fp32>").shape[0].symbol, "N*2");
  // Kinds differ even with equal shape and policy.
  EXPECT_NE(parse_type("smem<[4] fp32>"), parse_type("gmem<[4] fp32>"));
  EXPECT_NE(parse_type("gmem<[4] fp32>"), parse_type("gmem<[4] fp32 mut>"));
}

TEST(TileTypes, RoundTripAllKinds) {
  const char* texts[] = {"tensor<[B, 64] fp8_e4m3 @accum(fp32)>",
                         "lane<fp32>",
                         "lane<bool>",
                         "lane<int32>",
                         "tile<[64, 64] fp32>",
                         "tile<[16] fp16>",
                         "tile<[16] fp16 @accum(fp16)>",
                         "lane<bf16 @saturate>",
                         "smem<[128] fp32>",
                         "smem<[64, 64] bf16 swizzle(xor)>",
                         "gmem<[n] fp32>",
                         "gmem<[M, K/tp] fp16 mut>",
                         "gmem<[N*2, K/tp/dp] fp64 mut>"};
  for (const char* t : texts) {
    EXPECT_EQ(print_type(parse_type(t)), t) << t;
    EXPECT_EQ(parse_type(print_type(parse_type(t))), parse_type(t)) << t;
  }
}

TEST(TileTypes, Errors) {
  auto code_of = [](const char* text) {
    try {
      parse_type(text);
    } catch (const Error& e) {
      return e.code();
    }
    return ErrorCode::Internal;
  };
  EXPECT_EQ(code_of("lane<[4] fp32>"), ErrorCode::ParseSyntax);      // lane has no shape
  EXPECT_EQ(code_of("smem<[4] fp32 mut>"), ErrorCode::ParseSyntax);  // mut only on gmem
  EXPECT_EQ(code_of("gmem<[4] fp32 swizzle(xor)>"), ErrorCode::ParseSyntax);
  EXPECT_EQ(code_of("smem<[4] fp32 swizzle(abc)>"), ErrorCode::ParseSyntax);
  EXPECT_EQ(code_of("gmem<[4] fp32 mut mut>"), ErrorCode::ParseSyntax);
  EXPECT_EQ(code_of("gmem<[K/] fp32>"), ErrorCode::ParseSyntax);
  EXPECT_EQ(code_of("gmem<[2*N] fp32>"), ErrorCode::ParseSyntax);
  EXPECT_EQ(code_of("gmem<[K/0] fp32>"), ErrorCode::ParseSyntax);
  EXPECT_EQ(code_of("vec<[4] fp32>"), ErrorCode::ParseSyntax);
  try {
    parse_type("gmem<[4] fp32 swizzle(abc)>");
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("only to smem"), std::string::npos) << e.message();
    EXPECT_EQ(e.where().column, 15);
  }
}

}  // namespace
}  // namespace tessera::ir
