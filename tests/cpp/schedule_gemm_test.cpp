// The GEMM template against the reference executor (bit for bit up to
// K = 256, where the canonical order is the reference's) and against an
// independent model of the canonical blocked order beyond.
#include <cmath>
#include <random>

#include "schedule_test_support.h"
#include "tessera/schedule/lower_to_tile.h"

namespace tessera {
namespace {

using schedule_test::check_against_reference;
using schedule_test::expect_bitwise_equal;
using schedule_test::sample;
using schedule_test::test_options;

const NumericsPolicy kF32 = default_policy(DType::fp32);

TEST(ScheduleGemm, RaggedShapesAndPoliciesMatchReferenceBitwise) {
  for (const char* storage : {"fp32", "bf16 @accum(fp32)", "fp16", "fp8_e4m3 @accum(fp32)", "fp64"}) {
    SCOPED_TRACE(storage);
    const std::string s = storage;
    const std::string text = "func @f(%a: tensor<[M, 200] " + s + ">, %b: tensor<[200, 75] " + s +
                             ">) -> (tensor<[M, 75] " + s + ">) {\n"
                             "  %0 = graph.matmul %a, %b : tensor<[M, 75] " + s + ">\n"
                             "  return %0\n}\n";
    const NumericsPolicy p = parse_policy(storage);
    auto exe = check_against_reference(text, "f", {sample({130, 200}, p, 1, false), sample({200, 75}, p, 2, false)});
    ASSERT_EQ(exe->kernels().size(), 1u);
    EXPECT_EQ(exe->kernels()[0].family, "gemm");
    check_against_reference(text, "f", {sample({1, 200}, p, 3), sample({200, 75}, p, 4)});
  }
}

// A batched product with both operands transposed, a bias and a residual
// broadcast over the batch, gelu (`approximate`), and a bf16 cast.
std::string batched_epilogue(const std::string& approximate) {
  return R"(
func @g(%x: tensor<[B, 3, 40, 33] fp32>, %w: tensor<[3, 50, 40] fp32>, %bias: tensor<[50] fp32>,
        %res: tensor<[B, 3, 33, 50] fp32>) -> (tensor<[B, 3, 33, 50] bf16 @accum(fp32)>, tensor<[B, 3, 33, 50] fp32>) {
  %0 = graph.gemm %x, %w {transpose_a = true, transpose_b = true} : tensor<[B, 3, 33, 50] fp32>
  %1 = graph.add %0, %bias : tensor<[B, 3, 33, 50] fp32>
  %2 = graph.gelu %1 {approximate = ")" + approximate + R"("} : tensor<[B, 3, 33, 50] fp32>
  %3 = graph.add %2, %res : tensor<[B, 3, 33, 50] fp32>
  %4 = graph.cast %3 {policy = policy<bf16 @accum(fp32)>} : tensor<[B, 3, 33, 50] bf16 @accum(fp32)>
  return %4, %0
}
)";
}

TEST(ScheduleGemm, EpilogueTransposesAndBatchesMatchReferenceBitwise) {
  const std::string text = batched_epilogue("tanh");
  auto exe = check_against_reference(text, "g",
                                     {sample({2, 3, 40, 33}, kF32, 5, false), sample({3, 50, 40}, kF32, 6, false),
                                      sample({50}, kF32, 7), sample({2, 3, 33, 50}, kF32, 8)});
  ASSERT_EQ(exe->kernels().size(), 1u) << exe->schedule_ir();
}

// More lanes than tile rows (the CUDA default, forced here with
// TESSERA_GEMM_LANES): the epilogue deals the tile's elements out to the
// lanes, ragged edges and a fused epilogue included, with the reference's bits.
TEST(ScheduleGemm, MoreLanesThanRowsGiveTheReferenceBits) {
  const std::string text = R"(
func @f(%a: tensor<[M, 70] fp32>, %b: tensor<[70, 45] fp32>, %bias: tensor<[45] fp32>) -> (tensor<[M, 45] fp32>) {
  %0 = graph.matmul %a, %b : tensor<[M, 45] fp32>
  %1 = graph.add %0, %bias : tensor<[M, 45] fp32>
  %2 = graph.relu %1 : tensor<[M, 45] fp32>
  return %2
}
)";
  for (const char* lanes : {"7", "128", "300"}) {
    SCOPED_TRACE(std::string("gemm lanes ") + lanes);
    schedule_test::ScopedEnv env("TESSERA_GEMM_LANES", lanes);
    auto exe = check_against_reference(text, "f", {sample({37, 70}, kF32, 11), sample({70, 45}, kF32, 12),
                                                   sample({45}, kF32, 13)});
    EXPECT_NE(exe->schedule_ir().find("gemm_lanes = " + std::string(lanes)), std::string::npos) << exe->schedule_ir();
  }
  schedule_test::ScopedEnv bad("TESSERA_GEMM_LANES", "0");
  EXPECT_THROW(check_against_reference(text, "f", {sample({3, 70}, kF32, 1), sample({70, 45}, kF32, 2),
                                                   sample({45}, kF32, 3)}),
               Error);
}

