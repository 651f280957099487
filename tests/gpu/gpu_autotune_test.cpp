// Autotuning kernels launched on CUDA tensors (Kernel::launch and
// Kernel::autotune with arguments on cuda:0): every candidate is compiled by
// the CUDA backend and timed with events; the winner matches the CPU backend,
// writes the caller's outputs exactly once (an accumulating kernel shows it),
// is found in the memory cache (no events) and on disk (one "cached" event)
// afterwards, and is never taken for host arguments of the same shapes. A
// candidate needing more shared memory than the device grants is skipped
// with a "failed" event. Skipped without a GPU, except the emission check,
// which needs only NVRTC.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "tessera/backends/cuda/cuda_backend.h"
#include "tessera/runtime/cuda.h"
#include "tessera/runtime/kernel.h"
#include "tessera/support/error.h"

namespace tessera {
namespace {

namespace cu = tessera::cuda;
using Kind = AutotuneEvent::Kind;

#define REQUIRE_GPU() \
  if (!cu::available()) GTEST_SKIP() << "no CUDA device: " << cu::unavailable_reason()

// The mma.sync bf16 GEMM of gpu_codegen_test.cpp with two block heights.
constexpr const char* kGemm = R"(
@kernel.autotune(space=dict(BM=[64, 128], BN=[128], BK=[32])) tile[(256,)] shared(64_KiB)
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

// y += a * x * U: a second write by anything but the winner would show.
constexpr const char* kAddScaled = R"(
@kernel.autotune(space=dict(U=[1, 2, 3]))
def add_scaled(x: f32[n], y: mut f32[n], a: f32):
    i = tile.linear_id()
    if i < n:
        y[i] = y[i] + a * x[i] * f32(U)
)";

// S = 131072 floats is 512 KiB of shared memory per block, more than any
// GPU grants (227 KiB on Hopper): that candidate cannot run on the device.
constexpr const char* kStaged = R"(
@kernel.autotune(space=dict(S=[131072, 128])) tile[(128,)] shared(1024_KiB)
def staged_double(x: f32[n], y: mut f32[n]):
    buf = tshared.alloc[f32](S)
    i = tile.linear_id()
    g = group_linear_id() * 128 + i
    v = 0.0
    if g < n:
        v = x[g]
    buf[i] = v
    tbarrier()
    if g < n:
        y[g] = 2.0 * buf[i]
)";

