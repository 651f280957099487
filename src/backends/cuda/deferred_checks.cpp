// Deferred checks of asynchronous work (tessera/runtime/cuda.h).
#include <map>
#include <mutex>
#include <vector>

#include "tessera/runtime/cuda.h"

namespace tessera::cuda {
namespace {

struct Pending {
  std::mutex mu;
  std::map<int, std::vector<std::function<void()>>> checks;
};

// Never destroyed: checks may still be pending at exit.
Pending& pending() {
  static Pending* p = new Pending();
  return *p;
}

}  // namespace

void defer_check(int device, std::function<void()> check) {
  std::lock_guard lock(pending().mu);
  pending().checks[device].push_back(std::move(check));
}

void run_deferred_checks(int device) {
  std::vector<std::function<void()>> checks;
  {
    std::lock_guard lock(pending().mu);
    auto it = pending().checks.find(device);
    if (it == pending().checks.end()) return;
    checks.swap(it->second);
  }
  for (auto& check : checks) check();
}

std::size_t pending_checks(int device) {
  std::lock_guard lock(pending().mu);
  auto it = pending().checks.find(device);
  return it == pending().checks.end() ? 0 : it->second.size();
}

}  // namespace tessera::cuda
