// The normalization template: graph.softmax_safe, graph.softmax_linear, graph.logsumexp,
// graph.layernorm_safe and graph.rmsnorm_safe -> one Tile IR kernel with one
// lane per row along the op's axis. Each lane makes the reference kernel's
// passes over its row (graph/normalization_ops.cpp), re-reading the row
// instead of keeping it:
//
//   softmax:   max / NaN / +inf count; sum of e = exp(x - max); y = e / sum
//   logsumexp: max / NaN; sum of exp(x - max); max + log(sum)
//   layernorm: max and min of x and finiteness; mean of x 2^-k (max|x - mean|
//              follows from the extremes); mean of squares of the rescaled
//              deviations (fmas); output
//   rmsnorm:   max|x| and finiteness; mean of squares; output
//
// With the `row_lanes` knob L > 1 (CUDA executables), a group of L lanes
// shares one row instead: max passes split the row over the lanes and fold
// their results, a warp's lanes by shuffles, then the warps' in order (max
// is exact, so any order gives the same value); blocked sums run
// blocked_sum_cooperative (row_loops.h), which gives the canonical sum bit
// for bit; output passes are strided over the lanes (coalesced on a GPU).
//
// With the `row_vector` knob V > 1 as well (CUDA executables, rows along the
// last axis), a lane reads its elements in runs of V consecutive ones
// (docs/design/0018): each pass steps over runs V * L apart, a whole run
// loads each row buffer it reads with one tile.load_vector and writes each
// result with one tile.store_vector, its V elements' steps computed in
// order between; the run at the row's end takes the element form. Sums run
// blocked_sum_cooperative_runs, which keeps the canonical order.
//
// Every intermediate is rounded to the accumulation type exactly where the
// reference rounds it, with the same power-of-two scalings, and sums follow
// the canonical order the reference follows too (lower_to_tile.h), so rows
// of every length agree with the reference bit for bit. The accumulation
// type must be fp32 or fp64 and hold every storage value exactly.
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <tuple>

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
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr std::int64_t kNoExponent = std::numeric_limits<int>::min() / 2;  // the reference's "no term"
// Shared memory of a cooperative kernel: at most two fold passes of three
// arrays of L + 1 eight-byte values (L <= 256) and two block-sum arrays.
constexpr std::int64_t kCoopSharedBytes = 40 * 1024;
// Runs a lane has in flight at once (run_pass, blocked_sum_cooperative_runs).
constexpr std::int64_t kRunsAhead = 4;
// Lanes of cooperative rows in runs a multiprocessor should hold at once.
constexpr std::int64_t kResidentLanes = 512;
// The most lanes of a row held in registers: rows of up to 16384 elements.
constexpr std::int64_t kMaxHeldLanes = 1024;
// Held rows of at least this many blocks may pair two strands per lane.
constexpr std::int64_t kPairedStrandBlocks = 16;

// The kernel input an operand of the root reads: itself, or the operand of
// the exact widening cast that computes it (a prologue: the values are the
// same, so the passes read the narrow ones).
const Value* source_of(const Value* v) {
  const ir::Operation* d = v->defining_op();
  return d && exact_widening_cast(*d) ? d->operand(0) : v;
}

class NormalizationBuilder {
 public:
  NormalizationBuilder(const ir::Operation& kernel, ir::Module& out, const std::string& name)
      : kernel_(kernel), body_(kernel_body(kernel)), root_(kernel_root_op(kernel)), out_(out), name_(name) {}

  TileKernel build() {
    row_lanes_ = kernel_.attrs().has("row_lanes") ? kernel_.attrs().get_int("row_lanes") : 1;
    coop_ = row_lanes_ > 1;
    run_ = kernel_.attrs().has("row_vector") ? kernel_.attrs().get_int("row_vector") : 1;
    if (run_ < 1 || run_ > kReductionStrands || kReductionStrands % run_ != 0) {
      raise(ErrorCode::ArgumentInvalid, "normalization kernel with row_vector " + std::to_string(run_) +
                                            "; expected a power of two from 1 to " + std::to_string(kReductionStrands),
            kernel_.location());
    }
    const Value* x = root_.operand(0);
    const std::size_t rank = x->type().rank();
    axis_ = graph::normalize_axis(root_.attrs().get_int("axis"), rank);
    // Rows held in registers (docs/design/0025): a cooperative row along the
    // last axis whose length is known takes 16 lanes per block of the row,
    // lane t holding strand t mod 16 of block t / 16, when that is at most
    // kMaxHeldLanes lanes.
    const ir::Dim& row_dim = x->type().shape[static_cast<std::size_t>(axis_)];
    if (!row_dim.is_symbolic()) static_length_ = row_dim.size;
    // The CUDA Tile IR target (variant tile_ir) keeps the loop form, the
    // one its tests cover.
    const bool may_hold = kernel_.attrs().has("row_held") && kernel_.attrs().get_bool("row_held") &&
                          kernel_variant(kernel_) != "tile_ir";
    // A softmax fused with its gradient (softmax_gradient_fusible).
    for (const auto& op : body_.ops()) {
      if (op->name() == "graph.softmax_linear" && softmax_gradient_y(*op) == root_.result(0)) linear_ = op.get();
    }
    epilogue_ = epilogue_of(linear_ ? linear_->result(0) : root_.result(0));
    if (may_hold && coop_ && static_cast<std::size_t>(axis_) + 1 == rank && !row_dim.is_symbolic() && row_dim.size > 0) {
      const std::int64_t blocks = (row_dim.size + kReductionBlock - 1) / kReductionBlock;
      if (blocks * kReductionStrands <= kMaxHeldLanes) {
        held_ = true;
        // rmsnorm, layernorm and softmax (which hold x alone) with an even
        // number of blocks, at least kPairedStrandBlocks, give each lane two
        // strands (docs/design/0028): half the lanes per row, so three rows
        // fit per multiprocessor where two did. Kernels holding a second
        // row operand keep one strand per lane (their registers would
        // spill).
        const bool pairs = !kernel_.attrs().has("row_held_pairs") || kernel_.attrs().get_bool("row_held_pairs");
        // Runs of adjacent strands (row_held_run, docs/design/0053): lane t
        // holds V adjacent strands of a block, so each slot's V elements
        // are one vector load and store. Rows of whole blocks only (a
        // partial block's slots past the end are skipped one by one); a
        // lane then holds 16 V elements, so such rows pair no blocks.
        const std::int64_t held_run = kernel_.attrs().has("row_held_run") ? kernel_.attrs().get_int("row_held_run") : 1;
        if (held_run < 1 || held_run > 4 || (held_run & (held_run - 1)) != 0) {
          raise(ErrorCode::ArgumentInvalid,
                "normalization kernel with row_held_run " + std::to_string(held_run) + "; expected 1, 2 or 4",
                kernel_.location());
        }
        // A held row's run_ is its lane's adjacent strands.
        run_ = row_dim.size % kReductionBlock == 0 ? held_run : 1;
        every_lane_scalars_ = kernel_.attrs().has("row_held_every_lane") && kernel_.attrs().get_bool("row_held_every_lane");
        if (run_ == 1 && pairs && blocks % 2 == 0 && blocks >= kPairedStrandBlocks && pairs_strands()) held_strands_ = 2;
        row_lanes_ = blocks * kReductionStrands / (held_strands_ * run_);
      }
    }
    const std::int64_t lanes =
        coop_ ? row_lanes_ : (kernel_.attrs().has("tile") ? kernel_.attrs().get_ints("tile").at(0) : 64);
    // Runs need a contiguous row (the last axis) and lanes sharing it, in
    // whole strand groups.
    if (!coop_ || static_cast<std::size_t>(axis_) + 1 != rank || row_lanes_ % (kReductionStrands / run_) != 0) run_ = 1;
    acc_ = default_policy(root_.result(0)->type().policy.accum);
    const std::size_t num_in = body_.num_arguments();

    std::vector<std::pair<std::string, Type>> params = input_buffer_params(body_);
    // A softmax fused with its gradient writes the gradient, and y too when
    // another kernel reads it: one buffer per kernel result, in the
    // kernel's order.
    const ir::Operation& yield = *body_.terminator();
    const std::size_t num_out = linear_ ? yield.num_operands() : 1;
    if (linear_) {
      for (std::size_t j = 0; j < num_out; ++j) {
        params.emplace_back("out" + std::to_string(j), Type::gmem({ir::Dim::named("n")}, buffer_policy(yield.operand(j)->type().policy),
                                                                  /*is_mut=*/true));
      }
    } else {
      params.emplace_back("out", Type::gmem({ir::Dim::named("n")}, buffer_policy(out_policy()), /*is_mut=*/true));
    }
    TileKernel result;
    const std::size_t x_index = index_of(x);
    for (std::size_t d = 0; d < rank; ++d) {
      params.emplace_back("x" + std::to_string(d), Type::lane(DType::int64));
      result.scalars.push_back(KernelScalar{KernelScalar::Kind::input_dim, d, x_index});
    }
    tile::KernelOptions options{.group_shape = std::vector<std::int64_t>{lanes}};
    if (held_) {
      // Fold passes of up to three arrays of L eight-byte values, a sum's
      // array of parts (one per strand) and its block sums, and the row
      // scalars (at most 59 KiB; arrays keep their space until the next
      // barrier: tile-plan-shared).
      options.shared_bytes = std::max<std::int64_t>(
          kCoopSharedBytes, 8 * (6 * (lanes + 1) + held_strands_ * lanes + kReductionBlock + 1 + 3 * kLaneZeroValues));
      // Registers for half the multiprocessor's threads (2048 / L / 2
      // groups). With paired strands, rmsnorm's forward ran fastest with
      // registers for 768 threads (80 each), layernorm's and softmax's with
      // 1024 (64 each), after their folds took shuffles (docs/design/0035).
      // Runs of four strands hold 64 elements a lane (two operands in a
      // gradient): registers for 512 threads (docs/design/0054); with 768
      // or 1024 they ran far slower (layernorm forward 0.63x of a copy at
      // 512, 0.34x at 768, 0.24x at 1024).
      const bool rmsnorm = root_.name() == "graph.rmsnorm_safe";
      const std::int64_t threads = kernel_.attrs().has("row_held_threads") ? kernel_.attrs().get_int("row_held_threads")
                                   : run_ == 4                              ? 512
                                   : held_strands_ * run_ >= 2 && rmsnorm   ? 768
                                                                            : 1024;
      options.resident_groups = std::max<std::int64_t>(1, threads / lanes);
    } else if (coop_) {
      options.shared_bytes = kCoopSharedBytes;
      // Rows in runs keep several runs in flight per lane; with enough
      // groups per multiprocessor (registers capped to fit them, measured
      // without spills at 128 lanes) the loads of one group's passes
      // overlap another's barriers.
      if (run_ > 1) options.resident_groups = std::max<std::int64_t>(1, kResidentLanes / lanes);
    }
    ir::Operation* func = tile::build_kernel(out_, name_, params, options, kernel_.location());
    ir::Block& fb = ir::function_body(*func);
    ir::OpBuilder b(fb);
    // A dim known at compile time is a constant: the row loops then have
    // constant bounds, which the CUDA backend runs as int loops (0024).
    // Shape-generic kernels (eager ones) read their dims from the scalars.
    std::vector<Value*> dims;
    for (std::size_t d = 0; d < rank; ++d) {
      const ir::Dim& dim = x->type().shape[d];
      dims.push_back(dim.is_symbolic() ? fb.argument(num_in + num_out + d) : tile::build_int(b, dim.size));
    }
    out_buffer_ = fb.argument(num_in);
    x_buffer_ = fb.argument(x_index);
    for (std::size_t k = 1; k < root_.num_operands(); ++k) params_.push_back(fb.argument(index_of(root_.operand(k))));
    if (linear_) {
      for (std::size_t j = 0; j < num_out; ++j) {
        if (yield.operand(j) == root_.result(0)) y_buffer_ = fb.argument(num_in + j);
        if (yield.operand(j) == (epilogue_ ? epilogue_->result(0) : linear_->result(0))) out_buffer_ = fb.argument(num_in + j);
      }
      params_.push_back(fb.argument(index_of(linear_->operand(1))));
    }

    Value* gid = tile::build(b, "tile.group_id", {});
    Value* lid = tile::build(b, "tile.linear_id", {});
    lid_ = lid;
    Value* o = coop_ ? gid : op2(b, "add", op2(b, "mul", gid, tile::build_int(b, lanes)), lid);
    // Rows: numel(x) / L for results of x's shape, numel(domain) for logsumexp.
    Value* rows = tile::build(b, "tile.symbol", {}, {{"name", std::string("n")}});
    const bool same_shape = results_have_x_shape();
    if (same_shape) {
      rows = op2(b, "div", rows, dims[static_cast<std::size_t>(axis_)]);
      result.rows_of = std::make_pair(x_index, static_cast<std::size_t>(axis_));
    }
    auto body = [&](ir::OpBuilder& then) {
      row_.emplace(then, fb.argument(x_index), dims, std::vector<std::int64_t>{axis_}, o);
      length_ = row_->length();
      // Cooperative rows along the last axis (held, or read in each pass)
      // ask for the rows ahead.
      if (coop_ && static_cast<std::size_t>(axis_) + 1 == rank) prefetch_rows_ahead(then);
      if (held_) hold_row(then);
      // One lane per row over the last axis: the next lane's row follows this
      // one in memory. Asking for it now lets it arrive while this row's
      // passes run on cached data (a CPU hint; the CUDA emitter drops it).
      if (!coop_ && static_cast<std::size_t>(axis_) + 1 == rank) {
        Value* next = row_->offset(then, length_);
        then.create("tile.prefetch", {fb.argument(x_index), next, length_});
        // softmax_linear's and norm_linear's second operand has the row's shape.
        if (root_.name() == "graph.softmax_linear" || root_.name() == "graph.norm_linear" || linear_) {
          then.create("tile.prefetch", {params_.back(), next, length_});
        }
        // The fused softmax gradient writes its result's row three times:
        // a write-prefetch fetches those lines early (measured: it slowed
        // the other normalizations, which write their rows once).
        if (linear_) {
          then.create("tile.prefetch", {out_buffer_, next, length_});
          if (y_buffer_) then.create("tile.prefetch", {y_buffer_, next, length_});
        }
      }
      if (linear_) softmax_gradient(then);
      else if (root_.name() == "graph.softmax_safe") softmax(then);
      else if (root_.name() == "graph.softmax_linear") softmax_linear(then);
      else if (root_.name() == "graph.norm_linear") norm_linear(then);
      else if (root_.name() == "graph.logsumexp") logsumexp(then, o);
      else normalize(then, root_.name() == "graph.layernorm_safe");
    };
    if (coop_) {
      // One group per row (the executable launches exactly the rows):
      // control flow stays uniform around the barriers.
      result.group_per_row = true;
      body(b);
    } else {
      if_then(b, cmp(b, "lt", o, rows), body);
    }
    tile::finish_kernel(*func);
    result.func = func;
    result.lanes_per_group = lanes;
    return result;
  }

