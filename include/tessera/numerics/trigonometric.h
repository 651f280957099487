// Tessera's sine and cosine in double precision: one implementation compiled
// into the reference executor, into generated CPU kernels and, through
// NVRTC, into generated CUDA kernels, like the functions of elementary.h
// (the same rules: no contraction, every fused step written as fma), so a
// sin on the GPU gives the CPU's bits.
//
// x = q (pi/2) + r with |r| <= pi/4 (about), r carried as a double-double:
// - |x| < 2^20: Cody-Waite, pi/2 in four parts (three of 33 bits, so that
//   q times each is exact for q < 2^20, and the rest), which holds x - q pi/2
//   to about 2^-130 absolutely;
// - larger finite x: Payne-Hanek, x times the 192 bits of 2/pi around x's
//   exponent in exact integer arithmetic (32-bit limbs, so the host and the
//   device run the same operations), which keeps 128 fraction bits.
// Both keep r to far more bits than the closest any double comes to a
// multiple of pi/2 (about 2^-61 for large x), so cancellation costs nothing.
// Then sin r and cos r come from their Taylor series on |r| <= pi/4 (through
// r^17 and r^18; the next terms are below 2^-62 relative), with r's low part
// folded in to first order, and the quadrant picks one and a sign.
//
// Accuracy (tests/cpp/trigonometric_test.cpp, against the C library's long
// double sinl/cosl): within 1 ulp for every double input tested, small,
// medium, huge and near multiples of pi/2. sin(-0) = -0; infinities and NaN
// give NaN.
//
// Embedded for NVRTC and for the CPU kernels like elementary.h; includes
// nothing else there.
#pragma once

#include "tessera/numerics/elementary.h"

#if defined(__CUDACC__)
#define TESSERA_TRIG_FN __host__ __device__ inline
#define TESSERA_TRIG_OUTLINED_FN __host__ __device__ __noinline__ inline
#else
#include <cstdint>
#define TESSERA_TRIG_FN inline
#define TESSERA_TRIG_OUTLINED_FN [[gnu::noinline]] inline
#endif

