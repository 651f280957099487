// Block-scaled formats against references written from their definitions:
// OCP Microscaling (MX) v1.0 section 6.3 for MX, and the rule documented in
// block_scaled.h for NVFP4. Element rounding uses the brute-force tables of
// reference_formats.h, never the library's encoder.
#include "tessera/numerics/block_scaled.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "reference_formats.h"
#include "tessera/support/error.h"

namespace tessera {
namespace {

using tessera_test::RefFormat;
using tessera_test::RefRounder;

// floor(log2(a)) for a > 0 by repeated halving/doubling (exact in double).
int floor_log2(double a) {
  int e = 0;
  while (a >= 2) a /= 2, ++e;
  while (a < 1) a *= 2, --e;
  return e;
}

// Largest unbiased exponent of a finite value of the element format.
int ref_emax(const RefRounder& r) {
  return floor_log2(r.max_value());
}

// The gap between the two neighbours of |y| in the format (0 if exact).
double neighbour_gap(const RefRounder& r, double y) {
  const std::vector<double>& v = r.values();
  const auto it = std::upper_bound(v.begin(), v.end(), std::fabs(y));
  if (it == v.begin() || it == v.end()) return 0;
  return *it - *(it - 1);
}

struct Blocked {
  std::vector<std::uint8_t> codes;
  std::vector<std::uint8_t> scales;
};

// Visits the blocks of n values laid out in rows of row_length (0: one row).
template <typename Visit>
void ref_blocks(std::size_t n, std::size_t block, std::size_t row_length, Visit visit) {
  if (row_length == 0) row_length = n;
  for (std::size_t row = 0; row < n; row += row_length) {
    for (std::size_t start = row; start < row + row_length; start += block) {
      visit(start, std::min(block, row + row_length - start));
    }
  }
}

// OCP MX v1.0: X = 2^(floor(log2(amax)) - emax_elem), clamped to e8m0's
// range; elements are x / X rounded to nearest even, saturating. A block
// with NaN or infinity gets the NaN scale (its codes are not checked).
Blocked mx_reference(const std::vector<float>& x, const RefRounder& elem, std::size_t block,
                     std::size_t row_length = 0) {
  Blocked out{std::vector<std::uint8_t>(x.size(), 0), {}};
  const int emax = ref_emax(elem);
  ref_blocks(x.size(), block, row_length, [&](std::size_t start, std::size_t count) {
    double amax = 0;
    bool special = false;
    for (std::size_t i = start; i < start + count; ++i) {
      special = special || !std::isfinite(x[i]);
      amax = std::max(amax, std::fabs(static_cast<double>(x[i])));
    }
    if (special) {
      out.scales.push_back(0xFF);
      return;
    }
    const int shared = amax == 0 ? -127 : std::clamp(floor_log2(amax) - emax, -127, 127);
    out.scales.push_back(static_cast<std::uint8_t>(shared + 127));
    for (std::size_t i = start; i < start + count; ++i) {
      const double y = static_cast<double>(x[i]) * std::pow(2.0, -shared);
      out.codes[i] = static_cast<std::uint8_t>(elem.encode(y, Rounding::nearest_even, Overflow::saturate));
    }
  });
  return out;
}

// Normal samples; each block gets its own magnitude, some an outlier, some
// exact zeros, so scales and element underflow both vary.
std::vector<float> random_tensor(std::mt19937& rng, std::size_t n, std::size_t block) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> magnitude(-40, 40);
  std::uniform_int_distribution<int> percent(0, 99);
  std::vector<float> x(n);
  float scale = 1.0f;
  for (std::size_t i = 0; i < n; ++i) {
    if (i % block == 0) scale = std::ldexp(1.0f, magnitude(rng));
    x[i] = normal(rng) * scale;
    const int p = percent(rng);
    if (p < 3) x[i] = 0.0f;
    if (p == 3) x[i] *= 1024.0f;
  }
  return x;
}

std::string seed_trace(unsigned seed) {
  return "std::mt19937 seed " + std::to_string(seed);
}

TEST(Mx, ElementEmax) {
  EXPECT_EQ(mx_element_emax(DType::fp8_e4m3), 8);
  EXPECT_EQ(mx_element_emax(DType::fp8_e5m2), 15);
  EXPECT_EQ(mx_element_emax(DType::fp6_e2m3), 2);
  EXPECT_EQ(mx_element_emax(DType::fp6_e3m2), 4);
  EXPECT_EQ(mx_element_emax(DType::fp4_e2m1), 2);
  for (const RefFormat& f : tessera_test::small_formats()) EXPECT_EQ(mx_element_emax(f.dtype), ref_emax(RefRounder(f)));
  for (DType bad : {DType::fp16, DType::bf16, DType::fp32, DType::int8, DType::e8m0}) {
    try {
      mx_element_emax(bad);
      ADD_FAILURE() << name(bad);
    } catch (const DtypeError& error) {
      EXPECT_EQ(error.code(), ErrorCode::DtypeUnsupported);
    }
    std::vector<float> x(32, 1.0f);
    std::vector<std::uint8_t> codes(32), scales(1);
    EXPECT_THROW(quantize_mx(x.data(), 32, bad, codes.data(), scales.data()), DtypeError) << name(bad);
  }
}

TEST(Mx, RandomBlocksMatchReferenceAndErrorBound) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE(seed_trace(seed));
  std::mt19937 rng(seed);
  for (const RefFormat& f : tessera_test::small_formats()) {
    SCOPED_TRACE(f.name);
    const RefRounder elem(f);
    const std::size_t n = 64 * kMxBlock + 7;  // a short last block
    const std::vector<float> x = random_tensor(rng, n, kMxBlock);
    const Blocked want = mx_reference(x, elem, kMxBlock);
    std::vector<std::uint8_t> codes(n), scales(scale_count(n, kMxBlock));
    ASSERT_EQ(scales.size(), want.scales.size());
    quantize_mx(x.data(), n, f.dtype, codes.data(), scales.data());
    EXPECT_EQ(scales, want.scales);
    EXPECT_EQ(codes, want.codes);

    std::vector<float> back(n);
    dequantize_mx(codes.data(), scales.data(), n, f.dtype, back.data());
    for (std::size_t i = 0; i < n; ++i) {
      const int shared = static_cast<int>(scales[i / kMxBlock]) - 127;
      const double unit = std::pow(2.0, shared);
      // Dequantization is the element's value times the scale, exactly.
      ASSERT_EQ(static_cast<double>(back[i]), f.value(codes[i]) * unit) << i;
      // Error bound: y = x / X lies below 2^(emax+1) by construction. Within
      // the element range the error is at most half the gap between y's
      // neighbours; above max it saturates, so the error is |y| - max exactly.
      const double y = static_cast<double>(x[i]) / unit;
      const double error = std::fabs(static_cast<double>(back[i]) - static_cast<double>(x[i]));
      const int emax = ref_emax(elem);
      ASSERT_LT(std::fabs(y), std::pow(2.0, emax + 1)) << i;
      // The documented per-block bound: max(half an ulp at 2^emax, 2^(emax+1) - max) * X.
      const double half_ulp_at_emax = std::pow(2.0, emax - f.mbits - 1);
      ASSERT_LE(error, std::max(half_ulp_at_emax, std::pow(2.0, emax + 1) - elem.max_value()) * unit) << i;
      if (std::fabs(y) <= elem.max_value()) {
        ASSERT_LE(error, neighbour_gap(elem, y) / 2 * unit) << i << " x=" << x[i];
      } else {
        ASSERT_EQ(error, (std::fabs(y) - elem.max_value()) * unit) << i << " x=" << x[i];
      }
    }
  }
}

