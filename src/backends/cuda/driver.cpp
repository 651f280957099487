// Loads the CUDA driver (libcuda.so.1) on first use and resolves the entry
// points Tessera calls; maps driver results to Tessera errors with the CUDA
// error name; device queries and per-thread context selection.
//
// Nothing here links against CUDA: a machine without a driver gets a
// DeviceError (DeviceUnavailable) from the first call that needs one, never a
// failed load or a crash.
#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <vector>

#include "backends/cuda/driver_api.h"
#include "tessera/runtime/cuda.h"
#include "tessera/support/error.h"

namespace tessera::cuda {
namespace detail {
namespace {

struct LoadedDriver {
  DriverApi api{};
  std::string failure;  // why the driver is unusable; "" when it is
  int devices = 0;
  std::vector<CUcontext> contexts;  // primary contexts, retained on first use
  std::mutex mutex;
};

template <typename Fn>
bool resolve(void* library, Fn& slot, std::initializer_list<const char*> names, std::string& missing) {
  for (const char* name : names) {
    if (void* p = dlsym(library, name)) {
      slot = reinterpret_cast<Fn>(p);
      return true;
    }
  }
  missing += (missing.empty() ? "" : ", ") + std::string(*names.begin());
  return false;
}

LoadedDriver& loaded() {
  static LoadedDriver* state = [] {
    auto* s = new LoadedDriver();  // never freed: the driver stays loaded for the process
    const char* names[] = {"libcuda.so.1", "libcuda.so"};
    std::string opened;
    void* library = open_library(names, 2, opened, s->failure);
    if (library == nullptr) {
      s->failure = "no NVIDIA driver: " + s->failure;
      return s;
    }
    DriverApi& a = s->api;
    std::string missing;
    resolve(library, a.cuInit, {"cuInit"}, missing);
    resolve(library, a.cuDriverGetVersion, {"cuDriverGetVersion"}, missing);
    resolve(library, a.cuGetErrorName, {"cuGetErrorName"}, missing);
    resolve(library, a.cuGetErrorString, {"cuGetErrorString"}, missing);
    resolve(library, a.cuDeviceGetCount, {"cuDeviceGetCount"}, missing);
    resolve(library, a.cuDeviceGet, {"cuDeviceGet"}, missing);
    resolve(library, a.cuDeviceGetName, {"cuDeviceGetName"}, missing);
    resolve(library, a.cuDeviceGetAttribute, {"cuDeviceGetAttribute"}, missing);
    resolve(library, a.cuDeviceTotalMem, {"cuDeviceTotalMem_v2"}, missing);
    resolve(library, a.cuDevicePrimaryCtxRetain, {"cuDevicePrimaryCtxRetain"}, missing);
    resolve(library, a.cuCtxSetCurrent, {"cuCtxSetCurrent"}, missing);
    resolve(library, a.cuCtxSynchronize, {"cuCtxSynchronize"}, missing);
    resolve(library, a.cuDeviceCanAccessPeer, {"cuDeviceCanAccessPeer"}, missing);
    resolve(library, a.cuCtxEnablePeerAccess, {"cuCtxEnablePeerAccess"}, missing);
    resolve(library, a.cuMemAlloc, {"cuMemAlloc_v2"}, missing);
    resolve(library, a.cuMemFree, {"cuMemFree_v2"}, missing);
    resolve(library, a.cuMemGetInfo, {"cuMemGetInfo_v2"}, missing);
    resolve(library, a.cuMemcpyHtoD, {"cuMemcpyHtoD_v2"}, missing);
    resolve(library, a.cuMemcpyDtoH, {"cuMemcpyDtoH_v2"}, missing);
    resolve(library, a.cuMemcpyDtoD, {"cuMemcpyDtoD_v2"}, missing);
    resolve(library, a.cuMemcpyHtoDAsync, {"cuMemcpyHtoDAsync_v2"}, missing);
    resolve(library, a.cuMemcpyDtoHAsync, {"cuMemcpyDtoHAsync_v2"}, missing);
    resolve(library, a.cuMemcpyDtoDAsync, {"cuMemcpyDtoDAsync_v2"}, missing);
    resolve(library, a.cuMemsetD8Async, {"cuMemsetD8Async"}, missing);
    resolve(library, a.cuPointerGetAttribute, {"cuPointerGetAttribute"}, missing);
    resolve(library, a.cuStreamCreate, {"cuStreamCreate"}, missing);
    resolve(library, a.cuStreamDestroy, {"cuStreamDestroy_v2"}, missing);
    resolve(library, a.cuStreamSynchronize, {"cuStreamSynchronize"}, missing);
    resolve(library, a.cuStreamQuery, {"cuStreamQuery"}, missing);
    resolve(library, a.cuEventCreate, {"cuEventCreate"}, missing);
    resolve(library, a.cuEventDestroy, {"cuEventDestroy_v2"}, missing);
    resolve(library, a.cuStreamWaitEvent, {"cuStreamWaitEvent"}, missing);
    resolve(library, a.cuEventRecord, {"cuEventRecord"}, missing);
    resolve(library, a.cuEventSynchronize, {"cuEventSynchronize"}, missing);
    resolve(library, a.cuEventQuery, {"cuEventQuery"}, missing);
    resolve(library, a.cuEventElapsedTime, {"cuEventElapsedTime_v2", "cuEventElapsedTime"}, missing);
    resolve(library, a.cuModuleLoadData, {"cuModuleLoadData"}, missing);
    resolve(library, a.cuModuleUnload, {"cuModuleUnload"}, missing);
    resolve(library, a.cuModuleGetFunction, {"cuModuleGetFunction"}, missing);
    resolve(library, a.cuFuncSetAttribute, {"cuFuncSetAttribute"}, missing);
    resolve(library, a.cuOccupancyMaxActiveBlocksPerMultiprocessor, {"cuOccupancyMaxActiveBlocksPerMultiprocessor"},
            missing);
    resolve(library, a.cuLaunchKernel, {"cuLaunchKernel"}, missing);
    resolve(library, a.cuStreamBeginCapture, {"cuStreamBeginCapture_v2"}, missing);
    resolve(library, a.cuStreamEndCapture, {"cuStreamEndCapture"}, missing);
    resolve(library, a.cuGraphInstantiateWithFlags, {"cuGraphInstantiateWithFlags"}, missing);
    resolve(library, a.cuGraphLaunch, {"cuGraphLaunch"}, missing);
    resolve(library, a.cuGraphExecDestroy, {"cuGraphExecDestroy"}, missing);
    resolve(library, a.cuGraphDestroy, {"cuGraphDestroy"}, missing);
    resolve(library, a.cuGraphGetNodes, {"cuGraphGetNodes"}, missing);
    resolve(library, a.cuGraphCreate, {"cuGraphCreate"}, missing);
    resolve(library, a.cuGraphAddKernelNode, {"cuGraphAddKernelNode_v2"}, missing);
    resolve(library, a.cuGraphExecKernelNodeSetParams, {"cuGraphExecKernelNodeSetParams_v2"}, missing);
    resolve(library, a.cuGraphAddChildGraphNode, {"cuGraphAddChildGraphNode"}, missing);
    resolve(library, a.cuGraphAddMemcpyNode, {"cuGraphAddMemcpyNode"}, missing);
    resolve(library, a.cuGraphExecMemcpyNodeSetParams, {"cuGraphExecMemcpyNodeSetParams"}, missing);
    {
      std::string optional;  // absent on old drivers: TMA copies fall back to cp.async
      resolve(library, a.cuTensorMapEncodeTiled, {"cuTensorMapEncodeTiled"}, optional);
    }
    if (!missing.empty()) {
      s->failure = opened + " lacks driver entry points Tessera needs: " + missing;
      return s;
    }
    if (CUresult rc = a.cuInit(0); rc != kCudaSuccess) {
      s->failure = "the NVIDIA driver is installed but cuInit failed: " + error_text(rc);
      return s;
    }
    if (CUresult rc = a.cuDeviceGetCount(&s->devices); rc != kCudaSuccess) {
      s->failure = "cuDeviceGetCount failed: " + error_text(rc);
      return s;
    }
    if (s->devices == 0) s->failure = "the NVIDIA driver reports no GPUs";
    s->contexts.assign(static_cast<std::size_t>(s->devices), nullptr);
    return s;
  }();
  return *state;
}

}  // namespace

void* open_library(const char* const* names, std::size_t count, std::string& opened, std::string& why) {
  std::vector<std::string> folders = {""};
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    if (const char* home = std::getenv(var); home && *home) {
      folders.push_back(std::string(home) + "/lib64/");
      folders.push_back(std::string(home) + "/lib/");
    }
  }
  folders.push_back("/usr/local/cuda/lib64/");
  folders.push_back("/usr/local/cuda/lib/");
  std::string first_error;
  for (const std::string& folder : folders) {
    for (std::size_t i = 0; i < count; ++i) {
      const std::string path = folder + names[i];
      if (void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) {
        opened = path;
        return library;
      }
      if (first_error.empty()) {
        const char* e = dlerror();
        first_error = e ? e : "unknown reason";
      }
    }
  }
  why = std::string(names[0]) + " could not be loaded (" + first_error + ")";
  return nullptr;
}

const DriverApi& driver() {
  LoadedDriver& s = loaded();
  if (!s.failure.empty()) raise(ErrorCode::DeviceUnavailable, "CUDA is unavailable: " + s.failure);
  return s.api;
}

std::string error_text(CUresult rc) {
  const LoadedDriver& s = loaded();
  const char* name = nullptr;
  const char* description = nullptr;
  if (s.api.cuGetErrorName) s.api.cuGetErrorName(rc, &name);
  if (s.api.cuGetErrorString) s.api.cuGetErrorString(rc, &description);
  std::string text = name ? name : "CUDA error " + std::to_string(rc);
  if (description) text += std::string(" (") + description + ")";
  return text;
}

void check(CUresult rc, const char* what) {
  if (rc == kCudaSuccess) return;
  raise(rc == kCudaErrorOutOfMemory ? ErrorCode::OutOfMemory : ErrorCode::Device,
        std::string(what) + " failed: " + error_text(rc));
}

void use_device(int ordinal) {
  const DriverApi& api = driver();
  LoadedDriver& s = loaded();
  if (ordinal < 0 || ordinal >= s.devices) {
    raise(ErrorCode::DeviceUnavailable, "device cuda:" + std::to_string(ordinal) +
                                            " does not exist: this machine has " + std::to_string(s.devices) +
                                            " CUDA device" + (s.devices == 1 ? "" : "s"));
  }
  CUcontext context = nullptr;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    auto& slot = s.contexts[static_cast<std::size_t>(ordinal)];
    if (slot == nullptr) {
      CUdevice device = 0;
      check(api.cuDeviceGet(&device, ordinal), "cuDeviceGet");
      // Retained for the life of the process: tensors and modules may outlive
      // any object that could release it.
      check(api.cuDevicePrimaryCtxRetain(&slot, device), "cuDevicePrimaryCtxRetain");
    }
    context = slot;
  }
  check(api.cuCtxSetCurrent(context), "cuCtxSetCurrent");
}

