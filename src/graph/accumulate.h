// Correctly rounded accumulation steps for the Graph IR reference kernels.
//
// Reductions and the normalization ops accumulate in the canonical order
// (canonical_sum below), GEMM sequentially; each step rounds the running
// value to the accumulation type. Computing
// `acc + v` in double and then rounding to a narrower type rounds twice, and
// the two roundings can disagree with one correct rounding when the double
// lands exactly on a midpoint of the narrow grid. These helpers carry the
// error of the double operation along (TwoSum, FMA residual) and use it to
// break such ties, so each step equals the exact result rounded once to the
// accumulation type, as a fused add or multiply-add in that type would give.
// That is exact for operands of 32 bits or fewer; fp64 operands accumulated in
// a narrower type (an unusual policy) are handled to about 106 bits.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "graph/kernel_support.h"

namespace tessera::graph {

// The exact value hi + lo (|lo| at most half an ulp of hi, as TwoSum gives)
// rounded once to `dtype` with ties to even.
inline double round_exact(double hi, double lo, DType dtype) {
  const double r = round_to(hi, dtype);
  if (dtype == DType::fp64 || lo == 0.0 || r == hi || !std::isfinite(r) || !is_float(dtype)) return r;
  // hi is a midpoint of the narrow grid exactly when the reflection of r
  // through hi is the neighbouring grid point; then lo decides the direction.
  const double other = 2.0 * hi - r;
  if (!std::isfinite(other) || other == r || round_to(other, dtype) != other || (other + r) / 2.0 != hi) return r;
  return (lo > 0.0) == (other > r) ? other : r;
}

// acc + v rounded once to `dtype`.
inline double add_rounded(double acc, double v, DType dtype) {
  const double s = acc + v;
  if (dtype == DType::fp64 || !std::isfinite(s)) return round_to(s, dtype);
  const double bv = s - acc;  // TwoSum: s + e == acc + v exactly
  const double e = (acc - (s - bv)) + (v - bv);
  return round_exact(s, e, dtype);
}

// acc + a * b rounded once to `dtype` (a fused multiply-add in that type).
inline double fma_rounded(double acc, double a, double b, DType dtype) {
  if (dtype == DType::fp64) return std::fma(a, b, acc);
  const double p = a * b;
  const double s = acc + p;
  if (!std::isfinite(s)) return round_to(s, dtype);
  const double pe = std::fma(a, b, -p);  // zero when a*b is exact (operands of <= 26 bits)
  const double bp = s - acc;
  const double e = (acc - (s - bp)) + (p - bp);
  if (pe == 0.0) return round_exact(s, e, dtype);
  // Renormalize so the residual is below half an ulp of the head again.
  const double t = e + pe;
  const double hi = s + t;
  const double bt = hi - s;
  const double lo = (s - (hi - bt)) + (t - bt);
  return round_exact(hi, lo, dtype);
}

// The canonical summation order of every floating-point sum, the compiled
// kernels' too (tessera/schedule/lower_to_tile.h): blocks of 256 elements;
// inside a block element p goes to strand p mod 16, each strand summed left
// to right from zero, the 16 strands combined by a pairwise tree; block sums
// left to right in superblocks of 256 blocks; superblock sums left to right.
// `step(acc, i)` returns acc plus term i rounded once to `accum`
// (add_rounded or fma_rounded).
inline constexpr std::int64_t kSumBlock = 256;
inline constexpr std::int64_t kSumStrands = 16;
inline constexpr std::int64_t kSumSuperblock = kSumBlock * kSumBlock;

// The superblocks of a reduced length (one for an empty one): the entries of
// graph.superblock_sums per output, and the pieces split-long-sums spreads.
inline std::int64_t superblock_count(std::int64_t length) {
  return std::max<std::int64_t>(1, (length + kSumSuperblock - 1) / kSumSuperblock);
}

// One block of the canonical order, elements [lo, hi): kSumStrands strands
// from zero, then their pairwise tree.
template <class Step>
double canonical_block_sum(std::int64_t lo, std::int64_t hi, DType accum, const Step& step) {
  double strand[kSumStrands] = {};
  for (std::int64_t i = lo; i < hi; ++i) {
    double& s = strand[(i - lo) % kSumStrands];
    s = step(s, i);
  }
  for (std::int64_t width = kSumStrands; width > 1; width /= 2)
    for (std::int64_t k = 0; k < width / 2; ++k) strand[k] = add_rounded(strand[2 * k], strand[2 * k + 1], accum);
  return strand[0];
}

// The canonical order's outer levels over `blocks` block sums (block(b) the
// sum of block b): superblocks of kSumBlock blocks, each summed left to
// right from zero, and their sums left to right from zero.
template <class Block>
double canonical_block_total(std::int64_t blocks, DType accum, const Block& block) {
  double total = 0.0;
  for (std::int64_t super_lo = 0; super_lo < blocks; super_lo += kSumBlock) {
    double super = 0.0;
    for (std::int64_t b = super_lo; b < std::min(blocks, super_lo + kSumBlock); ++b) super = add_rounded(super, block(b), accum);
    total = add_rounded(total, super, accum);
  }
  return total;
}

template <class Step>
double canonical_sum(std::int64_t n, DType accum, const Step& step) {
  return canonical_block_total((n + kSumBlock - 1) / kSumBlock, accum, [&](std::int64_t b) {
    return canonical_block_sum(b * kSumBlock, std::min(n, (b + 1) * kSumBlock), accum, step);
  });
}

// x * 2^e rounded to `dtype` (exact unless it leaves the normal range).
inline double scale_rounded(double x, int e, DType dtype) {
  return round_to(std::ldexp(x, e), dtype);
}

}  // namespace tessera::graph
