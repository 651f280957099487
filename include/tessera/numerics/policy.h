// Numerics policies: how a tensor's values are stored, accumulated and rounded.
//
// A policy is a storage dtype plus an accumulation dtype, a rounding mode, an
// overflow mode and an optional loss scale. Its text form is the one users
// write in annotations:
//
//     fp8_e4m3 @accum(fp32) @stochastic_round @saturate @loss_scale(2.0)
//
// print_policy() writes the canonical form (the accumulation type always
// spelled out, modifiers in the order above, defaults omitted) and
// parse_policy(print_policy(p)) == p for every policy.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "tessera/numerics/convert.h"
#include "tessera/numerics/dtype.h"

namespace tessera {

struct NumericsPolicy {
  DType storage = DType::fp32;
  DType accum = DType::fp32;
  Rounding rounding = Rounding::nearest_even;
  Overflow overflow = Overflow::inf_nan;
  std::optional<double> loss_scale;

  bool operator==(const NumericsPolicy&) const = default;
};

// The accumulation type a storage dtype gets when the policy names none:
// fp64 for fp64, int64 for int64, int32 for other integers, fp32 otherwise.
DType default_accumulation(DType storage);
// A policy for `storage` with every other field at its default.
NumericsPolicy default_policy(DType storage);

std::string print_policy(const NumericsPolicy& policy);
// Parses the text form. `file` names the source in error locations; errors
// are ParseError / DtypeError with the column of the offending token.
NumericsPolicy parse_policy(std::string_view text, std::string_view file = "<policy>");

}  // namespace tessera
