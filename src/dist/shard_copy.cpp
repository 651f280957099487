// Host copies between global tensors and shards (shard_copy.h).
#include "dist/shard_copy.h"

#include <cstring>

#include "tessera/support/error.h"

namespace tessera::dist::detail {
namespace {


std::size_t element_bytes(const Tensor& codes) {
  return static_cast<std::size_t>(storage_bytes(codes.dtype()));
}

// Copies between a box of `big` (given by runs) and `small` (the runs' shape).
void copy_runs(const Tensor& big, const Tensor& small, const std::vector<std::vector<Run>>& runs, bool take) {
  const std::size_t rank = big.rank();
  const std::size_t es = element_bytes(big);
  if (small.numel() == 0) return;
  auto* big_base = static_cast<std::byte*>(big.data());
  auto* small_base = static_cast<std::byte*>(small.data());
  const std::vector<std::int64_t> big_strides = contiguous_strides(big.shape());
  const std::vector<std::int64_t> small_strides = contiguous_strides(small.shape());
  if (rank == 0) {
    std::memcpy(take ? small_base : big_base, take ? big_base : small_base, es);
    return;
  }
  // Global index of each small index along the outer dims.
  std::vector<std::vector<std::int64_t>> index(rank);
  for (std::size_t d = 0; d + 1 < rank; ++d)
    for (const Run& r : runs[d])
      for (std::int64_t i = 0; i < r.length; ++i) index[d].push_back(r.start + i);
  std::vector<std::int64_t> at(rank > 1 ? rank - 1 : 0, 0);
  const std::vector<std::int64_t>& shape = small.shape();
  while (true) {
    std::int64_t big_off = 0, small_off = 0;
    for (std::size_t d = 0; d + 1 < rank; ++d) {
      big_off += index[d][static_cast<std::size_t>(at[d])] * big_strides[d];
      small_off += at[d] * small_strides[d];
    }
    std::int64_t inner = 0;
    for (const Run& r : runs[rank - 1]) {
      std::byte* b = big_base + static_cast<std::size_t>(big_off + r.start) * es;
      std::byte* s = small_base + static_cast<std::size_t>(small_off + inner) * es;
      std::memcpy(take ? s : b, take ? b : s, static_cast<std::size_t>(r.length) * es);
      inner += r.length;
    }
    std::size_t d = rank - 1;
    while (d > 0) {
      --d;
      if (++at[d] < shape[d]) break;
      at[d] = 0;
      if (d == 0) return;
    }
    if (rank == 1) return;
  }
}

}  // namespace

Tensor host_codes(const Tensor& t) {
  const Tensor h = t.is_cpu() ? t : t.to("cpu");
  if (is_packed(h.dtype())) return h.contiguous().to_byte_codes();
  return h.contiguous().as_codes().contiguous();
}

Tensor from_codes(const Tensor& codes, const NumericsPolicy& policy, const std::string& device) {
  Tensor t = Tensor::empty(codes.shape(), policy);
  if (is_packed(policy.storage)) {
    t.store_byte_codes(codes);
  } else if (codes.numel() > 0) {
    std::memcpy(t.data(), codes.data(), static_cast<std::size_t>(codes.numel()) * element_bytes(codes));
  }
  return device == "cpu" ? t : t.to(device);
}

Tensor take_runs(const Tensor& global, const std::vector<std::vector<Run>>& runs) {
  std::vector<std::int64_t> shape;
  for (const auto& rs : runs) {
    std::int64_t n = 0;
    for (const Run& r : rs) n += r.length;
    shape.push_back(n);
  }
  Tensor part = Tensor::empty(shape, global.policy());
  copy_runs(global, part, runs, /*take=*/true);
  return part;
}

void put_runs(const Tensor& global, const Tensor& part, const std::vector<std::vector<Run>>& runs) {
  copy_runs(global, part, runs, /*take=*/false);
}

std::vector<std::vector<Run>> runs_along(const std::vector<std::int64_t>& shape, std::size_t dim, Run run) {
  std::vector<std::vector<Run>> runs;
  for (std::size_t d = 0; d < shape.size(); ++d) runs.push_back(d == dim ? std::vector<Run>{run} : std::vector<Run>{{0, shape[d]}});
  return runs;
}

Tensor concat_codes(const std::vector<Tensor>& pieces, std::size_t dim) {
  std::vector<std::int64_t> shape = pieces.at(0).shape();
  shape[dim] = 0;
  for (const Tensor& t : pieces) shape[dim] += t.shape()[dim];
  const Tensor out = Tensor::empty(shape, pieces[0].policy());
  std::int64_t at = 0;
  for (const Tensor& t : pieces) {
    put_runs(out, t, runs_along(shape, dim, {at, t.shape()[dim]}));
    at += t.shape()[dim];
  }
  return out;
}

}  // namespace tessera::dist::detail
