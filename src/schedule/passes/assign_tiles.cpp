// schedule-tile: the tiling knobs of each kernel, kept as the `tile`
// attribute for the templates (and, later, autotuning) to read. Knobs never
// change numerics: reduction orders depend on the shape alone.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "schedule/templates/templates.h"
#include "tessera/schedule/lower_to_tile.h"
#include "tessera/schedule/passes.h"
#include "tessera/support/error.h"
#include "tessera/schedule/schedule_dialect.h"

namespace tessera::schedule {

namespace {

// Lanes per group of elementwise kernels (any target), and on CUDA when
// each lane takes a run of elements (set_target_knobs).
constexpr std::int64_t kElementwiseLanes = 1024;
constexpr std::int64_t kCudaRunLanes = 256;

// The smallest power of two >= n, between lo and hi.
std::int64_t pow2_block(std::int64_t n, std::int64_t lo, std::int64_t hi) {
  std::int64_t b = lo;
  while (b < n && b < hi) b *= 2;
  return b;
}

// The M, N, K block of the GEMM template on the CPU: 128 x 128 x 64, shrunk
// to the next power of two of a static size that is smaller (a [2, 8] x
// [8, 4] product otherwise computed a whole 128 x 128 tile over a 64-deep
// chunk, and small training steps spent most of their time there). Powers
// of two keep the number of distinct kernels small. The bits do not change:
// tile.mma sums every element in increasing k whatever the block (gemm.cpp).
std::vector<std::int64_t> cpu_gemm_tile(const ir::Operation& kernel) {
  std::int64_t bm = 128, bn = 128, bk = 64;
  const ir::Shape domain = kernel.attrs().has("domain") ? kernel.attrs().get_shape("domain") : ir::Shape{};
  auto known = [](const ir::Dim& d) { return !d.is_symbolic() && d.size > 0; };
  if (domain.size() >= 2) {
    const ir::Dim& m = domain[domain.size() - 2];
    const ir::Dim& n = domain.back();
    if (known(m)) bm = pow2_block(m.size, 8, 128);
    if (known(n)) bn = pow2_block(n.size, 16, 128);
  }
  const ir::Operation& root = kernel_root_op(kernel);
  if (root.num_operands() > 0) {
    const ir::Shape& a = root.operand(0)->type().shape;
    const ir::Attribute* t = root.attrs().find("transpose_a");
    const bool ta = t && std::get<bool>(*t);
    if (a.size() >= 2 && known(a[a.size() - (ta ? 2 : 1)])) bk = pow2_block(a[a.size() - (ta ? 2 : 1)].size, 8, 64);
  }
  return {bm, bn, bk};
}

}  // namespace

void assign_tiles(ir::Operation& func) {
  for (ir::Operation* k : kernels_of(func)) {
    if (k->attrs().has("tile")) continue;  // set by hand or by an autotuner: keep it
    switch (kernel_family(*k)) {
      // Lanes per group: one element per lane, enough lanes per group that
      // the per-group cost vanishes on the CPU and a GPU block is full.
      case Family::elementwise: k->attrs().set("tile", std::vector<std::int64_t>{kElementwiseLanes}); break;
      // Lanes per group: one output element per lane; fewer lanes than
      // elementwise kernels since each lane loops over its reduced elements.
      case Family::reduction:
      case Family::normalization: k->attrs().set("tile", std::vector<std::int64_t>{64}); break;
      // M, N, K block of the GEMM template.
      case Family::gemm: k->attrs().set("tile", cpu_gemm_tile(*k)); break;
      default: break;
    }
  }
}

std::vector<std::int64_t> gemm_tile_from_env(const char* name, std::vector<std::int64_t> fallback) {
  const char* env = std::getenv(name);
  if (!env || !*env) return fallback;
  std::vector<std::int64_t> t;
  std::string text = env;
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    try {
      t.push_back(std::stoll(text.substr(at, comma - at)));
    } catch (const std::exception&) {
      t.clear();
      break;
    }
    at = comma + 1;
  }
  if (t.size() != 3 || t[0] <= 0 || t[1] <= 0 || t[2] <= 0 || 256 % t[2] != 0) {
    raise(ErrorCode::ArgumentInvalid, std::string(name) + " is '" + text +
                                          "'; expected BM,BN,BK (positive, BK dividing 256), such as 64,64,32");
  }
  return t;
}

// A switch from the environment variable `name`: "0" or "1"; nullopt when unset.
std::optional<bool> switch_from_env(const char* name) {
  const char* env = std::getenv(name);
  if (!env || !*env) return std::nullopt;
  if (std::string(env) != "0" && std::string(env) != "1") {
    raise(ErrorCode::ArgumentInvalid, std::string(name) + " is '" + env + "'; expected 0 or 1");
  }
  return std::string(env) == "1";
}

// A count from the environment variable `name`, in [least, most]; nullopt when unset.
std::optional<std::int64_t> count_from_env(const char* name, std::int64_t least, std::int64_t most) {
  const char* env = std::getenv(name);
  if (!env || !*env) return std::nullopt;
  std::int64_t v = 0;
  try {
    std::size_t used = 0;
    v = std::stoll(env, &used);
    if (used != std::string(env).size()) v = 0;
  } catch (const std::exception&) {
    v = 0;
  }
  if (v < least || v > most) {
    raise(ErrorCode::ArgumentInvalid,
          std::string(name) + " is '" + env + "'; expected " + std::to_string(least) + " to " + std::to_string(most));
  }
  return v;
}

// A lane count from the environment variable `name`, in [1, most]; nullopt when unset.
std::optional<std::int64_t> lanes_from_env(const char* name, std::int64_t most) { return count_from_env(name, 1, most); }

