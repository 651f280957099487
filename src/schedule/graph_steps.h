// The steps of an executable that runs as a CUDA graph (Executable::run_graph):
// the recorder that builds or updates the graph's nodes, and collective
// steps as nodes (a copy in, the communicator's work captured once, copies
// out).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tessera/backends/cpu/cpu_backend.h"
#include "tessera/backends/cuda/cuda_backend.h"
#include "tessera/backends/cuda_tile/runtime.h"
#include "tessera/ir/ir.h"
#include "tessera/runtime/tensor.h"

namespace tessera::schedule {

// A kernel node's launch as it was recorded when its graph was built.
struct RecordedLaunch {
  std::size_t node = 0;
  const cuda::CompiledKernel* kernel = nullptr;            // an NVRTC kernel's,
  const cuda_tile::CompiledKernel* tile_kernel = nullptr;  // or a CUDA Tile IR kernel's,
  bool gather = false;  // or a strided view's gather: args are the view and the contiguous copy
  std::int64_t grid = 0;
  std::vector<cpu::KernelArg> args;
  cuda::KernelLaunchOptions options;
};

// A run through a CUDA graph: the launches and copies become the graph's
// nodes when it is built, and replace its nodes' parameters, in the same
// order, when it is replayed.
struct GraphRecorder {
  cuda::KernelGraph* graph = nullptr;
  bool building = false;
  std::size_t next = 0;
  // When building: where the launches are recorded (DirectReplay), and
  // whether nodes other than those launches (copies, gathers, captured
  // work) were added.
  std::vector<RecordedLaunch>* launches = nullptr;
  bool other_nodes = false;
  void record(const cuda::CompiledKernel& k, std::int64_t grid, std::vector<cpu::KernelArg> args,
              const cuda::KernelLaunchOptions& options);
  void record(const cuda_tile::CompiledKernel& k, std::int64_t grid, std::vector<cpu::KernelArg> args,
              const cuda::KernelLaunchOptions& options);
  // A strided view gathered into `out` (contiguous, on the view's device)
  // by cuda::strided_copy's kernel, as a node (recorded for DirectReplay
  // like a launch).
  void gather(const Tensor& view, const Tensor& out);
  void add(const std::optional<cuda::PreparedLaunch>& p);
  void copy(const cuda::DeviceCopy& c);  // nothing for zero bytes
  // Captured work when building; on a replay its node runs as it was.
  void work(const cuda::CapturedWork* w);

 private:
  void check_next(const char* what) const;
};

// A replay that walks no step (docs/design/0046-direct-graph-replay.md).
// When a graph is built, its run's buffers fall in three kinds: the
// arguments', the buffers holding the function's results, and the rest
// (intermediates, scratch, tables), which the graph now keeps: a replay
// writes them in place. A replay then allocates fresh result buffers and
// sets only the nodes that read an argument or touch a result buffer,
// each from its recorded launch with those tensors moved to the new
// addresses; every other node keeps its parameters.
class DirectReplay {
 public:
  // nullopt when the run cannot be replayed so: a node that is not a kernel
  // launch or a view's gather (a collective's copies and work), a result that is not in a
  // buffer the run allocated (an argument, a view of one, a constant), two
  // arguments sharing storage, or a packed (sub-byte) or empty tensor.
  // `allocated`: the buffers the run allocated for step results.
  static std::optional<DirectReplay> make(std::vector<RecordedLaunch> launches, std::span<const Tensor> args,
                                          std::span<const Tensor> results, const std::vector<Tensor>& allocated,
                                          const std::string& device);
  // Sets the graph's nodes for `args` (contiguous, the built call's shapes)
  // and fresh result buffers; returns the results.
  std::vector<Tensor> update(GraphRecorder& recorder, std::span<const Tensor> args) const;

 private:
  // A tensor argument of a launch that lives in an argument or a result
  // buffer: where it sits relative to that source's element 0.
  struct Rebase {
    std::size_t position;  // in the launch's arguments
    bool result;           // in a result buffer (else in an argument)
    std::size_t source;    // which
    std::ptrdiff_t delta;  // bytes
    std::vector<std::int64_t> shape, strides;
    NumericsPolicy policy;
  };
  struct Node {
    RecordedLaunch launch;  // its argument and result tensors left out (not held)
    std::vector<Rebase> rebases;
  };
  struct Buffer {
    std::vector<std::int64_t> shape;
    NumericsPolicy policy;
  };
  Tensor rebased(const Rebase& r, std::span<const Tensor> args, const std::vector<Tensor>& fresh) const;
  std::string device_;
  std::vector<Node> nodes_;
  std::vector<Buffer> buffers_;  // the result buffers
  std::vector<Rebase> results_;  // each result, in its buffer (position unused)
};

// What a captured collective step holds for its graph: the buffer its
// operand is copied into and the results its captured work writes, at the
// addresses the work was captured with.
struct GraphCollective {
  Tensor input;
  std::vector<Tensor> results;
};

// Collective view op `op` over more than one member, as graph nodes:
// when building, appends to `held` and captures the communicator's work
// (which must allow capture: Communicator::capture_refusal); on a replay
// uses held[index]. `index` advances. Returns this run's results (fresh
// tensors the graph copies into). graph.shard_slice is one strided copy.
std::vector<Tensor> collective_in_graph(const ir::Operation& op, const Tensor& x,
                                        const std::vector<std::vector<std::int64_t>>& sizes, GraphRecorder& recorder,
                                        std::vector<GraphCollective>& held, std::size_t& index);

}  // namespace tessera::schedule
