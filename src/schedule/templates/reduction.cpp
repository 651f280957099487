// The reduction template: graph.sum / mean / max / min / argmax and the
// elementwise consumers fused after it -> one Tile IR kernel with one lane
// per output element.
//
//   kernel(in_0.., out_0.., [d0.. output dims], x0.. reduced operand's dims)
//     o = group_id * T + linear_id;  if o < n:
//       base = the operand's offset of output element o (kept dims)
//       sum/mean: the canonical blocked order (lower_to_tile.h), three
//         nested loops (superblock, block, element) with one accumulator
//         each, every add at the accumulation type
//       max/min: a strand fold, and the reference's sequential pass
//         for rows where the order matters (a NaN, a zero extreme)
//       argmax: one sequential pass, as the reference (exact)
//       the consumers run per lane over the output domain (lane_program.h)
//
// Reduced elements are enumerated row-major over the reduced axes (RowIndex,
// row_loops.h).
//
// With the `row_lanes` knob L > 1 (CUDA executables), a sum or mean takes a
// group of L lanes per output element: blocked_sum_cooperative gives the
// same bits, and lane 0 runs the consumers and stores. max, min and argmax
// keep a lane per output element. With the `row_vector` knob V as well
// (CUDA executables; rows along the operand's last axis) a lane reads its
// strands in runs of V elements (blocked_sum_cooperative_runs, the same
// bits). Float sums and means over leading axes (the last axis kept) take
// the column form instead, on every target (column_sum below).
//
// graph.superblock_sums (split-long-sums, docs/design/0036) is a sum whose
// output element o is superblock o mod S of a row (over leading axes, the
// column form's lanes take them superblock-major); graph.superblock_total
// adds a row of superblock sums left to right.
//
// graph.block_sums (split-column-sums, docs/design/0039) takes a group per
// block of rows and run of columns (block_sums_form), and may compute its
// operand in a prologue: the elementwise ops before it in the kernel,
// evaluated at each element it reads, their other results stored there
// (prologue_loads / prologue_values / prologue_stores). graph.block_total
// adds a column's block sums by the canonical order's outer levels.
#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "graph/shape_rules.h"
#include "schedule/templates/lane_program.h"
#include "schedule/templates/row_loops.h"
#include "schedule/templates/templates.h"
#include "tessera/schedule/lower_to_tile.h"
#include "tessera/schedule/schedule_dialect.h"
#include "tessera/tile/tile_builder.h"

namespace tessera::schedule::templates {
namespace {

using ir::Type;
using ir::Value;

const NumericsPolicy kF64 = default_policy(DType::fp64);
// Runs a lane has in flight at once (blocked_sum_cooperative_runs). 8 fit
// 64 registers without spills too (runs stay codes until used,
// tsr::LoadedRun), but a [16384, 8192] sum to one value read 2631 GB/s
// with 8 against 2746 with 4 on an H200 (means of 8 rows: 2827 against
// 2922); one group alone (TESSERA_SPLIT_SUMS=0) gained from 8.
constexpr std::int64_t kRunsAhead = 4;
constexpr std::int64_t kResidentThreads = 1024;

std::vector<Value*> one(Value* v) {
  return {v};
}

// The largest power of two up to `most` that divides `n`: the adjacent
// columns a lane takes, so that its vector never crosses into the next row.
std::int64_t widest_vector(std::int64_t most, std::int64_t n) {
  std::int64_t v = most;
  while (v > 1 && n % v != 0) v /= 2;
  return std::max<std::int64_t>(v, 1);
}

class ReductionBuilder {
 public:
  ReductionBuilder(const ir::Operation& kernel, ir::Module& out, const std::string& name)
      : kernel_(kernel), body_(kernel_body(kernel)), root_(kernel_root_op(kernel)), out_(out), name_(name) {}

