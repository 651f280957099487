// `tessera info`: version, build options, backends found, compile cache.
#include "tessera/runtime/system_info.h"

#include <cstdlib>
#include <sstream>
#include <thread>

#include "tessera/backends/cuda_tile/toolchain.h"
#include "tessera/dist/mesh.h"
#include "tessera/dist/mpi.h"
#include "tessera/dist/nccl.h"
#include "tessera/support/error.h"

#include "tessera/version.h"

namespace tessera {

std::string version() {
  return TESSERA_VERSION_STRING;
}

std::string build_description() {
  std::ostringstream out;
#if defined(__clang__)
  out << "clang " << __clang_major__ << "." << __clang_minor__;
#elif defined(__GNUC__)
  out << "g++ " << __GNUC__ << "." << __GNUC_MINOR__;
#endif
  out << ", C++" << (__cplusplus / 100 % 100) << ", " << TESSERA_BUILD_TYPE;
#if defined(__SANITIZE_ADDRESS__)
  out << ", sanitizers: address+undefined";
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  out << ", sanitizers: address+undefined";
#endif
#endif
  return out.str();
}

std::string compile_cache_dir() {
  if (const char* dir = std::getenv("TESSERA_CACHE_DIR"); dir && *dir) return dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/tessera";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/tessera";
  return "/tmp/tessera-cache";
}

std::string info_report() {
  std::ostringstream out;
  out << "Tessera " << version() << "\n";
  out << "build:         " << build_description() << "\n";
  out << "backends:\n";
  out << "  cpu:         available (" << std::thread::hardware_concurrency() << " hardware threads)\n";
  const CudaProbe cuda = probe_cuda();
  if (cuda.available) {
    out << "  cuda:        available (driver " << cuda.driver_version / 1000 << "." << (cuda.driver_version % 1000) / 10
        << ", " << cuda.devices.size() << " device" << (cuda.devices.size() == 1 ? "" : "s") << ")\n";
    for (const CudaDeviceInfo& device : cuda.devices) {
      out << "    cuda:" << device.ordinal << "      " << device.name << ", sm_" << device.compute_major
          << device.compute_minor << ", " << device.total_memory_bytes / (1024ull * 1024 * 1024) << " GiB\n";
    }
  } else {
    out << "  cuda:        unavailable: " << cuda.reason << "\n";
  }
  out << "  nvrtc:       " << cuda.nvrtc << "\n";
  // NCCL serves the `nccl` collective backend (GPUs of this process).
  if (dist::nccl_available()) {
    const int v = dist::nccl_version();
    out << "  nccl:        available (" << v / 10000 << "." << (v / 100) % 100 << "." << v % 100 << ", "
        << dist::nccl_library() << ")\n";
  } else {
    out << "  nccl:        unavailable: " << dist::nccl_unavailable_reason() << "\n";
  }
  // tileiras assembles the CUDA Tile IR target's bytecode (docs/design/0014-cuda-tile-target.md).
  {
    const cuda_tile::Toolchain& t = cuda_tile::toolchain();
    if (t.found) {
      std::string archs;
      for (const std::string& a : t.archs) archs += (archs.empty() ? "" : " ") + a;
      out << "  tileiras:    found (" << t.version << ", " << t.tileiras << ", from " << t.source << "; " << archs
          << ")" << (t.reason.empty() ? "" : "; " + t.reason) << "\n";
    } else {
      out << "  tileiras:    not found: " << t.reason << "\n";
    }
  }
  out << "distribution:  collectives: local (in-process)"
      << (cuda.available && dist::nccl_available() ? ", nccl (the GPUs above)" : "") << "; mesh devices cpu:N (virtual)";
  if (const char* v = std::getenv("TESSERA_VIRTUAL_DEVICES"); v && *v) {
    try {
      const std::int64_t n = dist::virtual_cuda_devices();
      out << ", cuda:0..cuda:" << n - 1 << " virtual, backed by the CPU (TESSERA_VIRTUAL_DEVICES=" << v << ")";
    } catch (const Error& e) {
      out << "; TESSERA_VIRTUAL_DEVICES is malformed: " << e.message();
    }
  } else if (cuda.available) {
    out << ", cuda:N (the GPUs above)";
  }
  out << "\n";
  out << dist::mpi_info_lines();  // the mpi backend (processes started by mpirun)
  out << "compile cache: " << compile_cache_dir() << "\n";
  return out.str();
}

}  // namespace tessera
