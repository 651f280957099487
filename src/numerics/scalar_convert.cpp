// Exact conversion of one value to and from every storage dtype.
//
// encode_value works on the value's exact binary expansion (a 53-bit integer
// significand and a power of two) with integer arithmetic, so every rounding
// decision is made on exact quantities: no intermediate float rounding can
// leak into the result. This is the reference path; bulk_convert.cpp holds
// the vectorized paths, which are tested against this one exhaustively.
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "tessera/numerics/convert.h"
#include "tessera/numerics/philox.h"
#include "tessera/support/error.h"

namespace tessera {
namespace {

std::uint64_t sign_mask(const FloatFormat& f) {
  return f.has_sign ? std::uint64_t{1} << (f.exponent_bits + f.mantissa_bits) : 0;
}

// Encoding of a value too large for the format (or of an infinity).
std::uint64_t overflow_encoding(const FloatFormat& f, bool negative, bool from_infinity, const EncodeOptions& o) {
  const std::uint64_t sign = negative ? sign_mask(f) : 0;
  const bool saturate = o.overflow == Overflow::saturate || f.specials == SpecialValues::None ||
                        // IEEE 754: rounding toward zero never turns a finite value into infinity.
                        (o.rounding == Rounding::toward_zero && !from_infinity);
  if (saturate) return sign | f.max_finite_bits();
  if (f.has_infinity()) return f.infinity_bits(negative);
  return f.nan_bits(negative);
}

// Decides whether to round the magnitude up, given the discarded fraction as
// a 64-bit fixed-point number (fraction * 2^64) and the kept integer's parity.
bool round_up(std::uint64_t fraction64, bool kept_is_odd, const EncodeOptions& o, std::uint64_t index) {
  switch (o.rounding) {
    case Rounding::nearest_even: {
      constexpr std::uint64_t half = std::uint64_t{1} << 63;
      return fraction64 > half || (fraction64 == half && kept_is_odd);
    }
    case Rounding::toward_zero: return false;
    case Rounding::stochastic: {
      // Add 32 random bits below the kept bits and keep the carry: rounds up
      // with probability floor(fraction * 2^32) / 2^32.
      const std::uint64_t top = fraction64 >> 32;
      return top + random_bits32(o.seed, o.first_index + index) > 0xFFFFFFFFull;
    }
  }
  return false;
}

std::uint64_t encode_float(double x, const FloatFormat& f, const EncodeOptions& o, std::uint64_t index) {
  const bool negative = std::signbit(x);
  const int m = f.mantissa_bits;
  const std::uint64_t sign = negative ? sign_mask(f) : 0;
  if (std::isnan(x)) return f.has_nan() ? f.nan_bits(negative) : 0;     // NaN -> +0 where no NaN exists
  if (!f.has_sign && (negative || x == 0.0)) return f.nan_bits(false);  // e8m0 has no zero, no sign
  if (std::isinf(x)) return overflow_encoding(f, negative, true, o);
  if (x == 0.0) return sign;

  // |x| = significand * 2^(binary_exponent - 53), significand in [2^52, 2^53).
  int binary_exponent = 0;
  const double fraction = std::frexp(std::fabs(x), &binary_exponent);
  const auto significand = static_cast<std::uint64_t>(std::ldexp(fraction, 53));
  int exponent = std::max(binary_exponent - 1, f.min_exponent());
  // Number of low significand bits below the target's quantum 2^(exponent - m).
  const int shift = (exponent - m) - (binary_exponent - 53);

  std::uint64_t kept = 0;
  std::uint64_t discarded64 = 0;  // discarded fraction, scaled by 2^64
  if (shift <= 0) {
    kept = significand << -shift;
  } else if (shift < 64) {
    kept = significand >> shift;
    discarded64 = significand << (64 - shift);
  } else if (shift < 128) {
    discarded64 = significand >> (shift - 64);  // below 2^-11: never a tie
  }
  if (round_up(discarded64, (kept & 1) != 0, o, index)) ++kept;

  if (kept == 0) {
    if (f.has_sign) return sign;
    return 0;  // e8m0: smaller than 2^-127 clamps to the smallest encoding
  }
  if (kept >> (m + 1)) {  // rounding carried into the next binade
    kept >>= 1;
    ++exponent;
  }
  const std::uint64_t implicit_one = std::uint64_t{1} << m;
  std::uint64_t magnitude = 0;
  if (kept < implicit_one) {
    magnitude = kept;  // subnormal: exponent field 0
  } else {
    const auto biased = static_cast<std::uint64_t>(exponent + f.bias);
    magnitude = (biased << m) | (kept - implicit_one);
  }
  if (magnitude > f.max_finite_bits()) return overflow_encoding(f, negative, false, o);
  return sign | magnitude;
}

std::uint64_t encode_integer(double x, const DTypeInfo& info, const EncodeOptions& o, std::uint64_t index) {
  if (info.dtype == DType::bool_) return x != 0.0 ? 1 : 0;  // NaN is truthy, as in C and numpy
  if (std::isnan(x)) return 0;
  const int bits = info.bits;
  const double lo = info.is_signed ? -std::ldexp(1.0, bits - 1) : 0.0;
  const double hi_exclusive = info.is_signed ? std::ldexp(1.0, bits - 1) : std::ldexp(1.0, bits);
  // Round the magnitude, as encode_float does, then restore the sign.
  // (Rounding x itself via x - floor(x) was wrong for tiny negative x:
  // -2^-60 - floor(-2^-60) = 1 - 2^-60 rounds to 1.0, whose 2^64 scaling
  // overflowed uint64, so -2^-60 encoded as -1 instead of 0. |x| - floor(|x|)
  // is exact for every |x| < 2^53, so the fraction is always below 1.)
  const double magnitude = std::fabs(x);
  double whole = std::floor(magnitude);
  if (magnitude < std::ldexp(1.0, 53)) {
    const double frac = magnitude - whole;                                 // exact
    const auto frac64 = static_cast<std::uint64_t>(std::ldexp(frac, 64));  // frac < 1: fits
    const bool odd = std::fmod(whole, 2.0) != 0.0;
    if (frac != 0.0 && round_up(frac64, odd, o, index)) whole += 1.0;  // toward_zero never rounds up
  }
  if (std::signbit(x)) whole = -whole;
  // Integers always saturate; there is no integer infinity.
  std::int64_t value = 0;
  if (whole < lo) {
    value = static_cast<std::int64_t>(lo);
  } else if (whole >= hi_exclusive) {
    // hi_exclusive - 1 is not representable as a double for 64-bit types.
    value = bits == 64 ? std::numeric_limits<std::int64_t>::max() : static_cast<std::int64_t>(hi_exclusive) - 1;
  } else {
    value = static_cast<std::int64_t>(whole);
  }
  const std::uint64_t mask = bits == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << bits) - 1;
  return static_cast<std::uint64_t>(value) & mask;
}

}  // namespace

