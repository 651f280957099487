// The `dce` pass: dead code elimination over Graph IR functions.
//
// An op is dead when none of its results is used and running it has no
// effect besides computing them (OpDef::effect is pure). Random, state,
// collective and io ops are kept even when unused: a random op advances
// generator state others observe, the rest are observable or ordered.
// Terminators and ops holding regions are never erased.
//
// Each block is walked in reverse (users before the ops they use) and the
// walk repeats until a sweep erases nothing, so whole dead chains go at once.
#include "graph/passes/pass_support.h"

namespace tessera::graph {

ir::PassInfo make_dce_pass() {
  return ir::PassInfo{
      .name = "dce",
      .summary = "Erase pure ops whose results are unused (effectful ops are kept).",
      .run = [](ir::Module& module) { for_each_block(module, [](ir::Block& block) { erase_dead_ops(block); }); },
  };
}

}  // namespace tessera::graph