 private:
  // The stored result's policy: the root's, or that of the narrowing cast
  // the kernel ends with (normalization_epilogue_cast), which rounds the
  // root's value once more, as its own kernel would.
  const NumericsPolicy& out_policy() const {
    if (epilogue_) return epilogue_->result(0)->type().policy;
    return (linear_ ? linear_->result(0) : root_.result(0))->type().policy;
  }
  // The epilogue cast reading v, if the kernel has one.
  const ir::Operation* epilogue_of(const ir::Value* v) const {
    for (const auto& op : body_.ops()) {
      if (op->name() == "graph.cast" && op->operand(0) == v && normalization_epilogue_cast(*op)) return op.get();
    }
    return nullptr;
  }
  // Every result has x's shape (logsumexp's has the rows' shape).
  bool results_have_x_shape() const { return root_.name() != "graph.logsumexp"; }
  // Whether lanes exchange values by tile.lane_shuffle (docs/design/0035):
  // the CUDA Tile IR target has no lowering for it, and the `lane_shuffles`
  // knob can turn it off (a held row's sums take shuffles regardless).
  bool shuffles() const { return lane_shuffles(kernel_); }
  bool pairs_strands() const {
    return root_.name() == "graph.rmsnorm_safe" || root_.name() == "graph.layernorm_safe" ||
           (root_.name() == "graph.softmax_safe" && !linear_);
  }
  std::size_t index_of(const Value* v) const {
    v = source_of(v);
    for (std::size_t k = 0; k < body_.num_arguments(); ++k) {
      if (body_.argument(k) == v) return k;
    }
    raise(ErrorCode::Internal, "normalization kernel: an operand is not a kernel input", kernel_.location());
  }

  // Row scalars (see row_scalars() below).
  using Derive = std::function<std::vector<Value*>(ir::OpBuilder&, std::span<Value* const>)>;
  // At most this many values, each passed as fp64, which holds each exactly
  // (accumulation values, exponents below 2^31).
  static constexpr std::int64_t kLaneZeroValues = 8;
  struct RowScalars {
    Derive derive;
    Value* slots = nullptr;                 // lane 0's values (null: every lane derives)
    std::vector<NumericsPolicy> policies;   // of the values lane 0 wrote
    bool written = false;                   // a pass's last stage wrote them
  };

  // ---- small pieces ----
  Value* x64(ir::OpBuilder& b, Value* r) { return LaneProgram::decode(b, row_elem(b, x_buffer_, r)); }
  // A stored value at the accumulation type. When the storage is that type
  // the value is used as loaded: decoding to fp64 and rounding back is the
  // identity, and it cost two conversions per element.
  Value* at_acc(ir::OpBuilder& b, Value* stored) {
    // A narrower float format widens to a plain fp32 exactly, in one cast.
    const DType d = stored->type().dtype();
    if (stored->type().policy == acc_) return stored;
    if (d == acc_.storage || (fp32_math() && fp32_exact(d))) return cast(b, stored, acc_);
    return to_acc(b, LaneProgram::decode(b, stored));
  }
  Value* x_acc(ir::OpBuilder& b, Value* r) { return at_acc(b, row_elem(b, x_buffer_, r)); }
  // A row element for exact folds (exact_fold_value).
  Value* x_exact(ir::OpBuilder& b, Value* r) { return exact_fold_value(b, row_elem(b, x_buffer_, r)); }

  // ---- runs (see the top of the file) ----
  // The run being built: its elements' row indices, the element whose
  // steps are being emitted, the runs loaded so far (row buffers at the
  // row's offsets, parameters at the row index) and each written buffer's
  // values.
  struct Run {
    Value* r0 = nullptr;
    std::vector<Value*> r;
    std::size_t k = 0;
    std::vector<std::pair<Value*, std::vector<Value*>>> row_loads, param_loads, stores;
  };
  std::optional<Run> run_state_;

  static std::vector<Value*>& entry(std::vector<std::pair<Value*, std::vector<Value*>>>& list, Value* buffer) {
    for (auto& [buf, values] : list)
      if (buf == buffer) return values;
    list.emplace_back(buffer, std::vector<Value*>{});
    return list.back().second;
  }
  // The element of run element `r`, from the run's one load of `buffer` at
  // the row's offset of the run (`at_row`) or at the run's row index (a
  // parameter), made where first asked for: the run's steps are
  // straight-line code in one block, so it comes before every use.
  Value* run_value(ir::OpBuilder& b, std::vector<std::pair<Value*, std::vector<Value*>>>& list, Value* buffer, Value* r,
                   bool at_row) {
    Run& run = *run_state_;
    if (run.r.at(run.k) != r) raise(ErrorCode::Internal, "normalization run: a step read an element of another run");
    std::vector<Value*>& values = entry(list, buffer);
    if (values.empty()) {
      Value* start = at_row ? row_->offset(b, run.r0) : run.r0;
      // A held row's run is a slot: in the row (of a buffer of x's shape,
      // or of a parameter of the row's length) at a multiple of V.
      ir::AttrMap attrs{{"count", run_}};
      if (held_) attrs.set("in_bounds", true);
      values = b.create("tile.load_vector", {buffer, start}, attrs)->results();
    }
    return values.at(run.k);
  }
  // ---- rows held in registers (docs/design/0025) ----
  // Lane t's slots: elements r_i = (t / 16) 256 + t mod 16 + 16 i of the
  // row, i = 0 .. 15 (fewer when the row is shorter), which are strand
  // t mod 16 of block t / 16 in order; with two strands per lane, then the
  // same strand of block t / 16 + L / 16. x's element of each slot is loaded
  // once, here, and every pass reads it from the register; a slot past the
  // row's end (a partial last block) loads the row's last element instead
  // and every pass skips it. With runs of V adjacent strands (run_,
  // docs/design/0053), lane t holds strands V (t mod G) .. + V - 1 of block
  // t / G, G = 16 / V lanes a block: slot i is the V elements
  // (t / G) 256 + V (t mod G) + 16 i + j, j = 0 .. V - 1, one vector load
  // per row operand (held_r_ lists them slot by slot).
  void hold_row(ir::OpBuilder& b) {
    const std::int64_t S = kReductionStrands;
    const std::int64_t V = run_;
    const std::int64_t G = S / V;
    Value* first = op2(b, "add", op2(b, "mul", op2(b, "div", lid_, integer(b, G)), integer(b, kReductionBlock)),
                       V == 1 ? op2(b, "rem", lid_, integer(b, G)) : op2(b, "mul", op2(b, "rem", lid_, integer(b, G)), integer(b, V)));
    const bool whole_blocks = static_length_ % kReductionBlock == 0;
    const std::int64_t slots = std::min<std::int64_t>(kReductionBlock / S, (static_length_ + S - 1) / S);
    Value* last = integer(b, static_length_ - 1);
    const std::vector<Value*> row_buffers = row_operands();
    for (std::int64_t k = 0; k < slots * held_strands_; ++k) {
      const std::int64_t i = k % slots;
      const std::int64_t from_first = k / slots * row_lanes_ / G * kReductionBlock + i * S;  // from `first`
      Value* r = from_first == 0 ? first : op2(b, "add", first, integer(b, from_first));
      if (V > 1) {
        // Whole blocks: every element of the run is in the row, and the
        // run starts at a multiple of V (rows of whole blocks), so it is
        // one aligned word (`in_bounds`).
        std::vector<Value*> rs{r};
        for (std::int64_t j = 1; j < V; ++j) rs.push_back(op2(b, "add", r, integer(b, j)));
        Value* offset = row_->offset(b, r);
        for (Value* buffer : row_buffers) {
          const std::vector<Value*> run =
              b.create("tile.load_vector", {buffer, offset}, {{"count", V}, {"in_bounds", true}})->results();
          for (std::int64_t j = 0; j < V; ++j) held_loads_[{buffer, rs[static_cast<std::size_t>(j)]}] = run[static_cast<std::size_t>(j)];
        }
        for (Value* rj : rs) {
          held_r_.push_back(rj);
          held_valid_.push_back(nullptr);
        }
        continue;
      }
      Value* valid = whole_blocks ? nullptr : cmp(b, "lt", r, length_);
      Value* at = valid ? op2(b, "min", r, last) : r;
      held_r_.push_back(r);
      held_valid_.push_back(valid);
      // In bounds: `at` is in the row and the group's row exists (one group
      // per row); the second operand has x's shape.
      Value* offset = row_->offset(b, at);
      for (Value* buffer : row_buffers) {
        held_loads_[{buffer, r}] = tile::build(b, "tile.load_elem", {buffer, offset}, {{"in_bounds", true}});
      }
    }
  }
  // The row's operands: x, and the second operand of softmax_linear,
  // norm_linear and a fused softmax gradient (second_at), which every pass
  // reads at the same offsets (a held row's slots).
  std::vector<Value*> row_operands() {
    std::vector<Value*> buffers{x_buffer_};
    if (root_.name() == "graph.softmax_linear" || root_.name() == "graph.norm_linear" || linear_) {
      buffers.push_back(params_.at(0));
    }
    return buffers;
  }
  // Lane 0 asks for the row `row_prefetch` rows further on (a bulk L2
  // prefetch on a GPU, docs/design/0037): the group that reads it starts
  // about a wave later and finds the row in L2, so a row's lifetime waits
  // on L2 rather than DRAM latency. Rows along the last axis are
  // contiguous, so that row starts `row_prefetch` row lengths on.
  void prefetch_rows_ahead(ir::OpBuilder& b) {
    const std::int64_t ahead = kernel_.attrs().has("row_prefetch") ? kernel_.attrs().get_int("row_prefetch") : 0;
    if (ahead <= 0) return;
    Value* start = op2(b, "add", row_->offset(b, integer(b, 0)), op2(b, "mul", integer(b, ahead), length_));
    if_then(b, cmp(b, "eq", lid_, integer(b, 0)), [&](ir::OpBuilder& lb) {
      for (Value* buffer : row_operands()) lb.create("tile.prefetch", {buffer, start, length_}, {{"bulk", true}});
    });
  }
  // `each` for every slot in the row (or of strand `strand` alone), in slot
  // order, carrying values. With runs of adjacent strands, a slot's V
  // elements take their steps in a run (run_elements): its stores are one
  // vector store per buffer.
  std::vector<Value*> over_held(ir::OpBuilder& b, std::vector<Value*> cur,
                                const std::function<std::vector<Value*>(ir::OpBuilder&, Value*, std::span<Value* const>)>& each,
                                std::optional<std::int64_t> strand = std::nullopt) {
    const std::size_t per_strand = held_r_.size() / static_cast<std::size_t>(held_strands_);
    const std::size_t from = strand ? static_cast<std::size_t>(*strand) * per_strand : 0;
    const std::size_t to = strand ? from + per_strand : held_r_.size();
    if (run_ > 1) {
      const auto V = static_cast<std::size_t>(run_);
      for (std::size_t i = from; i < to; i += V) {
        const std::vector<Value*> rs(held_r_.begin() + static_cast<std::ptrdiff_t>(i),
                                     held_r_.begin() + static_cast<std::ptrdiff_t>(i + V));
        run_elements(b, rs[0], [&](ir::OpBuilder& eb, Value* r, std::size_t) { cur = each(eb, r, cur); }, &rs);
      }
      return cur;
    }
    for (std::size_t i = from; i < to; ++i) {
      Value* r = held_r_[i];
      Value* valid = held_valid_[i];
      if (!valid) {
        cur = each(b, r, cur);
        continue;
      }
      cur = tile::build_if(
                b, valid, cur, [&](ir::OpBuilder& tb, std::span<Value* const> c) { return each(tb, r, c); },
                [](ir::OpBuilder&, std::span<Value* const> c) { return std::vector<Value*>(c.begin(), c.end()); })
                ->results();
    }
    return cur;
  }
  // The chain of held strand `j` (0 .. V - 1) of the lane's block-part
  // `part`: `each` over its slots in order, carrying values (a sum's
  // strand, added left to right).
  std::vector<Value*> over_held_strand(ir::OpBuilder& b, std::vector<Value*> cur, std::int64_t part, std::int64_t j,
                                       const std::function<std::vector<Value*>(ir::OpBuilder&, Value*, std::span<Value* const>)>& each) {
    const auto V = static_cast<std::size_t>(run_);
    const std::size_t per_part = held_r_.size() / static_cast<std::size_t>(held_strands_);
    for (std::size_t i = static_cast<std::size_t>(part) * per_part + static_cast<std::size_t>(j); i < (static_cast<std::size_t>(part) + 1) * per_part; i += V) {
      cur = each(b, held_r_[i], cur);
    }
    return cur;
  }

