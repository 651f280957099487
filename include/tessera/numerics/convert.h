// Conversions between real numbers and every storage dtype, bit-exact.
//
// encode() turns values into encodings (the raw bits of each element, one
// element per slot: uint8 for formats of 8 bits or fewer, uint16 for 16-bit
// formats, and so on); decode() turns encodings back into values. Rounding
// and overflow behaviour follow docs/guide/numerics.md, which tabulates the
// choices per format (signed zeros, subnormals, NaN, saturation).
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tessera/numerics/dtype.h"

namespace tessera {

enum class Rounding : std::uint8_t { nearest_even, stochastic, toward_zero };
enum class Overflow : std::uint8_t {
  inf_nan,   // IEEE behaviour: to infinity, or to NaN where the format has no infinity
  saturate,  // to the largest finite value of the right sign
};

std::string_view rounding_name(Rounding rounding);
std::string_view overflow_name(Overflow overflow);
// "nearest_even" | "stochastic" | "toward_zero"; other text raises ArgumentError.
Rounding parse_rounding(std::string_view text);
// "inf_nan" | "saturate"; other text raises ArgumentError.
Overflow parse_overflow(std::string_view text);

struct EncodeOptions {
  Rounding rounding = Rounding::nearest_even;
  Overflow overflow = Overflow::inf_nan;
  // Stochastic rounding draws 32 bits from Philox(seed, first_index + i) for
  // element i: the same seed and index give the same bits.
  std::uint64_t seed = 0;
  std::uint64_t first_index = 0;
};

// x rounded to float toward zero, its last bit set when that dropped
// anything ("round to odd"; NaN stays NaN with its sign; beyond the float
// range, the largest float). Rounding this float to nearest even at 22 or
// fewer significant bits gives what rounding x would: the CPU kernels reach
// bf16 and fp16 this way, and bulk encode() from double every format of 16
// bits or fewer.
// Branch-free, so loops over it vectorize: one step toward zero is the
// bits minus one (sign and magnitude; infinity -> the largest float).
inline float rounded_to_odd(double x) {
  const float f = static_cast<float>(x);
  const double back = static_cast<double>(f);
  std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
  bits -= static_cast<std::uint32_t>(std::fabs(back) > std::fabs(x));
  bits |= static_cast<std::uint32_t>(back != x);
  return std::bit_cast<float>(bits);
}

// One value. `index` selects the random bits for stochastic rounding.
std::uint64_t encode_value(double value, DType dtype, const EncodeOptions& options = {}, std::uint64_t index = 0);
double decode_value(std::uint64_t bits, DType dtype);
bool is_nan_encoding(std::uint64_t bits, DType dtype);

// Bulk conversion. `out` holds n elements of storage_bytes(dtype) each.
// Round-to-nearest-even into formats of 16 bits or fewer takes vectorized
// paths, from double through rounded_to_odd; everything else goes through
// encode_value.
void encode(const float* values, std::size_t n, DType dtype, void* out, const EncodeOptions& options = {});
void encode(const double* values, std::size_t n, DType dtype, void* out, const EncodeOptions& options = {});
// Decoding to float32 is exact for every dtype of 32 bits or fewer except
// int32; the double overload is exact for everything except int64 values
// beyond 2^53, which round to the nearest double.
void decode(const void* bits, std::size_t n, DType dtype, float* out);
void decode(const void* bits, std::size_t n, DType dtype, double* out);

// int4 packing: two signed nibbles per byte, element 2i in the low nibble of
// byte i. `codes` hold one nibble (0..15) per byte, as encode(..., int4) writes.
void pack_int4(const std::uint8_t* codes, std::size_t n, std::uint8_t* packed);
void unpack_int4(const std::uint8_t* packed, std::size_t n, std::uint8_t* codes);
// Sub-byte float codes (fp4) pack the same way.
inline std::size_t packed_int4_bytes(std::size_t n) {
  return (n + 1) / 2;
}

// Any packed sub-byte format (bit_width(dtype) < 8: int4, fp4_e2m1, fp6_*):
// element i occupies bits [i*w, (i+1)*w) of the little-endian bit stream, as
// tensors store them. `codes` hold one code per byte. pack_codes writes
// ceil(n*w/8) bytes and clears unused high bits of the last one.
void unpack_codes(DType dtype, const std::uint8_t* packed, std::size_t n, std::uint8_t* codes);
void pack_codes(DType dtype, const std::uint8_t* codes, std::size_t n, std::uint8_t* packed);

}  // namespace tessera