  TileKernel build() {
    const ir::Shape& domain = kernel_.attrs().get_shape("domain");
    const bool is_sum = root_.name() == "graph.sum" || root_.name() == "graph.mean" || superblocks();
    // Integer sums run the reference's sequential pass (its 2^53 check is
    // order-dependent), one lane per output element.
    const bool float_sum = is_sum && is_float(root_.operand(0)->type().dtype());
    row_lanes_ = (float_sum || total()) && kernel_.attrs().has("row_lanes") ? kernel_.attrs().get_int("row_lanes") : 1;
    const ir::Operation& yield = *body_.terminator();
    const std::size_t num_in = body_.num_arguments();
    const std::size_t num_out = yield.num_operands();
    const Value* operand = root_.operand(0);
    for (const auto& op : body_.ops()) {
      if (op.get() == &root_) break;
      if (op->name() != "graph.constant") prologue_.insert(op.get());
    }
    for (std::size_t j = 0; j < num_out; ++j) {
      if (prologue_.count(yield.operand(j)->defining_op())) prologue_outputs_.push_back(j);
    }
    // The operand buffer, or with a prologue an input of the operand's shape
    // (reduction_covers): its dims are the operand's.
    std::size_t x_index = 0;
    auto is_x = [&](const Value* a) { return prologue_.empty() ? a == operand : a->type().shape == operand->type().shape; };
    while (!is_x(body_.argument(x_index))) ++x_index;
    const std::size_t x_rank = operand->type().rank();
    axes_ = reduced_axes(root_);
    // Reduced axes that lead the operand's dims and leave the last one: the
    // reduced elements of consecutive outputs are consecutive in memory, so
    // float sums take the column form on every target (on one CPU core a
    // 4096^2 sum over axis 0 went from 104 to 37 ms: the lanes of a column
    // chunk share cache lines instead of each walking a whole column).
    bool leading = float_sum && !axes_.empty() && static_cast<std::size_t>(axes_.back()) + 1 < x_rank;
    for (std::size_t k = 0; leading && k < axes_.size(); ++k) leading = axes_[k] == static_cast<std::int64_t>(k);
    columns_ = leading;
    if (columns_) workers_ = column_workers();
    // Lanes per strand (the `column_strands` knob, B = 1 or 2): B blocks of
    // a column's row at a time, a lane per (block, strand, column). Their
    // adjacent columns (the `column_vector` knob: the most): the largest
    // power of two up to it that divides the output count, which must be
    // known, so a lane's vector never crosses into the next row.
    const std::int64_t strands_knob = kernel_.attrs().has("column_strands") ? kernel_.attrs().get_int("column_strands") : 0;
    const std::int64_t columns_knob = kernel_.attrs().has("column_vector") ? kernel_.attrs().get_int("column_vector") : 1;
    if (strands_knob < 0 || strands_knob > 2 || (columns_knob != 1 && columns_knob != 2 && columns_knob != 4 && columns_knob != 8)) {
      raise(ErrorCode::ArgumentInvalid, "reduction kernel with column_strands " + std::to_string(strands_knob) +
                                            " and column_vector " + std::to_string(columns_knob) +
                                            "; expected 0 to 2 and 1, 2, 4 or 8",
            kernel_.location());
    }
    if (columns_ && !superblocks()) strand_blocks_ = strands_knob;
    // Strand lanes divide the output count, block sums the row.
    if (strand_lanes()) {
      if (const auto sizes = ir::static_sizes(domain)) {
        std::int64_t outputs = 1;
        for (std::int64_t d : *sizes) outputs *= d;
        column_vector_ = widest_vector(columns_knob, outputs);
      }
    }
    if (block_sums() && !domain.back().is_symbolic()) column_vector_ = widest_vector(columns_knob, domain.back().size);
    const bool coop = row_lanes_ > 1 && !columns_;
    // Runs (the `row_vector` knob, docs/design/0018): a cooperative row along
    // the operand's last axis, in whole strand groups (sums; a superblock total
    // reads its row through shared memory).
    if (coop && !total() && kernel_.attrs().has("row_vector") && axes_.back() + 1 == static_cast<std::int64_t>(x_rank) &&
        axes_.back() - axes_.front() + 1 == static_cast<std::int64_t>(axes_.size())) {
      run_ = kernel_.attrs().get_int("row_vector");
      if (kReductionStrands % run_ != 0 || row_lanes_ % (kReductionStrands / run_) != 0) run_ = 1;
    }
    const std::int64_t lanes = block_sums()      ? kColumns * kReductionStrands
                               : strand_lanes() ? kColumns * kReductionStrands * strand_blocks_
                               : columns_ ? kColumns * workers_
                               : coop   ? row_lanes_
                                        : (kernel_.attrs().has("tile") ? kernel_.attrs().get_ints("tile").at(0) : 64);

    std::vector<std::pair<std::string, Type>> params;
    bool any_broadcast = false;
    for (std::size_t k = 0; k < num_in; ++k) {
      const Type& t = body_.argument(k)->type();
      params.emplace_back("in" + std::to_string(k),
                          Type::gmem({ir::Dim::named("m" + std::to_string(k))}, buffer_policy(t.policy)));
      if (k != x_index) any_broadcast = any_broadcast || broadcasts(body_.argument(k), domain);
    }
    for (std::size_t j = 0; j < num_out; ++j) {
      // A prologue's output has the operand's elements, not the n outputs.
      const std::string count = prologue_output(j) ? "p" + std::to_string(j) : "n";
      params.emplace_back("out" + std::to_string(j),
                          Type::gmem({ir::Dim::named(count)}, buffer_policy(yield.operand(j)->type().policy), /*is_mut=*/true));
    }
    TileKernel result;
    for (std::size_t d = 0; any_broadcast && d < domain.size(); ++d) {
      params.emplace_back("d" + std::to_string(d), Type::lane(DType::int64));
      result.scalars.push_back(KernelScalar{KernelScalar::Kind::dim, d});
    }
    for (std::size_t d = 0; d < x_rank; ++d) {
      params.emplace_back("x" + std::to_string(d), Type::lane(DType::int64));
      result.scalars.push_back(KernelScalar{KernelScalar::Kind::input_dim, d, x_index});
    }
    if (root_.name() != "graph.sum" && root_.name() != "graph.mean" && !superblocks() && !total() && !block_total() &&
        !block_sums()) {
      for (auto a : axes_) result.nonempty_dims.emplace_back(x_index, static_cast<std::size_t>(a));
    }
    tile::KernelOptions options{.group_shape = std::vector<std::int64_t>{lanes}};
    // Block sums and the slot, and one strand partial per lane (row_loops.h).
    if (coop) options.shared_bytes = (total() ? kTotalChunk : kReductionBlock + 1 + row_lanes_) * 8;
    // Rows in runs: registers capped for 1024 threads per multiprocessor
    // (64 each, 8 groups of 128 lanes), more loads in flight than the 7
    // groups ptxas fit otherwise, and 2048 superblock groups of a
    // [16384, 8192] sum then fill two whole waves of an H200's 132.
    if (coop && run_ > 1) options.resident_groups = std::max<std::int64_t>(1, kResidentThreads / row_lanes_);
    if (columns_) options.shared_bytes = kColumnChunk * kColumns * 8;
    if (strand_lanes()) options.shared_bytes = strand_blocks_ * kReductionStrands * kColumns * column_vector_ * 8;
    if (block_sums()) options.shared_bytes = kReductionStrands * kColumns * column_vector_ * 8;
    ir::Operation* func = tile::build_kernel(out_, name_, params, options, kernel_.location());
    ir::Block& fb = ir::function_body(*func);
    ir::OpBuilder b(fb);
    std::vector<Value*> dims;
    std::size_t next = num_in + num_out;
    for (std::size_t d = 0; any_broadcast && d < domain.size(); ++d) dims.push_back(fb.argument(next++));
    for (std::size_t d = 0; d < x_rank; ++d) xdims_.push_back(fb.argument(next++));
    x_ = fb.argument(x_index);
    for (std::size_t k = 0; k < num_in + num_out; ++k) args_.push_back(fb.argument(k));

    Value* gid = tile::build(b, "tile.group_id", {});
    Value* lid = tile::build(b, "tile.linear_id", {});
    lid_ = lid;
    Value* o = coop       ? gid
               : columns_ ? op2(b, "add", op2(b, "mul", gid, tile::build_int(b, kColumns * column_vector_)),
                                op2(b, "mul", op2(b, "rem", lid, tile::build_int(b, kColumns)),
                                    tile::build_int(b, column_vector_)))
                          : op2(b, "add", op2(b, "mul", gid, tile::build_int(b, lanes)), lid);
    Value* n = tile::build(b, "tile.symbol", {}, {{"name", std::string("n")}});
    // Superblock sums in the column form: lane index q = s * C + c
    // (superblock-major, so a warp's lanes read consecutive columns of one
    // superblock), stored at output element c * S + s.
    Value* q = o;
    Value* column = nullptr;
    Value* super_index = nullptr;
    if (columns_ && superblocks()) {
      Value* per_column = tile::build_int(b, root_.result(0)->type().shape.back().size);
      Value* columns = op2(b, "div", n, per_column);
      column = op2(b, "rem", q, columns);
      super_index = op2(b, "div", q, columns);
      o = op2(b, "add", op2(b, "mul", column, per_column), super_index);
    }
    o_ = o;
    LaneProgram lanes_of(domain, o, dims);
    for (std::size_t k = 0; k < num_in; ++k) lanes_of.bind_input(body_.argument(k), fb.argument(k));
    auto consume_at = [&](ir::OpBuilder& then, LaneProgram& program, Value* at, LaneValue reduced) {
      program.bind_value(root_.result(0), reduced);
      // Splat constants copied in before the root feed the consumers.
      for (const auto& op : body_.ops()) {
        if (op.get() == body_.terminator()) break;
        if (op.get() != &root_ && !prologue_.count(op.get())) program.lower_op(then, *op);
      }
      for (std::size_t j = 0; j < num_out; ++j) {
        if (prologue_output(j)) continue;
        then.create("tile.store_elem", {fb.argument(num_in + j), at, program.value(then, yield.operand(j)).stored});
      }
    };
    auto consume = [&](ir::OpBuilder& then, LaneValue reduced) { consume_at(then, lanes_of, o, reduced); };
    if (block_sums()) {
      result.row_tiled = true;
      block_sums_form(b, gid);
    } else if (columns_) {
      // kColumns outputs per group; the lanes of a column share its sum
      // under uniform control flow, and its first lane finishes.
      rows_.emplace(b, x_, xdims_, axes_, superblocks() ? column : o);
      if (superblocks()) window_superblock(b, super_index);
      length_ = rows_->length();
      Value* valid = cmp(b, "lt", q, n);
      const std::vector<Value*> sums = short_columns()   ? std::vector<Value*>{short_column_sum(b, valid)}
                                       : strand_lanes()   ? strand_lane_column_sum(b, valid)
                                                          : std::vector<Value*>{column_sum(b, valid)};
      Value* first = cmp(b, "lt", lid, tile::build_int(b, kColumns));
      if_then(b, op2(b, "and", first, valid), [&](ir::OpBuilder& then) {
        for (std::size_t c = 0; c < sums.size(); ++c) {
          // Column o + c: its own lane program (consumers, stochastic draws).
          Value* oc = c == 0 ? o : op2(then, "add", o, tile::build_int(then, static_cast<std::int64_t>(c)));
          LaneProgram lanes_c(domain, oc, dims);
          for (std::size_t k = 0; k < num_in; ++k) lanes_c.bind_input(body_.argument(k), fb.argument(k));
          LaneProgram& lp = c == 0 ? lanes_of : lanes_c;
          o_ = oc;
          Value* x = cast(then, sums[c], kF64);
          if (root_.name() == "graph.mean") x = op2(then, "div", x, cast(then, length_, kF64));
          consume_at(then, lp, oc, finish_root(then, lp, x, root_.result(0)->type().policy, /*via_accum=*/true));
        }
        o_ = o;
      });
    } else if (coop) {
      // A group per output element (the executable launches exactly n): the
      // lanes share the sum under uniform control flow, lane 0 finishes.
      result.group_per_row = true;
      make_rows(b, o);
      const LaneValue reduced = reduce(b, lanes_of);
      if_then(b, cmp(b, "eq", lid, tile::build_int(b, 0)), [&](ir::OpBuilder& then) { consume(then, reduced); });
    } else {
      if_then(b, cmp(b, "lt", o, n), [&](ir::OpBuilder& then) {
        make_rows(then, o);
        // Reducing the last axis, the next lane's row follows this one:
        // ask for it now (a CPU hint, see the normalization template).
        if (axes_.size() == 1 && static_cast<std::size_t>(axes_[0]) + 1 == x_rank) {
          then.create("tile.prefetch", {x_, rows_->offset(then, rows_->length()), rows_->length()});
        }
        consume(then, reduce(then, lanes_of));
      });
    }
    tile::finish_kernel(*func);
    result.func = func;
    result.lanes_per_group = columns_ || block_sums() ? kColumns * column_vector_ : lanes;
    return result;
  }

