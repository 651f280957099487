// Canonical forms of eager op calls (used by eager.cpp).
//
// An eager call is compiled for a shape *pattern*, not for its shapes: one
// kernel then serves every call of that pattern, and the common patterns can
// be compiled when Tessera is built. Two steps make the patterns few:
//
//  1. Collapse (a view of the same computation at lower rank). Elementwise
//     ops merge adjacent dims that every operand either spans or broadcasts
//     alike ([B, S, D] + [D] becomes [B*S, D] + [D]; equal shapes become one
//     dim); reductions merge adjacent dims that are all reduced or all kept
//     (a sum over the last axis of [B, S, D] becomes one over axis 1 of
//     [B*S, D]); row normalizations over the last axis fold the leading dims
//     into one. Each result is reshaped back afterwards. The canonical
//     reduction order depends only on the reduced elements in row-major
//     order, so a collapsed call gives the same bits as the original.
//  2. Pattern. Every dim larger than 1 becomes a symbol: by position for
//     collapsed elementwise calls, otherwise by size (equal sizes share one)
//     and then split apart wherever the op's shape rules allow, so that
//     [1024, 1024] @ [1024, 1024] compiles [S0, S1] @ [S1, S2] like any
//     other matmul. Symbols are numbered in order of first appearance.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "tessera/ir/attribute.h"
#include "tessera/ir/dialect.h"
#include "tessera/ir/type.h"
#include "tessera/runtime/tensor.h"

namespace tessera::schedule::detail {

struct EagerForm {
  std::vector<Tensor> inputs;  // the operands, reshaped when collapsed
  ir::AttrMap attrs;           // complete attributes, adjusted when collapsed
  std::vector<ir::Shape> pattern;  // per operand
  // The results' true shapes (to reshape the collapsed results back); empty
  // when the call was not collapsed.
  std::vector<std::vector<std::int64_t>> result_shapes;
};

// The canonical form of `def` applied to `inputs` with complete `attrs`.
// Bad operands are left to the op's own shape rules (the caller infers the
// concrete types first, so they raise the reference's errors).
EagerForm eager_form(const ir::OpDef& def, std::span<const Tensor> inputs, const ir::AttrMap& attrs);

}  // namespace tessera::schedule::detail
