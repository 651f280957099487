// Graph IR cast, reduction, linalg and normalization ops: reference kernels
// against hand-derived results (including the fixed accumulation order and the
// single rounding per step), result policies, overflow-safe normalizations at
// the edge of fp16, and every error case.
#include <gtest/gtest.h>

#include <random>

#include <cmath>
#include <limits>
#include <numbers>

#include "tessera/graph/executor.h"
#include "tessera/numerics/policy.h"
#include "tessera/runtime/tensor.h"
#include "tessera/support/error.h"

namespace {

using tessera::ArgumentError;
using tessera::DType;
using tessera::DtypeError;
using tessera::Error;
using tessera::NumericsPolicy;
using tessera::ShapeError;
using tessera::Tensor;
using tessera::graph::execute_op;
using tessera::ir::AttrMap;
using Sizes = std::vector<std::int64_t>;
using Values = std::vector<double>;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

NumericsPolicy pol(const char* text) {
  return tessera::parse_policy(text);
}

Tensor vals(Values v, Sizes shape, const char* policy = "fp32") {
  return Tensor::from_values(v, std::move(shape), pol(policy));
}

Tensor run1(std::string_view op, std::vector<Tensor> inputs, const AttrMap& attrs = {}) {
  auto out = execute_op(op, inputs, attrs);
  EXPECT_EQ(out.size(), 1u);
  return out.at(0);
}

// Element-by-element equality where NaN equals NaN.
void expect_values(const Tensor& t, const Values& want) {
  auto got = t.to_values();
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "element " << i << " is " << got[i];
    } else {
      EXPECT_EQ(got[i], want[i]) << "element " << i;
    }
  }
}

void expect_near(const Tensor& t, const Values& want, double rel) {
  auto got = t.to_values();
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], rel * std::max(1.0, std::fabs(want[i]))) << "element " << i;
  }
}

// Runs `f` and checks it throws E with every fragment in the message.
template <typename E, typename F>
void expect_error(F f, std::vector<std::string> fragments) {
  try {
    f();
    ADD_FAILURE() << "no error thrown";
  } catch (const E& e) {
    for (const auto& frag : fragments) EXPECT_NE(e.message().find(frag), std::string::npos) << e.message();
  } catch (const Error& e) {
    ADD_FAILURE() << "wrong error kind: " << e.message();
  }
}

// ---- cast ----

TEST(GraphCast, RoundsOnceToTargetWithItsOverflow) {
  Tensor x = vals({1.0, 65504.0, 65520.0, 1.0 + std::ldexp(1, -11), 1.0 + 3 * std::ldexp(1, -11)}, {5});
  Tensor y = run1("graph.cast", {x}, {{"policy", pol("fp16")}});
  EXPECT_EQ(y.policy(), pol("fp16"));
  // 65520 is the midpoint above fp16's maximum: it overflows to inf; ties go to even.
  expect_values(y, {1.0, 65504.0, kInf, 1.0, 1.0 + std::ldexp(1, -9)});
  Tensor s = run1("graph.cast", {x}, {{"policy", pol("fp16 @saturate")}});
  EXPECT_EQ(s.to_values()[2], 65504.0);
}

TEST(GraphCast, NoAccumulationRoundingInBetween) {
  // 1 + 2^-4 + 2^-12 rounds up to 1.125 in fp8_e4m3; rounding to the fp16
  // accumulation type first would land on the midpoint 1 + 2^-4 and tie to 1.0.
  Tensor x = vals({1.0 + std::ldexp(1, -4) + std::ldexp(1, -12)}, {1});
  expect_values(run1("graph.cast", {x}, {{"policy", pol("fp8_e4m3 @accum(fp16)")}}), {1.125});
}

TEST(GraphCast, ToIntegersRoundsToEvenAndSaturates) {
  Tensor x = vals({2.5, 3.5, -2.5, 300.0, -300.0}, {5});
  Tensor y = run1("graph.cast", {x}, {{"policy", pol("int8")}});
  EXPECT_EQ(y.dtype(), DType::int8);
  expect_values(y, {2.0, 4.0, -2.0, 127.0, -128.0});
  expect_values(run1("graph.cast", {y}, {{"policy", pol("fp64")}}), {2.0, 4.0, -2.0, 127.0, -128.0});
}

