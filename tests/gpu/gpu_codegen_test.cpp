// Conformance on the GPU: every kernel of tests/conformance/*.tsr, lowered by
// the front end, runs through the CUDA backend and through the CPU backend on
// the same fresh random inputs; outputs are poisoned (0xFF bytes, a NaN
// pattern no arithmetic produces) before each run on both sides, so an
// unwritten element is caught. Kernels whose accumulation order is the same
// on both backends (all the conformance kernels: lane arithmetic, the scalar
// mma path, the reduce_sum tree) must agree bit for bit; the bf16 tensor-core
// GEMM sums 16 products per hardware step and must agree within a stated
// tolerance (max |gpu - cpu| <= 1e-5 * max |cpu|); so must the pipelined
// GEMMs that take the wgmma path on sm_90a (128x128 and 128x256 blocks,
// ragged shapes). The fp8 e4m3 GEMM with B given as Bt [N, K] and read
// through tile.transpose (wgmma m64nNk32 on sm_90a) must agree within
// 4e-3 * max |cpu|: fp8 wgmma accumulates in fewer bits than fp32; the same
// kernel with bf16 operands (a K-major B) within 1e-5. Skipped without a
// GPU, except the emission checks for sm_90a, which need only NVRTC.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <random>
#include <string>
#include <vector>

#include "tessera/backends/cpu/cpu_backend.h"
#include "tessera/backends/cuda/cuda_backend.h"
#include "tessera/runtime/cuda.h"
#include "tessera/runtime/kernel.h"
#include "tessera/support/error.h"

namespace cu = tessera::cuda;
using tessera::DType;
using tessera::Tensor;

