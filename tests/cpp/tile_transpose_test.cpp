// tile.transpose and fp8 tile.mma operands: the front end's located errors,
// the CPU backend against float64 references (fp8 decoded by a decoder
// written here), and the CUDA backend's emission checked through NVRTC
// without a GPU: the fp8 GEMM pattern (A [M, K], B read transposed from an
// [N, K] buffer) becomes wgmma.m64n128k32 e4m3/e5m2 on sm_90a and the
// scalar path on sm_80; a transposed bf16 B is read K-major in place by
// wgmma (no transpose flag) and by ldmatrix without .trans (mma.sync).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
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

bool nvrtc_present() {
  try {
    cu::nvrtc_version();
    return true;
  } catch (const tessera::Error&) {
    return false;
  }
}

tessera::NumericsPolicy policy(DType d) {
  tessera::NumericsPolicy p;
  p.storage = d;
  p.accum = tessera::default_accumulation(d);
  return p;
}

// fp8 decoders written from the formats' definitions (independent of the library's).
double e4m3_value(std::uint8_t c) {
  const int s = c >> 7, e = (c >> 3) & 15, m = c & 7;
  if (e == 15 && m == 7) return NAN;
  const double v = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
  return s ? -v : v;
}
double e5m2_value(std::uint8_t c) {
  const int s = c >> 7, e = (c >> 2) & 31, m = c & 3;
  if (e == 31) return m == 0 ? (s ? -INFINITY : INFINITY) : NAN;
  const double v = e == 0 ? std::ldexp(m / 4.0, -14) : std::ldexp(1.0 + m / 4.0, e - 15);
  return s ? -v : v;
}

// Random finite fp8 codes and their values.
struct Fp8 {
  Tensor t;
  std::vector<double> v;
};
Fp8 random_fp8(std::mt19937_64& rng, std::int64_t rows, std::int64_t cols, DType d) {
  std::vector<std::uint64_t> codes;
  std::vector<double> values;
  std::uniform_int_distribution<int> u(0, 255);
  while (static_cast<std::int64_t>(codes.size()) < rows * cols) {
    const auto c = static_cast<std::uint8_t>(u(rng));
    const double v = d == DType::fp8_e4m3 ? e4m3_value(c) : e5m2_value(c);
    if (!std::isfinite(v)) continue;
    codes.push_back(c);
    values.push_back(v);
  }
  return {Tensor::from_codes(codes, {rows, cols}, policy(d)), values};
}

std::string gemm_fp8_source(const std::string& dt, bool transposed_b, int bm, int bn, int bk, int threads,
                            int prefetch) {
  const std::string b_param = transposed_b ? "Bt: " + dt + "[N, K]" : "B: " + dt + "[K, N]";
  const std::string b_alloc = transposed_b ? "((BN, BK)" : "((BK, BN)";
  const std::string b_copy = transposed_b ? "Bt[bn:bn+BN, k:k+BK]" : "B[k:k+BK, bn:bn+BN]";
  const std::string b_op = transposed_b ? "tile.transpose(tile.load(b))" : "tile.load(b)";
  return "@kernel.autotune(space=dict(BM=[" + std::to_string(bm) + "], BN=[" + std::to_string(bn) + "], BK=[" +
         std::to_string(bk) + "])) tile[(" + std::to_string(threads) + ",)] shared(200_KiB)\n" +
         "def gemm_fp8(A: " + dt + "[M, K], " + b_param + ", C: mut f32[M, N]):\n" +
         "    tiles_n = (N + BN - 1) // BN\n"
         "    bm = (group_linear_id() // tiles_n) * BM\n"
         "    bn = (group_linear_id() % tiles_n) * BN\n"
         "    a = tshared.alloc[" +
         dt + "]((BM, BK), swizzle=\"xor\")\n" + "    b = tshared.alloc[" + dt + "]" + b_alloc +
         ", swizzle=\"xor\")\n" +
         "    acc = tile.zeros((BM, BN), f32)\n"
         "    for k in tile.range(K, step=BK, prefetch=" +
         std::to_string(prefetch) + "):\n" +
         "        cp_async.shared.global(a, A[bm:bm+BM, k:k+BK])\n"
         "        cp_async.shared.global(b, " +
         b_copy + ")\n" +
         "        tbarrier()\n"
         "        acc = tile.mma(tile.load(a), " +
         b_op + ", acc=acc)\n" + "    tile.store(C, rows=(bm, BM), cols=(bn, BN), value=acc)\n";
}

