// The reduction template against the reference executor and against an
// independent model of the canonical blocked order (lower_to_tile.h), which
// the reference follows too: results agree bit for bit at every length.
#include <random>

#include <cstdlib>

#include "schedule_test_support.h"
#include "tessera/schedule/lower_to_tile.h"

namespace tessera {
namespace {

using schedule_test::check_against_reference;
using schedule_test::expect_bitwise_equal;
using schedule_test::sample;
using schedule_test::test_options;

const NumericsPolicy kF32 = default_policy(DType::fp32);

// The canonical order written out directly in fp32: blocks of strands.
float canonical_sum(const std::vector<float>& v) {
  const std::size_t block = static_cast<std::size_t>(schedule::kReductionBlock);
  const std::size_t strands = static_cast<std::size_t>(schedule::kReductionStrands);
  const std::size_t blocks = (v.size() + block - 1) / block;
  float total = 0.0f;
  for (std::size_t s = 0; s * block < blocks; ++s) {
    float super = 0.0f;
    for (std::size_t k = s * block; k < std::min(blocks, (s + 1) * block); ++k) {
      std::vector<float> strand(strands, 0.0f);
      for (std::size_t i = k * block; i < std::min(v.size(), (k + 1) * block); ++i) strand[(i - k * block) % strands] += v[i];
      for (std::size_t width = strands; width > 1; width /= 2)
        for (std::size_t j = 0; j < width / 2; ++j) strand[j] = strand[2 * j] + strand[2 * j + 1];
      super += strand[0];
    }
    total += super;
  }
  return total;
}

TEST(ScheduleReduction, ShortReductionsMatchReferenceBitwise) {
  for (const char* storage : {"fp32", "bf16 @accum(fp32)", "fp16", "fp8_e4m3 @accum(fp32)", "fp64"}) {
    SCOPED_TRACE(storage);
    const std::string t = std::string("tensor<[B, 9, 200] ") + storage + ">";
    const std::string r = std::string("tensor<[B, 9] ") + storage + ">";
    const std::string text = "func @f(%x: " + t + ") -> (" + r + ", " + r + ", " + r + ", " + r +
                             ", tensor<[B, 9] int64>, tensor<[B, 1, 200] " + storage + ">) {\n"
                             "  %0 = graph.sum %x {axes = [2]} : " + r + "\n"
                             "  %1 = graph.mean %x {axes = [-1]} : " + r + "\n"
                             "  %2 = graph.max %x {axes = [2]} : " + r + "\n"
                             "  %3 = graph.min %x {axes = [2]} : " + r + "\n"
                             "  %4 = graph.argmax %x {axis = 2} : tensor<[B, 9] int64>\n"
                             "  %5 = graph.sum %x {axes = [1], keepdims = true} : tensor<[B, 1, 200] " + storage + ">\n"
                             "  return %0, %1, %2, %3, %4, %5\n}\n";
    const NumericsPolicy p = parse_policy(storage);
    check_against_reference(text, "f", {sample({3, 9, 200}, p, 1)});
    check_against_reference(text, "f", {sample({5, 9, 200}, p, 2, /*specials=*/false)});
  }
}

TEST(ScheduleReduction, EpilogueAndScatteredAxesMatchReferenceBitwise) {
  // Non-adjacent reduced axes, keepdims, and consumers reading a broadcast input.
  const std::string text = R"(
func @g(%x: tensor<[6, N, 5, 7] fp32>, %s: tensor<[N, 1, 1] fp32>) -> (tensor<[1, N, 1, 7] fp32>, tensor<[N, 5] fp32>) {
  %0 = graph.sum %x {axes = [0, 2], keepdims = true} : tensor<[1, N, 1, 7] fp32>
  %1 = graph.exp %0 : tensor<[1, N, 1, 7] fp32>
  %2 = graph.max %x {axes = [0, 3]} : tensor<[N, 5] fp32>
  %3 = graph.mean %x {axes = [0, 3], keepdims = true} : tensor<[1, N, 5, 1] fp32>
  %4 = graph.mul %3, %s : tensor<[1, N, 5, 1] fp32>
  %5 = graph.reshape %4 {shape = shape<[N, 5]>} : tensor<[N, 5] fp32>
  %6 = graph.add %5, %2 : tensor<[N, 5] fp32>
  return %1, %6
}
)";
  auto exe = check_against_reference(text, "g", {sample({6, 4, 5, 7}, kF32, 3, false), sample({4, 1, 1}, kF32, 4)});
  int reductions = 0;
  for (const auto& k : exe->kernels()) reductions += k.family == "reduction";
  EXPECT_EQ(reductions, 3);
}

TEST(ScheduleReduction, LongSumsFollowTheCanonicalBlockedOrder) {
  // 3 x 150001 rows (several superblocks), then every element at once.
  const std::string text = R"(
func @h(%x: tensor<[3, L] fp32>) -> (tensor<[3] fp32>, tensor<[] fp32>, tensor<[] fp32>) {
  %0 = graph.sum %x {axes = [1]} : tensor<[3] fp32>
  %1 = graph.sum %x : tensor<[] fp32>
  %2 = graph.mean %x : tensor<[] fp32>
  return %0, %1, %2
}
)";
  ir::Module m = ir::parse_module(text);
  auto exe = schedule::compile_executable(m, "h", test_options());
  const std::int64_t length = 150001;
  Tensor x = sample({3, length}, kF32, 5, false);
  auto got = exe->run(std::vector<Tensor>{x});
  const auto values = x.to_values();
  std::vector<float> all(values.begin(), values.end());
  double exact_total = 0.0;
  for (int row = 0; row < 3; ++row) {
    std::vector<float> v(all.begin() + row * length, all.begin() + (row + 1) * length);
    double exact = 0.0;
    for (float f : v) exact += f;
    exact_total += exact;
    EXPECT_EQ(static_cast<float>(got[0].to_values()[static_cast<std::size_t>(row)]), canonical_sum(v)) << "row " << row;
    EXPECT_NEAR(got[0].to_values()[static_cast<std::size_t>(row)], exact, 1e-6 * 2.0 * length) << "row " << row;
  }
  EXPECT_EQ(static_cast<float>(got[1].to_values()[0]), canonical_sum(all));
  EXPECT_NEAR(got[1].to_values()[0], exact_total, 1e-6 * 2.0 * 3 * length);
  EXPECT_EQ(static_cast<float>(got[2].to_values()[0]),
            static_cast<float>(static_cast<double>(canonical_sum(all)) / static_cast<double>(3 * length)));
  // The reference sums in the same order: the same bits.
  auto want = graph::execute(m, *m.lookup("h"), std::vector<Tensor>{x});
  for (std::size_t r = 0; r < 3; ++r) expect_bitwise_equal(got[r], want[r], "result " + std::to_string(r));
}