namespace {

tessera::NumericsPolicy policy(DType d) {
  tessera::NumericsPolicy p;
  p.storage = d;
  p.accum = tessera::default_accumulation(d);
  return p;
}

Tensor random_tensor(std::mt19937_64& rng, std::vector<std::int64_t> shape, DType d) {
  std::int64_t n = 1;
  for (auto s : shape) n *= s;
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<double> v(static_cast<std::size_t>(n));
  for (double& x : v) x = u(rng);
  return Tensor::from_values(v, std::move(shape), policy(d));
}

Tensor poisoned(std::vector<std::int64_t> shape, DType d) {
  Tensor t = Tensor::zeros(std::move(shape), policy(d));
  std::memset(t.data(), 0xFF,
              static_cast<std::size_t>(t.numel()) * static_cast<std::size_t>(tessera::storage_bytes(d)));
  return t;
}

// The encodings of a tensor's elements (2- or 4-byte formats), widened.
std::vector<std::uint32_t> bits(const Tensor& t) {
  Tensor h = t.to("cpu");
  const std::size_t es = static_cast<std::size_t>(tessera::storage_bytes(h.dtype()));
  std::vector<std::uint32_t> b(static_cast<std::size_t>(h.numel()), 0);
  const auto* p = static_cast<const unsigned char*>(h.data());
  for (std::size_t i = 0; i < b.size(); ++i) std::memcpy(&b[i], p + i * es, es);
  return b;
}

double value_of(std::uint32_t code, DType d) {
  return tessera::decode_value(code, d);
}

struct Built {
  std::shared_ptr<tessera::KernelSpecialization> spec;
  cu::CompiledKernel gpu;
};

// `arch` overrides the device's (an older target on this GPU, for the paths
// of older GPUs).
Built build(const std::string& text_or_file, bool is_file, const tessera::KernelConstants& c = {},
            const std::string& arch = "") {
  std::vector<tessera::Kernel> ks =
      is_file ? tessera::load_kernels(text_or_file) : tessera::kernels_from_source(text_or_file, "gemm_bf16.tsr");
  Built r;
  r.spec = ks.at(0).jit(c).specialize();
  cu::KernelCompileOptions o;
  o.arch = arch;
  r.gpu = cu::compile_kernel(r.spec->func(), o);
  return r;
}

std::string conf(const std::string& f) {
  return std::string(TESSERA_SOURCE_DIR) + "/tests/conformance/" + f;
}

// Runs on both backends: `inputs` are copied to the device as given; the
// output (index `out`) is poisoned on both sides first, or, when `inout`,
// copied as given.
// Not bit-equal: max |gpu - cpu| <= rel_tol * max |cpu|.
void compare(Built& r, std::int64_t grid, std::vector<cu::KernelArg> host, std::size_t out, bool bit_equal,
             bool inout = false, double rel_tol = 1e-5) {
  std::vector<cu::KernelArg> dev;
  for (std::size_t i = 0; i < host.size(); ++i) {
    if (auto* t = std::get_if<Tensor>(&host[i].value)) {
      Tensor d = t->to("cuda:0");
      if (i == out && !inout) {
        cu::memset_async(reinterpret_cast<cu::DevicePtr>(d.device_data()), 0xFF,
                         static_cast<std::size_t>(d.numel() * tessera::storage_bytes(d.dtype())), cu::Stream(0));
      }
      dev.emplace_back(std::move(d));
    } else {
      dev.push_back(host[i]);
    }
  }
  cu::synchronize(0);
  tessera::cpu::launch(r.spec->compiled(), grid, host);
  cu::launch(r.gpu, grid, dev);
  const DType od = std::get<Tensor>(host[out].value).dtype();
  const std::uint32_t poison = tessera::storage_bytes(od) == 2 ? 0xFFFFu : 0xFFFFFFFFu;
  const std::vector<std::uint32_t> want = bits(std::get<Tensor>(host[out].value));
  const std::vector<std::uint32_t> got = bits(std::get<Tensor>(dev[out].value));
  ASSERT_EQ(want.size(), got.size());
  std::size_t unwritten = 0, diff = 0;
  double max_err = 0, max_ref = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (got[i] == poison && !inout) ++unwritten;
    const double g = value_of(got[i], od), w = value_of(want[i], od);
    if (got[i] != want[i]) ++diff;
    max_err = std::max(max_err, std::fabs(g - w));
    max_ref = std::max(max_ref, std::fabs(w));
  }
  EXPECT_EQ(unwritten, 0u) << "elements the GPU left unwritten";
  if (bit_equal) {
    EXPECT_EQ(diff, 0u) << "elements differing from the CPU backend (of " << got.size() << ")";
  } else {
    EXPECT_LE(max_err, rel_tol * max_ref) << diff << " elements differ";
  }
  std::printf("[gpu-codegen] %-12s %8zu elements, %zu differ from the CPU backend, max |diff| %.3g (max |ref| %.3g)\n",
              tessera::ir::function_name(r.spec->func()).c_str(), got.size(), diff, max_err, max_ref);
}

#define REQUIRE_GPU() \
  if (!cu::available()) GTEST_SKIP() << "no CUDA device: " << cu::unavailable_reason()

}  // namespace

TEST(GpuCodegen, Scale) {
  REQUIRE_GPU();
  std::mt19937_64 rng(std::random_device{}());
  Built r = build(conf("scale.tsr"), true);
  for (std::int64_t n : {1, 1000, 100003}) {
    compare(r, -1, {random_tensor(rng, {n}, DType::fp32), poisoned({n}, DType::fp32), 1.7}, 1, true);
  }
}

