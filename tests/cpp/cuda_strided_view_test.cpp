// cuda::strided_copy without a GPU: merging a view's dims
// (src/backends/cuda/strided_view.h) and decoding each destination
// element's source offset (device/strided_view.cuh, the function the kernels
// call) must visit exactly the view's elements in row-major order, checked
// against a direct walk of the unmerged view over permuted and sliced views
// of random shapes; and the kernels' source must compile with NVRTC.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "backends/cuda/strided_view.h"
#include "tessera/runtime/cuda.h"
#include "tessera/support/error.h"

namespace tessera::strided {
namespace {

// Offsets of a view's elements, row-major, straight from its shape and strides.
std::vector<long long> walk(const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>& strides) {
  std::vector<long long> out;
  std::vector<std::int64_t> at(shape.size(), 0);
  const std::int64_t n = std::accumulate(shape.begin(), shape.end(), std::int64_t{1}, std::multiplies<>());
  for (std::int64_t i = 0; i < n; ++i) {
    long long offset = 0;
    for (std::size_t d = 0; d < shape.size(); ++d) offset += at[d] * strides[d];
    out.push_back(offset);
    for (std::size_t d = shape.size(); d-- > 0;) {
      if (++at[d] < shape[d]) break;
      at[d] = 0;
    }
  }
  return out;
}

std::vector<long long> decoded(const View& v, std::int64_t n) {
  std::vector<long long> out;
  for (std::int64_t i = 0; i < n; ++i) out.push_back(source_offset(v, i));
  return out;
}

TEST(CudaStridedView, MergedViewsVisitTheViewsElementsInOrder) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 500; ++trial) {
    const int rank = 1 + static_cast<int>(rng() % 6);
    std::vector<std::int64_t> base(static_cast<std::size_t>(rank));
    for (auto& s : base) s = 1 + static_cast<std::int64_t>(rng() % 5);
    // Row-major strides of the base tensor, then a permutation and a slice
    // (start, step) per dim: the views transpose, permute and slice make.
    std::vector<std::int64_t> base_strides(base.size());
    std::int64_t stride = 1;
    for (std::size_t d = base.size(); d-- > 0;) {
      base_strides[d] = stride;
      stride *= base[d];
    }
    std::vector<std::size_t> perm(base.size());
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    std::vector<std::int64_t> shape, strides;
    for (std::size_t d : perm) {
      const std::int64_t start = static_cast<std::int64_t>(rng() % static_cast<unsigned>(base[d]));
      const std::int64_t step = 1 + static_cast<std::int64_t>(rng() % 3);
      shape.push_back((base[d] - start + step - 1) / step);
      strides.push_back(base_strides[d] * step);
    }
    const auto v = merge_dims(shape, strides);
    ASSERT_TRUE(v.has_value());
    EXPECT_LE(v->rank, rank);
    const std::int64_t n = std::accumulate(shape.begin(), shape.end(), std::int64_t{1}, std::multiplies<>());
    EXPECT_EQ(decoded(*v, n), walk(shape, strides)) << "trial " << trial;
  }
}

TEST(CudaStridedView, ContiguousRunsBecomeOneDim) {
  const std::vector<std::int64_t> shape{4, 1, 3, 5}, strides{15, 99, 5, 1};
  const auto v = merge_dims(shape, strides);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->rank, 1);
  EXPECT_EQ(v->shape[0], 60);
  EXPECT_EQ(v->strides[0], 1);
  // A transpose keeps two dims.
  const auto t = merge_dims(std::vector<std::int64_t>{5, 4}, std::vector<std::int64_t>{1, 5});
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->rank, 2);
}

TEST(CudaStridedView, MoreThanEightDimsThatCannotMergeAreRefused) {
  // Nine dims of size 2, each stepping 3x the next's span: none merges.
  std::vector<std::int64_t> shape(9, 2), strides(9);
  std::int64_t s = 1;
  for (std::size_t d = 9; d-- > 0;) {
    strides[d] = s;
    s *= 6;
  }
  EXPECT_FALSE(merge_dims(shape, strides).has_value());
  // The same with size-1 dims added stays within eight once they go.
  std::vector<std::int64_t> padded_shape{1, 2, 2, 1, 2, 2, 2, 2, 2, 2}, padded_strides{7, 6, 1, 7, 1, 1, 1, 1, 1, 1};
  EXPECT_TRUE(merge_dims(padded_shape, padded_strides).has_value());
}

TEST(CudaStridedView, TheCopyKernelsCompileWithNvrtc) {
  try {
    cuda::nvrtc_version();
  } catch (const Error&) {
    GTEST_SKIP() << "NVRTC is not installed here";
  }
  cuda::CompileOptions options;
  options.arch = "sm_90";
  const cuda::CompiledProgram program = cuda::compile(copy_kernels_source(), "tessera_strided_copy.cu", 0, options);
  EXPECT_FALSE(program.cubin.empty());
}

}  // namespace
}  // namespace tessera::strided
