// The attention template: graph.flash_attn and graph.flash_attn_bwd
// (graph/attention_ops.cpp) -> one Tile IR kernel each, for the CPU and the
// CUDA backends, computing exactly the reference's recipe in its order, so
// results equal the reference bit for bit (docs/design/0015-flash-attention.md).
//
//   forward   one lane per query row (rows_of: numel(q) / D lanes): an online
//             softmax over the row's visible keys, one key at a time,
//             carrying m, l and the D accumulators of the output row in loop
//             registers; then the row's D outputs and its logsumexp. No
//             S x S matrix exists anywhere: each score lives in a register
//             for one loop step.
//   backward  one lane per query row of dq (its sums over keys), and the same
//             lane then owns the key rows e = lane, lane + rows(q), ... of dk
//             and dv (2D accumulators, summed over the group's heads and
//             then the query rows, in that order). Every output element is
//             one lane's chain of fmas in a fixed order: no atomics, no
//             cross-lane combination, so results do not depend on the grid,
//             the group size or the backend.
//
// The cost of the lane forms: scalar lanes, no shared-memory tiles or mma;
// the backward recomputes each (query row, key) score twice (once for dq,
// once for dk/dv); delta = rowsum(do * o) is an operand, summed once per
// query row before the kernel (autodiff/rules/attention_rules.cpp). They are the correctness
// baseline, bit for bit the reference.
//
// The blocked forward (the `attn_blocked` knob, where blocked_attention_applies):
// a group per BM query rows of one head; Q [BM, D] stays in registers while
// the loop walks the visible keys BN at a time: S = Q K^T on tensor cores,
// the online softmax on whole tiles (row max, exp, row sum), P cast to the
// inputs' dtype, acc = acc * alpha + P V on tensor cores. Blocks wholly
// visible run unmasked; the causal diagonal's blocks take tile_causal_fill.
// Its bits are not the reference's (key blocks of BN instead of one, P
// rounded to bf16/fp16 for the second product, the tensor cores' order);
// they depend on the shape and BM, BN alone, so runs repeat bit for bit
// (docs/design/0015-flash-attention.md, "The blocked forward").
//
// Padded problems (valid_queries, valid_keys: docs/design/0041, written by
// pad-ragged-attention): every form sees keys below valid_keys only, with
// the causal diagonal valid_keys - valid_queries; the blocked forms mask
// the padding columns of the key block valid keys share with padding.
#include "graph/passes/pass_support.h"
#include "schedule/templates/lane_program.h"
#include "schedule/templates/templates.h"
#include "tessera/schedule/schedule_dialect.h"
#include "tessera/tile/tile_builder.h"

namespace tessera::schedule::templates {
namespace {

using ir::Type;
using ir::Value;

constexpr std::int64_t kLanes = 64;

class AttentionBuilder {
 public:
  AttentionBuilder(const ir::Operation& kernel, ir::Module& out, const std::string& name)
      : kernel_(kernel), body_(kernel_body(kernel)), root_(kernel_root_op(kernel)), out_(out), name_(name) {}

  TileKernel build() {
    if (blocked_attention_applies(kernel_)) {
      return root_.name() == "graph.flash_attn" ? build_blocked() : build_blocked_backward();
    }
    const std::int64_t lanes = group_lanes(kernel_, kLanes);
    const bool forward = root_.name() == "graph.flash_attn";
    const std::size_t num_in = body_.num_arguments();
    TileKernel result;
    std::vector<std::pair<std::string, Type>> params = input_buffer_params(body_);
    // The kernel's results are the root's results read outside it, in order.
    const ir::Operation& yield = *body_.terminator();
    for (std::size_t j = 0; j < yield.num_operands(); ++j) {
      for (std::size_t r = 0; r < root_.num_results(); ++r) {
        if (root_.result(r) == yield.operand(j)) out_index_[r] = static_cast<int>(j);
      }
      params.emplace_back("out" + std::to_string(j), Type::gmem({ir::Dim::named("n" + std::to_string(j))},
                                                                buffer_policy(yield.operand(j)->type().policy), true));
    }
    // Run-time dims: B, Sq (q's dims 0, 2) and Sk (k's dim 2); H and D are static.
    const std::pair<std::size_t, std::size_t> dims[3] = {{0, 0}, {0, 2}, {1, 2}};
    for (auto [operand, d] : dims) {
      params.emplace_back("x" + std::to_string(operand) + "_" + std::to_string(d), Type::lane(DType::int64));
      result.scalars.push_back(KernelScalar{KernelScalar::Kind::input_dim, d, arg(operand)});
    }
    ir::Operation* func =
        tile::build_kernel(out_, name_, params, {.group_shape = std::vector<std::int64_t>{lanes}}, kernel_.location());
    ir::Block& fb = ir::function_body(*func);
    fb_ = &fb;
    ir::OpBuilder b(fb);
    const std::size_t first_dim = num_in + yield.num_operands();
    B_ = fb.argument(first_dim);
    Sq_ = fb.argument(first_dim + 1);
    Sk_ = fb.argument(first_dim + 2);
    set_valid_corner(b);
    const auto& qs = root_.operand(0)->type().shape;
    const auto& ks = root_.operand(1)->type().shape;
    Hq_ = qs[1].size;
    Hkv_ = ks[1].size;
    D_ = qs[3].size;
    causal_ = root_.attrs().get_bool("causal");
    const NumericsPolicy& p = root_.operand(0)->type().policy;
    acc_ = default_policy(p.accum);
    scale_ = tile::build_real(b, root_.attrs().get_real("scale"), acc_);
    // The forward's v descale (graph/attention_ops.cpp): multiplied in only
    // when it is not 1, so plain attention keeps its kernels.
    if (root_.attrs().has("v_scale") && root_.attrs().get_real("v_scale") != 1.0) {
      v_scale_ = tile::build_real(b, root_.attrs().get_real("v_scale"), acc_);
    }
    pd_ = root_.attrs().get_real("dropout");
    seed_ = root_.attrs().get_int("seed");
    offset_ = root_.attrs().get_int("offset");
    kp_ = tile::build_real(b, 1.0 - pd_, acc_);  // rounded to acc, as the reference's kp

    Value* t = global_lane(b, lanes);
    Value* rows_q = mul(b, mul(b, B_, i64(b, Hq_)), Sq_);
    tile::build_if(
        b, cmp(b, "lt", t, rows_q), {},
        [&](ir::OpBuilder& tb, std::span<Value* const>) {
          if (forward) forward_lane(tb, t);
          else backward_lane(tb, t, rows_q);
          return std::vector<Value*>{};
        },
        [](ir::OpBuilder&, std::span<Value* const>) { return std::vector<Value*>{}; });
    tile::finish_kernel(*func);
    result.func = func;
    result.lanes_per_group = lanes;
    result.rows_of = std::pair<std::size_t, std::size_t>{arg(0), 3};  // one lane per query row
    return result;
  }

