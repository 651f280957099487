// split-complex-parts (every executable): ops that no template runs on
// complex lanes become the same ops on the real parts and on the imaginary
// parts, joined by graph.complex:
// - graph.sum and graph.mean of a complex operand. The reference sums a
//   complex tensor part by part, each part in the fixed order of the real
//   sum at the part's accumulation type (docs/design/0016-complex-and-fft.md),
//   so the rewritten graph computes the same bits, and its reductions are
//   ordinary real ones that every target compiles;
// - the ops that move elements without arithmetic: graph.concat,
//   graph.broadcast_to, graph.gather and graph.slice_embed (the gradient of
//   a slice, zeros around it) of complex data (gather's indices stay as
//   they are). Moving each part moves the element exactly, and it
//   reaches complex128, whose 16-byte elements have no 64-bit code for the
//   copy template to move.
// A rewrite whose result type would differ from the original (a policy the
// part ops do not reproduce) is undone, and the op stays uncompiled with its
// clear error.
#include "tessera/ir/builder.h"
#include "tessera/schedule/passes.h"

namespace tessera::schedule {

namespace {

bool splits(const ir::Operation& op) {
  const std::string_view n = op.name();
  if ((n == "graph.sum" || n == "graph.mean") && op.num_operands() == 1) return is_complex(op.operand(0)->type().dtype());
  if (n == "graph.concat" || n == "graph.broadcast_to" || n == "graph.gather" || n == "graph.slice_embed") {
    return op.num_results() == 1 && is_complex(op.result(0)->type().dtype());
  }
  return false;
}

}  // namespace

int split_complex_parts(ir::Operation& func) {
  ir::Block& body = ir::function_body(func);
  std::vector<ir::Operation*> found;
  for (const auto& op : body.ops())
    if (splits(*op)) found.push_back(op.get());
  int rewritten = 0;
  for (ir::Operation* op : found) {
    ir::OpBuilder builder(body);
    builder.set_insertion_point(body.find(op));
    const SourceLocation& at = op->location();
    std::vector<ir::Operation*> added;  // in creation order, for an undo
    auto create = [&](std::string_view name, std::vector<ir::Value*> operands, const ir::AttrMap& attrs) {
      added.push_back(builder.create(name, std::move(operands), attrs, at));
      return added.back()->result(0);
    };
    // Complex operands become their parts; the others (indices) stay.
    std::vector<ir::Value*> re_operands, im_operands;
    for (ir::Value* v : op->operands()) {
      if (!is_complex(v->type().dtype())) {
        re_operands.push_back(v);
        im_operands.push_back(v);
        continue;
      }
      re_operands.push_back(create("graph.real", {v}, {}));
      im_operands.push_back(create("graph.imag", {v}, {}));
    }
    ir::Value* re = create(op->name(), re_operands, op->attrs());
    ir::Value* im = create(op->name(), im_operands, op->attrs());
    ir::Value* joined = create("graph.complex", {re, im}, {});
    if (joined->type() != op->result(0)->type()) {
      // Not the original's type: undo, users first.
      for (auto it = added.rbegin(); it != added.rend(); ++it) body.erase(*it);
      continue;
    }
    op->result(0)->replace_all_uses_with(joined);
    body.erase(op);
    ++rewritten;
  }
  return rewritten;
}

}  // namespace tessera::schedule
