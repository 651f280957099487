// Baseline figures of the CUDA runtime layer on the machine it runs on:
// NVRTC compile time, launch overhead (raw launches and CUDA graph replay),
// the caching allocator against the driver's allocator, device-to-device copy
// bandwidth, cuBLAS bf16 GEMM throughput (the ceiling the kernel-language
// GEMM is measured against) and cuBLASLt fp8_e4m3 GEMM throughput (the same
// for fp8 operands). Inputs are random, never zeros. Prints a table;
// exits 0 without a GPU (saying so).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "tessera/runtime/cuda.h"
#include "tessera/support/error.h"

namespace cu = tessera::cuda;

namespace {

const char* kSource = R"(
#include "tessera/numerics.cuh"
extern "C" __global__ void empty() {}
// Random bf16 in [-1, 1) from Philox, so products are timed on real data.
extern "C" __global__ void fill_bf16(unsigned short* out, unsigned long long n, unsigned long long seed) {
  unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float u = (float)tessera::device::random_bits32(seed, i) * 2.3283064365386963e-10f;  // [0, 1)
  out[i] = (unsigned short)tessera::device::encode_f32_nearest_even(2.0f * u - 1.0f, tessera::device::kBf16, false);
}
// Random fp8_e4m3 in [-1, 1), likewise.
extern "C" __global__ void fill_e4m3(unsigned char* out, unsigned long long n, unsigned long long seed) {
  unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float u = (float)tessera::device::random_bits32(seed, i) * 2.3283064365386963e-10f;  // [0, 1)
  out[i] = (unsigned char)tessera::device::encode_f32_nearest_even(2.0f * u - 1.0f, tessera::device::kFp8E4m3, false);
}
)";

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void row(const char* what, double value, const char* unit, const std::string& note = "") {
  std::printf("[gpu-figures] %-44s %12.3f %-8s %s\n", what, value, unit, note.c_str());
}

