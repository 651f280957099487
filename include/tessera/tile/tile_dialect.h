// The Tile IR dialect (`tile`): lane scalars, shared and global buffers,
// async copies, barriers, tile values and structured control flow, as fixed
// by docs/design/0003-tile-ir.md. The ops register with the global Registry
// (tessera/ir/dialect.h) together with the builtin and graph dialects; this
// header adds the queries passes and backends share about kernels and ops.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "tessera/ir/dialect.h"
#include "tessera/ir/ir.h"

namespace tessera::tile {

// The shared-memory budget of a kernel without `shared_bytes` (48 KiB).
inline constexpr std::int64_t kDefaultSharedBytes = 48 * 1024;
// Shared allocations start at multiples of this many bytes.
inline constexpr std::int64_t kSharedAlignment = 128;

// True for a `func` with attribute kernel = true.
bool is_kernel(const ir::Operation& func);
// The number of tiles per group: the product of `group_shape`, 1 without one.
std::int64_t group_tile_count(const ir::Operation& func);
// `shared_bytes`, or kDefaultSharedBytes when absent.
std::int64_t shared_budget(const ir::Operation& func);

// Ops every tile of a group must run together (contract section 6):
// barrier, cp_async, cp_async_wait, smem_alloc, tile_load, tile_store, mma,
// transpose (a backend may exchange a tile's elements through shared memory).
bool is_group_cooperative(const ir::Operation& op);
// Why a tile.lane_shuffle cannot run in a group of `group_size` lanes (the
// size must be a multiple of 2 xor), or "" where it can: the backends'
// shared check.
std::string lane_shuffle_group_error(const ir::Operation& shuffle, std::int64_t group_size);
// The structured control-flow ops: tile.for, tile.if, tile.while.
bool is_control_flow(const ir::Operation& op);
// The buffer an op reads or writes (operand 0 of load_elem, store_elem,
// tile_load, tile_store, reduce_sum, and cp_async's destination), or nullptr.
ir::Value* accessed_buffer(const ir::Operation& op);
// True when `op` writes the buffer accessed_buffer() returns.
bool writes_buffer(const ir::Operation& op);

// The accumulation dtype of tile.reduce_sum over `storage`: fp32 for
// floating types of <= 32 bits, fp64 for fp64, int64 for integers and bool.
DType reduce_sum_accum(DType storage);

}  // namespace tessera::tile
