// Independent reference models of Tessera's small floating formats, used by
// the conversion and block-scaled tests.
//
// Nothing here calls the library's conversion code. A format is described by
// its field widths and special-value convention; every encoding is decoded
// with the textbook formula, and rounding is done by brute force: the
// non-negative finite values are listed in encoding order, the two neighbours
// of |x| are found by binary search, and |x| is compared with their exact
// midpoint. This is deliberately a different method from the library's
// (integer arithmetic on the significand), so a shared mistake is unlikely.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "tessera/numerics/convert.h"

namespace tessera_test {

enum class RefSpecials {
  Ieee,   // exponent all ones: infinity (mantissa 0) or NaN
  FnNan,  // no infinity; S.1111.111 is NaN (OCP fp8_e4m3)
  None,   // every encoding is finite (OCP fp6, fp4)
};

struct RefFormat {
  const char* name;
  tessera::DType dtype;
  int ebits;
  int mbits;
  int bias;
  RefSpecials specials;

  std::uint32_t sign_bit() const { return 1u << (ebits + mbits); }
  std::uint32_t code_count() const { return sign_bit() << 1; }
  std::uint32_t magnitude(std::uint32_t code) const { return code & (sign_bit() - 1); }
  bool negative(std::uint32_t code) const { return (code & sign_bit()) != 0; }

  bool is_nan(std::uint32_t code) const {
    const std::uint32_t e = magnitude(code) >> mbits, m = magnitude(code) & ((1u << mbits) - 1);
    const std::uint32_t eones = (1u << ebits) - 1, mones = (1u << mbits) - 1;
    if (specials == RefSpecials::Ieee) return e == eones && m != 0;
    if (specials == RefSpecials::FnNan) return e == eones && m == mones;
    return false;
  }
  bool is_inf(std::uint32_t code) const {
    return specials == RefSpecials::Ieee && magnitude(code) == ((1u << ebits) - 1) << mbits;
  }

  // (-1)^s * 0.m * 2^(1-bias) for exponent field 0, else (-1)^s * 1.m * 2^(e-bias).
  double value(std::uint32_t code) const {
    double v = std::numeric_limits<double>::quiet_NaN();
    if (is_nan(code)) return negative(code) ? -v : v;  // a NaN keeps its sign
    v = std::numeric_limits<double>::infinity();
    if (!is_inf(code)) {
      const std::uint32_t e = magnitude(code) >> mbits, m = magnitude(code) & ((1u << mbits) - 1);
      const double fraction = static_cast<double>(m) / static_cast<double>(1u << mbits);
      v = e == 0 ? fraction * std::pow(2.0, 1 - bias) : (1.0 + fraction) * std::pow(2.0, static_cast<int>(e) - bias);
    }
    return negative(code) ? -v : v;
  }
};

inline const std::vector<RefFormat>& small_formats() {
  using tessera::DType;
  static const std::vector<RefFormat> formats{
      {"fp8_e4m3", DType::fp8_e4m3, 4, 3, 7, RefSpecials::FnNan},
      {"fp8_e5m2", DType::fp8_e5m2, 5, 2, 15, RefSpecials::Ieee},
      {"fp6_e2m3", DType::fp6_e2m3, 2, 3, 1, RefSpecials::None},
      {"fp6_e3m2", DType::fp6_e3m2, 3, 2, 3, RefSpecials::None},
      {"fp4_e2m1", DType::fp4_e2m1, 2, 1, 1, RefSpecials::None},
  };
  return formats;
}
inline RefFormat fp16_format() {
  return {"fp16", tessera::DType::fp16, 5, 10, 15, RefSpecials::Ieee};
}
inline RefFormat bf16_format() {
  return {"bf16", tessera::DType::bf16, 8, 7, 127, RefSpecials::Ieee};
}

// Brute-force rounding into one format.
class RefRounder {
 public:
  explicit RefRounder(const RefFormat& f) : f_(f) {
    // Non-negative finite values in encoding order; they must increase.
    for (std::uint32_t c = 0; c < f.sign_bit(); ++c) {
      if (f.is_nan(c) || f.is_inf(c)) break;
      values_.push_back(f.value(c));
    }
    max_code_ = static_cast<std::uint32_t>(values_.size() - 1);
    // One more value as if the exponent range were unbounded: ties and
    // overflow are decided against it, as IEEE 754 prescribes.
    const double ulp_of_max = values_[max_code_] - values_[max_code_ - 1];
    values_.push_back(values_[max_code_] + ulp_of_max);
  }

