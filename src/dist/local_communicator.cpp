// The in-process collective backend (communicator.h): the members are
// threads of this process, each posts its input, every member computes its
// own result from all inputs (in rank order), and a second rendezvous keeps
// the inputs alive until everyone has read them.
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "dist/local_p2p.h"
#include "dist/shard_copy.h"
#include "tessera/dist/communicator.h"
#include "tessera/dist/layout.h"
#include "tessera/support/error.h"

namespace tessera::dist {
namespace {

struct Call {
  std::string op;  // "allreduce", ...
  std::vector<std::int64_t> shape;
  NumericsPolicy policy;
  std::string detail;  // op-specific arguments ("sum", "dim 0", "root 2")
  std::int64_t free_dim = -1;  // all_gather: the dim whose size may differ

  std::string describe() const {
    std::string s = op + " of [";
    for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "] " + std::string(name(policy.storage)) + (detail.empty() ? "" : " (" + detail + ")");
  }
  // The first difference from `o`, or "".
  std::string difference(const Call& o) const {
    if (op != o.op) return "the operation (" + op + " vs " + o.op + ")";
    if (detail != o.detail) return "the arguments (" + detail + " vs " + o.detail + ")";
    if (policy.storage != o.policy.storage) {
      return "the dtype (" + std::string(name(policy.storage)) + " vs " + std::string(name(o.policy.storage)) + ")";
    }
    if (shape.size() != o.shape.size()) return "the rank (" + std::to_string(shape.size()) + " vs " + std::to_string(o.shape.size()) + ")";
    for (std::size_t d = 0; d < shape.size(); ++d) {
      if (static_cast<std::int64_t>(d) == free_dim) continue;
      if (shape[d] != o.shape[d]) {
        return "the size of dim " + std::to_string(d) + " (" + std::to_string(shape[d]) + " vs " + std::to_string(o.shape[d]) + ")";
      }
    }
    return "";
  }
};

std::size_t normalize_dim(std::int64_t dim, std::size_t rank, const std::string& what) {
  const auto r = static_cast<std::int64_t>(rank);
  const std::int64_t d = dim < 0 ? dim + r : dim;
  if (d < 0 || d >= r) {
    raise(ErrorCode::ArgumentInvalid, what + " dim " + std::to_string(dim) + " is out of range for a tensor of " +
                                          std::to_string(rank) + " dim(s)");
  }
  return static_cast<std::size_t>(d);
}

class LocalCommunicator final : public Communicator {
 public:
  LocalCommunicator(std::string axis, std::vector<std::string> members, double timeout)
      : axis_(std::move(axis)), members_(std::move(members)), timeout_(timeout), slots_(members_.size()),
        arrived_(members_.size(), 0), computed_(members_.size(), 0), departed_(members_.size(), 0),
        failed_(members_.size()) {
    if (members_.empty()) raise(ErrorCode::ArgumentInvalid, "a communicator needs at least one member");
  }

  std::string_view backend() const override { return "local"; }
  const std::string& axis() const override { return axis_; }
  const std::vector<std::string>& members() const override { return members_; }

  Tensor allreduce(std::size_t rank, const Tensor& x, ReduceOp op, Algorithm algorithm) override {
    Call c{"allreduce", x.shape(), x.policy(), std::string(reduce_op_name(op)) + algorithm_detail(algorithm)};
    return run_reduction(rank, x, c, op, algorithm, [&](const Tensor& sum) {
      Tensor out = Tensor::empty(x.shape(), x.policy());
      if (sum.numel() > 0) {
        std::memcpy(out.data(), sum.data(), storage_bytes_for(x.dtype(), x.numel()));
      }
      return on_device(out, x.device());
    });
  }

  Tensor all_gather(std::size_t rank, const Tensor& x, std::int64_t dim) override {
    const std::size_t d = normalize_dim(dim, x.rank(), "all_gather");
    Call c{"all_gather", x.shape(), x.policy(), "dim " + std::to_string(d), static_cast<std::int64_t>(d)};
    return run(rank, x, c, [&](const std::vector<const Tensor*>& in) {
      std::vector<std::int64_t> shape = x.shape();
      shape[d] = 0;
      for (const Tensor* t : in) shape[d] += t->shape()[d];
      const Tensor global = Tensor::empty(shape, detail::host_codes(x).policy());
      std::int64_t at = 0;
      for (const Tensor* t : in) {
        detail::put_runs(global, detail::host_codes(*t), detail::runs_along(shape, d, {at, t->shape()[d]}));
        at += t->shape()[d];
      }
      return detail::from_codes(global, x.policy(), x.device());
    });
  }

