// Schedule IR passes (Graph IR -> Schedule IR) and the variant interface.
//
//   schedule-partition        Graph IR ops -> schedule.kernel fusion groups
//   schedule-choose-variants  each kernel's implementation (VariantChooser)
//   schedule-tile             tiling knobs per family
//   schedule-plan-buffers     buffer slots: liveness, reuse, in place
//
// lower_to_schedule() runs all four in that order. Each pass works on every
// Graph IR function of a module; functions that are already Tile IR kernels
// are left alone.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/ir/ir.h"

namespace tessera::schedule {

// Fusion groups (docs/design/0005-schedule-ir.md):
// - elementwise chains over one domain (producers from outside the group are
//   read through broadcasting);
// - a GEMM with its elementwise epilogue over the GEMM's result domain;
// - a reduction with its elementwise consumers over the reduced domain, and
//   with `column_prologues` block sums with the elementwise group computing
//   their operand before them (block_sums_prologue_fusible);
// - each normalization op (softmax_safe, logsumexp, layernorm_safe,
//   rmsnorm_safe) alone;
// - views (reshape, stop_gradient) as kernels of family "view";
// - every other op alone.
// A group never takes an operand that depends on the group itself.
void partition(ir::Operation& func, bool column_prologues = false);

// Chooses each kernel's implementation. One interface, so that the Mapper
// (distribution) can own the choice later; the default chooser picks the
// generated tile kernel wherever a template exists.
class VariantChooser {
 public:
  virtual ~VariantChooser() = default;
  // "tile", "view" or "none" (no implementation for this kernel yet).
  virtual std::string choose(const ir::Operation& kernel) const = 0;
};
const VariantChooser& default_variant_chooser();
void choose_variants(ir::Operation& func, const VariantChooser& chooser = default_variant_chooser());

void assign_tiles(ir::Operation& func);
// The knobs that depend on the target, set when an executable is compiled:
// - on CUDA, GEMM blocks of 32x32x32, or $TESSERA_CUDA_GEMM_TILE =
//   "BM,BN,BK". On an H100 the fp32 jit(grad) MLP step (B256, D1024) took
//   21.1 ms with the CPU's 128x128x64 (too few thread blocks), 5.8 ms with
//   64x64x32 and 3.0 ms with 32x32x32; their groups get `gemm_lanes` =
//   max(BM, 128) lanes (four warps rather than one; $TESSERA_GEMM_LANES
//   sets them on any target, so the CPU tests that form too);
// - on CUDA, bf16 and fp16 GEMMs (staged_gemm) take the staged form instead
//   (`mma_staged`: 128x128x64 tiles, 256 lanes, operands copied into
//   swizzled shared buffers in a 3-deep pipeline, wgmma on Hopper) unless
//   $TESSERA_CUDA_GEMM_STAGED = 0; their bits follow the tensor cores'
//   order (which the blocked form's mma.sync did not escape either);
// - elementwise kernels get `lane_vector` on CUDA: runs of 16 bytes of the
//   narrowest buffer per lane (at most 8 elements), read and written with
//   tile.load_vector / tile.store_vector, one run per lane
//   (`lane_elements` = 1); without runs `lane_elements` = 4 (each lane takes
//   4 elements, a group's width apart). $TESSERA_LANE_VECTOR and
//   $TESSERA_LANE_ELEMENTS set either on any target;
// - normalization and reduction kernels get `row_lanes` lanes per row (a
//   group per row) on CUDA, 128 or $TESSERA_ROW_LANES (softmax_safe 4096^2
//   fp32 on an H100: 3.4 ms a lane per row, 0.63 ms with 32 lanes, 0.52
//   with 128, 0.74 with 256); also over leading axes, where a row is
//   strided (a bias gradient: a lane per output element measured 2.4x
//   slower, design 0018). On the CPU a lane per row unless
//   $TESSERA_ROW_LANES says otherwise (tests run the cooperative form there);
// - cooperative normalization rows get `row_vector` on CUDA: runs of 16
//   bytes of the row (at most 8 elements), or $TESSERA_ROW_VECTOR (a power
//   of two up to 16) on any target.
// Numerics do not change: the summation order depends on the shape alone.
void set_target_knobs(ir::Operation& func, bool cuda);
// The environment knobs that change what an executable compiles to (those
// set_target_knobs reads, the CUDA Tile IR target's and the default
// mapper's), as " NAME=value" for each one set: part of a compile cache's
// key, so changing one never serves a kernel built under another.
std::string target_knob_key();

// Knobs of the kernels whose variant is "tile_ir" (the CUDA Tile IR target),
// set once the variants are chosen: GEMMs on tensor-core operands (bf16,
// fp16, fp8, accumulating in fp32) take 128x128x64 output tiles
// ($TESSERA_CUDA_TILE_GEMM_TILE overrides, BM,BN,BK), 256 lanes for an
// epilogue (consecutive lanes, consecutive columns), and one loop over K
// (`mma_flat`, latency hint 3): the tensor cores' own order inside each mma
// already differs from the canonical blocked order, so the blocks would only
// cost the target its software pipeline; the order still depends on the
// shape alone, so results repeat bit for bit.
void set_tile_ir_knobs(ir::Operation& func);
// Every kernel of variant "tile" becomes "tile_ir", then set_tile_ir_knobs:
// the kernels as the CUDA Tile IR target compiles them when a Mapper asks
// for it everywhere (`tessera compile --target cuda_tile`).
void use_tile_ir(ir::Operation& func);
// Whether a gemm kernel's product runs on tensor cores where it can: both
// operands bf16, fp16 or fp8, accumulating in fp32.
bool tensor_core_gemm(const ir::Operation& kernel);
// Whether a gemm kernel takes the staged form on CUDA (mma_staged, gemm.cpp):
// both operands bf16 or both fp16, accumulating in fp32.
bool staged_gemm(const ir::Operation& kernel);
// Whether a staged gemm kernel takes 128 x 256 tiles instead of 128 x 128:
// one result whose matrices have at least 2^23 elements each, known when
// compiling, and an epilogue of adds, multiplies and casts at most.
bool wide_staged_tile(const ir::Operation& kernel);
void plan_buffers(ir::Operation& func);

// CUDA executables, before partitioning: fp32 gemm/matmul whose operands
// are exact casts of bf16 values become bf16 products with fp32 results
// (`out`), and those with one such operand three products of the other's
// exact bf16 pieces (src/schedule/passes/split_products.cpp). Returns how
// many products it rewrote.
int split_fp32_products(ir::Operation& func);

// The shared memory an FFT line may take before it works in stages or in
// global scratch: $TESSERA_FFT_SHARED_BYTES on any target (so the CPU tests
// those forms), else 227 KiB on CUDA; none on the CPU (its lines live in
// heap memory).
std::optional<std::int64_t> fft_shared_limit(bool cuda);
// A switch from the environment variable `name`: "0" or "1"; nullopt when
// unset; any other value is an ArgumentError naming the variable.
std::optional<bool> switch_from_env(const char* name);
// $TESSERA_ATTENTION_TILE = "BM,BN": the blocked attention kernels' query
// and key blocks (powers of two from 16 to 256); nullopt when unset.
std::optional<std::vector<std::int64_t>> attention_tile_from_env();
// The blocked attention kernels' query and key blocks for a graph.flash_attn
// or flash_attn_bwd on a target: $TESSERA_ATTENTION_TILE when set, else 64 x
// 64, with 16 query rows for a CPU forward of at most 16 rows per head
// (pad-ragged-attention pads to them; assign_tiles sets them).
std::vector<std::int64_t> attention_blocks(const ir::Operation& op, bool cuda);
// Whether attention of this storage dtype on this target takes the blocked
// kernels where they apply, so ragged lengths are worth padding:
// $TESSERA_ATTENTION_BLOCKED when set, else the CPU, fp32 on CUDA (the PTX
// path's blocked kernels), or a CUDA target whose CUDA Tile IR toolchain is
// usable (the default mapper's choice there).
bool attention_blocks_wanted(bool cuda, DType storage);
// decode-fp8-attention (passes/decode_fp8_attention.cpp), before
// pad-ragged-attention, where attention_blocks_wanted: an fp8 graph.flash_attn
// of 256 query rows or more that the blocked kernels would take gets q, k and v
// cast to bf16 ahead (exact), so its kernel does not decode each K and V block
// once per query block. Returns how many it rewrote.
int decode_fp8_attention(ir::Operation& func, bool cuda);
// split-decode-attention (passes/split_decode_attention.cpp), before
// pad-ragged-attention, where attention_blocks_wanted: a graph.flash_attn
// forward whose query rows of one key/value head fit one query block (not
// causal, or one query row) folds its grouped query heads into rows of their
// key head, and splits the keys into chunks run as heads of their own, merged
// by a fixed-order logsumexp combine. Returns how many it rewrote.
int split_decode_attention(ir::Operation& func, bool cuda);
// pad-ragged-attention (passes/pad_ragged_attention.cpp), before
// partitioning, where attention_blocks_wanted: a graph.flash_attn or
// graph.flash_attn_bwd that the blocked kernels would take but for sequence
// lengths that are not multiples of the blocks gets its operands
// zero-padded to whole blocks (graph.slice_embed), valid_queries and
// valid_keys, and its results cut back (graph.slice {copy = true}, a
// kernel: a plain slice's strided view would be gathered through the host
// on a GPU). Returns how many it padded.
int pad_ragged_attention(ir::Operation& func, bool cuda);
// Whether long FFT lines split into stages ($TESSERA_FFT_STAGES, 1 by
// default; 0 keeps them in global scratch, to compare and to test that form).
bool fft_stages_enabled();
// split-long-ffts (passes/split_long_ffts.cpp), before partitioning: a c2c
// graph.fft along the last axis whose line passes fft_shared_limit becomes
// two graph.fft_passes whose sub-lines fit, the same bits. Returns how many
// transforms it split.
int split_long_ffts(ir::Operation& func, bool cuda);

// Whether block sums take the elementwise ops computing their operand as a
// prologue ($TESSERA_COLUMN_PROLOGUE=1; off by default on every target).
// Measured slower everywhere so far (docs/design/0039): the gelu chain's
// gradient ([16384, 8192] bf16) on an H200 ran at 0.18-0.33x a copy fused
// against 0.56x as an elementwise kernel and the block sums, and on one CPU
// core 41-49 ms against 28-29 ms.
bool column_prologues_enabled();

// Whether column sums split at their blocks ($TESSERA_COLUMN_BLOCKS, 1 by
// default; 0 keeps the column form, to compare).
bool column_blocks_enabled();
// split-column-sums (passes/split_long_sums.cpp), before partitioning: a
// float graph.sum or graph.mean over axis 0 of a matrix of more than one
// block of rows becomes graph.block_sums and graph.block_total, the same
// bits (docs/design/0039). Returns how many it split.
int split_column_sums(ir::Operation& func);

// An on/off knob from the environment: "1" or "0", `fallback` when unset,
// anything else an ArgumentError naming the variable.
bool binary_knob(const char* name, bool fallback);

// Whether long sums to few outputs split ($TESSERA_SPLIT_SUMS, 1 by default;
// 0 keeps them one kernel, to compare).
bool split_sums_enabled();
// How split-long-sums splits `op` (graph.sum or graph.mean) of an operand of
// type `x` over `axes` (as the op's attribute: empty for every axis), or
// nullopt where it does not: a float operand of static shape, trailing or
// leading reduced axes, fewer than 1024 outputs and more than one
// superblock. Eager sums split by the same rule (eager.cpp).
struct SumSplit {
  std::vector<std::int64_t> axes;  // normalized, sorted
  std::int64_t length = 1;         // reduced elements per output
  std::int64_t outputs = 1;
  std::int64_t superblocks = 0;    // per output
  bool leading = false;            // the reduced axes lead (the kept ones trail)
};
std::optional<SumSplit> long_sum_split(std::string_view op, const ir::Type& x, const std::vector<std::int64_t>& axes);
// split-long-sums (passes/split_long_sums.cpp), before partitioning: a float
// graph.sum or graph.mean over trailing or leading axes, with fewer than 1024 output
// elements and more than one superblock (kReductionBlock^2 elements) to
// reduce, becomes graph.superblock_sums and graph.superblock_total, the same
// bits on more groups (docs/design/0036). Returns how many it split.
int split_long_sums(ir::Operation& func);

// split-complex-parts (passes/split_complex_parts.cpp): sum and mean of a
// complex operand as complex(sum(real), sum(imag)), the reference's
// part-by-part order, so they compile as real reductions; concat,
// broadcast_to and gather of complex data as the same moves of each part.
// Returns the number of ops rewritten.
int split_complex_parts(ir::Operation& func);

// tabulate-functions (passes/tabulate_functions.cpp): each chain of
// elementwise ops computing a value from one float value of at most 16 bits
// alone, with a transcendental op in it, becomes graph.lookup of a table
// the reference executor computes over every code. Returns the number of
// chains rewritten (their ops are left for dce).
int tabulate_functions(ir::Operation& func);

// All four passes on `module`'s Graph IR functions.
void lower_to_schedule(ir::Module& module, const VariantChooser& chooser = default_variant_chooser());

void register_schedule_passes();

}  // namespace tessera::schedule
