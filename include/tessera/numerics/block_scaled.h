// Block-scaled formats: OCP Microscaling (MX v1.0) and NVFP4.
//
// MX: each block of 32 consecutive elements shares one e8m0 scale
// X = 2^(floor(log2(amax)) - emax_elem), where amax is the block's largest
// magnitude and emax_elem the element format's largest exponent; elements
// are encoded as value / X, saturating. A block holding NaN or infinity gets
// the NaN scale (0xFF) and decodes to NaN throughout.
//
// NVFP4: fp4_e2m1 elements, one fp8_e4m3 scale per 16 elements and one fp32
// scale per tensor, chosen so the largest block scale lands at the top of
// fp8_e4m3's range (tensor_scale = amax / (6 * 448)).
#pragma once

#include <cstddef>
#include <cstdint>

#include "tessera/numerics/convert.h"
#include "tessera/numerics/dtype.h"

namespace tessera {

inline constexpr std::size_t kMxBlock = 32;
inline constexpr std::size_t kNvfp4Block = 16;

// Largest unbiased exponent of a finite element value (8 for fp8_e4m3, whose
// largest value 448 = 1.75 * 2^8). Raises DtypeError for non-MX element types.
int mx_element_emax(DType element);

// Blocks run along rows of `row_length` values (0 means one row of all n
// values); a row whose length is not a multiple of the block ends with a
// short block. A row-major array blocked along its last axis passes that
// axis's extent. scale_count() is the number of scales such a layout has.
std::size_t scale_count(std::size_t n, std::size_t block, std::size_t row_length = 0);

// Quantizes n values. codes: n element encodings (one per byte); scales:
// scale_count(n, block, row_length) e8m0 encodings. `rounding` applies to the
// elements; they always saturate.
void quantize_mx(const float* values, std::size_t n, DType element, std::uint8_t* codes, std::uint8_t* scales,
                 std::size_t block = kMxBlock, Rounding rounding = Rounding::nearest_even, std::uint64_t seed = 0,
                 std::size_t row_length = 0);
void dequantize_mx(const std::uint8_t* codes, const std::uint8_t* scales, std::size_t n, DType element, float* out,
                   std::size_t block = kMxBlock, std::size_t row_length = 0);

// NVFP4 over n values: codes (n fp4 codes, one per byte), scales
// (scale_count(n, 16, row_length) fp8_e4m3 encodings); returns the fp32
// tensor scale, computed over all n values.
float quantize_nvfp4(const float* values, std::size_t n, std::uint8_t* codes, std::uint8_t* scales,
                     std::size_t row_length = 0);
void dequantize_nvfp4(const std::uint8_t* codes, const std::uint8_t* scales, float tensor_scale, std::size_t n,
                      float* out, std::size_t row_length = 0);

}  // namespace tessera