std::uint64_t encode_value(double value, DType dtype, const EncodeOptions& options, std::uint64_t index) {
  const DTypeInfo& entry = info(dtype);
  if (dtype == DType::fp64) return std::bit_cast<std::uint64_t>(value);
  if (entry.is_float) return encode_float(value, entry.format, options, index);
  return encode_integer(value, entry, options, index);
}

bool is_nan_encoding(std::uint64_t bits, DType dtype) {
  const DTypeInfo& entry = info(dtype);
  if (!entry.is_float) return false;
  const FloatFormat& f = entry.format;
  const std::uint64_t field_mask = (std::uint64_t{1} << (f.exponent_bits + f.mantissa_bits)) - 1;
  const std::uint64_t body = bits & field_mask;
  const std::uint64_t exponent_ones = (std::uint64_t{1} << f.exponent_bits) - 1;
  const std::uint64_t exponent = body >> f.mantissa_bits;
  const std::uint64_t mantissa = body & ((std::uint64_t{1} << f.mantissa_bits) - 1);
  switch (f.specials) {
    case SpecialValues::Ieee: return exponent == exponent_ones && mantissa != 0;
    case SpecialValues::NanOnlyFn:
      return exponent == exponent_ones && mantissa == (std::uint64_t{1} << f.mantissa_bits) - 1;
    case SpecialValues::UnsignedNan: return body == exponent_ones;
    case SpecialValues::None: return false;
  }
  return false;
}

double decode_value(std::uint64_t bits, DType dtype) {
  const DTypeInfo& entry = info(dtype);
  if (dtype == DType::fp64) return std::bit_cast<double>(bits);
  if (!entry.is_float) {
    if (dtype == DType::bool_) return (bits & 0xFF) != 0 ? 1.0 : 0.0;
    const int width = entry.bits;
    const std::uint64_t mask = width == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << width) - 1;
    bits &= mask;
    if (entry.is_signed && width < 64 && (bits >> (width - 1)) != 0) {
      return static_cast<double>(static_cast<std::int64_t>(bits | ~mask));
    }
    return entry.is_signed ? static_cast<double>(static_cast<std::int64_t>(bits)) : static_cast<double>(bits);
  }
  const FloatFormat& f = entry.format;
  const int m = f.mantissa_bits;
  const bool negative = f.has_sign && ((bits >> (f.exponent_bits + m)) & 1) != 0;
  if (is_nan_encoding(bits, dtype)) {
    // NaN keeps its sign bit, as IEEE conversions do.
    return negative ? -std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::quiet_NaN();
  }
  const std::uint64_t exponent = (bits >> m) & ((std::uint64_t{1} << f.exponent_bits) - 1);
  const std::uint64_t mantissa = bits & ((std::uint64_t{1} << m) - 1);
  double magnitude = 0.0;
  if (f.has_infinity() && exponent == (std::uint64_t{1} << f.exponent_bits) - 1) {
    magnitude = std::numeric_limits<double>::infinity();
  } else if (exponent == 0 && f.has_subnormals) {
    magnitude = std::ldexp(static_cast<double>(mantissa), f.min_exponent() - m);
  } else {
    magnitude =
        std::ldexp(static_cast<double>((std::uint64_t{1} << m) | mantissa), static_cast<int>(exponent) - f.bias - m);
  }
  return negative ? -magnitude : magnitude;
}

std::string_view rounding_name(Rounding rounding) {
  switch (rounding) {
    case Rounding::nearest_even: return "nearest_even";
    case Rounding::stochastic: return "stochastic";
    case Rounding::toward_zero: return "toward_zero";
  }
  return "nearest_even";
}

std::string_view overflow_name(Overflow overflow) {
  return overflow == Overflow::saturate ? "saturate" : "inf_nan";
}

Rounding parse_rounding(std::string_view text) {
  for (Rounding r : {Rounding::nearest_even, Rounding::stochastic, Rounding::toward_zero}) {
    if (rounding_name(r) == text) return r;
  }
  raise(ErrorCode::ArgumentInvalid,
        "unknown rounding '" + std::string(text) + "'; expected one of nearest_even, stochastic, toward_zero");
}

Overflow parse_overflow(std::string_view text) {
  if (text == "inf_nan") return Overflow::inf_nan;
  if (text == "saturate") return Overflow::saturate;
  raise(ErrorCode::ArgumentInvalid,
        "unknown overflow mode '" + std::string(text) + "'; expected one of inf_nan, saturate");
}

}  // namespace tessera
