// The FFT template (schedule/templates/fft.cpp) against the reference
// kernel (graph/fft_ops.cpp): the same plan's arithmetic in the same order,
// so compiled lines equal reference lines bit for bit, for Stockham and
// Bluestein lengths, every kind, both part types, lines along any axis, with
// one lane per line and with a cooperative group of lanes per line.
#include <random>

#include "schedule_test_support.h"
#include "tessera/schedule/lower_to_tile.h"
#include "tessera/schedule/passes.h"
#include "tessera/schedule/schedule_dialect.h"

namespace tessera {
namespace {

using schedule_test::expect_bitwise_equal;
using schedule_test::ScopedEnv;
using schedule_test::test_options;

Tensor complex_sample(std::vector<std::int64_t> shape, DType dtype, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, 2.0);
  std::int64_t n = 1;
  for (auto s : shape) n *= s;
  std::vector<std::complex<double>> v(static_cast<std::size_t>(n));
  for (auto& z : v) z = {normal(rng), normal(rng)};
  return Tensor::from_complex_values(v, std::move(shape), default_policy(dtype));
}

Tensor real_sample(std::vector<std::int64_t> shape, const NumericsPolicy& p, unsigned seed) {
  return schedule_test::sample(std::move(shape), p, seed, /*specials=*/false);
}

std::string fft_op(const std::string& result, const std::string& x, int axis, std::int64_t n, const std::string& kind,
                   bool inverse, const std::string& norm, const std::string& type, bool weights = false) {
  return "  " + result + " = graph.fft " + x + " {axis = " + std::to_string(axis) + ", n = " + std::to_string(n) +
         ", kind = \"" + kind + "\", inverse = " + (inverse ? "true" : "false") + ", norm = \"" + norm +
         "\", hermitian_weights = " + (weights ? "true" : "false") + "} : " + type + "\n";
}

// One function holding every case, so its kernels compile in one go.
const std::string kCases =
    "func @f(%a: tensor<[B, 12] complex64>, %b: tensor<[B, 97] complex64>, %c: tensor<[16, 3, 5] complex128>,\n"
    "        %r: tensor<[B, 10] fp32>, %h: tensor<[B, 6] complex64>, %s: tensor<[B, 7] bf16 @accum(fp32)>,\n"
    "        %d: tensor<[3, 1000] fp64>, %e: tensor<[B, 1] complex64>, %g: tensor<[2, 4096] complex64>,\n"
    "        %p: tensor<[2, 37, 3] complex128>, %q: tensor<[5, 7, B] fp16 @accum(fp32)>, %w: tensor<[B, 1000] complex64>)\n"
    "    -> (tensor<[B, 12] complex64>, tensor<[B, 12] complex64>, tensor<[B, 97] complex64>,\n"
    "        tensor<[16, 3, 5] complex128>, tensor<[B, 6] complex64>, tensor<[B, 6] complex64>,\n"
    "        tensor<[B, 10] fp32>, tensor<[B, 11] fp32>, tensor<[B, 7] complex64>, tensor<[3, 501] complex128>,\n"
    "        tensor<[B, 1] complex64>, tensor<[2, 4096] complex64>, tensor<[2, 37, 3] complex128>,\n"
    "        tensor<[B, 9] complex64>, tensor<[5, 4, B] fp16 @accum(fp32)>, tensor<[5, 7, B] complex64>,\n"
    "        tensor<[3, 1000] fp64>, tensor<[B, 1000] complex64>) {\n" +
    fft_op("%0", "%a", 1, 12, "c2c", false, "backward", "tensor<[B, 12] complex64>") +
    fft_op("%1", "%a", -1, 12, "c2c", true, "ortho", "tensor<[B, 12] complex64>") +
    fft_op("%2", "%b", 1, 97, "c2c", false, "forward", "tensor<[B, 97] complex64>") +
    fft_op("%3", "%c", 0, 16, "c2c", true, "backward", "tensor<[16, 3, 5] complex128>") +
    fft_op("%4", "%r", 1, 10, "r2c", false, "backward", "tensor<[B, 6] complex64>") +
    fft_op("%5", "%r", 1, 10, "r2c", true, "ortho", "tensor<[B, 6] complex64>", /*weights=*/true) +
    fft_op("%6", "%h", 1, 10, "c2r", true, "backward", "tensor<[B, 10] fp32>") +
    fft_op("%7", "%h", 1, 11, "c2r", false, "forward", "tensor<[B, 11] fp32>") +
    fft_op("%8", "%s", 1, 7, "c2c", false, "backward", "tensor<[B, 7] complex64>") +
    fft_op("%9", "%d", 1, 1000, "r2c", false, "backward", "tensor<[3, 501] complex128>") +
    fft_op("%10", "%e", 1, 1, "c2c", true, "backward", "tensor<[B, 1] complex64>") +
    fft_op("%11", "%g", 1, 4096, "c2c", false, "backward", "tensor<[2, 4096] complex64>") +
    fft_op("%12", "%p", 1, 37, "c2c", true, "ortho", "tensor<[2, 37, 3] complex128>") +
    "  %13 = graph.fft_resize %a {axis = 1, length = 9} : tensor<[B, 9] complex64>\n"
    "  %14 = graph.fft_resize %q {axis = 1, length = 4} : tensor<[5, 4, B] fp16 @accum(fp32)>\n"
    "  %15 = graph.fft_resize %q {axis = 1, length = 9} : tensor<[5, 9, B] fp16 @accum(fp32)>\n" +
    fft_op("%16", "%15", 1, 9, "c2c", false, "backward", "tensor<[5, 9, B] complex64>") +
    "  %17 = graph.fft_resize %16 {axis = 1, length = 7} : tensor<[5, 7, B] complex64>\n" +
    fft_op("%18", "%9", 1, 1000, "c2r", true, "ortho", "tensor<[3, 1000] fp64>") +
    fft_op("%19", "%w", 1, 1000, "c2c", false, "backward", "tensor<[B, 1000] complex64>") +
    "  return %0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %17, %18, %19\n}\n";

std::vector<Tensor> case_inputs(std::int64_t batch) {
  const NumericsPolicy f32 = default_policy(DType::fp32);
  return {complex_sample({batch, 12}, DType::complex64, 1),
          complex_sample({batch, 97}, DType::complex64, 2),
          complex_sample({16, 3, 5}, DType::complex128, 3),
          real_sample({batch, 10}, f32, 4),
          complex_sample({batch, 6}, DType::complex64, 5),
          real_sample({batch, 7}, parse_policy("bf16 @accum(fp32)"), 6),
          real_sample({3, 1000}, default_policy(DType::fp64), 7),
          complex_sample({batch, 1}, DType::complex64, 8),
          complex_sample({2, 4096}, DType::complex64, 9),
          complex_sample({2, 37, 3}, DType::complex128, 10),
          real_sample({5, 7, batch}, parse_policy("fp16 @accum(fp32)"), 11),
          complex_sample({batch, 1000}, DType::complex64, 12)};
}

std::size_t occurrences(const std::string& text, const std::string& what) {
  std::size_t count = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++count;
  return count;
}

// The executable's results on `args` against the reference executor's, bit
// for bit.
void expect_reference_bits(const schedule::Executable& exe, const ir::Module& m, const std::vector<Tensor>& args,
                           const std::string& what) {
  const std::vector<Tensor> got = exe.run(args);
  const std::vector<Tensor> want = graph::execute(m, *m.lookup("f"), args);
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) expect_bitwise_equal(got[i], want[i], what + ", result " + std::to_string(i));
}