// A power of two from the environment variable `name`, 1 to `most`; nullopt when unset.
std::optional<std::int64_t> power_of_two_from_env(const char* name, std::int64_t most) {
  const std::optional<std::int64_t> v = lanes_from_env(name, most);
  if (v && (*v & (*v - 1)) != 0) {
    raise(ErrorCode::ArgumentInvalid,
          std::string(name) + " is '" + std::to_string(*v) + "'; expected a power of two from 1 to " + std::to_string(most));
  }
  return v;
}

// Elements per lane of a CUDA elementwise kernel (elementwise.cpp) without
// runs; with runs, one run per lane (enough bytes in flight, and small
// tensors still spread over every SM).
constexpr std::int64_t kCudaRowLanes = 128;  // lanes sharing a reduced row
constexpr std::int64_t kCpuSmallestAttentionBlock = 16;  // attention_blocks

// A sum or mean whose rows are known to be shorter than kCudaRowLanes: the
// cooperative form would give each output element a block of 128 lanes with
// fewer elements than lanes, so CUDA takes a lane per output element (the
// same bits: blocked_sum_cooperative is the lane form's order). The
// split-decode combine's sum of 4 fp32 partials over 32768 outputs took
// 119 us on an H200 with a block per output.
bool short_sum_rows(const ir::Operation& kernel) {
  const std::optional<std::int64_t> n = templates::static_sum_length(kernel_root_op(kernel));
  return n && *n < kCudaRowLanes;
}

// Column sums: blocks a pass of the lane-per-strand form (both targets,
// docs/design/0038).
constexpr std::int64_t kColumnStrandBlocks = 2;
// A column sum whose columns are known to hold fewer elements than a block
// has strands: a lane per strand would leave most strand lanes empty (1024
// lanes for a [4, 8] sum over axis 0, which took about 19 us a call on one
// CPU core), so such sums take the plain column form (the same bits). On
// the CPU the plain form stays faster up to the strand form's pass of
// kColumnStrandBlocks blocks: one core, sum over axis 0, strand lanes
// against the plain form: [64, 32] 12.4 / 4.4 us, [256, 32] 11.4 / 7.9 us,
// [512, 64] 39 / 51 us, [2048, 256] 342 / 566 us.
bool short_sum_columns(const ir::Operation& kernel, bool cuda) {
  const std::optional<std::int64_t> n = templates::static_sum_length(kernel_root_op(kernel));
  return n && *n < (cuda ? kReductionStrands : kReductionBlock * kColumnStrandBlocks);
}
// Rows ahead a cooperative normalization row asks L2 for (docs/design/0037), and
// the kernels that do: on an H200, rmsnorm's and layernorm's rows and their
// gradients' ran 0.71 -> 0.78x (forward) and 0.56-0.62 -> 0.69-0.70x
// (gradients) of a copy at 256 rows ahead, less at 512 and 1024; the
// softmax's rows ran a few percent slower at any distance.
constexpr std::int64_t kCudaRowPrefetch = 256;
// Adjacent strands a lane of a CUDA held row takes (docs/design/0053, 0054).
// On an H200, 16384 x 8192 bf16, ratio to a copy:
// - 2 for rmsnorm and softmax forward (0.78 -> 0.79-0.83x, 0.50 -> 0.52x);
// - 4 for layernorm forward and the rmsnorm and layernorm gradients
//   (graph.norm_linear) on rows of at least kRunOfFourRow elements, with
//   registers for 512 threads a multiprocessor (normalization.cpp): 0.60 ->
//   0.63x, 0.81 -> 0.86x, 0.69 -> 0.73x. Before that, the gradients' two held
//   operands spilled at 2 with registers for 1024 threads (rmsnorm backward
//   0.79 -> 0.48x); shorter rows keep what was measured for them (2 for the
//   forward, 1 for the gradients);
// - 1 for the softmax's gradient (softmax_linear), which ran slower at 4
//   (0.48 -> 0.42x) and no faster at 2 (0.47x).
constexpr std::int64_t kCudaRowHeldRun = 2;
constexpr std::int64_t kRunOfFourRow = 4096;
std::int64_t cuda_held_run(const ir::Operation& kernel) {
  const ir::Operation& root = kernel_root_op(kernel);
  const std::string_view name = root.name();
  for (const auto& op : kernel_body(kernel).ops()) {
    if (op->name() == "graph.softmax_linear") return 1;
  }
  // (A row of partial blocks takes no runs whatever this says: normalization.cpp.)
  const ir::Type& x = root.operand(0)->type();
  const bool long_rows = x.rank() > 0 && !x.shape.back().is_symbolic() && x.shape.back().size >= kRunOfFourRow;
  if (long_rows && (name == "graph.layernorm_safe" || name == "graph.norm_linear")) return 4;
  if (name == "graph.rmsnorm_safe" || name == "graph.layernorm_safe" || name == "graph.softmax_safe") {
    return kCudaRowHeldRun;
  }
  return 1;
}
// Whether CUDA's held rows of this kernel, whose default run is
// `default_run` (cuda_held_run), derive their scalars in every lane, one
// barrier a pass (docs/design/0055): the layernorm forward on rows in runs
// of four (0.63x -> 0.74x of a copy) and the rmsnorm forward
// (0.82x -> 0.87x). The gradients (layernorm 0.73x -> 0.52x, rmsnorm 0.86x
// -> 0.67x) and the softmax (0.54x -> 0.53x forward, 0.48x -> 0.43x
// backward) keep lane 0 and a second barrier.
bool cuda_held_every_lane(const ir::Operation& kernel, std::int64_t default_run) {
  const std::string_view name = kernel_root_op(kernel).name();
  return (name == "graph.layernorm_safe" && default_run == 4) || name == "graph.rmsnorm_safe";
}
// Column sums: the most columns a lane on the CPU (docs/design/0038).
constexpr std::int64_t kCpuColumnVector = 4;
// Columns per lane of a CUDA column sum: as many as fill a 4-byte word of
// the summed operand (2 for bf16 and fp16, 1 for fp32). Block sums
// (graph.block_sums, docs/design/0039) read 16 bytes a lane, at most 8
// columns: a lane's strand holds 16 rows of them in flight. With a prologue
// (the operand computed in the kernel, not a kernel input), whose 16 rows of
// inputs and outputs a lane holds at once, 4 bytes again (two bf16 columns:
// 128 registers, no spills; 8 columns spilled 2.9 KB a thread).
std::int64_t cuda_column_vector(const ir::Operation& kernel) {
  const ir::Operation& root = kernel_root_op(kernel);
  const auto bytes = static_cast<std::int64_t>(storage_bytes(root.operand(0)->type().policy.storage));
  if (bytes < 1) return 1;
  const bool prologue = root.operand(0)->defining_op() != nullptr;
  if (root.name() == "graph.block_sums" && !prologue) return std::min<std::int64_t>(8, std::max<std::int64_t>(1, 16 / bytes));
  return bytes < 4 ? 4 / bytes : 1;
}
bool prefetches_rows(const ir::Operation& root) {
  return root.name() == "graph.rmsnorm_safe" || root.name() == "graph.layernorm_safe" ||
         root.name() == "graph.norm_linear";
}
constexpr std::int64_t kCudaLaneElements = 4;
// Runs per lane of a CUDA elementwise kernel that reads a table
// (graph.lookup, design 0030): each element's table read waits on its own
// loads, and four runs give a lane independent work to cover that. Measured
// on an H200, bias + gelu + residual forward: 0.61x copy with one run per
// lane, 0.64x with 2, 0.69x with 4, 0.66x with 8; a plain add lost with
// more runs (0.88x -> 0.62x backward at 4), so only table kernels take it.
constexpr std::int64_t kCudaLookupRuns = 4;
constexpr std::int64_t kCudaRunBytes = 16;  // one 16-byte access per run of the narrowest buffer
constexpr std::int64_t kCudaMaxRun = 8;     // lane programs per run: code size and registers

