// Bulk conversion of arrays, with vectorizable fast paths.
//
// The common case, float32 rounded to nearest even into a float format of 16
// bits or fewer, runs a branch-free loop that the compiler turns into SIMD
// code: normal results round by integer addition on the float32 bits, and
// subnormal results by one float addition against a "magic" power of two
// whose ulp equals the target's subnormal quantum (the FPU's own
// round-to-nearest-even then does the rounding). Decoding formats of 16 bits
// or fewer is a table lookup. Every other case goes through the exact scalar
// path; the tests check both paths agree on every input they can enumerate.
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "tessera/numerics/convert.h"
#include "tessera/support/error.h"

namespace tessera {
namespace {

// Compiled twice, for AVX2 and for baseline x86-64; the loader picks the
// version the running CPU supports.
#if defined(__x86_64__) && !defined(__clang__)
#define TESSERA_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define TESSERA_VECTOR_CLONES
#endif

template <int ExponentBits, int MantissaBits, int Bias, SpecialValues Specials, bool Saturate, typename Out>
TESSERA_VECTOR_CLONES void encode_f32_nearest_even(const float* in, std::size_t n, Out* out) {
  static_assert(MantissaBits < 23 && Bias <= 127);
  constexpr int kShift = 23 - MantissaBits;
  constexpr std::uint32_t kRebias = static_cast<std::uint32_t>(127 - Bias) << 23;
  constexpr std::uint32_t kMinNormal = static_cast<std::uint32_t>(127 + 1 - Bias) << 23;
  constexpr std::uint32_t kMagicBits = static_cast<std::uint32_t>(127 + 1 - Bias - MantissaBits + 23) << 23;
  constexpr FloatFormat kFormat{ExponentBits, MantissaBits, Bias, true, true, Specials};
  constexpr std::uint32_t kSignShift = ExponentBits + MantissaBits;
  const auto max_bits = static_cast<std::uint32_t>(kFormat.max_finite_bits());
  const std::uint32_t nan_bits =
      Specials == SpecialValues::None ? 0u : static_cast<std::uint32_t>(kFormat.nan_bits(false));
  const std::uint32_t overflow_bits = (Saturate || Specials == SpecialValues::None) ? max_bits
                                      : Specials == SpecialValues::Ieee
                                          ? static_cast<std::uint32_t>(kFormat.infinity_bits(false))
                                          : nan_bits;
  const float magic = std::bit_cast<float>(kMagicBits);
  // Selections are written as bit masks (all ones or all zeros) so the loop
  // has no control flow and vectorizes.
  auto select = [](bool take_first, std::uint32_t first, std::uint32_t second) {
    const std::uint32_t mask = 0u - static_cast<std::uint32_t>(take_first);
    return (first & mask) | (second & ~mask);
  };
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t u = std::bit_cast<std::uint32_t>(in[i]);
    const std::uint32_t a = u & 0x7FFFFFFFu;
    const std::uint32_t normal = (a - kRebias + ((1u << (kShift - 1)) - 1) + ((a >> kShift) & 1u)) >> kShift;
    const std::uint32_t subnormal = std::bit_cast<std::uint32_t>(std::bit_cast<float>(a) + magic) - kMagicBits;
    std::uint32_t magnitude = select(a < kMinNormal, subnormal, normal);
    magnitude = select(magnitude > max_bits, overflow_bits, magnitude);
    const bool is_nan = a > 0x7F800000u;
    magnitude = select(is_nan, nan_bits, magnitude);
    // Where no NaN exists, NaN becomes +0.
    const bool keep_sign = !(is_nan && Specials == SpecialValues::None);
    const std::uint32_t sign = ((u >> 31) & static_cast<std::uint32_t>(keep_sign)) << kSignShift;
    out[i] = static_cast<Out>(sign | magnitude);
  }
}

template <int E, int M, int B, SpecialValues S, typename Out>
void encode_fast(const float* in, std::size_t n, Out* out, Overflow overflow) {
  if (overflow == Overflow::saturate) {
    encode_f32_nearest_even<E, M, B, S, true>(in, n, out);
  } else {
    encode_f32_nearest_even<E, M, B, S, false>(in, n, out);
  }
}

// The vectorized nearest-even encoder of float32 values into `dtype`, or
// null where there is none.
using FastEncoder = void (*)(const float* in, std::size_t n, void* out, Overflow overflow);
template <int E, int M, int B, SpecialValues S, typename Out>
void encode_into(const float* in, std::size_t n, void* out, Overflow overflow) {
  encode_fast<E, M, B, S>(in, n, static_cast<Out*>(out), overflow);
}
FastEncoder fast_encoder(DType dtype) {
  using SV = SpecialValues;
  switch (dtype) {
    case DType::bf16: return &encode_into<8, 7, 127, SV::Ieee, std::uint16_t>;
    case DType::fp16: return &encode_into<5, 10, 15, SV::Ieee, std::uint16_t>;
    case DType::fp8_e4m3: return &encode_into<4, 3, 7, SV::NanOnlyFn, std::uint8_t>;
    case DType::fp8_e5m2: return &encode_into<5, 2, 15, SV::Ieee, std::uint8_t>;
    case DType::fp6_e2m3: return &encode_into<2, 3, 1, SV::None, std::uint8_t>;
    case DType::fp6_e3m2: return &encode_into<3, 2, 3, SV::None, std::uint8_t>;
    case DType::fp4_e2m1: return &encode_into<2, 1, 1, SV::None, std::uint8_t>;
    default: return nullptr;
  }
}

// Returns true when a fast path handled the conversion.
bool try_encode_fast(const float* in, std::size_t n, DType dtype, void* out, const EncodeOptions& o) {
  if (o.rounding != Rounding::nearest_even) return false;
  if (dtype == DType::fp32) {
    std::memcpy(out, in, n * sizeof(float));
    return true;
  }
  const FastEncoder encoder = fast_encoder(dtype);
  if (encoder == nullptr) return false;
  encoder(in, n, out, o.overflow);
  return true;
}

template <typename In>
void encode_scalar_loop(const In* in, std::size_t n, DType dtype, void* out, const EncodeOptions& o) {
  const int bytes = storage_bytes(dtype);
  auto* bytes_out = static_cast<unsigned char*>(out);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t bits = encode_value(static_cast<double>(in[i]), dtype, o, i);
    switch (bytes) {
      case 1: bytes_out[i] = static_cast<std::uint8_t>(bits); break;
      case 2: reinterpret_cast<std::uint16_t*>(bytes_out)[i] = static_cast<std::uint16_t>(bits); break;
      case 4: reinterpret_cast<std::uint32_t*>(bytes_out)[i] = static_cast<std::uint32_t>(bits); break;
      default: reinterpret_cast<std::uint64_t*>(bytes_out)[i] = bits; break;
    }
  }
}

