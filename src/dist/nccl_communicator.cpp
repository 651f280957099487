// The nccl collective backend (tessera/dist/nccl.h). Every collective is
// one plan: pack the parts each member sends (device copies where a part is
// not contiguous), one NCCL group of send/recv (or a broadcast), then
// combine what arrived (nccl_kernels.h) or place it into the result.
#include "tessera/dist/nccl.h"

#include <cstdlib>
#include <cstring>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "backends/cuda/driver_api.h"
#include "backends/cuda/nccl_api.h"
#include "dist/nccl_kernels.h"
#include "dist/thread_members.h"
#include "tessera/dist/layout.h"
#include "tessera/runtime/cuda.h"
#include "tessera/support/error.h"

namespace tessera::dist {
namespace {

namespace cu = cuda::detail;
using Call = detail::CollectiveCall;
using cuda::DevicePtr;

// The NCCL communicators of one ordered set of GPUs, created together.
struct Clique {
  std::vector<int> devices;
  std::vector<cu::ncclComm> comms;
  bool peers = false;  // every GPU may read every other's memory (one process)
  std::mutex mu;
  std::string broken;  // why it was aborted ("" while usable)

  // Aborts every communicator (kernels waiting for peers return) and
  // remembers why. ncclCommAbort may itself wait for peers that are gone,
  // so it runs on a thread of its own; this waits for it at most `seconds`
  // and says so ("" when it returned, or when another call aborted first).
  std::string abort(const std::string& why, double seconds = 10) {
    std::vector<cu::ncclComm> doomed;
    {
      std::lock_guard lock(mu);
      if (!broken.empty()) return "";
      broken = why;  // poll() stops touching the communicators from here on
      doomed = comms;
    }
    auto done = std::make_shared<std::promise<void>>();
    std::future<void> finished = done->get_future();
    std::thread([doomed, done] {
      for (cu::ncclComm c : doomed)
        if (c != nullptr) cu::nccl().ncclCommAbort(c);
      done->set_value();
    }).detach();
    if (finished.wait_for(std::chrono::duration<double>(seconds)) == std::future_status::ready) return "";
    return "; ncclCommAbort had not returned after " + number_text(seconds) +
           " s: this process's GPUs may stay blocked, end it";
  }
};

std::shared_ptr<Clique> clique_for(const std::vector<int>& devices) {
  static std::mutex mu;
  static auto* cliques = new std::map<std::vector<int>, std::shared_ptr<Clique>>();
  std::lock_guard lock(mu);
  auto& slot = (*cliques)[devices];
  if (slot != nullptr) {
    std::lock_guard clique_lock(slot->mu);
    if (slot->broken.empty()) return slot;
  }
  auto c = std::make_shared<Clique>();
  c->devices = devices;
  c->comms.resize(devices.size());
  cu::check_nccl(cu::nccl().ncclCommInitAll(c->comms.data(), static_cast<int>(devices.size()), devices.data()),
                 "ncclCommInitAll");
  c->peers = true;
  for (int a : devices)
    for (int b : devices) c->peers = c->peers && cuda::enable_peer_access(a, b);
  slot = c;
  return c;
}

// The clique of a group spread over processes (`key` names the group): its
// members join one by one (ncclCommInitRank) at their first collective.
std::shared_ptr<Clique> spread_clique_for(const std::string& key, std::size_t members) {
  static std::mutex mu;
  static auto* cliques = new std::map<std::string, std::shared_ptr<Clique>>();
  std::lock_guard lock(mu);
  auto& slot = (*cliques)[key];
  if (slot != nullptr) {
    std::lock_guard clique_lock(slot->mu);
    if (slot->broken.empty()) return slot;
  }
  slot = std::make_shared<Clique>();
  slot->comms.assign(members, nullptr);
  return slot;
}

// A call as bytes for the coordinator's all-gather, and back: fields joined
// by the unit separator, padded with zeros to kCallBytes.
constexpr std::int64_t kCallBytes = 512;

Tensor encode_call(const detail::CollectiveCall& c) {
  std::string text = c.op + '\x1f' + c.detail + '\x1f' + std::to_string(static_cast<int>(c.policy.storage)) + '\x1f' +
                     std::to_string(c.free_dim) + '\x1f';
  for (std::size_t i = 0; i < c.shape.size(); ++i) text += (i ? "," : "") + std::to_string(c.shape[i]);
  if (static_cast<std::int64_t>(text.size()) >= kCallBytes) {
    raise(ErrorCode::ArgumentInvalid, "nccl: the description of " + c.describe() + " is too long to exchange");
  }
  Tensor t = Tensor::zeros({kCallBytes}, default_policy(DType::uint8));
  std::memcpy(t.data(), text.data(), text.size());
  return t;
}

detail::CollectiveCall decode_call(const unsigned char* bytes) {
  const std::string text(reinterpret_cast<const char*>(bytes), strnlen(reinterpret_cast<const char*>(bytes), kCallBytes));
  std::vector<std::string> f(1);
  for (char ch : text) {
    if (ch == '\x1f') f.emplace_back();
    else f.back() += ch;
  }
  if (f.size() != 5) raise(ErrorCode::Collective, "nccl: a member sent a malformed call description");
  detail::CollectiveCall c;
  c.op = f[0];
  c.detail = f[1];
  c.policy = default_policy(static_cast<DType>(std::stoi(f[2])));
  c.free_dim = std::stoll(f[3]);
  std::size_t at = 0;
  while (at < f[4].size()) {
    const std::size_t comma = f[4].find(',', at);
    c.shape.push_back(std::stoll(f[4].substr(at, comma == std::string::npos ? std::string::npos : comma - at)));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return c;
}

std::int64_t product(const std::vector<std::int64_t>& shape, std::size_t begin, std::size_t end) {
  std::int64_t p = 1;
  for (std::size_t i = begin; i < end; ++i) p *= shape[i];
  return p;
}

DevicePtr address(const Tensor& t) { return reinterpret_cast<DevicePtr>(t.device_data()); }

// Where a member's work goes: the default stream, or the stream of the
// thread's open WorkCapture (a collective captured into a compiled graph,
// whose work then runs at each replay, on buffers fixed at capture).
const cuda::Stream* queue() {
  cuda::WorkCapture* c = cuda::WorkCapture::active();
  return c != nullptr ? &c->stream() : nullptr;
}
cu::ncclStream nccl_queue() {
  const cuda::Stream* s = queue();
  return s != nullptr ? static_cast<cu::ncclStream>(s->handle()) : nullptr;
}
bool capturing() { return cuda::WorkCapture::active() != nullptr; }

// Device memory for one collective, released (to the caching allocator, on
// the default stream the collective's work is queued on) when it goes.
// Captured work holds it as long as its graph lives.
struct Staging {
  std::shared_ptr<void> block;
  DevicePtr ptr = 0;
  Staging(int device, std::size_t bytes) {
    if (bytes == 0) return;
    block = cuda::allocate_shared(device, bytes);
    ptr = reinterpret_cast<DevicePtr>(block.get());
    if (cuda::WorkCapture* c = cuda::WorkCapture::active(device)) c->keep(block);
  }
};

// NCCL's dtype for a native reduction of `p`, or -1.
int native_dtype(const NumericsPolicy& p) {
  switch (p.storage) {
    case DType::fp32: return cu::kNcclFloat32;
    case DType::fp64: return cu::kNcclFloat64;
    case DType::fp16: return cu::kNcclFloat16;
    case DType::bf16: return cu::kNcclBfloat16;
    case DType::int32: return cu::kNcclInt32;
    case DType::int64: return cu::kNcclInt64;
    case DType::int8: return cu::kNcclInt8;
    case DType::uint8: return cu::kNcclUint8;
    default: return -1;
  }
}

int native_op(ReduceOp op, const NumericsPolicy& p) {
  switch (op) {
    case ReduceOp::sum: return cu::kNcclSum;
    case ReduceOp::max: return cu::kNcclMax;
    case ReduceOp::min: return cu::kNcclMin;
    case ReduceOp::mean: return is_float(p.storage) ? cu::kNcclAvg : -1;
  }
  return -1;
}

// Chunks of a deterministic allreduce of n elements of `es` bytes:
// TESSERA_NCCL_CHUNKS when set, else 4 from 512 MiB up, 1 below (on 2 and
// 4 H100s, 4 chunks gained 4% at 1 GiB and lost up to 23% at 64 MiB: the
// exchange, not the combining, bounds the time).
constexpr std::int64_t kMaxChunks = 16;
std::int64_t pipeline_chunks(std::int64_t n, std::size_t es) {
  if (const char* v = std::getenv("TESSERA_NCCL_CHUNKS"); v && *v) {
    char* end = nullptr;
    const long c = std::strtol(v, &end, 10);
    if (end == v || *end != '\0' || c < 1 || c > kMaxChunks) {
      raise(ErrorCode::ArgumentInvalid, std::string("TESSERA_NCCL_CHUNKS is '") + v + "'; expected 1 to " +
                                            std::to_string(kMaxChunks));
    }
    return std::min<std::int64_t>(c, std::max<std::int64_t>(1, n));
  }
  return static_cast<std::size_t>(n) * es >= (512u << 20) ? 4 : 1;
}

// A device's side stream for the combining kernels of pipelined
// reductions, with the events that order it against the default stream.
struct SideStream {
  explicit SideStream(int device) : stream(device) {
    for (std::int64_t c = 0; c < kMaxChunks; ++c) {
      arrived.emplace_back(device);
      combined.emplace_back(device);
    }
  }
  std::mutex mu;  // one pipelined reduction at a time per device
  cuda::Stream stream;
  std::vector<cuda::Event> arrived, combined;
};

SideStream& side_stream(int device) {
  static std::mutex mu;
  static auto* streams = new std::map<int, std::unique_ptr<SideStream>>();
  std::lock_guard lock(mu);
  auto& s = (*streams)[device];
  if (s == nullptr) s = std::make_unique<SideStream>(device);
  return *s;
}

// How a deterministic allreduce in one process moves the members' parts
// (TESSERA_NCCL_EXCHANGE, read when a communicator is made, so all its
// members agree). The bits are the same in each.
// Unset, it picks "push" for two members and "peer" for more: on H100s
// (docs/design/0012 decision 8) push beat peer by 7-23% on two GPUs from
// 64 MiB up, and was no faster on four (where it reads from and writes to
// three peers at once).
enum class Exchange {
  nccl,  // "nccl": grouped send/recv into staging, combine, NCCL all-gather
  peer,  // "peer": each GPU's combining kernel reads the parts where they lie, NCCL all-gathers
  push,  // "push": as "peer", and the kernel writes its part into every member's result
};

Exchange exchange_setting(std::size_t members) {
  const char* v = std::getenv("TESSERA_NCCL_EXCHANGE");
  if (v == nullptr || *v == 0) return members == 2 ? Exchange::push : Exchange::peer;
  if (std::strcmp(v, "peer") == 0) return Exchange::peer;
  if (std::strcmp(v, "push") == 0) return Exchange::push;
  if (std::strcmp(v, "nccl") == 0) return Exchange::nccl;
  raise(ErrorCode::ArgumentInvalid,
        "TESSERA_NCCL_EXCHANGE='" + std::string(v) + "'; expected \"peer\", \"push\" or \"nccl\"");
}

// Every member's shape in a call, by rank.
using Shapes = std::vector<std::vector<std::int64_t>>;

class NcclCommunicator final : public detail::ThreadMembers {
 public:
  NcclCommunicator(std::string axis, std::vector<std::string> members, double timeout,
                   std::vector<int> owners = {}, int this_process = 0,
                   std::shared_ptr<Communicator> coordinator = nullptr)
      : ThreadMembers(std::move(axis), std::move(members), timeout), coordinator_(std::move(coordinator)) {
    if (coordinator_ && owners.size() != size()) {
      raise(ErrorCode::ArgumentInvalid, "nccl communicator over mesh axis '" + rv_.axis() + "': " +
                                            std::to_string(owners.size()) + " owners for " + std::to_string(size()) +
                                            " members");
    }
    for (std::size_t r = 0; r < size(); ++r) {
      const std::string& m = rv_.members()[r];
      if (coordinator_ && owners[r] != this_process) {
        devices_.push_back(-1);  // a GPU of another process
        continue;
      }
      const int d = cuda::parse_device(m);
      if (d >= cuda::device_count()) {
        raise(ErrorCode::ArgumentInvalid, "nccl communicator over mesh axis '" + rv_.axis() + "': " + m +
                                              " is not a GPU of this process (" +
                                              std::to_string(cuda::device_count()) + " found)");
      }
      for (int o : devices_) {
        if (o == d) {
          raise(ErrorCode::ArgumentInvalid, "nccl communicator over mesh axis '" + rv_.axis() + "': " + m +
                                                " appears twice; NCCL needs one member per GPU");
        }
      }
      devices_.push_back(d);
    }
    ready_.resize(size());
    combined_.resize(size());
    results_.resize(size());
    exchange_ = coordinator_ ? Exchange::nccl : exchange_setting(size());
    if (coordinator_) {
      std::string key = rv_.axis();
      for (std::size_t r = 0; r < size(); ++r) key += "|" + rv_.members()[r] + "@" + std::to_string(owners[r]);
      clique_ = spread_clique_for(key, size());
    } else {
      clique_ = clique_for(devices_);
    }
  }

  std::string_view backend() const override { return "nccl"; }
  std::string capture_refusal() const override { return ""; }

  Tensor allreduce(std::size_t rank, const Tensor& x, ReduceOp op, Algorithm algorithm) override {
    const Tensor xc = prepare(rank, x, "allreduce");
    Call c{"allreduce", x.shape(), x.policy(), std::string(reduce_op_name(op)) + detail::algorithm_detail(algorithm)};
    Tensor out = Tensor::empty(x.shape(), x.policy(), x.device());
    // Every member decides alike (one process, one environment, one call).
    // A capture takes NCCL's exchange: the peers' forms order the members'
    // GPUs by events across devices, which one device's graph cannot hold.
    const bool by_peers = exchange_ != Exchange::nccl && clique_->peers && !capturing() &&
                          algorithm != Algorithm::native &&
                          detail::peer_combinable(xc.policy(), algorithm, static_cast<int>(size()));
    const bool push = by_peers && exchange_ == Exchange::push && xc.numel() > 0;
    if (by_peers) ready_event(rank).record_default_stream();
    if (push) {
      results_[rank] = &out;  // read by the others' kernels between arrive() and depart()
      Tensor result = collective(rank, xc, c, [&](int dev, cu::ncclComm, const Shapes&) {
        reduce_by_peers(rank, dev, nullptr, out, op, algorithm, true);
        return out;
      });
      // The members' kernels wrote into this result and read this input:
      // later work here waits for all of them. After depart(), a barrier,
      // so every member has recorded its event of this call, and none can
      // record its next before this member arrives at the next call.
      for (std::size_t j = 0; j < size(); ++j)
        if (j != rank) combined_[j]->wait_on(devices_[rank]);
      return result;
    }
    return collective(rank, xc, c, [&](int dev, cu::ncclComm comm, const Shapes&) {
      const std::int64_t n = xc.numel();
      if (n == 0) return out;
      const std::size_t es = element_bytes(xc);
      const int dt = native_dtype(xc.policy()), nop = native_op(op, xc.policy());
      if (algorithm == Algorithm::native && dt >= 0 && nop >= 0) {
        cu::check_nccl(cu::nccl().ncclAllReduce(ptr(xc), ptr(out), static_cast<std::size_t>(n), dt, nop, comm, nccl_queue()),
                       "ncclAllReduce");
        return out;
      }
      if (by_peers) {
        reduce_by_peers(rank, dev, comm, out, op, algorithm, false);
        return out;
      }
      // Reduce-scatter of flat parts (each member combines its own), then
      // all-gather, in chunks: a chunk's parts are combined on a side
      // stream while the next chunk's arrive. Chunking moves work between
      // members, never changes an element's order (ring starts come from
      // the element's place in the whole tensor), so the bits are those of
      // one chunk.
      const auto p = static_cast<std::int64_t>(size());
      const std::int64_t chunks = capturing() ? 1 : pipeline_chunks(n, es);  // one stream in a capture
      if (chunks == 1 || !detail::device_combinable(xc.policy())) {
        reduce_chunk(rank, dev, comm, xc, out, 0, n, op, algorithm);
        return out;
      }
      SideStream& side = side_stream(dev);
      std::lock_guard side_lock(side.mu);
      std::vector<Staging> received;
      for (std::int64_t k = 0; k < chunks; ++k) {
        const Run chunk = block_part(n, chunks, k);
        const Run mine = block_part(chunk.length, p, static_cast<std::int64_t>(rank));
        received.emplace_back(dev, static_cast<std::size_t>(p * mine.length) * es);
        exchange_parts(rank, comm, xc, chunk, received.back(), es);
        side.arrived[k].record_default_stream();
        side.arrived[k].wait(&side.stream);
        detail::combine(dev, address(out) + (chunk.start + mine.start) * es, received.back().ptr, mine.length,
                        static_cast<int>(size()), op, algorithm, xc.policy(),
                        detail::CombinePlacement{1, mine.length, n, chunk.start + mine.start, n}, &side.stream);
        side.combined[k].record(side.stream);
      }
      for (std::int64_t k = 0; k < chunks; ++k) {
        side.combined[k].wait(nullptr);
        gather_parts(rank, comm, out, block_part(n, chunks, k), es);
      }
      return out;
    });
  }

  Tensor reduce_scatter(std::size_t rank, const Tensor& x, std::int64_t dim, ReduceOp op,
                        Algorithm algorithm) override {
    const Tensor xc = prepare(rank, x, "reduce_scatter");
    const std::size_t d = detail::normalize_collective_dim(dim, x.rank(), "reduce_scatter");
    Call c{"reduce_scatter", x.shape(), x.policy(),
           std::string(reduce_op_name(op)) + ", dim " + std::to_string(d) + detail::algorithm_detail(algorithm)};
    const auto p = static_cast<std::int64_t>(size());
    const Run mine = block_part(x.shape()[d], p, static_cast<std::int64_t>(rank));
    std::vector<std::int64_t> shape = x.shape();
    shape[d] = mine.length;
    Tensor out = Tensor::empty(shape, x.policy(), x.device());
    return collective(rank, xc, c, [&](int dev, cu::ncclComm comm, const Shapes&) {
      if (out.numel() == 0) return out;
      const std::size_t es = element_bytes(xc);
      const std::int64_t outer = product(x.shape(), 0, d), inner = product(x.shape(), d + 1, x.rank());
      const std::int64_t extent = x.shape()[d];
      const int dt = native_dtype(xc.policy()), nop = native_op(op, xc.policy());
      if (algorithm == Algorithm::native && dt >= 0 && nop >= 0 && outer == 1 && extent % p == 0) {
        cu::check_nccl(cu::nccl().ncclReduceScatter(ptr(xc), ptr(out), static_cast<std::size_t>(out.numel()), dt, nop,
                                                    comm, nccl_queue()),
                       "ncclReduceScatter");
        return out;
      }
      // Member j's part along d, contiguous (packed when outer > 1).
      const PackedParts parts = pack_parts(dev, xc, d, es);
      const std::size_t piece = static_cast<std::size_t>(outer * mine.length * inner) * es;
      Staging received(dev, piece * size());
      group([&] {
        for (std::size_t j = 0; j < size(); ++j) {
          const Run part = block_part(extent, p, static_cast<std::int64_t>(j));
          send(parts.at[j], static_cast<std::size_t>(outer * part.length * inner) * es, j, comm);
          recv(received.ptr + j * piece, piece, j, comm);
        }
      });
      combine_into(dev, address(out), received.ptr, out.numel(), op, algorithm, xc.policy(),
                   detail::CombinePlacement{inner, mine.length, extent, mine.start, xc.numel()});
      return out;
    });
  }

  Tensor all_gather(std::size_t rank, const Tensor& x, std::int64_t dim) override {
    const Tensor xc = prepare(rank, x, "all_gather");
    const std::size_t d = detail::normalize_collective_dim(dim, x.rank(), "all_gather");
    Call c{"all_gather", x.shape(), x.policy(), "dim " + std::to_string(d), static_cast<std::int64_t>(d)};
    Tensor out;
    return collective(rank, xc, c, [&](int dev, cu::ncclComm comm, const Shapes& shapes) {
      // The members' sizes along d, known once all have arrived.
      std::vector<std::int64_t> lens, at;
      std::int64_t total = 0;
      for (std::size_t j = 0; j < size(); ++j) {
        at.push_back(total);
        lens.push_back(shapes[j][d]);
        total += lens.back();
      }
      std::vector<std::int64_t> shape = x.shape();
      shape[d] = total;
      out = Tensor::empty(shape, x.policy(), x.device());
      if (out.numel() == 0) return out;
      const std::size_t es = element_bytes(xc);
      const std::int64_t outer = product(x.shape(), 0, d), inner = product(x.shape(), d + 1, x.rank());
      auto bytes_of = [&](std::size_t j) { return static_cast<std::size_t>(outer * lens[j] * inner) * es; };
      bool equal = true;
      for (std::int64_t len : lens) equal = equal && len == lens[0];
      if (outer == 1 && equal) {
        // Equal runs of the result: NCCL's own all-gather.
        cu::check_nccl(cu::nccl().ncclAllGather(ptr(xc), ptr(out), bytes_of(rank), cu::kNcclUint8, comm, nccl_queue()),
                       "ncclAllGather");
        return out;
      }
      if (outer == 1) {
        // Each member's x is one run of the result: receive in place.
        group([&] {
          for (std::size_t j = 0; j < size(); ++j) {
            send(address(xc), bytes_of(rank), j, comm);
            recv(address(out) + static_cast<std::size_t>(at[j] * inner) * es, bytes_of(j), j, comm);
          }
        });
        return out;
      }
      std::vector<std::size_t> offset(size() + 1, 0);
      for (std::size_t j = 0; j < size(); ++j) offset[j + 1] = offset[j] + bytes_of(j);
      Staging received(dev, offset[size()]);
      group([&] {
        for (std::size_t j = 0; j < size(); ++j) {
          send(address(xc), bytes_of(rank), j, comm);
          recv(received.ptr + offset[j], bytes_of(j), j, comm);
        }
      });
      for (std::size_t j = 0; j < size(); ++j) {
        const std::int64_t row = lens[j] * inner * static_cast<std::int64_t>(es);
        detail::copy_rows(dev, address(out) + static_cast<std::size_t>(at[j] * inner) * es,
                          total * inner * static_cast<std::int64_t>(es), received.ptr + offset[j], row, row, outer,
                          queue());
      }
      return out;
    });
  }

  Tensor all_to_all(std::size_t rank, const Tensor& x, std::int64_t split_dim, std::int64_t concat_dim) override {
    const Tensor xc = prepare(rank, x, "all_to_all");
    const std::size_t s = detail::normalize_collective_dim(split_dim, x.rank(), "all_to_all split");
    const std::size_t cd = detail::normalize_collective_dim(concat_dim, x.rank(), "all_to_all concat");
    Call c{"all_to_all", x.shape(), x.policy(), "split dim " + std::to_string(s) + ", concat dim " + std::to_string(cd)};
    const auto p = static_cast<std::int64_t>(size());
    // What each member receives from each: part `rank` along s of its x.
    std::vector<std::int64_t> piece_shape = x.shape();
    piece_shape[s] = block_part(x.shape()[s], p, static_cast<std::int64_t>(rank)).length;
    std::vector<std::int64_t> shape = piece_shape;
    shape[cd] *= p;
    Tensor out = Tensor::empty(shape, x.policy(), x.device());
    return collective(rank, xc, c, [&](int dev, cu::ncclComm comm, const Shapes&) {
      if (xc.numel() == 0 && out.numel() == 0) return out;
      const std::size_t es = element_bytes(xc);
      const std::int64_t outer_s = product(x.shape(), 0, s), inner_s = product(x.shape(), s + 1, x.rank());
      const PackedParts parts = pack_parts(dev, xc, s, es);
      const std::size_t piece = static_cast<std::size_t>(product(piece_shape, 0, piece_shape.size())) * es;
      const std::int64_t outer_c = product(piece_shape, 0, cd), inner_c = product(piece_shape, cd + 1, x.rank());
      const std::int64_t row = piece_shape[cd] * inner_c * static_cast<std::int64_t>(es);
      Staging received(dev, outer_c == 1 ? 0 : piece * size());
      group([&] {
        for (std::size_t j = 0; j < size(); ++j) {
          const Run part = block_part(x.shape()[s], p, static_cast<std::int64_t>(j));
          send(parts.at[j], static_cast<std::size_t>(outer_s * part.length * inner_s) * es, j, comm);
          // Concatenated along cd in rank order: in place when the pieces are runs of the result.
          recv(outer_c == 1 ? address(out) + j * piece : received.ptr + j * piece, piece, j, comm);
        }
      });
      if (outer_c != 1) {
        for (std::size_t j = 0; j < size(); ++j) {
          detail::copy_rows(dev, address(out) + static_cast<std::size_t>(row) * j, row * p, received.ptr + j * piece,
                            row, row, outer_c, queue());
        }
      }
      return out;
    });
  }

  Tensor broadcast(std::size_t rank, const Tensor& x, std::size_t root) override {
    detail::check_member(root, size(), axis(), "broadcast root");
    const Tensor xc = prepare(rank, x, "broadcast");
    Call c{"broadcast", x.shape(), x.policy(), "root " + std::to_string(root)};
    Tensor out = Tensor::empty(x.shape(), x.policy(), x.device());
    return collective(rank, xc, c, [&](int, cu::ncclComm comm, const Shapes&) {
      if (out.numel() == 0) return out;
      cu::check_nccl(cu::nccl().ncclBroadcast(ptr(xc), ptr(out), storage_bytes_for(x.dtype(), x.numel()),
                                              cu::kNcclUint8, static_cast<int>(root), comm, nccl_queue()),
                     "ncclBroadcast");
      return out;
    });
  }

  void fail(std::size_t rank, const std::string& why) override {
    ThreadMembers::fail(rank, why);
    // Work the peers queued may wait for this member: a graph replay has no
    // rendezvous that would tell them. The abort ends it, and their watches
    // raise naming this member; later communicators over these GPUs make a
    // new clique. (The abort finishes on its own thread.)
    clique_->abort("member " + members()[rank] + " (rank " + std::to_string(rank) + ") failed: " + why, 0);
    // Members in other processes learn it through the coordinator.
    if (coordinator_) coordinator_->fail(rank, why);
  }

 private:
  static void* ptr(const Tensor& t) { return t.device_data(); }
  static std::size_t element_bytes(const Tensor& t) { return static_cast<std::size_t>(storage_bytes(t.dtype())); }

  // The flat range `chunk` of x: every member's part of it to its owner
  // (grouped send/recv), into `received` (members' parts, in rank order).
  void exchange_parts(std::size_t rank, cu::ncclComm comm, const Tensor& x, Run chunk, const Staging& received,
                      std::size_t es) const {
    const auto p = static_cast<std::int64_t>(size());
    const Run mine = block_part(chunk.length, p, static_cast<std::int64_t>(rank));
    group([&] {
      for (std::size_t j = 0; j < size(); ++j) {
        const Run part = block_part(chunk.length, p, static_cast<std::int64_t>(j));
        send(address(x) + (chunk.start + part.start) * es, part.length * es, j, comm);
        recv(received.ptr + j * mine.length * es, mine.length * es, j, comm);
      }
    });
  }

  // Every member's combined part of the flat range `chunk` of out, to every member.
  void gather_parts(std::size_t rank, cu::ncclComm comm, const Tensor& out, Run chunk, std::size_t es) const {
    const auto p = static_cast<std::int64_t>(size());
    const Run mine = block_part(chunk.length, p, static_cast<std::int64_t>(rank));
    if (chunk.length % p == 0) {
      // Equal parts: NCCL's own all-gather, in place (a ring on most topologies).
      cu::check_nccl(cu::nccl().ncclAllGather(
                         reinterpret_cast<const void*>(address(out) + (chunk.start + mine.start) * es),
                         reinterpret_cast<void*>(address(out) + chunk.start * es),
                         static_cast<std::size_t>(mine.length) * es, cu::kNcclUint8, comm, nccl_queue()),
                     "ncclAllGather");
      return;
    }
    group([&] {
      for (std::size_t j = 0; j < size(); ++j) {
        if (j == rank) continue;
        const Run part = block_part(chunk.length, p, static_cast<std::int64_t>(j));
        send(address(out) + (chunk.start + mine.start) * es, mine.length * es, j, comm);
        recv(address(out) + (chunk.start + part.start) * es, part.length * es, j, comm);
      }
    });
  }

  // Watches what member `rank` has just queued for `where` (cuda::Watch):
  // NCCL's asynchronous errors, the coordinator's notices of failed members
  // in other processes, and the timeout turn a GPU waiting for a peer that
  // never comes into a CollectiveError at the host's next wait on that GPU,
  // after aborting the communicators so the waiting kernels end.
  void watch_queued(std::size_t rank, cu::ncclComm comm, const std::string& where) const {
    cuda::Watch w;
    w.what = where + ", member " + members()[rank];
    w.timeout_seconds = rv_.timeout();
    const std::weak_ptr<Clique> weak = clique_;
    const std::shared_ptr<Communicator> coordinator = coordinator_;
    w.poll = [weak, comm, coordinator, rank]() -> std::string {
      const std::shared_ptr<Clique> c = weak.lock();
      if (c == nullptr) return "";
      {
        // Under the clique's lock: abort() frees the communicators.
        std::lock_guard lock(c->mu);
        if (!c->broken.empty()) return "the NCCL communicators were aborted: " + c->broken;
        cu::ncclResult state = cu::kNcclSuccess;
        if (comm != nullptr && cu::nccl().ncclCommGetAsyncError(comm, &state) == cu::kNcclSuccess &&
            state != cu::kNcclSuccess && state != cu::kNcclInProgress) {
          return std::string("NCCL reports an asynchronous error: ") + cu::nccl().ncclGetErrorString(state);
        }
      }
      return coordinator ? coordinator->failure(rank) : std::string();
    };
    w.abort = [weak](const std::string& why) {
      const std::shared_ptr<Clique> c = weak.lock();
      return c != nullptr ? c->abort(why) : std::string();
    };
    // Captured: watched each time its graph runs (KernelGraph::launch),
    // which may not run once the communicators it holds are aborted.
    if (cuda::WorkCapture* c = cuda::WorkCapture::active(devices_[rank])) {
      c->watch(std::move(w));
      c->check([weak]() -> std::string {
        const std::shared_ptr<Clique> clique = weak.lock();
        if (clique == nullptr) return "its NCCL communicators are gone";
        std::lock_guard lock(clique->mu);
        return clique->broken.empty() ? "" : "its NCCL communicators were aborted: " + clique->broken;
      });
      return;
    }
    cuda::watch(devices_[rank], std::move(w));
  }

  // Member `rank`'s event on its default stream, recorded before it
  // arrives at a collective, when its input is ready. One per member
  // suffices: depart() is a barrier, so every member has queued its waits
  // on this call's record before any member records the next.
  cuda::Event& ready_event(std::size_t rank) {
    if (!ready_[rank]) ready_[rank] = std::make_unique<cuda::Event>(devices_[rank]);
    return *ready_[rank];
  }

  // A deterministic allreduce whose combining kernel reads every member's
  // part where it lies (peer memory): this GPU waits until every member's
  // input is ready (and its result allocated), combines its flat part, and
  // the all-gather spreads the parts. The all-gather also orders every later
  // use of this member's input after the peers' reads of it: a member's
  // all-gather cannot finish before every member's combining kernel has.
  // `push`: the kernel writes the part into every member's result itself,
  // and records this member's combined event for the others to wait on.
  void reduce_by_peers(std::size_t rank, int dev, cu::ncclComm comm, const Tensor& out, ReduceOp op,
                       Algorithm algorithm, bool push) {
    const Tensor& mine_in = *static_cast<const Tensor*>(rv_.payload_of(rank));
    const std::int64_t n = mine_in.numel();
    const std::size_t es = element_bytes(mine_in);
    const Run mine = block_part(n, static_cast<std::int64_t>(size()), static_cast<std::int64_t>(rank));
    std::vector<DevicePtr> parts;
    for (std::size_t j = 0; j < size(); ++j) {
      if (j != rank) ready_[j]->wait_on(dev);
      parts.push_back(address(*static_cast<const Tensor*>(rv_.payload_of(j))) + mine.start * es);
    }
    std::vector<DevicePtr> outs{address(out) + mine.start * es};
    if (push) {
      for (std::size_t j = 0; j < size(); ++j)
        if (j != rank) outs.push_back(address(*results_[j]) + mine.start * es);
    }
    detail::combine_peers(dev, outs, parts, mine.length, op, algorithm, mine_in.policy(),
                          detail::CombinePlacement{1, mine.length, n, mine.start, n});
    if (push) {
      if (!combined_[rank]) combined_[rank] = std::make_unique<cuda::Event>(dev);
      combined_[rank]->record_default_stream();
      return;
    }
    gather_parts(rank, comm, out, Run{0, n}, es);
  }

  // One unpipelined reduction of the flat range [start, start + length) of x into out.
  void reduce_chunk(std::size_t rank, int dev, cu::ncclComm comm, const Tensor& x, const Tensor& out,
                    std::int64_t start, std::int64_t length, ReduceOp op, Algorithm algorithm) const {
    const std::size_t es = element_bytes(x);
    const auto p = static_cast<std::int64_t>(size());
    const Run chunk{start, length};
    const Run mine = block_part(length, p, static_cast<std::int64_t>(rank));
    Staging received(dev, static_cast<std::size_t>(p * mine.length) * es);
    exchange_parts(rank, comm, x, chunk, received, es);
    combine_into(dev, address(out) + (start + mine.start) * es, received.ptr, mine.length, op, algorithm, x.policy(),
                 detail::CombinePlacement{1, mine.length, x.numel(), start + mine.start, x.numel()});
    gather_parts(rank, comm, out, chunk, es);
  }

  // x on member `rank`'s GPU, contiguous; packed storage is refused.
  Tensor prepare(std::size_t rank, const Tensor& x, const char* op) const {
    if (rank >= size()) {
      raise(ErrorCode::ArgumentInvalid, "rank " + std::to_string(rank) + " is not a member of mesh axis '" + axis() +
                                            "' (" + std::to_string(size()) + " members)");
    }
    if (x.is_cpu() || cuda::parse_device(x.device()) != devices_[rank]) {
      raise(ErrorCode::Device, std::string(op) + " over mesh axis '" + axis() + "' (nccl): member " +
                                   members()[rank] + " passed a tensor on " + x.device());
    }
    if (is_packed(x.dtype())) {
      raise(ErrorCode::ArgumentInvalid, std::string(op) + " over mesh axis '" + axis() + "': packed " +
                                            std::string(name(x.dtype())) +
                                            " storage is not supported by the nccl backend yet (use backend=\"local\")");
    }
    if (!x.is_contiguous() && capturing()) {
      raise(ErrorCode::Internal, std::string(op) + " over mesh axis '" + axis() +
                                     "': a captured collective needs a contiguous input");
    }
    return x.is_contiguous() ? x : x.contiguous();
  }

  // The rendezvous, then `body` queues this member's side (given every
  // member's shape); a failure after the others may have queued theirs
  // aborts the NCCL communicators (their GPUs would wait forever) and fails
  // the call for everyone.
  template <class Body>
  Tensor collective(std::size_t rank, const Tensor& x, const Call& call, Body body) {
    if (coordinator_) return collective_across(rank, call, body);
    const std::uint64_t seq = rv_.arrive(rank, call, &x);
    Shapes shapes;
    for (std::size_t j = 0; j < size(); ++j) shapes.push_back(rv_.call_of(j).shape);
    Tensor out;
    std::string error;
    {
      std::lock_guard lock(clique_->mu);
      if (!clique_->broken.empty()) error = "the NCCL communicators were aborted: " + clique_->broken;
    }
    if (error.empty()) {
      try {
        cu::use_device(devices_[rank]);
        out = body(devices_[rank], clique_->comms[rank], shapes);
        watch_queued(rank, clique_->comms[rank], rv_.where(call, seq) + " (nccl)");
      } catch (const std::exception& e) {
        error = members()[rank] + " could not queue its part: " + e.what();
        clique_->abort(rv_.where(call, seq) + ": " + error);
      }
    }
    rv_.depart(rank, call, seq, error);
    return out;
  }

  // Members in several processes: the calls meet through the coordinator
  // (which raises for a failed member or the timeout), are compared here,
  // then each member queues its part.
  template <class Body>
  Tensor collective_across(std::size_t rank, const Call& call, Body body) {
    const Tensor all = coordinator_->all_gather(rank, encode_call(call), 0);
    std::vector<Call> calls;
    for (std::size_t j = 0; j < size(); ++j) {
      calls.push_back(decode_call(static_cast<const unsigned char*>(all.data()) + j * kCallBytes));
    }
    const std::string where = call.op + " over mesh axis '" + axis() + "' (nccl)";
    for (std::size_t j = 1; j < size(); ++j) {
      const std::string diff = calls[0].difference(calls[j]);
      if (!diff.empty()) {
        raise(ErrorCode::Collective, where + ": members disagree on " + diff + ": " + members()[0] + " called " +
                                         calls[0].describe() + ", " + members()[j] + " called " + calls[j].describe());
      }
    }
    Shapes shapes;
    for (const Call& c : calls) shapes.push_back(c.shape);
    {
      std::lock_guard lock(clique_->mu);
      if (!clique_->broken.empty()) {
        raise(ErrorCode::Collective, where + ": the NCCL communicators were aborted: " + clique_->broken);
      }
    }
    const cu::ncclComm comm = join(rank);
    try {
      cu::use_device(devices_[rank]);
      Tensor out = body(devices_[rank], comm, shapes);
      watch_queued(rank, comm, where);
      return out;
    } catch (const std::exception& e) {
      const std::string why = members()[rank] + " could not queue its part: " + e.what();
      // The peers may have queued theirs: the notice ends their wait
      // (watch_queued); it goes first, as the abort may wait for them. The
      // abort then finishes on its own thread (0 s): this member's error
      // is known now, and the peers, who raise at once on the notice, must
      // not exit (ending the job under mpirun) before this one is raised.
      coordinator_->fail(rank, why);
      clique_->abort(where + ": " + why, 0);
      const auto* error = dynamic_cast<const Error*>(&e);
      raise(error != nullptr && error->code() == ErrorCode::OutOfMemory ? ErrorCode::OutOfMemory
                                                                         : ErrorCode::Collective,
            where + ": " + why);
    }
  }

  // Member `rank`'s NCCL communicator in a group spread over processes: made
  // at its first collective (every member's first, in every process), with
  // the unique id member 0 draws, sent through the coordinator.
  cu::ncclComm join(std::size_t rank) {
    {
      std::lock_guard lock(clique_->mu);
      if (clique_->comms[rank] != nullptr) return clique_->comms[rank];
    }
    Tensor id = Tensor::zeros({static_cast<std::int64_t>(sizeof(cu::NcclUniqueId))}, default_policy(DType::uint8));
    if (rank == 0) {
      cu::NcclUniqueId u{};
      cu::check_nccl(cu::nccl().ncclGetUniqueId(&u), "ncclGetUniqueId");
      std::memcpy(id.data(), &u, sizeof(u));
    }
    id = coordinator_->broadcast(rank, id, 0);
    cu::NcclUniqueId u{};
    std::memcpy(&u, id.data(), sizeof(u));
    cu::use_device(devices_[rank]);
    cu::ncclComm c = nullptr;
    cu::check_nccl(cu::nccl().ncclCommInitRank(&c, static_cast<int>(size()), u, static_cast<int>(rank)),
                   "ncclCommInitRank");
    connect_all(rank, c);
    std::lock_guard lock(clique_->mu);
    clique_->comms[rank] = c;
    return c;
  }

  // NCCL connects peers lazily, on the host, inside the first ncclGroupEnd
  // that needs them, and that call blocks until the peer connects too. A
  // member whose peer failed before its first send would then wait there,
  // unwatched, forever. So every connection a collective can use is made
  // here, while every member is known to be present (ncclCommInitRank has
  // just met them all): a byte to and from every peer (the point-to-point
  // connections of the exchanges and all_to_all) and a one-byte all-gather
  // (the ring of the collectives). NCCL_RUNTIME_CONNECT=0 (nccl.cpp) has
  // ncclCommInitRank connect the other algorithms' channels.
  void connect_all(std::size_t rank, cu::ncclComm comm) const {
    const std::size_t p = size();
    Staging bytes(devices_[rank], 3 * p);
    group([&] {
      for (std::size_t j = 0; j < p; ++j) {
        if (j == rank) continue;
        send(bytes.ptr + j, 1, j, comm, nullptr);
        recv(bytes.ptr + p + j, 1, j, comm, nullptr);
      }
    });
    cu::check_nccl(cu::nccl().ncclAllGather(reinterpret_cast<const void*>(bytes.ptr + 2 * p + rank),
                                            reinterpret_cast<void*>(bytes.ptr + 2 * p), 1, cu::kNcclUint8, comm,
                                            nullptr),
                   "ncclAllGather");
  }

  template <class Queue>
  static void group(Queue queue) {
    cu::check_nccl(cu::nccl().ncclGroupStart(), "ncclGroupStart");
    try {
      queue();
    } catch (...) {
      cu::nccl().ncclGroupEnd();
      throw;
    }
    cu::check_nccl(cu::nccl().ncclGroupEnd(), "ncclGroupEnd");
  }

  // On the default stream, or the open capture's (`stream` overrides: connect_all runs at once).
  static void send(DevicePtr from, std::size_t bytes, std::size_t peer, cu::ncclComm comm,
                   std::optional<cu::ncclStream> stream = std::nullopt) {
    if (bytes == 0) return;
    cu::check_nccl(cu::nccl().ncclSend(reinterpret_cast<const void*>(from), bytes, cu::kNcclUint8,
                                       static_cast<int>(peer), comm, stream ? *stream : nccl_queue()),
                   "ncclSend");
  }
  static void recv(DevicePtr into, std::size_t bytes, std::size_t peer, cu::ncclComm comm,
                   std::optional<cu::ncclStream> stream = std::nullopt) {
    if (bytes == 0) return;
    cu::check_nccl(cu::nccl().ncclRecv(reinterpret_cast<void*>(into), bytes, cu::kNcclUint8, static_cast<int>(peer),
                                       comm, stream ? *stream : nccl_queue()),
                   "ncclRecv");
  }

  // The address of each member's part of x along d (numpy.array_split),
  // contiguous: x itself where a part is a run of it, else a packed copy in
  // `staging` (kept until the sends are queued).
  struct PackedParts {
    std::vector<DevicePtr> at;
    std::unique_ptr<Staging> staging;
  };
  PackedParts pack_parts(int dev, const Tensor& x, std::size_t d, std::size_t es) const {
    const auto p = static_cast<std::int64_t>(size());
    const std::int64_t outer = product(x.shape(), 0, d), inner = product(x.shape(), d + 1, x.rank());
    const std::int64_t extent = x.shape()[d];
    PackedParts parts;
    if (outer == 1) {
      for (std::int64_t j = 0; j < p; ++j) parts.at.push_back(address(x) + block_part(extent, p, j).start * inner * es);
      return parts;
    }
    parts.staging = std::make_unique<Staging>(dev, static_cast<std::size_t>(x.numel()) * es);
    const Staging& staging = *parts.staging;
    std::size_t at = 0;
    const std::int64_t pitch = extent * inner * static_cast<std::int64_t>(es);
    for (std::int64_t j = 0; j < p; ++j) {
      const Run part = block_part(extent, p, j);
      const std::int64_t row = part.length * inner * static_cast<std::int64_t>(es);
      detail::copy_rows(dev, staging.ptr + at, row, address(x) + part.start * inner * es, pitch, row, outer, queue());
      parts.at.push_back(staging.ptr + at);
      at += static_cast<std::size_t>(row * outer);
    }
    return parts;
  }

  // The combination of `members` pieces of n elements at `pieces` into
  // `out`: on the device where nccl_kernels can, else on the host with the
  // host reduction itself (integers, stochastic rounding).
  void combine_into(int dev, DevicePtr out, DevicePtr pieces, std::int64_t n, ReduceOp op, Algorithm algorithm,
                    const NumericsPolicy& policy, const detail::CombinePlacement& at) const {
    if (n == 0) return;
    const int m = static_cast<int>(size());
    if (detail::device_combinable(policy)) {
      detail::combine(dev, out, pieces, n, m, op, algorithm, policy, at, queue());
      return;
    }
    if (capturing()) {
      raise(ErrorCode::ArgumentInvalid, "a reduction of " + std::string(name(policy.storage)) +
                                            " over mesh axis '" + axis() + "' combines its parts on the host, which "
                                            "cannot be captured into a CUDA graph; call without capture_graph");
    }
    if (is_float(policy.storage) && algorithm != Algorithm::rank_order && algorithm != Algorithm::native &&
        op != ReduceOp::mean) {
      raise(ErrorCode::ArgumentInvalid, "a " + std::string(algorithm_name(algorithm)) + " reduction of " +
                                            std::string(name(policy.storage)) + " with stochastic rounding is not "
                                            "supported by the nccl backend (rank_order is)");
    }
    // Integers are exact in any order: rank order on the host.
    const std::size_t es = static_cast<std::size_t>(storage_bytes(policy.storage));
    std::vector<Tensor> host;
    for (int j = 0; j < m; ++j) {
      Tensor t = Tensor::empty({n}, policy);
      cuda::copy_to_host(dev, t.data(), pieces + static_cast<std::size_t>(j * n) * es, static_cast<std::size_t>(n) * es);
      host.push_back(t);
    }
    Tensor result = Tensor::empty({n}, policy);
    reduce_range_in_place(host, op, 0, n, result);
    cuda::copy_to_device(dev, out, result.data(), static_cast<std::size_t>(n) * es);
  }

  std::shared_ptr<Communicator> coordinator_;  // members in several processes: the calls meet through it
  std::vector<int> devices_;                          // by rank; -1 for a GPU of another process
  std::vector<std::unique_ptr<cuda::Event>> ready_;  // ready_event(), by rank
  // The "push" exchange: each member's event after its combining kernel,
  // and its result (set before it arrives, read by the others' kernels).
  std::vector<std::unique_ptr<cuda::Event>> combined_;
  std::vector<const Tensor*> results_;
  Exchange exchange_ = Exchange::nccl;  // exchange_setting() when made (one process)
  std::shared_ptr<Clique> clique_;
};

}  // namespace

bool nccl_available() {
  return cu::nccl_failure().empty();
}

std::string nccl_unavailable_reason() {
  return cu::nccl_failure();
}

int nccl_version() {
  int v = 0;
  cu::check_nccl(cu::nccl().ncclGetVersion(&v), "ncclGetVersion");
  return v;
}

std::string nccl_library() {
  return cu::nccl().library;
}

std::shared_ptr<Communicator> make_nccl_communicator(std::string axis, std::vector<std::string> members,
                                                     double timeout_seconds) {
  return std::make_shared<NcclCommunicator>(std::move(axis), std::move(members), timeout_seconds);
}

std::shared_ptr<Communicator> make_nccl_communicator(std::string axis, std::vector<std::string> members,
                                                     std::vector<int> owners, int this_process,
                                                     std::shared_ptr<Communicator> coordinator,
                                                     double timeout_seconds) {
  if (coordinator == nullptr) {
    raise(ErrorCode::ArgumentInvalid, "nccl communicator over mesh axis '" + axis +
                                          "': members in several processes need a coordinator");
  }
  return std::make_shared<NcclCommunicator>(std::move(axis), std::move(members), timeout_seconds, std::move(owners),
                                            this_process, std::move(coordinator));
}

}  // namespace tessera::dist
