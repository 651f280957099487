// Kernels as user-facing objects: the kernel language front end, the Tile IR
// passes and a backend joined into something that can be specialized,
// inspected, autotuned and launched (`tessera.load("f.tsr").scale(x, y, 2.0)`).
//
// A Kernel holds one parsed kernel (frontend::KernelDecl) plus the
// compile-time constants fixed so far (`k.jit(M=4096)` returns a new Kernel
// sharing the same caches with M fixed). specialize() lowers the kernel for
// a complete set of constants, runs tile-verify-sync, tile-pipeline and
// tile-plan-shared, and compiles it for the CPU on first launch; each
// specialization is cached in the kernel, each compiled object on disk by
// the backend.
//
// Autotuning: a kernel with an autotune space whose names are not all fixed
// is tuned at launch, once per key (argument shapes and dtypes, fixed
// constants, kernel source, device): every candidate of the remaining space
// is compiled and timed on copies of the mutable arguments (one warm-up run,
// then the median of several), the fastest is kept in memory and written to
// <cache>/autotune/<hash>.txt so later processes skip the search, and only
// the winner runs on the caller's arguments. Arguments on cuda:N are tuned
// with the CUDA backend (candidates timed with CUDA events), host arguments
// with the CPU backend; the device is part of the key, so the two never share
// a choice. docs/guide/kernel_language.md ("Running kernels") describes the
// user-facing behaviour.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "tessera/backends/cpu/cpu_backend.h"
#include "tessera/frontend/kernel_language.h"
#include "tessera/ir/ir.h"
#include "tessera/support/error.h"

namespace tessera {

namespace detail {
struct KernelState;
}
namespace cuda {
struct CompiledKernel;
struct DeviceProperties;
}  // namespace cuda
namespace cuda_tile {
struct CompiledKernel;
}

using KernelConstants = frontend::Constants;

// What the autotuner reports while it searches (one event per step).
struct AutotuneEvent {
  enum class Kind : std::uint8_t {
    start,     // the search begins: `total` candidates
    measured,  // candidate `index` ran: `median_seconds`, `compile_seconds`
    failed,    // candidate `index` could not compile or run: `message`
    chosen,    // the search ended: `constants` won
    cached,    // no search: `constants` came from the in-memory or disk cache
  };
  Kind kind = Kind::start;
  std::string kernel;
  int index = 0;  // 1-based candidate number
  int total = 0;
  KernelConstants constants;  // the candidate (or the winner)
  double median_seconds = 0.0;
  double compile_seconds = 0.0;
  std::string message;

  // One line for humans: "autotune gemm_tile [3/8] BM=32 BN=64 BK=32: 1.234 ms (compiled in 0.8 s)".
  std::string describe() const;
};
using AutotuneCallback = std::function<void(const AutotuneEvent&)>;

// Reports to standard error unless TESSERA_LOG=quiet (the default callback).
void print_autotune_event(const AutotuneEvent& event);

// The number of groups to launch: a count, -1 for the default extent (one
// tile per element of the first mut parameter; kernels without a group shape
// only), or a function of the specialization's constants, for grids that
// depend on tuned tile sizes (ceil(M / BM) * ceil(N / BN)).
using GridFunction = std::function<std::int64_t(const KernelConstants&)>;
using Grid = std::variant<std::int64_t, GridFunction>;

struct KernelLaunchOptions {
  cpu::LaunchOptions cpu;
  // inspect_ir only: the backend whose code "target" shows ("cpu", "cuda",
  // "cuda:N" or "cuda_tile"); empty = the device the last launch ran on (the
  // CPU when none).
  std::string target;
  // Which NVIDIA target launches on cuda:N tensors use: "cuda" (CUDA C++
  // through NVRTC to PTX, the default) or "cuda_tile" (CUDA Tile IR through
  // tileiras, docs/design/0014-cuda-tile-target.md). A kernel the chosen
  // target cannot express is a CompileError, never run on the other one.
  // Launches on host tensors run on the CPU backend either way. Empty: the
  // kernel's declared target (@kernel(target=...)), else "cuda".
  std::string nvidia_target;
  // inspect_ir("ptx") only: the architecture ("sm_90a", "sm_80"); empty = the
  // device's own, or sm_90a where there is no GPU (NVRTC needs none).
  std::string arch;
  // Autotune progress; empty = print_autotune_event.
  AutotuneCallback progress;
  // Compile cache root (also holds autotune results); empty = the backend's default.
  std::string cache_dir;
  // Timed runs per autotune candidate after one warm-up (the median is kept).
  int autotune_runs = 5;
};

// One kernel lowered for a complete set of constants, after the Tile IR
// passes; compiled for the CPU on first use.
class KernelSpecialization {
 public:
  // `tile_target_func` (in `tile_target_module`) is the same kernel before
  // tile-pipeline: the CUDA Tile IR target pipelines loops itself (a
  // tile.range(prefetch=N) loop gives its loads a latency hint instead).
  KernelSpecialization(ir::Module module, ir::Operation* func, ir::Module tile_target_module,
                       ir::Operation* tile_target_func, KernelConstants constants);