// Epilogue runs (the CUDA default, forced here with TESSERA_GEMM_VECTOR):
// a lane takes V consecutive columns, reading row-consecutive inputs (the
// residual, the bias) with one vector load and writing each output with one
// vector store; columns past the right edge go one by one. Ragged edges,
// rows whose start is not a multiple of V (misaligned runs), batches with
// broadcast operands and narrow outputs keep the reference's bits.
TEST(ScheduleGemm, EpilogueRunsGiveTheReferenceBits) {
  const std::string batched = batched_epilogue("none");
  const std::string narrow = R"(
func @f(%a: tensor<[M, 64] bf16 @accum(fp32)>, %b: tensor<[64, 45] bf16 @accum(fp32)>, %bias: tensor<[45] bf16 @accum(fp32)>,
        %col: tensor<[M, 1] fp32>) -> (tensor<[M, 45] bf16 @accum(fp32)>, tensor<[M, 45] fp32>) {
  %0 = graph.matmul %a, %b : tensor<[M, 45] bf16 @accum(fp32)>
  %1 = graph.add %0, %bias : tensor<[M, 45] bf16 @accum(fp32)>
  %2 = graph.gelu %1 {approximate = "none"} : tensor<[M, 45] bf16 @accum(fp32)>
  %3 = graph.cast %1 {policy = policy<fp32>} : tensor<[M, 45] fp32>
  %4 = graph.mul %3, %col : tensor<[M, 45] fp32>
  return %2, %4
}
)";
  const NumericsPolicy bf16 = parse_policy("bf16 @accum(fp32)");
  for (const char* vector : {"2", "4", "8"}) {
    for (const char* lanes : {"", "64"}) {
      SCOPED_TRACE(std::string("gemm vector ") + vector + ", lanes " + lanes);
      schedule_test::ScopedEnv env("TESSERA_GEMM_VECTOR", vector);
      schedule_test::ScopedEnv env_lanes("TESSERA_GEMM_LANES", lanes);
      auto exe = check_against_reference(batched, "g",
                                         {sample({2, 3, 40, 33}, kF32, 5, false), sample({3, 50, 40}, kF32, 6, false),
                                          sample({50}, kF32, 7), sample({2, 3, 33, 50}, kF32, 8)});
      ASSERT_EQ(exe->kernels().size(), 1u) << exe->schedule_ir();
      EXPECT_NE(exe->schedule_ir().find("gemm_vector = " + std::string(vector)), std::string::npos) << exe->schedule_ir();
      exe = check_against_reference(narrow, "f", {sample({37, 64}, bf16, 14), sample({64, 45}, bf16, 15),
                                                  sample({45}, bf16, 16), sample({37, 1}, kF32, 17)});
      // One GEMM kernel; GELU's table (design 0030) is a constant step.
      ASSERT_EQ(exe->kernels().size(), 2u) << exe->schedule_ir();
      EXPECT_NE(exe->kernels()[0].family, exe->kernels()[1].family);
      for (const auto& k : exe->kernels()) EXPECT_TRUE(k.family == "gemm" || k.family == "constant") << k.family;
    }
  }
  schedule_test::ScopedEnv bad("TESSERA_GEMM_VECTOR", "17");
  EXPECT_THROW(check_against_reference(narrow, "f", {sample({3, 64}, bf16, 1), sample({64, 45}, bf16, 2),
                                                     sample({45}, bf16, 3), sample({3, 1}, kF32, 4)}),
               Error);
}

TEST(ScheduleGemm, MixedDtypesAndOneOperandTwice) {
  const std::string text = R"(
func @h(%a: tensor<[20, 64] bf16 @accum(fp32)>, %b: tensor<[64, 30] fp32>, %x: tensor<[17, 64] fp32>)
    -> (tensor<[20, 30] fp32>, tensor<[17, 17] fp32>) {
  %0 = graph.matmul %a, %b : tensor<[20, 30] fp32>
  %1 = graph.gemm %x, %x {transpose_b = true} : tensor<[17, 17] fp32>
  return %0, %1
}
)";
  check_against_reference(text, "h",
                          {sample({20, 64}, parse_policy("bf16 @accum(fp32)"), 9), sample({64, 30}, kF32, 10),
                           sample({17, 64}, kF32, 11, false)});
}

