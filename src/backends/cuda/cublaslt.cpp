// cuBLASLt, opened with dlopen on first use: the fp8 (e4m3) GEMM baseline the
// GPU benchmarks measure Tessera's fp8 kernels against. cuBLAS's classic API
// has no fp8 GEMM; cuBLASLt has one on sm_89 and newer, in the "TN" layout
// only (the first operand transposed), which is what cublaslt_gemm_fp8 takes.
#include <dlfcn.h>

#include <map>
#include <mutex>
#include <tuple>

#include "backends/cuda/driver_api.h"
#include "tessera/runtime/cuda.h"
#include "tessera/support/error.h"

namespace tessera::cuda {
namespace detail {
namespace {

struct LoadedCublasLt {
  CublasLtApi api{};
  std::string failure;
};

const LoadedCublasLt& loaded() {
  static const LoadedCublasLt* state = [] {
    auto* s = new LoadedCublasLt();  // stays loaded for the process
    const char* names[] = {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"};
    void* library = open_library(names, 3, s->api.library, s->failure);
    if (library == nullptr) {
      s->failure = "cuBLASLt is unavailable: " + s->failure;
      return s;
    }
    CublasLtApi& a = s->api;
    std::string missing;
    auto get = [&](auto& slot, const char* name) {
      slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(dlsym(library, name));
      if (!slot) missing += (missing.empty() ? "" : ", ") + std::string(name);
    };
    get(a.cublasLtCreate, "cublasLtCreate");
    get(a.cublasLtGetVersion, "cublasLtGetVersion");
    get(a.cublasLtGetStatusName, "cublasLtGetStatusName");
    get(a.cublasLtMatmulDescCreate, "cublasLtMatmulDescCreate");
    get(a.cublasLtMatmulDescDestroy, "cublasLtMatmulDescDestroy");
    get(a.cublasLtMatmulDescSetAttribute, "cublasLtMatmulDescSetAttribute");
    get(a.cublasLtMatrixLayoutCreate, "cublasLtMatrixLayoutCreate");
    get(a.cublasLtMatrixLayoutDestroy, "cublasLtMatrixLayoutDestroy");
    get(a.cublasLtMatmulPreferenceCreate, "cublasLtMatmulPreferenceCreate");
    get(a.cublasLtMatmulPreferenceDestroy, "cublasLtMatmulPreferenceDestroy");
    get(a.cublasLtMatmulPreferenceSetAttribute, "cublasLtMatmulPreferenceSetAttribute");
    get(a.cublasLtMatmulAlgoGetHeuristic, "cublasLtMatmulAlgoGetHeuristic");
    get(a.cublasLtMatmul, "cublasLtMatmul");
    if (!missing.empty()) s->failure = "cuBLASLt is unavailable: " + a.library + " lacks " + missing;
    return s;
  }();
  return *state;
}

void check_status(cublasStatus status, const std::string& what) {
  if (status == 0) return;
  raise(ErrorCode::Device, what + " failed: " + cublaslt().cublasLtGetStatusName(status));
}

// One handle per device, created on first use and kept for the process.
cublasLtHandle handle_for(int device) {
  static std::mutex mutex;
  static auto* handles = new std::map<int, cublasLtHandle>();
  use_device(device);
  std::lock_guard<std::mutex> lock(mutex);
  auto& h = (*handles)[device];
  if (h == nullptr) check_status(cublaslt().cublasLtCreate(&h), "cublasLtCreate");
  return h;
}

// The descriptors and chosen algorithm of one problem, built once: the
// heuristic query costs more than a small GEMM, and benchmarks repeat shapes.
struct Plan {
  cublasLtMatmulDesc desc = nullptr;
  cublasLtMatrixLayout a = nullptr, b = nullptr, c = nullptr;
  CublasLtHeuristicResult choice{};
};

constexpr std::size_t kMaxWorkspace = std::size_t{32} << 20;

const Plan& plan_for(int device, int m, int n, int k, DType out) {
  static std::mutex mutex;
  static auto* plans = new std::map<std::tuple<int, int, int, int, int>, Plan>();  // kept for the process
  const auto key = std::make_tuple(device, m, n, k, static_cast<int>(out));
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = plans->find(key); it != plans->end()) return it->second;
  const CublasLtApi& api = cublaslt();
  cublasLtHandle h = handle_for(device);
  Plan p;
  const int out_type = out == DType::fp32 ? kCudaR32F : kCudaR16BF;
  check_status(api.cublasLtMatmulDescCreate(&p.desc, kCublasCompute32F, kCudaR32F), "cublasLtMatmulDescCreate");
  // cuBLASLt is column-major: row-major C[M, N] = A B^T is column-major
  // C^T = B A^T = X^T Y, where X is B's [N, K] row-major storage read as a
  // K x N column-major matrix (op T) and Y is A's [M, K] storage read as a
  // K x M column-major matrix (op N): the TN layout cuBLASLt requires for fp8.
  const int trans_a = kCublasOpT, trans_b = kCublasOpN;
  check_status(api.cublasLtMatmulDescSetAttribute(p.desc, kLtDescTransA, &trans_a, sizeof trans_a), "set TRANSA");
  check_status(api.cublasLtMatmulDescSetAttribute(p.desc, kLtDescTransB, &trans_b, sizeof trans_b), "set TRANSB");
  check_status(api.cublasLtMatrixLayoutCreate(&p.a, kCudaR8FE4M3, k, n, k), "cublasLtMatrixLayoutCreate(B)");
  check_status(api.cublasLtMatrixLayoutCreate(&p.b, kCudaR8FE4M3, k, m, k), "cublasLtMatrixLayoutCreate(A)");
  check_status(api.cublasLtMatrixLayoutCreate(&p.c, out_type, n, m, n), "cublasLtMatrixLayoutCreate(C)");
  cublasLtMatmulPreference pref = nullptr;
  check_status(api.cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  const std::size_t workspace = kMaxWorkspace;
  check_status(api.cublasLtMatmulPreferenceSetAttribute(pref, kLtPrefMaxWorkspaceBytes, &workspace, sizeof workspace),
               "set MAX_WORKSPACE_BYTES");
  int found = 0;
  const cublasStatus rc = api.cublasLtMatmulAlgoGetHeuristic(h, p.desc, p.a, p.b, p.c, p.c, pref, 1, &p.choice, &found);
  api.cublasLtMatmulPreferenceDestroy(pref);
  if (rc != 0 || found == 0) {
    api.cublasLtMatrixLayoutDestroy(p.a);
    api.cublasLtMatrixLayoutDestroy(p.b);
    api.cublasLtMatrixLayoutDestroy(p.c);
    api.cublasLtMatmulDescDestroy(p.desc);
    raise(ErrorCode::DtypeUnsupported, "cuBLASLt has no fp8_e4m3 GEMM for M=" + std::to_string(m) +
                                           " N=" + std::to_string(n) + " K=" + std::to_string(k) + " with " +
                                           std::string(name(out)) + " output on cuda:" + std::to_string(device) + " (" +
                                           (rc != 0 ? api.cublasLtGetStatusName(rc) : "no algorithm found") + ")");
  }
  return plans->emplace(key, p).first->second;
}

}  // namespace

const CublasLtApi& cublaslt() {
  const LoadedCublasLt& s = loaded();
  if (!s.failure.empty()) raise(ErrorCode::DeviceUnavailable, s.failure);
  return s.api;
}

}  // namespace detail

using namespace detail;

std::string cublaslt_library() {
  return cublaslt().library;
}

std::size_t cublaslt_version() {
  return cublaslt().cublasLtGetVersion();
}

void cublaslt_gemm_fp8(int m, int n, int k, DevicePtr a, DevicePtr b_t, DevicePtr c, DType out, const Stream& stream) {
  if (out != DType::fp32 && out != DType::bf16) {
    raise(ErrorCode::DtypeUnsupported, "cublaslt_gemm_fp8 writes fp32 or bf16 results, not " + std::string(name(out)));
  }
  if (m <= 0 || n <= 0 || k <= 0 || m % 16 != 0 || n % 16 != 0 || k % 16 != 0) {
    raise(ErrorCode::ArgumentInvalid,
          "cublaslt_gemm_fp8 needs M, N and K positive multiples of 16 (cuBLASLt's fp8 "
          "rule), got M=" +
              std::to_string(m) + " N=" + std::to_string(n) + " K=" + std::to_string(k));
  }
  const std::pair<const char*, DevicePtr> pointers[] = {{"A", a}, {"B", b_t}, {"C", c}};
  for (const auto& [what, ptr] : pointers) {
    if (ptr % 16 != 0) {
      raise(ErrorCode::ArgumentInvalid,
            std::string("cublaslt_gemm_fp8: ") + what + " must be 16-byte aligned (cuBLASLt's fp8 rule)");
    }
  }
  const int device = stream.device();
  const DeviceProperties props = device_properties(device);
  if (props.compute_major * 10 + props.compute_minor < 89) {
    raise(ErrorCode::DtypeUnsupported,
          "cuBLASLt's fp8 GEMM needs sm_89 or newer; cuda:" + std::to_string(device) + " is " + props.arch());
  }
  const Plan& p = plan_for(device, m, n, k, out);
  const CublasLtApi& api = cublaslt();
  // The workspace comes from the caching allocator for this stream and goes
  // back right after the GEMM is queued: the allocator hands a block to the
  // same stream only, so the next user is ordered after this GEMM.
  CachingAllocator& allocator = CachingAllocator::for_device(device);
  const std::size_t ws_bytes = p.choice.workspace_size;
  const DevicePtr ws = ws_bytes > 0 ? allocator.allocate(ws_bytes, stream.handle()) : 0;
  const float alpha = 1.0f, beta = 0.0f;
  const cublasStatus rc = api.cublasLtMatmul(
      handle_for(device), p.desc, &alpha, reinterpret_cast<const void*>(b_t), p.a, reinterpret_cast<const void*>(a),
      p.b, &beta, reinterpret_cast<const void*>(c), p.c, reinterpret_cast<void*>(c), p.c, &p.choice.algo,
      reinterpret_cast<void*>(ws), ws_bytes, static_cast<CUstream>(stream.handle()));
  if (ws_bytes > 0) allocator.release(ws);
  check_status(rc, "cublasLtMatmul");
}

}  // namespace tessera::cuda