  // The blocked forward (see the header): params q, k, v as [rows, D]
  // matrices, o as [rows, D] and lse as [rows / BM, BM].
  TileKernel build_blocked() {
    TileKernel result;
    ir::Operation* func = begin_blocked(result, {});
    ir::OpBuilder b(*fb_);
    const QueryBlock qb = query_block(b, tile::build(b, "tile.group_id", {}));
    Value* q = load_rows(b, 0, qb.qrow, BM_);
    const auto [free, end] = key_range(b, qb.q0);
    // With a positive scale the loop carries the row max of the unscaled
    // scores and scales it per block: the same m, alpha and p as the max of
    // the scaled ones (see scores()).
    const bool unscaled_max = positive_scale();
    auto step = [&](bool masked) {
      return [&, masked](ir::OpBuilder& lb, std::span<Value* const> a) {
        // One op per statement: the ops' order in the kernel is the measured one.
        Value* row = add(lb, qb.krow, a[0]);
        Value* kt = load_rows(lb, 1, row, BN_);
        Value* raw = nullptr;
        Value* x = scores(lb, q, kt, qb.q0, a[0], masked, masked, unscaled_max ? &raw : nullptr);
        Value* mn_carried = bin_(lb, "max", a[1], reduce_(lb, "max", unscaled_max ? raw : x));
        Value* old_m = unscaled_max ? bin_(lb, "mul", a[1], scale_tile_) : a[1];
        Value* mn = unscaled_max ? bin_(lb, "mul", mn_carried, scale_tile_) : mn_carried;
        Value* alpha = un_(lb, "exp", bin_(lb, "sub", old_m, mn));
        Value* p = un_(lb, "exp", bin_(lb, "sub", x, mn));
        Value* scaled_l = bin_(lb, "mul", a[2], alpha);
        Value* l = bin_(lb, "add", scaled_l, reduce_(lb, "sum", p));
        Value* vt = load_rows(lb, 2, row, BN_);
        Value* pc = as_inputs(lb, p);
        Value* acc = mma_(lb, pc, vt, bin_(lb, "mul", a[3], alpha));
        return std::vector<Value*>{mn_carried, l, acc};
      };
    };
    const std::vector<Value*> carried = {full_(b, BM_, 1, -std::numeric_limits<double>::infinity()),
                                         full_(b, BM_, 1, 0.0), zeros_(b, BM_, D_)};
    const std::vector<Value*> state = masked_loops(b, i64(b, 0), free, end, BN_, carried, step, false);
    Value* m = unscaled_max ? bin_(b, "mul", state[0], scale_tile_) : state[0];
    Value* l = state[1];
    if (out(0)) {
      Value* o = bin_(b, "div", state[2], l);
      if (root_.attrs().has("v_scale") && root_.attrs().get_real("v_scale") != 1.0) {
        o = bin_(b, "mul", o, full_(b, 1, 1, root_.attrs().get_real("v_scale")));
      }
      store_tile(b, 0, qb.qrow, o);
    }
    if (out(1)) {
      Value* lse = transpose_(b, bin_(b, "add", m, un_(b, "log", l)));
      store_tile(b, 1, op2(b, "div", qb.qrow, i64(b, BM_)), lse);
    }
    tile::finish_kernel(*func);
    result.func = func;
    result.axis_blocks = {AxisBlocks{arg(0), 2, BM_}};
    return result;
  }

