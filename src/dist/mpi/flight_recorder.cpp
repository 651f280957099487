// The mpi backend's flight recorder (flight_recorder.h).
#include "dist/mpi/flight_recorder.h"

#include <cstdio>

namespace tessera::dist::detail {

FlightRecorder::FlightRecorder(std::size_t capacity) : capacity_(capacity) {}

std::uint64_t FlightRecorder::start(std::string what) {
  const double at = std::chrono::duration<double>(std::chrono::steady_clock::now() - origin_).count();
  std::lock_guard lock(mu_);
  const std::uint64_t id = next_++;
  entries_.push_back(Entry{id, at, std::move(what), "running"});
  while (entries_.size() > capacity_) entries_.pop_front();
  return id;
}

void FlightRecorder::finish(std::uint64_t id, const std::string& state) {
  std::lock_guard lock(mu_);
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
    if (it->id == id) {
      it->state = state;
      return;
    }
  }
}

std::vector<std::string> FlightRecorder::lines() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  for (const Entry& e : entries_) {
    char at[32];
    std::snprintf(at, sizeof at, "+%.3f s", e.at);
    out.push_back(std::string(at) + "  " + e.what + ": " + e.state);
  }
  return out;
}

}  // namespace tessera::dist::detail
