// The mpi backend's post office: one per process. Members of communicators
// exchange numbered messages; a message to a member of this process is
// filed at once, one to another process goes out as one MPI message
// (MPI_BYTE) on a duplicate of MPI_COMM_WORLD, so a program's own MPI
// traffic never mixes with it. One progress thread makes every MPI call
// (nonblocking sends it tests, probes and receives), which files arriving
// messages and failure notices; members wait on a condition variable with a
// deadline, so nothing ever blocks inside MPI past the collective timeout.
//
// Outside mpirun (or with one process) there is no MPI at all: every member
// is local and messages are only filed.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "dist/mpi/flight_recorder.h"

namespace tessera::dist::detail {

// Which message: communicator, the sender's call number, the phase of the
// call, and the members it goes from and to (ranks along the axis).
struct MessageKey {
  std::uint64_t comm = 0;
  std::uint64_t seq = 0;
  std::uint32_t phase = 0;
  std::uint32_t src = 0;
  std::uint32_t dst = 0;
  auto operator<=>(const MessageKey&) const = default;
};

// Bytes shared without copying: `owner` keeps `data` alive (a buffer a
// message arrived in, or the tensor a payload was taken from). Never
// written once handed to post().
struct Bytes {
  std::shared_ptr<void> owner;
  const std::byte* data = nullptr;
  std::size_t size = 0;
  // A fresh buffer of n bytes (not zeroed); `writable` points at it.
  static Bytes allocate(std::size_t n, std::byte** writable);
};

struct Message {
  MessageKey key;
  std::uint64_t hash = 0;  // of the sender's call (op, shape, dtype, axis, arguments)
  std::string call;        // the sender's call, serialized (call_wire.h)
  Bytes payload;
};

using Deadline = std::chrono::steady_clock::time_point;
inline Deadline deadline_after(double seconds) {
  return std::chrono::steady_clock::now() +
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
}

class Transport {
 public:
  // The process's post office; under mpirun with several processes the
  // first call initializes MPI (DeviceUnavailable when it cannot).
  static Transport& get();
  // The post office if get() ever made it, else null (nothing to shut down).
  static Transport* existing();

  int rank() const { return rank_; }
  int size() const { return size_; }

  // An id for a communicator over `members` of `axis`, the same in every
  // process that makes the same communicators in the same order.
  std::uint64_t register_comm(const std::string& axis, const std::vector<std::string>& members);

  // Delivers `m` to process `process` (this one: filed at once).
  void post(int process, Message m);
  // Waits for message `key` and takes it. Returns null when `stop` (called
  // with the lock held) gives a reason, written to `why`, or at the
  // deadline (`why` empty).
  std::optional<Message> take(const MessageKey& key, Deadline deadline, const std::function<std::string()>& stop,
                              std::string& why);

  // Member `member` of communicator `comm` stopped: recorded here and sent to `processes`.
  void member_failed(std::uint64_t comm, std::uint32_t member, const std::string& why,
                     const std::vector<int>& processes);
  // With the lock held (inside take's `stop`): why a member or a process
  // failed ("" while it runs), and whether a process exited (said goodbye:
  // what it sent before is all it will ever send).
  std::string member_failure_locked(std::uint64_t comm, std::uint32_t member) const;
  std::string process_failure_locked(int process) const;
  bool process_exited_locked(int process) const;
  // A communicator's first error (every later call raises it); set_broken keeps the first.
  std::string broken_locked(std::uint64_t comm) const;
  void set_broken_locked(std::uint64_t comm, const std::string& why);
  void set_broken(std::uint64_t comm, const std::string& why);
  // Runs `f` with the lock held (so that it may call the *_locked accessors).
  std::string inspect(const std::function<std::string()>& f) const;

  // This process stops: every other process learns why.
  void process_failed(const std::string& why);
  // Goodbye to the others, wait for theirs (up to `timeout_seconds`), finalize MPI when all said it.
  void shutdown(double timeout_seconds);

  FlightRecorder& recorder() { return recorder_; }

 private:
  Transport();
  void start_mpi();
  void progress_loop();
  void deliver(const std::vector<std::byte>& head, Bytes payload, int from);
  void send_notice(std::uint32_t kind, int process, std::uint64_t comm, std::uint32_t member, const std::string& why);

  int rank_ = 0;
  int size_ = 1;
  bool mpi_ = false;      // messages to other processes go through MPI
  void* comm_ = nullptr;  // the duplicate of MPI_COMM_WORLD

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<MessageKey, Message> mailbox_;
  std::map<std::pair<std::uint64_t, std::uint32_t>, std::string> member_failures_;
  std::map<std::uint64_t, std::string> broken_;
  std::map<std::uint64_t, std::uint64_t> made_;  // communicators made per group
  std::vector<std::string> process_failures_;    // per process: why it failed, "" while it runs
  std::vector<bool> said_bye_;
  bool failed_ = false;  // this process announced its failure
  bool shut_down_ = false;

  // A message goes out as its head (header and call) then its payload in
  // chunks of at most 1 GiB, consecutive MPI messages from one thread, which
  // MPI delivers in order.
  struct Outgoing {
    int process;
    std::vector<std::byte> head;
    Bytes payload;
  };
  std::deque<Outgoing> outgoing_;
  bool stop_progress_ = false;
  bool progress_done_ = false;
  std::thread progress_;

  FlightRecorder recorder_;
};

}  // namespace tessera::dist::detail
