// Compiled executables (Schedule IR -> Tile IR -> CPU backend) against the
// reference executor: elementwise kernels must agree bit for bit, for every
// covered op, policy, broadcast pattern and awkward shape.
#include <gtest/gtest.h>

#include <random>

#include "schedule_test_support.h"
#include "tessera/schedule/passes.h"
#include "tessera/numerics/convert.h"

namespace tessera {
namespace {

using schedule_test::check_against_reference;
using schedule_test::expect_bitwise_equal;
using schedule_test::sample;
using schedule_test::test_options;

TEST(ScheduleExecutable, FusedChainWithBroadcastsMatchesReferenceBitwise) {
  const std::string text = R"(
func @f(%x: tensor<[B, 37] fp32>, %b: tensor<[37] fp32>, %r: tensor<[B, 1] fp32>) -> (tensor<[B, 37] fp32>) {
  %c = graph.constant {policy = policy<fp32>, shape = shape<[]>, value = dense<[0.75]>} : tensor<[] fp32>
  %0 = graph.add %x, %b : tensor<[B, 37] fp32>
  %1 = graph.mul %0, %r : tensor<[B, 37] fp32>
  %2 = graph.mul %1, %c : tensor<[B, 37] fp32>
  %3 = graph.tanh %2 : tensor<[B, 37] fp32>
  %4 = graph.sub %3, %x : tensor<[B, 37] fp32>
  return %4
}
)";
  const NumericsPolicy f32 = default_policy(DType::fp32);
  auto exe = check_against_reference(text, "f", {sample({29, 37}, f32, 1), sample({37}, f32, 2), sample({29, 1}, f32, 3)});
  // One fused kernel, shape-generic: another batch size reuses it.
  ASSERT_EQ(exe->kernels().size(), 1u);
  EXPECT_EQ(exe->kernels()[0].family, "elementwise");
  EXPECT_EQ(exe->kernels()[0].variant, "tile");
  ir::Module m = ir::parse_module(text);
  std::vector<Tensor> args = {sample({1001, 37}, f32, 4), sample({37}, f32, 5), sample({1001, 1}, f32, 6)};
  expect_bitwise_equal(exe->run(args)[0], graph::execute(m, *m.lookup("f"), args)[0], "B = 1001");
}

TEST(ScheduleExecutable, EveryElementwiseOpMatchesReferenceBitwise) {
  for (const char* storage : {"fp32", "bf16 @accum(fp32)", "fp16", "fp8_e4m3 @accum(fp32)", "fp64"}) {
    SCOPED_TRACE(storage);
    const std::string t = std::string("tensor<[7, 130] ") + storage + ">";
    const std::string text = "func @g(%x: " + t + ", %y: " + t + ") -> (" + t + ", " + t + ", " + t + ", " + t +
                             ", tensor<[7, 130] bool>, " + t + ") {\n"
                             "  %0 = graph.gelu %x {approximate = \"none\"} : " + t + "\n"
                             "  %1 = graph.gelu %y {approximate = \"tanh\"} : " + t + "\n"
                             "  %2 = graph.sigmoid %0 : " + t + "\n"
                             "  %3 = graph.silu %1 : " + t + "\n"
                             "  %4 = graph.relu %x : " + t + "\n"
                             "  %5 = graph.rsqrt %4 : " + t + "\n"
                             "  %6 = graph.div %2, %3 : " + t + "\n"
                             "  %7 = graph.pow %4, %y : " + t + "\n"
                             "  %8 = graph.maximum %7, %x : " + t + "\n"
                             "  %9 = graph.minimum %8, %5 : " + t + "\n"
                             "  %10 = graph.gt %x, %y : tensor<[7, 130] bool>\n"
                             "  %11 = graph.where %10, %9, %6 : " + t + "\n"
                             "  %12 = graph.abs %11 : " + t + "\n"
                             "  %13 = graph.log %12 : " + t + "\n"
                             "  %14 = graph.exp %y : " + t + "\n"
                             "  %15 = graph.sqrt %14 : " + t + "\n"
                             "  %16 = graph.neg %15 : " + t + "\n"
                             "  %17 = graph.cast %16 {policy = policy<fp16>} : tensor<[7, 130] fp16>\n"
                             "  %18 = graph.cast %17 {policy = policy<" + storage + ">} : " + t + "\n"
                             "  %19 = graph.le %13, %18 : tensor<[7, 130] bool>\n"
                             "  return %11, %13, %18, %6, %19, %9\n}\n";
    const NumericsPolicy p = parse_policy(storage);
    check_against_reference(text, "g", {sample({7, 130}, p, 11), sample({7, 130}, p, 12)});
  }
}

// gelu, erf and exp of bf16/fp16 tensors lower to tile.narrow_unary (the
// certified fp32 evaluation on CUDA; the double formula here) when they are
// not read from tables (TESSERA_TABULATE=0; with tables, what
// test_tabulated_functions.py checks): every value of each format gives the
// reference's bits.
TEST(ScheduleExecutable, NarrowUnariesOfEveryValueMatchReference) {
  schedule_test::ScopedEnv no_tables("TESSERA_TABULATE", "0");
  for (const char* storage : {"bf16", "fp16"}) {
    SCOPED_TRACE(storage);
    const NumericsPolicy p = parse_policy(storage);
    std::vector<double> v;
    for (std::uint64_t code = 0; code < 0x10000u; ++code) v.push_back(decode_value(code, p.storage));
    const std::string t = std::string("tensor<[65536] ") + storage + ">";
    const std::string text = "func @n(%x: " + t + ") -> (" + t + ", " + t + ", " + t + ") {\n"
                             "  %0 = graph.gelu %x {approximate = \"none\"} : " + t + "\n"
                             "  %1 = graph.erf %x : " + t + "\n"
                             "  %2 = graph.exp %x : " + t + "\n"
                             "  return %0, %1, %2\n}\n";
    auto exe = check_against_reference(text, "n", {Tensor::from_values(v, {65536}, p)});
    EXPECT_NE(exe->tile_ir().find("tile.narrow_unary"), std::string::npos);
  }
}

TEST(ScheduleExecutable, IntegerAndBoolOperandsMatchReference) {
  const std::string text = R"(
func @h(%a: tensor<[64] int32>, %b: tensor<[64] int8>, %m: tensor<[64] bool>) -> (tensor<[64] int32>, tensor<[64] int8>) {
  %0 = graph.mul %a, %b : tensor<[64] int32>
  %1 = graph.where %m, %0, %a : tensor<[64] int32>
  %2 = graph.add %b, %b : tensor<[64] int8>
  %3 = graph.maximum %2, %b : tensor<[64] int8>
  return %1, %3
}
)";
  std::vector<double> a, b, m;
  for (int i = 0; i < 64; ++i) {
    a.push_back(i * 1000003 % 77777 - 30000);
    b.push_back((i * 37) % 256 - 128);
    m.push_back(i % 3 == 0);
  }
  check_against_reference(text, "h",
                          {Tensor::from_values(a, {64}, default_policy(DType::int32)),
                           Tensor::from_values(b, {64}, default_policy(DType::int8)),
                           Tensor::from_values(m, {64}, default_policy(DType::bool_))});
}

