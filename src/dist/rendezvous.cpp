// The host rendezvous of the in-process collective backends (rendezvous.h).
#include "dist/rendezvous.h"

#include <chrono>

#include "tessera/support/error.h"

namespace tessera::dist::detail {

std::string CollectiveCall::describe() const {
  std::string s = op + " of [";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "] " + std::string(name(policy.storage)) + (detail.empty() ? "" : " (" + detail + ")");
}

std::string CollectiveCall::difference(const CollectiveCall& o) const {
  if (op != o.op) return "the operation (" + op + " vs " + o.op + ")";
  if (detail != o.detail) return "the arguments (" + detail + " vs " + o.detail + ")";
  if (policy.storage != o.policy.storage) {
    return "the dtype (" + std::string(name(policy.storage)) + " vs " + std::string(name(o.policy.storage)) + ")";
  }
  if (shape.size() != o.shape.size()) {
    return "the rank (" + std::to_string(shape.size()) + " vs " + std::to_string(o.shape.size()) + ")";
  }
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (static_cast<std::int64_t>(d) == free_dim) continue;
    if (shape[d] != o.shape[d]) {
      return "the size of dim " + std::to_string(d) + " (" + std::to_string(shape[d]) + " vs " +
             std::to_string(o.shape[d]) + ")";
    }
  }
  return "";
}

std::size_t normalize_collective_dim(std::int64_t dim, std::size_t rank, const std::string& what) {
  const auto r = static_cast<std::int64_t>(rank);
  const std::int64_t d = dim < 0 ? dim + r : dim;
  if (d < 0 || d >= r) {
    raise(ErrorCode::ArgumentInvalid, what + " dim " + std::to_string(dim) + " is out of range for a tensor of " +
                                          std::to_string(rank) + " dim(s)");
  }
  return static_cast<std::size_t>(d);
}

std::string algorithm_detail(Algorithm a) {
  return a == Algorithm::rank_order ? "" : ", " + std::string(algorithm_name(a));
}

void check_member(std::size_t index, std::size_t n, const std::string& axis, const std::string& what) {
  if (index >= n) {
    raise(ErrorCode::ArgumentInvalid, what + " " + std::to_string(index) + " is not a member of mesh axis '" + axis +
                                          "' (" + std::to_string(n) + " members)");
  }
}

Rendezvous::Rendezvous(std::string axis, std::vector<std::string> members, double timeout_seconds)
    : axis_(std::move(axis)), members_(std::move(members)), timeout_(timeout_seconds), slots_(members_.size()),
      arrived_(members_.size(), 0), computed_(members_.size(), 0), departed_(members_.size(), 0),
      failed_(members_.size()) {
  if (members_.empty()) raise(ErrorCode::ArgumentInvalid, "a communicator needs at least one member");
}

std::string Rendezvous::where(const CollectiveCall& c, std::uint64_t seq) const {
  return c.op + " #" + std::to_string(seq) + " over mesh axis '" + axis_ + "'";
}

void Rendezvous::check_rank(std::size_t rank) const {
  check_member(rank, size(), axis_, "rank");
}

// Raises (lock held) when a member failed or the group broke.
void Rendezvous::check_peers(const CollectiveCall& c, std::uint64_t seq) {
  if (!broken_.empty()) raise(ErrorCode::Collective, where(c, seq) + ": " + broken_);
  for (std::size_t r = 0; r < failed_.size(); ++r) {
    if (!failed_[r].empty()) {
      broken_ = "member " + members_[r] + " (rank " + std::to_string(r) + ") failed: " + failed_[r];
      cv_.notify_all();
      raise(ErrorCode::Collective, where(c, seq) + ": " + broken_);
    }
  }
}

void Rendezvous::fail_locked(const CollectiveCall& call, std::uint64_t seq, const std::string& why) {
  broken_ = why;
  cv_.notify_all();
  raise(ErrorCode::Collective, where(call, seq) + ": " + broken_);
}

void Rendezvous::fail_call(const CollectiveCall& call, std::uint64_t seq, const std::string& why) {
  std::lock_guard lock(mu_);
  fail_locked(call, seq, why);
}

// Waits (lock held) until every member's progress reached seq, a failure or the deadline.
void Rendezvous::wait_all(std::unique_lock<std::mutex>& lock, const CollectiveCall& c, std::uint64_t seq,
                          const char* phase, const std::vector<std::uint64_t>& progress) {
  auto reached = [&] {
    for (std::uint64_t s : progress)
      if (s < seq) return false;
    return true;
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_);
  while (true) {
    check_peers(c, seq);
    if (reached()) return;
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout) {
      check_peers(c, seq);
      if (reached()) return;
      std::string missing;
      for (std::size_t r = 0; r < progress.size(); ++r) {
        if (progress[r] < seq) {
          missing += (missing.empty() ? "" : ", ") + members_[r] + " (completed " + std::to_string(departed_[r]) + ")";
        }
      }
      fail_locked(c, seq,
                  "timed out after " + std::to_string(timeout_) + " s (TESSERA_COLLECTIVE_TIMEOUT) " + phase + ": " +
                      missing);
    }
  }
}

std::uint64_t Rendezvous::arrive(std::size_t rank, const CollectiveCall& call, const void* payload) {
  check_rank(rank);
  std::unique_lock lock(mu_);
  const std::uint64_t seq = departed_[rank] + 1;
  slots_[rank] = Slot{call, payload};
  arrived_[rank] = seq;
  cv_.notify_all();
  wait_all(lock, call, seq, "waiting for members to arrive", arrived_);
  // Every member compares the same pairs (member 0 against each other, in
  // rank order), so all of them report the same first difference.
  for (std::size_t r = 1; r < size(); ++r) {
    const std::string diff = slots_[0].call.difference(slots_[r].call);
    if (!diff.empty()) {
      fail_locked(call, seq, "members disagree on " + diff + ": " + members_[0] + " called " +
                                 slots_[0].call.describe() + ", " + members_[r] + " called " + slots_[r].call.describe());
    }
  }
  return seq;
}

void Rendezvous::computed(std::size_t rank, const CollectiveCall& call, std::uint64_t seq, const std::string& error) {
  std::unique_lock lock(mu_);
  if (!error.empty()) fail_locked(call, seq, error);
  computed_[rank] = seq;
  cv_.notify_all();
  wait_all(lock, call, seq, "waiting for members to combine their parts", computed_);
}

void Rendezvous::depart(std::size_t rank, const CollectiveCall& call, std::uint64_t seq, const std::string& error) {
  std::unique_lock lock(mu_);
  if (!error.empty()) fail_locked(call, seq, error);
  departed_[rank] = seq;
  cv_.notify_all();
  wait_all(lock, call, seq, "waiting for members to finish", departed_);
}

void Rendezvous::fail(std::size_t rank, const std::string& why) {
  {
    std::lock_guard lock(mu_);
    if (rank < failed_.size() && failed_[rank].empty()) failed_[rank] = why.empty() ? "it stopped" : why;
  }
  cv_.notify_all();
}

std::uint64_t Rendezvous::completed(std::size_t rank) const {
  std::lock_guard lock(mu_);
  return departed_.at(rank);
}

}  // namespace tessera::dist::detail