  // The blocked backward: one kernel, two roles. Groups [0, nq) each own BM
  // rows of dq (a loop over the key blocks they see); the groups after them
  // each own BN rows of dk and dv of one kv head (loops over the group's
  // query heads, then the query blocks that see the keys). Every output
  // element is one group's sum in a fixed order: no atomics.
  //   P = exp(Q K^T scale - lse), dP = dO V^T, dS = P (dP - delta),
  //   delta = rowsum(dO o) (an operand), dq = scale dS K, dk = scale dS^T Q, dv = P^T dO,
  // with P and dS rounded to the inputs' dtype before their products.
  TileKernel build_blocked_backward() {
    TileKernel result;
    ir::Operation* func = begin_blocked(result, {{"batch", KernelScalar{KernelScalar::Kind::input_dim, 0, arg(0)}}});
    ir::OpBuilder b(*fb_);
    const ir::Block& fb = *fb_;
    Value* B = fb.argument(fb.num_arguments() - 1);
    const std::int64_t G = Hq_ / Hkv_, Sq = root_.operand(0)->type().shape[2].size;
    // P, and dS, of a query block against a key block.
    struct Pair { Value* p; Value* ds; };
    auto pair = [&](ir::OpBuilder& lb, Value* qt, Value* dot, const RowTerms& rt, Value* kt, Value* vt, Value* q0,
                    Value* j0, bool masked, bool padded) {
      Value* p = un_(lb, "exp", bin_(lb, "sub", scores(lb, qt, kt, q0, j0, masked, padded), rt.lse));
      Value* vt_t = transpose_(lb, vt);
      Value* dp = mma_(lb, dot, vt_t, zeros_(lb, BM_, BN_));
      return Pair{p, bin_(lb, "mul", p, bin_(lb, "sub", dp, rt.delta))};
    };

    Value* gid = tile::build(b, "tile.group_id", {});
    Value* nq = out(0) ? mul(b, mul(b, B, i64(b, Hq_)), i64(b, Sq / BM_)) : i64(b, 0);
    tile::build_if(
        b, cmp(b, "lt", gid, nq), {},
        [&](ir::OpBuilder& tb, std::span<Value* const>) {
          // dq rows [q0, q0 + BM) of one head.
          const QueryBlock qb = query_block(tb, gid);
          Value* qt = load_rows(tb, 0, qb.qrow, BM_);
          Value* dot = load_rows(tb, 5, qb.qrow, BM_);
          const RowTerms rt = row_terms(tb, qb.qrow);
          const auto [free, end] = key_range(tb, qb.q0);
          auto step = [&](bool masked) {
            return [&, masked](ir::OpBuilder& lb, std::span<Value* const> a) {
              Value* kt = load_rows(lb, 1, add(lb, qb.krow, a[0]), BN_);
              Value* vt = load_rows(lb, 2, add(lb, qb.krow, a[0]), BN_);
              const Pair pr = pair(lb, qt, dot, rt, kt, vt, qb.q0, a[0], masked, masked);
              return std::vector<Value*>{mma_(lb, as_inputs(lb, pr.ds), kt, a[1])};
            };
          };
          Value* dq = masked_loops(tb, i64(tb, 0), free, end, BN_, {zeros_(tb, BM_, D_)}, step, false)[0];
          store_tile(tb, 0, qb.qrow, bin_(tb, "mul", dq, scale_tile_));
          return std::vector<Value*>{};
        },
        [&](ir::OpBuilder& eb, std::span<Value* const>) {
          if (!out(1) && !out(2)) return std::vector<Value*>{};
          // dk, dv rows [j0, j0 + BN) of kv head bhk.
          const std::int64_t nkb = root_.operand(1)->type().shape[2].size / BN_;
          Value* g = op2(eb, "sub", gid, nq);
          Value* bhk = op2(eb, "div", g, i64(eb, nkb));
          Value* j0 = mul(eb, op2(eb, "rem", g, i64(eb, nkb)), i64(eb, BN_));
          Value* hk = op2(eb, "rem", bhk, i64(eb, Hkv_));
          Value* bi = op2(eb, "div", bhk, i64(eb, Hkv_));
          Value* krow = add(eb, mul(eb, bhk, Sk_), j0);
          Value* kt = load_rows(eb, 1, krow, BN_);
          Value* vt = load_rows(eb, 2, krow, BN_);
          // Query blocks: [first, mid) hold rows that miss some of these keys, [mid, Sq) see all.
          Value* first = i64(eb, 0);
          Value* mid = first;
          if (causal_) {
            first = op2(eb, "max", first, mul(eb, op2(eb, "div", op2(eb, "sub", j0, diag_), i64(eb, BM_)), i64(eb, BM_)));
            Value* all = add(eb, op2(eb, "sub", j0, diag_), i64(eb, BN_ - 1 + BM_ - 1));
            mid = op2(eb, "min", Sq_, op2(eb, "max", first, mul(eb, op2(eb, "div", all, i64(eb, BM_)), i64(eb, BM_))));
          }
          // A block of padding keys alone (valid_keys) is seen by no row.
          Value* qend = Sq_;
          if (keys_padded_) {
            qend = select(eb, cmp(eb, "lt", j0, VK_), Sq_, i64(eb, 0));
            first = op2(eb, "min", first, qend);
            mid = op2(eb, "min", mid, qend);
          }
          ir::Operation* heads = tile::build_for(
              eb, i64(eb, 0), i64(eb, G), i64(eb, 1), {zeros_(eb, BN_, D_), zeros_(eb, BN_, D_)},
              [&](ir::OpBuilder& hb, std::span<Value* const> ha) {
                Value* h = add(hb, mul(hb, hk, i64(hb, G)), ha[0]);
                Value* qbase = mul(hb, add(hb, mul(hb, bi, i64(hb, Hq_)), h), Sq_);
                auto step = [&](bool masked) {
                  return [&, masked](ir::OpBuilder& lb, std::span<Value* const> a) {
                    Value* qrow = add(lb, qbase, a[0]);
                    Value* qt = load_rows(lb, 0, qrow, BM_);
                    Value* dot = load_rows(lb, 5, qrow, BM_);
                    // The group's keys are one block: padding columns masked in every step.
                    const Pair pr = pair(lb, qt, dot, row_terms(lb, qrow), kt, vt, a[0], j0, masked, true);
                    Value* dk = mma_(lb, transpose_(lb, as_inputs(lb, pr.ds)), qt, a[1]);
                    Value* dv = mma_(lb, transpose_(lb, as_inputs(lb, pr.p)), dot, a[2]);
                    return std::vector<Value*>{dk, dv};
                  };
                };
                return masked_loops(hb, first, mid, qend, BM_, {ha[1], ha[2]}, step, true);
              });
          if (out(1)) store_tile(eb, 1, krow, bin_(eb, "mul", heads->result(0), scale_tile_));
          if (out(2)) store_tile(eb, 2, krow, heads->result(1));
          return std::vector<Value*>{};
        });
    tile::finish_kernel(*func);
    result.func = func;
    if (out(0)) result.axis_blocks.push_back(AxisBlocks{arg(0), 2, BM_});
    if (out(1) || out(2)) result.axis_blocks.push_back(AxisBlocks{arg(1), 2, BN_});
    return result;
  }

  // Starts a blocked kernel: its parameters (blocked_params, then
  // `scalars`), one warpgroup of lanes (the PTX path's tensor-core layouts
  // take whole warpgroups), the occupancy hint, and the constants both
  // directions use. Sq and Sk are static here (blocked_attention_applies):
  // as constants they show the targets that every block offset is a
  // multiple of the block.
  ir::Operation* begin_blocked(TileKernel& result, const std::vector<std::pair<std::string, KernelScalar>>& scalars) {
    const std::vector<std::int64_t> tile = attention_tile(kernel_);
    BM_ = tile[0], BN_ = tile[1];
    std::vector<std::pair<std::string, Type>> params = blocked_params(result);
    for (const auto& [name, scalar] : scalars) {
      params.emplace_back(name, Type::lane(DType::int64));
      result.scalars.push_back(scalar);
    }
    result.lanes_per_group = 128;
    ir::Operation* func = tile::build_kernel(out_, name_, params, {.group_shape = std::vector<std::int64_t>{128}},
                                             kernel_.location());
    // Blocks per SM on the CUDA Tile IR target. Two: on an H100 (bf16,
    // H = 8, D = 128, S = 8192) 376 against 333 TFLOP/s without the hint, and
    // the causal form 218 against 109 (docs/design/0015, "The blocked
    // forward"). Three at D <= 64: on an H200 (S = 8192) the forward
    // 301-322 against 280 TFLOP/s, causal 194-239 against 152; the backward
    // (delta an operand) 241 against 242, causal 196 against 159.
    const std::int64_t d = root_.operand(0)->type().shape[3].size;
    // One at D = 256: a block's Q and output tiles alone take 96 KiB.
    // Three for the forward's 64 x 128 blocks at D = 128 (the CUDA Tile IR
    // default, take_cuda_tile_forward_keys): 564 against 502 TFLOP/s with
    // two, causal 441 against 433 (S = 8192, docs/design/0056).
    const bool wide_forward =
        root_.name() == "graph.flash_attn" && BM_ == kAttentionBlockRows && BN_ == kCudaTileForwardKeys;
    func->attrs().set("occupancy", std::int64_t{d <= 64 ? 3 : d <= 128 ? (wide_forward ? 3 : 2) : 1});
    fb_ = &ir::function_body(*func);
    ir::OpBuilder b(*fb_);
    Sq_ = i64(b, root_.operand(0)->type().shape[2].size);
    Sk_ = i64(b, root_.operand(1)->type().shape[2].size);
    set_valid_corner(b);
    diag_ = op2(b, "sub", VK_, VQ_);
    // Keys from here on share their block with padding: their steps mask
    // the padding's columns (a whole block of padding is never visited).
    const std::int64_t vk = root_.attrs().get_int("valid_keys");
    ragged_keys_ = vk > 0 && vk % BN_ != 0;
    key_blocks_end_ = vk > 0 ? (vk + BN_ - 1) / BN_ * BN_ : root_.operand(1)->type().shape[2].size;
    key_blocks_full_ = ragged_keys_ ? vk / BN_ * BN_ : key_blocks_end_;
    scale_tile_ = full_(b, 1, 1, root_.attrs().get_real("scale"));
    return func;
  }

