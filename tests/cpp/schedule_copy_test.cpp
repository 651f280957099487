// The copy template (concat, gather, slice_embed, iota, scatter_add)
// against the reference executor, bit for bit.
#include <random>

#include "schedule_test_support.h"

namespace tessera {
namespace {

using schedule_test::check_against_reference;
using schedule_test::sample;
using schedule_test::test_options;

const NumericsPolicy kF32 = default_policy(DType::fp32);

Tensor indices(std::vector<double> v, std::vector<std::int64_t> shape) {
  return Tensor::from_values(v, std::move(shape), default_policy(DType::int64));
}

TEST(ScheduleCopy, ConcatSliceEmbedAndIota) {
  const std::string text = R"(
func @c(%a: tensor<[B, 3] bf16 @accum(fp32)>, %b: tensor<[B, 5] bf16 @accum(fp32)>, %c: tensor<[B, 1] bf16 @accum(fp32)>,
        %y: tensor<[2, 3] fp32>)
    -> (tensor<[B, 9] bf16 @accum(fp32)>, tensor<[4, 5] fp32>, tensor<[2, 8] fp16>) {
  %0 = graph.concat %a, %b, %c {axis = -1} : tensor<[B, 9] bf16 @accum(fp32)>
  %1 = graph.slice_embed %y {shape = shape<[4, 5]>, starts = [1, 0], stops = [4, 5], steps = [2, 2]} : tensor<[4, 5] fp32>
  %2 = graph.iota {axis = -1, policy = policy<fp16>, shape = shape<[2, 8]>} : tensor<[2, 8] fp16>
  return %0, %1, %2
}
)";
  const NumericsPolicy bf = parse_policy("bf16 @accum(fp32)");
  check_against_reference(text, "c", {sample({7, 3}, bf, 1), sample({7, 5}, bf, 2), sample({7, 1}, bf, 3), sample({2, 3}, kF32, 4)});
}

TEST(ScheduleCopy, GatherAndScatterAddWithRepeatsAndNegativeIndices) {
  const std::string text = R"(
func @g(%x: tensor<[4, 10, 3] fp32>, %i: tensor<[2, 3] int64>, %u: tensor<[4, 2, 3, 3] bf16 @accum(fp32)>)
    -> (tensor<[4, 2, 3, 3] fp32>, tensor<[4, 10, 3] bf16 @accum(fp32)>) {
  %0 = graph.gather %x, %i {axis = 1} : tensor<[4, 2, 3, 3] fp32>
  %1 = graph.scatter_add %u, %i {axis = 1, shape = shape<[4, 10, 3]>} : tensor<[4, 10, 3] bf16 @accum(fp32)>
  return %0, %1
}
)";
  Tensor idx = indices({3, -1, 3, 0, 9, 3}, {2, 3});
  check_against_reference(text, "g", {sample({4, 10, 3}, kF32, 5), idx, sample({4, 2, 3, 3}, parse_policy("bf16 @accum(fp32)"), 6, false)});
}

TEST(ScheduleCopy, OutOfRangeIndexIsAnIndexError) {
  const std::string text = R"(
func @o(%x: tensor<[10, 4] fp32>, %i: tensor<[3] int64>) -> (tensor<[3, 4] fp32>) {
  %0 = graph.gather %x, %i : tensor<[3, 4] fp32>
  return %0
}
)";
  ir::Module m = ir::parse_module(text, "o.tir");
  auto exe = schedule::compile_executable(m, "o", test_options());
  try {
    exe->run(std::vector<Tensor>{sample({10, 4}, kF32, 7), indices({1, 10, 2}, {3})});
    FAIL() << "expected an IndexError";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::IndexOutOfRange) << e.what();
    EXPECT_NE(std::string(e.what()).find("gather index 10 is out of range"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("o.tir:3"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessera
