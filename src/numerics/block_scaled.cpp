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

// Calls visit(start, count, scale_index) for every block of the layout.
template <typename Visit>
void for_each_block(std::size_t n, std::size_t block, std::size_t row_length, Visit visit) {
  // Empty input has no blocks. (Without this, n == 0 with the default
  // row_length == 0 evaluated n % 0: undefined behaviour, SIGFPE at -O0.)
  if (n == 0) return;
  if (row_length == 0) row_length = n;
  if (n % row_length != 0) {
    raise(ErrorCode::ShapeMismatch, "block-scaled layout: " + std::to_string(n) + " values do not form whole rows of " +
                                        std::to_string(row_length));
  }
  std::size_t scale = 0;
  for (std::size_t row = 0; row < n; row += row_length) {
    for (std::size_t start = row; start < row + row_length; start += block) {
      visit(start, std::min(block, row + row_length - start), scale++);
    }
  }
}

}  // namespace

std::size_t scale_count(std::size_t n, std::size_t block, std::size_t row_length) {
  check_block(block);
  if (n == 0) return 0;
  if (row_length == 0) row_length = n;
  return (n / row_length) * ((row_length + block - 1) / block);
}

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
      raise(ErrorCode::DtypeUnsupported,
            "MX element type must be one of fp8_e4m3, fp8_e5m2, fp6_e2m3, "
            "fp6_e3m2, fp4_e2m1; got '" +
                std::string(name(element)) + "'");
  }
}

void quantize_mx(const float* values, std::size_t n, DType element, std::uint8_t* codes, std::uint8_t* scales,
                 std::size_t block, Rounding rounding, std::uint64_t seed, std::size_t row_length) {
  check_block(block);
  const int emax = mx_element_emax(element);
  EncodeOptions options;
  options.rounding = rounding;
  options.overflow = Overflow::saturate;
  options.seed = seed;
  for_each_block(n, block, row_length, [&](std::size_t start, std::size_t count, std::size_t b) {
    if (block_has_special(values + start, count)) {
      scales[b] = kE8m0Nan;
      std::fill_n(codes + start, count, std::uint8_t{0});
      return;
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
  });
}

void dequantize_mx(const std::uint8_t* codes, const std::uint8_t* scales, std::size_t n, DType element, float* out,
                   std::size_t block, std::size_t row_length) {
  check_block(block);
  mx_element_emax(element);  // validates the element type
  for_each_block(n, block, row_length, [&](std::size_t start, std::size_t count, std::size_t b) {
    const std::uint8_t scale = scales[b];
    for (std::size_t i = start; i < start + count; ++i) {
      out[i] = scale == kE8m0Nan
                   ? std::numeric_limits<float>::quiet_NaN()
                   : static_cast<float>(std::ldexp(decode_value(codes[i], element), static_cast<int>(scale) - 127));
    }
  });
}

float quantize_nvfp4(const float* values, std::size_t n, std::uint8_t* codes, std::uint8_t* scales,
                     std::size_t row_length) {
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
  for_each_block(n, kNvfp4Block, row_length, [&](std::size_t start, std::size_t count, std::size_t b) {
    if (block_has_special(values + start, count)) {
      scales[b] = e4m3_nan;
      std::fill_n(codes + start, count, std::uint8_t{0});
      return;
    }
    const double amax = block_amax(values + start, count);
    const double wanted = amax / kFp4Max / static_cast<double>(tensor_scale);
    scales[b] = static_cast<std::uint8_t>(encode_value(wanted, DType::fp8_e4m3, scale_options));
    const double block_scale = decode_value(scales[b], DType::fp8_e4m3) * static_cast<double>(tensor_scale);
    for (std::size_t i = 0; i < count; ++i) {
      const double scaled = block_scale == 0.0 ? 0.0 : static_cast<double>(values[start + i]) / block_scale;
      codes[start + i] = static_cast<std::uint8_t>(encode_value(scaled, DType::fp4_e2m1, element_options));
    }
  });
  return tensor_scale;
}

void dequantize_nvfp4(const std::uint8_t* codes, const std::uint8_t* scales, float tensor_scale, std::size_t n,
                      float* out, std::size_t row_length) {
  for_each_block(n, kNvfp4Block, row_length, [&](std::size_t start, std::size_t count, std::size_t b) {
    const double scale = decode_value(scales[b], DType::fp8_e4m3) * static_cast<double>(tensor_scale);
    for (std::size_t i = start; i < start + count; ++i) {
      out[i] = static_cast<float>(decode_value(codes[i], DType::fp4_e2m1) * scale);
    }
  });
}

}  // namespace tessera