  // The block of BM query rows group `gid` (counted from the first dq or
  // forward group) owns: its first row in the head, its first row of q's
  // [rows, D] matrix, and the first row of its kv head in k's and v's.
  // Under a causal mask a head's last query blocks see the most keys, so
  // they go to the lowest group ids: the GPU starts the longest blocks
  // first and the last wave holds the shortest, not the longest.
  struct QueryBlock { Value *q0, *qrow, *krow; };
  QueryBlock query_block(ir::OpBuilder& b, Value* gid) {
    const std::int64_t nqb = root_.operand(0)->type().shape[2].size / BM_;
    Value* bh = op2(b, "div", gid, i64(b, nqb));
    Value* index = op2(b, "rem", gid, i64(b, nqb));
    if (causal_) index = op2(b, "sub", i64(b, nqb - 1), index);
    Value* q0 = mul(b, index, i64(b, BM_));
    Value* hk = op2(b, "div", op2(b, "rem", bh, i64(b, Hq_)), i64(b, Hq_ / Hkv_));
    Value* bi = op2(b, "div", bh, i64(b, Hq_));
    return {q0, add(b, mul(b, bh, Sq_), q0), mul(b, add(b, mul(b, bi, i64(b, Hkv_)), hk), Sk_)};
  }

  // The key blocks the query block at q0 sees: [0, free) by every row,
  // [free, end) on the causal diagonal (without a mask both are Sk).
  // Padding keys (valid_keys) move the end to the valid keys' last block,
  // masked from the block they share with padding on.
  std::pair<Value*, Value*> key_range(ir::OpBuilder& b, Value* q0) {
    if (!causal_) return {i64(b, key_blocks_full_), i64(b, key_blocks_end_)};
    Value* end = op2(b, "min", VK_, add(b, add(b, q0, i64(b, BM_)), diag_));
    end = mul(b, op2(b, "div", add(b, end, i64(b, BN_ - 1)), i64(b, BN_)), i64(b, BN_));
    Value* free = op2(b, "min", end, mul(b, op2(b, "div", add(b, add(b, q0, diag_), i64(b, 1)), i64(b, BN_)), i64(b, BN_)));
    if (ragged_keys_) free = op2(b, "min", free, i64(b, key_blocks_full_));
    return {free, end};
  }

  // The loop [lo, mid) then [mid, hi) in steps of `step`, carrying `init`:
  // the masked body in the first part when `masked_first`, else in the
  // second; without a causal mask only the unmasked loop over [lo, hi),
  // unless padding keys share a block (key_range's [free, end)).
  template <class Step>
  std::vector<Value*> masked_loops(ir::OpBuilder& b, Value* lo, Value* mid, Value* hi, std::int64_t step,
                                   std::vector<Value*> init, const Step& body, bool masked_first) {
    auto run = [&](Value* from, Value* to, bool masked) {
      ir::Operation* loop = tile::build_for(b, from, to, i64(b, step), init, body(masked), /*prefetch=*/2);
      for (std::size_t r = 0; r < init.size(); ++r) init[r] = loop->result(r);
    };
    // Ragged keys give a key loop (masked_first false) a masked last part.
    const bool masked_part = causal_ || (ragged_keys_ && !masked_first);
    if (!masked_part) {
      run(masked_first ? mid : lo, hi, false);
    } else if (masked_first) {
      run(lo, mid, true);
      run(mid, hi, false);
    } else {
      run(lo, mid, false);
      run(mid, hi, true);
    }
    return init;
  }

  // x = Q K^T scale of a query block (first row q0 in its head) against a key
  // block (j0), the scores a causal mask hides -inf when `masked`, and
  // padding keys' scores -inf when `padded` (with ragged keys). With a
  // positive scale the mask applies before the scale (-inf scales to
  // itself: the same values), and `raw`, when given, receives the masked
  // unscaled scores. The forward takes the row max of those (round(m scale)
  // is the max of the rounded products, rounding being monotone), so the
  // CUDA Tile IR target can fold the scale into the exponent's fma
  // (lower_tile_math.cpp).
  Value* scores(ir::OpBuilder& b, Value* qt, Value* kt, Value* q0, Value* j0, bool masked, bool padded,
                Value** raw = nullptr) {
    Value* kt_t = transpose_(b, kt);
    Value* s = mma_(b, qt, kt_t, zeros_(b, BM_, BN_));
    const double hidden = -std::numeric_limits<double>::infinity();
    auto hide = [&](Value* x) {
      if (masked && causal_) x = tile::build(b, "tile.tile_causal_fill", {x, q0, j0, diag_}, {{"value", hidden}});
      if (padded && ragged_keys_) {
        // Columns j0 + c > VK - 1, whatever the row.
        x = tile::build(b, "tile.tile_causal_fill", {x, i64(b, 0), j0, op2(b, "sub", VK_, i64(b, 1))},
                        {{"value", hidden}, {"rows", false}});
      }
      return x;
    };
    if (!positive_scale()) {
      if (raw) raise(ErrorCode::Internal, "attention: unscaled scores need a positive scale");
      return hide(bin_(b, "mul", s, scale_tile_));
    }
    Value* hidden_s = hide(s);
    if (raw) *raw = hidden_s;
    return bin_(b, "mul", hidden_s, scale_tile_);
  }
  bool positive_scale() const { return root_.attrs().get_real("scale") > 0.0; }

