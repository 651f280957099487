// The CUDA runtime layer: on a machine without a GPU every entry point must
// raise a clear DeviceError (never crash); with one, memory, copies, NVRTC,
// launch, streams/events, graphs, tensors on cuda:N and the cuBLAS baseline
// are checked against hand-computed values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "tessera/backends/cuda/cuda_backend.h"
#include "tessera/runtime/cuda.h"
#include "tessera/runtime/tensor.h"
#include "tessera/support/error.h"

namespace tessera {
namespace {

namespace cu = tessera::cuda;

#define SKIP_WITHOUT_GPU() \
  if (!cu::available()) GTEST_SKIP() << "no CUDA device: " << cu::unavailable_reason()
#define SKIP_WITH_GPU() \
  if (cu::available()) GTEST_SKIP() << "a CUDA device is present; the no-GPU error paths cannot be exercised"

bool nvrtc_present() {
  try {
    cu::nvrtc_version();
    return true;
  } catch (const Error&) {
    return false;
  }
}

// Runs `fn` and checks it raised DeviceError(DeviceUnavailable) with a reason.
template <typename Fn>
void expect_unavailable(Fn fn, const char* what) {
  try {
    fn();
    ADD_FAILURE() << what << " did not raise";
  } catch (const DeviceError& e) {
    EXPECT_EQ(e.code(), ErrorCode::DeviceUnavailable) << what;
    // "CUDA is unavailable: <why>" (or NVRTC's / cuBLAS's own reason where those are missing too).
    EXPECT_NE(e.message().find("unavailable: "), std::string::npos) << what << ": " << e.message();
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << " raised the wrong kind of error: " << e.what();
  }
}

// ---- no GPU ------------------------------------------------------------------------

TEST(CudaNoGpu, ReportsWhyUnavailable) {
  SKIP_WITH_GPU();
  EXPECT_FALSE(cu::available());
  EXPECT_FALSE(cu::unavailable_reason().empty());
}

TEST(CudaNoGpu, EveryEntryPointRaisesDeviceUnavailable) {
  SKIP_WITH_GPU();
  expect_unavailable([] { cu::device_count(); }, "device_count");
  expect_unavailable([] { cu::device_properties(0); }, "device_properties");
  expect_unavailable([] { cu::synchronize(0); }, "synchronize");
  expect_unavailable([] { cu::memory_info(0); }, "memory_info");
  expect_unavailable([] { cu::Stream s(0); }, "Stream");
  expect_unavailable([] { cu::Event e(0); }, "Event");
  expect_unavailable([] { cu::device_malloc(0, 16); }, "device_malloc");
  expect_unavailable([] { cu::device_free(0, 0x1000); }, "device_free");
  expect_unavailable([] { cu::CachingAllocator::for_device(0); }, "CachingAllocator::for_device");
  expect_unavailable([] { cu::allocate_shared(0, 16); }, "allocate_shared");
  char buf[4] = {};
  expect_unavailable([&] { cu::copy_to_device(0, 0x1000, buf, 4); }, "copy_to_device");
  expect_unavailable([&] { cu::copy_to_host(0, buf, 0x1000, 4); }, "copy_to_host");
  expect_unavailable([] { cu::copy_device_to_device(0, 0x1000, 0x2000, 4); }, "copy_device_to_device");
  expect_unavailable([&] { cu::Module::load_image(0, buf); }, "Module::load_image");
  // compile() without an explicit arch needs the device to pick one.
  expect_unavailable([] { cu::compile("extern \"C\" __global__ void k() {}", "k.cu", 0); }, "compile");
  expect_unavailable([] { cu::cublas_version(0); }, "cublas_version");
  const Tensor host = Tensor::from_values(std::vector<double>{1, 2, 3}, {3}, default_policy(DType::fp32));
  expect_unavailable([&] { host.to("cuda:0"); }, "Tensor::to(cuda:0)");
  expect_unavailable([&] { host.to("cuda"); }, "Tensor::to(cuda)");
}

TEST(CudaNoGpu, EmptyHandlesRaiseInsteadOfCrashing) {
  cu::Function f;
  EXPECT_THROW(f.launch({}, nullptr), ArgumentError);
  EXPECT_THROW(f.set_max_dynamic_shared(1024), ArgumentError);
  cu::Module m;
  EXPECT_THROW(m.function("k"), ArgumentError);
  cu::Graph g;
  EXPECT_EQ(g.node_count(), 0u);
}

TEST(CudaDevices, ParsesDeviceNames) {
  EXPECT_EQ(cu::parse_device("cuda"), 0);
  EXPECT_EQ(cu::parse_device("cuda:0"), 0);
  EXPECT_EQ(cu::parse_device("cuda:12"), 12);
  for (const char* bad : {"gpu", "cuda:", "cuda:x", "cuda:-1", "cuda:1a", "CUDA:0", ""}) {
    EXPECT_THROW(cu::parse_device(bad), ArgumentError) << bad;
  }
}

TEST(CudaTensor, HostDeviceNamesAndErrors) {
  const Tensor t = Tensor::from_values(std::vector<double>{1, 2}, {2}, default_policy(DType::fp32));
  EXPECT_EQ(t.to("cpu").device(), "cpu");
  EXPECT_EQ(t.to("cpu").data(), t.data());  // no copy
  EXPECT_THROW(t.to("tpu:0"), ArgumentError);
}

// ---- NVRTC (needs libnvrtc, not a GPU) ---------------------------------------------

TEST(CudaNvrtc, EmbedsTheNumericsHeader) {
  const auto names = cu::device_header_names();
  ASSERT_FALSE(names.empty());
  const std::string_view text = cu::device_header("tessera/numerics.cuh");
  EXPECT_NE(text.find("namespace device"), std::string_view::npos);
  EXPECT_NE(text.find("encode_f32_rne"), std::string_view::npos);
  // The header must stand alone under NVRTC: no includes at all.
  EXPECT_EQ(text.find("#include"), std::string_view::npos);
  EXPECT_THROW(cu::device_header("tessera/nope.cuh"), ArgumentError);
}

TEST(CudaNvrtc, CompilesForAnExplicitArchWithoutAGpu) {
  if (!nvrtc_present()) GTEST_SKIP() << "NVRTC is not installed here";
  const char* source = R"(
#include "tessera/numerics.cuh"
extern "C" __global__ void to_bf16(const float* x, unsigned* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tessera::device::encode_f32_nearest_even(x[i], tessera::device::kBf16, false);
}
)";
  cu::CompileOptions options;
  options.arch = "sm_90a";
  options.ptx = true;
  const cu::CompiledProgram p = cu::compile(source, "to_bf16.cu", 0, options);
  EXPECT_EQ(p.arch, "sm_90a");
  ASSERT_GT(p.cubin.size(), 4u);
  EXPECT_EQ(std::memcmp(p.cubin.data(),
                        "\x7f"
                        "ELF",
                        4),
            0);  // a cubin is an ELF image
  EXPECT_NE(p.ptx.find(".target sm_90a"), std::string::npos);
  EXPECT_NE(p.ptx.find("to_bf16"), std::string::npos);
  EXPECT_GE(cu::nvrtc_version(), 11000);
}

TEST(CudaNvrtc, CompileErrorsCarryTheLog) {
  if (!nvrtc_present()) GTEST_SKIP() << "NVRTC is not installed here";
  cu::CompileOptions options;
  options.arch = "sm_80";
  try {
    cu::compile("extern \"C\" __global__ void k() { undeclared_name = 1; }", "broken.cu", 0, options);
    FAIL() << "compile did not raise";
  } catch (const CompileError& e) {
    EXPECT_NE(e.message().find("broken.cu"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("undeclared_name"), std::string::npos) << e.message();
  }
  options.arch = "compute_90";
  EXPECT_THROW(cu::compile("", "x.cu", 0, options), ArgumentError);
}

// ---- with a GPU ---------------------------------------------------------------------

const char* kKernels = R"(
extern "C" __global__ void axpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" __global__ void add_one(int* v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) v[i] += 1;
}
)";

