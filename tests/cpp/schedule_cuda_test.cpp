// The elementwise template's Tile IR through the CUDA backend: the kernel
// (with tile.tanh and tile.erf, which the template added to Tile IR) emits
// and compiles under NVRTC for sm_90a here; on a GPU its results agree with
// the CPU executable's: within one fp32 ulp, or within 1e-12 absolute where
// gelu's 1 + erf(x / sqrt 2) cancels (x < -5) and the last fp64 bit of CUDA's
// erf against the host's (neither is correctly rounded) becomes most of a
// tiny result. The count of bit-identical results is printed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>

#include "tessera/backends/cuda/cuda_backend.h"
#include "tessera/ir/text.h"
#include "tessera/runtime/cuda.h"
#include "tessera/schedule/executable.h"
#include "tessera/schedule/lower_to_tile.h"
#include "tessera/schedule/passes.h"
#include "schedule_test_support.h"
#include "tessera/schedule/schedule_dialect.h"

namespace cu = tessera::cuda;

namespace tessera {
namespace {

const char* kGelu = R"(
func @g(%x: tensor<[N] fp32>) -> (tensor<[N] fp32>, tensor<[N] fp32>) {
  %0 = graph.gelu %x {approximate = "none"} : tensor<[N] fp32>
  %1 = graph.gelu %0 {approximate = "tanh"} : tensor<[N] fp32>
  return %0, %1
}
)";

// The one tile kernel of @g, lowered into `out`.
schedule::TileKernel lower_gelu(ir::Module& out) {
  ir::Module sched = schedule::schedule_module(ir::parse_module(kGelu), "g");
  auto kernels = schedule::kernels_of(*sched.lookup("g"));
  EXPECT_EQ(kernels.size(), 1u);
  return schedule::lower_kernel(*kernels.at(0), out, "g_k0");
}

bool nvrtc_present() {
  try {
    cu::nvrtc_version();
    return true;
  } catch (const Error&) {
    return false;
  }
}

TEST(ScheduleCuda, ElementwiseTemplateEmitsAndCompilesForSm90a) {
  ir::Module tile;
  const schedule::TileKernel k = lower_gelu(tile);
  const std::string src = cu::emit_kernel_source(*k.func);
  EXPECT_NE(src.find("tanh("), std::string::npos);
  EXPECT_NE(src.find("tessera::elementary::erf("), std::string::npos);  // the CPU kernels' erf, not CUDA's
  if (!nvrtc_present()) GTEST_SKIP() << "NVRTC is not installed";
  cu::CompileOptions o;
  o.arch = "sm_90a";
  o.extra = {"--fmad=false", "-std=c++17"};
  EXPECT_FALSE(cu::compile(src, "g_k0.cu", 0, o).cubin.empty());
}

// Every template is designed for both backends: each kernel of a program
// touching every family emits CUDA C++ that NVRTC compiles for sm_90a.
TEST(ScheduleCuda, EveryTemplateEmitsAndCompilesForSm90a) {
  const char* text = R"(
func @all(%x: tensor<[B, 64] fp32>, %w: tensor<[64, 32] bf16 @accum(fp32)>, %g: tensor<[64] fp32>,
          %i: tensor<[5] int64>) -> (tensor<[B, 32] bf16 @accum(fp32)>, tensor<[B] fp32>, tensor<[B, 64] fp32>,
                                     tensor<[B, 64] fp32>, tensor<[5, 64] fp32>, tensor<[B, 64] fp32>,
                                     tensor<[B, 128] fp32>, tensor<[7, 64] fp32>, tensor<[4, 8] fp32>) {
  %xb = graph.cast %x {policy = policy<bf16 @accum(fp32)>} : tensor<[B, 64] bf16 @accum(fp32)>
  %0 = graph.matmul %xb, %w : tensor<[B, 32] bf16 @accum(fp32)>
  %1 = graph.relu %0 : tensor<[B, 32] bf16 @accum(fp32)>
  %2 = graph.sum %x {axes = [1]} : tensor<[B] fp32>
  %3 = graph.softmax_safe %x {axis = -1} : tensor<[B, 64] fp32>
  %4 = graph.layernorm_safe %x, %g {axis = -1} : tensor<[B, 64] fp32>
  %5 = graph.gather %3, %i {axis = 0} : tensor<[5, 64] fp32>
  %6 = graph.dropout %4 {p = 0.5, seed = 3} : tensor<[B, 64] fp32>
  %7 = graph.concat %3, %4 {axis = 1} : tensor<[B, 128] fp32>
  %8 = graph.scatter_add %5, %i {axis = 0, shape = shape<[7, 64]>} : tensor<[7, 64] fp32>
  %9 = graph.randn {policy = policy<fp32>, seed = 4, shape = shape<[4, 8]>} : tensor<[4, 8] fp32>
  return %1, %2, %3, %4, %5, %6, %7, %8, %9
}
)";
  ir::Module sched = schedule::schedule_module(ir::parse_module(text), "all");
  ir::Module tile;
  std::set<std::string> families;
  std::vector<std::pair<std::string, std::string>> sources;
  for (ir::Operation* k : schedule::kernels_of(*sched.lookup("all"))) {
    if (schedule::kernel_variant(*k) != "tile") continue;
    families.insert(std::string(schedule::family_name(schedule::kernel_family(*k))));
    const std::string name = "all_" + schedule::kernel_name(*k);
    const schedule::TileKernel tk = schedule::lower_kernel(*k, tile, name);
    sources.emplace_back(name, cu::emit_kernel_source(*tk.func));
  }
  EXPECT_EQ(families, (std::set<std::string>{"elementwise", "gemm", "reduction", "normalization", "copy", "random"}));
  if (!nvrtc_present()) GTEST_SKIP() << "NVRTC is not installed";
  cu::CompileOptions o;
  o.arch = "sm_90a";
  o.extra = {"--fmad=false", "-std=c++17"};
  for (const auto& [name, src] : sources) {
    SCOPED_TRACE(name);
    EXPECT_FALSE(cu::compile(src, name + ".cu", 0, o).cubin.empty());
  }
}

