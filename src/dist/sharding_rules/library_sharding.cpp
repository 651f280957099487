// Sharding rules of the library ops (sparse products, attention, FFTs).
//
// - graph.spmm, graph.sddmm: every operand whole. Their pattern operands
//   index the rows and columns of the whole matrix, so a split operand would
//   need renumbered indices; a matrix distributed by rows runs per shard
//   instead, through index launches over a tessera.sparse.DistCSR.
// - graph.flash_attn, graph.flash_attn_bwd: the batch dim (0) may stay split
//   (every batch element attends on its own), the same split for every
//   operand and result; heads, sequence and head dims are made whole. With
//   dropout everything is whole: the mask draws from each entry's global
//   index in [B, Hq, Sq, Sk], which a shard does not know.
// - graph.fft, graph.fft_resize, graph.fft_passes: every line along the transformed axis is
//   one transform, so that axis is made whole (gathered when it arrives
//   split) and every other dim keeps the operand's split, in the result too.
//   A pending sum is settled first: the transforms are linear, but rounding
//   each term's transform separately would move results away from the
//   one-device program (as for the elementwise ops).
#include "dist/sharding_rules/rule_support.h"

namespace tessera::dist::rules {

namespace {

ShardingPlan attention_plan(const ShardingQuery& q) {
  const ir::Operation& op = q.op;
  if (op.attrs().has("dropout") && op.attrs().get_real("dropout") != 0.0) return replicate_all(q);
  // The batch split of q (settled), or none.
  const std::string batch = settled(q.operands[0]).dims.at(0);
  auto with_batch = [&](std::size_t rank) {
    Sharding s = replicated(rank);
    s.dims[0] = batch;
    return s;
  };
  ShardingPlan plan;
  for (std::size_t i = 0; i < op.num_operands(); ++i) plan.operands.push_back(with_batch(op.operand(i)->type().rank()));
  for (std::size_t i = 0; i < op.num_results(); ++i) plan.results.push_back(with_batch(op.result(i)->type().rank()));
  return plan;
}

ShardingPlan fft_plan(const ShardingQuery& q) {
  const ir::Operation& op = q.op;
  const std::size_t rank = op.operand(0)->type().rank();
  auto axis = op.attrs().get_int("axis");
  if (axis < 0) axis += static_cast<std::int64_t>(rank);
  Sharding s = settled(q.operands[0]);
  s.dims.at(static_cast<std::size_t>(axis)) = "";
  ShardingPlan plan;
  plan.operands.push_back(s);
  plan.results.push_back(s);
  return plan;
}

}  // namespace

void register_library_sharding() {
  register_sharding_rule("graph.fft", fft_plan);
  register_sharding_rule("graph.fft_resize", fft_plan);
  register_sharding_rule("graph.fft_passes", fft_plan);
  register_sharding_rule("graph.spmm", replicate_all);
  register_sharding_rule("graph.sddmm", replicate_all);
  register_sharding_rule("graph.flash_attn", attention_plan);
  register_sharding_rule("graph.flash_attn_bwd", attention_plan);
}

}  // namespace tessera::dist::rules