tessera::Error front_end_error(const std::string& source) {
  try {
    tessera::kernels_from_source(source, "k.tsr").at(0).specialize();
  } catch (const tessera::Error& e) {
    return e;
  }
  ADD_FAILURE() << "expected an error for:\n" << source;
  return tessera::Error(tessera::ErrorCode::Internal, "no error");
}

}  // namespace

// ---- front end ----

TEST(TileTranspose, FrontEndErrorsAreLocated) {
  struct Case {
    const char* body;
    const char* message;
    int line, column;
  } cases[] = {
      {"    t = tile.transpose(x[0])\n", "tile.transpose takes a 2-D tile, got fp32 scalar", 3, 24},
      {"    t = tile.transpose(tile.load(x, rows=(0, 32)))\n", "tile.transpose takes a 2-D tile, got", 3, 24},
      {"    t = tile.transpose(tile.zeros((8, 8)), tile.zeros((8, 8)))\n",
       "tile.transpose() takes 1 positional argument, got 2", 3, 9},
      {"    s = tshared.alloc[f32]((8, 8))\n    if x[tile.linear_id()] > 0.0:\n"
       "        t = tile.transpose(tile.zeros((8, 8)))\n",
       "tile.transpose is group-cooperative", 5, 13},
  };
  for (const Case& c : cases) {
    const std::string src = std::string("@kernel tile[(32,)]\ndef f(x: f32[n]):\n") + c.body;
    const tessera::Error e = front_end_error(src);
    EXPECT_NE(e.message().find(c.message), std::string::npos) << e.what();
    EXPECT_EQ(e.where().file, "k.tsr") << e.what();
    EXPECT_EQ(e.where().line, c.line) << e.what();
    EXPECT_EQ(e.where().column, c.column) << e.what();
  }
}

TEST(TileTranspose, LowersToTileTransposeWithSwappedShape) {
  const std::string ir = tessera::kernels_from_source(gemm_fp8_source("fp8_e4m3", true, 32, 64, 32, 64, 1), "k.tsr")
                             .at(0)
                             .specialize()
                             ->tile_ir();
  EXPECT_NE(ir.find("tile.transpose"), std::string::npos) << ir;
  EXPECT_NE(ir.find(": tile<[32, 64] fp8_e4m3"), std::string::npos) << ir;  // [BN, BK] -> [BK, BN]
}

// ---- CPU backend ----

TEST(TileTranspose, CpuFp8GemmAgainstFloat64) {
  std::mt19937_64 rng(std::random_device{}());
  for (DType d : {DType::fp8_e4m3, DType::fp8_e5m2}) {
    const std::string dt = d == DType::fp8_e4m3 ? "fp8_e4m3" : "fp8_e5m2";
    for (bool transposed : {true, false}) {
      tessera::Kernel k = tessera::kernels_from_source(gemm_fp8_source(dt, transposed, 32, 32, 32, 64, 2), "k.tsr")
                              .at(0)
                              .jit({{"BM", 32}, {"BN", 32}, {"BK", 32}});
      for (auto [m, n, kk] : std::vector<std::array<std::int64_t, 3>>{{32, 32, 32}, {70, 45, 96}, {5, 33, 17}}) {
        Fp8 a = random_fp8(rng, m, kk, d);
        Fp8 b = transposed ? random_fp8(rng, n, kk, d) : random_fp8(rng, kk, n, d);
        Tensor c =
            Tensor::from_values(std::vector<double>(static_cast<std::size_t>(m * n), NAN), {m, n}, policy(DType::fp32));
        k.launch(((m + 31) / 32) * ((n + 31) / 32), {a.t, b.t, c});
        const std::vector<double> got = c.to_values();
        double worst = 0;
        for (std::int64_t i = 0; i < m; ++i)
          for (std::int64_t j = 0; j < n; ++j) {
            double ref = 0, mag = 0;
            for (std::int64_t p = 0; p < kk; ++p) {
              const double bv =
                  transposed ? b.v[static_cast<std::size_t>(j * kk + p)] : b.v[static_cast<std::size_t>(p * n + j)];
              ref += a.v[static_cast<std::size_t>(i * kk + p)] * bv;
              mag += std::fabs(a.v[static_cast<std::size_t>(i * kk + p)] * bv);
            }
            // fp32 accumulation of exact products: (K + 2) * 2^-24 * sum |a b|.
            const double bound = static_cast<double>(kk + 2) * std::ldexp(1.0, -24) * mag + 1e-30;
            const double err = std::fabs(got[static_cast<std::size_t>(i * n + j)] - ref);
            worst = std::max(worst, err / bound);
          }
        EXPECT_LE(worst, 1.0) << dt << (transposed ? " Bt" : " B") << " " << m << "x" << n << "x" << kk;
      }
    }
  }
}

