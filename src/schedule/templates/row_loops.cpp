// Per-lane row loops (row_loops.h).
#include "schedule/templates/row_loops.h"

#include <algorithm>

#include "schedule/templates/lane_program.h"
#include "tessera/schedule/lower_to_tile.h"
#include "tessera/schedule/schedule_dialect.h"
#include "tessera/tile/tile_builder.h"

namespace tessera::schedule::templates {

using ir::Value;

RowIndex::RowIndex(ir::OpBuilder& b, Value* x, std::vector<Value*> dims, std::vector<std::int64_t> axes, Value* o)
    : x_(x), dims_(std::move(dims)), axes_(std::move(axes)) {
  const std::size_t rank = dims_.size();
  auto reduced = [&](std::size_t d) {
    return std::find(axes_.begin(), axes_.end(), static_cast<std::int64_t>(d)) != axes_.end();
  };
  strides_.assign(rank, nullptr);
  Value* s = tile::build_int(b, 1);
  for (std::size_t d = rank; d-- > 0;) {
    strides_[d] = s;
    s = index_op(b, "mul", s, dims_[d]);
  }
  base_ = tile::build_int(b, 0);
  Value* rest = o;
  for (std::size_t d = rank; d-- > 0;) {
    if (reduced(d)) continue;
    base_ = index_op(b, "add", base_, index_op(b, "mul", op2(b, "rem", rest, dims_[d]), strides_[d]));
    rest = op2(b, "div", rest, dims_[d]);
  }
  length_ = tile::build_int(b, 1);
  for (auto a : axes_) length_ = index_op(b, "mul", length_, dims_[static_cast<std::size_t>(a)]);
  adjacent_ = axes_.empty() || axes_.back() - axes_.front() + 1 == static_cast<std::int64_t>(axes_.size());
}

void RowIndex::window(ir::OpBuilder& b, Value* first, Value* count) {
  if (!adjacent_ || axes_.empty()) raise(ErrorCode::Internal, "RowIndex::window needs adjacent reduced axes");
  base_ = index_op(b, "add", base_, index_op(b, "mul", first, strides_[static_cast<std::size_t>(axes_.back())]));
  length_ = count;
}

Value* RowIndex::offset(ir::OpBuilder& b, Value* r) const {
  if (axes_.empty()) return base_;
  if (adjacent_) return index_op(b, "add", base_, index_op(b, "mul", r, strides_[static_cast<std::size_t>(axes_.back())]));
  Value* offset = base_;
  Value* rest = r;
  for (std::size_t k = axes_.size(); k-- > 0;) {
    const std::size_t d = static_cast<std::size_t>(axes_[k]);
    offset = index_op(b, "add", offset, index_op(b, "mul", op2(b, "rem", rest, dims_[d]), strides_[d]));
    rest = op2(b, "div", rest, dims_[d]);
  }
  return offset;
}

Value* RowIndex::load(ir::OpBuilder& b, Value* r, bool in_bounds) const {
  return tile::build(b, "tile.load_elem", {x_, offset(b, r)}, in_bounds ? ir::AttrMap{{"in_bounds", true}} : ir::AttrMap{});
}

Value* block_sum(ir::OpBuilder& b, Value* lo, Value* hi, Value* zero, const SumStep& step) {
  ir::Operation* strands = tile::build_strands(b, lo, hi, kReductionStrands, {zero},
                                               [&](ir::OpBuilder& eb, std::span<Value* const> a) {
                                                 return std::vector<Value*>{step(eb, a[0], a[1])};
                                               });
  std::vector<Value*> level;
  for (std::size_t k = 0; k < strands->num_results(); ++k) level.push_back(strands->result(k));
  return pairwise_tree(std::move(level), [&](Value* x, Value* y) { return op2(b, "add", x, y); });
}

std::vector<Value*> strand_fold(ir::OpBuilder& b, Value* lo, Value* hi, std::vector<Value*> inits, const PassStep& step,
                                const FoldCombine& combine) {
  const std::size_t n = inits.size();
  ir::Operation* st = tile::build_strands(b, lo, hi, kReductionStrands, std::move(inits),
                                          [&](ir::OpBuilder& lb, std::span<Value* const> a) {
                                            return step(lb, a[0], a.subspan(1));
                                          });
  std::vector<std::vector<Value*>> level;
  for (std::size_t s = 0; s < static_cast<std::size_t>(kReductionStrands); ++s) {
    level.emplace_back();
    for (std::size_t k = 0; k < n; ++k) level.back().push_back(st->result(s * n + k));
  }
  return pairwise_tree(std::move(level), [&](const std::vector<Value*>& x, const std::vector<Value*>& y) {
    return combine(b, x, y);
  });
}

Value* blocked_sum(ir::OpBuilder& b, Value* length, const NumericsPolicy& acc_policy, const SumStep& step) {
  Value* zero = tile::build_real(b, 0.0, acc_policy);
  Value* one_i = tile::build_int(b, 1);
  Value* block = tile::build_int(b, kReductionBlock);
  auto ceil_div = [&](Value* a) { return op2(b, "div", index_op(b, "add", a, tile::build_int(b, kReductionBlock - 1)), block); };
  Value* num_blocks = ceil_div(length);
  Value* num_super = ceil_div(num_blocks);
  auto single = [](Value* v) { return std::vector<Value*>{v}; };
  ir::Operation* outer = tile::build_for(
      b, tile::build_int(b, 0), num_super, one_i, {zero}, [&](ir::OpBuilder& sb, std::span<Value* const> s) {
        Value* b_lo = index_op(sb, "mul", s[0], block);
        Value* b_hi = op2(sb, "min", num_blocks, index_op(sb, "add", b_lo, block));
        ir::Operation* mid = tile::build_for(
            sb, b_lo, b_hi, one_i, {zero}, [&](ir::OpBuilder& bb, std::span<Value* const> k) {
              Value* r_lo = index_op(bb, "mul", k[0], block);
              Value* r_hi = op2(bb, "min", length, index_op(bb, "add", r_lo, block));
              return single(op2(bb, "add", k[1], block_sum(bb, r_lo, r_hi, zero, step)));
            });
        return single(op2(sb, "add", s[1], mid->result(0)));
      });
  return outer->result(0);
}

void if_then(ir::OpBuilder& b, Value* cond, const StatementsFn& then, const StatementsFn& otherwise,
             std::optional<bool> likely) {
  ir::Operation* op = tile::build_if(
      b, cond, {},
      [&](ir::OpBuilder& tb, std::span<Value* const>) {
        then(tb);
        return std::vector<Value*>{};
      },
      [&](ir::OpBuilder& eb, std::span<Value* const>) {
        if (otherwise) otherwise(eb);
        return std::vector<Value*>{};
      });
  if (likely) op->attrs().set("likely", *likely);
}

Value* add_in_order(ir::OpBuilder& b, Value* array, Value* count, Value* init) {
  auto integer = [](ir::OpBuilder& ib, std::int64_t v) { return tile::build_int(ib, v); };
  const ir::AttrMap proven{{"in_bounds", true}};  // count is at most the array's length
  Value* whole = op2(b, "mul", op2(b, "div", count, integer(b, kFoldBatch)), integer(b, kFoldBatch));
  ir::Operation* batches = tile::build_for(
      b, integer(b, 0), whole, integer(b, kFoldBatch), {init}, [&](ir::OpBuilder& kb, std::span<Value* const> k) {
        std::vector<Value*> loaded;
        for (std::int64_t j = 0; j < kFoldBatch; ++j) {
          loaded.push_back(
              tile::build(kb, "tile.load_elem", {array, j == 0 ? k[0] : index_op(kb, "add", k[0], integer(kb, j))}, proven));
        }
        Value* acc = k[1];
        for (Value* v : loaded) acc = op2(kb, "add", acc, v);
        return std::vector<Value*>{acc};
      });
  // The last count mod kFoldBatch one by one.
  return tile::build_for(b, whole, count, integer(b, 1), {batches->result(0)}, [&](ir::OpBuilder& kb, std::span<Value* const> k) {
           return std::vector<Value*>{op2(kb, "add", k[1], tile::build(kb, "tile.load_elem", {array, k[0]}, proven))};
         })->result(0);
}

Value* shared_array(ir::OpBuilder& b, const NumericsPolicy& p, std::int64_t n) {
  return tile::build(b, "tile.smem_alloc", {}, {{"shape", ir::fixed_shape({n})}, {"policy", default_policy(p.storage)}});
}

ir::Operation* run_loop(ir::OpBuilder& b, Value* first, Value* end, std::int64_t stride, std::int64_t run,
                        std::int64_t ahead, std::vector<Value*> inits, const RunPreload& preload, const RunBody& whole,
                        const RunBody& part) {
  using Values = std::vector<Value*>;
  auto integer = [](ir::OpBuilder& ib, std::int64_t v) { return tile::build_int(ib, v); };
  // `then` where cond holds, else `otherwise`, carrying `cur`; `likely`: tile.if's hint.
  auto branch = [](ir::OpBuilder& ib, Value* cond, const Values& cur, const auto& then, const auto& otherwise,
                   bool likely) {
    ir::Operation* op = tile::build_if(
        ib, cond, cur, [&](ir::OpBuilder& tb, std::span<Value* const> c) { return then(tb, Values(c.begin(), c.end())); },
        [&](ir::OpBuilder& eb, std::span<Value* const> c) { return otherwise(eb, Values(c.begin(), c.end())); });
    if (likely) op->attrs().set("likely", true);
    return op->results();
  };
  return tile::build_for(b, first, end, integer(b, stride * ahead), inits, [&](ir::OpBuilder& lb, std::span<Value* const> a) {
    Value* r0 = a[0];
    Value* last_end = op2(lb, "add", r0, integer(lb, (ahead - 1) * stride + run));
    return branch(
        lb, cmp(lb, "le", last_end, end), Values(a.begin() + 1, a.end()),
        [&](ir::OpBuilder& wb, Values cur) {
          Values r0s;
          for (std::int64_t u = 0; u < ahead; ++u) r0s.push_back(u == 0 ? r0 : index_op(wb, "add", r0, integer(wb, u * stride)));
          preload(wb, r0s);
          for (Value* r : r0s) cur = whole(wb, r, cur);
          return cur;
        },
        [&](ir::OpBuilder& pb, Values cur) {
          return tile::build_for(pb, integer(pb, 0), integer(pb, ahead), integer(pb, 1), cur,
                                 [&](ir::OpBuilder& tb, std::span<Value* const> t) {
                                   Value* ru = index_op(tb, "add", r0, index_op(tb, "mul", t[0], integer(tb, stride)));
                                   auto keep = [](ir::OpBuilder&, Values x) { return x; };
                                   auto one_run = [&](ir::OpBuilder& eb, Values x) {
                                     return branch(
                                         eb, cmp(eb, "le", op2(eb, "add", ru, integer(eb, run)), end), x,
                                         [&](ir::OpBuilder& wb, Values c) { return whole(wb, ru, c); },
                                         [&](ir::OpBuilder& qb, Values c) { return part(qb, ru, c); }, true);
                                   };
                                   return branch(tb, cmp(tb, "lt", ru, end), Values(t.begin() + 1, t.end()), one_run,
                                                 keep, false);
                                 })
              ->results();
        },
        true);
  });
}

namespace {

// The superblock loop of the cooperative sums: per superblock, `block_sums`
// writes the sums of its blocks [b_lo, b_hi) to partial[k - b_lo] (with its
// own barriers, under uniform control flow); lane 0 adds them in block
// order into partial[kReductionBlock] (`slot`), and every lane adds that to
// its running total: blocked_sum's outer loops, bit for bit.
// Its plan: the block size, the counts of blocks and superblocks of a row
// of `length`, and the shared array of block sums with its slot.
struct Superblocks {
  Value* block;
  Value* num_blocks;
  Value* num_super;
  Value* partial;
  Value* slot;
};
Superblocks plan_superblocks(ir::OpBuilder& b, Value* length, const NumericsPolicy& acc_policy) {
  Superblocks p;
  p.block = tile::build_int(b, kReductionBlock);
  auto ceil_div = [&](Value* a) {
    return op2(b, "div", index_op(b, "add", a, tile::build_int(b, kReductionBlock - 1)), p.block);
  };
  p.num_blocks = ceil_div(length);
  p.num_super = ceil_div(p.num_blocks);
  p.partial = shared_array(b, acc_policy, kReductionBlock + 1);
  p.slot = tile::build_int(b, kReductionBlock);
  return p;
}
using BlockSums = std::function<void(ir::OpBuilder& sb, Value* b_lo, Value* b_hi)>;
Value* cooperative_superblocks(ir::OpBuilder& b, const NumericsPolicy& acc_policy, Value* lane, const Superblocks& plan,
                               const BlockSums& block_sums) {
  auto integer = [](ir::OpBuilder& ib, std::int64_t v) { return tile::build_int(ib, v); };
  auto acc_real = [&](ir::OpBuilder& ib, double v) { return tile::build_real(ib, v, acc_policy); };
  Value* block = plan.block;
  Value* num_blocks = plan.num_blocks;
  Value* partial = plan.partial;
  Value* slot = plan.slot;
  ir::Operation* outer = tile::build_for(
      b, integer(b, 0), plan.num_super, integer(b, 1), {acc_real(b, 0.0)}, [&](ir::OpBuilder& sb, std::span<Value* const> s) {
        Value* b_lo = index_op(sb, "mul", s[0], block);
        Value* b_hi = op2(sb, "min", num_blocks, index_op(sb, "add", b_lo, block));
        block_sums(sb, b_lo, b_hi);
        sb.create("tile.barrier", {});
        if_then(sb, cmp(sb, "eq", lane, integer(sb, 0)), [&](ir::OpBuilder& lb) {
          Value* mid = add_in_order(lb, partial, index_op(lb, "sub", b_hi, b_lo), acc_real(lb, 0.0));
          lb.create("tile.store_elem", {partial, slot, mid});
        });
        sb.create("tile.barrier", {});
        Value* super_sum = tile::build(sb, "tile.load_elem", {partial, slot});
        // Every lane has read the slot before the next superblock writes partials.
        sb.create("tile.barrier", {});
        return std::vector<Value*>{op2(sb, "add", s[1], super_sum)};
      });
  return outer->result(0);
}

// The end of one chunk of a cooperative sum: each lane's part (the sum of
// its strands of one block) goes to parts[lane]; then lane t < `blocks`
// (whose block c0 + t exists) adds the `per_block` parts of block c0 + t
// by the canonical tree and writes the block's sum to partial[c0 + t - b_lo].
// Barriers around it let the next chunk overwrite the parts.
void combine_block_parts(ir::OpBuilder& cb, Value* parts, Value* part, Value* lane, Value* c0, Value* b_lo, Value* b_hi,
                         std::int64_t blocks, std::int64_t per_block, Value* partial) {
  auto integer = [](ir::OpBuilder& ib, std::int64_t v) { return tile::build_int(ib, v); };
  cb.create("tile.store_elem", {parts, lane, part});
  cb.create("tile.barrier", {});
  Value* combined_block = index_op(cb, "add", c0, lane);
  Value* combines = op2(cb, "and", cmp(cb, "lt", lane, integer(cb, blocks)), cmp(cb, "lt", combined_block, b_hi));
  if_then(cb, combines, [&](ir::OpBuilder& tb) {
    std::vector<Value*> level;
    Value* first = index_op(tb, "mul", lane, integer(tb, per_block));
    for (std::int64_t k = 0; k < per_block; ++k)
      level.push_back(tile::build(tb, "tile.load_elem", {parts, index_op(tb, "add", first, integer(tb, k))}));
    Value* sum = pairwise_tree(std::move(level), [&](Value* x, Value* y) { return op2(tb, "add", x, y); });
    tb.create("tile.store_elem", {partial, index_op(tb, "sub", combined_block, b_lo), sum});
  });
  // The parts are read before the next chunk writes them.
  cb.create("tile.barrier", {});
}

// The sums lo[k] + hi[k] (lane_tree's combine for sums).
std::vector<Value*> add_each(ir::OpBuilder& b, std::span<Value* const> lo, std::span<Value* const> hi) {
  std::vector<Value*> out;
  for (std::size_t k = 0; k < lo.size(); ++k) out.push_back(op2(b, "add", lo[k], hi[k]));
  return out;
}

// combine_block_parts by lane shuffles (docs/design/0035): the `per_block`
// lanes of a block (consecutive, aligned) combine their parts by the
// canonical tree's upper levels, and the block's first lane writes its sum
// to partial[c0 + lane / per_block - b_lo]. No barrier: each block sum has
// its own entry, which the superblock's barrier publishes.
void shuffle_block_parts(ir::OpBuilder& cb, Value* part, Value* lane, Value* c0, Value* b_lo, Value* b_hi,
                         std::int64_t per_block, Value* partial) {
  auto integer = [](ir::OpBuilder& ib, std::int64_t v) { return tile::build_int(ib, v); };
  Value* sum = lane_tree(cb, lane, {part}, per_block, add_each).at(0);
  Value* my_block = index_op(cb, "add", c0, op2(cb, "div", lane, integer(cb, per_block)));
  Value* writes = op2(cb, "and", cmp(cb, "eq", op2(cb, "rem", lane, integer(cb, per_block)), integer(cb, 0)),
                      cmp(cb, "lt", my_block, b_hi));
  if_then(cb, writes, [&](ir::OpBuilder& tb) {
    tb.create("tile.store_elem", {partial, index_op(tb, "sub", my_block, b_lo), sum});
  });
}

}  // namespace

Value* blocked_sum_cooperative(ir::OpBuilder& b, Value* length, const NumericsPolicy& acc_policy, const SumStep& step,
                             Value* lane, std::int64_t lanes, bool shuffles) {
  auto integer = [](ir::OpBuilder& ib, std::int64_t v) { return tile::build_int(ib, v); };
  auto acc_real = [&](ir::OpBuilder& ib, double v) { return tile::build_real(ib, v, acc_policy); };
  const Superblocks plan = plan_superblocks(b, length, acc_policy);
  Value* block = plan.block;
  Value* partial = plan.partial;
  // With a multiple of kReductionStrands lanes, lanes take (block, strand)
  // pairs: lanes / S blocks at a time, lane t running strand t mod S of block
  // t / S (consecutive lanes read consecutive elements), then one lane per
  // block combines its S strands by the canonical tree. Otherwise a lane
  // takes whole blocks. Both give block_sum's bits.
  const std::int64_t S = kReductionStrands;
  const bool strand_lanes = lanes >= S && lanes % S == 0;
  Value* strand_part = strand_lanes && !shuffles ? shared_array(b, acc_policy, lanes) : nullptr;
  auto block_sums_by_strands = [&](ir::OpBuilder& sb, Value* b_lo, Value* b_hi) {
    const std::int64_t per_chunk = lanes / S;
    Value* my_block_offset = op2(sb, "div", lane, integer(sb, S));
    Value* my_strand = op2(sb, "rem", lane, integer(sb, S));
    tile::build_for(sb, b_lo, b_hi, integer(sb, per_chunk), {}, [&](ir::OpBuilder& cb, std::span<Value* const> c) {
      Value* my_block = index_op(cb, "add", c[0], my_block_offset);
      ir::Operation* part = tile::build_if(
          cb, cmp(cb, "lt", my_block, b_hi), {acc_real(cb, 0.0)},
          [&](ir::OpBuilder& ib, std::span<Value* const> init) {
            Value* r_lo = index_op(ib, "mul", my_block, block);
            Value* r_hi = op2(ib, "min", length, index_op(ib, "add", r_lo, block));
            ir::Operation* strand = tile::build_for(
                ib, index_op(ib, "add", r_lo, my_strand), r_hi, integer(ib, S), {init[0]},
                [&](ir::OpBuilder& eb, std::span<Value* const> e) { return std::vector<Value*>{step(eb, e[0], e[1])}; });
            return std::vector<Value*>{strand->result(0)};
          },
          [](ir::OpBuilder&, std::span<Value* const> init) { return std::vector<Value*>{init[0]}; });
      if (shuffles) {
        shuffle_block_parts(cb, part->result(0), lane, c[0], b_lo, b_hi, S, partial);
      } else {
        combine_block_parts(cb, strand_part, part->result(0), lane, c[0], b_lo, b_hi, per_chunk, S, partial);
      }
      return std::vector<Value*>{};
    });
  };
  return cooperative_superblocks(b, acc_policy, lane, plan,
                                 [&](ir::OpBuilder& sb, Value* b_lo, Value* b_hi) {
                                   if (strand_lanes) {
                                     block_sums_by_strands(sb, b_lo, b_hi);
                                     return;
                                   }
                                   tile::build_for(sb, index_op(sb, "add", b_lo, lane), b_hi, integer(sb, lanes), {},
                                                   [&](ir::OpBuilder& bb, std::span<Value* const> j) {
                                                     Value* r_lo = index_op(bb, "mul", j[0], block);
                                                     Value* r_hi = op2(bb, "min", length, index_op(bb, "add", r_lo, block));
                                                     Value* sum = block_sum(bb, r_lo, r_hi, acc_real(bb, 0.0), step);
                                                     bb.create("tile.store_elem", {partial, index_op(bb, "sub", j[0], b_lo), sum});
                                                     return std::vector<Value*>{};
                                                   });
                                 });
}

bool lane_shuffles(const ir::Operation& kernel) {
  return kernel_variant(kernel) != "tile_ir" &&
         (!kernel.attrs().has("lane_shuffles") || kernel.attrs().get_bool("lane_shuffles"));
}

std::vector<Value*> lane_tree(ir::OpBuilder& b, Value* lane, std::vector<Value*> values, std::int64_t width,
                              const FoldCombine& combine) {
  if (width < 1 || width > 32 || (width & (width - 1)) != 0) {
    raise(ErrorCode::Internal, "lane_tree over " + std::to_string(width) + " lanes; expected a power of two up to 32");
  }
  auto integer = [](ir::OpBuilder& ib, std::int64_t v) { return tile::build_int(ib, v); };
  for (std::int64_t m = 1; m < width; m *= 2) {
    std::vector<Value*> theirs;
    for (Value* v : values) theirs.push_back(tile::build(b, "tile.lane_shuffle", {v}, {{"xor", m}}));
    // This lane's half is the lower one: its values go on the left.
    Value* lower = cmp(b, "eq", op2(b, "rem", op2(b, "div", lane, integer(b, m)), integer(b, 2)), integer(b, 0));
    std::vector<Value*> lo, hi;
    for (std::size_t k = 0; k < values.size(); ++k) {
      lo.push_back(select(b, lower, values[k], theirs[k]));
      hi.push_back(select(b, lower, theirs[k], values[k]));
    }
    values = combine(b, lo, hi);
  }
  return values;
}

std::vector<Value*> blocked_sums_held(ir::OpBuilder& b, const NumericsPolicy& acc_policy, Value* lane, std::int64_t lanes,
                                      std::int64_t per_block, std::int64_t count, const StrandSum& strand_sum,
                                      const AtLaneZero& at_lane_zero, bool every_lane) {
  if (every_lane && at_lane_zero) raise(ErrorCode::Internal, "blocked_sums_held: a lane-0 hook with every_lane");
  const std::int64_t G = per_block;
  const std::vector<Value*> sums = strand_sum(b);
  const std::int64_t strands = count < 1 ? 0 : static_cast<std::int64_t>(sums.size()) / count;  // blocks per lane
  const std::int64_t blocks = G < 1 ? 0 : lanes * strands / G;
  if (strands < 1 || static_cast<std::int64_t>(sums.size()) != strands * count || G < 1 || kReductionStrands % G != 0 ||
      lanes % G != 0 || blocks > kReductionBlock) {
    raise(ErrorCode::Internal, "blocked_sums_held: " + std::to_string(lanes) + " lanes (" + std::to_string(G) +
                                   " a block) of " + std::to_string(sums.size()) + " strand sums of " +
                                   std::to_string(count) + " totals do not hold one superblock");
  }
  auto integer = [](ir::OpBuilder& ib, std::int64_t v) { return tile::build_int(ib, v); };
  auto acc_real = [&](ir::OpBuilder& ib, double v) { return tile::build_real(ib, v, acc_policy); };
  // Per total: its block sums, then the total.
  std::vector<Value*> partial;
  for (std::int64_t c = 0; c < count; ++c) partial.push_back(shared_array(b, acc_policy, blocks + 1));
  Value* zero = integer(b, 0);
  // Block-part k of lane t belongs to block (t + k L) / G: the G lanes of a
  // block combine their parts by the canonical tree's upper levels
  // (lane_tree: shuffles, no barrier), and the block's first lane writes
  // its sums.
  const std::vector<Value*> block_sums = lane_tree(b, lane, sums, G, add_each);
  const ir::AttrMap proven{{"in_bounds", true}};
  if_then(b, cmp(b, "eq", op2(b, "rem", lane, integer(b, G)), zero), [&](ir::OpBuilder& wb) {
    for (std::int64_t k = 0; k < strands; ++k) {
      Value* block = op2(wb, "div", index_op(wb, "add", lane, integer(wb, k * lanes)), integer(wb, G));
      for (std::int64_t c = 0; c < count; ++c) {
        wb.create("tile.store_elem", {partial[static_cast<std::size_t>(c)], block, block_sums[static_cast<std::size_t>(k * count + c)]},
                  proven);
      }
    }
  });
  b.create("tile.barrier", {});
  // Each total's block sums in order (one superblock), unrolled: the loads
  // are independent, only the adds wait on each other.
  auto in_order = [&](ir::OpBuilder& lb, Value* p) {
    Value* super = acc_real(lb, 0.0);
    for (std::int64_t j = 0; j < blocks; ++j) {
      super = op2(lb, "add", super, tile::build(lb, "tile.load_elem", {p, integer(lb, j)}, proven));
    }
    return op2(lb, "add", acc_real(lb, 0.0), super);
  };
  if (every_lane) {
    // Every lane reads the published block sums: no barrier after the
    // reads either (tile-plan-shared keeps the arrays' space until the
    // next barrier, which every lane reaches after reading).
    std::vector<Value*> totals;
    for (Value* p : partial) totals.push_back(in_order(b, p));
    return totals;
  }
  // Lane 0 adds them and publishes the totals behind a second barrier.
  if_then(b, cmp(b, "eq", lane, zero), [&](ir::OpBuilder& lb) {
    std::vector<Value*> totals;
    for (Value* p : partial) {
      totals.push_back(in_order(lb, p));
      lb.create("tile.store_elem", {p, integer(lb, blocks), totals.back()}, proven);
    }
    if (at_lane_zero) at_lane_zero(lb, totals);
  });
  b.create("tile.barrier", {});
  // No barrier after the reads: tile-plan-shared keeps the arrays' space
  // until the next barrier.
  std::vector<Value*> out;
  for (Value* p : partial) out.push_back(tile::build(b, "tile.load_elem", {p, integer(b, blocks)}, proven));
  return out;
}

Value* blocked_sum_cooperative_runs(ir::OpBuilder& b, Value* length, const NumericsPolicy& acc_policy,
                                    const SumStep& step, const RunSumStep& run_step, const RunPreload& preload,
                                    Value* lane, std::int64_t lanes, std::int64_t run, std::int64_t ahead,
                                    bool shuffles) {
  const std::int64_t S = kReductionStrands;
  const std::int64_t groups = S / run;  // lanes per block
  if (run < 1 || S % run != 0 || lanes % groups != 0) {
    raise(ErrorCode::Internal, "blocked_sum_cooperative_runs: runs of " + std::to_string(run) + " over " +
                                   std::to_string(lanes) + " lanes");
  }
  auto integer = [](ir::OpBuilder& ib, std::int64_t v) { return tile::build_int(ib, v); };
  auto acc_real = [&](ir::OpBuilder& ib, double v) { return tile::build_real(ib, v, acc_policy); };
  const Superblocks plan = plan_superblocks(b, length, acc_policy);
  Value* block = plan.block;
  Value* partial = plan.partial;
  Value* group_part = shuffles ? nullptr : shared_array(b, acc_policy, lanes);
  const std::int64_t per_chunk = lanes / groups;  // blocks at a time
  auto add = [](ir::OpBuilder& ab) { return [&ab](Value* x, Value* y) { return op2(ab, "add", x, y); }; };
  return cooperative_superblocks(
      b, acc_policy, lane, plan, [&](ir::OpBuilder& sb, Value* b_lo, Value* b_hi) {
        Value* my_block_offset = op2(sb, "div", lane, integer(sb, groups));
        Value* my_group = op2(sb, "rem", lane, integer(sb, groups));
        tile::build_for(sb, b_lo, b_hi, integer(sb, per_chunk), {}, [&](ir::OpBuilder& cb, std::span<Value* const> c) {
          Value* my_block = index_op(cb, "add", c[0], my_block_offset);
          std::vector<Value*> zeros(static_cast<std::size_t>(run));
          for (auto& z : zeros) z = acc_real(cb, 0.0);
          ir::Operation* part = tile::build_if(
              cb, cmp(cb, "lt", my_block, b_hi), {acc_real(cb, 0.0)},
              [&](ir::OpBuilder& ib, std::span<Value* const>) {
                Value* r_lo = index_op(ib, "mul", my_block, block);
                Value* r_hi = op2(ib, "min", length, index_op(ib, "add", r_lo, block));
                // This lane's runs: r_lo + (my_group + m * groups) * run.
                Value* first = index_op(ib, "add", r_lo, index_op(ib, "mul", my_group, integer(ib, run)));
                // A run past the block's end: its elements that exist, each into its strand.
                auto partial_run = [&](ir::OpBuilder& tb, Value* r0, std::vector<Value*> accs) {
                  for (std::int64_t k = 0; k < run; ++k) {
                    Value* r = op2(tb, "add", r0, integer(tb, k));
                    Value*& acc = accs[static_cast<std::size_t>(k)];
                    acc = tile::build_if(
                              tb, cmp(tb, "lt", r, r_hi), {acc},
                              [&](ir::OpBuilder& ob, std::span<Value* const> x) { return std::vector<Value*>{step(ob, r, x[0])}; },
                              [](ir::OpBuilder&, std::span<Value* const> x) { return std::vector<Value*>{x[0]}; })
                              ->result(0);
                  }
                  return accs;
                };
                auto whole = [&](ir::OpBuilder& wb, Value* r0, std::vector<Value*> accs) { return run_step(wb, r0, accs); };
                ir::Operation* strands =
                    run_loop(ib, first, r_hi, groups * run, run, ahead, zeros, preload, whole, partial_run);
                return std::vector<Value*>{pairwise_tree(strands->results(), add(ib))};
              },
              [](ir::OpBuilder&, std::span<Value* const> init) { return std::vector<Value*>{init[0]}; });
          if (shuffles) {
            shuffle_block_parts(cb, part->result(0), lane, c[0], b_lo, b_hi, groups, partial);
          } else {
            combine_block_parts(cb, group_part, part->result(0), lane, c[0], b_lo, b_hi, per_chunk, groups, partial);
          }
          return std::vector<Value*>{};
        });
      });
}

}  // namespace tessera::schedule::templates