// CUDA's elementwise knobs (set_target_knobs): runs of 16 bytes of the
// narrowest buffer per lane, read and written with tsr::load_vector /
// tsr::store_vector (bf16: 8 elements; a row-tiled fp32 bias as a run too),
// and bf16 @accum(fp32) arithmetic in fp32 without fp64 conversions. The
// kernels compile under NVRTC for sm_90a; the GPU tests below run them.
TEST(ScheduleCuda, ElementwiseRunsEmitWideAccesses) {
  const char* text = R"(
func @e(%x: tensor<[R, 4096] bf16 @accum(fp32)>, %r: tensor<[R, 4096] bf16 @accum(fp32)>, %b: tensor<[4096] fp32>)
    -> (tensor<[R, 4096] bf16 @accum(fp32)>, tensor<[R, 4096] fp32>) {
  %0 = graph.add %x, %r : tensor<[R, 4096] bf16 @accum(fp32)>
  %1 = graph.add %x, %b : tensor<[R, 4096] fp32>
  return %0, %1
}
)";
  ir::Module sched = schedule::schedule_module(ir::parse_module(text), "e", /*cuda=*/true);
  schedule::set_target_knobs(*sched.lookup("e"), /*cuda=*/true);
  ir::Module tile;
  std::vector<std::string> sources;
  for (ir::Operation* k : schedule::kernels_of(*sched.lookup("e"))) {
    EXPECT_EQ(k->attrs().get_int("lane_vector"), 8);
    sources.push_back(cu::emit_kernel_source(*schedule::lower_kernel(*k, tile, "e_" + schedule::kernel_name(*k)).func));
  }
  ASSERT_FALSE(sources.empty());
  std::string all;
  for (const auto& src : sources) all += src;
  EXPECT_NE(all.find("tsr::load_vector<8>"), std::string::npos);
  EXPECT_NE(all.find("tsr::store_vector<8>"), std::string::npos);
  EXPECT_NE(all.find("__fadd_rn("), std::string::npos);
  EXPECT_EQ(all.find("__dadd_rn("), std::string::npos);
  if (!nvrtc_present()) GTEST_SKIP() << "NVRTC is not installed";
  cu::CompileOptions o;
  o.arch = "sm_90a";
  o.extra = {"--fmad=false", "-std=c++17"};
  for (const auto& src : sources) EXPECT_FALSE(cu::compile(src, "e.cu", 0, o).cubin.empty());
}

// CUDA's staged bf16 GEMMs take 128 x 256 tiles when the product is large
// (at least 2^23 elements) and its epilogue light: adds, casts and a GELU
// read from its table, with up to two results (docs/design/0032). GELU
// computed in double, or a small product, keeps 128 x 128.
TEST(ScheduleCuda, LargeProductsWithTabulatedEpiloguesTakeWideTiles) {
  const char* text = R"(
func @m(%x: tensor<[M, 4096] bf16 @accum(fp32)>, %w: tensor<[4096, 4096] bf16 @accum(fp32)>, %b: tensor<[4096] bf16 @accum(fp32)>)
    -> (tensor<[M, 4096] bf16 @accum(fp32)>, tensor<[M, 4096] bf16 @accum(fp32)>) {
  %0 = graph.matmul %x, %w : tensor<[M, 4096] bf16 @accum(fp32)>
  %1 = graph.add %0, %b : tensor<[M, 4096] bf16 @accum(fp32)>
  %2 = graph.gelu %1 {approximate = "none"} : tensor<[M, 4096] bf16 @accum(fp32)>
  return %2, %1
}
)";
  auto tile_of = [&](std::int64_t m, const char* tabulate) {
    schedule_test::ScopedEnv env("TESSERA_TABULATE", tabulate);
    std::string sized = text;
    for (std::size_t at = sized.find("[M,"); at != std::string::npos; at = sized.find("[M,", at)) {
      sized.replace(at + 1, 1, std::to_string(m));
    }
    ir::Module sched = schedule::schedule_module(ir::parse_module(sized), "m", /*cuda=*/true);
    schedule::set_target_knobs(*sched.lookup("m"), /*cuda=*/true);
    for (ir::Operation* k : schedule::kernels_of(*sched.lookup("m"))) {
      if (schedule::kernel_family(*k) == schedule::Family::gemm) {
        EXPECT_EQ(k->num_results(), 2u) << "z and gelu(z) come from the product's kernel";
        return k->attrs().get_ints("tile");
      }
    }
    ADD_FAILURE() << "no gemm kernel";
    return std::vector<std::int64_t>{};
  };
  EXPECT_EQ(tile_of(2048, "1"), (std::vector<std::int64_t>{128, 256, 64}));  // 2^23 elements
  EXPECT_EQ(tile_of(1024, "1"), (std::vector<std::int64_t>{128, 128, 64}));  // too few blocks
  EXPECT_EQ(tile_of(2048, "0"), (std::vector<std::int64_t>{128, 128, 64}));  // GELU computed
  // The pipeline-depth knob names itself when it is out of range.
  schedule_test::ScopedEnv stages("TESSERA_CUDA_GEMM_STAGES", "1");
  try {
    tile_of(2048, "1");
    ADD_FAILURE() << "TESSERA_CUDA_GEMM_STAGES=1 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("TESSERA_CUDA_GEMM_STAGES is '1'; expected 2 to 8"), std::string::npos) << e.what();
  }
}