  Tensor reduce_scatter(std::size_t rank, const Tensor& x, std::int64_t dim, ReduceOp op,
                        Algorithm algorithm) override {
    const std::size_t d = normalize_dim(dim, x.rank(), "reduce_scatter");
    Call c{"reduce_scatter", x.shape(), x.policy(),
           std::string(reduce_op_name(op)) + ", dim " + std::to_string(d) + algorithm_detail(algorithm)};
    return run_reduction(rank, x, c, op, algorithm, [&](const Tensor& sum) {
      const Run part = block_part(x.shape()[d], static_cast<std::int64_t>(size()), static_cast<std::int64_t>(rank));
      const Tensor codes = detail::take_runs(detail::host_codes(sum), detail::runs_along(x.shape(), d, part));
      return detail::from_codes(codes, x.policy(), x.device());
    });
  }

  Tensor all_to_all(std::size_t rank, const Tensor& x, std::int64_t split_dim, std::int64_t concat_dim) override {
    const std::size_t s = normalize_dim(split_dim, x.rank(), "all_to_all split");
    const std::size_t cd = normalize_dim(concat_dim, x.rank(), "all_to_all concat");
    Call c{"all_to_all", x.shape(), x.policy(), "split dim " + std::to_string(s) + ", concat dim " + std::to_string(cd)};
    return run(rank, x, c, [&](const std::vector<const Tensor*>& in) {
      const auto p = static_cast<std::int64_t>(size());
      // Part `rank` of every member's x, concatenated along concat_dim in rank order.
      std::vector<Tensor> pieces;
      for (const Tensor* t : in) {
        const Run part = block_part(t->shape()[s], p, static_cast<std::int64_t>(rank));
        pieces.push_back(detail::take_runs(detail::host_codes(*t), detail::runs_along(t->shape(), s, part)));
      }
      std::vector<std::int64_t> shape = pieces[0].shape();
      shape[cd] = 0;
      for (const Tensor& t : pieces) shape[cd] += t.shape()[cd];
      const Tensor out = Tensor::empty(shape, pieces[0].policy());
      std::int64_t at = 0;
      for (const Tensor& t : pieces) {
        detail::put_runs(out, t, detail::runs_along(shape, cd, {at, t.shape()[cd]}));
        at += t.shape()[cd];
      }
      return detail::from_codes(out, x.policy(), x.device());
    });
  }

  Tensor broadcast(std::size_t rank, const Tensor& x, std::size_t root) override {
    if (root >= size()) {
      raise(ErrorCode::ArgumentInvalid, "broadcast root " + std::to_string(root) + " is not a member of mesh axis '" +
                                            axis_ + "' (" + std::to_string(size()) + " members)");
    }
    Call c{"broadcast", x.shape(), x.policy(), "root " + std::to_string(root)};
    return run(rank, x, c, [&](const std::vector<const Tensor*>& in) {
      return detail::from_codes(detail::host_codes(*in[root]), x.policy(), x.device());
    });
  }

  // Point to point: the mailboxes (local_p2p.h) share only the members and failure notices.
  void send(std::size_t rank, const Tensor& x, std::size_t dst) override { p2p_.send(rank, x, dst); }
  Tensor recv(std::size_t rank, std::size_t src, const std::vector<std::int64_t>& shape,
              const NumericsPolicy& policy) override {
    return p2p_.recv(rank, src, shape, policy);
  }

  void fail(std::size_t rank, const std::string& why) override {
    p2p_.fail(rank, why);
    {
      std::lock_guard lock(mu_);
      if (rank < failed_.size() && failed_[rank].empty()) failed_[rank] = why.empty() ? "it stopped" : why;
    }
    cv_.notify_all();
  }

  std::uint64_t completed(std::size_t rank) const override {
    std::lock_guard lock(mu_);
    return departed_.at(rank);
  }

 private:
  struct Slot {
    Call call;
    const Tensor* input = nullptr;
  };

