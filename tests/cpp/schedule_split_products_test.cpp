// graph.gemm's `out` policy and split-fp32-products (the CUDA executables'
// rewrite of fp32 products of bf16 values into bf16 tensor-core products),
// run on the reference executor and checked against float64 sums.
#include <cmath>
#include <random>

#include "schedule_test_support.h"
#include "tessera/ir/verifier.h"
#include "tessera/schedule/passes.h"

namespace tessera {
namespace {

const NumericsPolicy kF32 = default_policy(DType::fp32);
const NumericsPolicy kBf16 = default_policy(DType::bf16);

Tensor random(std::vector<std::int64_t> shape, const NumericsPolicy& p, unsigned seed, double scale = 1.0) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, scale);
  std::int64_t n = 1;
  for (auto s : shape) n *= s;
  std::vector<double> v(static_cast<std::size_t>(n));
  for (double& x : v) x = normal(rng);
  return Tensor::from_values(v, std::move(shape), p);
}

// max |got - a b| / max(|a| |b|) over the result, a [M, K] and b [K, N] as values.
double relative_error(const Tensor& got, const Tensor& a, const Tensor& b, bool ta, bool tb) {
  const auto av = a.to_values(), bv = b.to_values(), gv = got.to_values();
  const std::int64_t M = got.shape()[0], N = got.shape()[1];
  const std::int64_t K = ta ? a.shape()[0] : a.shape()[1];
  double worst = 0.0;
  for (std::int64_t m = 0; m < M; ++m) {
    for (std::int64_t n = 0; n < N; ++n) {
      double exact = 0.0, scale = 0.0;
      for (std::int64_t k = 0; k < K; ++k) {
        const double x = av[static_cast<std::size_t>(ta ? k * M + m : m * K + k)];
        const double y = bv[static_cast<std::size_t>(tb ? n * K + k : k * N + n)];
        exact += x * y;
        scale += std::fabs(x * y);
      }
      worst = std::max(worst, std::fabs(gv[static_cast<std::size_t>(m * N + n)] - exact) / scale);
    }
  }
  return worst;
}

int count(const ir::Operation& func, std::string_view name) {
  int n = 0;
  for (const auto& op : ir::function_body(func).ops()) n += op->name() == name;
  return n;
}

TEST(GemmOutPolicy, Bf16OperandsIntoAnFp32ResultRoundOnce) {
  const std::string text = R"(
func @f(%a: tensor<[40, 300] bf16>, %b: tensor<[300, 24] bf16>) -> (tensor<[40, 24] fp32>, tensor<[40, 24] bf16>) {
  %0 = graph.gemm %a, %b {out = policy<fp32>} : tensor<[40, 24] fp32>
  %1 = graph.matmul %a, %b : tensor<[40, 24] bf16>
  return %0, %1
}
)";
  ir::Module m = ir::parse_module(text);
  const Tensor a = random({40, 300}, kBf16, 1), b = random({300, 24}, kBf16, 2);
  const std::vector<Tensor> args{a, b};
  auto out = graph::execute(*m.lookup("f"), args);
  EXPECT_EQ(out[0].policy(), kF32);
  // The fp32 result is the accumulator; the bf16 one its rounding.
  EXPECT_LT(relative_error(out[0], a, b, false, false), 1e-6);
  const auto wide = out[0].to_values();
  const auto rounded = Tensor::from_values(wide, out[0].shape(), kBf16).to_values();
  EXPECT_EQ(rounded, out[1].to_values());
  schedule_test::check_against_reference(text, "f", {a, b});
}

TEST(GemmOutPolicy, NarrowingOrModifiedOutIsADtypeError) {
  for (const char* out : {"fp16", "fp32 @stochastic_round", "fp64"}) {
    SCOPED_TRACE(out);
    const std::string text = std::string("func @f(%a: tensor<[4, 8] bf16>, %b: tensor<[8, 2] bf16>) -> (tensor<[4, 2] fp32>) {\n") +
                             "  %0 = graph.gemm %a, %b {out = policy<" + out + ">} : tensor<[4, 2] fp32>\n  return %0\n}\n";
    try {
      ir::parse_module(text);
      FAIL() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::DtypeUnsupported) << e.what();
      EXPECT_NE(std::string(e.what()).find("does not widen"), std::string::npos) << e.what();
    }
  }
}