void check_cases(const std::string& what) {
  ir::Module m = ir::parse_module(kCases);
  auto exe = schedule::compile_executable(m, "f", test_options());
  int ffts = 0;
  for (const auto& k : exe->kernels()) ffts += k.family == "fft";
  EXPECT_EQ(ffts, 20) << what;
  for (std::int64_t batch : {1, 3}) {
    expect_reference_bits(*exe, m, case_inputs(batch), what + ", batch " + std::to_string(batch));
  }
}

TEST(ScheduleFft, LinesMatchReferenceBitwise) { check_cases("one lane per line"); }

TEST(ScheduleFft, CooperativeGroupsMatchReferenceBitwise) {
  // CUDA's form on the CPU: 64 lanes share each line through shared memory.
  ScopedEnv lanes("TESSERA_FFT_LANES", "64");
  check_cases("64 lanes per line");
}

TEST(ScheduleFft, LinesInGlobalScratchMatchReferenceBitwise) {
  // The form of CUDA lines too long for shared memory, forced on the CPU:
  // every line above 1 KiB works in its group's slice of a global buffer.
  ScopedEnv lanes("TESSERA_FFT_LANES", "64");
  ScopedEnv shared("TESSERA_FFT_SHARED_BYTES", "1024");
  ScopedEnv stages("TESSERA_FFT_STAGES", "0");
  check_cases("64 lanes per line in global scratch");
}

