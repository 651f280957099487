// The thread pool CPU kernels run their groups on.
//
// One process-wide pool of worker threads; parallel_for(n, threads, fn) runs
// fn(0) .. fn(n-1) on at most `threads` threads (the caller is one of them)
// and returns when all have finished. Work items are claimed in increasing
// order from a shared counter; which thread runs which item varies, so
// callers make items independent (CPU kernel groups are).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace tessera::cpu::detail {

class ThreadPool {
 public:
  static ThreadPool& global();
  explicit ThreadPool(int workers);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Threads available to one parallel_for: the workers plus the caller.
  int max_threads() const { return static_cast<int>(workers_.size()) + 1; }
  void parallel_for(std::int64_t n, int threads, const std::function<void(std::int64_t)>& fn);

 private:
  struct Job;
  void worker_main(int index);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  std::mutex run_mutex_;  // one parallel_for at a time
  std::shared_ptr<Job> job_;  // the current parallel_for's, while it runs
  std::uint64_t generation_ = 0;
  bool stop_ = false;
};

// The default thread count: $TESSERA_NUM_THREADS, else hardware threads.
int default_thread_count();

}  // namespace tessera::cpu::detail
