// The mpi backend's post office (transport.h).
#include "dist/mpi/transport.h"

#include <climits>
#include <cstdio>
#include <cstring>

#include "dist/mpi/mpi_api.h"
#include "tessera/dist/mpi.h"
#include "tessera/support/error.h"

namespace tessera::dist::detail {
namespace {

// The one tag of Tessera's messages on its own communicator.
constexpr int kTag = 1;
constexpr std::uint32_t kMagic = 0x41525354;  // "TSRA"

enum Kind : std::uint32_t { kData = 1, kMemberFailed = 2, kProcessFailed = 3, kBye = 4 };

struct Header {
  std::uint32_t magic;
  std::uint32_t kind;
  std::uint64_t comm;
  std::uint64_t seq;
  std::uint32_t phase;
  std::uint32_t src;
  std::uint32_t dst;
  std::uint32_t call_bytes;
  std::uint64_t hash;
  std::uint64_t payload_bytes;
};

// The head of a message: its header, then its call.
std::vector<std::byte> encode(std::uint32_t kind, const MessageKey& key, std::uint64_t hash, const std::string& call,
                              std::size_t payload_bytes) {
  Header h{kMagic, kind, key.comm, key.seq, key.phase, key.src, key.dst, static_cast<std::uint32_t>(call.size()),
           hash, payload_bytes};
  std::vector<std::byte> head(sizeof h + call.size());
  std::memcpy(head.data(), &h, sizeof h);
  if (!call.empty()) std::memcpy(head.data() + sizeof h, call.data(), call.size());
  return head;
}

// Payloads travel in chunks that an MPI count (int) can hold.
constexpr std::size_t kChunk = std::size_t{1} << 30;

std::uint64_t fnv(std::uint64_t h, const void* data, std::size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

void check_mpi(int rc, const char* what) {
  if (rc != mpi::kSuccess) raise(ErrorCode::Collective, std::string(what) + " failed: " + mpi::error_text(rc));
}

Transport* instance = nullptr;
std::mutex instance_mu;

}  // namespace

Bytes Bytes::allocate(std::size_t n, std::byte** writable) {
  std::shared_ptr<std::byte[]> buffer(new std::byte[n > 0 ? n : 1]);  // default-initialized: not zeroed
  *writable = buffer.get();
  return Bytes{buffer, buffer.get(), n};
}

Transport& Transport::get() {
  std::lock_guard lock(instance_mu);
  if (instance == nullptr) {
    // Never destroyed: its progress thread may run until the process ends,
    // and MPI is finalized by shutdown() (at Python's exit), not by a static destructor.
    auto* t = new Transport();
    try {
      if (process_count() > 1) t->start_mpi();
    } catch (...) {
      delete t;
      throw;
    }
    instance = t;
  }
  return *instance;
}

Transport* Transport::existing() {
  std::lock_guard lock(instance_mu);
  return instance;
}

Transport::Transport() : rank_(process_rank()), size_(process_count()), process_failures_(size_), said_bye_(size_) {}

void Transport::start_mpi() {
  const mpi::Api& a = mpi::api();
  int initialized = 0;
  check_mpi(a.Initialized(&initialized), "MPI_Initialized");
  if (!initialized) {
    int provided = 0;
    check_mpi(a.Init_thread(nullptr, nullptr, mpi::kThreadMultiple, &provided), "MPI_Init_thread");
    // Only the progress thread calls MPI after this, one call at a time.
    if (provided < mpi::kThreadSerialized) {
      raise(ErrorCode::DeviceUnavailable,
            "MPI_Init_thread gave thread level " + std::to_string(provided) + "; the mpi backend needs at least "
            "MPI_THREAD_SERIALIZED (its progress thread is not the main thread)");
    }
  }
  check_mpi(a.Comm_dup(a.comm_world, &comm_), "MPI_Comm_dup");
  check_mpi(a.Comm_set_errhandler(comm_, a.errors_return), "MPI_Comm_set_errhandler");
  int rank = 0, size = 0;
  check_mpi(a.Comm_rank(comm_, &rank), "MPI_Comm_rank");
  check_mpi(a.Comm_size(comm_, &size), "MPI_Comm_size");
  if (rank != rank_ || size != size_) {
    raise(ErrorCode::Internal, "MPI says this is process " + std::to_string(rank) + " of " + std::to_string(size) +
                                   ", mpirun's environment says " + std::to_string(rank_) + " of " +
                                   std::to_string(size_));
  }
  mpi_ = true;
  progress_ = std::thread([this] { progress_loop(); });
}

std::uint64_t Transport::register_comm(const std::string& axis, const std::vector<std::string>& members) {
  std::uint64_t h = fnv(1469598103934665603ull, axis.data(), axis.size());
  for (const std::string& m : members) {
    h = fnv(h, "\0", 1);
    h = fnv(h, m.data(), m.size());
  }
  std::lock_guard lock(mu_);
  const std::uint64_t count = ++made_[h];
  return fnv(h, &count, sizeof count);
}

void Transport::post(int process, Message m) {
  if (process == rank_) {
    {
      std::lock_guard lock(mu_);
      mailbox_[m.key] = std::move(m);
    }
    cv_.notify_all();
    return;
  }
  if (!mpi_) raise(ErrorCode::Internal, "a message to process " + std::to_string(process) + " without MPI");
  std::vector<std::byte> head = encode(kData, m.key, m.hash, m.call, m.payload.size);
  std::lock_guard lock(mu_);
  outgoing_.push_back(Outgoing{process, std::move(head), std::move(m.payload)});
}

std::optional<Message> Transport::take(const MessageKey& key, Deadline deadline,
                                       const std::function<std::string()>& stop, std::string& why) {
  std::unique_lock lock(mu_);
  while (true) {
    if (auto it = mailbox_.find(key); it != mailbox_.end()) {
      Message m = std::move(it->second);
      mailbox_.erase(it);
      return m;
    }
    why = stop();
    if (!why.empty()) return std::nullopt;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return std::nullopt;
    // Woken by every arrival and notice; the bound re-checks `stop` regularly.
    cv_.wait_until(lock, std::min(deadline, now + std::chrono::milliseconds(100)));
  }
}

void Transport::send_notice(std::uint32_t kind, int process, std::uint64_t comm, std::uint32_t member,
                            const std::string& why) {
  MessageKey key;
  key.comm = comm;
  key.src = member;
  outgoing_.push_back(Outgoing{process, encode(kind, key, 0, why, 0), {}});
}

void Transport::member_failed(std::uint64_t comm, std::uint32_t member, const std::string& why,
                              const std::vector<int>& processes) {
  {
    std::lock_guard lock(mu_);
    auto& slot = member_failures_[{comm, member}];
    if (slot.empty()) slot = why.empty() ? "it stopped" : why;
    if (mpi_ && !shut_down_) {
      for (int p : processes)
        if (p != rank_) send_notice(kMemberFailed, p, comm, member, slot);
    }
  }
  cv_.notify_all();
}

std::string Transport::member_failure_locked(std::uint64_t comm, std::uint32_t member) const {
  auto it = member_failures_.find({comm, member});
  return it == member_failures_.end() ? "" : it->second;
}

std::string Transport::process_failure_locked(int process) const {
  return process >= 0 && process < size_ ? process_failures_[static_cast<std::size_t>(process)] : "";
}

bool Transport::process_exited_locked(int process) const {
  return process >= 0 && process < size_ && said_bye_[static_cast<std::size_t>(process)];
}

std::string Transport::broken_locked(std::uint64_t comm) const {
  auto it = broken_.find(comm);
  return it == broken_.end() ? "" : it->second;
}

void Transport::set_broken_locked(std::uint64_t comm, const std::string& why) {
  auto& slot = broken_[comm];
  if (slot.empty()) slot = why;
}

void Transport::set_broken(std::uint64_t comm, const std::string& why) {
  {
    std::lock_guard lock(mu_);
    set_broken_locked(comm, why);
  }
  cv_.notify_all();
}

std::string Transport::inspect(const std::function<std::string()>& f) const {
  std::lock_guard lock(mu_);
  return f();
}

void Transport::process_failed(const std::string& why) {
  std::lock_guard lock(mu_);
  if (failed_ || !mpi_ || shut_down_) return;
  failed_ = true;
  for (int p = 0; p < size_; ++p)
    if (p != rank_) send_notice(kProcessFailed, p, 0, 0, why);
}

void Transport::deliver(const std::vector<std::byte>& head, Bytes payload, int from) {
  Header h;
  std::memcpy(&h, head.data(), sizeof h);
  std::string call(reinterpret_cast<const char*>(head.data() + sizeof h), h.call_bytes);
  {
    std::lock_guard lock(mu_);
    auto& state = process_failures_[static_cast<std::size_t>(from)];
    switch (h.kind) {
      case kData: {
        Message m;
        m.key = MessageKey{h.comm, h.seq, h.phase, h.src, h.dst};
        m.hash = h.hash;
        m.call = std::move(call);
        m.payload = std::move(payload);
        mailbox_[m.key] = std::move(m);
        break;
      }
      case kMemberFailed: {
        auto& slot = member_failures_[{h.comm, h.src}];
        if (slot.empty()) slot = call;
        break;
      }
      case kProcessFailed:
        if (state.empty()) state = "it raised " + call;
        break;
      case kBye:
        said_bye_[static_cast<std::size_t>(from)] = true;
        if (state.empty() && !call.empty()) state = call;  // it failed (its notice may not have come first)
        break;
      default: break;
    }
  }
  cv_.notify_all();
}

void Transport::progress_loop() {
  const mpi::Api& a = mpi::api();
  struct InFlight {
    mpi::Request request;
    std::vector<std::byte> head;  // kept alive until sent
    Bytes payload;
  };
  std::deque<InFlight> in_flight;
  auto isend = [&](const void* data, std::size_t n, int process, InFlight f) {
    const int rc = a.Isend(data, static_cast<int>(n), a.byte, process, kTag, comm_, &f.request);
    if (rc != mpi::kSuccess) {
      std::fprintf(stderr, "tessera: MPI_Isend to process %d failed: %s\n", process, mpi::error_text(rc).c_str());
      return;
    }
    in_flight.push_back(std::move(f));
  };
  int idle = 0;
  while (true) {
    std::deque<Outgoing> batch;
    {
      std::lock_guard lock(mu_);
      if (stop_progress_ && outgoing_.empty() && in_flight.empty()) {
        progress_done_ = true;
        break;
      }
      batch.swap(outgoing_);
    }
    bool busy = !batch.empty();
    for (Outgoing& o : batch) {
      // The pointer first: moving the vector into InFlight keeps its buffer.
      const std::byte* head = o.head.data();
      const std::size_t head_bytes = o.head.size();
      isend(head, head_bytes, o.process, InFlight{nullptr, std::move(o.head), {}});
      for (std::size_t at = 0; at < o.payload.size; at += kChunk) {
        isend(o.payload.data + at, std::min(kChunk, o.payload.size - at), o.process, InFlight{nullptr, {}, o.payload});
      }
    }
    for (auto it = in_flight.begin(); it != in_flight.end();) {
      int done = 0;
      mpi::Status status{};
      if (a.Test(&it->request, &done, &status) != mpi::kSuccess || done) {
        it = in_flight.erase(it);
        busy = true;
      } else {
        ++it;
      }
    }
    while (true) {
      int flag = 0;
      mpi::Status status{};
      if (a.Iprobe(mpi::kAnySource, kTag, comm_, &flag, &status) != mpi::kSuccess || !flag) break;
      int count = 0;
      a.Get_count(&status, a.byte, &count);
      std::vector<std::byte> head(static_cast<std::size_t>(count));
      mpi::Status got{};
      if (a.Recv(head.data(), count, a.byte, status.source, kTag, comm_, &got) != mpi::kSuccess) break;
      Header h;
      if (head.size() < sizeof h) continue;  // not ours: the duplicate communicator carries only Tessera's messages
      std::memcpy(&h, head.data(), sizeof h);
      if (h.magic != kMagic || head.size() != sizeof h + h.call_bytes) continue;
      // The payload's chunks are the next messages from that process (MPI keeps their order).
      std::byte* into = nullptr;
      Bytes payload = Bytes::allocate(h.payload_bytes, &into);
      bool ok = true;
      for (std::size_t at = 0; ok && at < h.payload_bytes; at += kChunk) {
        const int n = static_cast<int>(std::min<std::size_t>(kChunk, h.payload_bytes - at));
        ok = a.Recv(into + at, n, a.byte, status.source, kTag, comm_, &got) == mpi::kSuccess;
      }
      if (!ok) break;
      deliver(head, std::move(payload), status.source);
      busy = true;
    }
    // Yield while traffic flows; sleep when idle (processes may share few cores).
    idle = busy ? 0 : idle + 1;
    if (idle == 0) continue;
    if (idle < 64) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(idle < 4096 ? 50 : 500));
    }
  }
}