// Elements per CUDA run of a buffer of `dtype`: 16 bytes, at most
// kCudaMaxRun (a power of two, as storage sizes are: the strands of a
// normalization's blocks split into whole groups of it).
std::int64_t cuda_run(DType dtype) {
  return std::min<std::int64_t>(kCudaMaxRun, kCudaRunBytes / std::max(storage_bytes(dtype), 1));
}

// Elements per run of a kernel's accesses: 16 bytes of its narrowest
// buffer (for a GEMM's epilogue, other than the matrix operands, which the
// mma reads).
std::int64_t cuda_narrowest_run(const ir::Operation& kernel) {
  const ir::Block& body = kernel_body(kernel);
  const ir::Operation& root = kernel_root_op(kernel);
  const bool gemm = kernel_family(kernel) == Family::gemm;
  std::int64_t run = 1;
  for (std::size_t k = 0; k < body.num_arguments(); ++k) {
    const ir::Value* v = body.argument(k);
    if (!gemm || (v != root.operand(0) && v != root.operand(1))) run = std::max(run, cuda_run(v->type().dtype()));
  }
  for (const ir::Value* v : body.terminator()->operands()) run = std::max(run, cuda_run(v->type().dtype()));
  return run;
}

void set_target_knobs(ir::Operation& func, bool cuda) {
  // $TESSERA_ROW_LANES: lanes per row of normalization and sum kernels (1: a
  // lane per row); $TESSERA_GEMM_LANES: lanes per group of GEMM kernels.
  const std::optional<std::int64_t> lanes_env = lanes_from_env("TESSERA_ROW_LANES", 256);
  const std::optional<std::int64_t> gemm_lanes_env = lanes_from_env("TESSERA_GEMM_LANES", 1024);
  // $TESSERA_FFT_LANES: the most lanes an FFT group shares a line with (any
  // target, so the CPU tests CUDA's cooperative form too).
  const std::optional<std::int64_t> fft_lanes_env = lanes_from_env("TESSERA_FFT_LANES", 1024);
  // The most shared memory an FFT line takes before it works in global
  // scratch (fft_shared_limit).
  const std::optional<std::int64_t> fft_shared = fft_shared_limit(cuda);
  // $TESSERA_FFT_POINTS: the most points a lane holds in registers while it
  // runs a group of Stockham passes (any target; CUDA's default 16, the
  // template's 4; 1 runs each pass on its own).
  const std::optional<std::int64_t> fft_points_env = lanes_from_env("TESSERA_FFT_POINTS", 64);
  // $TESSERA_SPMM_VECTOR: outputs per lane of a register-run spmm (any
  // target; CUDA's default 16 bytes of b).
  const std::optional<std::int64_t> spmm_vector_env = lanes_from_env("TESSERA_SPMM_VECTOR", 16);
  const std::int64_t row_lanes = lanes_env ? *lanes_env : (cuda ? kCudaRowLanes : 1);
  // $TESSERA_LANE_ELEMENTS: elements per lane of elementwise kernels (any
  // target, so the CPU tests that form too; CUDA's default kCudaLaneElements).
  const std::optional<std::int64_t> lane_elements_env = lanes_from_env("TESSERA_LANE_ELEMENTS", 64);
  // $TESSERA_LANE_VECTOR: elements per run of elementwise kernels (any
  // target; CUDA's default cuda_narrowest_run).
  const std::optional<std::int64_t> lane_vector_env = lanes_from_env("TESSERA_LANE_VECTOR", 16);
  // $TESSERA_GEMM_VECTOR: columns per run of GEMM epilogues (any target;
  // CUDA's default cuda_narrowest_run).
  const std::optional<std::int64_t> gemm_vector_env = lanes_from_env("TESSERA_GEMM_VECTOR", 16);
  // $TESSERA_ROW_VECTOR: elements per run of normalization rows shared by
  // several lanes (a power of two up to 16; CUDA's default cuda_row_vector).
  const std::optional<std::int64_t> row_vector_env = power_of_two_from_env("TESSERA_ROW_VECTOR", 16);
  // $TESSERA_COLUMN_VECTOR: the most adjacent columns each lane of a column
  // sum takes (1, 2, 4 or 8; reduction.cpp's column and block forms). CUDA's
  // default (cuda_column_vector) makes a column form's load one 4-byte word
  // (two bf16 columns), so a warp reads 128 contiguous bytes of a row, and a
  // block sum's 16 bytes; the CPU's is 4 (its lanes run in turn, and
  // four columns a lane ran a [4096, 4096] sum over axis 0 in 17 ms against
  // 31 with one; docs/design/0038).
  const std::optional<std::int64_t> column_vector_env = power_of_two_from_env("TESSERA_COLUMN_VECTOR", 8);
  // $TESSERA_COLUMN_STRANDS = B (1 or 2) gives column sums a lane per
  // strand, B blocks of the columns' rows at a time (reduction.cpp); 0 a
  // lane per column walking its blocks' strands in turn. The default is 2
  // on every target.
  const std::optional<std::int64_t> column_strands_env = count_from_env("TESSERA_COLUMN_STRANDS", 0, 2);
  if (column_strands_env == 0 && column_vector_env.value_or(1) > 1) {
    raise(ErrorCode::ArgumentInvalid, "TESSERA_COLUMN_VECTOR applies to column sums with a lane per strand, which "
                                      "TESSERA_COLUMN_STRANDS=0 turns off (a lane per column takes one column)");
  }
  // $TESSERA_ROW_HELD: 1 holds normalization rows of a known length in
  // registers (docs/design/0025; CUDA's default), 0 reads them in each pass;
  // any target, so the CPU tests both forms. Held rows are cooperative: on
  // a target whose rows are not (the CPU without $TESSERA_ROW_LANES), 1
  // makes them cooperative too, rather than being ignored.
  const std::optional<bool> row_held_env = switch_from_env("TESSERA_ROW_HELD");
  const bool row_held = row_held_env.value_or(cuda);
  // $TESSERA_ROW_HELD_PAIRS: 0 keeps one strand per lane of a held row where
  // two would be paired (docs/design/0028), for measuring both forms.
  const std::optional<bool> held_pairs_env = switch_from_env("TESSERA_ROW_HELD_PAIRS");
  // $TESSERA_ROW_HELD_RUN: the adjacent strands (1, 2 or 4) each lane of a
  // held row of whole blocks takes, loaded and stored as one vector
  // (docs/design/0053); for measuring, and for the CPU tests of the form.
  const std::optional<std::int64_t> held_run_env = power_of_two_from_env("TESSERA_ROW_HELD_RUN", 4);
  // $TESSERA_ROW_HELD_EVERY_LANE: 1 makes every lane of a held row add the
  // block sums and derive the row's scalars itself, one barrier a pass
  // where lane 0 and a second barrier serve; 0 keeps lane 0's form. CUDA's
  // default is cuda_held_every_lane (docs/design/0055).
  const std::optional<bool> held_every_lane_env = switch_from_env("TESSERA_ROW_HELD_EVERY_LANE");
  // $TESSERA_ROW_PREFETCH: how many rows ahead a cooperative normalization
  // row's group asks the GPU's L2 for the row another group reads later
  // (docs/design/0037; 0: no prefetch). CUDA's default is kCudaRowPrefetch.
  const std::optional<std::int64_t> row_prefetch_env = count_from_env("TESSERA_ROW_PREFETCH", 0, 1 << 20);
  // $TESSERA_ROW_HELD_THREADS: the threads of held rows a multiprocessor
  // should hold at once (registers are capped to fit them), for measuring.
  // A GPU's register budget: on another target it would be accepted and
  // ignored, so it is an error there.
  const std::optional<std::int64_t> held_threads_env = lanes_from_env("TESSERA_ROW_HELD_THREADS", 2048);
  if (held_threads_env && !cuda) {
    raise(ErrorCode::ArgumentInvalid,
          "TESSERA_ROW_HELD_THREADS sizes a GPU kernel's registers; this executable's target is the CPU, which has "
          "no register budget to size (unset it)");
  }
  // $TESSERA_LANE_SHUFFLES: 0 makes the cooperative rows of normalization
  // and reduction kernels exchange lane values through shared memory, as
  // on the CUDA Tile IR target (docs/design/0035), for measuring and for
  // testing that form on any target.
  const std::optional<bool> lane_shuffles_env = switch_from_env("TESSERA_LANE_SHUFFLES");
  // Both need lanes sharing a row; where rows take a lane each they would be
  // accepted and ignored.
  const bool shared_rows = row_lanes > 1 || row_held_env.value_or(false);
  if (held_pairs_env && !row_held) {
    raise(ErrorCode::ArgumentInvalid, "TESSERA_ROW_HELD_PAIRS applies to rows held in registers, which this target "
                                      "does not hold (set TESSERA_ROW_HELD=1 too, or unset it)");
  }
  if (held_every_lane_env && !row_held) {
    raise(ErrorCode::ArgumentInvalid, "TESSERA_ROW_HELD_EVERY_LANE applies to rows held in registers, which this "
                                      "target does not hold (set TESSERA_ROW_HELD=1 too, or unset it)");
  }
  if (held_run_env && !row_held) {
    raise(ErrorCode::ArgumentInvalid, "TESSERA_ROW_HELD_RUN applies to rows held in registers, which this target "
                                      "does not hold (set TESSERA_ROW_HELD=1 too, or unset it)");
  }
  if (row_prefetch_env && !shared_rows) {
    raise(ErrorCode::ArgumentInvalid, "TESSERA_ROW_PREFETCH applies to rows shared by several lanes; here each row "
                                      "takes one lane (set TESSERA_ROW_LANES or TESSERA_ROW_HELD=1 too, or unset it)");
  }
  if (lane_shuffles_env && !shared_rows) {
    raise(ErrorCode::ArgumentInvalid, "TESSERA_LANE_SHUFFLES applies to rows shared by several lanes; here each row "
                                      "takes one lane (set TESSERA_ROW_LANES or TESSERA_ROW_HELD=1 too, or unset it)");
  }
  const std::vector<std::int64_t> gemm =
      cuda ? gemm_tile_from_env("TESSERA_CUDA_GEMM_TILE", {32, 32, 32}) : std::vector<std::int64_t>{};
  // $TESSERA_ATTENTION_BLOCKED: 1 gives attention kernels (forward and
  // backward) the blocked tensor-core form on any target where it applies,
  // 0 keeps the lane form even where the CUDA Tile IR target would take the
  // blocked one. Unset, the CPU takes the blocked form (12-26x the lane
  // kernels' speed there, docs/design/0044), so does CUDA for fp32 (the
  // PTX path's exact fp32 products: the CPU's bits, 6x the lane kernels'
  // speed, docs/design/0052), and CUDA leaves bf16/fp16/fp8 to the CUDA
  // Tile IR default (choose_default_nvidia_targets).
  const std::optional<bool> attention_blocked = switch_from_env("TESSERA_ATTENTION_BLOCKED");
  const std::optional<std::vector<std::int64_t>> attention_tile = attention_tile_from_env();
  // $TESSERA_CUDA_GEMM_STAGED = 0 keeps CUDA's bf16/fp16 GEMMs in the
  // blocked form (operands loaded from global memory per chunk) instead of
  // the staged one (gemm.cpp).
  const bool staged = switch_from_env("TESSERA_CUDA_GEMM_STAGED").value_or(true) && cuda;
  // $TESSERA_CUDA_GEMM_STAGED_TILE = "BM,BN,BK": the staged form's tile
  // (default 128,128,64), for measuring others.
  const char* staged_tile_env = std::getenv("TESSERA_CUDA_GEMM_STAGED_TILE");
  // $TESSERA_CUDA_GEMM_STAGES: the staged form's pipeline depth (default 3,
  // gemm.cpp), for measuring others.
  const std::optional<std::int64_t> gemm_stages_env = lanes_from_env("TESSERA_CUDA_GEMM_STAGES", 8);
  if (gemm_stages_env && *gemm_stages_env < 2) {
    raise(ErrorCode::ArgumentInvalid,
          "TESSERA_CUDA_GEMM_STAGES is '" + std::to_string(*gemm_stages_env) + "'; expected 2 to 8");
  }
  const std::vector<std::int64_t> staged_tile =
      staged ? gemm_tile_from_env("TESSERA_CUDA_GEMM_STAGED_TILE", {128, 128, 64}) : std::vector<std::int64_t>{};
  for (ir::Operation* k : kernels_of(func)) {
    const Family f = kernel_family(*k);
    if (f == Family::gemm && staged && staged_gemm(*k)) {
      // 128 x 128 x 64 tiles over two warpgroups, two blocks per SM, so one
      // block's epilogue overlaps the other's products; 128 x 256 for large
      // products with a light epilogue (wide_staged_tile).
      const bool wide = (staged_tile_env == nullptr || *staged_tile_env == '\0') && wide_staged_tile(*k);
      k->attrs().set("tile", wide ? std::vector<std::int64_t>{128, 256, 64} : staged_tile);
      k->attrs().set("mma_staged", true);
      if (gemm_stages_env) k->attrs().set("gemm_stages", *gemm_stages_env);
      k->attrs().set("gemm_lanes", gemm_lanes_env ? *gemm_lanes_env : std::int64_t{256});
    } else if (f == Family::gemm) {
      if (cuda) k->attrs().set("tile", gemm);
      // Four warps per group on CUDA: the scalar mma's FMA chains and the
      // epilogue need more than one warp's lanes in flight (one warp per
      // 32-row tile left the GPU latency-bound).
      if (gemm_lanes_env) {
        k->attrs().set("gemm_lanes", *gemm_lanes_env);
      } else if (cuda) {
        k->attrs().set("gemm_lanes", std::max<std::int64_t>(gemm[0], 128));
      }
    }
    if (f == Family::gemm && (gemm_vector_env || cuda)) {
      k->attrs().set("gemm_vector", gemm_vector_env ? *gemm_vector_env : cuda_narrowest_run(*k));
    }
    // spmm: no shared-memory strips on CUDA (the CPU's default, sparse.cpp),
    // but a lane per run of outputs whose b values are one 16-byte vector
    // (at most 8 elements; $TESSERA_SPMM_VECTOR sets it on any target).
    if (cuda && f == Family::sparse && !k->attrs().has("spmm_strip")) k->attrs().set("spmm_strip", std::int64_t{1});
    if (f == Family::sparse && kernel_root_op(*k).name() == "graph.spmm" && (spmm_vector_env || cuda)) {
      const auto b_bytes = static_cast<std::int64_t>(std::max<std::size_t>(storage_bytes(kernel_root_op(*k).operand(1)->type().policy.storage), 1));
      k->attrs().set("spmm_vector", spmm_vector_env ? *spmm_vector_env : std::clamp<std::int64_t>(16 / b_bytes, 1, 8));
    }
    // $TESSERA_ROW_LANES, when set, applies to short rows too.
    if ((f == Family::normalization || f == Family::reduction) && row_lanes > 1 &&
        (lanes_env || !(cuda && short_sum_rows(*k)))) {
      k->attrs().set("row_lanes", row_lanes);
    }
    if ((f == Family::normalization || f == Family::reduction) && lane_shuffles_env) {
      k->attrs().set("lane_shuffles", *lane_shuffles_env);
    }
    if (f == Family::normalization && row_held_env.value_or(false) && !k->attrs().has("row_lanes")) {
      k->attrs().set("row_lanes", kCudaRowLanes);
    }
    if (f == Family::normalization && k->attrs().has("row_lanes") && row_held) {
      k->attrs().set("row_held", true);
      if (held_pairs_env) k->attrs().set("row_held_pairs", *held_pairs_env);
      if (held_threads_env) k->attrs().set("row_held_threads", *held_threads_env);
      const std::int64_t default_run = cuda ? cuda_held_run(*k) : 1;
      if (held_every_lane_env) {
        k->attrs().set("row_held_every_lane", *held_every_lane_env);
      } else if (cuda && cuda_held_every_lane(*k, default_run)) {
        k->attrs().set("row_held_every_lane", true);
      }
      if (held_run_env) {
        k->attrs().set("row_held_run", *held_run_env);
      } else if (default_run > 1) {
        k->attrs().set("row_held_run", default_run);
      }
    }
    if (f == Family::normalization && k->attrs().has("row_lanes")) {
      if (row_prefetch_env) {
        k->attrs().set("row_prefetch", *row_prefetch_env);
      } else if (cuda && prefetches_rows(kernel_root_op(*k))) {
        k->attrs().set("row_prefetch", kCudaRowPrefetch);
      }
    }
    if ((f == Family::normalization || f == Family::reduction) && k->attrs().has("row_lanes") && (row_vector_env || cuda)) {
      k->attrs().set("row_vector", row_vector_env ? *row_vector_env : cuda_run(kernel_root_op(*k).operand(0)->type().dtype()));
    }
    if (f == Family::reduction && column_strands_env.value_or(short_sum_columns(*k, cuda) ? 0 : kColumnStrandBlocks) > 0) {
      k->attrs().set("column_strands", column_strands_env.value_or(kColumnStrandBlocks));
      const std::int64_t columns =
          column_vector_env ? *column_vector_env : cuda ? cuda_column_vector(*k) : kCpuColumnVector;
      if (columns > 1) k->attrs().set("column_vector", columns);
    }
    if (f == Family::elementwise && (lane_vector_env || cuda)) {
      k->attrs().set("lane_vector", lane_vector_env ? *lane_vector_env : cuda_narrowest_run(*k));
    }
    if (f == Family::elementwise && cuda && k->attrs().has("lane_vector") && k->attrs().get_int("lane_vector") > 1 &&
        k->attrs().get_ints("tile") == std::vector<std::int64_t>{kElementwiseLanes}) {
      // 256 lanes per block on CUDA when each lane takes a run: a lane then
      // holds three runs of loads and their arithmetic in registers, and a
      // 1024-lane block caps it at 64 registers, which spilled the runs to
      // local memory (the gelu chain: 18.9M spill requests per call).
      k->attrs().set("tile", std::vector<std::int64_t>{kCudaRunLanes});
    }
    if (f == Family::elementwise && (lane_elements_env || cuda)) {
      const bool runs = k->attrs().has("lane_vector") && k->attrs().get_int("lane_vector") > 1;
      const auto& ops = kernel_body(*k).ops();
      const bool reads_a_table =
          std::any_of(ops.begin(), ops.end(), [](const auto& op) { return op->name() == "graph.lookup"; });
      const std::int64_t run_count = reads_a_table ? kCudaLookupRuns : 1;
      k->attrs().set("lane_elements", lane_elements_env ? *lane_elements_env : runs ? run_count : kCudaLaneElements);
    }
    if (f == Family::fft && (fft_lanes_env || cuda)) {
      // CUDA: a group of up to 256 lanes per line, the line in shared
      // memory, up to Hopper's 227 KiB per block (other devices' limits are
      // checked when the kernel loads). The CPU takes one lane per line.
      k->attrs().set("fft_lanes", fft_lanes_env ? *fft_lanes_env : std::int64_t{256});
    }
    if (f == Family::fft && (fft_points_env || cuda)) {
      // CUDA: two radix-4 passes per group (fewer shared round trips and
      // barriers; 0.47x -> 0.73x cuFFT at 1024 points on an H200). The CPU
      // keeps the template's 4: sixteen points spill its registers (1.8 ->
      // 3.0 ms for fft [256, 1024] on one core).
      k->attrs().set("fft_points", fft_points_env ? *fft_points_env : std::int64_t{16});
    }
    if (f == Family::fft && fft_shared) k->attrs().set("fft_shared_bytes", *fft_shared);
    if (f == Family::attention) {
      const std::vector<std::int64_t> blocks = attention_blocks(kernel_root_op(*k), cuda);
      const bool default_blocks = blocks[0] == templates::kAttentionBlockRows && blocks[1] == templates::kAttentionBlockKeys;
      if (attention_tile || !default_blocks) k->attrs().set("attn_tile", blocks);
    }
    if (f == Family::attention &&
        (attention_blocked || templates::attention_as_on_the_cpu(cuda, kernel_root_op(*k).operand(0)->type().dtype()))) {
      // after attn_tile: covers reads it
      const bool wanted = attention_blocked.value_or(true);
      k->attrs().set("attn_blocked", wanted && templates::blocked_attention_covers(*k));
    }
  }
}

