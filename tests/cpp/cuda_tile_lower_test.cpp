// Tile IR -> CUDA Tile IR: a kernel-language GEMM over global tiles lowers to
// views, a loop and mmaf, and tileiras (where installed) assembles it for
// sm_90; constructs outside the target's subset are CompileErrors naming
// the op and the source line.
#include <gtest/gtest.h>

#include <string>

#include "tessera/backends/cuda_tile/lower.h"
#include "tessera/backends/cuda_tile/toolchain.h"
#include "tessera/runtime/kernel.h"
#include "tessera/support/error.h"

namespace ct = tessera::cuda_tile;

namespace {

const char* kGlobalMma = R"(@kernel tile[(128,)]
def mm(A: f32[M, K], B: f32[K, N], C: mut f32[M, N]):
    acc = tile.zeros((64, 64), f32)
    for k in range(0, K, 32):
        acc = tile.mma(tile.load(A, rows=(0, 64), cols=(k, 32)), tile.load(B, rows=(k, 32), cols=(0, 64)), acc=acc)
    tile.store(C, rows=(0, 64), cols=(0, 64), value=acc)
)";

ct::LoweredKernel lower(const char* source, const char* file) {
  std::vector<tessera::Kernel> ks = tessera::kernels_from_source(source, file);
  return ct::lower_kernel(ks.at(0).jit({}).specialize()->tile_target_func());
}

}  // namespace

TEST(CudaTileLower, GlobalTileGemmBecomesViewsLoopAndMmaf) {
  const ct::LoweredKernel k = lower(kGlobalMma, "mm.tsr");
  for (const char* want : {"entry @mm(", "/*A.shape[1]*/: tile<i64>", "constant <f32: 0> : tile<64x64xf32>",
                           "for %", "partition_view<tile=(64x32), padding_value = zero",
                           "mmaf", "tile<64x32xf32>, tile<32x64xf32>, tile<64x64xf32>", "store_view_tko weak",
                           "return"}) {
    EXPECT_NE(k.text.find(want), std::string::npos) << want << "\n" << k.text;
  }
  const ct::Toolchain& t = ct::toolchain();
  if (!t.found || !t.reason.empty()) GTEST_SKIP() << (t.found ? t.reason : std::string("tileiras not found"));
  const std::vector<std::uint8_t> cubin = ct::run_tileiras(k.bytecode, "sm_90");
  EXPECT_GT(cubin.size(), 4u);
  // tileirdisasm ships beside tileiras in the pip package, not in every
  // installation (the GPU machines' bundle has tileiras alone).
  const std::string disasm = ct::disassemble(k.bytecode);
  if (disasm.empty()) GTEST_SKIP() << "no tileirdisasm beside " << t.tileiras;
  EXPECT_NE(disasm.find("mmaf"), std::string::npos) << disasm;
}

// Assembles `k` for sm_90 where tileiras is installed (the target's own
// check of the bytecode); false when it is not.
bool assembles(const ct::LoweredKernel& k) {
  const ct::Toolchain& t = ct::toolchain();
  if (!t.found || !t.reason.empty()) return false;
  EXPECT_GT(ct::run_tileiras(k.bytecode, "sm_90").size(), 4u);
  return true;
}

// A kernel without a group shape runs flat: 1024 tiles per tile block, the
// tile index block * 1024 + lane, the element accesses masked pointer tiles
// with the out-of-range lanes reported through the fault word.
TEST(CudaTileLower, FlatLaneCodeBecomesMaskedPointerTiles) {
  const char* src = R"(@kernel
def scale(x: f32[n], y: mut f32[n]):
    i = tile.linear_id()
    y[i] = x[i] * 2.0
)";
  const ct::LoweredKernel k = lower(src, "scale.tsr");
  EXPECT_EQ(k.flat_lanes, 1024);
  EXPECT_TRUE(k.fault_param);
  ASSERT_EQ(k.faults.size(), 2u);  // the load's index, the store's
  EXPECT_EQ(k.faults[0].code, tessera::ErrorCode::IndexOutOfRange);
  EXPECT_NE(k.faults[0].message.find("scale.tsr:4"), std::string::npos) << k.faults[0].message;
  for (const char* want : {"/*tiles*/: tile<i64>", "/*fault*/: tile<ptr<i32>>", "iota : tile<1024xi32>",
                           "load_ptr_tko weak", "tile<1024xptr<f32>>", "store_ptr_tko weak", "mulf"}) {
    EXPECT_NE(k.text.find(want), std::string::npos) << want << "\n" << k.text;
  }
  assembles(k);
}