TEST(ScheduleFft, LongLinesInTwoStagesMatchReferenceBitwise) {
  // CUDA's form of c2c lines along the last axis too long for shared memory,
  // forced on the CPU with a 2 KiB limit: each becomes two graph.fft_passes
  // (passes/split_long_ffts.cpp) whose sub-lines fit: 4096 = 64 x 64,
  // 1000 = 25 x 40 (complex128, the second stage's twiddles of every
  // residue), 2048 = 32 x 64 under leading dims. The 997-point Bluestein
  // line, the real input and the line along axis 0 keep global scratch.
  // Both stages together give graph.fft's bits, and each stage its own
  // reference's.
  ScopedEnv lanes("TESSERA_FFT_LANES", "64");
  ScopedEnv shared("TESSERA_FFT_SHARED_BYTES", "2048");
  const std::string text =
      "func @f(%a: tensor<[B, 4096] complex64>, %b: tensor<[3, 1000] complex128>, %c: tensor<[2, 3, 2048] complex64>,\n"
      "        %d: tensor<[2, 997] complex64>, %e: tensor<[2, 512] fp32>, %g: tensor<[512, 2] complex64>)\n"
      "    -> (tensor<[B, 4096] complex64>, tensor<[3, 1000] complex128>, tensor<[2, 3, 2048] complex64>,\n"
      "        tensor<[2, 997] complex64>, tensor<[2, 512] complex64>, tensor<[512, 2] complex64>) {\n" +
      fft_op("%0", "%a", 1, 4096, "c2c", false, "backward", "tensor<[B, 4096] complex64>") +
      fft_op("%1", "%b", -1, 1000, "c2c", true, "ortho", "tensor<[3, 1000] complex128>") +
      fft_op("%2", "%c", 2, 2048, "c2c", true, "backward", "tensor<[2, 3, 2048] complex64>") +
      fft_op("%3", "%d", 1, 997, "c2c", false, "forward", "tensor<[2, 997] complex64>") +
      fft_op("%4", "%e", 1, 512, "c2c", false, "backward", "tensor<[2, 512] complex64>") +
      fft_op("%5", "%g", 0, 512, "c2c", false, "backward", "tensor<[512, 2] complex64>") +
      "  return %0, %1, %2, %3, %4, %5\n}\n";
  ir::Module m = ir::parse_module(text);
  const std::string sched = ir::print_module(schedule::schedule_module(m, "f", /*cuda=*/false));
  EXPECT_EQ(occurrences(sched, "graph.fft_passes"), 6u) << sched;
  EXPECT_NE(sched.find("first = 0, inverse = false, last = 3, n = 4096"), std::string::npos) << sched;  // 64 x 64
  auto exe = schedule::compile_executable(m, "f", test_options());
  for (std::int64_t batch : {1, 5}) {
    const std::vector<Tensor> args = {complex_sample({batch, 4096}, DType::complex64, 41),
                                      complex_sample({3, 1000}, DType::complex128, 42),
                                      complex_sample({2, 3, 2048}, DType::complex64, 43),
                                      complex_sample({2, 997}, DType::complex64, 44),
                                      real_sample({2, 512}, default_policy(DType::fp32), 45),
                                      complex_sample({512, 2}, DType::complex64, 46)};
    expect_reference_bits(*exe, m, args, "two stages, batch " + std::to_string(batch));
  }
}