 private:
  // graph.superblock_sums: output element o is superblock o mod S of the
  // sum's output element o / S. graph.superblock_total: the sequential
  // outer level over them.
  bool superblocks() const { return root_.name() == "graph.superblock_sums"; }
  bool total() const { return root_.name() == "graph.superblock_total"; }
  bool block_sums() const { return root_.name() == "graph.block_sums"; }
  bool block_total() const { return root_.name() == "graph.block_total"; }

  // graph.block_sums (docs/design/0039): a group per block of rows and run
  // of kColumns x column_vector_ columns (row-tiled over the [blocks,
  // columns] result); lane (s, c) sums strand s of the block's rows of its
  // columns (strand_sum), and the first warp combines each column's strands
  // by the pairwise tree and stores the block sum.
  void block_sums_form(ir::OpBuilder& b, Value* gid) {
    const NumericsPolicy acc_policy = sum_policy();
    const std::int64_t cv = column_vector_;
    auto integer = [](ir::OpBuilder& ib, std::int64_t v) { return tile::build_int(ib, v); };
    Value* cols = xdims_.at(1);
    Value* run = integer(b, kColumns * cv);
    Value* chunks = op2(b, "div", index_op(b, "add", cols, integer(b, kColumns * cv - 1)), run);
    Value* blk = op2(b, "div", gid, chunks);
    Value* column = op2(b, "rem", lid_, integer(b, kColumns));
    Value* col0 = index_op(b, "add", index_op(b, "mul", op2(b, "rem", gid, chunks), run), index_op(b, "mul", column, integer(b, cv)));
    Value* strand = op2(b, "div", lid_, integer(b, kColumns));
    o_ = col0;
    rows_.emplace(b, x_, xdims_, axes_, col0);
    length_ = rows_->length();
    Value* valid = cmp(b, "lt", col0, cols);
    Value* parts = shared_array(b, acc_policy, kReductionStrands * kColumns * cv);
    auto part = [&](ir::OpBuilder& ib, Value* st, std::int64_t c) {
      Value* cell = index_op(ib, "add", index_op(ib, "mul", st, integer(ib, kColumns)), column);
      return index_op(ib, "add", index_op(ib, "mul", cell, integer(ib, cv)), integer(ib, c));
    };
    auto part_of_strand = [&](std::int64_t c) {
      return [&, c](ir::OpBuilder& ib, std::int64_t st) { return part(ib, integer(ib, st), c); };
    };
    if_then(b, valid, [&](ir::OpBuilder& vb) {
      const std::vector<Value*> sums = strand_sum(vb, blk, strand);
      for (std::int64_t c = 0; c < cv; ++c) vb.create("tile.store_elem", {parts, part(vb, strand, c), sums[static_cast<std::size_t>(c)]});
    });
    b.create("tile.barrier", {});
    const ir::Operation& yield = *body_.terminator();
    std::size_t j = 0;
    while (yield.operand(j) != root_.result(0)) ++j;
    Value* out = args_.at(body_.num_arguments() + j);
    if_then(b, op2(b, "and", cmp(b, "lt", lid_, integer(b, kColumns)), valid), [&](ir::OpBuilder& fb) {
      Value* at = index_op(fb, "add", index_op(fb, "mul", blk, cols), col0);
      for (std::int64_t c = 0; c < cv; ++c) {
        Value* sum = strands_tree(fb, parts, part_of_strand(c));
        fb.create("tile.store_elem", {out, c == 0 ? at : index_op(fb, "add", at, integer(fb, c)), sum}, {{"in_bounds", true}});
      }
    });
  }

  // graph.block_total: the lane's column of block sums by the canonical
  // order's outer levels, superblocks of kReductionBlock blocks from zero
  // and their sums from zero.
  Value* column_block_total(ir::OpBuilder& b) {
    const NumericsPolicy acc_policy = sum_policy();
    auto integer = [](ir::OpBuilder& ib, std::int64_t v) { return tile::build_int(ib, v); };
    Value* zero = tile::build_real(b, 0.0, acc_policy);
    Value* block = integer(b, kReductionBlock);
    Value* num_super = op2(b, "div", index_op(b, "add", length_, integer(b, kReductionBlock - 1)), block);
    ir::Operation* outer = tile::build_for(b, integer(b, 0), num_super, integer(b, 1), {zero}, [&](ir::OpBuilder& sb, std::span<Value* const> s) {
      Value* lo = index_op(sb, "mul", s[0], block);
      Value* hi = op2(sb, "min", length_, index_op(sb, "add", lo, block));
      ir::Operation* inner = tile::build_for(sb, lo, hi, integer(sb, 1), {tile::build_real(sb, 0.0, acc_policy)},
                                             [&](ir::OpBuilder& lb, std::span<Value* const> k) {
                                               return one(op2(lb, "add", k[1], cast(lb, rows_->load(lb, k[0], /*in_bounds=*/true), acc_policy)));
                                             });
      return one(op2(sb, "add", s[1], inner->result(0)));
    });
    return outer->result(0);
  }

  // The reduced elements of output element o.
  void make_rows(ir::OpBuilder& b, Value* o) {
    if (!superblocks()) {
      rows_.emplace(b, x_, xdims_, axes_, o);
      return;
    }
    const ir::Shape& out = root_.result(0)->type().shape;
    Value* per_row = tile::build_int(b, out.back().size);
    rows_.emplace(b, x_, xdims_, axes_, op2(b, "div", o, per_row));
    window_superblock(b, op2(b, "rem", o, per_row));
  }
  // Narrows rows_ to its superblock s.
  void window_superblock(ir::OpBuilder& b, Value* s) {
    Value* super = tile::build_int(b, kReductionBlock * kReductionBlock);
    Value* first = index_op(b, "mul", s, super);
    rows_->window(b, first, op2(b, "min", super, index_op(b, "sub", rows_->length(), first)));
  }

