// Run plans (docs/design/0048): runs of a signature after the first replay
// the recorded launches. Checked against the reference executor, bit for
// bit, on fresh inputs; results live in fresh buffers at every run.
#include <gtest/gtest.h>

#include <cstdlib>

#include "schedule_test_support.h"
#include "tessera/numerics/convert.h"

namespace tessera {
namespace {

using schedule_test::check_against_reference;
using schedule_test::expect_bitwise_equal;
using schedule_test::sample;

// Views everywhere: a strided slice of a transpose feeds a kernel (the run
// copies it first), and results are views of kernel results.
const char* kViews = R"(
func @v(%x: tensor<[6, 12] fp32>) -> (tensor<[12, 6] fp32>, tensor<[6, 2] fp32>, tensor<[6, 7] fp32>,
                                      tensor<[6, 2, 2] fp32>, tensor<[6, 12] fp32>) {
  %0 = graph.exp %x : tensor<[6, 12] fp32>
  %1 = graph.transpose %0 {perm = [1, 0]} : tensor<[12, 6] fp32>
  %2 = graph.slice %1 {starts = [1, 0], stops = [12, 6], steps = [2, 3]} : tensor<[6, 2] fp32>
  %3:2 = graph.split %0 {axis = 1, sizes = [5, 7]} : tensor<[6, 5] fp32>, tensor<[6, 7] fp32>
  %4:3 = graph.split_qkv %0 {num_heads = 2} : tensor<[6, 2, 2] fp32>, tensor<[6, 2, 2] fp32>, tensor<[6, 2, 2] fp32>
  %5 = graph.neg %2 : tensor<[6, 2] fp32>
  %7 = graph.transpose %1 {perm = [1, 0]} : tensor<[6, 12] fp32>
  %8 = graph.mul %7, %x : tensor<[6, 12] fp32>
  return %1, %5, %3#1, %4#2, %8
}
)";

TEST(ScheduleRunPlan, ReplaysGiveTheReferenceBitsInFreshBuffers) {
  const NumericsPolicy f32 = default_policy(DType::fp32);
  auto exe = check_against_reference(kViews, "v", {sample({6, 12}, f32, 1)});
  ASSERT_EQ(exe->run_plans(), 1u) << (exe->plan_refusals().empty() ? "" : exe->plan_refusals()[0]);
  ir::Module m = ir::parse_module(kViews);
  std::vector<Tensor> first;
  std::vector<std::vector<std::uint64_t>> first_codes;
  for (unsigned seed = 2; seed < 6; ++seed) {
    const std::vector<Tensor> args = {sample({6, 12}, f32, seed)};
    const std::vector<Tensor> got = exe->run(args);
    const std::vector<Tensor> want = graph::execute(m, *m.lookup("v"), args);
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      expect_bitwise_equal(got[i], want[i], "seed " + std::to_string(seed) + " result " + std::to_string(i));
    }
    if (first.empty()) {
      first = got;
      for (const Tensor& t : got) first_codes.push_back(t.codes());
    }
  }
  EXPECT_EQ(exe->run_plans(), 1u);
  // The first replay's results were not written by the later ones.
  for (std::size_t i = 0; i < first.size(); ++i) EXPECT_EQ(first[i].codes(), first_codes[i]) << i;
}

TEST(ScheduleRunPlan, HostIndexChecksWalkAndSayWhy) {
  const std::string text = R"(
func @g(%x: tensor<[5, 4] fp32>, %i: tensor<[3] int64>) -> (tensor<[3, 4] fp32>) {
  %0 = graph.exp %x : tensor<[5, 4] fp32>
  %1 = graph.gather %0, %i {axis = 0} : tensor<[3, 4] fp32>
  return %1
}
)";
  const NumericsPolicy f32 = default_policy(DType::fp32);
  const Tensor idx = Tensor::from_values(std::vector<double>{4, 0, 2}, {3}, default_policy(DType::int64));
  auto exe = check_against_reference(text, "g", {sample({5, 4}, f32, 1), idx});
  exe->run(std::vector<Tensor>{sample({5, 4}, f32, 2), idx});
  EXPECT_EQ(exe->run_plans(), 0u);
  ASSERT_EQ(exe->plan_refusals().size(), 1u);
  EXPECT_EQ(exe->plan_refusals()[0], "indices are read on the host");
  // Still checked at every run.
  const Tensor bad = Tensor::from_values(std::vector<double>{4, 5, 2}, {3}, default_policy(DType::int64));
  EXPECT_THROW(exe->run(std::vector<Tensor>{sample({5, 4}, f32, 3), bad}), Error);
}

TEST(ScheduleRunPlan, PlansCanBeTurnedOff) {
  const NumericsPolicy f32 = default_policy(DType::fp32);
  ::setenv("TESSERA_RUN_PLANS", "0", 1);
  auto exe = check_against_reference(kViews, "v", {sample({6, 12}, f32, 1)});
  exe->run(std::vector<Tensor>{sample({6, 12}, f32, 2)});
  EXPECT_EQ(exe->run_plans(), 0u);
  ::unsetenv("TESSERA_RUN_PLANS");
  exe->run(std::vector<Tensor>{sample({6, 12}, f32, 3)});
  EXPECT_EQ(exe->run_plans(), 1u);
}

TEST(TensorViewBytes, ReadsTheStorageAtAByteOffsetAsAnotherPolicy) {
  const Tensor t = Tensor::from_values(std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7}, {8}, default_policy(DType::fp32));
  const Tensor tail = t.as_strided({6}, {1}, 2);  // elements 2..7
  // Two fp32 elements on from tail's element 0, as a [2, 2] view with a row step of 2.
  const Tensor v = tail.view_bytes(8, {2, 2}, {2, 1}, default_policy(DType::fp32));
  EXPECT_EQ(v.to_values(), (std::vector<double>{4, 5, 6, 7}));
  // The same bytes as their codes.
  const Tensor codes = tail.view_bytes(0, {1}, {1}, default_policy(DType::int32));
  EXPECT_EQ(codes.to_values(), (std::vector<double>{static_cast<double>(0x40000000)}));  // 2.0f
  try {
    (void)tail.view_bytes(2, {1}, {1}, default_policy(DType::fp32));
    FAIL() << "a misaligned byte offset was accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("does not start a fp32 element"), std::string::npos) << e.message();
  }
}

}  // namespace
}  // namespace tessera
