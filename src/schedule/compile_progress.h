// Progress for long compiles: a compile that runs longer than a second
// (TESSERA_PROGRESS_AFTER_MS, default 1000) prints one line to stderr when
// it passes that mark and one when it ends, with its time:
//
//   tessera: compiling 9 kernels of loss for cpu ...
//   tessera: compiled 9 kernels of loss for cpu in 1.7 s
//
// TESSERA_PROGRESS=0 turns it off. Cached compiles end before the mark and
// print nothing.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

namespace tessera::schedule {

class CompileProgress {
 public:
  explicit CompileProgress(std::string what) : what_(std::move(what)) {
    const char* off = std::getenv("TESSERA_PROGRESS");
    if (off && std::string(off) == "0") return;
    long after_ms = 1000;
    if (const char* a = std::getenv("TESSERA_PROGRESS_AFTER_MS"); a && *a) after_ms = std::strtol(a, nullptr, 10);
    watcher_ = std::thread([this, after_ms] {
      std::unique_lock lock(mu_);
      if (!cv_.wait_for(lock, std::chrono::milliseconds(after_ms), [this] { return done_; })) {
        announced_ = true;
        std::fprintf(stderr, "tessera: compiling %s ...\n", what_.c_str());
        std::fflush(stderr);
      }
    });
  }
  ~CompileProgress() {
    if (!watcher_.joinable()) return;
    {
      std::lock_guard lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    watcher_.join();
    if (announced_) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
      std::fprintf(stderr, "tessera: compiled %s in %.1f s\n", what_.c_str(), s);
    }
  }
  CompileProgress(const CompileProgress&) = delete;
  CompileProgress& operator=(const CompileProgress&) = delete;

 private:
  std::string what_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  bool announced_ = false;
  std::thread watcher_;
};

}  // namespace tessera::schedule
