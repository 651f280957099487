// SPMD workers (tessera/dist/spmd.h).
//
// Workers are kept between launches: starting a thread per shard per launch
// cost about 30 us a shard. A launch takes as many idle workers as it has
// ranks (starting new ones when there are too few, so that nested launches
// and launches from several threads never wait for each other: every rank
// of a launch must run at once, since ranks meet in collectives).
#include "tessera/dist/spmd.h"

#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "tessera/support/error.h"

namespace tessera::dist {
namespace {

class Worker {
 public:
  Worker() : thread_([this] { loop(); }) {}

  void run(std::function<void()> task) {
    {
      std::lock_guard lock(mu_);
      task_ = std::move(task);
    }
    cv_.notify_one();
  }

 private:
  void loop() {
    while (true) {
      std::function<void()> task;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return static_cast<bool>(task_); });
        task = std::move(task_);
        task_ = nullptr;
      }
      task();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::function<void()> task_;
  std::thread thread_;  // last: starts after the members above exist
};

// Never destroyed: workers are parked threads, detached at exit.
class WorkerPool {
 public:
  std::vector<Worker*> acquire(std::size_t n) {
    std::lock_guard lock(mu_);
    std::vector<Worker*> out;
    while (out.size() < n && !idle_.empty()) {
      out.push_back(idle_.back());
      idle_.pop_back();
    }
    while (out.size() < n) {
      all_.push_back(std::make_unique<Worker>());
      out.push_back(all_.back().get());
    }
    return out;
  }
  void release(const std::vector<Worker*>& ws) {
    std::lock_guard lock(mu_);
    idle_.insert(idle_.end(), ws.begin(), ws.end());
  }

 private:
  std::mutex mu_;
  std::vector<std::unique_ptr<Worker>> all_;
  std::vector<Worker*> idle_;
};

WorkerPool& pool() {
  static WorkerPool* p = new WorkerPool;
  return *p;
}

}  // namespace

void run_spmd(std::size_t n, const std::function<void(std::size_t)>& body,
              const std::function<void(std::size_t, const std::string&)>& on_failure) {
  std::vector<std::exception_ptr> errors(n);
  std::vector<bool> collective(n, false);
  auto work = [&](std::size_t rank) {
    try {
      body(rank);
    } catch (const Error& e) {
      errors[rank] = std::current_exception();
      collective[rank] = e.code() == ErrorCode::Collective;
      on_failure(rank, e.what());
    } catch (const std::exception& e) {
      errors[rank] = std::current_exception();
      on_failure(rank, e.what());
    } catch (...) {
      errors[rank] = std::current_exception();
      on_failure(rank, "an unknown exception");
    }
  };
  if (n == 1) {
    work(0);
  } else if (n > 1) {
    std::mutex mu;
    std::condition_variable cv;
    std::size_t remaining = n;
    const std::vector<Worker*> ws = pool().acquire(n);
    for (std::size_t r = 0; r < n; ++r) {
      ws[r]->run([&, r] {
        work(r);
        std::lock_guard lock(mu);
        if (--remaining == 0) cv.notify_one();
      });
    }
    {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return remaining == 0; });
    }
    pool().release(ws);
  }
  for (std::size_t r = 0; r < n; ++r)
    if (errors[r] && !collective[r]) std::rethrow_exception(errors[r]);
  for (std::size_t r = 0; r < n; ++r)
    if (errors[r]) std::rethrow_exception(errors[r]);
}

}  // namespace tessera::dist