  // The logsumexp and delta = rowsum(do * o) (operands 4 and 3, rows of BM),
  // [BM, 1] each, of the query block at qrow.
  struct RowTerms { Value *lse, *delta; };
  RowTerms row_terms(ir::OpBuilder& b, Value* qrow) {
    auto column = [&](std::size_t operand) {
      Value* row = tile::build(b, "tile.tile_load", {fb_->argument(arg(operand)), op2(b, "div", qrow, i64(b, BM_)), i64(b, 0)},
                               {{"shape", ir::fixed_shape({1, BM_})}});
      return transpose_(b, row);
    };
    return {column(4), column(3)};  // a braced list builds lse's ops first
  }

  // `rows` rows of root operand `operand` (a [rows, D] matrix) from `row`,
  // fp8 codes decoded to bf16 (exact: bf16 holds every e4m3 and e5m2 value).
  Value* load_rows(ir::OpBuilder& b, std::size_t operand, Value* row, std::int64_t rows) {
    Value* t = tile::build(b, "tile.tile_load", {fb_->argument(arg(operand)), row, i64(b, 0)},
                           {{"shape", ir::fixed_shape({rows, D_})}});
    if (!is_fp8(t->type().dtype())) return t;
    return tile::build(b, "tile.tile_cast", {t}, {{"to", buffer_policy(mma_policy())}});
  }
  // The tensor cores' operand type: the inputs' storage, bf16 for fp8 codes.
  NumericsPolicy mma_policy() const {
    NumericsPolicy p = root_.operand(0)->type().policy;
    if (is_fp8(p.storage)) p.storage = DType::bf16;
    return p;
  }

  // The blocked kernels' shape facts and parameters: every tensor as a
  // [rows, cols] matrix, cols = D, except the per-row values (the forward's
  // logsumexp result, the backward's delta and lse), stored as rows of BM: 16-byte rows,
  // so the CUDA Tile IR target's aligned form applies (a [rows, 1] view has
  // 4-byte rows and sent every launch to the plain form).
  std::vector<std::pair<std::string, Type>> blocked_params(TileKernel& result) {
    const auto& qs = root_.operand(0)->type().shape;
    Hq_ = qs[1].size;
    Hkv_ = root_.operand(1)->type().shape[1].size;
    D_ = qs[3].size;
    causal_ = root_.attrs().get_bool("causal");
    acc_ = default_policy(root_.operand(0)->type().policy.accum);
    const bool forward = root_.name() == "graph.flash_attn";
    std::vector<std::pair<std::string, Type>> params;
    auto matrix = [&](const std::string& name, std::int64_t cols, const NumericsPolicy& p, bool mut) {
      params.emplace_back(name, Type::gmem({ir::Dim::named(name + "r"), ir::Dim::fixed(cols)}, buffer_policy(p), mut));
    };
    for (std::size_t k = 0; k < body_.num_arguments(); ++k) {
      const bool per_row = !forward && (body_.argument(k) == root_.operand(3) || body_.argument(k) == root_.operand(4));
      const std::int64_t cols = per_row ? BM_ : D_;
      matrix("in" + std::to_string(k), cols, body_.argument(k)->type().policy, false);
      result.matrix_inputs.emplace_back(k, cols);
    }
    const ir::Operation& yield = *body_.terminator();
    for (std::size_t j = 0; j < yield.num_operands(); ++j) {
      std::int64_t cols = D_;
      for (std::size_t r = 0; r < root_.num_results(); ++r) {
        if (root_.result(r) != yield.operand(j)) continue;
        out_index_[r] = static_cast<int>(j);
        if (forward && r == 1) cols = BM_;
      }
      matrix("out" + std::to_string(j), cols, yield.operand(j)->type().policy, true);
      result.matrix_outputs.emplace_back(j, cols);
    }
    return params;
  }

  // Tile arithmetic shorthands (fp32 tiles of the accumulation policy).
  Value* full_(ir::OpBuilder& b, std::int64_t r, std::int64_t c, double v) {
    return tile::build(b, "tile.tile_full", {}, {{"shape", ir::fixed_shape({r, c})}, {"policy", acc_}, {"value", v}});
  }
  static Value* bin_(ir::OpBuilder& b, const char* fn, Value* x, Value* y) {
    return tile::build(b, "tile.tile_binary", {x, y}, {{"fn", std::string(fn)}});
  }
  static Value* un_(ir::OpBuilder& b, const char* fn, Value* x) {
    return tile::build(b, "tile.tile_unary", {x}, {{"fn", std::string(fn)}, {"fast", true}});
  }
  static Value* reduce_(ir::OpBuilder& b, const char* fn, Value* x) {
    return tile::build(b, "tile.tile_reduce", {x}, {{"fn", std::string(fn)}, {"axis", std::int64_t{1}}});
  }
  Value* zeros_(ir::OpBuilder& b, std::int64_t r, std::int64_t c) {
    return tile::build(b, "tile.zeros", {}, {{"shape", ir::fixed_shape({r, c})}, {"policy", acc_}});
  }
  static Value* mma_(ir::OpBuilder& b, Value* x, Value* y, Value* acc) { return tile::build(b, "tile.mma", {x, y, acc}); }
  static Value* transpose_(ir::OpBuilder& b, Value* x) { return tile::build(b, "tile.transpose", {x}); }
  Value* as_acc(ir::OpBuilder& b, Value* t) { return tile::build(b, "tile.tile_cast", {t}, {{"to", acc_}}); }
  // Rounded to the inputs' dtype (bf16 for fp8 inputs): the tensor cores' operand.
  Value* as_inputs(ir::OpBuilder& b, Value* t) {
    return tile::build(b, "tile.tile_cast", {t}, {{"to", buffer_policy(mma_policy())}});
  }

  void store_tile(ir::OpBuilder& b, std::size_t r, Value* row, Value* t) {
    const NumericsPolicy p = buffer_policy(root_.result(r)->type().policy);
    if (t->type().policy != p) t = tile::build(b, "tile.tile_cast", {t}, {{"to", p}});
    b.create("tile.tile_store", {out(r), row, i64(b, 0), t});
  }

 private:
  std::size_t arg(std::size_t operand) const {
    for (std::size_t k = 0; k < body_.num_arguments(); ++k) {
      if (body_.argument(k) == root_.operand(operand)) return k;
    }
    return 0;  // attention_covers checked that every operand is an argument
  }
  Value* out(std::size_t r) const {
    const int j = out_index_[r];
    return j < 0 ? nullptr : fb_->argument(body_.num_arguments() + static_cast<std::size_t>(j));
  }
  static Value* i64(ir::OpBuilder& b, std::int64_t x) { return tile::build_int(b, x); }
  static Value* mul(ir::OpBuilder& b, Value* x, Value* y) { return index_op(b, "mul", x, y); }
  static Value* add(ir::OpBuilder& b, Value* x, Value* y) { return index_op(b, "add", x, y); }

