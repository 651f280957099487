// RuleContext helpers and the tangent/cotangent policy (tessera/autodiff/autodiff.h).
#include <bit>

#include "graph/kernel_support.h"
#include "tessera/autodiff/autodiff.h"

namespace tessera::autodiff {

namespace {
thread_local TangentPrecision current_precision = TangentPrecision::full;
}  // namespace

TangentPrecisionScope::TangentPrecisionScope(TangentPrecision precision) : saved_(current_precision) {
  current_precision = precision;
}
TangentPrecisionScope::~TangentPrecisionScope() { current_precision = saved_; }

namespace {
// The policy rules compute at, in either precision: fp32 (fp64 for fp64).
std::optional<NumericsPolicy> arithmetic_policy(const ir::Type& t) {
  DType d = t.dtype();
  if (is_complex(d)) return default_policy(d);  // complex tangents keep their parts' width
  if (!is_float(d) || d == DType::e8m0) return std::nullopt;
  return default_policy(d == DType::fp64 ? DType::fp64 : DType::fp32);
}
}  // namespace

std::optional<NumericsPolicy> tangent_policy(const ir::Type& t) {
  auto p = arithmetic_policy(t);
  const DType d = t.dtype();
  if (!p || current_precision != TangentPrecision::storage || is_complex(d) || d == DType::fp32 ||
      d == DType::fp64) {
    return p;
  }
  // The default policy (fp32 accumulation), not the primal's modifiers: every
  // derivative of one format then has one policy, so rules combine them freely.
  return default_policy(d == DType::fp16 ? DType::fp16 : DType::bf16);
}

ir::Type tangent_type(const ir::Type& t) {
  return ir::Type::tensor(t.shape, tangent_policy(t).value_or(default_policy(DType::fp32)));
}

ir::Value* RuleContext::op(std::string_view op_name, std::vector<ir::Value*> operands, ir::AttrMap attrs) {
  return builder.create(op_name, std::move(operands), std::move(attrs), location)->result(0);
}

std::vector<ir::Value*> RuleContext::ops(std::string_view op_name, std::vector<ir::Value*> operands,
                                         ir::AttrMap attrs) {
  return builder.create(op_name, std::move(operands), std::move(attrs), location)->results();
}

ir::Value* RuleContext::primal(ir::Value* v) {
  auto p = arithmetic_policy(v->type());
  if (!p || v->type().policy == *p) return v;
  auto& cache = cache_ ? *cache_ : own_cache_;
  auto it = cache.find(v);
  if (it != cache.end()) return it->second;
  ir::Value* cast = cast_to(v, *p);
  cache.emplace(v, cast);
  return cast;
}

ir::Value* RuleContext::product_operand(ir::Value* v) {
  auto p = tangent_policy(v->type());
  if (!p || *p == arithmetic_policy(v->type())) return primal(v);
  return v->type().policy == *p ? v : cast_to(v, *p);
}

ir::Value* RuleContext::scalar(double value, const NumericsPolicy& policy) {
  value = graph::round_to(value, policy.storage);  // constants hold storage values exactly
  std::pair<std::uint64_t, std::string> key{std::bit_cast<std::uint64_t>(value), print_policy(policy)};
  if (scalars_) {
    auto it = scalars_->find(key);
    if (it != scalars_->end()) return it->second;
  }
  ir::Value* c = op("graph.constant", {},
                    ir::AttrMap{{"value", std::vector<double>{value}}, {"shape", ir::Shape{}}, {"policy", policy}});
  if (scalars_) scalars_->emplace(std::move(key), c);
  return c;
}

ir::Value* RuleContext::zeros(const ir::Type& type) {
  if (ir::static_sizes(type.shape)) {
    return op("graph.constant", {},
              ir::AttrMap{{"value", std::vector<double>{0.0}}, {"shape", type.shape}, {"policy", type.policy}});
  }
  return op("graph.broadcast_to", {scalar(0.0, type.policy)}, ir::AttrMap{{"shape", type.shape}});
}

ir::Value* RuleContext::zeros_like(ir::Value* v) {
  return zeros(tangent_type(v->type()));
}

ir::Value* RuleContext::cast_to(ir::Value* v, const NumericsPolicy& policy) {
  if (v->type().policy == policy) return v;
  return op("graph.cast", {v}, ir::AttrMap{{"policy", policy}});
}

ir::Value* RuleContext::broadcast_to(ir::Value* v, const ir::Shape& shape) {
  if (v->type().shape == shape) return v;
  return op("graph.broadcast_to", {v}, ir::AttrMap{{"shape", shape}});
}

ir::Value* RuleContext::sum_to_shape(ir::Value* v, const ir::Shape& shape) {
  const ir::Shape& vs = v->type().shape;
  if (vs == shape) return v;
  if (vs.size() < shape.size()) {
    raise(ErrorCode::Internal,
          "sum_to_shape: " + ir::print_shape(vs) + " has fewer dims than " + ir::print_shape(shape));
  }
  std::size_t lead = vs.size() - shape.size();
  std::vector<std::int64_t> axes;
  for (std::size_t i = 0; i < lead; ++i) axes.push_back(static_cast<std::int64_t>(i));
  for (std::size_t i = 0; i < shape.size(); ++i) {
    const ir::Dim& have = vs[lead + i];
    if (have == shape[i]) continue;
    if (!shape[i].is_fixed(1)) {
      raise(ErrorCode::Internal,
            "sum_to_shape: " + ir::print_shape(vs) + " is not a broadcast of " + ir::print_shape(shape));
    }
    axes.push_back(static_cast<std::int64_t>(lead + i));
  }
  // Only leading axes summed: no keepdims, so no reshape is needed afterwards.
  const bool leading_only = axes.size() == lead;
  ir::Value* out = v;
  if (!axes.empty()) out = op("graph.sum", {v}, ir::AttrMap{{"axes", axes}, {"keepdims", !leading_only}});
  if (out->type().shape != shape) out = op("graph.reshape", {out}, ir::AttrMap{{"shape", shape}});
  return out;
}

ir::Value* RuleContext::fit_to(ir::Value* v, const ir::Type& like) {
  ir::Type target = tangent_type(like);
  const ir::Shape& vs = v->type().shape;
  if (vs != target.shape) {
    bool broadcasts = vs.size() <= target.shape.size();
    for (std::size_t k = 0; broadcasts && k < vs.size(); ++k) {
      const ir::Dim& s = vs[vs.size() - 1 - k];
      broadcasts = s == target.shape[target.shape.size() - 1 - k] || s.is_fixed(1);
    }
    v = broadcasts ? broadcast_to(v, target.shape) : sum_to_shape(v, target.shape);
  }
  return cast_to(v, target.policy);
}

}  // namespace tessera::autodiff