// Two kernels of identical code under two names, compiled at once (as an
// executable compiles its kernels): one NVRTC compile, whose module both use.
TEST(GpuCodegen, IdenticalKernelsUnderTwoNamesCompileOnce) {
  REQUIRE_GPU();
  auto twin = [](const std::string& name) {
    const std::string text = "@kernel\ndef " + name +
                             "(x: f32[n], y: mut f32[n], alpha: f32):\n"
                             "    i = tile.linear_id()\n"
                             "    if i < n:\n"
                             "        y[i] = alpha * x[i] + 0.4375\n";
    return tessera::kernels_from_source(text, name + ".tsr").at(0).jit({}).specialize();
  };
  auto a = twin("twin_a"), b = twin("twin_b");
  cu::KernelCompileOptions o;
  o.cache_dir = (std::filesystem::temp_directory_path() /
                 ("tessera_twins_" + std::to_string(std::random_device{}()))).string();
  auto fa = std::async(std::launch::async, [&] { return cu::compile_kernel(a->func(), o); });
  auto fb = std::async(std::launch::async, [&] { return cu::compile_kernel(b->func(), o); });
  cu::CompiledKernel ka = fa.get(), kb = fb.get();
  std::filesystem::remove_all(o.cache_dir);
  EXPECT_NE(ka.source, kb.source);  // each names its kernel
  EXPECT_EQ(ka.cache_key, kb.cache_key);
  EXPECT_EQ(ka.handle, kb.handle);
  EXPECT_NE(ka.cache_hit, kb.cache_hit) << "exactly one of the two compiles";
  std::mt19937_64 rng(7);
  Built r{b, std::move(kb)};
  compare(r, -1, {random_tensor(rng, {1000}, DType::fp32), poisoned({1000}, DType::fp32), 1.5}, 1, true);
}

// Flat kernels whose threads take four tiles each, their loads read ahead
// (CudaCodegen.FlatKernelsReadLoadsAheadOverFourTiles): a gather, and an
// axpy writing one of its inputs. Ragged lengths leave some of a thread's
// tiles outside the launch.
TEST(GpuCodegen, FlatKernelsReadingAheadMatchTheCpu) {
  REQUIRE_GPU();
  std::mt19937_64 rng(11);
  Built gather = build(R"(@kernel
def gather(x: f32[m], idx: int32[n], y: mut f32[n]):
    i = tile.linear_id()
    if i < n:
        y[i] = x[idx[i]]
)",
                       false);
  Built axpy = build(R"(@kernel
def axpy_flat(x: f32[n], y: mut f32[n], alpha: f32):
    i = tile.linear_id()
    if i < n:
        y[i] = alpha * x[i] + y[i]
)",
                     false);
  ASSERT_EQ(gather.gpu.tiles_per_thread, 4);
  ASSERT_EQ(axpy.gpu.tiles_per_thread, 4);
  std::uniform_int_distribution<int> pick(0, 776);
  for (std::int64_t n : {1, 1023, 1025, 100003}) {
    std::vector<double> idx(static_cast<std::size_t>(n));
    for (double& v : idx) v = pick(rng);
    compare(gather, -1,
            {random_tensor(rng, {777}, DType::fp32), Tensor::from_values(idx, {n}, policy(DType::int32)),
             poisoned({n}, DType::fp32)},
            2, true);
    compare(axpy, -1, {random_tensor(rng, {n}, DType::fp32), random_tensor(rng, {n}, DType::fp32), 0.75}, 1, true,
            /*inout=*/true);
  }
}

TEST(GpuCodegen, AxpyTiled) {
  REQUIRE_GPU();
  std::mt19937_64 rng(std::random_device{}());
  Built r = build(conf("axpy_tiled.tsr"), true);
  for (std::int64_t m : {128, 1000, 4096}) {
    // Y is read and written (in place): the same random Y on both sides.
    Tensor y16 = random_tensor(rng, {m}, DType::fp16);
    compare(r, 1, {random_tensor(rng, {m}, DType::fp16), y16, 0.75}, 1, true, true);
  }
}

TEST(GpuCodegen, GemmTileFp32) {
  REQUIRE_GPU();
  std::mt19937_64 rng(std::random_device{}());
  Built r = build(conf("gemm_tile.tsr"), true);
  for (auto [m, n, k] : std::vector<std::array<std::int64_t, 3>>{{64, 64, 32}, {100, 70, 50}, {257, 129, 96}}) {
    const std::int64_t grid = ((m + 63) / 64) * ((n + 63) / 64);
    compare(r, grid,
            {random_tensor(rng, {m, k}, DType::fp32), random_tensor(rng, {k, n}, DType::fp32),
             poisoned({m, n}, DType::fp32)},
            2, true);
  }
}