NumericsPolicy policy(DType d) {
  NumericsPolicy p;
  p.storage = d;
  p.accum = default_accumulation(d);
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

// fp32 filled with 0xFF bytes (a NaN no arithmetic makes): unwritten elements show.
Tensor poisoned(std::vector<std::int64_t> shape) {
  Tensor t = Tensor::zeros(std::move(shape), policy(DType::fp32));
  std::memset(t.data(), 0xFF, static_cast<std::size_t>(t.numel()) * 4);
  return t;
}

std::vector<std::uint32_t> bits(const Tensor& t) {
  Tensor h = t.to("cpu");
  std::vector<std::uint32_t> b(static_cast<std::size_t>(h.numel()));
  std::memcpy(b.data(), h.data(), b.size() * 4);
  return b;
}

std::int64_t cdiv(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

bool nvrtc_present() {
  try {
    cu::nvrtc_version();
    return true;
  } catch (const Error&) {
    return false;
  }
}

// Each test gets its own compile and autotune cache.
class GpuAutotune : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("tessera-gpu-autotune-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(dir_);
    options_.cache_dir = dir_.string();
    options_.progress = [this](const AutotuneEvent& e) { events_.push_back(e); };
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::vector<Kind> kinds() const {
    std::vector<Kind> k;
    for (const AutotuneEvent& e : events_) k.push_back(e.kind);
    return k;
  }

  std::filesystem::path dir_;
  KernelLaunchOptions options_;
  std::vector<AutotuneEvent> events_;
};

TEST_F(GpuAutotune, GemmSearchesOnTheGpuMatchesTheCpuAndIsCached) {
  REQUIRE_GPU();
  std::mt19937_64 rng(std::random_device{}());
  const Kernel k = kernels_from_source(kGemm, "gemm_bf16.tsr")[0];
  const std::int64_t m = 300, n = 200, kk = 100;
  const GridFunction grid = [&](const KernelConstants& c) { return cdiv(m, c.at("BM")) * cdiv(n, c.at("BN")); };
  const Tensor a = random_tensor(rng, {m, kk}, DType::bf16), b = random_tensor(rng, {kk, n}, DType::bf16);
  const Tensor da = a.to("cuda:0"), db = b.to("cuda:0");
  const Tensor dc = poisoned({m, n}).to("cuda:0");
  k.launch(grid, {da, db, dc}, options_);

  ASSERT_EQ(kinds(), (std::vector<Kind>{Kind::start, Kind::measured, Kind::measured, Kind::chosen}));
  EXPECT_EQ(events_[0].total, 2);
  for (int i = 1; i <= 2; ++i) {
    EXPECT_EQ(events_[i].index, i);
    EXPECT_EQ(events_[i].constants.at("BM"), i == 1 ? 64 : 128);
    EXPECT_GT(events_[i].median_seconds, 0.0);
    EXPECT_LT(events_[i].median_seconds, 1.0);  // GPU time of a small GEMM, not a wall time with compiles
  }
  const KernelConstants winner = events_.back().constants;
  const std::int64_t bm = winner.at("BM");
  EXPECT_TRUE(bm == 64 || bm == 128);
  EXPECT_EQ(winner.at("BN"), 128);
  EXPECT_EQ(winner.at("BK"), 32);
  // The last launch ran the winner on the GPU.
  EXPECT_NE(k.inspect_ir("tile").find("value = " + std::to_string(bm)), std::string::npos);
  EXPECT_NE(k.inspect_ir("target").find("__global__"), std::string::npos);

  // Against the CPU backend with the same constants: the tensor-core path
  // sums 16 products per step, so within 1e-5 of the largest output.
  events_.clear();
  const Tensor cpu_c = poisoned({m, n});
  k.jit(winner).launch(grid, {a, b, cpu_c}, options_);
  EXPECT_TRUE(events_.empty());  // everything fixed: no search
  const std::vector<double> want = cpu_c.to_values();
  const std::vector<double> got = dc.to("cpu").to_values();
  ASSERT_EQ(want.size(), got.size());
  double max_ref = 0, max_err = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_FALSE(std::isnan(got[i])) << "element " << i << " left unwritten";
    max_ref = std::max(max_ref, std::abs(want[i]));
    max_err = std::max(max_err, std::abs(got[i] - want[i]));
  }
  EXPECT_LE(max_err, 1e-5 * max_ref);

  // The tuned launch left what a plain launch of the winner leaves.
  const Tensor plain = poisoned({m, n}).to("cuda:0");
  k.jit(winner).launch(grid, {da, db, plain}, options_);
  EXPECT_EQ(bits(dc), bits(plain));

  // Second launch, same shapes: the memory cache, no events at all.
  events_.clear();
  const Tensor again = poisoned({m, n}).to("cuda:0");
  k.launch(grid, {da, db, again}, options_);
  EXPECT_TRUE(events_.empty());
  EXPECT_EQ(bits(again), bits(plain));
  EXPECT_EQ(k.autotune(grid, {da, db, again}, options_), winner);
  EXPECT_TRUE(events_.empty());

  // A new kernel object (a new process, as far as memory goes) reads the disk entry.
  const Kernel fresh = kernels_from_source(kGemm, "gemm_bf16.tsr")[0];
  EXPECT_EQ(fresh.autotune(grid, {da, db, again}, options_), winner);
  ASSERT_EQ(kinds(), std::vector<Kind>{Kind::cached});
  EXPECT_EQ(events_[0].constants, winner);

  // Host arguments of the same shapes are another device: a CPU search.
  events_.clear();
  k.autotune(grid, {a, b, poisoned({m, n})}, options_);
  ASSERT_FALSE(events_.empty());
  EXPECT_EQ(events_.front().kind, Kind::start);
}

TEST_F(GpuAutotune, OutputsAreWrittenOnceByTheWinner) {
  REQUIRE_GPU();
  const Kernel k = kernels_from_source(kAddScaled, "add.tsr")[0];
  const std::int64_t n = 5000;
  std::vector<double> x(n), y(n);
  for (std::int64_t i = 0; i < n; ++i) {
    x[static_cast<std::size_t>(i)] = static_cast<double>(i % 97);
    y[static_cast<std::size_t>(i)] = 10.0 * static_cast<double>(i % 89);
  }
  const Tensor dx = Tensor::from_values(x, {n}, policy(DType::fp32)).to("cuda:0");
  const Tensor dy = Tensor::from_values(y, {n}, policy(DType::fp32)).to("cuda:0");
  k.launch(std::int64_t{-1}, {dx, dy, 0.5}, options_);
  ASSERT_EQ(events_.size(), 5u);  // start, three candidates, chosen
  for (int i = 1; i <= 3; ++i) EXPECT_EQ(events_[static_cast<std::size_t>(i)].kind, Kind::measured);
  ASSERT_EQ(events_.back().kind, Kind::chosen);
  const double u = static_cast<double>(events_.back().constants.at("U"));
  // Small integers and halves: exact in fp32, so equality.
  const std::vector<double> got = dy.to("cpu").to_values();
  for (std::size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], y[i] + 0.5 * x[i] * u) << i;
  // The searched copies never reached the caller's x either.
  const std::vector<double> x_after = dx.to("cpu").to_values();
  EXPECT_EQ(x_after, x);
}

