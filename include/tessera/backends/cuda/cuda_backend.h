// The CUDA backend: Tile IR kernels compiled to CUDA C++, built by NVRTC for
// the device's exact architecture (sm_90a on Hopper) and run on the GPU.
//
// compile_kernel() turns one Tile IR kernel function (docs/design/0003-tile-ir.md)
// into a CUDA C++ translation unit written against the device tile header
// library (src/backends/cuda/device/tile*.cuh, embedded in libtessera),
// compiles it with NVRTC, caches the cubin on disk (TESSERA_CACHE_DIR,
// default ~/.cache/tessera, under cuda/) and in memory, and loads it.
// launch() binds arguments exactly as the CPU backend does (device tensors on
// the kernel's device instead of host tensors) and runs `grid` groups: one
// thread block per group, one thread per tile. Faults inside the kernel (an
// element index out of bounds, an integer division by zero) are raised in the
// caller as tessera errors naming the kernel, the parameter, the index and
// the extent, when LaunchOptions::check_faults is set (the default).
//
// See docs/guide/cuda_backend.md for the mapping and the numerics.
#pragma once

#include <cstdint>
#include <future>
#include <map>
#include <optional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tessera/backends/cpu/cpu_backend.h"
#include "tessera/ir/ir.h"
#include "tessera/runtime/cuda.h"
#include "tessera/support/error.h"

namespace tessera::cuda {

// Launch arguments are the CPU backend's: a Tensor (here on cuda:N) or a scalar.
using KernelArg = cpu::KernelArg;
using KernelParam = cpu::KernelParam;

// A tensor map a kernel's TMA copies read (Params::tma[i]): boxes of
// `box_rows` x `box_cols` elements of `elem_bytes` bytes from buffer
// parameter `param`, with 128-byte swizzling. launch() encodes it from the
// argument; when it cannot (unaligned data, strides), the launch runs the
// kernel's cp.async form (CompiledKernel::cp_async_form) instead.
struct TmaMapSpec {
  int param = 0;
  std::int64_t box_rows = 0;
  std::int64_t box_cols = 0;
  std::int64_t elem_bytes = 0;
  bool operator==(const TmaMapSpec&) const = default;
};
inline constexpr std::size_t kMaxTmaMaps = 4;
// The alignment of every buffer a kernel with aligned vector accesses reads
// or writes (CompiledKernel::aligned_buffers): the widest word it moves.
inline constexpr std::uintptr_t kVectorAlignment = 16;

struct KernelCompileOptions {
  // Shape symbols fixed at compile time (k.jit(M=4096)).
  std::map<std::string, std::int64_t> specialize;
  // Cache root; empty = $TESSERA_CACHE_DIR, else ~/.cache/tessera.
  std::string cache_dir;
  // Target architecture ("sm_90a", "sm_80"); empty = the device's own.
  std::string arch;
  int device = 0;
  // false: always compile (the result still replaces the cache entry).
  bool use_cache = true;
  // Also keep the PTX (CompiledKernel::ptx), for inspect_ir("target", ptx=True).
  bool ptx = false;
  // Threads per block for kernels without a group shape and without
  // group-cooperative ops (each thread is one tile of the launch).
  int flat_block = 256;
  // true: copies never use the bulk tensor copy engine (TMA), only cp.async.
  bool no_tma = false;
  // true: every buffer argument has innermost stride 1 (an executable makes
  // its operands contiguous before each launch). The kernel takes that
  // stride as the constant 1, so an access's offset in the innermost index
  // folds into the load or store; launch() checks the arguments. Vector
  // accesses proven in bounds (tile.load_vector / store_vector `in_bounds`)
  // then also take the buffers as 16-byte aligned (an executable copies a
  // misaligned view first) and move their words unchecked.
  bool contiguous_buffers = false;
};

namespace detail {
struct LoadedKernel;
}

struct CompiledKernel {
  std::string name;
  std::string source;            // the generated CUDA C++ (inspect_ir("target"))
  std::string ptx;               // when KernelCompileOptions::ptx
  std::string arch;              // "sm_90a"
  std::string cache_key;         // hex digest of source, arch, NVRTC version and headers
  bool cache_hit = false;        // from the memory or disk cache, no NVRTC run
  double compile_seconds = 0.0;  // wall time of compile_kernel
  int device = 0;

  // The signature as the CPU backend's binder sees it (params, symbols, ...).
  cpu::CompiledKernel signature;
  int block_threads = 1;                  // threads per block
  bool flat = false;                      // tiles spread over threads across the whole launch (no group shape)
  int tiles_per_thread = 1;               // flat: tiles each thread runs (consecutive threads, consecutive tiles)
  bool contiguous_buffers = false;        // compiled for innermost stride 1 (KernelCompileOptions)
  bool aligned_buffers = false;           // its vector accesses take every buffer as 16-byte aligned
  std::int64_t shared_bytes = 0;          // dynamic shared memory per block
  std::vector<std::string> shared_names;  // "shared#0", ... for fault messages
  std::vector<TmaMapSpec> tma_maps;       // tensor maps launch() encodes (TMA copies)
  // With tma_maps: the same kernel copying through cp.async, which launch()
  // runs when a tensor map cannot describe the arguments. It compiles in the
  // background once no compile that a caller waits for runs.
  std::shared_future<std::shared_ptr<const CompiledKernel>> cp_async_form;
  // The cp.async form, waiting for its compile (nullptr without tma_maps);
  // raises its CompileError.
  const CompiledKernel* cp_async() const;

