// Graph IR collective ops: graph.allreduce, graph.all_gather,
// graph.reduce_scatter (Effect::collective).
//
// Each names a mesh axis (`axis`, a string) and that axis's member count
// (`axis_size`), which shape inference needs: all_gather multiplies dim `dim`
// by axis_size, reduce_scatter divides it (it must divide evenly);
// allreduce keeps the shape and combines with `op` = "sum", "mean", "max" or
// "min"; reduce_scatter sums. Their reference kernels run a mesh of one member
// (axis_size = 1), where every collective is the identity; a larger axis
// needs the distributed runtime and is a CollectiveError, never a silent
// local answer. autodiff registers their adjoints (src/autodiff/rules).
#include "graph/kernel_support.h"
#include "graph/op_families.h"
#include "graph/shape_rules.h"
#include "tessera/dist/shard_scope.h"
#include "tessera/graph/promotion.h"
#include "tessera/support/error.h"

namespace tessera::graph {

namespace {

using ir::AttrMap;
using ir::KernelCall;
using ir::OpDef;

std::int64_t axis_size(const AttrMap& attrs, const std::string& op) {
  std::int64_t n = attrs.get_int("axis_size");
  if (n < 1) {
    raise(ErrorCode::ArgumentInvalid, op + " attribute 'axis_size' must be >= 1 (members of mesh axis '" +
                                          attrs.get_string("axis") + "'), got " + std::to_string(n));
  }
  return n;
}

}  // namespace

// The identity on a one-member axis; otherwise the communicator of the
// calling thread's shard scope (an index launch's worker) runs it.
Tensor run_collective_op(const std::string& op, const AttrMap& attrs, const Tensor& x) {
  const std::int64_t n = axis_size(attrs, op);
  if (n == 1) return x;
  const std::string& axis = attrs.get_string("axis");
  const dist::ShardBinding& s = dist::require_shard(axis, n, op);
  if (op == "graph.allreduce") return s.comm->allreduce(s.rank, x, dist::parse_reduce_op(attrs.get_string("op")));
  if (op == "graph.all_gather") return s.comm->all_gather(s.rank, x, attrs.get_int("dim"));
  if (op == "graph.reduce_scatter") return s.comm->reduce_scatter(s.rank, x, attrs.get_int("dim"), dist::ReduceOp::sum);
  raise(ErrorCode::Internal, "run_collective_op: '" + op + "' is not a collective");
}

namespace {

std::vector<Tensor> run_collective(const KernelCall& call, const std::string& op) {
  const Tensor out = run_collective_op(op, call.attrs, call.inputs[0]);
  auto codes = out.codes();
  return {Tensor::from_codes(codes, sizes_of(call.result_types[0]), call.result_types[0].policy)};
}

// all_gather (gather = true) or reduce_scatter along attribute `dim`.
std::vector<ir::Type> infer_resize(std::span<const ir::Type> in, const AttrMap& attrs, const std::string& op,
                                   bool gather) {
  std::int64_t n = axis_size(attrs, op);
  reject_scale_format(in[0].dtype());
  Shape shape = in[0].shape;
  auto d = static_cast<std::size_t>(normalize_axis(attrs.get_int("dim"), shape.size(), "attribute 'dim'"));
  if (n == 1) return {in[0]};
  if (shape[d].is_symbolic()) {
    raise(ErrorCode::ShapeMismatch,
          op + " along dim " + std::to_string(d) + " needs a static size there, got '" + shape[d].symbol + "'");
  }
  if (gather) {
    shape[d] = Dim::fixed(shape[d].size * n);
  } else {
    if (shape[d].size % n != 0) {
      raise(ErrorCode::ShapeMismatch, op + " dim " + std::to_string(d) + " has size " + std::to_string(shape[d].size) +
                                          ", not divisible by axis_size " + std::to_string(n));
    }
    shape[d] = Dim::fixed(shape[d].size / n);
  }
  return {ir::Type::tensor(shape, in[0].policy)};
}

}  // namespace

void register_collective_ops(ir::Registry& r) {
  r.add(OpDef{
      .name = "graph.allreduce",
      .summary = "Combines x across the members of mesh axis `axis` with `op` (sum, mean, max, min).",
      .operands = {"x"},
      .attrs = {string_attr("axis"), int_attr("axis_size"), string_attr("op", std::string("sum"))},
      .effect = ir::Effect::collective,
      .infer =
          [](std::span<const ir::Type> in, const AttrMap& attrs) {
            axis_size(attrs, "graph.allreduce");
            reject_scale_format(in[0].dtype());
            const auto& op = attrs.get_string("op");
            if (op != "sum" && op != "mean" && op != "max" && op != "min") {
              raise(ErrorCode::ArgumentInvalid,
                    "allreduce 'op' must be \"sum\", \"mean\", \"max\" or \"min\", got \"" + op + "\"");
            }
            return std::vector<ir::Type>{in[0]};
          },
      .reference = [](const KernelCall& call) { return run_collective(call, "graph.allreduce"); },
  });
  r.add(OpDef{
      .name = "graph.all_gather",
      .summary = "Concatenates every member's x along `dim` (size * axis_size), in member order.",
      .operands = {"x"},
      .attrs = {string_attr("axis"), int_attr("axis_size"), int_attr("dim", 0)},
      .effect = ir::Effect::collective,
      .infer = [](std::span<const ir::Type> in,
                  const AttrMap& attrs) { return infer_resize(in, attrs, "graph.all_gather", true); },
      .reference = [](const KernelCall& call) { return run_collective(call, "graph.all_gather"); },
  });
  r.add(OpDef{
      .name = "graph.reduce_scatter",
      .summary = "Sums x across members, then gives member i the i-th of axis_size equal parts along `dim`.",
      .operands = {"x"},
      .attrs = {string_attr("axis"), int_attr("axis_size"), int_attr("dim", 0)},
      .effect = ir::Effect::collective,
      .infer = [](std::span<const ir::Type> in,
                  const AttrMap& attrs) { return infer_resize(in, attrs, "graph.reduce_scatter", false); },
      .reference = [](const KernelCall& call) { return run_collective(call, "graph.reduce_scatter"); },
  });
}

}  // namespace tessera::graph