// Decode tables for every format of 16 bits or fewer, built once on first use.
const std::vector<float>& decode_table(DType dtype) {
  static std::array<std::unique_ptr<std::vector<float>>, 17> tables;
  static std::array<std::once_flag, 17> once;
  const auto slot = static_cast<std::size_t>(dtype);
  std::call_once(once[slot], [&] {
    const std::size_t size = std::size_t{1} << std::min(16, bit_width(dtype));
    auto table = std::make_unique<std::vector<float>>(size);
    for (std::size_t bits = 0; bits < size; ++bits) {
      (*table)[bits] = static_cast<float>(decode_value(bits, dtype));
    }
    tables[slot] = std::move(table);
  });
  return *tables[slot];
}

std::uint64_t load_bits(const void* bits, std::size_t i, int bytes) {
  const auto* base = static_cast<const unsigned char*>(bits);
  switch (bytes) {
    case 1: return base[i];
    case 2: return reinterpret_cast<const std::uint16_t*>(base)[i];
    case 4: return reinterpret_cast<const std::uint32_t*>(base)[i];
    default: return reinterpret_cast<const std::uint64_t*>(base)[i];
  }
}

}  // namespace

void encode(const float* values, std::size_t n, DType dtype, void* out, const EncodeOptions& options) {
  if (try_encode_fast(values, n, dtype, out, options)) return;
  encode_scalar_loop(values, n, dtype, out, options);
}

