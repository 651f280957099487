// KernelGraph (tessera/backends/cuda/cuda_backend.h): a CUDA graph built node
// by node from prepared launches, with node parameters replaceable between
// replays (cuGraphExecKernelNodeSetParams).
#include <vector>

#include "backends/cuda/driver_api.h"
#include "tessera/backends/cuda/cuda_backend.h"
#include "tessera/support/error.h"

namespace tessera::cuda {

using namespace detail;

struct KernelGraph::Handle {
  int device = 0;
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  std::vector<CUgraphNode> nodes;
  // Each node's parameters now: a launch, a copy, or captured work (whose
  // memory and watches are held here).
  struct Node {
    enum class Kind { launch, copy, work } kind = Kind::launch;
    PreparedLaunch launch;
    DeviceCopy copy;
    CapturedWork work;
  };
  std::vector<Node> current;
  ~Handle() { destroy_graph(device, graph, exec); }
  // Each node runs after the one added before it.
  const CUgraphNode* last() const { return nodes.empty() ? nullptr : &nodes.back(); }
  std::size_t last_count() const { return nodes.empty() ? 0 : 1; }
};

namespace {

// The node parameters of a prepared launch; `slot` must outlive the call
// (the driver copies the parameter block when the node is added or set).
KernelNodeParams node_params(const PreparedLaunch& p, std::vector<void*>& slots) {
  if (p.function == nullptr) raise(ErrorCode::ArgumentInvalid, "a graph node needs a prepared launch with a kernel");
  unsigned char* base = const_cast<unsigned char*>(p.params.data());
  slots.clear();
  if (p.offsets.empty()) {
    slots.push_back(base);
  } else {
    for (std::size_t at : p.offsets) slots.push_back(base + at);
  }
  KernelNodeParams n{};
  n.func = static_cast<CUfunction>(p.function->handle());
  n.grid_x = p.config.grid.x;
  n.grid_y = p.config.grid.y;
  n.grid_z = p.config.grid.z;
  n.block_x = p.config.block.x;
  n.block_y = p.config.block.y;
  n.block_z = p.config.block.z;
  n.shared_bytes = p.config.shared_bytes;
  n.kernel_params = slots.data();
  return n;
}

}  // namespace

KernelGraph::KernelGraph(int device) : handle_(std::make_shared<Handle>()) {
  handle_->device = device;
  use_device(device);
  check(driver().cuGraphCreate(&handle_->graph, 0), "cuGraphCreate");
}

void KernelGraph::add(const PreparedLaunch& launch) {
  if (handle_->exec) raise(ErrorCode::ArgumentInvalid, "KernelGraph::add after instantiate()");
  if (launch.function && launch.function->device() != handle_->device) {
    raise(ErrorCode::ArgumentInvalid, "kernel '" + launch.function->name() + "' is loaded on cuda:" +
                                          std::to_string(launch.function->device()) + ", the graph is for cuda:" +
                                          std::to_string(handle_->device));
  }
  use_device(handle_->device);
  std::vector<void*> slots;
  const KernelNodeParams n = node_params(launch, slots);
  CUgraphNode node = nullptr;
  check(driver().cuGraphAddKernelNode(&node, handle_->graph, handle_->last(), handle_->last_count(), &n),
        ("cuGraphAddKernelNode('" + launch.function->name() + "')").c_str());
  handle_->nodes.push_back(node);
  handle_->current.push_back({Handle::Node::Kind::launch, launch, {}, {}});
}

namespace {

Memcpy3DParams copy_params(const DeviceCopy& c) {
  Memcpy3DParams p{};
  p.src_memory_type = p.dst_memory_type = kMemoryTypeDevice;
  p.src_device = c.src;
  p.dst_device = c.dst;
  p.src_pitch = c.rows > 1 ? c.src_pitch : c.row_bytes;
  p.dst_pitch = c.rows > 1 ? c.dst_pitch : c.row_bytes;
  p.width_bytes = c.row_bytes;
  p.height = c.rows;
  p.depth = 1;
  return p;
}

}  // namespace

void KernelGraph::add_copy(const DeviceCopy& copy) {
  if (handle_->exec) raise(ErrorCode::ArgumentInvalid, "KernelGraph::add_copy after instantiate()");
  const Memcpy3DParams p = copy_params(copy);
  CUgraphNode node = nullptr;
  check(driver().cuGraphAddMemcpyNode(&node, handle_->graph, handle_->last(), handle_->last_count(), &p,
                                      device_context(handle_->device)),
        "cuGraphAddMemcpyNode");
  handle_->nodes.push_back(node);
  handle_->current.push_back({Handle::Node::Kind::copy, {}, copy, {}});
}

void KernelGraph::add_work(const CapturedWork& work) {
  if (handle_->exec) raise(ErrorCode::ArgumentInvalid, "KernelGraph::add_work after instantiate()");
  if (work.device != handle_->device || work.graph == nullptr) {
    raise(ErrorCode::ArgumentInvalid, "KernelGraph::add_work: work captured on cuda:" + std::to_string(work.device) +
                                          " for a graph of cuda:" + std::to_string(handle_->device));
  }
  use_device(handle_->device);
  CUgraphNode node = nullptr;
  check(driver().cuGraphAddChildGraphNode(&node, handle_->graph, handle_->last(), handle_->last_count(),
                                          static_cast<CUgraph>(work.graph.get())),
        "cuGraphAddChildGraphNode");
  handle_->nodes.push_back(node);
  handle_->current.push_back({Handle::Node::Kind::work, {}, {}, work});
}

namespace {

bool same_launch(const PreparedLaunch& a, const PreparedLaunch& b) {
  const LaunchConfig &x = a.config, &y = b.config;
  return a.function == b.function && a.params == b.params && x.grid.x == y.grid.x && x.grid.y == y.grid.y &&
         x.grid.z == y.grid.z && x.block.x == y.block.x && x.block.y == y.block.y && x.block.z == y.block.z &&
         x.shared_bytes == y.shared_bytes;
}

}  // namespace

void KernelGraph::instantiate() {
  if (handle_->exec) return;
  use_device(handle_->device);
  check(driver().cuGraphInstantiateWithFlags(&handle_->exec, handle_->graph, 0), "cuGraphInstantiate");
}

void KernelGraph::set(std::size_t node, const PreparedLaunch& launch) {
  if (!handle_->exec) raise(ErrorCode::ArgumentInvalid, "KernelGraph::set before instantiate()");
  if (node >= handle_->nodes.size()) {
    raise(ErrorCode::ArgumentInvalid, "KernelGraph::set: node " + std::to_string(node) + " of a graph of " +
                                          std::to_string(handle_->nodes.size()));
  }
  // A node whose parameters are unchanged (buffers the caching allocator
  // handed out again at the same addresses) is left alone: an updated node
  // costs the next launch an upload.
  Handle::Node& now = handle_->current[node];
  if (now.kind != Handle::Node::Kind::launch) {
    raise(ErrorCode::Internal, "KernelGraph::set: node " + std::to_string(node) + " is not a kernel launch");
  }
  if (same_launch(now.launch, launch)) return;
  use_device(handle_->device);
  std::vector<void*> slots;
  const KernelNodeParams n = node_params(launch, slots);
  const CUresult rc = driver().cuGraphExecKernelNodeSetParams(handle_->exec, handle_->nodes[node], &n);
  if (rc != kCudaSuccess) check(rc, ("cuGraphExecKernelNodeSetParams('" + launch.function->name() + "')").c_str());
  now.launch = launch;
}

void KernelGraph::set_copy(std::size_t node, const DeviceCopy& copy) {
  if (!handle_->exec) raise(ErrorCode::ArgumentInvalid, "KernelGraph::set_copy before instantiate()");
  Handle::Node* now = node < handle_->current.size() ? &handle_->current[node] : nullptr;
  if (now == nullptr || now->kind != Handle::Node::Kind::copy) {
    raise(ErrorCode::Internal, "KernelGraph::set_copy: node " + std::to_string(node) + " is not a copy");
  }
  const DeviceCopy& was = now->copy;
  if (was.row_bytes != copy.row_bytes || was.rows != copy.rows) {
    raise(ErrorCode::Internal, "KernelGraph::set_copy: node " + std::to_string(node) + " copies " +
                                   std::to_string(was.rows) + " x " + std::to_string(was.row_bytes) +
                                   " bytes, not " + std::to_string(copy.rows) + " x " +
                                   std::to_string(copy.row_bytes));
  }
  if (was.dst == copy.dst && was.src == copy.src && was.dst_pitch == copy.dst_pitch &&
      was.src_pitch == copy.src_pitch) {
    return;
  }
  const Memcpy3DParams p = copy_params(copy);
  check(driver().cuGraphExecMemcpyNodeSetParams(handle_->exec, handle_->nodes[node], &p,
                                                device_context(handle_->device)),
        "cuGraphExecMemcpyNodeSetParams");
  now->copy = copy;
}

void KernelGraph::launch(const Stream* stream) const {
  if (!handle_->exec) raise(ErrorCode::ArgumentInvalid, "KernelGraph::launch before instantiate()");
  if (stream && stream->device() != handle_->device) {
    raise(ErrorCode::ArgumentInvalid, "a graph for cuda:" + std::to_string(handle_->device) +
                                          " cannot run on a stream of cuda:" + std::to_string(stream->device()));
  }
  if (const std::string why = stale(); !why.empty()) {
    raise(ErrorCode::Collective, "a CUDA graph with captured collectives cannot run again: " + why);
  }
  // Captured collectives wait on their peers: each run is watched, as
  // their uncaptured form is when queued (watch() covers the default stream).
  std::vector<const Watch*> watches;
  for (const Handle::Node& n : handle_->current)
    for (const Watch& w : n.work.watches) watches.push_back(&w);
  if (stream != nullptr && !watches.empty()) {
    raise(ErrorCode::ArgumentInvalid, "a graph with captured collectives runs on its device's default stream, "
                                      "where their watches look");
  }
  use_device(handle_->device);
  check(driver().cuGraphLaunch(handle_->exec, stream ? static_cast<CUstream>(stream->handle()) : nullptr),
        "cuGraphLaunch");
  for (const Watch* w : watches) watch(handle_->device, *w);
}

std::string KernelGraph::stale() const {
  for (const Handle::Node& n : handle_->current) {
    for (const auto& check : n.work.checks) {
      if (std::string why = check(); !why.empty()) return why;
    }
  }
  return "";
}

std::size_t KernelGraph::size() const {
  return handle_->nodes.size();
}

int KernelGraph::device() const {
  return handle_->device;
}

}  // namespace tessera::cuda
