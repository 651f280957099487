// Executable steps as CUDA graph nodes (graph_steps.h).
#include "schedule/graph_steps.h"

#include <algorithm>
#include <memory>
#include <string>

#include "graph/kernel_support.h"
#include "graph/shape_rules.h"
#include "schedule/views.h"
#include "tessera/dist/layout.h"
#include "tessera/dist/shard_scope.h"
#include "tessera/support/error.h"

namespace tessera::schedule {
namespace {

cuda::DevicePtr address(const Tensor& t) { return reinterpret_cast<cuda::DevicePtr>(t.device_data()); }

}  // namespace

void GraphRecorder::record(const cuda::CompiledKernel& k, std::int64_t grid, std::vector<cpu::KernelArg> args,
                           const cuda::KernelLaunchOptions& options) {
  if (building && launches) launches->push_back({next, &k, nullptr, false, grid, args, options});
  add(cuda::prepare_launch(k, grid, std::move(args), options));
}

void GraphRecorder::record(const cuda_tile::CompiledKernel& k, std::int64_t grid, std::vector<cpu::KernelArg> args,
                           const cuda::KernelLaunchOptions& options) {
  if (building && launches) launches->push_back({next, nullptr, &k, false, grid, args, options});
  cuda_tile::LaunchOptions o;
  o.stream = options.stream;
  o.synchronize = false;
  o.fault_record = options.fault_record;
  add(cuda_tile::prepare_launch(k, grid, std::move(args), o));
}

void GraphRecorder::gather(const Tensor& view, const Tensor& out) {
  std::optional<cuda::StridedCopyLaunch> p =
      cuda::prepare_strided_copy(cuda::parse_device(view.device()), address(out), address(view),
                                 static_cast<std::size_t>(view.element_bytes()), view.shape(), view.strides());
  if (!p) return;
  if (building && launches) {
    // A replay moves the view to the new argument (or result buffer) it
    // lies in, as a launch's tensors; `out` is an intermediate the graph keeps.
    launches->push_back({next, nullptr, nullptr, true, 0, {cpu::KernelArg(view), cpu::KernelArg(out)}, {}});
  } else {
    other_nodes = other_nodes || building;
  }
  cuda::PreparedLaunch launch;
  launch.function = p->function;
  launch.config = p->config;
  launch.params = std::move(p->param);
  add(launch);
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
  other_nodes = other_nodes || building;
  if (building) {
    graph->add_copy(c);
  } else {
    check_next("copies");
    graph->set_copy(next, c);
  }
  ++next;
}

void GraphRecorder::work(const cuda::CapturedWork* w) {
  other_nodes = other_nodes || building;
  if (building) {
    graph->add_work(*w);
  } else {
    check_next("nodes");
  }
  ++next;
}

namespace {

// Where a tensor's storage starts: tensors sharing it are views of one buffer.
const std::byte* storage_base(const Tensor& t) {
  return static_cast<const std::byte*>(t.device_data()) - t.storage_offset() * t.element_bytes();
}

std::ptrdiff_t bytes_from(const Tensor& t, const Tensor& source) {
  return static_cast<const std::byte*>(t.device_data()) - static_cast<const std::byte*>(source.device_data());
}

}  // namespace

std::optional<DirectReplay> DirectReplay::make(std::vector<RecordedLaunch> launches, std::span<const Tensor> args,
                                               std::span<const Tensor> results, const std::vector<Tensor>& allocated,
                                               const std::string& device) {
  const auto plain = [](const Tensor& t) { return t.defined() && !is_packed(t.dtype()) && t.numel() > 0; };
  DirectReplay r;
  r.device_ = device;
  std::vector<const std::byte*> arg_bases;
  for (const Tensor& a : args) {
    if (!plain(a)) return std::nullopt;
    const std::byte* base = storage_base(a);
    if (std::find(arg_bases.begin(), arg_bases.end(), base) != arg_bases.end()) return std::nullopt;
    arg_bases.push_back(base);
  }
  // The result buffers: each allocated buffer some result lives in, once.
  std::vector<const Tensor*> buffers;
  for (const Tensor& res : results) {
    if (!plain(res)) return std::nullopt;
    const auto holds = [&](const Tensor& b) { return storage_base(b) == storage_base(res); };
    const auto in = std::find_if(allocated.begin(), allocated.end(), holds);
    if (in == allocated.end()) return std::nullopt;
    auto at = std::find(buffers.begin(), buffers.end(), &*in);
    if (at == buffers.end()) {
      buffers.push_back(&*in);
      r.buffers_.push_back({in->shape(), in->policy()});
      at = buffers.end() - 1;
    }
    const std::size_t b = static_cast<std::size_t>(at - buffers.begin());
    r.results_.push_back({0, true, b, bytes_from(res, **at), res.shape(), res.strides(), res.policy()});
  }
  for (RecordedLaunch& launch : launches) {
    Node node;
    for (std::size_t i = 0; i < launch.args.size(); ++i) {
      Tensor* t = std::get_if<Tensor>(&launch.args[i].value);
      if (t == nullptr) continue;
      if (!plain(*t)) return std::nullopt;
      const std::byte* base = storage_base(*t);
      std::optional<Rebase> rb;
      for (std::size_t a = 0; a < args.size() && !rb; ++a) {
        if (arg_bases[a] == base) rb = Rebase{i, false, a, bytes_from(*t, args[a]), t->shape(), t->strides(), t->policy()};
      }
      for (std::size_t b = 0; b < buffers.size() && !rb; ++b) {
        if (storage_base(*buffers[b]) == base) {
          rb = Rebase{i, true, b, bytes_from(*t, *buffers[b]), t->shape(), t->strides(), t->policy()};
        }
      }
      if (!rb) continue;  // an intermediate, scratch or table: the node keeps it
      node.rebases.push_back(std::move(*rb));
      *t = Tensor();  // the arguments and results of the built call are not held
    }
    node.launch = std::move(launch);
    r.nodes_.push_back(std::move(node));
  }
  return r;
}

Tensor DirectReplay::rebased(const Rebase& r, std::span<const Tensor> args, const std::vector<Tensor>& fresh) const {
  const Tensor& source = r.result ? fresh[r.source] : args[r.source];
  std::byte* at = static_cast<std::byte*>(source.device_data()) + r.delta;
  return Tensor::wrap_device(at, r.shape, r.strides, r.policy, device_, std::make_shared<Tensor>(source));
}

std::vector<Tensor> DirectReplay::update(GraphRecorder& recorder, std::span<const Tensor> args) const {
  std::vector<Tensor> fresh;
  for (const Buffer& b : buffers_) fresh.push_back(Tensor::empty(b.shape, b.policy, device_));
  for (const Node& n : nodes_) {
    if (n.rebases.empty()) continue;
    std::vector<cpu::KernelArg> launch_args = n.launch.args;
    for (const Rebase& r : n.rebases) launch_args[r.position] = rebased(r, args, fresh);
    recorder.next = n.launch.node;
    if (n.launch.gather) {
      recorder.gather(std::get<Tensor>(launch_args.at(0).value), std::get<Tensor>(launch_args.at(1).value));
    } else if (n.launch.kernel) {
      recorder.record(*n.launch.kernel, n.launch.grid, std::move(launch_args), n.launch.options);
    } else {
      recorder.record(*n.launch.tile_kernel, n.launch.grid, std::move(launch_args), n.launch.options);
    }
  }
  recorder.next = recorder.graph->size();
  std::vector<Tensor> out;
  for (const Rebase& r : results_) {
    const Tensor& whole = fresh[r.source];
    const bool is_whole = r.delta == 0 && r.shape == whole.shape() && r.strides == whole.strides() &&
                          r.policy == whole.policy();
    out.push_back(is_whole ? whole : rebased(r, args, fresh));
  }
  return out;
}

namespace {

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