  std::shared_ptr<const detail::LoadedKernel> handle;
};

struct KernelLaunchOptions {
  const Stream* stream = nullptr;  // nullptr: the device's default stream
  // Synchronize after the launch and raise the first fault the kernel
  // recorded. false: no synchronization; faulting accesses are still
  // skipped, and recorded in `fault_record` when one is given.
  bool check_faults = true;
  // With check_faults false: a zeroed device buffer of kFaultRecordBytes the
  // kernel writes its first fault into, for the caller to read later
  // (describe_fault) without synchronizing now. 0: no record.
  DevicePtr fault_record = 0;
};

// The size of one kernel fault record.
inline constexpr std::size_t kFaultRecordBytes = 40;

// A fault record read back to the host: nullopt when it holds no fault, else
// the error launch() raises for it (code and message naming the kernel, the
// access and the extent).
struct KernelFault {
  ErrorCode code;
  std::string message;
};
std::optional<KernelFault> describe_fault(const CompiledKernel& kernel, const void* host_record);

// Emits and compiles (or loads from the cache) one kernel function. Raises
// CompileError when the kernel uses something this backend cannot emit (the
// message names the op) or NVRTC fails (with its log).
CompiledKernel compile_kernel(const ir::Operation& kernel_func, const KernelCompileOptions& options = {});

// Runs `grid` groups (-1: one tile per element of the first mut parameter,
// kernels without a group shape only). Buffer arguments must live on the
// kernel's device.
void launch(const CompiledKernel& kernel, std::int64_t grid, std::vector<KernelArg> args,
            const KernelLaunchOptions& options = {});

// A launch prepared but not issued: the kernel, its configuration and its
// one by-value parameter block (buffer addresses, extents, scalars). A
// KernelGraph node runs exactly what launch() would have run.
struct PreparedLaunch {
  const Function* function = nullptr;
  LaunchConfig config;
  std::vector<unsigned char> params;
  // Empty: `params` is the kernel's one by-value parameter block (the
  // generated CUDA kernels). Else the kernel takes one parameter per entry,
  // each at this offset of `params` (the cuda_tile target's kernels).
  std::vector<std::size_t> offsets;
};

// Where buffer parameter `param`'s address sits in the parameter block of a
// generated kernel's PreparedLaunch (tsr::Params): a recorded launch runs
// on new buffers by rewriting these 8 bytes (a run plan, docs/design/0048).
std::size_t param_address_offset(std::size_t param);

// launch() without issuing it, for options.check_faults == false (a
// prepared launch cannot wait for its own fault record). nullopt for an
// empty grid.
std::optional<PreparedLaunch> prepare_launch(const CompiledKernel& kernel, std::int64_t grid,
                                             std::vector<KernelArg> args, const KernelLaunchOptions& options);

// Encodes kernel k's tensor maps again in `block`, a copy of p's parameter
// block (p a prepared launch of k) whose buffer addresses were rewritten,
// from the buffers it now names. True with nothing to do when p runs a form
// without maps. False when a map cannot describe its new buffer (a
// misaligned address): such a launch must be prepared anew (prepare_launch
// then picks the cp.async form).
bool refresh_tensor_maps(const CompiledKernel& k, const PreparedLaunch& p, std::span<unsigned char> block);

// A CUDA graph built node by node from prepared launches, each node after
// the one added before it (not by stream capture), so that a node's
// parameters can be replaced before a replay: a captured executable runs on
// new input and output buffers by updating addresses, not by copying data.
// A device-to-device copy of `rows` rows of `row_bytes` bytes, rows
// `src_pitch` and `dst_pitch` bytes apart (a graph's memcpy node).
struct DeviceCopy {
  DevicePtr dst = 0;
  std::size_t dst_pitch = 0;
  DevicePtr src = 0;
  std::size_t src_pitch = 0;
  std::size_t row_bytes = 0;
  std::size_t rows = 1;
};

class KernelGraph {
 public:
  explicit KernelGraph(int device);
  void add(const PreparedLaunch& launch);
  // A copy node; set_copy() moves its addresses between replays.
  void add_copy(const DeviceCopy& copy);
  // A node running `work` (a child graph, cloned: its addresses are fixed;
  // the KernelGraph keeps what it holds alive, and registers its watches
  // each time launch() runs it).
  void add_work(const CapturedWork& work);
  // Instantiates the graph; nodes are fixed from then on.
  void instantiate();
  // Node `node`'s parameters for the next replay (the same kernel and launch
  // shape as when it was added).
  void set(std::size_t node, const PreparedLaunch& launch);
  // Copy node `node`'s addresses for the next replay (the same extents).
  void set_copy(std::size_t node, const DeviceCopy& copy);
  // nullptr: the device's default stream. Raises (CollectiveError) when
  // stale() is not "".
  void launch(const Stream* stream) const;
  // Why captured work in the graph may not run again, or "".
  std::string stale() const;
  std::size_t size() const;
  int device() const;

 private:
  struct Handle;
  std::shared_ptr<Handle> handle_;
};

// The CUDA C++ for a kernel without compiling it (needs no GPU).
std::string emit_kernel_source(const ir::Operation& kernel_func, const KernelCompileOptions& options = {});

}  // namespace tessera::cuda
