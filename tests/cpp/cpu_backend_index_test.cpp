// Index arithmetic in generated CPU kernels: adds and muls that cannot
// saturate are plain C++ (codegen::IndexBounds), kernels compiled for
// contiguous buffers read them through unit-stride views, and the launcher
// refuses extents and grids beyond the range that makes this exact; and
// tile.strands, run as rounds of consecutive elements (SIMD lanes).
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <thread>
#include <random>
#include <string>

#include "backends/cpu/thread_pool.h"
#include "cpu_backend_test_util.h"
#include "tessera/ir/text.h"
#include "tessera/support/error.h"

namespace tessera {
namespace {

using namespace cputest;

// y[i] = x[i * m + 1] with m a constant (bounded) or a scalar argument (not).
ir::Operation* strided_read_kernel(ir::Module& m, bool scalar_multiplier) {
  std::vector<std::pair<std::string, Type>> params = {{"x", gmem({Dim::named("n")}, DType::fp32)},
                                                      {"y", gmem({Dim::named("k")}, DType::fp32, true)}};
  if (scalar_multiplier) params.push_back({"m", lane(DType::int64)});
  ir::Operation* k = tile::build_kernel(m, scalar_multiplier ? "read_scalar" : "read_const", params);
  ir::Block& body = ir::function_body(*k);
  OpBuilder b(body);
  Value* i = op(b, "tile.linear_id", {});
  Value* mult = scalar_multiplier ? body.argument(2) : i64(b, 2);
  Value* j = op(b, "tile.add", {op(b, "tile.mul", {i, mult}), i64(b, 1)});
  stmt(b, "tile.store_elem", {body.argument(1), i, op(b, "tile.load_elem", {body.argument(0), j})});
  return k;
}

TEST(CpuBackendIndex, BoundedIndexArithmeticIsPlainAndUnboundedStaysSaturating) {
  ir::Module m;
  cpu::CompiledKernel plain = compile(*strided_read_kernel(m, false));
  EXPECT_EQ(plain.source.find("tsr::imul"), std::string::npos) << plain.source;
  EXPECT_EQ(plain.source.find("tsr::iadd"), std::string::npos) << plain.source;
  cpu::CompiledKernel saturating = compile(*strided_read_kernel(m, true));
  EXPECT_NE(saturating.source.find("tsr::imul"), std::string::npos) << saturating.source;

  Tensor x = f32_tensor({0, 1, 2, 3, 4, 5, 6, 7, 8}, {9});
  Tensor y = Tensor::zeros({4}, pol(DType::fp32));
  cpu::launch(plain, -1, {x, y});
  EXPECT_EQ(y.to_values(), (std::vector<double>{1, 3, 5, 7}));
  Tensor y2 = Tensor::zeros({4}, pol(DType::fp32));
  cpu::launch(saturating, -1, {x, y2, std::int64_t{2}});
  EXPECT_EQ(y2.to_values(), (std::vector<double>{1, 3, 5, 7}));
}

TEST(CpuBackendIndex, ContiguousBufferKernelsCheckTheInnermostStride) {
  ir::Module m;
  cpu::CompileOptions options;
  options.contiguous_buffers = true;
  cpu::CompiledKernel ck = compile(*strided_read_kernel(m, false), options);
  EXPECT_NE(ck.source.find("tsr::gmem_unit<"), std::string::npos) << ck.source;

  Tensor base = f32_tensor({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17}, {18});
  Tensor y = Tensor::zeros({4}, pol(DType::fp32));
  cpu::launch(ck, -1, {base.as_strided({9}, {1}, 0), y});
  EXPECT_EQ(y.to_values(), (std::vector<double>{1, 3, 5, 7}));
  try {
    cpu::launch(ck, -1, {base.as_strided({9}, {2}, 0), y});
    FAIL() << "expected a stride error";
  } catch (const Error& e) {
    const std::string msg = e.message();
    EXPECT_NE(msg.find("innermost stride 2"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'x'"), std::string::npos) << msg;
  }
}

TEST(CpuBackendIndex, ExtentsOfTwoToThe48OrMoreAreRefused) {
  ir::Module m;
  cpu::CompiledKernel ck = compile(*strided_read_kernel(m, false));
  Tensor one = f32_tensor({1}, {1});
  Tensor huge = one.as_strided({std::int64_t{1} << 48}, {0}, 0);  // no memory behind it
  Tensor y = Tensor::zeros({1}, pol(DType::fp32));
  try {
    cpu::launch(ck, -1, {huge, y});
    FAIL() << "expected an extent error";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.message()).find("2^48"), std::string::npos) << e.message();
  }
  EXPECT_THROW(cpu::launch(ck, std::int64_t{1} << 48, {one, y}), ArgumentError);
}

// y[0] = tree of 4 strands summing x[i + shift]^2 over i in [0, n).
std::string strands_kernel(int shift) {
  return R"(
func @strands(%x: gmem<[n] fp32>, %y: gmem<[1] fp32 mut>) -> () attributes {kernel = true} {
  %0 = tile.const {policy = policy<int64>, value = 0} : lane<int64>
  %s = tile.const {policy = policy<int64>, value = )" + std::to_string(shift) + R"(} : lane<int64>
  %1 = tile.symbol {name = "n"} : lane<int64>
  %2 = tile.const {policy = policy<fp32>, value = 0.0} : lane<fp32>
  %3:4 = tile.strands %0, %1, %2 {count = 4} : lane<fp32>, lane<fp32>, lane<fp32>, lane<fp32> {
    ^(%i: lane<int64>, %acc: lane<fp32>):
    %4 = tile.add %i, %s {nowrap = true} : lane<int64>
    %5 = tile.load_elem %x, %4 : lane<fp32>
    %6 = tile.mul %5, %5 : lane<fp32>
    %7 = tile.add %acc, %6 : lane<fp32>
    tile.yield %7
  }
  %8 = tile.add %3#0, %3#1 : lane<fp32>
  %9 = tile.add %3#2, %3#3 : lane<fp32>
  %10 = tile.add %8, %9 : lane<fp32>
  tile.store_elem %y, %0, %10
  return
}
)";
}

TEST(CpuBackendStrands, StrandsSumInterleavedElementsInOrder) {
  ir::Module m = ir::parse_module(strands_kernel(0), "strands.tir");
  cpu::CompileOptions options;
  options.contiguous_buffers = true;
  cpu::CompiledKernel ck = compile(*m.lookup("strands"), options);
  EXPECT_NE(ck.source.find("// tile.strands"), std::string::npos) << ck.source;
  // The index i + 0 is affine in the strand index: the full rounds check the
  // range once and read with plain loads; masked rounds remain the fallback.
  EXPECT_NE(ck.source.find("tsr::span_in("), std::string::npos) << ck.source;
  EXPECT_NE(ck.source.find("tsr::load_u("), std::string::npos) << ck.source;
  EXPECT_NE(ck.source.find("tsr::load_m("), std::string::npos) << ck.source;
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 1e3f);
  for (int n : {0, 3, 4, 1001, 4096}) {
    std::vector<double> xs(static_cast<std::size_t>(n));
    for (double& v : xs) v = dist(rng);
    // The strand order written out in fp32: strand i % 4, then ((s0 + s1) + (s2 + s3)).
    float strand[4] = {0, 0, 0, 0};
    for (int i = 0; i < n; ++i) {
      const float v = static_cast<float>(xs[static_cast<std::size_t>(i)]);
      strand[i % 4] += v * v;
    }
    const float want = (strand[0] + strand[1]) + (strand[2] + strand[3]);
    Tensor x = n == 0 ? Tensor::zeros({0}, pol(DType::fp32)) : f32_tensor(xs, {n});
    Tensor y = Tensor::zeros({1}, pol(DType::fp32));
    cpu::launch(ck, 1, {x, y});
    EXPECT_EQ(static_cast<float>(y.to_values()[0]), want) << "n = " << n;
  }
}

