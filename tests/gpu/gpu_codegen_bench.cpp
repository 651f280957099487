// GPU figures of the CUDA code generator, each a ratio measured in one run:
//   - the kernel-language GEMM (bf16 in, fp32 accumulate, tensor cores via
//     mma.sync) at M = N = K = 4096 and 8192, TFLOP/s against cuBLAS bf16;
//   - a memory-bound kernel (scale.tsr, fp32) in GB/s against a
//     device-to-device copy (bytes read + written);
//   - launch overhead of a tiny kernel through tessera::cuda::launch against
//     a raw cuLaunchKernel of an empty kernel and against CUDA graph replay;
//   - NVRTC first-call compile time against a cached call.
// Inputs are random (Philox on the device), never zeros. Medians of event
// timings after warm-up. Exits 0 without a GPU (saying so).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "tessera/backends/cuda/cuda_backend.h"
#include "tessera/runtime/cuda.h"
#include "tessera/runtime/kernel.h"
#include "tessera/support/error.h"

namespace cu = tessera::cuda;
using tessera::DType;
using tessera::Tensor;

namespace {

const char* kGemm = R"(
@kernel.autotune(space=dict(BM=[128], BN=[128], BK=[64])) tile[(256,)] shared(64_KiB)
def gemm_bf16(A: bf16[M, K], B: bf16[K, N], C: mut f32[M, N]):
    tiles_n = (N + BN - 1) // BN
    bm = (group_linear_id() // tiles_n) * BM
    bn = (group_linear_id() % tiles_n) * BN
    a0 = tshared.alloc[bf16]((BM, BK), swizzle="xor")
    a1 = tshared.alloc[bf16]((BM, BK), swizzle="xor")
    b0 = tshared.alloc[bf16]((BK, BN), swizzle="xor")
    b1 = tshared.alloc[bf16]((BK, BN), swizzle="xor")
    acc = tile.zeros((BM, BN), f32)
    cp_async.shared.global(a0, A[bm:bm+BM, 0:BK])
    cp_async.shared.global(b0, B[0:BK, bn:bn+BN])
    for k in tile.range(K, step=BK):
        tbarrier()
        cp_async.shared.global(a1, A[bm:bm+BM, k+BK:k+BK+BK])
        cp_async.shared.global(b1, B[k+BK:k+BK+BK, bn:bn+BN])
        acc = tile.mma(tile.load(a0), tile.load(b0), acc=acc)
        a0, a1 = a1, a0
        b0, b1 = b1, b0
    tile.store(C, rows=(bm, BM), cols=(bn, BN), value=acc)
)";

const char* kFill = R"(
#include "tessera/numerics.cuh"
extern "C" __global__ void empty() {}
extern "C" __global__ void fill(unsigned char* out, unsigned long long n, unsigned long long seed, int dtype) {
  unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float u = (float)tessera::device::random_bits32(seed, i) * 2.3283064365386963e-10f;
  const unsigned v = tessera::device::encode_f32_nearest_even(2.0f * u - 1.0f, dtype, false);
  if (dtype == tessera::device::kFp32) ((unsigned*)out)[i] = v; else ((unsigned short*)out)[i] = (unsigned short)v;
}
)";

tessera::NumericsPolicy policy(DType d) {
  tessera::NumericsPolicy p;
  p.storage = d;
  p.accum = tessera::default_accumulation(d);
  return p;
}