  // graph.superblock_total's sum: the row's superblock sums left to right
  // from zero (blocked_sum's outer loop). A group sharing the row (row_lanes)
  // loads kTotalChunk of them at a time into shared memory, every lane a few
  // and all at once, and lane 0 adds them in order (add_in_order): one lane
  // loading each in turn waited a memory latency per superblock (2048 of
  // them for a sum of [16384, 8192]). Lane 0's value is the sum.
  static constexpr std::int64_t kTotalChunk = 1024;
  Value* superblock_total(ir::OpBuilder& b) {
    const NumericsPolicy acc_policy = sum_policy();
    auto integer = [](ir::OpBuilder& ib, std::int64_t v) { return tile::build_int(ib, v); };
    Value* zero = tile::build_real(b, 0.0, acc_policy);
    if (row_lanes_ == 1) {
      return tile::build_for(b, integer(b, 0), length_, integer(b, 1), {zero}, [&](ir::OpBuilder& lb, std::span<Value* const> a) {
               return one(sum_step(acc_policy)(lb, a[0], a[1]));
             })->result(0);
    }
    Value* chunk = shared_array(b, acc_policy, kTotalChunk);
    Value* first_lane = cmp(b, "eq", lid_, integer(b, 0));
    return tile::build_for(
               b, integer(b, 0), length_, integer(b, kTotalChunk), {zero},
               [&](ir::OpBuilder& cb, std::span<Value* const> c) {
                 Value* c_hi = op2(cb, "min", length_, index_op(cb, "add", c[0], integer(cb, kTotalChunk)));
                 tile::build_for(cb, index_op(cb, "add", c[0], lid_), c_hi, integer(cb, row_lanes_), {},
                                 [&](ir::OpBuilder& lb, std::span<Value* const> r) {
                                   Value* v = cast(lb, rows_->load(lb, r[0], /*in_bounds=*/true), acc_policy);
                                   lb.create("tile.store_elem", {chunk, index_op(lb, "sub", r[0], c[0]), v});
                                   return std::vector<Value*>{};
                                 });
                 cb.create("tile.barrier", {});
                 ir::Operation* folded = tile::build_if(
                     cb, first_lane, {c[1]},
                     [&](ir::OpBuilder& fb, std::span<Value* const> init) {
                       return one(add_in_order(fb, chunk, index_op(fb, "sub", c_hi, c[0]), init[0]));
                     },
                     [](ir::OpBuilder&, std::span<Value* const> init) { return std::vector<Value*>{init[0]}; });
                 // Lane 0 has read the chunk before the next one is written.
                 cb.create("tile.barrier", {});
                 return std::vector<Value*>{folded->result(0)};
               })
        ->result(0);
  }

  // The column form (float sums over leading axes): a group
  // of kColumns x W lanes takes kColumns consecutive outputs, lane t
  // working on column t mod kColumns (a warp reads kColumns consecutive
  // elements of a row at once) as worker t / kColumns. Workers take a
  // superblock's blocks in turn, kColumnChunk at a time: each block sum is
  // block_sum's (the canonical strands and tree) and goes to shared memory;
  // the column's first lane then adds them in block order onto the
  // superblock's sum, and the superblock sums onto the total: the bits of
  // blocked_sum. Every lane returns; the first lanes' values are the sums.
  static constexpr std::int64_t kColumns = 32;
  static constexpr std::int64_t kColumnChunk = 64;

  // Workers per column: one per block of the reduced length when it is
  // known, a power of two up to 32 (1024 lanes): an H200 needs that many
  // loads in flight, and a bias gradient of [8192, 4096] has only 128
  // groups (8 workers per column read at 280 GB/s there).
  std::int64_t column_workers() const {
    const std::optional<std::int64_t> reduced = static_reduced_length();
    if (!reduced) return 32;
    const std::int64_t blocks = (*reduced + kReductionBlock - 1) / kReductionBlock;
    std::int64_t workers = 1;
    while (workers < 32 && workers < blocks) workers *= 2;
    return workers;
  }

  bool strand_lanes() const { return strand_blocks_ > 0; }
  // The reduced length when every reduced dim is known.
  std::optional<std::int64_t> static_reduced_length() const {
    std::int64_t reduced = 1;
    for (std::int64_t a : axes_) {
      const ir::Dim& d = root_.operand(0)->type().shape[static_cast<std::size_t>(a)];
      if (d.is_symbolic()) return std::nullopt;
      reduced *= d.size;
    }
    return reduced;
  }
  // One zero accumulator per column of a lane.
  std::vector<Value*> column_zeros(ir::OpBuilder& b, const NumericsPolicy& acc_policy) const {
    return std::vector<Value*>(static_cast<std::size_t>(column_vector_), tile::build_real(b, 0.0, acc_policy));
  }
  // A block's sum from its kReductionStrands strand sums in shared array
  // `parts` (strand st at cell(b, st)): the canonical pairwise tree.
  static Value* strands_tree(ir::OpBuilder& b, Value* parts,
                             const std::function<Value*(ir::OpBuilder&, std::int64_t)>& cell) {
    std::vector<Value*> level;
    for (std::int64_t st = 0; st < kReductionStrands; ++st) level.push_back(tile::build(b, "tile.load_elem", {parts, cell(b, st)}));
    return pairwise_tree(std::move(level), [&](Value* x, Value* y) { return op2(b, "add", x, y); });
  }
  // An if's branch that passes its values through.
  static std::vector<Value*> unchanged(ir::OpBuilder&, std::span<Value* const> values) {
    return std::vector<Value*>(values.begin(), values.end());
  }
  // running[c] + op's result c, for each c: a level's sums onto the next's.
  static std::vector<Value*> added(ir::OpBuilder& b, std::span<Value* const> running, const ir::Operation& op) {
    std::vector<Value*> out;
    for (std::size_t c = 0; c < running.size(); ++c) out.push_back(op2(b, "add", running[c], op.result(c)));
    return out;
  }

  // Columns known to hold at most kReductionStrands elements: the canonical
  // order is then one block whose strands hold an element each (or none),
  // so a column's sum is that fixed expression, written out: strand s =
  // 0 + x_s, the pairwise tree over the 16 strands (zeros past the
  // column), then the outer levels' 0 + (0 + block). The same adds, in the
  // same order, as column_sum's loops, without their blocks, shared memory
  // and barriers: a lane per column, straight-line (a bias gradient's
  // [2, 512, 128] sum over axis 0 took 1.5 ms on the CPU in the loop form).
  bool short_columns() const {
    if (!columns_ || superblocks() || strand_lanes()) return false;
    const std::optional<std::int64_t> n = static_sum_length(root_);
    return n && *n >= 1 && *n <= kReductionStrands;
  }
  // Only lanes of an existing column (`valid`) read it; the others give 0.
  Value* short_column_sum(ir::OpBuilder& b, Value* valid) {
    const NumericsPolicy acc_policy = sum_policy();
    const SumStep step = sum_step(acc_policy);
    const std::int64_t n = *static_sum_length(root_);
    ir::Operation* sum = tile::build_if(
        b, valid, {tile::build_real(b, 0.0, acc_policy)},
        [&](ir::OpBuilder& vb, std::span<Value* const>) {
          Value* zero = tile::build_real(vb, 0.0, acc_policy);
          std::vector<Value*> strands;
          for (std::int64_t r = 0; r < kReductionStrands; ++r) {
            strands.push_back(r < n ? step(vb, tile::build_int(vb, r), zero) : zero);
          }
          Value* block = pairwise_tree(std::move(strands), [&](Value* x, Value* y) { return op2(vb, "add", x, y); });
          return std::vector<Value*>{op2(vb, "add", zero, op2(vb, "add", zero, block))};
        },
        unchanged);
    return sum->result(0);
  }