// CUDA's normalization knobs. Rows of a known length are held in registers
// (docs/design/0025): 16 strands per block of the row, two adjacent ones
// per lane for rows of whole blocks (docs/design/0053; 128 lanes for 4096
// elements), each slot's pair loaded once, registers capped for 768 threads per
// multiprocessor (rmsnorm's) or 1024 (softmax's). With TESSERA_ROW_HELD=0, rows are
// cooperative rows of 128 lanes read in runs of 16 bytes (bf16: 8 elements,
// fp32: 4), each pass's runs loaded with tsr::load_vector and written with
// tsr::store_vector (bf16: store_rounded_vector), registers capped for 4 groups. The kernels compile
// under NVRTC.
TEST(ScheduleCuda, NormalizationRowsInRunsEmitWideAccesses) {
  const char* text = R"(
func @n(%x: tensor<[R, 4096] bf16 @accum(fp32)>, %y: tensor<[R, 4096] fp32>)
    -> (tensor<[R, 4096] bf16 @accum(fp32)>, tensor<[R, 4096] fp32>) {
  %0 = graph.rmsnorm_safe %x {axis = -1, eps = 1e-6} : tensor<[R, 4096] bf16 @accum(fp32)>
  %1 = graph.softmax_safe %y {axis = -1} : tensor<[R, 4096] fp32>
  return %0, %1
}
)";
  std::vector<std::string> sources;
  for (const bool held : {false, true}) {
    SCOPED_TRACE(held ? "held rows" : "rows in runs");
    schedule_test::ScopedEnv env("TESSERA_ROW_HELD", held ? "1" : "0");
    ir::Module sched = schedule::schedule_module(ir::parse_module(text), "n", /*cuda=*/true);
    schedule::set_target_knobs(*sched.lookup("n"), /*cuda=*/true);
    ir::Module tile;
    for (ir::Operation* k : schedule::kernels_of(*sched.lookup("n"))) {
      const bool bf16 = schedule::kernel_root_op(*k).operand(0)->type().dtype() == DType::bf16;
      EXPECT_EQ(k->attrs().get_int("row_lanes"), 128);
      EXPECT_EQ(k->attrs().get_int("row_vector"), bf16 ? 8 : 4);
      const std::string src =
          cu::emit_kernel_source(*schedule::lower_kernel(*k, tile, "n_" + schedule::kernel_name(*k)).func);
      if (held) {
        // Runs of two adjacent strands a lane (docs/design/0053): each slot
        // one 2-element load and store.
        EXPECT_EQ(k->attrs().get_int("row_held_run"), 2);
        EXPECT_NE(src.find("tsr::load_vector<2>"), std::string::npos);
        // bf16 results round from fp32 and encode in one step per element.
        EXPECT_NE(src.find(bf16 ? "tsr::store_rounded_vector<2, " : "tsr::store_vector<2>"), std::string::npos);
        // An executable's kernels (contiguous buffers, which launches check
        // to be aligned) move the runs as aligned words, unchecked.
        cu::KernelCompileOptions contiguous;
        contiguous.contiguous_buffers = true;
        ir::Module again;
        const std::string exe_src = cu::emit_kernel_source(
            *schedule::lower_kernel(*k, again, "n_" + schedule::kernel_name(*k)).func, contiguous);
        EXPECT_NE(exe_src.find("tsr::load_vector_aligned<2>"), std::string::npos);
        EXPECT_EQ(exe_src.find("tsr::load_vector<"), std::string::npos);
        EXPECT_NE(exe_src.find(bf16 ? "tsr::store_rounded_vector_aligned<2, " : "tsr::store_vector_aligned<2>"),
                  std::string::npos);
        // The rmsnorm forward's lanes derive its row scalars each, one
        // barrier a pass; the softmax keeps lane 0's (docs/design/0055).
        EXPECT_EQ(k->attrs().has("row_held_every_lane") && k->attrs().get_bool("row_held_every_lane"), bf16);
        // 32 elements a lane: registers for 768 threads in rmsnorm's
        // kernel, 1024 in softmax's (docs/design/0035).
        EXPECT_NE(src.find(bf16 ? "__launch_bounds__(128, 6)" : "__launch_bounds__(128, 8)"), std::string::npos);
      } else {
        EXPECT_NE(src.find(bf16 ? "tsr::load_vector<8>" : "tsr::load_vector<4>"), std::string::npos);
        EXPECT_NE(src.find(bf16 ? "tsr::store_rounded_vector<8, " : "tsr::store_vector<4>"), std::string::npos);
        EXPECT_NE(src.find("__launch_bounds__(128, 4)"), std::string::npos);
      }
      sources.push_back(src);
    }
  }
  ASSERT_EQ(sources.size(), 4u);
  // Runs of four strands a lane (docs/design/0054) for layernorm forward and
  // the norms' gradients (graph.norm_linear) on rows of 4096 elements or
  // more, registers for 512 threads (64 lanes a row: 8 groups); shorter
  // gradient rows keep one strand a lane (two held operands of 32 elements
  // a lane spilled at two, docs/design/0053), and the softmax's gradient
  // keeps one at any length.
  {
    const char* rows = R"(
func @g(%x: tensor<[R, 4096] bf16 @accum(fp32)>, %t: tensor<[R, 4096] bf16 @accum(fp32)>, %s: tensor<[R, 2048] bf16 @accum(fp32)>)
    -> (tensor<[R, 4096] bf16 @accum(fp32)>, tensor<[R, 4096] bf16 @accum(fp32)>, tensor<[R, 4096] bf16 @accum(fp32)>, tensor<[R, 2048] bf16 @accum(fp32)>) {
  %0 = graph.norm_linear %x, %t {axis = -1, eps = 1e-6, center = false} : tensor<[R, 4096] bf16 @accum(fp32)>
  %1 = graph.layernorm_safe %x {axis = -1, eps = 1e-5} : tensor<[R, 4096] bf16 @accum(fp32)>
  %2 = graph.softmax_linear %x, %t {axis = -1} : tensor<[R, 4096] bf16 @accum(fp32)>
  %3 = graph.norm_linear %s, %s {axis = -1, eps = 1e-5, center = true} : tensor<[R, 2048] bf16 @accum(fp32)>
  return %0, %1, %2, %3
}
)";
    ir::Module sched = schedule::schedule_module(ir::parse_module(rows), "g", /*cuda=*/true);
    schedule::set_target_knobs(*sched.lookup("g"), /*cuda=*/true);
    std::vector<std::int64_t> runs;
    std::vector<bool> every_lane;
    for (ir::Operation* k : schedule::kernels_of(*sched.lookup("g"))) {
      EXPECT_TRUE(k->attrs().get_bool("row_held"));
      const std::int64_t run = k->attrs().has("row_held_run") ? k->attrs().get_int("row_held_run") : 1;
      runs.push_back(run);
      every_lane.push_back(k->attrs().has("row_held_every_lane") && k->attrs().get_bool("row_held_every_lane"));
      if (run == 4) {
        ir::Module tile;
        const std::string src =
            cu::emit_kernel_source(*schedule::lower_kernel(*k, tile, "g_" + schedule::kernel_name(*k)).func);
        EXPECT_NE(src.find("tsr::load_vector<4>"), std::string::npos);
        EXPECT_NE(src.find("__launch_bounds__(64, 8)"), std::string::npos);
        sources.push_back(src);
      }
    }
    EXPECT_EQ(runs, (std::vector<std::int64_t>{4, 4, 1, 1}));
    // The layernorm forward's lanes derive its row scalars each, one
    // barrier a pass (docs/design/0055); the gradients keep lane 0's.
    EXPECT_EQ(every_lane, (std::vector<bool>{false, true, false, false}));
  }
  if (!nvrtc_present()) GTEST_SKIP() << "NVRTC is not installed";
  cu::CompileOptions o;
  o.arch = "sm_90a";
  o.extra = {"--fmad=false", "-std=c++17"};
  for (const auto& src : sources) EXPECT_FALSE(cu::compile(src, "n.cu", 0, o).cubin.empty());
}