template <typename Body>
float median_ms(const cu::Stream& s, int reps, Body body) {
  std::vector<float> t;
  cu::Event a(0), b(0);
  for (int r = 0; r < reps; ++r) {
    a.record(s);
    body();
    b.record(s);
    t.push_back(cu::elapsed_ms(a, b));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void row(const char* what, double ours, double base, const char* unit, const char* base_name) {
  std::printf("[gpu-bench] %-34s %10.2f %-7s %-22s %10.2f %-7s ratio %.3f\n", what, ours, unit, base_name, base, unit,
              base != 0 ? ours / base : 0.0);
}

}  // namespace

int main() {
  if (!cu::available()) {
    std::printf("[gpu-bench] skipped: %s\n", cu::unavailable_reason().c_str());
    return 0;
  }
  try {
    const cu::DeviceProperties props = cu::device_properties(0);
    std::printf("[gpu-bench] device: %s (%s, %d SMs)\n", props.name.c_str(), props.arch().c_str(),
                props.multiprocessors);
    cu::Stream s(0);
    const cu::Module aux = cu::Module::load(0, cu::compile(kFill, "fill.cu", 0));
    const cu::Function fill = aux.function("fill");
    const cu::Function empty = aux.function("empty");
    unsigned long long seed =
        static_cast<unsigned long long>(std::chrono::steady_clock::now().time_since_epoch().count());
    auto random_tensor = [&](std::vector<std::int64_t> shape, DType d) {
      std::int64_t n = 1;
      for (auto x : shape) n *= x;
      auto mem = cu::allocate_shared(0, static_cast<std::size_t>(n) * tessera::storage_bytes(d));
      const unsigned blocks = static_cast<unsigned>((n + 255) / 256);
      fill({.grid = {blocks}, .block = {256}, .stream = &s}, mem.get(), static_cast<unsigned long long>(n), ++seed,
           static_cast<int>(d));
      return Tensor::wrap_device(mem.get(), shape, tessera::contiguous_strides(shape), policy(d), "cuda:0", mem);
    };

    // ---- NVRTC compile: first call vs cached ----
    std::vector<tessera::Kernel> gk = tessera::kernels_from_source(kGemm, "gemm_bf16.tsr");
    auto gspec = gk.at(0).specialize();
    cu::KernelCompileOptions fresh;
    fresh.use_cache = false;
    const cu::CompiledKernel gemm_first = cu::compile_kernel(gspec->func(), fresh);
    const cu::CompiledKernel gemm = cu::compile_kernel(gspec->func());
    row("compile gemm: NVRTC vs cached", gemm_first.compile_seconds * 1e3, gemm.compile_seconds * 1e3, "ms",
        "cached call");

    // ---- GEMM ----
    for (std::int64_t n : {4096, 8192}) {
      Tensor a = random_tensor({n, n}, DType::bf16), b = random_tensor({n, n}, DType::bf16);
      Tensor c = random_tensor({n, n}, DType::fp32);
      auto cb = cu::allocate_shared(0, static_cast<std::size_t>(n * n * 2));
      const std::int64_t grid = (n / 128) * (n / 128);
      cu::KernelLaunchOptions lo{.stream = &s, .check_faults = false};
      auto ours = [&] { cu::launch(gemm, grid, {a, b, c}, lo); };
      auto blas = [&] {
        cu::cublas_gemm(DType::bf16, static_cast<int>(n), static_cast<int>(n), static_cast<int>(n),
                        reinterpret_cast<cu::DevicePtr>(a.device_data()),
                        reinterpret_cast<cu::DevicePtr>(b.device_data()), reinterpret_cast<cu::DevicePtr>(cb.get()), s);
      };
      for (int i = 0; i < 3; ++i) {
        ours();
        blas();
      }
      const int reps = n == 4096 ? 20 : 7;
      const float t_ours = median_ms(s, reps, ours), t_blas = median_ms(s, reps, blas);
      const double flops = 2.0 * n * n * n;
      char what[64];
      std::snprintf(what, sizeof what, "gemm bf16->f32 %lld^3 TFLOP/s", static_cast<long long>(n));
      row(what, flops / t_ours / 1e9, flops / t_blas / 1e9, "TFLOP/s", "cuBLAS bf16");
    }

    // ---- memory-bound: scale vs device-to-device copy ----
    std::vector<tessera::Kernel> sk =
        tessera::load_kernels(std::string(TESSERA_SOURCE_DIR) + "/tests/conformance/scale.tsr");
    const cu::CompiledKernel scale = cu::compile_kernel(sk.at(0).specialize()->func());
    {
      const std::int64_t n = 64ll << 20;
      Tensor x = random_tensor({n}, DType::fp32), y = random_tensor({n}, DType::fp32);
      cu::KernelLaunchOptions lo{.stream = &s, .check_faults = false};
      auto ours = [&] { cu::launch(scale, -1, {x, y, 1.5}, lo); };
      auto copy = [&] {
        cu::copy_device_to_device_async(reinterpret_cast<cu::DevicePtr>(y.device_data()),
                                        reinterpret_cast<cu::DevicePtr>(x.device_data()),
                                        static_cast<std::size_t>(n) * 4, s);
      };
      for (int i = 0; i < 3; ++i) {
        ours();
        copy();
      }
      const double bytes = 8.0 * n;
      row("scale fp32 64Mi elements GB/s", bytes / median_ms(s, 21, ours) / 1e6, bytes / median_ms(s, 21, copy) / 1e6,
          "GB/s", "device-to-device copy");
    }

    // ---- launch overhead ----
    {
      Tensor x = random_tensor({1}, DType::fp32), y = random_tensor({1}, DType::fp32);
      cu::KernelLaunchOptions lo{.stream = &s, .check_faults = false};
      const int launches = 1000;
      auto ours = [&] {
        for (int i = 0; i < launches; ++i) cu::launch(scale, -1, {x, y, 1.5}, lo);
      };
      auto raw = [&] {
        for (int i = 0; i < launches; ++i) empty({.grid = {1}, .block = {32}, .stream = &s});
      };
      ours();
      raw();
      const float t_ours = median_ms(s, 11, ours) * 1e3f / launches;
      const float t_raw = median_ms(s, 11, raw) * 1e3f / launches;
      cu::GraphCapture cap(s);
      ours();
      cu::Graph g = cap.end();
      g.replay(s);
      const float t_graph = median_ms(s, 11, [&] { g.replay(s); }) * 1e3f / launches;
      row("launch: tessera launch() us/launch", t_ours, t_raw, "us", "raw cuLaunchKernel");
      row("launch: graph replay us/launch", t_graph, t_ours, "us", "tessera launch()");
    }
    s.synchronize();
  } catch (const tessera::Error& e) {
    std::printf("[gpu-bench] FAILED: %s\n", e.what());
    return 1;
  }
  return 0;
}
