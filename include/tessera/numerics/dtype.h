// Storage dtypes: the table of every format Tessera stores, with its layout.
//
// A DType names how one element is stored. Floating formats are described by
// a FloatFormat (exponent and mantissa widths, bias, and which special values
// exist); integer formats by width and signedness. Accumulation types,
// rounding and loss scaling are not dtypes: they belong to a NumericsPolicy.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace tessera {

enum class DType : std::uint8_t {
  fp64,
  fp32,
  fp16,
  bf16,
  fp8_e4m3,
  fp8_e5m2,
  fp6_e2m3,
  fp6_e3m2,
  fp4_e2m1,
  e8m0,
  int4,
  int8,
  int16,
  int32,
  int64,
  uint8,
  bool_,
  // Complex storage: a pair (real, imaginary) of fp32 / fp64 parts, real
  // part first, as numpy lays them out. Not a float format (is_float is
  // false): kernels read them through complex_part() and the complex value
  // helpers of Tensor, and ops that take no complex operands say so.
  complex64,
  complex128,
};

// How a floating format spells NaN and infinity.
enum class SpecialValues : std::uint8_t {
  Ieee,         // all-ones exponent: infinity (mantissa 0) or NaN (mantissa != 0)
  NanOnlyFn,    // no infinity; the single NaN is S.1111.111 (fp8_e4m3)
  None,         // every encoding is a finite number (fp6, fp4)
  UnsignedNan,  // no sign, no zero; all-ones is NaN (e8m0)
};

struct FloatFormat {
  int exponent_bits;
  int mantissa_bits;
  int bias;
  bool has_sign;
  bool has_subnormals;  // false only for e8m0, whose field 0 means 2^-bias
  SpecialValues specials;

  int total_bits() const { return (has_sign ? 1 : 0) + exponent_bits + mantissa_bits; }
  // Unbiased exponent of the smallest normal number.
  int min_exponent() const { return (has_subnormals ? 1 : 0) - bias; }
  bool has_infinity() const { return specials == SpecialValues::Ieee; }
  bool has_nan() const { return specials != SpecialValues::None; }
  // Encoding (without sign) of the largest finite magnitude.
  std::uint64_t max_finite_bits() const;
  double max_finite() const;
  // Encoding of the canonical quiet NaN with the given sign; only if has_nan().
  std::uint64_t nan_bits(bool negative) const;
  std::uint64_t infinity_bits(bool negative) const;  // only if has_infinity()
};

struct DTypeInfo {
  DType dtype;
  std::string_view name;  // canonical name, as printed
  int bits;               // storage width of one element
  bool is_float;
  bool is_signed;
  FloatFormat format;  // meaningful only when is_float
};

const DTypeInfo& info(DType dtype);
std::string_view name(DType dtype);
inline bool is_float(DType dtype) {
  return info(dtype).is_float;
}
inline int bit_width(DType dtype) {
  return info(dtype).bits;
}
inline bool is_complex(DType dtype) {
  return dtype == DType::complex64 || dtype == DType::complex128;
}
// The dtype of each part of a complex dtype (fp32 for complex64, fp64 for
// complex128); a real dtype is its own part.
DType complex_part(DType dtype);
// The complex dtype whose parts are `part` (fp32 -> complex64, fp64 ->
// complex128). Other parts have no complex dtype: DtypeError.
DType complex_of(DType part);

// Formats narrower than a byte (int4, fp4_e2m1, fp6_*), which tensors store
// bit-packed; bool takes a byte.
inline bool is_packed(DType dtype) {
  return bit_width(dtype) < 8 && dtype != DType::bool_;
}
// Bytes one element occupies in unpacked storage (sub-byte formats take a byte).
int storage_bytes(DType dtype);
// The integer dtype whose storage has the same bytes as `dtype`'s (uint8,
// int16, int32 or int64): moving ops copy codes through it, so NaN payloads
// and every other encoding survive a copy. Packed sub-byte formats have none:
// DtypeError.
DType code_dtype(DType dtype);

// Every dtype, in declaration order.
std::span<const DType> all_dtypes();

// Canonical name or alias ("f32", "bfloat16", ...) to DType. Unknown names
// and math modes such as "tf32" raise DtypeError saying what to write instead.
DType parse_dtype(std::string_view text);
// Same, but returns false instead of raising.
bool try_parse_dtype(std::string_view text, DType& out);

}  // namespace tessera
