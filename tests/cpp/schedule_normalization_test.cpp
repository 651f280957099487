// The normalization template against the reference executor: bit for bit
// (same roundings, same scalings, the same canonical sum order at every
// row length).
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <random>
#include <tuple>

#include "schedule_test_support.h"
#include "tessera/numerics/elementary.h"

namespace tessera {
namespace {

using schedule_test::check_against_reference;
using schedule_test::expect_bitwise_equal;
using schedule_test::sample;
using schedule_test::test_options;

const NumericsPolicy kF32 = default_policy(DType::fp32);

// Rows with special content: NaN, +inf, -inf only, all zeros, constant, huge, tiny.
Tensor special_rows(std::int64_t rows, std::int64_t length, const NumericsPolicy& p, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, 3.0);
  std::vector<double> v(static_cast<std::size_t>(rows * length));
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t i = 0; i < length; ++i) {
      double x = normal(rng);
      switch (r % 9) {
        case 1: x = i == 3 ? std::nan("") : x; break;
        case 2: x = i % 5 == 1 ? INFINITY : x; break;
        case 3: x = -INFINITY; break;
        case 4: x = 0.0; break;
        case 5: x = 1.5; break;
        case 6: x *= 1e30; break;
        case 7: x *= 1e-30; break;
        default: break;
      }
      v[static_cast<std::size_t>(r * length + i)] = x;
    }
  }
  return Tensor::from_values(v, {rows, length}, p);
}

// Finite values whose magnitudes spread over 2^-130 .. 2^10, signs mixed;
// with `zeros`, every seventh element is +0 or -0.
Tensor spread_rows(std::int64_t rows, std::int64_t length, const NumericsPolicy& p, unsigned seed, bool zeros = false) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> mantissa(1.0, 2.0);
  std::uniform_int_distribution<int> exponent(-130, 10);
  std::vector<double> v(static_cast<std::size_t>(rows * length));
  for (std::size_t i = 0; i < v.size(); ++i) {
    const double sign = rng() % 2 ? -1.0 : 1.0;
    v[i] = zeros && i % 7 == 3 ? sign * 0.0 : std::ldexp(mantissa(rng), exponent(rng)) * sign;
  }
  return Tensor::from_values(v, {rows, length}, p);
}

TEST(ScheduleNormalization, EveryOpAndPolicyMatchesReferenceBitwise) {
  for (const char* storage : {"fp32", "bf16 @accum(fp32)", "fp16", "fp8_e4m3 @accum(fp32)", "fp64"}) {
    SCOPED_TRACE(storage);
    const std::string t = std::string("tensor<[R, 200] ") + storage + ">";
    const std::string v = std::string("tensor<[200] ") + storage + ">";
    const std::string text = "func @f(%x: " + t + ", %g: " + v + ", %b: " + v + ") -> (" + t + ", tensor<[R] " +
                             storage + ">, " + t + ", " + t + ", " + t + ", " + t + ", " + t + ", " + t + ", " + t +
                             ") {\n"
                             "  %0 = graph.softmax_safe %x {axis = -1} : " + t + "\n"
                             "  %1 = graph.logsumexp %x {axis = 1} : tensor<[R] " + storage + ">\n"
                             "  %2 = graph.layernorm_safe %x, %g, %b {axis = -1, eps = 1e-5} : " + t + "\n"
                             "  %3 = graph.rmsnorm_safe %x, %g {axis = -1, eps = 1e-6} : " + t + "\n"
                             "  %4 = graph.layernorm_safe %x {axis = -1, eps = 0.0} : " + t + "\n"
                             "  %5 = graph.rmsnorm_safe %x {axis = -1, eps = 0.0} : " + t + "\n"
                             "  %6 = graph.softmax_linear %0, %x {axis = -1} : " + t + "\n"
                             "  %7 = graph.norm_linear %x, %0 {axis = -1, eps = 1e-5, center = true} : " + t + "\n"
                             "  %8 = graph.norm_linear %x, %0 {axis = -1, eps = 1e-6, center = false} : " + t + "\n"
                             "  return %0, %1, %2, %3, %4, %5, %6, %7, %8\n}\n";
    const NumericsPolicy p = parse_policy(storage);
    check_against_reference(text, "f", {special_rows(18, 200, p, 1), sample({200}, p, 2, false), sample({200}, p, 3, false)});
  }
}