  const KernelConstants& constants() const { return constants_; }
  const ir::Operation& func() const { return *func_; }
  // What the CUDA Tile IR target lowers (not software-pipelined).
  const ir::Operation& tile_target_func() const { return *tile_target_func_; }
  // The printed Tile IR (inspect_ir("tile")).
  std::string tile_ir() const;
  // The generated C++ (inspect_ir("target")): the compiled source when
  // compiled, else emitted without compiling.
  std::string target_source(const std::string& cache_dir = {}) const;
  // Compiles (or loads from the disk cache) on first call; later calls return the same object.
  const cpu::CompiledKernel& compiled(const std::string& cache_dir = {});
  bool is_compiled() const;
  // The CUDA kernel for cuda:`device`, compiled (or loaded from the cache) on
  // first call; later calls return the same object.
  const cuda::CompiledKernel& cuda_compiled(int device, const std::string& cache_dir = {});
  // The CUDA C++ for cuda:`device` (inspect_ir("target", target="cuda")): the
  // compiled source when compiled for that device, else emitted without
  // compiling for `arch` (empty: the device's own architecture, or sm_90a
  // where there is no GPU; the emitter picks tensor-core paths by it).
  std::string cuda_source(int device = 0, const std::string& arch = {}) const;
  // The kernel through the CUDA Tile IR target for cuda:`device`, compiled by
  // tileiras (or loaded from the cache) on first call.
  const cuda_tile::CompiledKernel& cuda_tile_compiled(int device, const std::string& cache_dir = {});
  // Its CUDA Tile IR text form (inspect_ir("target") for that target; needs
  // neither a GPU nor tileiras). CompileError when the target cannot express it.
  std::string cuda_tile_text() const;

 private:
  ir::Module module_;
  ir::Operation* func_;
  ir::Module tile_target_module_;
  ir::Operation* tile_target_func_;
  KernelConstants constants_;
  mutable std::mutex mutex_;
  std::shared_ptr<const cpu::CompiledKernel> compiled_;
  std::map<int, std::shared_ptr<const cuda::CompiledKernel>> cuda_compiled_;  // by device ordinal
  std::map<int, std::shared_ptr<const cuda_tile::CompiledKernel>> cuda_tile_compiled_;  // by device ordinal
};

class Kernel {
 public:
  // `source` is the text `decl` was parsed from (part of the autotune key);
  // `column_offset` shifts the columns of located errors raised later (the
  // indentation Python removed before parsing a nested function).
  Kernel(frontend::KernelDecl decl, std::string source, int column_offset = 0);