// Sums of rows shorter than a cooperative group (128 lanes) take a lane per
// output element on CUDA: a sum of 4 partials over a middle axis (the
// split-decode combine), and one of 100 elements over the last axis. Rows
// of 128 and more, or of unknown length, keep the cooperative group. Sums
// of fewer elements than a block's strands (16) never take strand lanes (the
// column form's knob, kept off on both targets); longer ones keep them.
TEST(ScheduleCuda, ShortSumRowsTakeALanePerOutput) {
  const char* text = R"(
func @s(%x: tensor<[8, 8, 4, 4, 128] fp32>, %y: tensor<[64, 100] fp32>, %z: tensor<[64, 128] fp32>,
        %w: tensor<[64, n] fp32>, %c: tensor<[4, 8] fp32>, %d: tensor<[300, 8] fp32>)
    -> (tensor<[8, 8, 4, 128] fp32>, tensor<[64] fp32>, tensor<[64] fp32>, tensor<[64] fp32>, tensor<[8] fp32>,
        tensor<[8] fp32>) {
  %0 = graph.sum %x {axes = [2]} : tensor<[8, 8, 4, 128] fp32>
  %1 = graph.mean %y {axes = [1]} : tensor<[64] fp32>
  %2 = graph.sum %z {axes = [1]} : tensor<[64] fp32>
  %3 = graph.sum %w {axes = [1]} : tensor<[64] fp32>
  %4 = graph.sum %c {axes = [0]} : tensor<[8] fp32>
  %5 = graph.sum %d {axes = [0]} : tensor<[8] fp32>
  return %0, %1, %2, %3, %4, %5
}
)";
  for (const bool cuda : {true, false}) {
    SCOPED_TRACE(cuda ? "cuda" : "cpu");
    ir::Module sched = schedule::schedule_module(ir::parse_module(text), "s", cuda);
    schedule::set_target_knobs(*sched.lookup("s"), cuda);
    std::vector<bool> cooperative, strands;
    for (ir::Operation* k : schedule::kernels_of(*sched.lookup("s"))) {
      cooperative.push_back(k->attrs().has("row_lanes"));
      strands.push_back(k->attrs().has("column_strands"));
    }
    // The last sum splits into block sums and their total (split-column-sums): two kernels.
    const bool c = cuda;  // the CPU has no cooperative rows
    EXPECT_EQ(cooperative, (std::vector<bool>{false, false, c, c, false, c, c}));
    // column_strands marks every reduction kernel the knob may apply to; on
    // the CPU not those whose sums are known to be shorter than the strand
    // form's pass of two blocks (here 100 and 128 elements; 0050).
    EXPECT_EQ(strands, (std::vector<bool>{false, c, c, true, false, true, true}));
  }
}

