// Per-lane loops over the reduced elements of one output element (a "row"),
// shared by the reduction and normalization templates.
//
// RowIndex enumerates the elements a lane reduces: row-major over the reduced
// axes of an operand, for the output element o (row-major over the kept
// dims). When the reduced axes are adjacent, element r sits at base + r * C
// (C = the product of the dims after them); otherwise its offset is rebuilt
// from its multi-index.
//
// blocked_sum runs the canonical blocked order (lower_to_tile.h): loops over
// superblocks and blocks, a block as tile.strands combined by the pairwise
// tree, every combining add at the accumulation type; `step` folds one
// element into a strand's accumulator (an add, or an fma for sums of
// squares).
#pragma once

#include <functional>
#include <optional>
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
  // Narrows the row to its elements [first, first + count) (adjacent
  // reduced axes only): element r becomes element first + r.
  void window(ir::OpBuilder& b, ir::Value* first, ir::Value* count);
  ir::Value* offset(ir::OpBuilder& b, ir::Value* r) const;
  // Element r as a stored lane (the buffer's policy); `in_bounds` marks the
  // load unchecked, for a caller that knows r is in [0, length()) and the
  // output element exists.
  ir::Value* load(ir::OpBuilder& b, ir::Value* r, bool in_bounds = false) const;

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
// = tile.linear_id): the lanes compute block sums into shared memory (with a
// multiple of kReductionStrands lanes, lane t runs strand t mod S of a block
// and one lane per block combines the strands; otherwise lane t sums the
// blocks t, t + lanes, ..), and lane 0 adds the block sums in block order,
// so the result has the bits of blocked_sum. Every lane gets the sum; call
// it under uniform control flow (it has barriers). With `shuffles` a
// block's strand lanes combine by lane_tree, without shared memory or
// barriers of their own (docs/design/0035); the CUDA Tile IR target has no
// lane shuffle.
ir::Value* blocked_sum_cooperative(ir::OpBuilder& b, ir::Value* length, const NumericsPolicy& acc_policy,
                                   const SumStep& step, ir::Value* lane, std::int64_t lanes, bool shuffles);

// blocked_sum_cooperative for a row read in runs of `run` consecutive
// elements (a power of two dividing kReductionStrands): a block's strands
// fall into S / run groups of `run` consecutive strands, and a lane takes
// one group of one block: its runs g, g + S/run, .. of the block feed its
// `run` strands in order (`run_step`: the run at r0 folded into the
// accumulators of strands r0 mod S .. + run - 1), the lane's group sum is
// the canonical tree over its strands, and the groups' sums combine by the
// tree's upper levels. A run past the row's end takes `step` per element.
// The same bits as blocked_sum (the tree over S strands is the tree over
// aligned groups of strands). Needs lanes a multiple of S / run.
// A lane's runs are taken `ahead` at a time (run_loop).
using RunSumStep = std::function<std::vector<ir::Value*>(ir::OpBuilder& b, ir::Value* r0, std::span<ir::Value* const> accs)>;
using RunPreload = std::function<void(ir::OpBuilder& b, const std::vector<ir::Value*>& r0s)>;
// `shuffles` as for blocked_sum_cooperative.
ir::Value* blocked_sum_cooperative_runs(ir::OpBuilder& b, ir::Value* length, const NumericsPolicy& acc_policy,
                                        const SumStep& step, const RunSumStep& run_step, const RunPreload& preload,
                                        ir::Value* lane, std::int64_t lanes, std::int64_t run, std::int64_t ahead,
                                        bool shuffles);

// blocked_sum_cooperative for a row held in registers (docs/design/0025):
// the group's lanes hold the row's strands, G = `per_block` lanes per block
// (at most kReductionBlock blocks: one superblock): lane t holds the 16 / G
// adjacent strands (t mod G) 16 / G .. of block t / G (G = 16: strand
// t mod 16; fewer lanes: docs/design/0053), and the same strands of block
// t / G + lanes / G and so on (paired strands, docs/design/0028), each
// strand's elements added left to right from zero, a lane's adjacent
// strands already combined by the canonical tree's lower levels. `count`
// sums of the row come at once, sharing their barriers: `strand_sum`
// returns, for each of the lane's blocks, its `count` sums in order. The
// lanes of a block combine by the tree's upper levels (by lane shuffles,
// docs/design/0035) and lane 0 adds each total's block sums in order: the
// totals, in order, have blocked_sum's bits. Call it under uniform control
// flow (it has barriers). `at_lane_zero`, if given, runs in lane 0 with the
// totals before the barrier that publishes them (lane 0 can derive the
// row's scalars there while the group waits anyway). With `every_lane`,
// every lane adds the block sums in order itself (the same bits) after the
// barrier that publishes them, and no second barrier follows; at_lane_zero
// must then be empty.
using StrandSum = std::function<std::vector<ir::Value*>(ir::OpBuilder& b)>;
using AtLaneZero = std::function<void(ir::OpBuilder& b, std::span<ir::Value* const> totals)>;
std::vector<ir::Value*> blocked_sums_held(ir::OpBuilder& b, const NumericsPolicy& acc_policy, ir::Value* lane,
                                          std::int64_t lanes, std::int64_t per_block, std::int64_t count,
                                          const StrandSum& strand_sum, const AtLaneZero& at_lane_zero = {},
                                          bool every_lane = false);

