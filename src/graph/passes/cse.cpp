// The `cse` pass: common subexpression elimination over Graph IR functions.
//
// Two pure ops with the same name, the same operands (the same values, in
// order) and identical attributes compute the same results, so the later
// one's uses are pointed at the earlier one and the later op is erased.
// Attributes compare bit for bit: graph.constant 0.0 and -0.0 differ, as do
// NaNs with different signs. Effectful ops never merge: two graph.rand with
// the same seed are two draws (they advance generator state in order), and
// state, collective and io ops are observable.
//
// Each block is walked forward; the earlier op of a pair dominates the later
// one because both are in the same block. Ops in nested blocks are only
// merged with ops of their own block.
#include <unordered_map>

#include "graph/passes/pass_support.h"

namespace tessera::graph {

namespace {

std::size_t hash_op(const ir::Operation& op) {
  std::size_t h = std::hash<const void*>{}(&op.def());
  for (const ir::Value* v : op.operands()) h = h * 31 + std::hash<const void*>{}(v);
  return h ^ (hash_attrs(op.attrs()) << 1);
}

bool equivalent(const ir::Operation& a, const ir::Operation& b) {
  if (&a.def() != &b.def() || a.operands() != b.operands() || a.num_results() != b.num_results()) return false;
  for (std::size_t i = 0; i < a.num_results(); ++i) {
    if (a.result(i)->type() != b.result(i)->type()) return false;
  }
  return identical_attrs(a.attrs(), b.attrs());
}

void cse_block(ir::Block& block) {
  std::unordered_multimap<std::size_t, ir::Operation*> seen;
  auto& ops = block.ops();
  for (auto it = ops.begin(); it != ops.end();) {
    auto current = it++;
    ir::Operation* op = current->get();
    if (!is_removable(*op)) continue;
    std::size_t h = hash_op(*op);
    ir::Operation* original = nullptr;
    auto [first, last] = seen.equal_range(h);
    for (auto m = first; m != last && !original; ++m) {
      if (equivalent(*m->second, *op)) original = m->second;
    }
    if (!original) {
      seen.emplace(h, op);
      continue;
    }
    for (std::size_t i = 0; i < op->num_results(); ++i) op->result(i)->replace_all_uses_with(original->result(i));
    // Erase through the iterator we hold (Block::erase would search for it).
    op->drop_operands();
    ops.erase(current);
  }
}

}  // namespace

ir::PassInfo make_cse_pass() {
  return ir::PassInfo{
      .name = "cse",
      .summary = "Merge pure ops with the same name, operands and attributes (effectful ops never merge).",
      .run = [](ir::Module& module) { for_each_block(module, cse_block); },
  };
}

}  // namespace tessera::graph
