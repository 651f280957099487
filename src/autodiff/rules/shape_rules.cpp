// JVP and VJP rules of the shape ops (graph/shape_ops.cpp) and of their
// transposes graph.slice_embed and graph.scatter_add (graph/autodiff_ops.cpp).
// Every shape op is linear, so its JVP is the op itself on the tangent and its
// VJP the transposed movement: reshape back, the inverse permutation, a sum
// over broadcast dims, slice <-> slice_embed, concat <-> split,
// gather <-> scatter_add. Indices get no derivative.
#include "graph/shape_rules.h"

#include "autodiff/rules/rules.h"

namespace tessera::autodiff::rules {

namespace {

// JVP = the same op (same attributes) on the operand tangents (zeros where missing).
Values same_op_jvp(RuleContext& c, ir::Operation& op, const Values& t) {
  Values operands;
  for (std::size_t i = 0; i < op.num_operands(); ++i) {
    ir::Value* v = op.operand(i);
    operands.push_back(!tangent_policy(v->type()) ? v : (t[i] ? t[i] : c.zeros_like(v)));
  }
  return c.ops(op.name(), operands, op.attrs());
}

ir::AttrMap slice_attrs(const ir::Operation& op) {
  return ir::AttrMap{{"starts", op.attrs().get_ints("starts")},
                     {"stops", op.attrs().get_ints("stops")},
                     {"steps", op.attrs().get_ints("steps")}};
}

}  // namespace

void register_shape_rules() {
  for (const char* name : {"graph.reshape", "graph.transpose", "graph.broadcast_to", "graph.slice", "graph.slice_embed",
                           "graph.concat", "graph.split", "graph.split_qkv", "graph.gather", "graph.scatter_add"}) {
    register_builtin_jvp(name, same_op_jvp);
  }
  register_builtin_vjp("graph.reshape", [](RuleContext& c, ir::Operation& op, const Values& ct) {
    return Values{c.op("graph.reshape", {ct[0]}, ir::AttrMap{{"shape", op.operand(0)->type().shape}})};
  });
  register_builtin_vjp("graph.transpose", [](RuleContext& c, ir::Operation& op, const Values& ct) {
    const auto& perm = op.attrs().get_ints("perm");
    std::vector<std::int64_t> inverse(perm.size());
    for (std::size_t i = 0; i < perm.size(); ++i) {
      inverse[static_cast<std::size_t>(graph::normalize_axis(perm[i], perm.size()))] = static_cast<std::int64_t>(i);
    }
    return Values{c.op("graph.transpose", {ct[0]}, ir::AttrMap{{"perm", inverse}})};
  });
  register_builtin_vjp("graph.broadcast_to", [](RuleContext& c, ir::Operation& op, const Values& ct) {
    return Values{c.sum_to_shape(ct[0], op.operand(0)->type().shape)};
  });
  register_builtin_vjp("graph.slice", [](RuleContext& c, ir::Operation& op, const Values& ct) {
    ir::AttrMap attrs = slice_attrs(op);
    attrs.set("shape", op.operand(0)->type().shape);
    return Values{c.op("graph.slice_embed", {ct[0]}, attrs)};
  });
  register_builtin_vjp("graph.slice_embed", [](RuleContext& c, ir::Operation& op, const Values& ct) {
    return Values{c.op("graph.slice", {ct[0]}, slice_attrs(op))};
  });
  register_builtin_vjp("graph.concat", [](RuleContext& c, ir::Operation& op, const Values& ct) {
    if (op.num_operands() == 1) return Values{ct[0]};
    std::int64_t axis = graph::normalize_axis(op.attrs().get_int("axis"), op.operand(0)->type().rank());
    std::vector<std::int64_t> sizes;
    for (ir::Value* v : op.operands()) sizes.push_back(v->type().shape[static_cast<std::size_t>(axis)].size);
    return c.ops("graph.split", {ct[0]}, ir::AttrMap{{"axis", axis}, {"sizes", sizes}});
  });
  register_builtin_vjp("graph.split", [](RuleContext& c, ir::Operation& op, const Values& ct) {
    Values parts;
    for (std::size_t i = 0; i < ct.size(); ++i) parts.push_back(ct[i] ? ct[i] : c.zeros_like(op.result(i)));
    return Values{c.op("graph.concat", parts, ir::AttrMap{{"axis", op.attrs().get_int("axis")}})};
  });
  register_builtin_vjp("graph.split_qkv", [](RuleContext& c, ir::Operation& op, const Values& ct) {
    const ir::Shape& xs = op.operand(0)->type().shape;
    ir::Shape third = xs;
    third.back() = ir::Dim::fixed(xs.back().size / 3);
    Values parts;
    for (std::size_t i = 0; i < 3; ++i) {
      ir::Value* p = ct[i] ? ct[i] : c.zeros_like(op.result(i));
      parts.push_back(c.op("graph.reshape", {p}, ir::AttrMap{{"shape", third}}));
    }
    return Values{c.op("graph.concat", parts, ir::AttrMap{{"axis", static_cast<std::int64_t>(xs.size()) - 1}})};
  });
  register_builtin_vjp("graph.gather", [](RuleContext& c, ir::Operation& op, const Values& ct) {
    ir::AttrMap attrs{{"shape", op.operand(0)->type().shape}, {"axis", op.attrs().get_int("axis")}};
    if (is_complex(ct[0]->type().dtype())) {
      // scatter_add sums real values: a complex cotangent scatters its real
      // and imaginary parts (each sum part by part, as complex sums are).
      ir::Value* re = c.op("graph.scatter_add", {c.op("graph.real", {ct[0]}), op.operand(1)}, attrs);
      ir::Value* im = c.op("graph.scatter_add", {c.op("graph.imag", {ct[0]}), op.operand(1)}, attrs);
      return Values{c.op("graph.complex", {re, im}), nullptr};
    }
    return Values{c.op("graph.scatter_add", {ct[0], op.operand(1)}, attrs), nullptr};
  });
  register_builtin_vjp("graph.scatter_add", [](RuleContext& c, ir::Operation& op, const Values& ct) {
    return Values{c.op("graph.gather", {ct[0], op.operand(1)}, ir::AttrMap{{"axis", op.attrs().get_int("axis")}}),
                  nullptr};
  });
}

}  // namespace tessera::autodiff::rules