namespace tessera::elementary {

namespace detail {

#if defined(__CUDACC__)
typedef unsigned int bits32;
#else
using bits32 = std::uint32_t;
#endif

// pi/2 = kPio2Part1 + kPio2Part2 + kPio2Part3 + kPio2Part4 (the first three
// 33 significant bits each, truncated; the fourth the nearest double to the
// rest).
constexpr double kPio2Part1 = 0x1.921fb544p+0;
constexpr double kPio2Part2 = 0x1.0b4611a6p-34;
constexpr double kPio2Part3 = 0x1.3198a2ep-69;
constexpr double kPio2Part4 = 0x1.b839a252049c1p-104;
// pi/2 as a double-double, and 2/pi rounded.
constexpr double kPio2Hi = 0x1.921fb54442d18p+0;
constexpr double kPio2Lo = 0x1.1a62633145c07p-54;
constexpr double kTwoOverPi = 0x1.45f306dc9c883p-1;
// Below this magnitude Cody-Waite applies (the quadrant stays under 2^20).
constexpr double kCodyWaiteLimit = 0x1p20;

// The bits of 2/pi after the binary point, 32 to a word, behind 64 zero
// bits (so that a window may start up to 64 bits before the point): 1216
// bits, enough for a 192-bit window at every double exponent.
#if defined(__CUDACC__)
static __constant__ bits32 kTwoOverPiBits[40] = {
#else
inline constexpr bits32 kTwoOverPiBits[40] = {
#endif
    0x00000000, 0x00000000, 0xa2f9836e, 0x4e441529, 0xfc2757d1, 0xf534ddc0, 0xdb629599, 0x3c439041,
    0xfe5163ab, 0xdebbc561, 0xb7246e3a, 0x424dd2e0, 0x06492eea, 0x09d1921c, 0xfe1deb1c, 0xb129a73e,
    0xe88235f5, 0x2ebb4484, 0xe99c7026, 0xb45f7e41, 0x3991d639, 0x835339f4, 0x9c845f8b, 0xbdf9283b,
    0x1ff897ff, 0xde05980f, 0xef2f118b, 0x5a0a6d1f, 0x6d367ecf, 0x27cb09b7, 0x4f463f66, 0x9e5fea2d,
    0x7527bac7, 0xebe5f17b, 0x3d0739f7, 0x8a5292ea, 0x6bfb5fb1, 0x1f8d5d08, 0x56033046, 0xfc7b6bab};

// x = quadrant (pi/2) + r + r_lo.
struct QuadrantReduced {
  int64 quadrant;
  double r;
  double r_lo;
};

// a + b = s + e exactly (Knuth's TwoSum: no assumption on magnitudes).
struct TwoSum {
  double s, e;
};
TESSERA_TRIG_FN TwoSum two_sum(double a, double b) {
  const double s = a + b;
  const double bb = s - a;
  const double e = (a - (s - bb)) + (b - bb);
  return {s, e};
}

// Cody-Waite for |x| < kCodyWaiteLimit (or NaN): each q * part is exact, and
// x - q part1 is exact (Sterbenz: q part1 is within a factor 2 of x).
TESSERA_TRIG_FN QuadrantReduced reduce_pio2_medium(double x) {
  const double q = (x * kTwoOverPi + kRoundShifter) - kRoundShifter;
  const double t = x - q * kPio2Part1;
  const TwoSum a = two_sum(t, -(q * kPio2Part2));
  const TwoSum b = two_sum(a.s, -(q * kPio2Part3));
  const double tail = (a.e + b.e) - q * kPio2Part4;
  const TwoSum r = two_sum(b.s, tail);
  return {integer_of(q), r.s, r.e};
}

// The 64 bits of a 256-bit integer p (four words, least significant first)
// from bit `at` up (at in [0, 192]).
TESSERA_TRIG_FN bits64 bits_at(const bits64* p, int at) {
  const int word = at / 64, shift = at % 64;
  if (shift == 0) return p[word];
  return (p[word] >> shift) | (p[word + 1] << (64 - shift));
}

// Payne-Hanek for finite |x| >= kCodyWaiteLimit (NaN and infinities give a
// NaN r). |x| = m 2^e with m a 53-bit integer; |x| (2/pi) = m sum_i b_i
// 2^(e - i) over the bits b_i of 2/pi. The terms with e - i >= 3 are
// multiples of 8 (quadrants repeat every 4) and drop; the 192 bits from
// i = e - 2 on give the quadrant and 128 fraction bits exactly; the bits
// past the window add under 2^-135.
TESSERA_TRIG_OUTLINED_FN QuadrantReduced reduce_pio2_large(double x) {
  const bits64 xb = to_bits(x);
  const int biased = static_cast<int>((xb >> 52) & 0x7ff);
  if (biased == 0x7ff) return {0, nan(), 0.0};
  const bits64 m = (xb & 0xfffffffffffffULL) | (1ULL << 52);
  const int e = biased - 1075;  // |x| = m 2^e, e >= -32 here
  // Window: bits i = e - 2 .. e + 189 of 2/pi as six 32-bit limbs, most
  // significant first; table bit index t = i + 63 (64 zero bits, then i = 1).
  const int t0 = e - 2 + 63;
  const int word = t0 / 32, shift = t0 % 32;
  bits32 w[6];
  for (int j = 0; j < 6; ++j) {
    const bits64 pair = (static_cast<bits64>(kTwoOverPiBits[word + j]) << 32) | kTwoOverPiBits[word + j + 1];
    w[j] = static_cast<bits32>(pair >> (32 - shift));
  }
  // p = m W, 256 bits in 32-bit limbs (least significant first); |x| (2/pi)
  // = p 2^-189 modulo 8.
  bits32 limbs[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  const bits32 mh[2] = {static_cast<bits32>(m), static_cast<bits32>(m >> 32)};
  for (int a = 0; a < 2; ++a) {
    bits64 carry = 0;
    for (int k = 0; k < 6; ++k) {  // W's limbs from the least significant up
      const int at = a + k;
      const bits64 sum = static_cast<bits64>(mh[a]) * w[5 - k] + limbs[at] + carry;
      limbs[at] = static_cast<bits32>(sum);
      carry = sum >> 32;
    }
    limbs[a + 6] = static_cast<bits32>(carry);
  }
  bits64 p[4];
  for (int j = 0; j < 4; ++j) p[j] = (static_cast<bits64>(limbs[2 * j + 1]) << 32) | limbs[2 * j];
  // Quadrant bits 189, 190 and the fraction bits 188 .. 61 (as a signed
  // 128-bit value: a fraction of 1/2 or more counts as the next quadrant,
  // less one).
  int64 quadrant = static_cast<int64>((bits_at(p, 189) & 3));
  bits64 hi = bits_at(p, 125), lo = bits_at(p, 61);
  const bool negative = (hi >> 63) != 0;
  if (negative) {
    quadrant += 1;
    hi = ~hi;
    lo = ~lo + 1;
    if (lo == 0) hi += 1;
  }
  // |fraction| 2^128 = hi 2^64 + lo, in three pieces of at most 43 bits
  // (each exact as a double), summed into a double-double.
  const double c2 = static_cast<double>(hi >> 21) * 0x1p-43;
  const double c1 = static_cast<double>(((hi & 0x1fffffULL) << 22) | (lo >> 42)) * 0x1p-86;
  const double c0 = static_cast<double>(lo & 0x3ffffffffffULL) * 0x1p-128;
  const TwoSum f = two_sum(c2, c1);
  const double f_lo = f.e + c0;
  // r = fraction (pi/2) as a double-double.
  const double r_hi = f.s * kPio2Hi;
  const double r_err = fused(f.s, kPio2Hi, -r_hi);
  const double r_tail = r_err + fused(f.s, kPio2Lo, f_lo * kPio2Hi);
  const TwoSum r = two_sum(r_hi, r_tail);
  const double sign = negative ? -1.0 : 1.0;
  return {quadrant, sign * r.s, sign * r.e};
}

TESSERA_TRIG_FN QuadrantReduced reduce_pio2(double x) {
  const double ax = x < 0 ? -x : x;
  if (!(ax < kCodyWaiteLimit)) {
    QuadrantReduced red = reduce_pio2_large(ax);
    if (x < 0) red = {-red.quadrant, -red.r, -red.r_lo};
    return red;
  }
  return reduce_pio2_medium(x);
}

// sin(r + r_lo) for |r| <= pi/4 + 2^-20: r + r^3 P(r^2) + r_lo (1 - r^2/2),
// P the Taylor series of (sin r - r) / r^3 through r^17's term.
TESSERA_TRIG_FN double sin_kernel(double r, double r_lo) {
  const double z = r * r;
  const double p = horner(z, -1.0 / factorial(3), 1.0 / factorial(5), -1.0 / factorial(7), 1.0 / factorial(9),
                          -1.0 / factorial(11), 1.0 / factorial(13), -1.0 / factorial(15), 1.0 / factorial(17));
  const double tail = fused(r * z, p, fused(-0.5 * z, r_lo, r_lo));
  return r + tail;
}

// cos(r + r_lo) for |r| <= pi/4 + 2^-20: 1 - r^2/2 + r^4 Q(r^2) - r r_lo,
// Q the Taylor series of (cos r - 1 + r^2/2) / r^4 through r^18's term;
// 1 - r^2/2 is carried with the errors of r^2 and of the subtraction.
TESSERA_TRIG_FN double cos_kernel(double r, double r_lo) {
  const double z = r * r;
  const double z_err = fused(r, r, -z);
  const double h = 0.5 * z;
  const double w = 1.0 - h;
  const double w_err = (1.0 - w) - h;  // exact (Fast2Sum, 1 >= h)
  const double q = horner(z, 1.0 / factorial(4), -1.0 / factorial(6), 1.0 / factorial(8), -1.0 / factorial(10),
                          1.0 / factorial(12), -1.0 / factorial(14), 1.0 / factorial(16), -1.0 / factorial(18));
  const double tail = fused(z * z, q, fused(-r, r_lo, w_err - 0.5 * z_err));
  return w + tail;
}

}  // namespace detail

struct SinCos {
  double sin, cos;
};

// sin x and cos x from one reduction.
TESSERA_TRIG_FN SinCos sincos(double x) {
  const detail::QuadrantReduced red = detail::reduce_pio2(x);
  const double s = detail::sin_kernel(red.r, red.r_lo);
  const double c = detail::cos_kernel(red.r, red.r_lo);
  const detail::int64 q = red.quadrant & 3;
  double sin_x = q == 0 ? s : q == 1 ? c : q == 2 ? -s : -c;
  const double cos_x = q == 0 ? c : q == 1 ? -s : q == 2 ? -c : s;
  sin_x = x == 0 ? x : sin_x;  // sin(-0) = -0
  return {sin_x, cos_x};
}

TESSERA_TRIG_FN double sin(double x) { return sincos(x).sin; }
TESSERA_TRIG_FN double cos(double x) { return sincos(x).cos; }

}  // namespace tessera::elementary

#undef TESSERA_TRIG_FN
#undef TESSERA_TRIG_OUTLINED_FN
