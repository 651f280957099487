// The Tile IR passes (docs/design/0003-tile-ir.md), registered with the pass
// manager by name the first time any pass is looked up:
//
//   tile-verify-sync   group-cooperative ops only under uniform control flow
//                      (and with uniform operands); no read of a shared buffer
//                      while a cp_async into it may be in flight
//   tile-plan-shared   byte offsets for every tile.smem_alloc (128-aligned,
//                      reusing the space of buffers whose lifetimes do not
//                      overlap); the total goes to the kernel's `shared_used`
//   tile-pipeline      software pipelining of tile.for {prefetch = N}
//   tile-scalarize-vectors
//                      tile.load_vector / tile.store_vector -> their
//                      element ops (for backends without wide accesses)
//   tile-expand-narrow tile.narrow_unary -> its double formula (for
//                      backends without the certified fp32 evaluation)
//
// Each works on every function of a module; the functions below run one
// pass on one function, for backends that call them directly.
#pragma once

#include <string_view>

#include "tessera/ir/ir.h"

namespace tessera::tile {

void register_tile_passes();

// Raises KernelTypeError (TE4001) at the offending op.
void verify_sync(const ir::Operation& func);
// Returns the planned total in bytes; raises CompileError naming the
// allocation and both sizes when the total exceeds the kernel's budget.
std::int64_t plan_shared(ir::Operation& func);
// Returns how many loops were pipelined; loops left unchanged get a
// `remark` attribute saying why.
int pipeline_loops(ir::Operation& func);
// Returns how many vector ops were rewritten.
int scalarize_vectors(ir::Operation& func);
// Returns how many tile.narrow_unary ops were expanded.
int expand_narrow_unaries(ir::Operation& func);
// Whether `func` holds an op named `name` (at any depth).
bool contains_op(const ir::Operation& func, std::string_view name);
// The kernel language's passes on one kernel, in their order: verify-sync,
// pipeline, verify-sync again (pipelining adds copies and waits), then
// plan-shared (pipelining adds shared buffers, so memory is planned last).
void run_kernel_passes(ir::Operation& func);

}  // namespace tessera::tile
