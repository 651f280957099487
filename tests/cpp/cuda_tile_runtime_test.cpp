// The cuda_tile target's compile cache (no GPU needed, tileiras is): a cubin
// is built once per (bytecode, architecture, tileiras version) and read back
// from <cache>/cuda_tile afterwards; a corrupted entry is rebuilt; an
// architecture tileiras does not list is a CompileError naming the ones it does.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "tessera/backends/cuda_tile/cubin_resources.h"
#include "tessera/backends/cuda_tile/runtime.h"
#include "tessera/backends/cuda_tile/toolchain.h"
#include "tessera/ir/text.h"
#include "tessera/runtime/cuda.h"
#include "tessera/runtime/kernel.h"
#include "tessera/schedule/executable.h"
#include "tessera/schedule/lower_to_tile.h"
#include "tessera/schedule/passes.h"
#include "tessera/support/error.h"

namespace ct = tessera::cuda_tile;
namespace fs = std::filesystem;

namespace {

const char* kGemm = R"(@kernel tile[(128,)]
def mm(A: bf16[M, K], B: bf16[K, N], C: mut f32[M, N]):
    tiles_n = (N + 63) // 64
    bm = (group_linear_id() // tiles_n) * 64
    bn = (group_linear_id() % tiles_n) * 64
    acc = tile.zeros((64, 64), f32)
    for k in range(0, K, 32):
        acc = tile.mma(tile.load(A, rows=(bm, 64), cols=(k, 32)), tile.load(B, rows=(k, 32), cols=(bn, 64)), acc=acc)
    tile.store(C, rows=(bm, 64), cols=(bn, 64), value=acc)
)";

class CudaTileCache : public ::testing::Test {
 protected:
  void SetUp() override {
    const ct::Toolchain& t = ct::toolchain();
    if (!t.found || !t.reason.empty()) GTEST_SKIP() << (t.found ? t.reason : std::string("tileiras not found"));
    const auto stamp = std::chrono::steady_clock::now().time_since_epoch().count();
    dir_ = fs::temp_directory_path() / ("tessera-cuda-tile-cache-" + std::to_string(stamp));
    kernels_ = tessera::kernels_from_source(kGemm, "mm.tsr");
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  const tessera::ir::Operation& func() { return kernels_.at(0).jit({}).specialize()->func(); }

  fs::path dir_;
  std::vector<tessera::Kernel> kernels_;
};

}  // namespace

TEST_F(CudaTileCache, SecondBuildReadsTheCubinBack) {
  const ct::Cubin first = ct::build_cubin(func(), "sm_90", dir_.string());
  EXPECT_FALSE(first.cache_hit);
  ASSERT_GT(first.bytes.size(), 4u);
  EXPECT_EQ(std::string(first.bytes.data(), 4), "\x7f" "ELF");
  EXPECT_EQ(first.name, "mm");
  EXPECT_EQ(first.tileiras_version, ct::toolchain().version);
  EXPECT_TRUE(fs::exists(dir_ / "cuda_tile" / (first.cache_key + ".cubin")));
  EXPECT_TRUE(fs::exists(dir_ / "cuda_tile" / (first.cache_key + ".tileirbc")));
  EXPECT_TRUE(fs::exists(dir_ / "cuda_tile" / (first.cache_key + ".txt")));

  const ct::Cubin second = ct::build_cubin(func(), "sm_90", dir_.string());
  EXPECT_TRUE(second.cache_hit);
  EXPECT_EQ(second.cache_key, first.cache_key);
  EXPECT_EQ(second.bytes, first.bytes);
}

TEST_F(CudaTileCache, ArchitectureIsPartOfTheKey) {
  const ct::Cubin hopper = ct::build_cubin(func(), "sm_90", dir_.string());
  const ct::Cubin ampere = ct::build_cubin(func(), "sm_80", dir_.string());
  EXPECT_FALSE(ampere.cache_hit);
  EXPECT_NE(hopper.cache_key, ampere.cache_key);
  EXPECT_NE(hopper.bytes, ampere.bytes);
}

TEST_F(CudaTileCache, CorruptedEntryIsRebuilt) {
  const ct::Cubin first = ct::build_cubin(func(), "sm_90", dir_.string());
  {
    std::ofstream out(first.path, std::ios::binary | std::ios::trunc);
    out << "not a cubin";
  }
  const ct::Cubin again = ct::build_cubin(func(), "sm_90", dir_.string());
  EXPECT_FALSE(again.cache_hit);
  EXPECT_EQ(again.bytes, first.bytes);
}

TEST_F(CudaTileCache, UnlistedArchitectureIsACompileError) {
  try {
    ct::build_cubin(func(), "sm_75", dir_.string());
    FAIL() << "expected a CompileError";
  } catch (const tessera::Error& e) {
    EXPECT_EQ(e.code(), tessera::ErrorCode::Compile);
    const std::string what = e.what();
    EXPECT_NE(what.find("does not target sm_75"), std::string::npos) << what;
    EXPECT_NE(what.find("sm_90"), std::string::npos) << what;
  }
}

namespace {

// One attention op's kernel as a GPU executable compiles it for CUDA Tile
// IR (the "tile_ir" variant with its knobs), lowered into `tile`.
const tessera::ir::Operation* attention_kernel(tessera::ir::Module& tile, std::int64_t d, bool backward) {
  const std::string t = "tensor<[1, 8, 8192, " + std::to_string(d) + "] bf16 @accum(fp32)>";
  const std::string f = "tensor<[1, 8, 8192, " + std::to_string(d) + "] fp32 @accum(fp32)>";
  const std::string rows = "tensor<[1, 8, 8192] fp32 @accum(fp32)>";
  const std::string text =
      backward ? "func @attn(%q: " + t + ", %k: " + t + ", %v: " + t + ", %do: " + t + ", %delta: " + rows + ", %lse: " +
                     rows + ") -> (" + f + ", " + f + ", " + f + ") {\n  %0:3 = graph.flash_attn_bwd %q, %k, %v, %delta, " +
                     "%lse, %do {causal = false, out = policy<fp32 @accum(fp32)>, scale = 0.125} : " + f + ", " + f +
                     ", " + f + "\n  return %0#0, %0#1, %0#2\n}\n"
               : "func @attn(%q: " + t + ", %k: " + t + ", %v: " + t + ") -> (" + t + ") {\n  %0:2 = graph.flash_attn " +
                     "%q, %k, %v {causal = false, scale = 0.125} : " + t + ", " + rows + "\n  return %0#0\n}\n";
  const tessera::ir::Module graph = tessera::ir::parse_module(text, "attn.tir");
  tessera::ir::Module scheduled = tessera::schedule::schedule_module(graph, "attn", /*cuda=*/true);
  tessera::ir::Operation& fn = *scheduled.lookup("attn");
  tessera::schedule::set_target_knobs(fn, /*cuda=*/true);
  tessera::schedule::use_tile_ir(fn);
  const tessera::ir::Operation* kernel = nullptr;
  for (const auto& op : tessera::ir::function_body(fn).ops()) {
    if (op->name() == "schedule.kernel") kernel = tessera::schedule::lower_kernel(*op, tile, "attn_k").func;
  }
  return kernel;
}

}  // namespace

// The D = 128 attention forward asks for two blocks per SM; the kernel the
// loop's own latency hint gives does not fit them (tileiras 13.5: 115816
// bytes of shared memory), so build_cubin assembles another lowering that
// does, and a cache hit shows that lowering's text, not the first one's.
TEST_F(CudaTileCache, OccupancyHintIsMetAndACacheHitKeepsTheKeptLowering) {
  tessera::ir::Module tile;
  const tessera::ir::Operation* kernel = attention_kernel(tile, 128, /*backward=*/false);
  ASSERT_NE(kernel, nullptr);
  const ct::Cubin first = ct::build_cubin(*kernel, "sm_90", dir_.string(), true, /*assume_aligned=*/true);
  const auto r = ct::read_cubin_resources(first.bytes, first.name);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(ct::blocks_per_multiprocessor(*r, "sm_90"), 2) << r->shared_bytes << " bytes of shared memory";
  EXPECT_EQ(first.text.rfind("// occupancy 2 on sm_90: latency ", 0), 0u) << first.text.substr(0, 200);
  const ct::Cubin second = ct::build_cubin(*kernel, "sm_90", dir_.string(), true, /*assume_aligned=*/true);
  EXPECT_TRUE(second.cache_hit);
  EXPECT_EQ(second.bytes, first.bytes);
  EXPECT_EQ(second.text, first.text);
}

// On a GPU: the blocks per SM worked out from a cubin (cubin_resources.h)
// are the driver's (cuOccupancyMaxActiveBlocksPerMultiprocessor), and reach
// each attention kernel's hint.
TEST_F(CudaTileCache, BlocksPerMultiprocessorAreTheDriversOnTheGpu) {
  if (!tessera::cuda::available() || tessera::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const std::string arch = ct::device_arch(0);
  struct Case { std::int64_t d; bool backward; int hint; };
  for (const Case c : {Case{64, false, 3}, Case{128, false, 2}, Case{64, true, 3}, Case{128, true, 2}}) {
    SCOPED_TRACE("D = " + std::to_string(c.d) + (c.backward ? " backward" : " forward"));
    tessera::ir::Module tile;
    const tessera::ir::Operation* kernel = attention_kernel(tile, c.d, c.backward);
    ASSERT_NE(kernel, nullptr);
    const ct::Cubin cubin = ct::build_cubin(*kernel, arch, dir_.string(), true, /*assume_aligned=*/true);
    const auto r = ct::read_cubin_resources(cubin.bytes, cubin.name);
    ASSERT_TRUE(r.has_value());
    const std::optional<int> ours = ct::blocks_per_multiprocessor(*r, arch);
    if (!ours) GTEST_SKIP() << arch << " has no limits table";
    const tessera::cuda::Module module = tessera::cuda::Module::load_image(0, cubin.bytes.data());
    const int drivers = module.function(cubin.name).active_blocks_per_multiprocessor(static_cast<int>(r->threads));
    EXPECT_EQ(*ours, drivers) << r->threads << " threads, " << r->registers << " registers, " << r->shared_bytes
                              << " bytes of shared memory";
    EXPECT_GE(drivers, c.hint);
  }
}
