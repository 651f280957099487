// Device-side conversions between real numbers and every Tessera storage
// format, compiled by NVRTC inside generated kernels (embedded in the library
// as "tessera/numerics.cuh"; it includes no header, host or CUDA).
//
// Every function here gives, bit for bit, what the host numerics library
// (src/numerics) gives for the same input and options:
//   encode(x, dtype, ...)  is encode_value(): the exact path, integer
//                          arithmetic on the binary expansion of x, every
//                          rounding (nearest_even, stochastic, toward_zero)
//                          and overflow mode (inf_nan, saturate);
//   decode(bits, dtype)    is decode_value() (NaN as the canonical quiet NaN
//                          with the encoding's sign);
//   encode_f32_rne<...>    is the host's vectorized float32 round-to-nearest-
//                          even path (bulk encode()), branch-free.
// Stochastic rounding draws the same Philox4x32-10 bits, keyed by (seed,
// element index), so a tensor rounded on the device equals one rounded on
// the host. tests/gpu checks all of this on a GPU against the host library.
#pragma once

namespace tessera {
namespace device {

typedef unsigned long long u64;
typedef unsigned int u32;
typedef long long i64;

// The storage dtypes, numbered as tessera::DType.
enum DTypeCode : int {
  kFp64 = 0,
  kFp32,
  kFp16,
  kBf16,
  kFp8E4m3,
  kFp8E5m2,
  kFp6E2m3,
  kFp6E3m2,
  kFp4E2m1,
  kE8m0,
  kInt4,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kUint8,
  kBool,
};
// As tessera::Rounding and tessera::Overflow.
enum RoundingCode : int { kNearestEven = 0, kStochastic = 1, kTowardZero = 2 };
enum OverflowCode : int { kInfNan = 0, kSaturate = 1 };
// As tessera::SpecialValues.
enum SpecialsCode : int { kIeee = 0, kNanOnlyFn = 1, kNoSpecials = 2, kUnsignedNan = 3 };

struct Format {
  int exponent_bits;
  int mantissa_bits;
  int bias;
  bool has_sign;
  bool has_subnormals;
  int specials;
};

__device__ __forceinline__ bool is_float_dtype(int dtype) {
  return dtype <= kE8m0;
}

// The float formats of the dtype table (src/numerics/dtype.cpp).
__device__ __forceinline__ Format format_of(int dtype) {
  switch (dtype) {
    case kFp64: return Format{11, 52, 1023, true, true, kIeee};
    case kFp32: return Format{8, 23, 127, true, true, kIeee};
    case kFp16: return Format{5, 10, 15, true, true, kIeee};
    case kBf16: return Format{8, 7, 127, true, true, kIeee};
    case kFp8E4m3: return Format{4, 3, 7, true, true, kNanOnlyFn};
    case kFp8E5m2: return Format{5, 2, 15, true, true, kIeee};
    case kFp6E2m3: return Format{2, 3, 1, true, true, kNoSpecials};
    case kFp6E3m2: return Format{3, 2, 3, true, true, kNoSpecials};
    case kFp4E2m1: return Format{2, 1, 1, true, true, kNoSpecials};
    default: return Format{8, 0, 127, false, false, kUnsignedNan};  // e8m0
  }
}

// Width in bits and signedness of the integer dtypes.
__device__ __forceinline__ int integer_bits(int dtype) {
  switch (dtype) {
    case kInt4: return 4;
    case kInt8: return 8;
    case kInt16: return 16;
    case kInt32: return 32;
    case kInt64: return 64;
    default: return 8;  // uint8, bool
  }
}
__device__ __forceinline__ bool integer_signed(int dtype) {
  return dtype >= kInt4 && dtype <= kInt64;
}

__device__ __forceinline__ int min_exponent(const Format& f) {
  return (f.has_subnormals ? 1 : 0) - f.bias;
}
__device__ __forceinline__ u64 sign_mask(const Format& f) {
  return f.has_sign ? 1ull << (f.exponent_bits + f.mantissa_bits) : 0ull;
}
__device__ __forceinline__ u64 max_finite_bits(const Format& f) {
  const u64 exponent_ones = (1ull << f.exponent_bits) - 1;
  const u64 mantissa_ones = (1ull << f.mantissa_bits) - 1;
  switch (f.specials) {
    case kIeee: return ((exponent_ones - 1) << f.mantissa_bits) | mantissa_ones;
    case kNanOnlyFn: return (exponent_ones << f.mantissa_bits) | (mantissa_ones - 1);
    case kNoSpecials: return (exponent_ones << f.mantissa_bits) | mantissa_ones;
    default: return exponent_ones - 1;
  }
}
__device__ __forceinline__ u64 nan_bits(const Format& f, bool negative) {
  const u64 sign = (negative && f.has_sign) ? 1ull << (f.exponent_bits + f.mantissa_bits) : 0ull;
  const u64 exponent_ones = (1ull << f.exponent_bits) - 1;
  switch (f.specials) {
    case kIeee: return sign | (exponent_ones << f.mantissa_bits) | (1ull << (f.mantissa_bits - 1));
    case kNanOnlyFn: return sign | (exponent_ones << f.mantissa_bits) | ((1ull << f.mantissa_bits) - 1);
    case kUnsignedNan: return exponent_ones;
    default: return 0ull;
  }
}
__device__ __forceinline__ u64 infinity_bits(const Format& f, bool negative) {
  const u64 sign = negative ? 1ull << (f.exponent_bits + f.mantissa_bits) : 0ull;
  return sign | (((1ull << f.exponent_bits) - 1) << f.mantissa_bits);
}

// ---- Philox4x32-10, as include/tessera/numerics/philox.h ----------------------

__device__ __forceinline__ u32 random_bits32(u64 seed, u64 index) {
  u32 c0 = (u32)index, c1 = (u32)(index >> 32), c2 = 0u, c3 = 0u;
  u32 k0 = (u32)seed, k1 = (u32)(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    const u64 p0 = (u64)0xD2511F53u * c0;
    const u64 p1 = (u64)0xCD9E8D57u * c2;
    const u32 n0 = (u32)(p1 >> 32) ^ c1 ^ k0;
    const u32 n1 = (u32)p1;
    const u32 n2 = (u32)(p0 >> 32) ^ c3 ^ k1;
    const u32 n3 = (u32)p0;
    c0 = n0;
    c1 = n1;
    c2 = n2;
    c3 = n3;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return c0;
}

// ---- exact encode ----------------------------------------------------------------

// Whether to round the magnitude up, given the discarded fraction scaled by
// 2^64 and the kept integer's parity.
__device__ __forceinline__ bool round_up(u64 fraction64, bool kept_is_odd, int rounding, u64 seed, u64 index) {
  if (rounding == kNearestEven) {
    const u64 half = 1ull << 63;
    return fraction64 > half || (fraction64 == half && kept_is_odd);
  }
  if (rounding == kTowardZero) return false;
  // Stochastic: add 32 random bits below the kept bits and keep the carry.
  return (fraction64 >> 32) + (u64)random_bits32(seed, index) > 0xFFFFFFFFull;
}

__device__ __forceinline__ u64 overflow_encoding(const Format& f, bool negative, bool from_infinity, int rounding,
                                                 int overflow) {
  const u64 sign = negative ? sign_mask(f) : 0ull;
  // IEEE 754: rounding toward zero never turns a finite value into infinity.
  const bool saturate =
      overflow == kSaturate || f.specials == kNoSpecials || (rounding == kTowardZero && !from_infinity);
  if (saturate) return sign | max_finite_bits(f);
  if (f.specials == kIeee) return infinity_bits(f, negative);
  return nan_bits(f, negative);
}

__device__ __forceinline__ u64 encode_float(double x, const Format& f, int rounding, int overflow, u64 seed,
                                            u64 index) {
  const u64 raw = (u64)__double_as_longlong(x);
  const bool negative = (raw >> 63) != 0;
  const int biased = (int)((raw >> 52) & 0x7FF);
  const u64 fraction_bits = raw & ((1ull << 52) - 1);
  const int m = f.mantissa_bits;
  const u64 sign = negative ? sign_mask(f) : 0ull;
  const bool is_zero = biased == 0 && fraction_bits == 0;
  if (biased == 0x7FF && fraction_bits != 0) return f.specials != kNoSpecials ? nan_bits(f, negative) : 0ull;
  if (!f.has_sign && (negative || is_zero)) return nan_bits(f, false);  // e8m0: no zero, no sign
  if (biased == 0x7FF) return overflow_encoding(f, negative, true, rounding, overflow);
  if (is_zero) return sign;

  // |x| = significand * 2^(binary_exponent - 53), significand in [2^52, 2^53).
  u64 significand;
  int binary_exponent;
  if (biased != 0) {
    significand = fraction_bits | (1ull << 52);
    binary_exponent = biased - 1022;
  } else {  // a subnormal double: normalize
    const int s = __clzll((i64)fraction_bits) - 11;
    significand = fraction_bits << s;
    binary_exponent = -1021 - s;
  }
  int exponent = binary_exponent - 1 > min_exponent(f) ? binary_exponent - 1 : min_exponent(f);
  const int shift = (exponent - m) - (binary_exponent - 53);

  u64 kept = 0, discarded64 = 0;
  if (shift <= 0) {
    kept = significand << -shift;
  } else if (shift < 64) {
    kept = significand >> shift;
    discarded64 = significand << (64 - shift);
  } else if (shift < 128) {
    discarded64 = significand >> (shift - 64);
  }
  if (round_up(discarded64, (kept & 1) != 0, rounding, seed, index)) ++kept;

  if (kept == 0) return f.has_sign ? sign : 0ull;  // e8m0 clamps to its smallest encoding
  if (kept >> (m + 1)) {                           // rounding carried into the next binade
    kept >>= 1;
    ++exponent;
  }
  const u64 implicit_one = 1ull << m;
  u64 magnitude;
  if (kept < implicit_one) {
    magnitude = kept;
  } else {
    magnitude = ((u64)(exponent + f.bias) << m) | (kept - implicit_one);
  }
  if (magnitude > max_finite_bits(f)) return overflow_encoding(f, negative, false, rounding, overflow);
  return sign | magnitude;
}

__device__ __forceinline__ u64 encode_integer(double x, int dtype, int rounding, u64 seed, u64 index) {
  const u64 raw = (u64)__double_as_longlong(x);
  const bool is_nan = ((raw >> 52) & 0x7FF) == 0x7FF && (raw & ((1ull << 52) - 1)) != 0;
  if (dtype == kBool) return x != 0.0 ? 1ull : 0ull;  // NaN is truthy
  if (is_nan) return 0ull;
  const int bits = integer_bits(dtype);
  const bool is_signed = integer_signed(dtype);
  const double two_pow = (double)(1ull << (is_signed ? bits - 1 : (bits == 64 ? 63 : bits)));
  const double lo = is_signed ? -two_pow : 0.0;
  const double hi_exclusive = (!is_signed && bits == 64) ? 2.0 * two_pow : two_pow;
  const double magnitude = __longlong_as_double((i64)(raw & 0x7FFFFFFFFFFFFFFFull));
  double whole = magnitude;
  if (magnitude < 9007199254740992.0) {   // 2^53
    const u64 integral = (u64)magnitude;  // truncation is floor for a magnitude
    whole = (double)integral;
    const double frac = magnitude - whole;                    // exact
    const u64 frac64 = (u64)(frac * 18446744073709551616.0);  // frac * 2^64 < 2^64
    if (frac != 0.0 && round_up(frac64, (integral & 1) != 0, rounding, seed, index)) whole += 1.0;
  }
  if (raw >> 63) whole = -whole;
  i64 value;
  if (whole < lo) {
    value = (i64)lo;
  } else if (whole >= hi_exclusive) {
    value = bits == 64 ? 0x7FFFFFFFFFFFFFFFll : (i64)hi_exclusive - 1;
  } else {
    value = (i64)whole;
  }
  const u64 mask = bits == 64 ? ~0ull : (1ull << bits) - 1;
  return (u64)value & mask;
}

// The encoding of x in `dtype` (the low storage bits of the result), with the
// given rounding and overflow; `index` selects the stochastic rounding bits.
__device__ __forceinline__ u64 encode(double x, int dtype, int rounding = kNearestEven, int overflow = kInfNan,
                                      u64 seed = 0, u64 index = 0) {
  if (dtype == kFp64) return (u64)__double_as_longlong(x);
  if (is_float_dtype(dtype)) return encode_float(x, format_of(dtype), rounding, overflow, seed, index);
  return encode_integer(x, dtype, rounding, seed, index);
}

// ---- decode -------------------------------------------------------------------------

__device__ __forceinline__ bool is_nan_encoding(u64 bits, int dtype) {
  if (!is_float_dtype(dtype)) return false;
  const Format f = format_of(dtype);
  const u64 body = bits & ((1ull << (f.exponent_bits + f.mantissa_bits)) - 1);
  const u64 exponent_ones = (1ull << f.exponent_bits) - 1;
  const u64 exponent = body >> f.mantissa_bits;
  const u64 mantissa = body & ((1ull << f.mantissa_bits) - 1);
  switch (f.specials) {
    case kIeee: return exponent == exponent_ones && mantissa != 0;
    case kNanOnlyFn: return exponent == exponent_ones && mantissa == (1ull << f.mantissa_bits) - 1;
    case kUnsignedNan: return body == exponent_ones;
    default: return false;
  }
}

// 2^k as a double, for k in the normal range [-1022, 1023] (exact).
__device__ __forceinline__ double pow2(int k) {
  return __longlong_as_double((i64)((u64)(k + 1023) << 52));
}

// The value of an encoding; exact for every dtype except int64 beyond 2^53.
__device__ __forceinline__ double decode(u64 bits, int dtype) {
  if (dtype == kFp64) return __longlong_as_double((i64)bits);
  if (!is_float_dtype(dtype)) {
    if (dtype == kBool) return (bits & 0xFF) != 0 ? 1.0 : 0.0;
    const int width = integer_bits(dtype);
    const u64 mask = width == 64 ? ~0ull : (1ull << width) - 1;
    bits &= mask;
    if (integer_signed(dtype) && width < 64 && (bits >> (width - 1)) != 0) return (double)(i64)(bits | ~mask);
    return integer_signed(dtype) ? (double)(i64)bits : (double)bits;
  }
  const Format f = format_of(dtype);
  const int m = f.mantissa_bits;
  const bool negative = f.has_sign && ((bits >> (f.exponent_bits + m)) & 1) != 0;
  if (is_nan_encoding(bits, dtype)) {
    return __longlong_as_double((i64)((negative ? 0xFFF8000000000000ull : 0x7FF8000000000000ull)));
  }
  const u64 exponent = (bits >> m) & ((1ull << f.exponent_bits) - 1);
  const u64 mantissa = bits & ((1ull << m) - 1);
  double magnitude;
  if (f.specials == kIeee && exponent == (1ull << f.exponent_bits) - 1) {
    magnitude = __longlong_as_double(0x7FF0000000000000ll);
  } else if (exponent == 0 && f.has_subnormals) {
    magnitude = (double)mantissa * pow2(min_exponent(f) - m);
  } else {
    magnitude = (double)((1ull << m) | mantissa) * pow2((int)exponent - f.bias - m);
  }
  return negative ? -magnitude : magnitude;
}

// decode of a signed format with subnormals, narrower than float32 and with
// a bias of at most 127 (fp16, fp8, fp6, fp4), in float32 and integer
// operations only: every value is a float32, so it is built from its fields.
// decode() goes through double, which costs FP64 work per element and, in
// fully unrolled tile loops, minutes of NVRTC time per kernel. NaN is the
// quiet NaN with the code's sign, as (float)decode() gives.
template <int ExponentBits, int MantissaBits, int Bias, int Specials>
__device__ __forceinline__ float decode_small_f32(u32 bits) {
  const u32 exponent_ones = (1u << ExponentBits) - 1;
  const u32 mantissa_ones = (1u << MantissaBits) - 1;
  const u32 sign = ((bits >> (ExponentBits + MantissaBits)) & 1u) << 31;
  const u32 exponent = (bits >> MantissaBits) & exponent_ones;
  const u32 mantissa = bits & mantissa_ones;
  // 2^(1 - Bias - MantissaBits), the subnormal quantum (a normal float32 for these formats).
  const float quantum = __uint_as_float((u32)(127 + 1 - Bias - MantissaBits) << 23);
  u32 magnitude = exponent == 0 ? __float_as_uint((float)mantissa * quantum)
                                : ((exponent + (u32)(127 - Bias)) << 23) | (mantissa << (23 - MantissaBits));
  if (Specials == kIeee && exponent == exponent_ones) magnitude = mantissa != 0 ? 0x7FC00000u : 0x7F800000u;
  if (Specials == kNanOnlyFn && exponent == exponent_ones && mantissa == mantissa_ones) magnitude = 0x7FC00000u;
  return __uint_as_float(sign | magnitude);
}

// As decode, narrowed to float32 (exact for every format of 32 bits or fewer
// except int32).
__device__ __forceinline__ float decode_f32(u64 bits, int dtype) {
  switch (dtype) {
    case kFp32: return __uint_as_float((u32)bits);
    case kBf16: return __uint_as_float((u32)(bits & 0xFFFF) << 16);
    case kFp16: return decode_small_f32<5, 10, 15, kIeee>((u32)bits);
    case kFp8E4m3: return decode_small_f32<4, 3, 7, kNanOnlyFn>((u32)bits);
    case kFp8E5m2: return decode_small_f32<5, 2, 15, kIeee>((u32)bits);
    case kFp6E2m3: return decode_small_f32<2, 3, 1, kNoSpecials>((u32)bits);
    case kFp6E3m2: return decode_small_f32<3, 2, 3, kNoSpecials>((u32)bits);
    case kFp4E2m1: return decode_small_f32<2, 1, 1, kNoSpecials>((u32)bits);
    default: return (float)decode(bits, dtype);
  }
}

// ---- float32 round-to-nearest-even fast path ------------------------------------------

// The host's vectorized float32 -> small float path (src/numerics/bulk_convert.cpp):
// normal results round by integer addition on the float32 bits, subnormal
// ones by one float addition against a power of two whose ulp is the target's
// subnormal quantum (the hardware's round-to-nearest-even does the rounding).
// For formats with a sign, subnormals, fewer than 23 mantissa bits and a bias
// of at most 127: fp16, bf16, fp8_e4m3, fp8_e5m2, fp6_*, fp4_e2m1.
template <int ExponentBits, int MantissaBits, int Bias, int Specials, bool Saturate>
__device__ __forceinline__ u32 encode_f32_rne(float x) {
  const int kShift = 23 - MantissaBits;
  const u32 kRebias = (u32)(127 - Bias) << 23;
  const u32 kMinNormal = (u32)(127 + 1 - Bias) << 23;
  const u32 kMagicBits = (u32)(127 + 1 - Bias - MantissaBits + 23) << 23;
  const Format f{ExponentBits, MantissaBits, Bias, true, true, Specials};
  const u32 max_bits = (u32)max_finite_bits(f);
  const u32 nan_code = Specials == kNoSpecials ? 0u : (u32)nan_bits(f, false);
  const u32 overflow_bits = (Saturate || Specials == kNoSpecials) ? max_bits
                            : Specials == kIeee                   ? (u32)infinity_bits(f, false)
                                                                  : nan_code;
  const u32 u = __float_as_uint(x);
  const u32 a = u & 0x7FFFFFFFu;
  const u32 normal = (a - kRebias + ((1u << (kShift - 1)) - 1) + ((a >> kShift) & 1u)) >> kShift;
  const u32 subnormal = __float_as_uint(__fadd_rn(__uint_as_float(a), __uint_as_float(kMagicBits))) - kMagicBits;
  u32 magnitude = a < kMinNormal ? subnormal : normal;
  magnitude = magnitude > max_bits ? overflow_bits : magnitude;
  const bool is_nan = a > 0x7F800000u;
  magnitude = is_nan ? nan_code : magnitude;
  const bool keep_sign = !(is_nan && Specials == kNoSpecials);
  return (((u >> 31) & (u32)keep_sign) << (ExponentBits + MantissaBits)) | magnitude;
}

// `converted`, x's 16-bit bf16/fp16 code, except that a NaN x becomes the
// format's quiet NaN (`quiet_nan`, positive) with x's sign, as encode()
// gives it.
__device__ __forceinline__ u32 with_signed_quiet_nan(float x, unsigned short converted, u32 quiet_nan) {
  const u32 u = __float_as_uint(x);
  return (u & 0x7FFFFFFFu) > 0x7F800000u ? ((u >> 16) & 0x8000u) | quiet_nan : (u32)converted;
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
// float32 -> bf16 / fp16 in one instruction (cvt.rn: round to nearest even,
// overflow to infinity, subnormals kept), for the non-saturating IEEE modes;
// NaN takes with_signed_quiet_nan (the instruction returns a NaN of its
// own). The same bits as encode_f32_rne; tests/gpu/gpu_numerics_test.cpp
// checks them against the host on the GPU.
__device__ __forceinline__ unsigned short cvt_rn_bf16(float x) {
  unsigned short h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(x));
  return h;
}
__device__ __forceinline__ unsigned short cvt_rn_fp16(float x) {
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x));
  return h;
}
__device__ __forceinline__ u32 encode_f32_bf16_cvt(float x) { return with_signed_quiet_nan(x, cvt_rn_bf16(x), 0x7FC0u); }
__device__ __forceinline__ u32 encode_f32_fp16_cvt(float x) { return with_signed_quiet_nan(x, cvt_rn_fp16(x), 0x7E00u); }
#endif

// The fast path by dtype code; other dtypes take the exact encode() (which
// agrees with the fast path wherever both apply).
__device__ __forceinline__ u32 encode_f32_nearest_even(float x, int dtype, bool saturate) {
  switch (dtype) {
    case kBf16:
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
      if (!saturate) return encode_f32_bf16_cvt(x);
#endif
      return saturate ? encode_f32_rne<8, 7, 127, kIeee, true>(x) : encode_f32_rne<8, 7, 127, kIeee, false>(x);
    case kFp16:
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
      if (!saturate) return encode_f32_fp16_cvt(x);
#endif
      return saturate ? encode_f32_rne<5, 10, 15, kIeee, true>(x) : encode_f32_rne<5, 10, 15, kIeee, false>(x);
    case kFp8E4m3:
      return saturate ? encode_f32_rne<4, 3, 7, kNanOnlyFn, true>(x) : encode_f32_rne<4, 3, 7, kNanOnlyFn, false>(x);
    case kFp8E5m2:
      return saturate ? encode_f32_rne<5, 2, 15, kIeee, true>(x) : encode_f32_rne<5, 2, 15, kIeee, false>(x);
    case kFp6E2m3: return encode_f32_rne<2, 3, 1, kNoSpecials, true>(x);
    case kFp6E3m2: return encode_f32_rne<3, 2, 3, kNoSpecials, true>(x);
    case kFp4E2m1: return encode_f32_rne<2, 1, 1, kNoSpecials, true>(x);
    case kFp32: return __float_as_uint(x);
    default: return (u32)encode((double)x, dtype, kNearestEven, saturate ? kSaturate : kInfNan);
  }
}

// encode_f32_nearest_even (non-saturating) of a value that is not NaN: for
// bf16 and fp16 the conversion instruction alone, whose result for every
// other value is encode_f32_rne's.
__device__ __forceinline__ u32 encode_f32_nearest_even_not_nan(float x, int dtype) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if (dtype == kBf16) return cvt_rn_bf16(x);
  if (dtype == kFp16) return cvt_rn_fp16(x);
#endif
  return encode_f32_nearest_even(x, dtype, false);
}

}  // namespace device
}  // namespace tessera
