// The mpi collective backend (tessera/dist/mpi.h): the members of one mesh
// axis group may live in several processes. Every member, whichever process
// drives it, runs the same exchange of messages through the process's post
// office (mpi/transport.h): a message to a member of this process is filed
// at once, one to another process goes out over MPI as bytes.
//
// Every collective is a complete exchange: each member sends one message to
// every other member (empty when it has nothing to give), carrying its call
// and a hash of it, so that any two members that disagree find out and can
// name both calls. Reductions are a reduce-scatter then an all-gather: member
// j receives part j (block_part of the flat elements) of every member's
// input, combines it with reduce_range_with in the order the algorithm asks
// (the local backend's code, so the bits are the local backend's), and sends
// the combined part to everyone.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <set>

#include "dist/local_p2p.h"
#include "dist/mpi/call_wire.h"
#include "dist/mpi/transport.h"
#include "dist/rendezvous.h"
#include "dist/shard_copy.h"
#include "tessera/dist/layout.h"
#include "tessera/dist/mesh.h"
#include "tessera/dist/mpi.h"
#include "tessera/support/error.h"

namespace tessera::dist {
namespace {

using detail::CollectiveCall;
using detail::Deadline;
using detail::Message;
using detail::MessageKey;
using detail::Transport;

// Phases of a call (the key of its messages).
constexpr std::uint32_t kExchange = 1;  // inputs (reductions: the parts each member combines)
constexpr std::uint32_t kGather = 2;    // reductions: the combined parts
constexpr std::uint32_t kP2p = 3;       // send/recv, numbered per pair of members

// The p2p mailboxes break apart from the collectives (as in the local backend): their own key.
constexpr std::uint64_t kP2pBroken = 0x8000000000000000ull;

Tensor host_contiguous(const Tensor& x) { return (x.is_cpu() ? x : x.to("cpu")).contiguous(); }

using detail::Bytes;

// A copy of `count` bytes of a contiguous host tensor from byte `offset`
// (what a message may carry after the call returns, whatever the caller
// then writes into the tensor).
Bytes copy_bytes(const Tensor& t, std::size_t offset, std::size_t count) {
  std::byte* into = nullptr;
  Bytes b = Bytes::allocate(count, &into);
  if (count > 0) std::memcpy(into, static_cast<const std::byte*>(t.data()) + offset, count);
  return b;
}

// The same bytes without a copy, kept alive with the tensor: only for
// messages every receiver has read before the call returns.
Bytes share_bytes(const Tensor& t, std::size_t offset, std::size_t count) {
  auto owner = std::make_shared<Tensor>(t);
  return Bytes{owner, static_cast<const std::byte*>(owner->data()) + offset, count};
}

Bytes all_bytes(const Tensor& t) { return copy_bytes(t, 0, storage_bytes_for(t.dtype(), t.numel())); }

// A host tensor of `shape` and `policy` (byte-aligned) over `bytes`, without a copy.
Tensor from_bytes(const Bytes& bytes, const std::vector<std::int64_t>& shape, const NumericsPolicy& policy,
                  const std::string& from) {
  std::int64_t numel = 1;
  for (std::int64_t d : shape) numel *= d;
  const std::size_t n = storage_bytes_for(policy.storage, numel);
  if (bytes.size != n) {
    raise(ErrorCode::Internal, "a message from " + from + " has " + std::to_string(bytes.size) +
                                   " bytes where its call needs " + std::to_string(n));
  }
  return Tensor::wrap(const_cast<std::byte*>(bytes.data), shape, contiguous_strides(shape), policy, bytes.owner);
}

// The policy of the codes host_codes() gives for tensors of `policy`.
NumericsPolicy codes_policy(const NumericsPolicy& policy) {
  return detail::host_codes(Tensor::empty({0}, policy)).policy();
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(std::string axis, std::vector<std::string> members, std::vector<int> owners, double timeout)
      : axis_(std::move(axis)), members_(std::move(members)), owners_(std::move(owners)), timeout_(timeout) {
    if (members_.empty()) raise(ErrorCode::ArgumentInvalid, "a communicator needs at least one member");
    if (owners_.size() != members_.size()) {
      raise(ErrorCode::ArgumentInvalid, "mpi communicator over mesh axis '" + axis_ + "': " +
                                            std::to_string(members_.size()) + " members but " +
                                            std::to_string(owners_.size()) + " owning processes");
    }
    transport_ = &Transport::get();
    for (std::size_t r = 0; r < owners_.size(); ++r) {
      if (owners_[r] < 0 || owners_[r] >= transport_->size()) {
        raise(ErrorCode::ArgumentInvalid, "member " + members_[r] + " of mesh axis '" + axis_ + "' is given process " +
                                              std::to_string(owners_[r]) + ", but the job has " +
                                              std::to_string(transport_->size()) + " process(es)");
      }
    }
    id_ = transport_->register_comm(axis_, members_);
    const std::set<int> distinct(owners_.begin(), owners_.end());
    processes_.assign(distinct.begin(), distinct.end());
    const std::size_t n = members_.size();
    seq_.assign(n, 0);
    completed_.assign(n, 0);
    sent_.assign(n * n, 0);
    received_.assign(n * n, 0);
  }

  std::string_view backend() const override { return "mpi"; }
  const std::string& axis() const override { return axis_; }
  const std::vector<std::string>& members() const override { return members_; }

  Tensor allreduce(std::size_t rank, const Tensor& x, ReduceOp op, Algorithm algorithm) override {
    CollectiveCall c{"allreduce", x.shape(), x.policy(), std::string(reduce_op_name(op)) + detail::algorithm_detail(algorithm)};
    return reduction(rank, x, c, op, algorithm, [&](const Tensor& sum) {
      return x.device() == "cpu" ? sum : sum.to(x.device());
    });
  }

  Tensor reduce_scatter(std::size_t rank, const Tensor& x, std::int64_t dim, ReduceOp op,
                        Algorithm algorithm) override {
    const std::size_t d = detail::normalize_collective_dim(dim, x.rank(), "reduce_scatter");
    CollectiveCall c{"reduce_scatter", x.shape(), x.policy(),
                     std::string(reduce_op_name(op)) + ", dim " + std::to_string(d) + detail::algorithm_detail(algorithm)};
    return reduction(rank, x, c, op, algorithm, [&](const Tensor& sum) {
      const Run part = block_part(x.shape()[d], static_cast<std::int64_t>(size()), static_cast<std::int64_t>(rank));
      const Tensor codes = detail::take_runs(detail::host_codes(sum), detail::runs_along(x.shape(), d, part));
      return detail::from_codes(codes, x.policy(), x.device());
    });
  }

  Tensor all_gather(std::size_t rank, const Tensor& x, std::int64_t dim) override {
    const std::size_t d = detail::normalize_collective_dim(dim, x.rank(), "all_gather");
    CollectiveCall c{"all_gather", x.shape(), x.policy(), "dim " + std::to_string(d), static_cast<std::int64_t>(d)};
    Active a = begin(rank, c);
    return guarded(a, [&] {
      const Tensor codes = detail::host_codes(x);
      const Bytes payload = all_bytes(codes);
      for (std::size_t j = 0; j < size(); ++j)
        if (j != rank) send(a, kExchange, j, payload);
      std::vector<Tensor> in(size());
      for (std::size_t s = 0; s < size(); ++s) {
        if (s == rank) {
          in[s] = codes;
          continue;
        }
        const Message m = receive(a, kExchange, s);
        in[s] = from_bytes(m.payload, detail::parse_call(m.call).shape, codes.policy(), members_[s]);
      }
      return detail::from_codes(detail::concat_codes(in, d), x.policy(), x.device());
    });
  }

  Tensor all_to_all(std::size_t rank, const Tensor& x, std::int64_t split_dim, std::int64_t concat_dim) override {
    const std::size_t sd = detail::normalize_collective_dim(split_dim, x.rank(), "all_to_all split");
    const std::size_t cd = detail::normalize_collective_dim(concat_dim, x.rank(), "all_to_all concat");
    CollectiveCall c{"all_to_all", x.shape(), x.policy(),
                     "split dim " + std::to_string(sd) + ", concat dim " + std::to_string(cd)};
    Active a = begin(rank, c);
    return guarded(a, [&] {
      const auto p = static_cast<std::int64_t>(size());
      const Tensor codes = detail::host_codes(x);
      auto piece_runs = [&](std::size_t j) {
        return detail::runs_along(x.shape(), sd, block_part(x.shape()[sd], p, static_cast<std::int64_t>(j)));
      };
      for (std::size_t j = 0; j < size(); ++j)
        if (j != rank) send(a, kExchange, j, all_bytes(detail::take_runs(codes, piece_runs(j))));
      // Every member's part `rank`, concatenated along concat_dim in rank order
      // (the shapes agree: the calls were compared).
      std::vector<Tensor> pieces(size());
      const Tensor mine = detail::take_runs(codes, piece_runs(rank));
      for (std::size_t s = 0; s < size(); ++s) {
        pieces[s] = s == rank ? mine
                              : from_bytes(receive(a, kExchange, s).payload, mine.shape(), codes.policy(), members_[s]);
      }
      return detail::from_codes(detail::concat_codes(pieces, cd), x.policy(), x.device());
    });
  }

  Tensor broadcast(std::size_t rank, const Tensor& x, std::size_t root) override {
    detail::check_member(root, size(), axis_, "broadcast root");
    CollectiveCall c{"broadcast", x.shape(), x.policy(), "root " + std::to_string(root)};
    Active a = begin(rank, c);
    return guarded(a, [&] {
      const Tensor codes = detail::host_codes(x);
      // The others send empty messages: every pair still compares its calls.
      const Bytes payload = rank == root ? all_bytes(codes) : Bytes{};
      for (std::size_t j = 0; j < size(); ++j)
        if (j != rank) send(a, kExchange, j, payload);
      Tensor value = codes;
      for (std::size_t s = 0; s < size(); ++s) {
        if (s == rank) continue;
        const Message m = receive(a, kExchange, s);
        if (s == root) value = from_bytes(m.payload, x.shape(), codes.policy(), members_[s]);
      }
      return detail::from_codes(value, x.policy(), x.device());
    });
  }

  void send(std::size_t rank, const Tensor& x, std::size_t dst) override {
    check_member(rank, "send", "the sending");
    check_member(dst, "send", "the destination");
    std::uint64_t number = 0;
    {
      std::lock_guard lock(mu_);
      number = ++sent_[rank * size() + dst];
    }
    const std::string call = p2p_where("send", number, rank, dst);
    if (const std::string why = transport_->inspect([&] { return stop_locked(rank, kP2pBroken, dst); }); !why.empty()) {
      raise(ErrorCode::Collective, call + ": " + why);
    }
    // Copied now: later writes to x do not change the message.
    Message m;
    m.key = MessageKey{id_, number, kP2p, static_cast<std::uint32_t>(rank), static_cast<std::uint32_t>(dst)};
    m.call = detail::serialize_call(CollectiveCall{"send", x.shape(), x.policy(), "", -1});
    m.payload = all_bytes(detail::host_codes(x));
    transport_->post(owners_[dst], std::move(m));
  }

  Tensor recv(std::size_t rank, std::size_t src, const std::vector<std::int64_t>& shape,
              const NumericsPolicy& policy) override {
    check_member(rank, "recv", "the receiving");
    check_member(src, "recv", "the source");
    check_local(rank, "recv");
    std::uint64_t number = 0;
    {
      std::lock_guard lock(mu_);
      number = ++received_[src * size() + rank];
    }
    const std::string call = p2p_where("recv", number, src, rank);
    const MessageKey key{id_, number, kP2p, static_cast<std::uint32_t>(src), static_cast<std::uint32_t>(rank)};
    const Deadline deadline = detail::deadline_after(timeout_);
    std::string why;
    std::optional<Message> m =
        transport_->take(key, deadline, [&] { return stop_locked(rank, kP2pBroken, src); }, why);
    if (!m) {
      if (why.empty()) {
        why = "timed out after " + number_text(timeout_) + " s (TESSERA_COLLECTIVE_TIMEOUT) waiting for " + member(src);
        transport_->set_broken(id_ ^ kP2pBroken, why);
      }
      raise(ErrorCode::Collective, call + ": " + why);
    }
    const CollectiveCall sent = detail::parse_call(m->call);
    const Tensor value =
        detail::from_codes(from_bytes(m->payload, sent.shape, codes_policy(sent.policy), members_[src]), sent.policy,
                           "cpu");
    if (const std::string diff = detail::message_difference(value, shape, policy); !diff.empty()) {
      why = "the message differs from what recv expects in " + diff + ": " + members_[src] + " sent " +
            detail::message_text(sent.shape, sent.policy) + ", " + members_[rank] + " expects " +
            detail::message_text(shape, policy);
      transport_->set_broken(id_ ^ kP2pBroken, why);
      raise(ErrorCode::Collective, call + ": " + why);
    }
    const std::string device = memory_device(members_[rank]);
    return device == "cpu" ? value : value.to(device);
  }

  void fail(std::size_t rank, const std::string& why) override {
    if (rank >= size()) return;
    transport_->member_failed(id_, static_cast<std::uint32_t>(rank), why, processes_);
  }

  std::uint64_t completed(std::size_t rank) const override {
    std::lock_guard lock(mu_);
    return completed_.at(rank);
  }

 private:
  // One member's collective call in progress.
  struct Active {
    std::size_t rank;
    std::uint64_t seq;
    CollectiveCall call;
    std::uint64_t hash;
    std::string wire;  // the call, serialized
    Deadline deadline;
    std::uint64_t record;  // its flight recorder entry
  };

  std::string member(std::size_t r) const {
    std::string s = members_[r] + " (rank " + std::to_string(r);
    if (owners_[r] != transport_->rank()) s += ", MPI process " + std::to_string(owners_[r]);
    return s + ")";
  }

  std::string where(const CollectiveCall& c, std::uint64_t seq) const {
    return c.op + " #" + std::to_string(seq) + " over mesh axis '" + axis_ + "'";
  }

  std::string p2p_where(const char* op, std::uint64_t number, std::size_t from, std::size_t to) const {
    return std::string(op) + " #" + std::to_string(number) + " from " + members_[from] + " to " + members_[to] +
           " over mesh axis '" + axis_ + "'";
  }

  void check_member(std::size_t rank, const char* op, const char* role) const {
    if (rank >= size()) {
      raise(ErrorCode::ArgumentInvalid, std::string(op) + ": " + role + " rank " + std::to_string(rank) +
                                            " is not a member of mesh axis '" + axis_ + "' (" +
                                            std::to_string(size()) + " members)");
    }
  }

  // Only the process that drives a member may call as it.
  void check_local(std::size_t rank, const char* op) const {
    if (owners_[rank] != transport_->rank()) {
      raise(ErrorCode::ArgumentInvalid, std::string(op) + " as member " + members_[rank] + " (rank " +
                                            std::to_string(rank) + ") of mesh axis '" + axis_ +
                                            "': that member is driven by MPI process " + std::to_string(owners_[rank]) +
                                            ", and this is process " + std::to_string(transport_->rank()));
    }
  }

  // Why member `rank`'s call must stop (transport lock held): the group (or
  // its p2p side, `broken_bit`) broke, a member failed, a process that drives
  // a member failed, or the process of `peer` (the member whose message is
  // awaited, or the destination of a send) exited without sending it.
  // "" while all is well.
  std::string failure(std::size_t rank) const override {
    return transport_->inspect([&] { return failure_locked(rank); });
  }

  // Another member that failed, or whose process did ("" when none).
  std::string failure_locked(std::size_t rank) const {
    // A member's own failure says more than its process's, which follows it.
    std::string why;
    for (std::size_t r = 0; r < size() && why.empty(); ++r) {
      if (r == rank) continue;
      if (std::string f = transport_->member_failure_locked(id_, static_cast<std::uint32_t>(r)); !f.empty()) {
        why = "member " + member(r) + " failed: " + f;
      }
    }
    for (std::size_t r = 0; r < size() && why.empty(); ++r) {
      if (r == rank || owners_[r] == transport_->rank()) continue;
      if (std::string p = transport_->process_failure_locked(owners_[r]); !p.empty()) {
        why = "member " + member(r) + " is gone: its MPI process " + std::to_string(owners_[r]) + " failed (" + p + ")";
      }
    }
    return why;
  }

  std::string stop_locked(std::size_t rank, std::uint64_t broken_bit, std::size_t peer) {
    if (std::string b = transport_->broken_locked(id_ ^ broken_bit); !b.empty()) return b;
    std::string why = failure_locked(rank);
    if (why.empty() && peer < size() && owners_[peer] != transport_->rank() &&
        transport_->process_exited_locked(owners_[peer])) {
      why = "member " + member(peer) + " is gone: its MPI process " + std::to_string(owners_[peer]) +
            " exited without taking part";
    }
    if (!why.empty()) transport_->set_broken_locked(id_ ^ broken_bit, why);
    return why;
  }

  Active begin(std::size_t rank, const CollectiveCall& call) {
    check_member(rank, call.op.c_str(), "the calling");
    check_local(rank, call.op.c_str());
    Active a{rank, 0, call, detail::call_hash(call, axis_), detail::serialize_call(call),
             detail::deadline_after(timeout_), 0};
    {
      std::lock_guard lock(mu_);
      a.seq = ++seq_[rank];
    }
    if (const std::string why = transport_->inspect([&] { return stop_locked(rank, 0, size()); }); !why.empty()) {
      raise(ErrorCode::Collective, where(call, a.seq) + ": " + why);
    }
    a.record = transport_->recorder().start(where(call, a.seq) + " by " + members_[rank] + ", " + call.describe());
    return a;
  }

  // Runs a call's body: marks it done in the flight recorder, or turns an
  // error of this member into a failure the others learn.
  template <class Body>
  Tensor guarded(const Active& a, Body body) {
    try {
      Tensor out = body();
      transport_->recorder().finish(a.record, "done");
      std::lock_guard lock(mu_);
      completed_[a.rank] = a.seq;
      return out;
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::Collective) {
        if (e.message().find("timed out after") == std::string::npos) transport_->recorder().finish(a.record, "failed");
        throw;
      }
      transport_->recorder().finish(a.record, "failed");
      fail_call(a, members_[a.rank] + " could not compute its result: " + e.message());
    } catch (const std::exception& e) {
      transport_->recorder().finish(a.record, "failed");
      fail_call(a, members_[a.rank] + " could not compute its result: " + e.what());
    }
  }