// A long sum to few outputs (static shapes) splits into superblock sums and
// their in-order total (split-long-sums, docs/design/0036): the reference's
// bits and the canonical model's, the unsplit executable's bits, for sums,
// means, keepdims, several trailing axes, bf16 with a fused consumer,
// a last superblock of one element, and leading axes (the column form: 70
// columns of three superblocks, groups of 32 lanes straddling superblocks).
TEST(ScheduleReduction, LongSumsToFewOutputsSplitIntoSuperblocks) {
  const std::int64_t length = 3 * 65536 + 1;
  const std::string text = R"(
func @h(%x: tensor<[3, 196609] fp32>, %y: tensor<[2, 3, 300, 400] bf16 @accum(fp32)>, %c: tensor<[500, 300, 70] fp32>)
    -> (tensor<[3] fp32>, tensor<[] fp32>, tensor<[1, 1] fp32>, tensor<[2, 3, 1, 1] bf16 @accum(fp32)>, tensor<[3] fp32>,
        tensor<[1, 1, 70] fp32>) {
  %0 = graph.sum %x {axes = [1]} : tensor<[3] fp32>
  %1 = graph.mean %x : tensor<[] fp32>
  %2 = graph.sum %x {keepdims = true} : tensor<[1, 1] fp32>
  %3 = graph.mean %y {axes = [2, 3], keepdims = true} : tensor<[2, 3, 1, 1] bf16 @accum(fp32)>
  %4 = graph.exp %3 : tensor<[2, 3, 1, 1] bf16 @accum(fp32)>
  %5 = graph.max %x {axes = [1]} : tensor<[3] fp32>
  %6 = graph.mean %c {axes = [0, 1], keepdims = true} : tensor<[1, 1, 70] fp32>
  return %0, %1, %2, %4, %5, %6
}
)";
  ir::Module m = ir::parse_module(text);
  const std::vector<Tensor> args{sample({3, length}, kF32, 31, false),
                                 sample({2, 3, 300, 400}, parse_policy("bf16 @accum(fp32)"), 32, false),
                                 sample({500, 300, 70}, kF32, 33, false)};
  auto exe = check_against_reference(text, "h", args);
  const std::string ir = exe->schedule_ir();
  auto count = [&](const std::string& op) {
    int n = 0;
    for (std::size_t at = ir.find(op); at != std::string::npos; at = ir.find(op, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("graph.superblock_sums "), 5) << ir;  // every sum and mean; max keeps its kernel
  EXPECT_EQ(count("graph.superblock_total "), 5);
  const auto got = exe->run(args);
  const auto values = args[0].to_values();
  std::vector<float> all(values.begin(), values.end());
  for (int row = 0; row < 3; ++row) {
    std::vector<float> v(all.begin() + row * length, all.begin() + (row + 1) * length);
    EXPECT_EQ(static_cast<float>(got[0].to_values()[static_cast<std::size_t>(row)]), canonical_sum(v)) << "row " << row;
  }
  EXPECT_EQ(static_cast<float>(got[1].to_values()[0]),
            static_cast<float>(static_cast<double>(canonical_sum(all)) / static_cast<double>(3 * length)));
  EXPECT_EQ(static_cast<float>(got[2].to_values()[0]), canonical_sum(all));
  // Unsplit (one group per output element), the same bits.
  schedule_test::ScopedEnv env("TESSERA_SPLIT_SUMS", "0");
  auto whole = schedule::compile_executable(m, "h", test_options());
  EXPECT_EQ(whole->schedule_ir().find("superblock"), std::string::npos);
  const auto want = whole->run(args);
  for (std::size_t r = 0; r < got.size(); ++r) expect_bitwise_equal(got[r], want[r], "unsplit, result " + std::to_string(r));
}

// graph.superblock_total compiled by itself: one lane per row, or a group
// per row loading chunks of 1024 into shared memory for lane 0 to add in
// order (3 chunks here); the reference's bits, with a fused consumer.
TEST(ScheduleReduction, SuperblockTotalsAddInOrderInChunks) {
  const std::string text = R"(
func @t(%p: tensor<[3, 3000] fp32>) -> (tensor<[3, 1] bf16 @accum(fp32)>) {
  %0 = graph.superblock_total %p {count = 7, shape = shape<[3, 1]>, policy = policy<bf16 @accum(fp32)>} : tensor<[3, 1] bf16 @accum(fp32)>
  %1 = graph.neg %0 : tensor<[3, 1] bf16 @accum(fp32)>
  return %1
}
)";
  for (const char* lanes : {"1", "128"}) {
    SCOPED_TRACE(std::string("row lanes ") + lanes);
    schedule_test::ScopedEnv env("TESSERA_ROW_LANES", lanes);
    auto exe = check_against_reference(text, "t", {sample({3, 3000}, kF32, 41, false)});
    EXPECT_EQ(exe->tile_ir().find("tile.barrier") != std::string::npos, std::string(lanes) == "128");
  }
}

