// Registers the Tile IR passes with the pass manager by name; each runs its
// per-function entry point (tessera/tile/passes.h) on every function that
// holds Tile IR (graph functions are left alone).
#include "tessera/ir/pass.h"
#include "tessera/tile/passes.h"
#include "tessera/tile/tile_dialect.h"

namespace tessera::tile {
namespace {

bool holds_tile_ir(const ir::Block& block) {
  for (const auto& op : block.ops()) {
    if (op->def().dialect() == "tile") return true;
  }
  for (std::size_t i = 0; i < block.num_arguments(); ++i) {
    if (!block.argument(i)->type().is_tensor()) return true;
  }
  return false;
}

void for_each_tile_function(ir::Module& module, const std::function<void(ir::Operation&)>& f) {
  for (auto& func : module.functions()) {
    if (is_kernel(*func) || holds_tile_ir(ir::function_body(*func))) f(*func);
  }
}

}  // namespace

void run_kernel_passes(ir::Operation& func) {
  verify_sync(func);
  pipeline_loops(func);
  verify_sync(func);
  plan_shared(func);
}

void register_tile_passes() {
  ir::register_pass(ir::PassInfo{
      "tile-verify-sync",
      "Checks that group-cooperative ops run under uniform control and that no shared buffer is read while a "
      "cp_async into it may be in flight.",
      [](ir::Module& m) { for_each_tile_function(m, [](ir::Operation& f) { verify_sync(f); }); }});
  ir::register_pass(ir::PassInfo{
      "tile-plan-shared",
      "Gives every tile.smem_alloc a 128-aligned byte offset, reusing space across disjoint lifetimes, within the "
      "kernel's shared_bytes.",
      [](ir::Module& m) { for_each_tile_function(m, [](ir::Operation& f) { plan_shared(f); }); }});
  ir::register_pass(ir::PassInfo{
      "tile-pipeline",
      "Software-pipelines tile.for {prefetch = N} loops that begin with cp_async copies; others get a remark.",
      [](ir::Module& m) { for_each_tile_function(m, [](ir::Operation& f) { pipeline_loops(f); }); }});
  ir::register_pass(ir::PassInfo{
      "tile-scalarize-vectors",
      "Rewrites each tile.load_vector and tile.store_vector into its element ops (tile.load_elem, tile.store_elem) "
      "at start + k.",
      [](ir::Module& m) { for_each_tile_function(m, [](ir::Operation& f) { scalarize_vectors(f); }); }});
  ir::register_pass(ir::PassInfo{
      "tile-expand-narrow",
      "Rewrites each tile.narrow_unary into its double formula: casts to fp64, the function, and roundings to fp32 "
      "and to the op's `to`.",
      [](ir::Module& m) { for_each_tile_function(m, [](ir::Operation& f) { expand_narrow_unaries(f); }); }});
}

}  // namespace tessera::tile