TEST(TileTranspose, CpuTransposeAloneIsExact) {
  static const char* src = R"(
@kernel tile[(32,)]
def tr(X: f32[R, C], Y: mut f32[C, R]):
    t = tile.transpose(tile.load(X, rows=(0, 16), cols=(0, 48)))
    tile.store(Y, rows=(0, 48), cols=(0, 16), value=t)
)";
  std::mt19937_64 rng(7);
  std::normal_distribution<double> nd;
  std::vector<double> x(20 * 30);
  for (double& v : x) v = static_cast<float>(nd(rng));
  Tensor xt = Tensor::from_values(x, {20, 30}, policy(DType::fp32));
  Tensor yt = Tensor::from_values(std::vector<double>(30 * 20, NAN), {30, 20}, policy(DType::fp32));
  tessera::kernels_from_source(src, "tr.tsr").at(0).launch(1, {xt, yt});
  const std::vector<double> y = yt.to_values();
  for (int i = 0; i < 30; ++i)
    for (int j = 0; j < 20; ++j) {
      const double got = y[static_cast<std::size_t>(i * 20 + j)];
      if (j < 16) {
        EXPECT_EQ(got, x[static_cast<std::size_t>(j * 30 + i)]) << i << "," << j;
      } else {
        EXPECT_TRUE(std::isnan(got)) << "column " << j << " is past the 16-wide tile";
      }
    }
}

// ---- CUDA emission (NVRTC, no GPU) ----

namespace {

struct Emitted {
  std::string source, ptx;
};
Emitted emit(const std::string& src, const std::string& arch, bool want_ptx = true) {
  auto spec = tessera::kernels_from_source(src, "k.tsr").at(0).specialize();
  Emitted e;
  e.source = cu::emit_kernel_source(spec->func(), {.arch = arch});
  cu::CompileOptions o;
  o.arch = arch;
  o.ptx = want_ptx;
  o.extra = {"--fmad=false", "-std=c++17"};
  const cu::CompiledProgram p = cu::compile(e.source, "k.cu", 0, o);
  EXPECT_FALSE(p.cubin.empty());
  e.ptx = p.ptx;
  return e;
}

}  // namespace

TEST(TileTranspose, Fp8GemmEmitsWgmmaK32ForSm90a) {
  if (!nvrtc_present()) GTEST_SKIP() << "NVRTC is not installed";
  for (const char* dt : {"fp8_e4m3", "fp8_e5m2"}) {
    const Emitted e = emit(gemm_fp8_source(dt, true, 128, 128, 128, 256, 3), "sm_90a");
    // B is read in place, K-major, through a transposed view of the [N, K] buffer: no staging copy.
    EXPECT_NE(e.source.find("tsr::tview(s"), std::string::npos) << e.source;
    EXPECT_EQ(e.source.find("tsr::stage("), std::string::npos) << e.source;
    EXPECT_NE(e.source.find("tsr::WgLayout<128, 128, 2, 1>"), std::string::npos) << e.source;
    EXPECT_NE(
        e.source.find("tsr::SView<tsr::kFp8E" + std::string(dt[5] == '4' ? "4m3" : "5m2") + ", 128, 128, -128, 2>"),
        std::string::npos)
        << e.source;  // the 8-bit panel layout
    const std::string ins = std::string("wgmma.mma_async.sync.aligned.m64n128k32.f32.") + (dt + 4) + "." + (dt + 4);
    EXPECT_NE(e.ptx.find(ins), std::string::npos) << ins;
    EXPECT_EQ(e.ptx.find("k16.f32"), std::string::npos);
  }
}