// Sums that stay whole: many outputs, one superblock, scattered axes,
// adjacent axes neither leading nor trailing, integers.
TEST(ScheduleReduction, ShortOrWideSumsStayOneKernel) {
  const std::string text = R"(
func @w(%x: tensor<[1024, 65537] fp32>, %y: tensor<[3, 65536] fp32>, %z: tensor<[300, 2, 300] fp32>, %i: tensor<[3, 70000] int32>,
        %c: tensor<[3, 70000, 3] fp32>)
    -> (tensor<[1024] fp32>, tensor<[3] fp32>, tensor<[2] fp32>, tensor<[3] int32>, tensor<[3, 3] fp32>) {
  %0 = graph.sum %x {axes = [1]} : tensor<[1024] fp32>
  %1 = graph.sum %y {axes = [1]} : tensor<[3] fp32>
  %2 = graph.sum %z {axes = [0, 2]} : tensor<[2] fp32>
  %3 = graph.sum %i {axes = [1]} : tensor<[3] int32>
  %4 = graph.sum %c {axes = [1]} : tensor<[3, 3] fp32>
  return %0, %1, %2, %3, %4
}
)";
  ir::Module m = ir::parse_module(text);
  const std::string ir = schedule::compile_executable(m, "w", test_options())->schedule_ir();
  EXPECT_EQ(ir.find("superblock"), std::string::npos) << ir;
}

// The knob takes 0 or 1 only.
TEST(ScheduleReduction, SplitSumsKnobIsChecked) {
  schedule_test::ScopedEnv env("TESSERA_SPLIT_SUMS", "yes");
  ir::Module m = ir::parse_module("func @f(%x: tensor<[2, 70000] fp32>) -> (tensor<[2] fp32>) {\n"
                                  "  %0 = graph.sum %x {axes = [1]} : tensor<[2] fp32>\n  return %0\n}\n");
  try {
    schedule::compile_executable(m, "f", test_options());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("TESSERA_SPLIT_SUMS is 'yes'"), std::string::npos) << e.what();
  }
}