// The fp32 scalings of an fp32 accumulation (normalization.cpp, pow2):
// rows whose largest |x| lies below 2^-127 (the scaling up to [0.5, 1)
// needs more than fp32's largest power of two: two multiplies), subnormal
// values, and a large eps with tiny rows, whose output scaling lies below
// 2^-149 and takes the fp64 loop (the last two rows put results at 2^-150
// to 2^-149, where a scaling through fp32 would round them to 0).
// Every result keeps the reference's bits.
TEST(ScheduleNormalization, ScalingsBeyondFp32PowersOfTwoMatchReference) {
  for (const char* storage : {"fp32", "bf16 @accum(fp32)"}) {
    SCOPED_TRACE(storage);
    const std::string t = std::string("tensor<[R, 64] ") + storage + ">";
    const std::string text = "func @f(%x: " + t + ") -> (" + t + ", " + t + ", " + t + ", " + t + ", " + t + ", " + t +
                             ", " + t + ") {\n"
                             "  %0 = graph.rmsnorm_safe %x {axis = -1, eps = 1e12} : " + t + "\n"
                             "  %1 = graph.layernorm_safe %x {axis = -1, eps = 1e12} : " + t + "\n"
                             "  %2 = graph.rmsnorm_safe %x {axis = -1, eps = 0.0} : " + t + "\n"
                             "  %3 = graph.layernorm_safe %x {axis = -1, eps = 1e-5} : " + t + "\n"
                             "  %4 = graph.rmsnorm_safe %x {axis = -1, eps = 2048.0} : " + t + "\n"
                             "  %5 = graph.layernorm_safe %x {axis = -1, eps = 137438953472.0} : " + t + "\n"
                             "  %6 = graph.rmsnorm_safe %x {axis = -1, eps = 137438953472.0} : " + t + "\n"
                             "  return %0, %1, %2, %3, %4, %5, %6\n}\n";
    std::mt19937 rng(7);
    std::normal_distribution<double> normal(0.0, 1.0);
    const double scales[] = {1e-40, 3e-44, 1e-38, 1e-30, 1.0, 1e20, 1e-39, 1e-44, 5e-45, 2e-44};
    std::vector<double> v;
    for (double scale : scales) {
      for (int i = 0; i < 64; ++i) v.push_back(normal(rng) * scale);
    }
    // Rows whose results land at 2^-150 to 2^-149 with eps = 2048 (fp32:
    // 16 to 31 times 2^-149) and eps = 2^37 (bf16: 1 to 3 times 2^-133).
    for (int i = 0; i < 64; ++i) v.push_back((16 + i % 16) * 0x1p-149);
    for (int i = 0; i < 64; ++i) v.push_back((1 + i % 3) * 0x1p-133 * (i % 2 ? -1.0 : 1.0));
    const std::int64_t rows = static_cast<std::int64_t>(std::size(scales)) + 2;
    check_against_reference(text, "f", {Tensor::from_values(v, {rows, 64}, parse_policy(storage))});
  }
}

TEST(ScheduleNormalization, InnerAxesAndKeepdims) {
  const std::string text = R"(
func @g(%x: tensor<[3, 40, 6] fp32>) -> (tensor<[3, 40, 6] fp32>, tensor<[3, 1, 6] fp32>, tensor<[3, 40, 6] fp32>,
                                         tensor<[3, 40, 6] fp32>) {
  %0 = graph.softmax_safe %x {axis = 1} : tensor<[3, 40, 6] fp32>
  %1 = graph.logsumexp %x {axis = 1, keepdims = true} : tensor<[3, 1, 6] fp32>
  %2 = graph.layernorm_safe %x {axis = 0} : tensor<[3, 40, 6] fp32>
  %3 = graph.softmax_linear %0, %x {axis = 1} : tensor<[3, 40, 6] fp32>
  return %0, %1, %2, %3
}
)";
  check_against_reference(text, "g", {sample({3, 40, 6}, kF32, 4)});
}

// Rows longer than a block: the reference sums in the canonical order too.
TEST(ScheduleNormalization, LongRowsMatchReferenceBitwise) {
  const std::string text = R"(
func @h(%x: tensor<[4, 5000] fp32>) -> (tensor<[4, 5000] fp32>, tensor<[4] fp32>, tensor<[4, 5000] fp32>,
                                        tensor<[4, 5000] fp32>, tensor<[4, 5000] fp32>, tensor<[4, 5000] fp32>) {
  %0 = graph.softmax_safe %x {axis = -1} : tensor<[4, 5000] fp32>
  %1 = graph.logsumexp %x {axis = -1} : tensor<[4] fp32>
  %2 = graph.layernorm_safe %x {axis = -1} : tensor<[4, 5000] fp32>
  %3 = graph.rmsnorm_safe %x {axis = -1} : tensor<[4, 5000] fp32>
  %4 = graph.softmax_linear %0, %x {axis = -1} : tensor<[4, 5000] fp32>
  %5 = graph.norm_linear %x, %2 {axis = -1, eps = 1e-5, center = true} : tensor<[4, 5000] fp32>
  return %0, %1, %2, %3, %4, %5
}
)";
  ir::Module m = ir::parse_module(text);
  auto exe = schedule::compile_executable(m, "h", test_options());
  std::vector<Tensor> args{sample({4, 5000}, kF32, 5, false)};
  auto got = exe->run(args);
  auto want = graph::execute(m, *m.lookup("h"), args);
  for (std::size_t k = 0; k < got.size(); ++k) expect_bitwise_equal(got[k], want[k], "result " + std::to_string(k));
}

