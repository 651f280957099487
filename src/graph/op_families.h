// One registration function per Graph IR op family; graph_dialect.cpp calls
// them all. Each family's ops (schema, inference, reference kernel) live in
// the matching <family>_ops.cpp.
#pragma once

#include "tessera/ir/dialect.h"

namespace tessera::graph {

void register_elementwise_ops(ir::Registry& registry);
void register_cast_ops(ir::Registry& registry);
void register_reduction_ops(ir::Registry& registry);
void register_linalg_ops(ir::Registry& registry);
void register_sparse_ops(ir::Registry& registry);
void register_complex_ops(ir::Registry& registry);
void register_fft_ops(ir::Registry& registry);
void register_attention_ops(ir::Registry& registry);
void register_normalization_ops(ir::Registry& registry);
void register_shape_ops(ir::Registry& registry);
void register_creation_ops(ir::Registry& registry);
void register_random_ops(ir::Registry& registry);
void register_autodiff_ops(ir::Registry& registry);
void register_collective_ops(ir::Registry& registry);
void register_lookup_ops(ir::Registry& registry);
// A collective's result on this thread: the identity over a one-member
// axis, else through the communicator of the thread's shard scope
// (tessera/dist/shard_scope.h). `op` is "graph.allreduce", "graph.all_gather"
// or "graph.reduce_scatter"; `attrs` the op's.
Tensor run_collective_op(const std::string& op, const ir::AttrMap& attrs, const Tensor& x);

}  // namespace tessera::graph
