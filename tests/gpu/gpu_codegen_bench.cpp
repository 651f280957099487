// GPU figures of the CUDA code generator, each a ratio measured in one run:
//   - the kernel-language GEMM (bf16 in, fp32 accumulate, tensor cores:
//     wgmma on sm_90a) at M = N = K = 4096 and 8192, TFLOP/s against cuBLAS
//     bf16, for a few tile shapes and pipeline depths, each checked against
//     cuBLAS's result (within bf16 rounding of its bf16 C);
//   - the kernel-language fp8 e4m3 GEMM (A [M, K], B given as Bt [N, K] and
//     read through tile.transpose: wgmma m64nNk32 on sm_90a, fp32 C) at
//     4096^3 and 8192^3, TFLOP/s against cuBLASLt's fp8 GEMM (same layout,
//     fp32 C), each checked against cuBLASLt's result (max |diff| <= 1e-2 *
//     max |ref|: both accumulate exact products, in different orders and
//     with the tensor cores' fp8 accumulation);
//   - a memory-bound kernel (scale.tsr, fp32) in GB/s against a
//     device-to-device copy (bytes read + written);
//   - launch overhead of a tiny kernel through tessera::cuda::launch against
//     a raw cuLaunchKernel of an empty kernel and against CUDA graph replay;
//   - NVRTC first-call compile time against a cached call.
// Inputs are random (Philox on the device), never zeros. Medians of event
// timings after warm-up. Exits 0 without a GPU (saying so).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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

// The kernel-language GEMM: one group computes a BM x BN block of C; the
// k-loop copies A and B blocks into xor-swizzled shared buffers with
// cp_async, software-pipelined `stages` deep by the compiler (prefetch=),
// and tile.mma reads them in place (wgmma on sm_90a, mma.sync before).
std::string gemm_source(int bm, int bn, int bk, int stages, int threads) {
  const int kib = (bm * bk + bk * bn) * 2 * stages / 1024;
  char text[1600];
  std::snprintf(text, sizeof text, R"(
@kernel.autotune(space=dict(BM=[%d], BN=[%d], BK=[%d])) tile[(%d,)] shared(%d_KiB)
def gemm_bf16(A: bf16[M, K], B: bf16[K, N], C: mut f32[M, N]):
    tiles_n = (N + BN - 1) // BN
    bm = (group_linear_id() // tiles_n) * BM
    bn = (group_linear_id() %% tiles_n) * BN
    a = tshared.alloc[bf16]((BM, BK), swizzle="xor")
    b = tshared.alloc[bf16]((BK, BN), swizzle="xor")
    acc = tile.zeros((BM, BN), f32)
    for k in tile.range(K, step=BK, prefetch=%d):
        cp_async.shared.global(a, A[bm:bm+BM, k:k+BK])
        cp_async.shared.global(b, B[k:k+BK, bn:bn+BN])
        tbarrier()
        acc = tile.mma(tile.load(a), tile.load(b), acc=acc)
    tile.store(C, rows=(bm, BM), cols=(bn, BN), value=acc)
)",
                bm, bn, bk, threads, kib, stages);
  return text;
}

// The fp8 GEMM: B given transposed (Bt [N, K], cuBLASLt's fp8 layout);
// tile.transpose(tile.load(b)) makes the K-major operand wgmma takes fp8 in.
std::string gemm_fp8_source(int bm, int bn, int bk, int stages, int threads) {
  const int kib = (bm * bk + bn * bk) * stages / 1024 + 1;
  char text[1600];
  std::snprintf(text, sizeof text, R"(
@kernel.autotune(space=dict(BM=[%d], BN=[%d], BK=[%d])) tile[(%d,)] shared(%d_KiB)
def gemm_fp8(A: fp8_e4m3[M, K], Bt: fp8_e4m3[N, K], C: mut f32[M, N]):
    tiles_n = (N + BN - 1) // BN
    bm = (group_linear_id() // tiles_n) * BM
    bn = (group_linear_id() %% tiles_n) * BN
    a = tshared.alloc[fp8_e4m3]((BM, BK), swizzle="xor")
    b = tshared.alloc[fp8_e4m3]((BN, BK), swizzle="xor")
    acc = tile.zeros((BM, BN), f32)
    for k in tile.range(K, step=BK, prefetch=%d):
        cp_async.shared.global(a, A[bm:bm+BM, k:k+BK])
        cp_async.shared.global(b, Bt[bn:bn+BN, k:k+BK])
        tbarrier()
        acc = tile.mma(tile.load(a), tile.transpose(tile.load(b)), acc=acc)
    tile.store(C, rows=(bm, BM), cols=(bn, BN), value=acc)
)",
                bm, bn, bk, threads, kib, stages);
  return text;
}

struct GemmVariant {
  int bm, bn, bk, stages, threads;
  bool tma;  // copies through the bulk tensor copy engine (else cp.async by every thread)
};
// The headline variant first; the others are reported for comparison (the
// headline shape with cp.async copies shows what TMA gains).
const GemmVariant kVariants[] = {{128, 128, 64, 3, 256, true},
                                 {128, 128, 64, 3, 256, false},
                                 {128, 256, 64, 3, 256, true},
                                 {128, 256, 64, 4, 256, true}};