TEST(CudaGpu, DeviceProperties) {
  SKIP_WITHOUT_GPU();
  ASSERT_GE(cu::device_count(), 1);
  const cu::DeviceProperties p = cu::device_properties(0);
  EXPECT_FALSE(p.name.empty());
  EXPECT_GT(p.multiprocessors, 0);
  EXPECT_GE(p.max_threads_per_block, 256);
  EXPECT_GT(p.total_memory_bytes, std::size_t{1} << 30);
  if (p.compute_major == 9 && p.compute_minor == 0) {
    EXPECT_EQ(p.arch(), "sm_90a");
  }
  EXPECT_THROW(cu::device_properties(cu::device_count()), DeviceError);
}

TEST(CudaGpu, CachingAllocatorReusesAndCounts) {
  SKIP_WITHOUT_GPU();
  cu::CachingAllocator& a = cu::CachingAllocator::for_device(0);
  a.empty_cache();
  const cu::MemoryStats before = a.stats();
  const cu::DevicePtr p = a.allocate(1000);
  cu::MemoryStats s = a.stats();
  EXPECT_EQ(s.bytes_in_use - before.bytes_in_use, 1024u);  // 512-byte granules
  EXPECT_EQ(s.allocations - before.allocations, 1u);
  EXPECT_EQ(s.device_allocations - before.device_allocations, 1u);
  a.release(p);
  s = a.stats();
  EXPECT_EQ(s.bytes_in_use, before.bytes_in_use);
  EXPECT_EQ(s.bytes_cached, 1024u);
  EXPECT_EQ(s.frees - before.frees, 1u);
  const cu::DevicePtr q = a.allocate(900);  // same granule count: served from the cache
  EXPECT_EQ(q, p);
  s = a.stats();
  EXPECT_EQ(s.cache_hits - before.cache_hits, 1u);
  EXPECT_EQ(s.device_allocations - before.device_allocations, 1u);
  EXPECT_GE(s.peak_in_use, before.bytes_in_use + 1024);
  a.release(q);
  EXPECT_THROW(a.release(q), ArgumentError);  // double release
  a.empty_cache();
  EXPECT_EQ(a.stats().bytes_cached, 0u);
}