  // Element r of the row of `buffer` (x, the second operand, a result read back).
  Value* row_elem(ir::OpBuilder& b, Value* buffer, Value* r) {
    if (auto it = held_loads_.find({buffer, r}); it != held_loads_.end()) {
      // A rare path reads the element again (in bounds: a held slot), so
      // the held register need not live through it.
      if (reread_) return tile::build(b, "tile.load_elem", {buffer, row_->offset(b, r)}, {{"in_bounds", true}});
      return it->second;
    }
    if (run_state_) return run_value(b, run_state_->row_loads, buffer, r, /*at_row=*/true);
    return tile::build(b, "tile.load_elem", {buffer, row_->offset(b, r)});
  }
  void store_elem(ir::OpBuilder& b, Value* buffer, Value* index, Value* value) {
    if (!run_state_) {
      // A held row's results go to slots in the row (over_held skips the
      // others), in buffers of x's shape: in bounds.
      const bool proven = held_ && results_have_x_shape();
      ir::AttrMap attrs;
      if (proven) attrs.set("in_bounds", true);
      if (proven && finite_output_) attrs.set("not_nan", true);
      b.create("tile.store_elem", {buffer, index, value}, attrs);
      return;
    }
    std::vector<Value*>& values = entry(run_state_->stores, buffer);
    values.resize(static_cast<std::size_t>(run_));
    values.at(run_state_->k) = value;
  }
  // The steps of the run of elements [r0, r0 + V) (all in the row), element
  // by element, then one store per written buffer.
  // `rs`, when given, are the run's row indices (a held slot's, which its
  // held elements are keyed by).
  void run_elements(ir::OpBuilder& b, Value* r0, const std::function<void(ir::OpBuilder&, Value*, std::size_t)>& each,
                    const std::vector<Value*>* rs = nullptr) {
    run_state_.emplace();
    run_state_->r0 = r0;
    if (auto it = preloads_.find(r0); it != preloads_.end()) {
      run_state_->row_loads.emplace_back(x_buffer_, it->second);
      preloads_.erase(it);
    }
    if (rs) run_state_->r = *rs;
    for (std::int64_t k = 0; !rs && k < run_; ++k) run_state_->r.push_back(k == 0 ? r0 : index_op(b, "add", r0, integer(b, k)));
    for (std::size_t k = 0; k < run_state_->r.size(); ++k) {
      run_state_->k = k;
      each(b, run_state_->r[k], k);
    }
    Run run = std::move(*run_state_);
    run_state_.reset();
    for (auto& [buffer, values] : run.stores) {
      for (Value* v : values)
        if (!v) raise(ErrorCode::Internal, "normalization run: an element of the run did not write its buffer");
      std::vector<Value*> operands{buffer, row_->offset(b, r0)};
      operands.insert(operands.end(), values.begin(), values.end());
      // A held row's runs are its slots: in the row, at multiples of V, in
      // buffers of x's shape.
      ir::AttrMap attrs;
      if (held_ && results_have_x_shape()) attrs.set("in_bounds", true);
      if (held_ && finite_output_) attrs.set("not_nan", true);
      b.create("tile.store_vector", operands, attrs);
    }
  }
  // x's runs at r0s, loaded now, each taken by the run_elements of its r0:
  // a lane's next runs are all in flight before the first is used (a run
  // loaded where first used waits a memory latency per run).
  void preload_x(ir::OpBuilder& b, const std::vector<Value*>& r0s) {
    for (Value* r0 : r0s) {
      preloads_[r0] = b.create("tile.load_vector", {x_buffer_, row_->offset(b, r0)}, {{"count", run_}})->results();
    }
  }
  // A pass of `step` over [0, end) in runs, carrying values (run_loop,
  // row_loops.h): a lane's runs are L runs apart, kRunsAhead at a time with
  // x's runs preloaded; a whole run's elements take their steps in order
  // (run_elements), the row's last, partial run element by element where
  // its elements exist. Returns the loop.
  ir::Operation* run_pass(ir::OpBuilder& b, Value* end, std::vector<Value*> inits, const PassStep& step) {
    using Values = std::vector<Value*>;
    auto whole = [&](ir::OpBuilder& wb, Value* r0, Values cur) {
      run_elements(wb, r0, [&](ir::OpBuilder& eb, Value* r, std::size_t) { cur = step(eb, r, cur); });
      return cur;
    };
    auto part = [&](ir::OpBuilder& pb, Value* r0, Values cur) {
      for (std::int64_t k = 0; k < run_; ++k) {
        Value* r = op2(pb, "add", r0, integer(pb, k));
        cur = tile::build_if(
                  pb, cmp(pb, "lt", r, end), cur, [&](ir::OpBuilder& ob, std::span<Value* const> x) { return step(ob, r, x); },
                  [](ir::OpBuilder&, std::span<Value* const> x) { return Values(x.begin(), x.end()); })
                  ->results();
      }
      return cur;
    };
    return run_loop(b, op2(b, "mul", lid_, integer(b, run_)), end, row_lanes_ * run_, run_, kRunsAhead, std::move(inits),
                    [&](ir::OpBuilder& pb, const Values& r0s) { preload_x(pb, r0s); }, whole, part);
  }
  Value* to_acc(ir::OpBuilder& b, Value* v) { return cast(b, v, acc_); }
  Value* to64(ir::OpBuilder& b, Value* v) { return cast(b, v, kF64); }
  Value* acc_real(ir::OpBuilder& b, double v) { return tile::build_real(b, v, acc_); }
  Value* integer(ir::OpBuilder& b, std::int64_t v) { return tile::build_int(b, v); }
  Value* boolean(ir::OpBuilder& b, bool v) { return tile::build_bool(b, v); }
  Value* not_(ir::OpBuilder& b, Value* v) { return op1(b, "not", v); }
  Value* fma(ir::OpBuilder& b, Value* x, Value* y, Value* z) { return tile::build(b, "tile.fma", {x, y, z}); }
  // round_to(v / w, accum), as the reference computes it (in fp64, then rounded).
  Value* quotient(ir::OpBuilder& b, Value* v, Value* w) { return to_acc(b, op2(b, "div", to64(b, v), to64(b, w))); }
  // round_to(ldexp(v, e), accum).
  Value* scaled(ir::OpBuilder& b, Value* v, Value* e) { return to_acc(b, op2(b, "ldexp", to64(b, v), e)); }
  // A scaling by 2^e whose exponent is computed before the loops that apply
  // it. With an accumulation type narrower than fp64, every such exponent in
  // normalize() lies well within [-1022, 1023] (the data's exponents are
  // bounded by the storage format: |k|, |j| <= 149, |shift| < 520), so 2^e
  // is an exact double and one multiply by it is ldexp's correctly rounded
  // product. The factor is computed once, and the loops stay free of ldexp
  // calls, which kept them from vectorizing.
  //
  // With a plain fp32 accumulator the scaling runs in fp32 where that is
  // exact, as two multiplies by 2^max(e - 127, 0) and 2^min(e, 127): for an
  // fp32 value v and e >= -149 both factors are fp32 numbers, the first
  // product only scales up (exact, or infinite when the result is), and the
  // second rounds once: fp32 multiplication's correctly rounded v 2^e, the
  // same bits as the fp64 product rounded to fp32, without two conversions
  // and an fp64 multiply per element. normalize() applies it where e >= -149
  // always holds (x 2^-k: k <= 128 for values of fp32's range; the
  // deviations' 2^-j: j <= 2) and checks the output scaling per row.
  struct Pow2 {
    Value* e;
    Value* factor;  // 2^e as fp64, or null: ldexp in the loop (fp64 accumulation)
    Value* up = nullptr;    // fp32 accumulation: 2^max(e - 127, 0) and 2^min(e, 127), as fp32
    Value* down = nullptr;
  };
  Pow2 pow2(ir::OpBuilder& b, Value* e) {
    Pow2 p{e, acc_.storage == DType::fp64 ? nullptr : op2(b, "ldexp", real(b, 1.0), e)};
    if (fp32_math()) {
      Value* high = integer(b, 127);
      p.up = to_acc(b, op2(b, "ldexp", real(b, 1.0), op2(b, "max", index_op(b, "sub", e, high), integer(b, 0))));
      p.down = to_acc(b, op2(b, "ldexp", real(b, 1.0), op2(b, "min", e, high)));
    }
    return p;
  }
  // The values pow2() computes besides e, in order, and the Pow2 of e they
  // make again (lane 0 computes them for the group: RowScalars).
  std::vector<Value*> pow2_values(const Pow2& p) {
    std::vector<Value*> out;
    for (Value* f : {p.factor, p.up, p.down}) {
      if (f) out.push_back(f);
    }
    return out;
  }
  Pow2 pow2_of_values(Value* e, std::span<Value* const> v) {
    Pow2 p{e, nullptr};
    std::size_t next = 0;
    if (acc_.storage != DType::fp64) p.factor = v[next++];
    if (fp32_math()) {
      p.up = v[next++];
      p.down = v[next++];
    }
    return p;
  }
  Value* scaled(ir::OpBuilder& b, Value* v, const Pow2& p) {
    return p.factor ? to_acc(b, op2(b, "mul", to64(b, v), p.factor)) : scaled(b, v, p.e);
  }
  // scaled() of an fp32 value v, in fp32 (p.e >= -149: see above).
  Value* scaled_f32(ir::OpBuilder& b, Value* v, const Pow2& p) {
    // Where the row's p.up is 1 (plain_scaling_, under a uniform test) the
    // first multiply is the identity.
    if (plain_scaling_) return op2(b, "mul", v, p.down);
    return op2(b, "mul", op2(b, "mul", v, p.up), p.down);
  }
  // round_to(v / d) in fp32 from y = RN(1/d) (computed once per row):
  // q0 = RN(v y), e = v - q0 d (exact, one fma), q = RN(q0 + e y). With y
  // the correctly rounded reciprocal and no underflow, q is the correctly
  // rounded quotient (Markstein's theorem; docs/design/0025 gives the
  // ranges and the test that checks it). Here d lies in [2^-26, 2^26] (the
  // caller checks per row: reciprocal_range), |v| < 2^26 (the callers'
  // values are at most 1), and |v| >= 2^-100 keeps q0 and e clear of
  // underflow; smaller v (zero too, whose sign the fma could lose) divide.
  // Three fp32 operations instead of a division's sequence per element.
  Value* quotient_by_reciprocal(ir::OpBuilder& b, Value* v, Value* d, Value* y) {
    Value* q = reciprocal_quotient(b, v, d, y);
    return tile::build_if(
               b, below_reciprocal_quotient(b, v), {q},
               [&](ir::OpBuilder& tb, std::span<Value* const>) { return std::vector<Value*>{op2(tb, "div", v, d)}; },
               [](ir::OpBuilder&, std::span<Value* const> k) { return std::vector<Value*>{k[0]}; })
        ->result(0);
  }
  // The three operations alone: the quotient where v is not
  // below_reciprocal_quotient.
  Value* reciprocal_quotient(ir::OpBuilder& b, Value* v, Value* d, Value* y) {
    Value* q0 = op2(b, "mul", v, y);
    Value* e = fma(b, op1(b, "neg", q0), d, v);
    return fma(b, e, y, q0);
  }
  // |v| < 2^-100 (zero included): v that divide instead.
  Value* below_reciprocal_quotient(ir::OpBuilder& b, Value* v) {
    return cmp(b, "lt", op1(b, "abs", v), acc_real(b, 0x1p-100));
  }
  Value* reciprocal_range(ir::OpBuilder& b, Value* d) {
    return op2(b, "and", cmp(b, "ge", d, acc_real(b, 0x1p-26)), cmp(b, "le", d, acc_real(b, 0x1p26)));
  }
  // Whether p's fp32 form scales by p.down alone (p.up == 1: e <= 127).
  Value* unit_up(ir::OpBuilder& b, const Pow2& p) { return cmp(b, "eq", p.up, acc_real(b, 1.0)); }
  // build() with `flag` set, then cleared: the flags choose a form of the
  // code being built (plain_scaling_, common_row_, reread_).
  template <class Build>
  auto with_flag(bool& flag, const Build& build) {
    flag = true;
    struct Clear {
      bool& f;
      ~Clear() { f = false; }
    } clear{flag};
    return build();
  }
  // Over the held row: `store_quotient` stores element r's quotient by the
  // row's reciprocal and returns its dividend; a lane where some dividend
  // lay below the reciprocal's range (rare) runs `redo`, which writes its
  // elements again exactly. One test per element and one branch per lane,
  // where a branch guarded each element's division. `finite`: the stored
  // values are finite, so the stores skip the NaN fix.
  void quotients_then_redo(ir::OpBuilder& b, bool finite,
                           const std::function<Value*(ir::OpBuilder&, Value*)>& store_quotient,
                           const std::function<void(ir::OpBuilder&)>& redo) {
    auto pass = [&] {
      return over_held(b, {boolean(b, false)},
                       [&](ir::OpBuilder& eb, Value* r, std::span<Value* const> seen) {
                         return std::vector<Value*>{
                             op2(eb, "or", seen[0], below_reciprocal_quotient(eb, store_quotient(eb, r)))};
                       })
          .at(0);
    };
    Value* tiny = finite ? with_flag(finite_output_, pass) : pass();
    if_then(b, tiny, redo, {}, /*likely=*/false);
  }
  // `sum` built twice: where `plain` holds (a uniform test) with
  // plain_scaling_, else as is. Same bits either way.
  Value* sum_plain_or_not(ir::OpBuilder& b, Value* plain, const SumStep& step, RowScalars* rs) {
    if (!plain) return sum(b, step, rs);
    return tile::build_if(
               b, plain, {acc_real(b, 0.0)},
               [&](ir::OpBuilder& tb, std::span<Value* const>) {
                 return std::vector<Value*>{with_flag(plain_scaling_, [&] { return sum(tb, step, rs); })};
               },
               [&](ir::OpBuilder& eb, std::span<Value* const>) { return std::vector<Value*>{sum(eb, step, rs)}; })
        ->result(0);
  }
  // scaled() of a value that is an fp32 number (v as fp64, or as an fp32
  // lane), in fp32 where p has the fp32 form and p.e >= -149 is known.
  Value* scaled_exact(ir::OpBuilder& b, Value* v, const Pow2& p) {
    if (!p.up) return scaled(b, v, p);
    return scaled_f32(b, v->type().policy == acc_ ? v : to_acc(b, v), p);
  }
  // With a plain fp32 accumulator and a row length exact in fp32 (known,
  // at most 2^24), sum / n divides in fp32: the correctly rounded fp32
  // quotient of two fp32 values has the bits of the fp64 quotient rounded
  // to fp32 (53 >= 2 * 24 + 2 bits: the double rounding is innocuous), and
  // fp64 division is a long instruction sequence on a GPU.
  Value* mean(ir::OpBuilder& b, Value* sum) {
    if (fp32_math() && static_length_ > 0 && static_length_ <= (std::int64_t{1} << 24) && sum->type().policy == acc_) {
      return op2(b, "div", sum, acc_real(b, static_cast<double>(static_length_)));
    }
    return quotient(b, sum, length_);
  }
  bool fp32_math() const { return acc_ == default_policy(DType::fp32); }

