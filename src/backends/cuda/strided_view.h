// The host side of cuda::strided_copy (strided_copy.cpp): a view's dims
// merged before the kernel decodes each element's source offset, and that
// decoding as the kernel does it, so the host can check both.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

namespace tessera::cuda::detail {

constexpr int kStridedCopyMaxRank = 8;

// The kernel parameter's view: sizes and element strides, outermost first.
struct StridedView {
  long long shape[kStridedCopyMaxRank];
  long long strides[kStridedCopyMaxRank];
  int rank;
};

// Size-1 dims dropped, and each dim merged into the one before it when the
// two step through memory as one (stride[d-1] == stride[d] * shape[d]): the
// same elements in the same row-major order with fewer divisions per
// element. nullopt when more than kStridedCopyMaxRank dims remain.
inline std::optional<StridedView> merge_dims(std::span<const std::int64_t> shape,
                                             std::span<const std::int64_t> strides) {
  StridedView v{};
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (v.rank > 0 && v.strides[v.rank - 1] == strides[d] * shape[d]) {
      v.shape[v.rank - 1] *= shape[d];
      v.strides[v.rank - 1] = strides[d];
      continue;
    }
    if (v.rank == kStridedCopyMaxRank) return std::nullopt;
    v.shape[v.rank] = shape[d];
    v.strides[v.rank] = strides[d];
    ++v.rank;
  }
  return v;
}

// The source offset (in elements) of destination element i: the kernel's
// loop body (strided_copy.cpp, kSource) written once more for the host.
inline long long source_offset(const StridedView& v, long long i) {
  long long rest = i, at = 0;
  for (int d = v.rank - 1; d >= 0; --d) {
    const long long coord = rest % v.shape[d];
    rest /= v.shape[d];
    at += coord * v.strides[d];
  }
  return at;
}

}  // namespace tessera::cuda::detail
