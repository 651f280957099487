// Distributed tensors (tessera/dist/dist_tensor.h).
#include "tessera/dist/dist_tensor.h"

#include <algorithm>

#include "dist/shard_copy.h"
#include "tessera/dist/communicator.h"
#include "tessera/support/error.h"

namespace tessera::dist {
namespace {

std::string shape_text(const std::vector<std::int64_t>& s) {
  std::string t = "[";
  for (std::size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

void check_layout(const std::vector<std::int64_t>& shape, const Layout& layout, const Mesh& mesh) {
  if (layout.rank() != shape.size()) {
    raise(ErrorCode::ShapeMismatch, "a layout of " + std::to_string(layout.rank()) + " dim(s) for a tensor of shape " +
                                        shape_text(shape));
  }
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 0) raise(ErrorCode::ShapeMismatch, "negative size in shape " + shape_text(shape));
    for (const std::string& a : layout.dims()[d].mesh_axes) (void)mesh.axis_index(a);
  }
  for (const std::string& a : layout.partial()) (void)mesh.axis_index(a);
}

std::vector<std::vector<Run>> runs_of(const std::vector<std::int64_t>& shape, const Layout& layout, const Mesh& mesh,
                                      std::size_t rank) {
  std::vector<std::vector<Run>> runs;
  for (std::size_t d = 0; d < shape.size(); ++d) runs.push_back(layout.runs(d, shape[d], mesh, rank));
  return runs;
}

bool on_partial_origin(const Layout& layout, const Mesh& mesh, std::size_t rank) {
  const auto c = mesh.coords(rank);
  return std::all_of(layout.partial().begin(), layout.partial().end(),
                     [&](const std::string& a) { return c[mesh.axis_index(a)] == 0; });
}

}  // namespace

DistTensor DistTensor::zeros(std::vector<std::int64_t> shape, Layout layout, std::shared_ptr<const Mesh> mesh,
                             const NumericsPolicy& policy) {
  check_layout(shape, layout, *mesh);
  std::vector<Tensor> shards;
  for (std::size_t r = 0; r < mesh->size(); ++r) {
    Tensor s = Tensor::zeros(layout.shard_shape(shape, *mesh, r), policy);
    const std::string where = memory_device(mesh->devices()[r]);
    shards.push_back(where == "cpu" ? s : s.to(where));
  }
  return from_shards(std::move(shape), std::move(layout), std::move(mesh), policy, std::move(shards));
}

DistTensor DistTensor::scatter(const Tensor& global, Layout layout, std::shared_ptr<const Mesh> mesh) {
  check_layout(global.shape(), layout, *mesh);
  const Tensor codes = detail::host_codes(global);
  std::vector<Tensor> shards;
  for (std::size_t r = 0; r < mesh->size(); ++r) {
    const std::string where = memory_device(mesh->devices()[r]);
    if (!on_partial_origin(layout, *mesh, r)) {
      Tensor z = Tensor::zeros(layout.shard_shape(global.shape(), *mesh, r), global.policy());
      shards.push_back(where == "cpu" ? z : z.to(where));
      continue;
    }
    shards.push_back(detail::from_codes(detail::take_runs(codes, runs_of(global.shape(), layout, *mesh, r)),
                                        global.policy(), where));
  }
  return from_shards(global.shape(), std::move(layout), std::move(mesh), global.policy(), std::move(shards));
}

DistTensor DistTensor::from_shards(std::vector<std::int64_t> shape, Layout layout, std::shared_ptr<const Mesh> mesh,
                                   const NumericsPolicy& policy, std::vector<Tensor> shards) {
  check_layout(shape, layout, *mesh);
  if (shards.size() != mesh->size()) {
    raise(ErrorCode::ShapeMismatch, std::to_string(shards.size()) + " shard(s) for " + mesh->describe() + " (" +
                                        std::to_string(mesh->size()) + " devices)");
  }
  for (std::size_t r = 0; r < shards.size(); ++r) {
    const auto want = layout.shard_shape(shape, *mesh, r);
    if (shards[r].shape() != want || shards[r].dtype() != policy.storage) {
      raise(ErrorCode::ShapeMismatch, "the shard of " + mesh->devices()[r] + " is " + ::tessera::describe(shards[r]) +
                                          "; layout " + layout.describe() + " of " + shape_text(shape) + " gives it " +
                                          shape_text(want) + " " + std::string(name(policy.storage)));
    }
  }
  DistTensor t;
  t.shape_ = std::move(shape);
  t.layout_ = std::move(layout);
  t.mesh_ = std::move(mesh);
  t.policy_ = policy;
  t.shards_ = std::move(shards);
  return t;
}

Tensor DistTensor::gather() const {
  const Mesh& m = *mesh_;
  // One replica per element: coordinate 0 on the axes that neither split a dim nor hold a partial sum.
  auto representative = [&](std::size_t r) {
    const auto c = m.coords(r);
    for (std::size_t a = 0; a < m.axes().size(); ++a) {
      const std::string& axis = m.axes()[a];
      const bool partial = std::find(layout_.partial().begin(), layout_.partial().end(), axis) != layout_.partial().end();
      if (!layout_.splits(axis) && !partial && c[a] != 0) return false;
    }
    return true;
  };
  // The partial terms, by their index among the partial axes (mixed radix in mesh axis order).
  std::vector<std::int64_t> partial_sizes;
  for (const std::string& a : m.axes())
    if (std::find(layout_.partial().begin(), layout_.partial().end(), a) != layout_.partial().end())
      partial_sizes.push_back(m.axis_size(a));
  std::int64_t terms = 1;
  for (std::int64_t s : partial_sizes) terms *= s;
  auto term_of = [&](std::size_t r) {
    const auto c = m.coords(r);
    std::int64_t t = 0;
    for (std::size_t a = 0; a < m.axes().size(); ++a) {
      if (std::find(layout_.partial().begin(), layout_.partial().end(), m.axes()[a]) != layout_.partial().end()) {
        t = t * m.shape()[a] + c[a];
      }
    }
    return t;
  };
  const Tensor code_like = detail::host_codes(Tensor::zeros({0}, policy_));
  std::vector<Tensor> globals;
  for (std::int64_t t = 0; t < terms; ++t) globals.push_back(Tensor::empty(shape_, code_like.policy()));
  for (std::size_t r = 0; r < m.size(); ++r) {
    if (!representative(r)) continue;
    detail::put_runs(globals[static_cast<std::size_t>(term_of(r))], detail::host_codes(shards_[r]),
                     runs_of(shape_, layout_, m, r));
  }
  std::vector<Tensor> values;
  for (const Tensor& g : globals) values.push_back(detail::from_codes(g, policy_, "cpu"));
  if (values.size() == 1) return values[0];
  return reduce_in_rank_order(values, ReduceOp::sum);
}

std::vector<Tensor> DistTensor::parts(std::string_view axis) const {
  const Mesh& m = *mesh_;
  const std::size_t ai = m.axis_index(axis);
  for (std::size_t a = 0; a < m.axes().size(); ++a) {
    if (a == ai || m.shape()[a] == 1) continue;
    const std::string& other = m.axes()[a];
    const bool partial = std::find(layout_.partial().begin(), layout_.partial().end(), other) != layout_.partial().end();
    if (layout_.splits(other) || partial) {
      raise(ErrorCode::ArgumentInvalid, "parts('" + std::string(axis) + "') of " + describe() + ": it is also " +
                                            (partial ? "partial" : "split") + " over mesh axis '" + other +
                                            "', so a part along '" + std::string(axis) +
                                            "' spans several devices; take parts over that axis, or reshard");
    }
  }
  std::vector<Tensor> out;
  std::vector<std::int64_t> c(m.axes().size(), 0);
  for (std::int64_t i = 0; i < m.shape()[ai]; ++i) {
    c[ai] = i;
    out.push_back(shards_[m.rank_of(c)]);
  }
  return out;
}

DistTensor DistTensor::reshard(const Layout& to) const {
  return scatter(gather(), to, mesh_);
}

std::string DistTensor::describe() const {
  return "dist.tensor(" + shape_text(shape_) + " " + std::string(name(policy_.storage)) + ", " + layout_.describe() +
         " on " + mesh_->describe() + ")";
}

}  // namespace tessera::dist