TEST(ScheduleReduction, ResultsDoNotDependOnThreadsOrRuns) {
  const std::string text = R"(
func @t(%x: tensor<[64, 70000] fp32>) -> (tensor<[64] fp32>, tensor<[70000] fp32>) {
  %0 = graph.sum %x {axes = [1]} : tensor<[64] fp32>
  %1 = graph.sum %x {axes = [0]} : tensor<[70000] fp32>
  return %0, %1
}
)";
  ir::Module m = ir::parse_module(text);
  auto one = test_options();
  one.num_threads = 1;
  auto many = test_options();
  many.num_threads = 8;
  std::vector<Tensor> args{sample({64, 70000}, kF32, 6, false)};
  auto a = schedule::compile_executable(m, "t", one)->run(args);
  auto exe = schedule::compile_executable(m, "t", many);
  for (int run = 0; run < 10; ++run) {
    auto b = exe->run(args);
    expect_bitwise_equal(b[0], a[0], "rows, run " + std::to_string(run));
    expect_bitwise_equal(b[1], a[1], "columns, run " + std::to_string(run));
  }
}

// Sums and means with a group of lanes per output element (the CUDA
// default; TESSERA_ROW_LANES forces it here) give the lane-per-output bits:
// the reference's on short rows with a fused consumer and scattered axes,
// and the same canonical sum on rows of 70000 (two superblocks), for any
// lane count. max and argmax keep a lane per output.
TEST(ScheduleReduction, CooperativeSumsGiveTheSameBitsForAnyLaneCount) {
  const std::string text = R"(
func @r(%x: tensor<[6, 70000] fp32>) -> (tensor<[6] fp32>, tensor<[6] fp32>, tensor<[6] fp32>) {
  %0 = graph.sum %x {axes = [1]} : tensor<[6] fp32>
  %1 = graph.mean %x {axes = [1]} : tensor<[6] fp32>
  %2 = graph.max %x {axes = [1]} : tensor<[6] fp32>
  return %0, %1, %2
}
func @s(%x: tensor<[5, 7, 9] fp32>) -> (tensor<[7] fp32>, tensor<[5, 9] fp32>) {
  %0 = graph.sum %x {axes = [0, 2]} : tensor<[7] fp32>
  %c = graph.constant {policy = policy<fp32>, shape = shape<[]>, value = dense<[0.5]>} : tensor<[] fp32>
  %1 = graph.mean %x {axes = [1]} : tensor<[5, 9] fp32>
  %2 = graph.mul %1, %c : tensor<[5, 9] fp32>
  return %0, %2
}
)";
  ir::Module m = ir::parse_module(text);
  const std::vector<Tensor> long_args{sample({6, 70000}, kF32, 21, false)};
  std::vector<Tensor> one_lane;
  {
    schedule_test::ScopedEnv env("TESSERA_ROW_LANES", "1");
    one_lane = schedule::compile_executable(m, "r", test_options())->run(long_args);
  }
  for (const char* lanes : {"2", "32", "256"}) {
    SCOPED_TRACE(std::string("row lanes ") + lanes);
    schedule_test::ScopedEnv env("TESSERA_ROW_LANES", lanes);
    auto exe = check_against_reference(text, "s", {sample({5, 7, 9}, kF32, 22)});
    EXPECT_NE(exe->tile_ir().find("tile.barrier"), std::string::npos);
    // Whole (one group per row, two superblocks) and split (a group per
    // superblock, docs/design/0036); element by element and in runs of 4
    // (where the lanes make whole strand groups: not for 2 lanes).
    for (const char* split : {"0", "1"}) {
      for (const char* run : {"1", "4"}) {
        schedule_test::ScopedEnv split_env("TESSERA_SPLIT_SUMS", split);
        schedule_test::ScopedEnv run_env("TESSERA_ROW_VECTOR", run);
        auto runs_exe = schedule::compile_executable(m, "r", test_options());
        EXPECT_EQ(runs_exe->tile_ir().find("tile.load_vector") != std::string::npos, std::string(run) == "4" && std::string(lanes) != "2")
            << "runs " << run;
        const auto got = runs_exe->run(long_args);
        for (std::size_t k = 0; k < got.size(); ++k) {
          expect_bitwise_equal(got[k], one_lane[k],
                               std::string("split ") + split + ", runs " + run + ", 70000-element rows, result " + std::to_string(k));
        }
      }
    }
  }
}