// A lane's runs of `run` elements starting at first, first + stride, ..
// (below `end`), carrying values: `ahead` runs per iteration. When all of
// them are whole (their elements below `end`), `preload` gets their starts
// (so their loads are issued together) and each goes through `whole` in
// order; otherwise the runs go one at a time (a loop, so their code is not
// repeated), a whole run through `whole` and the last, partial one through
// `part`. Returns the loop.
using RunBody = std::function<std::vector<ir::Value*>(ir::OpBuilder& b, ir::Value* r0, std::vector<ir::Value*> carried)>;
ir::Operation* run_loop(ir::OpBuilder& b, ir::Value* first, ir::Value* end, std::int64_t stride, std::int64_t run,
                        std::int64_t ahead, std::vector<ir::Value*> inits, const RunPreload& preload,
                        const RunBody& whole, const RunBody& part);

// init + a[0] + a[1] + .. + a[count - 1], left to right, in one lane (a an
// array of values at the accumulation type, in shared memory, of at least
// `count` entries): the loads go kFoldBatch at a time ahead of their adds,
// so a long fold waits a load latency per batch rather than per element.
inline constexpr std::int64_t kFoldBatch = 16;
ir::Value* add_in_order(ir::OpBuilder& b, ir::Value* array, ir::Value* count, ir::Value* init);

// A shared-memory array of n values of p's storage type.
ir::Value* shared_array(ir::OpBuilder& b, const NumericsPolicy& p, std::int64_t n);

// One step of a pass over r carrying values (max, flags, ..).
using PassStep = std::function<std::vector<ir::Value*>(ir::OpBuilder& b, ir::Value* r, std::span<ir::Value* const> carried)>;

// A fold of carried values over r in [lo, hi) as kReductionStrands strands
// combined by the pairwise tree: a CPU kernel runs it in SIMD lanes. The
// combined values equal a sequential fold's only where `combine` is exact,
// associative and commutative on the values it sees (max, or, counts).
using FoldCombine = std::function<std::vector<ir::Value*>(ir::OpBuilder& b, std::span<ir::Value* const> mine,
                                                          std::span<ir::Value* const> theirs)>;
std::vector<ir::Value*> strand_fold(ir::OpBuilder& b, ir::Value* lo, ir::Value* hi, std::vector<ir::Value*> inits,
                                    const PassStep& step, const FoldCombine& combine);

// Whether a kernel's lanes may exchange values by tile.lane_shuffle: not on
// the CUDA Tile IR target (variant tile_ir), nor with the kernel's
// `lane_shuffles` knob false ($TESSERA_LANE_SHUFFLES=0).
bool lane_shuffles(const ir::Operation& kernel);

// The pairwise tree over each aligned group of `width` consecutive lanes
// (a power of two up to 32, dividing the group's size) by tile.lane_shuffle:
// every lane of a group gets ((v0 . v1) . (v2 . v3)) . .. of its values
// (`.` is `combine`, several values at once), the lower lanes' on the left,
// so every lane holds the same bits whether or not `combine` commutes.
// Call it under uniform control flow.
std::vector<ir::Value*> lane_tree(ir::OpBuilder& b, ir::Value* lane, std::vector<ir::Value*> values, std::int64_t width,
                                  const FoldCombine& combine);

// A tile.if without results: `then` (and `otherwise`, when given) emit
// statements into their branch.
using StatementsFn = std::function<void(ir::OpBuilder&)>;
// `likely` (when given) is tile.if's hint: whether cond is usually true.
void if_then(ir::OpBuilder& b, ir::Value* cond, const StatementsFn& then, const StatementsFn& otherwise = {},
             std::optional<bool> likely = std::nullopt);

// The canonical strand tree over `level` (a power-of-two count):
// ((v0 + v1) + (v2 + v3)) + ..., with `combine` as the +.
template <class T, class Combine>
T pairwise_tree(std::vector<T> level, const Combine& combine) {
  while (level.size() > 1) {
    std::vector<T> next;
    for (std::size_t k = 0; k + 1 < level.size(); k += 2) next.push_back(combine(level[k], level[k + 1]));
    level = std::move(next);
  }
  return level[0];
}

}  // namespace tessera::schedule::templates
