// JVP and VJP rules of the elementwise ops (graph/elementwise_ops.cpp,
// graph.erf): arithmetic, math, activations, where. Comparisons have zero
// rules (effect_rules.cpp).
//
// Unary ops are given by their derivative f'(x) as Graph IR (in terms of
// the op's operand x and result y, cast to the tangent policy): the JVP is
// t * f'(x) and the VJP ct * f'(x). Binary ops broadcast; the engine sums
// cotangents back to each operand's shape. Conventions at kinks follow the
// common ones: relu'(0) = 0, |x|'(0) = 0, maximum/minimum split the
// derivative equally between tied operands, and the log in pow's derivative
// with respect to the exponent is taken at 1 where the base is 0.
#include <cmath>
#include <numbers>

#include "autodiff/rules/rules.h"

namespace tessera::autodiff::rules {

namespace {

using Deriv = std::function<Value*(RuleContext&, ir::Operation&)>;

Value* x_of(RuleContext& c, ir::Operation& op) {
  return c.primal(op.operand(0));
}
Value* y_of(RuleContext& c, ir::Operation& op) {
  return c.primal(op.result(0));
}

void unary(const std::string& name, Deriv d) {
  register_builtin_jvp(
      name, [d](RuleContext& c, ir::Operation& op, const Values& t) { return Values{mul(c, t[0], d(c, op))}; });
  register_builtin_vjp(
      name, [d](RuleContext& c, ir::Operation& op, const Values& ct) { return Values{mul(c, ct[0], d(c, op))}; });
}

// Registers rules from the partial derivatives (da, db) of a binary op.
using Partials = std::function<std::pair<Value*, Value*>(RuleContext&, ir::Operation&)>;
void binary(const std::string& name, Partials d) {
  register_builtin_jvp(name, [d](RuleContext& c, ir::Operation& op, const Values& t) {
    auto [da, db] = d(c, op);
    Value* out = t[0] ? mul(c, t[0], da) : nullptr;
    return Values{add_maybe(c, out, t[1] ? mul(c, t[1], db) : nullptr)};
  });
  register_builtin_vjp(name, [d](RuleContext& c, ir::Operation& op, const Values& ct) {
    auto [da, db] = d(c, op);
    return Values{mul(c, ct[0], da), mul(c, ct[0], db)};
  });
}

Value* cmp(RuleContext& c, const char* name, Value* a, Value* b) {
  return c.op(std::string("graph.") + name, {a, b});
}

// maximum/minimum: weight of the lhs is 1 where it wins, 1/2 at a tie, else 0.
std::pair<Value*, Value*> extremum_partials(RuleContext& c, ir::Operation& op, const char* wins) {
  Value* a = c.primal(op.operand(0));
  Value* b = c.primal(op.operand(1));
  const NumericsPolicy p = a->type().policy;
  Value* tie = c.op("graph.where", {cmp(c, "eq", a, b), c.scalar(0.5, p), c.scalar(0.0, p)});
  Value* wa = c.op("graph.where", {cmp(c, wins, a, b), c.scalar(1.0, p), tie});
  return {wa, sub(c, c.scalar(1.0, p), wa)};
}

}  // namespace

Value* add_maybe(RuleContext& c, Value* a, Value* b) {
  if (!a) return b;
  if (!b) return a;
  return add(c, a, b);
}

Value* indicator(RuleContext& c, Value* cond, const NumericsPolicy& p) {
  return c.op("graph.where", {cond, c.scalar(1.0, p), c.scalar(0.0, p)});
}

void register_elementwise_rules() {
  // add / sub / neg: linear, no primal values needed.
  register_builtin_jvp(
      "graph.add", [](RuleContext& c, ir::Operation&, const Values& t) { return Values{add_maybe(c, t[0], t[1])}; });
  register_builtin_vjp("graph.add", [](RuleContext&, ir::Operation&, const Values& ct) {
    return Values{ct[0], ct[0]};
  });
  register_builtin_jvp("graph.sub", [](RuleContext& c, ir::Operation&, const Values& t) {
    if (!t[1]) return Values{t[0]};
    return Values{t[0] ? sub(c, t[0], t[1]) : neg(c, t[1])};
  });
  register_builtin_vjp("graph.sub", [](RuleContext& c, ir::Operation&, const Values& ct) {
    return Values{ct[0], neg(c, ct[0])};
  });
  register_builtin_jvp("graph.neg",
                       [](RuleContext& c, ir::Operation&, const Values& t) { return Values{neg(c, t[0])}; });
  register_builtin_vjp("graph.neg",
                       [](RuleContext& c, ir::Operation&, const Values& ct) { return Values{neg(c, ct[0])}; });

  binary("graph.mul", [](RuleContext& c, ir::Operation& op) {
    return std::pair{c.primal(op.operand(1)), c.primal(op.operand(0))};
  });
  // div: d/da = 1/b, d/db = -y/b; written as divisions to stay one rounding each.
  register_builtin_jvp("graph.div", [](RuleContext& c, ir::Operation& op, const Values& t) {
    Value* b = c.primal(op.operand(1));
    Value* num = t[1] ? mul(c, t[1], y_of(c, op)) : nullptr;
    num = t[0] ? (num ? sub(c, t[0], num) : t[0]) : neg(c, num);
    return Values{div(c, num, b)};
  });
  register_builtin_vjp("graph.div", [](RuleContext& c, ir::Operation& op, const Values& ct) {
    Value* ca = div(c, ct[0], c.primal(op.operand(1)));
    return Values{ca, neg(c, mul(c, ca, y_of(c, op)))};
  });
  binary("graph.pow", [](RuleContext& c, ir::Operation& op) {
    Value* a = c.primal(op.operand(0));
    Value* b = c.primal(op.operand(1));
    Value* y = y_of(c, op);
    const NumericsPolicy p = a->type().policy;
    Value* da = mul(c, b, c.op("graph.pow", {a, sub(c, b, c.scalar(1.0, p))}));
    Value* safe_a = c.op("graph.where", {cmp(c, "eq", a, c.scalar(0.0, p)), c.scalar(1.0, p), a});
    Value* db = mul(c, y, c.op("graph.log", {safe_a}));
    return std::pair{da, db};
  });
  binary("graph.maximum", [](RuleContext& c, ir::Operation& op) { return extremum_partials(c, op, "gt"); });
  binary("graph.minimum", [](RuleContext& c, ir::Operation& op) { return extremum_partials(c, op, "lt"); });

  // |x|: sign(x) for real x. For complex z the rules are complex_rules.cpp's
  // (d|z| = real(conj(z) dz) / |z|, not a complex multiple of dz).
  auto abs_sign = [](RuleContext& c, ir::Operation& op) {
    Value* x = x_of(c, op);
    const NumericsPolicy p = x->type().policy;
    Value* zero = c.scalar(0.0, p);
    return sub(c, indicator(c, cmp(c, "gt", x, zero), p), indicator(c, cmp(c, "lt", x, zero), p));
  };
  register_builtin_jvp("graph.abs", [abs_sign](RuleContext& c, ir::Operation& op, const Values& t) {
    if (is_complex(op.operand(0)->type().dtype())) return Values{complex_abs_jvp(c, op, t[0])};
    return Values{mul(c, t[0], abs_sign(c, op))};
  });
  register_builtin_vjp("graph.abs", [abs_sign](RuleContext& c, ir::Operation& op, const Values& ct) {
    if (is_complex(op.operand(0)->type().dtype())) return Values{complex_abs_vjp(c, op, ct[0])};
    return Values{mul(c, ct[0], abs_sign(c, op))};
  });
  unary("graph.exp", y_of);
  register_builtin_jvp("graph.log", [](RuleContext& c, ir::Operation& op, const Values& t) {
    return Values{div(c, t[0], x_of(c, op))};
  });
  register_builtin_vjp("graph.log", [](RuleContext& c, ir::Operation& op, const Values& ct) {
    return Values{div(c, ct[0], x_of(c, op))};
  });
  unary("graph.sqrt", [](RuleContext& c, ir::Operation& op) {
    Value* y = y_of(c, op);
    return div(c, like(c, y, 0.5), y);
  });
  unary("graph.rsqrt", [](RuleContext& c, ir::Operation& op) {
    Value* y = y_of(c, op);
    return mul(c, like(c, y, -0.5), div(c, y, x_of(c, op)));
  });
  unary("graph.tanh", [](RuleContext& c, ir::Operation& op) {
    Value* y = y_of(c, op);
    return sub(c, like(c, y, 1.0), mul(c, y, y));
  });
  unary("graph.sin", [](RuleContext& c, ir::Operation& op) { return c.op("graph.cos", {x_of(c, op)}); });
  unary("graph.cos", [](RuleContext& c, ir::Operation& op) {
    return c.op("graph.neg", {c.op("graph.sin", {x_of(c, op)})});
  });
  unary("graph.sigmoid", [](RuleContext& c, ir::Operation& op) {
    Value* y = y_of(c, op);
    return mul(c, y, sub(c, like(c, y, 1.0), y));
  });
  unary("graph.relu", [](RuleContext& c, ir::Operation& op) {
    Value* x = x_of(c, op);
    return indicator(c, cmp(c, "gt", x, like(c, x, 0.0)), x->type().policy);
  });
  unary("graph.silu", [](RuleContext& c, ir::Operation& op) {
    Value* x = x_of(c, op);
    Value* s = c.op("graph.sigmoid", {x});
    Value* one = like(c, x, 1.0);
    return mul(c, s, add(c, one, mul(c, x, sub(c, one, s))));
  });
  unary("graph.erf", [](RuleContext& c, ir::Operation& op) {
    Value* x = x_of(c, op);
    Value* e = c.op("graph.exp", {neg(c, mul(c, x, x))});
    return mul(c, like(c, x, 2.0 / std::sqrt(std::numbers::pi)), e);
  });
  unary("graph.gelu", [](RuleContext& c, ir::Operation& op) {
    Value* x = x_of(c, op);
    Value* half = like(c, x, 0.5);
    Value* one = like(c, x, 1.0);
    if (op.attrs().get_string("approximate") == "tanh") {
      // y = x/2 (1 + tanh(u)), u = k (x + a x^3): y' = (1 + th)/2 + x/2 (1 - th^2) k (1 + 3 a x^2).
      const double k = std::sqrt(2.0 / std::numbers::pi), a = 0.044715;
      Value* x2 = mul(c, x, x);
      Value* u = mul(c, like(c, x, k), add(c, x, mul(c, like(c, x, a), mul(c, x2, x))));
      Value* th = c.op("graph.tanh", {u});
      Value* du = mul(c, like(c, x, k), add(c, one, mul(c, like(c, x, 3 * a), x2)));
      Value* left = mul(c, half, add(c, one, th));
      Value* right = mul(c, mul(c, half, x), mul(c, sub(c, one, mul(c, th, th)), du));
      return add(c, left, right);
    }
    // y = x Phi(x): y' = Phi(x) + x phi(x), Phi(x) = (1 + erf(x / sqrt 2)) / 2, phi = exp(-x^2/2) / sqrt(2 pi).
    Value* cdf = mul(c, half, add(c, one, c.op("graph.erf", {mul(c, x, like(c, x, 1.0 / std::numbers::sqrt2))})));
    Value* pdf = mul(c, like(c, x, 1.0 / std::sqrt(2.0 * std::numbers::pi)),
                     c.op("graph.exp", {mul(c, like(c, x, -0.5), mul(c, x, x))}));
    return add(c, cdf, mul(c, x, pdf));
  });

  // where: the condition has no derivative; each branch gets ct where it was chosen.
  register_builtin_jvp("graph.where", [](RuleContext& c, ir::Operation& op, const Values& t) {
    const NumericsPolicy p = tangent_type(op.result(0)->type()).policy;
    Value* a = t[1] ? t[1] : c.scalar(0.0, p);
    Value* b = t[2] ? t[2] : c.scalar(0.0, p);
    return Values{c.op("graph.where", {op.operand(0), a, b})};
  });
  register_builtin_vjp("graph.where", [](RuleContext& c, ir::Operation& op, const Values& ct) {
    Value* zero = like(c, ct[0], 0.0);
    return Values{nullptr, c.op("graph.where", {op.operand(0), ct[0], zero}),
                  c.op("graph.where", {op.operand(0), zero, ct[0]})};
  });
}

}  // namespace tessera::autodiff::rules
