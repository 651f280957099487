// The Graph IR dialect: whole-tensor ops with shapes, policies and effects.
#include "graph/op_families.h"

namespace tessera::ir {

void register_graph_dialect(Registry& registry) {
  graph::register_elementwise_ops(registry);
  graph::register_creation_ops(registry);
  graph::register_shape_ops(registry);
  graph::register_random_ops(registry);
  graph::register_cast_ops(registry);
  graph::register_reduction_ops(registry);
  graph::register_linalg_ops(registry);
  graph::register_sparse_ops(registry);
  graph::register_complex_ops(registry);
  graph::register_fft_ops(registry);
  graph::register_attention_ops(registry);
  graph::register_normalization_ops(registry);
  graph::register_autodiff_ops(registry);
  graph::register_collective_ops(registry);
  graph::register_lookup_ops(registry);
}

}  // namespace tessera::ir
