// Schedule IR -> Tile IR: one template per op family, shared by the CPU and
// CUDA backends (ARCHITECTURE.md decision 12).
//
// A template turns one schedule.kernel into one Tile IR kernel function
// whose parameters are the kernel's inputs (gmem, read-only), then its
// results (gmem, mut), then the scalars the template needs (TileKernel::
// scalars says which). Numerics are the reference executor's: each Graph IR
// op's result is computed in fp64 from decoded operands, rounded once to the
// op's accumulation type and then encoded to its storage type, so an
// elementwise kernel's results equal the reference bit for bit.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tessera/ir/ir.h"
#include "tessera/numerics/dtype.h"

namespace tessera::schedule {

// The canonical accumulation order of every compiled sum (reductions and
// normalizations): the reduced elements, in row-major order of the reduced
// axes, form blocks of kReductionBlock. Inside a block, element p (counting
// from the block's start) goes to strand p mod kReductionStrands; each
// strand sums its elements left to right from zero, and the strands are
// combined by a pairwise tree ((s0 + s1) + (s2 + s3)) + ... . Block sums are
// summed left to right in superblocks of kReductionBlock blocks; superblock
// sums are summed left to right. Every add rounds once to the accumulation
// type. The order depends on the reduced length alone (never on threads or
// tile sizes), the reference executor sums in the same order (so compiled
// sums equal it bit for bit), the strands let a CPU kernel sum with SIMD
// lanes, and a reduced dim split across devices at superblock boundaries
// keeps the order (docs/design/0005-schedule-ir.md). GEMMs accumulate k in
// blocks of kReductionBlock too, sequentially inside a block.
inline constexpr std::int64_t kReductionBlock = 256;
inline constexpr std::int64_t kReductionStrands = 16;

// A launch-time scalar of a generated kernel.
struct KernelScalar {
  enum class Kind { dim, input_dim, batch } kind;
  // dim: the kernel domain's dim `index`; input_dim: dim `index` of kernel
  // input `input` (sizes at run time); batch: the batch matrix a matrix
  // launch computes (row-major over the output's batch dims).
  std::size_t index = 0;
  std::size_t input = 0;
};

// A kernel launched once per batch matrix of a matrix product: inputs `a`
// and `b` are passed as that batch's 2-D matrices (as stored: [K, M] when
// `transpose_a`), with numpy broadcasting over the batch dims, and the grid is
// ceil(M / bm) * ceil(N / bn) groups.
struct MatrixLaunch {
  std::size_t a = 0, b = 1;
  bool transpose_a = false, transpose_b = false;
  std::int64_t bm = 128, bn = 128;
  // The outputs too are passed as that batch's 2-D [M, N] matrices.
  bool matrix_outputs = false;
};

// Integer indices the executable checks on the host before a launch: every
// value of input `input` must lie in [-n, n), n = dim `dim` of input
// `bound_input` (or of the kernel's domain when `bound_in_domain`).
struct IndexCheck {
  std::size_t input = 0;
  bool bound_in_domain = false;
  std::size_t bound_input = 0;
  std::size_t dim = 0;
  std::string op;  // for the message: "gather", "scatter_add"
};

// The inverse of an index input (scatter_add): the executable sorts the
// positions j of input `input` stably by their (wrapped) value i in
// [0, n), n = the domain's dim `dim`, and passes two int64 buffers after the
// outputs: offsets [n + 1] and order [numel(input)], so that the positions
// with value i are order[offsets[i] .. offsets[i + 1]), in increasing j.
struct InverseIndex {
  std::size_t input = 0;
  std::size_t dim = 0;
};

// A grid of groups that each take `block` consecutive entries along axis
// `axis` of input `input`, for every index of the dims before it:
// prod(shape[0, axis)) * ceil(shape[axis] / block) groups.
struct AxisBlocks {
  std::size_t input = 0;
  std::size_t axis = 0;
  std::int64_t block = 1;
};

// Constants a kernel reads (an FFT's twiddles), computed when compiling: the
// executable makes each a 1-D tensor of `dtype` on its device once and
// passes it after the outputs (and InverseIndex's buffers), before the
// scalars. `values` are exact in `dtype`.
struct ConstantTable {
  DType dtype = DType::fp64;
  std::vector<double> values;
};

// Global memory a kernel's groups work in (an FFT line too long for shared
// memory): the executable allocates `per_group` elements of `dtype` for each
// group of a launch on its device and passes them after the tables; a run
// keeps them until its kernels are queued (a CUDA graph's run until the
// graph is launched).
struct GroupScratch {
  DType dtype = DType::fp32;
  std::int64_t per_group = 0;
};

struct TileKernel {
  ir::Operation* func = nullptr;  // the Tile IR kernel, in the module passed to lower_kernel
  std::vector<KernelScalar> scalars;
  std::int64_t lanes_per_group = 1;  // grid = ceil(numel(domain) / lanes_per_group)
  // Inputs whose every dim in `nonempty_dims` must be nonzero at run time
  // (a max over an empty axis has no result): {input, dim} pairs.
  std::vector<std::pair<std::size_t, std::size_t>> nonempty_dims;
  std::optional<MatrixLaunch> matrix;
  // A kernel with one lane per row along axis `second` of input `first`
  // (a normalization whose result has the input's shape): numel(input) /
  // dim lanes instead of numel(domain).
  std::optional<std::pair<std::size_t, std::size_t>> rows_of;
  // A kernel whose groups tile the domain's rows: each group covers
  // lanes_per_group columns of one row (all dims but the last), so the grid
  // is numel(domain) / C * ceil(C / lanes_per_group), C = the last dim.
  bool row_tiled = false;
  // One group per row (a cooperative normalization): the grid is the row
  // count; groups of `rows_per_group` consecutive rows (an FFT's adjacent
  // lines) divide it by that.
  bool group_per_row = false;
  std::int64_t rows_per_group = 1;
  // Groups' lines per row of `rows_of` (an FFT stage's sub-lines of each
  // line: docs/design/0034): the row count times this.
  std::int64_t lines_per_row = 1;
  // Lanes that each take a strip of this many adjacent elements along the
  // domain's last axis (the CPU's spmm): numel(domain) / C * ceil(C / strip)
  // lanes, C = the last dim, instead of one per element.
  std::int64_t last_axis_strip = 0;
  // Groups by blocks of inputs' axes: the grid is the sum of each entry's
  // groups (a kernel with two roles numbers the second's after the first's).
  std::vector<AxisBlocks> axis_blocks;
  // Inputs and outputs passed as 2-D [numel / cols, cols] views rather than
  // flat ones: {index, cols} pairs.
  std::vector<std::pair<std::size_t, std::int64_t>> matrix_inputs, matrix_outputs;
  std::vector<IndexCheck> index_checks;
  std::optional<InverseIndex> inverse;
  // Inputs (by index) and outputs the kernel reads and writes as their codes
  // (Tensor::as_codes): a moving op's parameters, so every encoding, NaN
  // payloads included, is copied exactly.
  std::vector<std::size_t> code_inputs;
  bool code_outputs = false;
  std::vector<ConstantTable> tables;
  std::optional<GroupScratch> scratch;
};

// Whether Graph IR op `op` can be computed per lane inside any template (a
// covered elementwise op on policies kernels take): partitioning fuses
// siblings only then, so one uncompilable op never spoils a kernel.
bool lane_fusible(const ir::Operation& op);

// The softmax's y that graph.softmax_linear `linear` reads: its operand 0's
// widened_source (autodiff reads a bf16 y through a cast to fp32).
const ir::Value* softmax_gradient_y(const ir::Operation& linear);

// Whether graph.softmax_linear `linear` can share one normalization kernel
// with the graph.softmax_safe that computes its y (softmax_gradient_y; a
// softmax's gradient): same axis, its operand 1 a different value, the
// gradient stored at its accumulation type and y either stored at it too or
// read through the cast, with nearest rounding, so the kernel can keep
// exp(x - max) in the gradient's buffer and compute y on the fly with the
// stored y's bits (rounded to y's format first). Partitioning fuses the
// pair only then.
bool softmax_gradient_fusible(const ir::Operation& softmax, const ir::Operation& linear);

// Whether graph.cast `cast` widens exactly: a float format of at most 32
// bits to fp32 or fp64, or fp32 to fp64, rounding to nearest (every value
// kept). A normalization reads such a cast of its operands as a prologue:
// partitioning moves the cast into the normalization's kernel when the
// normalization is its only reader, and the template reads the cast's
// operand, whose values are the same (docs/design/0025).
bool exact_widening_cast(const ir::Operation& cast);

// Whether graph.cast `cast` can end the normalization kernel computing its
// operand (an epilogue): the operand is the result of rmsnorm_safe,
// layernorm_safe, softmax_safe, softmax_linear or norm_linear at a plain
// fp32 policy, read by the cast alone, and the cast rounds it to nearest
// into bf16 or fp16 (accumulating in fp32). The kernel stores the root's
// fp32 values rounded once to the cast's format, which is what the cast
// computes (a storage-precision gradient's last step: docs/design/0038).
bool normalization_epilogue_cast(const ir::Operation& cast);

// Whether such a cast of a softmax's fused gradient can end their kernel:
// the kernel keeps the softmax's y in the gradient's buffer between passes,
// so the cast's format must hold y's.
bool narrowed_gradient_holds_y(const ir::Operation& cast, const ir::Operation& softmax);

// Whether `sum` can compute its operand in its own kernel: graph.block_sums
// (a column sum split at its blocks: a bias gradient), which the reduction
// template reads element by element. Partitioning then joins the
// elementwise group computing the operand into the sum's kernel as its
// prologue: each element is computed once, where the sum reads it, and the
// prologue's other outputs are stored there (docs/design/0039).
bool block_sums_prologue_fusible(const ir::Operation& sum);

// v, or the operand of the exact widening cast computing v when `reader` is
// its only user (a cast that partitioning brings into the reader's kernel).
const ir::Value* widened_source(const ir::Value* v, const ir::Operation& reader);

// Whether a template covers `kernel`; when not, `why` names the first op or
// construct it cannot lower.
bool has_tile_template(const ir::Operation& kernel, std::string* why = nullptr);

// Lowers `kernel` into a new function of `out` named `name`. A kernel no
// template covers is a CompileError naming the op and its location.
TileKernel lower_kernel(const ir::Operation& kernel, ir::Module& out, const std::string& name);

}  // namespace tessera::schedule
