// Device numerics (src/backends/cuda/device/numerics.cuh, compiled by NVRTC)
// against the host numerics library, bit for bit:
//   - decode of every code of every format of 16 bits or fewer (and random
//     fp32 / int32 codes);
//   - encode of many inputs (random float32 bit patterns, random doubles,
//     the specials, and for each format the midpoints between neighbouring
//     codes and the floats either side of them) into every format, for every
//     rounding (nearest_even, toward_zero, stochastic) and overflow mode;
//   - the float32 round-to-nearest-even fast path against the host's bulk path;
//   - the hardware's own conversions (cvt) where the GPU has them.
// Skipped without a GPU. Prints a summary line per check for scripts/gpu_check.sh.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "tessera/numerics/convert.h"
#include "tessera/runtime/cuda.h"
#include "tessera/support/error.h"

namespace tessera {
namespace {

namespace cu = tessera::cuda;

const char* kSource = R"(
#include "tessera/numerics.cuh"
using namespace tessera::device;

extern "C" __global__ void decode_all(const u64* codes, int n, int dtype, u64* out_bits, u32* out_f32) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  out_bits[i] = (u64)__double_as_longlong(decode(codes[i], dtype));
  out_f32[i] = __float_as_uint(decode_f32(codes[i], dtype));
}

extern "C" __global__ void encode_all(const double* x, int n, int dtype, int rounding, int overflow, u64 seed,
                                      u64 first, u64* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = encode(x[i], dtype, rounding, overflow, seed, first + i);
}

extern "C" __global__ void encode_fast(const float* x, int n, int dtype, int saturate, u32* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = encode_f32_nearest_even(x[i], dtype, saturate != 0);
}

// The GPU's own conversions: 0 f16 rn, 1 f16 rz, 2 bf16 rn, 3 bf16 rz,
// 4 e4m3 rn satfinite, 5 e5m2 rn satfinite.
extern "C" __global__ void hardware_encode(const float* x, int n, u32* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float v = x[i];
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v)); out[6 * i + 0] = h;
  asm("cvt.rz.f16.f32 %0, %1;" : "=h"(h) : "f"(v)); out[6 * i + 1] = h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(v)); out[6 * i + 2] = h;
  asm("cvt.rz.bf16.f32 %0, %1;" : "=h"(h) : "f"(v)); out[6 * i + 3] = h;
#if __CUDA_ARCH__ >= 890
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(h) : "f"(0.0f), "f"(v)); out[6 * i + 4] = h & 0xFF;
  asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(h) : "f"(0.0f), "f"(v)); out[6 * i + 5] = h & 0xFF;
#else
  out[6 * i + 4] = 0xFFFFFFFFu;
  out[6 * i + 5] = 0xFFFFFFFFu;
#endif
}

// 0 f16 -> f32, 1 bf16 -> f32, 2 e4m3 -> f16 -> f32, 3 e5m2 -> f16 -> f32 (exact widenings).
extern "C" __global__ void hardware_decode(const u32* codes, int n, u32* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const unsigned short c = (unsigned short)codes[i];
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(c)); out[4 * i + 0] = __float_as_uint(f);
#if __CUDA_ARCH__ >= 900
  asm("cvt.f32.bf16 %0, %1;" : "=f"(f) : "h"(c)); out[4 * i + 1] = __float_as_uint(f);
#else
  out[4 * i + 1] = (u32)c << 16;
#endif
#if __CUDA_ARCH__ >= 890
  const unsigned short byte = c & 0xFF;
  u32 pair;
  unsigned short half;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(pair) : "h"(byte)); half = (unsigned short)(pair & 0xFFFF);
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(half)); out[4 * i + 2] = __float_as_uint(f);
  asm("cvt.rn.f16x2.e5m2x2 %0, %1;" : "=r"(pair) : "h"(byte)); half = (unsigned short)(pair & 0xFFFF);
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(half)); out[4 * i + 3] = __float_as_uint(f);
#else
  out[4 * i + 2] = 0xFFFFFFFFu;
  out[4 * i + 3] = 0xFFFFFFFFu;
#endif
}
)";

