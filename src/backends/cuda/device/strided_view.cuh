// A strided view as cuda::strided_copy's kernels read it, and the source
// offset of each destination element: one definition for the kernels
// (embedded for NVRTC as "tessera/strided_view.cuh"; includes nothing) and
// for the host (src/backends/cuda/strided_view.h), which merges a view's
// dims before a launch and checks the decoding in tests.
#pragma once

#if defined(__CUDACC__)
#define TESSERA_STRIDED_FN __host__ __device__ __forceinline__
#else
#define TESSERA_STRIDED_FN inline
#endif

namespace tessera::strided {

constexpr int kMaxRank = 8;

// Sizes and element strides, outermost first.
struct View {
  long long shape[kMaxRank];
  long long strides[kMaxRank];
  int rank;
};

// The kernels' one by-value parameter.
struct Copy {
  const void* src;  // the view's first element
  void* dst;        // n contiguous elements
  long long n;
  View v;
};

// The source offset (in elements) of destination element i, the view's
// elements taken in row-major order.
TESSERA_STRIDED_FN long long source_offset(const View& v, long long i) {
  long long rest = i, at = 0;
  for (int d = v.rank - 1; d >= 0; --d) {
    const long long coord = rest % v.shape[d];
    rest /= v.shape[d];
    at += coord * v.strides[d];
  }
  return at;
}

}  // namespace tessera::strided
