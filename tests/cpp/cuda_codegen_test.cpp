// The CUDA code generator without a GPU: every conformance kernel's CUDA C++
// compiles under NVRTC for sm_90a and sm_80 (NVRTC needs no device), the
// bf16 GEMM takes the tensor-core path, unsupported cases raise CompileError
// naming the op. One execution test (scale, against hand-computed values)
// runs where a GPU is present and is skipped elsewhere; the conformance
// comparison against the CPU backend lives in tests/gpu/gpu_codegen_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tessera/backends/cuda/cuda_backend.h"
#include "tessera/ir/text.h"
#include "tessera/runtime/cuda.h"
#include "tessera/runtime/kernel.h"
#include "tessera/support/error.h"

namespace cu = tessera::cuda;
using tessera::Kernel;
using tessera::KernelConstants;

namespace {

bool nvrtc_present() {
  try {
    cu::nvrtc_version();
    return true;
  } catch (const tessera::Error&) {
    return false;
  }
}

std::string conformance(const std::string& file) {
  return std::string(TESSERA_SOURCE_DIR) + "/tests/conformance/" + file;
}

// The kernel's Tile IR after the passes, specialized by `constants`.
std::shared_ptr<tessera::KernelSpecialization> lowered(const std::string& file, const KernelConstants& constants = {}) {
  std::vector<Kernel> ks = tessera::load_kernels(conformance(file));
  return ks.at(0).jit(constants).specialize();
}

const char* kGemmBf16 = R"(
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

void compile_for(const std::string& source, const std::string& arch) {
  cu::CompileOptions o;
  o.arch = arch;
  o.extra = {"--fmad=false", "-std=c++17"};
  const cu::CompiledProgram p = cu::compile(source, "test.cu", 0, o);
  EXPECT_FALSE(p.cubin.empty()) << arch;
}

struct Case {
  const char* file;
  KernelConstants constants;
  const char* expect;  // a fragment the generated source must contain
};

}  // namespace

TEST(CudaCodegen, ConformanceKernelsEmitAndCompileForSm90aAndSm80) {
  if (!nvrtc_present()) GTEST_SKIP() << "NVRTC is not installed";
  const std::vector<Case> cases = {
      {"scale.tsr", {}, "__fmul_rn"},
      {"axpy_tiled.tsr", {}, "tsr::cp_async("},
      {"gemm_tile.tsr", {}, "tsr::mma_scalar<"},
      {"group_sum.tsr", {}, "tsr::reduce_sum("},
      {"tp_gemm.tsr", {{"tp", 2}}, "__fmaf_rn"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file);
    auto spec = lowered(c.file, c.constants);
    const std::string src = cu::emit_kernel_source(spec->func(), {.specialize = {}});
    if (std::string(c.file) != "tp_gemm.tsr") {
      EXPECT_NE(src.find(c.expect), std::string::npos) << src;
    }
    compile_for(src, "sm_90a");
    compile_for(src, "sm_80");
  }
}

TEST(CudaCodegen, LaneOnlyKernelsRunFlatOthersOneBlockPerGroup) {
  auto scale = lowered("scale.tsr");
  const std::string s = cu::emit_kernel_source(scale->func());
  EXPECT_NE(s.find("__launch_bounds__(256)"), std::string::npos);
  EXPECT_NE(s.find("if (group < p.grid) {"), std::string::npos);
  auto axpy = lowered("axpy_tiled.tsr");
  EXPECT_NE(cu::emit_kernel_source(axpy->func()).find("__launch_bounds__(1)"), std::string::npos);
  auto sum = lowered("group_sum.tsr");
  const std::string g = cu::emit_kernel_source(sum->func());
  EXPECT_NE(g.find("__launch_bounds__(128)"), std::string::npos);
  EXPECT_NE(g.find("__syncthreads();"), std::string::npos);
}

std::string flat_source(const std::string& text) {
  std::vector<Kernel> ks = tessera::kernels_from_source(text, "flat.tsr");
  return cu::emit_kernel_source(ks.at(0).specialize()->func());
}

