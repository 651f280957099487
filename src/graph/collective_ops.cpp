// Graph IR collective ops: graph.allreduce, graph.all_gather,
// graph.reduce_scatter, graph.all_to_all, and graph.shard_slice (a member's
// own part of a whole dim: no communication, but it needs the member's
// rank, so it runs like a collective) (Effect::collective).
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
#include "tessera/dist/layout.h"
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

// Part `rank` of `parts` (numpy.array_split) of x along attribute `dim`, a
// strided view; its length must be attribute `size` (what inference gave).
Tensor shard_slice(const Tensor& x, const AttrMap& attrs, std::size_t rank, std::int64_t parts) {
  auto d = static_cast<std::size_t>(normalize_axis(attrs.get_int("dim"), x.shape().size(), "attribute 'dim'"));
  const dist::Run part = dist::block_part(x.shape()[d], parts, static_cast<std::int64_t>(rank));
  if (part.length != attrs.get_int("size")) {
    raise(ErrorCode::ShapeMismatch, "graph.shard_slice: member " + std::to_string(rank) + " of mesh axis '" +
                                        attrs.get_string("axis") + "' holds " + std::to_string(part.length) +
                                        " elements of dim " + std::to_string(d) + ", the op was built for " +
                                        std::to_string(attrs.get_int("size")));
  }
  std::vector<std::int64_t> shape = x.shape();
  shape[d] = part.length;
  return x.as_strided(shape, x.strides(), x.storage_offset() + part.start * x.strides()[d]).contiguous();
}

// The identity on a one-member axis; otherwise the communicator of the
// calling thread's shard scope (an index launch's worker) runs it.
Tensor run_collective_op(const std::string& op, const AttrMap& attrs, const Tensor& x) {
  const std::int64_t n = axis_size(attrs, op);
  if (n == 1) return x;  // shard_slice's inference makes `size` the whole dim then
  const std::string& axis = attrs.get_string("axis");
  const dist::ShardBinding& s = dist::require_shard(axis, n, op);
  // The Mapper's choice of algorithm, recorded on the op (rank order when absent).
  const dist::Algorithm algorithm =
      attrs.has("algorithm") ? dist::parse_algorithm(attrs.get_string("algorithm")) : dist::Algorithm::rank_order;
  if (op == "graph.allreduce") {
    return s.comm->allreduce(s.rank, x, dist::parse_reduce_op(attrs.get_string("op")), algorithm);
  }
  if (op == "graph.all_gather") return s.comm->all_gather(s.rank, x, attrs.get_int("dim"));
  if (op == "graph.reduce_scatter") {
    return s.comm->reduce_scatter(s.rank, x, attrs.get_int("dim"), dist::ReduceOp::sum, algorithm);
  }
  if (op == "graph.all_to_all") {
    return s.comm->all_to_all(s.rank, x, attrs.get_int("split_dim"), attrs.get_int("concat_dim"));
  }
  if (op == "graph.shard_slice") return shard_slice(x, attrs, s.rank, n);
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

std::vector<ir::Type> infer_all_to_all(std::span<const ir::Type> in, const AttrMap& attrs) {
  const std::string op = "graph.all_to_all";
  std::int64_t n = axis_size(attrs, op);
  reject_scale_format(in[0].dtype());
  Shape shape = in[0].shape;
  auto split = static_cast<std::size_t>(normalize_axis(attrs.get_int("split_dim"), shape.size(), "attribute 'split_dim'"));
  auto concat =
      static_cast<std::size_t>(normalize_axis(attrs.get_int("concat_dim"), shape.size(), "attribute 'concat_dim'"));
  if (n == 1) return {in[0]};
  for (std::size_t d : {split, concat}) {
    if (shape[d].is_symbolic()) {
      raise(ErrorCode::ShapeMismatch, op + " needs a static size in dim " + std::to_string(d) + ", got '" +
                                          shape[d].symbol + "'");
    }
  }
  if (shape[split].size % n != 0) {
    raise(ErrorCode::ShapeMismatch, op + " split_dim " + std::to_string(split) + " has size " +
                                        std::to_string(shape[split].size) + ", not divisible by axis_size " +
                                        std::to_string(n));
  }
  shape[split] = Dim::fixed(shape[split].size / n);
  shape[concat] = Dim::fixed(shape[concat].size * n);
  return {ir::Type::tensor(shape, in[0].policy)};
}

std::vector<ir::Type> infer_shard_slice(std::span<const ir::Type> in, const AttrMap& attrs) {
  const std::string op = "graph.shard_slice";
  std::int64_t n = axis_size(attrs, op);
  Shape shape = in[0].shape;
  auto d = static_cast<std::size_t>(normalize_axis(attrs.get_int("dim"), shape.size(), "attribute 'dim'"));
  if (shape[d].is_symbolic()) {
    raise(ErrorCode::ShapeMismatch, op + " needs a static size in dim " + std::to_string(d));
  }
  const std::int64_t size = attrs.get_int("size");
  const std::int64_t most = (shape[d].size + n - 1) / n;
  if (size < 0 || size > most || (n == 1 && size != shape[d].size)) {
    raise(ErrorCode::ShapeMismatch, op + " attribute 'size' is " + std::to_string(size) + ", but a part of " +
                                        std::to_string(shape[d].size) + " elements over " + std::to_string(n) +
                                        " members holds " + (n == 1 ? "all of them" : "at most " + std::to_string(most)));
  }
  shape[d] = Dim::fixed(size);
  return {ir::Type::tensor(shape, in[0].policy)};
}

}  // namespace