std::vector<std::int64_t> attention_blocks(const ir::Operation& op, bool cuda) {
  if (std::optional<std::vector<std::int64_t>> env = attention_tile_from_env()) return *env;
  // GPUs keep 64 x 64 for tensor-core dtypes, the rows of one warpgroup's
  // tensor-core tile; fp32 (scalar FMAs there, docs/design/0052) takes the
  // CPU's blocks, so a GPU gives the CPU's bits to the sign of a zero. A CPU
  // attention whose queries (keys) fit in one block takes the smallest
  // power of two from 16 that holds them, forward and backward: one block
  // of rows (keys) either way, and padding only adds masked keys and zero
  // rows, whose terms are exact zeros, so the bits are those of the full
  // blocks (but for the sign of a zero result, which a padded block's +0
  // terms make +0) with less padded work. B 2, S 16, D 128, causal, forward
  // and backward in one jit(grad): 0.90 -> 0.23-0.35 ms on a 2-core CPU.
  // A decoding forward (at most 16 rows per head, with the grouped heads
  // folded by split-decode-attention, against many keys) takes blocks of 16
  // rows and 64 keys: 44 ms a call against 80 for one sequence of 32 heads
  // over 8192 keys (one core).
  const ir::Dim& sq = op.operand(0)->type().shape[2];
  const ir::Dim& sk = op.operand(1)->type().shape[2];
  if (templates::attention_as_on_the_cpu(cuda, op.operand(0)->type().dtype())) {
    auto fitted = [](const ir::Dim& d, std::int64_t block) {
      if (d.is_symbolic() || d.size > block) return block;
      std::int64_t b = kCpuSmallestAttentionBlock;
      while (b < d.size) b *= 2;
      return b;
    };
    return {fitted(sq, templates::kAttentionBlockRows), fitted(sk, templates::kAttentionBlockKeys)};
  }
  return {templates::kAttentionBlockRows, templates::kAttentionBlockKeys};
}

