// JVP and VJP rules of the overflow-safe normalizations
// (graph/normalization_ops.cpp), along the op's `axis` with y the result:
//   softmax:    dy = y (t - sum(t y))                       (self-adjoint),
//               one graph.softmax_linear op (one row kernel when compiled)
//   logsumexp:  dy = sum(t softmax(x))
//   layernorm:  xhat = (x - mean) r, r = 1/sqrt(var + eps);
//               dxhat = r (tc - xhat mean(tc xhat)), tc = t - mean(t);
//               the VJP is r (g - mean(g) - xhat mean(g xhat)), g = ct gamma
//   rmsnorm:    xhat = x r, r = 1/sqrt(mean(x^2) + eps);
//               dxhat = r (t - xhat mean(t xhat)); VJP r (g - xhat mean(g xhat))
// gamma and beta have the axis's size; their cotangents sum over the other axes.
#include "autodiff/rules/rules.h"
#include "graph/shape_rules.h"

namespace tessera::autodiff::rules {

namespace {

std::int64_t axis_of(const ir::Operation& op) {
  return graph::normalize_axis(op.attrs().get_int("axis"), op.operand(0)->type().rank());
}

Value* mean_keep(RuleContext& c, Value* v, std::int64_t axis) {
  return c.op("graph.mean", {v}, ir::AttrMap{{"axes", std::vector<std::int64_t>{axis}}, {"keepdims", true}});
}
Value* sum_keep(RuleContext& c, Value* v, std::int64_t axis) {
  return c.op("graph.sum", {v}, ir::AttrMap{{"axes", std::vector<std::int64_t>{axis}}, {"keepdims", true}});
}

// A [n] parameter reshaped to broadcast along `axis` of a rank-`rank` tensor.
Value* along_axis(RuleContext& c, Value* p, std::int64_t axis, std::size_t rank) {
  ir::Shape s(rank, ir::Dim::fixed(1));
  s[static_cast<std::size_t>(axis)] = p->type().shape[0];
  return c.op("graph.reshape", {p}, ir::AttrMap{{"shape", s}});
}

// Sum over every axis but `axis`: the cotangent of a gamma/beta parameter.
Value* sum_others(RuleContext& c, Value* v, std::int64_t axis) {
  std::vector<std::int64_t> axes;
  for (std::size_t d = 0; d < v->type().rank(); ++d) {
    if (static_cast<std::int64_t>(d) != axis) axes.push_back(static_cast<std::int64_t>(d));
  }
  if (axes.empty()) return v;
  return c.op("graph.sum", {v}, ir::AttrMap{{"axes", axes}, {"keepdims", false}});
}

// The plain (not overflow-scaled) statistics along `axis`: xc = x - [mean(x)],
// r = 1/sqrt(mean(xc^2) + eps) (keepdims), xhat = xc r.
struct Normalized {
  Value *xc, *r, *xhat;
};
Normalized normalized(RuleContext& c, Value* x, std::int64_t axis, double eps, bool center) {
  Value* xc = center ? sub(c, x, mean_keep(c, x, axis)) : x;
  Value* var = mean_keep(c, mul(c, xc, xc), axis);
  Value* r = c.op("graph.rsqrt", {add(c, var, like(c, x, eps))});
  return {xc, r, mul(c, xc, r)};
}

struct Norm {
  Value* xhat;  // normalized x
  Value* gamma = nullptr;
  std::int64_t axis;
};

Norm norm_of(RuleContext& c, ir::Operation& op) {
  Norm n{};
  n.axis = axis_of(op);
  Value* x = c.primal(op.operand(0));
  n.xhat = normalized(c, x, n.axis, op.attrs().get_real("eps"), op.name() == "graph.layernorm_safe").xhat;
  if (op.num_operands() > 1) n.gamma = along_axis(c, c.primal(op.operand(1)), n.axis, x->type().rank());
  return n;
}

// `t` at the policy of `like`: under TangentPrecision::storage a bf16 or fp16
// cotangent reaches these rules at its storage format, while the primal
// they pair it with computes at fp32, and the row ops below take two
// operands of one type. The widening is exact and fuses into the row kernel.
Value* like_primal(RuleContext& c, Value* t, Value* like) { return c.cast_to(t, like->type().policy); }

// project() as one graph.norm_linear op (one row kernel when compiled).
Value* norm_linear(RuleContext& c, ir::Operation& op, Value* g) {
  Value* x = c.primal(op.operand(0));
  return c.op("graph.norm_linear", {x, like_primal(c, g, x)},
              ir::AttrMap{{"axis", axis_of(op)}, {"eps", op.attrs().get_real("eps")},
                          {"center", op.name() == "graph.layernorm_safe"}});
}

Values norm_jvp(RuleContext& c, ir::Operation& op, const Values& t) {
  Norm n = norm_of(c, op);
  std::size_t rank = op.operand(0)->type().rank();
  Value* out = nullptr;
  if (t[0]) {
    out = norm_linear(c, op, t[0]);
    if (n.gamma) out = mul(c, out, n.gamma);
  }
  if (t.size() > 1 && t[1]) out = add_maybe(c, out, mul(c, n.xhat, along_axis(c, t[1], n.axis, rank)));
  if (t.size() > 2 && t[2]) out = add_maybe(c, out, along_axis(c, t[2], n.axis, rank));
  return {out};
}

Values norm_vjp(RuleContext& c, ir::Operation& op, const Values& ct) {
  Norm n = norm_of(c, op);
  Value* g = n.gamma ? mul(c, ct[0], n.gamma) : ct[0];
  Values out{norm_linear(c, op, g)};
  if (op.num_operands() > 1) out.push_back(sum_others(c, mul(c, ct[0], n.xhat), n.axis));
  if (op.num_operands() > 2) out.push_back(sum_others(c, ct[0], n.axis));
  return out;
}

// y (t - sum(t y)): one graph.softmax_linear op, which compiles to one row kernel.
Value* softmax_linear(RuleContext& c, Value* y, Value* t, std::int64_t axis) {
  return c.op("graph.softmax_linear", {y, like_primal(c, t, y)}, ir::AttrMap{{"axis", axis}});
}

Value* softmax_map(RuleContext& c, ir::Operation& op, Value* t) {
  return softmax_linear(c, c.primal(op.result(0)), t, axis_of(op));
}

Value* softmax_of_x(RuleContext& c, ir::Operation& op) {
  return c.op("graph.softmax_safe", {c.primal(op.operand(0))}, ir::AttrMap{{"axis", axis_of(op)}});
}

// o = r (gc - xhat q), q = mean(g xhat): linear and symmetric in g, so
// g's tangent and cotangent go through norm_linear itself. In x (tangent
// u, dxc = u - [mean(u)]): dr = -r^3 mean(xc dxc), dxhat = r dxc + xc dr,
// dq = mean(g dxhat), do = dr w - r q dxhat - r xhat dq with w = gc - xhat q;
// its transpose for a cotangent k is v - [mean(v)] with
// h = -r q k - r mean(k xhat) g and v = r h - r^3 (mean(k w) + mean(h xc)) xc.
struct LinearNorm {
  std::int64_t axis;
  bool center;
  Value *x, *g, *xc, *r, *r3, *xhat, *q, *w;
};
LinearNorm linear_norm_of(RuleContext& c, ir::Operation& op) {
  LinearNorm n{};
  n.axis = axis_of(op);
  n.center = op.attrs().get_bool("center");
  n.x = c.primal(op.operand(0));
  n.g = c.primal(op.operand(1));
  const Normalized s = normalized(c, n.x, n.axis, op.attrs().get_real("eps"), n.center);
  n.xc = s.xc;
  n.r = s.r;
  n.xhat = s.xhat;
  n.r3 = mul(c, n.r, mul(c, n.r, n.r));
  n.q = mean_keep(c, mul(c, n.g, n.xhat), n.axis);
  Value* gc = n.center ? sub(c, n.g, mean_keep(c, n.g, n.axis)) : n.g;
  n.w = sub(c, gc, mul(c, n.xhat, n.q));
  return n;
}

}  // namespace

void register_normalization_rules() {
  register_builtin_jvp("graph.softmax_safe", [](RuleContext& c, ir::Operation& op, const Values& t) {
    return Values{softmax_map(c, op, t[0])};
  });
  register_builtin_vjp("graph.softmax_safe", [](RuleContext& c, ir::Operation& op, const Values& ct) {
    return Values{softmax_map(c, op, ct[0])};
  });
  // o = y (t - s), s = sum(t y), bilinear in (y, t):
  //   JVP: ty (t - s) - y sum(t ty) + softmax_linear(y, tt);
  //   VJP of a cotangent g: y-bar = g (t - s) - t sum(g y), t-bar = softmax_linear(y, g) (symmetric).
  register_builtin_jvp("graph.softmax_linear", [](RuleContext& c, ir::Operation& op, const Values& t) {
    const std::int64_t axis = axis_of(op);
    Value* y = c.primal(op.operand(0));
    Value* tv = c.primal(op.operand(1));
    Value* out = nullptr;
    if (t[0]) {
      Value* s = sum_keep(c, mul(c, tv, y), axis);
      out = sub(c, mul(c, t[0], sub(c, tv, s)), mul(c, y, sum_keep(c, mul(c, tv, t[0]), axis)));
    }
    if (t[1]) out = add_maybe(c, out, softmax_linear(c, y, t[1], axis));
    return Values{out};
  });
  register_builtin_vjp("graph.softmax_linear", [](RuleContext& c, ir::Operation& op, const Values& ct) {
    const std::int64_t axis = axis_of(op);
    Value* y = c.primal(op.operand(0));
    Value* tv = c.primal(op.operand(1));
    Value* s = sum_keep(c, mul(c, tv, y), axis);
    Value* y_bar = sub(c, mul(c, ct[0], sub(c, tv, s)), mul(c, tv, sum_keep(c, mul(c, ct[0], y), axis)));
    return Values{y_bar, softmax_linear(c, y, ct[0], axis)};
  });
  auto relinear = [](RuleContext& c, ir::Operation& op, Value* g) {
    Value* x = c.primal(op.operand(0));
    return c.op("graph.norm_linear", {x, like_primal(c, g, x)}, op.attrs());
  };
  register_builtin_jvp("graph.norm_linear", [relinear](RuleContext& c, ir::Operation& op, const Values& t) {
    Value* out = nullptr;
    if (t[0]) {
      const LinearNorm n = linear_norm_of(c, op);
      Value* dxc = n.center ? sub(c, t[0], mean_keep(c, t[0], n.axis)) : t[0];
      Value* dr = neg(c, mul(c, n.r3, mean_keep(c, mul(c, n.xc, dxc), n.axis)));
      Value* dxhat = add(c, mul(c, n.r, dxc), mul(c, n.xc, dr));
      Value* dq = mean_keep(c, mul(c, n.g, dxhat), n.axis);
      out = sub(c, sub(c, mul(c, dr, n.w), mul(c, mul(c, n.r, n.q), dxhat)), mul(c, mul(c, n.r, n.xhat), dq));
    }
    if (t[1]) out = add_maybe(c, out, relinear(c, op, t[1]));
    return Values{out};
  });
  register_builtin_vjp("graph.norm_linear", [relinear](RuleContext& c, ir::Operation& op, const Values& ct) {
    const LinearNorm n = linear_norm_of(c, op);
    Value* k = ct[0];
    Value* h = neg(c, add(c, mul(c, mul(c, n.r, n.q), k), mul(c, mul(c, n.r, mean_keep(c, mul(c, k, n.xhat), n.axis)), n.g)));
    Value* scale = mul(c, n.r3, add(c, mean_keep(c, mul(c, k, n.w), n.axis), mean_keep(c, mul(c, h, n.xc), n.axis)));
    Value* v = sub(c, mul(c, n.r, h), mul(c, scale, n.xc));
    Value* x_bar = n.center ? sub(c, v, mean_keep(c, v, n.axis)) : v;
    return Values{x_bar, relinear(c, op, k)};
  });
  register_builtin_jvp("graph.logsumexp", [](RuleContext& c, ir::Operation& op, const Values& t) {
    return Values{c.op(
        "graph.sum", {mul(c, t[0], softmax_of_x(c, op))},
        ir::AttrMap{{"axes", std::vector<std::int64_t>{axis_of(op)}}, {"keepdims", op.attrs().get_bool("keepdims")}})};
  });
  register_builtin_vjp("graph.logsumexp", [](RuleContext& c, ir::Operation& op, const Values& ct) {
    Value* g = expand_reduced(c, ct[0], op.operand(0)->type().shape, {axis_of(op)});
    return Values{mul(c, g, softmax_of_x(c, op))};
  });
  for (const char* name : {"graph.layernorm_safe", "graph.rmsnorm_safe"}) {
    register_builtin_jvp(name, norm_jvp);
    register_builtin_vjp(name, norm_vjp);
  }
}

}  // namespace tessera::autodiff::rules
