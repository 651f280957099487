// The flight recorder of the mpi backend: the last collectives this process
// ran (started, finished or failed), kept so that a timeout can say what
// every member of this process was doing (dumped to stderr and into the
// error message).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

namespace tessera::dist::detail {

class FlightRecorder {
 public:
  explicit FlightRecorder(std::size_t capacity = 64);
  // Records a collective that starts now; returns its id for finish().
  std::uint64_t start(std::string what);
  // Marks it "done" or "failed: ..." (a no-op once it fell out of the record).
  void finish(std::uint64_t id, const std::string& state);
  // One line per entry, oldest first: "+12.345 s  allreduce #3 ... by cpu:1: done".
  std::vector<std::string> lines() const;

 private:
  struct Entry {
    std::uint64_t id;
    double at;  // seconds since the recorder started
    std::string what;
    std::string state;
  };
  std::size_t capacity_;
  std::chrono::steady_clock::time_point origin_ = std::chrono::steady_clock::now();
  mutable std::mutex mu_;
  std::deque<Entry> entries_;
  std::uint64_t next_ = 1;
};

}  // namespace tessera::dist::detail