TEST(CudaGpu, HugeAllocationRaisesOutOfMemory) {
  SKIP_WITHOUT_GPU();
  try {
    cu::device_malloc(0, std::size_t{1} << 50);
    FAIL() << "a 1 PiB allocation succeeded";
  } catch (const OutOfMemoryError& e) {
    EXPECT_NE(e.message().find("out of memory"), std::string::npos) << e.message();
  }
}

TEST(CudaGpu, CopiesRoundTrip) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(7);
  std::vector<std::uint32_t> host(100000);
  for (auto& v : host) v = rng();
  auto buffer = cu::allocate_shared(0, host.size() * 4);
  auto other = cu::allocate_shared(0, host.size() * 4);
  const auto dev = reinterpret_cast<cu::DevicePtr>(buffer.get());
  const auto dev2 = reinterpret_cast<cu::DevicePtr>(other.get());
  cu::copy_to_device(0, dev, host.data(), host.size() * 4);
  cu::copy_device_to_device(0, dev2, dev, host.size() * 4);
  std::vector<std::uint32_t> back(host.size(), 0xDEADBEEF);
  cu::copy_to_host(0, back.data(), dev2, back.size() * 4);
  EXPECT_EQ(back, host);
}

TEST(CudaGpu, CompileLaunchAndTime) {
  SKIP_WITHOUT_GPU();
  const cu::Module module = cu::Module::load(0, cu::compile(kKernels, "kernels.cu", 0));
  const cu::Function axpy = module.function("axpy");
  const int n = 5000;
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i) * 0.5f;
    y[i] = static_cast<float>(n - i);
  }
  auto dx = cu::allocate_shared(0, n * 4), dy = cu::allocate_shared(0, n * 4);
  const auto px = reinterpret_cast<cu::DevicePtr>(dx.get()), py = reinterpret_cast<cu::DevicePtr>(dy.get());
  cu::copy_to_device(0, px, x.data(), n * 4);
  cu::copy_to_device(0, py, y.data(), n * 4);
  cu::Stream stream(0);
  cu::Event start(0), stop(0);
  start.record(stream);
  const unsigned blocks = (n + 255) / 256;
  axpy({.grid = {blocks}, .block = {256}, .stream = &stream}, 3.0f, px, py, n);
  stop.record(stream);
  EXPECT_GE(cu::elapsed_ms(start, stop), 0.0f);
  stream.synchronize();
  EXPECT_TRUE(stream.idle());
  std::vector<float> out(n);
  cu::copy_to_host(0, out.data(), py, n * 4);
  for (int i = 0; i < n; ++i) ASSERT_EQ(out[i], 3.0f * (static_cast<float>(i) * 0.5f) + static_cast<float>(n - i)) << i;

  EXPECT_THROW(module.function("missing_kernel"), DeviceError);
  try {  // more threads per block than any GPU allows
    axpy({.grid = {1}, .block = {4096}, .stream = &stream}, 1.0f, px, py, n);
    FAIL() << "an invalid launch did not raise";
  } catch (const DeviceError& e) {
    EXPECT_NE(e.message().find("CUDA_ERROR_INVALID_VALUE"), std::string::npos) << e.message();
  }
  EXPECT_THROW(axpy({.grid = {0}, .block = {1}}, 1.0f, px, py, n), ArgumentError);
}