TEST(GpuCodegen, GroupSum) {
  REQUIRE_GPU();
  std::mt19937_64 rng(std::random_device{}());
  Built r = build(conf("group_sum.tsr"), true);
  for (auto [n, g] : std::vector<std::array<std::int64_t, 2>>{{100, 1}, {10000, 7}, {1000003, 64}}) {
    compare(r, g, {random_tensor(rng, {n}, DType::fp32), poisoned({g}, DType::fp32)}, 1, true);
  }
}

TEST(GpuCodegen, TpGemm) {
  REQUIRE_GPU();
  std::mt19937_64 rng(std::random_device{}());
  Built r = build(conf("tp_gemm.tsr"), true, {{"tp", 2}, {"K", 24}});
  compare(r, -1,
          {random_tensor(rng, {20, 12}, DType::fp16), random_tensor(rng, {12, 12}, DType::fp16),
           poisoned({20, 6}, DType::fp32)},
          2, true);
}

TEST(GpuCodegen, Bf16GemmOnTensorCores) {
  REQUIRE_GPU();
  static const char* src = R"(
@kernel.autotune(space=dict(BM=[128], BN=[128], BK=[32])) tile[(256,)] shared(64_KiB)
def gemm_bf16(A: bf16[M, K], B: bf16[K, N], C: mut f32[M, N]):
    tiles_n = (N + BN - 1) // BN
    bm = (group_linear_id() // tiles_n) * BM
    bn = (group_linear_id() % tiles_n) * BN
    a0 = tshared.alloc[bf16]((BM, BK), swizzle="xor")
    b0 = tshared.alloc[bf16]((BK, BN), swizzle="xor")
    acc = tile.zeros((BM, BN), f32)
    for k in tile.range(K, step=BK):
        cp_async.shared.global(a0, A[bm:bm+BM, k:k+BK])
        cp_async.shared.global(b0, B[k:k+BK, bn:bn+BN])
        tbarrier()
        acc = tile.mma(tile.load(a0), tile.load(b0), acc=acc)
        tbarrier()
    tile.store(C, rows=(bm, BM), cols=(bn, BN), value=acc)
)";
  std::mt19937_64 rng(std::random_device{}());
  Built r = build(src, false);
  for (auto [m, n, k] : std::vector<std::array<std::int64_t, 3>>{{128, 128, 32}, {300, 200, 100}, {512, 384, 256}}) {
    const std::int64_t grid = ((m + 127) / 128) * ((n + 127) / 128);
    compare(r, grid,
            {random_tensor(rng, {m, k}, DType::bf16), random_tensor(rng, {k, n}, DType::bf16),
             poisoned({m, n}, DType::fp32)},
            2, false);
  }
}

namespace {

// The benchmark's GEMM shape (tests/gpu/gpu_codegen_bench.cpp): BK = 64 rows
// of 128 bytes, xor-swizzled buffers, a 3-deep cp_async pipeline.
std::string pipelined_gemm(int bm, int bn, int threads) {
  const std::string s = std::to_string(bm), n = std::to_string(bn), t = std::to_string(threads);
  return "@kernel.autotune(space=dict(BM=[" + s + "], BN=[" + n + "], BK=[64])) tile[(" + t + R"(,)] shared(160_KiB)
def gemm_bf16(A: bf16[M, K], B: bf16[K, N], C: mut f32[M, N]):
    tiles_n = (N + BN - 1) // BN
    bm = (group_linear_id() // tiles_n) * BM
    bn = (group_linear_id() % tiles_n) * BN
    a = tshared.alloc[bf16]((BM, BK), swizzle="xor")
    b = tshared.alloc[bf16]((BK, BN), swizzle="xor")
    acc = tile.zeros((BM, BN), f32)
    for k in tile.range(K, step=BK, prefetch=3):
        cp_async.shared.global(a, A[bm:bm+BM, k:k+BK])
        cp_async.shared.global(b, B[k:k+BK, bn:bn+BN])
        tbarrier()
        acc = tile.mma(tile.load(a), tile.load(b), acc=acc)
    tile.store(C, rows=(bm, BM), cols=(bn, BN), value=acc)
)";
}

bool nvrtc_present() {
  try {
    cu::nvrtc_version();
    return true;
  } catch (const tessera::Error&) {
    return false;
  }
}

}  // namespace