TEST(ScheduleFft, PassGroupsOfEverySizeMatchReferenceBitwise) {
  // A lane runs groups of passes in registers (fft.cpp, fused_group): each
  // pass alone (1, one lane per line), groups of up to 4 and up to 64 points
  // (4096 = 4^6 then takes two groups of three passes) with 64 lanes, and
  // up to 16 with 256 lanes, where 4096's middle group (one item per lane)
  // works in place in one shared array.
  for (const auto& [lanes, points] : {std::pair{"", "1"}, std::pair{"64", "4"}, std::pair{"64", "64"}, std::pair{"256", "16"}}) {
    ScopedEnv group_lanes("TESSERA_FFT_LANES", lanes);
    ScopedEnv fused("TESSERA_FFT_POINTS", points);
    check_cases(std::string("up to ") + points + " points per lane, lanes '" + lanes + "'");
  }
}

TEST(ScheduleFft, SeveralLinesShareAGroupBitwise) {
  // Lines along an axis other than the last, in a known shape whose line
  // count is a multiple of 4 (complex64 parts) or 2 (complex128): a
  // cooperative group takes that many adjacent lines (fft.cpp,
  // adjacent_lines). [2, 1024, 4] also runs its middle pass group in place;
  // [4, 16, 3] (12 lines, 3 per outer index) has groups whose lines
  // straddle two outer indices. Short lines along the last axis share a
  // warp instead: [6, 64] (rfft: 32 points, 16 lanes each, 2 lines),
  // [8, 33] (irfft to 64: 32 points, the result's pairs stored together),
  // [8, 16] (8 lines of 4 lanes), and [3, 5, 24] (15 lines: one a group).
  ScopedEnv lanes("TESSERA_FFT_LANES", "64");
  const std::string text =
      "func @f(%a: tensor<[64, 8] complex64>, %b: tensor<[12, 2, 3] complex128>, %c: tensor<[3, 40, 4] fp32>,\n"
      "        %d: tensor<[2, 1024, 4] complex64>, %e: tensor<[5, 8] complex64>, %h: tensor<[4, 16, 3] complex64>,\n"
      "        %r: tensor<[6, 64] fp32>, %s: tensor<[8, 16] complex64>, %t: tensor<[3, 5, 24] complex64>,\n"
      "        %u: tensor<[8, 33] complex64>)\n"
      "    -> (tensor<[64, 8] complex64>, tensor<[12, 2, 3] complex128>, tensor<[3, 21, 4] complex64>,\n"
      "        tensor<[2, 1024, 4] complex64>, tensor<[8, 8] fp32>, tensor<[4, 16, 3] complex64>,\n"
      "        tensor<[6, 33] complex64>, tensor<[8, 16] complex64>, tensor<[3, 5, 24] complex64>,\n"
      "        tensor<[8, 64] fp32>) {\n" +
      fft_op("%0", "%a", 0, 64, "c2c", false, "backward", "tensor<[64, 8] complex64>") +
      fft_op("%1", "%b", 0, 12, "c2c", true, "ortho", "tensor<[12, 2, 3] complex128>") +
      fft_op("%2", "%c", 1, 40, "r2c", false, "backward", "tensor<[3, 21, 4] complex64>") +
      fft_op("%3", "%d", 1, 1024, "c2c", false, "forward", "tensor<[2, 1024, 4] complex64>") +
      fft_op("%4", "%e", 0, 8, "c2r", true, "backward", "tensor<[8, 8] fp32>") +
      fft_op("%5", "%h", 1, 16, "c2c", false, "backward", "tensor<[4, 16, 3] complex64>") +
      fft_op("%6", "%r", 1, 64, "r2c", false, "ortho", "tensor<[6, 33] complex64>") +
      fft_op("%7", "%s", 1, 16, "c2c", true, "backward", "tensor<[8, 16] complex64>") +
      fft_op("%8", "%t", 2, 24, "c2c", false, "forward", "tensor<[3, 5, 24] complex64>") +
      fft_op("%9", "%u", 1, 64, "c2r", true, "forward", "tensor<[8, 64] fp32>") +
      "  return %0, %1, %2, %3, %4, %5, %6, %7, %8, %9\n}\n";
  ir::Module m = ir::parse_module(text);
  auto exe = schedule::compile_executable(m, "f", test_options());
  const std::vector<Tensor> args = {complex_sample({64, 8}, DType::complex64, 21),
                                    complex_sample({12, 2, 3}, DType::complex128, 22),
                                    real_sample({3, 40, 4}, default_policy(DType::fp32), 23),
                                    complex_sample({2, 1024, 4}, DType::complex64, 24),
                                    complex_sample({5, 8}, DType::complex64, 25),
                                    complex_sample({4, 16, 3}, DType::complex64, 26),
                                    real_sample({6, 64}, default_policy(DType::fp32), 27),
                                    complex_sample({8, 16}, DType::complex64, 28),
                                    complex_sample({3, 5, 24}, DType::complex64, 29),
                                    complex_sample({8, 33}, DType::complex64, 30)};
  expect_reference_bits(*exe, m, args, "several lines a group");
}