// Every row op over fp32 rows of length N: softmax, logsumexp, layernorm,
// rmsnorm, softmax_linear and norm_linear (the cooperative tests' @c).
const char* const kEveryRowOp = R"(
func @c(%x: tensor<[R, N] fp32>, %g: tensor<[N] fp32>) -> (tensor<[R, N] fp32>, tensor<[R] fp32>, tensor<[R, N] fp32>, tensor<[R, N] fp32>, tensor<[R, N] fp32>, tensor<[R, N] fp32>) {
  %0 = graph.softmax_safe %x {axis = -1} : tensor<[R, N] fp32>
  %1 = graph.logsumexp %x {axis = -1} : tensor<[R] fp32>
  %2 = graph.layernorm_safe %x, %g {axis = -1, eps = 1e-5} : tensor<[R, N] fp32>
  %3 = graph.rmsnorm_safe %x {axis = -1, eps = 0.0} : tensor<[R, N] fp32>
  %4 = graph.softmax_linear %0, %x {axis = -1} : tensor<[R, N] fp32>
  %5 = graph.norm_linear %x, %0 {axis = -1, eps = 1e-5, center = true} : tensor<[R, N] fp32>
  return %0, %1, %2, %3, %4, %5
}
)";

// softmax, layernorm (scale and shift) and rmsnorm (scale) over bf16 rows
// of length N, accumulating in fp32 (the runs' and held rows' tests' @h).
const char* const kBf16RowOps = R"(
func @h(%x: tensor<[R, N] bf16 @accum(fp32)>, %g: tensor<[N] bf16 @accum(fp32)>, %b: tensor<[N] bf16 @accum(fp32)>)
    -> (tensor<[R, N] bf16 @accum(fp32)>, tensor<[R, N] bf16 @accum(fp32)>, tensor<[R, N] bf16 @accum(fp32)>) {
  %0 = graph.softmax_safe %x {axis = -1} : tensor<[R, N] bf16 @accum(fp32)>
  %1 = graph.layernorm_safe %x, %g, %b {axis = -1, eps = 1e-5} : tensor<[R, N] bf16 @accum(fp32)>
  %2 = graph.rmsnorm_safe %x, %g {axis = -1, eps = 1e-6} : tensor<[R, N] bf16 @accum(fp32)>
  return %0, %1, %2
}
)";

// A bf16 softmax's gradient as autodiff writes it: y read through a cast to
// fp32, g cast too. The three ops share one kernel, which rounds y to bf16
// as the stored y would be.
const char* const kBf16SoftmaxGradient = R"(
func @sg(%x: tensor<[R, N] bf16 @accum(fp32)>, %g: tensor<[R, N] bf16 @accum(fp32)>) -> (tensor<[R, N] fp32>) {
  %y = graph.softmax_safe %x {axis = -1} : tensor<[R, N] bf16 @accum(fp32)>
  %yf = graph.cast %y {policy = policy<fp32>} : tensor<[R, N] fp32>
  %gf = graph.cast %g {policy = policy<fp32>} : tensor<[R, N] fp32>
  %0 = graph.softmax_linear %yf, %gf {axis = -1} : tensor<[R, N] fp32>
  return %0
}
)";

// The cooperative form (a group of L lanes per row, the CUDA default) gives
// the lane-per-row bits for every L: the same reference bits on rows of 200
// with special values, and the same canonical sum on rows of 70000 (two
// superblocks of block sums), also along an inner axis.
TEST(ScheduleNormalization, CooperativeRowsGiveTheSameBitsForAnyLaneCount) {
  const std::string text = std::string(kEveryRowOp) + R"(
func @inner(%x: tensor<[3, 40, 6] fp32>) -> (tensor<[3, 40, 6] fp32>, tensor<[3, 6] fp32>) {
  %0 = graph.softmax_safe %x {axis = 1} : tensor<[3, 40, 6] fp32>
  %1 = graph.logsumexp %x {axis = 1} : tensor<[3, 6] fp32>
  return %0, %1
}
)";
  ir::Module m = ir::parse_module(text);
  const std::vector<Tensor> long_args{sample({2, 70000}, kF32, 11, false), sample({70000}, kF32, 12, false)};
  std::vector<Tensor> lane_per_row;
  {
    schedule_test::ScopedEnv env("TESSERA_ROW_LANES", "1");
    lane_per_row = schedule::compile_executable(m, "c", test_options())->run(long_args);
  }
  // Lanes of a block or a warp combine by tile.lane_shuffle, except with
  // TESSERA_LANE_SHUFFLES=0 (the CUDA Tile IR target's form: shared memory).
  const std::pair<const char*, const char*> forms[] = {{"3", "1"}, {"32", "1"}, {"256", "1"}, {"32", "0"}};
  for (const auto& [lanes, shuffles] : forms) {
    SCOPED_TRACE(std::string("row lanes ") + lanes + ", shuffles " + shuffles);
    schedule_test::ScopedEnv env("TESSERA_ROW_LANES", lanes);
    schedule_test::ScopedEnv env_shuffles("TESSERA_LANE_SHUFFLES", shuffles);
    auto exe = check_against_reference(text, "c", {special_rows(18, 200, kF32, 13), sample({200}, kF32, 14, false)});
    EXPECT_NE(exe->tile_ir().find("tile.barrier"), std::string::npos);
    EXPECT_EQ(exe->tile_ir().find("tile.lane_shuffle") != std::string::npos,
              std::string(shuffles) == "1" && std::string(lanes) != "3");
    check_against_reference(text, "inner", {sample({3, 40, 6}, kF32, 15)});
    const auto got = exe->run(long_args);
    for (std::size_t k = 0; k < got.size(); ++k) {
      schedule_test::expect_bitwise_equal(got[k], lane_per_row[k], "70000-element rows, result " + std::to_string(k));
    }
  }
}

