// split-complex-sums (every executable): graph.sum and graph.mean of a
// complex operand become the sum (mean) of its real parts and of its
// imaginary parts, joined by graph.complex.
//
// The reference sums a complex tensor part by part, each part in the fixed
// order of the real sum at the part's accumulation type
// (docs/design/0016-complex-and-fft.md), so the rewritten graph computes the
// same bits, and its reductions are ordinary real ones that every target
// compiles (reduction lanes hold one real value). A sum whose rewritten
// result type would differ from the original (a policy the part ops do not
// reproduce) is left alone, and stays uncompiled with its clear error.
#include "tessera/ir/builder.h"
#include "tessera/schedule/passes.h"

namespace tessera::schedule {

int split_complex_sums(ir::Operation& func) {
  ir::Block& body = ir::function_body(func);
  std::vector<ir::Operation*> sums;
  for (const auto& op : body.ops()) {
    if ((op->name() == "graph.sum" || op->name() == "graph.mean") && op->num_operands() == 1 &&
        is_complex(op->operand(0)->type().dtype())) {
      sums.push_back(op.get());
    }
  }
  int rewritten = 0;
  for (ir::Operation* op : sums) {
    ir::OpBuilder builder(body);
    builder.set_insertion_point(body.find(op));
    const SourceLocation& at = op->location();
    ir::Value* x = op->operand(0);
    ir::Value* re = builder.create("graph.real", {x}, {}, at)->result(0);
    ir::Value* im = builder.create("graph.imag", {x}, {}, at)->result(0);
    ir::Value* sum_re = builder.create(op->name(), {re}, op->attrs(), at)->result(0);
    ir::Value* sum_im = builder.create(op->name(), {im}, op->attrs(), at)->result(0);
    ir::Operation* joined = builder.create("graph.complex", {sum_re, sum_im}, {}, at);
    if (joined->result(0)->type() != op->result(0)->type()) {
      // Not the original's type: undo, users first.
      for (ir::Value* v : {joined->result(0), sum_im, sum_re, im, re}) body.erase(v->defining_op());
      continue;
    }
    op->result(0)->replace_all_uses_with(joined->result(0));
    body.erase(op);
    ++rewritten;
  }
  return rewritten;
}

}  // namespace tessera::schedule