// The backward products of a bf16 layer: an fp32 cotangent times a cast of a
// bf16 primal (either side, either transposed), and two casts.
const char* kBackward = R"(
func @f(%x: tensor<[64, 300] bf16>, %w: tensor<[300, 48] bf16>, %dy: tensor<[64, 48] fp32>) -> (tensor<[64, 300] fp32>, tensor<[300, 48] fp32>, tensor<[300, 300] fp32>) {
  %xf = graph.cast %x {policy = policy<fp32>} : tensor<[64, 300] fp32>
  %wf = graph.cast %w {policy = policy<fp32>} : tensor<[300, 48] fp32>
  %dx = graph.gemm %dy, %wf {transpose_b = true} : tensor<[64, 300] fp32>
  %dw = graph.gemm %xf, %dy {transpose_a = true} : tensor<[300, 48] fp32>
  %xx = graph.gemm %xf, %xf {transpose_a = true} : tensor<[300, 300] fp32>
  return %dx, %dw, %xx
}
)";

TEST(SplitFp32Products, RewritesProductsOfBf16ValuesOnly) {
  ir::Module m = ir::parse_module(kBackward);
  ir::Operation& f = *m.lookup("f");
  EXPECT_EQ(schedule::split_fp32_products(f), 3);
  // dx and dw: three products each of the cotangent's pieces; xx: one.
  EXPECT_EQ(count(f, "graph.gemm"), 7);
  for (const auto& op : ir::function_body(f).ops()) {
    if (op->name() != "graph.gemm") continue;
    EXPECT_EQ(op->operand(0)->type().policy, kBf16);
    EXPECT_EQ(op->operand(1)->type().policy, kBf16);
    EXPECT_EQ(op->result(0)->type().policy, kF32);
  }
  ir::verify_function(f);
  // A product of fp32 values that are no casts stays as it is.
  ir::Module plain = ir::parse_module(R"(
func @g(%a: tensor<[4, 8] fp32>, %b: tensor<[8, 2] fp32>) -> (tensor<[4, 2] fp32>) {
  %0 = graph.matmul %a, %b : tensor<[4, 2] fp32>
  return %0
}
)");
  EXPECT_EQ(schedule::split_fp32_products(*plain.lookup("g")), 0);
}

TEST(SplitFp32Products, TheSplitKeepsFp32Accuracy) {
  const Tensor x = random({64, 300}, kBf16, 3), w = random({300, 48}, kBf16, 4);
  // Cotangents across magnitudes (the split is relative to each element).
  Tensor dy = random({64, 48}, kF32, 5, 1e-3);
  {
    auto v = dy.to_values();
    for (std::size_t i = 0; i < v.size(); ++i) v[i] *= std::ldexp(1.0, static_cast<int>(i % 40) - 20);
    dy = Tensor::from_values(v, {64, 48}, kF32);
  }
  ir::Module m = ir::parse_module(kBackward);
  const std::vector<Tensor> args{x, w, dy};
  const auto before = graph::execute(*m.lookup("f"), args);
  ASSERT_EQ(schedule::split_fp32_products(*m.lookup("f")), 3);
  const auto after = graph::execute(*m.lookup("f"), args);
  const Tensor xf = Tensor::from_values(x.to_values(), {64, 300}, kF32);
  const Tensor wf = Tensor::from_values(w.to_values(), {300, 48}, kF32);
  // fp32 products accumulate with a relative error of a few 2^-24 per term
  // of the sum of magnitudes; the split adds at most about 2^-24 per term.
  const double dx_before = relative_error(before[0], dy, wf, false, true);
  const double dx_after = relative_error(after[0], dy, wf, false, true);
  const double dw_before = relative_error(before[1], xf, dy, true, false);
  const double dw_after = relative_error(after[1], xf, dy, true, false);
  EXPECT_LT(dx_after, 4.0 * std::ldexp(1.0, -24) * 300) << dx_before;
  EXPECT_LT(dw_after, 4.0 * std::ldexp(1.0, -24) * 64) << dw_before;
  EXPECT_LT(relative_error(after[2], xf, xf, true, false), 1e-6);
}

}  // namespace
}  // namespace tessera