TEST(CpuBackendStrands, AnOutOfRangeAccessInAMaskedRoundRaisesAtItsFirstIndex) {
  ir::Module m = ir::parse_module(strands_kernel(1), "strands.tir");
  cpu::CompiledKernel ck = compile(*m.lookup("strands"));
  Tensor x = Tensor::zeros({1000}, pol(DType::fp32));  // the last round reads x[997..1000]
  Tensor y = Tensor::zeros({1}, pol(DType::fp32));
  try {
    cpu::launch(ck, 1, {x, y});
    FAIL() << "expected an index error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::IndexOutOfRange);
    EXPECT_NE(std::string(e.message()).find("index 1000 out of range"), std::string::npos) << e.message();
  }
}

// y[0] = sum over i in [0, n) of x[min(i * i, n - 1)]: an index that is not
// affine in i keeps the masked rounds only.
TEST(CpuBackendStrands, ANonAffineIndexKeepsMaskedAccesses) {
  const std::string text = R"(
func @squares(%x: gmem<[n] fp32>, %y: gmem<[1] fp32 mut>) -> () attributes {kernel = true} {
  %0 = tile.const {policy = policy<int64>, value = 0} : lane<int64>
  %one = tile.const {policy = policy<int64>, value = 1} : lane<int64>
  %1 = tile.symbol {name = "n"} : lane<int64>
  %last = tile.sub %1, %one : lane<int64>
  %2 = tile.const {policy = policy<fp32>, value = 0.0} : lane<fp32>
  %3:4 = tile.strands %0, %1, %2 {count = 4} : lane<fp32>, lane<fp32>, lane<fp32>, lane<fp32> {
    ^(%i: lane<int64>, %acc: lane<fp32>):
    %sq = tile.mul %i, %i {nowrap = true} : lane<int64>
    %4 = tile.min %sq, %last : lane<int64>
    %5 = tile.load_elem %x, %4 : lane<fp32>
    %7 = tile.add %acc, %5 : lane<fp32>
    tile.yield %7
  }
  %8 = tile.add %3#0, %3#1 : lane<fp32>
  %9 = tile.add %3#2, %3#3 : lane<fp32>
  %10 = tile.add %8, %9 : lane<fp32>
  tile.store_elem %y, %0, %10
  return
}
)";
  ir::Module m = ir::parse_module(text, "squares.tir");
  cpu::CompiledKernel ck = compile(*m.lookup("squares"));
  EXPECT_EQ(ck.source.find("tsr::load_u("), std::string::npos) << ck.source;
  EXPECT_NE(ck.source.find("tsr::load_m("), std::string::npos) << ck.source;
  const int n = 1003;
  std::vector<double> xs(n);
  for (int i = 0; i < n; ++i) xs[static_cast<std::size_t>(i)] = i % 7 - 3;
  float strand[4] = {0, 0, 0, 0};
  for (long i = 0; i < n; ++i) strand[i % 4] += static_cast<float>(xs[static_cast<std::size_t>(std::min<long>(i * i, n - 1))]);
  Tensor y = Tensor::zeros({1}, pol(DType::fp32));
  cpu::launch(ck, 1, {f32_tensor(xs, {n}), y});
  EXPECT_EQ(static_cast<float>(y.to_values()[0]), (strand[0] + strand[1]) + (strand[2] + strand[3]));
}

