// Tessera's elementary functions (exp, expm1, log, tanh, erf) in double precision:
// one implementation compiled into the reference executor, into generated CPU
// kernels and, through NVRTC, into generated CUDA kernels. The same source
// and no contraction of a*b+c (the kernels are compiled with
// -ffp-contract=off / --fmad=false; every fused step is written as fma) give
// the same bits on every backend, which a C library's or CUDA's own exp could
// not promise (shared/ARCHITECTURE.md decision 13).
//
// They are written to vectorize: straight-line polynomial code, the special
// cases (NaN, infinities, overflow, zero, subnormals) chosen by selects at
// the end rather than by early returns, no tables on the host (a GPU reads
// coefficients from constant memory, see horner_table), and both sides of every
// select computed unconditionally (a compiler that honours floating-point
// traps will not speculate an arithmetic op out of one side). g++ turns a
// lane loop of them into SIMD code.
//
// Accuracy (tests/python/test_elementary.py measures it against numpy):
// exp and log within 1 ulp (measured: 0.64 and 0.82 in the normal range),
// expm1 within 2 ulp and tanh within 3 ulp, for every double input; results rounded to fp32 or narrower formats are then almost always
// the correctly rounded value. Subnormal results of exp are rounded once.
//
// This file includes nothing under NVRTC (it is embedded in the library as
// "tessera/numerics/elementary.h", like the device headers).
#pragma once

#if defined(__CUDACC__)
#define TESSERA_ELEMENTARY_FN __host__ __device__ inline
#define TESSERA_ELEMENTARY_OUTLINED_FN __host__ __device__ __noinline__ inline
#else
#include <bit>
#include <cmath>
#include <cstdint>
#define TESSERA_ELEMENTARY_FN inline
#define TESSERA_ELEMENTARY_OUTLINED_FN [[gnu::noinline]] inline
#endif
// An out-of-line function that loops may still call from vector lanes: g++
// emits vector clones of it (simd, notinbranch), so a lane loop calling it
// vectorizes (GELU's erf on AVX2) instead of running scalar. The clones are
// the same operations per lane, so the same bits.
#if defined(__CUDACC__) || !defined(__GNUC__) || defined(__clang__)
#define TESSERA_ELEMENTARY_SIMD_FN TESSERA_ELEMENTARY_OUTLINED_FN
#else
#define TESSERA_ELEMENTARY_SIMD_FN __attribute__((simd("notinbranch"), const, noinline)) inline
#endif