// One device buffer.
struct Buffer {
  std::shared_ptr<void> memory;
  std::size_t bytes;
  explicit Buffer(std::size_t n) : memory(cu::allocate_shared(0, n)), bytes(n) {}
  cu::DevicePtr ptr() const { return reinterpret_cast<cu::DevicePtr>(memory.get()); }
  template <typename T>
  void put(const std::vector<T>& v) {
    cu::copy_to_device(0, ptr(), v.data(), v.size() * sizeof(T));
  }
  template <typename T>
  std::vector<T> get(std::size_t n) const {
    std::vector<T> v(n);
    cu::copy_to_host(0, v.data(), ptr(), n * sizeof(T));
    return v;
  }
  void poison() const {
    const std::vector<unsigned char> junk(bytes, 0xA5);
    cu::copy_to_device(0, ptr(), junk.data(), bytes);
  }
};

class GpuNumerics : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!cu::available()) return;
    module_ = new cu::Module(cu::Module::load(0, cu::compile(kSource, "gpu_numerics.cu", 0)));
  }
  static void TearDownTestSuite() {
    delete module_;
    module_ = nullptr;
  }
  void SetUp() override {
    if (!cu::available()) GTEST_SKIP() << "no CUDA device: " << cu::unavailable_reason();
  }
  static cu::LaunchConfig config(std::size_t n) {
    return {.grid = {static_cast<unsigned>((n + 255) / 256)}, .block = {256}};
  }
  static cu::Module* module_;
};
cu::Module* GpuNumerics::module_ = nullptr;

const std::vector<DType> kSmallFormats = {
    DType::fp16, DType::bf16, DType::fp8_e4m3, DType::fp8_e5m2, DType::fp6_e2m3, DType::fp6_e3m2, DType::fp4_e2m1,
    DType::e8m0, DType::int4, DType::int8,     DType::int16,    DType::uint8,    DType::bool_};

std::vector<double> special_inputs() {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> v = {0.0,
                           -0.0,
                           inf,
                           -inf,
                           std::numeric_limits<double>::quiet_NaN(),
                           -std::numeric_limits<double>::quiet_NaN(),
                           1.0,
                           -1.0,
                           0.5,
                           1.5,
                           2.5,
                           -2.5,
                           std::numeric_limits<float>::max(),
                           -std::numeric_limits<float>::max(),
                           std::numeric_limits<float>::denorm_min(),
                           std::numeric_limits<float>::min(),
                           std::numeric_limits<double>::denorm_min(),
                           std::numeric_limits<double>::max(),
                           1e300,
                           -1e300,
                           65504.0,
                           65520.0,
                           65519.99,
                           448.0,
                           464.0,
                           480.0,
                           57344.0,
                           61440.0,
                           6.0,
                           7.0,
                           7.5,
                           28.0,
                           30.0,
                           32.0,
                           127.5,
                           128.0,
                           -128.5,
                           -129.0,
                           255.5,
                           256.0,
                           32767.5,
                           -32768.5,
                           2147483647.5,
                           9.3e18,
                           -9.3e18,
                           0x1p-127,
                           0x1p-128,
                           0x1p127,
                           0x1p128};
  // float NaNs with payloads, signalling NaN.
  for (std::uint32_t bits : {0x7FC00001u, 0x7F800001u, 0xFFC00000u, 0xFF812345u}) {
    v.push_back(static_cast<double>(std::bit_cast<float>(bits)));
  }
  return v;
}

// Midpoints between neighbouring finite codes of `d`, and the floats either side.
std::vector<double> boundary_inputs(DType d) {
  std::vector<double> finite;
  const int bits = std::min(bit_width(d), 16);
  for (std::uint64_t c = 0; c < (std::uint64_t{1} << bits); ++c) {
    const double v = decode_value(c, d);
    if (std::isfinite(v)) finite.push_back(v);
  }
  std::sort(finite.begin(), finite.end());
  finite.erase(std::unique(finite.begin(), finite.end()), finite.end());
  std::vector<double> out;
  for (std::size_t i = 0; i + 1 < finite.size(); ++i) {
    const double mid = 0.5 * (finite[i] + finite[i + 1]);
    const float f = static_cast<float>(mid);
    out.push_back(mid);
    out.push_back(f);
    out.push_back(std::nextafter(f, std::numeric_limits<float>::infinity()));
    out.push_back(std::nextafter(f, -std::numeric_limits<float>::infinity()));
    out.push_back(finite[i]);
  }
  // Past the largest value: the overflow boundary.
  if (!finite.empty()) {
    for (double scale : {1.0, 1.0625, 1.125, 1.25, 1.5, 2.0, 4.0}) {
      out.push_back(finite.back() * scale);
      out.push_back(finite.front() * scale);
    }
  }
  return out;
}

