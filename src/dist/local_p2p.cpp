// Point-to-point mailboxes of the in-process backend (local_p2p.h).
#include "dist/local_p2p.h"

#include <chrono>

#include "dist/shard_copy.h"
#include "tessera/dist/mesh.h"
#include "tessera/support/error.h"

namespace tessera::dist::detail {
namespace {

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

std::string message_text(const std::vector<std::int64_t>& shape, const NumericsPolicy& policy) {
  return shape_text(shape) + " " + print_policy(policy);
}

// The first difference between what was sent and what recv expects, or "".
// The storage dtype is checked before the shape and the rest of the policy
// last: a dtype mix-up is the likelier mistake and the clearer message.
std::string message_difference(const Tensor& sent, const std::vector<std::int64_t>& shape, const NumericsPolicy& policy) {
  if (sent.dtype() != policy.storage) {
    return "the dtype (" + std::string(name(sent.dtype())) + " sent vs " + std::string(name(policy.storage)) +
           " expected)";
  }
  if (sent.rank() != shape.size()) {
    return "the rank (" + std::to_string(sent.rank()) + " sent vs " + std::to_string(shape.size()) + " expected)";
  }
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (sent.shape()[d] != shape[d]) {
      return "the size of dim " + std::to_string(d) + " (" + std::to_string(sent.shape()[d]) + " sent vs " +
             std::to_string(shape[d]) + " expected)";
    }
  }
  if (!(sent.policy() == policy)) {
    return "the policy (" + print_policy(sent.policy()) + " sent vs " + print_policy(policy) + " expected)";
  }
  return "";
}

LocalMailboxes::LocalMailboxes(std::string axis, std::vector<std::string> members, double timeout_seconds)
    : axis_(std::move(axis)),
      members_(std::move(members)),
      timeout_(timeout_seconds),
      boxes_(members_.size() * members_.size()),
      sent_(boxes_.size(), 0),
      received_(boxes_.size(), 0),
      failed_(members_.size()) {}

std::string LocalMailboxes::member(std::size_t rank) const {
  return members_[rank] + " (rank " + std::to_string(rank) + ")";
}

std::string LocalMailboxes::where(const char* op, std::uint64_t number, std::size_t from, std::size_t to) const {
  return std::string(op) + " #" + std::to_string(number) + " from " + members_[from] + " to " + members_[to] +
         " over mesh axis '" + axis_ + "'";
}

void LocalMailboxes::check_rank(std::size_t rank, const char* op, const char* role) const {
  if (rank >= members_.size()) {
    raise(ErrorCode::ArgumentInvalid, std::string(op) + ": " + role + " rank " + std::to_string(rank) +
                                          " is not a member of mesh axis '" + axis_ + "' (" +
                                          std::to_string(members_.size()) + " members)");
  }
}

void LocalMailboxes::break_with(const std::string& call, const std::string& why) {
  broken_ = why;
  cv_.notify_all();
  raise(ErrorCode::Collective, call + ": " + why);
}

void LocalMailboxes::check_peers(const std::string& call, std::size_t peer) {
  if (!broken_.empty()) raise(ErrorCode::Collective, call + ": " + broken_);
  if (!failed_[peer].empty()) break_with(call, "member " + member(peer) + " failed: " + failed_[peer]);
  for (std::size_t r = 0; r < failed_.size(); ++r) {
    if (!failed_[r].empty()) break_with(call, "member " + member(r) + " failed: " + failed_[r]);
  }
}

void LocalMailboxes::send(std::size_t rank, const Tensor& x, std::size_t dst) {
  check_rank(rank, "send", "the sending");
  check_rank(dst, "send", "the destination");
  // Copied before taking the lock: a large message does not hold up the others.
  Message m{from_codes(host_codes(x), x.policy(), "cpu"), 0};
  {
    std::lock_guard lock(mu_);
    const std::size_t b = box(rank, dst);
    m.number = sent_[b] + 1;
    check_peers(where("send", m.number, rank, dst), dst);
    sent_[b] = m.number;
    boxes_[b].push_back(std::move(m));
  }
  cv_.notify_all();
}

Tensor LocalMailboxes::recv(std::size_t rank, std::size_t src, const std::vector<std::int64_t>& shape,
                            const NumericsPolicy& policy) {
  check_rank(rank, "recv", "the receiving");
  check_rank(src, "recv", "the source");
  Message m;
  {
    std::unique_lock lock(mu_);
    const std::size_t b = box(src, rank);
    const std::string call = where("recv", received_[b] + 1, src, rank);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_);
    while (true) {
      // Failures first, as in the collectives: a message that is already
      // there is not delivered once the communicator is known to be broken.
      check_peers(call, src);
      if (!boxes_[b].empty()) break;
      if (cv_.wait_until(lock, deadline) == std::cv_status::timeout) {
        check_peers(call, src);
        if (!boxes_[b].empty()) break;
        break_with(call, "timed out after " + std::to_string(timeout_) +
                             " s (TESSERA_COLLECTIVE_TIMEOUT) waiting for " + member(src) + ", which has sent " +
                             std::to_string(sent_[b]) + " message(s) to " + members_[rank]);
      }
    }
    const std::string diff = message_difference(boxes_[b].front().value, shape, policy);
    if (!diff.empty()) {
      const Tensor& got = boxes_[b].front().value;
      break_with(call, "the message differs from what recv expects in " + diff + ": " + members_[src] + " sent " +
                           message_text(got.shape(), got.policy()) + ", " + members_[rank] + " expects " +
                           message_text(shape, policy));
    }
    m = std::move(boxes_[b].front());
    boxes_[b].pop_front();
    received_[b] = m.number;
  }
  const std::string device = memory_device(members_[rank]);
  return device == "cpu" ? m.value : m.value.to(device);
}

void LocalMailboxes::fail(std::size_t rank, const std::string& why) {
  {
    std::lock_guard lock(mu_);
    if (rank < failed_.size() && failed_[rank].empty()) failed_[rank] = why.empty() ? "it stopped" : why;
  }
  cv_.notify_all();
}

}  // namespace tessera::dist::detail