TEST(GraphCast, StochasticRoundingIsKeyedBySeed) {
  const double v = 1.0 + std::ldexp(1, -12);  // a quarter of an fp16 ulp above 1
  Tensor x = vals(Values(4000, v), {4000});
  auto cast = [&](std::int64_t seed) {
    return run1("graph.cast", {x}, {{"policy", pol("fp16 @stochastic_round")}, {"seed", seed}}).to_values();
  };
  auto a = cast(7), b = cast(7), c = cast(8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  int up = 0;
  for (double y : a) {
    ASSERT_TRUE(y == 1.0 || y == 1.0 + std::ldexp(1, -10)) << y;
    up += y > 1.0;
  }
  EXPECT_NEAR(up / 4000.0, 0.25, 0.05);
}

TEST(GraphCast, NeedsPolicy) {
  expect_error<ArgumentError>([] { run1("graph.cast", {vals({1}, {1})}); }, {"graph.cast", "policy"});
}

// ---- reductions ----

TEST(GraphReduce, SumOverAxes) {
  Tensor x = vals({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor all = run1("graph.sum", {x});
  EXPECT_EQ(all.shape(), Sizes{});
  expect_values(all, {21});
  Tensor rows = run1("graph.sum", {x}, {{"axes", std::vector<std::int64_t>{-1}}});
  EXPECT_EQ(rows.shape(), Sizes{2});
  expect_values(rows, {6, 15});
  Tensor cols = run1("graph.sum", {x}, {{"axes", std::vector<std::int64_t>{0}}, {"keepdims", true}});
  EXPECT_EQ(cols.shape(), (Sizes{1, 3}));
  expect_values(cols, {5, 7, 9});
  EXPECT_EQ(cols.policy(), x.policy());
}

TEST(GraphReduce, FixedSequentialOrderRoundsEveryStep) {
  // fp16 accumulation: 2048 + 1 = 2049 ties to 2048, twice; 1 + 1 + 2048 is exact.
  expect_values(run1("graph.sum", {vals({2048, 1, 1}, {3}, "fp16 @accum(fp16)")}), {2048});
  expect_values(run1("graph.sum", {vals({1, 1, 2048}, {3}, "fp16 @accum(fp16)")}), {2050});
  // fp32 accumulation keeps both ones; 2050 is an fp16 value.
  expect_values(run1("graph.sum", {vals({2048, 1, 1}, {3}, "fp16 @accum(fp32)")}), {2050});
}

// graph.superblock_sums / graph.superblock_total (split-long-sums): exact
// integer data gives each superblock's sum directly; on random data their
// composition is graph.sum's and graph.mean's reference to the bit.
// graph.block_sums and graph.block_total (docs/design/0039): block b of
// column c is the sum of its rows (exact for small integers), and on random
// bf16 data the composition is the sum and the mean over axis 0 to the bit,
// with more than one superblock of blocks (70000 rows: 274 blocks).
TEST(GraphReduce, BlockSumsAndTheirTotalAreTheColumnSum) {
  const std::int64_t rows = 70000, cols = 3, block = 256;
  Values v(static_cast<std::size_t>(rows * cols));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i % 5) - 2.0;
  Tensor x = vals(v, {rows, cols});
  Tensor parts = run1("graph.block_sums", {x}, {});
  const std::int64_t blocks = (rows + block - 1) / block;
  EXPECT_EQ(parts.shape(), (Sizes{blocks, cols}));
  Values want;
  for (std::int64_t b = 0; b < blocks; ++b) {
    for (std::int64_t c = 0; c < cols; ++c) {
      double sum = 0.0;
      for (std::int64_t r = b * block; r < std::min(rows, (b + 1) * block); ++r) sum += v[static_cast<std::size_t>(r * cols + c)];
      want.push_back(sum);
    }
  }
  expect_values(parts, want);
  std::mt19937 rng(11);
  std::normal_distribution<double> normal(0.0, 3.0);
  for (double& e : v) e = normal(rng);
  Tensor y = vals(v, {rows, cols}, "bf16 @accum(fp32)");
  Tensor p = run1("graph.block_sums", {y}, {});
  EXPECT_EQ(p.policy(), pol("fp32"));
  for (const bool mean : {false, true}) {
    Tensor whole = run1(mean ? "graph.mean" : "graph.sum", {y}, {{"axes", std::vector<std::int64_t>{0}}, {"keepdims", true}});
    Tensor total = run1("graph.block_total", {p},
                        {{"count", mean ? rows : std::int64_t{0}}, {"shape", tessera::ir::fixed_shape({1, cols})}, {"policy", y.policy()}});
    EXPECT_EQ(total.shape(), (Sizes{1, cols}));
    EXPECT_EQ(total.to_values(), whole.to_values());
  }
  // Errors name what is wrong: not a float matrix, a negative count, a shape that does not hold the columns.
  EXPECT_THROW(run1("graph.block_sums", {vals({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2})}, {}), Error);
  EXPECT_THROW(run1("graph.block_sums", {vals({1, 2}, {2, 1}, "int32")}, {}), Error);
  EXPECT_THROW(run1("graph.block_total", {p}, {{"count", std::int64_t{-3}}, {"policy", pol("fp32")}}), Error);
  EXPECT_EQ(run1("graph.block_total", {p}, {{"policy", pol("fp32")}}).shape(), Sizes{cols});
  EXPECT_THROW(run1("graph.block_total", {p}, {{"shape", tessera::ir::fixed_shape({2, 2})}, {"policy", pol("fp32")}}), Error);
}

TEST(GraphReduce, SuperblockSumsAndTheirTotalAreTheSum) {
  const std::int64_t super = 65536, length = 2 * super + 5;
  Values v(static_cast<std::size_t>(2 * length));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i % 7) - 3.0;
  Tensor x = vals(v, {2, length});
  const AttrMap rows{{"axes", std::vector<std::int64_t>{1}}};
  Tensor parts = run1("graph.superblock_sums", {x}, rows);
  EXPECT_EQ(parts.shape(), (Sizes{2, 3}));
  Values want;
  for (std::int64_t o = 0; o < 2; ++o) {
    for (std::int64_t s = 0; s < 3; ++s) {
      double sum = 0.0;
      for (std::int64_t i = s * super; i < std::min(length, (s + 1) * super); ++i) sum += v[static_cast<std::size_t>(o * length + i)];
      want.push_back(sum);
    }
  }
  expect_values(parts, want);
  // Random bf16 data, accumulated in fp32: the composition is the sum.
  std::mt19937 rng(7);
  std::normal_distribution<double> normal(0.0, 3.0);
  for (double& e : v) e = normal(rng);
  Tensor y = vals(v, {2, length}, "bf16 @accum(fp32)");
  Tensor p = run1("graph.superblock_sums", {y}, rows);
  EXPECT_EQ(p.policy(), pol("fp32"));
  for (const bool mean : {false, true}) {
    Tensor whole = run1(mean ? "graph.mean" : "graph.sum", {y}, {{"axes", std::vector<std::int64_t>{1}}, {"keepdims", true}});
    Tensor total = run1("graph.superblock_total", {p},
                        {{"count", mean ? length : std::int64_t{0}},
                         {"shape", tessera::ir::fixed_shape({2, 1})},
                         {"policy", y.policy()}});
    EXPECT_EQ(total.shape(), (Sizes{2, 1}));
    EXPECT_EQ(total.policy(), y.policy());
    expect_values(total, whole.to_values());
  }
  // Errors name what is wrong.
  EXPECT_THROW(run1("graph.superblock_sums", {vals({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2})},
                    {{"axes", std::vector<std::int64_t>{0, 2}}}),
               Error);
  EXPECT_THROW(run1("graph.superblock_sums", {vals({1, 2}, {2}, "int32")}, {{"axes", std::vector<std::int64_t>{0}}}), Error);
  // A given superblock count must be the operand's (eager calls give it).
  EXPECT_THROW(run1("graph.superblock_sums", {x}, {{"axes", std::vector<std::int64_t>{1}}, {"superblocks", std::int64_t{5}}}),
               Error);
  EXPECT_EQ(run1("graph.superblock_sums", {x}, {{"axes", std::vector<std::int64_t>{1}}, {"superblocks", std::int64_t{3}}}).shape(),
            (Sizes{2, 3}));
  // Negative counts are errors, not sums.
  EXPECT_THROW(run1("graph.superblock_sums", {x}, {{"axes", std::vector<std::int64_t>{1}}, {"superblocks", std::int64_t{-1}}}),
               Error);
  EXPECT_THROW(run1("graph.superblock_total", {p}, {{"count", std::int64_t{-3}}, {"policy", pol("fp32")}}), Error);
  // Without `shape`, the total keeps p's dims but the last.
  EXPECT_EQ(run1("graph.superblock_total", {p}, {{"policy", pol("fp32")}}).shape(), Sizes{2});
  EXPECT_THROW(run1("graph.superblock_total", {p},
                    {{"count", std::int64_t{0}}, {"shape", tessera::ir::fixed_shape({3})}, {"policy", pol("fp32")}}),
               Error);
}

TEST(GraphReduce, MeanMaxMin) {
  Tensor x = vals({1, 2, 3, 4, 5, 6, 7, 8}, {2, 4});
  expect_values(run1("graph.mean", {x}), {4.5});
  expect_values(run1("graph.mean", {x}, {{"axes", std::vector<std::int64_t>{1}}}), {2.5, 6.5});
  expect_values(run1("graph.max", {x}, {{"axes", std::vector<std::int64_t>{0}}}), {5, 6, 7, 8});
  expect_values(run1("graph.min", {x}, {{"axes", std::vector<std::int64_t>{1}}}), {1, 5});
  Tensor n = vals({1, kNaN, 3, -1, 4, 2}, {2, 3});
  expect_values(run1("graph.max", {n}, {{"axes", std::vector<std::int64_t>{1}}}), {kNaN, 4});
  expect_values(run1("graph.min", {n}, {{"axes", std::vector<std::int64_t>{1}}}), {kNaN, -1});
}

TEST(GraphReduce, IntegerSumsWidenAndNeverWrap) {
  Tensor x = vals({100, 100, 100}, {3}, "int8");
  Tensor s = run1("graph.sum", {x});
  EXPECT_EQ(s.dtype(), DType::int32);
  expect_values(s, {300});
  EXPECT_EQ(run1("graph.max", {x}).dtype(), DType::int8);
  expect_values(run1("graph.sum", {vals({1, 0, 1, 1}, {4}, "bool")}), {3});
  expect_error<ArgumentError>(
      [] {
        run1("graph.sum", {vals({2147483647.0, 1}, {2}, "int32")});
      },
      {"graph.sum", "int32", "int64"});
  expect_error<ArgumentError>(
      [] {
        run1("graph.sum", {vals({std::ldexp(1, 53), std::ldexp(1, 53)}, {2}, "int64")});
      },
      {"graph.sum", "2^53"});
  expect_error<DtypeError>([&] { run1("graph.mean", {x}); }, {"graph.mean", "int8", "cast"});
}

TEST(GraphReduce, EmptyReductions) {
  Tensor e = vals({}, {2, 0});
  expect_values(run1("graph.sum", {e}, {{"axes", std::vector<std::int64_t>{1}}}), {0, 0});
  for (const char* op : {"graph.max", "graph.min", "graph.mean"}) {
    expect_error<ShapeError>([&] { run1(op, {e}, {{"axes", std::vector<std::int64_t>{1}}}); }, {op, "axis 1"});
  }
  expect_error<ShapeError>([&] { run1("graph.argmax", {e}); }, {"graph.argmax", "axis 1"});
  // Reducing a non-empty axis of an empty tensor is fine.
  EXPECT_EQ(run1("graph.max", {e}, {{"axes", std::vector<std::int64_t>{0}}}).shape(), Sizes{0});
}

TEST(GraphReduce, ArgmaxFirstMaximumAndNaN) {
  Tensor x = vals({1, 3, 3, kNaN, 2, kNaN}, {2, 3});
  Tensor a = run1("graph.argmax", {x});
  EXPECT_EQ(a.dtype(), DType::int64);
  EXPECT_EQ(a.shape(), Sizes{2});
  expect_values(a, {1, 0});
  Tensor k = run1("graph.argmax", {x}, {{"axis", std::int64_t{0}}, {"keepdims", true}});
  EXPECT_EQ(k.shape(), (Sizes{1, 3}));
  expect_values(k, {1, 0, 1});
}

TEST(GraphReduce, BadAxes) {
  Tensor x = vals({1, 2}, {2});
  expect_error<ShapeError>([&] { run1("graph.sum", {x}, {{"axes", std::vector<std::int64_t>{1}}}); }, {"graph.sum"});
  expect_error<ShapeError>(
      [&] {
        run1("graph.sum", {x}, {{"axes", std::vector<std::int64_t>{0, -1}}});
      },
      {"same axis"});
  expect_error<ShapeError>([&] { run1("graph.argmax", {x}, {{"axis", std::int64_t{3}}}); }, {"graph.argmax"});
}

// ---- gemm / matmul ----

TEST(GraphGemm, PlainAndTransposed) {
  Tensor a = vals({1, 2, 3, 4}, {2, 2});
  Tensor b = vals({5, 6, 7, 8}, {2, 2});
  Values want{19, 22, 43, 50};
  expect_values(run1("graph.matmul", {a, b}), want);
  expect_values(run1("graph.gemm", {a, b}), want);
  Tensor at = vals({1, 3, 2, 4}, {2, 2});
  Tensor bt = vals({5, 7, 6, 8}, {2, 2});
  expect_values(run1("graph.gemm", {at, b}, {{"transpose_a", true}}), want);
  expect_values(run1("graph.gemm", {a, bt}, {{"transpose_b", true}}), want);
  expect_values(run1("graph.gemm", {at, bt}, {{"transpose_a", true}, {"transpose_b", true}}), want);
  // Non-square: [2, 3] @ [3, 1].
  Tensor c = run1("graph.matmul", {vals({1, 2, 3, 4, 5, 6}, {2, 3}), vals({1, 0, -1}, {3, 1})});
  EXPECT_EQ(c.shape(), (Sizes{2, 1}));
  expect_values(c, {-2, -2});
}

TEST(GraphGemm, BroadcastBatchDims) {
  // a: [2, 1, 2, 2] holds I and 2I; b: [3, 2, 2] holds 1*J, 2*J, 3*J with J = [[1, 2], [3, 4]].
  Tensor a = vals({1, 0, 0, 1, 2, 0, 0, 2}, {2, 1, 2, 2});
  Tensor b = vals({1, 2, 3, 4, 2, 4, 6, 8, 3, 6, 9, 12}, {3, 2, 2});
  Tensor c = run1("graph.matmul", {a, b});
  EXPECT_EQ(c.shape(), (Sizes{2, 3, 2, 2}));
  auto v = c.to_values();
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) {
      for (int e = 0; e < 4; ++e)
        EXPECT_EQ(v[static_cast<std::size_t>((i * 3 + j) * 4 + e)], (i + 1) * (j + 1) * (e + 1));
    }
  }
}