TEST_F(GpuAutotune, CandidateOverTheSharedMemoryLimitIsSkipped) {
  REQUIRE_GPU();
  ASSERT_LT(cu::device_properties(0).shared_bytes_per_block_optin, 131072 * 4);
  const Kernel k = kernels_from_source(kStaged, "staged.tsr")[0];
  std::mt19937_64 rng(std::random_device{}());
  const std::int64_t n = 1000;
  const Tensor x = random_tensor(rng, {n}, DType::fp32);
  const Tensor dy = poisoned({n}).to("cuda:0");
  k.launch(cdiv(n, 128), {x.to("cuda:0"), dy}, options_);
  ASSERT_EQ(kinds(), (std::vector<Kind>{Kind::start, Kind::failed, Kind::measured, Kind::chosen}));
  EXPECT_EQ(events_[1].constants.at("S"), 131072);
  EXPECT_NE(events_[1].message.find("shared memory"), std::string::npos) << events_[1].message;
  EXPECT_NE(events_[1].describe().find("[1/2] S=131072: failed:"), std::string::npos) << events_[1].describe();
  EXPECT_EQ(events_.back().constants.at("S"), 128);
  // 2 * x is exact in fp32.
  const std::vector<double> want = x.to_values();
  const std::vector<double> got = dy.to("cpu").to_values();
  for (std::size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], 2.0 * want[i]) << i;
}

// The candidates above emit and build for Hopper (NVRTC only, no GPU).
TEST(GpuAutotuneEmission, CandidatesBuildForSm90a) {
  if (!nvrtc_present()) GTEST_SKIP() << "NVRTC is not installed";
  for (const auto& [source, space] : std::vector<std::pair<const char*, std::vector<KernelConstants>>>{
           {kGemm, {{{"BM", 64}}, {{"BM", 128}}}}, {kStaged, {{{"S", 128}}, {{"S", 131072}}}}}) {
    const Kernel k = kernels_from_source(source, "k.tsr")[0];
    for (const KernelConstants& c : space) {
      const std::string cuda_cpp = cu::emit_kernel_source(k.jit(c).specialize()->func(), {.arch = "sm_90a"});
      cu::CompileOptions o;
      o.arch = "sm_90a";
      o.extra = {"--fmad=false", "-std=c++17"};
      EXPECT_FALSE(cu::compile(cuda_cpp, k.name() + ".cu", 0, o).cubin.empty()) << k.name();
    }
  }
}

}  // namespace
}  // namespace tessera
