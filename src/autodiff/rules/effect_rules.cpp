// Rules for ops whose derivative is fixed by their effect or type:
// - no derivative: comparisons, constant, iota, rand, randn, stop_gradient;
// - cast: the identity on tangents (rounding is treated as the identity, and
//   a cast to an integer or bool type has no derivative, which the engine
//   applies from the result type);
// - dropout: the same op with the same seed/offset/p on the tangent, so the
//   derivative uses exactly the forward's mask and scale (never new bits);
// - collectives: allreduce(sum/mean) and its transpose are the same
//   allreduce, all_gather and reduce_scatter transpose into each other;
//   all_to_all transposes into all_to_all with its dims swapped;
//   allreduce(max/min) passes the derivative to the members holding the
//   extreme, split equally between ties.
#include "autodiff/rules/rules.h"

namespace tessera::autodiff::rules {

namespace {

Values same_op(RuleContext& c, ir::Operation& op, ir::Value* t, const char* name = nullptr) {
  return {c.op(name ? name : op.name(), {t}, op.attrs())};
}

ir::AttrMap with_op(const ir::Operation& op, const char* reduce) {
  ir::AttrMap a = op.attrs();
  a.set("op", std::string(reduce));
  return a;
}

// allreduce(max/min) weights: [x == y] / (number of members holding y).
Value* extreme_weights(RuleContext& c, ir::Operation& op) {
  Value* x = c.primal(op.operand(0));
  Value* mask = indicator(c, c.op("graph.eq", {x, c.primal(op.result(0))}), x->type().policy);
  return div(c, mask, c.op("graph.allreduce", {mask}, with_op(op, "sum")));
}

}  // namespace

void register_effect_rules() {
  for (const char* name : {"graph.eq", "graph.ne", "graph.lt", "graph.le", "graph.gt", "graph.ge", "graph.constant",
                           "graph.iota", "graph.rand", "graph.randn", "graph.stop_gradient"}) {
    register_zero_rules(name);
  }
  register_builtin_jvp("graph.cast", [](RuleContext&, ir::Operation&, const Values& t) { return Values{t[0]}; });
  register_builtin_vjp("graph.cast", [](RuleContext&, ir::Operation&, const Values& ct) { return Values{ct[0]}; });
  register_builtin_jvp("graph.dropout",
                       [](RuleContext& c, ir::Operation& op, const Values& t) { return same_op(c, op, t[0]); });
  register_builtin_vjp("graph.dropout",
                       [](RuleContext& c, ir::Operation& op, const Values& ct) { return same_op(c, op, ct[0]); });

  register_builtin_jvp("graph.allreduce", [](RuleContext& c, ir::Operation& op, const Values& t) {
    const std::string& kind = op.attrs().get_string("op");
    if (kind == "sum" || kind == "mean") return same_op(c, op, t[0]);
    return Values{c.op("graph.allreduce", {mul(c, t[0], extreme_weights(c, op))}, with_op(op, "sum"))};
  });
  register_builtin_vjp("graph.allreduce", [](RuleContext& c, ir::Operation& op, const Values& ct) {
    const std::string& kind = op.attrs().get_string("op");
    if (kind == "sum" || kind == "mean") return same_op(c, op, ct[0]);
    Value* total = c.op("graph.allreduce", {ct[0]}, with_op(op, "sum"));
    return Values{mul(c, total, extreme_weights(c, op))};
  });
  register_builtin_jvp("graph.all_gather",
                       [](RuleContext& c, ir::Operation& op, const Values& t) { return same_op(c, op, t[0]); });
  register_builtin_vjp("graph.all_gather", [](RuleContext& c, ir::Operation& op, const Values& ct) {
    return same_op(c, op, ct[0], "graph.reduce_scatter");
  });
  register_builtin_jvp("graph.reduce_scatter",
                       [](RuleContext& c, ir::Operation& op, const Values& t) { return same_op(c, op, t[0]); });
  register_builtin_vjp("graph.reduce_scatter", [](RuleContext& c, ir::Operation& op, const Values& ct) {
    return same_op(c, op, ct[0], "graph.all_gather");
  });
  // reshard changes where values live, not what they are.
  register_builtin_jvp("graph.reshard",
                       [](RuleContext& c, ir::Operation& op, const Values& t) { return same_op(c, op, t[0]); });
  register_builtin_vjp("graph.reshard",
                       [](RuleContext& c, ir::Operation& op, const Values& ct) { return same_op(c, op, ct[0]); });
  // all_to_all is a permutation of the members' blocks: its transpose sends them back.
  register_builtin_jvp("graph.all_to_all",
                       [](RuleContext& c, ir::Operation& op, const Values& t) { return same_op(c, op, t[0]); });
  register_builtin_vjp("graph.all_to_all", [](RuleContext& c, ir::Operation& op, const Values& ct) {
    ir::AttrMap a = op.attrs();
    a.set("split_dim", op.attrs().get_int("concat_dim"));
    a.set("concat_dim", op.attrs().get_int("split_dim"));
    return Values{c.op("graph.all_to_all", {ct[0]}, a)};
  });
}

}  // namespace tessera::autodiff::rules