TEST(ScheduleExecutable, GeneralBroadcastAndZeroSizeDims) {
  const std::string text = R"(
func @k(%x: tensor<[N, 1, 5] fp32>, %y: tensor<[3, 1] fp32>) -> (tensor<[N, 3, 5] fp32>) {
  %0 = graph.add %x, %y : tensor<[N, 3, 5] fp32>
  %1 = graph.exp %0 : tensor<[N, 3, 5] fp32>
  return %1
}
)";
  const NumericsPolicy f32 = default_policy(DType::fp32);
  check_against_reference(text, "k", {sample({4, 1, 5}, f32, 21, false), sample({3, 1}, f32, 22, false)});
  auto exe = check_against_reference(text, "k", {sample({0, 1, 5}, f32, 23), sample({3, 1}, f32, 24)});
  ir::Module m = ir::parse_module(text);
  EXPECT_EQ(exe->run(std::vector<Tensor>{sample({0, 1, 5}, f32, 23), sample({3, 1}, f32, 24)})[0].shape(),
            (std::vector<std::int64_t>{0, 3, 5}));
}

// A broadcast over a static last dim >= 64 runs row-tiled (a group covers
// part of one row): rows of 100 (one partial group each), of 1100 (a full
// and a partial group of 1024 lanes), a symbolic leading dim, and zero rows.
TEST(ScheduleExecutable, RowTiledBroadcastsMatchReference) {
  const std::string text = R"(
func @r(%x: tensor<[N, 3, 100] fp32>, %a: tensor<[3, 1] fp32>, %b: tensor<[100] fp32>, %c: tensor<[N, 1, 1] fp32>) -> (tensor<[N, 3, 100] fp32>) {
  %0 = graph.mul %x, %a : tensor<[N, 3, 100] fp32>
  %1 = graph.add %0, %b : tensor<[N, 3, 100] fp32>
  %2 = graph.sub %1, %c : tensor<[N, 3, 100] fp32>
  return %2
}
func @w(%x: tensor<[5, 1100] fp32>, %b: tensor<[1100] fp32>, %s: tensor<[5, 1] fp32>) -> (tensor<[5, 1100] fp32>) {
  %0 = graph.add %x, %b : tensor<[5, 1100] fp32>
  %1 = graph.div %0, %s : tensor<[5, 1100] fp32>
  return %1
}
)";
  const NumericsPolicy f32 = default_policy(DType::fp32);
  check_against_reference(text, "r", {sample({7, 3, 100}, f32, 31), sample({3, 1}, f32, 32), sample({100}, f32, 33),
                                      sample({7, 1, 1}, f32, 34)});
  check_against_reference(text, "r", {sample({0, 3, 100}, f32, 35), sample({3, 1}, f32, 36), sample({100}, f32, 37),
                                      sample({0, 1, 1}, f32, 38)});
  check_against_reference(text, "w", {sample({5, 1100}, f32, 39), sample({1100}, f32, 40), sample({5, 1}, f32, 41)});
}