TEST(Mx, ZeroSpecialAndMaxBlocks) {
  for (const RefFormat& f : tessera_test::small_formats()) {
    SCOPED_TRACE(f.name);
    const RefRounder elem(f);
    std::vector<float> x(4 * kMxBlock, 0.0f);
    // Block 1: NaN inside; block 2: infinity; block 3: values at the element's max.
    for (std::size_t i = kMxBlock; i < 4 * kMxBlock; ++i) x[i] = static_cast<float>(i % 7) - 3.0f;
    x[kMxBlock + 5] = std::numeric_limits<float>::quiet_NaN();
    x[2 * kMxBlock + 31] = -std::numeric_limits<float>::infinity();
    const auto top = static_cast<float>(elem.max_value() * 4.0);  // max * 2^2: scale 2^2, code max
    x[3 * kMxBlock] = top;
    x[3 * kMxBlock + 1] = -top;
    std::vector<std::uint8_t> codes(x.size(), 0xAA), scales(4, 0xAA);
    quantize_mx(x.data(), x.size(), f.dtype, codes.data(), scales.data());
    EXPECT_EQ(scales[0], 0x00);  // all-zero block: smallest scale, 2^-127
    for (std::size_t i = 0; i < kMxBlock; ++i) EXPECT_EQ(codes[i], 0x00) << i;
    EXPECT_EQ(scales[1], 0xFF);
    EXPECT_EQ(scales[2], 0xFF);
    EXPECT_EQ(scales[3], 127 + 2);
    EXPECT_EQ(codes[3 * kMxBlock], elem.max_code());
    EXPECT_EQ(codes[3 * kMxBlock + 1], elem.max_code() | f.sign_bit());
    const Blocked want = mx_reference(x, elem, kMxBlock);
    EXPECT_EQ(scales, want.scales);
    std::vector<float> back(x.size());
    dequantize_mx(codes.data(), scales.data(), x.size(), f.dtype, back.data());
    for (std::size_t i = 0; i < kMxBlock; ++i) EXPECT_EQ(back[i], 0.0f);
    for (std::size_t i = kMxBlock; i < 3 * kMxBlock; ++i) EXPECT_TRUE(std::isnan(back[i])) << i;
    EXPECT_EQ(back[3 * kMxBlock], top);
    EXPECT_EQ(back[3 * kMxBlock + 1], -top);
    for (std::size_t i = 3 * kMxBlock; i < 4 * kMxBlock; ++i) EXPECT_EQ(codes[i], want.codes[i]) << i;
  }
}