  // Element `at` of root operand k at the accumulation type.
  Value* load(ir::OpBuilder& b, std::size_t k, Value* at) {
    Value* x = tile::build(b, "tile.load_elem", {fb_->argument(arg(k)), at});
    return x->type().policy == acc_ ? x : cast(b, x, acc_);
  }
  Value* fma(ir::OpBuilder& b, Value* x, Value* y, Value* acc) { return tile::build(b, "tile.fma", {x, y, acc}); }
  Value* zero(ir::OpBuilder& b) { return tile::build_real(b, 0.0, acc_); }

  // a . b over d = 0 .. D-1 of root operands ka (from ia) and kb (from ib).
  Value* dot(ir::OpBuilder& b, std::size_t ka, Value* ia, std::size_t kb, Value* ib) {
    return tile::build_for(b, i64(b, 0), i64(b, D_), i64(b, 1), {zero(b)},
                           [&](ir::OpBuilder& lb, std::span<Value* const> a) {
                             return std::vector<Value*>{fma(lb, load(lb, ka, add(lb, ia, a[0])),
                                                            load(lb, kb, add(lb, ib, a[0])), a[1])};
                           })
        ->result(0);
  }
  // Offset of q's row (b, h, i) and of k's row (b, hk, j).
  Value* q_row(ir::OpBuilder& b, Value* bi, Value* h, Value* i) {
    return mul(b, add(b, mul(b, add(b, mul(b, bi, i64(b, Hq_)), h), Sq_), i), i64(b, D_));
  }
  Value* k_row(ir::OpBuilder& b, Value* bi, Value* hk, Value* j) {
    return mul(b, add(b, mul(b, add(b, mul(b, bi, i64(b, Hkv_)), hk), Sk_), j), i64(b, D_));
  }
  // x (p or dp) of entry n = row * Sk + j of the probability matrix, dropped or scaled by 1 / kp
  // (graph/attention_ops.cpp): kept iff (philox(seed, offset + n) >> 8) 2^-24 >= pd.
  Value* dropped(ir::OpBuilder& b, Value* x, Value* row, Value* j) {
    if (pd_ == 0.0) return x;
    Value* n = add(b, mul(b, row, Sk_), j);
    Value* bits = tile::build(b, "tile.philox", {op2(b, "add", n, i64(b, offset_))}, {{"seed", seed_}});
    Value* u = op2(b, "mul", cast(b, op2(b, "div", bits, i64(b, 256)), default_policy(DType::fp64)),
                   real(b, 1.0 / 16777216.0));
    return select(b, cmp(b, "ge", u, real(b, pd_)), op2(b, "div", x, kp_), zero(b));
  }

  // One past the last key query row i sees.
  Value* key_end(ir::OpBuilder& b, Value* i) {
    if (!causal_) return VK_;
    Value* last = add(b, i, op2(b, "sub", VK_, VQ_));
    return op2(b, "min", VK_, add(b, last, i64(b, 1)));
  }

  // The valid corner (graph/attention_ops.cpp, padded problems): VQ_ and VK_
  // are the attributes where set, else Sq_ and Sk_.
  void set_valid_corner(ir::OpBuilder& b) {
    const std::int64_t vq = root_.attrs().get_int("valid_queries"), vk = root_.attrs().get_int("valid_keys");
    VQ_ = vq > 0 ? i64(b, vq) : Sq_;
    VK_ = vk > 0 ? i64(b, vk) : Sk_;
    keys_padded_ = vk > 0;
  }

  // Lane t owns query row t (of B * Hq * Sq): its scores, and all D outputs.
  void forward_lane(ir::OpBuilder& b, Value* row) {
    Value* i = op2(b, "rem", row, Sq_);
    Value* bh = op2(b, "div", row, Sq_);
    Value* h = op2(b, "rem", bh, i64(b, Hq_));
    Value* bi = op2(b, "div", bh, i64(b, Hq_));
    Value* hk = op2(b, "div", h, i64(b, Hq_ / Hkv_));
    Value* qbase = mul(b, row, i64(b, D_));
    // Loop values: m, l, then the D accumulators a[d].
    std::vector<Value*> init = {tile::build_real(b, -std::numeric_limits<double>::infinity(), acc_), zero(b)};
    for (std::int64_t d = 0; d < D_; ++d) init.push_back(zero(b));
    ir::Operation* loop = tile::build_for(
        b, i64(b, 0), key_end(b, i), i64(b, 1), init, [&](ir::OpBuilder& lb, std::span<Value* const> a) {
          Value* kbase = k_row(lb, bi, hk, a[0]);
          Value* x = op2(lb, "mul", dot(lb, 0, qbase, 1, kbase), scale_);
          Value* mn = op2(lb, "max", a[1], x);
          Value* alpha = op1(lb, "exp", op2(lb, "sub", a[1], mn));
          Value* p = op1(lb, "exp", op2(lb, "sub", x, mn));
          std::vector<Value*> next = {mn, fma(lb, a[2], alpha, p)};
          Value* pk = dropped(lb, p, row, a[0]);
          for (std::int64_t d = 0; d < D_; ++d) {
            Value* pv = op2(lb, "mul", pk, load(lb, 2, add(lb, kbase, i64(lb, d))));
            next.push_back(fma(lb, a[3 + static_cast<std::size_t>(d)], alpha, pv));
          }
          return next;
        });
    Value* m = loop->result(0);
    Value* l = loop->result(1);
    if (out(0)) {
      for (std::int64_t d = 0; d < D_; ++d) {
        Value* od = op2(b, "div", loop->result(2 + static_cast<std::size_t>(d)), l);
        store(b, 0, add(b, qbase, i64(b, d)), v_scale_ != nullptr ? op2(b, "mul", od, v_scale_) : od);
      }
    }
    if (out(1)) store(b, 1, row, op2(b, "add", m, op1(b, "log", l)));
  }

  // pk (p, dropped) and ds of query row `qbase` (row index `row`, delta given) and key j at `kbase`.
  std::pair<Value*, Value*> pair(ir::OpBuilder& b, Value* qbase, Value* row, Value* kbase, Value* j, Value* delta) {
    Value* x = op2(b, "mul", dot(b, 0, qbase, 1, kbase), scale_);
    Value* p = op1(b, "exp", op2(b, "sub", x, load(b, 4, row)));
    Value* dp = dot(b, 5, qbase, 2, kbase);
    return {dropped(b, p, row, j), op2(b, "mul", p, op2(b, "sub", dropped(b, dp, row, j), delta))};
  }

