// Host tile library: storage and value types per dtype, conversions, lane arithmetic.
//
// Every dtype has a storage type (how one element sits in a buffer: the
// encoding, one element per slot; sub-byte codes take a byte in shared
// memory) and a value type (how a lane or tile register holds it):
//   fp64 -> double;  every other float format -> float (each decodes exactly);
//   integers -> std::int64_t (within the dtype's range);  bool -> bool.
// Encoding and decoding of the narrow formats call libtessera's converters
// (tessera/numerics/convert.h), so generated code and the reference executor
// share one implementation. fp32 and fp64 take native paths, which are the
// same IEEE operations.
//
// Lane arithmetic on dtype T computes the exact result in double and rounds
// once to T: for + - * / and sqrt of formats up to fp32 the double result
// rounded to T equals the correctly rounded operation (53 >= 2p + 2);
// transcendental functions are evaluated in double, as the reference does.
// Integer arithmetic is exact in 64 bits and saturates at the dtype's range
// (the encoder's rule); division by zero is a fault.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "tessera/numerics/convert.h"
#include "tessera/numerics/elementary.h"
#include "tessera/numerics/narrow_elementary.h"
#include "tessera/numerics/philox.h"
#include "tessera/numerics/trigonometric.h"
#include "tessera_cpu/fault.h"