void Transport::shutdown(double timeout_seconds) {
  if (!mpi_) return;
  {
    std::lock_guard lock(mu_);
    if (shut_down_) return;
    for (int p = 0; p < size_; ++p)
      if (p != rank_) send_notice(kBye, p, 0, 0, failed_ ? "it raised and exited" : "");
  }
  const Deadline deadline = deadline_after(timeout_seconds);
  bool everyone = false;
  {
    std::unique_lock lock(mu_);
    everyone = cv_.wait_until(lock, deadline, [&] {
      for (int p = 0; p < size_; ++p)
        if (p != rank_ && !said_bye_[static_cast<std::size_t>(p)]) return false;
      return true;
    });
    shut_down_ = true;
    stop_progress_ = true;
  }
  // The progress thread stops once its sends completed (a peer that never
  // receives them must not keep this process alive: it is detached, and
  // MPI is finalized only when it stopped).
  progress_.detach();
  bool drained = false;
  while (!drained && std::chrono::steady_clock::now() < deadline + std::chrono::seconds(1)) {
    {
      std::lock_guard lock(mu_);
      drained = progress_done_;
    }
    if (!drained) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!everyone || !drained) {
    std::fprintf(stderr, "tessera: process %d exits without finalizing MPI: %s within %.3g s "
                 "(TESSERA_COLLECTIVE_TIMEOUT)\n", rank_,
                 everyone ? "its last messages were not received" : "not every process said goodbye",
                 timeout_seconds);
    return;
  }
  mpi::api().Finalize();
}

}  // namespace tessera::dist::detail