// An index launch's workers cap their launches' threads (ScopedThreadLimit):
// the default count drops to the cap inside the scope and comes back after,
// scopes nest, and a strands kernel gives the same bits either way.
TEST(CpuBackendThreads, ScopedThreadLimitCapsTheDefaultCount) {
  const int before = cpu::detail::default_thread_count();
  {
    cpu::ScopedThreadLimit limit(1);
    EXPECT_EQ(cpu::detail::default_thread_count(), 1);
    {
      cpu::ScopedThreadLimit wider(64);
      EXPECT_EQ(cpu::detail::default_thread_count(), std::min(before, 64));
    }
    EXPECT_EQ(cpu::detail::default_thread_count(), 1);
  }
  EXPECT_EQ(cpu::detail::default_thread_count(), before);
  ir::Module m = ir::parse_module(strands_kernel(0), "strands.tir");
  cpu::CompiledKernel ck = compile(*m.lookup("strands"));
  std::vector<double> xs(5000);
  for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = std::sin(static_cast<double>(i)) * 1e3;
  Tensor y1 = Tensor::zeros({1}, pol(DType::fp32)), y2 = Tensor::zeros({1}, pol(DType::fp32));
  cpu::launch(ck, 1, {f32_tensor(xs, {5000}), y1});
  {
    cpu::ScopedThreadLimit limit(1);
    cpu::launch(ck, 1, {f32_tensor(xs, {5000}), y2});
  }
  EXPECT_EQ(y1.codes(), y2.codes());
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// The pool runs every item exactly once, whoever takes it. Many short
// parallel_fors back to back (the caller often finishing alone while helpers
// are still waking) and two callers at once must neither lose an item nor
// hang; an item's exception reaches the caller after every item has run.
TEST(CpuBackendThreads, ThePoolRunsEveryItemOnceAndRaisesAfterAll) {
  cpu::detail::ThreadPool& pool = cpu::detail::ThreadPool::global();
  for (int round = 0; round < 2000; ++round) {
    const std::int64_t n = 1 + round % 9;
    std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
    pool.parallel_for(n, 4, [&](std::int64_t i) { hits[static_cast<std::size_t>(i)].fetch_add(1); });
    for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<std::size_t>(i)].load(), 1) << round << " " << i;
  }
  std::atomic<std::int64_t> total{0};
  auto caller = [&] {
    for (int round = 0; round < 500; ++round) pool.parallel_for(16, 4, [&](std::int64_t i) { total.fetch_add(i); });
  };
  std::thread a(caller), b(caller);
  a.join();
  b.join();
  EXPECT_EQ(total.load(), 2 * 500 * (15 * 16 / 2));
  std::atomic<int> ran{0};
  EXPECT_THROW(pool.parallel_for(32, 4,
                                 [&](std::int64_t i) {
                                   ran.fetch_add(1);
                                   if (i == 3) raise(ErrorCode::ArgumentInvalid, "item 3");
                                 }),
               ArgumentError);
  EXPECT_EQ(ran.load(), 32);
}

}  // namespace
}  // namespace tessera
