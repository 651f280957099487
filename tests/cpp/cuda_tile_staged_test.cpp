// Shared buffers accessed only as whole tiles lower as tile values (the
// target's own staging, src/backends/cuda_tile/lower_staged.cpp): no hidden
// per-group copies, cp_async a view load carrying the prefetch loop's
// latency hint, double-buffered swaps carried as loop values. Buffers with
// any other access keep the global copies.
#include <gtest/gtest.h>

#include <string>

#include "tessera/backends/cuda_tile/lower.h"
#include "tessera/backends/cuda_tile/toolchain.h"
#include "tessera/runtime/kernel.h"

namespace ct = tessera::cuda_tile;

namespace {

ct::LoweredKernel lower(const char* source, const char* file, const ct::LowerOptions& options = {}) {
  std::vector<tessera::Kernel> ks = tessera::kernels_from_source(source, file);
  return ct::lower_kernel(ks.at(0).jit({}).specialize()->tile_target_func(), options);
}

bool has(const std::string& text, const std::string& want) { return text.find(want) != std::string::npos; }

std::size_t count(const std::string& text, const std::string& want) {
  std::size_t n = 0;
  for (std::size_t at = text.find(want); at != std::string::npos; at = text.find(want, at + 1)) ++n;
  return n;
}

// Assembles for sm_90 and decodes the bytecode back where the tools are installed.
void check_with_tools(const ct::LoweredKernel& k, const std::string& decoded_must_have) {
  const ct::Toolchain& t = ct::toolchain();
  if (!t.found || !t.reason.empty()) return;
  EXPECT_GT(ct::run_tileiras(k.bytecode, "sm_90").size(), 4u);
  const std::string text = ct::disassemble(k.bytecode);
  if (!text.empty()) {
    EXPECT_TRUE(has(text, decoded_must_have)) << decoded_must_have << "\n" << text;
  }
}

// The PTX path's GEMM form: copy a K block into shared tiles, then mma them,
// in a tile.range(prefetch=3) loop.
const char* kPrefetchGemm = R"(@kernel tile[(128,)] shared(32_KiB)
def gemm_pf(A: bf16[M, K], B: bf16[K, N], C: mut f32[M, N]):
    a = tshared.alloc[bf16]((64, 32))
    b = tshared.alloc[bf16]((32, 64))
    acc = tile.zeros((64, 64), f32)
    for k in tile.range(K, step=32, prefetch=3):
        cp_async.shared.global(a, A[0:64, k:k+32])
        cp_async.shared.global(b, B[k:k+32, 0:64])
        cp_async.wait(0)
        tbarrier()
        acc = tile.mma(tile.load(a), tile.load(b), acc=acc)
        tbarrier()
    tile.store(C, rows=(0, 64), cols=(0, 64), value=acc)
)";

}  // namespace

TEST(CudaTileStaged, PrefetchLoopCopiesBecomeHintedViewLoads) {
  const ct::LoweredKernel k = lower(kPrefetchGemm, "pf.tsr");
  EXPECT_TRUE(k.shared_bytes.empty()) << k.text;
  EXPECT_FALSE(has(k.text, "shared#")) << k.text;
  EXPECT_FALSE(has(k.text, "load_ptr_tko")) << k.text;
  EXPECT_FALSE(has(k.text, "make_token")) << k.text;  // nothing left to order by tokens
  // Both copies: aligned partition-view loads with the loop's hint; the mma takes them directly.
  EXPECT_EQ(count(k.text, "load_view_tko weak"), 2u) << k.text;
  EXPECT_EQ(count(k.text, "optimization_hints = <sm_90 = {latency = 3}>"), 2u) << k.text;
  EXPECT_TRUE(has(k.text, "partition_view<tile=(64x32)")) << k.text;
  EXPECT_TRUE(has(k.text, "tile<64x32xbf16>, tile<32x64xbf16>, tile<64x64xf32>")) << k.text;
  check_with_tools(k, "latency = 3");
}

TEST(CudaTileStaged, LatencyOverrideAndArchKeyTheHint) {
  ct::LowerOptions o;
  o.arch = "sm_100";
  o.latency = 7;
  const ct::LoweredKernel k = lower(kPrefetchGemm, "pf.tsr", o);
  EXPECT_EQ(count(k.text, "optimization_hints = <sm_100 = {latency = 7}>"), 2u) << k.text;
  // A loop without prefetch gives no hint.
  const char* plain = R"(@kernel tile[(128,)]
def mm(A: f32[M, K], B: f32[K, N], C: mut f32[M, N]):
    acc = tile.zeros((64, 64), f32)
    for k in range(0, K, 32):
        acc = tile.mma(tile.load(A, rows=(0, 64), cols=(k, 32)), tile.load(B, rows=(k, 32), cols=(0, 64)), acc=acc)
    tile.store(C, rows=(0, 64), cols=(0, 64), value=acc)
)";
  EXPECT_FALSE(has(lower(plain, "mm.tsr", o).text, "optimization_hints")) << lower(plain, "mm.tsr", o).text;
}

