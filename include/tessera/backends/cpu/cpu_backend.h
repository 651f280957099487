// The CPU backend: Tile IR kernels compiled to host code and run on a thread pool.
//
// compile_kernel() turns one Tile IR kernel function (docs/design/0003-tile-ir.md)
// into a C++ translation unit written against the host tile header library,
// compiles it with the host C++ compiler into a shared object, caches that
// object on disk (TESSERA_CACHE_DIR, default ~/.cache/tessera) and loads it.
// launch() binds arguments (buffers and scalars; shape symbols from buffer
// shapes), checks them against the kernel's signature and runs `grid` groups,
// in parallel across groups and deterministically: results do not depend on
// the number of threads. Faults inside the kernel (an element index out of
// bounds, an integer division by zero) are raised in the caller as tessera
// errors naming the kernel, the parameter, the index and the extent.
//
// See docs/guide/cpu_backend.md for the execution model and the cache layout.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "tessera/ir/ir.h"
#include "tessera/runtime/tensor.h"

namespace tessera::cpu {

struct CompileOptions {
  // Shape symbols fixed at compile time (k.jit(M=4096)); the generated code
  // uses them as constants and launch() checks the arguments agree.
  std::map<std::string, std::int64_t> specialize;
  // Cache root; empty = $TESSERA_CACHE_DIR, else ~/.cache/tessera.
  std::string cache_dir;
  // Host compiler; empty = $TESSERA_CXX, else c++, g++, clang++ on PATH.
  std::string cxx;
  // Extra host compiler flags (part of the cache key).
  std::vector<std::string> extra_flags;
  // false: always compile (the result still replaces the cache entry).
  bool use_cache = true;
  // Every buffer argument has unit innermost stride (compiled Graph IR
  // passes contiguous tensors): element offsets are then affine with unit
  // step, which lets lane loops vectorize. The kernel checks it at launch.
  bool contiguous_buffers = false;
};

// One kernel parameter as the launcher binds it.
struct KernelParam {
  std::string name;
  ir::Type type;  // gmem<...> buffer or lane<...> scalar
  bool is_buffer = false;
  bool is_mut = false;
};

namespace detail {
struct LoadedKernel;
}

struct CompiledKernel {
  std::string name;
  std::string source;            // the generated C++ (inspect_ir("target"))
  std::string cache_key;         // hex digest of source, flags and compiler version
  std::string library_path;      // the shared object that was loaded
  bool cache_hit = false;        // loaded from the disk cache without compiling
  double compile_seconds = 0.0;  // wall time of compile_kernel (emission + compile or load)
  std::string compiler;          // the host compiler's path and --version line

  std::vector<KernelParam> params;
  std::vector<std::string> symbols;  // shape symbols the kernel reads, in ABI order
  std::map<std::string, std::int64_t> specialized;
  std::vector<std::int64_t> group_shape;  // empty: one tile per group
  std::int64_t group_size = 1;

  std::shared_ptr<const detail::LoadedKernel> handle;
};

// A launch argument: a tensor (for a gmem parameter) or a scalar.
struct KernelArg {
  std::variant<Tensor, double, std::int64_t, bool> value;
  KernelArg(Tensor t) : value(std::move(t)) {}                     // NOLINT(google-explicit-constructor)
  KernelArg(double v) : value(v) {}                                // NOLINT(google-explicit-constructor)
  KernelArg(float v) : value(static_cast<double>(v)) {}            // NOLINT(google-explicit-constructor)
  KernelArg(int v) : value(static_cast<std::int64_t>(v)) {}        // NOLINT(google-explicit-constructor)
  KernelArg(long v) : value(static_cast<std::int64_t>(v)) {}       // NOLINT(google-explicit-constructor)
  KernelArg(long long v) : value(static_cast<std::int64_t>(v)) {}  // NOLINT(google-explicit-constructor)
  KernelArg(bool v) : value(v) {}                                  // NOLINT(google-explicit-constructor)
};

struct LaunchOptions {
  // Threads running groups; 0 = $TESSERA_NUM_THREADS, else every hardware
  // thread (at most the calling thread's ScopedThreadLimit).
  int num_threads = 0;
};

// While alive, launches from this thread that leave num_threads at 0 use at
// most `threads` threads: the workers of an index launch share the machine
// instead of each taking all of it. Results do not depend on thread counts.
class ScopedThreadLimit {
 public:
  explicit ScopedThreadLimit(int threads);
  ~ScopedThreadLimit();
  ScopedThreadLimit(const ScopedThreadLimit&) = delete;
  ScopedThreadLimit& operator=(const ScopedThreadLimit&) = delete;

 private:
  int previous_;
};

// Compiles (or loads from the cache) one kernel function. Raises
// CompileError when the kernel uses something the backend cannot emit (the
// message names the op) or when the host compiler fails or is missing.
CompiledKernel compile_kernel(const ir::Operation& kernel_func, const CompileOptions& options = {});
// Compiles several kernels in one host-compiler invocation (one translation
// unit, one shared object, one cache entry); results are in order.
// compile_seconds is the whole unit's time.
std::vector<CompiledKernel> compile_kernels(std::span<const ir::Operation* const> kernel_funcs,
                                            const CompileOptions& options = {});

// Runs `grid` groups (-1: the default extent, one tile per element of the
// first mut parameter, allowed only for kernels without a group shape).
void launch(const CompiledKernel& kernel, std::int64_t grid, std::vector<KernelArg> args,
            const LaunchOptions& options = {});

// A launch bound but not run: its parameters (buffer addresses, extents,
// scalars), symbol values and grid. A run plan (docs/design/0048) runs it
// again on new buffers with only their addresses rewritten. nullptr for an
// empty grid, or a kernel with packed sub-byte buffers (those are unpacked
// around each launch).
struct PreparedLaunch;
std::shared_ptr<const PreparedLaunch> prepare_launch(const CompiledKernel& kernel, std::int64_t grid,
                                                     const std::vector<KernelArg>& args);
// Runs `prepared` (of `kernel`) with buffer parameter i at addresses[i]
// where that is not null (one entry per parameter).
void launch_prepared(const CompiledKernel& kernel, const PreparedLaunch& prepared, std::span<void* const> addresses,
                     const LaunchOptions& options = {});

// Builds the host tile headers' precompiled form (g++ only) in the cache
// of `options`, unless the prebuilt directory or the cache has it already,
// and returns its include directory; empty where none is used (clang++,
// TESSERA_CPU_PCH=0). Compiles call it themselves; tessera-prebuild calls it
// so that an installed package carries one (docs/guide/cpu_backend.md).
std::string precompile_headers(const CompileOptions& options = {});

// The generated C++ for a kernel without compiling it (inspect_ir("target")).
std::string emit_kernel_source(const ir::Operation& kernel_func, const CompileOptions& options = {});

}  // namespace tessera::cpu