TEST(Mx, ScaleClampsToE8m0Range) {
  // amax = 2^-140: floor(log2) - emax < -127, so the scale clamps at 2^-127.
  std::vector<float> x(kMxBlock, 0.0f);
  x[0] = 0x1p-140f;
  x[1] = -0x1p-146f;
  std::vector<std::uint8_t> codes(kMxBlock), scales(1);
  for (const RefFormat& f : tessera_test::small_formats()) {
    SCOPED_TRACE(f.name);
    quantize_mx(x.data(), x.size(), f.dtype, codes.data(), scales.data());
    const Blocked want = mx_reference(x, RefRounder(f), kMxBlock);
    EXPECT_EQ(scales[0], 0x00);
    EXPECT_EQ(scales, want.scales);
    EXPECT_EQ(codes, want.codes);
  }
}

TEST(Mx, RowsAndCustomBlocks) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE(seed_trace(seed));
  std::mt19937 rng(seed);
  EXPECT_EQ(scale_count(100, 32), 4u);
  EXPECT_EQ(scale_count(96, 32, 48), 4u);  // 2 rows of 48: blocks of 32 and 16 each
  EXPECT_EQ(scale_count(0, 32), 0u);
  EXPECT_EQ(scale_count(5, 1), 5u);
  EXPECT_THROW(scale_count(10, 0), ArgumentError);
  const RefRounder elem(tessera_test::small_formats()[0]);
  for (std::size_t row : {0u, 40u, 64u, 7u}) {
    for (std::size_t block : {32u, 16u, 5u}) {
      SCOPED_TRACE("row " + std::to_string(row) + " block " + std::to_string(block));
      const std::size_t n = 3 * 280;  // whole rows of 40, 7 (and 0: one row)
      if (row == 64) {
        std::vector<float> x(n, 1.0f);
        std::vector<std::uint8_t> codes(n), scales(n);
        EXPECT_THROW(quantize_mx(x.data(), n, DType::fp8_e4m3, codes.data(), scales.data(), block,
                                 Rounding::nearest_even, 0, row),
                     ShapeError);
        continue;
      }
      const std::vector<float> x = random_tensor(rng, n, block);
      const Blocked want = mx_reference(x, elem, block, row);
      std::vector<std::uint8_t> codes(n), scales(scale_count(n, block, row));
      ASSERT_EQ(scales.size(), want.scales.size());
      quantize_mx(x.data(), n, DType::fp8_e4m3, codes.data(), scales.data(), block, Rounding::nearest_even, 0, row);
      EXPECT_EQ(scales, want.scales);
      EXPECT_EQ(codes, want.codes);
      std::vector<float> back(n);
      dequantize_mx(codes.data(), scales.data(), n, DType::fp8_e4m3, back.data(), block, row);
      std::size_t b = 0;
      ref_blocks(n, block, row, [&](std::size_t start, std::size_t count) {
        for (std::size_t i = start; i < start + count; ++i) {
          EXPECT_EQ(static_cast<double>(back[i]), elem.format().value(codes[i]) * std::pow(2.0, scales[b] - 127));
        }
        ++b;
      });
    }
  }
}

