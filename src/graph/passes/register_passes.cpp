// Registers the Graph IR passes with the pass manager by name.
#include "graph/passes/graph_passes.h"
#include "graph/passes/pass_support.h"
#include "autodiff/passes.h"
#include "tessera/dist/sharding.h"

namespace tessera::graph {

void register_graph_passes() {
  ir::register_pass(make_dce_pass());
  ir::register_pass(make_cse_pass());
  ir::register_pass(make_constant_fold_pass());
  ir::register_pass(make_canonicalize_pass());
  ir::register_pass(make_inline_calls_pass());
  autodiff::register_autodiff_passes();
  dist::register_partition_pass();
}

}  // namespace tessera::graph
