// Small helpers shared by the conversion tests.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <vector>

#include "tessera/numerics/convert.h"

namespace tessera_test {

inline float from_bits(std::uint32_t u) {
  return std::bit_cast<float>(u);
}
inline std::uint32_t to_bits(float f) {
  return std::bit_cast<std::uint32_t>(f);
}

inline tessera::EncodeOptions opts(tessera::Rounding rounding, tessera::Overflow overflow = tessera::Overflow::inf_nan,
                                   std::uint64_t seed = 0) {
  tessera::EncodeOptions o;
  o.rounding = rounding;
  o.overflow = overflow;
  o.seed = seed;
  return o;
}

// Bulk encode through the float32 entry point, widened to one uint64 per element.
inline std::vector<std::uint64_t> bulk_encode(const std::vector<float>& xs, tessera::DType dtype,
                                              const tessera::EncodeOptions& o) {
  const auto bytes = static_cast<std::size_t>(tessera::storage_bytes(dtype));
  std::vector<unsigned char> raw(xs.size() * bytes);
  tessera::encode(xs.data(), xs.size(), dtype, raw.data(), o);
  std::vector<std::uint64_t> out(xs.size(), 0);
  for (std::size_t i = 0; i < xs.size(); ++i) std::memcpy(&out[i], raw.data() + i * bytes, bytes);
  return out;
}

// Every float32 bit pattern i * stride (i = 0, 1, ... below 2^32), visited in
// chunks of a million.
template <typename Visit>
void strided_sweep(std::uint64_t stride, Visit visit) {
  std::vector<float> chunk;
  chunk.reserve(1 << 20);
  for (std::uint64_t u = 0; u < (std::uint64_t{1} << 32); u += stride) {
    chunk.push_back(from_bits(static_cast<std::uint32_t>(u)));
    if (chunk.size() == chunk.capacity()) {
      visit(chunk);
      chunk.clear();
    }
  }
  visit(chunk);
}

}  // namespace tessera_test
