// Opening libmpi at run time (mpi_api.h) and describing it for `tessera info`
// (tessera/dist/mpi.h: probe_mpi).
#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include "dist/mpi/mpi_api.h"
#include "tessera/dist/mpi.h"
#include "tessera/support/error.h"

namespace tessera::dist::mpi {
namespace {

struct Loaded {
  Api api;
  std::string opened;
  std::string failure;
};

template <class F>
void resolve(void* library, F& slot, const char* name, std::string& missing) {
  if (void* p = dlsym(library, name)) {
    slot = reinterpret_cast<F>(p);
  } else {
    missing += (missing.empty() ? "" : ", ") + std::string(name);
  }
}

const Loaded& loaded() {
  static const Loaded* state = [] {
    auto* s = new Loaded();  // never freed: MPI may be finalized at exit after static destructors
    // TESSERA_MPI_LIBRARY names another build of the same ABI.
    std::string name = "libmpi.so.40";
    if (const char* v = std::getenv("TESSERA_MPI_LIBRARY"); v && *v) name = v;
    // RTLD_GLOBAL: Open MPI loads its own components with dlopen, and they
    // resolve libmpi's symbols through the global scope.
    void* library = dlopen(name.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (library == nullptr) {
      const char* e = dlerror();
      s->failure = name + " could not be loaded (" + (e ? e : "unknown reason") +
                   "); install Open MPI (apt-get install openmpi-bin libopenmpi-dev)";
      return s;
    }
    s->opened = name;
    Api& a = s->api;
    std::string missing;
    resolve(library, a.Init_thread, "MPI_Init_thread", missing);
    resolve(library, a.Initialized, "MPI_Initialized", missing);
    resolve(library, a.Finalized, "MPI_Finalized", missing);
    resolve(library, a.Finalize, "MPI_Finalize", missing);
    resolve(library, a.Comm_rank, "MPI_Comm_rank", missing);
    resolve(library, a.Comm_size, "MPI_Comm_size", missing);
    resolve(library, a.Comm_set_errhandler, "MPI_Comm_set_errhandler", missing);
    resolve(library, a.Comm_dup, "MPI_Comm_dup", missing);
    resolve(library, a.Isend, "MPI_Isend", missing);
    resolve(library, a.Test, "MPI_Test", missing);
    resolve(library, a.Iprobe, "MPI_Iprobe", missing);
    resolve(library, a.Get_count, "MPI_Get_count", missing);
    resolve(library, a.Recv, "MPI_Recv", missing);
    resolve(library, a.Get_library_version, "MPI_Get_library_version", missing);
    resolve(library, a.Get_version, "MPI_Get_version", missing);
    resolve(library, a.Error_string, "MPI_Error_string", missing);
    resolve(library, a.comm_world, "ompi_mpi_comm_world", missing);
    resolve(library, a.byte, "ompi_mpi_byte", missing);
    resolve(library, a.errors_return, "ompi_mpi_errors_return", missing);
    std::string optional;
    resolve(library, a.Query_cuda_support, "MPIX_Query_cuda_support", optional);
    if (!missing.empty()) {
      s->failure = name + " is not Open MPI's ABI (it lacks " + missing + ")";
    }
    return s;
  }();
  return *state;
}

}  // namespace

const Api* load(std::string& opened, std::string& why) {
  const Loaded& s = loaded();
  opened = s.opened;
  why = s.failure;
  return s.failure.empty() ? &s.api : nullptr;
}

const Api& api() {
  const Loaded& s = loaded();
  if (!s.failure.empty()) raise(ErrorCode::DeviceUnavailable, "MPI is unavailable: " + s.failure);
  return s.api;
}

std::string error_text(int code) {
  const Loaded& s = loaded();
  if (s.api.Error_string) {
    char text[512];
    int length = 0;
    if (s.api.Error_string(code, text, &length) == kSuccess) return std::string(text, static_cast<std::size_t>(length));
  }
  return "MPI error " + std::to_string(code);
}

}  // namespace tessera::dist::mpi

namespace tessera::dist {

MpiProbe probe_mpi() {
  MpiProbe p;
  p.launched = launched_by_mpirun();
  p.process_rank = process_rank();
  p.process_count = process_count();
  std::string why;
  const mpi::Api* a = mpi::load(p.library, why);
  if (a == nullptr) {
    p.reason = why;
    return p;
  }
  p.available = true;
  // Both may be called before MPI_Init.
  int major = 0, minor = 0;
  if (a->Get_version(&major, &minor) == mpi::kSuccess) p.standard = std::to_string(major) + "." + std::to_string(minor);
  char text[mpi::kMaxLibraryVersionString + 1] = {};
  int length = 0;
  if (a->Get_library_version(text, &length) == mpi::kSuccess) {
    p.version.assign(text, static_cast<std::size_t>(length));
    while (!p.version.empty() && (p.version.back() == '\n' || p.version.back() == '\0')) p.version.pop_back();
    if (const auto cut = p.version.find(','); cut != std::string::npos) p.version.resize(cut);  // the name and version
  }
  if (a->Query_cuda_support == nullptr) {
    p.cuda_aware = "no (the library has no MPIX_Query_cuda_support)";
  } else {
    p.cuda_aware = a->Query_cuda_support() ? "yes (MPIX_Query_cuda_support)" : "no (MPIX_Query_cuda_support says 0)";
  }
  return p;
}

std::string mpi_info_lines() {
  const MpiProbe p = probe_mpi();
  std::string out;
  if (!p.available) {
    out = "  mpi:         unavailable: " + p.reason + "\n";
  } else {
    out = "  mpi:         available (" + p.version + ", MPI " + p.standard + ", " + p.library + "); CUDA-aware: " +
          p.cuda_aware + "; device buffers are staged through host memory\n";
  }
  out += "  processes:   ";
  out += p.launched ? "process " + std::to_string(p.process_rank) + " of " + std::to_string(p.process_count) +
                          " (mpirun); collectives across processes: mpi"
                    : std::string("1 (not under mpirun; `mpirun -np 4 python prog.py` spreads a mesh over 4)");
  return out + "\n";
}

}  // namespace tessera::dist