  Value* column_sum(ir::OpBuilder& b, Value* valid) {
    const NumericsPolicy acc_policy = sum_policy();
    auto integer = [](ir::OpBuilder& ib, std::int64_t v) { return tile::build_int(ib, v); };
    auto zero = [&](ir::OpBuilder& ib) { return tile::build_real(ib, 0.0, acc_policy); };
    const SumStep step = sum_step(acc_policy);
    Value* column = op2(b, "rem", lid_, integer(b, kColumns));
    Value* worker = op2(b, "div", lid_, integer(b, kColumns));
    Value* first = cmp(b, "eq", worker, integer(b, 0));
    Value* partial = shared_array(b, acc_policy, kColumnChunk * kColumns);
    Value* block = integer(b, kReductionBlock);
    auto ceil_div = [&](Value* a) { return op2(b, "div", index_op(b, "add", a, integer(b, kReductionBlock - 1)), block); };
    Value* num_blocks = ceil_div(length_);
    // A superblock sum's lanes may hold different superblocks (the last one
    // shorter) or none: the loops with barriers run one whole superblock's
    // chunks in every lane, each lane's blocks bounded by its own window.
    Value* num_super = superblocks() ? integer(b, 1) : ceil_div(num_blocks);
    ir::Operation* outer = tile::build_for(b, integer(b, 0), num_super, integer(b, 1), {zero(b)}, [&](ir::OpBuilder& sb, std::span<Value* const> s) {
      Value* b_lo = index_op(sb, "mul", s[0], block);
      Value* b_hi = op2(sb, "min", num_blocks, index_op(sb, "add", b_lo, block));
      Value* b_end = superblocks() ? index_op(sb, "add", b_lo, block) : b_hi;
      ir::Operation* chunks = tile::build_for(sb, b_lo, b_end, integer(sb, kColumnChunk), {zero(sb)}, [&](ir::OpBuilder& cb, std::span<Value* const> c) {
        Value* c_hi = op2(cb, "min", b_hi, index_op(cb, "add", c[0], integer(cb, kColumnChunk)));
        if_then(cb, valid, [&](ir::OpBuilder& vb) {
          tile::build_for(vb, index_op(vb, "add", c[0], worker), c_hi, integer(vb, workers_), {},
                          [&](ir::OpBuilder& kb, std::span<Value* const> k) {
                            Value* r_lo = index_op(kb, "mul", k[0], block);
                            Value* r_hi = op2(kb, "min", length_, index_op(kb, "add", r_lo, block));
                            Value* at = index_op(kb, "add", index_op(kb, "mul", index_op(kb, "sub", k[0], c[0]), integer(kb, kColumns)), column);
                            kb.create("tile.store_elem", {partial, at, block_sum(kb, r_lo, r_hi, zero(kb), step)});
                            return std::vector<Value*>{};
                          });
        });
        cb.create("tile.barrier", {});
        ir::Operation* folded = tile::build_if(
            cb, op2(cb, "and", first, valid), {c[1]},
            [&](ir::OpBuilder& fb, std::span<Value* const> init) {
              ir::Operation* fold = tile::build_for(
                  fb, integer(fb, 0), index_op(fb, "sub", c_hi, c[0]), integer(fb, 1), {init[0]},
                  [&](ir::OpBuilder& kb, std::span<Value* const> k) {
                    Value* at = index_op(kb, "add", index_op(kb, "mul", k[0], integer(kb, kColumns)), column);
                    return std::vector<Value*>{op2(kb, "add", k[1], tile::build(kb, "tile.load_elem", {partial, at}))};
                  });
              return std::vector<Value*>{fold->result(0)};
            },
            unchanged);
        // The first lanes have read the chunk before the next one is written.
        cb.create("tile.barrier", {});
        return std::vector<Value*>{folded->result(0)};
      });
      return std::vector<Value*>{op2(sb, "add", s[1], chunks->result(0))};
    });
    return outer->result(0);
  }

  // The column form with a lane per strand (`column_strands` = B, CUDA's
  // default 2): a group of kColumns x kReductionStrands x B lanes takes B
  // blocks of its columns' rows at a time;
  // lane (j, s, c) sums strand s of block j of its columns (rows s, s + 16,
  // .. of the block, left to right from zero), its 16 loads written out in
  // line so they are in flight together. The first warp then combines each
  // block's strands by the pairwise tree and adds the block sums in block
  // order onto the superblock's sum, and the superblock sums onto the
  // total: the bits of blocked_sum, as in column_sum.
  std::vector<Value*> strand_lane_column_sum(ir::OpBuilder& b, Value* valid) {
    const NumericsPolicy acc_policy = sum_policy();
    const std::int64_t cols = column_vector_;
    const auto ncols = static_cast<std::size_t>(cols);
    auto integer = [](ir::OpBuilder& ib, std::int64_t v) { return tile::build_int(ib, v); };
    auto zeros = [&](ir::OpBuilder& ib) { return column_zeros(ib, acc_policy); };
    Value* column = op2(b, "rem", lid_, integer(b, kColumns));
    Value* strand = op2(b, "rem", op2(b, "div", lid_, integer(b, kColumns)), integer(b, kReductionStrands));
    Value* slot_block = op2(b, "div", lid_, integer(b, kColumns * kReductionStrands));
    Value* first = cmp(b, "lt", lid_, integer(b, kColumns));
    Value* parts = shared_array(b, acc_policy, strand_blocks_ * kReductionStrands * kColumns * cols);
    auto part = [&](ir::OpBuilder& ib, Value* j, Value* st, std::size_t c) {
      Value* cell = index_op(ib, "add", index_op(ib, "mul", index_op(ib, "add", index_op(ib, "mul", j, integer(ib, kReductionStrands)), st),
                                                 integer(ib, kColumns)),
                             column);
      return index_op(ib, "add", index_op(ib, "mul", cell, integer(ib, cols)), integer(ib, static_cast<std::int64_t>(c)));
    };
    Value* block = integer(b, kReductionBlock);
    auto ceil_div = [&](Value* a) { return op2(b, "div", index_op(b, "add", a, integer(b, kReductionBlock - 1)), block); };
    Value* num_blocks = ceil_div(length_);
    Value* num_super = ceil_div(num_blocks);
    ir::Operation* outer = tile::build_for(b, integer(b, 0), num_super, integer(b, 1), zeros(b), [&](ir::OpBuilder& sb, std::span<Value* const> sup) {
      Value* b_lo = index_op(sb, "mul", sup[0], block);
      Value* b_hi = op2(sb, "min", num_blocks, index_op(sb, "add", b_lo, block));
      ir::Operation* passes = tile::build_for(sb, b_lo, b_hi, integer(sb, strand_blocks_), zeros(sb), [&](ir::OpBuilder& pb, std::span<Value* const> k0) {
        Value* k = index_op(pb, "add", k0[0], slot_block);
        if_then(pb, op2(pb, "and", valid, cmp(pb, "lt", k, b_hi)), [&](ir::OpBuilder& vb) {
          const std::vector<Value*> sums = strand_sum(vb, k, strand);
          for (std::size_t c = 0; c < ncols; ++c) vb.create("tile.store_elem", {parts, part(vb, slot_block, strand, c), sums[c]});
        });
        pb.create("tile.barrier", {});
        // The first warp: each block's tree, then its sum onto the superblock's.
        ir::Operation* folded = tile::build_if(
            pb, op2(pb, "and", first, valid), std::vector<Value*>(k0.begin() + 1, k0.end()),
            [&](ir::OpBuilder& fb, std::span<Value* const> running) {
              std::vector<Value*> acc(running.begin(), running.end());
              for (std::int64_t j = 0; j < strand_blocks_; ++j) {
                ir::Operation* added = tile::build_if(
                    fb, cmp(fb, "lt", index_op(fb, "add", k0[0], integer(fb, j)), b_hi), acc,
                    [&](ir::OpBuilder& tb, std::span<Value* const> before) {
                      std::vector<Value*> out;
                      for (std::size_t c = 0; c < ncols; ++c) {
                        Value* block_total = strands_tree(tb, parts, [&](ir::OpBuilder& ib, std::int64_t st) {
                          return part(ib, integer(ib, j), integer(ib, st), c);
                        });
                        out.push_back(op2(tb, "add", before[c], block_total));
                      }
                      return out;
                    },
                    unchanged);
                acc = added->results();
              }
              return acc;
            },
            unchanged);
        // The first warp has read the pass's strands before the next pass writes them.
        pb.create("tile.barrier", {});
        return folded->results();
      });
      return added(sb, sup.subspan(1), *passes);
    });
    return outer->results();
  }