const char* kFill = R"(
#include "tessera/numerics.cuh"
extern "C" __global__ void empty() {}
extern "C" __global__ void fill(unsigned char* out, unsigned long long n, unsigned long long seed, int dtype) {
  unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float u = (float)tessera::device::random_bits32(seed, i) * 2.3283064365386963e-10f;
  const unsigned v = tessera::device::encode_f32_nearest_even(2.0f * u - 1.0f, dtype, false);
  if (dtype == tessera::device::kFp32) ((unsigned*)out)[i] = v;
  else if (dtype == tessera::device::kFp8E4m3 || dtype == tessera::device::kFp8E5m2) out[i] = (unsigned char)v;
  else ((unsigned short*)out)[i] = (unsigned short)v;
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
  bool failed = false;
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
    std::vector<cu::CompiledKernel> gemms;
    for (const GemmVariant& v : kVariants) {
      std::vector<tessera::Kernel> gk =
          tessera::kernels_from_source(gemm_source(v.bm, v.bn, v.bk, v.stages, v.threads), "gemm_bf16.tsr");
      auto gspec = gk.at(0).specialize();
      if (gemms.empty()) {
        cu::KernelCompileOptions fresh;
        fresh.use_cache = false;
        const cu::CompiledKernel first = cu::compile_kernel(gspec->func(), fresh);
        const cu::CompiledKernel cached = cu::compile_kernel(gspec->func());
        row("compile gemm: NVRTC vs cached", first.compile_seconds * 1e3, cached.compile_seconds * 1e3, "ms",
            "cached call");
      }
      cu::KernelCompileOptions vo;
      vo.no_tma = !v.tma;
      gemms.push_back(cu::compile_kernel(gspec->func(), vo));
      const bool wg = gemms.back().source.find("tsr::mma_wg") != std::string::npos;
      std::printf("[gpu-bench] gemm variant %dx%dx%d, %d stages, %d threads: %s, %s, %lld bytes of shared memory\n",
                  v.bm, v.bn, v.bk, v.stages, v.threads, wg ? "wgmma" : "mma.sync",
                  gemms.back().tma_maps.empty() ? "cp.async" : "TMA",
                  static_cast<long long>(gemms.back().shared_bytes));
    }
    if (const char* dump = std::getenv("TESSERA_BENCH_DUMP")) {
      // The headline GEMM's CUDA C++, for disassembly on the GPU machine.
      if (std::FILE* f = std::fopen(dump, "w")) {
        std::fputs(gemms.front().source.c_str(), f);
        std::fclose(f);
      }
    }

    // ---- GEMM: each variant against cuBLAS in the same run; results checked against cuBLAS ----
    for (std::int64_t n : {4096, 8192}) {
      Tensor a = random_tensor({n, n}, DType::bf16), b = random_tensor({n, n}, DType::bf16);
      Tensor c = random_tensor({n, n}, DType::fp32);
      auto cb = cu::allocate_shared(0, static_cast<std::size_t>(n * n * 2));
      cu::KernelLaunchOptions lo{.stream = &s, .check_faults = false};
      auto blas = [&] {
        cu::cublas_gemm(DType::bf16, static_cast<int>(n), static_cast<int>(n), static_cast<int>(n),
                        reinterpret_cast<cu::DevicePtr>(a.device_data()),
                        reinterpret_cast<cu::DevicePtr>(b.device_data()), reinterpret_cast<cu::DevicePtr>(cb.get()), s);
      };
      const int reps = n == 4096 ? 20 : 7;
      const double flops = 2.0 * n * n * n;
      std::vector<std::uint16_t> ref(static_cast<std::size_t>(n * n));
      blas();
      s.synchronize();
      cu::copy_to_host(0, ref.data(), reinterpret_cast<cu::DevicePtr>(cb.get()), ref.size() * 2);
      for (std::size_t vi = 0; vi < gemms.size(); ++vi) {
        const GemmVariant& v = kVariants[vi];
        const std::int64_t grid = ((n + v.bm - 1) / v.bm) * ((n + v.bn - 1) / v.bn);
        auto ours = [&] { cu::launch(gemms[vi], grid, {a, b, c}, lo); };
        // Correctness at this size: within bf16 rounding of cuBLAS's bf16 C.
        cu::memset_async(reinterpret_cast<cu::DevicePtr>(c.device_data()), 0xFF, static_cast<std::size_t>(n * n * 4),
                         s);
        ours();
        s.synchronize();
        Tensor h = c.to("cpu");
        const float* got = static_cast<const float*>(h.data());
        double max_err = 0, max_ref = 0;
        for (std::size_t i = 0; i < ref.size(); ++i) {
          const std::uint32_t w32 = static_cast<std::uint32_t>(ref[i]) << 16;
          float w;
          std::memcpy(&w, &w32, 4);
          const double e = std::fabs(static_cast<double>(got[i]) - w);
          max_err = std::isnan(e) ? INFINITY : std::max(max_err, e);
          max_ref = std::max(max_ref, static_cast<double>(std::fabs(w)));
        }
        const bool ok = max_err <= 1e-2 * max_ref;
        for (int i = 0; i < 3; ++i) {
          ours();
          blas();
        }
        const float t_ours = median_ms(s, reps, ours), t_blas = median_ms(s, reps, blas);
        char what[96];
        std::snprintf(what, sizeof what, "gemm bf16->f32 %lld^3 %dx%dx%d s%d%s", static_cast<long long>(n), v.bm, v.bn,
                      v.bk, v.stages, v.tma ? "" : " cp.async");
        row(what, flops / t_ours / 1e9, flops / t_blas / 1e9, "TFLOP/s", "cuBLAS bf16");
        std::printf("[gpu-bench]   check vs cuBLAS: max |diff| %.3g, max |ref| %.3g: %s\n", max_err, max_ref,
                    ok ? "ok" : "WRONG");
        if (!ok) failed = true;
      }
    }

    // ---- fp8 GEMM against cuBLASLt fp8 (sm_89+); results checked against cuBLASLt ----
    if (props.compute_major * 10 + props.compute_minor < 89) {
      std::printf("[gpu-bench] fp8 GEMM skipped: cuBLASLt's fp8 GEMM needs sm_89+, device is %s\n",
                  props.arch().c_str());
    } else {
      const GemmVariant v{128, 128, 128, 3, 256};
      std::vector<tessera::Kernel> fk =
          tessera::kernels_from_source(gemm_fp8_source(v.bm, v.bn, v.bk, v.stages, v.threads), "gemm_fp8.tsr");
      const cu::CompiledKernel fp8 = cu::compile_kernel(fk.at(0).specialize()->func());
      std::printf("[gpu-bench] fp8 gemm %dx%dx%d, %d stages, %d threads: %s, %lld bytes of shared memory\n", v.bm, v.bn,
                  v.bk, v.stages, v.threads, fp8.source.find("tsr::mma_wg") != std::string::npos ? "wgmma" : "scalar",
                  static_cast<long long>(fp8.shared_bytes));
      for (std::int64_t n : {4096, 8192}) {
        Tensor a = random_tensor({n, n}, DType::fp8_e4m3), bt = random_tensor({n, n}, DType::fp8_e4m3);
        Tensor c = random_tensor({n, n}, DType::fp32);
        auto cref = cu::allocate_shared(0, static_cast<std::size_t>(n * n * 4));
        cu::KernelLaunchOptions lo{.stream = &s, .check_faults = false};
        auto lt = [&] {
          cu::cublaslt_gemm_fp8(static_cast<int>(n), static_cast<int>(n), static_cast<int>(n),
                                reinterpret_cast<cu::DevicePtr>(a.device_data()),
                                reinterpret_cast<cu::DevicePtr>(bt.device_data()),
                                reinterpret_cast<cu::DevicePtr>(cref.get()), DType::fp32, s);
        };
        const std::int64_t grid = ((n + v.bm - 1) / v.bm) * ((n + v.bn - 1) / v.bn);
        auto ours = [&] { cu::launch(fp8, grid, {a, bt, c}, lo); };
        std::vector<float> ref(static_cast<std::size_t>(n * n));
        lt();
        s.synchronize();
        cu::copy_to_host(0, ref.data(), reinterpret_cast<cu::DevicePtr>(cref.get()), ref.size() * 4);
        cu::memset_async(reinterpret_cast<cu::DevicePtr>(c.device_data()), 0xFF, static_cast<std::size_t>(n * n * 4),
                         s);
        ours();
        s.synchronize();
        Tensor h = c.to("cpu");
        const float* got = static_cast<const float*>(h.data());
        double max_err = 0, max_ref = 0;
        for (std::size_t i = 0; i < ref.size(); ++i) {
          const double e = std::fabs(static_cast<double>(got[i]) - ref[i]);
          max_err = std::isnan(e) ? INFINITY : std::max(max_err, e);
          max_ref = std::max(max_ref, static_cast<double>(std::fabs(ref[i])));
        }
        const bool ok = max_err <= 1e-2 * max_ref;
        for (int i = 0; i < 3; ++i) {
          ours();
          lt();
        }
        const int reps = n == 4096 ? 20 : 7;
        const double flops = 2.0 * n * n * n;
        const float t_ours = median_ms(s, reps, ours), t_lt = median_ms(s, reps, lt);
        char what[96];
        std::snprintf(what, sizeof what, "gemm fp8e4m3->f32 %lld^3 %dx%dx%d s%d", static_cast<long long>(n), v.bm, v.bn,
                      v.bk, v.stages);
        row(what, flops / t_ours / 1e9, flops / t_lt / 1e9, "TFLOP/s", "cuBLASLt fp8 f32 out");
        std::printf("[gpu-bench]   check vs cuBLASLt: max |diff| %.3g, max |ref| %.3g: %s\n", max_err, max_ref,
                    ok ? "ok" : "WRONG");
        if (!ok) failed = true;
      }
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
  if (failed) std::printf("[gpu-bench] FAILED: a GEMM disagrees with cuBLAS / cuBLASLt\n");
  return failed ? 1 : 0;
}
