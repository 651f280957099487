// Sharding rules of normalizations (softmax_safe, softmax_linear,
// layernorm_safe, rmsnorm_safe, norm_linear, logsumexp): the normalized
// `axis` must be whole on every device (it is gathered when split), the
// other dims keep their splits, gamma and beta are whole, and pending sums
// settle first (a normalization needs full values).
#include <algorithm>

#include "dist/sharding_rules/rule_support.h"

namespace tessera::dist::rules {

namespace {

ShardingPlan normalization_plan(const ShardingQuery& q) {
  const ir::Operation& op = q.op;
  const std::size_t rank = op.operand(0)->type().rank();
  const std::size_t axis = axis_of(op.attrs().get_int("axis"), rank);
  // Operands of x's rank share its dims; lower-rank parameters are whole.
  ShardingQuery same{op, {}, q.mesh};
  for (std::size_t i = 0; i < op.num_operands(); ++i) {
    Sharding s = settled(q.operands[i]);
    if (op.operand(i)->type().rank() != rank) s = replicated(s.dims.size());
    same.operands.push_back(std::move(s));
  }
  ShardingPlan plan = broadcast_plan(same, /*linear=*/false, {axis});
  for (std::size_t i = 0; i < op.num_operands(); ++i) {
    if (op.operand(i)->type().rank() != rank) plan.operands[i] = replicated(op.operand(i)->type().rank());
  }
  return plan;
}

ShardingPlan logsumexp_plan(const ShardingQuery& q) {
  const std::size_t rank = q.op.operand(0)->type().rank();
  const std::size_t axis = axis_of(q.op.attrs().get_int("axis"), rank);
  Sharding in = settled(q.operands[0]);
  in.dims[axis].clear();
  Sharding out;
  for (std::size_t d = 0; d < rank; ++d) {
    if (d != axis) out.dims.push_back(in.dims[d]);
    else if (q.op.attrs().get_bool("keepdims")) out.dims.emplace_back();
  }
  return ShardingPlan{{in}, {out}, {}, {}};
}

}  // namespace

void register_normalization_sharding() {
  for (const char* name : {"softmax_safe", "softmax_linear", "layernorm_safe", "rmsnorm_safe", "norm_linear"}) {
    register_sharding_rule(std::string("graph.") + name, normalization_plan);
  }
  register_sharding_rule("graph.logsumexp", logsumexp_plan);
}

}  // namespace tessera::dist::rules