TEST(GraphGemm, FixedOrderAndSingleRounding) {
  // fp16 accumulation in k order: 2048 + 1 + 1 stays 2048.
  Tensor a = vals({2048, 1, 1}, {1, 3}, "fp16 @accum(fp16)");
  Tensor b = vals({1, 1, 1}, {3, 1}, "fp16 @accum(fp16)");
  expect_values(run1("graph.matmul", {a, b}), {2048});
  // acc = 1 + 2^-23, then + 2^-24 - 2^-70: the exact sum lies just below the
  // fp32 midpoint 1 + 2^-23 + 2^-24, so one rounding keeps 1 + 2^-23; rounding
  // through double first would tie to even at 1 + 2^-22.
  const double u = std::ldexp(1, -23);
  Tensor x = vals({1 + u, std::ldexp(1 + u, -12)}, {1, 2});
  Tensor y = vals({1, std::ldexp(1 - u, -12)}, {2, 1});
  expect_values(run1("graph.matmul", {x, y}), {1 + u});
}

TEST(GraphGemm, PoliciesAndIntegers) {
  Tensor a = vals({1, 2}, {1, 2}, "bf16");
  Tensor b = vals({3, 4}, {2, 1}, "fp16");
  Tensor c = run1("graph.matmul", {a, b});
  EXPECT_EQ(c.policy(), pol("fp32"));
  expect_values(c, {11});
  Tensor i = run1("graph.matmul", {vals({100, 100}, {1, 2}, "int8"), vals({100, 100}, {2, 1}, "int8")});
  EXPECT_EQ(i.dtype(), DType::int32);
  expect_values(i, {20000});
  expect_error<ArgumentError>(
      [] {
        run1("graph.matmul", {vals({65536, 65536}, {1, 2}, "int32"), vals({32768, 32768}, {2, 1}, "int32")});
      },
      {"graph.matmul", "overflows", "int32"});
  expect_error<DtypeError>(
      [] {
        run1("graph.matmul", {vals({1}, {1, 1}, "bool"), vals({1}, {1, 1}, "bool")});
      },
      {"bool"});
}