std::optional<std::vector<std::int64_t>> attention_tile_from_env() {
  const char* e = std::getenv("TESSERA_ATTENTION_TILE");
  if (e == nullptr || *e == '\0') return std::nullopt;
  int bm = 0, bn = 0;
  char tail = 0;
  auto pow2 = [](int x) { return x >= 16 && x <= 256 && (x & (x - 1)) == 0; };
  if (std::sscanf(e, "%d,%d%c", &bm, &bn, &tail) != 2 || !pow2(bm) || !pow2(bn)) {
    raise(ErrorCode::ArgumentInvalid, std::string("TESSERA_ATTENTION_TILE is '") + e +
                                          "'; expected BM,BN, powers of two from 16 to 256, such as 128,64");
  }
  return std::vector<std::int64_t>{bm, bn};
}

std::optional<std::int64_t> fft_shared_limit(bool cuda) {
  const std::optional<std::int64_t> env = lanes_from_env("TESSERA_FFT_SHARED_BYTES", std::int64_t{1} << 30);
  if (env) return env;
  if (cuda) return std::int64_t{227 * 1024};  // Hopper's most shared memory per block
  return std::nullopt;
}

bool fft_stages_enabled() { return switch_from_env("TESSERA_FFT_STAGES").value_or(true); }

std::string target_knob_key() {
  static const std::set<std::string_view> kKnobs = {
      "TESSERA_ATTENTION_BLOCKED",   "TESSERA_ATTENTION_TILE",      "TESSERA_ATTENTION_SPLIT",
      "TESSERA_ROW_LANES",           "TESSERA_GEMM_LANES",          "TESSERA_CUDA_GEMM_TILE",
      "TESSERA_CUDA_TILE_GEMM_TILE", "TESSERA_CUDA_TILE_DEFAULT",   "TESSERA_CUDA_TILE_OCCUPANCY",
      "TESSERA_CUDA_TILE_LATENCY",   "TESSERA_CUDA_TILE_EXP2",      "TESSERA_CUDA_GEMM_STAGED",    "TESSERA_LANE_ELEMENTS",
      "TESSERA_LANE_VECTOR",         "TESSERA_ROW_VECTOR",          "TESSERA_GEMM_VECTOR",
      "TESSERA_CUDA_GEMM_STAGED_TILE", "TESSERA_FFT_LANES",         "TESSERA_FFT_SHARED_BYTES",
      "TESSERA_TABULATE",            "TESSERA_CUDA_GEMM_STAGES",    "TESSERA_ROW_HELD",
      "TESSERA_ROW_HELD_PAIRS",      "TESSERA_ROW_HELD_THREADS",    "TESSERA_LANE_SHUFFLES",
      "TESSERA_ROW_HELD_RUN",        "TESSERA_ROW_HELD_EVERY_LANE",
      "TESSERA_ROW_PREFETCH",        "TESSERA_FFT_POINTS",          "TESSERA_FFT_STAGES",
      "TESSERA_SPLIT_SUMS",          "TESSERA_COLUMN_VECTOR",       "TESSERA_COLUMN_STRANDS",
      "TESSERA_SPMM_VECTOR",         "TESSERA_COLUMN_PROLOGUE",     "TESSERA_COLUMN_BLOCKS"};
  // One pass over the environment (every eager call asks): a getenv per knob
  // scanned it once per knob, a few percent of a small eager op.
  std::vector<std::string_view> set;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "TESSERA_", 8) != 0) continue;
    const std::string_view entry(*e);
    const std::size_t eq = entry.find('=');
    if (eq == std::string_view::npos || eq + 1 == entry.size()) continue;  // an empty value is unset
    if (kKnobs.count(entry.substr(0, eq)) != 0) set.push_back(entry);
  }
  std::sort(set.begin(), set.end());
  std::string key;
  for (std::string_view entry : set) key.append(" ").append(entry);
  return key;
}