TEST(Mx, EmptyInputIsANoOp) {
  std::uint8_t codes[1] = {0xAA}, scales[1] = {0xAA};
  float out[1] = {5.0f};
  quantize_mx(nullptr, 0, DType::fp8_e4m3, codes, scales);
  dequantize_mx(codes, scales, 0, DType::fp8_e4m3, out);
  EXPECT_EQ(quantize_nvfp4(nullptr, 0, codes, scales), 1.0f);
  dequantize_nvfp4(codes, scales, 1.0f, 0, out);
  EXPECT_EQ(codes[0], 0xAA);
  EXPECT_EQ(scales[0], 0xAA);
  EXPECT_EQ(out[0], 5.0f);
}

TEST(Mx, StochasticElementsAreNeighbours) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE(seed_trace(seed));
  std::mt19937 rng(seed);
  for (const RefFormat& f : tessera_test::small_formats()) {
    SCOPED_TRACE(f.name);
    const RefRounder elem(f);
    const std::size_t n = 16 * kMxBlock;
    const std::vector<float> x = random_tensor(rng, n, kMxBlock);
    const Blocked nearest = mx_reference(x, elem, kMxBlock);
    std::vector<std::uint8_t> a(n), b(n), c(n), scales(n / kMxBlock);
    quantize_mx(x.data(), n, f.dtype, a.data(), scales.data(), kMxBlock, Rounding::stochastic, 11);
    EXPECT_EQ(scales, nearest.scales);  // the scale does not depend on rounding
    quantize_mx(x.data(), n, f.dtype, b.data(), scales.data(), kMxBlock, Rounding::stochastic, 11);
    quantize_mx(x.data(), n, f.dtype, c.data(), scales.data(), kMxBlock, Rounding::stochastic, 12);
    EXPECT_EQ(a, b);
    EXPECT_NE(a, c);
    for (std::size_t i = 0; i < n; ++i) {
      const double y = static_cast<double>(x[i]) * std::pow(2.0, 127 - static_cast<int>(scales[i / kMxBlock]));
      const std::uint32_t down = elem.encode(y, Rounding::toward_zero, Overflow::saturate);
      const double down_value = std::fabs(f.value(down));
      const bool exact = down_value == std::fabs(y) || down_value == elem.max_value();
      const std::uint32_t up = exact ? down : down + 1;
      ASSERT_TRUE(a[i] == down || a[i] == up) << i << " y=" << y;
    }
  }
}

