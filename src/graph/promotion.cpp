#include "tessera/graph/promotion.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "tessera/support/error.h"

namespace tessera::graph {

namespace {

// Smallest positive (subnormal) magnitude of a float format.
double min_positive(const FloatFormat& f) {
  return std::ldexp(1.0, f.min_exponent() - f.mantissa_bits);
}

bool is_int(DType d) {
  return !is_float(d) && d != DType::bool_ && !is_complex(d);
}

// Complex with anything: the complex dtype whose part holds the complex
// operand's part and the other operand's real dtype (the float promotion
// above); integer and bool operands keep the complex dtype. So complex64 +
// fp64 is complex128 and complex64 + int64 stays complex64, as in JAX.
DType promote_complex(DType a, DType b) {
  const DType pa = complex_part(a);
  const DType pb = complex_part(b);
  if (!is_float(pa) || pa == DType::e8m0) return complex_of(pb);
  if (!is_float(pb) || pb == DType::e8m0) return complex_of(pa);
  const DType part = promote_dtypes(pa, pb);
  return complex_of(part == DType::fp64 ? DType::fp64 : DType::fp32);
}

}  // namespace

void reject_scale_format(DType d) {
  if (d == DType::e8m0) {
    raise(ErrorCode::DtypeUnsupported,
          "e8m0 is a block-scale format and takes no part in arithmetic; decode it or use a block-scaled op");
  }
}

bool represents_exactly(DType wide, DType narrow) {
  if (wide == narrow) return true;
  if (is_complex(narrow)) return is_complex(wide) && represents_exactly(complex_part(wide), complex_part(narrow));
  if (is_complex(wide)) return represents_exactly(complex_part(wide), narrow);
  const DTypeInfo& w = info(wide);
  const DTypeInfo& n = info(narrow);
  if (narrow == DType::bool_) return true;
  if (w.is_float && n.is_float) {
    const FloatFormat& fw = w.format;
    const FloatFormat& fn = n.format;
    if (fw.mantissa_bits < fn.mantissa_bits) return false;
    if (fw.max_finite() < fn.max_finite()) return false;
    if (min_positive(fw) > min_positive(fn)) return false;
    if (fn.has_infinity() && !fw.has_infinity()) return false;
    if (fn.has_nan() && !fw.has_nan()) return false;
    if (fn.has_sign && !fw.has_sign) return false;
    return true;
  }
  if (w.is_float && !n.is_float) {
    // Integers of b value bits fit when the mantissa holds them.
    int value_bits = n.bits - (n.is_signed ? 1 : 0);
    return w.format.mantissa_bits + 1 >= value_bits && w.format.max_finite() >= std::ldexp(1.0, value_bits);
  }
  if (!w.is_float && !n.is_float) {
    if (wide == DType::bool_) return false;
    if (w.is_signed == n.is_signed) return w.bits >= n.bits;
    if (w.is_signed && !n.is_signed) return w.bits > n.bits;
    return false;
  }
  return false;
}

DType promote_dtypes(DType a, DType b) {
  reject_scale_format(a);
  reject_scale_format(b);
  if (a == b) return a;
  if (is_complex(a) || is_complex(b)) return promote_complex(a, b);
  if (a == DType::bool_) return b;
  if (b == DType::bool_) return a;
  if (is_float(a) && !is_float(b)) return a;
  if (is_float(b) && !is_float(a)) return b;
  if (is_float(a)) {
    static constexpr std::array<DType, 9> order{DType::fp4_e2m1, DType::fp6_e2m3, DType::fp6_e3m2,
                                                DType::fp8_e4m3, DType::fp8_e5m2, DType::fp16,
                                                DType::bf16,     DType::fp32,     DType::fp64};
    for (DType c : order) {
      if (represents_exactly(c, a) && represents_exactly(c, b)) return c;
    }
    return DType::fp64;
  }
  // Both integers.
  static constexpr std::array<DType, 5> signed_order{DType::int4, DType::int8, DType::int16, DType::int32,
                                                     DType::int64};
  if (is_int(a) && is_int(b)) {
    if (represents_exactly(a, b)) return a;
    if (represents_exactly(b, a)) return b;
    for (DType c : signed_order) {
      if (represents_exactly(c, a) && represents_exactly(c, b)) return c;
    }
  }
  raise(ErrorCode::DtypeUnsupported,
        "no dtype holds both " + std::string(name(a)) + " and " + std::string(name(b)) + "; cast one explicitly");
}

namespace {
DType wider_accum(DType a, DType b) {
  if (a == b) return a;
  if (represents_exactly(a, b)) return a;
  if (represents_exactly(b, a)) return b;
  return promote_dtypes(a, b);
}
}  // namespace

NumericsPolicy promote_policies(const NumericsPolicy& a, const NumericsPolicy& b) {
  NumericsPolicy out;
  out.storage = promote_dtypes(a.storage, b.storage);
  bool from_a = a.storage == out.storage;
  bool from_b = b.storage == out.storage;
  out.accum = wider_accum(a.accum, b.accum);
  // A storage neither operand had gets at least its own default accumulation;
  // otherwise the operands' (possibly narrow, e.g. fp16) accumulation stands.
  if (!from_a && !from_b) out.accum = wider_accum(out.accum, default_accumulation(out.storage));
  auto same_modifiers = [](const NumericsPolicy& x, const NumericsPolicy& y) {
    return x.rounding == y.rounding && x.overflow == y.overflow && x.loss_scale == y.loss_scale;
  };
  if (from_a && from_b && !same_modifiers(a, b)) {
    raise(ErrorCode::DtypeUnsupported, "operands '" + print_policy(a) + "' and '" + print_policy(b) +
                                           "' differ in rounding, overflow or loss scale; cast one to the other");
  }
  const NumericsPolicy* src = from_a ? &a : from_b ? &b : nullptr;
  if (src) {
    out.rounding = src->rounding;
    out.overflow = src->overflow;
    out.loss_scale = src->loss_scale;
  }
  return out;
}

}  // namespace tessera::graph
