// The host block cache: large blocks are reused after release, small ones
// are not cached, alignment holds, and tensors built on it keep their values.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "tessera/runtime/host_allocator.h"
#include "tessera/runtime/tensor.h"

namespace tessera {
namespace {

TEST(HostAllocator, LargeBlocksAreReusedAfterRelease) {
  runtime::release_host_cache();
  const std::size_t bytes = std::size_t{3} << 20;
  std::byte* first = nullptr;
  {
    auto a = runtime::allocate_host(bytes);
    first = a.get();
    std::memset(a.get(), 0x5a, bytes);  // the whole block is writable
  }
  EXPECT_GE(runtime::host_cache_stats().cached_bytes, bytes);
  const auto before = runtime::host_cache_stats();
  // A request of the same size class gets the same block back.
  auto b = runtime::allocate_host(bytes - 100);
  EXPECT_EQ(b.get(), first);
  EXPECT_EQ(runtime::host_cache_stats().hits, before.hits + 1);
  EXPECT_LT(runtime::host_cache_stats().cached_bytes, before.cached_bytes);
}

TEST(HostAllocator, SmallBlocksAreNotCachedAndEveryBlockIsAligned) {
  runtime::release_host_cache();
  { auto a = runtime::allocate_host(1000); EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a.get()) % runtime::kHostAlignment, 0u); }
  EXPECT_EQ(runtime::host_cache_stats().cached_bytes, 0u);
  auto big = runtime::allocate_host(runtime::kCachedMinBytes + 1);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(big.get()) % runtime::kHostAlignment, 0u);
}

TEST(HostAllocator, ZerosIsZeroEvenOnAReusedBlock) {
  runtime::release_host_cache();
  const NumericsPolicy f32 = default_policy(DType::fp32);
  {
    Tensor t = Tensor::from_values(std::vector<double>(200000, 7.0), {200000}, f32);
  }
  Tensor z = Tensor::zeros({200000}, f32);
  for (double v : z.to_values()) ASSERT_EQ(v, 0.0);
  EXPECT_GE(runtime::host_cache_stats().hits, 1u);
}

}  // namespace
}  // namespace tessera
