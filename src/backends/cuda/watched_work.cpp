// Watched work (tessera/runtime/cuda.h): work that may never finish on its
// own is polled, not waited for, so a dead peer becomes an error.
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "tessera/runtime/cuda.h"
#include "tessera/support/error.h"

namespace tessera::cuda {
namespace {

using Clock = std::chrono::steady_clock;

struct Entry {
  Watch watch;
  std::shared_ptr<Event> done;  // recorded after the watched work
  Clock::time_point deadline;
};

struct Watches {
  std::mutex mu;
  std::map<int, std::vector<std::shared_ptr<Entry>>> by_device;
};

// Never destroyed: work may still be watched at exit.
Watches& watches() {
  static Watches* w = new Watches();
  return *w;
}

// Drops the entries whose work is done; the caller holds the lock.
void prune(std::vector<std::shared_ptr<Entry>>& entries) {
  std::erase_if(entries, [](const std::shared_ptr<Entry>& e) { return e->done->done(); });
}

}  // namespace

void watch(int device, Watch w) {
  auto e = std::make_shared<Entry>();
  e->done = std::make_shared<Event>(device);
  e->done->record_default_stream();
  e->deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(std::max(0.0, w.timeout_seconds)));
  e->watch = std::move(w);
  std::lock_guard lock(watches().mu);
  auto& entries = watches().by_device[device];
  prune(entries);  // keeps the list short in loops that never synchronize
  entries.push_back(std::move(e));
}

std::size_t watched(int device) {
  std::lock_guard lock(watches().mu);
  auto it = watches().by_device.find(device);
  if (it == watches().by_device.end()) return 0;
  prune(it->second);
  return it->second.size();
}

void settle_watches(int device) {
  auto sleep = std::chrono::microseconds(50);
  for (;;) {
    std::vector<std::shared_ptr<Entry>> pending;
    {
      std::lock_guard lock(watches().mu);
      auto it = watches().by_device.find(device);
      if (it == watches().by_device.end()) return;
      prune(it->second);
      if (it->second.empty()) return;
      pending = it->second;
    }
    // Outside the lock: poll and abort may take other locks (a clique's).
    for (const std::shared_ptr<Entry>& e : pending) {
      std::string why = e->watch.poll ? e->watch.poll() : std::string();
      if (why.empty() && Clock::now() > e->deadline) {
        why = "not done " + number_text(e->watch.timeout_seconds) +
              " s after it was queued (TESSERA_COLLECTIVE_TIMEOUT); a member that never queued its part leaves "
              "it waiting";
      }
      if (why.empty()) continue;
      {
        // Every watch of the device goes: the abort ends the work they wait for.
        std::lock_guard lock(watches().mu);
        watches().by_device.erase(device);
      }
      const std::string more = e->watch.abort ? e->watch.abort(e->watch.what + ": " + why) : std::string();
      raise(ErrorCode::Collective, e->watch.what + ": " + why + more);
    }
    std::this_thread::sleep_for(sleep);
    sleep = std::min<std::chrono::microseconds>(sleep * 2, std::chrono::milliseconds(5));
  }
}

}  // namespace tessera::cuda
