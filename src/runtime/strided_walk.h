// Walking a strided layout in row-major order of its logical shape, the one
// loop behind tensor copies, decoding and broadcast index maps.
#pragma once

#include <cstdint>
#include <vector>

namespace tessera {

// Calls f(storage_offset) for every element of `shape`, in row-major order,
// where element (i0, i1, ...) lives at offset + sum(i_k * strides[k]).
template <typename F>
void for_each_offset(const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>& strides,
                     std::int64_t offset, F&& f) {
  std::int64_t n = 1;
  for (auto s : shape) n *= s;
  if (n == 0) return;
  std::size_t rank = shape.size();
  std::vector<std::int64_t> idx(rank, 0);
  std::int64_t off = offset;
  for (std::int64_t e = 0; e < n; ++e) {
    f(off);
    for (std::size_t d = rank; d-- > 0;) {
      if (++idx[d] < shape[d]) {
        off += strides[d];
        break;
      }
      off -= strides[d] * (shape[d] - 1);
      idx[d] = 0;
    }
  }
}

}  // namespace tessera
