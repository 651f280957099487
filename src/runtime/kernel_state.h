// The state a Kernel and the kernels jit() derives from it share
// (kernel.cpp, autotune.cpp): the declaration, its source, and the caches of
// specializations and autotune results.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

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

// Raises ArgumentError when `kernel` still has autotune names with more than
// one candidate (autotuning on CUDA is not done yet); single candidates are
// taken by specialize().
void check_untuned_for_cuda(const Kernel& kernel, int device);

// Compiles (once) and runs `spec` on cuda:`device`, checking faults.
void launch_on_cuda(KernelSpecialization& spec, int device, std::int64_t groups, std::vector<cpu::KernelArg> args,
                    const KernelLaunchOptions& options);

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
