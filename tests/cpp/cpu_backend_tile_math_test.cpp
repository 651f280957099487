// CPU backend: tile arithmetic emitted in line. tile.tile_reduce {fn = max,
// axis = 1} runs eight running maxima (emit_ops.cpp's row_max) and must give
// the sequential form's bits: NaN if the row holds one, else the largest
// value, and for a zero maximum the row's last zero (+0 or -0).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "cpu_backend_test_util.h"

namespace tessera::cputest {
namespace {

constexpr std::int64_t kRows = 8;

// y[r] = max of row r of x ([kRows, cols] fp32).
ir::Operation* row_max_kernel(ir::Module& m, std::int64_t cols) {
  ir::Operation* k = tile::build_kernel(m, "row_max",
                                        {{"x", gmem({Dim::fixed(kRows), Dim::fixed(cols)}, DType::fp32)},
                                         {"y", gmem({Dim::fixed(kRows), Dim::fixed(1)}, DType::fp32, true)}},
                                        {.group_shape = std::vector<std::int64_t>{64}});
  ir::Block& body = ir::function_body(*k);
  OpBuilder b(body);
  Value* t = tile_load(b, body.argument(0), {i64(b, 0), i64(b, 0)}, {kRows, cols});
  Value* mx = op(b, "tile.tile_reduce", {t}, {{"fn", std::string("max")}, {"axis", std::int64_t{1}}});
  stmt(b, "tile.tile_store", {body.argument(1), i64(b, 0), i64(b, 0), mx});
  return k;
}

// The sequential rule: acc = -inf, then acc = NaN if either is NaN, else (acc > v ? acc : v).
float sequential_max(const std::vector<float>& row) {
  float acc = -std::numeric_limits<float>::infinity();
  for (float v : row) acc = (std::isnan(acc) || std::isnan(v)) ? std::numeric_limits<float>::quiet_NaN() : (acc > v ? acc : v);
  return acc;
}

std::uint32_t bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

TEST(CpuBackendTileMath, RowMaxGivesTheSequentialBits) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  for (std::int64_t cols : {13, 64}) {
    std::vector<std::vector<float>> rows(kRows, std::vector<float>(static_cast<std::size_t>(cols)));
    for (auto& row : rows)
      for (float& v : row) v = dist(rng);
    auto negative = [&](std::vector<float>& row) {
      for (float& v : row) v = -std::fabs(v) - 1.0f;
    };
    rows[1][5] = nan;                                           // a NaN in the vector part
    for (float& v : rows[2]) v = -inf;                          // a row the causal mask hides
    negative(rows[3]), rows[3][2] = 0.0f, rows[3][9] = -0.0f;   // zero maximum: the last zero, -0
    negative(rows[4]), rows[4][2] = -0.0f, rows[4][11] = 0.0f;  // +0 last
    negative(rows[5]), rows[5].back() = -0.0f;                  // in the tail when cols = 13
    rows[6][7] = inf;
    rows[7].back() = nan;                                       // a NaN in the tail
    std::vector<double> flat;
    for (const auto& row : rows) flat.insert(flat.end(), row.begin(), row.end());
    ir::Module m;
    cpu::CompiledKernel ck = compile(*row_max_kernel(m, cols));
    EXPECT_EQ(ck.source.find("tile_reduce<"), std::string::npos) << "row max not in line:\n" << ck.source;
    Tensor x = f32_tensor(flat, {kRows, cols});
    Tensor y = Tensor::zeros({kRows, 1}, pol(DType::fp32));
    cpu::launch(ck, 1, {x, y});
    const auto got = y.to_values();
    for (std::int64_t r = 0; r < kRows; ++r) {
      const float want = sequential_max(rows[static_cast<std::size_t>(r)]);
      const auto g = static_cast<float>(got[static_cast<std::size_t>(r)]);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(g)) << "cols " << cols << " row " << r;
      } else {
        EXPECT_EQ(bits(g), bits(want)) << "cols " << cols << " row " << r << ": " << g << " against " << want;
      }
    }
  }
}

}  // namespace
}  // namespace tessera::cputest
