// Tessera Tile IR kernel -> CUDA Tile IR module (bytecode + text form).
//
// The subset this target expresses (docs/design/0014-cuda-tile-target.md):
// group-level tile code over global buffers — tile.tile_load / tile_store of
// gmem (zeros past bounds / skipped), tile.zeros, tile.mma (accumulating at
// the accumulator's dtype), tile.tile_cast, tile.tile_add — under tile.for
// loops; lane-level code (tile.linear_id, element loads and stores, lane
// arithmetic, tile.if / for / strands) vectorized over the group's lanes;
// shared buffers (as tile values where they are only accessed whole, else as
// per-group global copies), cp_async and barriers
// (src/backends/cuda_tile/lowering.h). Everything else (the elementary
// functions not ported yet, fp8 lane casts, ...) is a CompileError naming
// the op and its source line: nothing is emitted in its place.
//
// Kernel parameters (the launch ABI): per gmem buffer, its base pointer
// (tile<ptr<T>>) then one tile<i64> per dim (the extent); per lane scalar,
// a rank-0 tile; then the symbol_params (tile<i64> each); then one pointer
// per shared buffer (LoweredKernel::shared_bytes); then, for flat
// kernels, the number of tiles (tile<i64>);
// then, with LoweredKernel::fault_param, the fault word (tile<ptr<i32>>).
// Buffers are dense row-major.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tessera/ir/ir.h"
#include "tessera/support/error.h"

namespace tessera::cuda_tile {

// A fault a kernel can report: the error it raises and its message.
struct KernelFault {
  ErrorCode code;
  std::string message;
};

struct LoweredKernel {
  std::string name;
  std::vector<std::uint8_t> bytecode;
  std::string text;  // inspect_ir("target") for this target
  // With fault_param, the kernel's last parameter is a device int32 (zeroed
  // before the launch) into which a lane that faults writes the fault's
  // number: 1 + an index into `faults`, the messages (op, user's line).
  bool fault_param = false;
  std::vector<KernelFault> faults;
  // Nonzero for a flat kernel (no group shape, no group-level ops): this
  // many tiles per tile block, and a hidden i64 parameter before the fault
  // word holds the number of tiles; the grid is ceil(tiles / flat_lanes).
  std::int64_t flat_lanes = 0;
  // Shape symbols passed as hidden i64 parameters (after the lane scalars,
  // before `tiles`): those no buffer dim gives whole (tp of K/tp).
  std::vector<std::string> symbol_params;
  // Per shared buffer (tshared.alloc, in order), the bytes of one group's
  // copy: the launch passes a pointer to grid-many copies for each, as
  // hidden parameters after the symbol_params.
  std::vector<std::int64_t> shared_bytes;
};

// assume_aligned (the fast form): the kernel may rely on every buffer's base
// address being a multiple of 16 bytes, every row stride (the elements
// between rows, in bytes) being one too, and every extent and row stride
// (in elements) being below 2^31: assume ops state the first two, which lets
// tileiras vectorize the copies, and views take 32-bit shapes and strides.
// Only launches whose arguments satisfy it may use such a kernel (runtime.h
// checks and picks the other form otherwise).
//
// arch: the architecture the optimization hints are keyed by (tileiras
// reads the entry for the GPU it compiles for). latency: overrides the
// latency hint that tile.range(prefetch=N) loops give their loads (N,
// clamped to the hint's range 1-10); TESSERA_CUDA_TILE_LATENCY sets it from
// the environment (runtime.cpp), for measuring.
struct LowerOptions {
  bool assume_aligned = false;
  std::string arch = "sm_90";
  std::optional<int> latency;
  // The entry's occupancy hint (CTAs per SM); else the kernel function's
  // `occupancy` attribute, if any.
  std::optional<int> occupancy;
  // A fast exp of (x c - m) as exp2 of one fma (lower_tile_math.cpp);
  // TESSERA_CUDA_TILE_EXP2=0 writes the exp as the ops say, for measuring.
  bool scaled_exp2 = true;
};

LoweredKernel lower_kernel(const ir::Operation& kernel_func, const LowerOptions& options = {});

// The blocks per multiprocessor the entry's occupancy hint asks for:
// options.occupancy, else the kernel function's `occupancy` attribute
// (clamped to 1-32), else none.
std::optional<int> entry_occupancy(const ir::Operation& kernel_func, const LowerOptions& options);

}  // namespace tessera::cuda_tile