TEST(GraphGemm, EmptyContractionIsZero) {
  Tensor c = run1("graph.matmul", {vals({}, {2, 0}), vals({}, {0, 3})});
  EXPECT_EQ(c.shape(), (Sizes{2, 3}));
  expect_values(c, Values(6, 0.0));
}

TEST(GraphGemm, ShapeErrors) {
  expect_error<ShapeError>(
      [] {
        run1("graph.matmul", {vals({1, 2, 3, 4, 5, 6}, {2, 3}), vals({1, 2, 3, 4, 5, 6}, {2, 3})});
      },
      {"graph.matmul", "contraction", "dim 1 is 3", "dim 0 is 2"});
  expect_error<ShapeError>([] { run1("graph.matmul", {vals({1, 2}, {2}), vals({1, 2}, {2, 1})}); }, {"rank >= 2"});
  expect_error<ShapeError>(
      [] {
        run1("graph.matmul", {vals(Values(8, 1.0), {2, 2, 2}), vals(Values(12, 1.0), {3, 2, 2})});
      },
      {"batch dims"});
}

// ---- normalization ----

TEST(GraphNorm, SoftmaxValues) {
  Tensor x = vals({1, 2, 3, 0, 0, 0}, {2, 3});
  Tensor y = run1("graph.softmax_safe", {x});
  const double z = std::exp(-2.0) + std::exp(-1.0) + 1.0;
  expect_near(y, {std::exp(-2.0) / z, std::exp(-1.0) / z, 1.0 / z, 1.0 / 3, 1.0 / 3, 1.0 / 3}, 2e-7);
  Tensor cols = run1("graph.softmax_safe", {x}, {{"axis", std::int64_t{0}}});
  const double p = 1.0 / (1.0 + std::exp(-1.0));
  expect_near(cols,
              {p, 1 / (1 + std::exp(-2.0)), 1 / (1 + std::exp(-3.0)), 1 - p, 1 - 1 / (1 + std::exp(-2.0)),
               1 - 1 / (1 + std::exp(-3.0))},
              2e-7);
}

