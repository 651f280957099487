// Per-lane loops over the reduced elements of one output element (a "row"),
// shared by the reduction and normalization templates.
//
// RowIndex enumerates the elements a lane reduces: row-major over the reduced
// axes of an operand, for the output element o (row-major over the kept
// dims). When the reduced axes are adjacent, element r sits at base + r * C
// (C = the product of the dims after them); otherwise its offset is rebuilt
// from its multi-index.
//
// blocked_sum runs the canonical blocked order (lower_to_tile.h): three
// nested loops (superblock, block, element), one accumulator each, every
// combining add at the accumulation type; `step` folds one element into the
// block's accumulator (an add, or an fma for sums of squares).
#pragma once

#include <functional>
#include <vector>

#include "tessera/ir/builder.h"
#include "tessera/numerics/policy.h"

namespace tessera::schedule::templates {

class RowIndex {
 public:
  // `x`: the operand buffer (flat); `dims`: its dims as lane<int64> values;
  // `axes`: the reduced axes, sorted; `o`: the output element.
  RowIndex(ir::OpBuilder& b, ir::Value* x, std::vector<ir::Value*> dims, std::vector<std::int64_t> axes, ir::Value* o);

  ir::Value* length() const { return length_; }
  ir::Value* offset(ir::OpBuilder& b, ir::Value* r) const;
  ir::Value* load(ir::OpBuilder& b, ir::Value* r) const;  // stored lane (the buffer's policy)

 private:
  ir::Value* x_;
  std::vector<ir::Value*> dims_, strides_;
  std::vector<std::int64_t> axes_;
  ir::Value* base_ = nullptr;
  ir::Value* length_ = nullptr;
  bool adjacent_ = true;
};

using SumStep = std::function<ir::Value*(ir::OpBuilder& b, ir::Value* r, ir::Value* acc)>;

// One block's sum, r in [lo, hi) (at most kReductionBlock elements), in the
// canonical order: kReductionStrands strands from `zero`, then their
// pairwise tree.
ir::Value* block_sum(ir::OpBuilder& b, ir::Value* lo, ir::Value* hi, ir::Value* zero, const SumStep& step);

// The canonical blocked sum over r in [0, length) at `acc_policy`.
ir::Value* blocked_sum(ir::OpBuilder& b, ir::Value* length, const NumericsPolicy& acc_policy, const SumStep& step);

// The same sum computed by a group of `lanes` lanes sharing the row (`lane`
// = tile.linear_id): lane t sums the 256-element blocks t, t + lanes, .. of
// each superblock into shared memory, and lane 0 adds the block sums in
// block order, so the result has the bits of blocked_sum. Every lane gets
// the sum; call it under uniform control flow (it has barriers).
ir::Value* blocked_sum_cooperative(ir::OpBuilder& b, ir::Value* length, const NumericsPolicy& acc_policy,
                                   const SumStep& step, ir::Value* lane, std::int64_t lanes);

// A shared-memory array of n values of p's storage type.
ir::Value* shared_array(ir::OpBuilder& b, const NumericsPolicy& p, std::int64_t n);

// A sequential pass over r in [0, length) carrying `inits` (max, flags, ..).
using PassStep = std::function<std::vector<ir::Value*>(ir::OpBuilder& b, ir::Value* r, std::span<ir::Value* const> carried)>;
std::vector<ir::Value*> row_pass(ir::OpBuilder& b, ir::Value* from, ir::Value* length, std::vector<ir::Value*> inits,
                                 const PassStep& step);

}  // namespace tessera::schedule::templates