TEST(GpuCodegen, PipelinedGemmEmitsWgmmaForSm90aAndMmaSyncForSm80) {
  if (!nvrtc_present()) GTEST_SKIP() << "NVRTC is not installed";
  std::vector<tessera::Kernel> ks = tessera::kernels_from_source(pipelined_gemm(128, 128, 256), "gemm_bf16.tsr");
  auto spec = ks.at(0).specialize();
  const std::string h = cu::emit_kernel_source(spec->func(), {.arch = "sm_90a"});
  // tile-pipeline made the mma async: each k-block's wgmmas stay in flight
  // while the next copies are issued, the previous k-block's are waited for.
  EXPECT_NE(h.find("tsr::mma_wg_async<true>"), std::string::npos) << h;
  EXPECT_NE(h.find("tsr::wg_wait<1>();"), std::string::npos) << h;
  EXPECT_NE(h.find("= tsr::wg_fenced(tsr::zeros<"), std::string::npos) << h;
  EXPECT_NE(h.find("tsr::WgLayout<128, 128, 2, 1>"), std::string::npos) << h;  // 2 warpgroups, 64 rows each
  // The copies go through the bulk tensor copy engine (A's and B's boxes: two
  // tensor maps), with the cp.async path for launches whose tensors no map
  // can describe.
  EXPECT_NE(h.find("__grid_constant__ tsr::Params p"), std::string::npos) << h;
  EXPECT_NE(h.find("tsr::tma_copy("), std::string::npos) << h;
  EXPECT_EQ(h.find("tsr::cp_async("), std::string::npos) << h;  // the cp.async form is a kernel of its own
  EXPECT_NE(h.find("tsr::tma_settle("), std::string::npos) << h;
  {
    cu::KernelCompileOptions no_tma;
    no_tma.arch = "sm_90a";
    no_tma.no_tma = true;
    EXPECT_EQ(cu::emit_kernel_source(spec->func(), no_tma).find("tma_copy"), std::string::npos);
  }
  EXPECT_NE(h.find("tsr::barrier_async();"), std::string::npos) << h;
  EXPECT_NE(h.find("__align__(1024)"), std::string::npos) << h;
  cu::CompileOptions o;
  o.arch = "sm_90a";
  o.ptx = true;
  o.extra = {"--fmad=false", "-std=c++17"};
  const cu::CompiledProgram p = cu::compile(h, "gemm.cu", 0, o);
  EXPECT_NE(p.ptx.find("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16"), std::string::npos);
  EXPECT_NE(p.ptx.find("fence.proxy.async.shared::cta"), std::string::npos);
  EXPECT_NE(p.ptx.find("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"),
            std::string::npos);
  EXPECT_NE(p.ptx.find("mbarrier.try_wait.parity.shared::cta.b64"), std::string::npos);
  // The assembler keeps the wgmmas asynchronous: it reports (C7515) when an
  // ordinary instruction writes accumulators between a wgmma and its wait.
  EXPECT_EQ(p.log.find("C7515"), std::string::npos) << p.log;
  EXPECT_EQ(p.log.find("serialized"), std::string::npos) << p.log;
  const std::string a = cu::emit_kernel_source(spec->func(), {.arch = "sm_80"});
  EXPECT_EQ(a.find("tsr::mma_wg<"), std::string::npos) << a;
  EXPECT_NE(a.find("tsr::mma_tc<true>"), std::string::npos) << a;
  o.arch = "sm_80";
  o.ptx = false;
  EXPECT_FALSE(cu::compile(a, "gemm.cu", 0, o).cubin.empty());
}