  // Strand `strand` of block k of the lane's columns (column_vector_ of
  // them from o_): rows k * kReductionBlock + strand, + kReductionStrands, ..
  // summed left to right from zero, one sum per column, the block's
  // loads (or prologue elements) written out in line so they are in flight
  // together.
  std::vector<Value*> strand_sum(ir::OpBuilder& lb, Value* k, Value* strand) {
    const NumericsPolicy acc_policy = sum_policy();
    const auto ncols = static_cast<std::size_t>(column_vector_);
    auto integer = [](ir::OpBuilder& ib, std::int64_t v) { return tile::build_int(ib, v); };
    Value* block = integer(lb, kReductionBlock);
    // Whole blocks only (a known length, a multiple of the block): no row
    // of a strand needs its bounds test.
    const std::optional<std::int64_t> reduced = static_reduced_length();
    const bool whole_blocks = reduced && *reduced > 0 && *reduced % kReductionBlock == 0;
    Value* r_lo = index_op(lb, "add", index_op(lb, "mul", k, block), strand);
    Value* r_hi = op2(lb, "min", length_, index_op(lb, "add", index_op(lb, "mul", k, block), block));
    Value* last_row = index_op(lb, "sub", length_, integer(lb, 1));
    std::vector<std::vector<Value*>> loaded;
    std::vector<Value*> in_row;
    std::vector<PrologueRun> runs;
    for (std::int64_t i = 0; i < kReductionBlock / kReductionStrands; ++i) {
      Value* r = index_op(lb, "add", r_lo, integer(lb, i * kReductionStrands));
      if (!whole_blocks) {
        in_row.push_back(cmp(lb, "lt", r, r_hi));
        r = op2(lb, "min", r, last_row);  // a row that exists; its value is not added
      }
      if (!prologue_.empty()) {
        runs.push_back(prologue_loads(lb, r));
      } else if (ncols == 1) {
        loaded.push_back({rows_->load(lb, r, /*in_bounds=*/true)});
      } else {
        ir::Operation* run = lb.create("tile.load_vector", {x_, rows_->offset(lb, r)}, {{"count", column_vector_}});
        loaded.push_back(run->results());
      }
    }
    for (PrologueRun& run : runs) loaded.push_back(prologue_values(lb, run));
    for (const PrologueRun& run : runs) prologue_stores(lb, run);
    std::vector<Value*> acc = column_zeros(lb, acc_policy);
    for (std::size_t i = 0; i < loaded.size(); ++i) {
      for (std::size_t c = 0; c < ncols; ++c) {
        Value* next = op2(lb, "add", acc[c], cast(lb, loaded[i][c], acc_policy));
        acc[c] = whole_blocks ? next : select(lb, in_row[i], next, acc[c]);
      }
    }
    return acc;
  }

  Value* load(ir::OpBuilder& b, Value* r) { return rows_->load(b, r); }

  // A block-sums prologue (docs/design/0039) at row r of the lane's
  // column_vector_ columns from o_ (a run inside the row: the vector divides
  // it), in three phases that strand_sum runs for all of a strand's rows in
  // turn: every row's loads, then every row's values, then every row's
  // stores. Stores first would hold later loads behind them (the compiler
  // cannot tell the buffers apart), leaving one row's loads in flight.
  struct PrologueRun {
    Value* r = nullptr;
    Value* at = nullptr;                        // the flat offset of the run's first element
    std::vector<std::vector<Value*>> loaded;     // per input: its run, or empty (read per element)
    std::vector<std::vector<Value*>> stored;     // per prologue output: the run's stored values
  };
  // Inputs laid out along the row (the operand's shape, or a bias over its
  // columns) are read with one tile.load_vector each; others per element.
  PrologueRun prologue_loads(ir::OpBuilder& b, Value* r) {
    const ir::Shape& shape = root_.operand(0)->type().shape;
    PrologueRun run{r, rows_->offset(b, r), std::vector<std::vector<Value*>>(body_.num_arguments()), {}};
    LaneProgram first(shape, run.at, xdims_);
    first.set_index({r, o_});
    for (std::size_t k = 0; k < body_.num_arguments(); ++k) {
      const ir::Shape& in = body_.argument(k)->type().shape;
      const bool along = in == shape || (in.size() == 1 && in.back() == shape.back());
      if (!along || lookup_table(body_.argument(k))) continue;
      Value* offset = first.offset_of(b, in);
      run.loaded[k] = column_vector_ == 1
                          ? std::vector<Value*>{tile::build(b, "tile.load_elem", {args_[k], offset}, {{"in_bounds", true}})}
                          : b.create("tile.load_vector", {args_[k], offset}, {{"count", column_vector_}})->results();
    }
    return run;
  }
  // The operand's stored values of the run (the prologue's outputs kept for
  // prologue_stores).
  std::vector<Value*> prologue_values(ir::OpBuilder& b, PrologueRun& run) {
    const ir::Shape& shape = root_.operand(0)->type().shape;
    const ir::Operation& yield = *body_.terminator();
    run.stored.assign(prologue_outputs_.size(), {});
    std::vector<Value*> values;
    for (std::int64_t c = 0; c < column_vector_; ++c) {
      Value* at_c = c == 0 ? run.at : index_op(b, "add", run.at, tile::build_int(b, c));
      Value* column = c == 0 ? o_ : index_op(b, "add", o_, tile::build_int(b, c));
      LaneProgram program(shape, at_c, xdims_);
      program.set_index({run.r, column});
      program.set_in_bounds(true);
      for (std::size_t k = 0; k < body_.num_arguments(); ++k) {
        if (run.loaded[k].empty()) {
          program.bind_input(body_.argument(k), args_[k]);
        } else {
          Value* v = run.loaded[k][static_cast<std::size_t>(c)];
          program.bind_value(body_.argument(k), LaneValue{v, LaneProgram::decode(b, v)});
        }
      }
      for (const auto& op : body_.ops()) {
        if (op.get() == &root_) break;
        program.lower_op(b, *op);
      }
      for (std::size_t j = 0; j < prologue_outputs_.size(); ++j) {
        run.stored[j].push_back(program.value(b, yield.operand(prologue_outputs_[j])).stored);
      }
      values.push_back(program.value(b, root_.operand(0)).stored);
    }
    return values;
  }
  void prologue_stores(ir::OpBuilder& b, const PrologueRun& run) {
    for (std::size_t j = 0; j < prologue_outputs_.size(); ++j) {
      Value* out = args_[body_.num_arguments() + prologue_outputs_[j]];
      if (column_vector_ == 1) {
        b.create("tile.store_elem", {out, run.at, run.stored[j][0]}, {{"in_bounds", true}});
        continue;
      }
      std::vector<Value*> operands{out, run.at};
      operands.insert(operands.end(), run.stored[j].begin(), run.stored[j].end());
      b.create("tile.store_vector", operands);
    }
  }

  bool prologue_output(std::size_t j) const {
    return std::find(prologue_outputs_.begin(), prologue_outputs_.end(), j) != prologue_outputs_.end();
  }