// TESSERA_ROW_HELD_THREADS sizes CUDA kernels' registers: it sets the held
// kernels' launch bound there, and on the CPU, where it would be ignored,
// it is an error that names it; so are the held-pairs, held-run and
// shuffle switches where rows take one lane each.
TEST(ScheduleCuda, HeldThreadsKnobIsAGpuKnob) {
  const char* text = R"(
func @n(%x: tensor<[R, 4096] bf16 @accum(fp32)>) -> (tensor<[R, 4096] bf16 @accum(fp32)>) {
  %0 = graph.rmsnorm_safe %x {axis = -1, eps = 1e-6} : tensor<[R, 4096] bf16 @accum(fp32)>
  return %0
}
)";
  schedule_test::ScopedEnv env("TESSERA_ROW_HELD_THREADS", "1024");
  ir::Module sched = schedule::schedule_module(ir::parse_module(text), "n", /*cuda=*/true);
  schedule::set_target_knobs(*sched.lookup("n"), /*cuda=*/true);
  ir::Module tile;
  for (ir::Operation* k : schedule::kernels_of(*sched.lookup("n"))) {
    const std::string src =
        cu::emit_kernel_source(*schedule::lower_kernel(*k, tile, "n_" + schedule::kernel_name(*k)).func);
    EXPECT_NE(src.find("__launch_bounds__(128, 8)"), std::string::npos) << src.substr(0, 600);
  }
  ir::Module cpu = schedule::schedule_module(ir::parse_module(text), "n", /*cuda=*/false);
  try {
    schedule::set_target_knobs(*cpu.lookup("n"), /*cuda=*/false);
    FAIL() << "TESSERA_ROW_HELD_THREADS was accepted for the CPU";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("TESSERA_ROW_HELD_THREADS"), std::string::npos) << e.what();
  }
  // The pairing and shuffle switches need rows shared by lanes: on the
  // CPU's lane-per-row form they are errors naming themselves too.
  schedule_test::ScopedEnv no_threads("TESSERA_ROW_HELD_THREADS", "");
  for (const char* knob : {"TESSERA_ROW_HELD_PAIRS", "TESSERA_LANE_SHUFFLES", "TESSERA_ROW_HELD_RUN"}) {
    schedule_test::ScopedEnv set(knob, std::string(knob) == "TESSERA_ROW_HELD_RUN" ? "2" : "0");
    try {
      schedule::set_target_knobs(*cpu.lookup("n"), /*cuda=*/false);
      FAIL() << knob << " was accepted for rows of one lane";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(knob), std::string::npos) << e.what();
    }
  }
}

TEST(ScheduleCudaGpu, ElementwiseTemplateAgreesWithTheCpuExecutable) {
  if (!cu::available()) GTEST_SKIP() << "no CUDA device: " << cu::unavailable_reason();
  ir::Module tile;
  const schedule::TileKernel k = lower_gelu(tile);
  const cu::CompiledKernel gpu = cu::compile_kernel(*k.func);
  const std::int64_t n = 1 << 16;
  std::vector<double> xs(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) xs[static_cast<std::size_t>(i)] = -8.0 + 16.0 * static_cast<double>(i) / n;
  const NumericsPolicy f32 = default_policy(DType::fp32);
  Tensor x = Tensor::from_values(xs, {n}, f32);
  Tensor y0 = Tensor::zeros({n}, f32).to("cuda:0"), y1 = Tensor::zeros({n}, f32).to("cuda:0");
  cu::launch(gpu, (n + k.lanes_per_group - 1) / k.lanes_per_group, {x.to("cuda:0"), y0, y1});

  ir::Module m = ir::parse_module(kGelu);
  schedule::ExecutableOptions options;
  options.cpu.cache_dir = (std::filesystem::temp_directory_path() / "tessera-schedule-tests").string();
  auto want = schedule::compile_executable(m, "g", options)->run(std::vector<Tensor>{x});
  const Tensor got[] = {y0.to("cpu"), y1.to("cpu")};
  for (int r = 0; r < 2; ++r) {
    const float* g = static_cast<const float*>(got[r].data());
    const float* w = static_cast<const float*>(want[static_cast<std::size_t>(r)].data());
    std::int64_t exact = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      std::int32_t gi, wi;
      std::memcpy(&gi, &g[i], 4);
      std::memcpy(&wi, &w[i], 4);
      const bool close = std::abs(gi - wi) <= 1 || std::fabs(static_cast<double>(g[i]) - w[i]) <= 1e-12;
      ASSERT_TRUE(close) << "result " << r << " at x = " << xs[static_cast<std::size_t>(i)] << ": " << g[i]
                         << " on the GPU, " << w[i] << " on the CPU";
      exact += gi == wi;
    }
    std::printf("gelu %s: %lld of %lld results bit-identical to the CPU backend\n", r ? "tanh" : "erf",
                static_cast<long long>(exact), static_cast<long long>(n));
  }
}

