// cuBLAS, opened with dlopen on first use: the GEMM the GPU benchmarks
// measure Tessera's kernels against.
#include <dlfcn.h>

#include <map>
#include <mutex>

#include "backends/cuda/driver_api.h"
#include "tessera/runtime/cuda.h"
#include "tessera/support/error.h"

namespace tessera::cuda {
namespace detail {
namespace {

struct LoadedCublas {
  CublasApi api{};
  std::string failure;
};

const LoadedCublas& loaded() {
  static const LoadedCublas* state = [] {
    auto* s = new LoadedCublas();  // stays loaded for the process
    const char* names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so"};
    void* library = open_library(names, 3, s->api.library, s->failure);
    if (library == nullptr) {
      s->failure = "cuBLAS is unavailable: " + s->failure;
      return s;
    }
    CublasApi& a = s->api;
    std::string missing;
    auto get = [&](auto& slot, const char* name) {
      slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(dlsym(library, name));
      if (!slot) missing += (missing.empty() ? "" : ", ") + std::string(name);
    };
    get(a.cublasCreate, "cublasCreate_v2");
    get(a.cublasSetStream, "cublasSetStream_v2");
    get(a.cublasGetVersion, "cublasGetVersion_v2");
    get(a.cublasGetStatusName, "cublasGetStatusName");
    get(a.cublasGemmEx, "cublasGemmEx");
    if (!missing.empty()) s->failure = "cuBLAS is unavailable: " + a.library + " lacks " + missing;
    return s;
  }();
  return *state;
}

void check_status(cublasStatus status, const char* what) {
  if (status == 0) return;
  raise(ErrorCode::Device, std::string(what) + " failed: " + cublas().cublasGetStatusName(status));
}

// One handle per device, created on first use and kept for the process.
cublasHandle handle_for(int device) {
  static std::mutex mutex;
  static auto* handles = new std::map<int, cublasHandle>();
  use_device(device);
  std::lock_guard<std::mutex> lock(mutex);
  auto& h = (*handles)[device];
  if (h == nullptr) check_status(cublas().cublasCreate(&h), "cublasCreate");
  return h;
}

}  // namespace

const CublasApi& cublas() {
  const LoadedCublas& s = loaded();
  if (!s.failure.empty()) raise(ErrorCode::DeviceUnavailable, s.failure);
  return s.api;
}

}  // namespace detail

using namespace detail;

std::string cublas_library() {
  return cublas().library;
}

int cublas_version(int device) {
  int version = 0;
  check_status(cublas().cublasGetVersion(handle_for(device), &version), "cublasGetVersion");
  return version;
}

void cublas_gemm(DType dtype, int m, int n, int k, DevicePtr a, DevicePtr b, DevicePtr c, const Stream& stream) {
  int type = 0;
  switch (dtype) {
    case DType::fp32: type = kCudaR32F; break;
    case DType::fp16: type = kCudaR16F; break;
    case DType::bf16: type = kCudaR16BF; break;
    default:
      raise(ErrorCode::DtypeUnsupported, "cublas_gemm takes fp32, fp16 or bf16 operands, not " +
                                             std::string(name(dtype)) + " (fp8 needs cuBLASLt, not wired yet)");
  }
  if (m <= 0 || n <= 0 || k <= 0) {
    raise(ErrorCode::ArgumentInvalid, "cublas_gemm needs positive sizes, got M=" + std::to_string(m) +
                                          " N=" + std::to_string(n) + " K=" + std::to_string(k));
  }
  const CublasApi& api = cublas();
  cublasHandle h = handle_for(stream.device());
  check_status(api.cublasSetStream(h, static_cast<CUstream>(stream.handle())), "cublasSetStream");
  const float alpha = 1.0f, beta = 0.0f;
  // cuBLAS is column-major: row-major C = A B is column-major C^T = B^T A^T,
  // so B goes first with the sizes swapped and no transposes.
  check_status(api.cublasGemmEx(h, kCublasOpN, kCublasOpN, n, m, k, &alpha, reinterpret_cast<const void*>(b), type, n,
                                reinterpret_cast<const void*>(a), type, k, &beta, reinterpret_cast<void*>(c), type, n,
                                kCublasCompute32F, kCublasGemmDefault),
               "cublasGemmEx");
}

}  // namespace tessera::cuda