  // A float sum's accumulator, and its step: element r added at it.
  NumericsPolicy sum_policy() const { return default_policy(root_.operand(0)->type().policy.accum); }
  // Its loads are unchecked: every sum form calls the step for r in a block
  // [lo, hi) of [0, length) of an output element that exists (one group per
  // output in the cooperative form; the lane and column forms inside their
  // `o < n` test). A checked load branched around each element, so each add
  // waited for its load before the next load issued (a bias gradient's
  // column sum read 0.5 TB/s on an H200).
  SumStep sum_step(const NumericsPolicy& acc_policy) {
    return [this, acc_policy](ir::OpBuilder& eb, Value* r, Value* acc) {
      return op2(eb, "add", acc, cast(eb, rows_->load(eb, r, /*in_bounds=*/true), acc_policy));
    };
  }

  LaneValue reduce(ir::OpBuilder& b, LaneProgram& lanes_of) {
    const NumericsPolicy& p = root_.result(0)->type().policy;
    const std::string_view op = root_.name();
    length_ = rows_->length();
    if (op == "graph.sum" && !is_float(root_.operand(0)->type().dtype())) return integer_sum(b, lanes_of);
    if (total() || block_total()) {
      Value* x = cast(b, total() ? superblock_total(b) : column_block_total(b), kF64);
      if (const std::int64_t count = root_.attrs().get_int("count"); count > 0) {
        x = op2(b, "div", x, cast(b, tile::build_int(b, count), kF64));
      }
      return finish_root(b, lanes_of, x, p, /*via_accum=*/true);
    }
    if (op == "graph.sum" || op == "graph.mean" || superblocks()) {
      Value* acc = blocked_sum(b);
      Value* x = cast(b, acc, kF64);
      if (op == "graph.mean") x = op2(b, "div", x, cast(b, length_, kF64));
      return finish_root(b, lanes_of, x, p, /*via_accum=*/true);
    }
    Value* zero = tile::build_int(b, 0);
    Value* one_i = tile::build_int(b, 1);
    Value* first = LaneProgram::decode(b, load(b, zero));
    if (op == "graph.argmax") {
      // The first maximum; NaN counts as the maximum, so the first NaN wins.
      ir::Operation* loop = tile::build_for(b, one_i, length_, one_i, {zero, first},
                                            [&](ir::OpBuilder& lb, std::span<Value* const> a) {
                                              Value* v = LaneProgram::decode(lb, load(lb, a[0]));
                                              Value* best_is_nan = cmp(lb, "ne", a[2], a[2]);
                                              Value* better = op2(lb, "or", cmp(lb, "ne", v, v), cmp(lb, "gt", v, a[2]));
                                              Value* take = op2(lb, "and", op1(lb, "not", best_is_nan), better);
                                              return std::vector<Value*>{select(lb, take, a[0], a[1]),
                                                                         select(lb, take, v, a[2])};
                                            });
      Value* index = loop->result(0);
      return LaneValue{index, cast(b, index, kF64)};
    }
    // max / min: a strand fold of the extreme ignoring NaN and a count of
    // NaNs (vectorized on a CPU). Two things depend on the order: which NaN
    // the reference returns (the first), and which zero when the extreme is
    // a zero of either sign (the first of them). Only a row with a NaN or a
    // zero extreme takes the reference's sequential pass after it; its end
    // is 1 for every other row.
    const bool is_max = op == "graph.max";
    const char* pred = is_max ? "gt" : "lt";
    const double kInf = std::numeric_limits<double>::infinity();
    // Folded as exact_fold_value gives them (max and min are exact in any
    // float type). A NaN sets a flag (1.0).
    const NumericsPolicy fold = exact_fold_policy(root_.operand(0)->type().dtype());
    auto real = [&](ir::OpBuilder& rb, double v) { return tile::build_real(rb, v, fold); };
    std::vector<Value*> cheap = strand_fold(
        b, zero, length_, {real(b, is_max ? -kInf : kInf), real(b, 0.0)},
        [&](ir::OpBuilder& lb, Value* r, std::span<Value* const> c) {
          Value* v = exact_fold_value(lb, load(lb, r));
          if (v->type().policy != fold) v = cast(lb, v, fold);  // bool rows fold 0.0 / 1.0
          return std::vector<Value*>{select(lb, cmp(lb, pred, v, c[0]), v, c[0]),
                                     select(lb, cmp(lb, "ne", v, v), real(lb, 1.0), c[1])};
        },
        [&](ir::OpBuilder& fb, std::span<Value* const> a, std::span<Value* const> c) {
          return std::vector<Value*>{select(fb, cmp(fb, pred, c[0], a[0]), c[0], a[0]),
                                     select(fb, cmp(fb, "gt", c[1], a[1]), c[1], a[1])};
        });
    Value* special = op2(b, "or", cmp(b, "ne", cheap[1], real(b, 0.0)), cmp(b, "eq", cheap[0], real(b, 0.0)));
    Value* end = select(b, special, length_, one_i);
    ir::Operation* loop = tile::build_for(b, one_i, end, one_i, {first},
                                          [&](ir::OpBuilder& lb, std::span<Value* const> a) {
                                            Value* v = LaneProgram::decode(lb, load(lb, a[0]));
                                            Value* acc = a[1];
                                            Value* take = op2(lb, "or", cmp(lb, "ne", v, v), cmp(lb, pred, v, acc));
                                            Value* next = select(lb, take, v, acc);
                                            return one(select(lb, cmp(lb, "ne", acc, acc), acc, next));
                                          });
    // (A bool row decodes to bools; its extreme is carried as 0.0 or 1.0.)
    Value* folded = cast(b, cheap[0], first->type().policy);
    return finish_root(b, lanes_of, select(b, special, loop->result(0), folded), p, /*via_accum=*/false);
  }

  // The reduced value rounded to the result's policy; a stochastic one draws
  // Philox(0, o) for output element o, as the reference's make_result does.
  LaneValue finish_root(ir::OpBuilder& b, LaneProgram& lanes_of, Value* x, const NumericsPolicy& p, bool via_accum) {
    if (p.rounding == Rounding::stochastic && p.storage != DType::bool_) {
      return LaneProgram::finish_stochastic(b, x, p, via_accum, o_, 0);
    }
    return lanes_of.finish(b, x, p, via_accum);
  }

  // An integer (or bool) sum as the reference computes it: exact, in element
  // order, an error once a partial sum passes 2^53 in magnitude (beyond exact
  // accumulation there) and when the total overflows the result type. The
  // int64 accumulator cannot overflow before the 2^53 check stops it: inputs
  // of at most 32 bits are small, and int64 elements are checked first.
  // (One edge differs: a partial sum of exactly +-(2^53 + 1) is an error
  // here, where the reference's double rounds it to 2^53 and goes on.)
  LaneValue integer_sum(ir::OpBuilder& b, LaneProgram& lanes_of) {
    const NumericsPolicy& p = root_.result(0)->type().policy;
    const NumericsPolicy i64 = default_policy(DType::int64);
    const std::string passed = std::string(root_.name()) +
                               " of integers passed 2^53 in magnitude, beyond exact accumulation; cast the operand "
                               "to a float first";
    const bool wide = bit_width(root_.operand(0)->type().dtype()) > 32;
    ir::Operation* loop = tile::build_for(
        b, tile::build_int(b, 0), length_, tile::build_int(b, 1), {tile::build_int(b, 0)},
        [&](ir::OpBuilder& lb, std::span<Value* const> a) {
          Value* x = cast(lb, load(lb, a[0]), i64);
          if (wide) {
            // An int64 element: the reference adds it as a double. Past 2^62
            // in magnitude the partial sum passes 2^53 whatever came before
            // (so the same error, and the int64 add below cannot overflow);
            // within it, the element rounds to a double as the reference's.
            x = tile::build(lb, "tile.check_range", {x},
                            {{"lo", -(std::int64_t{1} << 62)}, {"hi", std::int64_t{1} << 62}, {"what", passed}});
            x = cast(lb, cast(lb, x, kF64), i64);
          }
          return one(check_exact(lb, op2(lb, "add", a[1], x), passed));
        });
    Value* total = check_fits(b, loop->result(0), p.storage,
                              std::string(root_.name()) + " result overflows its " + std::string(name(p.storage)) +
                                  " result; cast the operand to int64 or a float first");
    return lanes_of.finish(b, cast(b, total, kF64), p, /*via_accum=*/false);
  }