void encode(const double* values, std::size_t n, DType dtype, void* out, const EncodeOptions& options) {
  if (dtype == DType::fp64) {
    std::memcpy(out, values, n * sizeof(double));
    return;
  }
  // Nearest even into 16 bits or fewer: each double rounded to odd at float
  // (exactly what rounding the double gives, convert.h), then the float32
  // encoder, a block at a time.
  if (const FastEncoder encoder = fast_encoder(dtype); encoder && options.rounding == Rounding::nearest_even) {
    constexpr std::size_t kBlock = 1024;
    float block[kBlock];
    const std::size_t bytes = static_cast<std::size_t>(storage_bytes(dtype));
    for (std::size_t at = 0; at < n; at += kBlock) {
      const std::size_t count = std::min(kBlock, n - at);
      for (std::size_t i = 0; i < count; ++i) block[i] = rounded_to_odd(values[at + i]);
      encoder(block, count, static_cast<unsigned char*>(out) + at * bytes, options.overflow);
    }
    return;
  }
  encode_scalar_loop(values, n, dtype, out, options);
}

void decode(const void* bits, std::size_t n, DType dtype, float* out) {
  if (dtype == DType::fp32) {
    std::memcpy(out, bits, n * sizeof(float));
    return;
  }
  if (dtype == DType::bf16) {
    const auto* in = static_cast<const std::uint16_t*>(bits);
    for (std::size_t i = 0; i < n; ++i) out[i] = std::bit_cast<float>(static_cast<std::uint32_t>(in[i]) << 16);
    return;
  }
  const int width = bit_width(dtype);
  const int bytes = storage_bytes(dtype);
  if (width <= 16) {
    const std::vector<float>& table = decode_table(dtype);
    const std::uint64_t mask = table.size() - 1;
    if (bytes == 1) {
      const auto* in = static_cast<const std::uint8_t*>(bits);
      for (std::size_t i = 0; i < n; ++i) out[i] = table[in[i] & mask];
    } else {
      const auto* in = static_cast<const std::uint16_t*>(bits);
      for (std::size_t i = 0; i < n; ++i) out[i] = table[in[i]];
    }
    return;
  }
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<float>(decode_value(load_bits(bits, i, bytes), dtype));
}

void decode(const void* bits, std::size_t n, DType dtype, double* out) {
  const int bytes = storage_bytes(dtype);
  for (std::size_t i = 0; i < n; ++i) out[i] = decode_value(load_bits(bits, i, bytes), dtype);
}

void pack_int4(const std::uint8_t* codes, std::size_t n, std::uint8_t* packed) {
  for (std::size_t i = 0; i < n / 2; ++i) {
    packed[i] = static_cast<std::uint8_t>((codes[2 * i] & 0x0F) | ((codes[2 * i + 1] & 0x0F) << 4));
  }
  if (n % 2) packed[n / 2] = codes[n - 1] & 0x0F;
}

void unpack_int4(const std::uint8_t* packed, std::size_t n, std::uint8_t* codes) {
  for (std::size_t i = 0; i < n; ++i) {
    codes[i] = (i % 2 == 0) ? (packed[i / 2] & 0x0F) : (packed[i / 2] >> 4);
  }
}

void unpack_codes(DType dtype, const std::uint8_t* packed, std::size_t n, std::uint8_t* codes) {
  const int b = bit_width(dtype);
  if (b == 4) return unpack_int4(packed, n, codes);
  const std::uint32_t mask = (1u << b) - 1;
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t bit = i * static_cast<std::size_t>(b);
    const std::size_t byte = bit / 8;
    const unsigned shift = static_cast<unsigned>(bit % 8);
    // A field spans at most two bytes; read the second only when it does.
    std::uint32_t window = packed[byte];
    if (shift + static_cast<unsigned>(b) > 8) window |= static_cast<std::uint32_t>(packed[byte + 1]) << 8;
    codes[i] = static_cast<std::uint8_t>((window >> shift) & mask);
  }
}

void pack_codes(DType dtype, const std::uint8_t* codes, std::size_t n, std::uint8_t* packed) {
  const int b = bit_width(dtype);
  if (b == 4) return pack_int4(codes, n, packed);
  const std::size_t bytes = (n * static_cast<std::size_t>(b) + 7) / 8;
  std::fill(packed, packed + bytes, std::uint8_t{0});
  const std::uint32_t mask = (1u << b) - 1;
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t bit = i * static_cast<std::size_t>(b);
    const std::uint32_t field = (codes[i] & mask) << (bit % 8);
    packed[bit / 8] = static_cast<std::uint8_t>(packed[bit / 8] | (field & 0xFF));
    if (field > 0xFF) packed[bit / 8 + 1] = static_cast<std::uint8_t>(packed[bit / 8 + 1] | (field >> 8));
  }
}

}  // namespace tessera
