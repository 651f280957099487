// gelu, erf and exp of a bf16 or fp16 value, rounded through fp32 to bf16 or
// fp16 (Tile IR's tile.narrow_unary): the bits of the reference's formula
// -- the function in double (elementary.h), rounded once to fp32, then once
// to the narrow format -- from fp32 arithmetic in almost every case.
//
// Why this can be exact: the result keeps 8 (bf16) or 11 (fp16) bits of an
// fp32 value. An fp32 evaluation A within E fp32 steps ("ulps", counted on
// the ordered encodings) of the reference's fp32 value pins that value to
// the 2E + 1 fp32 numbers around A; when the narrow rounding of the lowest
// and of the highest of them agree, it is the answer (rounding is
// monotone). Otherwise -- about 2E in 2^16 inputs for bf16, 2E in 2^13 for
// fp16 -- and outside each function's fast range, the double formula runs.
//
// The bound is not argued from the polynomials: these ops take only bf16
// and fp16 operands, so tests/cpp/narrow_elementary_test.cpp runs every one
// of the 2^16 values of each operand format through each function and
// format and checks the bits against the reference formula, and the fp32
// error against kNarrowSteps. Kernels are compiled without contraction of
// a*b+c (fused steps are written as fma), so the fp32 steps give the same
// bits on the host and on the GPU.
//
// Embedded for NVRTC like elementary.h; includes nothing there.
#pragma once

#include "tessera/numerics/elementary.h"

#if defined(__CUDACC__)
#define TESSERA_NARROW_FN __host__ __device__ inline
#define TESSERA_NARROW_OUTLINED_FN __host__ __device__ __noinline__ inline
#else
#include <bit>
#include <cmath>
#include <cstdint>
#define TESSERA_NARROW_FN inline
#define TESSERA_NARROW_OUTLINED_FN [[gnu::noinline]] inline
#endif

