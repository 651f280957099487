// CPU backend: a tiled GEMM (cp_async into shared tiles, tile_load, tile.mma,
// tile_store) on shapes that do not divide the tile sizes, checked against a
// float64 product and bit for bit against the reference executor's gemm for
// fp32, bf16 and fp8 operands (fp32 accumulation) and fp16 accumulation.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "cpu_backend_test_util.h"
#include "tessera/graph/eager_ops.h"
#include "tessera/support/error.h"

namespace tessera::cputest {
namespace {

struct Tiles {
  std::int64_t BM = 16, BN = 16, BK = 8;
};

// c[M, N] = a[M, K] @ b[K, N]; one group per BM x BN block of c.
ir::Operation* gemm_kernel(ir::Module& m, DType operand, NumericsPolicy accum, Tiles t = {}) {
  const std::int64_t BM = t.BM, BN = t.BN, BK = t.BK;
  ir::Operation* k = tile::build_kernel(m, "tiled_gemm",
                                        {{"a", gmem({Dim::named("M"), Dim::named("K")}, operand)},
                                         {"b", gmem({Dim::named("K"), Dim::named("N")}, operand)},
                                         {"c", Type::gmem({Dim::named("M"), Dim::named("N")}, accum, true)}},
                                        {.group_shape = std::vector<std::int64_t>{4}});
  ir::Block& body = ir::function_body(*k);
  OpBuilder b(body);
  auto sym = [&](const char* s) { return op(b, "tile.symbol", {}, {{"name", std::string(s)}}); };
  Value* g = op(b, "tile.group_id", {});
  Value* blocks_n = op(b, "tile.div", {op(b, "tile.add", {sym("N"), i64(b, BN - 1)}), i64(b, BN)});
  Value* row0 = op(b, "tile.mul", {op(b, "tile.div", {g, blocks_n}), i64(b, BM)});
  Value* col0 = op(b, "tile.mul", {op(b, "tile.rem", {g, blocks_n}), i64(b, BN)});
  Value* sa = smem(b, {BM, BK}, operand);
  Value* sb = smem(b, {BK, BN}, operand);
  Value* acc0 = op(b, "tile.zeros", {}, {{"shape", ir::fixed_shape({BM, BN})}, {"policy", accum}});
  ir::Operation* loop = tile::build_for(
      b, i64(b, 0), sym("K"), i64(b, BK), {acc0},
      [&](OpBuilder& lb, std::span<Value* const> args) {
        stmt(lb, "tile.cp_async", {sa, body.argument(0), row0, args[0]});
        stmt(lb, "tile.cp_async", {sb, body.argument(1), args[0], col0});
        barrier(lb);
        Value* ta = tile_load(lb, sa, {i64(lb, 0), i64(lb, 0)}, {BM, BK});
        Value* tb = tile_load(lb, sb, {i64(lb, 0), i64(lb, 0)}, {BK, BN});
        Value* next = op(lb, "tile.mma", {ta, tb, args[1]});
        stmt(lb, "tile.barrier", {});  // shared tiles are overwritten next round
        return std::vector<Value*>{next};
      },
      2);
  stmt(b, "tile.tile_store", {body.argument(2), row0, col0, loop->result(0)});
  return k;
}

std::vector<double> random_values(std::int64_t n, double scale) {
  static std::mt19937_64 rng(std::random_device{}());
  std::normal_distribution<double> dist(0.0, scale);
  std::vector<double> v(static_cast<std::size_t>(n));
  for (double& x : v) x = dist(rng);
  return v;
}

struct Shape3 {
  std::int64_t M, N, K;
};

std::int64_t group_count(Shape3 s, Tiles t = {}) {
  return ((s.M + t.BM - 1) / t.BM) * ((s.N + t.BN - 1) / t.BN);
}

// Runs the kernel and returns c's encodings.
std::vector<std::uint64_t> run_gemm(const cpu::CompiledKernel& ck, const Tensor& a, const Tensor& b, Shape3 s,
                                    const NumericsPolicy& accum, Tiles t) {
  Tensor c = Tensor::zeros({s.M, s.N}, accum);
  const std::int64_t groups = group_count(s, t);
  cpu::launch(ck, groups, {a, b, c});
  return c.codes();
}

TEST(CpuBackendGemm, Fp32MatchesFloat64ProductOnNonDividingShapes) {
  ir::Module m;
  cpu::CompiledKernel ck = compile(*gemm_kernel(m, DType::fp32, pol(DType::fp32)));
  for (Shape3 s : {Shape3{37, 29, 45}, Shape3{16, 16, 8}, Shape3{1, 50, 3}, Shape3{33, 1, 17}}) {
    const auto av = random_values(s.M * s.K, 1.0);
    const auto bv = random_values(s.K * s.N, 1.0);
    Tensor a = f32_tensor(av, {s.M, s.K});
    Tensor b = f32_tensor(bv, {s.K, s.N});
    Tensor c = Tensor::zeros({s.M, s.N}, pol(DType::fp32));
    cpu::launch(ck, group_count(s), {a, b, c});
    const auto got = c.to_values();
    const auto ad = a.to_values(), bd = b.to_values();
    for (std::int64_t i = 0; i < s.M; ++i)
      for (std::int64_t j = 0; j < s.N; ++j) {
        double want = 0.0, mag = 0.0;
        for (std::int64_t k = 0; k < s.K; ++k) {
          want += ad[i * s.K + k] * bd[k * s.N + j];
          mag += std::fabs(ad[i * s.K + k] * bd[k * s.N + j]);
        }
        ASSERT_NEAR(got[i * s.N + j], want, 1e-6 * (mag + 1.0))
            << "M=" << s.M << " N=" << s.N << " K=" << s.K << " at (" << i << ", " << j << ")";
      }
  }
}

// Same order of accumulation as the reference gemm (k increasing, one fused
// rounding per step at the accumulator's type), so every bit agrees.
void expect_bit_identical(DType operand, const NumericsPolicy& accum, double scale, Tiles t = {}) {
  ir::Module m;
  cpu::CompiledKernel ck = compile(*gemm_kernel(m, operand, accum, t));
  for (Shape3 s : {Shape3{37, 29, 45}, Shape3{20, 33, 64}}) {
    NumericsPolicy op_policy = pol(operand);
    Tensor a = Tensor::from_values(random_values(s.M * s.K, scale), {s.M, s.K}, op_policy);
    Tensor b = Tensor::from_values(random_values(s.K * s.N, scale), {s.K, s.N}, op_policy);
    const auto got = run_gemm(ck, a, b, s, accum, t);
    // The reference: operands decoded exactly into the accumulator's format
    // (casting fp8/bf16 to fp32 is exact), then graph.gemm at that policy.
    Tensor ra = ops::cast(a, accum);
    Tensor rb = ops::cast(b, accum);
    const auto want = ops::gemm(ra, rb).codes();
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t e = 0; e < got.size(); ++e) {
      ASSERT_EQ(got[e], want[e]) << name(operand) << " operands, M=" << s.M << " N=" << s.N << " K=" << s.K
                                 << ", element " << e;
    }
  }
}

TEST(CpuBackendGemm, Fp32BitIdenticalToReferenceGemm) {
  expect_bit_identical(DType::fp32, pol(DType::fp32), 1.0);
}
// Wide tiles take the full-width vector micro-kernel blocks (and 64-row
// tiles leave a 4-row remainder panel).
TEST(CpuBackendGemm, Fp32WideTilesBitIdenticalToReferenceGemm) {
  expect_bit_identical(DType::fp32, pol(DType::fp32), 1.0, Tiles{64, 64, 16});
}
TEST(CpuBackendGemm, Bf16OperandsBitIdenticalToReferenceGemm) {
  expect_bit_identical(DType::bf16, pol(DType::fp32), 3.0);
}
TEST(CpuBackendGemm, Fp8OperandsBitIdenticalToReferenceGemm) {
  expect_bit_identical(DType::fp8_e4m3, pol(DType::fp32), 4.0);
}
TEST(CpuBackendGemm, Fp16AccumulationBitIdenticalToReferenceGemm) {
  NumericsPolicy half = pol(DType::fp16);
  half.accum = DType::fp16;
  expect_bit_identical(DType::fp16, half, 0.5);
}

}  // namespace
}  // namespace tessera::cputest