CUcontext device_context(int ordinal) {
  use_device(ordinal);
  LoadedDriver& s = loaded();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.contexts[static_cast<std::size_t>(ordinal)];
}

}  // namespace detail

using namespace detail;

bool available() {
  return loaded().failure.empty();
}

std::string unavailable_reason() {
  return loaded().failure;
}

int device_count() {
  driver();
  return loaded().devices;
}

std::string DeviceProperties::arch() const {
  std::string arch = "sm_" + std::to_string(compute_major) + std::to_string(compute_minor);
  // The architecture-specific variants (wgmma, setmaxnreg, tcgen05) exist from
  // compute capability 9.0 on; code for them runs only on that exact chip.
  if (compute_major >= 9) arch += "a";
  return arch;
}

DeviceProperties device_properties(int ordinal) {
  use_device(ordinal);
  const DriverApi& api = driver();
  CUdevice device = 0;
  check(api.cuDeviceGet(&device, ordinal), "cuDeviceGet");
  DeviceProperties p;
  p.ordinal = ordinal;
  char name[256] = {};
  check(api.cuDeviceGetName(name, sizeof name, device), "cuDeviceGetName");
  p.name = name;
  auto attribute = [&](int which, int& out) {
    check(api.cuDeviceGetAttribute(&out, which, device), "cuDeviceGetAttribute");
  };
  attribute(kAttrComputeMajor, p.compute_major);
  attribute(kAttrComputeMinor, p.compute_minor);
  attribute(kAttrMultiprocessorCount, p.multiprocessors);
  attribute(kAttrMaxThreadsPerBlock, p.max_threads_per_block);
  attribute(kAttrMaxSharedPerBlock, p.shared_bytes_per_block);
  attribute(kAttrMaxSharedPerBlockOptin, p.shared_bytes_per_block_optin);
  attribute(kAttrL2CacheSize, p.l2_bytes);
  attribute(kAttrMemoryClockRate, p.memory_clock_khz);
  attribute(kAttrGlobalMemoryBusWidth, p.memory_bus_bits);
  check(api.cuDeviceTotalMem(&p.total_memory_bytes, device), "cuDeviceTotalMem");
  return p;
}