std::vector<double> random_inputs(std::size_t n, std::uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<double> v;
  v.reserve(n);
  for (std::size_t i = 0; i < n / 2; ++i) {
    v.push_back(static_cast<double>(std::bit_cast<float>(static_cast<std::uint32_t>(rng()))));
  }
  std::uniform_int_distribution<int> exponent(-160, 160);
  for (std::size_t i = n / 2; i < n; ++i) {
    // Random doubles near the float range, with all 52 fraction bits set at random.
    const std::uint64_t fraction = rng() & ((std::uint64_t{1} << 52) - 1);
    const std::uint64_t biased = static_cast<std::uint64_t>(exponent(rng) + 1023);
    v.push_back(std::bit_cast<double>((rng() & (std::uint64_t{1} << 63)) | (biased << 52) | fraction));
  }
  return v;
}

void report(const char* check, const char* format, std::size_t count, std::size_t mismatches) {
  std::printf("[gpu-numerics] %-28s %-9s %10zu checked %6zu mismatches\n", check, format, count, mismatches);
}

TEST_F(GpuNumerics, DecodeEveryCodeBitExact) {
  const cu::Function kernel = module_->function("decode_all");
  std::vector<DType> formats = kSmallFormats;
  formats.push_back(DType::fp32);
  formats.push_back(DType::int32);
  for (DType d : formats) {
    std::vector<std::uint64_t> codes;
    if (bit_width(d) <= 16) {
      for (std::uint64_t c = 0; c < (std::uint64_t{1} << bit_width(d)); ++c) codes.push_back(c);
    } else {
      std::mt19937 rng(11);
      for (int i = 0; i < (1 << 20); ++i) codes.push_back(rng());
      for (std::uint64_t c : {0x7F800000ull, 0xFF800000ull, 0x7FC00000ull, 0x7F800001ull, 0x1ull, 0x80000000ull}) {
        codes.push_back(c);
      }
    }
    const std::size_t n = codes.size();
    Buffer in(n * 8), out_bits(n * 8), out_f32(n * 4);
    in.put(codes);
    out_bits.poison();
    out_f32.poison();
    kernel(config(n), in.ptr(), static_cast<int>(n), static_cast<int>(d), out_bits.ptr(), out_f32.ptr());
    cu::synchronize(0);
    const auto got = out_bits.get<std::uint64_t>(n);
    const auto got32 = out_f32.get<std::uint32_t>(n);
    std::vector<float> host32(n);
    const int bytes = storage_bytes(d);
    std::vector<std::uint8_t> raw(n * static_cast<std::size_t>(bytes));
    for (std::size_t i = 0; i < n; ++i) std::memcpy(raw.data() + i * bytes, &codes[i], static_cast<std::size_t>(bytes));
    decode(raw.data(), n, d, host32.data());
    std::size_t bad = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint64_t want = std::bit_cast<std::uint64_t>(decode_value(codes[i], d));
      const bool ok64 = got[i] == want;
      // float32 results compare by bits, except int32 beyond 2^24 which rounds.
      const bool ok32 = d == DType::int32 || got32[i] == std::bit_cast<std::uint32_t>(host32[i]) ||
                        (std::isnan(host32[i]) && std::isnan(std::bit_cast<float>(got32[i])) &&
                         std::signbit(host32[i]) == std::signbit(std::bit_cast<float>(got32[i])));
      if (!ok64 || !ok32) {
        if (bad < 5) {
          ADD_FAILURE() << name(d) << " code 0x" << std::hex << codes[i] << ": device 0x" << got[i] << " / 0x"
                        << got32[i] << ", host 0x" << want << " / 0x" << std::bit_cast<std::uint32_t>(host32[i]);
        }
        ++bad;
      }
    }
    report("decode (f64 and f32)", std::string(name(d)).c_str(), n, bad);
    EXPECT_EQ(bad, 0u) << name(d);
  }
}