// Median of `reps` timings of `body` (milliseconds, device events on `stream`).
template <typename Body>
float median_ms(const cu::Stream& stream, int reps, Body body) {
  std::vector<float> times;
  cu::Event start(stream.device()), stop(stream.device());
  for (int r = 0; r < reps; ++r) {
    start.record(stream);
    body();
    stop.record(stream);
    times.push_back(cu::elapsed_ms(start, stop));
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

int main() {
  if (!cu::available()) {
    std::printf("[gpu-figures] skipped: %s\n", cu::unavailable_reason().c_str());
    return 0;
  }
  try {
    const cu::DeviceProperties props = cu::device_properties(0);
    std::printf("[gpu-figures] device: %s (%s, %d SMs)\n", props.name.c_str(), props.arch().c_str(),
                props.multiprocessors);
    auto t0 = std::chrono::steady_clock::now();
    const cu::CompiledProgram program = cu::compile(kSource, "figures.cu", 0);
    row("NVRTC compile (numerics header + 3 kernels)", seconds_since(t0) * 1e3, "ms");
    t0 = std::chrono::steady_clock::now();
    const cu::Module module = cu::Module::load(0, program);
    row("module load (cubin)", seconds_since(t0) * 1e3, "ms");
    const cu::Function empty = module.function("empty");
    const cu::Function fill = module.function("fill_bf16");
    const cu::Function fill8 = module.function("fill_e4m3");
    cu::Stream stream(0);

    // Launch overhead: back-to-back empty kernels, and the same from a graph.
    const int launches = 1000;
    for (int i = 0; i < 100; ++i) empty({.grid = {1}, .block = {32}, .stream = &stream});
    const float raw = median_ms(stream, 11, [&] {
      for (int i = 0; i < launches; ++i) empty({.grid = {1}, .block = {32}, .stream = &stream});
    });
    row("empty kernel, cuLaunchKernel", raw * 1e3f / launches, "us/launch");
    cu::Graph graph;
    {
      cu::GraphCapture capture(stream);
      for (int i = 0; i < launches; ++i) empty({.grid = {1}, .block = {32}, .stream = &stream});
      graph = capture.end();
    }
    graph.replay(stream);
    const float replay = median_ms(stream, 11, [&] { graph.replay(stream); });
    row("empty kernel, CUDA graph replay", replay * 1e3f / launches, "us/launch",
        std::to_string(graph.node_count()) + " nodes");

    // Allocator: cached allocate/release against cuMemAlloc/cuMemFree.
    cu::CachingAllocator& alloc = cu::CachingAllocator::for_device(0);
    const int pairs = 20000;
    t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < pairs; ++i) alloc.release(alloc.allocate(std::size_t{1} << 20));
    row("caching allocator, 1 MiB alloc+free", seconds_since(t0) * 1e9 / pairs, "ns");
    t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 2000; ++i) cu::device_free(0, cu::device_malloc(0, std::size_t{1} << 20));
    row("cuMemAlloc+cuMemFree, 1 MiB", seconds_since(t0) * 1e9 / 2000, "ns");
    const cu::MemoryStats st = alloc.stats();
    row("allocator cache hits", static_cast<double>(st.cache_hits), "",
        "of " + std::to_string(st.allocations) + " allocations, " + std::to_string(st.device_allocations) +
            " driver allocations");

    // Device-to-device copy: bytes read + written per second.
    const std::size_t copy_bytes = std::size_t{2} << 30;
    auto src = cu::allocate_shared(0, copy_bytes), dst = cu::allocate_shared(0, copy_bytes);
    const auto ps = reinterpret_cast<cu::DevicePtr>(src.get()), pd = reinterpret_cast<cu::DevicePtr>(dst.get());
    fill({.grid = {static_cast<unsigned>(copy_bytes / 2 / 256)}, .block = {256}, .stream = &stream}, ps,
         static_cast<unsigned long long>(copy_bytes / 2), 1ull);
    const float copy_ms = median_ms(stream, 9, [&] { cu::copy_device_to_device_async(pd, ps, copy_bytes, stream); });
    row("device-to-device copy, 2 GiB", 2.0 * copy_bytes / (copy_ms * 1e-3) / 1e9, "GB/s", "read + write");
    src.reset();
    dst.reset();

    // cuBLAS bf16 GEMM (fp32 accumulation) on random operands.
    for (int n : {4096, 8192}) {
      const std::size_t elems = static_cast<std::size_t>(n) * n;
      auto a = cu::allocate_shared(0, elems * 2), b = cu::allocate_shared(0, elems * 2),
           c = cu::allocate_shared(0, elems * 2);
      const auto pa = reinterpret_cast<cu::DevicePtr>(a.get()), pb = reinterpret_cast<cu::DevicePtr>(b.get()),
                 pc = reinterpret_cast<cu::DevicePtr>(c.get());
      const unsigned blocks = static_cast<unsigned>((elems + 255) / 256);
      fill({.grid = {blocks}, .block = {256}, .stream = &stream}, pa, static_cast<unsigned long long>(elems), 2ull);
      fill({.grid = {blocks}, .block = {256}, .stream = &stream}, pb, static_cast<unsigned long long>(elems), 3ull);
      for (int w = 0; w < 3; ++w) cu::cublas_gemm(tessera::DType::bf16, n, n, n, pa, pb, pc, stream);
      const float ms =
          median_ms(stream, 10, [&] { cu::cublas_gemm(tessera::DType::bf16, n, n, n, pa, pb, pc, stream); });
      const std::string what = "cuBLAS bf16 GEMM " + std::to_string(n) + "^3";
      row(what.c_str(), 2.0 * n * n * static_cast<double>(n) / (ms * 1e-3) / 1e12, "TFLOP/s",
          std::to_string(ms) + " ms median of 10");
    }

    // cuBLASLt fp8_e4m3 GEMM (TN: B given as [N, K]), fp32 accumulation, bf16
    // output (the usual fp8 GEMM output), on random operands.
    const bool fp8 = props.compute_major * 10 + props.compute_minor >= 89;
    if (!fp8)
      std::printf("[gpu-figures] cuBLASLt fp8 GEMM skipped: needs sm_89+, device is %s\n", props.arch().c_str());
    for (int n : {4096, 8192}) {
      if (!fp8) break;
      const std::size_t elems = static_cast<std::size_t>(n) * n;
      auto a = cu::allocate_shared(0, elems), b = cu::allocate_shared(0, elems), c = cu::allocate_shared(0, elems * 2);
      const auto pa = reinterpret_cast<cu::DevicePtr>(a.get()), pb = reinterpret_cast<cu::DevicePtr>(b.get()),
                 pc = reinterpret_cast<cu::DevicePtr>(c.get());
      const unsigned blocks = static_cast<unsigned>((elems + 255) / 256);
      fill8({.grid = {blocks}, .block = {256}, .stream = &stream}, pa, static_cast<unsigned long long>(elems), 4ull);
      fill8({.grid = {blocks}, .block = {256}, .stream = &stream}, pb, static_cast<unsigned long long>(elems), 5ull);
      for (int w = 0; w < 3; ++w) cu::cublaslt_gemm_fp8(n, n, n, pa, pb, pc, tessera::DType::bf16, stream);
      const float ms =
          median_ms(stream, 10, [&] { cu::cublaslt_gemm_fp8(n, n, n, pa, pb, pc, tessera::DType::bf16, stream); });
      const std::string what = "cuBLASLt fp8_e4m3 GEMM " + std::to_string(n) + "^3";
      row(what.c_str(), 2.0 * n * n * static_cast<double>(n) / (ms * 1e-3) / 1e12, "TFLOP/s",
          std::to_string(ms) + " ms median of 10, bf16 out");
    }
    cu::synchronize(0);
  } catch (const tessera::Error& e) {
    std::printf("[gpu-figures] FAILED: %s\n", e.what());
    return 1;
  }
  return 0;
}
