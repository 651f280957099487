// JVP and VJP rules of the reductions (graph/reduction_ops.cpp). sum and mean
// are linear; max and min pass the derivative to the elements equal to the
// result, split equally between ties; argmax has zero rules.
#include "autodiff/rules/rules.h"
#include "graph/shape_rules.h"

namespace tessera::autodiff::rules {

std::vector<std::int64_t> reduced_axes(const ir::Operation& op, std::size_t rank) {
  if (op.attrs().has("axes")) return graph::normalize_axes(op.attrs().get_ints("axes"), rank);
  return {graph::normalize_axis(op.attrs().get_int("axis"), rank)};
}

Value* expand_reduced(RuleContext& c, Value* v, const ir::Shape& x_shape, const std::vector<std::int64_t>& axes) {
  if (v->type().rank() == x_shape.size()) return v;
  ir::Shape keep = x_shape;
  for (auto a : axes) keep[static_cast<std::size_t>(a)] = ir::Dim::fixed(1);
  return c.op("graph.reshape", {v}, ir::AttrMap{{"shape", keep}});
}

namespace {

// ct broadcast back over the reduced axes of x.
Value* spread(RuleContext& c, ir::Operation& op, Value* ct) {
  const ir::Shape& xs = op.operand(0)->type().shape;
  auto axes = reduced_axes(op, xs.size());
  return c.broadcast_to(expand_reduced(c, ct, xs, axes), xs);
}

// The element count of the reduced axes, as a value broadcastable against x.
Value* count(RuleContext& c, ir::Operation& op, const NumericsPolicy& p) {
  const ir::Shape& xs = op.operand(0)->type().shape;
  auto axes = reduced_axes(op, xs.size());
  double n = 1;
  for (auto a : axes) {
    const ir::Dim& d = xs[static_cast<std::size_t>(a)];
    if (d.is_symbolic()) {
      Value* ones = c.op("graph.broadcast_to", {c.scalar(1.0, p)}, ir::AttrMap{{"shape", xs}});
      return c.op("graph.sum", {ones}, ir::AttrMap{{"axes", axes}, {"keepdims", true}});
    }
    n *= static_cast<double>(d.size);
  }
  return c.scalar(n, p);
}

// Weights of x's elements in max/min: 1/k on the k elements equal to the result.
Value* extremum_weights(RuleContext& c, ir::Operation& op) {
  Value* x = c.primal(op.operand(0));
  const ir::Shape& xs = x->type().shape;
  auto axes = reduced_axes(op, xs.size());
  Value* y = expand_reduced(c, c.primal(op.result(0)), xs, axes);
  Value* mask = indicator(c, c.op("graph.eq", {x, y}), x->type().policy);
  Value* k = c.op("graph.sum", {mask}, ir::AttrMap{{"axes", axes}, {"keepdims", true}});
  return div(c, mask, k);
}

}  // namespace

void register_reduction_rules() {
  for (const char* name : {"graph.sum", "graph.mean"}) {
    std::string op_name = name;
    register_builtin_jvp(op_name, [op_name](RuleContext& c, ir::Operation& op, const Values& t) {
      return Values{c.op(op_name, {t[0]}, op.attrs())};
    });
  }
  register_builtin_vjp(
      "graph.sum", [](RuleContext& c, ir::Operation& op, const Values& ct) { return Values{spread(c, op, ct[0])}; });
  register_builtin_vjp("graph.mean", [](RuleContext& c, ir::Operation& op, const Values& ct) {
    return Values{div(c, spread(c, op, ct[0]), count(c, op, ct[0]->type().policy))};
  });
  for (const char* name : {"graph.max", "graph.min"}) {
    register_builtin_jvp(name, [](RuleContext& c, ir::Operation& op, const Values& t) {
      auto axes = reduced_axes(op, op.operand(0)->type().rank());
      return Values{c.op("graph.sum", {mul(c, t[0], extremum_weights(c, op))},
                         ir::AttrMap{{"axes", axes}, {"keepdims", op.attrs().get_bool("keepdims")}})};
    });
    register_builtin_vjp(name, [](RuleContext& c, ir::Operation& op, const Values& ct) {
      return Values{mul(c, spread(c, op, ct[0]), extremum_weights(c, op))};
    });
  }
  register_zero_rules("graph.argmax");
}

}  // namespace tessera::autodiff::rules
