// JVP and VJP rules of graph.gemm and graph.matmul. With A = op(a), B = op(b)
// (op = transpose when the flag is set) and Y = A B: dA = ct B^T, dB = A^T ct,
// and the gradient of a is dA or dA^T. Each case is one gemm with flags, so
// no transposes are materialized. Broadcast batch dims are summed back by the
// engine.
#include "autodiff/rules/rules.h"

namespace tessera::autodiff::rules {

namespace {

Value* gemm(RuleContext& c, Value* a, Value* b, bool ta, bool tb) {
  return c.op("graph.gemm", {a, b}, ir::AttrMap{{"transpose_a", ta}, {"transpose_b", tb}});
}

std::pair<bool, bool> flags(const ir::Operation& op) {
  if (op.name() == "graph.matmul") return {false, false};
  return {op.attrs().get_bool("transpose_a"), op.attrs().get_bool("transpose_b")};
}

Values gemm_jvp(RuleContext& c, ir::Operation& op, const Values& t) {
  auto [ta, tb] = flags(op);
  Value* out = t[0] ? gemm(c, t[0], c.primal(op.operand(1)), ta, tb) : nullptr;
  return Values{add_maybe(c, out, t[1] ? gemm(c, c.primal(op.operand(0)), t[1], ta, tb) : nullptr)};
}

Values gemm_vjp(RuleContext& c, ir::Operation& op, const Values& ct) {
  auto [ta, tb] = flags(op);
  Value* a = c.product_operand(op.operand(0));
  Value* b = c.product_operand(op.operand(1));
  Value* g = ct[0];
  if (!ta && !tb) return {gemm(c, g, b, false, true), gemm(c, a, g, true, false)};
  if (!ta && tb) return {gemm(c, g, b, false, false), gemm(c, g, a, true, false)};
  if (ta && !tb) return {gemm(c, b, g, false, true), gemm(c, a, g, false, false)};
  return {gemm(c, b, g, true, true), gemm(c, g, a, true, true)};
}

}  // namespace

void register_linalg_rules() {
  for (const char* name : {"graph.gemm", "graph.matmul"}) {
    register_builtin_jvp(name, gemm_jvp);
    register_builtin_vjp(name, gemm_vjp);
  }
}

}  // namespace tessera::autodiff::rules
