// The in-process collective backend (communicator.h): the members are
// threads of this process, each posts its input, every member computes its
// own result from all inputs (in rank order), and a second rendezvous keeps
// the inputs alive until everyone has read them.
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "dist/shard_copy.h"
#include "dist/thread_members.h"
#include "tessera/dist/communicator.h"
#include "tessera/dist/layout.h"
#include "tessera/support/error.h"

namespace tessera::dist {
namespace {

using Call = detail::CollectiveCall;

std::size_t normalize_dim(std::int64_t dim, std::size_t rank, const std::string& what) {
  return detail::normalize_collective_dim(dim, rank, what);
}

class LocalCommunicator final : public detail::ThreadMembers {
 public:
  LocalCommunicator(std::string axis, std::vector<std::string> members, double timeout)
      : ThreadMembers(std::move(axis), std::move(members), timeout) {}

  std::string_view backend() const override { return "local"; }

  Tensor allreduce(std::size_t rank, const Tensor& x, ReduceOp op, Algorithm algorithm) override {
    Call c{"allreduce", x.shape(), x.policy(), std::string(reduce_op_name(op)) + detail::algorithm_detail(algorithm)};
    return run_reduction(rank, x, c, op, algorithm, [&](const Tensor& sum) {
      Tensor out = Tensor::empty(x.shape(), x.policy());
      if (sum.numel() > 0) {
        // Packed (sub-byte) storage has no element address: copy its bytes whole.
        const bool packed = is_packed(x.dtype());
        std::memcpy(packed ? static_cast<void*>(out.packed_data()) : out.data(),
                    packed ? static_cast<const void*>(sum.packed_data()) : sum.data(),
                    storage_bytes_for(x.dtype(), x.numel()));
      }
      return on_device(out, x.device());
    });
  }

  Tensor all_gather(std::size_t rank, const Tensor& x, std::int64_t dim) override {
    const std::size_t d = normalize_dim(dim, x.rank(), "all_gather");
    Call c{"all_gather", x.shape(), x.policy(), "dim " + std::to_string(d), static_cast<std::int64_t>(d)};
    return run(rank, x, c, [&](const std::vector<const Tensor*>& in) {
      std::vector<Tensor> pieces;
      for (const Tensor* t : in) pieces.push_back(detail::host_codes(*t));
      return detail::from_codes(detail::concat_codes(pieces, d), x.policy(), x.device());
    });
  }

  Tensor reduce_scatter(std::size_t rank, const Tensor& x, std::int64_t dim, ReduceOp op,
                        Algorithm algorithm) override {
    const std::size_t d = normalize_dim(dim, x.rank(), "reduce_scatter");
    Call c{"reduce_scatter", x.shape(), x.policy(),
           std::string(reduce_op_name(op)) + ", dim " + std::to_string(d) + detail::algorithm_detail(algorithm)};
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
      return detail::from_codes(detail::concat_codes(pieces, cd), x.policy(), x.device());
    });
  }

  Tensor broadcast(std::size_t rank, const Tensor& x, std::size_t root) override {
    detail::check_member(root, size(), axis(), "broadcast root");
    Call c{"broadcast", x.shape(), x.policy(), "root " + std::to_string(root)};
    return run(rank, x, c, [&](const std::vector<const Tensor*>& in) {
      return detail::from_codes(detail::host_codes(*in[root]), x.policy(), x.device());
    });
  }

 private:
  static Tensor on_device(const Tensor& host, const std::string& device) {
    return device == "cpu" ? host : host.to(device);
  }

  // A reduction as a reduce-scatter in rank order then an all-gather: member
  // r combines the flat element range block_part(n, P, r) of every input
  // into one shared result, all wait, then each takes what it needs
  // (`finish`) from the whole result. Each element's combination is the
  // one of `algorithm` for its part, whichever member computes it.

  // The call's description names a non-default algorithm, so that members
  // that disagree on it are a mismatch.

  template <class Finish>
  Tensor run_reduction(std::size_t rank, const Tensor& x, const Call& call, ReduceOp op, Algorithm algorithm,
                       Finish finish) {
    const std::uint64_t seq = rv_.arrive(rank, call, &x);
    std::shared_ptr<Tensor> result;
    {
      std::lock_guard lock(mu_);
      if (shared_seq_ != seq) {
        shared_ = std::make_shared<Tensor>(Tensor::empty(x.shape(), x.policy()));
        shared_seq_ = seq;
      }
      result = shared_;
    }
    std::string error;
    try {
      // Every member's input, on the host and contiguous (copies only when they are not already).
      std::vector<Tensor> host;
      for (std::size_t r = 0; r < size(); ++r) {
        const Tensor& in = *static_cast<const Tensor*>(rv_.payload_of(r));
        host.push_back((in.is_cpu() ? in : in.to("cpu")).contiguous());
      }
      const Run part = block_part(x.numel(), static_cast<std::int64_t>(size()), static_cast<std::int64_t>(rank));
      if (!reduce_range_with(host, op, algorithm, rank, part.start, part.start + part.length, *result) && rank == 0) {
        *result = reduce_in_rank_order(host, op);  // packed formats reduce whole, on member 0
      }
    } catch (const std::exception& e) {
      error = members()[rank] + " could not compute its part: " + e.what();
    }
    rv_.computed(rank, call, seq, error);
    Tensor out;
    try {
      out = finish(*result);
    } catch (const std::exception& e) {
      error = members()[rank] + " could not take its result: " + e.what();
    }
    rv_.depart(rank, call, seq, error);
    return out;
  }

  template <class Compute>
  Tensor run(std::size_t rank, const Tensor& x, const Call& call, Compute compute) {
    const std::uint64_t seq = rv_.arrive(rank, call, &x);
    std::vector<const Tensor*> inputs;
    for (std::size_t r = 0; r < size(); ++r) inputs.push_back(static_cast<const Tensor*>(rv_.payload_of(r)));
    Tensor out;
    std::string error;
    try {
      out = compute(inputs);
    } catch (const std::exception& e) {
      error = members()[rank] + " could not compute its result: " + e.what();
    }
    rv_.depart(rank, call, seq, error);
    return out;
  }

  std::mutex mu_;
  std::shared_ptr<Tensor> shared_;  // the result of the reduction in progress
  std::uint64_t shared_seq_ = 0;
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