// Rows read in runs (the `row_vector` knob, CUDA's default with cooperative
// rows, forced here on the CPU): every run length gives the reference's
// bits on rows with special values whose length is a multiple of the run
// (200), is not (203: a partial last run, and runs that start unaligned),
// in bf16 and fp32, with a layernorm's scale and shift read as runs too;
// and the canonical sum's bits on rows of 70000.
TEST(ScheduleNormalization, RowsReadInRunsGiveTheReferenceBits) {
  const std::string text = std::string(kEveryRowOp) + kBf16RowOps;
  ir::Module m = ir::parse_module(text);
  const NumericsPolicy bf16 = parse_policy("bf16 @accum(fp32)");
  const std::vector<Tensor> long_args{sample({2, 70000}, kF32, 21, false), sample({70000}, kF32, 22, false)};
  std::vector<Tensor> lane_per_row;
  {
    schedule_test::ScopedEnv env("TESSERA_ROW_LANES", "1");
    lane_per_row = schedule::compile_executable(m, "c", test_options())->run(long_args);
  }
  const std::pair<const char*, const char*> forms[] = {{"2", "32"}, {"8", "128"}};
  for (const auto& [run, lanes] : forms) {
    {
      SCOPED_TRACE(std::string("runs of ") + run + ", row lanes " + lanes);
      schedule_test::ScopedEnv env_lanes("TESSERA_ROW_LANES", lanes);
      schedule_test::ScopedEnv env_run("TESSERA_ROW_VECTOR", run);
      for (std::int64_t n : {200, 203}) {
        auto exe = check_against_reference(text, "c", {special_rows(18, n, kF32, 23), sample({n}, kF32, 24, false)});
        EXPECT_NE(exe->tile_ir().find("tile.load_vector"), std::string::npos);
        EXPECT_NE(exe->tile_ir().find("tile.store_vector"), std::string::npos);
        check_against_reference(text, "h", {special_rows(9, n, bf16, 25), sample({n}, bf16, 26, false), sample({n}, bf16, 27)});
      }
      const auto got = schedule::compile_executable(m, "c", test_options())->run(long_args);
      for (std::size_t k = 0; k < got.size(); ++k) {
        schedule_test::expect_bitwise_equal(got[k], lane_per_row[k], "70000-element rows, result " + std::to_string(k));
      }
    }
  }
  schedule_test::ScopedEnv bad("TESSERA_ROW_VECTOR", "3");
  EXPECT_THROW(schedule::compile_executable(m, "c", test_options()), Error);
}

// The common row's output divides by multiplying with a per-row fp32
// reciprocal y = RN(1/d) and correcting once with fmas (the template's
// quotient_by_reciprocal): for d in [2^-26, 2^26] and 2^-100 <= |v| < 2^26
// that is the correctly rounded quotient. Checked here against the fp64
// quotient rounded to fp32 (itself correctly rounded) on 2^24 random pairs,
// divisors near powers of two and with all-ones significands among them.
TEST(ScheduleNormalization, ReciprocalQuotientIsTheCorrectlyRoundedQuotient) {
  std::mt19937_64 rng(7);
  auto from_bits = [](std::uint32_t u) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
  };
  std::int64_t wrong = 0;
  for (std::int64_t i = 0; i < (std::int64_t{1} << 24); ++i) {
    const std::uint64_t r = rng();
    std::uint32_t dm = r & 0x7FFFFF;
    if ((r >> 23) % 4 == 0) dm = 0x7FFFFF - ((r >> 25) & 0xFF);  // near all ones
    if ((r >> 23) % 4 == 1) dm = (r >> 25) & 0xFF;               // near a power of two
    const std::uint64_t r2 = rng();
    const float d = from_bits((static_cast<std::uint32_t>(101 + r2 % 52) << 23) | dm);          // [2^-26, 2^26)
    const std::uint32_t exponent = 27 + static_cast<std::uint32_t>((r2 >> 8) % 126);            // 2^-100 .. 2^26
    const float v = from_bits((static_cast<std::uint32_t>(r >> 63) << 31) | (exponent << 23) | ((r >> 27) & 0x7FFFFF));
    volatile float y = 1.0f / d;  // volatile: one rounding, as the kernel's per-row division
    const float q0 = v * y;
    const float e = std::fma(-q0, d, v);
    const float q = std::fma(e, y, q0);
    if (q != static_cast<float>(static_cast<double>(v) / static_cast<double>(d))) ++wrong;
  }
  EXPECT_EQ(wrong, 0);
}

