// The nccl collective backend (communicator.h): the members are GPUs of this
// process, one thread each, and NCCL moves the bytes between them on each
// device's default stream, where compiled executables launch.
//
// Results are those of every backend: reductions combine in the order of
// their algorithm (rank order by default) with the host reduction's
// numerics, bit for bit. NCCL only moves data (grouped send/recv, broadcast);
// Tessera's own kernels combine what arrived on the device (nccl_kernels.h).
// Algorithm::native is NCCL's own allreduce and reduce-scatter (the bits are
// NCCL's) where NCCL has the dtype, else rank order.
//
// A host rendezvous precedes every collective (the local backend's), so
// mismatched calls, failed members and the timeout are CollectiveErrors
// before anything is queued on a GPU. send/recv go through the local
// backend's buffered mailboxes (a device copy), because NCCL's send holds
// its stream until the matching receive is queued, which a pipeline
// schedule's order of sends could deadlock.
//
// Members may also live in several processes (the overload below).
//
// Not supported: packed sub-byte storage (a clear error).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tessera/dist/communicator.h"

namespace tessera::dist {

// Whether libnccl loads (and, when not, why). Never throw.
bool nccl_available();
std::string nccl_unavailable_reason();
// NCCL's version code (major * 10000 + minor * 100 + patch) and the library file.
int nccl_version();
std::string nccl_library();

// A communicator over `members` ("cuda:N", distinct GPUs of this process, by
// rank). The NCCL communicators of each ordered set of GPUs are created once
// (ncclCommInitAll) and kept for the process.
std::shared_ptr<Communicator> make_nccl_communicator(std::string axis, std::vector<std::string> members,
                                                     double timeout_seconds = collective_timeout_seconds());

// Members spread over processes (under mpirun): owners[r] is the process
// that drives member r, `this_process` this one, and `coordinator` a
// communicator over the same members that reaches every process (the mpi
// backend's). NCCL's unique id travels through the coordinator, each member
// joins with ncclCommInitRank at its first collective, and every collective
// first exchanges the members' calls through the coordinator (so a
// mismatch, a failed member or the timeout is a CollectiveError before
// anything is queued). Communicators of a group must be made in the same
// order in every process, as for the mpi backend.
std::shared_ptr<Communicator> make_nccl_communicator(std::string axis, std::vector<std::string> members,
                                                     std::vector<int> owners, int this_process,
                                                     std::shared_ptr<Communicator> coordinator,
                                                     double timeout_seconds = collective_timeout_seconds());

}  // namespace tessera::dist
