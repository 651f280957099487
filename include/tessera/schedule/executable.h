// Compiled executables: a Graph IR function lowered through Schedule IR and
// Tile IR to a backend, with its launch order and buffer plan
// (ARCHITECTURE.md decision 12).
//
//   auto exe = tessera::schedule::compile_executable(module, "mlp");
//   std::vector<Tensor> out = exe->run(args);
//
// compile_executable copies the function (inlining calls), runs the
// Schedule IR pipeline, lowers every "tile" kernel through its family's
// template and compiles it with the CPU backend (cached on disk, keyed by the
// generated source, so a second process loads instead of compiling; the
// templates are shape-generic over symbolic dims, so new sizes reuse the
// same objects). A kernel without a variant ("none") is a CompileError that
// names the op, its family and location: nothing falls back to the
// reference executor.
#pragma once

#include <memory>
#include <span>
#include <map>
#include <string>
#include <vector>

#include "tessera/backends/cpu/cpu_backend.h"
#include "tessera/backends/cuda/cuda_backend.h"
#include "tessera/ir/ir.h"
#include "tessera/runtime/tensor.h"

namespace tessera::schedule {

struct ExecutableOptions {
  // Where the executable runs: "cpu" (the CPU backend, one host compile for
  // every kernel) or "cuda:N" (the CUDA backend: NVRTC, the kernels compiled
  // in parallel; arguments and results live on that device).
  std::string device = "cpu";
  cpu::CompileOptions cpu;  // cache dir, host compiler, flags
  cuda::KernelCompileOptions cuda;  // cache dir, arch (the device's own when empty)
  int num_threads = 0;      // 0: $TESSERA_NUM_THREADS, else every hardware thread
  // The Mapper's kernel variants, by the Graph IR op a kernel is rooted at
  // ("graph.matmul" -> "reference"): "tile" (the generated kernel: C++ on
  // the CPU, PTX through NVRTC on CUDA) or "reference" (the kernel's ops on
  // the reference executor, the oracle: for bisecting a numerical
  // difference). Kernels without code (views, constants, collectives) keep
  // theirs; an override they cannot take is an ArgumentError naming it.
  std::map<std::string, std::string> variants;
};

struct KernelReport {
  std::string name;     // k0, k1, ...
  std::string family;   // elementwise, ...
  std::string variant;  // tile, view, constant
  bool cache_hit = false;
  double compile_seconds = 0.0;  // of the executable's whole unit (one host compile for all kernels)
  std::string object;            // the CPU backend's shared object ("" on CUDA)
};

class Executable {
 public:
  ~Executable();
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;

  // Runs the function. Arguments must have the parameters' policies and
  // shapes (symbols bind as in the reference executor); views are made
  // contiguous first.
  std::vector<Tensor> run(std::span<const Tensor> args) const;
  // run() through a CUDA graph (a CUDA executable only). The first call for
  // given argument shapes builds a graph of the executable's launches and
  // runs it; later calls with the same shapes replace the nodes' buffer
  // addresses (new inputs, fresh outputs and intermediates) and replay it:
  // one graph launch instead of one launch per kernel, and no copies. New
  // shapes build another graph (the executable keeps one per shapes). Steps
  // that read device data on the host (gather and scatter index checks)
  // cannot run inside a graph and raise; a strided view a kernel reads is
  // gathered by a node of the graph.
  std::vector<Tensor> run_graph(std::span<const Tensor> args) const;
  std::size_t graphs() const;  // the graphs run_graph has built
  // Those of them whose replays set their nodes without walking the steps
  // (docs/design/0046).
  std::size_t direct_graphs() const;
  // The run plans run() has recorded (docs/design/0048), and for each argument
  // signature whose runs walk the steps instead, why.
  std::size_t run_plans() const;
  std::vector<std::string> plan_refusals() const;

  std::string schedule_ir() const;  // the Schedule IR function (text form)
  std::string tile_ir() const;      // the Tile IR kernels (text form)
  std::string target() const;       // the generated host (or CUDA) C++ of each kernel
  // The PTX NVRTC makes of each kernel of a CUDA executable (compiled again
  // with the PTX kept; the cubins are cached). An ArgumentError on the CPU.
  std::string ptx() const;
  const std::string& device() const;  // "cpu" or "cuda:N"
  const std::vector<KernelReport>& kernels() const;
  double compile_seconds() const;

  struct State;

 private:
  friend std::shared_ptr<Executable> compile_executable(const ir::Module&, const std::string&,
                                                        const ExecutableOptions&);
  explicit Executable(std::unique_ptr<State> state);
  std::vector<Tensor> run_impl(std::span<const Tensor> args, bool use_graph) const;
  std::unique_ptr<State> state_;
};

std::shared_ptr<Executable> compile_executable(const ir::Module& module, const std::string& function,
                                               const ExecutableOptions& options = {});

// The Schedule IR of `function` (calls inlined, the four Schedule IR passes
// run) without lowering or compiling anything: what inspect_ir("schedule")
// shows. Source locations are kept. `cuda`: for a CUDA executable, whose
// fp32 products of bf16 values first become bf16 tensor-core products
// (split_fp32_products, passes.h).
ir::Module schedule_module(const ir::Module& module, const std::string& function, bool cuda = false);
// The same with the Mapper's kernel variants applied (ExecutableOptions::variants).
ir::Module schedule_module(const ir::Module& module, const std::string& function,
                           const std::map<std::string, std::string>& variants, bool cuda = false);
// The Schedule IR an executable for `device` runs: schedule_module, then on
// a CUDA device the target's knobs (tiles, lanes, runs) and the Mapper's
// default targets, as compile_executable sets them.
ir::Module device_schedule_module(const ir::Module& module, const std::string& function,
                                  const std::map<std::string, std::string>& variants, const std::string& device);

// Which path runs Graph IR programs: "compiled" or "reference", from
// $TESSERA_BACKEND (default "compiled": docs/design/0005-schedule-ir.md).
// Another value is an ArgumentError naming the two.
std::string default_backend();

}  // namespace tessera::schedule