TEST(ScheduleFft, PackedLinesStayWithinSharedMemoryOnCuda) {
  // A CUDA group takes 4 adjacent complex64 lines of axis 0 only while
  // their arrays fit Hopper's 227 KiB: 1024-point lines do, 8192-point
  // lines (about 135 KiB each) keep one line a group.
  for (const auto& [n, lines] : {std::pair{1024, 4}, std::pair{8192, 1}}) {
    const std::string type = "tensor<[" + std::to_string(n) + ", 8] complex64>";
    const std::string text = "func @f(%a: " + type + ") -> (" + type + ") {\n" +
                             fft_op("%0", "%a", 0, n, "c2c", false, "backward", type) + "  return %0\n}\n";
    ir::Module sched = schedule::schedule_module(ir::parse_module(text), "f", /*cuda=*/true);
    schedule::set_target_knobs(*sched.lookup("f"), /*cuda=*/true);
    ir::Module tile;
    const schedule::TileKernel k = schedule::lower_kernel(*schedule::kernels_of(*sched.lookup("f")).at(0), tile, "f_k0");
    EXPECT_EQ(k.rows_per_group, lines) << n;
    EXPECT_LE(k.func->attrs().get_int("shared_bytes"), 227 * 1024) << n;
  }
}

TEST(ScheduleFft, CudaPassGroupsFollowTheLaneCost) {
  // On CUDA (16 points a lane at most, 256 lanes) a line takes smaller pass
  // groups only where they cost its lanes less time (fft.cpp,
  // cheapest_points): 64 points run three groups of 4 on 16 lanes (groups
  // of 16 and 4 would idle 12 of them in the first), 1000 points keep
  // 5, 5, 5 and 8, 1024 points keep 16, 16 and 4. A barrier follows every
  // group but the last, and a middle group in place (one item a lane) has
  // one more: groups of 16 and 4 for 64 points would have 1, 1000 in groups
  // of at most 4 points 5, 1024 in groups of 4 points 7. Lanes: two 64-point
  // lines of 16 share a warp; 1000 points take 256 (200 items a group: 224,
  // whole warps, measured the same on an H200); 1024 take 64.
  for (const auto& [n, barriers, lanes] : {std::tuple{64, 3, 32}, std::tuple{1000, 3, 256}, std::tuple{1024, 3, 64}}) {
    const std::string type = "tensor<[512, " + std::to_string(n) + "] complex64>";
    const std::string text = "func @f(%a: " + type + ") -> (" + type + ") {\n" +
                             fft_op("%0", "%a", 1, n, "c2c", false, "backward", type) + "  return %0\n}\n";
    ir::Module sched = schedule::schedule_module(ir::parse_module(text), "f", /*cuda=*/true);
    schedule::set_target_knobs(*sched.lookup("f"), /*cuda=*/true);
    ir::Module tile;
    const schedule::TileKernel k = schedule::lower_kernel(*schedule::kernels_of(*sched.lookup("f")).at(0), tile, "f_k0");
    EXPECT_EQ(k.lanes_per_group, lanes) << n;
    const std::string ir = ir::print_module(tile);
    EXPECT_EQ(occurrences(ir, "tile.barrier"), static_cast<std::size_t>(barriers)) << n << "\n" << ir;
  }
}

