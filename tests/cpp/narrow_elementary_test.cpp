// tessera/numerics/narrow_elementary.h: every bf16 and every fp16 operand of
// gelu, erf and exp, rounded to bf16 and to fp16, against the reference's
// formula (the double function, rounded by the numerics library to fp32 and
// then to the format). These ops take no other operands, so this covers
// every input the kernels can give them; the same header compiles into the
// CUDA kernels (tests/python/test_jit_cuda.py runs the GPU side).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <numbers>
#include <string>

#include "tessera/numerics/convert.h"
#include "tessera/numerics/elementary.h"
#include "tessera/numerics/narrow_elementary.h"

namespace el = tessera::elementary;
using tessera::DType;

namespace {

double round_through(double y, DType format) {
  const double f32 = tessera::decode_value(tessera::encode_value(y, DType::fp32), DType::fp32);
  return tessera::decode_value(tessera::encode_value(f32, format), format);
}

// Signed distance in fp32 steps between two finite floats (on the ordered
// encodings).
std::int64_t ordinal(float x) {
  const auto u = std::bit_cast<std::uint32_t>(x);
  const std::int64_t mag = u & 0x7fffffffu;
  return (u >> 31) ? -mag : mag;
}

struct Function {
  std::string name;
  std::function<double(double)> reference;                  // in double, as the lane programs compute it
  std::function<float(float, int)> narrow;                  // the header's result
  std::function<float(float)> fast;                         // its fp32 evaluation
  std::function<bool(float)> in_fast_range;                 // where the evaluation is tried
};

std::vector<Function> functions() {
  return {
      {"gelu", [](double x) { return (0.5 * x) * (1.0 + el::erf(x / std::numbers::sqrt2)); },
       [](float x, int f) { return el::narrow_gelu(x, f); }, [](float x) { return el::gelu_f32(x); },
       [](float x) { return x >= -5.5f && x < 5.6875f && std::fabs(x) >= 0x1p-60f; }},
      {"erf", [](double x) { return el::erf(x); }, [](float x, int f) { return el::narrow_erf(x, f); },
       [](float x) { return el::erf_f32(x); }, [](float x) { return std::fabs(x) < 4.0f && std::fabs(x) >= 0x1p-100f; }},
      {"exp", [](double x) { return el::exp(x); }, [](float x, int f) { return el::narrow_exp(x, f); },
       [](float x) { return el::exp_f32(x); }, [](float x) { return x >= -87.0f && x <= 88.0f; }},
  };
}

struct Case {
  DType in, out;
};

TEST(NarrowElementary, EveryOperandGivesTheReferenceBits) {
  for (const Function& fn : functions()) {
    for (Case c : {Case{DType::bf16, DType::bf16}, Case{DType::bf16, DType::fp16}, Case{DType::fp16, DType::bf16},
                   Case{DType::fp16, DType::fp16}}) {
      const int format = c.out == DType::bf16 ? el::kNarrowBf16 : el::kNarrowFp16;
      int tried = 0, unsure = 0, wrong = 0;
      std::int64_t worst = 0;
      for (std::uint32_t code = 0; code < 0x10000u; ++code) {
        const double x = tessera::decode_value(code, c.in);
        const float xf = static_cast<float>(x);
        const double want = round_through(fn.reference(x), c.out);
        const float got = fn.narrow(xf, format);
        const bool same = std::isnan(want) ? std::isnan(got)
                                           : std::bit_cast<std::uint32_t>(got) ==
                                                 std::bit_cast<std::uint32_t>(static_cast<float>(want));
        if (!same && ++wrong <= 5) {
          ADD_FAILURE() << fn.name << " " << tessera::name(c.in) << " -> " << tessera::name(c.out) << " of " << x
                        << ": got " << got << ", reference " << want;
        }
        if (!fn.in_fast_range(xf)) continue;
        ++tried;
        const float a = fn.fast(xf);
        const float ref32 = static_cast<float>(tessera::decode_value(tessera::encode_value(fn.reference(x), DType::fp32),
                                                                     DType::fp32));
        if (std::isfinite(ref32) && std::isfinite(a)) {
          const std::int64_t d = std::llabs(ordinal(a) - ordinal(ref32));
          worst = std::max(worst, d);
        }
        if (std::isnan(el::narrow::certify(a, format))) ++unsure;
      }
      EXPECT_EQ(wrong, 0) << fn.name << " " << tessera::name(c.in) << " -> " << tessera::name(c.out);
      std::printf("%s %s -> %s: %d of %d tried undecided, worst %lld steps\n", fn.name.c_str(), std::string(tessera::name(c.in)).c_str(),
                  std::string(tessera::name(c.out)).c_str(), unsure, tried, static_cast<long long>(worst));
      // The certification's premise: every evaluation within kNarrowSteps.
      EXPECT_LE(worst, static_cast<std::int64_t>(el::kNarrowSteps)) << fn.name << " " << tessera::name(c.in);
      // And the fast path decides nearly every input it tries (else the
      // kernels would run the double formula after all).
      const double limit = c.out == DType::bf16 ? 0.002 : 0.02;
      EXPECT_GT(tried, 10000) << fn.name;
      EXPECT_LT(unsure, limit * tried) << fn.name << " " << tessera::name(c.in) << " -> " << tessera::name(c.out)
                                       << ": " << unsure << " of " << tried << " undecided";
    }
  }
}

// The encoder against the numerics library on every fp32 value near each
// format's boundaries (rounding ties, subnormals, overflow, NaN).
TEST(NarrowElementary, EncodeMatchesTheNumericsLibrary) {
  for (DType d : {DType::bf16, DType::fp16}) {
    const int format = d == DType::bf16 ? el::kNarrowBf16 : el::kNarrowFp16;
    int wrong = 0;
    auto check = [&](std::uint32_t bits) {
      const float x = std::bit_cast<float>(bits);
      const auto want = static_cast<std::uint32_t>(tessera::encode_value(static_cast<double>(x), d));
      const std::uint32_t got = el::narrow::encode(x, format);
      if (got != want && ++wrong <= 5) ADD_FAILURE() << tessera::name(d) << " of bits " << bits << ": " << got << " vs " << want;
      if (!std::isnan(x)) {
        EXPECT_EQ(std::bit_cast<std::uint32_t>(el::narrow::decode(got, format)),
                  std::bit_cast<std::uint32_t>(static_cast<float>(tessera::decode_value(want, d))));
      }
    };
    // Every 509th fp32 encoding, and each multiple of 2^12 (fp16's ties
    // and steps, and bf16's) with its neighbours.
    for (std::uint64_t b = 0; b < (1ull << 32); b += 509) check(static_cast<std::uint32_t>(b));
    for (std::uint64_t m = 0x1000; m < (1ull << 32); m += 0x1000) {
      for (std::uint64_t k : {m - 1, m, m + 1}) check(static_cast<std::uint32_t>(k));
    }
    EXPECT_EQ(wrong, 0) << tessera::name(d);
  }
}

}  // namespace

