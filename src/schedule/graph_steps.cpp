// Executable steps as CUDA graph nodes (graph_steps.h).
#include "schedule/graph_steps.h"

#include <string>

#include "graph/kernel_support.h"
#include "graph/shape_rules.h"
#include "schedule/views.h"
#include "tessera/dist/layout.h"
#include "tessera/dist/shard_scope.h"
#include "tessera/support/error.h"

namespace tessera::schedule {

void GraphRecorder::record(const cuda::CompiledKernel& k, std::int64_t grid, std::vector<cpu::KernelArg> args,
                           const cuda::KernelLaunchOptions& options) {
  add(cuda::prepare_launch(k, grid, std::move(args), options));
}

void GraphRecorder::record(const cuda_tile::CompiledKernel& k, std::int64_t grid, std::vector<cpu::KernelArg> args,
                           const cuda::KernelLaunchOptions& options) {
  cuda_tile::LaunchOptions o;
  o.stream = options.stream;
  o.synchronize = false;
  o.fault_record = options.fault_record;
  add(cuda_tile::prepare_launch(k, grid, std::move(args), o));
}

void GraphRecorder::check_next(const char* what) const {
  if (next >= graph->size()) {
    raise(ErrorCode::Internal, std::string("a graph replay made more ") + what + " than the " +
                                   std::to_string(graph->size()) + " nodes its graph was built with");
  }
}

void GraphRecorder::add(const std::optional<cuda::PreparedLaunch>& p) {
  if (!p) return;
  if (building) {
    graph->add(*p);
  } else {
    check_next("launches");
    graph->set(next, *p);
  }
  ++next;
}

void GraphRecorder::copy(const cuda::DeviceCopy& c) {
  if (c.row_bytes == 0 || c.rows == 0) return;
  if (building) {
    graph->add_copy(c);
  } else {
    check_next("copies");
    graph->set_copy(next, c);
  }
  ++next;
}

void GraphRecorder::work(const cuda::CapturedWork* w) {
  if (building) {
    graph->add_work(*w);
  } else {
    check_next("nodes");
  }
  ++next;
}

namespace {

cuda::DevicePtr address(const Tensor& t) { return reinterpret_cast<cuda::DevicePtr>(t.device_data()); }

// All of `from` into `to` (contiguous, the same bytes).
cuda::DeviceCopy whole(const Tensor& to, const Tensor& from) {
  const std::size_t bytes = storage_bytes_for(from.dtype(), from.numel());
  return cuda::DeviceCopy{address(to), bytes, address(from), bytes, bytes, 1};
}

}  // namespace

std::vector<Tensor> collective_in_graph(const ir::Operation& op, const Tensor& x,
                                        const std::vector<std::vector<std::int64_t>>& sizes, GraphRecorder& recorder,
                                        std::vector<GraphCollective>& held, std::size_t& index) {
  const std::string name(op.name());
  const std::string& axis = op.attrs().get_string("axis");
  const std::int64_t members = op.attrs().get_int("axis_size");
  if (is_packed(x.dtype())) {
    raise(ErrorCode::ArgumentInvalid, name + " of packed " + std::string(tessera::name(x.dtype())) +
                                          " storage cannot run inside a CUDA graph; call without capture_graph",
          op.location());
  }
  if (!x.is_contiguous()) {
    raise(ErrorCode::ArgumentInvalid, name + " reads a non-contiguous view, which is copied outside the kernels "
                                             "and cannot run inside a CUDA graph; call without capture_graph",
          op.location());
  }
  const dist::ShardBinding& shard = dist::require_shard(axis, members, name);
  if (name == "graph.shard_slice") {
    // This member's part along `dim`: one strided copy, no communication.
    const std::vector<std::int64_t>& shape = x.shape();
    const auto d = static_cast<std::size_t>(graph::normalize_axis(op.attrs().get_int("dim"), x.rank()));
    const dist::Run part = dist::block_part(shape[d], members, static_cast<std::int64_t>(shard.rank));
    const std::size_t es = storage_bytes_for(x.dtype(), 1);
    const auto inner = static_cast<std::size_t>(graph::numel_of({shape.begin() + d + 1, shape.end()}));
    const auto outer = static_cast<std::size_t>(graph::numel_of({shape.begin(), shape.begin() + d}));
    Tensor out = Tensor::empty(sizes.at(0), x.policy(), x.device());
    const std::size_t row = static_cast<std::size_t>(part.length) * inner * es;
    recorder.copy(cuda::DeviceCopy{address(out), row, address(x) + static_cast<std::size_t>(part.start) * inner * es,
                                   static_cast<std::size_t>(shape[d]) * inner * es, row, outer});
    return {out};
  }
  if (const std::string why = shard.comm->capture_refusal(); !why.empty()) {
    raise(ErrorCode::ArgumentInvalid, name + " over mesh axis '" + axis + "' cannot be captured into a CUDA graph: " +
                                          why + "; call the function without capture_graph",
          op.location());
  }
  if (recorder.building) held.push_back(GraphCollective{Tensor::empty(x.shape(), x.policy(), x.device()), {}});
  if (index >= held.size()) {
    raise(ErrorCode::Internal, "a graph replay met more collectives than its graph was built with");
  }
  GraphCollective& g = held[index++];
  recorder.copy(whole(g.input, x));
  if (recorder.building) {
    // The communicator queues its work on the capture's stream, on g's buffers.
    cuda::WorkCapture capture(cuda::parse_device(x.device()));
    g.results = apply_view(op, {g.input}, sizes);
    const cuda::CapturedWork work = capture.end();
    recorder.work(&work);
  } else {
    recorder.work(nullptr);
  }
  std::vector<Tensor> fresh;
  for (const Tensor& r : g.results) {
    fresh.push_back(Tensor::empty(r.shape(), r.policy(), r.device()));
    recorder.copy(whole(fresh.back(), r));
  }
  return fresh;
}

}  // namespace tessera::schedule
