// The device numerics header (src/backends/cuda/device/numerics.cuh) compiled
// for the host with the few CUDA intrinsics it uses mapped to host
// equivalents, and checked bit for bit against the host numerics library. This
// tests the header's logic on every machine; tests/gpu repeats the checks with
// the header compiled by NVRTC and run on a GPU.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "tessera/numerics/convert.h"

// Host stand-ins for the CUDA intrinsics the header uses.
#define __device__
#define __forceinline__ inline
namespace tessera::device {
inline long long __double_as_longlong(double x) {
  return std::bit_cast<long long>(x);
}
inline double __longlong_as_double(long long x) {
  return std::bit_cast<double>(x);
}
inline unsigned __float_as_uint(float x) {
  return std::bit_cast<unsigned>(x);
}
inline float __uint_as_float(unsigned x) {
  return std::bit_cast<float>(x);
}
inline int __clzll(long long x) {
  return std::countl_zero(static_cast<unsigned long long>(x));
}
// The host's SSE addition rounds to nearest even, as __fadd_rn does.
inline float __fadd_rn(float a, float b) {
  return a + b;
}
}  // namespace tessera::device
#include "../../src/backends/cuda/device/numerics.cuh"
#undef __device__
#undef __forceinline__

namespace tessera {
namespace {

const DType kFormats[] = {DType::fp32,     DType::fp16,     DType::bf16,     DType::fp8_e4m3,
                          DType::fp8_e5m2, DType::fp6_e2m3, DType::fp6_e3m2, DType::fp4_e2m1,
                          DType::e8m0,     DType::int4,     DType::int8,     DType::int16,
                          DType::int32,    DType::int64,    DType::uint8,    DType::bool_};

TEST(CudaNumericsHeader, DecodeMatchesHostOnEveryCode) {
  for (DType d : kFormats) {
    const int bits = std::min(bit_width(d), 16);
    std::mt19937_64 rng(1);
    for (std::uint64_t i = 0; i < (std::uint64_t{1} << bits); ++i) {
      // Formats wider than 16 bits: random codes instead of all of them.
      const std::uint64_t code = bit_width(d) > 16 ? rng() >> (64 - bit_width(d)) : i;
      const double host = decode_value(code, d);
      const double dev = device::decode(code, static_cast<int>(d));
      ASSERT_EQ(std::bit_cast<std::uint64_t>(dev), std::bit_cast<std::uint64_t>(host)) << name(d) << " code " << code;
    }
  }
}

std::vector<double> inputs() {
  std::vector<double> v = {0.0,
                           -0.0,
                           1.0,
                           -1.5,
                           2.5,
                           65504.0,
                           65520.0,
                           448.0,
                           464.0,
                           57344.0,
                           6.0,
                           7.5,
                           std::numeric_limits<double>::infinity(),
                           -std::numeric_limits<double>::infinity(),
                           std::numeric_limits<double>::quiet_NaN(),
                           -std::numeric_limits<double>::quiet_NaN(),
                           std::numeric_limits<double>::denorm_min(),
                           std::numeric_limits<double>::max(),
                           0x1p-127,
                           0x1p-149,
                           0x1p-150,
                           0x1.8p-150,
                           127.5,
                           -128.5,
                           9.3e18,
                           -9.3e18};
  std::mt19937_64 rng(2);
  for (int i = 0; i < 20000; ++i)
    v.push_back(static_cast<double>(std::bit_cast<float>(static_cast<std::uint32_t>(rng()))));
  std::uniform_int_distribution<int> exponent(-160, 160);
  for (int i = 0; i < 20000; ++i) {
    const std::uint64_t fraction = rng() & ((std::uint64_t{1} << 52) - 1);
    const auto biased = static_cast<std::uint64_t>(exponent(rng) + 1023);
    v.push_back(std::bit_cast<double>((rng() & (std::uint64_t{1} << 63)) | (biased << 52) | fraction));
  }
  // Midpoints of fp8/fp6/fp4 neighbours, where the rounding modes differ.
  for (DType d : {DType::fp8_e4m3, DType::fp8_e5m2, DType::fp6_e2m3, DType::fp4_e2m1}) {
    for (std::uint64_t c = 0; c + 1 < (std::uint64_t{1} << bit_width(d)); ++c) {
      v.push_back(0.5 * (decode_value(c, d) + decode_value(c + 1, d)));
    }
  }
  return v;
}

TEST(CudaNumericsHeader, EncodeMatchesHostInEveryMode) {
  const auto xs = inputs();
  for (DType d : kFormats) {
    for (Rounding r : {Rounding::nearest_even, Rounding::toward_zero, Rounding::stochastic}) {
      for (Overflow o : {Overflow::inf_nan, Overflow::saturate}) {
        const EncodeOptions opts{.rounding = r, .overflow = o, .seed = 0xABCDEF12345ull, .first_index = 31};
        for (std::size_t i = 0; i < xs.size(); ++i) {
          const std::uint64_t host = encode_value(xs[i], d, opts, i);
          const std::uint64_t dev = device::encode(xs[i], static_cast<int>(d), static_cast<int>(r), static_cast<int>(o),
                                                   opts.seed, opts.first_index + i);
          ASSERT_EQ(dev, host) << name(d) << " " << rounding_name(r) << " " << overflow_name(o) << " x=" << xs[i];
        }
      }
    }
  }
}

TEST(CudaNumericsHeader, Float32FastPathMatchesHostBulkPath) {
  std::vector<float> xs;
  for (double x : inputs()) xs.push_back(static_cast<float>(x));
  for (DType d : {DType::fp32, DType::fp16, DType::bf16, DType::fp8_e4m3, DType::fp8_e5m2, DType::fp6_e2m3,
                  DType::fp6_e3m2, DType::fp4_e2m1, DType::e8m0, DType::int8}) {
    for (Overflow o : {Overflow::inf_nan, Overflow::saturate}) {
      const int bytes = storage_bytes(d);
      std::vector<std::uint8_t> host(xs.size() * static_cast<std::size_t>(bytes));
      encode(xs.data(), xs.size(), d, host.data(), {.rounding = Rounding::nearest_even, .overflow = o});
      for (std::size_t i = 0; i < xs.size(); ++i) {
        std::uint32_t want = 0;
        std::memcpy(&want, host.data() + i * bytes, static_cast<std::size_t>(bytes));
        ASSERT_EQ(device::encode_f32_nearest_even(xs[i], static_cast<int>(d), o == Overflow::saturate), want)
            << name(d) << " " << overflow_name(o) << " x=" << xs[i];
      }
    }
  }
}

}  // namespace
}  // namespace tessera