void synchronize(int ordinal) {
  settle_watches(ordinal);
  use_device(ordinal);
  check(driver().cuCtxSynchronize(), "cuCtxSynchronize");
}

std::pair<std::size_t, std::size_t> memory_info(int ordinal) {
  use_device(ordinal);
  std::size_t free_bytes = 0, total = 0;
  check(driver().cuMemGetInfo(&free_bytes, &total), "cuMemGetInfo");
  return {free_bytes, total};
}

bool enable_peer_access(int device, int peer) {
  if (device == peer) return true;
  use_device(peer);  // retains the peer's primary context
  const DriverApi& api = driver();
  CUcontext peer_context = nullptr;
  {
    LoadedDriver& s = loaded();
    std::lock_guard<std::mutex> lock(s.mutex);
    peer_context = s.contexts[static_cast<std::size_t>(peer)];
  }
  CUdevice d = 0, p = 0;
  check(api.cuDeviceGet(&d, device), "cuDeviceGet");
  check(api.cuDeviceGet(&p, peer), "cuDeviceGet");
  int can = 0;
  check(api.cuDeviceCanAccessPeer(&can, d, p), "cuDeviceCanAccessPeer");
  if (can == 0) return false;
  use_device(device);
  CUresult rc = api.cuCtxEnablePeerAccess(peer_context, 0);
  if (rc == kCudaErrorPeerAccessAlreadyEnabled) rc = kCudaSuccess;
  check(rc, "cuCtxEnablePeerAccess");
  return true;
}

int parse_device(std::string_view device) {
  if (device == "cuda") return 0;
  if (device.substr(0, 5) == "cuda:" && device.size() > 5 && device.size() < 10) {
    int ordinal = 0;
    for (char c : device.substr(5)) {
      if (c < '0' || c > '9') ordinal = -1;
      if (ordinal >= 0) ordinal = ordinal * 10 + (c - '0');
    }
    if (ordinal >= 0) return ordinal;
  }
  raise(ErrorCode::ArgumentInvalid,
        "'" + std::string(device) + "' is not a CUDA device name; write 'cuda' or 'cuda:N' with N a device ordinal");
}

}  // namespace tessera::cuda