// Several elements per lane (the `lane_elements` knob, CUDA's default,
// forced here by TESSERA_LANE_ELEMENTS): ragged flat domains, row-tiled
// broadcasts (3000 columns: two or three lane elements of 1024-lane groups,
// the last group ragged; 100 columns: one) and a transcendental,
// with the reference's bits.
TEST(ScheduleExecutable, SeveralElementsPerLaneMatchReference) {
  const std::string text = R"(
func @flat(%x: tensor<[N] fp32>, %y: tensor<[N] bf16>) -> (tensor<[N] bf16>) {
  %0 = graph.tanh %x : tensor<[N] fp32>
  %1 = graph.mul %0, %y : tensor<[N] fp32>
  %2 = graph.cast %1 {policy = policy<bf16>} : tensor<[N] bf16>
  return %2
}
func @rows(%x: tensor<[R, 3000] fp32>, %b: tensor<[3000] fp32>, %s: tensor<[R, 1] fp32>) -> (tensor<[R, 3000] fp32>) {
  %0 = graph.add %x, %b : tensor<[R, 3000] fp32>
  %1 = graph.div %0, %s : tensor<[R, 3000] fp32>
  return %1
}
func @narrow(%x: tensor<[R, 100] fp32>, %b: tensor<[100] fp32>) -> (tensor<[R, 100] fp32>) {
  %0 = graph.sub %x, %b : tensor<[R, 100] fp32>
  return %0
}
)";
  const NumericsPolicy f32 = default_policy(DType::fp32), bf16 = default_policy(DType::bf16);
  for (const char* per_lane : {"3", "4"}) {
    SCOPED_TRACE(std::string("lane elements ") + per_lane);
    schedule_test::ScopedEnv env("TESSERA_LANE_ELEMENTS", per_lane);
    for (std::int64_t n : {1, 1023, 1024, 4097, 12289}) {
      auto exe = check_against_reference(text, "flat", {sample({n}, f32, 50), sample({n}, bf16, 51)});
      EXPECT_NE(exe->schedule_ir().find("lane_elements = " + std::string(per_lane)), std::string::npos);
    }
    for (std::int64_t r : {1, 5}) {
      check_against_reference(text, "rows", {sample({r, 3000}, f32, 52), sample({3000}, f32, 53), sample({r, 1}, f32, 54)});
      check_against_reference(text, "narrow", {sample({r, 100}, f32, 55), sample({100}, f32, 56)});
    }
  }
  schedule_test::ScopedEnv bad("TESSERA_LANE_ELEMENTS", "0");
  EXPECT_THROW(check_against_reference(text, "narrow", {sample({2, 100}, f32, 57), sample({100}, f32, 58)}), Error);
}