// `text` with R rows of N elements: [R, N], [R] and [N] made concrete.
std::string with_dims(std::string text, std::int64_t rows, std::int64_t n) {
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"[R, N]", "[" + std::to_string(rows) + ", " + std::to_string(n) + "]"},
                                 {"[R]", "[" + std::to_string(rows) + "]"},
                                 {"[N]", "[" + std::to_string(n) + "]"}}) {
    for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) text.replace(at, from.size(), to);
  }
  return text;
}

// Rows held in registers (the `row_held` knob, CUDA's default for rows of
// a known length, forced here on the CPU; docs/design/0025): 16 lanes per
// block of the row, each holding one strand of its block. Every row op
// gives the reference's bits on rows with special values of one partial
// block (200), whole blocks (256, 4096), a partial last block (1000) and the
// most that is held (16384), in fp32 and bf16; a longer row (16400) keeps
// the cooperative form and the same bits.
TEST(ScheduleNormalization, RowsHeldInRegistersGiveTheReferenceBits) {
  const NumericsPolicy bf16 = parse_policy("bf16 @accum(fp32)");
  schedule_test::ScopedEnv lanes("TESSERA_ROW_LANES", "128");
  schedule_test::ScopedEnv held("TESSERA_ROW_HELD", "1");
  // (row length, every fp32 op, the bf16 ops)
  const std::tuple<std::int64_t, bool, bool> cases[] = {
      {200, true, true}, {256, false, true}, {1000, true, true}, {4096, false, true}, {16384, true, false}, {16400, true, false}};
  for (const auto& [n, fp32_ops, bf16_ops_too] : cases) {
    SCOPED_TRACE("rows of " + std::to_string(n));
    const std::int64_t rows = n > 4096 ? 3 : 9;
    const std::string text = with_dims(std::string(kEveryRowOp) + kBf16RowOps, rows, n);
    if (fp32_ops) {
      auto exe = check_against_reference(text, "c", {special_rows(rows, n, kF32, 31), sample({n}, kF32, 32, false)});
      // fp32 results keep what a bf16 rounding hides: the quotients of
      // elements far below the row's largest, and the signs of zeros, which
      // the reciprocal's quotient gets wrong and the lane writes again.
      check_against_reference(text, "c", {spread_rows(rows, n, kF32, 41, /*zeros=*/true), sample({n}, kF32, 42, false)});
      // Held rows take no loop over the row (each slot is its own code); a
      // 16400-element row is not held.
      const bool is_held = exe->tile_ir().find("tile.for") == std::string::npos;
      EXPECT_EQ(is_held, n <= 16384);
      // rmsnorm and layernorm rows of 16 blocks or more pair two strands
      // per lane: groups of n / 32 lanes beside the others' n / 16.
      const bool paired = exe->tile_ir().find("group_shape = [" + std::to_string(n / 32) + "]") != std::string::npos;
      EXPECT_EQ(paired, is_held && n >= 4096) << "rows of " << n;
    }
    if (bf16_ops_too) {
      auto exe = check_against_reference(text, "h", {special_rows(rows, n, bf16, 33), sample({n}, bf16, 34, false), sample({n}, bf16, 35)});
      const bool paired = exe->tile_ir().find("group_shape = [" + std::to_string(n / 32) + "]") != std::string::npos;
      EXPECT_EQ(paired, n >= 4096) << "rows of " << n;
      // Rows of finite values spread over 2^-130 .. 2^10: elements far below
      // the row's largest divide exactly, not by the reciprocal.
      check_against_reference(text, "h", {spread_rows(rows, n, bf16, 36), sample({n}, bf16, 37, false), sample({n}, bf16, 38)});
      // The softmax fused with its gradient through y's cast (held rows of
      // whole blocks keep e and y in registers).
      const std::string gradient = with_dims(kBf16SoftmaxGradient, rows, n);
      auto fused = check_against_reference(gradient, "sg", {special_rows(rows, n, bf16, 44), sample({rows, n}, bf16, 45)});
      EXPECT_EQ(fused->kernels().size(), 1u) << fused->schedule_ir();
    }
  }
  // TESSERA_ROW_HELD=1 alone makes the CPU's rows cooperative and held (it
  // is not ignored for want of TESSERA_ROW_LANES).
  {
    schedule_test::ScopedEnv no_lanes("TESSERA_ROW_LANES", "");
    const std::string text = with_dims(std::string(kEveryRowOp), 3, 1000);
    auto exe = check_against_reference(text, "c", {special_rows(3, 1000, kF32, 39), sample({1000}, kF32, 40, false)});
    EXPECT_EQ(exe->tile_ir().find("tile.for"), std::string::npos) << "not held";
  }
}

