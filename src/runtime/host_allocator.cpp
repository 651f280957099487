// The host block cache (tessera/runtime/host_allocator.h).
#include "tessera/runtime/host_allocator.h"

#include <bit>
#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <vector>

namespace tessera::runtime {
namespace {

// Size classes: four per power of two (at most 25% slack).
std::size_t size_class(std::size_t bytes) {
  const std::size_t top = std::bit_floor(bytes);
  const std::size_t quarter = std::max<std::size_t>(top / 4, kHostAlignment);
  return (bytes + quarter - 1) / quarter * quarter;
}

std::size_t cap_from_env() {
  const char* v = std::getenv("TESSERA_HOST_CACHE_MB");
  if (!v || !*v) return std::size_t{1024} << 20;
  char* end = nullptr;
  const unsigned long long mb = std::strtoull(v, &end, 10);
  if (end == v || *end != '\0') return std::size_t{1024} << 20;  // unreadable: keep the default
  return static_cast<std::size_t>(mb) << 20;
}

class HostCache {
 public:
  std::byte* take(std::size_t cls) {
    std::lock_guard lock(mu_);
    auto it = free_.find(cls);
    if (it != free_.end() && !it->second.empty()) {
      std::byte* p = it->second.back();
      it->second.pop_back();
      cached_ -= cls;
      ++hits_;
      return p;
    }
    ++misses_;
    return nullptr;
  }
  void give(std::byte* p, std::size_t cls) {
    {
      std::lock_guard lock(mu_);
      if (cached_ + cls <= cap_) {
        free_[cls].push_back(p);
        cached_ += cls;
        return;
      }
    }
    ::operator delete[](p, std::align_val_t{kHostAlignment});
  }
  HostCacheStats stats() {
    std::lock_guard lock(mu_);
    return {cached_, hits_, misses_};
  }
  void release() {
    std::map<std::size_t, std::vector<std::byte*>> drop;
    {
      std::lock_guard lock(mu_);
      drop.swap(free_);
      cached_ = 0;
    }
    for (auto& [cls, blocks] : drop)
      for (std::byte* p : blocks) ::operator delete[](p, std::align_val_t{kHostAlignment});
  }

 private:
  std::mutex mu_;
  std::map<std::size_t, std::vector<std::byte*>> free_;
  std::size_t cached_ = 0, hits_ = 0, misses_ = 0;
  const std::size_t cap_ = cap_from_env();
};

// Never destroyed: blocks may be freed by static destructors of other units.
HostCache& cache() {
  static HostCache* c = new HostCache();
  return *c;
}

}  // namespace

std::shared_ptr<std::byte> allocate_host(std::size_t bytes) {
  bytes = std::max<std::size_t>(bytes, 1);
  if (bytes < kCachedMinBytes) {
    auto* p = static_cast<std::byte*>(::operator new[](bytes, std::align_val_t{kHostAlignment}));
    return std::shared_ptr<std::byte>(p, [](std::byte* q) { ::operator delete[](q, std::align_val_t{kHostAlignment}); });
  }
  const std::size_t cls = size_class(bytes);
  std::byte* p = cache().take(cls);
  if (!p) p = static_cast<std::byte*>(::operator new[](cls, std::align_val_t{kHostAlignment}));
  return std::shared_ptr<std::byte>(p, [cls](std::byte* q) { cache().give(q, cls); });
}

HostCacheStats host_cache_stats() { return cache().stats(); }
void release_host_cache() { cache().release(); }

}  // namespace tessera::runtime
