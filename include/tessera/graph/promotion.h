// Type promotion for Graph IR ops with several tensor operands.
//
// The rules (docs/guide/promotion.md has the table):
// - floats: the result is the first format, in the order fp4_e2m1, fp6_e2m3,
//   fp6_e3m2, fp8_e4m3, fp8_e5m2, fp16, bf16, fp32, fp64, that holds every
//   value of both operands exactly. So bf16 with fp16 gives fp32, fp8_e4m3
//   with fp8_e5m2 gives fp16, fp16 with fp32 gives fp32.
// - integers: the narrowest signed type holding both ranges (uint8 with int8
//   gives int16); bool promotes to the other operand's type.
// - an integer with a float gives the float.
// - accumulation: the wider of both operands' accumulation types, and at
//   least the result storage's default when the result storage is neither
//   operand's (bf16 @accum(fp32) with fp16 gives fp32 @accum(fp32); two
//   fp16 @accum(fp16) operands stay fp16 @accum(fp16)).
// - rounding, overflow and loss scale come from the operand whose storage is
//   the result's; two such operands that disagree are a DtypeError.
// e8m0 is a scale format, not an arithmetic one: promoting it is a DtypeError.
#pragma once

#include "tessera/numerics/policy.h"

namespace tessera::graph {

DType promote_dtypes(DType a, DType b);
NumericsPolicy promote_policies(const NumericsPolicy& a, const NumericsPolicy& b);
// Raises DtypeError for e8m0, which no arithmetic op takes.
void reject_scale_format(DType dtype);
// True when every value of `narrow` is exactly a value of `wide`.
bool represents_exactly(DType wide, DType narrow);

}  // namespace tessera::graph