// Held rows in runs of V adjacent strands (TESSERA_ROW_HELD_RUN,
// docs/design/0053): 16 / V lanes per block, each slot's V elements one
// vector load, the lane's strands combined by the canonical tree's lower
// levels before the shuffles take the upper ones. Every row op (fp32 and
// bf16, and the fused softmax gradient) keeps the reference's bits on rows
// of whole blocks (256, 4096: groups of n / 16 / V lanes) and on a row with
// a partial block (1000), which keeps one strand per lane.
TEST(ScheduleNormalization, RowsHeldInRunsOfAdjacentStrandsGiveTheReferenceBits) {
  const NumericsPolicy bf16 = parse_policy("bf16 @accum(fp32)");
  schedule_test::ScopedEnv lanes("TESSERA_ROW_LANES", "128");
  schedule_test::ScopedEnv held("TESSERA_ROW_HELD", "1");
  // (V, row length): runs of 2 (CUDA's forward default) on a partial
  // block's row and on 16 blocks, runs of 4 (CUDA's layernorm and gradient
  // default on rows this long, docs/design/0054) on 16 blocks.
  const std::pair<std::int64_t, std::int64_t> cases[] = {{2, 1000}, {2, 4096}, {4, 4096}};
  for (const auto& [V, n] : cases) {
    schedule_test::ScopedEnv held_run("TESSERA_ROW_HELD_RUN", std::to_string(V));
    SCOPED_TRACE("runs of " + std::to_string(V) + ", rows of " + std::to_string(n));
    const std::int64_t rows = 9;
    const bool whole = n % 256 == 0;
    const std::string group = "group_shape = [" + std::to_string(n / 16 / V) + "]";
    const std::string every = with_dims(kEveryRowOp, rows, n);
    auto exe = check_against_reference(every, "c", {special_rows(rows, n, kF32, 51), sample({n}, kF32, 52, false)});
    check_against_reference(every, "c", {spread_rows(rows, n, kF32, 53, /*zeros=*/true), sample({n}, kF32, 54, false)});
    EXPECT_EQ(exe->tile_ir().find("tile.for"), std::string::npos) << "not held";
    EXPECT_EQ(exe->tile_ir().find(group) != std::string::npos, whole);
    EXPECT_EQ(exe->tile_ir().find("tile.load_vector") != std::string::npos, whole);
    const std::string text = with_dims(std::string(kBf16RowOps), rows, n);
    auto h = check_against_reference(text, "h", {special_rows(rows, n, bf16, 55), sample({n}, bf16, 56, false), sample({n}, bf16, 57)});
    EXPECT_EQ(h->tile_ir().find(group) != std::string::npos, whole);
    EXPECT_EQ(h->tile_ir().find("tile.store_vector") != std::string::npos, whole);
    check_against_reference(text, "h", {spread_rows(rows, n, bf16, 58), sample({n}, bf16, 59, false), sample({n}, bf16, 60)});
    const std::string gradient = with_dims(kBf16SoftmaxGradient, rows, n);
    auto fused = check_against_reference(gradient, "sg", {special_rows(rows, n, bf16, 61), sample({rows, n}, bf16, 62)});
    EXPECT_EQ(fused->kernels().size(), 1u) << fused->schedule_ir();
  }
}

// TESSERA_ROW_HELD_EVERY_LANE (docs/design/0055): every lane of a held
// row adds the block sums in order and derives the row's scalars itself,
// so each pass meets at one barrier: the reference's bits for every row op
// (special rows included), the bf16 ones and the fused softmax gradient,
// at one strand a lane (paired strands on the 1000-element rows) and in
// runs, with fewer barriers than lane 0's form.
TEST(ScheduleNormalization, RowsHeldWithScalarsInEveryLaneGiveTheReferenceBits) {
  const NumericsPolicy bf16 = parse_policy("bf16 @accum(fp32)");
  schedule_test::ScopedEnv lanes("TESSERA_ROW_LANES", "128");
  schedule_test::ScopedEnv held("TESSERA_ROW_HELD", "1");
  auto barriers = [](const std::string& ir) {
    std::size_t n = 0;
    for (std::size_t at = ir.find("tile.barrier"); at != std::string::npos; at = ir.find("tile.barrier", at + 1)) ++n;
    return n;
  };
  const std::pair<std::int64_t, std::int64_t> cases[] = {{1, 1000}, {2, 4096}, {4, 4096}};
  for (const auto& [V, n] : cases) {
    schedule_test::ScopedEnv held_run("TESSERA_ROW_HELD_RUN", std::to_string(V));
    SCOPED_TRACE("runs of " + std::to_string(V) + ", rows of " + std::to_string(n));
    const std::int64_t rows = 9;
    const std::string every = with_dims(kEveryRowOp, rows, n);
    const std::string text = with_dims(std::string(kBf16RowOps), rows, n);
    const std::string gradient = with_dims(kBf16SoftmaxGradient, rows, n);
    std::size_t lane_zero_barriers = 0;
    {
      schedule_test::ScopedEnv off("TESSERA_ROW_HELD_EVERY_LANE", "0");
      ir::Module m = ir::parse_module(every);
      lane_zero_barriers = barriers(schedule::compile_executable(m, "c", schedule_test::test_options())->tile_ir());
    }
    schedule_test::ScopedEnv on("TESSERA_ROW_HELD_EVERY_LANE", "1");
    auto exe = check_against_reference(every, "c", {special_rows(rows, n, kF32, 71), sample({n}, kF32, 72, false)});
    check_against_reference(every, "c", {spread_rows(rows, n, kF32, 73, /*zeros=*/true), sample({n}, kF32, 74, false)});
    EXPECT_EQ(exe->tile_ir().find("tile.for"), std::string::npos) << "not held";
    EXPECT_LT(barriers(exe->tile_ir()), lane_zero_barriers);
    check_against_reference(text, "h", {special_rows(rows, n, bf16, 75), sample({n}, bf16, 76, false), sample({n}, bf16, 77)});
    check_against_reference(text, "h", {spread_rows(rows, n, bf16, 78), sample({n}, bf16, 79, false), sample({n}, bf16, 80)});
    check_against_reference(gradient, "sg", {special_rows(rows, n, bf16, 81), sample({rows, n}, bf16, 82)});
  }
}