  void store(ir::OpBuilder& b, Value* index, Value* acc_value) {
    store_to(b, out_buffer_, out_policy(), index, acc_value);
  }
  void store_to(ir::OpBuilder& b, Value* buffer, const NumericsPolicy& p, Value* index, Value* acc_value) {
    if (p.rounding == Rounding::nearest_even && p.overflow == Overflow::inf_nan && p.storage == acc_.storage &&
        acc_value->type().dtype() == acc_.storage) {
      // Already the stored value: no round trip through fp64.
      store_elem(b, buffer, index, acc_value->type().policy == p ? acc_value : cast(b, acc_value, p));
      return;
    }
    // `index` is the element's flat index in the result (the input's shape):
    // a stochastic result draws Philox(0, index), as the reference does.
    if (p.rounding != Rounding::stochastic && acc_value->type().dtype() == DType::fp32 && fp32_exact(p.storage) &&
        (p.accum == DType::fp32 || p.accum == DType::fp64)) {
      // An fp32 value rounded once to storage, without finish()'s trip
      // through fp64 and back to the fp32 accumulation type.
      store_elem(b, buffer, index, LaneProgram::stored_from_fp32(b, acc_value, p));
      return;
    }
    const LaneValue v = p.rounding == Rounding::stochastic
                            ? LaneProgram::finish_stochastic(b, to64(b, acc_value), p, true, index, 0)
                            : LaneProgram::finish(b, to64(b, acc_value), p);
    store_elem(b, buffer, index, v.stored);
  }

  // ---- passes over the row: one lane, or the group's lanes together ----

  // A pass carrying values (max, flags, counts) folded with `combine`,
  // which must be associative and commutative on the values it sees.
  using Combine = FoldCombine;
  // The pass runs over the whole row.
  // With `rs`, lane 0's last fold also derives the row's scalars (take()).
  std::vector<Value*> fold_pass(ir::OpBuilder& b, std::vector<Value*> inits, const PassStep& step,
                                const Combine& combine, RowScalars* rs = nullptr) {
    // One lane: strands (the folds here, max, or and counts, are exact, so
    // any order gives the same values).
    if (!coop_) return strand_fold(b, integer(b, 0), length_, std::move(inits), step, combine);
    std::vector<Value*> lane_values;
    if (held_) {
      lane_values = over_held(b, inits, step);
    } else if (run_ > 1) {
      lane_values = run_pass(b, length_, inits, step)->results();
    } else {
      lane_values = tile::build_for(b, lid_, length_, integer(b, row_lanes_), inits, [&](ir::OpBuilder& lb, std::span<Value* const> a) {
               return step(lb, a[0], a.subspan(1));
             })->results();
    }
    // Folded in two levels: the W lanes of each warp-sized group (W, the
    // largest power of two up to 32 dividing L) by shuffles (lane_tree),
    // then the L / W group values through shared memory, in turn. The
    // folds are exact, so any order gives the same values. With row
    // scalars to derive (rs), lane 0 folds the group values and derives
    // them while the group waits at a second barrier; otherwise every lane
    // folds them itself, so one barrier serves. (The CUDA Tile IR target
    // has no lane shuffle: its groups fold every lane's value through
    // shared memory, W = 1.)
    std::int64_t width = 1;
    while (shuffles() && width < 32 && row_lanes_ % (width * 2) == 0) width *= 2;
    lane_values = lane_tree(b, lid_, lane_values, width, combine);
    if (row_lanes_ == width) {
      if (rs && rs->slots) raise(ErrorCode::Internal, "normalization: row scalars of a group within a warp");
      return lane_values;
    }
    const std::int64_t groups = row_lanes_ / width;
    std::vector<Value*> arrays;
    for (Value* v : lane_values) arrays.push_back(shared_array(b, v->type().policy, groups));
    const ir::AttrMap proven{{"in_bounds", true}};
    if_then(b, cmp(b, "eq", op2(b, "rem", lid_, integer(b, width)), integer(b, 0)), [&](ir::OpBuilder& wb) {
      Value* at = op2(wb, "div", lid_, integer(wb, width));
      for (std::size_t k = 0; k < arrays.size(); ++k) wb.create("tile.store_elem", {arrays[k], at, lane_values[k]}, proven);
    });
    b.create("tile.barrier", {});
    auto fold_groups = [&](ir::OpBuilder& fb) {
      std::vector<Value*> acc;
      for (Value* arr : arrays) acc.push_back(tile::build(fb, "tile.load_elem", {arr, integer(fb, 0)}, proven));
      for (std::int64_t j = 1; j < groups; ++j) {
        std::vector<Value*> theirs;
        for (Value* arr : arrays) theirs.push_back(tile::build(fb, "tile.load_elem", {arr, integer(fb, j)}, proven));
        acc = combine(fb, acc, theirs);
      }
      return acc;
    };
    if (!(rs && rs->slots)) return fold_groups(b);
    if_then(b, cmp(b, "eq", lid_, integer(b, 0)), [&](ir::OpBuilder& lb) {
      const std::vector<Value*> acc = fold_groups(lb);
      for (std::size_t k = 0; k < arrays.size(); ++k) lb.create("tile.store_elem", {arrays[k], integer(lb, 0), acc[k]}, proven);
      write_row_scalars(lb, *rs, acc);
    });
    b.create("tile.barrier", {});
    std::vector<Value*> out;
    for (Value* arr : arrays) out.push_back(tile::build(b, "tile.load_elem", {arr, integer(b, 0)}, proven));
    // No barrier after the reads: tile-plan-shared keeps the arrays' space
    // until the next barrier, which every lane reaches after reading.
    return out;
  }

  // A pass without carried values (the output pass): strided over the lanes.
  void each_element(ir::OpBuilder& b, const std::function<void(ir::OpBuilder&, Value*)>& body) {
    if (held_) {
      over_held(b, {}, [&](ir::OpBuilder& eb, Value* r, std::span<Value* const>) {
        body(eb, r);
        return std::vector<Value*>{};
      });
      return;
    }
    if (run_ > 1) {
      run_pass(b, length_, {}, [&](ir::OpBuilder& eb, Value* r, std::span<Value* const>) {
        body(eb, r);
        return std::vector<Value*>{};
      });
      return;
    }
    Value* from = coop_ ? lid_ : integer(b, 0);
    Value* step = integer(b, coop_ ? row_lanes_ : 1);
    tile::build_for(b, from, length_, step, {}, [&](ir::OpBuilder& lb, std::span<Value* const> a) {
      body(lb, a[0]);
      return std::vector<Value*>{};
    });
  }

  // The canonical blocked sum (row_loops.h); with the group's lanes, lane t
  // sums blocks t, t + L, .. of each superblock and lane 0 adds the block
  // sums in order, exactly as blocked_sum's middle loop does.
  // With `rs`, a held row's lane 0 also derives the row's scalars from the
  // total (take()).
  Value* sum(ir::OpBuilder& b, const SumStep& step, RowScalars* rs = nullptr) {
    if (!coop_) return blocked_sum(b, length_, acc_, step);
    if (held_) return sums(b, {step}, {rs}).at(0);
    if (run_ > 1) {
      return blocked_sum_cooperative_runs(
          b, length_, acc_, step,
          [&](ir::OpBuilder& wb, Value* r0, std::span<Value* const> accs) {
            std::vector<Value*> out(accs.begin(), accs.end());
            run_elements(wb, r0, [&](ir::OpBuilder& eb, Value* r, std::size_t k) { out[k] = step(eb, r, out[k]); });
            return out;
          },
          [&](ir::OpBuilder& wb, const std::vector<Value*>& r0s) { preload_x(wb, r0s); }, lid_, row_lanes_, run_,
          kRunsAhead, shuffles());
    }
    return blocked_sum_cooperative(b, length_, acc_, step, lid_, row_lanes_, shuffles());
  }