TEST(ScheduleFft, ComplexPartsMatchReferenceBitwise) {
  // real, imag, conj and complex (with broadcasting), casts to and from
  // complex, and complex add, sub, mul, div (Smith's, both branches), neg and abs
  // with complex and real operands, infinities and NaN included.
  const std::string text =
      "func @f(%z: tensor<[B, 5] complex64>, %w: tensor<[B, 5] complex128>, %x: tensor<[B, 5] bf16 @accum(fp32)>,\n"
      "        %v: tensor<[5] fp64>)\n"
      "    -> (tensor<[B, 5] fp32>, tensor<[B, 5] fp64>, tensor<[B, 5] complex64>, tensor<[B, 5] complex128>,\n"
      "        tensor<[B, 5] bf16 @accum(fp32)>, tensor<[B, 5] bf16 @accum(fp32)>, tensor<[B, 5] bf16 @accum(fp32)>,\n"
      "        tensor<[B, 5] complex128>, tensor<[B, 5] complex64>, tensor<[B, 5] complex64>,\n"
      "        tensor<[B, 5] fp16 @accum(fp32)>, tensor<[B, 5] complex128>, tensor<[B, 5] complex64>,\n"
      "        tensor<[B, 5] complex128>, tensor<[B, 5] complex64>, tensor<[B, 5] complex128>, tensor<[B, 5] complex64>,\n"
      "        tensor<[B, 5] complex128>, tensor<[B, 5] complex64>, tensor<[B, 5] complex128>, tensor<[B, 5] complex64>,\n"
      "        tensor<[B, 5] fp32>, tensor<[B, 5] fp64>) {\n"
      "  %0 = graph.real %z : tensor<[B, 5] fp32>\n"
      "  %1 = graph.imag %w : tensor<[B, 5] fp64>\n"
      "  %2 = graph.conj %z : tensor<[B, 5] complex64>\n"
      "  %3 = graph.conj %w : tensor<[B, 5] complex128>\n"
      "  %4 = graph.real %x : tensor<[B, 5] bf16 @accum(fp32)>\n"
      "  %5 = graph.imag %x : tensor<[B, 5] bf16 @accum(fp32)>\n"
      "  %6 = graph.conj %x : tensor<[B, 5] bf16 @accum(fp32)>\n"
      "  %7 = graph.complex %x, %v : tensor<[B, 5] complex128>\n"
      "  %8 = graph.complex %0, %x : tensor<[B, 5] complex64>\n"
      "  %9 = graph.cast %w {policy = policy<complex64>} : tensor<[B, 5] complex64>\n"
      "  %10 = graph.cast %w {policy = policy<fp16 @accum(fp32)>} : tensor<[B, 5] fp16 @accum(fp32)>\n"
      "  %11 = graph.cast %x {policy = policy<complex128>} : tensor<[B, 5] complex128>\n"
      "  %12 = graph.add %z, %2 : tensor<[B, 5] complex64>\n"
      "  %13 = graph.sub %w, %v : tensor<[B, 5] complex128>\n"
      "  %14 = graph.mul %z, %2 : tensor<[B, 5] complex64>\n"
      "  %15 = graph.mul %w, %3 : tensor<[B, 5] complex128>\n"
      "  %16 = graph.div %z, %2 : tensor<[B, 5] complex64>\n"
      "  %17 = graph.div %w, %x : tensor<[B, 5] complex128>\n"
      "  %18 = graph.neg %z : tensor<[B, 5] complex64>\n"
      "  %19 = graph.div %v, %w : tensor<[B, 5] complex128>\n"
      "  %20 = graph.mul %9, %x : tensor<[B, 5] complex64>\n"
      "  %21 = graph.abs %z : tensor<[B, 5] fp32>\n"
      "  %22 = graph.abs %w : tensor<[B, 5] fp64>\n"
      "  return %0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, "
      "%22\n}\n";
  ir::Module m = ir::parse_module(text);
  auto exe = schedule::compile_executable(m, "f", test_options());
  int parts = 0;
  for (const auto& k : exe->kernels()) parts += k.family == "complex";
  EXPECT_EQ(parts, 23);
  // Specials: parts built from a real sample with NaN and infinities.
  const Tensor specials = schedule_test::sample({3, 10}, default_policy(DType::fp64), 12);
  const auto sv = specials.to_values();
  std::vector<std::complex<double>> zv(15);
  for (std::size_t k = 0; k < zv.size(); ++k) zv[k] = {sv[2 * k], sv[2 * k + 1]};
  const std::vector<Tensor> args = {Tensor::from_complex_values(zv, {3, 5}, default_policy(DType::complex64)),
                                    Tensor::from_complex_values(zv, {3, 5}, default_policy(DType::complex128)),
                                    schedule_test::sample({3, 5}, parse_policy("bf16 @accum(fp32)"), 13),
                                    schedule_test::sample({5}, default_policy(DType::fp64), 14)};
  const std::vector<Tensor> got = exe->run(args);
  const std::vector<Tensor> want = graph::execute(m, *m.lookup("f"), args);
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) expect_bitwise_equal(got[i], want[i], "result " + std::to_string(i));
}