// Optional: the reduction order a Mapper chose (rank_order, ring, tree,
// native; absent means rank_order), checked when the op is built.
static ir::AttrSpec algorithm_attr() {
  return ir::AttrSpec{.name = "algorithm", .kind = ir::AttrKind::string, .required = false,
                      .doc = "collective algorithm chosen by the Mapper: rank_order (default), ring, tree, native"};
}

void register_collective_ops(ir::Registry& r) {
  r.add(OpDef{
      .name = "graph.allreduce",
      .summary = "Combines x across the members of mesh axis `axis` with `op` (sum, mean, max, min).",
      .operands = {"x"},
      .attrs = {string_attr("axis"), int_attr("axis_size"), string_attr("op", std::string("sum")), algorithm_attr()},
      .effect = ir::Effect::collective,
      .infer =
          [](std::span<const ir::Type> in, const AttrMap& attrs) {
            axis_size(attrs, "graph.allreduce");
            if (attrs.has("algorithm")) dist::parse_algorithm(attrs.get_string("algorithm"));
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
      .attrs = {string_attr("axis"), int_attr("axis_size"), int_attr("dim", 0), algorithm_attr()},
      .effect = ir::Effect::collective,
      .infer = [](std::span<const ir::Type> in,
                  const AttrMap& attrs) {
        if (attrs.has("algorithm")) dist::parse_algorithm(attrs.get_string("algorithm"));
        return infer_resize(in, attrs, "graph.reduce_scatter", false);
      },
      .reference = [](const KernelCall& call) { return run_collective(call, "graph.reduce_scatter"); },
  });
  r.add(OpDef{
      .name = "graph.all_to_all",
      .summary = "Each member splits x along `split_dim` into axis_size parts and sends part j to member j, which "
                 "concatenates what it receives along `concat_dim` in member order.",
      .operands = {"x"},
      .attrs = {string_attr("axis"), int_attr("axis_size"), int_attr("split_dim", 0), int_attr("concat_dim", 0)},
      .effect = ir::Effect::collective,
      .infer = infer_all_to_all,
      .reference = [](const KernelCall& call) { return run_collective(call, "graph.all_to_all"); },
  });
  r.add(OpDef{
      .name = "graph.reshard",
      .summary = "x itself, laid out as `sharding` says (\"shard[-, tp]\"): tessera.dist.reshard in a function "
                 "over distributed tensors; the partitioner turns it into the collectives that move the shards.",
      .operands = {"x"},
      .attrs = {string_attr("sharding")},
      .infer = [](std::span<const ir::Type> in, const AttrMap&) { return std::vector<ir::Type>{in[0]}; },
      .reference = [](const KernelCall& call) { return std::vector<Tensor>{call.inputs[0]}; },
  });
  r.add(OpDef{
      .name = "graph.shard_slice",
      .summary = "The calling member's part of x along `dim` (numpy.array_split into axis_size parts; `size` is "
                 "its length): how a sharded function splits a whole value, with no communication.",
      .operands = {"x"},
      .attrs = {string_attr("axis"), int_attr("axis_size"), int_attr("dim", 0), int_attr("size")},
      .effect = ir::Effect::collective,
      .infer = infer_shard_slice,
      .reference = [](const KernelCall& call) { return run_collective(call, "graph.shard_slice"); },
  });
}

}  // namespace tessera::graph