  // Several sums of the row (each sum()'s bits): a held row's take one
  // pass and share their barriers; other rows sum them one by one. Each
  // rss[k], when given, derives its row scalars from total k.
  std::vector<Value*> sums(ir::OpBuilder& b, const std::vector<SumStep>& steps, const std::vector<RowScalars*>& rss) {
    std::vector<Value*> out;
    if (!held_) {
      for (std::size_t k = 0; k < steps.size(); ++k) out.push_back(sum(b, steps[k], rss.at(k)));
      return out;
    }
    AtLaneZero derive = [&](ir::OpBuilder& lb, std::span<Value* const> totals) {
      for (std::size_t k = 0; k < rss.size(); ++k) {
        if (rss[k] && rss[k]->slots) write_row_scalars(lb, *rss[k], totals.subspan(k, 1));
      }
    };
    if (every_lane_scalars_) derive = nullptr;
    const auto count = static_cast<std::int64_t>(steps.size());
    auto step_all = [&](ir::OpBuilder& eb, Value* r, std::span<Value* const> acc) {
      std::vector<Value*> next;
      for (std::size_t c = 0; c < steps.size(); ++c) next.push_back(steps[c](eb, r, acc[c]));
      return next;
    };
    return blocked_sums_held(
        b, acc_, lid_, row_lanes_, kReductionStrands / run_, count,
        [&](ir::OpBuilder& sb) {
          std::vector<Value*> all;
          for (std::int64_t k = 0; k < held_strands_; ++k) {
            if (run_ == 1) {
              const std::vector<Value*> zeros(steps.size(), acc_real(sb, 0.0));
              const std::vector<Value*> strand = over_held(sb, zeros, step_all, k);
              all.insert(all.end(), strand.begin(), strand.end());
              continue;
            }
            // The lane's V adjacent strands, each its own chain, combined
            // by the canonical tree's lower levels.
            std::vector<std::vector<Value*>> per_strand;
            for (std::int64_t j = 0; j < run_; ++j) {
              per_strand.push_back(over_held_strand(sb, std::vector<Value*>(steps.size(), acc_real(sb, 0.0)), k, j, step_all));
            }
            for (std::size_t c = 0; c < steps.size(); ++c) {
              std::vector<Value*> level;
              for (const auto& chain : per_strand) level.push_back(chain[c]);
              all.push_back(pairwise_tree(std::move(level), [&](Value* x, Value* y) { return op2(sb, "add", x, y); }));
            }
          }
          return all;
        },
        derive, every_lane_scalars_);
  }

  // Operand 1 of softmax_linear and norm_linear (the row's shape, so read at
  // the row's offsets), at the accumulation type.
  Value* second_at(ir::OpBuilder& b, Value* r) {
    return at_acc(b, row_elem(b, params_.at(0), r));
  }

  // The row's max (NaN ignored, as std::max), whether it holds a NaN (bool)
  // and its count of +inf (int64). The NaN flag and the count come from a
  // second pass, which only rows with an infinite max take (the test is
  // uniform over a group: every lane read the folded max, so the other rows
  // skip that pass whole, its barriers included). A NaN in a row whose max
  // is finite shows in its exp sum instead, which the NaN makes NaN
  // (bad_after_sum, logsumexp): the first pass folds the max alone, one
  // select per element. The second pass's flag and count are carried as
  // fp64 (1.0 once seen; an exact count below 2^53) so every carried value
  // is a double and the pass vectorizes.
  std::vector<Value*> max_pass(ir::OpBuilder& b) {
    // Folded as stored (x_exact): max is exact in any float type.
    const NumericsPolicy fold = exact_fold_policy(source_of(root_.operand(0))->type().dtype());
    auto cheap = fold_pass(b, {tile::build_real(b, -kInf, fold)},
                           [&](ir::OpBuilder& lb, Value* i, std::span<Value* const> c) {
                             Value* v = x_exact(lb, i);
                             return std::vector<Value*>{select(lb, cmp(lb, "gt", v, c[0]), v, c[0])};
                           },
                           [](ir::OpBuilder& fb, std::span<Value* const> a, std::span<Value* const> c) {
                             return std::vector<Value*>{select(fb, cmp(fb, "gt", c[0], a[0]), c[0], a[0])};
                           });
    Value* m = to64(b, cheap[0]);
    Value* special = cmp(b, "eq", op1(b, "abs", m), real(b, kInf));
    std::vector<Value*> none{real(b, 0.0), real(b, 0.0)};
    auto r = tile::build_if(
                 b, special, none,
                 [&](ir::OpBuilder& sb, std::span<Value* const>) {
                   return fold_pass(
                       sb, {real(sb, 0.0), real(sb, 0.0)},
                       [&](ir::OpBuilder& lb, Value* i, std::span<Value* const> c) {
                         Value* v = x64(lb, i);
                         Value* is_inf = cmp(lb, "eq", v, real(lb, kInf));
                         return std::vector<Value*>{select(lb, cmp(lb, "ne", v, v), real(lb, 1.0), c[0]),
                                                    op2(lb, "add", c[1], select(lb, is_inf, real(lb, 1.0), real(lb, 0.0)))};
                       },
                       [](ir::OpBuilder& fb, std::span<Value* const> a, std::span<Value* const> c) {
                         return std::vector<Value*>{select(fb, cmp(fb, "gt", c[0], a[0]), c[0], a[0]),
                                                    op2(fb, "add", a[1], c[1])};
                       });
                 },
                 [](ir::OpBuilder&, std::span<Value* const> c) { return std::vector<Value*>(c.begin(), c.end()); })
                 ->results();
    return {m, cmp(b, "ne", r[0], real(b, 0.0)), cast(b, r[1], default_policy(DType::int64))};
  }

  // round_to(exp(round_to(x - m)), accum): with a plain fp32 accumulator,
  // tile.narrow_unary (the same bits, mostly from exp_f32_or_nan on CUDA).
  Value* shifted_exp(ir::OpBuilder& b, Value* r, Value* m_acc) {
    Value* d = op2(b, "sub", x_acc(b, r), m_acc);
    if (fp32_math()) {
      return tile::build(b, "tile.narrow_unary", {d}, {{"fn", std::string("exp")}, {"to", acc_}});
    }
    return to_acc(b, op1(b, "exp", to64(b, d)));
  }

  // The sum over the row of step(e) with e = shifted_exp (step may store e
  // too). With an fp32 accumulator rounding to nearest, a first pass takes
  // tile.exp_or_nan, about half exp's work; it answers NaN for about one
  // element in 2^20, which makes the row's sum NaN, and only such a row runs
  // the pass again with exp. A sum of e is
  // never NaN otherwise in the rows that use it: their max is finite and
  // their values finite or -inf, so e is finite; `skip` marks the other rows
  // (the caller ignores their sum). Either way every e and the sum have the
  // bits of the exact pass.
  using ExpStep = std::function<Value*(ir::OpBuilder&, Value* r, Value* e, Value* acc)>;
  // What a held softmax keeps of exp_sum's fast pass: each slot's e (by its
  // row index) and the row's "summed again with the exact exp". Given one,
  // the exact sum reads x again, so x need not stay live beside the e.
  struct KeptE {
    std::unordered_map<const Value*, Value*> e;
    Value* redo = nullptr;
  };
  // Whether a fused softmax gradient keeps e in registers (softmax_gradient).
  bool gradient_keeps_e() const {
    return linear_ && held_ && static_length_ % kReductionBlock == 0 && fast_exp_sum();
  }
  // Whether exp_sum takes the fast pass (and can keep its e).
  bool fast_exp_sum() const {
    return acc_.storage == DType::fp32 && acc_.rounding == Rounding::nearest_even && acc_.overflow == Overflow::inf_nan;
  }
  Value* exp_sum(ir::OpBuilder& b, Value* m_acc, Value* skip, const ExpStep& step, KeptE* kept = nullptr) {
    auto exact = [&](ir::OpBuilder& lb, Value* r, Value* acc) { return step(lb, r, shifted_exp(lb, r, m_acc), acc); };
    if (!fast_exp_sum()) return sum(b, exact);
    Value* s = sum(b, [&](ir::OpBuilder& lb, Value* r, Value* acc) {
      Value* e = op1(lb, "exp_or_nan", op2(lb, "sub", x_acc(lb, r), m_acc));
      if (kept) kept->e[r] = e;
      return step(lb, r, e, acc);
    });
    Value* redo = op2(b, "and", cmp(b, "ne", s, s), not_(b, skip));
    if (kept) kept->redo = redo;
    ir::Operation* again = tile::build_if(
        b, redo, {s},
        [&](ir::OpBuilder& tb, std::span<Value* const>) {
          if (!kept) return std::vector<Value*>{sum(tb, exact)};
          return std::vector<Value*>{with_flag(reread_, [&] { return sum(tb, exact); })};
        },
        [&](ir::OpBuilder&, std::span<Value* const> a) { return std::vector<Value*>{a[0]}; });
    again->attrs().set("likely", false);
    return again->result(0);
  }

  // y (t - sum(t y)) with y = operand 0 (the row) and t = operand 1, of the
  // same shape and so read at the same offsets; every step rounds once at
  // the accumulation type, as the reference does.
  void softmax_linear(ir::OpBuilder& b) {
    Value* s = sum(b, [&](ir::OpBuilder& lb, Value* r, Value* acc) {
      return op2(lb, "add", acc, op2(lb, "mul", to_acc(lb, x64(lb, r)), second_at(lb, r)));
    });
    each_element(b, [&](ir::OpBuilder& lb, Value* r) {
      store(lb, row_->offset(lb, r), op2(lb, "mul", to_acc(lb, x64(lb, r)), op2(lb, "sub", second_at(lb, r), s)));
    });
  }

  // graph.norm_linear (graph/normalization_ops.cpp): x = operand 0 (the
  // row), g = operand 1 read at the same offsets; the statistics take one
  // pass each (mean of x, of xc^2, of g, of g xhat), every step rounded once
  // at the accumulation type as the reference does.
  void norm_linear(ir::OpBuilder& b) {
    const bool center = root_.attrs().get_bool("center");
    const DType storage = root_.operand(0)->type().dtype();
    const double eps = decode_value(encode_value(root_.attrs().get_real("eps"), storage), storage);
    auto x_at = [&](ir::OpBuilder& lb, Value* r) { return to_acc(lb, x64(lb, r)); };
    // The mean of `term` over the row, or what `then` makes of it: row
    // scalars, which lane 0 derives in the sum's last stage.
    using Then = std::function<Value*(ir::OpBuilder&, Value*)>;
    auto mean_of = [&](const std::function<Value*(ir::OpBuilder&, Value*)>& term, const Then& then = {}) {
      RowScalars rs = row_scalars(b, [&](ir::OpBuilder& db, std::span<Value* const> total) {
        Value* mv = mean(db, total[0]);
        return std::vector<Value*>{then ? then(db, mv) : mv};
      });
      Value* total =
          sum(b, [&](ir::OpBuilder& lb, Value* r, Value* acc) { return op2(lb, "add", acc, term(lb, r)); }, &rs);
      return take(b, rs, {&total, 1}).at(0);
    };
    // With a center, the means of x and of g need nothing of each other:
    // one pass (sums) gives both.
    Value* m = nullptr;
    Value* gm = nullptr;
    if (center) {
      auto to_mean = [&](ir::OpBuilder& db, std::span<Value* const> total) {
        return std::vector<Value*>{mean(db, total[0])};
      };
      RowScalars rs_m = row_scalars(b, to_mean);
      RowScalars rs_g = row_scalars(b, to_mean);
      const std::vector<Value*> totals = sums(
          b,
          {[&](ir::OpBuilder& lb, Value* r, Value* acc) { return op2(lb, "add", acc, x_at(lb, r)); },
           [&](ir::OpBuilder& lb, Value* r, Value* acc) { return op2(lb, "add", acc, second_at(lb, r)); }},
          {&rs_m, &rs_g});
      m = take(b, rs_m, {&totals[0], 1}).at(0);
      gm = take(b, rs_g, {&totals[1], 1}).at(0);
    }
    auto xc_at = [&](ir::OpBuilder& lb, Value* r) { return center ? op2(lb, "sub", x_at(lb, r), m) : x_at(lb, r); };
    Value* rr = mean_of(
        [&](ir::OpBuilder& lb, Value* r) {
          Value* c = xc_at(lb, r);
          return op2(lb, "mul", c, c);
        },
        [&](ir::OpBuilder& db, Value* var) {
          return quotient(db, acc_real(db, 1.0), op1(db, "sqrt", to64(db, op2(db, "add", var, acc_real(db, eps)))));
        });
    auto xhat_at = [&](ir::OpBuilder& lb, Value* r) { return op2(lb, "mul", xc_at(lb, r), rr); };
    Value* q = mean_of([&](ir::OpBuilder& lb, Value* r) { return op2(lb, "mul", second_at(lb, r), xhat_at(lb, r)); });
    each_element(b, [&](ir::OpBuilder& lb, Value* r) {
      Value* gc = center ? op2(lb, "sub", second_at(lb, r), gm) : second_at(lb, r);
      Value* w = op2(lb, "sub", gc, op2(lb, "mul", xhat_at(lb, r), q));
      store(lb, row_->offset(lb, r), op2(lb, "mul", rr, w));
    });
  }