// A cooperative row's lane 0 asks for the row TESSERA_ROW_PREFETCH rows
// further on (docs/design/0037; a GPU's bulk L2 prefetch, a CPU's cache
// hint): a hint, so every op keeps the reference's bits, held or not, with
// rows ahead inside the tensor, past its end, and one row ahead.
TEST(ScheduleNormalization, RowsAskingForRowsAheadKeepTheReferenceBits) {
  std::string text = kEveryRowOp;
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"[R, N]", "[9, 1000]"}, {"[R]", "[9]"}, {"[N]", "[1000]"}}) {
    for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) text.replace(at, from.size(), to);
  }
  // Held rows, and cooperative rows read in each pass (in runs of 4).
  for (const auto& [held_rows, ahead] : {std::pair<const char*, const char*>{"1", "1"}, {"1", "300"}, {"0", "2"}}) {
    SCOPED_TRACE(std::string("held: ") + held_rows + ", rows ahead: " + ahead);
    schedule_test::ScopedEnv held("TESSERA_ROW_HELD", held_rows);
    schedule_test::ScopedEnv lanes("TESSERA_ROW_LANES", "64");
    schedule_test::ScopedEnv runs("TESSERA_ROW_VECTOR", std::string(held_rows) == "1" ? "" : "4");
    schedule_test::ScopedEnv prefetch("TESSERA_ROW_PREFETCH", ahead);
    auto exe = check_against_reference(text, "c", {special_rows(9, 1000, kF32, 46), sample({1000}, kF32, 47, false)});
    EXPECT_NE(exe->tile_ir().find("{bulk = true}"), std::string::npos) << exe->tile_ir();
  }
}

// Exact widening casts of a normalization's operands (autodiff casts a
// bf16 gradient's inputs to fp32) run in the normalization's kernel as a
// prologue: one kernel reads the bf16 values, with the reference's bits,
// in each form (lane per row, cooperative, held). A cast that something
// else reads too, and a narrowing cast, keep their own kernel.
TEST(ScheduleNormalization, WideningCastsOfOperandsJoinTheKernel) {
  const std::string text = R"(
func @w(%x: tensor<[6, 700] bf16 @accum(fp32)>, %g: tensor<[6, 700] bf16 @accum(fp32)>) -> (tensor<[6, 700] fp32>, tensor<[6, 700] fp32>) {
  %xf = graph.cast %x {policy = policy<fp32>} : tensor<[6, 700] fp32>
  %gf = graph.cast %g {policy = policy<fp32>} : tensor<[6, 700] fp32>
  %0 = graph.norm_linear %xf, %gf {axis = -1, eps = 1e-5, center = true} : tensor<[6, 700] fp32>
  %y = graph.softmax_safe %x {axis = -1} : tensor<[6, 700] bf16 @accum(fp32)>
  %yf = graph.cast %y {policy = policy<fp32>} : tensor<[6, 700] fp32>
  %gf2 = graph.cast %g {policy = policy<fp32>} : tensor<[6, 700] fp32>
  %1 = graph.softmax_linear %yf, %gf2 {axis = -1} : tensor<[6, 700] fp32>
  return %0, %1
}
func @kept(%x: tensor<[6, 700] fp32>) -> (tensor<[6, 700] fp32>, tensor<[6, 700] fp64>) {
  %n = graph.cast %x {policy = policy<bf16 @accum(fp32)>} : tensor<[6, 700] bf16 @accum(fp32)>
  %0 = graph.rmsnorm_safe %n {axis = -1} : tensor<[6, 700] bf16 @accum(fp32)>
  %w = graph.cast %0 {policy = policy<fp32>} : tensor<[6, 700] fp32>
  %d = graph.cast %x {policy = policy<fp64>} : tensor<[6, 700] fp64>
  %1 = graph.softmax_safe %d {axis = -1} : tensor<[6, 700] fp64>
  return %w, %d
}
)";
  const NumericsPolicy bf16 = parse_policy("bf16 @accum(fp32)");
  const std::vector<Tensor> args{special_rows(6, 700, bf16, 41), sample({6, 700}, bf16, 42)};
  for (const char* form : {"lane", "cooperative", "held"}) {
    SCOPED_TRACE(form);
    schedule_test::ScopedEnv lanes("TESSERA_ROW_LANES", std::string(form) == "lane" ? "1" : "64");
    schedule_test::ScopedEnv held("TESSERA_ROW_HELD", std::string(form) == "held" ? "1" : "0");
    auto exe = check_against_reference(text, "w", args);
    // norm_linear's kernel, and the softmax's with its gradient (through
    // y's cast), each with their casts inside.
    EXPECT_EQ(exe->kernels().size(), 2u) << exe->schedule_ir();
    EXPECT_EQ(exe->schedule_ir().find("family = \"elementwise\""), std::string::npos) << exe->schedule_ir();
  }
  // The narrowing cast and the returned widening cast stay elementwise kernels.
  auto exe = check_against_reference(text, "kept", {sample({6, 700}, kF32, 43)});
  EXPECT_NE(exe->schedule_ir().find("family = \"elementwise\""), std::string::npos) << exe->schedule_ir();
}

