// Launch argument binding shared by the CPU and CUDA backends (launcher.cpp):
// checks buffers and scalars against a kernel's signature, binds shape
// symbols (docs/guide/cpu_backend.md, "Launch binding") and resolves the
// default grid. Buffers must live on `device` ("cpu" or "cuda:N"); their
// addresses are device addresses there.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backends/cpu/runtime/abi.h"
#include "tessera/backends/cpu/cpu_backend.h"

namespace tessera::cpu::detail {

struct BoundLaunch {
  std::vector<tessera_cpu::ParamValue> params;  // one per kernel parameter
  std::vector<std::int64_t> symbols;            // values of kernel.symbols, in order
  std::int64_t grid = 0;                        // groups to run (the default extent resolved)
};

// `kernel` needs name, params, symbols, specialized and group_shape only.
// A sub-byte buffer parameter (int4, fp4, fp6) takes a uint8 tensor holding
// one code per byte (the CPU launcher unpacks packed tensors into such).
BoundLaunch bind_launch(const CompiledKernel& kernel, std::int64_t grid, const std::vector<KernelArg>& args,
                        const std::string& device);

}  // namespace tessera::cpu::detail