TEST(TileTranspose, Fp8GemmTakesTheScalarPathElsewhere) {
  if (!nvrtc_present()) GTEST_SKIP() << "NVRTC is not installed";
  // sm_80, and sm_90a with a row-major B (wgmma takes fp8 B only K-major).
  // 64 x 64 x 32 tiles on one warpgroup: shapes wgmma would take, and a
  // scalar kernel that NVRTC compiles in seconds (128 x 128 x 128 took minutes).
  const Emitted a = emit(gemm_fp8_source("fp8_e4m3", true, 64, 64, 32, 128, 2), "sm_80");
  EXPECT_NE(a.source.find("tsr::mma_scalar<tsr::kFp8E4m3, tsr::kFp8E4m3>"), std::string::npos) << a.source;
  EXPECT_NE(a.source.find("tsr::tview(s"), std::string::npos) << a.source;
  EXPECT_EQ(a.ptx.find("wgmma"), std::string::npos);
  const Emitted b = emit(gemm_fp8_source("fp8_e4m3", false, 64, 64, 32, 128, 2), "sm_90a");
  EXPECT_NE(b.source.find("tsr::mma_scalar<tsr::kFp8E4m3, tsr::kFp8E4m3>"), std::string::npos) << b.source;
  EXPECT_EQ(b.ptx.find("wgmma.mma_async"), std::string::npos);
}

TEST(TileTranspose, TransposedBf16BIsReadKMajorInPlace) {
  if (!nvrtc_present()) GTEST_SKIP() << "NVRTC is not installed";
  const std::string src = gemm_fp8_source("bf16", true, 128, 128, 64, 256, 3);
  const Emitted h = emit(src, "sm_90a");
  EXPECT_NE(h.source.find("tsr::tview(s"), std::string::npos) << h.source;
  EXPECT_EQ(h.source.find("tsr::stage("), std::string::npos) << h.source;
  // K-major B: imm-trans-b = 0 (the row-major [K, N] B of the plain GEMM uses 1).
  EXPECT_NE(h.ptx.find("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16"), std::string::npos);
  EXPECT_NE(h.ptx.find("p, 1, 1, 0, 0;"), std::string::npos);
  EXPECT_EQ(h.ptx.find("p, 1, 1, 0, 1;"), std::string::npos);
  const Emitted a = emit(src, "sm_80");
  EXPECT_NE(a.source.find("tsr::mma_tc<true>"), std::string::npos) << a.source;
  EXPECT_NE(a.ptx.find("ldmatrix.sync.aligned.m8n8.x2.shared.b16"), std::string::npos);
  EXPECT_EQ(a.ptx.find("ldmatrix.sync.aligned.m8n8.x2.trans"), std::string::npos);
}

// A transposed A is read in place on wgmma, MN-major (imm-trans-a = 1);
// mma.sync stages it, and transposes of register tiles stage everywhere.
TEST(TileTranspose, TransposedAReadsInPlaceOnWgmmaElseStages) {
  if (!nvrtc_present()) GTEST_SKIP() << "NVRTC is not installed";
  static const char* src = R"(
@kernel tile[(128,)] shared(64_KiB)
def f(At: bf16[K, M], B: bf16[K, N], C: mut f32[M, N]):
    a = tshared.alloc[bf16]((64, 64), swizzle="xor")
    b = tshared.alloc[bf16]((64, 64), swizzle="xor")
    cp_async.shared.global(a, At[0:64, 0:64])
    cp_async.shared.global(b, B[0:64, 0:64])
    tbarrier()
    acc = tile.mma(tile.transpose(tile.load(a)), tile.load(b))
    tile.store(C, rows=(0, 64), cols=(0, 64), value=tile.transpose(tile.transpose(acc)))
)";
  const Emitted h = emit(src, "sm_90a");
  EXPECT_NE(h.source.find("tsr::mma_wg<true>(tsr::tview(s"), std::string::npos) << h.source;
  EXPECT_NE(h.source.find("tsr::transpose_from("), std::string::npos) << h.source;  // acc's transposes
  EXPECT_NE(h.ptx.find("p, 1, 1, 1, 1;"), std::string::npos);  // A MN-major, B row-major
  const Emitted a = emit(src, "sm_80", false);
  EXPECT_NE(a.source.find("tsr::transpose_from("), std::string::npos) << a.source;
  EXPECT_EQ(a.source.find("tsr::tview("), std::string::npos) << a.source;  // mma.sync stages a transposed A
}
