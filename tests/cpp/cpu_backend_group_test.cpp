// CPU backend: groups of several tiles, shared memory, barriers, reduce_sum,
// lane values living across barriers, group-level loops, and determinism
// across thread counts.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "cpu_backend_test_util.h"
#include "tessera/support/error.h"

namespace tessera::cputest {
namespace {

constexpr std::int64_t kGroup = 64;

// out[g] = sum of x over group g's chunk (reduce_sum of a shared buffer);
// scaled[i] = x[i] * out[g], reading the lane's x value from before the barrier.
ir::Operation* group_sum_kernel(ir::Module& m) {
  ir::Operation* k = tile::build_kernel(m, "group_sum",
                                        {{"x", gmem({Dim::named("n")}, DType::fp32)},
                                         {"out", gmem({Dim::named("G")}, DType::fp32, true)},
                                         {"scaled", gmem({Dim::named("n")}, DType::fp32, true)}},
                                        {.group_shape = std::vector<std::int64_t>{kGroup}});
  ir::Block& body = ir::function_body(*k);
  OpBuilder b(body);
  Value* s = smem(b, {kGroup}, DType::fp32);
  Value* lid = op(b, "tile.linear_id", {});
  Value* i = op(b, "tile.add", {op(b, "tile.mul", {op(b, "tile.group_id", {}), op(b, "tile.group_size", {})}), lid});
  Value* n = op(b, "tile.symbol", {}, {{"name", std::string("n")}});
  // tile.if results take the inits' types; the else branch keeps the init (0).
  ir::Operation* load = tile::build_if(
      b, cmp(b, "lt", i, n), {real(b, 0.0)},
      [&](OpBuilder& tb, std::span<Value* const>) {
        return std::vector<Value*>{op(tb, "tile.load_elem", {body.argument(0), i})};
      },
      [&](OpBuilder&, std::span<Value* const> a) { return std::vector<Value*>{a[0]}; });
  Value* v = load->result(0);
  stmt(b, "tile.store_elem", {s, lid, v});
  barrier(b);
  Value* total = op(b, "tile.reduce_sum", {s});
  tile::build_if(
      b, cmp(b, "eq", lid, i64(b, 0)), {},
      [&](OpBuilder& tb, std::span<Value* const>) {
        stmt(tb, "tile.store_elem", {body.argument(1), op(tb, "tile.group_id", {}), total});
        return std::vector<Value*>{};
      },
      [&](OpBuilder&, std::span<Value* const>) { return std::vector<Value*>{}; });
  tile::build_if(
      b, cmp(b, "lt", i, n), {},
      [&](OpBuilder& tb, std::span<Value* const>) {
        stmt(tb, "tile.store_elem", {body.argument(2), i, op(tb, "tile.mul", {v, total})});
        return std::vector<Value*>{};
      },
      [&](OpBuilder&, std::span<Value* const>) { return std::vector<Value*>{}; });
  return k;
}

// The contract's tree: at stride s = 1, 2, 4, ... element j (a multiple of
// 2s) adds element j + s, each addition rounded to fp32.
float tree_sum(std::vector<float> a) {
  for (std::size_t s = 1; s < a.size(); s *= 2)
    for (std::size_t j = 0; j + s < a.size(); j += 2 * s) a[j] = a[j] + a[j + s];
  return a[0];
}

TEST(CpuBackendGroup, GroupSumWithBarrierSharedMemoryAndReduceSum) {
  ir::Module m;
  cpu::CompiledKernel ck = compile(*group_sum_kernel(m));
  // The value v is read after the barrier: it must live in a per-lane array.
  EXPECT_NE(ck.source.find("[kGroupSize]"), std::string::npos) << ck.source;

  std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  const std::int64_t n = 1000, groups = (n + kGroup - 1) / kGroup;
  std::vector<double> xs(static_cast<std::size_t>(n));
  for (double& x : xs) x = static_cast<float>(dist(rng));
  Tensor x = f32_tensor(xs, {n});
  Tensor out = Tensor::zeros({groups}, pol(DType::fp32));
  Tensor scaled = Tensor::zeros({n}, pol(DType::fp32));
  cpu::launch(ck, groups, {x, out, scaled});

  const auto got = out.to_values();
  const auto got_scaled = scaled.to_values();
  for (std::int64_t g = 0; g < groups; ++g) {
    std::vector<float> chunk(kGroup, 0.0f);
    double exact = 0.0;
    for (std::int64_t l = 0; l < kGroup && g * kGroup + l < n; ++l) {
      chunk[static_cast<std::size_t>(l)] = static_cast<float>(xs[static_cast<std::size_t>(g * kGroup + l)]);
      exact += xs[static_cast<std::size_t>(g * kGroup + l)];
    }
    const float want = tree_sum(chunk);
    ASSERT_EQ(got[static_cast<std::size_t>(g)], static_cast<double>(want)) << "group " << g;
    EXPECT_NEAR(got[static_cast<std::size_t>(g)], exact, 1e-5) << "group " << g;  // and close to the float64 sum
    for (std::int64_t l = 0; l < kGroup && g * kGroup + l < n; ++l) {
      const auto e = static_cast<std::size_t>(g * kGroup + l);
      ASSERT_EQ(got_scaled[e], static_cast<double>(static_cast<float>(xs[e] * static_cast<double>(want))));
    }
  }
}

// tile.lane_shuffle: lane t of a group gets the value of lane t ^ xor, for
// every xor up to 16, lane values of three types, and a uniform operand;
// a group whose size is not a multiple of 2 xor is a compile error.
ir::Operation* shuffle_kernel(ir::Module& m, std::int64_t group, std::int64_t x) {
  ir::Operation* k = tile::build_kernel(m, "shuffle",
                                        {{"f", gmem({Dim::named("n")}, DType::fp32, true)},
                                         {"i", gmem({Dim::named("n")}, DType::int64, true)},
                                         {"c", gmem({Dim::named("n")}, DType::int64, true)}},
                                        {.group_shape = std::vector<std::int64_t>{group}});
  ir::Block& body = ir::function_body(*k);
  OpBuilder b(body);
  Value* lid = op(b, "tile.linear_id", {});
  Value* i = op(b, "tile.add", {op(b, "tile.mul", {op(b, "tile.group_id", {}), i64(b, group)}), lid});
  Value* as_f = op(b, "tile.cast", {i}, {{"to", pol(DType::fp32)}});
  const ir::AttrMap xor_attr{{"xor", x}};
  stmt(b, "tile.store_elem", {body.argument(0), i, op(b, "tile.lane_shuffle", {as_f}, xor_attr)});
  stmt(b, "tile.store_elem", {body.argument(1), i, op(b, "tile.lane_shuffle", {i}, xor_attr)});
  stmt(b, "tile.store_elem", {body.argument(2), i, op(b, "tile.lane_shuffle", {i64(b, 7)}, xor_attr)});
  return k;
}

TEST(CpuBackendGroup, LaneShuffleTakesTheValueOfTheXorLane) {
  for (const std::int64_t x : {1, 2, 4, 8, 16}) {
    SCOPED_TRACE("xor " + std::to_string(x));
    ir::Module m;
    cpu::CompiledKernel ck = compile(*shuffle_kernel(m, 64, x));
    const std::int64_t n = 3 * 64;
    Tensor f = Tensor::zeros({n}, pol(DType::fp32)), iv = Tensor::zeros({n}, pol(DType::int64)),
           c = Tensor::zeros({n}, pol(DType::int64));
    cpu::launch(ck, 3, {f, iv, c});
    const auto fs = f.to_values(), is = iv.to_values(), cs = c.to_values();
    for (std::int64_t e = 0; e < n; ++e) {
      const auto want = static_cast<double>((e / 64) * 64 + ((e % 64) ^ x));
      ASSERT_EQ(fs[static_cast<std::size_t>(e)], want) << "element " << e;
      ASSERT_EQ(is[static_cast<std::size_t>(e)], want) << "element " << e;
      ASSERT_EQ(cs[static_cast<std::size_t>(e)], 7.0) << "element " << e;
    }
  }
  ir::Module m;
  try {
    compile(*shuffle_kernel(m, 24, 16));
    FAIL() << "a shuffle 16 lanes apart in a group of 24 compiled";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("multiple of 32"), std::string::npos) << e.what();
  }
}

TEST(CpuBackendGroup, ResultsAreIdenticalForEveryThreadCount) {
  ir::Module m;
  cpu::CompiledKernel ck = compile(*group_sum_kernel(m));
  std::mt19937_64 rng(std::random_device{}());
  std::normal_distribution<double> dist(0.0, 100.0);
  const std::int64_t n = 64 * 37 + 5, groups = (n + kGroup - 1) / kGroup;
  std::vector<double> xs(static_cast<std::size_t>(n));
  for (double& x : xs) x = dist(rng);
  Tensor x = f32_tensor(xs, {n});
  std::vector<std::vector<std::uint64_t>> results;
  for (int threads : {1, 2, 3, 8}) {
    Tensor out = Tensor::zeros({groups}, pol(DType::fp32));
    Tensor scaled = Tensor::zeros({n}, pol(DType::fp32));
    cpu::launch(ck, groups, {x, out, scaled}, {.num_threads = threads});
    auto codes = out.codes();
    auto more = scaled.codes();
    codes.insert(codes.end(), more.begin(), more.end());
    results.push_back(codes);
  }
  for (std::size_t r = 1; r < results.size(); ++r) EXPECT_EQ(results[r], results[0]) << "thread count #" << r;
}

// A group-level loop with barriers in its body, carrying a lane value: each
// round a tile adds its right neighbour's value (read from shared memory).
TEST(CpuBackendGroup, GroupLevelLoopCarriesLaneValuesAcrossBarriers) {
  constexpr std::int64_t kTiles = 8;
  ir::Module m;
  ir::Operation* k = tile::build_kernel(m, "rotate_sum",
                                        {{"x", gmem({Dim::named("n")}, DType::int64)},
                                         {"y", gmem({Dim::named("n")}, DType::int64, true)},
                                         {"rounds", lane(DType::int64)}},
                                        {.group_shape = std::vector<std::int64_t>{kTiles}});
  ir::Block& body = ir::function_body(*k);
  OpBuilder b(body);
  Value* s = smem(b, {kTiles}, DType::int64);
  Value* lid = op(b, "tile.linear_id", {});
  Value* i = op(b, "tile.add", {op(b, "tile.mul", {op(b, "tile.group_id", {}), i64(b, kTiles)}), lid});
  Value* x0 = op(b, "tile.load_elem", {body.argument(0), i});
  ir::Operation* loop =
      tile::build_for(b, i64(b, 0), body.argument(2), i64(b, 1), {x0}, [&](OpBuilder& lb, std::span<Value* const> a) {
        stmt(lb, "tile.store_elem", {s, lid, a[1]});
        barrier(lb);
        Value* right = op(lb, "tile.rem", {op(lb, "tile.add", {lid, i64(lb, 1)}), i64(lb, kTiles)});
        Value* next = op(lb, "tile.add", {a[1], op(lb, "tile.load_elem", {s, right})});
        barrier(lb);  // everyone has read before the next round overwrites
        return std::vector<Value*>{next};
      });
  stmt(b, "tile.store_elem", {body.argument(1), i, loop->result(0)});
  cpu::CompiledKernel ck = compile(*k);

  const std::int64_t n = 3 * kTiles, rounds = 4;
  std::vector<double> xs;
  for (std::int64_t e = 0; e < n; ++e) xs.push_back(static_cast<double>(e * e % 11));
  Tensor x = Tensor::from_values(xs, {n}, pol(DType::int64));
  Tensor y = Tensor::zeros({n}, pol(DType::int64));
  cpu::launch(ck, 3, {x, y, rounds});
  const auto got = y.to_values();
  for (std::int64_t g = 0; g < 3; ++g) {
    std::vector<double> v(xs.begin() + g * kTiles, xs.begin() + (g + 1) * kTiles);
    for (std::int64_t r = 0; r < rounds; ++r) {
      std::vector<double> next(v.size());
      for (std::int64_t l = 0; l < kTiles; ++l) next[l] = v[l] + v[(l + 1) % kTiles];
      v = next;
    }
    for (std::int64_t l = 0; l < kTiles; ++l) ASSERT_EQ(got[g * kTiles + l], v[l]) << "group " << g << " tile " << l;
  }
}

TEST(CpuBackendGroup, SharedBudgetIsEnforced) {
  ir::Module m;
  ir::Operation* k = tile::build_kernel(m, "too_big", {{"y", gmem({Dim::named("n")}, DType::fp32, true)}},
                                        {.group_shape = std::vector<std::int64_t>{4}, .shared_bytes = 1024});
  OpBuilder b(ir::function_body(*k));
  smem(b, {512}, DType::fp32);  // 2 KiB
  EXPECT_THROW(compile(*k), CompileError);
}

}  // namespace
}  // namespace tessera::cputest