// Float sums over leading axes take the column form on every target (32
// consecutive outputs per group, up to 32 lanes of a column splitting its
// blocks), with or without the row_lanes knob: the reference's bits on 70000
// rows (two superblocks, a ragged chunk of blocks) of 37 columns (a group
// with 5 outputs), for bf16 with a fused consumer and keepdims, and for an
// empty reduced axis.
TEST(ScheduleReduction, SumsOverLeadingAxesTakeTheColumnForm) {
  const std::string text = R"(
func @c(%x: tensor<[70000, 37] fp32>) -> (tensor<[37] fp32>, tensor<[37] fp32>) {
  %0 = graph.sum %x {axes = [0]} : tensor<[37] fp32>
  %1 = graph.mean %x {axes = [0]} : tensor<[37] fp32>
  return %0, %1
}
func @b(%x: tensor<[3, 300, 70] bf16 @accum(fp32)>) -> (tensor<[1, 1, 70] bf16 @accum(fp32)>) {
  %0 = graph.sum %x {axes = [0, 1], keepdims = true} : tensor<[1, 1, 70] bf16 @accum(fp32)>
  %c = graph.constant {policy = policy<bf16 @accum(fp32)>, shape = shape<[]>, value = dense<[0.5]>} : tensor<[] bf16 @accum(fp32)>
  %1 = graph.mul %0, %c : tensor<[1, 1, 70] bf16 @accum(fp32)>
  return %1
}
func @e(%x: tensor<[N, 5] fp32>) -> (tensor<[5] fp32>) {
  %0 = graph.sum %x {axes = [0]} : tensor<[5] fp32>
  return %0
}
)";
  const NumericsPolicy bf16 = parse_policy("bf16 @accum(fp32)");
  schedule_test::ScopedEnv no_block_split("TESSERA_COLUMN_BLOCKS", "0");  // the column form (block sums: below)
  for (const char* lanes : {"1", "128"}) {
    SCOPED_TRACE(std::string("row lanes ") + lanes);
    schedule_test::ScopedEnv env("TESSERA_ROW_LANES", lanes);
    // 37 columns of 70000: split into two superblocks per column (the
    // column form's lanes superblock-major, a group straddling them), and
    // whole.
    for (const char* split : {"1", "0"}) {
      schedule_test::ScopedEnv split_env("TESSERA_SPLIT_SUMS", split);
      auto exe = check_against_reference(text, "c", {sample({70000, 37}, kF32, 31, false)});
      // The column form's shared arrays: a lane per column keeps 64 blocks
      // of 32 columns (superblock sums), a lane per strand 2 blocks of 16
      // strands of 32 columns (the whole sum, CPU default since 0038).
      EXPECT_NE(exe->tile_ir().find(std::string(split) == "1" ? "shape<[2048]>" : "shape<[1024]>"), std::string::npos)
          << "no column form";
      EXPECT_EQ(exe->schedule_ir().find("graph.superblock_sums") != std::string::npos, std::string(split) == "1");
    }
    check_against_reference(text, "b", {sample({3, 300, 70}, bf16, 32)});
    check_against_reference(text, "e", {sample({0, 5}, kF32, 33)});
  }
}

// Columns of at most 16 elements (a batch dim summed away: the weight
// gradient of a batched product) take the short column form, the canonical
// order's fixed expression written out per column (0 + x_s strands, their
// tree, 0 + (0 + block)): the reference's bits for 1, 2, 5 and 16 rows,
// sums and means, fp32 with NaN, infinities and zeros, bf16 with a fused
// consumer, and fp64; 17 rows keep the loop form. Zeros matter: a column of
// -0 sums to +0 through the adds onto zero.
TEST(ScheduleReduction, ShortColumnsTakeTheWrittenOutCanonicalSum) {
  auto text_for = [](std::int64_t rows, const std::string& policy) {
    const std::string t = "tensor<[" + std::to_string(rows) + ", 6, 50] " + policy + ">";
    const std::string o = "tensor<[6, 50] " + policy + ">";
    return "func @s(%x: " + t + ") -> (" + o + ", " + o + ") {\n"
           "  %0 = graph.sum %x {axes = [0]} : " + o + "\n"
           "  %1 = graph.mean %x {axes = [0]} : " + o + "\n"
           "  %c = graph.constant {policy = policy<" + policy + ">, shape = shape<[]>, value = dense<[0.5]>} : tensor<[] " + policy + ">\n"
           "  %2 = graph.mul %1, %c : " + o + "\n"
           "  return %0, %2\n}\n";
  };
  for (const char* policy : {"fp32", "bf16 @accum(fp32)", "fp64"}) {
    for (const std::int64_t rows : {1, 2, 5, 16, 17}) {
      SCOPED_TRACE(std::string(policy) + ", rows " + std::to_string(rows));
      const NumericsPolicy p = parse_policy(policy);
      Tensor x = sample({rows, 6, 50}, p, static_cast<unsigned>(50 + rows));
      auto exe = check_against_reference(text_for(rows, policy), "s", {x});
      // The short form has no loop over the column's blocks.
      const std::string tile = exe->tile_ir();
      EXPECT_EQ(tile.find("tile.barrier") == std::string::npos, rows <= 16) << tile;
    }
  }
  // Every element -0: the sum is +0 (0 + -0 in each strand), as the reference's.
  const std::string text = text_for(2, "fp32");
  Tensor zeros = Tensor::from_values(std::vector<double>(600, -0.0), {2, 6, 50}, kF32);
  check_against_reference(text, "s", {zeros});
}