TEST(GraphNorm, SoftmaxNearFp16MaxWithFp16Accumulation) {
  Tensor x = vals({60000, 60000, 65504, 0, -65504, 65504}, {3, 2}, "fp16 @accum(fp16)");
  expect_values(run1("graph.softmax_safe", {x}), {0.5, 0.5, 1, 0, 0, 1});
}

TEST(GraphNorm, SoftmaxSpecialValues) {
  Tensor x = vals({kInf, 1, kInf, -kInf, -kInf, -kInf, 1, kNaN, 2, -kInf, 0, -kInf}, {4, 3});
  expect_values(run1("graph.softmax_safe", {x}), {0.5, 0, 0.5, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, 0, 1, 0});
}

TEST(GraphNorm, Logsumexp) {
  Tensor x = vals({0, 0, 1, 2, 3, 4}, {3, 2});
  expect_near(run1("graph.logsumexp", {x}),
              {std::log(2.0), 2 + std::log(1 + std::exp(-1.0)), 4 + std::log(1 + std::exp(-1.0))}, 2e-7);
  Tensor k = run1("graph.logsumexp", {x}, {{"axis", std::int64_t{0}}, {"keepdims", true}});
  EXPECT_EQ(k.shape(), (Sizes{1, 2}));
  Tensor h = vals({60000, 60000}, {2}, "fp16 @accum(fp16)");
  expect_values(run1("graph.logsumexp", {h}), {60000});  // + ln 2 is below half an ulp (16)
  Tensor s = vals({-kInf, -kInf, 1, kInf, 1, kNaN}, {3, 2});
  expect_values(run1("graph.logsumexp", {s}), {-kInf, kInf, kNaN});
  expect_values(run1("graph.logsumexp", {vals({}, {2, 0})}), {-kInf, -kInf});
}

