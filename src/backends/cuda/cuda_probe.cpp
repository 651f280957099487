// Finds the CUDA driver and NVRTC at run time with dlopen (ARCHITECTURE.md
// decision 6): the same build runs on machines without a GPU, and reports why
// CUDA is unavailable instead of failing to load.
#include <dlfcn.h>

#include <string>

#include "tessera/runtime/system_info.h"

namespace tessera {
namespace {

// Driver API signatures used by the probe (CUresult is an int enum).
using CuInit = int (*)(unsigned);
using CuDriverGetVersion = int (*)(int*);
using CuDeviceGetCount = int (*)(int*);
using CuDeviceGet = int (*)(int*, int);
using CuDeviceGetName = int (*)(char*, int, int);
using CuDeviceGetAttribute = int (*)(int*, int, int);
using CuDeviceTotalMem = int (*)(std::size_t*, int);
using CuGetErrorName = int (*)(int, const char**);

constexpr int kAttrComputeMajor = 75;
constexpr int kAttrComputeMinor = 76;

template <typename Fn>
Fn symbol(void* library, const char* name) {
  return reinterpret_cast<Fn>(dlsym(library, name));
}

std::string error_name(void* library, int code) {
  const char* text = nullptr;
  if (auto get_name = symbol<CuGetErrorName>(library, "cuGetErrorName");
      get_name && get_name(code, &text) == 0 && text) {
    return text;
  }
  return "CUDA error " + std::to_string(code);
}

std::string find_nvrtc() {
  for (const char* candidate : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}) {
    // Kept loaded, as the driver is: runtime compilation will need it, and
    // unloading it orphans the memory its static initializers allocate
    // (LeakSanitizer reported 72704 bytes leaked by `tessera info`).
    if (dlopen(candidate, RTLD_NOW | RTLD_LOCAL) != nullptr) {
      return candidate;
    }
  }
  return "not found (libnvrtc.so.13 / .12 not on the library path)";
}

}  // namespace

CudaProbe probe_cuda() {
  CudaProbe probe;
  probe.nvrtc = find_nvrtc();
  // The driver library stays loaded for the process: later CUDA use needs it.
  void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = dlerror();
    probe.reason =
        std::string("no NVIDIA driver: libcuda.so.1 could not be loaded (") + (why ? why : "unknown reason") + ")";
    return probe;
  }
  auto init = symbol<CuInit>(library, "cuInit");
  auto driver_version = symbol<CuDriverGetVersion>(library, "cuDriverGetVersion");
  auto count = symbol<CuDeviceGetCount>(library, "cuDeviceGetCount");
  auto get = symbol<CuDeviceGet>(library, "cuDeviceGet");
  auto get_name = symbol<CuDeviceGetName>(library, "cuDeviceGetName");
  auto attribute = symbol<CuDeviceGetAttribute>(library, "cuDeviceGetAttribute");
  auto total_mem = symbol<CuDeviceTotalMem>(library, "cuDeviceTotalMem_v2");
  if (!init || !driver_version || !count || !get || !get_name || !attribute || !total_mem) {
    probe.reason = "libcuda.so.1 was found but lacks the driver API entry points Tessera needs";
    return probe;
  }
  if (int rc = init(0); rc != 0) {
    probe.reason = "the NVIDIA driver is installed but cuInit failed: " + error_name(library, rc);
    return probe;
  }
  driver_version(&probe.driver_version);
  int devices = 0;
  if (int rc = count(&devices); rc != 0 || devices == 0) {
    probe.reason = rc != 0 ? "cuDeviceGetCount failed: " + error_name(library, rc) : "the driver reports no GPUs";
    return probe;
  }
  for (int ordinal = 0; ordinal < devices; ++ordinal) {
    CudaDeviceInfo device;
    device.ordinal = ordinal;
    int handle = 0;
    if (get(&handle, ordinal) != 0) continue;
    char name[256] = {};
    get_name(name, sizeof name, handle);
    device.name = name;
    attribute(&device.compute_major, kAttrComputeMajor, handle);
    attribute(&device.compute_minor, kAttrComputeMinor, handle);
    std::size_t bytes = 0;
    total_mem(&bytes, handle);
    device.total_memory_bytes = bytes;
    probe.devices.push_back(device);
  }
  probe.available = !probe.devices.empty();
  if (!probe.available) probe.reason = "no GPU could be opened";
  return probe;
}

}  // namespace tessera