  const std::string& name() const;
  const frontend::KernelDecl& decl() const;
  // The text the kernel was parsed from, and its sha256 (hex).
  const std::string& source() const;
  const std::string& source_hash() const;
  // The constants fixed by jit() so far.
  const KernelConstants& constants() const { return constants_; }
  // Autotune names not fixed by constants(): searched at launch.
  std::vector<std::string> tuned_names() const;
  // A kernel with `more` constants fixed (shape symbols and autotune names),
  // sharing this kernel's caches. Checks the kernel for them (the front end's
  // errors, located in the source) and raises ArgumentError for a name the
  // kernel does not have or one fixed twice to different values.
  Kernel jit(const KernelConstants& more) const;

  // The specialization for constants() plus `extra`, autotune names not given
  // taking their first candidate. Cached.
  std::shared_ptr<KernelSpecialization> specialize(const KernelConstants& extra = {}) const;

  // Compiles what is needed (autotuning first when tuned_names() is not
  // empty) and runs the kernel on `args`: on the CPU backend when the tensor
  // arguments are host tensors, on the CUDA backend when they all live on
  // cuda:N (tensors on different devices are an ArgumentError naming them).
  // The search runs on the backend the launch goes to.
  void launch(const Grid& grid, std::vector<cpu::KernelArg> args, const KernelLaunchOptions& options = {}) const;

  // "tile": the Tile IR after the passes; "target": the generated C++ of the
  // CPU backend, or the CUDA C++ when options.target is "cuda" or the last
  // launch ran on a GPU; "ptx": the PTX NVRTC makes of the CUDA C++ (for
  // options.arch). Shows the specialization launch() last ran for this
  // kernel's constants (the autotune winner), else the default one.
  // "graph"/"schedule" raise ArgumentError (kernels have no such level).
  std::string inspect_ir(std::string_view level, const KernelLaunchOptions& options = {}) const;

  // The constants the autotuner chose for `args` (host or cuda:N tensors),
  // searching if needed without running the winner on the caller's arguments
  // (tests, tools).
  KernelConstants autotune(const Grid& grid, const std::vector<cpu::KernelArg>& args,
                           const KernelLaunchOptions& options = {}) const;

 private:
  Kernel(std::shared_ptr<detail::KernelState> state, KernelConstants constants);
  // The tuned names' values for `args`: from the caches, else searched.
  KernelConstants autotune_choice(const Grid& grid, const std::vector<cpu::KernelArg>& args,
                                  const KernelLaunchOptions& options) const;

  std::shared_ptr<detail::KernelState> state_;
  KernelConstants constants_;
};

// Parses every kernel in `source` (a .tsr file's text, or a Python
// function's source with `dialect` = python). Errors are located in `file`
// from `first_line`; `column_offset` as in Kernel's constructor.
std::vector<Kernel> kernels_from_source(std::string_view source, std::string_view file = "<kernel>", int first_line = 1,
                                        frontend::SourceDialect dialect = frontend::SourceDialect::tsr,
                                        int column_offset = 0);

// Reads a .tsr file and returns its kernels in order of definition. A
// missing or unreadable file is an ArgumentError naming the path.
std::vector<Kernel> load_kernels(const std::string& path);

// The key the autotuner caches results under for these arguments: shapes,
// dtypes and scalar types of `args` plus the device they live on
// (autotune_cpu_device or autotune_cuda_device of cuda:N's properties).
std::string autotune_key(const Kernel& kernel, const std::vector<cpu::KernelArg>& args,
                         const KernelLaunchOptions& options);
// The same key for `args` tuned on `device`, a text from one of the two
// functions below (the arguments' own device is not looked at, so keys for a
// GPU can be formed where there is none).
std::string autotune_key_on(const Kernel& kernel, const std::vector<cpu::KernelArg>& args, const std::string& device);
// The device part of a key for the CPU backend: "cpu:<model> threads=<n>"
// (n from options.cpu.num_threads, else the default thread count).
std::string autotune_cpu_device(const KernelLaunchOptions& options);
// The device part of a key for a GPU: "cuda:<name> <arch> sms=<count>". The
// ordinal is left out (identical GPUs share choices); the multiprocessor
// count keeps partitions of one chip apart.
std::string autotune_cuda_device(const cuda::DeviceProperties& device);

}  // namespace tessera
