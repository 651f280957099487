// Sharding rules of shape ops: transpose, reshape, broadcast_to, slice,
// slice_embed, concat, split, split_qkv, gather, scatter_add, and
// graph.reshard (an explicit layout change).
//
// Moving elements around never sums them, so pending sums pass through.
// A split dim follows its elements where they stay in one dim (a transpose,
// a reshape that keeps the dim, splits it with the split part major, or
// merges it as the major part); a dim whose elements an op rearranges (the
// axis of a concat, a sliced range, a gathered axis) is made whole first.
// Shape attributes (a reshape's target, a slice's stops) become the shard's.
#include <algorithm>

#include "dist/sharding_rules/rule_support.h"

namespace tessera::dist::rules {

namespace {

ir::Shape fixed(const std::vector<std::int64_t>& sizes) { return ir::fixed_shape(sizes); }

ShardingPlan transpose_plan(const ShardingQuery& q) {
  const auto& perm = q.op.attrs().get_ints("perm");
  const Sharding& in = q.operands[0];
  Sharding out;
  for (auto p : perm) out.dims.push_back(in.dims[axis_of(p, in.dims.size())]);
  out.partial = in.partial;
  return ShardingPlan{{in}, {out}, {}, {}};
}

ShardingPlan reshape_plan(const ShardingQuery& q) {
  const auto in_sizes = sizes_of(q.op.operand(0)), out_sizes = sizes_of(q.op.result(0));
  Sharding in = q.operands[0];
  Sharding out = replicated(out_sizes.size());
  out.partial = in.partial;
  std::int64_t prefix_in = 1;
  for (std::size_t d = 0; d < in_sizes.size(); prefix_in *= in_sizes[d], ++d) {
    const std::string a = in.dims[d];
    if (a.empty()) continue;
    const std::int64_t p = q.mesh.size(a);
    // The output dim that starts where input dim d starts (skipping size-1 dims).
    std::int64_t prefix_out = 1;
    int target = -1;
    for (std::size_t e = 0; e < out_sizes.size(); prefix_out *= out_sizes[e], ++e) {
      if (prefix_out == prefix_in && out_sizes[e] != 1) {
        target = static_cast<int>(e);
        break;
      }
      if (prefix_out > prefix_in) break;
    }
    bool kept = false;
    if (target >= 0) {
      const std::int64_t n = in_sizes[d], m = out_sizes[target];
      kept = m == n || (n % m == 0 && m % p == 0) || (m % n == 0 && n % p == 0);
    }
    if (kept) out.dims[target] = a;
    else in.dims[d].clear();  // gathered first
  }
  ShardingPlan plan{{in}, {out}, {}, {}};
  ir::AttrMap attrs = q.op.attrs();
  attrs.set("shape", fixed(shard_sizes(out_sizes, out, q.mesh)));
  plan.attrs = attrs;
  return plan;
}

ShardingPlan broadcast_to_plan(const ShardingQuery& q) {
  const auto in_sizes = sizes_of(q.op.operand(0)), out_sizes = sizes_of(q.op.result(0));
  Sharding in = q.operands[0];
  Sharding out = replicated(out_sizes.size());
  out.partial = in.partial;
  const std::size_t offset = out_sizes.size() - in_sizes.size();
  for (std::size_t d = 0; d < in_sizes.size(); ++d) {
    if (in_sizes[d] == 1 && out_sizes[d + offset] != 1) in.dims[d].clear();
    out.dims[d + offset] = in.dims[d];
  }
  ShardingPlan plan{{in}, {out}, {}, {}};
  ir::AttrMap attrs = q.op.attrs();
  attrs.set("shape", fixed(shard_sizes(out_sizes, out, q.mesh)));
  plan.attrs = attrs;
  return plan;
}

// Whether slice bounds (start, stop, step) of a dim of n cover it all.
bool covers(const ir::AttrMap& attrs, std::size_t d, std::int64_t n) {
  const auto& starts = attrs.get_ints("starts");
  const auto& stops = attrs.get_ints("stops");
  const auto& steps = attrs.get_ints("steps");
  std::int64_t start = d < starts.size() ? starts[d] : 0, stop = d < stops.size() ? stops[d] : n;
  const std::int64_t step = d < steps.size() ? steps[d] : 1;
  if (start < 0) start += n;
  if (stop < 0) stop += n;
  return start <= 0 && stop >= n && step == 1;
}

// slice (`whole` = the operand's sizes) and slice_embed (the result's):
// dims the bounds cover keep their split, with the shard's stop.
ShardingPlan slice_plan(const ShardingQuery& q, bool embed) {
  const auto whole = sizes_of(embed ? q.op.result(0) : q.op.operand(0));
  Sharding in = q.operands[0];
  ir::AttrMap attrs = q.op.attrs();
  auto stops = attrs.get_ints("stops");
  for (std::size_t d = 0; d < whole.size(); ++d) {
    if (in.dims[d].empty()) continue;
    if (!covers(attrs, d, whole[d])) {
      in.dims[d].clear();
    } else if (d < stops.size()) {
      stops[d] = q.mesh.part(whole[d], in.dims[d]);
    }
  }
  attrs.set("stops", stops);
  if (embed) attrs.set("shape", fixed(shard_sizes(whole, in, q.mesh)));
  return ShardingPlan{{in}, {in}, attrs, {}};
}

ShardingPlan concat_plan(const ShardingQuery& q) {
  const std::size_t axis = axis_of(q.op.attrs().get_int("axis"), q.op.result(0)->type().rank());
  return broadcast_plan(q, /*linear=*/true, {axis});
}

ShardingPlan split_plan(const ShardingQuery& q) {
  const std::size_t axis = axis_of(q.op.attrs().get_int("axis"), q.op.operand(0)->type().rank());
  Sharding in = q.operands[0];
  in.dims[axis].clear();
  return ShardingPlan{{in}, std::vector<Sharding>(q.op.num_results(), in), {}, {}};
}

ShardingPlan split_qkv_plan(const ShardingQuery& q) {
  Sharding in = q.operands[0];
  in.dims.back().clear();
  Sharding out = replicated(q.op.result(0)->type().rank());
  for (std::size_t d = 0; d + 1 < in.dims.size(); ++d) out.dims[d] = in.dims[d];
  out.partial = in.partial;
  return ShardingPlan{{in}, {out, out, out}, {}, {}};
}

// gather: x[:axis] + indices + x[axis+1:]; the gathered axis is whole.
ShardingPlan gather_plan(const ShardingQuery& q) {
  const std::size_t rx = q.op.operand(0)->type().rank(), ri = q.op.operand(1)->type().rank();
  const std::size_t axis = axis_of(q.op.attrs().get_int("axis"), rx);
  Sharding x = q.operands[0], idx = settled(q.operands[1]);
  x.dims[axis].clear();
  Sharding out;
  for (std::size_t d = 0; d < axis; ++d) out.dims.push_back(x.dims[d]);
  for (std::size_t d = 0; d < ri; ++d) out.dims.push_back(idx.dims[d]);
  for (std::size_t d = axis + 1; d < rx; ++d) out.dims.push_back(x.dims[d]);
  for (std::size_t d = 0; d < out.dims.size(); ++d) {
    if (!out.dims[d].empty() && (out.dim_of(out.dims[d]) != static_cast<int>(d) ||
                                 std::find(x.partial.begin(), x.partial.end(), out.dims[d]) != x.partial.end())) {
      conflict(q, 0, 1, "split two result dims over mesh axis '" + out.dims[d] + "'");
    }
  }
  out.partial = x.partial;
  return ShardingPlan{{x, idx}, {out}, {}, {}};
}

// scatter_add (gather's transpose): updates = shape[:axis] + indices + shape[axis+1:].
// The indexed dims' splits become pending sums of the result.
ShardingPlan scatter_add_plan(const ShardingQuery& q) {
  const auto shape = sizes_of(q.op.result(0));
  const std::size_t ri = q.op.operand(1)->type().rank();
  const std::size_t axis = axis_of(q.op.attrs().get_int("axis"), shape.size());
  Sharding up = q.operands[0], idx = settled(q.operands[1]);
  for (std::size_t t = 0; t < ri; ++t) {
    std::string& ua = up.dims[axis + t];
    if (!ua.empty() && !idx.dims[t].empty() && ua != idx.dims[t]) {
      conflict(q, 0, 1, "split indexed dim " + std::to_string(t) + " over different mesh axes");
    }
    if (ua.empty()) ua = idx.dims[t];
    idx.dims[t] = ua;
  }
  Sharding out = replicated(shape.size());
  for (std::size_t d = 0; d < axis; ++d) out.dims[d] = up.dims[d];
  for (std::size_t d = axis + 1; d < shape.size(); ++d) out.dims[d] = up.dims[d + ri - 1];
  out.partial = up.partial;
  for (std::size_t t = 0; t < ri; ++t) {
    if (!up.dims[axis + t].empty()) out.partial.push_back(up.dims[axis + t]);
  }
  ir::AttrMap attrs = q.op.attrs();
  attrs.set("shape", fixed(shard_sizes(shape, out, q.mesh)));
  return ShardingPlan{{up, idx}, {out}, attrs, {}};
}

// tessera.dist.reshard inside a traced function: the value in the layout
// its attribute names; the conversion is the whole op.
ShardingPlan reshard_plan(const ShardingQuery& q) {
  const std::size_t rank = q.op.operand(0)->type().rank();
  std::string text = "tensor<[";
  for (std::size_t d = 0; d < rank; ++d) text += d ? ", 1" : "1";
  text += "] fp32 " + q.op.attrs().get_string("sharding") + ">";
  const Sharding target = *ir::parse_type(text, "<reshard>").sharding;
  ShardingPlan plan{{target}, {target}, {}, {}};
  plan.emit = [](ir::OpBuilder&, const std::vector<ir::Value*>& x) { return std::vector<ir::Value*>{x[0]}; };
  return plan;
}

}  // namespace

void register_shape_sharding() {
  register_sharding_rule("graph.transpose", transpose_plan);
  register_sharding_rule("graph.reshape", reshape_plan);
  register_sharding_rule("graph.broadcast_to", broadcast_to_plan);
  register_sharding_rule("graph.slice", [](const ShardingQuery& q) { return slice_plan(q, false); });
  register_sharding_rule("graph.slice_embed", [](const ShardingQuery& q) { return slice_plan(q, true); });
  register_sharding_rule("graph.concat", concat_plan);
  register_sharding_rule("graph.split", split_plan);
  register_sharding_rule("graph.split_qkv", split_qkv_plan);
  register_sharding_rule("graph.gather", gather_plan);
  register_sharding_rule("graph.scatter_add", scatter_add_plan);
  register_sharding_rule("graph.reshard", reshard_plan);
}

}  // namespace tessera::dist::rules
