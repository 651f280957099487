// The state a Kernel and the kernels jit() derives from it share
// (kernel.cpp, autotune.cpp, kernel_cuda.cpp): the declaration, its source,
// and the caches of specializations and autotune results; and the runtime's
// internal hooks between those files.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tessera/runtime/kernel.h"

namespace tessera::detail {

struct KernelState {
  frontend::KernelDecl decl;
  std::string source;
  std::string source_hash;  // sha256 of `source` (hex)
  int column_offset = 0;

  std::mutex mutex;  // guards everything below
  // Specializations by constants_text() of their complete constants.
  std::map<std::string, std::shared_ptr<KernelSpecialization>> specializations;
  // Autotune winners by autotune_key().
  std::map<std::string, KernelConstants> autotune_results;
  // The specialization last launched, by constants_text() of the launching
  // kernel's fixed constants (what inspect_ir shows).
  std::map<std::string, std::shared_ptr<KernelSpecialization>> last_launched;
  // Where that launch ran, by the same key: -1 the CPU, N cuda:N.
  std::map<std::string, int> last_device;
};

// The device the tensor arguments live on: -1 for host tensors (and for no
// tensors at all), N when every tensor is on cuda:N. Tensors on different
// devices raise ArgumentError naming the parameters and devices.
int arguments_device(const Kernel& kernel, const std::vector<cpu::KernelArg>& args);

// How the autotuner runs candidates on one backend. autotune.cpp holds the
// one search loop (order, events, caches, failures) and the CPU runner;
// kernel_cuda.cpp holds the CUDA runner.
class CandidateRunner {
 public:
  virtual ~CandidateRunner() = default;
  // A copy of a mutable argument on the runner's device that candidates may
  // write, filled from `host` (a contiguous host copy of the caller's tensor).
  virtual Tensor scratch_from(const Tensor& host) = 0;
  // Compiles `spec` for the device, or takes it from the caches; raises
  // (CompileError, ...) when it cannot be built there.
  virtual void compile(KernelSpecialization& spec) = 0;
  // One run of the compiled `spec` on `args`, checking faults; the wall
  // seconds it took, waiting for the device included.
  virtual double warm_up(KernelSpecialization& spec, std::int64_t groups, const std::vector<cpu::KernelArg>& args) = 0;
  // `runs` timed runs on `args`; the seconds of each.
  virtual std::vector<double> timed(KernelSpecialization& spec, std::int64_t groups,
                                    const std::vector<cpu::KernelArg>& args, int runs) = 0;
};

// The runner for cuda:`device`: candidates compiled by the CUDA backend and
// timed with events around each launch on a stream of its own.
std::unique_ptr<CandidateRunner> cuda_candidate_runner(int device, const KernelLaunchOptions& options);

// Compiles (once) and runs `spec` on cuda:`device`, checking faults.
void launch_on_cuda(KernelSpecialization& spec, int device, std::int64_t groups, std::vector<cpu::KernelArg> args,
                    const KernelLaunchOptions& options);

// The same through the CUDA Tile IR target (kernel_cuda_tile.cpp).
void launch_on_cuda_tile(KernelSpecialization& spec, int device, std::int64_t groups, std::vector<cpu::KernelArg> args,
                         const KernelLaunchOptions& options);
// The NVIDIA target of a launch: options.nvidia_target, else the kernel's
// declared one, else "cuda"; ArgumentError for anything but "cuda" and "cuda_tile".
std::string nvidia_target(const Kernel& kernel, const KernelLaunchOptions& options);

// -1 for "cpu", N for "cuda" (0) and "cuda:N"; anything else raises ArgumentError.
int parse_target(const Kernel& kernel, const std::string& target);

// The PTX of `spec`'s CUDA C++ for `arch` (empty: cuda:`device`'s own
// architecture, else sm_90a when there is no GPU).
std::string cuda_ptx(const KernelSpecialization& spec, const std::string& kernel, int device, const std::string& arch);

// "BM=64 BN=32" (names in order).
std::string constants_text(const KernelConstants& constants);

// The number of groups `grid` asks for with `spec`'s constants.
std::int64_t resolve_grid(const Grid& grid, const KernelSpecialization& spec, const std::string& kernel);

// Re-raises `error` with its column moved right by `column_offset` when it
// points into `file` (the indentation Python removed before parsing).
// Call only from inside the handler that caught `error`.
[[noreturn]] void rethrow_located(const Error& error, const std::string& file, int column_offset);

}  // namespace tessera::detail
