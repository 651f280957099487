// Sharding rules of reductions (sum, mean, max, min over `axes`; argmax
// over `axis`).
//
// A sum over a split dim leaves each device the sum of its part: the result
// is pending over that axis (a partial), settled later where a full value
// is needed. A mean over a split dim is a sum of the parts divided by the
// global count (fp32/fp64 results; narrower ones gather the dim first, since
// the count need not be exact there). max and min reduce their parts and
// combine them with an allreduce of the same op right away: a pending max is
// no layout. argmax needs its dim whole.
//
// graph.superblock_sums and graph.superblock_total are written by the
// compiled pipeline after partitioning (split-long-sums, docs/design/0036);
// their rule takes every operand whole, which keeps a graph holding them
// partitionable.
#include <algorithm>

#include "dist/sharding_rules/rule_support.h"
#include "tessera/ir/builder.h"

namespace tessera::dist::rules {

namespace {

std::vector<std::size_t> reduced_axes(const ir::Operation& op) {
  const std::size_t rank = op.operand(0)->type().rank();
  std::vector<std::size_t> axes;
  if (op.attrs().has("axes")) {
    const auto& given = op.attrs().get_ints("axes");
    if (given.empty()) {
      for (std::size_t d = 0; d < rank; ++d) axes.push_back(d);
    }
    for (auto a : given) axes.push_back(axis_of(a, rank));
  } else {
    axes.push_back(axis_of(op.attrs().get_int("axis"), rank));
  }
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  return axes;
}

// The result's dims: the operand's, less the reduced ones (whole when kept).
Sharding reduced_sharding(const Sharding& in, const std::vector<std::size_t>& axes, bool keepdims) {
  Sharding out;
  for (std::size_t d = 0; d < in.dims.size(); ++d) {
    const bool reduced = std::find(axes.begin(), axes.end(), d) != axes.end();
    if (!reduced) out.dims.push_back(in.dims[d]);
    else if (keepdims) out.dims.emplace_back();
  }
  return out;
}

ir::Value* annotate(ir::Value* v, const Sharding& s) {
  ir::Type t = v->type();
  t.sharding = s;
  v->set_type(std::move(t));
  return v;
}

ShardingPlan sum_plan(const ShardingQuery& q, bool mean) {
  const ir::Operation& op = q.op;
  const auto axes = reduced_axes(op);
  const bool keepdims = op.attrs().get_bool("keepdims");
  Sharding in = q.operands[0];
  std::vector<std::string> split_axes;
  for (auto d : axes) {
    if (!in.dims[d].empty()) split_axes.push_back(in.dims[d]);
  }
  const DType storage = op.result(0)->type().policy.storage;
  if (mean && !split_axes.empty() && storage != DType::fp32 && storage != DType::fp64) {
    for (auto d : axes) in.dims[d].clear();  // gathered first
    split_axes.clear();
  }
  Sharding out = reduced_sharding(in, axes, keepdims);
  out.partial = in.partial;
  for (const auto& a : split_axes) out.partial.push_back(a);
  ShardingPlan plan{{in}, {out}, {}, {}};
  if (mean && !split_axes.empty()) {
    std::int64_t count = 1;
    const auto sizes = sizes_of(op.operand(0));
    for (auto d : axes) count *= sizes[d];
    const ir::AttrMap attrs = op.attrs();
    const NumericsPolicy policy = op.result(0)->type().policy;
    const SourceLocation loc = op.location();
    plan.emit = [attrs, policy, count, loc](ir::OpBuilder& b, const std::vector<ir::Value*>& x) {
      ir::Value* s = b.create("graph.sum", {x[0]}, attrs, loc)->result(0);
      ir::Value* n = b.create("graph.constant", {},
                              {{"value", std::vector<double>{static_cast<double>(count)}},
                               {"shape", ir::Shape{}},
                               {"policy", policy}},
                              loc)
                         ->result(0);
      annotate(n, replicated(0));
      return std::vector<ir::Value*>{b.create("graph.div", {s, n}, {}, loc)->result(0)};
    };
  }
  return plan;
}

ShardingPlan extreme_plan(const ShardingQuery& q, const std::string& reduce) {
  const ir::Operation& op = q.op;
  const auto axes = reduced_axes(op);
  const bool keepdims = op.attrs().get_bool("keepdims");
  const Sharding in = settled(q.operands[0]);
  Sharding out = reduced_sharding(in, axes, keepdims);
  std::vector<std::string> split_axes;
  for (auto d : axes) {
    if (!in.dims[d].empty()) split_axes.push_back(in.dims[d]);
  }
  ShardingPlan plan{{in}, {out}, {}, {}};
  if (!split_axes.empty()) {
    const ir::AttrMap attrs = op.attrs();
    const std::string name(op.name());
    const SourceLocation loc = op.location();
    const MeshView mesh = q.mesh;
    plan.emit = [=](ir::OpBuilder& b, const std::vector<ir::Value*>& x) {
      ir::Value* v = annotate(b.create(name, {x[0]}, attrs, loc)->result(0), out);
      for (const auto& a : split_axes) {
        v = annotate(b.create("graph.allreduce", {v},
                              {{"axis", a}, {"axis_size", mesh.size(a)}, {"op", reduce}}, loc)
                         ->result(0),
                     out);
      }
      return std::vector<ir::Value*>{v};
    };
  }
  return plan;
}

}  // namespace

void register_reduction_sharding() {
  register_sharding_rule("graph.sum", [](const ShardingQuery& q) { return sum_plan(q, false); });
  register_sharding_rule("graph.mean", [](const ShardingQuery& q) { return sum_plan(q, true); });
  register_sharding_rule("graph.max", [](const ShardingQuery& q) { return extreme_plan(q, "max"); });
  register_sharding_rule("graph.min", [](const ShardingQuery& q) { return extreme_plan(q, "min"); });
  register_sharding_rule("graph.superblock_sums", replicate_all);
  register_sharding_rule("graph.superblock_total", replicate_all);
  register_sharding_rule("graph.block_sums", replicate_all);
  register_sharding_rule("graph.block_total", replicate_all);
  register_sharding_rule("graph.argmax", [](const ShardingQuery& q) {
    const auto axes = reduced_axes(q.op);
    Sharding in = settled(q.operands[0]);
    for (auto d : axes) in.dims[d].clear();
    return ShardingPlan{{in}, {reduced_sharding(in, axes, q.op.attrs().get_bool("keepdims"))}, {}, {}};
  });
}

}  // namespace tessera::dist::rules