  // A softmax row's statistics: `bad` (a NaN in a row whose max is
  // infinite, or every value -inf: the results are NaN; bad_after_sum adds
  // the rows whose NaN showed in the exp sum), `m_is_inf` (the results
  // share 1 among the +inf values), the shift m at the accumulation type (0
  // in both cases: an infinite max makes every exp NaN, and those rows take
  // other branches) and the count of +inf.
  struct SoftmaxRow {
    Value* bad;
    Value* m_is_inf;
    Value* m_acc;
    Value* inf_count;
  };
  SoftmaxRow softmax_row(ir::OpBuilder& b) {
    auto stats = max_pass(b);
    Value* m = stats[0];
    Value* bad = op2(b, "or", stats[1], cmp(b, "eq", m, real(b, -kInf)));
    Value* m_is_inf = cmp(b, "eq", m, real(b, kInf));
    return {bad, m_is_inf, to_acc(b, select(b, op2(b, "or", bad, m_is_inf), real(b, 0.0), m)), stats[2]};
  }
  // Whether the row's results are NaN, given its exp sum s: a NaN in a row
  // whose max is finite makes s NaN, and nothing else does there (every e
  // is exact and in [0, 1] after exp_sum).
  Value* bad_after_sum(ir::OpBuilder& b, const SoftmaxRow& row, Value* s) {
    return op2(b, "or", row.bad, op2(b, "and", not_(b, row.m_is_inf), cmp(b, "ne", s, s)));
  }

  void softmax(ir::OpBuilder& b) {
    const SoftmaxRow row = softmax_row(b);
    Value* m_is_inf = row.m_is_inf;
    Value* m_acc = row.m_acc;
    // When the result's storage is the accumulation type, the sum pass
    // parks each e in the result (exactly) and the last pass reads it back
    // instead of computing exp again. Normalization results never share a
    // buffer with their input (plan_buffers), so x stays readable.
    const bool keep_e = out_policy().storage == acc_.storage;
    // A held row of whole blocks keeps each e of the sum pass in its
    // register (the steps run at the kernel's top level): where the row
    // needed no exact redo, those are the exact e, and the output needs no
    // second exp.
    KeptE kept;
    const bool held_e = held_ && !keep_e && static_length_ % kReductionBlock == 0;
    Value* s = exp_sum(
        b, m_acc, op2(b, "or", row.bad, m_is_inf),
        [&](ir::OpBuilder& eb, Value* r, Value* e, Value* acc) {
          if (keep_e) store(eb, row_->offset(eb, r), e);
          return op2(eb, "add", acc, e);
        },
        held_e ? &kept : nullptr);
    Value* bad = bad_after_sum(b, row, s);
    // (An accumulator other than plain fp32 has no fast pass: no kept e.)
    const bool use_held_e = kept.redo && kept.e.size() == held_r_.size();
    Value* share = quotient(b, acc_real(b, 1.0), to_acc(b, cast(b, row.inf_count, kF64)));
    // The row's case is uniform, so each case is its own loop: the common
    // one reads only e and divides at the accumulation type (a division of
    // two values of that type, correctly rounded, is the reference's
    // round_to(e / s) in fp64, as 53 >= 2 * 24 + 2).
    if_then(
        b, bad,
        [&](ir::OpBuilder& nb) {
          each_element(nb, [&](ir::OpBuilder& lb, Value* r) { store(lb, row_->offset(lb, r), acc_real(lb, std::nan(""))); });
        },
        [&](ir::OpBuilder& ob) {
          if_then(
              ob, m_is_inf,
              [&](ir::OpBuilder& ib) {
                // A rare row: it reads x again, so a held x need not live
                // on beside the kept e.
                with_flag(reread_, [&] {
                  each_element(ib, [&](ir::OpBuilder& lb, Value* r) {
                    Value* y = select(lb, cmp(lb, "eq", x64(lb, r), real(lb, kInf)), share, acc_real(lb, 0.0));
                    store(lb, row_->offset(lb, r), y);
                  });
                });
              },
              [&](ir::OpBuilder& fb) {
                auto exact_e = [&](ir::OpBuilder& eb) {
                  each_element(eb, [&](ir::OpBuilder& lb, Value* r) {
                    Value* e = keep_e ? to_acc(lb, LaneProgram::decode(lb, row_elem(lb, out_buffer_, r)))
                                      : shifted_exp(lb, r, m_acc);
                    store(lb, row_->offset(lb, r), op2(lb, "div", e, s));
                  });
                };
                if (!use_held_e) return exact_e(fb);
                auto exact_e_reread = [&](ir::OpBuilder& eb) { with_flag(reread_, [&] { exact_e(eb); }); };
                // The held e, divided by the row's reciprocal (s lies in
                // [1, n], inside quotient_by_reciprocal's range; e <= 1).
                if_then(fb, op2(fb, "or", kept.redo, not_(fb, reciprocal_range(fb, s))), exact_e_reread,
                        [&](ir::OpBuilder& hb) {
                          Value* recip = op2(hb, "div", acc_real(hb, 1.0), s);
                          // e and 1 / s are finite here; a redone lane
                          // reads x again, so no kept e lives past its store.
                          quotients_then_redo(
                              hb, /*finite=*/true,
                              [&](ir::OpBuilder& eb, Value* r) {
                                Value* e = kept.e.at(r);
                                store(eb, row_->offset(eb, r), reciprocal_quotient(eb, e, s, recip));
                                return e;
                              },
                              exact_e_reread);
                        },
                        /*likely=*/false);
              },
              /*likely=*/false);
        },
        /*likely=*/false);
  }

  // softmax_safe fused with softmax_linear(y, t): the softmax's passes, e =
  // exp(x - max) parked in the gradient's buffer (its storage is the
  // accumulation type), then softmax_linear's two passes with y computed
  // from e as the softmax's last pass would have stored it. y is stored
  // too when another kernel reads it. Each value and sum has the bits the
  // two kernels give.
  void softmax_gradient(ir::OpBuilder& b) {
    const SoftmaxRow row = softmax_row(b);
    Value* m_is_inf = row.m_is_inf;
    Value* m_acc = row.m_acc;
    const NumericsPolicy& dx_policy = out_policy();
    const NumericsPolicy& y_policy = root_.result(0)->type().policy;
    // A held row of whole blocks keeps each e of the fast sum pass in its
    // register, as softmax() does: where the row needs no exact redo, y and
    // the gradient follow from the registers and e never goes to memory.
    // The redo (reread_) parks the exact e as the other forms do, in the
    // gradient's buffer when that holds the accumulation type; a gradient
    // narrowed by an epilogue cast cannot hold e, and its passes compute the
    // exact e again from x instead (the values parking would have kept).
    const bool held_e = gradient_keeps_e();
    const bool park_e = dx_policy.storage == acc_.storage;
    KeptE kept;
    Value* s = exp_sum(
        b, m_acc, op2(b, "or", row.bad, m_is_inf),
        [&](ir::OpBuilder& eb, Value* r, Value* e, Value* acc) {
          if (park_e && (!held_e || reread_)) store_to(eb, out_buffer_, dx_policy, row_->offset(eb, r), e);
          return op2(eb, "add", acc, e);
        },
        held_e ? &kept : nullptr);
    Value* bad = bad_after_sum(b, row, s);
    Value* share = quotient(b, acc_real(b, 1.0), to_acc(b, cast(b, row.inf_count, kF64)));
    // The sum pass replaces e by y (in y's buffer when y is a result), so
    // the last pass reads y instead of dividing again. y is rounded to its
    // format first (the gradient reads it through a widening cast when
    // that is narrower than the accumulation type); the gradient's buffer
    // holds any such y exactly.
    Value* y_home = y_buffer_ ? y_buffer_ : out_buffer_;
    const NumericsPolicy& y_home_policy = y_buffer_ ? y_policy : dx_policy;
    auto as_stored_y = [&](ir::OpBuilder& rb, Value* y) {
      if (y_policy.storage == acc_.storage) return y;
      const LaneValue v = fp32_math() ? LaneProgram::from_fp32(rb, y, y_policy) : LaneProgram::finish(rb, to64(rb, y), y_policy);
      return at_acc(rb, v.stored);
    };
    using ValueAt = std::function<Value*(ir::OpBuilder&, Value*)>;
    auto linear_passes = [&](ir::OpBuilder& pb, const ValueAt& y_at) {
      Value* s2 = sum(pb, [&](ir::OpBuilder& eb, Value* r, Value* acc) {
        Value* y = as_stored_y(eb, y_at(eb, r));
        store_to(eb, y_home, y_home_policy, row_->offset(eb, r), y);
        return op2(eb, "add", acc, op2(eb, "mul", y, second_at(eb, r)));
      });
      each_element(pb, [&](ir::OpBuilder& lb, Value* r) {
        Value* at = row_->offset(lb, r);
        Value* y = to_acc(lb, LaneProgram::decode(lb, row_elem(lb, y_home, r)));
        store_to(lb, out_buffer_, dx_policy, at, op2(lb, "mul", y, op2(lb, "sub", second_at(lb, r), s2)));
      });
    };
    if_then(
        b, op2(b, "or", bad, m_is_inf),
        [&](ir::OpBuilder& sb) {
          // A rare row: it reads x again, so a held x need not live on
          // beside e and y.
          with_flag(reread_, [&] {
            linear_passes(sb, [&](ir::OpBuilder& lb, Value* r) {
              Value* inf_share = select(lb, cmp(lb, "eq", x64(lb, r), real(lb, kInf)), share, acc_real(lb, 0.0));
              return select(lb, bad, acc_real(lb, std::nan("")), inf_share);
            });
          });
        },
        [&](ir::OpBuilder& cb) {
          auto from_parked_e = [&](ir::OpBuilder& pb) {
            linear_passes(pb, [&](ir::OpBuilder& lb, Value* r) {
              Value* e = park_e ? to_acc(lb, LaneProgram::decode(lb, row_elem(lb, out_buffer_, r)))
                                : shifted_exp(lb, r, m_acc);
              return op2(lb, "div", e, s);
            });
          };
          if (!held_e) return from_parked_e(cb);
          if_then(
              cb, kept.redo, [&](ir::OpBuilder& rb) { with_flag(reread_, [&] { from_parked_e(rb); }); },
              [&](ir::OpBuilder& hb) {
                // y = e / s by the row's reciprocal (s lies in [1, n], e in
                // [0, 1]: quotient_by_reciprocal's range), rounded to y's
                // format, kept by slot.
                Value* recip = op2(hb, "div", acc_real(hb, 1.0), s);
                // Each quotient by the reciprocal; a lane that saw an e below
                // its range (rare) takes them all again with the per-element
                // test, so no division (a call on a GPU) sits among the
                // values the lane keeps.
                std::vector<Value*> quotients;
                Value* tiny = boolean(hb, false);
                for (Value* r : held_r_) {
                  quotients.push_back(reciprocal_quotient(hb, kept.e.at(r), s, recip));
                  tiny = op2(hb, "or", tiny, below_reciprocal_quotient(hb, kept.e.at(r)));
                }
                ir::Operation* exact = tile::build_if(
                    hb, tiny, quotients,
                    [&](ir::OpBuilder& tb, std::span<Value* const>) {
                      std::vector<Value*> q;
                      for (Value* r : held_r_) q.push_back(quotient_by_reciprocal(tb, kept.e.at(r), s, recip));
                      return q;
                    },
                    [](ir::OpBuilder&, std::span<Value* const> q) { return std::vector<Value*>(q.begin(), q.end()); });
                exact->attrs().set("likely", false);
                std::unordered_map<const Value*, Value*> y_of;
                for (std::size_t k = 0; k < held_r_.size(); ++k) {
                  Value* y = as_stored_y(hb, exact->result(k));
                  y_of[held_r_[k]] = y;
                  if (y_buffer_) store_to(hb, y_buffer_, y_policy, row_->offset(hb, held_r_[k]), y);
                }
                Value* s2 = sum(hb, [&](ir::OpBuilder& eb, Value* r, Value* acc) {
                  return op2(eb, "add", acc, op2(eb, "mul", y_of.at(r), second_at(eb, r)));
                });
                each_element(hb, [&](ir::OpBuilder& lb, Value* r) {
                  Value* dx = op2(lb, "mul", y_of.at(r), op2(lb, "sub", second_at(lb, r), s2));
                  store_to(lb, out_buffer_, dx_policy, row_->offset(lb, r), dx);
                });
              },
              /*likely=*/false);
        },
        /*likely=*/false);
  }