// Sums and means over axis 0 of a matrix of more than one block of rows
// split at their blocks by default (graph.block_sums, a group per block of
// rows, then graph.block_total; docs/design/0039): the reference's bits for
// fp32 with a ragged last block and a consumer, bf16 of whole blocks, a
// column count no vector divides, and 1, 2, 4 and 8 columns a lane.
TEST(ScheduleReduction, ColumnSumsSplitAtTheirBlocks) {
  const std::string text = R"(
func @c(%x: tensor<[1000, 37] fp32>) -> (tensor<[37] fp32>, tensor<[1, 37] fp32>) {
  %0 = graph.sum %x {axes = [0]} : tensor<[37] fp32>
  %c = graph.constant {policy = policy<fp32>, shape = shape<[]>, value = dense<[0.5]>} : tensor<[] fp32>
  %1 = graph.mul %0, %c : tensor<[37] fp32>
  %2 = graph.mean %x {axes = [0], keepdims = true} : tensor<[1, 37] fp32>
  return %1, %2
}
func @b(%x: tensor<[512, 64] bf16 @accum(fp32)>) -> (tensor<[64] bf16 @accum(fp32)>) {
  %0 = graph.sum %x {axes = [0]} : tensor<[64] bf16 @accum(fp32)>
  return %0
}
)";
  const NumericsPolicy bf16 = parse_policy("bf16 @accum(fp32)");
  schedule_test::ScopedEnv split_env("TESSERA_SPLIT_SUMS", "0");
  for (const char* columns : {"1", "2", "4", "8"}) {
    SCOPED_TRACE(std::string("columns a lane ") + columns);
    schedule_test::ScopedEnv env("TESSERA_COLUMN_VECTOR", columns);
    auto exe = check_against_reference(text, "c", {sample({1000, 37}, kF32, 41, false)});
    EXPECT_NE(exe->schedule_ir().find("graph.block_sums"), std::string::npos);
    EXPECT_NE(exe->schedule_ir().find("graph.block_total"), std::string::npos);
    check_against_reference(text, "b", {sample({512, 64}, bf16, 42)});
  }
}