// --------------------------------------------------------------- NVFP4 ----

struct Nvfp4 {
  Blocked blocked;
  float tensor_scale;
};

// block_scaled.h: tensor_scale = amax / (6 * 448) rounded to float (1 for an
// all-zero tensor); block scale = e4m3 nearest-even saturating encoding of
// amax_block / 6 / tensor_scale; element = fp4 nearest-even saturating
// encoding of x / (decoded block scale * tensor_scale).
Nvfp4 nvfp4_reference(const std::vector<float>& x, std::size_t row_length = 0) {
  const RefRounder e4m3(tessera_test::small_formats()[0]), fp4(tessera_test::small_formats()[4]);
  double amax = 0;
  for (float v : x) {
    if (std::isfinite(v)) amax = std::max(amax, std::fabs(static_cast<double>(v)));
  }
  Nvfp4 out{{std::vector<std::uint8_t>(x.size(), 0), {}}, amax == 0 ? 1.0f : static_cast<float>(amax / (6.0 * 448.0))};
  ref_blocks(x.size(), kNvfp4Block, row_length, [&](std::size_t start, std::size_t count) {
    double block_amax = 0;
    bool special = false;
    for (std::size_t i = start; i < start + count; ++i) {
      special = special || !std::isfinite(x[i]);
      block_amax = std::max(block_amax, std::fabs(static_cast<double>(x[i])));
    }
    if (special) {
      out.blocked.scales.push_back(0x7F);  // e4m3 NaN
      return;
    }
    const double wanted = block_amax / 6.0 / static_cast<double>(out.tensor_scale);
    const std::uint32_t scale = e4m3.encode(wanted, Rounding::nearest_even, Overflow::saturate);
    out.blocked.scales.push_back(static_cast<std::uint8_t>(scale));
    const double block_scale = e4m3.format().value(scale) * static_cast<double>(out.tensor_scale);
    for (std::size_t i = start; i < start + count; ++i) {
      const double y = block_scale == 0 ? 0.0 : static_cast<double>(x[i]) / block_scale;
      out.blocked.codes[i] = static_cast<std::uint8_t>(fp4.encode(y, Rounding::nearest_even, Overflow::saturate));
    }
  });
  return out;
}

TEST(Nvfp4, RandomTensorsMatchReference) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE(seed_trace(seed));
  std::mt19937 rng(seed);
  const RefFormat e4m3 = tessera_test::small_formats()[0], fp4 = tessera_test::small_formats()[4];
  for (int trial = 0; trial < 20; ++trial) {
    SCOPED_TRACE(trial);
    const std::size_t n = 16 * (1 + rng() % 40) + rng() % 16;
    std::vector<float> x = random_tensor(rng, n, kNvfp4Block);
    // Magnitudes per block span 2^80: many blocks sit below e4m3's range
    // relative to the largest one and get small or zero scales.
    if (trial % 4 == 0)
      std::fill(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(std::min<std::size_t>(n, 16)), 0.0f);
    const Nvfp4 want = nvfp4_reference(x);
    std::vector<std::uint8_t> codes(n), scales(scale_count(n, kNvfp4Block));
    const float tensor_scale = quantize_nvfp4(x.data(), n, codes.data(), scales.data());
    EXPECT_EQ(tensor_scale, want.tensor_scale);
    EXPECT_EQ(scales, want.blocked.scales);
    EXPECT_EQ(codes, want.blocked.codes);
    std::vector<float> back(n);
    dequantize_nvfp4(codes.data(), scales.data(), tensor_scale, n, back.data());
    for (std::size_t i = 0; i < n; ++i) {
      const double block_scale = e4m3.value(scales[i / kNvfp4Block]) * static_cast<double>(tensor_scale);
      // fp4 (2 significant bits) * e4m3 (4) * float (24) is exact in double:
      // one rounding, to float.
      ASSERT_EQ(back[i], static_cast<float>(fp4.value(codes[i]) * block_scale)) << i;
      if (block_scale == 0) continue;
      const double y = static_cast<double>(x[i]) / block_scale;
      const double error = std::fabs(static_cast<double>(back[i]) - static_cast<double>(x[i]));
      const double float_rounding = std::fabs(static_cast<double>(back[i])) * 0x1p-23 + 0x1p-149;
      const double bound = std::fabs(y) <= 6 ? neighbour_gap(RefRounder(fp4), y) / 2 : std::fabs(y) - 6;
      ASSERT_LE(error, bound * block_scale * (1 + 0x1p-40) + float_rounding) << i << " x=" << x[i];
    }
  }
}

