// tile-pipeline changes the schedule, never the results: kernels with
// `tile.range(..., prefetch=N)` are lowered twice, once through tile-pipeline
// and once without it, both compiled by the CPU backend and run on the same
// random inputs with poisoned outputs; every output element must agree bit
// for bit, and the pipelined form must really be pipelined.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "cpu_backend_test_util.h"
#include "tessera/frontend/kernel_language.h"
#include "tessera/ir/pass.h"
#include "tessera/ir/text.h"

namespace tessera::cputest {
namespace {

constexpr const char* kKernels = R"(
@kernel.autotune(space=dict(PF=[2, 3])) tile[(64,)] shared(16_KiB)
def gemm(A: f32[M, K], B: f32[K, N], C: mut f32[M, N]):
    tiles_n = (N + 16 - 1) // 16
    bm = (group_linear_id() // tiles_n) * 16
    bn = (group_linear_id() % tiles_n) * 16
    a = tshared.alloc[f32]((16, 8))
    b = tshared.alloc[f32]((8, 16))
    acc = tile.zeros((16, 16), f32)
    for k in tile.range(K, step=8, prefetch=PF):
        cp_async.shared.global(a, A[bm:bm+16, k:k+8])
        cp_async.shared.global(b, B[k:k+8, bn:bn+16])
        tbarrier()
        acc = tile.mma(tile.load(a), tile.load(b), acc=acc)
        tbarrier()
    tile.store(C, rows=(bm, 16), cols=(bn, 16), value=acc)

@kernel.autotune(space=dict(PF=[2, 4])) tile[(32,)] shared(4_KiB)
def stream(X: f32[m], Y: mut f32[m]):
    s = tshared.alloc[f32](32)
    i = tile.linear_id()
    for t in tile.range(m, step=32, prefetch=PF):
        cp_async.shared.global(s, X[t:t+32])
        tbarrier()
        if t + i < m:
            Y[t + i] = 2.0 * s[i] + 1.0
        tbarrier()
)";

struct Lowered {
  ir::Module module;
  ir::Operation* kernel = nullptr;
};

Lowered lower(const frontend::KernelDecl& decl, std::int64_t prefetch, bool pipeline) {
  Lowered out;
  out.kernel = &frontend::lower_kernel(out.module, decl, {{"PF", prefetch}});
  ir::PassManager pm;
  pm.add("tile-verify-sync");
  if (pipeline) {
    pm.add("tile-pipeline");
    pm.add("tile-verify-sync");
  }
  pm.add("tile-plan-shared");
  pm.run(out.module);
  return out;
}

const frontend::KernelDecl& find(const std::vector<frontend::KernelDecl>& decls, const std::string& name) {
  for (const auto& d : decls) {
    if (d.name == name) return d;
  }
  throw std::runtime_error("no kernel " + name);
}

Tensor random_f32(std::vector<std::int64_t> shape, std::mt19937_64& gen) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> v(static_cast<std::size_t>(n));
  for (double& x : v) x = normal(gen);
  return f32_tensor(v, std::move(shape));
}

Tensor poisoned(std::vector<std::int64_t> shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return f32_tensor(std::vector<double>(static_cast<std::size_t>(n), std::nan("")), std::move(shape));
}

// Runs `decl` pipelined and plain with the same arguments (the last one is
// the output, poisoned before each run) and compares the outputs' bits.
void expect_same_results(const frontend::KernelDecl& decl, std::int64_t prefetch, std::int64_t grid,
                         const std::vector<Tensor>& inputs, const std::vector<std::int64_t>& out_shape) {
  Lowered piped = lower(decl, prefetch, true);
  Lowered plain = lower(decl, prefetch, false);
  const std::string piped_text = ir::print_module(piped.module);
  EXPECT_EQ(piped_text.find("not pipelined"), std::string::npos) << piped_text;
  EXPECT_NE(piped_text, ir::print_module(plain.module));
  std::vector<std::uint64_t> codes[2];
  int i = 0;
  for (Lowered* l : {&piped, &plain}) {
    cpu::CompiledKernel k = compile(*l->kernel);
    Tensor out = poisoned(out_shape);
    std::vector<cpu::KernelArg> args(inputs.begin(), inputs.end());
    args.emplace_back(out);
    cpu::launch(k, grid, args);
    codes[i++] = out.codes();
  }
  ASSERT_EQ(codes[0].size(), codes[1].size());
  for (std::size_t e = 0; e < codes[0].size(); ++e) {
    ASSERT_EQ(codes[0][e], codes[1][e]) << decl.name << " prefetch=" << prefetch << " element " << e;
    ASSERT_NE(codes[0][e], 0x7fc00000u) << decl.name << ": element " << e << " was never written";
  }
}

TEST(TilePipelineRun, GemmResultsAreBitIdenticalWithAndWithoutPipelining) {
  const auto decls = frontend::parse_kernels(kKernels, "pipeline_run.tsr");
  std::mt19937_64 gen(std::random_device{}());
  for (std::int64_t prefetch : {2, 3}) {
    for (auto [m, n, k] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{37, 29, 45}, {32, 48, 64}}) {
      const std::int64_t grid = ((m + 15) / 16) * ((n + 15) / 16);
      expect_same_results(find(decls, "gemm"), prefetch, grid, {random_f32({m, k}, gen), random_f32({k, n}, gen)},
                          {m, n});
    }
  }
}

TEST(TilePipelineRun, StreamResultsAreBitIdenticalWithAndWithoutPipelining) {
  const auto decls = frontend::parse_kernels(kKernels, "pipeline_run.tsr");
  std::mt19937_64 gen(std::random_device{}());
  for (std::int64_t prefetch : {2, 4}) {
    for (std::int64_t m : {1, 100, 128, 257}) {
      expect_same_results(find(decls, "stream"), prefetch, 1, {random_f32({m}, gen)}, {m});
    }
  }
}

}  // namespace
}  // namespace tessera::cputest