std::size_t count_of(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

// A flat kernel's thread takes four tiles, and reads each tile's loads that
// come before its first store ahead of all four tiles' bodies.
TEST(CudaCodegen, FlatKernelsReadLoadsAheadOverFourTiles) {
  const std::string s = cu::emit_kernel_source(lowered("scale.tsr")->func());
  EXPECT_NE(s.find("4 tiles per thread, their loads first"), std::string::npos) << s;
  EXPECT_NE(s.find("(tsr::i64)blockIdx.x * (kThreads * 4) + tid"), std::string::npos) << s;
  EXPECT_EQ(count_of(s, "W.report();"), 4u) << s;
  const std::size_t last_ahead = s.find("ahead3 = tsr::load_u(p_x");
  ASSERT_NE(last_ahead, std::string::npos) << s;
  EXPECT_LT(last_ahead, s.find("tsr::store_u(p_y")) << "every load before the first store:\n" << s;
  EXPECT_EQ(count_of(s, "tsr::load_u(p_x"), 4u) << "the bodies read the values read ahead:\n" << s;

  // A gather: the index is read ahead, the element it picks is not (its
  // index is data).
  const std::string g = flat_source(R"(
@kernel
def gather(x: f32[m], idx: int32[n], y: mut f32[n]):
    i = tile.linear_id()
    if i < n:
        y[i] = x[idx[i]]
)");
  EXPECT_NE(g.find("ahead3 = tsr::load_u(p_idx"), std::string::npos) << g;
  EXPECT_EQ(g.find("ahead4"), std::string::npos) << g;
  EXPECT_EQ(count_of(g, "tsr::load(p_x"), 4u) << g;

  // A load after the tile's store stays after it; with no load that can
  // move, a thread keeps one tile.
  const std::string after = flat_source(R"(
@kernel
def mark_then_read(x: mut f32[n], y: mut f32[n]):
    i = tile.linear_id()
    if i < n:
        x[i] = 0.0
        y[i] = x[i]
)");
  EXPECT_NE(after.find("if (group >= p.grid) return;"), std::string::npos) << after;
  EXPECT_EQ(after.find("ahead"), std::string::npos) << after;
}

TEST(CudaCodegen, Bf16GemmUsesTensorCoresAndReadsSharedInPlace) {
  if (!nvrtc_present()) GTEST_SKIP() << "NVRTC is not installed";
  std::vector<Kernel> ks = tessera::kernels_from_source(kGemmBf16, "gemm_bf16.tsr");
  auto spec = ks.at(0).specialize();
  const std::string src = cu::emit_kernel_source(spec->func());
  EXPECT_NE(src.find("tsr::mma_tc<true>"), std::string::npos) << src;
  EXPECT_NE(src.find("tsr::MmaLayout<128, 128, 2, 4>"), std::string::npos) << src;
  EXPECT_EQ(src.find("tsr::stage("), std::string::npos) << "operands should be read in place:\n" << src;
  cu::CompileOptions o;
  o.arch = "sm_90a";
  o.ptx = true;
  o.extra = {"--fmad=false", "-std=c++17"};
  const cu::CompiledProgram p = cu::compile(src, "gemm.cu", 0, o);
  EXPECT_NE(p.ptx.find("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"), std::string::npos);
  EXPECT_NE(p.ptx.find("ldmatrix.sync.aligned"), std::string::npos);
  EXPECT_NE(p.ptx.find("cp.async.cg.shared.global"), std::string::npos);
}

TEST(CudaCodegen, ConstantsAreExactBitPatterns) {
  const char* src = R"(
@kernel
def k(y: mut f32[n]):
    i = tile.linear_id()
    if i < n:
        y[i] = 0.1
)";
  std::vector<Kernel> ks = tessera::kernels_from_source(src, "k.tsr");
  const std::string s = cu::emit_kernel_source(ks.at(0).specialize()->func());
  EXPECT_NE(s.find("__uint_as_float(0x3dcccccdu)"), std::string::npos) << s;  // 0.1f, hand-computed
}

TEST(CudaCodegen, UnsupportedAccumulatorIsACompileErrorNamingTheOp) {
  const char* src = R"(
@kernel tile[(32,)]
def k(A: f16[16, 16], C: mut f16[16, 16]):
    acc = tile.zeros((16, 16), f16)
    acc = tile.mma(tile.load(A, rows=(0, 16), cols=(0, 16)), tile.load(A, rows=(0, 16), cols=(0, 16)), acc=acc)
    tile.store(C, rows=(0, 16), cols=(0, 16), value=acc)
)";
  std::vector<Kernel> ks = tessera::kernels_from_source(src, "k.tsr");
  try {
    cu::emit_kernel_source(ks.at(0).specialize()->func());
    FAIL() << "expected CompileError";
  } catch (const tessera::Error& e) {
    EXPECT_NE(std::string(e.what()).find("tile.mma"), std::string::npos) << e.what();
  }
}

