// Distributed tensors whose shards live in several processes (tessera/dist/mpi.h):
// a run under mpirun computes only this process's shards; reading the global
// value fetches the others.
#include <cstring>

#include "dist/shard_copy.h"
#include "tessera/dist/mesh.h"
#include "tessera/dist/mpi.h"
#include "tessera/support/error.h"

namespace tessera::dist {

DistTensor mpi_adopt_local_shards(std::vector<std::int64_t> shape, Layout layout, std::shared_ptr<const Mesh> mesh,
                                  const NumericsPolicy& policy, std::vector<std::optional<Tensor>> shards) {
  if (shards.size() != mesh->size()) {
    raise(ErrorCode::ShapeMismatch, std::to_string(shards.size()) + " shard(s) for " + mesh->describe());
  }
  std::vector<Tensor> all;
  for (std::size_t r = 0; r < shards.size(); ++r) {
    all.push_back(shards[r] ? *shards[r] : Tensor::zeros(layout.shard_shape(shape, *mesh, r), policy));
  }
  return DistTensor::from_shards(std::move(shape), std::move(layout), std::move(mesh), policy, std::move(all));
}

DistTensor mpi_complete_shards(const DistTensor& t, const std::vector<int>& owners) {
  const Mesh& mesh = t.mesh();
  if (owners.size() != mesh.size()) {
    raise(ErrorCode::ArgumentInvalid, std::to_string(owners.size()) + " owners for " + mesh.describe());
  }
  const int processes = process_count();
  const int me = process_rank();
  // This process's shards as codes, back to back, in mesh order.
  std::vector<Tensor> codes(mesh.size());
  std::vector<std::size_t> bytes(mesh.size());
  std::size_t mine = 0;
  for (std::size_t r = 0; r < mesh.size(); ++r) {
    codes[r] = detail::host_codes(t.shard(r));  // stand-ins too: their sizes say where each shard's bytes are
    bytes[r] = storage_bytes_for(codes[r].dtype(), codes[r].numel());
    if (owners[r] == me) mine += bytes[r];
  }
  Tensor packed = Tensor::empty({static_cast<std::int64_t>(mine)}, default_policy(DType::uint8));
  std::size_t at = 0;
  for (std::size_t r = 0; r < mesh.size(); ++r) {
    if (owners[r] != me || bytes[r] == 0) continue;
    std::memcpy(static_cast<std::byte*>(packed.data()) + at, codes[r].data(), bytes[r]);
    at += bytes[r];
  }
  std::vector<std::string> members;
  std::vector<int> ranks;
  for (int p = 0; p < processes; ++p) {
    members.push_back("process:" + std::to_string(p));
    ranks.push_back(p);
  }
  const auto comm = make_mpi_communicator("shards", members, ranks);
  const Tensor all = comm->all_gather(static_cast<std::size_t>(me), packed, 0);
  // Process p's bytes come p-th; within them, its shards in mesh order.
  std::vector<Tensor> shards = t.shards();
  at = 0;
  for (int p = 0; p < processes; ++p) {
    for (std::size_t r = 0; r < mesh.size(); ++r) {
      if (owners[r] != p) continue;
      if (p != me) {
        const Tensor c = Tensor::empty(codes[r].shape(), codes[r].policy());
        if (bytes[r] > 0) std::memcpy(c.data(), static_cast<const std::byte*>(all.data()) + at, bytes[r]);
        shards[r] = detail::from_codes(c, t.policy(), "cpu");
      }
      at += bytes[r];
    }
  }
  if (at != static_cast<std::size_t>(all.numel())) {
    raise(ErrorCode::Internal, "the processes' shards of " + t.describe() + " came to " +
                                   std::to_string(all.numel()) + " bytes, not " + std::to_string(at));
  }
  return DistTensor::from_shards(t.shape(), t.layout(), t.mesh_ptr(), t.policy(), std::move(shards));
}

std::string tensor_to_bytes(const Tensor& t) {
  const Tensor codes = detail::host_codes(t);
  return std::string(static_cast<const char*>(codes.data()), storage_bytes_for(codes.dtype(), codes.numel()));
}

Tensor tensor_from_bytes(const std::string& bytes, const std::vector<std::int64_t>& shape,
                         const NumericsPolicy& policy) {
  const Tensor codes = Tensor::empty(shape, detail::host_codes(Tensor::empty({0}, policy)).policy());
  const std::size_t n = storage_bytes_for(codes.dtype(), codes.numel());
  if (bytes.size() != n) {
    raise(ErrorCode::ArgumentInvalid, std::to_string(bytes.size()) + " bytes for a tensor of " +
                                          std::to_string(codes.numel()) + " element(s) of " + print_policy(policy) +
                                          ", which takes " + std::to_string(n));
  }
  if (n > 0) std::memcpy(codes.data(), bytes.data(), n);
  return detail::from_codes(codes, policy, "cpu");
}

}  // namespace tessera::dist