// Runs of consecutive elements per lane (the `lane_vector` knob, CUDA's
// default, forced here by TESSERA_LANE_VECTOR; the CPU runs a run's
// tile.load_vector / tile.store_vector as element accesses): flat domains
// ragged against the run and the group, row-tiled biases read as runs
// (3000 columns: runs of 8 cut to 8, of 16 to 8; 100 columns: to 4), rows
// broadcast per element, a bool output and two outputs of one run, with
// the reference's bits.
TEST(ScheduleExecutable, RunsOfElementsPerLaneMatchReference) {
  const std::string text = R"(
func @flat(%x: tensor<[N] fp32>, %y: tensor<[N] bf16>) -> (tensor<[N] bf16>, tensor<[N] bool>) {
  %0 = graph.tanh %x : tensor<[N] fp32>
  %1 = graph.mul %0, %y : tensor<[N] fp32>
  %2 = graph.cast %1 {policy = policy<bf16>} : tensor<[N] bf16>
  %3 = graph.gt %0, %x : tensor<[N] bool>
  return %2, %3
}
func @rows(%x: tensor<[R, 3000] bf16>, %b: tensor<[3000] fp32>, %s: tensor<[R, 1] fp32>) -> (tensor<[R, 3000] fp32>) {
  %0 = graph.add %x, %b : tensor<[R, 3000] fp32>
  %1 = graph.div %0, %s : tensor<[R, 3000] fp32>
  return %1
}
func @narrow(%x: tensor<[R, 100] fp32>, %b: tensor<[100] fp32>) -> (tensor<[R, 100] fp32>) {
  %0 = graph.sub %x, %b : tensor<[R, 100] fp32>
  return %0
}
)";
  const NumericsPolicy f32 = default_policy(DType::fp32), bf16 = default_policy(DType::bf16);
  for (const char* vector : {"3", "8", "16"}) {
    for (const char* per_lane : {"1", "2"}) {
      SCOPED_TRACE(std::string("lane vector ") + vector + ", lane elements " + per_lane);
      schedule_test::ScopedEnv env("TESSERA_LANE_VECTOR", vector);
      schedule_test::ScopedEnv elements("TESSERA_LANE_ELEMENTS", per_lane);
      for (std::int64_t n : {1, 7, 8, 1023, 8192, 8200, 20003}) {
        auto exe = check_against_reference(text, "flat", {sample({n}, f32, 60), sample({n}, bf16, 61)});
        EXPECT_NE(exe->schedule_ir().find("lane_vector = " + std::string(vector)), std::string::npos);
        EXPECT_NE(exe->tile_ir().find("tile.load_vector"), std::string::npos);
        EXPECT_NE(exe->tile_ir().find("tile.store_vector"), std::string::npos);
      }
      for (std::int64_t r : {1, 5}) {
        check_against_reference(text, "rows", {sample({r, 3000}, bf16, 62), sample({3000}, f32, 63), sample({r, 1}, f32, 64)});
        check_against_reference(text, "narrow", {sample({r, 100}, f32, 65), sample({100}, f32, 66)});
      }
    }
  }
  schedule_test::ScopedEnv bad("TESSERA_LANE_VECTOR", "17");
  EXPECT_THROW(check_against_reference(text, "narrow", {sample({2, 100}, f32, 67), sample({100}, f32, 68)}), Error);
}