bool wide_staged_tile(const ir::Operation& kernel) {
  // Measured on an H200 (docs/design/0020): 128 x 256 tiles (one block per
  // SM) take plain bf16 products from 536 to 641 TFLOP/s at 8192^3, but a
  // GELU epilogue computed in double from 389 to 359, as it no longer
  // overlapped another block's products. A GELU read from its table
  // (graph.lookup, docs/design/0030) is light: 128 x 256 took bias + GELU
  // from 475 to 513 TFLOP/s, and with z stored too from 464 to 518
  // (docs/design/0032). So: at most two results, an epilogue of adds,
  // multiplies, casts and table reads, and at least 2^23 elements (two waves
  // of 132 SMs) in each output matrix, known when compiling: the executable
  // launches a batched product once per matrix, so batch dims add no blocks
  // to a launch.
  if (kernel.num_results() > 2) return false;
  const std::optional<std::vector<std::int64_t>> sizes = ir::static_sizes(kernel.result(0)->type().shape);
  if (!sizes || sizes->size() < 2) return false;
  const std::int64_t elements = (*sizes)[sizes->size() - 2] * sizes->back();
  if (elements < (std::int64_t{1} << 23)) return false;
  const ir::Operation& root = kernel_root_op(kernel);
  for (const auto& op : kernel_body(kernel).ops()) {
    const std::string_view name = op->name();
    if (op.get() == &root || name == "schedule.yield") continue;
    if (name != "graph.add" && name != "graph.sub" && name != "graph.mul" && name != "graph.cast" &&
        name != "graph.lookup") {
      return false;
    }
  }
  return true;
}

