// Tessera's elementary functions written as CUDA Tile IR ops, step for step
// as tessera/numerics/elementary.h and the CPU runtime's scale_pow2 /
// frexp_exponent evaluate them (same constants, same fused multiply-adds,
// same order), so a lane's result has the same bits on this target as on
// the CPU and PTX backends. The target's own exp is an approximation whose
// bits are its own.
#include <array>
#include <cmath>
#include <limits>

#include "backends/cuda_tile/lowering.h"

namespace tessera::cuda_tile::detail {

namespace {

// elementary.h's constants (the same literals).
constexpr double kLn2Hi = 0x1.62e42fefa3800p-1;
constexpr double kLn2Lo = 0x1.ef35793c76730p-45;
constexpr double kInvLn2 = 0x1.71547652b82fep0;
constexpr double kRoundShifter = 0x1.8p52;

constexpr double factorial(int k) { return k <= 1 ? 1.0 : k * factorial(k - 1); }

}  // namespace

Value Lowering::f64(double v, Value like) { return b_->constant_float(m_.tile(Elem::f64, m_.shape_of(like.type)), v); }

Value Lowering::pow2_f64(Value k) {
  const Value biased = b_->binary("addi", k, int_like(k, 1023));
  return b_->bitcast(m_.tile(Elem::f64, m_.shape_of(k.type)), b_->binary("shli", biased, int_like(k, 52)));
}

Value Lowering::inverse_factorial_series(Value r, int lo, int hi) {
  Value p = f64(1.0 / factorial(hi), r);
  for (int k = hi - 1; k >= lo; --k) p = b_->fma(p, r, f64(1.0 / factorial(k), r));
  return p;
}

Value Lowering::expm1_tail(Value r) {
  return b_->binary("mulf", b_->binary("mulf", r, r), inverse_factorial_series(r, 2, 13));
}

// reduce_ln2: x = k ln2 + r with r + r_lo a double-double (Fast2Sum).
std::array<Value, 3> Lowering::reduce_ln2(Value xc) {
  const Value shifter = f64(kRoundShifter, xc);
  const Value k =
      b_->binary("subf", b_->binary("addf", b_->binary("mulf", xc, f64(kInvLn2, xc)), shifter), shifter);
  const Value t = b_->fma(b_->unary("negf", k), f64(kLn2Hi, xc), xc);
  const Value p = b_->binary("mulf", k, f64(kLn2Lo, xc));
  const Value r = b_->binary("subf", t, p);
  const Value r_lo = b_->binary("subf", b_->binary("subf", t, r), p);
  return {k, r, r_lo};
}

// A float holding an integer (or NaN, taken as 0: results that used it are
// then replaced) as i64.
Value Lowering::integral_to_i64(Value k) {
  const Value nan = b_->cmp(k, k, Cmp::ne, true);
  return b_->convert(m_.tile(Elem::i64, m_.shape_of(k.type)), b_->select(nan, f64(0.0, k), k));
}

Value Lowering::exp_f64(Value x) {
  const Value inf = f64(std::numeric_limits<double>::infinity(), x);
  const Value xc = b_->select(b_->cmp(x, f64(710.0, x), Cmp::gt), f64(710.0, x),
                              b_->select(b_->cmp(x, f64(-746.0, x), Cmp::lt), f64(-746.0, x), x));
  const auto [k, r, r_lo] = reduce_ln2(xc);
  const Value one = f64(1.0, x);
  const Value head = b_->binary("addf", one, r);
  const Value head_lo = b_->binary("addf", b_->binary("subf", one, head), r);
  const Value y =
      b_->binary("addf", head, b_->binary("addf", head_lo, b_->binary("addf", r_lo, expm1_tail(r))));
  // k as an integer (NaN only when x is; the result is then x).
  const Value nan = b_->cmp(x, x, Cmp::ne, true);
  const Value ki = integral_to_i64(k);
  const Value k1 = b_->binary("divi", ki, int_like(ki, 2));
  const Value v = b_->binary("mulf", b_->binary("mulf", y, pow2_f64(k1)), pow2_f64(b_->binary("subi", ki, k1)));
  const Value big = b_->select(b_->cmp(x, f64(709.782712893384, x), Cmp::gt), inf, v);
  const Value result = b_->select(b_->cmp(x, f64(-745.1332191019412, x), Cmp::lt), f64(0.0, x), big);
  return b_->select(nan, x, result);
}

// e^x - 1 for x already clamped to [-40, 710] (or NaN): 2^k s + (2^k - 1).
Value Lowering::expm1_clamped(Value xc) {
  const auto [k, r, r_lo] = reduce_ln2(xc);
  const Value s = b_->binary("addf", r, b_->binary("addf", r_lo, expm1_tail(r)));
  const Value ki = integral_to_i64(k);
  const Value k1 = b_->binary("divi", ki, int_like(ki, 2));
  const Value scale1 = pow2_f64(k1), scale2 = pow2_f64(b_->binary("subi", ki, k1));
  const Value both = b_->binary("mulf", scale1, scale2);
  const Value small = b_->fma(s, both, b_->binary("subf", both, f64(1.0, xc)));
  const Value large = b_->binary("mulf", b_->binary("mulf", b_->binary("addf", s, f64(1.0, xc)), scale1), scale2);
  return b_->select(b_->cmp(ki, int_like(ki, 53), Cmp::gt), large, small);
}

// tessera::elementary::log: the exponent and a mantissa in [sqrt(1/2),
// sqrt(2)), then 2 atanh(s) by its series, summed from the small parts up.
Value Lowering::log_f64(Value x) {
  const TypeRef i = m_.tile(Elem::i64, m_.shape_of(x.type));
  const TypeRef d = x.type;
  const Value subnormal = b_->cmp(x, f64(0x1p-1022, x), Cmp::lt);
  const Value xs = b_->select(subnormal, b_->binary("mulf", x, f64(0x1p54, x)), x);
  const Value bits = b_->bitcast(i, xs);
  Value e = b_->binary("subi", b_->binary("andi", b_->binary("shrui", bits, int_like(bits, 52)), int_like(bits, 0x7ff)),
                       b_->select(subnormal, int_like(bits, 1023 + 54), int_like(bits, 1023)));
  Value m = b_->bitcast(d, b_->binary("ori", b_->binary("andi", bits, int_like(bits, 0x000fffffffffffffLL)),
                                     int_like(bits, 0x3ff0000000000000LL)));
  const Value high = b_->cmp(m, f64(1.4142135623730951, x), Cmp::gt);
  m = b_->select(high, b_->binary("mulf", m, f64(0.5, x)), m);
  e = b_->select(high, b_->binary("addi", e, int_like(e, 1)), e);
  const Value f = b_->binary("subf", m, f64(1.0, x));
  const Value s = b_->binary("divf", f, b_->binary("addf", f64(2.0, x), f));
  const Value z = b_->binary("mulf", s, s);
  Value R = f64(2.0 / 23.0, x);
  for (int k = 21; k >= 3; k -= 2) R = b_->fma(R, z, f64(2.0 / k, x));
  R = b_->binary("mulf", R, z);
  const Value hfsq = b_->binary("mulf", b_->binary("mulf", f64(0.5, x), f), f);
  const Value dk = b_->convert(d, e);
  const Value low = b_->fma(dk, f64(kLn2Lo, x), f64(0.0, x));
  const Value inner = b_->binary("addf", b_->binary("subf", b_->fma(s, b_->binary("addf", hfsq, R), low), hfsq), f);
  const Value v = b_->fma(dk, f64(kLn2Hi, x), inner);
  const Value inf = f64(std::numeric_limits<double>::infinity(), x);
  const Value special = b_->select(b_->cmp(x, f64(0.0, x), Cmp::eq), f64(-std::numeric_limits<double>::infinity(), x),
                                   b_->select(b_->cmp(x, inf, Cmp::eq), inf,
                                              f64(std::numeric_limits<double>::quiet_NaN(), x)));
  const Value regular = b_->binary("andi", b_->cmp(x, f64(0.0, x), Cmp::gt), b_->cmp(x, inf, Cmp::lt));
  return b_->select(regular, v, b_->select(b_->cmp(x, x, Cmp::ne, true), x, special));
}

// tessera::elementary::tanh: expm1(2|x|) / (expm1(2|x|) + 2) with the sign
// bit of x put back (which keeps the sign of a zero); 1 past |x| = 19.1.
Value Lowering::tanh_f64(Value x) {
  const TypeRef i = m_.tile(Elem::i64, m_.shape_of(x.type));
  const Value bits = b_->bitcast(i, x);
  const Value sign = b_->binary("andi", bits, int_like(bits, std::numeric_limits<std::int64_t>::min()));
  const Value a = b_->bitcast(x.type, b_->binary("xori", bits, sign));
  const Value a2 = b_->binary("mulf", f64(2.0, x), a);
  const Value e = expm1_clamped(b_->select(b_->cmp(a2, f64(40.0, x), Cmp::gt), f64(40.0, x), a2));
  const Value q = b_->binary("divf", e, b_->binary("addf", e, f64(2.0, x)));
  const Value t = b_->select(b_->cmp(a, f64(19.1, x), Cmp::gt), f64(1.0, x), q);
  return b_->bitcast(x.type, b_->binary("ori", b_->bitcast(i, t), sign));
}

// tessera::elementary::exp_f32_or_nan_series: the header's GPU form reads a
// table, which these ops have no plain gather for. Both forms give exp's fp32
// bits or NaN, and the caller redoes the NaN ones with exp.
Value Lowering::exp_f32_or_nan(Value x) {
  const TypeRef d = m_.tile(Elem::f64, m_.shape_of(x.type));
  const Value xd = b_->convert(d, x);
  const Value xc = b_->select(b_->cmp(xd, f64(88.0, x), Cmp::gt), f64(88.0, x),
                              b_->select(b_->cmp(xd, f64(-88.0, x), Cmp::lt), f64(-88.0, x), xd));
  const Value shifter = f64(kRoundShifter, x);
  const Value k = b_->binary("subf", b_->binary("addf", b_->binary("mulf", xc, f64(kInvLn2, x)), shifter), shifter);
  const Value neg_k = b_->unary("negf", k);
  const Value r = b_->fma(neg_k, f64(kLn2Lo, x), b_->fma(neg_k, f64(kLn2Hi, x), xc));
  const Value p = inverse_factorial_series(r, 0, 11);
  const Value nan = b_->cmp(xd, xd, Cmp::ne, true);
  const TypeRef i = m_.tile(Elem::i64, m_.shape_of(x.type));
  const Value ki = b_->convert(i, b_->select(nan, f64(0.0, x), k));
  const Value e = b_->binary("mulf", p, pow2_f64(ki));
  // The 29 bits below fp32's last mantissa bit, less the midpoint 2^28.
  const Value bits = b_->bitcast(i, e);
  const Value below = b_->binary("subi", b_->binary("andi", bits, int_like(bits, 0x1fffffff)), int_like(bits, 0x10000000));
  const Value near_midpoint = b_->binary("andi", b_->cmp(below, int_like(below, -256), Cmp::gt),
                                         b_->cmp(below, int_like(below, 256), Cmp::lt));
  const Value in_range = b_->binary("andi", b_->cmp(xd, f64(-87.0, x), Cmp::ge), b_->cmp(xd, f64(88.0, x), Cmp::le));
  const Value sure = b_->binary("andi", in_range, logical_not(near_midpoint));
  const Value fast = b_->convert(x.type, e);
  const Value unsure = constant_like(x, std::numeric_limits<double>::quiet_NaN());
  return b_->select(b_->cmp(xd, f64(-104.0, x), Cmp::le), constant_like(x, 0.0), b_->select(sure, fast, unsure));
}

// x * 2^e with one rounding. fp32: the exact product in double (|e| is
// clamped to 400, past which an fp32 result is 0 or inf anyway) rounded
// once, as x * 2^e in fp32 or ldexpf would. fp64: 2^e applied in up to three
// exact steps and a last rounding one, the steps below 2^-1022 scaled by
// 2^53 more so that a subnormal result is rounded only by the last.
Value Lowering::ldexp(Value x, Value e) {
  const Elem xe = m_.elem_of(x.type);
  const Value lo = int_like(e, xe == Elem::f32 ? -400 : -4000), hi = int_like(e, xe == Elem::f32 ? 400 : 4000);
  Value n = b_->binary("maxi", b_->binary("mini", e, hi), lo);
  if (xe == Elem::f32) {
    const Value y = b_->binary("mulf", b_->convert(m_.tile(Elem::f64, m_.shape_of(x.type)), x), pow2_f64(n));
    return b_->convert(x.type, y);
  }
  Value y = x;
  for (int i = 0; i < 2; ++i) {
    const Value up = b_->cmp(n, int_like(n, 1023), Cmp::gt);
    y = b_->select(up, b_->binary("mulf", y, f64(0x1p1023, x)), y);
    n = b_->select(up, b_->binary("subi", n, int_like(n, 1023)), n);
  }
  n = b_->binary("mini", n, int_like(n, 1023));
  for (int i = 0; i < 2; ++i) {
    const Value down = b_->cmp(n, int_like(n, -1022), Cmp::lt);
    y = b_->select(down, b_->binary("mulf", y, f64(0x1p-969, x)), y);
    n = b_->select(down, b_->binary("addi", n, int_like(n, 969)), n);
  }
  n = b_->binary("maxi", n, int_like(n, -1022));
  return b_->binary("mulf", y, pow2_f64(n));
}

// e with |x| = f * 2^e, f in [0.5, 1); 0 for 0, inf and NaN. Subnormals are
// scaled into the normal range first.
Value Lowering::frexp_exponent(Value x) {
  const TypeRef i = m_.tile(Elem::i64, m_.shape_of(x.type));
  const Value xd = m_.elem_of(x.type) == Elem::f64 ? x : b_->convert(m_.tile(Elem::f64, m_.shape_of(x.type)), x);
  const Value mag = b_->unary("absf", xd);
  const Value finite_nonzero = b_->binary("andi", b_->cmp(mag, f64(std::numeric_limits<double>::infinity(), x), Cmp::lt),
                                          b_->cmp(xd, f64(0.0, x), Cmp::ne));
  const Value sub = b_->cmp(mag, f64(0x1p-1022, x), Cmp::lt);
  const Value xs = b_->select(sub, b_->binary("mulf", xd, f64(0x1p54, x)), xd);
  const Value bits = b_->bitcast(i, xs);
  const Value biased = b_->binary("andi", b_->binary("shrui", bits, int_like(bits, 52)), int_like(bits, 0x7ff));
  const Value e = b_->binary("subi", b_->binary("subi", biased, int_like(bits, 1022)),
                             b_->select(sub, int_like(bits, 54), int_like(bits, 0)));
  return b_->select(finite_nonzero, e, int_like(e, 0));
}

}  // namespace tessera::cuda_tile::detail