TEST_F(GpuNumerics, EncodeEveryModeBitExact) {
  const cu::Function kernel = module_->function("encode_all");
  const std::vector<double> shared_inputs = [] {
    auto v = random_inputs(1 << 18, 5);
    auto s = special_inputs();
    v.insert(v.end(), s.begin(), s.end());
    return v;
  }();
  std::vector<DType> formats = kSmallFormats;
  formats.push_back(DType::fp32);
  formats.push_back(DType::int32);
  formats.push_back(DType::int64);
  const std::uint64_t seed = 0x5EED1234ABCDull, first = 977;
  for (DType d : formats) {
    std::vector<double> inputs = shared_inputs;
    if (bit_width(d) <= 16) {
      auto b = boundary_inputs(d);
      inputs.insert(inputs.end(), b.begin(), b.end());
    }
    const std::size_t n = inputs.size();
    Buffer in(n * 8), out(n * 8);
    in.put(inputs);
    std::size_t total = 0, bad = 0;
    for (Rounding r : {Rounding::nearest_even, Rounding::toward_zero, Rounding::stochastic}) {
      for (Overflow o : {Overflow::inf_nan, Overflow::saturate}) {
        out.poison();
        kernel(config(n), in.ptr(), static_cast<int>(n), static_cast<int>(d), static_cast<int>(r), static_cast<int>(o),
               seed, first, out.ptr());
        cu::synchronize(0);
        const auto got = out.get<std::uint64_t>(n);
        const EncodeOptions opts{.rounding = r, .overflow = o, .seed = seed, .first_index = first};
        for (std::size_t i = 0; i < n; ++i) {
          const std::uint64_t want = encode_value(inputs[i], d, opts, i);
          if (got[i] != want) {
            if (bad < 5) {
              ADD_FAILURE() << name(d) << " " << rounding_name(r) << " " << overflow_name(o) << " x=" << inputs[i]
                            << " (0x" << std::hex << std::bit_cast<std::uint64_t>(inputs[i]) << "): device 0x" << got[i]
                            << ", host 0x" << want;
            }
            ++bad;
          }
        }
        total += n;
      }
    }
    report("encode (3 roundings x 2 ovf)", std::string(name(d)).c_str(), total, bad);
    EXPECT_EQ(bad, 0u) << name(d);
  }
}

std::vector<float> float_inputs() {
  std::vector<float> v;
  for (double x : random_inputs(1 << 18, 9)) v.push_back(static_cast<float>(x));
  for (double x : special_inputs()) v.push_back(static_cast<float>(x));
  for (DType d : {DType::fp16, DType::bf16, DType::fp8_e4m3, DType::fp8_e5m2, DType::fp6_e2m3, DType::fp4_e2m1}) {
    for (double x : boundary_inputs(d)) v.push_back(static_cast<float>(x));
  }
  return v;
}

TEST_F(GpuNumerics, Float32FastPathMatchesHostBulkPath) {
  const cu::Function kernel = module_->function("encode_fast");
  const std::vector<float> inputs = float_inputs();
  const std::size_t n = inputs.size();
  Buffer in(n * 4), out(n * 4);
  in.put(inputs);
  for (DType d : {DType::fp32, DType::fp16, DType::bf16, DType::fp8_e4m3, DType::fp8_e5m2, DType::fp6_e2m3,
                  DType::fp6_e3m2, DType::fp4_e2m1, DType::e8m0, DType::int8}) {
    std::size_t bad = 0;
    for (Overflow o : {Overflow::inf_nan, Overflow::saturate}) {
      out.poison();
      kernel(config(n), in.ptr(), static_cast<int>(n), static_cast<int>(d), o == Overflow::saturate ? 1 : 0, out.ptr());
      cu::synchronize(0);
      const auto got = out.get<std::uint32_t>(n);
      const int bytes = storage_bytes(d);
      std::vector<std::uint8_t> host(n * static_cast<std::size_t>(bytes));
      encode(inputs.data(), n, d, host.data(), {.rounding = Rounding::nearest_even, .overflow = o});
      for (std::size_t i = 0; i < n; ++i) {
        std::uint32_t want = 0;
        std::memcpy(&want, host.data() + i * bytes, static_cast<std::size_t>(bytes));
        if (got[i] != want) {
          if (bad < 5) {
            ADD_FAILURE() << name(d) << " " << overflow_name(o) << " x=" << inputs[i] << ": device 0x" << std::hex
                          << got[i] << ", host 0x" << want;
          }
          ++bad;
        }
      }
    }
    report("f32 fast path (2 ovf)", std::string(name(d)).c_str(), 2 * n, bad);
    EXPECT_EQ(bad, 0u) << name(d);
  }
}

