// cuBLASLt's fp8_e4m3 GEMM (the fp8 baseline of the GPU benchmarks) against
// a float64 reference computed here from the decoded fp8 operands, on fresh
// random inputs with the output poisoned (0xFF bytes, a NaN) first. Skipped
// cleanly where there is no GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tessera/numerics/convert.h"
#include "tessera/runtime/cuda.h"
#include "tessera/support/error.h"

namespace cu = tessera::cuda;
using tessera::DType;

namespace {

// Random e4m3 codes of values drawn uniformly from [-3, 3), and their values.
void random_fp8(std::mt19937_64& rng, std::size_t n, std::vector<std::uint8_t>& codes, std::vector<double>& values) {
  std::uniform_real_distribution<double> u(-3.0, 3.0);
  codes.resize(n);
  values.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    codes[i] = static_cast<std::uint8_t>(tessera::encode_value(u(rng), DType::fp8_e4m3));
    values[i] = tessera::decode_value(codes[i], DType::fp8_e4m3);
  }
}

void check_gemm(int m, int n, int k, DType out) {
  std::mt19937_64 rng(std::random_device{}());
  std::vector<std::uint8_t> a_codes, b_codes;
  std::vector<double> a, bt;
  random_fp8(rng, static_cast<std::size_t>(m) * k, a_codes, a);
  random_fp8(rng, static_cast<std::size_t>(n) * k, b_codes, bt);  // B^T: [N, K] row-major

  const std::size_t out_bytes = static_cast<std::size_t>(m) * n * (out == DType::fp32 ? 4 : 2);
  auto da = cu::allocate_shared(0, a_codes.size()), db = cu::allocate_shared(0, b_codes.size()),
       dc = cu::allocate_shared(0, out_bytes);
  const auto pa = reinterpret_cast<cu::DevicePtr>(da.get()), pb = reinterpret_cast<cu::DevicePtr>(db.get()),
             pc = reinterpret_cast<cu::DevicePtr>(dc.get());
  cu::copy_to_device(0, pa, a_codes.data(), a_codes.size());
  cu::copy_to_device(0, pb, b_codes.data(), b_codes.size());
  cu::Stream stream(0);
  cu::memset_async(pc, 0xFF, out_bytes, stream);
  cu::cublaslt_gemm_fp8(m, n, k, pa, pb, pc, out, stream);
  stream.synchronize();
  std::vector<std::uint8_t> raw(out_bytes);
  cu::copy_to_host(0, raw.data(), pc, out_bytes);

  // fp8 products are exact in fp32. Hopper's fp8 tensor cores add them with
  // fewer bits than fp32 (about 14) before cuBLASLt promotes the partial sums
  // to fp32 registers, so each element is within 3e-4 sum |a b| (measured
  // ||err|| / ||ref|| about 1e-4 at K = 512, H200); a bf16 result adds one
  // rounding. A wrong layout or scale gives errors of order ||ref||.
  std::size_t bad = 0, nan = 0;
  double err2 = 0, ref2 = 0, worst = 0;
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double ref = 0, mag = 0;
      for (int kk = 0; kk < k; ++kk) {
        const double p = a[static_cast<std::size_t>(i) * k + kk] * bt[static_cast<std::size_t>(j) * k + kk];
        ref += p;
        mag += std::fabs(p);
      }
      const std::size_t at = static_cast<std::size_t>(i) * n + j;
      double got = 0;
      if (out == DType::fp32) {
        std::uint32_t bits = 0;
        std::memcpy(&bits, raw.data() + at * 4, 4);
        got = tessera::decode_value(bits, DType::fp32);
      } else {
        std::uint16_t bits = 0;
        std::memcpy(&bits, raw.data() + at * 2, 2);
        got = tessera::decode_value(bits, DType::bf16);
      }
      if (std::isnan(got)) {
        ++nan;
        continue;
      }
      const double tol = 3e-4 * mag + (out == DType::bf16 ? std::ldexp(std::fabs(ref), -8) : 0.0) + 1e-30;
      const double e = std::fabs(got - ref);
      if (e > tol) ++bad;
      worst = std::max(worst, e / tol);
      err2 += e * e;
      ref2 += ref * ref;
    }
  }
  const double rel = std::sqrt(err2 / std::max(ref2, 1e-300));
  std::printf("[gpu-cublaslt] fp8_e4m3 %dx%dx%d -> %s: %zu NaN/unwritten, %zu beyond tolerance, ||err||/||ref|| %.3g\n",
              m, n, k, tessera::name(out).data(), nan, bad, rel);
  EXPECT_EQ(nan, 0u) << "elements left unwritten (poison) or NaN";
  EXPECT_EQ(bad, 0u) << "elements beyond the tolerance (worst at " << worst << " x tolerance)";
  EXPECT_LT(rel, out == DType::fp32 ? 5e-4 : 5e-3);
}

#define REQUIRE_GPU() \
  if (!cu::available()) GTEST_SKIP() << "no CUDA device: " << cu::unavailable_reason()

}  // namespace

TEST(GpuCublasLt, Fp8GemmFp32OutMatchesFloat64) {
  REQUIRE_GPU();
  const cu::DeviceProperties p = cu::device_properties(0);
  if (p.compute_major * 10 + p.compute_minor < 89) GTEST_SKIP() << "fp8 GEMM needs sm_89+, device is " << p.arch();
  for (auto [m, n, k] : std::vector<std::array<int, 3>>{{16, 16, 16}, {64, 48, 32}, {128, 256, 96}, {256, 144, 512}}) {
    check_gemm(m, n, k, DType::fp32);
  }
}

TEST(GpuCublasLt, Fp8GemmBf16OutMatchesFloat64) {
  REQUIRE_GPU();
  const cu::DeviceProperties p = cu::device_properties(0);
  if (p.compute_major * 10 + p.compute_minor < 89) GTEST_SKIP() << "fp8 GEMM needs sm_89+, device is " << p.arch();
  for (auto [m, n, k] : std::vector<std::array<int, 3>>{{32, 16, 64}, {192, 80, 128}}) check_gemm(m, n, k, DType::bf16);
}

// Checked before anything is queued (the pointers are never dereferenced).
TEST(GpuCublasLt, RejectsBadArguments) {
  REQUIRE_GPU();
  cu::Stream stream(0);
  auto call = [&](int m, int n, int k, DType out, cu::DevicePtr a) {
    cu::cublaslt_gemm_fp8(m, n, k, a, 256, 512, out, stream);
  };
  try {
    call(16, 16, 16, DType::fp16, 256);
    FAIL() << "fp16 output accepted";
  } catch (const tessera::Error& e) {
    EXPECT_EQ(e.code(), tessera::ErrorCode::DtypeUnsupported);
    EXPECT_NE(std::string(e.what()).find("fp32 or bf16"), std::string::npos) << e.what();
  }
  try {
    call(20, 16, 16, DType::fp32, 256);
    FAIL() << "M=20 accepted";
  } catch (const tessera::Error& e) {
    EXPECT_EQ(e.code(), tessera::ErrorCode::ArgumentInvalid);
    EXPECT_NE(std::string(e.what()).find("M=20"), std::string::npos) << e.what();
  }
  try {
    call(16, 16, 16, DType::fp32, 8);
    FAIL() << "misaligned A accepted";
  } catch (const tessera::Error& e) {
    EXPECT_EQ(e.code(), tessera::ErrorCode::ArgumentInvalid);
    EXPECT_NE(std::string(e.what()).find("A must be 16-byte aligned"), std::string::npos) << e.what();
  }
}
