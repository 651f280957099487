// The dtype table, aliases and parsing.
#include "tessera/numerics/dtype.h"

#include <array>
#include <cmath>
#include <vector>

#include "tessera/support/error.h"

namespace tessera {
namespace {

constexpr FloatFormat kNoFloat{0, 0, 0, false, false, SpecialValues::None};

constexpr std::array<DTypeInfo, 19> kTable{{
    {DType::fp64, "fp64", 64, true, true, {11, 52, 1023, true, true, SpecialValues::Ieee}},
    {DType::fp32, "fp32", 32, true, true, {8, 23, 127, true, true, SpecialValues::Ieee}},
    {DType::fp16, "fp16", 16, true, true, {5, 10, 15, true, true, SpecialValues::Ieee}},
    {DType::bf16, "bf16", 16, true, true, {8, 7, 127, true, true, SpecialValues::Ieee}},
    {DType::fp8_e4m3, "fp8_e4m3", 8, true, true, {4, 3, 7, true, true, SpecialValues::NanOnlyFn}},
    {DType::fp8_e5m2, "fp8_e5m2", 8, true, true, {5, 2, 15, true, true, SpecialValues::Ieee}},
    {DType::fp6_e2m3, "fp6_e2m3", 6, true, true, {2, 3, 1, true, true, SpecialValues::None}},
    {DType::fp6_e3m2, "fp6_e3m2", 6, true, true, {3, 2, 3, true, true, SpecialValues::None}},
    {DType::fp4_e2m1, "fp4_e2m1", 4, true, true, {2, 1, 1, true, true, SpecialValues::None}},
    {DType::e8m0, "e8m0", 8, true, false, {8, 0, 127, false, false, SpecialValues::UnsignedNan}},
    {DType::int4, "int4", 4, false, true, kNoFloat},
    {DType::int8, "int8", 8, false, true, kNoFloat},
    {DType::int16, "int16", 16, false, true, kNoFloat},
    {DType::int32, "int32", 32, false, true, kNoFloat},
    {DType::int64, "int64", 64, false, true, kNoFloat},
    {DType::uint8, "uint8", 8, false, false, kNoFloat},
    {DType::bool_, "bool", 8, false, false, kNoFloat},
    {DType::complex64, "complex64", 64, false, true, kNoFloat},
    {DType::complex128, "complex128", 128, false, true, kNoFloat},
}};

constexpr std::array<DType, 19> kAll{
    DType::fp64,     DType::fp32,     DType::fp16,     DType::bf16,  DType::fp8_e4m3, DType::fp8_e5m2,
    DType::fp6_e2m3, DType::fp6_e3m2, DType::fp4_e2m1, DType::e8m0,  DType::int4,     DType::int8,
    DType::int16,    DType::int32,    DType::int64,    DType::uint8, DType::bool_,    DType::complex64,
    DType::complex128};

struct Alias {
  std::string_view text;
  DType dtype;
};
constexpr std::array<Alias, 7> kAliases{{{"f64", DType::fp64},
                                         {"f32", DType::fp32},
                                         {"f16", DType::fp16},
                                         {"float32", DType::fp32},
                                         {"float16", DType::fp16},
                                         {"half", DType::fp16},
                                         {"bfloat16", DType::bf16}}};

}  // namespace

std::uint64_t FloatFormat::max_finite_bits() const {
  const std::uint64_t exponent_ones = (std::uint64_t{1} << exponent_bits) - 1;
  const std::uint64_t mantissa_ones = (std::uint64_t{1} << mantissa_bits) - 1;
  switch (specials) {
    case SpecialValues::Ieee: return ((exponent_ones - 1) << mantissa_bits) | mantissa_ones;
    case SpecialValues::NanOnlyFn: return (exponent_ones << mantissa_bits) | (mantissa_ones - 1);
    case SpecialValues::None: return (exponent_ones << mantissa_bits) | mantissa_ones;
    case SpecialValues::UnsignedNan: return exponent_ones - 1;
  }
  return 0;
}

double FloatFormat::max_finite() const {
  const std::uint64_t bits = max_finite_bits();
  const auto exponent = static_cast<int>(bits >> mantissa_bits);
  const auto mantissa = static_cast<double>(bits & ((std::uint64_t{1} << mantissa_bits) - 1));
  return std::ldexp(1.0 + mantissa / std::ldexp(1.0, mantissa_bits), exponent - bias);
}

std::uint64_t FloatFormat::nan_bits(bool negative) const {
  const std::uint64_t sign = (negative && has_sign) ? std::uint64_t{1} << (exponent_bits + mantissa_bits) : 0;
  const std::uint64_t exponent_ones = (std::uint64_t{1} << exponent_bits) - 1;
  switch (specials) {
    case SpecialValues::Ieee:
      return sign | (exponent_ones << mantissa_bits) | (std::uint64_t{1} << (mantissa_bits - 1));
    case SpecialValues::NanOnlyFn:
      return sign | (exponent_ones << mantissa_bits) | ((std::uint64_t{1} << mantissa_bits) - 1);
    case SpecialValues::UnsignedNan: return exponent_ones;
    case SpecialValues::None: break;
  }
  return 0;
}

std::uint64_t FloatFormat::infinity_bits(bool negative) const {
  const std::uint64_t sign = negative ? std::uint64_t{1} << (exponent_bits + mantissa_bits) : 0;
  return sign | (((std::uint64_t{1} << exponent_bits) - 1) << mantissa_bits);
}

const DTypeInfo& info(DType dtype) {
  return kTable[static_cast<std::size_t>(dtype)];
}
std::string_view name(DType dtype) {
  return info(dtype).name;
}
std::span<const DType> all_dtypes() {
  return kAll;
}

int storage_bytes(DType dtype) {
  const int bits = info(dtype).bits;
  return bits <= 8 ? 1 : bits / 8;
}

DType complex_part(DType dtype) {
  if (dtype == DType::complex64) return DType::fp32;
  if (dtype == DType::complex128) return DType::fp64;
  return dtype;
}

DType complex_of(DType part) {
  if (part == DType::fp32) return DType::complex64;
  if (part == DType::fp64) return DType::complex128;
  raise(ErrorCode::DtypeUnsupported, "complex numbers have fp32 or fp64 parts (complex64, complex128), not " +
                                         std::string(name(part)));
}

DType code_dtype(DType dtype) {
  if (dtype == DType::complex128) {
    raise(ErrorCode::DtypeUnsupported, "complex128 takes 16 bytes per element and has no integer code dtype");
  }
  if (info(dtype).bits < 8 && dtype != DType::bool_) {
    raise(ErrorCode::DtypeUnsupported,
          std::string(name(dtype)) + " is packed below a byte per element and has no integer code dtype");
  }
  switch (storage_bytes(dtype)) {
    case 1: return DType::uint8;
    case 2: return DType::int16;
    case 4: return DType::int32;
    default: return DType::int64;
  }
}

bool try_parse_dtype(std::string_view text, DType& out) {
  for (const DTypeInfo& entry : kTable) {
    if (entry.name == text) {
      out = entry.dtype;
      return true;
    }
  }
  for (const Alias& alias : kAliases) {
    if (alias.text == text) {
      out = alias.dtype;
      return true;
    }
  }
  return false;
}

DType parse_dtype(std::string_view text) {
  DType out{};
  if (try_parse_dtype(text, out)) return out;
  if (text == "tf32") {
    raise(ErrorCode::DtypeNotStorage,
          "'tf32' is a math mode, not a storage dtype: store the data as fp32 and request "
          "math_mode=\"tf32\" on the operation");
  }
  std::vector<std::string_view> names;
  for (const DTypeInfo& entry : kTable) names.push_back(entry.name);
  for (const Alias& alias : kAliases) names.push_back(alias.text);
  std::string message = "unknown dtype '" + std::string(text) + "'";
  const std::string hint = closest_match(text, names);
  // End the sentence either way: without a hint the list used to run on
  // ("unknown dtype 'x' Storage dtypes are: ...").
  message += hint.empty() ? std::string(".") : "; did you mean '" + hint + "'?";
  message += " Storage dtypes are: ";
  for (std::size_t i = 0; i < kTable.size(); ++i) message += (i ? ", " : "") + std::string(kTable[i].name);
  raise(ErrorCode::DtypeUnknown, message);
}

}  // namespace tessera