TEST(GraphNorm, LayernormValues) {
  Tensor x = vals({1, 2, 3, 4}, {1, 4});
  const double r = 1.0 / std::sqrt(1.25 + 1e-5);
  expect_near(run1("graph.layernorm_safe", {x}), {-1.5 * r, -0.5 * r, 0.5 * r, 1.5 * r}, 2e-7);
  Tensor g = vals({2, 2, 2, 2}, {4});
  Tensor b = vals({1, 1, 1, 1}, {4});
  expect_near(run1("graph.layernorm_safe", {x, g}), {-3 * r, -r, r, 3 * r}, 2e-7);
  expect_near(run1("graph.layernorm_safe", {x, g, b}), {1 - 3 * r, 1 - r, 1 + r, 1 + 3 * r}, 2e-7);
  // Along axis 0 with eps = 0: each column of two distinct values gives -1, 1.
  Tensor c = run1("graph.layernorm_safe", {vals({1, 5, 3, 2}, {2, 2})}, {{"axis", std::int64_t{0}}, {"eps", 0.0}});
  expect_values(c, {-1, 1, 1, -1});
  // A constant row gives zeros even with eps = 0.
  expect_values(run1("graph.layernorm_safe", {vals({7, 7, 7}, {3})}, {{"eps", 0.0}}), {0, 0, 0});
}