  void logsumexp(ir::OpBuilder& b, Value* o) {
    auto stats = max_pass(b);
    Value* m = stats[0];
    Value* m_is_inf = cmp(b, "eq", op1(b, "abs", m), real(b, kInf));
    Value* m_acc = to_acc(b, select(b, m_is_inf, real(b, 0.0), m));
    // A NaN in a row whose max is finite makes s, and so the result, NaN.
    Value* s = exp_sum(b, m_acc, op2(b, "or", stats[1], m_is_inf),
                       [&](ir::OpBuilder& eb, Value*, Value* e, Value* acc) { return op2(eb, "add", acc, e); });
    Value* normal = op2(b, "add", m_acc, to_acc(b, op1(b, "log", to64(b, s))));
    Value* y = select(b, stats[1], acc_real(b, std::nan("")), select(b, m_is_inf, to_acc(b, m), normal));
    if (coop_) {
      if_then(b, cmp(b, "eq", lid_, integer(b, 0)), [&](ir::OpBuilder& lb) { store(lb, o, y); });
    } else {
      store(b, o, y);
    }
  }

  // Max |x| (NaN ignored), folded as stored. Whether the row is finite
  // follows from its first sum (normalize()), not from a flag per element.
  Value* abs_max_pass(ir::OpBuilder& b, RowScalars* rs) {
    const NumericsPolicy t = exact_fold_policy(source_of(root_.operand(0))->type().dtype());
    auto r = fold_pass(b, {tile::build_real(b, 0.0, t)},
                       [&](ir::OpBuilder& lb, Value* i, std::span<Value* const> c) {
                         Value* a = op1(lb, "abs", x_exact(lb, i));
                         return std::vector<Value*>{select(lb, cmp(lb, "gt", a, c[0]), a, c[0])};
                       },
                       [](ir::OpBuilder& fb, std::span<Value* const> a, std::span<Value* const> c) {
                         return std::vector<Value*>{select(fb, cmp(fb, "gt", c[0], a[0]), c[0], a[0])};
                       },
                       rs);
    return r[0];
  }

  // The row's largest and smallest value (NaN ignored), as stored. With a
  // lane per row (a CPU's), also 1.0 once a value is not finite: that
  // three-value fold measured faster than the two-value one (layernorm
  // forward, 4096 x 4096 fp32, one core: 14.5 against 18.7 ms), so the
  // flag comes from it there rather than from the mean's sum.
  std::vector<Value*> extremes_pass(ir::OpBuilder& b, RowScalars* rs) {
    const NumericsPolicy t = exact_fold_policy(source_of(root_.operand(0))->type().dtype());
    auto c_ = [&](ir::OpBuilder& cb, double v) { return tile::build_real(cb, v, t); };
    std::vector<Value*> inits{c_(b, -kInf), c_(b, kInf)};
    if (!coop_) inits.push_back(c_(b, 0.0));
    return fold_pass(b, inits,
                     [&](ir::OpBuilder& lb, Value* i, std::span<Value* const> c) {
                       Value* v = x_exact(lb, i);
                       std::vector<Value*> out{select(lb, cmp(lb, "gt", v, c[0]), v, c[0]),
                                               select(lb, cmp(lb, "lt", v, c[1]), v, c[1])};
                       if (c.size() == 3) {
                         out.push_back(select(lb, cmp(lb, "lt", op1(lb, "abs", v), c_(lb, kInf)), c[2], c_(lb, 1.0)));
                       }
                       return out;
                     },
                     [](ir::OpBuilder& fb, std::span<Value* const> a, std::span<Value* const> c) {
                       std::vector<Value*> out{select(fb, cmp(fb, "gt", c[0], a[0]), c[0], a[0]),
                                               select(fb, cmp(fb, "lt", c[1], a[1]), c[1], a[1])};
                       if (c.size() == 3) out.push_back(select(fb, cmp(fb, "gt", c[2], a[2]), c[2], a[2]));
                       return out;
                     },
                     rs);
  }

  // A row's scaling 2^-e by the exponent of `a` (max |x|, or max |x - mean|)
  // as row scalars: e, then pow2_values.
  std::vector<Value*> scaling_by_exponent(ir::OpBuilder& db, Value* a) {
    Value* e = op1(db, "frexp_exp", a);
    std::vector<Value*> out{e};
    for (Value* f : pow2_values(pow2(db, index_op(db, "sub", integer(db, 0), e)))) out.push_back(f);
    return out;
  }
  Pow2 minus_pow2(ir::OpBuilder& b, std::span<Value* const> scalars) {
    return pow2_of_values(index_op(b, "sub", integer(b, 0), scalars[0]), scalars.subspan(1));
  }

  void normalize(ir::OpBuilder& b, bool center) {
    // layernorm: the row's extremes give max|x| now and max|x - mean| after
    // the mean pass (below), which saves a pass over the row. rmsnorm needs
    // only max|x|. Either way lane 0 derives max|x|, its exponent k and the
    // factors of 2^-k (row scalars).
    Value* xmax = nullptr;
    Value* xmin = nullptr;
    RowScalars by_max = row_scalars(b, [&](ir::OpBuilder& db, std::span<Value* const> folded) {
      Value* amax = to64(db, folded[0]);
      if (center) {
        // An empty or all-NaN row keeps the infinities the fold started
        // from; its results are NaN (or none) either way.
        Value* hi = op1(db, "abs", to64(db, folded[0]));
        Value* lo = op1(db, "abs", to64(db, folded[1]));
        amax = select(db, cmp(db, "lt", folded[0], folded[1]), real(db, 0.0), select(db, cmp(db, "gt", hi, lo), hi, lo));
      }
      std::vector<Value*> out{amax};
      for (Value* v : scaling_by_exponent(db, amax)) out.push_back(v);
      return out;
    });
    std::vector<Value*> folded;
    if (center) {
      folded = extremes_pass(b, &by_max);
      xmax = to64(b, folded[0]);
      xmin = to64(b, folded[1]);
    } else {
      folded = {abs_max_pass(b, &by_max)};
    }
    const std::vector<Value*> max_scalars = take(b, by_max, folded);
    Value* amax = max_scalars[0];
    // Exponent arithmetic stays far inside int64 (|values| < 2^31, the
    // kNoExponent sentinel included): nowrap (index_op), plain adds on a GPU
    // where checked int64 arithmetic took several instructions each.
    Value* k = max_scalars[1];
    const Pow2 minus_k = minus_pow2(b, std::span<Value* const>(max_scalars).subspan(1));
    auto u = [&](ir::OpBuilder& lb, Value* r) {
      return minus_k.up ? scaled_exact(lb, x_acc(lb, r), minus_k) : scaled(lb, x64(lb, r), minus_k);
    };
    std::function<Value*(ir::OpBuilder&, Value*)> z = u;
    Value* K = k;
    Value* all_zero = cmp(b, "eq", amax, real(b, 0.0));
    // The row's scalings by p.down alone (every p.up 1, the common row).
    // Cooperative rows only (a GPU's): on a CPU the second copy of each sum
    // and output loop measured slower (bench/schedule_norm_bench.py).
    Value* plain = minus_k.up && coop_ ? unit_up(b, minus_k) : nullptr;
    // Whether some x is not finite: x 2^-k lies in (-1, 1) for finite x, so
    // the first sum (of those, or of their squares) stays below n; an
    // infinity or a NaN makes it infinite or NaN (k is then 0).
    auto not_finite = [&](ir::OpBuilder& fb, Value* total) {
      return not_(fb, cmp(fb, "lt", op1(fb, "abs", total), acc_real(fb, kInf)));
    };
    Value* nonfinite = nullptr;
    if (center) {
      // Lane 0 derives the mean, max |w| and the factors of 2^-j from the sum.
      RowScalars by_mean = row_scalars(b, [&](ir::OpBuilder& db, std::span<Value* const> total) {
        Value* mu = mean(db, total[0]);
        // w = round(round(x 2^-k) - mu) is monotone in x (every rounding is),
        // so max |w| over the row is |w| at its largest or its smallest x: the
        // reference's pass over the row, from two values.
        Value* w_hi = op1(db, "abs", to64(db, op2(db, "sub", scaled_exact(db, xmax, minus_k), mu)));
        Value* w_lo = op1(db, "abs", to64(db, op2(db, "sub", scaled_exact(db, xmin, minus_k), mu)));
        Value* wmax = select(db, cmp(db, "gt", w_hi, w_lo), w_hi, w_lo);
        std::vector<Value*> out{mu, wmax};
        for (Value* v : scaling_by_exponent(db, wmax)) out.push_back(v);
        return out;
      });
      Value* total = sum_plain_or_not(
          b, plain, [&](ir::OpBuilder& eb, Value* r, Value* acc) { return op2(eb, "add", acc, u(eb, r)); }, &by_mean);
      nonfinite = folded.size() == 3 ? cmp(b, "ne", folded[2], tile::build_real(b, 0.0, folded[2]->type().policy))
                                     : not_finite(b, total);
      const std::vector<Value*> mean_scalars = take(b, by_mean, {&total, 1});
      Value* mu = mean_scalars[0];
      auto w = [&, mu](ir::OpBuilder& lb, Value* r) { return op2(lb, "sub", u(lb, r), mu); };
      const Pow2 minus_j = minus_pow2(b, std::span<Value* const>(mean_scalars).subspan(2));
      K = index_op(b, "sub", k, minus_j.e);
      all_zero = cmp(b, "eq", mean_scalars[1], real(b, 0.0));
      z = [w, minus_j, this](ir::OpBuilder& lb, Value* r) { return scaled_exact(lb, w(lb, r), minus_j); };
      if (plain && minus_j.up) plain = op2(b, "and", plain, unit_up(b, minus_j));
    }
    // The denominator sqrt(ms 2^2K + eps) as d * 2^shift (the reference's
    // denominator()), from the sum of squares; lane 0 derives d, shift, the
    // factors of 2^shift and (fp32) 1 / d.
    const double eps = root_.attrs().get_real("eps");
    RowScalars by_squares = row_scalars(b, [&](ir::OpBuilder& db, std::span<Value* const> total) {
      Value* ms = mean(db, total[0]);
      Value* ms64 = to64(db, ms);
      Value* e1 = select(db, cmp(db, "gt", ms64, real(db, 0.0)),
                         index_op(db, "add", index_op(db, "sub", op1(db, "frexp_exp", ms64), integer(db, 1)),
                                  index_op(db, "mul", integer(db, 2), K)),
                         integer(db, kNoExponent));
      Value* e2 = integer(db, eps > 0.0 ? std::ilogb(eps) : kNoExponent);
      Value* s = index_op(db, "add", op2(db, "floordiv", op2(db, "max", e1, e2), integer(db, 2)), integer(db, 1));
      Value* two_s = index_op(db, "mul", integer(db, 2), s);
      Value* t = op2(db, "add", scaled(db, ms, index_op(db, "sub", index_op(db, "mul", integer(db, 2), K), two_s)),
                     scaled(db, acc_real(db, eps), index_op(db, "sub", integer(db, 0), two_s)));
      // sqrt in fp32 where t is an fp32 value: the same bits (see mean()).
      Value* d = fp32_math() && t->type().policy == acc_ ? op1(db, "sqrt", t) : to_acc(db, op1(db, "sqrt", to64(db, t)));
      Value* shift = index_op(db, "sub", K, s);
      if (eps == 0.0) {
        Value* degenerate = cmp(db, "eq", ms64, real(db, 0.0));
        d = select(db, degenerate, acc_real(db, 0.0), d);
        shift = select(db, degenerate, integer(db, 0), shift);
      }
      std::vector<Value*> out{d, shift};
      for (Value* f : pow2_values(pow2(db, shift))) out.push_back(f);
      if (fp32_math()) out.push_back(op2(db, "div", acc_real(db, 1.0), d));
      return out;
    });
    Value* squares = sum_plain_or_not(
        b, plain,
        [&](ir::OpBuilder& eb, Value* r, Value* acc) {
          Value* v = z(eb, r);
          return fma(eb, v, v, acc);
        },
        &by_squares);
    if (!center) nonfinite = not_finite(b, squares);
    const std::vector<Value*> v = take(b, by_squares, {&squares, 1});
    Value* d = v[0];
    Value* shift = v[1];
    const Pow2 out_scale = pow2_of_values(shift, std::span<Value* const>(v).subspan(2));
    Value* row_recip = fp32_math() ? v.back() : nullptr;  // the common row's fp32 1 / d
    // The quotient of two values of the accumulation type, rounded once to
    // it: the reference's round_to(z / d) (a correctly rounded division).
    Value* recip = nullptr;  // the common row's fp32 1 / d
    // Element r's result, stored; returns z(r). `unchecked`: the
    // reciprocal's quotient without its test for tiny z (the caller tests).
    auto output_element = [&](ir::OpBuilder& lb, Value* r, bool in_fp32, bool unchecked) {
      Value* zr = z(lb, r);
      Value* q = !recip     ? op2(lb, "div", zr, d)
                 : unchecked ? reciprocal_quotient(lb, zr, d, recip)
                             : quotient_by_reciprocal(lb, zr, d, recip);
      Value* y = in_fp32 ? scaled_f32(lb, q, out_scale) : scaled(lb, q, out_scale);
      if (!common_row_) y = select(lb, nonfinite, acc_real(lb, std::nan("")), select(lb, all_zero, zr, y));
      if (params_.size() == 2) {
        y = fma(lb, y, param(lb, 0, r), param(lb, 1, r));
      } else if (params_.size() == 1) {
        y = op2(lb, "mul", y, param(lb, 0, r));
      }
      store(lb, row_->offset(lb, r), y);
      return zr;
    };
    auto output = [&](ir::OpBuilder& ob, bool in_fp32) {
      each_element(ob, [&](ir::OpBuilder& lb, Value* r) { output_element(lb, r, in_fp32, false); });
    };
    // The common row's output: a held row's lanes take the reciprocal's
    // quotients (quotients_then_redo). The values are finite (finite z, d
    // and factors), so without a weight or bias to multiply by the stores
    // skip the NaN fix.
    auto common_output = [&](ir::OpBuilder& cb) {
      if (!held_) return output(cb, true);
      quotients_then_redo(
          cb, params_.empty(), [&](ir::OpBuilder& eb, Value* r) { return output_element(eb, r, true, true); },
          [&](ir::OpBuilder& tb) { output(tb, true); });
    };
    if (out_scale.up) {
      // The row's output scaling is exact in fp32 unless 2^shift lies
      // below fp32's smallest number (a uniform test: one loop or the other).
      auto by_shift = [&](ir::OpBuilder& sb) {
        if_then(
            sb, cmp(sb, "ge", shift, integer(sb, -149)), [&](ir::OpBuilder& fb) { output(fb, true); },
            [&](ir::OpBuilder& db) { output(db, false); }, /*likely=*/true);
      };
      // The common row (finite, not all zero, every scaling by p.down
      // alone) skips the per-element selects and first multiplies.
      // Its divisor d lies in quotient_by_reciprocal's range.
      // Cooperative rows only (plain is set for them alone, above).
      if (!plain) {
        by_shift(b);
        return;
      }
      Value* common = op2(b, "and", op2(b, "and", not_(b, nonfinite), not_(b, all_zero)),
                          op2(b, "and", cmp(b, "ge", shift, integer(b, -149)), unit_up(b, out_scale)));
      common = op2(b, "and", op2(b, "and", common, reciprocal_range(b, d)), plain);
      if_then(
          b, common,
          [&](ir::OpBuilder& cb) {
            recip = row_recip ? row_recip : op2(cb, "div", acc_real(cb, 1.0), d);
            with_flag(plain_scaling_, [&] { with_flag(common_row_, [&] { common_output(cb); }); });
            recip = nullptr;
          },
          by_shift, /*likely=*/true);
    } else {
      output(b, false);
    }
  }

