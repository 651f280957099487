// The thread pool CPU kernels run their groups on (see thread_pool.h).
#include "backends/cpu/thread_pool.h"

#include "tessera/backends/cpu/cpu_backend.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>

namespace tessera::cpu::detail {

// A parallel_for's chunks. The caller waits until every chunk is done, not
// until every helper has woken: a helper that wakes after the chunks are
// taken finds none and lets go of the job (held by shared_ptr, so a late
// helper never touches a finished caller's stack). Launches of small
// kernels then cost the caller's own time, not the helpers' wake-up
// latency.
struct ThreadPool::Job {
  const std::function<void(std::int64_t)>* fn;
  std::int64_t n;
  int helpers;  // workers with index < helpers take part
  std::atomic<std::int64_t> next{0};
  std::atomic<std::int64_t> done{0};
  std::exception_ptr error;
  std::mutex error_mutex;

  // Runs chunks until none is left; true when this call finished the last.
  bool drain() {
    bool last = false;
    for (std::int64_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) {
      try {
        (*fn)(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
      }
      last = done.fetch_add(1) + 1 == n;
    }
    return last;
  }
};

namespace {
// Read once: glibc answers hardware_concurrency() by reading
// /sys/devices/system/cpu/online, a few microseconds that every launch paid.
int hardware_threads() {
  static const int n = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  return n;
}
}  // namespace

namespace {
thread_local int t_thread_limit = 0;  // 0: none (ScopedThreadLimit)
}  // namespace

int default_thread_count() {
  int n = hardware_threads();
  if (const char* env = std::getenv("TESSERA_NUM_THREADS"); env != nullptr && *env != '\0') {
    const int v = std::atoi(env);
    if (v > 0) n = v;
  }
  return t_thread_limit > 0 ? std::min(n, t_thread_limit) : n;
}

ThreadPool& ThreadPool::global() {
  // Leaked on purpose: worker threads must not be joined during static
  // destruction, when kernels' shared objects may already be unloaded.
  // At least 4 threads, so launches asking for more threads than the machine
  // has (determinism tests) still run on several.
  static ThreadPool* pool =
      new ThreadPool(std::max({default_thread_count(), hardware_threads(), 4}) - 1);
  return *pool;
}

ThreadPool::ThreadPool(int workers) {
  for (int i = 0; i < workers; ++i) workers_.emplace_back([this, i] { worker_main(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::worker_main(int index) {
  std::uint64_t seen = 0;
  while (true) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      if (job_ == nullptr || index >= job_->helpers) continue;
      job = job_;
    }
    if (job->drain()) {
      std::lock_guard<std::mutex> lock(mutex_);
      done_.notify_all();
    }
  }
}

void ThreadPool::parallel_for(std::int64_t n, int threads, const std::function<void(std::int64_t)>& fn) {
  if (n <= 0) return;
  const int helpers = static_cast<int>(std::min<std::int64_t>(
      {static_cast<std::int64_t>(std::max(threads, 1)) - 1, static_cast<std::int64_t>(workers_.size()), n - 1}));
  if (helpers <= 0) {
    for (std::int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::lock_guard<std::mutex> run_lock(run_mutex_);
  auto job = std::make_shared<Job>();
  job->fn = &fn;
  job->n = n;
  job->helpers = helpers;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = job;
    ++generation_;
  }
  wake_.notify_all();
  job->drain();
  {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return job->done.load() == n; });
    job_ = nullptr;
  }
  if (job->error) std::rethrow_exception(job->error);
}

}  // namespace tessera::cpu::detail

namespace tessera::cpu {

ScopedThreadLimit::ScopedThreadLimit(int threads) : previous_(detail::t_thread_limit) {
  detail::t_thread_limit = std::max(threads, 1);
}

ScopedThreadLimit::~ScopedThreadLimit() {
  detail::t_thread_limit = previous_;
}

}  // namespace tessera::cpu
