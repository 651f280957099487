// Point-to-point messages of the in-process backend (communicator.h, send
// and recv): one FIFO mailbox per ordered (source, destination) pair of
// members. Kept apart from the collectives' rendezvous because the two share
// nothing but the members and the failure notices: a send never waits for
// its receiver, so a pipeline schedule cannot deadlock on the order of its
// sends, and a recv waits only for its own source's mailbox.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "tessera/runtime/tensor.h"

namespace tessera::dist::detail {

// The first difference between a sent message and what recv expects
// (dtype, then shape, then the rest of the policy), or "".
std::string message_difference(const Tensor& sent, const std::vector<std::int64_t>& shape,
                               const NumericsPolicy& policy);

// "[2, 3] fp32 @accum(fp32) ...": a message as errors show it.
std::string message_text(const std::vector<std::int64_t>& shape, const NumericsPolicy& policy);

class LocalMailboxes {
 public:
  LocalMailboxes(std::string axis, std::vector<std::string> members, double timeout_seconds);

  // A copy of x (its value now: later writes to x do not change it) into
  // the mailbox from `rank` to `dst`; returns without waiting for the recv.
  void send(std::size_t rank, const Tensor& x, std::size_t dst);
  // The oldest message in the mailbox from `src` to `rank`, on `rank`'s
  // device; it must have `shape` and `policy`. Waits up to the timeout.
  Tensor recv(std::size_t rank, std::size_t src, const std::vector<std::int64_t>& shape, const NumericsPolicy& policy);
  // Member `rank` stopped: waiting and later sends and recvs raise.
  void fail(std::size_t rank, const std::string& why);

 private:
  struct Message {
    Tensor value;              // a host copy, contiguous
    std::uint64_t number = 0;  // 1, 2, ... per pair
  };

  std::size_t box(std::size_t src, std::size_t dst) const { return src * members_.size() + dst; }
  std::string member(std::size_t rank) const;
  std::string where(const char* op, std::uint64_t number, std::size_t from, std::size_t to) const;
  void check_rank(std::size_t rank, const char* op, const char* role) const;
  // Raises (lock held) when a member failed or the mailboxes broke; names
  // `peer` first when it is the one that failed.
  void check_peers(const std::string& call, std::size_t peer);
  [[noreturn]] void break_with(const std::string& call, const std::string& why);

  std::string axis_;
  std::vector<std::string> members_;
  double timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::deque<Message>> boxes_;      // box(src, dst)
  std::vector<std::uint64_t> sent_, received_;  // per box: messages put in, taken out
  std::vector<std::string> failed_;             // per member: why it stopped ("" while it runs)
  std::string broken_;                          // the first error; every later call raises it
};

}  // namespace tessera::dist::detail
