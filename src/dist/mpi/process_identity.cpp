// Where this process stands in an mpirun job (tessera/dist/mpi.h): read from
// the launcher's environment, so that asking never initializes MPI.
#include <cstdlib>
#include <string>

#include "tessera/dist/mpi.h"
#include "tessera/support/error.h"

namespace tessera::dist {
namespace {

// A non-negative integer environment variable, or -1 when unset.
int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return -1;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  if (end == v || *end != '\0' || n < 0 || n > 1 << 24) {
    raise(ErrorCode::ArgumentInvalid, std::string(name) + " is '" + v + "'; mpirun sets it to a process count or rank");
  }
  return static_cast<int>(n);
}

}  // namespace

bool launched_by_mpirun() { return env_int("OMPI_COMM_WORLD_SIZE") > 0; }

int process_count() {
  const int n = env_int("OMPI_COMM_WORLD_SIZE");
  return n > 0 ? n : 1;
}

int process_rank() {
  if (!launched_by_mpirun()) return 0;
  const int r = env_int("OMPI_COMM_WORLD_RANK");
  if (r < 0 || r >= process_count()) {
    raise(ErrorCode::ArgumentInvalid, "OMPI_COMM_WORLD_RANK is " + std::to_string(r) + " in a job of " +
                                          std::to_string(process_count()) + " processes");
  }
  return r;
}

int owner_of_mesh_rank(std::int64_t rank, std::int64_t mesh_size, int processes) {
  if (processes < 1) raise(ErrorCode::ArgumentInvalid, "a job of " + std::to_string(processes) + " processes");
  if (mesh_size % processes != 0) {
    raise(ErrorCode::ArgumentInvalid,
          "a mesh of " + std::to_string(mesh_size) + " devices cannot be spread over " + std::to_string(processes) +
              " MPI processes: each process drives the same number of devices, so the mesh size must be a "
              "multiple of the process count (mpirun -np)");
  }
  if (rank < 0 || rank >= mesh_size) {
    raise(ErrorCode::ArgumentInvalid,
          "mesh rank " + std::to_string(rank) + " of a mesh of " + std::to_string(mesh_size) + " devices");
  }
  return static_cast<int>(rank / (mesh_size / processes));
}

}  // namespace tessera::dist