  void store(ir::OpBuilder& b, std::size_t r, Value* at, Value* x) {
    b.create("tile.store_elem", {out(r), at, cast(b, x, buffer_policy(root_.result(r)->type().policy))});
  }

  std::vector<Value*> zeros(ir::OpBuilder& b, std::int64_t n) {
    std::vector<Value*> z;
    for (std::int64_t k = 0; k < n; ++k) z.push_back(zero(b));
    return z;
  }

  // Operands: 0 q, 1 k, 2 v, 3 delta, 4 lse, 5 do. Lane t owns query row t of dq, then key rows
  // t, t + rows_q, ... of dk and dv.
  void backward_lane(ir::OpBuilder& b, Value* row, Value* rows_q) {
    const std::int64_t G = Hq_ / Hkv_;
    const std::size_t D = static_cast<std::size_t>(D_);
    if (out(0)) {
      Value* i = op2(b, "rem", row, Sq_);
      Value* bh = op2(b, "div", row, Sq_);
      Value* bi = op2(b, "div", bh, i64(b, Hq_));
      Value* hk = op2(b, "div", op2(b, "rem", bh, i64(b, Hq_)), i64(b, G));
      Value* qbase = mul(b, row, i64(b, D_));
      Value* delta = load(b, 3, row);
      ir::Operation* loop = tile::build_for(
          b, i64(b, 0), key_end(b, i), i64(b, 1), zeros(b, D_), [&](ir::OpBuilder& lb, std::span<Value* const> a) {
            Value* kbase = k_row(lb, bi, hk, a[0]);
            Value* ds = pair(lb, qbase, row, kbase, a[0], delta).second;
            std::vector<Value*> next;
            for (std::size_t d = 0; d < D; ++d) {
              next.push_back(fma(lb, ds, load(lb, 1, add(lb, kbase, i64(lb, static_cast<std::int64_t>(d)))), a[1 + d]));
            }
            return next;
          });
      for (std::size_t d = 0; d < D; ++d) {
        store(b, 0, add(b, qbase, i64(b, static_cast<std::int64_t>(d))), op2(b, "mul", loop->result(d), scale_));
      }
    }
    if (!out(1) && !out(2)) return;
    Value* rows_k = mul(b, mul(b, B_, i64(b, Hkv_)), Sk_);
    tile::build_for(b, row, rows_k, rows_q, {}, [&](ir::OpBuilder& eb, std::span<Value* const> ea) {
      Value* krow = ea[0];
      Value* j = op2(eb, "rem", krow, Sk_);
      Value* bhk = op2(eb, "div", krow, Sk_);
      Value* hk = op2(eb, "rem", bhk, i64(eb, Hkv_));
      Value* bi = op2(eb, "div", bhk, i64(eb, Hkv_));
      Value* kbase = mul(eb, krow, i64(eb, D_));
      Value* first = causal_ ? op2(eb, "max", i64(eb, 0), op2(eb, "sub", j, op2(eb, "sub", VK_, VQ_))) : i64(eb, 0);
      // A padding key is seen by no row: its dk and dv stay 0.
      if (keys_padded_) first = select(eb, cmp(eb, "lt", j, VK_), first, Sq_);
      // Loop values: dk accumulators [0, D), then dv accumulators [D, 2D).
      ir::Operation* heads = tile::build_for(
          eb, i64(eb, 0), i64(eb, G), i64(eb, 1), zeros(eb, 2 * D_), [&](ir::OpBuilder& hb, std::span<Value* const> ha) {
            Value* h = add(hb, mul(hb, hk, i64(hb, G)), ha[0]);
            std::vector<Value*> carried(ha.begin() + 1, ha.end());
            ir::Operation* rows = tile::build_for(
                hb, first, Sq_, i64(hb, 1), carried, [&](ir::OpBuilder& rb, std::span<Value* const> ra) {
                  Value* qbase = q_row(rb, bi, h, ra[0]);
                  Value* qrow = op2(rb, "div", qbase, i64(rb, D_));
                  Value* delta = load(rb, 3, qrow);
                  auto [p, ds] = pair(rb, qbase, qrow, kbase, j, delta);
                  std::vector<Value*> next(2 * D);
                  for (std::size_t d = 0; d < D; ++d) {
                    Value* at = add(rb, qbase, i64(rb, static_cast<std::int64_t>(d)));
                    next[d] = fma(rb, ds, load(rb, 0, at), ra[1 + d]);
                    next[D + d] = fma(rb, p, load(rb, 5, at), ra[1 + D + d]);
                  }
                  return next;
                });
            return rows->results();
          });
      for (std::size_t d = 0; d < D; ++d) {
        Value* at = add(eb, kbase, i64(eb, static_cast<std::int64_t>(d)));
        if (out(1)) store(eb, 1, at, op2(eb, "mul", heads->result(d), scale_));
        if (out(2)) store(eb, 2, at, heads->result(D + d));
      }
      return std::vector<Value*>{};
    });
  }

