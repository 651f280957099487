// Registers the Schedule IR passes by name (tessera-opt --pass NAME) and the
// whole Graph IR -> Schedule IR pipeline.
#include "tessera/ir/pass.h"
#include "tessera/schedule/passes.h"
#include "tessera/tile/tile_dialect.h"

namespace tessera::schedule {
namespace {

// Graph IR functions: not Tile IR kernels.
void for_each_graph_function(ir::Module& m, const std::function<void(ir::Operation&)>& f) {
  for (auto& func : m.functions()) {
    if (!tile::is_kernel(*func)) f(*func);
  }
}

}  // namespace

void lower_to_schedule(ir::Module& module, const VariantChooser& chooser) {
  const bool prologues = column_prologues_enabled();
  for_each_graph_function(module, [&](ir::Operation& f) {
    partition(f, prologues);
    choose_variants(f, chooser);
    assign_tiles(f);
    plan_buffers(f);
  });
}

void register_schedule_passes() {
  ir::register_pass(ir::PassInfo{"schedule-partition",
                                 "Partitions Graph IR functions into schedule.kernel fusion groups (elementwise chains, "
                                 "GEMM epilogues, reductions with their consumers, one kernel per normalization op).",
                                 [](ir::Module& m) {
                                   const bool prologues = column_prologues_enabled();
                                   for_each_graph_function(m, [&](ir::Operation& f) { partition(f, prologues); });
                                 }});
  ir::register_pass(ir::PassInfo{
      "schedule-choose-variants", "Records each kernel's implementation (tile, view, constant or none).",
      [](ir::Module& m) { for_each_graph_function(m, [](ir::Operation& f) { choose_variants(f); }); }});
  ir::register_pass(ir::PassInfo{"schedule-tile", "Sets each kernel's tiling knobs (the tile attribute).",
                                 [](ir::Module& m) { for_each_graph_function(m, assign_tiles); }});
  ir::register_pass(ir::PassInfo{
      "schedule-plan-buffers",
      "Gives each kernel result a buffer slot: reuse after the last reader, in place for elementwise kernels, "
      "-1 for function results.",
      [](ir::Module& m) { for_each_graph_function(m, plan_buffers); }});
  ir::register_pass(ir::PassInfo{
      "schedule-tabulate-functions",
      "Graph IR: chains of elementwise ops of one value of at most 16 bits (with a transcendental op) become "
      "graph.lookup of a table computed by the reference executor over every code.",
      [](ir::Module& m) { for_each_graph_function(m, [](ir::Operation& f) { tabulate_functions(f); }); }});
  ir::register_pass(ir::PassInfo{"schedule-pipeline",
                                 "Graph IR -> Schedule IR: schedule-partition, schedule-choose-variants, schedule-tile, "
                                 "schedule-plan-buffers.",
                                 [](ir::Module& m) { lower_to_schedule(m); }});
}

}  // namespace tessera::schedule