namespace {

// One fp32 bit pattern in `stride` of all 2^32: narrow(x, kNarrowFp32)
// against the reference's rounding of exact((double)x) to fp32 (the numerics
// library's encode, not a cast); NaN where the reference is NaN. Returns,
// over the operands where `counted` holds, how many there are and how many
// `fast` certified.
struct Certified {
  std::int64_t operands = 0, certified = 0;
};
Certified sweep_fp32(const char* name, std::uint64_t stride, float (*narrow)(float, int), double (*exact)(double),
                     float (*fast)(float), bool (*counted)(float)) {
  Certified c;
  int failures = 0;
  for (std::uint64_t u = 0; u < (std::uint64_t{1} << 32); u += stride) {
    const float x = std::bit_cast<float>(static_cast<std::uint32_t>(u));
    const float got = narrow(x, el::kNarrowFp32);
    const double want = tessera::decode_value(tessera::encode_value(exact(static_cast<double>(x)), DType::fp32),
                                              DType::fp32);
    const bool same = std::isnan(want) ? std::isnan(got) : std::bit_cast<std::uint32_t>(got) ==
                                                               std::bit_cast<std::uint32_t>(static_cast<float>(want));
    if (!same) {
      ADD_FAILURE() << name << "(" << x << ") bits 0x" << std::hex << static_cast<std::uint32_t>(u) << ": got " << got
                    << ", want " << want;
      if (++failures > 100) return c;
    }
    if (counted(x)) {
      ++c.operands;
      c.certified += !std::isnan(fast(x));
    }
  }
  return c;
}

}  // namespace

// exp of an fp32 operand to fp32 (kNarrowFp32): exp_f32_or_nan's certified
// answers, else the double formula, over one bit pattern in 61 of every
// sign and exponent (70 million operands). The certified evaluation answers
// all but about one operand in 2^20 of [-87, 88].
TEST(NarrowElementary, Fp32ExpGivesTheReferenceBitsOverASweep) {
  const Certified c = sweep_fp32("exp", 61, el::narrow_exp, el::exp, el::exp_f32_or_nan,
                                 [](float x) { return x >= -87.0f && x <= 88.0f; });
  EXPECT_GT(c.operands, 10'000'000);
  EXPECT_LT(c.operands - c.certified, c.operands / 100'000) << c.certified << " of " << c.operands;
}

// erf of an fp32 operand to fp32 (kNarrowFp32): erf_f32_or_nan's certified
// answers, else the double formula, over one bit pattern in 127. (Every
// fp32 in [0, 4] was checked once the same way, both signs: no difference,
// 79% certified, the rest mostly below 2^-100.) The certified evaluation
// answers all but about one operand in 2^16 of 2^-100 <= |x| < 4.
TEST(NarrowElementary, Fp32ErfGivesTheReferenceBitsOverASweep) {
  const Certified c = sweep_fp32("erf", 127, el::narrow_erf, el::erf, el::erf_f32_or_nan, [](float x) {
    const float m = std::fabs(x);
    return m >= 0x1p-100f && m < 4.0f;
  });
  EXPECT_GT(c.operands, 2'500'000);
  EXPECT_LT(c.operands - c.certified, c.operands / 10'000) << c.certified << " of " << c.operands;
}