  // Breaks the group, tells the other members' processes, raises.
  [[noreturn]] void fail_call(const Active& a, const std::string& why, const std::string& extra = "") {
    transport_->set_broken(id_, why);
    transport_->member_failed(id_, static_cast<std::uint32_t>(a.rank), why, processes_);
    raise(ErrorCode::Collective, where(a.call, a.seq) + ": " + why + extra);
  }

  void send(const Active& a, std::uint32_t phase, std::size_t dst, Bytes payload) {
    Message m;
    m.key = MessageKey{id_, a.seq, phase, static_cast<std::uint32_t>(a.rank), static_cast<std::uint32_t>(dst)};
    m.hash = a.hash;
    m.call = a.wire;
    m.payload = std::move(payload);
    transport_->post(owners_[dst], std::move(m));
  }

  Message receive(const Active& a, std::uint32_t phase, std::size_t src) {
    const MessageKey key{id_, a.seq, phase, static_cast<std::uint32_t>(src), static_cast<std::uint32_t>(a.rank)};
    std::string why;
    std::optional<Message> m = transport_->take(key, a.deadline, [&] { return stop_locked(a.rank, 0, src); }, why);
    if (!m) {
      if (!why.empty()) raise(ErrorCode::Collective, where(a.call, a.seq) + ": " + why);
      timed_out(a, src, phase);
    }
    if (m->hash != a.hash) {
      // Named in rank order, as every member that sees the pair names it.
      const CollectiveCall theirs = detail::parse_call(m->call);
      const bool mine_first = a.rank < src;
      const CollectiveCall& lo = mine_first ? a.call : theirs;
      const CollectiveCall& hi = mine_first ? theirs : a.call;
      std::string diff = lo.difference(hi);
      if (diff.empty()) diff = "the call";
      fail_call(a, "members disagree on " + diff + ": " + members_[mine_first ? a.rank : src] + " called " +
                       lo.describe() + ", " + members_[mine_first ? src : a.rank] + " called " + hi.describe());
    }
    return std::move(*m);
  }

