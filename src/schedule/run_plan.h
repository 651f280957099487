// A plain run's launches replayed without walking the executable's steps
// (docs/design/0048-run-plans.md). The first run of an argument signature
// walks the steps as always and records, for every kernel launch, its grid,
// its scalars and where each tensor it reads or writes lives: in an
// argument, in a buffer the run allocated (with the step that allocates it
// and the launch that reads it last), or in a tensor the executable holds
// (tables, constants). Later runs of the same signature allocate those
// buffers, launch the same kernels on them and drop each buffer after its
// last launch, as the walk would. A generated CUDA kernel's recorded
// parameter block, and a CPU kernel's bound parameters, are launched again
// with only their buffer addresses rewritten. Both backends take the plan;
// the launches, and so the bits, are the walk's.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tessera/backends/cpu/cpu_backend.h"
#include "tessera/backends/cuda/cuda_backend.h"
#include "tessera/runtime/tensor.h"
#include "tessera/support/error.h"

namespace tessera::schedule {

class RunPlan;

// Which arguments are one tensor, part of a plan's signature: entry i is
// the first earlier argument that is the same view of the same storage, -1
// when none shares its storage, -2 when an earlier one shares it as another
// view (such a run is not planned).
std::vector<std::int64_t> argument_aliases(std::span<const Tensor> args);

// Collects a walking run's launches, allocations and copies of views.
// Anything the plan cannot express (a host read of device data, a
// collective, an empty tensor) calls refuse(); runs of that signature then
// keep walking.
class PlanRecorder {
 public:
  // The run's arguments (a view among them is copied before the kernels
  // read it: gathered()), and the tensors the executable holds across runs
  // (tables, constants).
  PlanRecorder(std::span<const Tensor> args, std::vector<Tensor> held);
  void refuse(std::string why);
  bool refused() const { return !refusal_.empty(); }
  const std::string& refusal() const { return refusal_; }
  // A buffer the run allocated (a step's result, a kernel's scratch).
  void allocated(const Tensor& t);
  // A view the run copied into `copy` (contiguous) before a kernel read it:
  // a replay copies the same view of its own buffers.
  void gathered(const Tensor& view, const Tensor& copy);
  // A launch of step `step`. Its kernel: `gpu` when an NVRTC kernel, whose
  // parameter block is rewritten in place (tensor maps included), `host`
  // when a CPU kernel, whose bound parameters are; a CUDA Tile IR kernel's
  // goes through the walk's launcher. `options` are the launch's.
  void launch(std::size_t step, const cuda::CompiledKernel* gpu, const cpu::CompiledKernel* host, std::int64_t grid,
              const std::vector<cpu::KernelArg>& args, const cuda::KernelLaunchOptions& options,
              const cpu::LaunchOptions& host_options);
  // The plan, once the run has its results; nullptr when refused.
  std::shared_ptr<const RunPlan> finish(std::span<const Tensor> results, const std::string& device);

 private:
  friend class RunPlan;
  struct Where {
    bool found = false;
    bool argument = false;  // else a buffer (or held, when `held`)
    bool held = false;
    std::size_t source = 0;
    std::int64_t delta = 0;  // bytes from the source's element 0
  };
  Where locate(const Tensor& t) const;
  // Where `t` (found by locate, not held) lives, as argument `position` of a launch.
  static auto rebase(std::size_t position, const Where& w, const Tensor& t);
  std::vector<Tensor> args_;
  std::vector<std::weak_ptr<const std::byte>> arg_handles_;
  std::vector<std::weak_ptr<const std::byte>> held_;
  struct Allocation {
    std::weak_ptr<const std::byte> handle;
    const std::byte* base;
    std::vector<std::int64_t> shape;
    NumericsPolicy policy;
    std::size_t first_launch;  // the launch it was allocated before
    std::optional<std::size_t> last_launch;  // the last launch that takes it
    bool gathered = false;  // made by a gather entry (first_launch), not allocated
  };
  std::vector<Allocation> allocations_;
  std::unique_ptr<RunPlan> plan_;
  std::string refusal_;
};

class RunPlan {
 public:
  // Launches the recorded kernels on `args`' buffers and fresh ones; returns
  // the results. `launch` runs a launch that is not a rewritten parameter
  // block (CUDA Tile IR kernels, a GEMM whose maps cannot take a new
  // buffer); an error of any launch goes to `failed` with its step, which
  // rethrows it naming the step's op.
  using Launch = std::function<void(std::size_t step, std::int64_t grid, std::vector<cpu::KernelArg> args)>;
  using Failed = std::function<void(std::size_t step, const Error& error)>;
  std::vector<Tensor> replay(std::span<const Tensor> args, const Launch& launch, const Failed& failed) const;

 private:
  friend class PlanRecorder;
  struct Rebase {
    std::size_t position;  // in the launch's arguments
    bool argument;         // else a buffer
    std::size_t source;
    std::int64_t delta;    // bytes from the source's element 0
    std::vector<std::int64_t> shape, strides;
    NumericsPolicy policy;
    std::size_t param_offset = 0;  // of its address in a prepared block
  };
  struct Planned {
    // A gather: buffer `into` becomes a contiguous copy of the view
    // `rebases[0]` describes (no kernel of a step; `step` unused).
    std::optional<std::size_t> into;
    std::size_t step = 0;
    std::int64_t grid = 0;
    std::vector<cpu::KernelArg> args;  // rebased tensors left empty
    std::vector<Rebase> rebases;
    std::vector<std::size_t> allocate;  // buffers made just before it
    std::vector<std::size_t> release;   // buffers dropped after it
    // A generated kernel's recorded launch: its block, with the rebased
    // buffers' addresses rewritten (the positions' param_address_offset).
    std::optional<cuda::PreparedLaunch> prepared;
    // Its kernel, when the block holds tensor maps to encode anew.
    const cuda::CompiledKernel* mapped = nullptr;
    // A CPU kernel's bound launch, with the rebased buffers' addresses
    // rewritten (the positions' entries of `addresses`).
    const cpu::CompiledKernel* host = nullptr;
    std::shared_ptr<const cpu::PreparedLaunch> host_prepared;
    cpu::LaunchOptions host_options;
  };
  struct Buffer {
    std::vector<std::int64_t> shape;
    NumericsPolicy policy;
  };
  // A result: a tensor the executable holds, or where it lives (position unused).
  struct Result {
    Tensor held;
    Rebase where;
  };
  // What a replay reuses from launch to launch.
  struct Scratch {
    std::vector<unsigned char> block;
    std::vector<void*> addresses;
  };
  void run(const Planned& p, std::span<const Tensor> args, std::vector<Tensor>& buffers, const Launch& launch,
           Scratch& scratch) const;
  // The argument or buffer a rebased tensor lives in, and the tensor itself.
  static const Tensor& source(const Rebase& r, std::span<const Tensor> args, const std::vector<Tensor>& buffers);
  static Tensor rebuild(const Rebase& r, std::span<const Tensor> args, const std::vector<Tensor>& buffers);
  std::string device_;
  std::vector<Planned> launches_;
  std::vector<Buffer> buffers_;
  std::vector<Result> results_;
};

}  // namespace tessera::schedule
