// A distributed tensor: a global shape and policy, a layout over a mesh, and
// one real shard per mesh device in that device's memory (host memory for
// virtual devices). docs/design/0006-distribution.md.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/dist/layout.h"
#include "tessera/dist/mesh.h"
#include "tessera/runtime/tensor.h"

namespace tessera::dist {

class DistTensor {
 public:
  DistTensor() = default;
  // Every shard zeros (for a partial layout the sum is zero too).
  static DistTensor zeros(std::vector<std::int64_t> shape, Layout layout, std::shared_ptr<const Mesh> mesh,
                          const NumericsPolicy& policy);
  // Shards a host tensor: every device gets the elements its layout gives
  // it; for a partial layout the devices at coordinate 0 of every partial
  // axis hold the value and the others zeros.
  static DistTensor scatter(const Tensor& global, Layout layout, std::shared_ptr<const Mesh> mesh);
  // Adopts shards made by the caller (one per mesh device, in mesh order,
  // of the layout's shard shape and the policy). ShapeError otherwise.
  static DistTensor from_shards(std::vector<std::int64_t> shape, Layout layout, std::shared_ptr<const Mesh> mesh,
                                const NumericsPolicy& policy, std::vector<Tensor> shards);

  const Mesh& mesh() const { return *mesh_; }
  const std::shared_ptr<const Mesh>& mesh_ptr() const { return mesh_; }
  const Layout& layout() const { return layout_; }
  const std::vector<std::int64_t>& shape() const { return shape_; }
  const NumericsPolicy& policy() const { return policy_; }
  const std::vector<Tensor>& shards() const { return shards_; }
  const Tensor& shard(std::size_t rank) const { return shards_.at(rank); }

  // The global value on the host: shards placed at their elements (one
  // replica of each), a partial tensor's terms summed in rank order.
  Tensor gather() const;
  // The shards along mesh axis `axis` (sharing storage with this tensor):
  // part i is held by the device at coordinate i on `axis` and 0 on the
  // others. ArgumentError when the tensor is split or partial over another
  // axis (its part i would be spread over several devices).
  std::vector<Tensor> parts(std::string_view axis) const;
  // The same values in another layout on the same mesh (through the host).
  DistTensor reshard(const Layout& to) const;
  // "dist.tensor([8192, 8192] fp8_e4m3, [-, tp] on mesh(tp=4) over cpu:0..cpu:3)".
  std::string describe() const;

 private:
  std::vector<std::int64_t> shape_;
  Layout layout_;
  std::shared_ptr<const Mesh> mesh_;
  NumericsPolicy policy_;
  std::vector<Tensor> shards_;
};

}  // namespace tessera::dist