TEST(GpuCodegen, PipelinedBf16GemmOnWgmma) {
  REQUIRE_GPU();
  std::mt19937_64 rng(std::random_device{}());
  for (auto [bm, bn] : std::vector<std::array<int, 2>>{{128, 128}, {128, 256}}) {
    Built r = build(pipelined_gemm(bm, bn, 256), false);
    if (cu::device_properties(0).arch() == "sm_90a") {
      EXPECT_NE(r.gpu.source.find("tsr::mma_wg_async<true>"), std::string::npos) << "expected the wgmma path";
      // TMA copies, and a cp.async form for the launches below whose rows are
      // not 16-byte multiples (K = 100: A's rows are 200 bytes; N = 77).
      EXPECT_EQ(r.gpu.tma_maps.size(), 2u);
      ASSERT_TRUE(r.gpu.cp_async() != nullptr);
      EXPECT_EQ(r.gpu.cp_async()->source.find("tma_copy"), std::string::npos);
      EXPECT_TRUE(r.gpu.cp_async()->tma_maps.empty());
    }
    for (auto [m, n, k] : std::vector<std::array<std::int64_t, 3>>{
             {128, 256, 64}, {300, 200, 100}, {512, 512, 320}, {257, 520, 1000}, {129, 77, 64}}) {
      const std::int64_t grid = ((m + bm - 1) / bm) * ((n + bn - 1) / bn);
      compare(r, grid,
              {random_tensor(rng, {m, k}, DType::bf16), random_tensor(rng, {k, n}, DType::bf16),
               poisoned({m, n}, DType::fp32)},
              2, false);
    }
  }
}

namespace {

// The fp8 GEMM pattern: A [M, K], B given transposed as Bt [N, K], both
// copied into xor-swizzled [rows, BK] buffers; tile.transpose makes the
// [BK, BN] operand, which wgmma reads K-major in place.
std::string gemm_bt(const std::string& dt, int bk) {
  return "@kernel.autotune(space=dict(BM=[128], BN=[128], BK=[" + std::to_string(bk) +
         "])) tile[(256,)] shared(200_KiB)\n"
         "def gemm_bt(A: " +
         dt + "[M, K], Bt: " + dt + R"([N, K], C: mut f32[M, N]):
    tiles_n = (N + BN - 1) // BN
    bm = (group_linear_id() // tiles_n) * BM
    bn = (group_linear_id() % tiles_n) * BN
    a = tshared.alloc[)" +
         dt +
         R"(]((BM, BK), swizzle="xor")
    b = tshared.alloc[)" +
         dt +
         R"(]((BN, BK), swizzle="xor")
    acc = tile.zeros((BM, BN), f32)
    for k in tile.range(K, step=BK, prefetch=3):
        cp_async.shared.global(a, A[bm:bm+BM, k:k+BK])
        cp_async.shared.global(b, Bt[bn:bn+BN, k:k+BK])
        tbarrier()
        acc = tile.mma(tile.load(a), tile.transpose(tile.load(b)), acc=acc)
    tile.store(C, rows=(bm, BM), cols=(bn, BN), value=acc)
)";
}

void run_gemm_bt(const std::string& dt, DType d, int bk, double rel_tol, const std::string& arch = "") {
  std::mt19937_64 rng(std::random_device{}());
  Built r = build(gemm_bt(dt, bk), false, {}, arch);
  if (!arch.empty()) {
    EXPECT_NE(r.gpu.source.find("tsr::mma_tc<false>"), std::string::npos) << "expected the mma.sync path";
  } else if (cu::device_properties(0).arch() == "sm_90a") {
    EXPECT_NE(r.gpu.source.find("tsr::mma_wg"), std::string::npos) << "expected the wgmma path";
    EXPECT_NE(r.gpu.source.find("tsr::tview("), std::string::npos) << "expected B read in place, K-major";
  }
  for (auto [m, n, k] :
       std::vector<std::array<std::int64_t, 3>>{{128, 128, 128}, {300, 200, 160}, {512, 512, 384}, {257, 520, 1000}}) {
    const std::int64_t grid = ((m + 127) / 128) * ((n + 127) / 128);
    std::vector<cu::KernelArg> args;
    args.emplace_back(random_tensor(rng, {m, k}, d));
    args.emplace_back(random_tensor(rng, {n, k}, d));
    args.emplace_back(poisoned({m, n}, DType::fp32));
    compare(r, grid, std::move(args), 2, false, false, rel_tol);
  }
}

}  // namespace

