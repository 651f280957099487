// Compiling, caching, loading and launching kernels through the CUDA Tile IR
// target: Tile IR kernel -> lower_kernel (bytecode + text) -> tileiras ->
// cubin (cached on disk and in memory, like the NVRTC path's) -> module ->
// launch.
//
// Disk cache: <root>/cuda_tile/<key>.cubin, a sidecar <key>.cubin.sha256
// (an entry whose cubin does not match it is rebuilt), <key>.tileirbc (the
// bytecode) and <key>.txt (its text form), for inspection. The key is the
// sha256 of the bytecode, the target architecture, tileiras's version and
// Tessera's version: a new tileiras or another GPU never reuses a cubin.
//
// Launch ABI (lower.h): per gmem buffer its base pointer then one int64 per
// dim, per lane scalar its value; tensors must be dense row-major. The kernel
// function must outlive the CompiledKernel: its plain form is compiled from
// it when a launch first needs it. The grid
// is the number of groups (tile blocks, along x) and the block is (1, 1, 1):
// a tile kernel's CTA size is chosen by tileiras, not by the launch.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessera/backends/cpu/cpu_backend.h"
#include "tessera/backends/cuda_tile/lower.h"
#include "tessera/ir/ir.h"
#include "tessera/backends/cuda/cuda_backend.h"
#include "tessera/runtime/cuda.h"

namespace tessera::cuda_tile {

struct CompileOptions {
  int device = 0;
  // The architecture tileiras compiles for ("sm_90"); empty = the device's own.
  std::string arch;
  // Cache root; empty = $TESSERA_CACHE_DIR, else ~/.cache/tessera.
  std::string cache_dir;
  // false: always run tileiras (the result still replaces the cache entry).
  bool use_cache = true;
  // Compile the fast form (lower.h: 16-byte aligned buffers and rows, 32-bit
  // extents); launches whose arguments do not satisfy it use the plain
  // form, compiled on first need.
  bool assume_aligned = true;
};

namespace detail {
struct LoadedKernel;
struct PlainForm;
}

struct CompiledKernel {
  std::string name;
  std::string text;              // the CUDA Tile IR text form (inspect_ir("target"))
  std::string arch;              // "sm_90"
  std::string tileiras_version;  // "13.5.37"
  std::string cache_key;         // hex sha256 of bytecode, arch, tileiras and Tessera versions
  bool cache_hit = false;        // from the memory or disk cache, no tileiras run
  double compile_seconds = 0.0;  // wall time of compile_kernel
  int device = 0;
  // The signature as the CPU backend's binder sees it (params, symbols, group shape).
  cpu::CompiledKernel signature;
  std::shared_ptr<const detail::LoadedKernel> handle;
  // Compiled with assume_aligned; `plain` is the same kernel without the
  // assumptions, for launches whose buffers or rows are not 16-byte aligned
  // or whose extents reach 2^31.
  bool assumes_aligned = false;
  std::shared_ptr<detail::PlainForm> plain;
  // The kernel takes a fault word (lower.h): what each nonzero value means.
  bool fault_param = false;
  std::vector<KernelFault> faults;
  std::int64_t flat_lanes = 0;  // as LoweredKernel's
  std::vector<std::string> symbol_params;
  std::vector<std::int64_t> shared_bytes;
};

// A cubin for one kernel and architecture, from the disk cache or tileiras
// (needs tileiras, no GPU). compile_kernel() loads it.
struct Cubin {
  std::string name;              // the entry, as in the cubin's symbol table
  std::string text;              // the CUDA Tile IR text form
  std::string arch;
  std::string tileiras_version;
  std::string cache_key;
  std::string path;              // <root>/cuda_tile/<key>.cubin
  std::vector<char> bytes;
  bool cache_hit = false;        // read from the disk cache, no tileiras run
  bool fault_param = false;      // as LoweredKernel's
  std::vector<KernelFault> faults;
  std::int64_t flat_lanes = 0;
  std::vector<std::string> symbol_params;
  std::vector<std::int64_t> shared_bytes;
};
Cubin build_cubin(const ir::Operation& kernel_func, const std::string& arch, const std::string& cache_dir = {},
                  bool use_cache = true, bool assume_aligned = false);

// The tileiras architecture name for a device: "sm_" + major + minor (tileiras
// takes no "a" variants).
std::string device_arch(int device);

// Lowers, compiles (or loads from the caches) and loads one kernel. Raises
// CompileError when the kernel uses something the target cannot express
// (naming the op and its line), when tileiras is absent or does not target
// the architecture, or when tileiras fails (with its output).
CompiledKernel compile_kernel(const ir::Operation& kernel_func, const CompileOptions& options = {});

struct LaunchOptions {
  const cuda::Stream* stream = nullptr;  // nullptr: the device's default stream
  bool synchronize = true;               // wait for the kernel (and raise its errors) before returning
  // A zeroed device int32 the kernel writes its fault into, for the caller to
  // read later (describe_fault); 0: launch() uses its own. Either is read and
  // raised when the launch synchronizes. The PTX path's fault records are
  // large enough to hold one.
  cuda::DevicePtr fault_record = 0;
};

// launch() without issuing it, for a CUDA graph node (KernelGraph): needs
// synchronize = false and, for a kernel with a fault word, a fault_record. A
// kernel with shared buffers is an ArgumentError (their per-launch copies
// cannot live in a graph yet). nullopt for an empty grid.
std::optional<cuda::PreparedLaunch> prepare_launch(const CompiledKernel& kernel, std::int64_t grid,
                                                   std::vector<cpu::KernelArg> args, const LaunchOptions& options);

// A fault word read back to the host: nullopt when it holds none, else the
// error to raise (naming the kernel, the op and the user's line).
std::optional<KernelFault> describe_fault(const CompiledKernel& kernel, const void* host_record);

// Runs `grid` groups of `kernel` (-1: the default extent, kernels without a
// group shape only). Buffer arguments must live on the kernel's device and be
// dense row-major.
void launch(const CompiledKernel& kernel, std::int64_t grid, std::vector<cpu::KernelArg> args,
            const LaunchOptions& options = {});

}  // namespace tessera::cuda_tile