// Lane code in a group: one tile block per group, lane values tiles of the
// group's lanes, an if on a per-lane condition both branches under masks
// (a select of the results), and a store then a load of the same element
// ordered by the store's token.
TEST(CudaTileLower, GroupLaneCodeWithDivergentIfAndStoreThenLoad) {
  const char* src = R"(@kernel tile[(128,)]
def k(x: f32[n], y: mut f32[n]):
    i = group_linear_id() * 128 + tile.linear_id()
    if i < n:
        v = x[i]
        if v > 0.0:
            v = v * 2.0
        else:
            v = -v
        y[i] = v
        y[i] = y[i] + 1.0
)";
  const ct::LoweredKernel k = lower(src, "k.tsr");
  EXPECT_EQ(k.flat_lanes, 0);
  for (const char* want : {"iota : tile<128xi32>", "select", "load_ptr_tko weak", "token="}) {
    EXPECT_NE(k.text.find(want), std::string::npos) << want << "\n" << k.text;
  }
  assembles(k);
}

// Shared buffers are per-group copies in global memory, barriers order
// nothing the tokens do not; what the target cannot express yet (a float
// power) is a CompileError naming the op and its line.
TEST(CudaTileLower, SharedBuffersArePerGroupCopiesAndUnportedOpsAreErrors) {
  const char* src = R"(@kernel tile[(64,)]
def k(x: f32[n], y: mut f32[n]):
    s = tshared.alloc[f32](64)
    i = tile.linear_id()
    s[i] = x[i]
    tbarrier()
    y[i] = s[63 - i]
)";
  const ct::LoweredKernel k = lower(src, "k.tsr");
  EXPECT_NE(k.text.find("/*shared#0*/: tile<ptr<f32>>"), std::string::npos) << k.text;
  assembles(k);
  const char* bad = R"(@kernel
def cube(x: f32[n], y: mut f32[n]):
    i = tile.linear_id()
    if i < n:
        y[i] = x[i] ** 3.0
)";
  try {
    lower(bad, "cube.tsr");
    FAIL() << "expected a CompileError";
  } catch (const tessera::Error& e) {
    EXPECT_EQ(e.code(), tessera::ErrorCode::Compile);
    const std::string what = e.what();
    EXPECT_NE(what.find("tile.pow"), std::string::npos) << what;
    EXPECT_NE(what.find("cube.tsr:5"), std::string::npos) << what;
  }
}

// Tessera's integer arithmetic saturates, the target's wraps: the product
// is the wrapping muli, an overflow test by division, and a select of the
// bound (INT64_MIN or INT64_MAX) the exact result passed.
TEST(CudaTileLower, SaturatingIntegerArithmeticBecomesWrapTestAndSelect) {
  const char* src = R"(@kernel tile[(128,)]
def mm(A: f32[M, K], C: mut f32[M, K]):
    r = group_linear_id() * 64 + 1
    tile.store(C, rows=(r, 64), cols=(0, 64), value=tile.load(A, rows=(r, 64), cols=(0, 64)))
)";
  const ct::LoweredKernel k = lower(src, "sat.tsr");
  for (const char* want : {"muli", "divi", "constant <i64: -9223372036854775808>",
                           "constant <i64: 9223372036854775807>", "addi", "xori", "select"}) {
    EXPECT_NE(k.text.find(want), std::string::npos) << want << "\n" << k.text;
  }
}