TEST(Nvfp4, ZeroSpecialRowsAndLargestBlock) {
  std::vector<float> x(48, 0.0f);
  std::vector<std::uint8_t> codes(48), scales(3);
  EXPECT_EQ(quantize_nvfp4(x.data(), 48, codes.data(), scales.data()), 1.0f);  // all zero: scale 1
  EXPECT_EQ(scales, std::vector<std::uint8_t>(3, 0));
  EXPECT_EQ(codes, std::vector<std::uint8_t>(48, 0));
  // The block holding the tensor's amax gets scale 448 (0x7E), its amax code 6 (0x7).
  for (std::size_t i = 0; i < 48; ++i) x[i] = 0.01f * static_cast<float>(i) - 0.2f;
  x[20] = -3000.0f;
  x[40] = std::numeric_limits<float>::quiet_NaN();
  const Nvfp4 want = nvfp4_reference(x);
  const float tensor_scale = quantize_nvfp4(x.data(), 48, codes.data(), scales.data());
  EXPECT_EQ(tensor_scale, static_cast<float>(3000.0 / 2688.0));
  EXPECT_EQ(scales[1], 0x7E);
  EXPECT_EQ(codes[20], 0xF);  // -6
  EXPECT_TRUE(is_nan_encoding(scales[2], DType::fp8_e4m3));
  EXPECT_EQ(tensor_scale, want.tensor_scale);
  EXPECT_EQ(std::vector<std::uint8_t>(scales.begin(), scales.begin() + 2),
            std::vector<std::uint8_t>(want.blocked.scales.begin(), want.blocked.scales.begin() + 2));
  EXPECT_EQ(std::vector<std::uint8_t>(codes.begin(), codes.begin() + 32),
            std::vector<std::uint8_t>(want.blocked.codes.begin(), want.blocked.codes.begin() + 32));
  std::vector<float> back(48);
  dequantize_nvfp4(codes.data(), scales.data(), tensor_scale, 48, back.data());
  for (std::size_t i = 32; i < 48; ++i) EXPECT_TRUE(std::isnan(back[i])) << i;
  EXPECT_FLOAT_EQ(back[20], -3000.0f);
  // Rows of 24: blocks of 16 and 8 per row.
  std::vector<std::uint8_t> row_scales(scale_count(48, kNvfp4Block, 24));
  ASSERT_EQ(row_scales.size(), 4u);
  x[40] = 1.0f;
  const Nvfp4 rows = nvfp4_reference(x, 24);
  EXPECT_EQ(quantize_nvfp4(x.data(), 48, codes.data(), row_scales.data(), 24), rows.tensor_scale);
  EXPECT_EQ(row_scales, rows.blocked.scales);
  EXPECT_EQ(codes, rows.blocked.codes);
  EXPECT_THROW(quantize_nvfp4(x.data(), 48, codes.data(), row_scales.data(), 25), ShapeError);
}

}  // namespace
}  // namespace tessera