// With an fp32 accumulator the exp sums take tile.exp_or_nan first; a row
// holding an element where it is unsure (x - max = -1.0149802 here) sums
// again with the exact exp. Every result keeps the reference's bits, with a
// lane per row, with cooperative rows and with held ones, and other rows are
// unaffected.
TEST(ScheduleNormalization, RowsWhereTheFastExpIsUnsureRedoTheirSum) {
  const float unsure = -0x1.03d5bep+0f;
  ASSERT_TRUE(std::isnan(tessera::elementary::exp_f32_or_nan(unsure)));  // else this test tests nothing
  const std::string text = R"(
func @u(%x: tensor<[R, N] fp32>, %t: tensor<[R, N] fp32>) -> (tensor<[R, N] fp32>, tensor<[R] fp32>, tensor<[R, N] fp32>) {
  %0 = graph.softmax_safe %x {axis = -1} : tensor<[R, N] fp32>
  %1 = graph.logsumexp %x {axis = -1} : tensor<[R] fp32>
  %2 = graph.softmax_safe %x {axis = -1} : tensor<[R, N] fp32>
  %3 = graph.softmax_linear %2, %t {axis = -1} : tensor<[R, N] fp32>
  return %0, %1, %3
}
)";
  std::mt19937 rng(21);
  std::uniform_real_distribution<double> u(-6.0, -0.01);
  const std::int64_t rows = 6;
  // Rows of 700 (a lane per row, and cooperative), and held rows of 4096
  // (whole blocks: the fused gradient keeps e in registers, and its redo
  // reads x again).
  for (const auto& [n, lanes, held] : {std::tuple<std::int64_t, const char*, const char*>{700, "1", "0"},
                                       {700, "32", "0"}, {4096, "128", "1"}}) {
    SCOPED_TRACE("rows of " + std::to_string(n) + ", row lanes " + lanes + ", held " + held);
    std::vector<double> v(static_cast<std::size_t>(rows * n));
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(r * n + i)] = u(rng);
      v[static_cast<std::size_t>(r * n + 5)] = 0.0;  // the max
      if (r % 2 == 0) v[static_cast<std::size_t>(r * n + 300 + r)] = unsure;
    }
    const Tensor x = Tensor::from_values(v, {rows, n}, kF32);
    const Tensor t = sample({rows, n}, kF32, 22, false);
    schedule_test::ScopedEnv env("TESSERA_ROW_LANES", lanes);
    schedule_test::ScopedEnv env_held("TESSERA_ROW_HELD", held);
    // Held rows need their length known; the others keep N symbolic.
    std::string sized = text;
    for (std::size_t at = sized.find("N]"); std::string(held) == "1" && at != std::string::npos; at = sized.find("N]", at)) {
      sized.replace(at, 1, std::to_string(n));
    }
    auto exe = check_against_reference(sized, "u", {x, t});
    EXPECT_NE(exe->tile_ir().find("tile.exp_or_nan"), std::string::npos);
  }
}

TEST(ScheduleNormalization, EmptyRows) {
  const std::string text = R"(
func @e(%x: tensor<[3, N] fp32>) -> (tensor<[3] fp32>, tensor<[3, N] fp32>) {
  %0 = graph.logsumexp %x {axis = -1} : tensor<[3] fp32>
  %1 = graph.softmax_safe %x {axis = -1} : tensor<[3, N] fp32>
  return %0, %1
}
)";
  check_against_reference(text, "e", {sample({3, 0}, kF32, 6)});
}

}  // namespace
}  // namespace tessera