namespace tessera::elementary {

// The narrow formats (tile.narrow_unary's `to` storage).
// kNarrowFp32 is an fp32 result (narrow_exp and narrow_erf only): the
// double formula rounded to fp32, evaluated by exp_f32_or_nan /
// erf_f32_or_nan where they certify their rounding.
enum NarrowFormat : int { kNarrowBf16 = 0, kNarrowFp16 = 1, kNarrowFp32 = 2 };
// fp32 steps between an evaluation below and the reference's fp32 value
// that the certification allows for (the test checks every input's error
// is within it).
constexpr unsigned kNarrowSteps = 4;

namespace narrow {

#if defined(__CUDACC__)
typedef unsigned int u32;
TESSERA_NARROW_FN float from_bits(u32 b) { return __uint_as_float(b); }
TESSERA_NARROW_FN u32 to_bits(float x) { return __float_as_uint(x); }
TESSERA_NARROW_FN float fused(float a, float b, float c) { return fmaf(a, b, c); }
#else
using u32 = std::uint32_t;
TESSERA_NARROW_FN float from_bits(u32 b) { return std::bit_cast<float>(b); }
TESSERA_NARROW_FN u32 to_bits(float x) { return std::bit_cast<u32>(x); }
TESSERA_NARROW_FN float fused(float a, float b, float c) { return std::fma(a, b, c); }
#endif

// c0 + z (c1 + z (c2 + ...)) in fp32, one fma per coefficient.
template <class... Cs>
TESSERA_NARROW_FN float horner(float z, float c0, Cs... rest) {
  if constexpr (sizeof...(rest) == 0) {
    return c0;
  } else {
    return fused(horner(z, rest...), z, c0);
  }
}

// An fp32 value's encoding in `format`, rounded to nearest even: the
// numerics library's round_to (overflow to infinity, NaN to the quiet NaN
// with x's sign).
TESSERA_NARROW_FN u32 encode(float x, int format) {
  const u32 u = to_bits(x);
  const u32 sign = (u >> 16) & 0x8000u;
  const u32 mag = u & 0x7fffffffu;
  if (format == kNarrowBf16) {
    if (mag > 0x7f800000u) return sign | 0x7fc0u;
    return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;  // a carry into the exponent is the right rounding
  }
  if (mag > 0x7f800000u) return sign | 0x7e00u;
  if (mag >= 0x477ff000u) return sign | 0x7c00u;  // 65520 and above (and inf) round to inf
  if (mag < 0x38800000u) {
    // Below 2^-14: a subnormal fp16 (or zero), 2^-24 per step. The value
    // times 2^24 rounded to an integer, ties to even, by the same carry.
    if (mag < 0x33000000u) return sign;  // below 2^-25: zero (2^-25 itself is a tie, to even: 0)
    const u32 exp = mag >> 23;           // 102 .. 112
    const u32 man = (mag & 0x7fffffu) | 0x800000u;
    const u32 shift = 126u - exp;  // man * 2^(exp - 150) * 2^24 = man >> (126 - exp)
    const u32 half = 1u << (shift - 1);
    const u32 q = man >> shift;
    const u32 rest = man & ((1u << shift) - 1u);
    const u32 up = rest > half || (rest == half && (q & 1u));
    return sign | (q + up);
  }
  const u32 rebased = mag - 0x38000000u;  // exponent 127 - 15 = 112 lower
  return sign | ((rebased + 0xfffu + ((rebased >> 13) & 1u)) >> 13);
}

// The fp32 value of an encoding in `format` (exact).
TESSERA_NARROW_FN float decode(u32 code, int format) {
  if (format == kNarrowBf16) return from_bits(code << 16);
  const u32 sign = (code & 0x8000u) << 16;
  const u32 exp = (code >> 10) & 0x1fu;
  const u32 man = code & 0x3ffu;
  if (exp == 0x1fu) return from_bits(sign | 0x7f800000u | (man << 13));
  if (exp != 0) return from_bits(sign | ((exp + 112u) << 23) | (man << 13));
  return (sign ? -1.0f : 1.0f) * (static_cast<float>(man) * 0x1p-24f);  // subnormal or zero: exact
}

// The narrow rounding of the reference's fp32 value when an evaluation A
// within kNarrowSteps of it decides it, else NaN: the fp32 numbers that far
// on either side of A must round alike (and A must be finite, off zero).
// bf16 keeps fp32's exponent, so its rounding boundaries are the encodings
// whose low 16 bits are 0x8000: the neighbourhood rounds alike exactly when
// it holds none, and then adding 0x8000 and dropping the low half rounds.
TESSERA_NARROW_FN float certify(float a, int format) {
  const u32 u = to_bits(a);
  const u32 sign = u & 0x80000000u;
  const u32 mag = u & 0x7fffffffu;
  const bool inside = mag >= kNarrowSteps && mag < 0x7f800000u - kNarrowSteps;
  if (format == kNarrowBf16) {
    const bool clear = (mag & 0xffffu) - (0x8000u - kNarrowSteps) > 2u * kNarrowSteps;
    return inside && clear ? from_bits(sign | ((mag + 0x8000u) & 0xffff0000u)) : from_bits(0x7fc00000u);
  }
  const u32 lo = encode(from_bits(sign | (inside ? mag - kNarrowSteps : 0u)), format);
  const u32 hi = encode(from_bits(sign | (inside ? mag + kNarrowSteps : 0u)), format);
  return inside && lo == hi ? decode(lo, format) : from_bits(0x7fc00000u);
}

// e^y for y in [-87, 88] (normal results), within about 2 ulp: y = k ln2 + r,
// |r| <= ln2 / 2, e^r by its Taylor series to r^7.
TESSERA_NARROW_FN float exp_normal(float y) {
  const float k = (y * 0x1.715476p+0f + 0x1.8p23f) - 0x1.8p23f;  // nearest integer, ties to even
  const float r = fused(-k, 0x1.7f7d1cp-20f, fused(-k, 0x1.62e400p-1f, y));  // ln 2 = hi + lo; k hi exact
  const float p = horner(r, 1.0f, 1.0f, 0.5f, 0x1.555556p-3f, 0x1.555556p-5f, 0x1.111112p-7f, 0x1.6c16c2p-10f,
                         0x1.a01a02p-13f);
  const int ki = static_cast<int>(k);
  return p * from_bits(static_cast<u32>(ki + 127) << 23);  // 2^k, k in [-126, 127]
}

// erf(a) / a as a polynomial in a^2 on [0, 0.75].
TESSERA_NARROW_FN float erf_small(float a) {
  return a * horner(a * a, 0x1.20dd76p+0f, -0x1.812746p-2f, 0x1.ce2f02p-4f, -0x1.b8276ap-6f, 0x1.55e7fep-8f,
                    -0x1.b65be0p-11f, 0x1.8e2ae2p-14f);
}
// erfc(a) for a in [0.75, 4]: e^(-a^2) times erfcx(a), a polynomial in
// a - 2.375. erfc's relative condition there is 2 a^2 (up to 32), so a^2
// comes exactly, as h + l, from the operand itself (not from a's rounding):
// e^(-h - l) = e^-h (1 - l).
TESSERA_NARROW_FN float erfc_large(float a, float h, float l) {
  const float e = exp_normal(-h);
  const float g = horner(a - 2.375f, 0x1.c3987cp-3f, -0x1.4baea4p-4f, 0x1.cdc8b2p-6f, -0x1.32abfcp-7f, 0x1.867b98p-9f,
                         -0x1.de0e74p-11f, 0x1.1b8472p-12f, -0x1.4bc71ap-14f, 0x1.6b16f2p-16f, -0x1.442034p-18f,
                         0x1.7921c6p-20f, -0x1.6d6770p-21f, 0x1.4aeb56p-23f);
  return fused(e, -l, e) * g;
}

// An fp32 value rounded to `format` (kNarrowFp32: itself).
TESSERA_NARROW_FN float to_format(float y, int format) {
  return format == kNarrowFp32 ? y : decode(encode(y, format), format);
}

// The reference formulas (graph/elementwise_ops.cpp; the lane programs'
// fp64 ops): in double, rounded to fp32, then to the format. Out of line:
// the rare path, kept out of the fast path's registers.
TESSERA_NARROW_OUTLINED_FN float gelu_exact(float x, int format) {
  const double xd = static_cast<double>(x);
  const double y = (0.5 * xd) * (1.0 + ::tessera::elementary::erf(xd / 0x1.6a09e667f3bcdp+0));
  return to_format(static_cast<float>(y), format);
}
TESSERA_NARROW_OUTLINED_FN float erf_exact(float x, int format) {
  return to_format(static_cast<float>(::tessera::elementary::erf(static_cast<double>(x))), format);
}
TESSERA_NARROW_OUTLINED_FN float exp_exact(float x, int format) {
  return to_format(static_cast<float>(::tessera::elementary::exp(static_cast<double>(x))), format);
}

}  // namespace narrow

// The fp32 evaluations (exposed for the tests, which measure their error).
// gelu(x) = x/2 (1 + erf(x / sqrt 2)) for x in [-5.5, 5.6875): with
// a = |x| / sqrt 2, 1 + erf(x / sqrt 2) is 2 - erfc(a) for x >= 0 and
// erfc(a) below (no cancellation where it is small).
TESSERA_NARROW_FN float gelu_f32(float x) {
  using namespace narrow;
  const float a = (x < 0.0f ? -x : x) * 0x1.6a09e6p-1f;
  const bool small = a < 0.75f;
  // a^2 = x^2 / 2 = h + l exactly (x is clamped like a).
  const float xc = small ? 1.0f : (a > 4.0f ? 5.65625f : x);
  const float h = 0.5f * (xc * xc);
  const float l = 0.5f * fused(xc, xc, -(xc * xc));
  const float below = 1.0f - erf_small(small ? a : 0.75f);
  const float above = erfc_large(small ? 0.75f : (a > 4.0f ? 4.0f : a), h, l);
  const float erfc_a = small ? below : above;
  const float c = x < 0.0f ? erfc_a : 2.0f - erfc_a;
  return (0.5f * x) * c;
}
TESSERA_NARROW_FN float erf_f32(float x) {
  using namespace narrow;
  const float a = x < 0.0f ? -x : x;
  const bool small = a < 0.75f;
  const float ac = small ? 0.75f : (a > 4.0f ? 4.0f : a);
  const float h = ac * ac;
  const float near = erf_small(small ? a : 0.75f);
  const float far = 1.0f - erfc_large(ac, h, fused(ac, ac, -h));
  const float e = small ? near : far;
  return x < 0.0f ? -e : e;
}
TESSERA_NARROW_FN float exp_f32(float x) { return narrow::exp_normal(x > 88.0f ? 88.0f : (x < -87.0f ? -87.0f : x)); }

// The results: the narrow value (as fp32) of the reference's formula.
// Where the reference's fp32 value is known exactly, it is rounded directly:
// gelu(x) for x >= 5.6875 is x (x/2 (1 + erf) is x (1 - d) with d below
// 2^-26, less than half an fp32 step), and x / 2 for |x| < 2^-60 (1 + erf
// is 1 in double); erf is +-1 for |x| >= 4 (erfc(4) < 2^-25).
TESSERA_NARROW_FN float narrow_gelu(float x, int format) {
  using namespace narrow;
  // Branches, not selects: on a GPU the rare sides cost only the warps
  // that take them.
  const float m = x < 0.0f ? -x : x;
  if (x >= 5.6875f || m < 0x1p-60f) return decode(encode(m < 0x1p-60f ? 0.5f * x : x, format), format);
  const float r = certify(gelu_f32(x), format);
  if (x >= -5.5f && r == r) return r;
  return gelu_exact(x, format);
}
TESSERA_NARROW_FN float narrow_erf(float x, int format) {
  using namespace narrow;
  if (format == kNarrowFp32) {
    const float r = erf_f32_or_nan(x);  // NaN about once in 2^16, for tiny |x|, and for NaN x
    return r == r ? r : erf_exact(x, format);
  }
  const float m = x < 0.0f ? -x : x;
  if (m >= 4.0f) return x < 0.0f ? -1.0f : 1.0f;
  const float r = certify(erf_f32(x), format);
  if (m >= 0x1p-100f && r == r) return r;
  return erf_exact(x, format);
}
TESSERA_NARROW_FN float narrow_exp(float x, int format) {
  using namespace narrow;
  if (format == kNarrowFp32) {
    const float r = exp_f32_or_nan(x);  // NaN about once in 2^20, and for NaN x
    return r == r ? r : exp_exact(x, format);
  }
  const float r = certify(exp_f32(x), format);
  if (x >= -87.0f && x <= 88.0f && r == r) return r;
  return exp_exact(x, format);
}

}  // namespace tessera::elementary

#undef TESSERA_NARROW_FN
#undef TESSERA_NARROW_OUTLINED_FN