// Offsets that are multiples of the tile's extent by construction (a product
// with the extent, a loop from 0 stepping by it) index one partition view of
// the whole buffer made at the entry; any other offset gets a view of its own.
TEST(CudaTileLower, AlignedTilesIndexOneWholeBufferView) {
  const char* src = R"(@kernel tile[(128,)]
def mm(A: f32[M, K], B: f32[K, N], C: mut f32[M, N]):
    bm = group_linear_id() * 64
    acc = tile.zeros((64, 64), f32)
    for k in range(0, K, 32):
        acc = tile.mma(tile.load(A, rows=(bm, 64), cols=(k, 32)), tile.load(B, rows=(k, 32), cols=(1, 64)), acc=acc)
    tile.store(C, rows=(bm, 64), cols=(0, 64), value=acc)
)";
  const ct::LoweredKernel k = lower(src, "aligned.tsr");
  const std::size_t loop = k.text.find("for %");
  ASSERT_NE(loop, std::string::npos) << k.text;
  const std::string entry = k.text.substr(0, loop), body = k.text.substr(loop);
  // A's 64x32 view and C's 64x64 view are made before the loop; B's load at column 1 is not aligned.
  EXPECT_NE(entry.find("partition_view<tile=(64x32)"), std::string::npos) << k.text;
  EXPECT_NE(entry.find("partition_view<tile=(64x64)"), std::string::npos) << k.text;
  EXPECT_EQ(entry.find("partition_view<tile=(32x64)"), std::string::npos) << k.text;
  EXPECT_NE(body.find("partition_view<tile=(32x64)"), std::string::npos) << k.text;
  EXPECT_EQ(body.find("partition_view<tile=(64x32)"), std::string::npos) << k.text;
  const ct::Toolchain& t = ct::toolchain();
  if (!t.found || !t.reason.empty()) GTEST_SKIP() << (t.found ? t.reason : std::string("tileiras not found"));
  EXPECT_GT(ct::run_tileiras(k.bytecode, "sm_90").size(), 4u);
}

// assume_aligned states what a launch with 16-byte aligned buffers and rows
// guarantees: each base pointer divisible by 16 bytes, each row stride by
// 16 bytes' worth of elements (8 for f16/bf16, 4 for f32). Without the option
// nothing is assumed.
TEST(CudaTileLower, AssumeAlignedStatesPointerAndRowDivisibility) {
  const char* src = R"(@kernel tile[(128,)]
def mm(A: bf16[M, K], B: bf16[K, N], C: mut f32[M, N]):
    acc = tile.zeros((64, 64), f32)
    for k in range(0, K, 32):
        acc = tile.mma(tile.load(A, rows=(0, 64), cols=(k, 32)), tile.load(B, rows=(k, 32), cols=(0, 64)), acc=acc)
    tile.store(C, rows=(0, 64), cols=(0, 64), value=acc)
)";
  std::vector<tessera::Kernel> ks = tessera::kernels_from_source(src, "assume.tsr");
  const tessera::ir::Operation& f = ks.at(0).jit({}).specialize()->func();
  const std::string plain = ct::lower_kernel(f).text;
  EXPECT_EQ(plain.find("assume"), std::string::npos);
  const ct::LoweredKernel k = ct::lower_kernel(f, {.assume_aligned = true});
  for (const char* want : {"assume div_by<16>, %0 : tile<ptr<bf16>>", "assume div_by<16>, %6 : tile<ptr<f32>>",
                           "assume div_by<8>", "assume div_by<4>"}) {
    EXPECT_NE(k.text.find(want), std::string::npos) << want << "\n" << k.text;
  }
  // The fast form's views take 32-bit shapes and strides: three views of
  // rank 2, each with two extents and one stride narrowed (the plain form's
  // stay 64-bit; both narrow tile indices).
  auto narrowings = [](const std::string& text) {
    std::size_t n = 0;
    for (std::size_t at = text.find("-> tile<i32>"); at != std::string::npos; at = text.find("-> tile<i32>", at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(narrowings(k.text), narrowings(plain) + 9) << k.text;
  const ct::Toolchain& t = ct::toolchain();
  if (!t.found || !t.reason.empty()) GTEST_SKIP() << (t.found ? t.reason : std::string("tileiras not found"));
  EXPECT_GT(ct::run_tileiras(k.bytecode, "sm_90").size(), 4u);
  const std::string disasm = ct::disassemble(k.bytecode);
  if (disasm.empty()) GTEST_SKIP() << "no tileirdisasm beside " << t.tileiras;
  EXPECT_NE(disasm.find("assume"), std::string::npos);
}
