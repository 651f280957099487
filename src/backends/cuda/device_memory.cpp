// Device memory: plain allocations, the per-device caching allocator with its
// statistics, and copies between host and device.
#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <unordered_map>

#include "backends/cuda/driver_api.h"
#include "tessera/runtime/cuda.h"
#include "tessera/support/error.h"

namespace tessera::cuda {

using namespace detail;

namespace {

std::string mib(std::size_t bytes) {
  return std::to_string(bytes / (1024 * 1024)) + " MiB";
}

CUstream stream_of(const Stream& s) {
  return static_cast<CUstream>(s.handle());
}

}  // namespace

DevicePtr device_malloc(int device, std::size_t bytes) {
  use_device(device);
  CUdeviceptr ptr = 0;
  const CUresult rc = driver().cuMemAlloc(&ptr, std::max<std::size_t>(bytes, 1));
  if (rc == kCudaErrorOutOfMemory) {
    const auto [free_bytes, total] = memory_info(device);
    raise(ErrorCode::OutOfMemory, "cuda:" + std::to_string(device) + " is out of memory: allocating " +
                                      std::to_string(bytes) + " bytes failed with " + mib(free_bytes) + " free of " +
                                      mib(total));
  }
  check(rc, "cuMemAlloc");
  return ptr;
}

void device_free(int device, DevicePtr ptr) {
  use_device(device);
  check(driver().cuMemFree(ptr), "cuMemFree");
}

// ---- caching allocator ----------------------------------------------------------

struct CachingAllocator::State {
  std::size_t limit = 0;  // TESSERA_CUDA_MEMORY_LIMIT (0: none)
  struct Block {
    std::size_t size;  // rounded size, as allocated
    void* stream;
  };
  mutable std::mutex mutex;
  std::unordered_map<DevicePtr, Block> live;
  // Free blocks per stream, by size.
  std::map<void*, std::multimap<std::size_t, DevicePtr>> free_blocks;
  MemoryStats stats;
};

namespace {

// Small requests share 512-byte granules; large ones round to 1 MiB so that
// slightly different sizes (a batch that shrinks by one row) reuse blocks.
std::size_t round_size(std::size_t bytes) {
  constexpr std::size_t kSmall = 512, kLarge = std::size_t{1} << 20;
  bytes = std::max<std::size_t>(bytes, 1);
  const std::size_t granule = bytes < kLarge ? kSmall : kLarge;
  return (bytes + granule - 1) / granule * granule;
}

// TESSERA_CUDA_MEMORY_LIMIT: bytes, or a number with K, M or G (binary
// units); unset or empty: no limit.
std::size_t memory_limit() {
  const char* v = std::getenv("TESSERA_CUDA_MEMORY_LIMIT");
  if (v == nullptr || *v == 0) return 0;
  char* end = nullptr;
  const double number = std::strtod(v, &end);
  double scale = 1;
  if (end != nullptr && (*end == 'K' || *end == 'M' || *end == 'G')) {
    scale = *end == 'K' ? 1024.0 : *end == 'M' ? 1048576.0 : 1073741824.0;
    ++end;
  }
  if (end == v || end == nullptr || *end != 0 || !(number > 0)) {
    raise(ErrorCode::ArgumentInvalid, "TESSERA_CUDA_MEMORY_LIMIT='" + std::string(v) +
                                          "'; expected a positive number of bytes, optionally with K, M or G");
  }
  return static_cast<std::size_t>(number * scale);
}

}  // namespace

CachingAllocator::CachingAllocator(int device) : device_(device), state_(std::make_unique<State>()) {
  state_->limit = memory_limit();
}
CachingAllocator::~CachingAllocator() = default;

CachingAllocator& CachingAllocator::for_device(int device) {
  if (device < 0 || device >= device_count()) {
    raise(ErrorCode::DeviceUnavailable, "device cuda:" + std::to_string(device) + " does not exist: this machine has " +
                                            std::to_string(device_count()) + " CUDA devices");
  }
  static std::mutex mutex;
  // Allocators live for the process: tensors released during exit still
  // return their blocks to a valid allocator.
  static auto* allocators = new std::map<int, CachingAllocator*>();
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = (*allocators)[device];
  if (slot == nullptr) slot = new CachingAllocator(device);
  return *slot;
}

DevicePtr CachingAllocator::allocate(std::size_t bytes, void* stream) {
  const std::size_t size = round_size(bytes);
  std::lock_guard<std::mutex> lock(state_->mutex);
  MemoryStats& st = state_->stats;
  DevicePtr ptr = 0;
  std::size_t got = size;
  auto& pool = state_->free_blocks[stream];
  // Best fit, but never a block more than twice the request.
  if (auto it = pool.lower_bound(size); it != pool.end() && it->first <= 2 * size) {
    got = it->first;
    ptr = it->second;
    pool.erase(it);
    st.bytes_cached -= got;
    ++st.cache_hits;
  } else {
    if (state_->limit != 0 && st.bytes_in_use + st.bytes_cached + size > state_->limit) {
      free_cached_locked();  // within the limit the cache is what gives way first
      if (st.bytes_in_use + size > state_->limit) {
        raise(ErrorCode::OutOfMemory, "cuda:" + std::to_string(device_) + " is out of memory: allocating " +
                                          std::to_string(bytes) + " bytes would pass TESSERA_CUDA_MEMORY_LIMIT (" +
                                          mib(state_->limit) + ", " + mib(st.bytes_in_use) + " in use)");
      }
    }
    try {
      ptr = device_malloc(device_, size);
    } catch (const OutOfMemoryError&) {
      free_cached_locked();  // cached blocks of other sizes may be what stands in the way
      ptr = device_malloc(device_, size);
    }
    ++st.device_allocations;
  }
  state_->live[ptr] = {got, stream};
  st.bytes_in_use += got;
  st.peak_in_use = std::max(st.peak_in_use, st.bytes_in_use);
  ++st.allocations;
  return ptr;
}

void CachingAllocator::release(DevicePtr ptr) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  auto it = state_->live.find(ptr);
  if (it == state_->live.end()) {
    raise(ErrorCode::ArgumentInvalid, "CachingAllocator::release: pointer was not allocated by cuda:" +
                                          std::to_string(device_) + "'s allocator or was already released");
  }
  const State::Block block = it->second;
  state_->live.erase(it);
  state_->free_blocks[block.stream].emplace(block.size, ptr);
  state_->stats.bytes_in_use -= block.size;
  state_->stats.bytes_cached += block.size;
  ++state_->stats.frees;
}

MemoryStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->stats;
}

void CachingAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->stats.peak_in_use = state_->stats.bytes_in_use;
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  free_cached_locked();
}

void CachingAllocator::free_cached_locked() {
  for (auto& [stream, blocks] : state_->free_blocks) {
    for (auto& [size, block] : blocks) device_free(device_, block);
    blocks.clear();
  }
  state_->stats.bytes_cached = 0;
}

std::shared_ptr<void> allocate_shared(int device, std::size_t bytes, void* stream) {
  CachingAllocator& allocator = CachingAllocator::for_device(device);
  const DevicePtr ptr = allocator.allocate(bytes, stream);
  return std::shared_ptr<void>(reinterpret_cast<void*>(ptr), [&allocator](void* p) {
    // A deleter must not throw; release only fails for foreign pointers,
    // which cannot reach here.
    try {
      allocator.release(reinterpret_cast<DevicePtr>(p));
    } catch (...) {
    }
  });
}

// ---- copies -----------------------------------------------------------------------

// The synchronous copies wait for the whole transfer: cuMemcpyHtoD from pageable
// memory may return once the data is staged, before the DMA lands, and a
// kernel on a non-blocking stream is not ordered after it (a launch right after
// a copy read stale memory on an H200). Queuing the copy on the legacy stream
// and waiting for that stream closes the gap.
void copy_to_device(int device, DevicePtr dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  settle_watches(device);
  use_device(device);
  check(driver().cuMemcpyHtoDAsync(dst, src, bytes, nullptr), "cuMemcpyHtoDAsync");
  check(driver().cuStreamSynchronize(nullptr), "cuStreamSynchronize");
}

void copy_to_host(int device, void* dst, DevicePtr src, std::size_t bytes) {
  if (bytes == 0) return;
  settle_watches(device);
  use_device(device);
  // Work queued on other streams is the caller's to wait for; this waits for the copy.
  check(driver().cuMemcpyDtoHAsync(dst, src, bytes, nullptr), "cuMemcpyDtoHAsync");
  check(driver().cuStreamSynchronize(nullptr), "cuStreamSynchronize");
}

void copy_device_to_device(int device, DevicePtr dst, DevicePtr src, std::size_t bytes) {
  settle_watches(device);
  use_device(device);
  if (bytes) check(driver().cuMemcpyDtoD(dst, src, bytes), "cuMemcpyDtoD");
  check(driver().cuCtxSynchronize(), "cuCtxSynchronize");
}

void copy_to_device_async(DevicePtr dst, const void* src, std::size_t bytes, const Stream& stream) {
  use_device(stream.device());
  check(driver().cuMemcpyHtoDAsync(dst, src, bytes, stream_of(stream)), "cuMemcpyHtoDAsync");
}

void copy_to_host_async(void* dst, DevicePtr src, std::size_t bytes, const Stream& stream) {
  use_device(stream.device());
  check(driver().cuMemcpyDtoHAsync(dst, src, bytes, stream_of(stream)), "cuMemcpyDtoHAsync");
}

void copy_device_to_device_async(DevicePtr dst, DevicePtr src, std::size_t bytes, const Stream& stream) {
  use_device(stream.device());
  check(driver().cuMemcpyDtoDAsync(dst, src, bytes, stream_of(stream)), "cuMemcpyDtoDAsync");
}

void memset_async(DevicePtr dst, unsigned char value, std::size_t bytes, const Stream& stream) {
  use_device(stream.device());
  check(driver().cuMemsetD8Async(dst, value, bytes, stream_of(stream)), "cuMemsetD8Async");
}

void memset_async(int device, DevicePtr dst, unsigned char value, std::size_t bytes) {
  use_device(device);
  check(driver().cuMemsetD8Async(dst, value, bytes, nullptr), "cuMemsetD8Async");
}

}  // namespace tessera::cuda