TEST(GraphNorm, LayernormFp16ExtremesWithFp16Accumulation) {
  Tensor big = vals({60000, -60000, 60000, -60000, 65504, 65504, 65504, -65504}, {2, 4}, "fp16 @accum(fp16)");
  Tensor y = run1("graph.layernorm_safe", {big});
  // Row 2: mean 32752, deviations +-32752 (3 up, 1 down), var 3 * 32752^2 / 4.
  const double s3 = 1.0 / std::sqrt(3.0);
  expect_near(y, {1, -1, 1, -1, s3, s3, s3, -3 * s3}, 4e-3);
  // Tiny values: eps dominates the variance and must not be lost to scaling.
  const double t = std::ldexp(1, -14);
  Tensor small = vals({t, -t}, {2}, "fp16 @accum(fp16)");
  const double want = t / std::sqrt(t * t + 1e-5);
  expect_near(run1("graph.layernorm_safe", {small}), {want, -want}, 2e-3 * want);
}

TEST(GraphNorm, Rmsnorm) {
  Tensor x = vals({3, 4, 0, 0}, {2, 2});
  const double r = 1.0 / std::sqrt(12.5 + 1e-6);
  expect_near(run1("graph.rmsnorm_safe", {x}), {3 * r, 4 * r, 0, 0}, 2e-7);
  Tensor g = vals({2, -1}, {2});
  expect_near(run1("graph.rmsnorm_safe", {x, g}), {6 * r, -4 * r, 0, 0}, 2e-7);
  Tensor h = vals({60000, 60000, -65504, 65504}, {2, 2}, "fp16 @accum(fp16)");
  expect_near(run1("graph.rmsnorm_safe", {h}), {1, 1, -1, 1}, 1e-3);
  expect_values(run1("graph.rmsnorm_safe", {vals({0, 0}, {2})}, {{"eps", 0.0}}), {0, 0});
}

TEST(GraphNorm, NonFiniteRowsGiveNaN) {
  Tensor x = vals({1, kInf, 1, 2}, {2, 2});
  auto y = run1("graph.layernorm_safe", {x}).to_values();
  EXPECT_TRUE(std::isnan(y[0]) && std::isnan(y[1]));
  EXPECT_NEAR(y[2], -1 / std::sqrt(1 + 4e-5), 1e-7);
  EXPECT_NEAR(y[3], 1 / std::sqrt(1 + 4e-5), 1e-7);
}

TEST(GraphNorm, Errors) {
  Tensor x = vals({1, 2, 3, 4}, {2, 2});
  expect_error<DtypeError>(
      [] {
        run1("graph.softmax_safe", {vals({1, 2}, {2}, "int32")});
      },
      {"graph.softmax_safe", "int32"});
  expect_error<ShapeError>(
      [&] {
        run1("graph.layernorm_safe", {x, vals({1, 1, 1}, {3})});
      },
      {"graph.layernorm_safe", "gamma", "[3]", "[2]"});
  expect_error<ShapeError>([&] { run1("graph.layernorm_safe", {x, vals({1, 1}, {2}), vals({1}, {1})}); }, {"beta"});
  expect_error<ArgumentError>(
      [&] {
        run1("graph.rmsnorm_safe", {x, vals({1, 1}, {2}), vals({1, 1}, {2})});
      },
      {"graph.rmsnorm_safe", "at most 1"});
  expect_error<ArgumentError>([&] { run1("graph.layernorm_safe", {x}, {{"eps", -1.0}}); }, {"eps"});
  expect_error<ShapeError>([&] { run1("graph.softmax_safe", {x}, {{"axis", std::int64_t{2}}}); }, {"axis"});
  expect_error<DtypeError>([&] { run1("graph.layernorm_safe", {x, vals({1, 1}, {2}, "int8")}); }, {"gamma"});
}

}  // namespace