  [[noreturn]] void timed_out(const Active& a, std::size_t src, std::uint32_t phase) {
    const std::string why = "timed out after " + number_text(timeout_) + " s (TESSERA_COLLECTIVE_TIMEOUT) waiting for " +
                            member(src) + (phase == kGather ? " to send its combined part" : " to arrive");
    transport_->recorder().finish(a.record, "timed out");
    std::string record = "\nflight recorder of MPI process " + std::to_string(transport_->rank()) +
                         " (its last collectives, oldest first):";
    for (const std::string& line : transport_->recorder().lines()) record += "\n  " + line;
    std::fprintf(stderr, "tessera: %s: %s%s\n", where(a.call, a.seq).c_str(), why.c_str(), record.c_str());
    fail_call(a, why, record);
  }

  // A reduction: the reduce-scatter of parts in the algorithm's order, then
  // the all-gather of the combined parts; `finish` takes what this member
  // returns from the whole result.
  template <class Finish>
  Tensor reduction(std::size_t rank, const Tensor& x, const CollectiveCall& call, ReduceOp op, Algorithm algorithm,
                   Finish finish) {
    Active a = begin(rank, call);
    return guarded(a, [&] {
      const std::size_t p = size();
      const Tensor host = host_contiguous(x);
      if (is_packed(x.dtype())) {
        // Packed sub-byte formats reduce whole: everyone gets every input and
        // computes the same rank-order reduction.
        const Tensor codes = detail::host_codes(x);
        const Bytes payload = all_bytes(codes);
        for (std::size_t j = 0; j < p; ++j)
          if (j != rank) send(a, kExchange, j, payload);
        std::vector<Tensor> all(p);
        for (std::size_t s = 0; s < p; ++s) {
          all[s] = s == rank ? host
                             : detail::from_codes(from_bytes(receive(a, kExchange, s).payload, x.shape(),
                                                             codes.policy(), members_[s]),
                                                  x.policy(), "cpu");
        }
        return finish(reduce_in_rank_order(all, op));
      }
      const std::int64_t n = x.numel();
      const std::size_t es = static_cast<std::size_t>(storage_bytes(x.dtype()));
      auto part_of = [&](std::size_t j) {
        return block_part(n, static_cast<std::int64_t>(p), static_cast<std::int64_t>(j));
      };
      // Phase 1 shares x's memory: every receiver has read its part before
      // this call returns (it sends its combined part only after reading).
      for (std::size_t j = 0; j < p; ++j) {
        if (j == rank) continue;
        const Run part = part_of(j);
        send(a, kExchange, j, share_bytes(host, static_cast<std::size_t>(part.start) * es,
                                          static_cast<std::size_t>(part.length) * es));
      }
      // Every member's slice of my part, with member 0's policy (the local
      // backend combines with the first member's policy).
      const Run mine = part_of(rank);
      std::vector<Message> got(p);
      for (std::size_t s = 0; s < p; ++s)
        if (s != rank) got[s] = receive(a, kExchange, s);
      const NumericsPolicy policy = rank == 0 ? x.policy() : detail::parse_call(got[0].call).policy;
      std::vector<Tensor> slices(p);
      for (std::size_t s = 0; s < p; ++s) {
        slices[s] = from_bytes(s == rank ? share_bytes(host, static_cast<std::size_t>(mine.start) * es,
                                                       static_cast<std::size_t>(mine.length) * es)
                                         : got[s].payload,
                               {mine.length}, policy, members_[s]);
      }
      const Tensor combined = Tensor::empty({mine.length}, policy);
      reduce_range_with(slices, op, algorithm, rank, 0, mine.length, combined);
      // Fresh and never written again: shared with every receiver.
      const Bytes payload = share_bytes(combined, 0, static_cast<std::size_t>(mine.length) * es);
      for (std::size_t j = 0; j < p; ++j)
        if (j != rank) send(a, kGather, j, payload);
      const Tensor sum = Tensor::empty(x.shape(), policy);
      auto* out = static_cast<std::byte*>(sum.data());
      for (std::size_t s = 0; s < p; ++s) {
        const Run part = part_of(s);
        const Bytes bytes = s == rank ? payload : receive(a, kGather, s).payload;
        if (bytes.size != static_cast<std::size_t>(part.length) * es) {
          raise(ErrorCode::Internal, "the combined part from " + members_[s] + " has " + std::to_string(bytes.size) +
                                         " bytes, not " + std::to_string(static_cast<std::size_t>(part.length) * es));
        }
        if (bytes.size > 0) std::memcpy(out + static_cast<std::size_t>(part.start) * es, bytes.data, bytes.size);
      }
      return finish(sum);
    });
  }