TEST(ScheduleExecutable, BufferReuseAndViewsKeepValuesIntact) {
  // The two exps' results are reused and written in place; the reshape views
  // a value that is also read later.
  const std::string text = R"(
func @r(%x: tensor<[6, 8] fp32>) -> (tensor<[48] fp32>, tensor<[6, 8] fp32>) {
  %0 = graph.exp %x : tensor<[6, 8] fp32>
  %1 = graph.reshape %0 {shape = shape<[48]>} : tensor<[48] fp32>
  %2 = graph.neg %1 : tensor<[48] fp32>
  %3 = graph.reshape %2 {shape = shape<[6, 8]>} : tensor<[6, 8] fp32>
  %4 = graph.mul %3, %0 : tensor<[6, 8] fp32>
  return %1, %4
}
)";
  check_against_reference(text, "r", {sample({6, 8}, default_policy(DType::fp32), 31)});
}

TEST(ScheduleExecutable, ShapeOpsRunAsViewsAndMatchReference) {
  const std::string text = R"(
func @v(%x: tensor<[6, 12] fp32>) -> (tensor<[12, 6] fp32>, tensor<[6, 2] fp32>, tensor<[6, 7] fp32>,
                                      tensor<[6, 2, 2] fp32>, tensor<[6, 2] fp32>, tensor<[6, 12] fp32>) {
  %0 = graph.exp %x : tensor<[6, 12] fp32>
  %1 = graph.transpose %0 {perm = [1, 0]} : tensor<[12, 6] fp32>
  %2 = graph.slice %1 {starts = [1, 0], stops = [12, 6], steps = [2, 3]} : tensor<[6, 2] fp32>
  %3:2 = graph.split %0 {axis = 1, sizes = [5, 7]} : tensor<[6, 5] fp32>, tensor<[6, 7] fp32>
  %4:3 = graph.split_qkv %0 {num_heads = 2} : tensor<[6, 2, 2] fp32>, tensor<[6, 2, 2] fp32>, tensor<[6, 2, 2] fp32>
  %5 = graph.neg %2 : tensor<[6, 2] fp32>
  %6 = graph.allreduce %5 {axis = "dp", axis_size = 1, op = "sum"} : tensor<[6, 2] fp32>
  %7 = graph.transpose %1 {perm = [1, 0]} : tensor<[6, 12] fp32>
  %8 = graph.mul %7, %x : tensor<[6, 12] fp32>
  return %1, %5, %3#1, %4#2, %6, %8
}
)";
  auto exe = check_against_reference(text, "v", {sample({6, 12}, default_policy(DType::fp32), 51)});
  int kernels = 0;
  for (const auto& k : exe->kernels()) kernels += k.variant == "tile";
  EXPECT_EQ(kernels, 3) << exe->schedule_ir();  // exp, neg, mul: every shape op is a view
}

