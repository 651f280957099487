// Lowering of kernels to Tile IR: the specification's kernels, gemm_tile,
// specialization, SSA for structured control flow, and both dialects.
#include <gtest/gtest.h>

#include <regex>

#include "frontend_test_util.h"
#include "tessera/ir/verifier.h"

namespace tessera::frontend {
namespace {

using testing::conformance_path;
using testing::lower_to_text;
using testing::read_text;

std::string conformance_ir(const std::string& name, const Constants& constants = {}) {
  return lower_to_text(read_text(conformance_path(name)), constants);
}

int count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// The whole of `scale`, written out by hand from the contract
// (docs/design/0003-tile-ir.md): linear id, symbol n, compare, if, load, mul, store.
constexpr const char* kScaleIr =
    "func @scale(%x: gmem<[n] fp32>, %y: gmem<[n] fp32 mut>, %alpha: lane<fp32>) -> () attributes {kernel = true, "
    "source = \"k.tsr:2\"} {\n"
    "  %0 = tile.linear_id : lane<int64>\n"
    "  %1 = tile.symbol {name = \"n\"} : lane<int64>\n"
    "  %2 = tile.cmp %0, %1 {pred = \"lt\"} : lane<bool>\n"
    "  tile.if %2 {\n"
    "    %3 = tile.load_elem %x, %0 : lane<fp32>\n"
    "    %4 = tile.mul %alpha, %3 : lane<fp32>\n"
    "    tile.store_elem %y, %0, %4\n"
    "    tile.yield\n"
    "  } {\n"
    "    tile.yield\n"
    "  }\n"
    "  return\n"
    "}\n";

TEST(FrontendLower, ScaleIsExactlyTheExpectedTileIr) {
  std::string ir = lower_to_text(
      read_text(conformance_path("scale.tsr"))
          .substr(std::string("# Specification Ch. 4.1 (verbatim): y[i] = alpha * x[i] for every i < n.\n").size()));
  EXPECT_EQ(ir, kScaleIr);
}

TEST(FrontendLower, PythonDialectGivesTheSameIr) {
  std::string python =
      "@tessera.kernel\n"
      "def scale(x: tessera.f32[\"n\"], y: tessera.mut(tessera.f32[\"n\"]), alpha: tessera.f32):\n"
      "    i = tessera.tile.linear_id()\n"
      "    if i < n:\n"
      "        y[i] = alpha * x[i]\n";
  std::string ir = lower_to_text(python, {}, SourceDialect::python);
  // The def is on line 2 in both sources, so even the source attribute agrees.
  EXPECT_EQ(ir, kScaleIr);
}

TEST(FrontendLower, EverySpecKernelLowersAndRoundTrips) {
  for (const char* name : {"scale.tsr", "group_sum.tsr", "axpy_tiled.tsr", "tp_gemm.tsr", "gemm_tile.tsr"}) {
    SCOPED_TRACE(name);
    std::string ir = conformance_ir(name);
    ir::Module reparsed = ir::parse_module(ir, "printed.tir");
    EXPECT_NO_THROW(ir::verify(reparsed));
    EXPECT_EQ(testing::without_accum(ir::print_module(reparsed)), ir);
  }
}

TEST(FrontendLower, GroupSumStructure) {
  std::string ir = conformance_ir("group_sum.tsr");
  EXPECT_NE(ir.find("attributes {group_shape = [128], kernel = true, shared_bytes = 8192"), std::string::npos) << ir;
  EXPECT_NE(ir.find("tile.smem_alloc {policy = policy<fp32>, shape = shape<[128]>, swizzle = \"none\"}"),
            std::string::npos);
  // acc is carried by the strided loop from linear_id to n by group_size.
  EXPECT_NE(ir.find("%5 = tile.for %1, %3, %4, %2 : lane<fp32>"), std::string::npos) << ir;
  EXPECT_NE(ir.find("^(%k: lane<int64>, %acc: lane<fp32>)"), std::string::npos) << ir;
  // tbarrier() is a full wait followed by the barrier.
  EXPECT_NE(ir.find("tile.cp_async_wait {pending = 0}\n  tile.barrier"), std::string::npos) << ir;
  EXPECT_NE(ir.find("tile.reduce_sum %0"), std::string::npos);
  EXPECT_NE(ir.find("tile.store_elem %out, %11, %10"), std::string::npos) << ir;
}

TEST(FrontendLower, AxpySwapBecomesLoopCarriedSharedBuffers) {
  std::string ir = conformance_ir("axpy_tiled.tsr");
  EXPECT_NE(ir.find("%5:2 = tile.for %4, %2, %3, %0, %1 {prefetch = 2} : smem<[128] fp16>, smem<[128] "
                    "fp16>"),
            std::string::npos)
      << ir;
  EXPECT_NE(ir.find("tile.cp_async %s1, %X, %t"), std::string::npos) << ir;
  EXPECT_NE(ir.find("tile.yield %s1, %s0"), std::string::npos) << ir;
  // alpha * s0[i] + Y[t-128+i] at fp16.
  EXPECT_NE(ir.find("tile.mul %alpha, %11 : lane<fp16>"), std::string::npos) << ir;
}

TEST(FrontendLower, GemmTileSpecializedLikeTheSpecification) {
  // gemm_tile.jit(M=4096, N=4096, K=4096): symbols become sizes, tile sizes take the autotune defaults.
  std::string ir = conformance_ir("gemm_tile.tsr", {{"M", 4096}, {"N", 4096}, {"K", 4096}});
  EXPECT_NE(ir.find("%A: gmem<[4096, 4096] fp32>"), std::string::npos) << ir;
  EXPECT_NE(ir.find("%C: gmem<[4096, 4096] fp32 mut>"), std::string::npos) << ir;
  EXPECT_EQ(count(ir, "tile.symbol"), 0) << ir;
  EXPECT_EQ(count(ir, "tile.smem_alloc"), 4);
  // Two allocations, two loop result types, two block arguments.
  EXPECT_EQ(count(ir, "smem<[64, 32] fp32 swizzle(xor)>"), 6) << ir;
  EXPECT_NE(ir.find("tile.zeros {policy = policy<fp32>, shape = shape<[64, 64]>}"), std::string::npos);
  // The loop carries acc and the four buffers; the swaps exchange them.
  EXPECT_NE(ir.find(":5 = tile.for"), std::string::npos) << ir;
  EXPECT_TRUE(std::regex_search(ir, std::regex("tile\\.yield %[0-9]+, %a1, %a0, %b1, %b0"))) << ir;
  EXPECT_EQ(count(ir, "tile.cp_async %"), 4);
  EXPECT_EQ(count(ir, "tile.mma"), 1);
  EXPECT_NE(ir.find("tile.tile_store %C, %"), std::string::npos);
  EXPECT_NE(ir.find("shape = shape<[64, 32]>} : tile<[64, 32] fp32>"), std::string::npos);

  std::string small = conformance_ir("gemm_tile.tsr", {{"BM", 32}, {"BN", 32}, {"BK", 16}});
  EXPECT_NE(small.find("%A: gmem<[M, K] fp32>"), std::string::npos);
  EXPECT_TRUE(std::regex_search(small, std::regex("tile\\.mma %[0-9]+, %[0-9]+, %acc : tile<\\[32, 32\\] fp32>")))
      << small;
  EXPECT_NE(small.find("shape = shape<[32, 16]>"), std::string::npos);
}

TEST(FrontendLower, TpGemmCompoundDims) {
  std::string generic = conformance_ir("tp_gemm.tsr");
  EXPECT_NE(generic.find("%A: gmem<[M, K/tp] fp16>"), std::string::npos) << generic;
  std::string two = conformance_ir("tp_gemm.tsr", {{"tp", 2}});
  EXPECT_NE(two.find("%A: gmem<[M, K/2] fp16>"), std::string::npos) << two;
  std::string fixed = conformance_ir("tp_gemm.tsr", {{"tp", 2}, {"K", 64}, {"N", 8}, {"M", 3}});
  EXPECT_NE(fixed.find("%B: gmem<[32, 8] fp16>"), std::string::npos) << fixed;
  EXPECT_NE(fixed.find("%C: gmem<[3, 4] fp32 mut>"), std::string::npos) << fixed;
  // K = 10 is not divisible by tp = 3.
  EXPECT_THROW(conformance_ir("tp_gemm.tsr", {{"tp", 3}, {"K", 10}}), ShapeError);
}

TEST(FrontendLower, IfYieldsVariablesOfEitherBranchAndNewOnesOfBoth) {
  std::string ir = lower_to_text(
      "@kernel\n"
      "def f(x: f32[n], y: mut f32[n]):\n"
      "    a = 1.0\n"
      "    if n > 2:\n"
      "        a = 2.0\n"
      "        b = 3\n"
      "    elif n > 1:\n"
      "        b = 4\n"
      "    else:\n"
      "        b = 5\n"
      "    y[b] = a\n");
  // Outer if: a is carried (it existed), b is new in both branches (placeholder 0).
  EXPECT_NE(ir.find("%5:2 = tile.if %3, %0, %4 : lane<fp32>, lane<int64>"), std::string::npos) << ir;
  EXPECT_NE(ir.find("tile.store_elem %y, %5#1, %5#0"), std::string::npos) << ir;
  // The elif is a nested if that carries b from the outer placeholder.
  EXPECT_NE(ir.find("= tile.if %10, %arg5 : lane<int64>"), std::string::npos) << ir;
  ir::Module m = ir::parse_module(ir);
  EXPECT_NO_THROW(ir::verify(m));
}

TEST(FrontendLower, WhileLogicalAndTernary) {
  std::string ir = lower_to_text(
      "@kernel\n"
      "def f(x: f32[n], y: mut f32[n]):\n"
      "    i = tile.linear_id()\n"
      "    k = 0\n"
      "    while k < n and x[k] > 0.0:\n"
      "        k += 1\n"
      "    y[i] = 1.0 if k > 3 else x[0]\n"
      "    y[0] = f16(min(x[1], 2)) * 2\n");
  EXPECT_NE(ir.find("tile.while %"), std::string::npos) << ir;
  EXPECT_NE(ir.find("tile.condition %"), std::string::npos) << ir;
  // `and` is short-circuit: x[k] is read inside a tile.if.
  std::size_t and_if = ir.find("tile.if %");
  ASSERT_NE(and_if, std::string::npos);
  EXPECT_LT(and_if, ir.find("tile.load_elem %x, %"));
  // f16(...) * 2 computes at fp16 and converts to fp32 for the store.
  EXPECT_NE(ir.find("tile.cast %"), std::string::npos);
  EXPECT_NE(ir.find("tile.min %"), std::string::npos);
  EXPECT_NE(ir.find("tile.mul %"), std::string::npos);
  EXPECT_NE(ir.find("lane<fp16>"), std::string::npos);
  ir::Module m = ir::parse_module(ir);
  EXPECT_NO_THROW(ir::verify(m));
}

TEST(FrontendLower, PythonModuloAndFloorDivisionOfIntegers) {
  std::string ir = lower_to_text("@kernel\ndef f(y: mut int64[n]):\n    y[0] = n % 3\n");
  // a % b = a - (a // b) * b (the sign of the divisor, as in Python).
  EXPECT_NE(ir.find("tile.floordiv %"), std::string::npos);
  EXPECT_NE(ir.find("tile.sub %"), std::string::npos);
  EXPECT_EQ(count(ir, "tile.rem"), 0);
}

TEST(FrontendLower, ConstantsFoldAndNamesGetSuffixes) {
  std::vector<KernelDecl> ks =
      parse_kernels("@kernel.autotune(space=dict(BM=[16]))\ndef f(y: mut int64[n]):\n    y[0] = BM * 2 + 1\n", "k.tsr");
  ir::Module m;
  lower_kernel(m, ks[0], {});
  lower_kernel(m, ks[0], {{"BM", 4}});
  std::string ir = testing::without_accum(ir::print_module(m));
  EXPECT_NE(ir.find("func @f("), std::string::npos);
  EXPECT_NE(ir.find("func @f_1("), std::string::npos);
  EXPECT_NE(ir.find("value = 33}"), std::string::npos) << ir;
  EXPECT_NE(ir.find("value = 9}"), std::string::npos) << ir;
}

}  // namespace
}  // namespace tessera::frontend