TEST_F(GpuNumerics, AgreesWithTheHardwareConversions) {
  const bool has_fp8 = cu::device_properties(0).compute_major * 10 + cu::device_properties(0).compute_minor >= 89;
  // Encode: host mode equivalent to each cvt instruction.
  struct Case {
    const char* what;
    DType dtype;
    Rounding rounding;
    Overflow overflow;
  };
  const Case cases[] = {{"cvt.rn.f16.f32", DType::fp16, Rounding::nearest_even, Overflow::inf_nan},
                        {"cvt.rz.f16.f32", DType::fp16, Rounding::toward_zero, Overflow::inf_nan},
                        {"cvt.rn.bf16.f32", DType::bf16, Rounding::nearest_even, Overflow::inf_nan},
                        {"cvt.rz.bf16.f32", DType::bf16, Rounding::toward_zero, Overflow::inf_nan},
                        {"cvt.rn.satfinite.e4m3x2", DType::fp8_e4m3, Rounding::nearest_even, Overflow::saturate},
                        {"cvt.rn.satfinite.e5m2x2", DType::fp8_e5m2, Rounding::nearest_even, Overflow::saturate}};
  const std::vector<float> inputs = float_inputs();
  const std::size_t n = inputs.size();
  Buffer in(n * 4), out(n * 6 * 4);
  in.put(inputs);
  out.poison();
  module_->function("hardware_encode")(config(n), in.ptr(), static_cast<int>(n), out.ptr());
  cu::synchronize(0);
  const auto got = out.get<std::uint32_t>(n * 6);
  for (int c = 0; c < 6; ++c) {
    if (c >= 4 && !has_fp8) continue;
    std::size_t bad = 0, nan_payload = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint64_t want = encode_value(inputs[i], cases[c].dtype, {cases[c].rounding, cases[c].overflow});
      const std::uint32_t have = got[6 * i + static_cast<std::size_t>(c)];
      if (have == want) continue;
      // The hardware writes its own NaN pattern; the host keeps the sign of a NaN.
      if (std::isnan(inputs[i]) && is_nan_encoding(have, cases[c].dtype)) {
        ++nan_payload;
        continue;
      }
      if (bad < 5) {
        ADD_FAILURE() << cases[c].what << " x=" << inputs[i] << ": hardware 0x" << std::hex << have << ", host 0x"
                      << want;
      }
      ++bad;
    }
    std::printf("[gpu-numerics] %-28s %-9s %10zu checked %6zu mismatches (%zu NaNs with another payload)\n",
                cases[c].what, std::string(name(cases[c].dtype)).c_str(), n, bad, nan_payload);
    EXPECT_EQ(bad, 0u) << cases[c].what;
  }
  // Decode: every 16-bit pattern through the hardware widenings.
  std::vector<std::uint32_t> codes(1 << 16);
  for (std::uint32_t c = 0; c < codes.size(); ++c) codes[c] = c;
  Buffer cin(codes.size() * 4), cout(codes.size() * 16);
  cin.put(codes);
  cout.poison();
  module_->function("hardware_decode")(config(codes.size()), cin.ptr(), static_cast<int>(codes.size()), cout.ptr());
  cu::synchronize(0);
  const auto widened = cout.get<std::uint32_t>(codes.size() * 4);
  const DType decode_types[] = {DType::fp16, DType::bf16, DType::fp8_e4m3, DType::fp8_e5m2};
  for (int c = 0; c < 4; ++c) {
    if (c >= 2 && !has_fp8) continue;
    const std::size_t count = c >= 2 ? 256 : codes.size();
    std::size_t bad = 0;
    for (std::size_t i = 0; i < count; ++i) {
      const float want = static_cast<float>(decode_value(i, decode_types[c]));
      const float have = std::bit_cast<float>(widened[4 * i + static_cast<std::size_t>(c)]);
      const bool same = std::bit_cast<std::uint32_t>(want) == std::bit_cast<std::uint32_t>(have) ||
                        (std::isnan(want) && std::isnan(have));
      if (!same) {
        if (bad < 5) {
          ADD_FAILURE() << name(decode_types[c]) << " code " << i << ": hardware " << have << ", host " << want;
        }
        ++bad;
      }
    }
    report("hardware widening (cvt)", std::string(name(decode_types[c])).c_str(), count, bad);
    EXPECT_EQ(bad, 0u) << name(decode_types[c]);
  }
}

}  // namespace
}  // namespace tessera
