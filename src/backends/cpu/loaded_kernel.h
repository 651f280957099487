// A generated kernel's shared object, loaded (internal to the CPU backend).
#pragma once

#include <cstdint>
#include <string>

#include "backends/cpu/runtime/abi.h"

namespace tessera::cpu::detail {

using RunGroupsFn = int (*)(const tessera_cpu::LaunchArgs*, std::int64_t, std::int64_t, tessera_cpu::Fault*);

struct LoadedKernel {
  void* handle = nullptr;
  RunGroupsFn run_groups = nullptr;
  std::string path;
  std::int64_t shared_bytes = 0;

  LoadedKernel() = default;
  LoadedKernel(const LoadedKernel&) = delete;
  LoadedKernel& operator=(const LoadedKernel&) = delete;
  ~LoadedKernel();
};

}  // namespace tessera::cpu::detail