// A held row's runs move as aligned words in a kernel compiled for
// contiguous buffers (docs/design/0053): the kernel says so
// (aligned_buffers), runs on an aligned buffer, and its launch refuses a
// buffer starting 2 bytes further on, naming the kernel and the buffer,
// rather than faulting on a misaligned word.
TEST(ScheduleCudaGpu, AlignedHeldRowsRefuseMisalignedBuffers) {
  if (!cu::available()) GTEST_SKIP() << "no CUDA device: " << cu::unavailable_reason();
  const char* text = R"(
func @n(%x: tensor<[4, 1024] bf16 @accum(fp32)>) -> (tensor<[4, 1024] bf16 @accum(fp32)>) {
  %0 = graph.rmsnorm_safe %x {axis = -1, eps = 1e-6} : tensor<[4, 1024] bf16 @accum(fp32)>
  return %0
}
)";
  ir::Module sched = schedule::schedule_module(ir::parse_module(text), "n", /*cuda=*/true);
  schedule::set_target_knobs(*sched.lookup("n"), /*cuda=*/true);
  ir::Module tile;
  ir::Operation* k = schedule::kernels_of(*sched.lookup("n")).at(0);
  cu::KernelCompileOptions options;
  options.contiguous_buffers = true;
  const cu::CompiledKernel gpu = cu::compile_kernel(*schedule::lower_kernel(*k, tile, "n_k").func, options);
  EXPECT_TRUE(gpu.aligned_buffers);
  const NumericsPolicy bf16 = parse_policy("bf16 @accum(fp32)");
  Tensor flat = Tensor::from_values(std::vector<double>(4 * 1024 + 8, 1.5), {4 * 1024 + 8}, bf16).to("cuda:0");
  Tensor out = Tensor::zeros({4 * 1024 + 8}, bf16).to("cuda:0");
  auto rows_at = [](const Tensor& t, std::int64_t offset) { return t.as_strided({4096}, {1}, offset); };
  // The kernel's parameters: x, the result, x's two dims; one group a row.
  cu::launch(gpu, 4, {rows_at(flat, 0), rows_at(out, 0), 4LL, 1024LL});
  EXPECT_EQ(rows_at(out, 0).to("cpu").to_values(), std::vector<double>(4096, 1.0));
  try {
    cu::launch(gpu, 4, {rows_at(flat, 1), rows_at(out, 0), 4LL, 1024LL});
    FAIL() << "a buffer 2 bytes past a 16-byte boundary was launched";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("16-byte aligned"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("n_k"), std::string::npos) << e.what();
  }
}

// One function compiled for the CPU and for cuda:0.
std::pair<std::shared_ptr<schedule::Executable>, std::shared_ptr<schedule::Executable>> cpu_and_gpu_executables(
    const ir::Module& m, const std::string& function) {
  schedule::ExecutableOptions cpu_options;
  cpu_options.cpu.cache_dir = (std::filesystem::temp_directory_path() / "tessera-schedule-tests").string();
  schedule::ExecutableOptions gpu_options = cpu_options;
  gpu_options.device = "cuda:0";
  return {schedule::compile_executable(m, function, cpu_options), schedule::compile_executable(m, function, gpu_options)};
}