TEST(GpuCodegen, Fp8GemmEmitsWgmmaK32ForSm90a) {
  if (!nvrtc_present()) GTEST_SKIP() << "NVRTC is not installed";
  auto spec = tessera::kernels_from_source(gemm_bt("fp8_e4m3", 128), "gemm_bt.tsr").at(0).specialize();
  const std::string h = cu::emit_kernel_source(spec->func(), {.arch = "sm_90a"});
  EXPECT_NE(h.find("tsr::tview("), std::string::npos) << h;
  cu::CompileOptions o;
  o.arch = "sm_90a";
  o.ptx = true;
  o.extra = {"--fmad=false", "-std=c++17"};
  const cu::CompiledProgram p = cu::compile(h, "gemm.cu", 0, o);
  EXPECT_NE(p.ptx.find("wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3"), std::string::npos);
}

TEST(GpuCodegen, PipelinedFp8E4m3GemmTransposedBOnWgmma) {
  REQUIRE_GPU();
  run_gemm_bt("fp8_e4m3", DType::fp8_e4m3, 128, 4e-3);
}

// fp8 on mma.sync (m16n8k32, the sm_89 path), run on this GPU compiled for
// plain sm_90 (no wgmma).
TEST(GpuCodegen, PipelinedFp8GemmTransposedBOnMmaSync) {
  REQUIRE_GPU();
  const std::string arch = cu::device_properties(0).arch();
  if (arch.size() < 5 || std::atoi(arch.c_str() + 3) < 89) GTEST_SKIP() << "fp8 mma.sync needs sm_89 or newer";
  const std::string target = arch.substr(0, 5);  // sm_90a -> sm_90
  run_gemm_bt("fp8_e4m3", DType::fp8_e4m3, 128, 4e-3, target);
  run_gemm_bt("fp8_e5m2", DType::fp8_e5m2, 128, 4e-3, target);
}

TEST(GpuCodegen, Fp8GemmEmitsMmaSyncK32ForSm89AndScalarForSm80) {
  if (!nvrtc_present()) GTEST_SKIP() << "NVRTC is not installed";
  for (const char* dt : {"fp8_e4m3", "fp8_e5m2"}) {
    auto spec = tessera::kernels_from_source(gemm_bt(dt, 128), "gemm_bt.tsr").at(0).specialize();
    const std::string h = cu::emit_kernel_source(spec->func(), {.arch = "sm_89"});
    EXPECT_NE(h.find("tsr::mma_tc<false>"), std::string::npos) << h;
    cu::CompileOptions o;
    o.arch = "sm_89";
    o.ptx = true;
    o.extra = {"--fmad=false", "-std=c++17"};
    const std::string ty = std::string(dt) == "fp8_e4m3" ? "e4m3" : "e5m2";
    EXPECT_NE(cu::compile(h, "gemm.cu", 0, o).ptx.find("mma.sync.aligned.m16n8k32.row.col.f32." + ty + "." + ty),
              std::string::npos);
    // sm_80 has no fp8 tensor cores: the scalar path.
    const std::string old = cu::emit_kernel_source(spec->func(), {.arch = "sm_80"});
    EXPECT_EQ(old.find("tsr::mma_tc<"), std::string::npos) << old;
    EXPECT_NE(old.find("tsr::mma_scalar<"), std::string::npos) << old;
  }
}

TEST(GpuCodegen, PipelinedBf16GemmTransposedBOnWgmma) {
  REQUIRE_GPU();
  run_gemm_bt("bf16", DType::bf16, 64, 1e-5);
}