// TESSERA_COLUMN_VECTOR (CUDA's default: a 4-byte word of columns per
// lane) and TESSERA_COLUMN_STRANDS (CUDA's default: a lane per strand of two
// blocks at a time): each lane of the column form sums 2 or 4 adjacent columns, loading
// a row's elements of them as one vector, each column with its own strands.
// The reference's bits: 70000 rows of 40 fp32 columns (two superblocks per
// column, whole and split), 300 rows of 64 bf16 columns with a consumer,
// and 38 columns, which 4 does not divide (two columns per lane there).
TEST(ScheduleReduction, ColumnSumsTakeAdjacentColumnsPerLane) {
  schedule_test::ScopedEnv no_block_split("TESSERA_COLUMN_BLOCKS", "0");  // the column form
  const std::string text = R"(
func @c(%x: tensor<[70000, 40] fp32>) -> (tensor<[40] fp32>, tensor<[40] fp32>) {
  %0 = graph.sum %x {axes = [0]} : tensor<[40] fp32>
  %1 = graph.mean %x {axes = [0]} : tensor<[40] fp32>
  return %0, %1
}
func @b(%x: tensor<[300, 64] bf16 @accum(fp32)>) -> (tensor<[64] bf16 @accum(fp32)>) {
  %0 = graph.sum %x {axes = [0]} : tensor<[64] bf16 @accum(fp32)>
  %c = graph.constant {policy = policy<bf16 @accum(fp32)>, shape = shape<[]>, value = dense<[0.5]>} : tensor<[] bf16 @accum(fp32)>
  %1 = graph.mul %0, %c : tensor<[64] bf16 @accum(fp32)>
  return %1
}
func @o(%x: tensor<[500, 38] bf16 @accum(fp32)>) -> (tensor<[38] bf16 @accum(fp32)>) {
  %0 = graph.sum %x {axes = [0]} : tensor<[38] bf16 @accum(fp32)>
  return %0
}
)";
  const NumericsPolicy bf16 = parse_policy("bf16 @accum(fp32)");
  // Columns of 300 and 500 rows take the plain column form on the CPU by
  // default (shorter than the strand form's pass); the strand form here.
  schedule_test::ScopedEnv strand_form("TESSERA_COLUMN_STRANDS", "2");
  for (const char* columns : {"2", "4"}) {
    SCOPED_TRACE(std::string("columns per lane ") + columns);
    schedule_test::ScopedEnv env("TESSERA_COLUMN_VECTOR", columns);
    {
      schedule_test::ScopedEnv split_env("TESSERA_SPLIT_SUMS", "0");
      auto exe = check_against_reference(text, "c", {sample({70000, 40}, kF32, 41, false)});
      EXPECT_NE(exe->tile_ir().find("tile.load_vector"), std::string::npos) << "no vector of columns";
    }
    check_against_reference(text, "c", {sample({70000, 40}, kF32, 42, false)});
    auto exe = check_against_reference(text, "b", {sample({300, 64}, bf16, 43)});
    EXPECT_NE(exe->tile_ir().find("tile.load_vector"), std::string::npos) << "no vector of columns";
    // 38 columns: pairs (4 does not divide 38, 2 does).
    auto odd = check_against_reference(text, "o", {sample({500, 38}, bf16, 44)});
    EXPECT_NE(odd->tile_ir().find("count = 2"), std::string::npos);
  }
  // A lane per strand (TESSERA_COLUMN_STRANDS = blocks per pass, CUDA's
  // default 2), with one, two and four columns per lane: the same bits, a
  // ragged last block (500 and 300 rows) and two superblocks (70000)
  // included.
  for (const char* blocks : {"1", "2"}) {
  for (const char* columns : {"1", "2", "4"}) {
    SCOPED_TRACE(std::string("strand lanes, blocks per pass ") + blocks + ", columns per lane " + columns);
    schedule_test::ScopedEnv env("TESSERA_COLUMN_VECTOR", columns);
    schedule_test::ScopedEnv strands("TESSERA_COLUMN_STRANDS", blocks);
    schedule_test::ScopedEnv split_env("TESSERA_SPLIT_SUMS", "0");
    auto exe = check_against_reference(text, "c", {sample({70000, 40}, kF32, 45, false)});
    EXPECT_NE(exe->schedule_ir().find(std::string("column_strands = ") + blocks), std::string::npos);
    check_against_reference(text, "b", {sample({300, 64}, bf16, 46)});
    check_against_reference(text, "o", {sample({500, 38}, bf16, 47)});
  }
  }
  // Compiling "b" under the knobs set raises an error quoting `fragment`.
  auto expect_knob_error = [&](const std::string& fragment) {
    ir::Module m = ir::parse_module(text, "c.tir");
    try {
      schedule::compile_executable(m, "b", test_options());
      FAIL() << "expected an ArgumentError";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  {
    // Columns per lane belong to the strand lanes: with them off, a request for several is an error.
    schedule_test::ScopedEnv off("TESSERA_COLUMN_STRANDS", "0");
    schedule_test::ScopedEnv two("TESSERA_COLUMN_VECTOR", "2");
    expect_knob_error("TESSERA_COLUMN_STRANDS=0 turns off");
  }
  schedule_test::ScopedEnv bad("TESSERA_COLUMN_VECTOR", "3");
  expect_knob_error("TESSERA_COLUMN_VECTOR is '3'");
}

TEST(ScheduleReduction, EmptyAxes) {
  const std::string text = R"(
func @e(%x: tensor<[4, N] fp32>) -> (tensor<[4] fp32>) {
  %0 = graph.sum %x {axes = [1]} : tensor<[4] fp32>
  return %0
}
func @m(%x: tensor<[4, N] fp32>) -> (tensor<[4] fp32>) {
  %0 = graph.max %x {axes = [1]} : tensor<[4] fp32>
  return %0
}
)";
  check_against_reference(text, "e", {sample({4, 0}, kF32, 7)});
  ir::Module m = ir::parse_module(text, "e.tir");
  auto exe = schedule::compile_executable(m, "m", test_options());
  try {
    exe->run(std::vector<Tensor>{sample({4, 0}, kF32, 8)});
    FAIL() << "expected a ShapeError";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::ShapeMismatch) << e.what();
    EXPECT_NE(std::string(e.what()).find("graph.max"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("e.tir:7"), std::string::npos) << e.what();
  }
}

TEST(ScheduleReduction, IntegerSumIsExactAndChecksItsRange) {
  const std::string text = R"(
func @i(%x: tensor<[R, C] int32>) -> (tensor<[R] int32>) {
  %0 = graph.sum %x {axes = [1]} : tensor<[R] int32>
  return %0
}
)";
  ir::Module m = ir::parse_module(text, "i.tir");
  auto exe = schedule::compile_executable(m, "i", test_options());
  // Rows reaching exactly the int32 extremes fit.
  const std::vector<double> values{5, -7, 2147483000, 647, -2147483648.0, 0, 3, 4};
  auto out = exe->run(std::vector<Tensor>{Tensor::from_values(values, {4, 2}, default_policy(DType::int32))});
  EXPECT_EQ(out[0].to_values(), (std::vector<double>{-2, 2147483647, -2147483648.0, 7}));
  // One past the largest int32: the reference's error, raised by the kernel.
  const std::vector<double> over{2147483647, 1};
  try {
    exe->run(std::vector<Tensor>{Tensor::from_values(over, {1, 2}, default_policy(DType::int32))});
    FAIL() << "expected an overflow error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::ArgumentInvalid);
    EXPECT_NE(std::string(e.what()).find("graph.sum result overflows its int32 result"), std::string::npos) << e.what();
  }
}