  static Tensor on_device(const Tensor& host, const std::string& device) {
    return device == "cpu" ? host : host.to(device);
  }

  std::string where(const Call& c, std::uint64_t seq) const {
    return c.op + " #" + std::to_string(seq) + " over mesh axis '" + axis_ + "'";
  }

  // Raises (with the lock held) when a member failed or the communicator broke.
  void check_peers(const Call& c, std::uint64_t seq) {
    if (!broken_.empty()) raise(ErrorCode::Collective, where(c, seq) + ": " + broken_);
    for (std::size_t r = 0; r < failed_.size(); ++r) {
      if (!failed_[r].empty()) {
        broken_ = "member " + members_[r] + " (rank " + std::to_string(r) + ") failed: " + failed_[r];
        cv_.notify_all();
        raise(ErrorCode::Collective, where(c, seq) + ": " + broken_);
      }
    }
  }

  // Waits (lock held) until pred() or a failure or the deadline.
  template <class Pred>
  void wait(std::unique_lock<std::mutex>& lock, const Call& c, std::uint64_t seq, const char* phase,
            const std::vector<std::uint64_t>& progress, Pred pred) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_);
    while (true) {
      check_peers(c, seq);
      if (pred()) return;
      if (cv_.wait_until(lock, deadline) == std::cv_status::timeout) {
        check_peers(c, seq);
        if (pred()) return;
        std::string missing;
        for (std::size_t r = 0; r < progress.size(); ++r) {
          if (progress[r] < seq) {
            missing += (missing.empty() ? "" : ", ") + members_[r] + " (completed " + std::to_string(departed_[r]) + ")";
          }
        }
        broken_ = "timed out after " + std::to_string(timeout_) + " s (TESSERA_COLLECTIVE_TIMEOUT) " + phase + ": " +
                  missing;
        cv_.notify_all();
        raise(ErrorCode::Collective, where(c, seq) + ": " + broken_);
      }
    }
  }

  // A reduction as a reduce-scatter in rank order then an all-gather: member
  // r combines the flat element range block_part(n, P, r) of every input
  // into one shared result, all wait, then each takes what it needs
  // (`finish`) from the whole result. Each element's combination is the
  // one of `algorithm` for its part, whichever member computes it.

  // The call's description names a non-default algorithm, so that members
  // that disagree on it are a mismatch.
  static std::string algorithm_detail(Algorithm a) {
    return a == Algorithm::rank_order ? "" : ", " + std::string(algorithm_name(a));
  }

  template <class Finish>
  Tensor run_reduction(std::size_t rank, const Tensor& x, const Call& call, ReduceOp op, Algorithm algorithm,
                       Finish finish) {
    std::shared_ptr<Tensor> result;
    std::vector<Tensor> host;
    std::uint64_t seq = 0;
    {
      std::unique_lock lock(mu_);
      seq = arrive(lock, rank, x, call);
      if (shared_seq_ != seq) {
        shared_ = std::make_shared<Tensor>(Tensor::empty(x.shape(), x.policy()));
        shared_seq_ = seq;
      }
      result = shared_;
    }
    std::string error;
    try {
      // Every member's input, on the host and contiguous (copies only when they are not already).
      for (const Slot& s : slots_) host.push_back((s.input->is_cpu() ? *s.input : s.input->to("cpu")).contiguous());
      const Run part = block_part(x.numel(), static_cast<std::int64_t>(size()), static_cast<std::int64_t>(rank));
      if (!reduce_range_with(host, op, algorithm, rank, part.start, part.start + part.length, *result) && rank == 0) {
        *result = reduce_in_rank_order(host, op);  // packed formats reduce whole, on member 0
      }
    } catch (const std::exception& e) {
      error = e.what();
    }
    {
      std::unique_lock lock(mu_);
      if (!error.empty()) fail_call(call, seq, members_[rank] + " could not compute its part: " + error);
      computed_[rank] = seq;
      cv_.notify_all();
      wait(lock, call, seq, "waiting for members to combine their parts", computed_, [&] { return all_reached(computed_, seq); });
    }
    Tensor out;
    try {
      out = finish(*result);
    } catch (const std::exception& e) {
      error = e.what();
    }
    std::unique_lock lock(mu_);
    if (!error.empty()) fail_call(call, seq, members_[rank] + " could not take its result: " + error);
    depart(lock, rank, call, seq);
    return out;
  }

