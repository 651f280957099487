// Deferred checks of asynchronous work (tessera/runtime/cuda.h).
#include <map>
#include <mutex>
#include <vector>

#include "tessera/runtime/cuda.h"

namespace tessera::cuda {
namespace {

struct Check {
  const void* key;  // nullptr: a check of its own
  std::function<void()> run;
};

struct Pending {
  std::mutex mu;
  std::map<int, std::vector<Check>> checks;
};

// Never destroyed: checks may still be pending at exit.
Pending& pending() {
  static Pending* p = new Pending();
  return *p;
}

}  // namespace

void defer_check(int device, std::function<void()> check) {
  defer_check(device, nullptr, std::move(check));
}

void defer_check(int device, const void* key, std::function<void()> check) {
  std::lock_guard lock(pending().mu);
  std::vector<Check>& checks = pending().checks[device];
  if (key != nullptr) {
    // At most 64 are pending (executables read them back past that): a scan is cheap.
    for (const Check& c : checks) {
      if (c.key == key) return;
    }
  }
  checks.push_back({key, std::move(check)});
}

void run_deferred_checks(int device) {
  std::vector<Check> checks;
  {
    std::lock_guard lock(pending().mu);
    auto it = pending().checks.find(device);
    if (it == pending().checks.end()) return;
    checks.swap(it->second);
  }
  for (Check& check : checks) check.run();
}

std::size_t pending_checks(int device) {
  std::lock_guard lock(pending().mu);
  auto it = pending().checks.find(device);
  return it == pending().checks.end() ? 0 : it->second.size();
}

}  // namespace tessera::cuda
