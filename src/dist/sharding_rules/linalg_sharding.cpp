// Sharding rules of graph.matmul and graph.gemm: a @ b over the last two
// dims, leading (batch) dims broadcast.
//
// - M keeps a's split and N b's: a column-split weight needs no
//   communication (Megatron's column-parallel layer).
// - A split contraction dim K (on either operand; the other is split to
//   match, for free) leaves each device a partial product: the result is
//   pending over K's axis (Megatron's row-parallel layer), summed only where
//   a full value is needed.
// - One pending operand gives a pending result (a product is linear in each
//   operand); two pending operands, or a pending axis that the result also
//   splits, settle first.
// - Two different splits of K, or one axis splitting two of the result's
//   dims, are errors naming both layouts.
#include "dist/sharding_rules/rule_support.h"

namespace tessera::dist::rules {

namespace {

ShardingPlan matmul_plan(const ShardingQuery& q) {
  const ir::Operation& op = q.op;
  const bool ta = op.attrs().has("transpose_a") && op.attrs().get_bool("transpose_a");
  const bool tb = op.attrs().has("transpose_b") && op.attrs().get_bool("transpose_b");
  const std::size_t ra = op.operand(0)->type().rank(), rb = op.operand(1)->type().rank();
  const std::size_t rank = op.result(0)->type().rank();
  const std::size_t a_m = ta ? ra - 1 : ra - 2, a_k = ta ? ra - 2 : ra - 1;
  const std::size_t b_k = tb ? rb - 1 : rb - 2, b_n = tb ? rb - 2 : rb - 1;
  Sharding a = q.operands[0], b = q.operands[1];

  const std::string& ka = a.dims[a_k];
  const std::string& kb = b.dims[b_k];
  if (!ka.empty() && !kb.empty() && ka != kb) {
    conflict(q, 0, 1, "split the contraction dim over different mesh axes ('" + ka + "' and '" + kb + "')");
  }
  const std::string k = ka.empty() ? kb : ka;
  Sharding res = replicated(rank);
  res.dims[rank - 2] = a.dims[a_m];
  res.dims[rank - 1] = b.dims[b_n];
  if (!res.dims[rank - 2].empty() && res.dims[rank - 2] == res.dims[rank - 1]) {
    conflict(q, 0, 1, "split the result's rows and columns over the same mesh axis '" + res.dims[rank - 1] + "'");
  }
  // Batch dims broadcast like an elementwise op's.
  const auto out = sizes_of(op.result(0));
  const auto sa = sizes_of(op.operand(0)), sb = sizes_of(op.operand(1));
  auto batch_of = [&](const Sharding& s, const std::vector<std::int64_t>& in, std::size_t operand) {
    const std::size_t nb = in.size() - 2, offset = (rank - 2) - nb;
    for (std::size_t d = 0; d < nb; ++d) {
      const std::string& ax = s.dims[d];
      if (ax.empty() || (in[d] == 1 && out[d + offset] != 1)) continue;
      std::string& slot = res.dims[d + offset];
      if (!slot.empty() && slot != ax) conflict(q, 0, 1, "split batch dim " + std::to_string(d + offset) + " differently");
      if (slot.empty() && res.dim_of(ax) >= 0) conflict(q, operand, operand, "splits two result dims over '" + ax + "'");
      slot = ax;
    }
  };
  batch_of(a, sa, 0);
  batch_of(b, sb, 1);
  if (!k.empty() && res.dim_of(k) >= 0) {
    conflict(q, 0, 1, "split the contraction dim and a result dim over the same mesh axis '" + k + "'");
  }
  // Pending sums: at most one operand keeps its, and only over axes the result does not use.
  auto fits = [&](const Sharding& s) {
    for (const auto& p : s.partial) {
      if (p == k || res.dim_of(p) >= 0) return false;
    }
    return true;
  };
  std::vector<std::string> pending;
  if (a.is_partial() && !b.is_partial() && fits(a)) {
    pending = a.partial;
  } else if (b.is_partial() && !a.is_partial() && fits(b)) {
    pending = b.partial;
  }
  auto need = [&](const Sharding& s, const std::vector<std::int64_t>& in, std::size_t m_or_n, std::size_t kd,
                  bool keep) {
    Sharding n = replicated(in.size());
    const std::size_t nb = in.size() - 2, offset = (rank - 2) - nb;
    for (std::size_t d = 0; d < nb; ++d) {
      if (!(in[d] == 1 && out[d + offset] != 1)) n.dims[d] = res.dims[d + offset];
    }
    n.dims[m_or_n] = m_or_n == a_m && &s == &a ? res.dims[rank - 2] : res.dims[rank - 1];
    n.dims[kd] = k;
    if (keep) n.partial = s.partial;
    return n;
  };
  ShardingPlan plan;
  plan.operands.push_back(need(a, sa, a_m, a_k, !pending.empty() && a.is_partial()));
  plan.operands.push_back(need(b, sb, b_n, b_k, !pending.empty() && b.is_partial()));
  res.partial = pending;
  if (!k.empty()) res.partial.push_back(k);
  plan.results.push_back(res);
  return plan;
}

}  // namespace

void register_linalg_sharding() {
  register_sharding_rule("graph.matmul", matmul_plan);
  register_sharding_rule("graph.gemm", matmul_plan);
}

}  // namespace tessera::dist::rules