  bool all_reached(const std::vector<std::uint64_t>& v, std::uint64_t seq) const {
    for (std::uint64_t s : v)
      if (s < seq) return false;
    return true;
  }

  [[noreturn]] void fail_call(const Call& call, std::uint64_t seq, const std::string& why) {
    broken_ = why;
    cv_.notify_all();
    raise(ErrorCode::Collective, where(call, seq) + ": " + broken_);
  }

  // Posts this member's call and waits for every member's; checks they agree. Returns the call's number.
  std::uint64_t arrive(std::unique_lock<std::mutex>& lock, std::size_t rank, const Tensor& x, const Call& call) {
    if (rank >= size()) {
      raise(ErrorCode::ArgumentInvalid, "rank " + std::to_string(rank) + " is not a member of mesh axis '" + axis_ +
                                            "' (" + std::to_string(size()) + " members)");
    }
    const std::uint64_t seq = departed_[rank] + 1;
    slots_[rank] = Slot{call, &x};
    arrived_[rank] = seq;
    cv_.notify_all();
    wait(lock, call, seq, "waiting for members to arrive", arrived_, [&] { return all_reached(arrived_, seq); });
    // Every member compares the same pairs (member 0 against each other, in
    // rank order), so all of them report the same first difference.
    for (std::size_t r = 1; r < size(); ++r) {
      const std::string diff = slots_[0].call.difference(slots_[r].call);
      if (!diff.empty()) {
        fail_call(call, seq, "members disagree on " + diff + ": " + members_[0] + " called " +
                                 slots_[0].call.describe() + ", " + members_[r] + " called " + slots_[r].call.describe());
      }
    }
    return seq;
  }

  // Marks this member done with call `seq` and waits until every member is
  // (the inputs stay alive until everyone has read them).
  void depart(std::unique_lock<std::mutex>& lock, std::size_t rank, const Call& call, std::uint64_t seq) {
    departed_[rank] = seq;
    cv_.notify_all();
    wait(lock, call, seq, "waiting for members to finish", departed_, [&] { return all_reached(departed_, seq); });
  }

  template <class Compute>
  Tensor run(std::size_t rank, const Tensor& x, const Call& call, Compute compute) {
    if (rank >= size()) {
      raise(ErrorCode::ArgumentInvalid, "rank " + std::to_string(rank) + " is not a member of mesh axis '" + axis_ +
                                            "' (" + std::to_string(size()) + " members)");
    }
    std::unique_lock lock(mu_);
    const std::uint64_t seq = arrive(lock, rank, x, call);
    std::vector<const Tensor*> inputs;
    for (const Slot& s : slots_) inputs.push_back(s.input);
    lock.unlock();
    Tensor out;
    std::string error;
    try {
      out = compute(inputs);
    } catch (const std::exception& e) {
      error = e.what();
    }
    lock.lock();
    if (!error.empty()) fail_call(call, seq, members_[rank] + " could not compute its result: " + error);
    depart(lock, rank, call, seq);
    return out;
  }

  std::string axis_;
  std::vector<std::string> members_;
  double timeout_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Slot> slots_;
  std::vector<std::uint64_t> arrived_, computed_, departed_;
  std::shared_ptr<Tensor> shared_;  // the result of the reduction in progress
  std::uint64_t shared_seq_ = 0;
  std::vector<std::string> failed_;
  std::string broken_;
  detail::LocalMailboxes p2p_{axis_, members_, timeout_};  // after the members it copies
};

}  // namespace

double collective_timeout_seconds() {
  const char* v = std::getenv("TESSERA_COLLECTIVE_TIMEOUT");
  if (v == nullptr || *v == '\0') return 300.0;
  char* end = nullptr;
  const double s = std::strtod(v, &end);
  if (end == v || *end != '\0' || !(s > 0)) {
    raise(ErrorCode::ArgumentInvalid,
          std::string("TESSERA_COLLECTIVE_TIMEOUT is '") + v + "'; expected a positive number of seconds");
  }
  return s;
}

std::shared_ptr<Communicator> make_local_communicator(std::string axis, std::vector<std::string> members,
                                                      double timeout_seconds) {
  return std::make_shared<LocalCommunicator>(std::move(axis), std::move(members), timeout_seconds);
}

}  // namespace tessera::dist