// tile.check_span is the CPU's: a GPU records a fault and runs on, so the
// loads it covers would read out of range. The CUDA emitter refuses it.
TEST(CudaCodegen, CheckSpanIsACompileErrorNamingTheOp) {
  tessera::ir::Module m = tessera::ir::parse_module(R"(
func @strip(%x: gmem<[n] fp32>, %y: gmem<[m] fp32 mut>) -> () attributes {group_shape = [8], kernel = true} {
  %0 = tile.linear_id : lane<int64>
  %1 = tile.check_span %x, %0 {count = 4} : lane<int64>
  %2 = tile.load_elem %x, %1 {in_bounds = true} : lane<fp32>
  tile.store_elem %y, %0, %2
  return
}
)");
  try {
    cu::emit_kernel_source(*m.lookup("strip"));
    FAIL() << "expected CompileError";
  } catch (const tessera::Error& e) {
    EXPECT_NE(std::string(e.what()).find("tile.check_span is a CPU op"), std::string::npos) << e.what();
  }
}

// tile.lane_shuffle is a warp shuffle: the whole warp's mask in a group of
// a warp or more, the group's lanes in a smaller one (bools travel as
// ints); the source compiles under NVRTC. A group whose size is not a
// multiple of 2 xor is a CompileError naming the op.
TEST(CudaCodegen, LaneShuffleIsAWarpShuffle) {
  auto kernel = [](int lanes, int x) {
    return tessera::ir::parse_module(R"(
func @swap(%y: gmem<[n] fp32 mut>, %z: gmem<[n] int64 mut>) -> () attributes {group_shape = [)" +
                                     std::to_string(lanes) + R"(], kernel = true} {
  %0 = tile.linear_id : lane<int64>
  %1 = tile.cast %0 {to = policy<fp32>} : lane<fp32>
  %2 = tile.lane_shuffle %1 {xor = )" + std::to_string(x) + R"(} : lane<fp32>
  tile.store_elem %y, %0, %2
  %3 = tile.const {policy = policy<int64>, value = 2} : lane<int64>
  %4 = tile.cmp %0, %3 {pred = "lt"} : lane<bool>
  %5 = tile.lane_shuffle %4 {xor = 1} : lane<bool>
  %6 = tile.select %5, %0, %3 : lane<int64>
  tile.store_elem %z, %0, %6
  return
}
)");
  };
  {
    tessera::ir::Module m = kernel(64, 16);
    const std::string src = cu::emit_kernel_source(*m.lookup("swap"));
    EXPECT_NE(src.find("__shfl_xor_sync(0xffffffffu, v"), std::string::npos) << src;
    EXPECT_NE(src.find("(__shfl_xor_sync(0xffffffffu, (int)"), std::string::npos) << src;
    if (nvrtc_present()) compile_for(src, "sm_90a");
  }
  {
    tessera::ir::Module m = kernel(8, 4);
    const std::string src = cu::emit_kernel_source(*m.lookup("swap"));
    EXPECT_NE(src.find("__shfl_xor_sync(255u, "), std::string::npos) << src;
  }
  tessera::ir::Module m = kernel(24, 16);
  try {
    cu::emit_kernel_source(*m.lookup("swap"));
    FAIL() << "expected CompileError";
  } catch (const tessera::Error& e) {
    EXPECT_NE(std::string(e.what()).find("tile.lane_shuffle"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("multiple of 32"), std::string::npos) << e.what();
  }
}

TEST(CudaCodegenGpu, ScaleMatchesHandComputedValues) {
  if (!cu::available()) GTEST_SKIP() << "no CUDA device: " << cu::unavailable_reason();
  auto spec = lowered("scale.tsr");
  const cu::CompiledKernel k = cu::compile_kernel(spec->func());
  std::vector<double> xs = {1.0, -2.5, 3.25, 1e30, 0.0};
  tessera::NumericsPolicy f32;
  tessera::Tensor x = tessera::Tensor::from_values(xs, {5}, f32).to("cuda:0");
  tessera::Tensor y = tessera::Tensor::from_values(std::vector<double>(5, -7.0), {5}, f32).to("cuda:0");
  cu::launch(k, -1, {x, y, 4.0});
  tessera::Tensor h = y.to("cpu");
  const float* v = static_cast<const float*>(h.data());
  const float want[] = {4.0f, -10.0f, 13.0f, 4e30f, 0.0f};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(v[i], want[i]) << i;
}

// A kernel whose last lane loads one element past x (extent 5), and its buffers on cuda:0.
struct ShiftKernel {
  cu::CompiledKernel kernel;
  tessera::Tensor x, y;
};
ShiftKernel shift_kernel() {
  const char* src = R"(
@kernel
def shift(x: f32[n], y: mut f32[n]):
    i = tile.linear_id()
    y[i] = x[i + 1]
)";
  std::vector<Kernel> ks = tessera::kernels_from_source(src, "shift.tsr");
  tessera::NumericsPolicy f32;
  return {cu::compile_kernel(ks.at(0).specialize()->func()),
          tessera::Tensor::from_values(std::vector<double>(5, 1.0), {5}, f32).to("cuda:0"),
          tessera::Tensor::from_values(std::vector<double>(5, 0.0), {5}, f32).to("cuda:0")};
}

