// View kernels (views.h).
#include "schedule/views.h"

#include <numeric>

#include "graph/op_families.h"
#include "graph/shape_rules.h"
#include "tessera/support/error.h"

namespace tessera::schedule {
namespace {


bool is_collective(std::string_view n) {
  return n == "graph.allreduce" || n == "graph.all_gather" || n == "graph.reduce_scatter" || n == "graph.all_to_all" ||
         n == "graph.shard_slice";
}

// Results along `axis` at offsets `starts` with sizes `sizes`.
std::vector<Tensor> split_along(const Tensor& x, std::size_t axis, const std::vector<std::int64_t>& sizes) {
  std::vector<Tensor> out;
  std::int64_t at = 0;
  for (std::int64_t size : sizes) {
    std::vector<std::int64_t> shape = x.shape();
    shape[axis] = size;
    out.push_back(x.as_strided(shape, x.strides(), at * x.strides()[axis]));
    at += size;
  }
  return out;
}

}  // namespace

std::optional<std::string> view_unsupported(const ir::Operation&) {
  // Every view op runs: packed storage through byte codes, collectives over
  // several members through the thread's shard scope (which raises a
  // located CollectiveError outside an index launch).
  return std::nullopt;
}

std::vector<Tensor> apply_view(const ir::Operation& op, const std::vector<Tensor>& inputs,
                               const std::vector<std::vector<std::int64_t>>& result_sizes) {
  const std::string_view n = op.name();
  const Tensor& x = inputs.at(0);
  if (is_packed(x.dtype()) && n != "graph.reshape" && n != "graph.stop_gradient" && !is_collective(n)) {
    // Packed storage has no element strides: the view is taken of the
    // unpacked codes (one per byte) and each result packed again.
    if (!x.is_cpu()) {
      raise(ErrorCode::Device, std::string(n) + " of packed " + std::string(name(x.dtype())) + " storage on " +
                                   x.device() + ": packed formats on a GPU are not supported yet",
            op.location());
    }
    std::vector<Tensor> in = inputs;
    in[0] = x.to_byte_codes();
    std::vector<Tensor> out = apply_view(op, in, result_sizes);
    for (Tensor& r : out) {
      Tensor packed = Tensor::empty(r.shape(), x.policy());
      packed.store_byte_codes(r);
      r = packed;
    }
    return out;
  }
  if (n == "graph.reshape") return {x.reshape(result_sizes.at(0))};
  if (n == "graph.stop_gradient") return {x};
  // A collective: the identity on a one-member axis, else the thread's shard communicator.
  if (is_collective(n)) return {graph::run_collective_op(std::string(n), op.attrs(), x)};
  if (n == "graph.transpose") {
    std::vector<std::int64_t> perm;  // negative entries count from the end
    for (std::int64_t p : op.attrs().get_ints("perm")) perm.push_back(graph::normalize_axis(p, x.rank()));
    return {x.permute(perm)};
  }
  if (n == "graph.slice") {
    const auto& starts = op.attrs().get_ints("starts");
    const auto& stops = op.attrs().get_ints("stops");
    std::vector<std::int64_t> steps = op.attrs().get_ints("steps");
    if (steps.empty()) steps.assign(x.rank(), 1);
    std::vector<std::int64_t> shape, strides;
    std::int64_t offset = 0;
    for (std::size_t a = 0; a < x.rank(); ++a) {
      const graph::AxisSlice s = graph::resolve_slice(starts[a], stops[a], steps[a], x.shape()[a]);
      shape.push_back(s.size);
      strides.push_back(x.strides()[a] * s.step);
      offset += s.start * x.strides()[a];
    }
    return {x.as_strided(shape, strides, offset)};
  }
  if (n == "graph.split") {
    const auto axis = static_cast<std::size_t>(graph::normalize_axis(op.attrs().get_int("axis"), x.rank()));
    return split_along(x, axis, op.attrs().get_ints("sizes"));
  }
  if (n == "graph.split_qkv") {
    const std::size_t last = x.rank() - 1;
    const std::int64_t d = x.shape()[last] / 3;
    std::vector<Tensor> parts = split_along(x, last, {d, d, d});
    const std::int64_t heads = op.attrs().get_int("num_heads");
    if (heads == 0) return parts;
    for (Tensor& p : parts) {
      // [.., D] -> [.., H, D / H]: the last axis splits in two, strides follow.
      std::vector<std::int64_t> shape = p.shape(), strides = p.strides();
      const std::int64_t s = strides.back();
      shape.back() = heads;
      strides.back() = (d / heads) * s;
      shape.push_back(d / heads);
      strides.push_back(s);
      p = p.as_strided(shape, strides, 0);
    }
    return parts;
  }
  raise(ErrorCode::Internal, "apply_view: '" + std::string(n) + "' is not a view op", op.location());
}

}  // namespace tessera::schedule