bool staged_gemm(const ir::Operation& kernel) {
  if (kernel_family(kernel) != Family::gemm) return false;
  const ir::Operation& root = kernel_root_op(kernel);
  const DType a = root.operand(0)->type().dtype();
  return (a == DType::bf16 || a == DType::fp16) && root.operand(1)->type().dtype() == a &&
         root.result(0)->type().policy.accum == DType::fp32;
}

bool tensor_core_gemm(const ir::Operation& kernel) {
  if (kernel_family(kernel) != Family::gemm) return false;
  const ir::Operation& root = kernel_root_op(kernel);
  auto tensor_core = [](DType d) {
    return d == DType::bf16 || d == DType::fp16 || d == DType::fp8_e4m3 || d == DType::fp8_e5m2;
  };
  return tensor_core(root.operand(0)->type().dtype()) && tensor_core(root.operand(1)->type().dtype()) &&
         root.result(0)->type().policy.accum == DType::fp32;
}

void use_tile_ir(ir::Operation& func) {
  for (ir::Operation* k : kernels_of(func)) {
    if (kernel_variant(*k) == "tile") k->attrs().set("variant", std::string("tile_ir"));
  }
  set_tile_ir_knobs(func);
}

void set_tile_ir_knobs(ir::Operation& func) {
  const std::vector<std::int64_t> tile = gemm_tile_from_env("TESSERA_CUDA_TILE_GEMM_TILE", {128, 128, 64});
  for (ir::Operation* k : kernels_of(func)) {
    // The CUDA Tile IR target's attention: blocked where cuda_tile_attention
    // allows (never fp32, which the knob's default or a user set blocked for
    // the PTX path), else the lane form.
    if (kernel_variant(*k) == "tile_ir" && kernel_family(*k) == Family::attention) {
      const ir::Attribute* blocked = k->attrs().find("attn_blocked");
      if (!blocked || (std::get<bool>(*blocked) && !templates::cuda_tile_attention(*k))) {
        k->attrs().set("attn_blocked", templates::cuda_tile_attention(*k));
      }
      if (std::get<bool>(*k->attrs().find("attn_blocked"))) templates::take_cuda_tile_forward_keys(*k);
    }
    // The CUDA Tile IR target runs a group's lanes as one tile already.
    if (kernel_variant(*k) == "tile_ir" && kernel_family(*k) == Family::elementwise) {
      if (k->attrs().has("lane_vector") && k->attrs().get_ints("tile") == std::vector<std::int64_t>{kCudaRunLanes}) {
        k->attrs().set("tile", std::vector<std::int64_t>{kElementwiseLanes});
      }
      k->attrs().erase("lane_elements");
      k->attrs().erase("lane_vector");
    }
    // Runs are the PTX path's wide accesses; CUDA Tile IR moves tiles.
    if (kernel_variant(*k) == "tile_ir") {
      k->attrs().erase("row_vector");
      k->attrs().erase("gemm_vector");
    }
    if (kernel_variant(*k) != "tile_ir" || !tensor_core_gemm(*k)) continue;
    k->attrs().set("tile", tile);
    k->attrs().set("mma_flat", true);
    // An epilogue's lanes take consecutive columns (coalesced), not a row each.
    if (!k->attrs().has("gemm_lanes") || k->attrs().get_int("gemm_lanes") == tile[0]) {
      k->attrs().set("gemm_lanes", std::int64_t{256});
    }
  }
}

}  // namespace tessera::schedule