// Deferred checking (compiled executables): the launch does not synchronize;
// the kernel writes its fault into the caller's record, which describe_fault
// reads back into the message the synchronous launch raises.
TEST(CudaCodegenGpu, FaultRecordGivenByTheCallerIsDescribedLater) {
  if (!cu::available()) GTEST_SKIP() << "no CUDA device: " << cu::unavailable_reason();
  auto [k, x, y] = shift_kernel();
  auto record = cu::allocate_shared(0, cu::kFaultRecordBytes);
  cu::memset_async(0, reinterpret_cast<cu::DevicePtr>(record.get()), 0, cu::kFaultRecordBytes);
  cu::KernelLaunchOptions o;
  o.check_faults = false;
  o.fault_record = reinterpret_cast<cu::DevicePtr>(record.get());
  EXPECT_NO_THROW(cu::launch(k, -1, {x, y}, o));
  unsigned char host[cu::kFaultRecordBytes];
  cu::copy_to_host(0, host, reinterpret_cast<cu::DevicePtr>(record.get()), sizeof host);
  auto fault = cu::describe_fault(k, host);
  ASSERT_TRUE(fault.has_value());
  EXPECT_EQ(fault->code, tessera::ErrorCode::IndexOutOfRange);
  EXPECT_NE(fault->message.find("load index 5 out of range for dim 0 of 'x' (extent 5)"), std::string::npos)
      << fault->message;
  // The other lanes ran: y[0..3] = x[1..4].
  EXPECT_EQ(y.to("cpu").to_values()[0], 1.0);
}

TEST(CudaCodegenGpu, OutOfBoundsLoadIsRaisedNamingTheParameter) {
  if (!cu::available()) GTEST_SKIP() << "no CUDA device: " << cu::unavailable_reason();
  auto [k, x, y] = shift_kernel();
  try {
    cu::launch(k, -1, {x, y});
    FAIL() << "expected IndexOutOfRange";
  } catch (const tessera::Error& e) {
    EXPECT_NE(std::string(e.what()).find("load index 5 out of range for dim 0 of 'x' (extent 5)"), std::string::npos)
        << e.what();
  }
}

// An mma accumulator cast to bf16 before its store (the Schedule IR GEMM
// template's form for a bf16 result) keeps the mma's register layout: the
// cast is slot by slot, and the declared tile types must agree for NVRTC.
TEST(CudaCodegen, CastOfAnMmaAccumulatorKeepsItsLayout) {
  if (!nvrtc_present()) GTEST_SKIP() << "NVRTC is not installed";
  const char* src = R"(@kernel tile[(128,)]
def mm_bf16_out(A: bf16[M, K], B: bf16[K, N], C: mut bf16[M, N]):
    acc = tile.zeros((32, 32), f32)
    for k in range(0, K, 32):
        acc = tile.mma(tile.load(A, rows=(0, 32), cols=(k, 32)), tile.load(B, rows=(k, 32), cols=(0, 32)), acc=acc)
    tile.store(C, rows=(0, 32), cols=(0, 32), value=bf16(acc))
)";
  std::vector<Kernel> ks = tessera::kernels_from_source(src, "mm_bf16_out.tsr");
  const std::string cuda = cu::emit_kernel_source(ks.at(0).specialize()->func());
  EXPECT_NE(cuda.find("tsr::Tile<tsr::kBf16, 32, 32, tsr::MmaLayout<32, 32,"), std::string::npos) << cuda;
  compile_for(cuda, "sm_90a");
}

