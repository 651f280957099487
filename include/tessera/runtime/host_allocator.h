// Host memory for tensors, with a cache of large blocks.
//
// Every call of a compiled executable allocates its outputs and
// intermediates. Through plain malloc a block of a few MiB is a fresh mmap
// each time (glibc's threshold adapts, but any other library in the process
// can reset it), so each call page-faults and zeroes its memory again, which
// measured 2x the time of a layernorm backward step. Blocks of at least
// kCachedMinBytes are therefore rounded to a size class and, when freed,
// kept for reuse, up to a cap (TESSERA_HOST_CACHE_MB, default 1024; 0
// disables the cache). Smaller blocks come from the C++ allocator.
#pragma once

#include <cstddef>
#include <memory>

namespace tessera::runtime {

inline constexpr std::size_t kCachedMinBytes = std::size_t{256} << 10;
inline constexpr std::size_t kHostAlignment = 64;

// A block of at least `bytes` bytes (64-byte aligned; contents unspecified),
// released to the cache when the last owner drops it.
std::shared_ptr<std::byte> allocate_host(std::size_t bytes);

struct HostCacheStats {
  std::size_t cached_bytes = 0;   // held for reuse now
  std::size_t hits = 0, misses = 0;
};
HostCacheStats host_cache_stats();
// Frees every cached block.
void release_host_cache();

}  // namespace tessera::runtime