  std::string axis_;
  std::vector<std::string> members_;
  std::vector<int> owners_;
  double timeout_;
  Transport* transport_ = nullptr;
  std::uint64_t id_ = 0;
  std::vector<int> processes_;  // the distinct owners
  mutable std::mutex mu_;
  std::vector<std::uint64_t> seq_, completed_;  // per member
  std::vector<std::uint64_t> sent_, received_;  // per (src, dst) pair: p2p messages numbered
};

}  // namespace

std::shared_ptr<Communicator> make_mpi_communicator(std::string axis, std::vector<std::string> members,
                                                    std::vector<int> owners, double timeout_seconds) {
  return std::make_shared<MpiCommunicator>(std::move(axis), std::move(members), std::move(owners), timeout_seconds);
}

void mpi_join() {
  if (process_count() > 1) detail::Transport::get();
}

void mpi_process_failed(const std::string& why) {
  if (process_count() < 2) return;
  try {
    detail::Transport::get().process_failed(why);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessera: could not tell the other MPI processes that this one failed: %s\n", e.what());
  }
}

void mpi_shutdown() {
  if (detail::Transport* t = detail::Transport::existing()) t->shutdown(collective_timeout_seconds());
}

std::vector<std::string> mpi_flight_record() {
  detail::Transport* t = detail::Transport::existing();
  return t ? t->recorder().lines() : std::vector<std::string>{};
}

}  // namespace tessera::dist