// graph.slice {copy = true} is a copy kernel writing a contiguous result
// (what a GPU consumer needs) with the view's values: steps, negative starts
// and a symbolic full axis.
TEST(ScheduleExecutable, CopyingSliceIsAKernelWithTheViewsValues) {
  const std::string text = R"(
func @c(%x: tensor<[B, 12, 9] bf16>) -> (tensor<[B, 6, 3] bf16>, tensor<[B, 2, 9] bf16>) {
  %0 = graph.slice %x {copy = true, starts = [0, 1, 0], stops = [9223372036854775807, 12, 9], steps = [1, 2, 3]} : tensor<[B, 6, 3] bf16>
  %1 = graph.slice %x {copy = true, starts = [0, -2, 0], stops = [9223372036854775807, 12, 9]} : tensor<[B, 2, 9] bf16>
  return %0, %1
}
)";
  auto exe = check_against_reference(text, "c", {sample({5, 12, 9}, default_policy(DType::bf16), 52)});
  ASSERT_EQ(exe->kernels().size(), 2u);
  for (const auto& k : exe->kernels()) EXPECT_EQ(k.family, "copy") << exe->schedule_ir();
  for (const Tensor& t : exe->run(std::vector<Tensor>{sample({5, 12, 9}, default_policy(DType::bf16), 53)})) {
    EXPECT_TRUE(t.is_contiguous());
  }
}

TEST(ScheduleExecutable, ResultsDoNotDependOnThreadCount) {
  const std::string text = R"(
func @t(%x: tensor<[4096] fp32>) -> (tensor<[4096] fp32>) {
  %0 = graph.sigmoid %x : tensor<[4096] fp32>
  %1 = graph.mul %0, %x : tensor<[4096] fp32>
  return %1
}
)";
  ir::Module m = ir::parse_module(text);
  auto one = test_options();
  one.num_threads = 1;
  auto all = test_options();
  all.num_threads = 8;
  std::vector<Tensor> args{sample({4096}, default_policy(DType::fp32), 41)};
  auto a = schedule::compile_executable(m, "t", one)->run(args);
  auto b = schedule::compile_executable(m, "t", all)->run(args);
  expect_bitwise_equal(a[0], b[0], "1 vs 8 threads");
}

TEST(ScheduleExecutable, KernelWithoutTemplateIsACompileErrorNamingTheOp) {
  const std::string text = R"(
func @s(%x: tensor<[4, 8] fp8_e4m3 @accum(fp8_e4m3)>) -> (tensor<[4, 8] fp8_e4m3 @accum(fp8_e4m3)>) {
  %0 = graph.softmax_safe %x {axis = -1} : tensor<[4, 8] fp8_e4m3 @accum(fp8_e4m3)>
  return %0
}
)";
  ir::Module m = ir::parse_module(text, "s.tir");
  try {
    schedule::compile_executable(m, "s", test_options());
    FAIL() << "expected a CompileError";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Compile);
    const std::string msg = e.what();
    EXPECT_NE(msg.find("graph.softmax_safe"), std::string::npos) << msg;
    EXPECT_NE(msg.find("normalization"), std::string::npos) << msg;
    EXPECT_NE(msg.find("accumulation type fp8_e4m3"), std::string::npos) << msg;
    EXPECT_NE(msg.find("TESSERA_BACKEND=reference"), std::string::npos) << msg;
    EXPECT_NE(msg.find("s.tir:3"), std::string::npos) << msg;
  }
}

// The knob key of the eager kernel cache: every knob set (a non-empty
// value), in name order whatever the environment's order, and nothing else.
TEST(ScheduleExecutable, TargetKnobKeyNamesTheKnobsSet) {
  const std::string before = schedule::target_knob_key();
  {
    schedule_test::ScopedEnv split("TESSERA_ATTENTION_SPLIT", "0");
    schedule_test::ScopedEnv blocked("TESSERA_ATTENTION_BLOCKED", "1");
    schedule_test::ScopedEnv empty("TESSERA_ROW_LANES", "");
    schedule_test::ScopedEnv other("TESSERA_NOT_A_KNOB", "1");
    const std::string key = schedule::target_knob_key();
    const std::size_t b = key.find(" TESSERA_ATTENTION_BLOCKED=1"), sp = key.find(" TESSERA_ATTENTION_SPLIT=0");
    EXPECT_NE(b, std::string::npos) << key;
    EXPECT_NE(sp, std::string::npos) << key;
    EXPECT_LT(b, sp) << key;
    EXPECT_EQ(key.find("TESSERA_ROW_LANES"), std::string::npos) << key;
    EXPECT_EQ(key.find("TESSERA_NOT_A_KNOB"), std::string::npos) << key;
  }
  EXPECT_EQ(schedule::target_knob_key(), before);
}

