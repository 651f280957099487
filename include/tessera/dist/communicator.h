// Collectives among the members of one mesh axis, behind one interface with
// a backend per engine (shared/ARCHITECTURE.md decision 8): `local` here
// (in-process worker threads over virtual devices and the GPUs of one
// process); `mpi` and `nccl` plug into the same interface.
//
// Every member calls the same collectives in the same order, each with its
// own rank (its coordinate along the axis). Calls are numbered; each carries
// a description (op, shape, dtype, axis, argument) that the members compare:
// a mismatch is a CollectiveError naming the first difference. A member
// that fails (fail()) or does not arrive within the timeout
// (TESSERA_COLLECTIVE_TIMEOUT seconds, default 300) makes the others raise a
// CollectiveError naming it and the call, never hang. After an error the
// communicator stays broken: every later call raises.
//
// Reductions are deterministic: each element is combined in rank order
// (((x0 + x1) + x2) + ...), every step rounded to the tensor's accumulation
// type and the result rounded once to its storage with its policy -- the
// bits of a reduce-scatter in rank order followed by an all-gather, on every
// backend. Uneven splits follow numpy.array_split (layout.h).
//
// A Mapper may pick another algorithm for allreduce and reduce_scatter
// (Algorithm): ring and tree combine in their own fixed orders, so they are
// repeatable but give other bits than rank order; native is the backend's
// own (nondeterministic on some backends).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/runtime/tensor.h"

namespace tessera::dist {

enum class ReduceOp { sum, mean, max, min };

// How a reduction combines the members' values (docs/guide/distribution.md, "The Mapper"):
// - rank_order: x0 + x1 + ... left to right, per element (the default; the bitwise reference);
// - ring: element part c (block_part of P parts) starts at member c + 1 and goes around the
//   ring, (x[c+1] + x[c+2]) + ... + x[c], as a ring reduce-scatter accumulates it;
// - tree: pairwise, ((x0 + x1) + (x2 + x3)) + ..., each partial rounded to the storage type as
//   a message between members would be;
// - native: whatever the backend does fastest (the local backend: rank_order).
// Mean reductions always run in rank order (their division needs the member count once).
enum class Algorithm { rank_order, ring, tree, native };
// "rank_order" | "ring" | "tree" | "native"; ArgumentError otherwise.
Algorithm parse_algorithm(std::string_view text);
std::string_view algorithm_name(Algorithm a);
// "sum" | "mean" | "max" | "min"; ArgumentError otherwise.
ReduceOp parse_reduce_op(std::string_view text);
std::string_view reduce_op_name(ReduceOp op);

// TESSERA_COLLECTIVE_TIMEOUT in seconds (default 300); ArgumentError when malformed.
double collective_timeout_seconds();

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual std::string_view backend() const = 0;
  // The mesh axis it serves and its members' device names, by rank.
  virtual const std::string& axis() const = 0;
  virtual const std::vector<std::string>& members() const = 0;
  std::size_t size() const { return members().size(); }

  // Combines every member's x (same shape and policy) with `op`, in the
  // order of `algorithm` (every member passes the same one).
  virtual Tensor allreduce(std::size_t rank, const Tensor& x, ReduceOp op,
                           Algorithm algorithm = Algorithm::rank_order) = 0;
  // The members' x concatenated along `dim` in rank order (sizes along dim may differ).
  virtual Tensor all_gather(std::size_t rank, const Tensor& x, std::int64_t dim) = 0;
  // The reduction of every member's x, split along `dim` (array_split): member r gets part r.
  virtual Tensor reduce_scatter(std::size_t rank, const Tensor& x, std::int64_t dim, ReduceOp op,
                                Algorithm algorithm = Algorithm::rank_order) = 0;
  // Member r splits x along split_dim into size() parts and sends part j to
  // member j, which concatenates what it receives along concat_dim in rank order.
  virtual Tensor all_to_all(std::size_t rank, const Tensor& x, std::int64_t split_dim, std::int64_t concat_dim) = 0;
  // Member root's x, on every member (the others pass a tensor of the same shape and policy).
  virtual Tensor broadcast(std::size_t rank, const Tensor& x, std::size_t root) = 0;

  // Point to point, between two members only (the others take no part).
  // send is buffered: it copies x (its value at the call) into the FIFO
  // mailbox from `rank` to `dst` and returns without waiting for the recv,
  // so a pipeline schedule cannot deadlock on the order of its sends. recv
  // takes the oldest message from `src` to `rank`, on rank's device; it must
  // have `shape` and `policy`, else a CollectiveError naming the first
  // difference. Messages are numbered per (src, dst) pair ("recv #2 from
  // cpu:0 to cpu:1"); a failed member, or no message within the timeout,
  // makes a waiting recv raise a CollectiveError naming the source and the
  // call. After such an error send and recv keep raising.
  virtual void send(std::size_t rank, const Tensor& x, std::size_t dst) = 0;
  virtual Tensor recv(std::size_t rank, std::size_t src, const std::vector<std::int64_t>& shape,
                      const NumericsPolicy& policy) = 0;

  // Member `rank` will not take part any more (it raised or exited): the
  // others' waiting and later calls raise a CollectiveError naming it and `why`.
  virtual void fail(std::size_t rank, const std::string& why) = 0;
  // Collectives completed by member `rank` (its sequence number).
  virtual std::uint64_t completed(std::size_t rank) const = 0;
  // Another member of the group that failed, or whose process is gone, as
  // text naming it ("" when none is known). Never blocks: GPU work queued
  // for a collective polls it while the host waits (cuda::Watch).
  virtual std::string failure(std::size_t rank) const {
    (void)rank;
    return "";
  }
  // Why this backend's collectives cannot be captured into a CUDA graph
  // (cuda::WorkCapture), or "" when they can: every device step of a call
  // is then queued on the capture's stream, on buffers that stay valid, and
  // no step waits on the host.
  virtual std::string capture_refusal() const {
    return "the " + std::string(backend()) + " collective backend moves shards through the host";
  }
};

// The in-process backend over `members` (device names, by rank).
std::shared_ptr<Communicator> make_local_communicator(std::string axis, std::vector<std::string> members,
                                                      double timeout_seconds = collective_timeout_seconds());

// The rank-order combination of `xs` (same shape and policy; host or device
// tensors): a host tensor with the policy of xs[0]. What every backend's
// deterministic reduction must equal.
Tensor reduce_in_rank_order(const std::vector<Tensor>& xs, ReduceOp op);
// Elements [begin, end) (flat) of that reduction, written into `out` (a
// contiguous host tensor of xs[0]'s policy); `host` are contiguous host
// tensors. Returns false (writing nothing) for packed sub-byte formats,
// which only reduce whole.
bool reduce_range_in_place(const std::vector<Tensor>& host, ReduceOp op, std::int64_t begin, std::int64_t end,
                           const Tensor& out);
// The same range combined in the order of `algorithm` (`part` is the index
// of the range among the members' parts, which fixes the ring's start).
bool reduce_range_with(const std::vector<Tensor>& host, ReduceOp op, Algorithm algorithm, std::size_t part,
                       std::int64_t begin, std::int64_t end, const Tensor& out);

}  // namespace tessera::dist