namespace tessera_cpu {

using tessera::DType;
using tessera::Overflow;
using tessera::Rounding;

constexpr bool is_float_dtype(DType d) {
  return d == DType::fp64 || d == DType::fp32 || d == DType::fp16 || d == DType::bf16 || d == DType::fp8_e4m3 ||
         d == DType::fp8_e5m2 || d == DType::fp6_e2m3 || d == DType::fp6_e3m2 || d == DType::fp4_e2m1 ||
         d == DType::e8m0;
}

template <DType D>
struct Traits {
  static constexpr bool is_float = is_float_dtype(D);
  static constexpr bool is_bool = D == DType::bool_;
  using value =
      std::conditional_t<D == DType::fp64, double,
                         std::conditional_t<is_float, float, std::conditional_t<is_bool, bool, std::int64_t>>>;
  using storage =
      std::conditional_t<
          D == DType::fp64, double,
          std::conditional_t<
              D == DType::fp32, float,
              std::conditional_t<
                  D == DType::fp16 || D == DType::bf16, std::uint16_t,
                  std::conditional_t<
                      D == DType::int8, std::int8_t,
                      std::conditional_t<
                          D == DType::int16, std::int16_t,
                          std::conditional_t<D == DType::int32, std::int32_t,
                                             std::conditional_t<D == DType::int64, std::int64_t, std::uint8_t>>>>>>>;
};
template <DType D>
using value_t = typename Traits<D>::value;
template <DType D>
using storage_t = typename Traits<D>::storage;

// Range of an integer dtype (as int64).
template <DType D>
constexpr std::int64_t int_min() {
  if constexpr (D == DType::int4) return -8;
  if constexpr (D == DType::int8) return -128;
  if constexpr (D == DType::int16) return -32768;
  if constexpr (D == DType::int32) return std::numeric_limits<std::int32_t>::min();
  if constexpr (D == DType::int64) return std::numeric_limits<std::int64_t>::min();
  return 0;  // uint8
}
template <DType D>
constexpr std::int64_t int_max() {
  if constexpr (D == DType::int4) return 7;
  if constexpr (D == DType::int8) return 127;
  if constexpr (D == DType::int16) return 32767;
  if constexpr (D == DType::int32) return std::numeric_limits<std::int32_t>::max();
  if constexpr (D == DType::int64) return std::numeric_limits<std::int64_t>::max();
  return 255;  // uint8
}

// ---- decoding: storage -> value ----

template <DType D>
inline value_t<D> decode(storage_t<D> s) {
  if constexpr (D == DType::fp64 || D == DType::fp32) {
    return s;
  } else if constexpr (D == DType::bool_) {
    return s != 0;
  } else if constexpr (D == DType::int4) {
    return static_cast<std::int64_t>(tessera::decode_value(s & 0xF, D));
  } else if constexpr (!Traits<D>::is_float) {
    return static_cast<std::int64_t>(s);
  } else if constexpr (D == DType::bf16) {
    return std::bit_cast<float>(static_cast<std::uint32_t>(s) << 16);  // bf16 is the top half of fp32
  } else {
    return static_cast<float>(tessera::decode_value(s, D));
  }
}

// n contiguous encodings -> values, through libtessera's vectorized decoder.
template <DType D>
inline void decode_row(const storage_t<D>* in, std::int64_t n, value_t<D>* out) {
  if constexpr (D == DType::fp64 || D == DType::fp32) {
    std::memcpy(out, in, static_cast<std::size_t>(n) * sizeof(value_t<D>));
  } else if constexpr (Traits<D>::is_float) {
    tessera::decode(in, static_cast<std::size_t>(n), D, out);
  } else {
    for (std::int64_t i = 0; i < n; ++i) out[i] = decode<D>(in[i]);
  }
}

// ---- rounding: double -> value of D (one rounding) ----

// A double reaches bf16 or fp16 through tessera::rounded_to_odd (convert.h)
// and the numerics library's scalar fp32 encoder (narrow_elementary.h)
// instead of the generic encoder, whose dozen branches on the format made it
// the most expensive part of a bf16 kernel.
// test_compiled_narrow_rounding_matches_the_encoder (test_conversions.py)
// checks the codes against the generic encoder.
using tessera::rounded_to_odd;

// The narrow_elementary.h format of bf16 and fp16 (the formats with a
// scalar fp32 encoder), or -1.
template <DType D>
constexpr int narrow_format() {
  return D == DType::bf16 ? tessera::elementary::kNarrowBf16 : D == DType::fp16 ? tessera::elementary::kNarrowFp16 : -1;
}

// `r` is nearest_even or toward_zero (stochastic rounding is
// round_stochastic, which needs the element's index).
template <DType D>
inline value_t<D> round_to(double x, Overflow o = Overflow::inf_nan, Rounding r = Rounding::nearest_even) {
  if constexpr (D == DType::fp64) {
    return x;
  } else if constexpr (D == DType::bool_) {
    return x != 0.0;
  } else if constexpr (D == DType::fp32) {
    if (o == Overflow::inf_nan && r == Rounding::nearest_even) return static_cast<float>(x);
    tessera::EncodeOptions opt;
    opt.overflow = o;
    opt.rounding = r;
    return std::bit_cast<float>(static_cast<std::uint32_t>(tessera::encode_value(x, D, opt)));
  } else if constexpr (Traits<D>::is_float) {
    if constexpr (narrow_format<D>() >= 0) {
      if (o == Overflow::inf_nan && r == Rounding::nearest_even) {
        namespace el = tessera::elementary::narrow;
        return el::decode(el::encode(rounded_to_odd(x), narrow_format<D>()), narrow_format<D>());
      }
    }
    tessera::EncodeOptions opt;
    opt.overflow = o;
    opt.rounding = r;
    return static_cast<float>(tessera::decode_value(tessera::encode_value(x, D, opt), D));
  } else {
    // Integers: saturating, NaN -> 0 (the encoder's rule).
    tessera::EncodeOptions opt;
    opt.rounding = r;
    return static_cast<std::int64_t>(tessera::decode_value(tessera::encode_value(x, D, opt), D));
  }
}

// An int64 value saturated to D's range.
template <DType D>
inline std::int64_t saturate(std::int64_t v) {
  return v < int_min<D>() ? int_min<D>() : (v > int_max<D>() ? int_max<D>() : v);
}

// ---- encoding: value (of any dtype) -> storage of D ----

// Stores a value of dtype S into storage of dtype D with overflow mode o.
template <DType D, DType S>
inline storage_t<D> encode(value_t<S> v, Overflow o = Overflow::inf_nan) {
  if constexpr (D == S && D == DType::fp64) {
    return v;
  } else if constexpr (D == S && D == DType::fp32) {
    // The value is already an fp32; only saturation can change it.
    if (o == Overflow::saturate && std::isinf(v)) return round_to<D>(static_cast<double>(v), o);
    return v;
  } else if constexpr (D == DType::bool_) {
    return v ? 1 : 0;
  } else if constexpr (!Traits<D>::is_float && !Traits<S>::is_float) {
    const std::int64_t w = saturate<D>(static_cast<std::int64_t>(v));
    if constexpr (D == DType::int4) return static_cast<std::uint8_t>(w & 0xF);
    return static_cast<storage_t<D>>(w);
  } else if constexpr (D == DType::fp32) {
    return round_to<D>(static_cast<double>(v), o);
  } else if constexpr (D == DType::fp64) {
    return static_cast<double>(v);
  } else {
    if constexpr (narrow_format<D>() >= 0) {
      if (o == Overflow::inf_nan) {
        return static_cast<storage_t<D>>(
            tessera::elementary::narrow::encode(rounded_to_odd(static_cast<double>(v)), narrow_format<D>()));
      }
    }
    tessera::EncodeOptions opt;
    opt.overflow = o;
    return static_cast<storage_t<D>>(tessera::encode_value(static_cast<double>(v), D, opt));
  }
}

// tile.round_stochastic: x rounded to D stochastically with the bits
// Philox(seed, index) draws, as the reference encodes element `index`.
template <DType D>
inline value_t<D> round_stochastic(double x, std::uint64_t seed, std::int64_t index, Overflow o) {
  if constexpr (D == DType::fp64) {
    return x;
  } else {
    tessera::EncodeOptions opt;
    opt.rounding = tessera::Rounding::stochastic;
    opt.overflow = o;
    opt.seed = seed;
    const std::uint64_t bits = tessera::encode_value(x, D, opt, static_cast<std::uint64_t>(index));
    if constexpr (D == DType::fp32) {
      return std::bit_cast<float>(static_cast<std::uint32_t>(bits));
    } else if constexpr (Traits<D>::is_float) {
      return static_cast<float>(tessera::decode_value(bits, D));
    } else {
      return static_cast<std::int64_t>(tessera::decode_value(bits, D));
    }
  }
}

// A value of dtype S converted to dtype D (tile.cast): one rounding.
template <DType D, DType S>
inline value_t<D> convert(value_t<S> v, Overflow o = Overflow::inf_nan, Rounding r = Rounding::nearest_even) {
  if constexpr (D == S) {
    return v;
  } else if constexpr (!Traits<D>::is_float && !Traits<S>::is_float && D != DType::bool_) {
    return saturate<D>(static_cast<std::int64_t>(v));
  } else {
    return round_to<D>(static_cast<double>(v), o, r);
  }
}

// ---- lane arithmetic ----

// NaN-propagating min/max, as the reference's minimum/maximum.
inline double nan_max(double a, double b) {
  return (std::isnan(a) || std::isnan(b)) ? std::numeric_limits<double>::quiet_NaN() : (a > b ? a : b);
}
inline double nan_min(double a, double b) {
  return (std::isnan(a) || std::isnan(b)) ? std::numeric_limits<double>::quiet_NaN() : (a < b ? a : b);
}

// tile.frexp_exp: e with |x| = f * 2^e, f in [0.5, 1); 0 for 0, inf and NaN.
inline std::int64_t frexp_exponent(double x) {
  if (!std::isfinite(x)) return 0;
  int e = 0;
  std::frexp(x, &e);
  return e;
}
// tile.code: the code a store of x (a value of format D, at most 16 bits) writes.
template <DType D>
inline std::int64_t storage_code(float x) {
  return static_cast<std::int64_t>(encode<D, DType::fp32>(x));
}
// tile.ldexp's exponent: any int64, clamped to where the result is already 0 or inf.
inline int clamp_exponent(std::int64_t e) {
  return static_cast<int>(e < -4000 ? -4000 : (e > 4000 ? 4000 : e));
}

// tile.ldexp: x * 2^e. When 2^e is a normal number of x's type the product is
// the correctly rounded x * 2^e, which is what ldexp returns too (also for a
// subnormal result), so one multiply by a power of two built from its bits
// replaces the library call; it inlines, and a loop-invariant scale hoists.
template <class F>
inline F scale_pow2(F x, std::int64_t e) {
  if constexpr (std::is_same_v<F, float>) {
    if (e >= -126 && e <= 127) return x * std::bit_cast<float>(static_cast<std::uint32_t>(e + 127) << 23);
  } else {
    if (e >= -1022 && e <= 1023) return x * std::bit_cast<double>(static_cast<std::uint64_t>(e + 1023) << 52);
  }
  return std::ldexp(x, clamp_exponent(e));
}

// Saturating integer operations (results clamp to D's range).
template <DType D>
inline std::int64_t iadd(std::int64_t a, std::int64_t b) {
  std::int64_t r;
  if (__builtin_add_overflow(a, b, &r)) r = b > 0 ? int_max<DType::int64>() : int_min<DType::int64>();
  return saturate<D>(r);
}
template <DType D>
inline std::int64_t isub(std::int64_t a, std::int64_t b) {
  std::int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) r = b < 0 ? int_max<DType::int64>() : int_min<DType::int64>();
  return saturate<D>(r);
}
template <DType D>
inline std::int64_t imul(std::int64_t a, std::int64_t b) {
  std::int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) r = ((a < 0) != (b < 0)) ? int_min<DType::int64>() : int_max<DType::int64>();
  return saturate<D>(r);
}
// tile.check_range: x, or a fault quoting `what` and x.
inline std::int64_t check_range(std::int64_t x, std::int64_t lo, std::int64_t hi, const char* what) {
  if (x < lo || x > hi) fail(kFaultArgument, "%s (the value is %lld)", what, static_cast<long long>(x));
  return x;
}
inline void check_divisor(std::int64_t b, const char* where) {
  if (b == 0) fail(kFaultArgument, "integer division by zero in %s", where);
}
// C division: truncates toward zero; INT64_MIN / -1 saturates.
template <DType D>
inline std::int64_t idiv(std::int64_t a, std::int64_t b, const char* where) {
  check_divisor(b, where);
  if (b == -1) return isub<D>(0, a);
  return saturate<D>(a / b);
}
// C remainder: the sign of the dividend.
inline std::int64_t irem(std::int64_t a, std::int64_t b, const char* where) {
  check_divisor(b, where);
  if (b == -1) return 0;
  return a % b;
}
// Python floor division: rounds toward negative infinity.
template <DType D>
inline std::int64_t ifloordiv(std::int64_t a, std::int64_t b, const char* where) {
  check_divisor(b, where);
  if (b == -1) return isub<D>(0, a);
  std::int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return saturate<D>(q);
}
// Integer power by squaring, saturating; a negative exponent is a fault.
template <DType D>
inline std::int64_t ipow(std::int64_t a, std::int64_t e, const char* where) {
  if (e < 0) fail(kFaultArgument, "negative integer exponent %lld in %s", static_cast<long long>(e), where);
  std::int64_t r = 1;
  while (e > 0) {
    if (e & 1) r = imul<DType::int64>(r, a);
    e >>= 1;
    if (e > 0) a = imul<DType::int64>(a, a);
  }
  return saturate<D>(r);
}

}  // namespace tessera_cpu