TEST(CudaGpu, GraphCaptureAndReplay) {
  SKIP_WITHOUT_GPU();
  const cu::Module module = cu::Module::load(0, cu::compile(kKernels, "kernels.cu", 0));
  const cu::Function add_one = module.function("add_one");
  const int n = 1000;
  std::vector<int> v(n);
  for (int i = 0; i < n; ++i) v[i] = i;
  auto buffer = cu::allocate_shared(0, n * 4);
  const auto p = reinterpret_cast<cu::DevicePtr>(buffer.get());
  cu::copy_to_device(0, p, v.data(), n * 4);
  cu::Stream stream(0);
  cu::Graph graph;
  {
    cu::GraphCapture capture(stream);
    for (int k = 0; k < 3; ++k) add_one({.grid = {4}, .block = {256}, .stream = &stream}, p, n);
    graph = capture.end();
  }
  EXPECT_EQ(graph.node_count(), 3u);
  // Capturing runs nothing: the values are unchanged until the replays.
  stream.synchronize();
  std::vector<int> out(n);
  cu::copy_to_host(0, out.data(), p, n * 4);
  EXPECT_EQ(out, v);
  for (int r = 0; r < 5; ++r) graph.replay(stream);
  stream.synchronize();
  cu::copy_to_host(0, out.data(), p, n * 4);
  for (int i = 0; i < n; ++i) ASSERT_EQ(out[i], i + 15) << i;
}

TEST(CudaGpu, KernelGraphCopiesAndCapturedWork) {
  // copy a -> b, captured work (add_one on b), copy b -> c, and a pitched
  // copy of columns 2..4 of a (as 4 rows of 10) -> d; then the copies'
  // addresses move, and only the new buffers change.
  SKIP_WITHOUT_GPU();
  const cu::Module module = cu::Module::load(0, cu::compile(kKernels, "kernels.cu", 0));
  const cu::Function add_one = module.function("add_one");
  const int n = 40;
  std::vector<int> v(n), w(n);
  for (int i = 0; i < n; ++i) v[i] = i, w[i] = 100 + i;
  std::vector<std::shared_ptr<void>> held;
  auto buffer = [&](const std::vector<int>* init) {
    held.push_back(cu::allocate_shared(0, n * 4));
    const auto p = reinterpret_cast<cu::DevicePtr>(held.back().get());
    cu::copy_to_device(0, p, (init ? *init : std::vector<int>(n, -1)).data(), n * 4);
    return p;
  };
  const cu::DevicePtr a = buffer(&v), a2 = buffer(&w), b = buffer(nullptr), c = buffer(nullptr), c2 = buffer(nullptr),
                      d = buffer(nullptr);
  cu::KernelGraph graph(0);
  graph.add_copy({b, 0, a, 0, n * 4, 1});
  EXPECT_EQ(cu::WorkCapture::active(0), nullptr);
  cu::CapturedWork work;
  {
    cu::WorkCapture capture(0);
    EXPECT_EQ(cu::WorkCapture::active(0), &capture);
    EXPECT_EQ(cu::WorkCapture::active(), &capture);
    EXPECT_EQ(cu::WorkCapture::active(1), nullptr);
    add_one({.grid = {1}, .block = {64}, .stream = &capture.stream()}, b, n);
    work = capture.end();
    EXPECT_EQ(cu::WorkCapture::active(0), nullptr);
  }
  graph.add_work(work);
  graph.add_copy({c, 0, b, 0, n * 4, 1});
  graph.add_copy({d, 12, a + 8, 40, 12, 4});
  graph.instantiate();
  std::vector<int> out(n);
  cu::copy_to_host(0, out.data(), b, n * 4);
  EXPECT_EQ(out, std::vector<int>(n, -1));  // capturing ran nothing
  graph.launch(nullptr);
  cu::copy_to_host(0, out.data(), c, n * 4);
  for (int i = 0; i < n; ++i) ASSERT_EQ(out[i], i + 1) << i;
  cu::copy_to_host(0, out.data(), d, n * 4);
  for (int r = 0; r < 4; ++r)
    for (int k = 0; k < 3; ++k) ASSERT_EQ(out[r * 3 + k], 10 * r + 2 + k) << r << "," << k;
  EXPECT_EQ(out[12], -1);
  graph.set_copy(0, {b, 0, a2, 0, n * 4, 1});
  graph.set_copy(2, {c2, 0, b, 0, n * 4, 1});
  graph.launch(nullptr);
  cu::copy_to_host(0, out.data(), c2, n * 4);
  for (int i = 0; i < n; ++i) ASSERT_EQ(out[i], 101 + i) << i;
  cu::copy_to_host(0, out.data(), c, n * 4);
  for (int i = 0; i < n; ++i) ASSERT_EQ(out[i], i + 1) << i;
  // A copy node keeps its extents; a launch node is not a copy.
  EXPECT_THROW(graph.set_copy(0, {b, 0, a2, 0, 8, 1}), Error);
  EXPECT_THROW(graph.set_copy(1, {b, 0, a2, 0, n * 4, 1}), Error);
}

