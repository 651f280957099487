// The `constant-fold` pass: evaluates pure ops on constants at compile time.
//
// An op folds when it is pure, has at least one operand and every operand
// is a graph.constant, each result type is static with at most
// kMaxFoldElements (65536) elements, and the op has a reference kernel. The
// kernel computes the results exactly as the executor would at run time
// (same attributes, same result types and policies), and each result is
// replaced by a graph.constant holding its decoded values with the same
// policy, so executing the folded function gives the same encodings.
//
// Not folded: ops without operands (graph.iota is already as small as it
// gets), results the kernel rejects (the error then surfaces when the
// program runs, as it would have), and results a constant cannot hold
// bit for bit: int64 values beyond 2^53, NaNs whose sign or payload the
// text form would lose. The size limit keeps constants (which are printed
// in full) from swamping the IR.
#include <algorithm>
#include <cmath>

#include "graph/passes/pass_support.h"
#include "tessera/graph/constants.h"
#include "tessera/ir/dialect.h"
#include "tessera/numerics/convert.h"

namespace tessera::graph {

namespace {

constexpr std::int64_t kMaxFoldElements = 65536;

bool foldable_type(const ir::Type& type) {
  auto sizes = ir::static_sizes(type.shape);
  if (!sizes) return false;
  std::int64_t n = 1;
  for (auto s : *sizes) {
    n *= s;
    if (n > kMaxFoldElements) return false;
  }
  return true;
}

Tensor evaluate_constant(const ir::Operation& c) {
  const ir::Type& type = c.result()->type();
  auto results = ir::require_reference(c.def())(ir::KernelCall{{}, c.attrs(), std::span<const ir::Type>(&type, 1)});
  return results.at(0);
}

// A negative NaN would print as "nan" and come back positive.
bool has_negative_nan(const Tensor& t) {
  if (!is_float(t.dtype())) return false;
  for (double v : t.to_values()) {
    if (std::isnan(v) && std::signbit(v)) return true;
  }
  return false;
}

// Folds `op` (which sits at `pos`); returns whether it did.
bool fold(ir::Block& block, ir::Block::OpList::iterator pos, ir::Operation& op) {
  if (!is_removable(op) || op.num_operands() == 0 || !op.def().reference) return false;
  if (op.name() == "graph.constant") return false;
  for (const ir::Value* v : op.operands()) {
    if (!defining_constant(v)) return false;
  }
  std::vector<ir::Type> types;
  for (const ir::Value* r : op.results()) {
    if (!foldable_type(r->type())) return false;
    types.push_back(r->type());
  }
  std::vector<Tensor> results;
  try {
    std::vector<Tensor> inputs;
    for (const ir::Value* v : op.operands()) inputs.push_back(evaluate_constant(*v->defining_op()));
    results = op.def().reference(ir::KernelCall{inputs, op.attrs(), types});
  } catch (const Error&) {
    return false;
  }
  if (results.size() != types.size()) return false;
  for (std::size_t i = 0; i < results.size(); ++i) {
    auto want = ir::static_sizes(types[i].shape);
    if (results[i].shape() != *want || results[i].policy() != types[i].policy) return false;
    if (has_negative_nan(results[i])) return false;
  }
  // Build every replacement before touching uses, so a result a constant
  // cannot hold leaves the op as it was.
  ir::OpBuilder builder(block);
  builder.set_insertion_point(pos);
  std::vector<ir::Operation*> constants;
  try {
    for (const Tensor& t : results) constants.push_back(build_constant(builder, t, op.location()));
  } catch (const Error&) {
    for (auto c = constants.rbegin(); c != constants.rend(); ++c) block.erase(*c);
    return false;
  }
  std::vector<ir::Operation*> operand_defs;
  for (ir::Value* v : op.operands()) {
    if (std::find(operand_defs.begin(), operand_defs.end(), v->defining_op()) == operand_defs.end())
      operand_defs.push_back(v->defining_op());
  }
  for (std::size_t i = 0; i < constants.size(); ++i) op.result(i)->replace_all_uses_with(constants[i]->result());
  block.erase(&op);
  // Operand constants nothing else uses are dead now.
  for (ir::Operation* c : operand_defs) {
    if (c->parent_block() == &block && c->results_unused()) block.erase(c);
  }
  return true;
}

void fold_block(ir::Block& block) {
  auto& ops = block.ops();
  for (auto it = ops.begin(); it != ops.end();) {
    auto current = it++;
    fold(block, current, **current);
  }
}

}  // namespace

ir::PassInfo make_constant_fold_pass() {
  return ir::PassInfo{
      .name = "constant-fold",
      .summary = "Evaluate pure ops whose operands are all constants (results <= 65536 elements) into constants.",
      .run = [](ir::Module& module) { for_each_block(module, fold_block); },
  };
}

}  // namespace tessera::graph
