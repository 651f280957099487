// JVP and VJP rules of graph.spmm and graph.sddmm (graph/sparse_ops.cpp).
//
// Both ops are bilinear in their two dense operands, so a JVP is the op
// applied to each tangent with the other primal, summed. The VJPs:
//
//   C = spmm(v, B):  dv = sddmm(dC, B^T) at A's pattern
//                    dB = A^T dC = spmm(gather(v, t_perm), dC) over the
//                         transposed pattern
//   v = sddmm(X, Y): dX = spmm(dv, Y^T) at the pattern
//                    dY = (A_dv^T X)^T = transpose(spmm(gather(dv, t_perm), X)
//                         over the transposed pattern)
//
// The transposed pattern's own transpose is the original one with t_inv as
// its permutation, so the rules' spmm ops carry a full pattern too and rules
// of rules exist. Every product stays a row-split kernel: no atomics, and
// the same fixed order as the forward. The integer pattern operands get no
// cotangent.
#include "autodiff/rules/rules.h"

namespace tessera::autodiff::rules {

namespace {

constexpr std::size_t kPattern = 8;  // start, end, col, t_start, t_end, t_col, t_perm, t_inv

Values pattern_of(RuleContext& c, ir::Operation& op) {
  Values p;
  for (std::size_t i = 0; i < kPattern; ++i) p.push_back(c.primal(op.operand(2 + i)));
  return p;
}

// The pattern transposed: (t_start, t_end, t_col, start, end, col, t_inv, t_perm).
Values transposed(const Values& p) {
  return {p[3], p[4], p[5], p[0], p[1], p[2], p[7], p[6]};
}

Value* sparse_op(RuleContext& c, const char* name, Value* a, Value* b, const Values& pattern) {
  Values operands = {a, b};
  operands.insert(operands.end(), pattern.begin(), pattern.end());
  return c.op(name, operands);
}

Value* transpose2(RuleContext& c, Value* x) {
  return c.op("graph.transpose", {x}, ir::AttrMap{{"perm", std::vector<std::int64_t>{1, 0}}});
}

Value* permuted(RuleContext& c, Value* v, const Values& p) {
  return c.op("graph.gather", {v, p[6]}, ir::AttrMap{{"axis", std::int64_t{0}}});
}

Values with_pattern_zeros(Value* a, Value* b) {
  Values out = {a, b};
  out.resize(2 + kPattern, nullptr);
  return out;
}

Values bilinear_jvp(const char* name, RuleContext& c, ir::Operation& op, const Values& t) {
  const Values p = pattern_of(c, op);
  Value* a = c.primal(op.operand(0));
  Value* b = c.primal(op.operand(1));
  Value* out = t[0] ? sparse_op(c, name, t[0], b, p) : nullptr;
  return Values{add_maybe(c, out, t[1] ? sparse_op(c, name, a, t[1], p) : nullptr)};
}

Values spmm_vjp(RuleContext& c, ir::Operation& op, const Values& ct) {
  const Values p = pattern_of(c, op);
  Value* values = c.primal(op.operand(0));
  Value* b = c.primal(op.operand(1));
  Value* dvalues = sparse_op(c, "graph.sddmm", ct[0], transpose2(c, b), p);
  Value* db = sparse_op(c, "graph.spmm", permuted(c, values, p), ct[0], transposed(p));
  return with_pattern_zeros(dvalues, db);
}

Values sddmm_vjp(RuleContext& c, ir::Operation& op, const Values& ct) {
  const Values p = pattern_of(c, op);
  Value* x = c.primal(op.operand(0));
  Value* y = c.primal(op.operand(1));
  Value* dx = sparse_op(c, "graph.spmm", ct[0], transpose2(c, y), p);
  Value* dy = transpose2(c, sparse_op(c, "graph.spmm", permuted(c, ct[0], p), x, transposed(p)));
  return with_pattern_zeros(dx, dy);
}

}  // namespace

void register_sparse_rules() {
  register_builtin_jvp("graph.spmm", [](RuleContext& c, ir::Operation& op, const Values& t) {
    return bilinear_jvp("graph.spmm", c, op, t);
  });
  register_builtin_jvp("graph.sddmm", [](RuleContext& c, ir::Operation& op, const Values& t) {
    return bilinear_jvp("graph.sddmm", c, op, t);
  });
  register_builtin_vjp("graph.spmm", spmm_vjp);
  register_builtin_vjp("graph.sddmm", sddmm_vjp);
}

}  // namespace tessera::autodiff::rules