// The conformance GEMM's hand double buffering: four buffers swapped by the
// loop; each carries its tile, and the copy of block k+1 is a load whose
// value the next iteration's mma reads.
TEST(CudaTileStaged, SwappedDoubleBuffersCarryTheirTiles) {
  const char* src = R"(@kernel tile[(128,)] shared(32_KiB)
def gemm_db(A: f32[M, K], B: f32[K, N], C: mut f32[M, N]):
    a0 = tshared.alloc[f32]((64, 32), swizzle="xor")
    a1 = tshared.alloc[f32]((64, 32), swizzle="xor")
    b0 = tshared.alloc[f32]((32, 64))
    b1 = tshared.alloc[f32]((32, 64))
    acc = tile.zeros((64, 64), f32)
    cp_async.shared.global(a0, A[0:64, 0:32])
    cp_async.shared.global(b0, B[0:32, 0:64])
    for k in tile.range(K, step=32):
        tbarrier()
        cp_async.shared.global(a1, A[0:64, k+32:k+32+32])
        cp_async.shared.global(b1, B[k+32:k+32+32, 0:64])
        acc = tile.mma(tile.load(a0), tile.load(b0), acc=acc)
        a0, a1 = a1, a0
        b0, b1 = b1, b0
    tile.store(C, rows=(0, 64), cols=(0, 64), value=acc)
)";
  const ct::LoweredKernel k = lower(src, "db.tsr");
  EXPECT_TRUE(k.shared_bytes.empty()) << k.text;
  EXPECT_EQ(count(k.text, "load_view_tko weak"), 4u) << k.text;  // two before the loop, two in it
  EXPECT_TRUE(has(k.text, "iter_values(")) << k.text;
  EXPECT_FALSE(has(k.text, "load_ptr_tko")) << k.text;
  check_with_tools(k, "mmaf");
}

// A buffer read element by element keeps its global copy; a whole-tile one
// beside it is still staged.
TEST(CudaTileStaged, ElementAccessKeepsTheGlobalCopyOfThatBufferOnly) {
  const char* src = R"(@kernel tile[(64,)] shared(8_KiB)
def mixed(X: f32[n], A: f32[M, K], B: f32[K, N], C: mut f32[M, N], y: mut f32[n]):
    s = tshared.alloc[f32](64)
    a = tshared.alloc[f32]((32, 32))
    cp_async.shared.global(a, A[0:32, 0:32])
    cp_async.shared.global(s, X[0:64])
    cp_async.wait(0)
    tbarrier()
    i = tile.linear_id()
    y[i] = s[63 - i]
    acc = tile.mma(tile.load(a), tile.load(B, rows=(0, 32), cols=(0, 32)), acc=tile.zeros((32, 32), f32))
    tile.store(C, rows=(0, 32), cols=(0, 32), value=acc)
)";
  const ct::LoweredKernel k = lower(src, "mixed.tsr");
  ASSERT_EQ(k.shared_bytes.size(), 1u) << k.text;
  EXPECT_EQ(k.shared_bytes[0], 64 * 4);
  EXPECT_TRUE(has(k.text, "/*shared#0*/: tile<ptr<f32>>")) << k.text;
  EXPECT_FALSE(has(k.text, "shared#1")) << k.text;
  check_with_tools(k, "mmaf");
}

// A loop that yields one buffer twice (not a permutation of its buffers)
// would give two names one buffer: its buffers keep the global copies.
TEST(CudaTileStaged, ALoopThatDoesNotPermuteItsBuffersIsNotStaged) {
  const char* src = R"(@kernel tile[(128,)] shared(16_KiB)
def dup(A: f32[M, K], C: mut f32[M, K]):
    a0 = tshared.alloc[f32]((32, 32))
    a1 = tshared.alloc[f32]((32, 32))
    for k in tile.range(K, step=32):
        cp_async.shared.global(a1, A[0:32, k:k+32])
        cp_async.wait(0)
        tbarrier()
        tile.store(C, rows=(0, 32), cols=(k, 32), value=tile.load(a0))
        a0, a1 = a1, a1
)";
  const ct::LoweredKernel k = lower(src, "dup.tsr");
  EXPECT_EQ(k.shared_bytes.size(), 2u) << k.text;
  EXPECT_TRUE(has(k.text, "load_ptr_tko")) << k.text;
}
