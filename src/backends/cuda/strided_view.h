// The host side of cuda::strided_copy (strided_copy.cpp): a view's dims
// merged before a launch. The view and the offset decoding the kernels run
// are device/strided_view.cuh's, shared with them.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "backends/cuda/device/strided_view.cuh"

namespace tessera::strided {

// Size-1 dims dropped, and each dim merged into the one before it when the
// two step through memory as one (stride[d-1] == stride[d] * shape[d]): the
// same elements in the same row-major order with fewer divisions per
// element. nullopt when more than kMaxRank dims remain.
inline std::optional<View> merge_dims(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides) {
  View v{};
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (v.rank > 0 && v.strides[v.rank - 1] == strides[d] * shape[d]) {
      v.shape[v.rank - 1] *= shape[d];
      v.strides[v.rank - 1] = strides[d];
      continue;
    }
    if (v.rank == kMaxRank) return std::nullopt;
    v.shape[v.rank] = shape[d];
    v.strides[v.rank] = strides[d];
    ++v.rank;
  }
  return v;
}

// The kernels' CUDA C++ source (NVRTC compiles it on first use; tests
// compile it without a GPU).
std::string_view copy_kernels_source();

}  // namespace tessera::strided