TEST(CudaGpu, TensorsMoveToTheDeviceAndBack) {
  SKIP_WITHOUT_GPU();
  std::vector<double> values;
  for (int i = 0; i < 24; ++i) values.push_back(0.25 * i - 2.0);
  for (DType d : {DType::fp32, DType::bf16, DType::fp8_e4m3, DType::fp4_e2m1, DType::fp6_e3m2, DType::int4}) {
    const Tensor host = Tensor::from_values(values, {4, 6}, default_policy(d));
    const Tensor dev = host.to("cuda:0");
    EXPECT_EQ(dev.device(), "cuda:0");
    EXPECT_EQ(dev.shape(), host.shape());
    EXPECT_THROW(dev.to_values(), DeviceError);
    EXPECT_THROW(dev.codes(), DeviceError);
    EXPECT_EQ(dev.to("cpu").codes(), host.codes()) << name(d);
    // A transposed view made on the device comes back with the same elements.
    EXPECT_EQ(dev.permute({1, 0}).to("cpu").codes(), host.permute({1, 0}).codes()) << name(d);
    EXPECT_EQ(dev.permute({1, 0}).contiguous().to("cpu").codes(), host.permute({1, 0}).codes()) << name(d);
  }
  const cu::MemoryStats s = cu::CachingAllocator::for_device(0).stats();
  EXPECT_GT(s.allocations, 0u);
  const Tensor t = Tensor::from_values(values, {24}, default_policy(DType::fp32)).to("cuda");
  EXPECT_EQ(t.device(), "cuda:0");
  EXPECT_THROW(t.data(), DeviceError);
  EXPECT_NE(t.device_data(), nullptr);
  EXPECT_THROW(t.to("cuda:" + std::to_string(cu::device_count())), DeviceError);
}

TEST(CudaGpu, CublasGemmMatchesFloat64) {
  SKIP_WITHOUT_GPU();
  const int m = 33, n = 47, k = 65;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<float> a(m * k), b(k * n);
  for (auto& v : a) v = uni(rng);
  for (auto& v : b) v = uni(rng);
  auto da = cu::allocate_shared(0, a.size() * 4), db = cu::allocate_shared(0, b.size() * 4),
       dc = cu::allocate_shared(0, m * n * 4);
  const auto pa = reinterpret_cast<cu::DevicePtr>(da.get()), pb = reinterpret_cast<cu::DevicePtr>(db.get()),
             pc = reinterpret_cast<cu::DevicePtr>(dc.get());
  cu::copy_to_device(0, pa, a.data(), a.size() * 4);
  cu::copy_to_device(0, pb, b.data(), b.size() * 4);
  std::vector<float> c(m * n, std::nanf(""));
  cu::copy_to_device(0, pc, c.data(), c.size() * 4);  // poisoned
  cu::Stream stream(0);
  cu::cublas_gemm(DType::fp32, m, n, k, pa, pb, pc, stream);
  stream.synchronize();
  cu::copy_to_host(0, c.data(), pc, c.size() * 4);
  double err = 0, ref_norm = 0;
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double ref = 0;
      for (int p = 0; p < k; ++p) ref += static_cast<double>(a[i * k + p]) * b[p * n + j];
      err += (c[i * n + j] - ref) * (c[i * n + j] - ref);
      ref_norm += ref * ref;
    }
  }
  EXPECT_LT(std::sqrt(err / ref_norm), 1e-5);  // fp32 (tf32 would land near 3e-4)
  EXPECT_GT(cu::cublas_version(0), 0);
  EXPECT_THROW(cu::cublas_gemm(DType::fp8_e4m3, m, n, k, pa, pb, pc, stream), DtypeError);
  EXPECT_THROW(cu::cublas_gemm(DType::fp32, 0, n, k, pa, pb, pc, stream), ArgumentError);
}

}  // namespace
}  // namespace tessera
