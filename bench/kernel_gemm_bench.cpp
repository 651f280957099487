// CPU backend benchmark: a tiled fp32 GEMM written in Tile IR (cp_async into
// shared tiles, tile_load, tile.mma, tile_store), run at 512, 1024 and 2048,
// in GFLOP/s on one thread and on every thread; and compile_kernel's first
// call (empty cache) against a cached call.
//
//     build-<dir>/bench/kernel_gemm_bench [max_n]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tessera/backends/cpu/cpu_backend.h"
#include "tessera/ir/builder.h"
#include "tessera/tile/tile_builder.h"

namespace {

using namespace tessera;
using ir::Dim;
using ir::OpBuilder;
using ir::Type;
using ir::Value;

constexpr std::int64_t BM = 64, BN = 64, BK = 32;

Value* op(OpBuilder& b, std::string_view name, std::vector<Value*> operands, ir::AttrMap attrs = {}) {
  return tile::build(b, name, std::move(operands), std::move(attrs));
}
void stmt(OpBuilder& b, std::string_view name, std::vector<Value*> operands, ir::AttrMap attrs = {}) {
  b.create(name, std::move(operands), std::move(attrs));
}

ir::Operation* gemm_kernel(ir::Module& m) {
  const NumericsPolicy f32 = default_policy(DType::fp32);
  ir::Operation* k = tile::build_kernel(m, "bench_gemm",
                                        {{"a", Type::gmem({Dim::named("M"), Dim::named("K")}, f32)},
                                         {"b", Type::gmem({Dim::named("K"), Dim::named("N")}, f32)},
                                         {"c", Type::gmem({Dim::named("M"), Dim::named("N")}, f32, true)}});
  ir::Block& body = ir::function_body(*k);
  OpBuilder b(body);
  auto sym = [&](const char* s) { return op(b, "tile.symbol", {}, {{"name", std::string(s)}}); };
  auto i64 = [](OpBuilder& ob, std::int64_t v) { return tile::build_int(ob, v); };
  Value* g = op(b, "tile.group_id", {});
  Value* blocks_n = op(b, "tile.div", {op(b, "tile.add", {sym("N"), i64(b, BN - 1)}), i64(b, BN)});
  Value* row0 = op(b, "tile.mul", {op(b, "tile.div", {g, blocks_n}), i64(b, BM)});
  Value* col0 = op(b, "tile.mul", {op(b, "tile.rem", {g, blocks_n}), i64(b, BN)});
  Value* sa = op(b, "tile.smem_alloc", {}, {{"shape", ir::fixed_shape({BM, BK})}, {"policy", f32}});
  Value* sb = op(b, "tile.smem_alloc", {}, {{"shape", ir::fixed_shape({BK, BN})}, {"policy", f32}});
  Value* acc0 = op(b, "tile.zeros", {}, {{"shape", ir::fixed_shape({BM, BN})}, {"policy", f32}});
  ir::Operation* loop =
      tile::build_for(b, i64(b, 0), sym("K"), i64(b, BK), {acc0}, [&](OpBuilder& lb, std::span<Value* const> args) {
        stmt(lb, "tile.cp_async", {sa, body.argument(0), row0, args[0]});
        stmt(lb, "tile.cp_async", {sb, body.argument(1), args[0], col0});
        stmt(lb, "tile.cp_async_wait", {}, {{"pending", std::int64_t{0}}});
        stmt(lb, "tile.barrier", {});
        Value* ta = op(lb, "tile.tile_load", {sa, i64(lb, 0), i64(lb, 0)}, {{"shape", ir::fixed_shape({BM, BK})}});
        Value* tb = op(lb, "tile.tile_load", {sb, i64(lb, 0), i64(lb, 0)}, {{"shape", ir::fixed_shape({BK, BN})}});
        Value* next = op(lb, "tile.mma", {ta, tb, args[1]});
        stmt(lb, "tile.barrier", {});
        return std::vector<Value*>{next};
      });
  stmt(b, "tile.tile_store", {body.argument(2), row0, col0, loop->result(0)});
  tile::finish_kernel(*k);
  return k;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  const std::int64_t max_n = argc > 1 ? std::atoll(argv[1]) : 2048;
  ir::Module m;
  ir::Operation* k = gemm_kernel(m);

  // Compile time: an empty cache directory, then the same kernel again.
  const auto dir =
      std::filesystem::temp_directory_path() /
      ("tessera-gemm-bench-" + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
  cpu::CompileOptions options;
  options.cache_dir = dir.string();
  cpu::CompiledKernel first = cpu::compile_kernel(*k, options);
  cpu::CompiledKernel cached = cpu::compile_kernel(*k, options);
  std::printf("compile_kernel: first call %.1f ms (cache %s), cached call %.3f ms (cache %s)\n",
              first.compile_seconds * 1e3, first.cache_hit ? "hit" : "miss", cached.compile_seconds * 1e3,
              cached.cache_hit ? "hit" : "miss");

  const int all = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  std::mt19937_64 rng(42);
  std::normal_distribution<double> dist(0.0, 1.0);
  for (std::int64_t n = 512; n <= max_n; n *= 2) {
    std::vector<double> values(static_cast<std::size_t>(n * n));
    for (double& v : values) v = dist(rng);
    const NumericsPolicy f32 = default_policy(DType::fp32);
    Tensor a = Tensor::from_values(values, {n, n}, f32);
    Tensor b = Tensor::from_values(values, {n, n}, f32);
    Tensor c = Tensor::zeros({n, n}, f32);
    const std::int64_t groups = ((n + BM - 1) / BM) * ((n + BN - 1) / BN);
    for (int threads : {1, all}) {
      cpu::launch(cached, groups, {a, b, c}, {.num_threads = threads});  // warm up
      const int reps = n <= 1024 ? 5 : 2;
      double best = 1e30;
      for (int r = 0; r < reps; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        cpu::launch(cached, groups, {a, b, c}, {.num_threads = threads});
        best = std::min(best, seconds_since(t0));
      }
      std::printf("fp32 gemm n=%lld threads=%d: %.1f GFLOP/s (best of %d, %.1f ms)\n", static_cast<long long>(n),
                  threads, 2.0 * static_cast<double>(n * n * n) / best / 1e9, reps, best * 1e3);
      if (threads == all) break;
    }
  }
  std::filesystem::remove_all(dir);
  return 0;
}
