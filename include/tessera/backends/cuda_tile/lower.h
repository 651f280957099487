// Tessera Tile IR kernel -> CUDA Tile IR module (bytecode + text form).
//
// The subset this target expresses (docs/design/0014-cuda-tile-target.md):
// group-level tile code over global buffers — tile.tile_load / tile_store of
// gmem (zeros past bounds / skipped), tile.zeros, tile.mma (accumulating at
// the accumulator's dtype), tile.tile_cast, tile.tile_add — under tile.for
// loops, with uniform lane scalars (constants, shape symbols, group_id,
// num_groups, parameters) as rank-0 tiles. Everything else (lane-level code
// on tile.linear_id, element loads, shared buffers, cp_async, barriers,
// saturating integer arithmetic) is a CompileError naming the op and its
// source line: nothing is emitted in its place.
//
// Kernel parameters (the launch ABI): per gmem buffer, its base pointer
// (tile<ptr<T>>) then one tile<i64> per dim (the extent); per lane scalar,
// a rank-0 tile. Buffers are dense row-major.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/ir/ir.h"

namespace tessera::cuda_tile {

struct LoweredKernel {
  std::string name;
  std::vector<std::uint8_t> bytecode;
  std::string text;  // inspect_ir("target") for this target
};

// assume_aligned: the kernel may rely on every buffer's base address being a
// multiple of 16 bytes and every row stride (the elements between rows, in
// bytes) being one too: assume ops state it, which lets tileiras vectorize
// the copies. Only launches whose arguments satisfy it may use such a kernel
// (runtime.h checks and picks the other form otherwise).
struct LowerOptions {
  bool assume_aligned = false;
};

LoweredKernel lower_kernel(const ir::Operation& kernel_func, const LowerOptions& options = {});

}  // namespace tessera::cuda_tile