namespace tessera::elementary {

namespace detail {

#if defined(__CUDACC__)
typedef unsigned long long bits64;
typedef long long int64;
typedef unsigned bits32;
typedef int int32;
TESSERA_ELEMENTARY_FN double from_bits(bits64 b) { return __longlong_as_double(static_cast<int64>(b)); }
TESSERA_ELEMENTARY_FN bits64 to_bits(double x) { return static_cast<bits64>(__double_as_longlong(x)); }
TESSERA_ELEMENTARY_FN double fused(double a, double b, double c) { return fma(a, b, c); }
#else
using bits64 = std::uint64_t;
using int64 = std::int64_t;
using bits32 = std::uint32_t;
using int32 = std::int32_t;
TESSERA_ELEMENTARY_FN double from_bits(bits64 b) { return std::bit_cast<double>(b); }
TESSERA_ELEMENTARY_FN bits64 to_bits(double x) { return std::bit_cast<bits64>(x); }
TESSERA_ELEMENTARY_FN double fused(double a, double b, double c) { return std::fma(a, b, c); }
#endif

TESSERA_ELEMENTARY_FN double inf() { return from_bits(0x7ff0000000000000ULL); }
TESSERA_ELEMENTARY_FN double nan() { return from_bits(0x7ff8000000000000ULL); }
// ln 2 split in a head with trailing zero bits and a tail: k * kLn2Hi is
// exact for |k| < 2^11.
constexpr double kLn2Hi = 0x1.62e42fefa3800p-1;
constexpr double kLn2Lo = 0x1.ef35793c76730p-45;
constexpr double kInvLn2 = 0x1.71547652b82fep0;
// Adding and subtracting 1.5 * 2^52 rounds a double of magnitude < 2^51 to
// an integer (ties to even) without a branch or a library call.
constexpr double kRoundShifter = 0x1.8p52;

// An integer-valued double k of magnitude < 2^51 as an int64, through the
// bits of k + 1.5 * 2^52 (exact: that sum's ulp is 1), and back. The same
// values as conversions, but in integer adds, which vectorize on targets
// without double <-> int64 vector conversions (AVX2: g++ left every lane
// loop calling exp, expm1, tanh or log scalar there).
TESSERA_ELEMENTARY_FN int64 integer_of_shifted(double shifted) {  // shifted = k + 1.5 * 2^52
  return static_cast<int64>(to_bits(shifted) - to_bits(kRoundShifter));
}
TESSERA_ELEMENTARY_FN int64 integer_of(double k) { return integer_of_shifted(k + kRoundShifter); }
TESSERA_ELEMENTARY_FN double double_of(int64 k) {
  return from_bits(to_bits(kRoundShifter) + static_cast<bits64>(k)) - kRoundShifter;
}
// k / 2 rounded toward zero, for an integer-valued double k (k * 0.5 is
// exact): the int64 division, which has no AVX2 vector form either.
TESSERA_ELEMENTARY_FN double trunc_half(double k) {
#if defined(__CUDACC__)
  return trunc(k * 0.5);
#else
  return std::trunc(k * 0.5);
#endif
}
// 2^k for an integer k in [-1022, 1023], built from its bits.
TESSERA_ELEMENTARY_FN double pow2(int64 k) { return from_bits(static_cast<bits64>(k + 1023) << 52); }
// x clamped to [lo, hi] (lo <= hi, not NaN): one min and one max instruction
// on a GPU. A NaN x gives a value in [lo, hi] on a GPU and NaN elsewhere;
// callers decide a NaN x's result by x itself.
TESSERA_ELEMENTARY_FN float clamp_f32(float x, float lo, float hi) {
#if defined(__CUDACC__)
  return fminf(fmaxf(x, lo), hi);
#else
  return x > hi ? hi : (x < lo ? lo : x);
#endif
}

// x = k ln2 + r with |r| <= ln2 / 2 (about), for |x| < 2^40; r is carried
// as r + r_lo, a double-double, so exp can round only once at the end.
struct Reduced {
  double k;
  double r;
  double r_lo;
};
TESSERA_ELEMENTARY_FN Reduced reduce_ln2(double x) {
  const double k = (x * kInvLn2 + kRoundShifter) - kRoundShifter;
  const double t = fused(-k, kLn2Hi, x);  // exact: k * kLn2Hi is exact and close to x
  const double p = k * kLn2Lo;
  const double r = t - p;
  const double r_lo = (t - r) - p;  // Fast2Sum: |t| >= |p|
  return {k, r, r_lo};
}

// k! exactly (k <= 18: below 2^53).
TESSERA_ELEMENTARY_FN constexpr double factorial(int k) { return k <= 1 ? 1.0 : k * factorial(k - 1); }

// On a GPU, polynomial coefficients are read from constant memory: a double
// literal is no instruction's operand there, so each use cost two moves into
// uniform registers (38% of the instructions of an fp32 GELU backward were
// such moves), while an fma takes a constant-bank operand directly. The
// table forms (horner_table, clenshaw_table, and inverse_factorial_series
// on the device) do the same operations in the same order as the literal
// forms, so the same bits. The tables are not const, so the compiler cannot
// turn their elements back into literals.
#if defined(__CUDACC__)
#define TESSERA_ELEMENTARY_TABLE static __constant__ double
// c[0] + z (c[1] + z (c[2] + ...)), as horner() below.
template <int N>
__device__ __forceinline__ double horner_table(double z, const double* c) {
  double p = c[N - 1];
#pragma unroll
  for (int k = N - 2; k >= 0; --k) p = fma(p, z, c[k]);
  return p;
}
// 1 / k! for k = 0 .. 13.
TESSERA_ELEMENTARY_TABLE kInverseFactorials[14] = {
    1.0 / factorial(0),  1.0 / factorial(1),  1.0 / factorial(2),  1.0 / factorial(3),  1.0 / factorial(4),
    1.0 / factorial(5),  1.0 / factorial(6),  1.0 / factorial(7),  1.0 / factorial(8),  1.0 / factorial(9),
    1.0 / factorial(10), 1.0 / factorial(11), 1.0 / factorial(12), 1.0 / factorial(13)};
#endif
// Horner's step for 1/K! and every lower term down to 1/Lo!, on p (the
// higher terms so far).
template <int Lo, int K>
TESSERA_ELEMENTARY_FN double fold_inverse_factorials(double p, double r) {
  constexpr double c = 1.0 / factorial(K);
  p = fused(p, r, c);
  if constexpr (K > Lo) {
    return fold_inverse_factorials<Lo, K - 1>(p, r);
  } else {
    return p;
  }
}
// sum over k in [Lo, Hi] of r^(k - Lo) / k! (e^r's Taylor coefficients), by
// Horner from the top, one fused multiply-add per term.
template <int Lo, int Hi>
TESSERA_ELEMENTARY_FN double inverse_factorial_series(double r) {
#if defined(__CUDA_ARCH__)
  static_assert(Hi <= 13, "kInverseFactorials holds 1/k! up to k = 13");
  return horner_table<Hi - Lo + 1>(r, kInverseFactorials + Lo);
#else
  constexpr double top = 1.0 / factorial(Hi);
  return fold_inverse_factorials<Lo, Hi - 1>(top, r);
#endif
}
// e^r - 1 - r for |r| <= 0.35, as r^2 * P(r): the Taylor series to r^13 (its
// truncation error is below 2^-60 relative on that range).
TESSERA_ELEMENTARY_FN double expm1_tail(double r) {
  return r * r * inverse_factorial_series<2, 13>(r);
}

// e^x - 1 for x already clamped to [-40, 710] (or NaN), before expm1's
// range selects: e^x - 1 = 2^k s + (2^k - 1); 2^k - 1 is exact for
// -53 <= k <= 53. Past k = 53 the -1 is below half an ulp of the result, so
// e^x is the answer.
TESSERA_ELEMENTARY_FN double expm1_clamped(double xc) {
  const Reduced red = reduce_ln2(xc);
  const double s = red.r + (red.r_lo + expm1_tail(red.r));  // e^r - 1
  const int64 k = integer_of(red.k);
  const int64 k1 = integer_of(trunc_half(red.k));  // k / 2
  const double scale1 = pow2(k1), scale2 = pow2(k - k1);
  const double small = fused(s, scale1 * scale2, scale1 * scale2 - 1.0);
  const double large = ((s + 1.0) * scale1) * scale2;
  return k > 53 ? large : small;
}

// c0 + z (c1 + z (c2 + ...)), one fused multiply-add per coefficient.
template <class... Cs>
TESSERA_ELEMENTARY_FN double horner(double z, double c0, Cs... rest) {
  if constexpr (sizeof...(rest) == 0) {
    return c0;
  } else {
    return fused(horner(z, rest...), z, c0);
  }
}
// Clenshaw's recurrence for sum c_k T_k(t) over k >= the first coefficient
// given: (b_k, b_k+1), with b_k = c_k + 2t b_k+1 - b_k+2 (t2 = 2t).
struct Clenshaw {
  double b1, b2;
};
template <class... Cs>
TESSERA_ELEMENTARY_FN Clenshaw clenshaw(double t2, double ck, Cs... rest) {
  if constexpr (sizeof...(rest) == 0) {
    return {ck, 0.0};
  } else {
    const Clenshaw p = clenshaw(t2, rest...);
    return {fused(t2, p.b1, ck - p.b2), p.b1};
  }
}
#if defined(__CUDACC__)
// clenshaw() over c[0 .. N-1].
template <int N>
__device__ __forceinline__ Clenshaw clenshaw_table(double t2, const double* c) {
  double b1 = c[N - 1], b2 = 0.0;
#pragma unroll
  for (int k = N - 2; k >= 0; --k) {
    const double next = fma(t2, b1, c[k] - b2);
    b2 = b1;
    b1 = next;
  }
  return {b1, b2};
}
#endif

}  // namespace detail

// e^x.
TESSERA_ELEMENTARY_FN double exp(double x) {
  using namespace detail;
  // Clamp first so the reduction and the scaling stay in range; the selects
  // at the end give overflow, underflow and NaN.
  const double xc = x > 710.0 ? 710.0 : (x < -746.0 ? -746.0 : x);
  const Reduced red = reduce_ln2(xc);
  // 1 + r exactly as a double-double (Fast2Sum), then the small parts, then
  // one rounding.
  const double head = 1.0 + red.r;
  const double head_lo = (1.0 - head) + red.r;
  const double y = head + (head_lo + (red.r_lo + expm1_tail(red.r)));
  // y * 2^k in two steps: the first is exact (its result is normal), so a
  // subnormal result is rounded once, by the second.
  const int64 k = integer_of(red.k);
  const int64 k1 = integer_of(trunc_half(red.k));  // k / 2
  const double v = (y * pow2(k1)) * pow2(k - k1);
  const double big = x > 709.782712893384 ? inf() : v;
  const double result = x < -745.1332191019412 ? 0.0 : big;
  return x != x ? x : result;
}

namespace detail {

// 2^(j/64) for j = 0 .. 63, each the double nearest to it (exp_f32_or_nan's
// table form). A GPU reads it through the read-only data cache: the lanes of
// a warp index it at random, which constant memory would serialize. 512
// bytes: a warp's 32 random reads touch at most four 128-byte lines.
#if defined(__CUDACC__)
static __device__ const double kExp2Fractions[64] = {
#else
inline constexpr double kExp2Fractions[64] = {
#endif
    0x1.0000000000000p+0, 0x1.02c9a3e778061p+0, 0x1.059b0d3158574p+0, 0x1.0874518759bc8p+0,
    0x1.0b5586cf9890fp+0, 0x1.0e3ec32d3d1a2p+0, 0x1.11301d0125b51p+0, 0x1.1429aaea92de0p+0,
    0x1.172b83c7d517bp+0, 0x1.1a35beb6fcb75p+0, 0x1.1d4873168b9aap+0, 0x1.2063b88628cd6p+0,
    0x1.2387a6e756238p+0, 0x1.26b4565e27cddp+0, 0x1.29e9df51fdee1p+0, 0x1.2d285a6e4030bp+0,
    0x1.306fe0a31b715p+0, 0x1.33c08b26416ffp+0, 0x1.371a7373aa9cbp+0, 0x1.3a7db34e59ff7p+0,
    0x1.3dea64c123422p+0, 0x1.4160a21f72e2ap+0, 0x1.44e086061892dp+0, 0x1.486a2b5c13cd0p+0,
    0x1.4bfdad5362a27p+0, 0x1.4f9b2769d2ca7p+0, 0x1.5342b569d4f82p+0, 0x1.56f4736b527dap+0,
    0x1.5ab07dd485429p+0, 0x1.5e76f15ad2148p+0, 0x1.6247eb03a5585p+0, 0x1.6623882552225p+0,
    0x1.6a09e667f3bcdp+0, 0x1.6dfb23c651a2fp+0, 0x1.71f75e8ec5f74p+0, 0x1.75feb564267c9p+0,
    0x1.7a11473eb0187p+0, 0x1.7e2f336cf4e62p+0, 0x1.82589994cce13p+0, 0x1.868d99b4492edp+0,
    0x1.8ace5422aa0dbp+0, 0x1.8f1ae99157736p+0, 0x1.93737b0cdc5e5p+0, 0x1.97d829fde4e50p+0,
    0x1.9c49182a3f090p+0, 0x1.a0c667b5de565p+0, 0x1.a5503b23e255dp+0, 0x1.a9e6b5579fdbfp+0,
    0x1.ae89f995ad3adp+0, 0x1.b33a2b84f15fbp+0, 0x1.b7f76f2fb5e47p+0, 0x1.bcc1e904bc1d2p+0,
    0x1.c199bdd85529cp+0, 0x1.c67f12e57d14bp+0, 0x1.cb720dcef9069p+0, 0x1.d072d4a07897cp+0,
    0x1.d5818dcfba487p+0, 0x1.da9e603db3285p+0, 0x1.dfc97337b9b5fp+0, 0x1.e502ee78b3ff6p+0,
    0x1.ea4afa2a490dap+0, 0x1.efa1bee615a27p+0, 0x1.f50765b6e4540p+0, 0x1.fa7c1819e90d8p+0};
TESSERA_ELEMENTARY_FN double exp2_fraction(int64 j) {
#if defined(__CUDA_ARCH__)
  return __ldg(kExp2Fractions + j);
#else
  return kExp2Fractions[j];
#endif
}

// Whether a rounding boundary of fp32 (a midpoint between two fp32 values)
// lies within 256 ulps of double of e (the series form), or within 512 (the
// table form), e a normal double in fp32's normal range: the 29 bits below
// fp32's last mantissa bit lie that close to the midpoint 2^28. In 64-bit
// integers (which vectorize on a CPU), and in the low word alone, which
// holds those bits (two 32-bit operations fewer on a GPU).
TESSERA_ELEMENTARY_FN bool near_fp32_midpoint(double e) {
  return (to_bits(e) & 0x1fffffffULL) - 0x0fffff01ULL < 511ULL;
}
TESSERA_ELEMENTARY_FN bool near_fp32_midpoint_low_word(double e) {
  return (static_cast<bits32>(to_bits(e)) & 0x1fffffffU) - 0x0ffffe01U < 1023U;
}
// exp_f32_or_nan's answer from e, a double within 32 ulps of e^x for x in
// [-87, 88]: e's fp32 rounding equals exp's unless `near_midpoint`: then NaN
// (about one element in 2^20). For x <= -104 both give 0 (e^x < 2^-150);
// other x (NaN, overflow, subnormal results) answer NaN.
TESSERA_ELEMENTARY_FN float certified_exp_f32(float x, double e, bool near_midpoint) {
  const bool sure = x >= -87.0f && x <= 88.0f && !near_midpoint;
  const float fast = static_cast<float>(e);
  const float unsure = static_cast<float>(nan());
  return x <= -104.0f ? 0.0f : (sure ? fast : unsure);
}
// m 2^k for m in [0.5, 4) and a normal result, by adding k to m's exponent
// field: exact. A GPU adds to the high word alone.
TESSERA_ELEMENTARY_FN double scaled_by_exponent(double m, int32 k) {
#if defined(__CUDA_ARCH__)
  return __hiloint2double(__double2hiint(m) + (k << 20), __double2loint(m));
#else
  return from_bits(to_bits(m) + (static_cast<bits64>(static_cast<int64>(k)) << 52));
#endif
}

}  // namespace detail

// round_to_fp32(exp(x)) for an fp32 x -- the same bits as exp((double)x)
// rounded to fp32 -- or NaN where the cheaper evaluation cannot promise
// them; callers recompute those elements with exp. Two forms give those
// answers, each checked against exp on all 2^32 inputs; the unsure sets
// differ by the few inputs each places near a midpoint, the answers do not:
// - the series form evaluates e^r, x = k ln2 + r, by a degree-11 Taylor
//   polynomial (relative error below 2^-46; 18 double operations);
// - the table form evaluates 2^k 2^(j/64) e^r, x = (64k + j) ln2/64 + r,
//   |r| <= ln2/128, by a 64-entry table and a degree-4 polynomial (relative
//   error below 2^-44.2, within the 512 ulps of double its midpoint test
//   keeps; 8 double operations and a load).
// A GPU takes the table form: its exp was about half a softmax kernel's
// instructions, and the H200 softmax forward went from 1350 to 1450 GB/s
// with it. A CPU takes the series form: the generated softmax kernels ran
// 2.9x slower with the table form (their strand loops still vectorize, with
// a gather from the table), while a plain loop over it ran 1.25x faster than
// over the series; the cause is not found yet.
// Both test x in fp32, where the bounds are fp32 numbers too: the same
// values as in double, without double compares and selects.
TESSERA_ELEMENTARY_FN float exp_f32_or_nan_series(float x) {
  using namespace detail;
  // Clamped so that 2^k stays a normal double for any x. (A NaN x is
  // clamped to whatever the target's min and max give; it answers NaN all
  // the same.)
  const double xc = static_cast<double>(clamp_f32(x, -88.0f, 88.0f));
  // k + 1.5 * 2^52, whose low bits hold the integer k.
  const double shifted = xc * kInvLn2 + kRoundShifter;
  const double k = shifted - kRoundShifter;
  const double r = fused(-k, kLn2Lo, fused(-k, kLn2Hi, xc));  // |r| <= 0.3466
  const double p = inverse_factorial_series<0, 11>(r);  // e^r to r^11
  const double e = p * pow2(integer_of_shifted(shifted));
  return certified_exp_f32(x, e, near_fp32_midpoint(e));
}
TESSERA_ELEMENTARY_FN float exp_f32_or_nan_table(float x) {
  using namespace detail;
  // Unclamped: an x outside [-87, 88] gets its answer from the selects
  // whatever e is, and the table index is masked.
  const double xc = static_cast<double>(x);
  // n + 1.5 * 2^52 for n = 64k + j, the integer nearest to 64 x / ln2 (one
  // rounding of the exact product and sum). For x in [-104, 88], |n| <
  // 2^14, so shifted's low word holds n in two's complement: the shifter's
  // low word is 0.
  const double shifted = fused(xc, kInvLn2 * 64.0, kRoundShifter);
  const double n = shifted - kRoundShifter;
  // One step: ln2/64 rounded to double is off by at most 2^-60, so n times
  // that error is below 2^-46.8, a relative error of e^r that small.
  constexpr double kLn2Over64 = 0x1.62e42fefa39efp-7;
  const double r = fused(-n, kLn2Over64, xc);  // |r| <= 0.00542
  const int32 ni = static_cast<int32>(static_cast<bits32>(to_bits(shifted)));
  const double t = exp2_fraction(ni & 63);
  // e^r - 1 to r^4: the truncation, r^5 / 120, is below 2^-44.5 relative.
  const double q = fused(r * r, inverse_factorial_series<2, 4>(r), r);
  // 2^(j/64) e^r lies in [0.99, 1.99]; times 2^k, a normal double.
  const double e = scaled_by_exponent(fused(t, q, t), ni >> 6);
  return certified_exp_f32(x, e, near_fp32_midpoint_low_word(e));
}
TESSERA_ELEMENTARY_FN float exp_f32_or_nan(float x) {
#if defined(__CUDA_ARCH__)
  return exp_f32_or_nan_table(x);
#else
  return exp_f32_or_nan_series(x);
#endif
}
// e^x - 1, accurate also where x is small.
TESSERA_ELEMENTARY_FN double expm1(double x) {
  using namespace detail;
  const double v = expm1_clamped(x > 710.0 ? 710.0 : (x < -40.0 ? -40.0 : x));
  const double big = x > 709.782712893384 ? inf() : v;
  const double result = x < -40.0 ? -1.0 : big;
  return (x != x || x == 0.0) ? x : result;  // NaN, and the sign of a zero
}

// The natural logarithm.
TESSERA_ELEMENTARY_FN double log(double x) {
  using namespace detail;
  // Subnormal inputs are scaled into the normal range first.
  const bool subnormal = x < 0x1p-1022;
  const double scaled = x * 0x1p54;
  const double xs = subnormal ? scaled : x;
  const bits64 b = to_bits(xs);
  int64 e = static_cast<int64>((b >> 52) & 0x7ff) - 1023 - (subnormal ? 54 : 0);
  // m in [1, 2) from the mantissa bits; then moved to [sqrt(1/2), sqrt(2)).
  double m = from_bits((b & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL);
  const bool high = m > 1.4142135623730951;
  const double half = m * 0.5;
  m = high ? half : m;
  e = high ? e + 1 : e;
  // log(m) = log(1 + f) = 2 atanh(s) with s = f / (2 + f), |s| < 0.172:
  // f - f^2/2 + s (f^2/2 + R), R = sum_i 2 z^i / (2i + 1), z = s^2 (to z^11,
  // truncation below 2^-60 relative).
  const double f = m - 1.0;
  const double s = f / (2.0 + f);
  const double z = s * s;
  double R = 2.0 / 23.0;
  R = fused(R, z, 2.0 / 21.0);
  R = fused(R, z, 2.0 / 19.0);
  R = fused(R, z, 2.0 / 17.0);
  R = fused(R, z, 2.0 / 15.0);
  R = fused(R, z, 2.0 / 13.0);
  R = fused(R, z, 2.0 / 11.0);
  R = fused(R, z, 2.0 / 9.0);
  R = fused(R, z, 2.0 / 7.0);
  R = fused(R, z, 2.0 / 5.0);
  R = fused(R, z, 2.0 / 3.0);
  R = R * z;
  const double hfsq = 0.5 * f * f;
  const double dk = double_of(e);
  // dk * ln2 + log(1 + f), summed from the small parts up.
  const double v = fused(dk, kLn2Hi, ((fused(s, hfsq + R, fused(dk, kLn2Lo, 0.0)) - hfsq) + f));
  const double special = x == 0.0 ? -inf() : (x == inf() ? inf() : nan());
  const bool regular = x > 0.0 && x < inf();
  return regular ? v : (x != x ? x : special);
}

// The hyperbolic tangent: (e^2|x| - 1) / (e^2|x| + 1) through expm1, with the
// sign of x; +-1 past |x| = 19.1, where the quotient rounds to 1.
TESSERA_ELEMENTARY_FN double tanh(double x) {
  using namespace detail;
  // |x| and the sign bit as bits: the sign goes back on at the end, which
  // also keeps the sign of a zero; a NaN passes through expm1 unchanged.
  const bits64 sign = to_bits(x) & 0x8000000000000000ULL;
  const double a = from_bits(to_bits(x) ^ sign);
  // expm1(2a), computed as expm1() computes it for 2a in [0, 40]: past 40
  // (a > 19.1) the result is 1 whatever e is, so the argument is clamped
  // there and expm1's range selects (overflow, below -40, NaN and zero,
  // which the arithmetic already gets right here) are left out: the same
  // bits in fewer operations.
  const double a2 = 2.0 * a;
  const double e = expm1_clamped(a2 > 40.0 ? 40.0 : a2);  // a NaN stays NaN
  const double q = e / (e + 2.0);
  const double t = a > 19.1 ? 1.0 : q;
  return from_bits(to_bits(t) | sign);
}

namespace detail {

// erf's coefficients (see erf below).
#define TESSERA_ERF_NEAR_COEFFICIENTS \
    0x1.20dd750429b6dp+0, -0x1.812746b0379e7p-2, 0x1.ce2f21a042be2p-4, -0x1.b82ce31288b51p-6, 0x1.565bcd0e6a53fp-8, \
    -0x1.c02db40040b86p-11, 0x1.f9a326f9b89b7p-14, -0x1.f4d25c3e0c2ebp-17, 0x1.b9e6c9dc651a3p-20, \
    -0x1.5f742ec43e71ap-23, 0x1.fcc5720624c1cp-27, -0x1.51d7181c5d36dp-30, 0x1.9e6ad5e55a730p-34, \
    -0x1.d8453cb0c46eap-38, 0x1.f683ae4a97007p-42, -0x1.f56f071a885cfp-46, 0x1.d70b3537f4765p-50, \
    -0x1.a2007af3447f6p-54, 0x1.5f7919bc67b8cp-58, -0x1.18cc8a061c479p-62, 0x1.ab5cc31489f29p-67, \
    -0x1.3676fc48c133cp-71, 0x1.af83c2fb19fa6p-76, -0x1.1f690c2b2753ap-80, 0x1.6f928977a0028p-85, \
    -0x1.c40abff27ce65p-90, 0x1.0baeaddb047b0p-94, -0x1.31b7776e54127p-99, 0x1.512193be51298p-104, \
    -0x1.67657a57148a3p-109, 0x1.72c97f9dd3b8dp-114, -0x1.7298e545013acp-119, 0x1.6731bac4d9ceap-124, \
    -0x1.51e98b3b1916bp-129
#define TESSERA_ERF_MIDDLE_COEFFICIENTS \
    0x1.0000000000000p+0, 0x1.5555555555555p-2, 0x1.1111111111111p-4, 0x1.3813813813814p-7, 0x1.1566abc011567p-10, \
    0x1.937e11175f095p-14, 0x1.f09b28ba4d955p-18, 0x1.08db48ebe51c7p-21, 0x1.f28db670be53bp-26, 0x1.a3d5a71b92cd3p-30, \
    0x1.3fdfbc45c52eap-34, 0x1.bd0ac3296b624p-39, 0x1.1cd3b01a822a6p-43, 0x1.519297d390c9fp-48, 0x1.747e72912d023p-53, \
    0x1.808286c768445p-58, 0x1.74dba97b8be52p-63, 0x1.54e6174c62a5ap-68, 0x1.26d4d5e132b8cp-73, 0x1.e3d36c1c38faap-79, \
    0x1.799ec4c4db4d0p-84, 0x1.19050980a3336p-89, 0x1.8fac24452c5fdp-95, 0x1.101e0dcd0ddf3p-100, \
    0x1.636b2c25f2c57p-106, 0x1.be03fb2a9a10ep-112, 0x1.0d4adb45318cap-117, 0x1.395bc2a44c468p-123, \
    0x1.5fd74f512d38cp-129, 0x1.7da878c0310ddp-135, 0x1.906d9c10fce8bp-141, 0x1.96c8bf0d31af7p-147, \
    0x1.9086a47b449d0p-153, 0x1.7e978a031f273p-159, 0x1.62de2e635bf7dp-165, 0x1.3fe183f49b037p-171
#define TESSERA_ERF_FAR_COEFFICIENTS \
    -0x1.3a53c917d1818p-4, 0x1.2f051fecf5d7fp-6, -0x1.1c3eb472a6099p-8, 0x1.03f6c7ce7b873p-10, -0x1.d0697a07a3bcep-13, \
    0x1.95bca17afcb6dp-15, -0x1.5b284ed317bf9p-17, 0x1.233c3b756db23p-19, -0x1.df960ba59f104p-22, \
    0x1.83e84f5f1fd6dp-24, -0x1.34786b1b337a0p-26, 0x1.e2b2547058900p-29, -0x1.73d441b1548e7p-31, \
    0x1.1a2cda1d32ea1p-33, -0x1.a628c46e190d9p-36, 0x1.3772337989756p-38, -0x1.c56cf3bfa9f45p-41, \
    0x1.45d00d9c5b56cp-43, -0x1.ce212fe15758dp-46, 0x1.41cde659b3196p-48, -0x1.b667fd01e1265p-51, \
    0x1.e8c090a5ef71dp-54, -0x1.fadaa8f7eed56p-55, 0x1.21a1851ff630dp-56
// erf_f32_or_nan's Chebyshev coefficients 1..28 (the 0th is in its body).
#define TESSERA_ERF_F32_COEFFICIENTS \
    -0x1.61b298c41c6f7p-2, 0x1.4b6d0e4a078b1p-3, -0x1.3945fb82e5cdfp-4, 0x1.1c042096cd58ap-5, -0x1.e55aec0dc7ca5p-7, \
    0x1.842a68d17910ep-8, -0x1.21e90e964c706p-9, 0x1.9471a0460c433p-11, -0x1.07d171dce3d92p-12, 0x1.427c56ca4a0fap-14, \
    -0x1.7232955b57cb2p-16, 0x1.900de87f630d3p-18, -0x1.97f625ce6da1ep-20, 0x1.8984d7359b760p-22, \
    -0x1.67e00fbeae77fp-24, 0x1.38b2d1248580ap-26, -0x1.02b1624e54ff8p-28, 0x1.9852f1a4003c4p-31, \
    -0x1.33faca151020bp-33, 0x1.bcc8003e5ee8fp-36, -0x1.33fda93675c51p-38, 0x1.998cf43d8de27p-41, \
    -0x1.053ab735e6e98p-43, 0x1.3c01f55bbab38p-46, -0x1.116de38eeeed3p-48, 0x1.2e83b1e3723f9p-50, \
    -0x1.576edbab85148p-51, -0x1.0ebc13ad21f9fp-53
#if defined(__CUDACC__)
TESSERA_ELEMENTARY_TABLE kErfF32[] = {TESSERA_ERF_F32_COEFFICIENTS};
TESSERA_ELEMENTARY_TABLE kErfNear[] = {TESSERA_ERF_NEAR_COEFFICIENTS};
TESSERA_ELEMENTARY_TABLE kErfMiddle[] = {TESSERA_ERF_MIDDLE_COEFFICIENTS};
TESSERA_ELEMENTARY_TABLE kErfFar[] = {TESSERA_ERF_FAR_COEFFICIENTS};
#endif

// erf's three forms (see erf below), each on its own range.
TESSERA_ELEMENTARY_FN double erf_near(double s) {
#if defined(__CUDA_ARCH__)
  return s * horner_table<34>(s * s, kErfNear);
#else
  return s * horner(s * s, TESSERA_ERF_NEAR_COEFFICIENTS);
#endif
}

TESSERA_ELEMENTARY_FN double erf_middle(double q) {
  // With h = q^2 rounded, e^-h and the series at 2h move oppositely with h's
  // rounding: their product changes by ~h/8 of it (d ln/dh is about -1/2h),
  // so h goes in rounded to both.
  const double q_hi = q * q;
  const double q_exp = exp(-q_hi);
#if defined(__CUDA_ARCH__)
  const double series = horner_table<36>(2.0 * q_hi, kErfMiddle);
#else
  const double series = horner(2.0 * q_hi, TESSERA_ERF_MIDDLE_COEFFICIENTS);
#endif
  return ((0x1.20dd750429b6dp+0 * q) * q_exp) * series;  // 2 / sqrt(pi) = 0x1.20dd750429b6dp+0
}

TESSERA_ELEMENTARY_FN double erf_far(double m) {
  const double t = (m - 4.0) * 0.5;
#if defined(__CUDA_ARCH__)
  const Clenshaw c = clenshaw_table<24>(2.0 * t, kErfFar);
#else
  const Clenshaw c = clenshaw(2.0 * t, TESSERA_ERF_FAR_COEFFICIENTS);
#endif
  const double g = fused(t, c.b1, 0x1.3c84269744fa5p-3 - c.b2);
  // e^-(hi + lo) ~ e^-hi (1 - lo) for m^2 = hi + lo exactly.
  const double hi = m * m;
  const double e = exp(-hi);
  return 1.0 - fused(-e, fused(m, m, -hi), e) * g;
}

}  // namespace detail

// The error function, from three forms chosen by |x| (the constants come
// from scripts/fit_erf.py, which says how they were derived):
// - |x| < 1: the Taylor series of erf(x) / x in x^2 to the 33rd power;
// - 1 <= |x| < 2: (2 / sqrt(pi)) x e^-x^2 sum (2x^2)^n / (2n + 1)!!, whose
//   terms are all positive (the Taylor series cancels there);
// - 2 <= |x| < 6: 1 - e^-x^2 g(|x|), g(a) = e^(a^2) erfc(a) as a Chebyshev
//   series of degree 24 on [2, 6] (g within 14 ulp, which moves the result
//   by under half an ulp since erfc <= 0.0047 there);
// and +-1 past 6 (erfc(6) is below half an ulp of 1). x^2 goes into the
// exponentials as a double-double. Odd: computed on |x|, the sign put back
// at the end (erf(-0) = -0); NaN passes through. Accuracy
// (tests/cpp/elementary_test.cpp, against the C library's long double erfl):
// within 5 ulp everywhere tested (4.5 at worst, near |x| = 2: the sum of
// several roundings), so results rounded to fp32 are almost always the
// correctly rounded value.
//
// Out of line: about 150 operations, which inlined at each of a generated
// kernel's call sites (an elementwise kernel over many ops and policies has
// hundreds) made the CPU compiler take five times as long.
TESSERA_ELEMENTARY_SIMD_FN double erf(double x) {
  using namespace detail;
  const bits64 sign = to_bits(x) & 0x8000000000000000ULL;
  const double a = from_bits(to_bits(x) ^ sign);
#if defined(__CUDA_ARCH__)
  // On a GPU only the forms some lane needs run (branches: a warp whose
  // lanes all lie in one range pays for one form); each form gets the same
  // argument the selects below give it in its range, so the same bits.
  double v = 1.0;  // past 6, and NaN (put back below)
  if (a < 1.0) {
    v = erf_near(a);
  } else if (a < 2.0) {
    v = erf_middle(a);
  } else if (a < 6.0) {
    v = erf_far(a);
  }
#else
  // Every form computed on a clamped argument, one chosen at the end.
  const double near = erf_near(a < 1.0 ? a : 1.0);
  const double middle = erf_middle(a < 1.0 ? 1.0 : (a > 2.0 ? 2.0 : a));
  const double far = erf_far(a < 2.0 ? 2.0 : (a > 6.0 ? 6.0 : a));  // a NaN stays NaN
  const double v = a < 1.0 ? near : (a < 2.0 ? middle : (a < 6.0 ? far : 1.0));
#endif
  const double r = x != x ? x : v;
  return from_bits(to_bits(r) | sign);
}

// round_to_fp32(erf(x)) for an fp32 x -- the same bits as erf((double)x)
// rounded to fp32 -- or NaN where this cheaper evaluation cannot promise
// them; callers recompute those elements with erf. For |x| < 4 it evaluates
// erf(a) / a as one Chebyshev series in u = a^2 / 8 - 1 (degree 28, from
// scripts/fit_erf.py; relative error about 2^-46, measured, against erf's 5
// ulp), times a: one form for every argument, so GPU lanes never diverge
// between erf's three. The fp32 rounding of that value equals erf's unless
// an fp32 rounding boundary lies within 4096 ulps of double (2^-40
// relative, 60 times the error): then it answers NaN (about one element in
// 2^16), as it does for |x| < 2^-100 (results near fp32's subnormals) and
// NaN. For |x| >= 4 the result is +-1 (erfc(4) < 2^-25, half an fp32 step
// below 1).
TESSERA_ELEMENTARY_FN float erf_f32_or_nan(float x) {
  using namespace detail;
  const double xd = static_cast<double>(x);
  const double a = xd < 0.0 ? -xd : xd;
  const double ac = a < 4.0 ? a : 4.0;  // a NaN stays NaN
  const double u = (ac * ac) * 0.125 - 1.0;  // ac^2 exact
#if defined(__CUDA_ARCH__)
  const Clenshaw c = clenshaw_table<28>(2.0 * u, kErfF32);
#else
  const Clenshaw c = clenshaw(2.0 * u, TESSERA_ERF_F32_COEFFICIENTS);
#endif
  const double e = ac * fused(u, c.b1, 0x1.f1932a8a66dd7p-2 - c.b2);
  // The 29 bits below fp32's last mantissa bit; 2^28 is the midpoint.
  const int64 below = static_cast<int64>(to_bits(e) & 0x1fffffffULL) - 0x10000000LL;
  const bool sure = a >= 0x1p-100 && a < 4.0 && !(below > -4096 && below < 4096);
  const float fast = static_cast<float>(e);
  const float r = a >= 4.0 ? 1.0f : (sure ? fast : static_cast<float>(nan()));
  return xd < 0.0 ? -r : r;
}

}  // namespace tessera::elementary

#undef TESSERA_ERF_F32_COEFFICIENTS
#undef TESSERA_ERF_NEAR_COEFFICIENTS
#undef TESSERA_ERF_MIDDLE_COEFFICIENTS
#undef TESSERA_ERF_FAR_COEFFICIENTS
#undef TESSERA_ELEMENTARY_TABLE
#undef TESSERA_ELEMENTARY_FN
#undef TESSERA_ELEMENTARY_OUTLINED_FN
#undef TESSERA_ELEMENTARY_SIMD_FN
