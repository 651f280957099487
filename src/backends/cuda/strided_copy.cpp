// Strided views gathered into contiguous memory on the device (cuda.h:
// strided_copy). One small CUDA C++ program, compiled by NVRTC once per
// architecture on first use and loaded on each device, so Tensor::contiguous()
// of a device view never goes through the host.
#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "backends/cuda/strided_view.h"
#include "tessera/runtime/cuda.h"
#include "tessera/support/error.h"

namespace tessera::cuda {
namespace {

// One kernel per element width. Each thread walks a grid-stride loop over
// the destination's elements in order and reads the source element at
// source_offset (device/strided_view.cuh, the host's decoding too): a plain
// copy, with nothing to round or reorder, so the result is the view's bits.
constexpr const char* kSource = R"cuda(
#include "tessera/strided_view.cuh"
using namespace tessera::strided;

struct Bytes16 {
  unsigned long long lo, hi;
};

template <typename T>
__device__ __forceinline__ void gather(const Copy& c) {
  const T* src = (const T*)c.src;
  T* dst = (T*)c.dst;
  const long long step = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < c.n; i += step) {
    dst[i] = src[source_offset(c.v, i)];
  }
}

extern "C" __global__ void tessera_strided_copy_1(const Copy c) { gather<unsigned char>(c); }
extern "C" __global__ void tessera_strided_copy_2(const Copy c) { gather<unsigned short>(c); }
extern "C" __global__ void tessera_strided_copy_4(const Copy c) { gather<unsigned int>(c); }
extern "C" __global__ void tessera_strided_copy_8(const Copy c) { gather<unsigned long long>(c); }
extern "C" __global__ void tessera_strided_copy_16(const Copy c) { gather<Bytes16>(c); }
)cuda";

struct Kernels {
  Module module;
  std::map<std::size_t, Function> by_width;  // element bytes -> kernel
};

const Function& kernel_for(int device, std::size_t element_bytes) {
  static std::mutex mu;
  static auto* loaded = new std::map<int, Kernels>();
  static auto* programs = new std::map<std::string, CompiledProgram>();
  std::lock_guard lock(mu);
  auto it = loaded->find(device);
  if (it == loaded->end()) {
    const std::string arch = device_properties(device).arch();
    auto p = programs->find(arch);
    if (p == programs->end()) p = programs->emplace(arch, compile(kSource, "tessera_strided_copy.cu", device)).first;
    Kernels k{Module::load(device, p->second), {}};
    for (std::size_t width : {1, 2, 4, 8, 16}) {
      k.by_width.emplace(width, k.module.function("tessera_strided_copy_" + std::to_string(width)));
    }
    it = loaded->emplace(device, std::move(k)).first;
  }
  auto f = it->second.by_width.find(element_bytes);
  if (f == it->second.by_width.end()) {
    raise(ErrorCode::ArgumentInvalid, "strided_copy: elements of " + std::to_string(element_bytes) +
                                          " bytes (the device copy takes 1, 2, 4, 8 or 16)");
  }
  return f->second;
}

}  // namespace

std::optional<StridedCopyLaunch> prepare_strided_copy(int device, DevicePtr dst, DevicePtr src,
                                                      std::size_t element_bytes, std::span<const std::int64_t> shape,
                                                      std::span<const std::int64_t> strides) {
  if (shape.size() != strides.size()) {
    raise(ErrorCode::ArgumentInvalid, "strided_copy: " + std::to_string(shape.size()) + " sizes but " +
                                          std::to_string(strides.size()) + " strides");
  }
  std::int64_t n = 1;
  for (std::int64_t s : shape) n *= s;
  if (n == 0) return std::nullopt;
  // Fewer dims, fewer divisions (strided_view.h).
  const std::optional<strided::View> view = strided::merge_dims(shape, strides);
  if (!view) {
    raise(ErrorCode::ArgumentInvalid, "strided_copy: a view of rank " + std::to_string(shape.size()) +
                                          " that stays above " + std::to_string(strided::kMaxRank) +
                                          " dims after merging (the device copy takes " +
                                          std::to_string(strided::kMaxRank) + ")");
  }
  const strided::Copy copy{reinterpret_cast<const void*>(src), reinterpret_cast<void*>(dst), n, *view};
  StridedCopyLaunch p;
  p.function = &kernel_for(device, element_bytes);
  constexpr std::int64_t kThreads = 256, kMaxBlocks = 65535;
  p.config.grid.x = static_cast<unsigned>(std::min(kMaxBlocks, (n + kThreads - 1) / kThreads));
  p.config.block.x = static_cast<unsigned>(kThreads);
  p.param.resize(sizeof copy);
  std::memcpy(p.param.data(), &copy, sizeof copy);
  return p;
}

void strided_copy(int device, DevicePtr dst, DevicePtr src, std::size_t element_bytes,
                  std::span<const std::int64_t> shape, std::span<const std::int64_t> strides) {
  std::optional<StridedCopyLaunch> p = prepare_strided_copy(device, dst, src, element_bytes, shape, strides);
  if (!p) return;
  void* params[] = {p->param.data(), nullptr};
  p->function->launch(p->config, params);
}

}  // namespace tessera::cuda

namespace tessera::strided {

std::string_view copy_kernels_source() {
  return cuda::kSource;
}

}  // namespace tessera::strided