  // ---- scalars derived once per row ----
  // `derive` maps a pass's results (its folded values, or a sum's total) to
  // the row's scalars (exponents, scaling factors, a denominator). In a
  // group larger than a warp, lane 0 derives them inside the pass's last
  // serial stage, while the other lanes wait at its barrier anyway, and
  // writes them to shared memory; the group reads them after that barrier.
  // One scalar sequence per row, where every thread repeated it (about 100
  // instructions per warp and row: several per element of a held row).
  // Elsewhere every lane derives them itself.
  // A held row with row_held_every_lane derives them in every lane, each
  // from the published block sums or group folds: one barrier a pass.
  RowScalars row_scalars(ir::OpBuilder& b, Derive derive) {
    RowScalars rs{std::move(derive)};
    if (coop_ && row_lanes_ > 32 && !every_lane_scalars_) rs.slots = shared_array(b, kF64, kLaneZeroValues);
    return rs;
  }
  // In lane 0's code: derive from `results` and write the values. A pass
  // built twice (sum_plain_or_not's two forms) writes them twice, alike.
  void write_row_scalars(ir::OpBuilder& lb, RowScalars& rs, std::span<Value* const> results) {
    const std::vector<Value*> values = rs.derive(lb, results);
    if (static_cast<std::int64_t>(values.size()) > kLaneZeroValues) {
      raise(ErrorCode::Internal, "normalization: more than " + std::to_string(kLaneZeroValues) + " row scalars");
    }
    std::vector<NumericsPolicy> policies;
    const ir::AttrMap proven{{"in_bounds", true}};
    for (std::size_t k = 0; k < values.size(); ++k) {
      policies.push_back(values[k]->type().policy);
      lb.create("tile.store_elem", {rs.slots, integer(lb, static_cast<std::int64_t>(k)), cast(lb, values[k], kF64)},
                proven);
    }
    if (rs.written && policies != rs.policies) raise(ErrorCode::Internal, "normalization: row scalars differ by form");
    rs.policies = std::move(policies);
    rs.written = true;
  }
  // The row's scalars, after the pass that gave `results`: read back where
  // lane 0 wrote them in the pass, else derived now (by lane 0 behind a
  // barrier of its own, or by every lane).
  std::vector<Value*> take(ir::OpBuilder& b, RowScalars& rs, std::span<Value* const> results) {
    if (!rs.slots) return rs.derive(b, results);
    const ir::AttrMap proven{{"in_bounds", true}};
    if (!rs.written) {
      if_then(b, cmp(b, "eq", lid_, integer(b, 0)), [&](ir::OpBuilder& lb) { write_row_scalars(lb, rs, results); });
      b.create("tile.barrier", {});
    }
    std::vector<Value*> out;
    for (std::size_t k = 0; k < rs.policies.size(); ++k) {
      Value* v = tile::build(b, "tile.load_elem", {rs.slots, integer(b, static_cast<std::int64_t>(k))}, proven);
      out.push_back(rs.policies[k] == kF64 ? v : cast(b, v, rs.policies[k]));
    }
    return out;
  }

  Value* param(ir::OpBuilder& b, std::size_t k, Value* r) {
    Value* stored = run_state_ ? run_value(b, run_state_->param_loads, params_[k], r, /*at_row=*/false)
                               : tile::build(b, "tile.load_elem", {params_[k], r});
    return to_acc(b, LaneProgram::decode(b, stored));
  }

  const ir::Operation& kernel_;
  const ir::Block& body_;
  const ir::Operation& root_;
  ir::Module& out_;
  std::string name_;
  std::int64_t axis_ = 0;
  NumericsPolicy acc_;
  std::optional<RowIndex> row_;
  std::int64_t row_lanes_ = 1;
  std::int64_t run_ = 1;  // elements per run (row_vector; a held row: its lane's adjacent strands, row_held_run)
  Value* x_buffer_ = nullptr;
  std::unordered_map<const Value*, std::vector<Value*>> preloads_;  // x's runs by r0 (preload_x)
  bool coop_ = false;
  bool reread_ = false;               // building a rare path of a held row: read x again
  bool plain_scaling_ = false;        // building code for rows whose scalings have p.up == 1
  bool common_row_ = false;           // building the output of a finite row, not all zero
  bool finite_output_ = false;        // building held stores of values proven not NaN
  bool held_ = false;                 // rows held in registers (hold_row)
  bool every_lane_scalars_ = false;   // held: every lane derives the row scalars (row_held_every_lane)
  std::int64_t held_strands_ = 1;     // strands per lane of a held row
  std::int64_t static_length_ = 0;    // the row's length when known (0: symbolic)
  std::vector<Value*> held_r_;        // the lane's slots' row indices
  std::vector<Value*> held_valid_;    // each slot's "in the row" (null: always)
  std::map<std::pair<const Value*, const Value*>, Value*> held_loads_;  // (row buffer, slot's row index) -> element
  Value* lid_ = nullptr;
  Value* length_ = nullptr;
  const ir::Operation* epilogue_ = nullptr;  // the narrowing cast the kernel ends with, if any
  Value* out_buffer_ = nullptr;     // the result's (fused: the gradient's) buffer
  Value* y_buffer_ = nullptr;       // fused: y's buffer when y is a kernel result
  const ir::Operation* linear_ = nullptr;  // fused: the softmax_linear of the root
  std::vector<Value*> params_;
};

// Whether every value of `storage` is exact in `accum`.
bool fits(DType storage, DType accum) {
  if (accum == DType::fp64) return storage != DType::int64;
  return storage != DType::fp64 && storage != DType::int64 && storage != DType::int32;
}

}  // namespace

bool normalization_covers(const ir::Operation& kernel, std::string* why) {
  auto fail = [&](const std::string& reason) {
    if (why) *why = reason;
    return false;
  };
  const ir::Operation& root = kernel_root_op(kernel);
  const ir::Block& body = kernel_body(kernel);
  static const std::set<std::string_view> kOps = {"graph.softmax_safe", "graph.softmax_linear", "graph.logsumexp",
                                                  "graph.layernorm_safe", "graph.rmsnorm_safe", "graph.norm_linear"};
  if (!kOps.count(root.name())) return fail("'" + std::string(root.name()) + "' is not a normalization");
  const ir::Operation* linear = nullptr;
  const ir::Operation* epilogue = nullptr;
  auto is_argument = [&](const Value* v) {
    for (std::size_t k = 0; k < body.num_arguments(); ++k) {
      if (body.argument(k) == v) return true;
    }
    return false;
  };
  for (const auto& op : body.ops()) {
    if (op.get() == &root || op.get() == body.terminator()) continue;
    // An exact widening cast of a kernel input read by the root (or the
    // fused gradient) only: the template reads the input (source_of).
    if (exact_widening_cast(*op) && is_argument(op->operand(0))) {
      bool operand_only = true;
      for (const ir::Use& use : op->result(0)->uses()) {
        operand_only = operand_only && (use.user == &root || softmax_gradient_fusible(root, *use.user));
      }
      if (operand_only) continue;
    }
    if (!linear && softmax_gradient_fusible(root, *op)) {
      linear = op.get();
      continue;
    }
    // A narrowing cast of the root's result (or the fused gradient's) that
    // ends the kernel (out_policy(): the store rounds to its format).
    if (normalization_epilogue_cast(*op) && op->operand(0)->defining_op() &&
        (op->operand(0) == root.result(0) || softmax_gradient_fusible(root, *op->operand(0)->defining_op()))) {
      epilogue = op.get();
      continue;
    }
    // The cast of y that the fused gradient reads (softmax_gradient_y).
    if (op->result(0)->uses().size() == 1 && op->result(0)->uses().front().user->name() == "graph.softmax_linear" &&
        softmax_gradient_y(*op->result(0)->uses().front().user) == root.result(0)) {
      continue;
    }
    return fail("'" + std::string(op->name()) + "' is fused with a normalization");
  }
  // A narrowed softmax gradient's buffer holds y between its passes
  // (softmax_gradient): y's format must fit in it.
  if (linear && epilogue && !narrowed_gradient_holds_y(*epilogue, root)) {
    return fail("a softmax gradient narrowed to " + std::string(name(epilogue->result(0)->type().dtype())) +
                " cannot hold y in " + std::string(name(root.result(0)->type().dtype())));
  }
  const DType accum = root.result(0)->type().policy.accum;
  if (!is_float(accum) || bit_width(accum) < 16) {
    return fail("accumulation type " + std::string(name(accum)) + " (compiled normalizations accumulate in fp16 to fp64)");
  }
  std::vector<const Value*> operands(root.operands().begin(), root.operands().end());
  if (linear) operands.push_back(linear->operand(1));
  for (const Value* operand : operands) {
    const Value* v = source_of(operand);
    if (!is_argument(v)) return fail("an operand is not a kernel input");
    if (auto bad = unsupported_policy(buffer_policy(v->type().policy))) return fail("an operand has " + *bad);
    if (!fits(v->type().dtype(), accum)) {
      return fail("operand storage " + std::string(name(v->type().dtype())) + " is not exact in its " +
                  std::string(name(accum)) + " accumulation");
    }
  }
  if (auto bad = unsupported_policy(root.result(0)->type().policy, /*stochastic=*/true)) return fail("the result has " + *bad);
  return true;
}

TileKernel lower_normalization(const ir::Operation& kernel, ir::Module& out, const std::string& name) {
  return NormalizationBuilder(kernel, out, name).build();
}

}  // namespace tessera::schedule::templates
