// The few MPI types, constants and entry points the mpi backend uses,
// declared here so that the library builds and runs without MPI: libmpi is
// opened with dlopen on first use and every symbol resolved with dlsym
// (ARCHITECTURE.md decision 6). The layout is Open MPI's ABI (libmpi.so.40):
// handles are pointers, and the predefined ones (MPI_COMM_WORLD, MPI_BYTE)
// are the addresses of the library's globals (ompi_mpi_comm_world, ...).
#pragma once

#include <cstddef>
#include <string>

namespace tessera::dist::mpi {

using Comm = void*;
using Datatype = void*;
using Request = void*;
using Errhandler = void*;

// MPI_Status as Open MPI lays it out.
struct Status {
  int source;
  int tag;
  int error;
  int cancelled;
  std::size_t ucount;
};

constexpr int kSuccess = 0;
constexpr int kAnySource = -1;
constexpr int kThreadSerialized = 2;
constexpr int kThreadMultiple = 3;
constexpr int kMaxLibraryVersionString = 256;

struct Api {
  int (*Init_thread)(int*, char***, int, int*) = nullptr;
  int (*Initialized)(int*) = nullptr;
  int (*Finalized)(int*) = nullptr;
  int (*Finalize)() = nullptr;
  int (*Comm_rank)(Comm, int*) = nullptr;
  int (*Comm_size)(Comm, int*) = nullptr;
  int (*Comm_set_errhandler)(Comm, Errhandler) = nullptr;
  int (*Comm_dup)(Comm, Comm*) = nullptr;
  int (*Isend)(const void*, int, Datatype, int, int, Comm, Request*) = nullptr;
  int (*Test)(Request*, int*, Status*) = nullptr;
  int (*Iprobe)(int, int, Comm, int*, Status*) = nullptr;
  int (*Get_count)(const Status*, Datatype, int*) = nullptr;
  int (*Recv)(void*, int, Datatype, int, int, Comm, Status*) = nullptr;
  int (*Get_library_version)(char*, int*) = nullptr;
  int (*Get_version)(int*, int*) = nullptr;
  int (*Error_string)(int, char*, int*) = nullptr;
  int (*Query_cuda_support)() = nullptr;  // MPIX_Query_cuda_support; absent unless built with CUDA
  Comm comm_world = nullptr;              // &ompi_mpi_comm_world
  Datatype byte = nullptr;                // &ompi_mpi_byte
  Errhandler errors_return = nullptr;     // &ompi_mpi_errors_return
};

// The library, opened once (never initialized here). `why` says what failed
// when it returns null.
const Api* load(std::string& opened, std::string& why);
// The loaded library or a DeviceUnavailable error saying why it is absent.
const Api& api();
// The text of an MPI error code.
std::string error_text(int code);

}  // namespace tessera::dist::mpi