TEST(ScheduleExecutable, WrongArgumentsAreClearErrors) {
  const std::string text = R"(
func @w(%x: tensor<[B, 4] fp32>, %y: tensor<[B, 4] fp32>) -> (tensor<[B, 4] fp32>) {
  %0 = graph.add %x, %y : tensor<[B, 4] fp32>
  return %0
}
)";
  ir::Module m = ir::parse_module(text);
  auto exe = schedule::compile_executable(m, "w", test_options());
  const NumericsPolicy f32 = default_policy(DType::fp32);
  EXPECT_THROW(exe->run(std::vector<Tensor>{sample({2, 4}, f32, 1)}), Error);
  try {
    exe->run(std::vector<Tensor>{sample({2, 4}, f32, 1), sample({3, 4}, f32, 2)});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::ShapeSymbolBinding) << e.what();
  }
  EXPECT_THROW(exe->run(std::vector<Tensor>{sample({2, 4}, f32, 1), sample({2, 4}, default_policy(DType::fp16), 2)}),
               Error);
}

// Random elementwise programs (fixed seeds): chains over three inputs with
// broadcasting, every covered op family member, checked bitwise.
TEST(ScheduleExecutable, RandomElementwiseProgramsMatchReference) {
  const char* unary[] = {"neg", "abs", "exp", "tanh", "sigmoid", "relu", "silu", "sqrt", "rsqrt", "log"};
  const char* binary[] = {"add", "sub", "mul", "div", "maximum", "minimum", "pow"};
  const char* compare[] = {"lt", "ge", "eq", "ne"};
  for (unsigned seed = 0; seed < 4; ++seed) {
    std::mt19937 rng(seed);
    const std::string t = "tensor<[R, 24] fp32>";
    std::string body;
    std::vector<std::string> live = {"%x", "%y", "%z"};
    int next = 0;
    auto pick = [&] { return live[rng() % live.size()]; };
    // A value of the full [R, 24] shape (not %y or %z), so results keep it.
    auto full = [&] {
      std::string v = pick();
      return v == "%y" || v == "%z" ? std::string("%x") : v;
    };
    for (int step = 0; step < 8; ++step) {
      const std::string out = "%v" + std::to_string(next++);
      switch (rng() % 4) {
        case 0: body += "  " + out + " = graph." + unary[rng() % 10] + " " + full() + " : " + t + "\n"; break;
        case 1:
          body += "  " + out + " = graph." + binary[rng() % 7] + " " + full() + ", " + pick() + " : " + t + "\n";
          break;
        case 2: {
          const std::string c = "%c" + std::to_string(next);
          body += "  " + c + " = graph." + compare[rng() % 4] + " " + pick() + ", " + full() +
                  " : tensor<[R, 24] bool>\n";
          body += "  " + out + " = graph.where " + c + ", " + full() + ", " + pick() + " : " + t + "\n";
          break;
        }
        default: body += "  " + out + " = graph.gelu " + full() + " {approximate = \"tanh\"} : " + t + "\n"; break;
      }
      live.push_back(out);
    }
    const std::string text = "func @p(%x: " + t + ", %y: tensor<[24] fp32>, %z: tensor<[R, 1] fp32>) -> (" + t +
                             ", " + t + ") {\n" + body + "  return " + live.back() + ", " + live[live.size() - 2] +
                             "\n}\n";
    SCOPED_TRACE(text);
    const NumericsPolicy f32 = default_policy(DType::fp32);
    check_against_reference(text, "p", {sample({19, 24}, f32, seed), sample({24}, f32, seed + 100),
                                        sample({19, 1}, f32, seed + 200)});
  }
}

}  // namespace
}  // namespace tessera