  const ir::Operation& kernel_;
  const ir::Block& body_;
  const ir::Operation& root_;
  ir::Module& out_;
  std::string name_;
  ir::Block* fb_ = nullptr;
  int out_index_[3] = {-1, -1, -1};
  NumericsPolicy acc_;
  Value* scale_ = nullptr;
  Value* v_scale_ = nullptr;  // null: 1
  Value* kp_ = nullptr;
  double pd_ = 0.0;
  std::int64_t seed_ = 0, offset_ = 0;
  Value *B_ = nullptr, *Sq_ = nullptr, *Sk_ = nullptr;
  Value *VQ_ = nullptr, *VK_ = nullptr;  // the valid corner (set_valid_corner)
  bool keys_padded_ = false;             // valid_keys is set
  // Blocked kernels: valid_keys is not a multiple of BN; the end of the key
  // blocks with a valid key, and of those without padding.
  bool ragged_keys_ = false;
  std::int64_t key_blocks_end_ = 0, key_blocks_full_ = 0;
  // The blocked kernels' blocks, Sk - Sq and the scale as a [1, 1] tile.
  std::int64_t BM_ = 128, BN_ = 64;
  Value* diag_ = nullptr;
  Value* scale_tile_ = nullptr;
  std::int64_t Hq_ = 1, Hkv_ = 1, D_ = 1;
  bool causal_ = false;
};

}  // namespace

std::vector<std::int64_t> attention_tile(const ir::Operation& kernel) {
  if (kernel.attrs().has("attn_tile")) return kernel.attrs().get_ints("attn_tile");
  return {kAttentionBlockRows, kAttentionBlockKeys};
}

TileKernel lower_attention(const ir::Operation& kernel, ir::Module& out, const std::string& name) {
  return AttentionBuilder(kernel, out, name).build();
}

bool attention_covers(const ir::Operation& kernel, std::string* why) {
  auto fail = [&](const std::string& reason) {
    if (why) *why = reason;
    return false;
  };
  const ir::Operation& root = kernel_root_op(kernel);
  if (root.name() != "graph.flash_attn" && root.name() != "graph.flash_attn_bwd") {
    return fail("'" + std::string(root.name()) + "' is not an attention op");
  }
  const ir::Block& body = kernel_body(kernel);
  for (std::size_t k = 0; k < root.num_operands(); ++k) {
    bool argument = false;
    for (std::size_t a = 0; a < body.num_arguments(); ++a) argument = argument || body.argument(a) == root.operand(k);
    if (!argument) return fail("operand " + std::to_string(k) + " is a constant folded into the kernel (not built yet)");
    const NumericsPolicy& q = root.operand(k)->type().policy;
    if (auto bad = unsupported_policy(q)) return fail("operand " + std::to_string(k) + " has " + *bad);
  }
  for (std::size_t r = 0; r < root.num_results(); ++r) {
    const NumericsPolicy& p = root.result(r)->type().policy;
    if (auto bad = unsupported_policy(p)) return fail("result " + std::to_string(r) + " has " + *bad);
    if (p.rounding != Rounding::nearest_even) return fail("a result rounds stochastically or toward zero (not built yet)");
  }
  const NumericsPolicy& q = root.operand(0)->type().policy;
  if (!is_float(q.accum) || info(q.storage).bits > info(q.accum).bits) {
    return fail("the inputs are wider than their accumulation type");
  }
  return true;
}

bool blocked_attention_applies(const ir::Operation& kernel, std::string* why) {
  const ir::Attribute* knob = kernel.attrs().find("attn_blocked");
  if (!knob || !std::get<bool>(*knob)) {
    if (why) *why = "the attn_blocked knob is not set";
    return false;
  }
  // The knob's setters (assign_tiles, the CUDA Tile IR default) decide
  // whether the target wants the blocked form; here only whether it covers.
  return blocked_attention_covers(kernel, why);
}

bool blocked_attention_covers(const ir::Operation& kernel, std::string* why) {
  auto fail = [&](const std::string& reason) {
    if (why) *why = reason;
    return false;
  };
  const ir::Operation& root = kernel_root_op(kernel);
  if (!blocked_attention_fits(root, why)) return false;
  const auto& qs = root.operand(0)->type().shape;
  const auto& ks = root.operand(1)->type().shape;
  const std::vector<std::int64_t> tile = attention_tile(kernel);
  if (tile.size() != 2 || tile[0] <= 0 || tile[1] <= 0) return fail("attn_tile is not [BM, BN]");
  // Whole blocks only: a ragged block of rows or keys would read the next
  // head's (pad-ragged-attention pads such lengths before partitioning).
  if (qs[2].is_symbolic() || qs[2].size % tile[0] != 0) return fail("Sq is not a known multiple of BM");
  if (ks[2].is_symbolic() || ks[2].size % tile[1] != 0) return fail("Sk is not a known multiple of BN");
  if (kernel_body(kernel).num_arguments() != root.num_operands()) return fail("the kernel has inputs besides the op's");
  return true;
}

bool take_cuda_tile_forward_keys(ir::Operation& kernel) {
  const ir::Operation& root = kernel_root_op(kernel);
  if (root.name() != "graph.flash_attn" || kernel.attrs().has("attn_tile")) return false;
  const DType storage = root.operand(0)->type().policy.storage;
  if (storage == DType::fp32 || !blocked_attention_fits(root)) return false;
  const std::int64_t d = root.operand(0)->type().shape[3].size;
  const ir::Dim& sk = root.operand(1)->type().shape[2];
  if ((d != 64 && d != 128) || sk.is_symbolic() || sk.size % kCudaTileForwardKeys != 0) return false;
  kernel.attrs().set("attn_tile", std::vector<std::int64_t>{kAttentionBlockRows, kCudaTileForwardKeys});
  if (blocked_attention_covers(kernel)) return true;
  kernel.attrs().erase("attn_tile");
  return false;
}

bool cuda_tile_attention(const ir::Operation& kernel) {
  return blocked_attention_covers(kernel) &&
         kernel_root_op(kernel).operand(0)->type().policy.storage != DType::fp32;
}

bool blocked_attention_fits(const ir::Operation& root, std::string* why) {
  auto fail = [&](const std::string& reason) {
    if (why) *why = reason;
    return false;
  };
  const bool forward = root.name() == "graph.flash_attn";
  if (!forward && root.name() != "graph.flash_attn_bwd") return fail("not an attention op");
  const NumericsPolicy& p = root.operand(0)->type().policy;
  // fp8 forwards decode their codes to bf16 tiles at load (exact), so they
  // run the bf16 products; there is no fp8 backward. fp32 products are
  // exact fp32 FMAs on every target (docs/design/0044, 0052).
  if (!blocked_attention_storage(p.storage, forward) || p.accum != DType::fp32) {
    return fail("the inputs are not fp32, bf16, fp16 or (forward) fp8 accumulating in fp32");
  }
  for (std::size_t k : {1, 2}) {
    if (root.operand(k)->type().policy.storage != p.storage) return fail("k or v is not of q's dtype");
  }
  if (!forward) {
    // do feeds the tensor cores beside q: one dtype; delta and lse at fp32.
    if (root.operand(5)->type().policy.storage != p.storage) return fail("do is not of the inputs' dtype");
    if (root.operand(3)->type().dtype() != DType::fp32 || root.operand(4)->type().dtype() != DType::fp32) {
      return fail("delta or the logsumexp is not fp32");
    }
  }
  if (root.attrs().get_real("dropout") != 0.0) return fail("dropout draws per key (the lane form's)");
  const auto& qs = root.operand(0)->type().shape;
  if (!qs[3].is_fixed(64) && !qs[3].is_fixed(128) && !qs[3].is_fixed(256)) return fail("D is not 64, 128 or 256");
  return true;
}

}  // namespace tessera::schedule::templates
