// What this build of Tessera is and what it found on this machine at run
// time: the data behind `tessera info`.
#pragma once

#include <string>
#include <vector>

namespace tessera {

struct CudaDeviceInfo {
  int ordinal = 0;
  std::string name;
  int compute_major = 0;
  int compute_minor = 0;
  unsigned long long total_memory_bytes = 0;
};

// Result of looking for the CUDA driver (never throws: an absent driver is a
// normal state, reported in `reason`).
struct CudaProbe {
  bool available = false;
  std::string reason;  // why CUDA is unavailable, or "" when available
  int driver_version = 0;
  std::vector<CudaDeviceInfo> devices;
  std::string nvrtc;  // the NVRTC library found, or why none was
};

CudaProbe probe_cuda();

std::string version();
// Build options: compiler, build type, sanitizers.
std::string build_description();
// TESSERA_CACHE_DIR, else $XDG_CACHE_HOME/tessera, else ~/.cache/tessera.
std::string compile_cache_dir();

// The full `tessera info` report.
std::string info_report();

}  // namespace tessera
