// Kernels on GPUs through the CUDA Tile IR target (KernelLaunchOptions::
// nvidia_target == "cuda_tile"): the specialization lowered to CUDA Tile IR,
// assembled by tileiras and launched by the cuda_tile runtime
// (tessera/backends/cuda_tile/runtime.h). kernel.cpp decides when.
#include <memory>
#include <string>
#include <vector>

#include "runtime/kernel_state.h"
#include "tessera/backends/cuda_tile/lower.h"
#include "tessera/backends/cuda_tile/runtime.h"
#include "tessera/support/error.h"

namespace tessera {

const cuda_tile::CompiledKernel& KernelSpecialization::cuda_tile_compiled(int device, const std::string& cache_dir) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& slot = cuda_tile_compiled_[device];
  if (!slot) {
    cuda_tile::CompileOptions options;
    options.device = device;
    options.cache_dir = cache_dir;
    slot = std::make_shared<const cuda_tile::CompiledKernel>(cuda_tile::compile_kernel(*tile_target_func_, options));
  }
  return *slot;
}

std::string KernelSpecialization::cuda_tile_text() const {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [device, k] : cuda_tile_compiled_) {
      if (k) return k->text;
    }
  }
  return cuda_tile::lower_kernel(*tile_target_func_).text;
}

namespace detail {

void launch_on_cuda_tile(KernelSpecialization& spec, int device, std::int64_t groups, std::vector<cpu::KernelArg> args,
                         const KernelLaunchOptions& options) {
  const cuda_tile::CompiledKernel& compiled = spec.cuda_tile_compiled(device, options.cache_dir);
  cuda_tile::launch(compiled, groups, std::move(args));  // default stream; synchronizes
}

std::string nvidia_target(const Kernel& kernel, const KernelLaunchOptions& options) {
  std::string target = options.nvidia_target.empty() ? kernel.decl().target : options.nvidia_target;
  if (target.empty()) target = "cuda";
  if (target == "cuda" || target == "cuda_tile") return target;
  raise(ErrorCode::ArgumentInvalid, "kernel '" + kernel.name() + "': target is \"cuda\" (CUDA C++ to PTX) or " +
                                        "\"cuda_tile\" (CUDA Tile IR), got '" + target + "'");
}

}  // namespace detail
}  // namespace tessera
