// Stream capture into CUDA graphs, instantiation and replay: the runtime
// part of compiled graphs launched with one call (capture_graph=True).
#include "backends/cuda/driver_api.h"
#include "tessera/runtime/cuda.h"
#include "tessera/support/error.h"

namespace tessera::cuda {

using namespace detail;

struct Graph::Handle {
  int device = 0;
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  ~Handle() { destroy_graph(device, graph, exec); }
};

void detail::destroy_graph(int device, CUgraph graph, CUgraphExec exec) noexcept {
  try {
    use_device(device);
    if (exec) driver().cuGraphExecDestroy(exec);
    if (graph) driver().cuGraphDestroy(graph);
  } catch (...) {
  }
}

void Graph::replay(const Stream& stream) const {
  if (!handle_) raise(ErrorCode::ArgumentInvalid, "replay of an empty Graph (capture one with GraphCapture)");
  if (stream.device() != handle_->device) {
    raise(ErrorCode::ArgumentInvalid, "a graph captured on cuda:" + std::to_string(handle_->device) +
                                          " cannot replay on a stream of cuda:" + std::to_string(stream.device()));
  }
  use_device(handle_->device);
  check(driver().cuGraphLaunch(handle_->exec, static_cast<CUstream>(stream.handle())), "cuGraphLaunch");
}

namespace {

// Ends the capture on `stream` and returns its graph, or raises naming why.
CUgraph end_capture(const Stream& stream) {
  use_device(stream.device());
  CUgraph graph = nullptr;
  const CUresult rc = driver().cuStreamEndCapture(static_cast<CUstream>(stream.handle()), &graph);
  if (rc != kCudaSuccess) {
    raise(ErrorCode::Device, "cuStreamEndCapture failed: " + error_text(rc) +
                                 " (work in the capture was invalid, for example a synchronous call on a capturing "
                                 "stream)");
  }
  return graph;
}

// Ends an abandoned capture on `stream` and drops its graph (destructors: never throws).
void discard_capture(const Stream& stream) noexcept {
  try {
    use_device(stream.device());
    CUgraph graph = nullptr;
    driver().cuStreamEndCapture(static_cast<CUstream>(stream.handle()), &graph);
    if (graph) driver().cuGraphDestroy(graph);
  } catch (...) {
  }
}

}  // namespace

GraphCapture::GraphCapture(const Stream& stream) : stream_(&stream) {
  use_device(stream.device());
  // Thread-local mode: other threads may keep using CUDA while this one captures.
  check(driver().cuStreamBeginCapture(static_cast<CUstream>(stream.handle()), kCaptureModeThreadLocal),
        "cuStreamBeginCapture");
}

GraphCapture::~GraphCapture() {
  if (open_) discard_capture(*stream_);
}

Graph GraphCapture::end() {
  if (!open_) raise(ErrorCode::ArgumentInvalid, "GraphCapture::end called twice");
  open_ = false;
  auto handle = std::make_shared<Graph::Handle>();
  handle->device = stream_->device();
  handle->graph = end_capture(*stream_);
  std::size_t nodes = 0;
  check(driver().cuGraphGetNodes(handle->graph, nullptr, &nodes), "cuGraphGetNodes");
  check(driver().cuGraphInstantiateWithFlags(&handle->exec, handle->graph, 0), "cuGraphInstantiate");
  Graph g;
  g.handle_ = std::move(handle);
  g.nodes_ = nodes;
  return g;
}

namespace {
thread_local WorkCapture* open_capture = nullptr;
}

WorkCapture::WorkCapture(int device) : stream_(device), outer_(open_capture) {
  work_.device = device;
  use_device(device);
  // Relaxed: the capturing thread may still allocate (the caching allocator
  // grows) while its work is recorded; the stream is non-blocking, so work
  // other threads queue on the legacy stream stays out of the capture.
  detail::check(driver().cuStreamBeginCapture(static_cast<CUstream>(stream_.handle()), kCaptureModeRelaxed),
                "cuStreamBeginCapture");
  open_capture = this;
}

WorkCapture::~WorkCapture() {
  if (open_capture == this) open_capture = outer_;
  if (open_) discard_capture(stream_);
}

WorkCapture* WorkCapture::active(int device) {
  for (WorkCapture* c = open_capture; c != nullptr; c = c->outer_) {
    if (device < 0 || c->work_.device == device) return c;
  }
  return nullptr;
}

CapturedWork WorkCapture::end() {
  if (!open_) raise(ErrorCode::ArgumentInvalid, "WorkCapture::end called twice");
  open_ = false;
  if (open_capture == this) open_capture = outer_;
  CUgraph graph = end_capture(stream_);
  const int device = work_.device;
  work_.graph = std::shared_ptr<void>(graph, [device](void* g) {
    destroy_graph(device, static_cast<CUgraph>(g), nullptr);
  });
  return std::move(work_);
}

}  // namespace tessera::cuda