// Compiling one c2c transform of a [1, n] `dtype` tensor raises a
// CompileError whose message contains `expected`.
void expect_fft_compile_error(std::int64_t n, const std::string& dtype, const std::string& expected) {
  const std::string type = "tensor<[1, " + std::to_string(n) + "] " + dtype + ">";
  ir::Module m = ir::parse_module("func @f(%x: " + type + ") -> (" + type + ") {\n" +
                                  fft_op("%0", "%x", 1, n, "c2c", false, "backward", type) + "  return %0\n}\n");
  try {
    schedule::compile_executable(m, "f", test_options());
    FAIL() << "expected a CompileError";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Compile);
    EXPECT_NE(e.message().find(expected), std::string::npos) << e.message();
  }
}

TEST(ScheduleFft, LinesTooLongForGlobalScratchAreACompileError) {
  // 2^27 complex64 points: 2 GiB of scratch per line, past the 1 GiB a line may take.
  ScopedEnv shared("TESSERA_FFT_SHARED_BYTES", "1024");
  expect_fft_compile_error(134217728, "complex64",
                           "an FFT of length 134217728 holds 134217728 points per line in global scratch");
}

TEST(ScheduleFft, LinesTooLongForSharedMemoryAreACompileError) {
  // 2^24 complex128 points per line on the CPU: 512 MiB of shared arrays.
  expect_fft_compile_error(16777216, "complex128",
                           "an FFT of length 16777216 holds 16777216 points per line in shared memory");
}

}  // namespace
}  // namespace tessera
