// MX (OCP Microscaling v1.0) and NVFP4 quantization.
#include "tessera/numerics/block_scaled.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tessera/support/error.h"

namespace tessera {
namespace {

constexpr std::uint8_t kE8m0Nan = 0xFF;

bool block_has_special(const float* values, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) {
    if (!std::isfinite(values[i])) return true;
  }
  return false;
}

float block_amax(const float* values, std::size_t count) {
  float amax = 0.0f;
  for (std::size_t i = 0; i < count; ++i) amax = std::max(amax, std::fabs(values[i]));
  return amax;
}

void check_block(std::size_t block) {
  if (block == 0) raise(ErrorCode::ArgumentInvalid, "block size must be positive, got 0");
}

}  // namespace

int mx_element_emax(DType element) {
  switch (element) {
    case DType::fp8_e4m3:
    case DType::fp8_e5m2:
    case DType::fp6_e2m3:
    case DType::fp6_e3m2:
    case DType::fp4_e2m1: {
      int exponent = 0;
      std::frexp(info(element).format.max_finite(), &exponent);
      return exponent - 1;
    }
    default:
      raise(ErrorCode::DtypeUnsupported, "MX element type must be one of fp8_e4m3, fp8_e5m2, fp6_e2m3, "
                                         "fp6_e3m2, fp4_e2m1; got '" + std::string(name(element)) + "'");
  }
}

void quantize_mx(const float* values, std::size_t n, DType element, std::uint8_t* codes, std::uint8_t* scales,
                 std::size_t block, Rounding rounding, std::uint64_t seed) {
  check_block(block);
  const int emax = mx_element_emax(element);
  EncodeOptions options;
  options.rounding = rounding;
  options.overflow = Overflow::saturate;
  options.seed = seed;
  for (std::size_t start = 0, b = 0; start < n; start += block, ++b) {
    const std::size_t count = std::min(block, n - start);
    if (block_has_special(values + start, count)) {
      scales[b] = kE8m0Nan;
      std::fill_n(codes + start, count, std::uint8_t{0});
      continue;
    }
    const float amax = block_amax(values + start, count);
    // floor(log2(amax)) is exact from the float's exponent (ilogb handles
    // subnormals); an all-zero block takes the smallest scale, 2^-127.
    int shared = amax == 0.0f ? -127 : std::ilogb(amax) - emax;
    shared = std::clamp(shared, -127, 127);
    scales[b] = static_cast<std::uint8_t>(shared + 127);
    for (std::size_t i = 0; i < count; ++i) {
      // Scaling by a power of two is exact in double for every float input.
      const double scaled = std::ldexp(static_cast<double>(values[start + i]), -shared);
      codes[start + i] = static_cast<std::uint8_t>(encode_value(scaled, element, options, start + i));
    }
  }
}

void dequantize_mx(const std::uint8_t* codes, const std::uint8_t* scales, std::size_t n, DType element,
                   float* out, std::size_t block) {
  check_block(block);
  mx_element_emax(element);  // validates the element type
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint8_t scale = scales[i / block];
    if (scale == kE8m0Nan) {
      out[i] = std::numeric_limits<float>::quiet_NaN();
      continue;
    }
    out[i] = static_cast<float>(std::ldexp(decode_value(codes[i], element), static_cast<int>(scale) - 127));
  }
}

float quantize_nvfp4(const float* values, std::size_t n, std::uint8_t* codes, std::uint8_t* scales) {
  constexpr double kFp4Max = 6.0;
  constexpr double kE4m3Max = 448.0;
  float tensor_amax = 0.0f;
  for (std::size_t i = 0; i < n; ++i) {
    if (std::isfinite(values[i])) tensor_amax = std::max(tensor_amax, std::fabs(values[i]));
  }
  // An all-zero (or all-special) tensor keeps scale 1 so nothing divides by zero.
  const float tensor_scale =
      tensor_amax == 0.0f ? 1.0f : static_cast<float>(static_cast<double>(tensor_amax) / (kFp4Max * kE4m3Max));
  EncodeOptions scale_options;
  scale_options.overflow = Overflow::saturate;
  EncodeOptions element_options;
  element_options.overflow = Overflow::saturate;
  const std::uint8_t e4m3_nan = static_cast<std::uint8_t>(info(DType::fp8_e4m3).format.nan_bits(false));
  for (std::size_t start = 0, b = 0; start < n; start += kNvfp4Block, ++b) {
    const std::size_t count = std::min(kNvfp4Block, n - start);
    if (block_has_special(values + start, count)) {
      scales[b] = e4m3_nan;
      std::fill_n(codes + start, count, std::uint8_t{0});
      continue;
    }
    const double amax = block_amax(values + start, count);
    const double wanted = amax / kFp4Max / static_cast<double>(tensor_scale);
    scales[b] = static_cast<std::uint8_t>(encode_value(wanted, DType::fp8_e4m3, scale_options));
    const double block_scale = decode_value(scales[b], DType::fp8_e4m3) * static_cast<double>(tensor_scale);
    for (std::size_t i = 0; i < count; ++i) {
      const double scaled = block_scale == 0.0 ? 0.0 : static_cast<double>(values[start + i]) / block_scale;
      codes[start + i] = static_cast<std::uint8_t>(encode_value(scaled, DType::fp4_e2m1, element_options));
    }
  }
  return tensor_scale;
}

void dequantize_nvfp4(const std::uint8_t* codes, const std::uint8_t* scales, float tensor_scale, std::size_t n,
                      float* out) {
  for (std::size_t i = 0; i < n; ++i) {
    const double scale = decode_value(scales[i / kNvfp4Block], DType::fp8_e4m3);
    out[i] = static_cast<float>(decode_value(codes[i], DType::fp4_e2m1) * scale * static_cast<double>(tensor_scale));
  }
}

}  // namespace tessera