// A whole executable on the GPU (ExecutableOptions::device = "cuda:0"): a
// GEMM with its bias/relu epilogue, a softmax, a row sum, a strided view and
// a batched product, against the CPU executable. Elementwise and normalized
// results agree within a few fp32 ulps (exp and tanh are not correctly
// rounded on either side); the GEMMs within 1e-5 relative (fp32 products in
// the same k order, fused or not). Results stay on the device, arguments on
// another device are a DeviceError naming both, and ten runs give the same bits.
TEST(ScheduleCudaGpu, ExecutableOnTheGpuAgreesWithTheCpuExecutable) {
  if (!cu::available()) GTEST_SKIP() << "no CUDA device: " << cu::unavailable_reason();
  const char* text = R"(
func @f(%x: tensor<[B, 200] fp32>, %w: tensor<[200, 96] fp32>, %b: tensor<[96] fp32>) -> (tensor<[B, 96] fp32>, tensor<[B] fp32>, tensor<[B, B] fp32>) {
  %0 = graph.matmul %x, %w : tensor<[B, 96] fp32>
  %1 = graph.add %0, %b : tensor<[B, 96] fp32>
  %2 = graph.relu %1 : tensor<[B, 96] fp32>
  %3 = graph.softmax_safe %2 {axis = -1} : tensor<[B, 96] fp32>
  %4 = graph.sum %3 {axes = [1], keepdims = false} : tensor<[B] fp32>
  %5 = graph.transpose %2 {perm = [1, 0]} : tensor<[96, B] fp32>
  %6 = graph.matmul %2, %5 : tensor<[B, B] fp32>
  return %3, %4, %6
}
)";
  const ir::Module m = ir::parse_module(text);
  auto [cpu_exe, gpu_exe] = cpu_and_gpu_executables(m, "f");
  EXPECT_EQ(gpu_exe->device(), "cuda:0");
  EXPECT_NE(gpu_exe->target().find("__global__"), std::string::npos);
  const NumericsPolicy f32 = default_policy(DType::fp32);
  auto filled = [&](std::vector<std::int64_t> shape, double scale, unsigned salt) {
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    std::vector<double> v(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = scale * std::sin(0.37 * static_cast<double>(i * salt + 1));
    return Tensor::from_values(v, shape, f32);
  };
  const std::vector<Tensor> host = {filled({131, 200}, 1.0, 3), filled({200, 96}, 0.1, 7), filled({96}, 0.5, 11)};
  std::vector<Tensor> dev;
  for (const Tensor& t : host) dev.push_back(t.to("cuda:0"));
  const auto want = cpu_exe->run(host);
  const auto got = gpu_exe->run(dev);
  ASSERT_EQ(got.size(), 3u);
  auto as_floats = [](const Tensor& t) {
    const Tensor h = t.to("cpu");
    const float* p = static_cast<const float*>(h.data());
    return std::vector<float>(p, p + h.numel());
  };
  for (std::size_t r = 0; r < got.size(); ++r) {
    SCOPED_TRACE("result " + std::to_string(r));
    EXPECT_EQ(got[r].device(), "cuda:0");
    const auto g = as_floats(got[r]);
    const auto w = as_floats(want[r]);
    ASSERT_EQ(g.size(), w.size());
    for (std::size_t i = 0; i < g.size(); ++i) {
      const double tol = r == 2 ? 1e-5 * std::fabs(w[i]) + 1e-5 : 8 * std::ldexp(1.0, std::ilogb(w[i] == 0 ? 1e-30f : w[i]) - 23);
      ASSERT_NEAR(g[i], w[i], tol) << "element " << i;
    }
  }
  const auto first = as_floats(got[1]);
  for (int run = 0; run < 10; ++run) EXPECT_EQ(as_floats(gpu_exe->run(dev)[1]), first);
  EXPECT_THROW(gpu_exe->run(host), Error);
  try {
    gpu_exe->run(host);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is on cpu, but this executable was compiled for cuda:0"), std::string::npos)
        << e.what();
  }
}

// Without GEMMs (whose products the GPU may fuse differently), the GPU
// executable gives the CPU executable's bits: exp, log and tanh are the same
// code on both (tessera/numerics/elementary.h), sums follow the same
// canonical order, and neither side contracts a*b+c. The normalizations'
// gradient kernels (softmax_linear, norm_linear) included.
TEST(ScheduleCudaGpu, TranscendentalsSumsAndNormalizationsGiveTheCpuBits) {
  if (!cu::available()) GTEST_SKIP() << "no CUDA device: " << cu::unavailable_reason();
  const char* text = R"(
func @t(%x: tensor<[B, 300] fp32>) -> (tensor<[B, 300] fp32>, tensor<[B, 300] fp32>, tensor<[B, 300] fp32>,
                                       tensor<[B, 300] fp32>, tensor<[B, 300] fp32>, tensor<[B, 300] fp32>,
                                       tensor<[B, 300] fp32>, tensor<[B, 300] fp32>, tensor<[B] fp32>, tensor<[B] fp32>,
                                       tensor<[B, 300] fp32>, tensor<[B, 300] fp32>, tensor<[B, 300] fp32>) {
  %0 = graph.exp %x : tensor<[B, 300] fp32>
  %a = graph.abs %x : tensor<[B, 300] fp32>
  %1 = graph.log %a : tensor<[B, 300] fp32>
  %2 = graph.tanh %x : tensor<[B, 300] fp32>
  %3 = graph.sigmoid %x : tensor<[B, 300] fp32>
  %4 = graph.gelu %x {approximate = "tanh"} : tensor<[B, 300] fp32>
  %5 = graph.softmax_safe %x {axis = -1} : tensor<[B, 300] fp32>
  %6 = graph.layernorm_safe %x {axis = -1} : tensor<[B, 300] fp32>
  %7 = graph.rmsnorm_safe %x {axis = -1} : tensor<[B, 300] fp32>
  %8 = graph.sum %x {axes = [1], keepdims = false} : tensor<[B] fp32>
  %9 = graph.logsumexp %x {axis = -1} : tensor<[B] fp32>
  %10 = graph.softmax_linear %5, %x {axis = -1} : tensor<[B, 300] fp32>
  %11 = graph.norm_linear %x, %5 {axis = -1, eps = 1e-5, center = true} : tensor<[B, 300] fp32>
  %12 = graph.norm_linear %x, %5 {axis = -1, eps = 1e-6, center = false} : tensor<[B, 300] fp32>
  return %0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12
}
)";
  const ir::Module m = ir::parse_module(text);
  auto [cpu_exe, gpu_exe] = cpu_and_gpu_executables(m, "t");
  std::vector<double> v(37 * 300);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = 6.0 * std::sin(0.731 * static_cast<double>(i) + 0.2);
  const Tensor x = Tensor::from_values(v, {37, 300}, default_policy(DType::fp32));
  const auto want = cpu_exe->run(std::vector<Tensor>{x});
  const auto got = gpu_exe->run(std::vector<Tensor>{x.to("cuda:0")});
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t r = 0; r < got.size(); ++r) {
    const Tensor g = got[r].to("cpu");
    const auto gc = g.codes(), wc = want[r].codes();
    ASSERT_EQ(gc.size(), wc.size());
    std::size_t differ = 0;
    for (std::size_t i = 0; i < gc.size(); ++i) differ += gc[i] != wc[i];
    EXPECT_EQ(differ, 0u) << "result " << r << ": " << differ << " of " << gc.size() << " elements differ";
  }
}