  // The canonical blocked sum (lower_to_tile.h) at the accumulation type.
  // With runs, a lane's whole runs load as one tile.load_vector each,
  // kRunsAhead of them issued together.
  Value* blocked_sum(ir::OpBuilder& b) {
    const NumericsPolicy acc_policy = sum_policy();
    const SumStep step = sum_step(acc_policy);
    if (row_lanes_ > 1 && run_ > 1) {
      std::map<Value*, std::vector<Value*>> preloaded;
      auto load_run = [&](ir::OpBuilder& lb, Value* r0) {
        return lb.create("tile.load_vector", {x_, rows_->offset(lb, r0)}, {{"count", run_}})->results();
      };
      return blocked_sum_cooperative_runs(
          b, length_, acc_policy, step,
          [&](ir::OpBuilder& wb, Value* r0, std::span<Value* const> accs) {
            auto it = preloaded.find(r0);
            const std::vector<Value*> values = it != preloaded.end() ? it->second : load_run(wb, r0);
            std::vector<Value*> out;
            for (std::size_t k = 0; k < accs.size(); ++k) out.push_back(op2(wb, "add", accs[k], cast(wb, values[k], acc_policy)));
            return out;
          },
          [&](ir::OpBuilder& wb, const std::vector<Value*>& r0s) {
            for (Value* r0 : r0s) preloaded[r0] = load_run(wb, r0);
          },
          lid_, row_lanes_, run_, kRunsAhead, lane_shuffles(kernel_));
    }
    if (row_lanes_ > 1) return blocked_sum_cooperative(b, length_, acc_policy, step, lid_, row_lanes_, lane_shuffles(kernel_));
    return templates::blocked_sum(b, length_, acc_policy, step);
  }

  const ir::Operation& kernel_;
  const ir::Block& body_;
  const ir::Operation& root_;
  ir::Module& out_;
  std::string name_;
  std::vector<std::int64_t> axes_;
  std::vector<Value*> xdims_;
  Value* x_ = nullptr;
  std::optional<RowIndex> rows_;
  Value* length_ = nullptr;
  std::int64_t row_lanes_ = 1;
  std::int64_t run_ = 1;  // elements per run of a cooperative row (row_vector)
  bool columns_ = false;
  std::int64_t workers_ = 1;  // per column, in the column form
  std::int64_t column_vector_ = 1;  // adjacent columns per lane: the strand-lane column form, block sums
  std::int64_t strand_blocks_ = 0;  // blocks per pass of the column form with a lane per strand (0: not that form)
  Value* lid_ = nullptr;
  Value* o_ = nullptr;  // the output element
  std::set<const ir::Operation*> prologue_;   // elementwise ops computing the operand (block sums)
  std::vector<std::size_t> prologue_outputs_;  // yielded values the prologue computes
  std::vector<Value*> args_;                   // the kernel's input and output buffers
};

}  // namespace

std::vector<std::int64_t> reduced_axes(const ir::Operation& op) {
  const std::size_t rank = op.operand(0)->type().rank();
  if (op.name() == "graph.superblock_total") return {static_cast<std::int64_t>(rank) - 1};
  if (op.name() == "graph.block_sums" || op.name() == "graph.block_total") return {0};
  if (op.name() == "graph.argmax") return {graph::normalize_axis(op.attrs().get_int("axis"), rank)};
  auto axes = graph::normalize_axes(op.attrs().get_ints("axes"), rank);
  if (axes.empty()) {
    for (std::size_t d = 0; d < rank; ++d) axes.push_back(static_cast<std::int64_t>(d));
  }
  return axes;
}

std::optional<std::int64_t> static_sum_length(const ir::Operation& root) {
  if (root.name() != "graph.sum" && root.name() != "graph.mean") return std::nullopt;
  const ir::Shape& x = root.operand(0)->type().shape;
  std::int64_t count = 1;
  for (std::int64_t a : reduced_axes(root)) {
    if (x[static_cast<std::size_t>(a)].is_symbolic()) return std::nullopt;
    count *= x[static_cast<std::size_t>(a)].size;
  }
  return count;
}

bool reduction_covers(const ir::Operation& kernel, std::string* why) {
  auto fail = [&](const std::string& reason) {
    if (why) *why = reason;
    return false;
  };
  const ir::Operation& root = kernel_root_op(kernel);
  const ir::Block& body = kernel_body(kernel);
  static const std::set<std::string_view> kReductions = {
      "graph.sum",        "graph.mean",          "graph.max",       "graph.min",        "graph.argmax",
      "graph.superblock_sums", "graph.superblock_total", "graph.block_sums", "graph.block_total"};
  if (!kReductions.count(root.name())) return fail("'" + std::string(root.name()) + "' is not a reduction");
  const Value* x = root.operand(0);
  bool is_argument = false, dims_input = false;
  for (std::size_t k = 0; k < body.num_arguments(); ++k) {
    is_argument = is_argument || body.argument(k) == x;
    dims_input = dims_input || body.argument(k)->type().shape == x->type().shape;
  }
  // Ops before the root: splat constants, and block sums' prologue
  // (block_sums_prologue_fusible): elementwise ops over the operand's shape
  // computing it, with an input of that shape to give its dims.
  bool prologue = false;
  for (const auto& op : body.ops()) {
    if (op.get() == &root) break;
    if (is_splat_constant(*op)) continue;
    prologue = true;
    if (!block_sums_prologue_fusible(root) || op->result(0)->type().shape != x->type().shape) {
      return fail("'" + std::string(op->name()) + "' precedes the reduction");
    }
    if (!lane_op_covered(op->name())) return fail("'" + std::string(op->name()) + "' has no per-lane lowering");
    if (auto bad = unsupported_policy(op->result(0)->type().policy)) return fail("'" + std::string(op->name()) + "' has " + *bad);
  }
  if (prologue && (is_argument || !dims_input)) return fail("the prologue does not compute the reduced operand from an input of its shape");
  if (!prologue && !is_argument) return fail("the reduced operand is not a kernel input");
  if (auto bad = unsupported_policy(buffer_policy(x->type().policy))) return fail("the reduced operand has " + *bad);
  if (auto bad = unsupported_policy(root.result(0)->type().policy, /*stochastic=*/true)) return fail("the result has " + *bad);
  const DType xd = x->type().dtype();
  if (!is_float(xd) && root.name() != "graph.sum" && root.name() != "graph.max" && root.name() != "graph.min" &&
      root.name() != "graph.argmax") {
    return fail("an integer " + std::string(root.name()));
  }
  // Every op after the root is a per-lane consumer; block sums have none
  // (they go to graph.block_total).
  std::size_t index = 0, root_index = 0;
  for (const auto& op : body.ops()) {
    if (op.get() == &root) root_index = index;
    ++index;
  }
  if (root.name() == "graph.block_sums" && root_index + 2 != index) return fail("ops follow graph.block_sums in its kernel");
  if (auto bad = lane_ops_unsupported(body, root_index + 1, /*stochastic=*/true)) return fail(*bad);
  return true;
}

TileKernel lower_reduction(const ir::Operation& kernel, ir::Module& out, const std::string& name) {
  return ReductionBuilder(kernel, out, name).build();
}

}  // namespace tessera::schedule::templates