// Accesses the emitter proves in bounds go without their check and fault
// record: the spec's scale reads and writes at exactly the guarded index
// (`if i < n`, n the buffers' extent); an access elsewhere (x[i + 1]) or
// without the guard keeps its check (the GPU test above faults through it).
TEST(CudaCodegen, AccessesAtAnExtentGuardsIndexGoUnchecked) {
  if (!nvrtc_present()) GTEST_SKIP() << "NVRTC is not installed";
  const std::string s = cu::emit_kernel_source(lowered("scale.tsr")->func());
  EXPECT_NE(s.find("tsr::load_u(p_x, "), std::string::npos) << s;
  EXPECT_NE(s.find("tsr::store_u(p_y, "), std::string::npos) << s;
  EXPECT_EQ(s.find("tsr::load(p_x"), std::string::npos) << s;
  compile_for(s, "sm_90a");
  const char* src = R"(
@kernel
def guarded_shift(x: f32[n], y: mut f32[n], z: mut f32[m]):
    i = tile.linear_id()
    if i < n:
        y[i] = x[i + 1]
        z[i] = x[i]
)";
  std::vector<Kernel> ks = tessera::kernels_from_source(src, "guarded_shift.tsr");
  const std::string g = cu::emit_kernel_source(ks.at(0).specialize()->func());
  EXPECT_NE(g.find("tsr::load(p_x"), std::string::npos) << g;   // x[i + 1]: checked
  EXPECT_NE(g.find("tsr::load_u(p_x"), std::string::npos) << g;  // x[i]: unchecked
  EXPECT_NE(g.find("tsr::store(p_z"), std::string::npos) << g;   // z's extent is m, not n
  EXPECT_NE(g.find("tsr::store_u(p_y"), std::string::npos) << g;
  compile_for(g, "sm_90a");
}

// In a kernel with a group shape, a thread's linear_id is below its block
// size, so index arithmetic built from it and constants is int (loops too),
// while values that mix in a runtime extent stay 64-bit.
TEST(CudaCodegen, GroupIndexArithmeticFromTheLaneIdIsInt) {
  if (!nvrtc_present()) GTEST_SKIP() << "NVRTC is not installed";
  const char* src = R"(
@kernel tile[(128,)]
def rows(x: f32[R, 512], y: mut f32[R, 512]):
    r = group_linear_id()
    for c in range(tile.linear_id(), 512, 128):
        y[r, c] = x[r, c] * 2.0
)";
  std::vector<Kernel> ks = tessera::kernels_from_source(src, "rows.tsr");
  const std::string s = cu::emit_kernel_source(ks.at(0).specialize()->func());
  EXPECT_NE(s.find("for (int iv"), std::string::npos) << s;
  EXPECT_NE(s.find("const tsr::i64"), std::string::npos) << s;  // the group id and the extent R
  compile_for(s, "sm_90a");
}

// A product of int-sized values that may pass 2^31 is computed in 64 bits:
// its int operands are widened before the multiplication.
TEST(CudaCodegen, IntIndexOperandsOfWideResultsAreWidenedFirst) {
  if (!nvrtc_present()) GTEST_SKIP() << "NVRTC is not installed";
  const char* src = R"(
@kernel tile[(128,)]
def far(x: f32[n], y: mut f32[n]):
    i = tile.linear_id() * 1073741824
    if i < n:
        y[i] = x[i]
)";
  std::vector<Kernel> ks = tessera::kernels_from_source(src, "far.tsr");
  const std::string s = cu::emit_kernel_source(ks.at(0).specialize()->func());
  EXPECT_NE(s.find("(((tsr::i64)v"), std::string::npos) << s;
  EXPECT_EQ(s.find("const int v2 = (int)((v"), std::string::npos) << s;
  compile_for(s, "sm_90a");
}