// The canonical order written out with fp32 fused multiply-adds.
float canonical_dot(const std::vector<float>& a, const std::vector<float>& b) {
  const std::size_t block = static_cast<std::size_t>(schedule::kReductionBlock);
  const std::size_t blocks = (a.size() + block - 1) / block;
  float total = 0.0f;
  for (std::size_t s = 0; s * block < blocks; ++s) {
    float super = 0.0f;
    for (std::size_t k = s * block; k < std::min(blocks, (s + 1) * block); ++k) {
      float part = 0.0f;
      for (std::size_t i = k * block; i < std::min(a.size(), (k + 1) * block); ++i) part = std::fma(a[i], b[i], part);
      super += part;
    }
    total += super;
  }
  return total;
}

TEST(ScheduleGemm, LongContractionsFollowTheCanonicalOrder) {
  const std::string text = R"(
func @k(%a: tensor<[9, K] fp32>, %b: tensor<[K, 5] fp32>) -> (tensor<[9, 5] fp32>) {
  %0 = graph.matmul %a, %b : tensor<[9, 5] fp32>
  return %0
}
)";
  ir::Module m = ir::parse_module(text);
  auto exe = schedule::compile_executable(m, "k", test_options());
  for (std::int64_t K : {257, 1000, 70000}) {
    SCOPED_TRACE(K);
    Tensor a = sample({9, K}, kF32, 12, false);
    Tensor b = sample({K, 5}, kF32, 13, false);
    const auto got = exe->run(std::vector<Tensor>{a, b})[0].to_values();
    const auto av = a.to_values(), bv = b.to_values();
    const auto want = graph::execute(m, *m.lookup("k"), std::vector<Tensor>{a, b})[0].to_values();
    for (std::int64_t i = 0; i < 9; ++i) {
      for (std::int64_t j = 0; j < 5; ++j) {
        std::vector<float> row, col;
        double exact = 0.0, magnitude = 0.0;
        for (std::int64_t k = 0; k < K; ++k) {
          row.push_back(static_cast<float>(av[static_cast<std::size_t>(i * K + k)]));
          col.push_back(static_cast<float>(bv[static_cast<std::size_t>(k * 5 + j)]));
          exact += static_cast<double>(row.back()) * col.back();
          magnitude += std::fabs(static_cast<double>(row.back()) * col.back());
        }
        const std::size_t e = static_cast<std::size_t>(i * 5 + j);
        EXPECT_EQ(static_cast<float>(got[e]), canonical_dot(row, col)) << i << ", " << j;
        // Within the documented fp32 tolerance of the exact value and of the reference's sequential order.
        EXPECT_LE(std::fabs(got[e] - exact), 1e-6 * magnitude * 2.0 + 1e-30);
        EXPECT_LE(std::fabs(got[e] - want[e]), 1e-5 * magnitude + 1e-30);
      }
    }
  }
}

TEST(ScheduleGemm, ResultsDoNotDependOnThreadsOrRuns) {
  const std::string text = R"(
func @t(%a: tensor<[300, 700] fp32>, %b: tensor<[700, 260] fp32>) -> (tensor<[300, 260] fp32>) {
  %0 = graph.matmul %a, %b : tensor<[300, 260] fp32>
  return %0
}
)";
  ir::Module m = ir::parse_module(text);
  auto one = test_options();
  one.num_threads = 1;
  auto many = test_options();
  many.num_threads = 8;
  std::vector<Tensor> args{sample({300, 700}, kF32, 14, false), sample({700, 260}, kF32, 15, false)};
  auto a = schedule::compile_executable(m, "t", one)->run(args);
  auto exe = schedule::compile_executable(m, "t", many);
  for (int run = 0; run < 10; ++run) expect_bitwise_equal(exe->run(args)[0], a[0], "run " + std::to_string(run));
}

TEST(ScheduleGemm, ZeroSizeDims) {
  const std::string text = R"(
func @z(%a: tensor<[M, K] fp32>, %b: tensor<[K, 6] fp32>) -> (tensor<[M, 6] fp32>) {
  %0 = graph.matmul %a, %b : tensor<[M, 6] fp32>
  return %0
}
)";
  check_against_reference(text, "z", {sample({4, 0}, kF32, 16), sample({0, 6}, kF32, 17)});
  check_against_reference(text, "z", {sample({0, 3}, kF32, 18), sample({3, 6}, kF32, 19)});
}

}  // namespace
}  // namespace tessera
