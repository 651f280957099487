// The built-in JVP/VJP rules, one file per Graph IR op family, and the small
// helpers they share. Every rule is written with Graph IR ops through a
// RuleContext so that rules of rules (higher orders) exist automatically.
#pragma once

#include <string>
#include <vector>

#include "tessera/autodiff/autodiff.h"

namespace tessera::autodiff::rules {

using ir::Value;
using Values = std::vector<ir::Value*>;

void register_elementwise_rules();
void register_reduction_rules();
void register_linalg_rules();
void register_sparse_rules();  // spmm, sddmm
void register_attention_rules();  // flash_attn, flash_attn_bwd
void register_complex_rules();  // real, imag, conj, complex
void register_fft_rules();  // fft, fft_resize
// abs of a complex operand (the real case is elementwise_rules.cpp's).
Value* complex_abs_jvp(RuleContext& c, ir::Operation& op, Value* t);
Value* complex_abs_vjp(RuleContext& c, ir::Operation& op, Value* ct);
void register_normalization_rules();
void register_shape_rules();
void register_effect_rules();  // cast, creation, random, stop_gradient, collectives, comparisons

// Registration used by the built-in rule files (they run while the registry
// initializes, so they must not go through register_jvp/register_vjp).
void register_builtin_jvp(const std::string& op_name, JvpRule rule);
void register_builtin_vjp(const std::string& op_name, VjpRule rule);
// Registers a rule giving zero tangents and cotangents (non-differentiable ops).
void register_zero_rules(const std::string& op_name);

// Arithmetic helpers on values (nullptr = zero is NOT accepted here).
inline Value* add(RuleContext& c, Value* a, Value* b) {
  return c.op("graph.add", {a, b});
}
inline Value* sub(RuleContext& c, Value* a, Value* b) {
  return c.op("graph.sub", {a, b});
}
inline Value* mul(RuleContext& c, Value* a, Value* b) {
  return c.op("graph.mul", {a, b});
}
inline Value* div(RuleContext& c, Value* a, Value* b) {
  return c.op("graph.div", {a, b});
}
inline Value* neg(RuleContext& c, Value* a) {
  return c.op("graph.neg", {a});
}
// A rank-0 constant of v's policy.
inline Value* like(RuleContext& c, Value* v, double x) {
  return c.scalar(x, v->type().policy);
}
// Sum of two possibly-zero values.
Value* add_maybe(RuleContext& c, Value* a, Value* b);
// 1 where `cond` holds, else 0, at policy `p`.
Value* indicator(RuleContext& c, Value* cond, const NumericsPolicy& p);
// v reshaped to `x_shape` with the dims in `axes` (sorted) kept as 1: the
// keepdims form of a reduction result, ready to broadcast against x.
Value* expand_reduced(RuleContext& c, Value* v, const ir::Shape& x_shape, const std::vector<std::int64_t>& axes);
// Normalized reduction axes of an op with attribute "axes" (empty = all) or "axis".
std::vector<std::int64_t> reduced_axes(const ir::Operation& op, std::size_t rank);

}  // namespace tessera::autodiff::rules