  const RefFormat& format() const { return f_; }
  std::uint32_t max_code() const { return max_code_; }
  double max_value() const { return values_[max_code_]; }
  // The non-negative finite values, plus the unbounded-exponent one after max.
  const std::vector<double>& values() const { return values_; }

  std::uint32_t nan_code(bool negative) const {
    const std::uint32_t sign = negative ? f_.sign_bit() : 0;
    const std::uint32_t eones = ((1u << f_.ebits) - 1) << f_.mbits;
    return sign | eones | (f_.specials == RefSpecials::FnNan ? (1u << f_.mbits) - 1 : 1u << (f_.mbits - 1));
  }

  std::uint32_t encode(double x, tessera::Rounding rounding, tessera::Overflow overflow) const {
    if (std::isnan(x)) return f_.specials == RefSpecials::None ? 0u : nan_code(std::signbit(x));
    const bool negative = std::signbit(x);
    const std::uint32_t sign = negative ? f_.sign_bit() : 0;
    const double a = std::fabs(x);
    const auto too_big = [&](bool from_infinity) -> std::uint32_t {
      const bool saturate = overflow == tessera::Overflow::saturate || f_.specials == RefSpecials::None ||
                            (rounding == tessera::Rounding::toward_zero && !from_infinity);
      if (saturate) return sign | max_code_;
      if (f_.specials == RefSpecials::Ieee) return sign | (((1u << f_.ebits) - 1) << f_.mbits);
      return nan_code(negative);
    };
    if (std::isinf(a)) return too_big(true);
    if (a >= values_.back()) return too_big(false);
    // values_[i] <= a < values_[i + 1]
    const auto i =
        static_cast<std::uint32_t>(std::upper_bound(values_.begin(), values_.end(), a) - values_.begin() - 1);
    std::uint32_t pick = i;
    if (rounding != tessera::Rounding::toward_zero) {
      const double mid = (values_[i] + values_[i + 1]) / 2;  // exact: both have few significant bits
      pick = a < mid ? i : a > mid ? i + 1 : (i % 2 == 0 ? i : i + 1);
    }
    if (pick > max_code_) return too_big(false);
    return sign | pick;
  }

  // Same encoding, treating all NaN encodings of one sign as equal.
  bool same(std::uint32_t expected, std::uint32_t actual) const {
    if (f_.is_nan(expected)) return f_.is_nan(actual) && f_.negative(expected) == f_.negative(actual);
    return expected == actual;
  }

 private:
  RefFormat f_;
  std::vector<double> values_;
  std::uint32_t max_code_ = 0;
};

// Collects mismatches from a large sweep: counts them and keeps the first few
// as text, so one failing assertion reports a readable sample.
class Mismatches {
 public:
  template <typename Input>
  void add(const Input& input, std::uint64_t expected, std::uint64_t actual, const char* what) {
    if (count_++ < 8) {
      std::ostringstream line;
      line.precision(17);
      line << "  " << what << ": input " << input << " (" << std::hexfloat << static_cast<double>(input)
           << std::defaultfloat << ") expected 0x" << std::hex << expected << " got 0x" << actual << "\n";
      sample_ += line.str();
    }
  }
  std::uint64_t count() const { return count_; }
  std::string report() const { return std::to_string(count_) + " mismatches, first:\n" + sample_; }

 private:
  std::uint64_t count_ = 0;
  std::string sample_;
};

}  // namespace tessera_test
