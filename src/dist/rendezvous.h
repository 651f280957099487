// The host rendezvous of the in-process collective backends (communicator.h):
// the members of one mesh axis group are threads of this process; each posts
// its call (a description and a payload), waits for the others, and the
// descriptions are compared, so that mismatched calls, failed members and
// members that never arrive become CollectiveErrors naming them and the
// call, never a hang. The `local` backend computes its results on the host
// between arrive() and depart(); the `nccl` backend enqueues NCCL's data
// movement there, knowing that every member will enqueue its side.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "tessera/dist/communicator.h"
#include "tessera/runtime/tensor.h"

namespace tessera::dist::detail {

// One member's collective call, as the members compare it.
struct CollectiveCall {
  std::string op;  // "allreduce", ...
  std::vector<std::int64_t> shape;
  NumericsPolicy policy;
  std::string detail;          // op-specific arguments ("sum", "dim 0", "root 2")
  std::int64_t free_dim = -1;  // all_gather: the dim whose size may differ

  std::string describe() const;
  // The first difference from `o`, or "".
  std::string difference(const CollectiveCall& o) const;
};

// `dim` (negative counts from the end) as an index into a tensor of `rank`
// dims; ArgumentError naming `what` when out of range.
std::size_t normalize_collective_dim(std::int64_t dim, std::size_t rank, const std::string& what);

// ", ring" for a non-default algorithm, so that members that disagree on it
// are a mismatch; "" for rank order.
std::string algorithm_detail(Algorithm a);
// ArgumentError "<what> <index> is not a member of mesh axis '<axis>' (<n> members)" when index >= n.
void check_member(std::size_t index, std::size_t n, const std::string& axis, const std::string& what);

class Rendezvous {
 public:
  Rendezvous(std::string axis, std::vector<std::string> members, double timeout_seconds);

  const std::string& axis() const { return axis_; }
  const std::vector<std::string>& members() const { return members_; }
  std::size_t size() const { return members_.size(); }
  double timeout() const { return timeout_; }

  // Posts member `rank`'s call and `payload`, waits for every member's and
  // checks they agree (ArgumentError for a rank outside the group,
  // CollectiveError for a mismatch, a failed member or the timeout). Returns
  // the call's number.
  std::uint64_t arrive(std::size_t rank, const CollectiveCall& call, const void* payload);
  // Between arrive() and depart(): member r's call and payload.
  const CollectiveCall& call_of(std::size_t r) const { return slots_.at(r).call; }
  const void* payload_of(std::size_t r) const { return slots_.at(r).payload; }
  // A second barrier inside call `seq` (the local backend's "every part
  // is combined"). A non-empty `error` (the whole message) fails the call
  // for everyone.
  void computed(std::size_t rank, const CollectiveCall& call, std::uint64_t seq, const std::string& error);
  // Marks member `rank` done with call `seq` (a non-empty `error`, the whole
  // message, fails the call for everyone) and waits until every member is, so payloads stay
  // alive until all have read them.
  void depart(std::size_t rank, const CollectiveCall& call, std::uint64_t seq, const std::string& error = "");

  // Member `rank` stopped: waiting and later calls raise naming it.
  void fail(std::size_t rank, const std::string& why);
  std::uint64_t completed(std::size_t rank) const;
  // "allreduce #3 over mesh axis 'tp'".
  std::string where(const CollectiveCall& c, std::uint64_t seq) const;
  // Breaks the group with `why` and raises it as a CollectiveError for call `seq`.
  [[noreturn]] void fail_call(const CollectiveCall& call, std::uint64_t seq, const std::string& why);

 private:
  struct Slot {
    CollectiveCall call;
    const void* payload = nullptr;
  };
  void check_rank(std::size_t rank) const;
  void check_peers(const CollectiveCall& c, std::uint64_t seq);
  [[noreturn]] void fail_locked(const CollectiveCall& call, std::uint64_t seq, const std::string& why);
  void wait_all(std::unique_lock<std::mutex>& lock, const CollectiveCall& c, std::uint64_t seq, const char* phase,
                const std::vector<std::uint64_t>& progress);

  std::string axis_;
  std::vector<std::string> members_;
  double timeout_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Slot> slots_;
  std::vector<std::uint64_t> arrived_, computed_, departed_;
  std::vector<std::string> failed_;
  std::string broken_;
};

}  // namespace tessera::dist::detail
