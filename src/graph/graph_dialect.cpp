// The Graph IR dialect: whole-tensor ops with shapes, policies and effects.
#include "graph/op_families.h"

namespace tessera::ir {

void register_graph_dialect(Registry& registry) {
  graph::register_elementwise_ops(registry);
}

}  // namespace tessera::ir