// Packed sub-byte storage (int4, fp4, fp6) reaches the CPU kernels one code
// per byte (the launcher unpacks and packs around each launch); strided views
// of it unpack, view and pack. Every family gives the reference's bits.
TEST(SchedulePacked, EveryFamilyMatchesTheReference) {
  const std::string text = R"(
func @p(%x: tensor<[5, 37] int4>, %a: tensor<[5, 37] fp4_e2m1 @accum(fp32)>, %b: tensor<[37, 9] fp6_e3m2 @accum(fp32)>) -> (tensor<[5] int32>, tensor<[5, 37] fp6_e2m3>, tensor<[5, 9] fp6_e3m2 @accum(fp32)>, tensor<[37, 5] fp4_e2m1 @accum(fp32)>, tensor<[5] fp4_e2m1 @accum(fp32)>) {
  %0 = graph.sum %x {axes = [1]} : tensor<[5] int32>
  %1 = graph.mul %a, %a : tensor<[5, 37] fp4_e2m1 @accum(fp32)>
  %2 = graph.cast %1 {policy = policy<fp6_e2m3>} : tensor<[5, 37] fp6_e2m3>
  %3 = graph.matmul %a, %b : tensor<[5, 9] fp6_e3m2 @accum(fp32)>
  %4 = graph.transpose %a {perm = [1, 0]} : tensor<[37, 5] fp4_e2m1 @accum(fp32)>
  %5 = graph.softmax_safe %a {axis = -1} : tensor<[5, 37] fp4_e2m1 @accum(fp32)>
  %6 = graph.max %5 {axes = [1]} : tensor<[5] fp4_e2m1 @accum(fp32)>
  return %0, %2, %3, %4, %6
}
)";
  const NumericsPolicy f4 = parse_policy("fp4_e2m1 @accum(fp32)");
  const NumericsPolicy f6 = parse_policy("fp6_e3m2 @accum(fp32)");
  auto exe = check_against_reference(text, "p",
                                     {sample({5, 37}, default_policy(DType::int4), 1, false), sample({5, 37}, f4, 2, false),
                                      sample({37, 9}, f6, 3, false)});
  for (const auto& k : exe->kernels()) EXPECT_NE(k.variant, "none") << k.name;
}

// Rounding toward zero happens in every cast of the kernels, as the
// reference's make_result does it.
TEST(SchedulePacked, TowardZeroRoundingMatchesTheReference) {
  const std::string text = R"(
func @z(%x: tensor<[7, 130] bf16 @accum(fp32) @toward_zero>, %w: tensor<[130, 3] bf16 @accum(fp32) @toward_zero>, %f: tensor<[7, 130] fp32>) -> (tensor<[7, 130] bf16 @accum(fp32) @toward_zero>, tensor<[7] bf16 @accum(fp32) @toward_zero>, tensor<[7, 3] bf16 @accum(fp32) @toward_zero>, tensor<[7, 130] int8 @toward_zero>, tensor<[7, 130] bf16 @accum(fp32) @toward_zero>) {
  %0 = graph.exp %x : tensor<[7, 130] bf16 @accum(fp32) @toward_zero>
  %1 = graph.sum %x {axes = [1]} : tensor<[7] bf16 @accum(fp32) @toward_zero>
  %2 = graph.matmul %x, %w : tensor<[7, 3] bf16 @accum(fp32) @toward_zero>
  %3 = graph.cast %f {policy = policy<int8 @toward_zero>} : tensor<[7, 130] int8 @toward_zero>
  %4 = graph.softmax_safe %x {axis = -1} : tensor<[7, 130] bf16 @accum(fp32) @toward_zero>
  return %0, %1, %2, %3, %4
}
)";
  const NumericsPolicy tz = parse_policy("bf16 @accum(fp32) @toward_zero");
  auto exe = check_against_reference(
      text, "z", {sample({7, 130}, tz, 4, false), sample({130, 3}, tz, 5, false), sample({7, 130}, kF32, 6)});
  for (const auto& k : exe->kernels()) EXPECT_NE(k.variant, "none") << k.name;
}

}  // namespace
}  // namespace tessera
