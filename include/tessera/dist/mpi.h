// The mpi collective backend: a mesh whose devices are driven by several
// processes started by `mpirun -np W` (docs/design/0011-mpi-backend.md).
//
// Process p of W drives the mesh ranks [p*N/W, (p+1)*N/W) of a mesh of N
// devices (N a multiple of W). Members of a communicator driven by this
// process are its threads, as in the local backend; the others live in
// other processes, and bytes move between processes as MPI messages
// (MPI_BYTE only: reductions never use MPI's own operations, so the bits
// are the local backend's). libmpi (Open MPI's ABI, libmpi.so.40) is loaded
// at run time: a build or a machine without MPI still works, and
// probe_mpi() says why MPI is unavailable.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessera/dist/communicator.h"
#include "tessera/dist/dist_tensor.h"

namespace tessera::dist {

// What `tessera info` reports about MPI.
struct MpiProbe {
  bool available = false;
  std::string reason;      // why not, when unavailable
  std::string library;     // the file opened ("libmpi.so.40")
  std::string version;     // MPI_Get_library_version, up to its first comma ("Open MPI v4.1.4")
  std::string standard;    // MPI_Get_version ("3.1")
  std::string cuda_aware;  // "yes (...)" / "no (...)": whether device buffers could go to MPI directly
  bool launched = false;   // this process runs under mpirun
  int process_rank = 0;
  int process_count = 1;
};
MpiProbe probe_mpi();
// `tessera info`'s lines about MPI ("  mpi:         available (...)\n" ...).
std::string mpi_info_lines();

// Whether this process was started by Open MPI's mpirun (OMPI_COMM_WORLD_SIZE
// is set); its rank and the number of processes (from mpirun's environment,
// without initializing MPI). Outside mpirun: rank 0 of 1.
bool launched_by_mpirun();
int process_rank();
int process_count();

// The process that drives mesh rank `rank` of a mesh of `mesh_size` devices
// over `processes` processes; ArgumentError when mesh_size is not a multiple of processes.
int owner_of_mesh_rank(std::int64_t rank, std::int64_t mesh_size, int processes);

// A communicator over `members` (device names, by rank) for mesh axis
// `axis`; owners[r] is the process that drives member r. Initializes MPI
// (MPI_Init_thread, MPI_THREAD_MULTIPLE asked) on first use when some
// member lives in another process. Every process that drives a member must
// create the communicators of a group in the same order (they are matched
// by axis, members and how many were made before over the same group).
std::shared_ptr<Communicator> make_mpi_communicator(std::string axis, std::vector<std::string> members,
                                                    std::vector<int> owners,
                                                    double timeout_seconds = collective_timeout_seconds());

// Joins the job now (MPI_Init_thread) under mpirun with several processes,
// so that every process can be told when another fails and all exit
// together; nothing outside mpirun. DeviceUnavailable when MPI cannot start.
void mpi_join();
// This process stops (an uncaught exception): every other process learns it
// at once, and its members' peers raise a CollectiveError naming it.
void mpi_process_failed(const std::string& why);
// At exit: tells the others this process is done, waits (up to the
// collective timeout) until every process has said so, and finalizes MPI
// when they all did. Nothing to do when MPI was never initialized.
void mpi_shutdown();
// A distributed tensor from the shards this process computed (the others
// absent): the missing shards are host zeros of their shard shape, stand-ins
// until mpi_complete_shards fetches them.
DistTensor mpi_adopt_local_shards(std::vector<std::int64_t> shape, Layout layout, std::shared_ptr<const Mesh> mesh,
                                  const NumericsPolicy& policy, std::vector<std::optional<Tensor>> shards);
// Every shard of `t` real in every process: each process contributes the
// shards of the mesh ranks it drives (owners[r], by mesh rank), through one
// all_gather among the processes. Collective: every process calls it, in
// the same order.
DistTensor mpi_complete_shards(const DistTensor& t, const std::vector<int>& owners);

// A tensor's codes as bytes (host; one byte per element of a packed format),
// and back: how values travel between processes outside collectives.
std::string tensor_to_bytes(const Tensor& t);
Tensor tensor_from_bytes(const std::string& bytes, const std::vector<std::int64_t>& shape,
                         const NumericsPolicy& policy);

// The flight recorder: this process's last collectives (oldest first), one line each.
std::vector<std::string> mpi_flight_record();

}  // namespace tessera::dist
