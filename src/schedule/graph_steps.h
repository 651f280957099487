// The steps of an executable that runs as a CUDA graph (Executable::run_graph):
// the recorder that builds or updates the graph's nodes, and collective
// steps as nodes (a copy in, the communicator's work captured once, copies
// out).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "tessera/backends/cpu/cpu_backend.h"
#include "tessera/backends/cuda/cuda_backend.h"
#include "tessera/backends/cuda_tile/runtime.h"
#include "tessera/ir/ir.h"
#include "tessera/runtime/tensor.h"

namespace tessera::schedule {

// A run through a CUDA graph: the launches and copies become the graph's
// nodes when it is built, and replace its nodes' parameters, in the same
// order, when it is replayed.
struct GraphRecorder {
  cuda::KernelGraph* graph = nullptr;
  bool building = false;
  std::size_t next = 0;
  void record(const cuda::CompiledKernel& k, std::int64_t grid, std::vector<cpu::KernelArg> args,
              const cuda::KernelLaunchOptions& options);
  void record(const cuda_tile::CompiledKernel& k, std::int64_t grid, std::vector<cpu::KernelArg> args,
              const cuda::KernelLaunchOptions& options);
  void add(const std::optional<cuda::PreparedLaunch>& p);
  void copy(const cuda::DeviceCopy& c);  // nothing for zero bytes
  // Captured work when building; on a replay its node runs as it was.
  void work(const cuda::CapturedWork* w);

 private:
  void check_next(const char* what) const;
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