// run_graph: the first call for given shapes builds a CUDA graph of the
// launches, later calls replace the nodes' buffer addresses and replay it.
// Results equal plain runs bit for bit (the same kernels), a replay writes
// fresh outputs (earlier results stay as they were), new shapes build a new
// graph, and steps that read device data on the host raise.
TEST(ScheduleCudaGpu, GraphReplaysMatchPlainRunsWithNewBuffers) {
  if (!cu::available()) GTEST_SKIP() << "no CUDA device: " << cu::unavailable_reason();
  const char* text = R"(
func @f(%x: tensor<[B, 200] fp32>, %w: tensor<[200, 96] fp32>, %b: tensor<[96] fp32>) -> (tensor<[B, 96] fp32>, tensor<[B] fp32>) {
  %0 = graph.matmul %x, %w : tensor<[B, 96] fp32>
  %1 = graph.add %0, %b : tensor<[B, 96] fp32>
  %2 = graph.relu %1 : tensor<[B, 96] fp32>
  %3 = graph.softmax_safe %2 {axis = -1} : tensor<[B, 96] fp32>
  %4 = graph.sum %3 {axes = [1], keepdims = false} : tensor<[B] fp32>
  return %3, %4
}
)";
  const ir::Module m = ir::parse_module(text);
  schedule::ExecutableOptions options;
  options.device = "cuda:0";
  auto exe = schedule::compile_executable(m, "f", options);
  const NumericsPolicy f32 = default_policy(DType::fp32);
  auto inputs = [&](std::int64_t rows, unsigned salt) {
    std::vector<Tensor> out;
    for (std::vector<std::int64_t> shape : {std::vector<std::int64_t>{rows, 200}, {200, 96}, {96}}) {
      std::int64_t n = 1;
      for (auto d : shape) n *= d;
      std::vector<double> v(static_cast<std::size_t>(n));
      for (std::size_t i = 0; i < v.size(); ++i) v[i] = 0.5 * std::sin(0.37 * static_cast<double>(i * salt + 1));
      out.push_back(Tensor::from_values(v, shape, f32).to("cuda:0"));
    }
    return out;
  };
  auto codes = [](const std::vector<Tensor>& ts) {
    std::vector<std::vector<std::uint64_t>> out;
    for (const Tensor& t : ts) out.push_back(t.to("cpu").codes());
    return out;
  };
  const auto a = inputs(64, 3), b = inputs(64, 5), c = inputs(40, 7);
  const auto want_a = codes(exe->run(a)), want_b = codes(exe->run(b)), want_c = codes(exe->run(c));
  const auto got_a = exe->run_graph(a);  // builds the graph
  EXPECT_EQ(exe->graphs(), 1u);
  EXPECT_EQ(codes(got_a), want_a);
  const auto got_b = exe->run_graph(b);  // replays it with b's buffers
  EXPECT_EQ(exe->graphs(), 1u);
  EXPECT_EQ(codes(got_b), want_b);
  EXPECT_EQ(codes(got_a), want_a) << "a replay overwrote an earlier result";
  for (int run = 0; run < 10; ++run) EXPECT_EQ(codes(exe->run_graph(a)), want_a);
  EXPECT_EQ(codes(exe->run_graph(c)), want_c);  // new shapes: a second graph
  EXPECT_EQ(exe->graphs(), 2u);

  const ir::Module g = ir::parse_module(R"(
func @g(%t: tensor<[8, 4] fp32>, %i: tensor<[5] int64>) -> (tensor<[5, 4] fp32>) {
  %0 = graph.gather %t, %i {axis = 0} : tensor<[5, 4] fp32>
  return %0
}
)");
  auto gather = schedule::compile_executable(g, "g", options);
  const std::vector<Tensor> gargs = {Tensor::zeros({8, 4}, f32).to("cuda:0"),
                                     Tensor::from_values(std::vector<double>{0, 1, 2, 3, 7}, {5}, default_policy(DType::int64)).to("cuda:0")};
  try {
    gather->run_graph(gargs);
    FAIL() << "expected an error: gather checks its indices on the host";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot happen inside a CUDA graph"), std::string::npos) << e.what();
  }
  EXPECT_EQ(gather->graphs(), 0u);
  EXPECT_EQ(gather->run(gargs)[0].shape(), (std::vector<std::int64_t>{5, 4}));
}

}  // namespace
}  // namespace tessera
