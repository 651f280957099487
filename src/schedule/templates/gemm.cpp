// The GEMM template: graph.matmul / graph.gemm and the elementwise epilogue
// fused after it (bias, activation, residual add, cast) -> one Tile IR kernel
// computing one [BM, BN] output tile per group, launched once per batch
// matrix (the executable passes that batch's A and B as 2-D views).
//
//   kernel(a: gmem<[ra, ca] Pa>, b: gmem<[rb, cb] Pb>, in_2.., out_0.., scalars)
//     (tm, tn) = the group's output tile; acc2 = 0
//     for each superblock of 256 K-blocks:      acc1 = 0
//       for each K-block of 256:                 part = 0
//         for each BK-chunk of the block:        part = mma(A chunk, B chunk, part)
//         acc1 = tile_add(acc1, part)
//       acc2 = tile_add(acc2, acc1)
//     acc2 -> shared memory; barrier
//     each lane takes elements e = lid, lid + T, ..: the matmul's value is
//       the accumulator rounded to the result policy, and the epilogue runs
//       per lane over the output domain (lane_program.h)
//
// With the `gemm_vector` knob V > 1 (CUDA executables: 16 bytes of the
// epilogue's narrowest buffer), the epilogue's lanes take runs of V
// consecutive columns instead of single elements: one vector access per run
// for each input that is consecutive along a row and for each output.
// With a lane per tile row and no more columns than lanes (the CPU's tiles),
// the epilogue runs the tile's rows one after another, lane c taking column
// c, so the CPU backend vectorizes each row's lane loop (docs/design/0050).
//
// With the `mma_flat` knob (set for the CUDA Tile IR target's tensor-core
// GEMMs, passes.h set_tile_ir_knobs) the product is one loop over K instead,
// with latency hint 3 (tile.range(prefetch=3)); bits then follow the tensor
// cores' order, which still depends on the shape alone.
//
// With the `mma_staged` knob (set for CUDA executables' bf16 and fp16 GEMMs,
// passes.h set_target_knobs) the product is the kernel language's staged
// form instead: each BK-chunk of A and B is copied into xor-swizzled shared
// buffers (tile.cp_async, zeros past the edges), the loop is software-
// pipelined `kStagedPrefetch` deep (tile-pipeline) and the mma reads the
// buffers in place: wgmma with bulk tensor copies on Hopper, mma.sync
// before. Bits follow the tensor cores' order, as with mma_flat: a function
// of the shape alone.
//
// tile.mma accumulates each element in increasing k with one rounding per
// step at the accumulation type, so the sum is the canonical blocked order
// (lower_to_tile.h) whatever BM, BN, BK are (BK divides the block): results
// equal the reference's bit for bit (graph/linalg_ops.cpp sums in this order). Transposed operands are
// loaded as stored and transposed as tiles. Operands of different dtypes are
// cast (exactly) to fp32, or fp64 when either is fp64, before the mma.
// Integer products skip the mma: each epilogue lane computes its element
// exactly, with the reference's overflow errors (integer_dot).
#include <set>

#include "schedule/templates/lane_program.h"
#include "schedule/templates/row_loops.h"
#include "schedule/templates/templates.h"
#include "tessera/schedule/schedule_dialect.h"
#include "tessera/tile/passes.h"
#include "tessera/tile/tile_builder.h"

namespace tessera::schedule::templates {
namespace {

constexpr std::int64_t kStagedPrefetch = 3;
// Tile rows per band of the groups' launch order (place_tile).
constexpr std::int64_t kRasterRows = 8;

using ir::Type;
using ir::Value;

const NumericsPolicy kF64 = default_policy(DType::fp64);

// Whether an fp32 accumulator element rounds to `p` in one step: fp32
// accumulation into a float storage of at most 32 bits (the reference
// rounds the fp32 sum to storage), not stochastically.
bool fp32_result(const ir::Value* acc, const NumericsPolicy& p) {
  return acc->type().dtype() == DType::fp32 && p.accum == DType::fp32 && fp32_exact(p.storage) &&
         p.rounding != Rounding::stochastic;
}

bool flag(const ir::Operation& op, const char* name) {
  const ir::Attribute* a = op.attrs().find(name);
  return a && std::get<bool>(*a);
}

std::size_t argument_index(const ir::Block& body, const Value* v) {
  for (std::size_t k = 0; k < body.num_arguments(); ++k) {
    if (body.argument(k) == v) return k;
  }
  return body.num_arguments();
}

std::vector<Value*> values(std::initializer_list<Value*> v) {
  return v;
}

class GemmBuilder {
 public:
  GemmBuilder(const ir::Operation& kernel, ir::Module& out, const std::string& name)
      : kernel_(kernel), body_(kernel_body(kernel)), root_(kernel_root_op(kernel)), out_(out), name_(name) {}

  TileKernel build() {
    const ir::Shape& domain = kernel_.attrs().get_shape("domain");
    std::vector<std::int64_t> tile = kernel_.attrs().has("tile") ? kernel_.attrs().get_ints("tile")
                                                                 : std::vector<std::int64_t>{128, 128, 64};
    bm_ = tile.at(0), bn_ = tile.at(1), bk_ = tile.at(2);
    if (bk_ <= 0 || kReductionBlock % bk_ != 0) bk_ = 64;  // a chunk never straddles a block
    ta_ = flag(root_, "transpose_a"), tb_ = flag(root_, "transpose_b");
    const ir::Operation& yield = *body_.terminator();
    const std::size_t num_in = body_.num_arguments();
    const std::size_t num_out = yield.num_operands();
    a_index_ = argument_index(body_, root_.operand(0));
    b_index_ = argument_index(body_, root_.operand(1));
    const NumericsPolicy& pa = root_.operand(0)->type().policy;
    const NumericsPolicy& pb = root_.operand(1)->type().policy;
    acc_policy_ = default_policy(root_.result(0)->type().policy.accum);

    std::vector<std::pair<std::string, Type>> params;
    bool any_broadcast = false;
    for (std::size_t k = 0; k < num_in; ++k) {
      const Type& t = body_.argument(k)->type();
      if (k == a_index_ || k == b_index_) {
        const std::string s = k == a_index_ ? "a" : "b";  // x @ x: one buffer serves both
        params.emplace_back(s, Type::gmem({ir::Dim::named(s + "r"), ir::Dim::named(s + "c")}, buffer_policy(t.policy)));
      } else {
        params.emplace_back("in" + std::to_string(k), Type::gmem({ir::Dim::named("m" + std::to_string(k))}, buffer_policy(t.policy)));
        any_broadcast = any_broadcast || broadcasts(body_.argument(k), domain);
      }
    }
    integer_ = !is_float(root_.result(0)->type().dtype());
    // A result that rounds stochastically draws per element: the epilogue path.
    const bool stochastic = root_.result(0)->type().policy.rounding == Rounding::stochastic;
    direct_ = !integer_ && !stochastic && num_out == 1 && yield.operand(0) == root_.result(0);
    for (const auto& op : body_.ops()) {
      if (op.get() != &root_ && op.get() != body_.terminator() && !is_splat_constant(*op)) direct_ = false;
    }
    for (std::size_t j = 0; j < num_out; ++j) {
      const ir::Shape shape = direct_ ? ir::Shape{ir::Dim::named("om"), ir::Dim::named("on")} : ir::Shape{ir::Dim::named("n")};
      params.emplace_back("out" + std::to_string(j), Type::gmem(shape, buffer_policy(yield.operand(j)->type().policy), /*is_mut=*/true));
    }
    TileKernel result;
    auto scalar = [&](const std::string& name, KernelScalar s) {
      params.emplace_back(name, Type::lane(DType::int64));
      result.scalars.push_back(s);
    };
    const std::size_t ra = root_.operand(0)->type().rank(), rb = root_.operand(1)->type().rank();
    scalar("batch", KernelScalar{KernelScalar::Kind::batch});
    scalar("M", KernelScalar{KernelScalar::Kind::input_dim, ta_ ? ra - 1 : ra - 2, a_index_});
    scalar("K", KernelScalar{KernelScalar::Kind::input_dim, ta_ ? ra - 2 : ra - 1, a_index_});
    scalar("N", KernelScalar{KernelScalar::Kind::input_dim, tb_ ? rb - 2 : rb - 1, b_index_});
    for (std::size_t d = 0; any_broadcast && d < domain.size(); ++d) {
      scalar("d" + std::to_string(d), KernelScalar{KernelScalar::Kind::dim, d});
    }
    // The group's lanes: BM by default (the epilogue's lane r takes row r);
    // the `gemm_lanes` knob (CUDA executables) gives more, and each lane then
    // takes the tile's elements lane, lane + lanes, .. (consecutive lanes,
    // consecutive columns). Either way an element's value is the same.
    const std::int64_t lanes = kernel_.attrs().has("gemm_lanes") ? kernel_.attrs().get_int("gemm_lanes") : bm_;
    if (lanes < 1) raise(ErrorCode::ArgumentInvalid, "gemm kernel with gemm_lanes " + std::to_string(lanes), kernel_.location());
    // Shared memory holds the accumulator tile for the epilogue, and the
    // staged form's operand buffers (one set per pipeline stage).
    staged_ = !integer_ && flag(kernel_, "mma_staged") && !flag(kernel_, "mma_flat") && pa.storage == pb.storage;
    std::int64_t shared = integer_ ? 0 : bm_ * bn_ * (bit_width(acc_policy_.storage) / 8);
    // `gemm_stages` (assign_tiles) sets the pipeline's depth; kStagedPrefetch by default.
    stages_ = kernel_.attrs().has("gemm_stages") ? kernel_.attrs().get_int("gemm_stages") : kStagedPrefetch;
    if (stages_ < 2) {
      raise(ErrorCode::ArgumentInvalid,
            "gemm kernel with gemm_stages " + std::to_string(stages_) + "; expected 2 or more", kernel_.location());
    }
    if (staged_) shared += (stages_ + 1) * (bm_ + bn_) * bk_ * (bit_width(pa.storage) / 8);
    ir::Operation* func = tile::build_kernel(
        out_, name_, params, {.group_shape = std::vector<std::int64_t>{lanes}, .shared_bytes = shared},
        kernel_.location());
    ir::Block& fb = ir::function_body(*func);
    ir::OpBuilder b(fb);
    std::size_t next = num_in + num_out;
    Value* batch = fb.argument(next++);
    m_ = fb.argument(next++), k_ = fb.argument(next++), n_ = fb.argument(next++);
    std::vector<Value*> dims;
    for (std::size_t d = 0; any_broadcast && d < domain.size(); ++d) dims.push_back(fb.argument(next++));
    a_ = fb.argument(a_index_), b_ = fb.argument(b_index_);
    // Both operands as one dtype when they differ (exact casts).
    if (pa.storage != pb.storage) {
      mma_policy_ = default_policy(pa.storage == DType::fp64 || pb.storage == DType::fp64 ? DType::fp64 : DType::fp32);
    }

    place_tile(b);
    Value* acc = integer_                   ? nullptr
                 : flag(kernel_, "mma_flat") ? flat_product(b)
                 : staged_                   ? staged_product(b)
                                             : blocked_product(b);
    const NumericsPolicy& p = root_.result(0)->type().policy;
    if (direct_) {
      // No epilogue: the accumulator, rounded to the result policy, is stored as a tile.
      if (p != acc_policy_) acc = tile::build(b, "tile.tile_cast", {acc}, {{"to", p}});
      b.create("tile.tile_store", {fb.argument(num_in), m0_, n0_, acc});
    } else {
      Value* zero = tile::build_int(b, 0);
      Value* staged = nullptr;
      if (!integer_) {
        staged = tile::build(b, "tile.smem_alloc", {}, {{"shape", ir::fixed_shape({bm_, bn_})}, {"policy", acc_policy_}});
        b.create("tile.tile_store", {staged, zero, zero, acc});
        b.create("tile.barrier", {});
      }
      // The epilogue.
      // Broadcast epilogue operands are addressed from (batch index, row, column).
      std::vector<Value*> batch_index;
      if (!dims.empty()) {
        batch_index.assign(domain.size() - 2, nullptr);
        Value* rest = batch;
        for (std::size_t d = domain.size() - 2; d-- > 0;) {
          batch_index[d] = op2(b, "rem", rest, dims[d]);
          rest = op2(b, "div", rest, dims[d]);
        }
      }
      // The lane program of the output element (gm, gn) at flat index i
      // (broadcast operands addressed from its multi-index).
      auto program_at = [&](Value* i, Value* gm, Value* gn) {
        LaneProgram program(domain, i, dims);
        if (!dims.empty()) {
          std::vector<Value*> index = batch_index;
          index.push_back(gm);
          index.push_back(gn);
          program.set_index(index);
        }
        return program;
      };
      // The stored outputs of the tile's element (r, c) at (gm, gn), flat
      // index i: its lane program, input k bound to loaded[k] when given
      // (the element's value from a run), else read from its buffer.
      // `in_bounds`: the element is known to exist (its reads unchecked).
      auto outputs_at = [&](ir::OpBuilder& ib, Value* r, Value* c, Value* gm, Value* gn, Value* i,
                            const std::vector<Value*>& loaded, bool in_bounds = false) {
        LaneProgram lanes_of = program_at(i, gm, gn);
        lanes_of.set_in_bounds(in_bounds);
        for (std::size_t k = 0; k < num_in; ++k) {
          if (k == a_index_ || k == b_index_) continue;
          if (!loaded.empty() && loaded[k] != nullptr) {
            lanes_of.bind_value(body_.argument(k), LaneValue{loaded[k], LaneProgram::decode(ib, loaded[k])});
          } else {
            lanes_of.bind_input(body_.argument(k), fb.argument(k));
          }
        }
        ir::AttrMap staged_read;
        if (in_bounds) staged_read.set("in_bounds", true);
        Value* v = integer_ ? integer_dot(ib, gm, gn) : tile::build(ib, "tile.load_elem", {staged, r, c}, staged_read);
        // A stochastic result draws Philox(0, i) for its element i, as
        // the reference's make_result does.
        lanes_of.bind_value(root_.result(0), p.rounding == Rounding::stochastic
                                                 ? LaneProgram::finish_stochastic(ib, cast(ib, v, kF64), p, true, i, 0)
                                             : fp32_result(v, p) ? LaneProgram::from_fp32(ib, v, p)
                                                                 : LaneProgram::finish(ib, cast(ib, v, kF64), p));
        for (const auto& op : body_.ops()) {
          if (op.get() == body_.terminator()) break;
          if (op.get() != &root_) lanes_of.lower_op(ib, *op);
        }
        std::vector<Value*> outputs;
        for (std::size_t j = 0; j < num_out; ++j) outputs.push_back(lanes_of.value(ib, yield.operand(j)).stored);
        return outputs;
      };
      // Flat index in the output domain: ((batch * M) + gm) * N + gn.
      auto flat = [&](ir::OpBuilder& ib, Value* gm, Value* gn) {
        return op2(ib, "add", op2(ib, "mul", op2(ib, "add", op2(ib, "mul", batch, m_), gm), n_), gn);
      };
      // The element (r, c) of the tile, where it exists.
      auto element = [&](ir::OpBuilder& lb, Value* r, Value* c) {
        Value* gm = op2(lb, "add", m0_, r);
        Value* gn = op2(lb, "add", n0_, c);
        Value* inside = op2(lb, "and", cmp(lb, "lt", gm, m_), cmp(lb, "lt", gn, n_));
        if_then(lb, inside, [&](ir::OpBuilder& ib) {
          Value* i = flat(ib, gm, gn);
          const std::vector<Value*> outputs = outputs_at(ib, r, c, gm, gn, i, {});
          for (std::size_t j = 0; j < num_out; ++j) ib.create("tile.store_elem", {fb.argument(num_in + j), i, outputs[j]});
        });
      };
      Value* lid = tile::build(b, "tile.linear_id", {});
      const std::int64_t vector = integer_ ? 1 : run_length();
      if (vector > 1) {
        // Runs: lane l takes the runs of `vector` consecutive columns at
        // tile elements l V, (l + lanes) V, .. (rows hold whole runs). A run
        // whose elements all exist reads the inputs consecutive along a row
        // (those spanning the domain, and biases) with one tile.load_vector
        // each and writes each output with one tile.store_vector: a GPU
        // moves 16 bytes per access, and a lane has a run's loads in flight.
        // Elements past the right edge go one by one. Every element's value
        // is the element form's.
        tile::build_for(
            b, zero, tile::build_int(b, bm_ * bn_), tile::build_int(b, lanes * vector), {},
            [&](ir::OpBuilder& lb, std::span<Value* const> at) {
              Value* e = op2(lb, "add", at[0], op2(lb, "mul", lid, tile::build_int(lb, vector)));
              Value* r = op2(lb, "div", e, tile::build_int(lb, bn_));
              Value* c = op2(lb, "rem", e, tile::build_int(lb, bn_));
              Value* gm = op2(lb, "add", m0_, r);
              Value* gn = op2(lb, "add", n0_, c);
              Value* whole = op2(lb, "and", cmp(lb, "lt", gm, m_),
                                 cmp(lb, "le", op2(lb, "add", gn, tile::build_int(lb, vector)), n_));
              if_then(
                  lb, whole,
                  [&](ir::OpBuilder& wb) {
                    Value* i = flat(wb, gm, gn);
                    LaneProgram first = program_at(i, gm, gn);
                    std::vector<std::vector<Value*>> loaded(num_in);
                    for (std::size_t k = 0; k < num_in; ++k) {
                      if (k == a_index_ || k == b_index_) continue;
                      const ir::Shape& shape = body_.argument(k)->type().shape;
                      if (shape.empty() || !(shape.back() == domain.back()) || lookup_table(body_.argument(k))) {
                        continue;  // read per element (a table by code)
                      }
                      loaded[k] = wb.create("tile.load_vector", {fb.argument(k), first.offset_of(wb, shape)},
                                            {{"count", vector}})
                                      ->results();
                    }
                    std::vector<std::vector<Value*>> stored(num_out);
                    for (std::int64_t q = 0; q < vector; ++q) {
                      std::vector<Value*> element_values(num_in, nullptr);
                      for (std::size_t k = 0; k < num_in; ++k) {
                        if (!loaded[k].empty()) element_values[k] = loaded[k][static_cast<std::size_t>(q)];
                      }
                      auto plus_q = [&](Value* x) {
                        return q == 0 ? x : index_op(wb, "add", x, tile::build_int(wb, q));
                      };
                      const std::vector<Value*> outputs =
                          outputs_at(wb, r, plus_q(c), gm, plus_q(gn), plus_q(i), element_values);
                      for (std::size_t j = 0; j < num_out; ++j) stored[j].push_back(outputs[j]);
                    }
                    for (std::size_t j = 0; j < num_out; ++j) {
                      std::vector<Value*> operands{fb.argument(num_in + j), i};
                      operands.insert(operands.end(), stored[j].begin(), stored[j].end());
                      wb.create("tile.store_vector", operands);
                    }
                  },
                  [&](ir::OpBuilder& tb) {
                    // A loop, so the element's code is not repeated V times.
                    tile::build_for(tb, tile::build_int(tb, 0), tile::build_int(tb, vector), tile::build_int(tb, 1), {},
                                    [&](ir::OpBuilder& qb, std::span<Value* const> q) {
                                      element(qb, r, op2(qb, "add", c, q[0]));
                                      return std::vector<Value*>{};
                                    });
                  },
                  /*likely=*/true);
              return std::vector<Value*>{};
            });
      } else if (lanes == bm_ && bn_ <= lanes) {
        // The CPU's form (a lane per tile row, at least as many lanes as
        // columns): the tile's rows one after the other, lane c taking
        // column c of each. Every value but the column is the same in all
        // lanes and computed before them, and the lanes that run are those
        // below min(BN, N - n0): the CPU backend runs such a lane loop with
        // unchecked, contiguous accesses once their spans are checked, a
        // loop its compiler vectorizes with the SIMD forms of the math
        // functions (tanh, erf). Each element's program is the element
        // form's, so the bits are too.
        Value* rows_here = op2(b, "min", tile::build_int(b, bm_), op2(b, "sub", m_, m0_));
        Value* cols_here = op2(b, "min", tile::build_int(b, bn_), op2(b, "sub", n_, n0_));
        tile::build_for(b, zero, rows_here, tile::build_int(b, 1), {}, [&](ir::OpBuilder& lb, std::span<Value* const> at) {
          Value* r = at[0];
          Value* gm = op2(lb, "add", m0_, r);
          Value* row_first = flat(lb, gm, n0_);
          if_then(lb, cmp(lb, "lt", lid, cols_here), [&](ir::OpBuilder& ib) {
            Value* gn = op2(ib, "add", n0_, lid);
            Value* i = op2(ib, "add", row_first, lid);
            const std::vector<Value*> outputs = outputs_at(ib, r, lid, gm, gn, i, {}, /*in_bounds=*/true);
            for (std::size_t j = 0; j < num_out; ++j) {
              ib.create("tile.store_elem", {fb.argument(num_in + j), i, outputs[j]}, {{"in_bounds", true}});
            }
          });
          // The row's lanes finish before the next row's: on the CPU each
          // row is then its own loop over the lanes, inside the row loop.
          lb.create("tile.barrier", {});
          return std::vector<Value*>{};
        });
      } else {
        // Lane r takes row r of the tile, column by column: on the CPU the
        // lanes run one after the other, so each walks contiguous memory.
        // With more lanes than rows, element e of the tile goes to lane e mod
        // lanes (stores of consecutive lanes are adjacent on a GPU).
        const bool by_rows = lanes == bm_;
        Value* first = by_rows ? zero : lid;
        Value* end = tile::build_int(b, by_rows ? bn_ : bm_ * bn_);
        Value* stride = tile::build_int(b, by_rows ? 1 : lanes);
        tile::build_for(b, first, end, stride, {}, [&](ir::OpBuilder& lb, std::span<Value* const> at) {
          Value* r = by_rows ? lid : op2(lb, "div", at[0], tile::build_int(lb, bn_));
          Value* c = by_rows ? at[0] : op2(lb, "rem", at[0], tile::build_int(lb, bn_));
          element(lb, r, c);
          return std::vector<Value*>{};
        });
      }
    }
    tile::finish_kernel(*func);
    if (staged_) tile::run_kernel_passes(*func);
    result.func = func;
    result.lanes_per_group = lanes;
    result.matrix = MatrixLaunch{a_index_, b_index_, ta_, tb_, bm_, bn_, direct_};
    return result;
  }

 private:
  // The A chunk [BM, BK] at k and the B chunk [BK, BN] at k, as mma operands.
  Value* operand(ir::OpBuilder& b, bool is_a, Value* k) {
    const bool transposed = is_a ? ta_ : tb_;
    Value* buffer = is_a ? a_ : b_;
    Value* outer = is_a ? m0_ : n0_;
    const std::int64_t extent = is_a ? bm_ : bn_;
    // As stored: A is [M, K] ([K, M] transposed), B is [K, N] ([N, K] transposed).
    const bool k_first = is_a == transposed;
    const ir::Shape shape = k_first ? ir::fixed_shape({bk_, extent}) : ir::fixed_shape({extent, bk_});
    Value* t = k_first ? tile::build(b, "tile.tile_load", {buffer, k, outer}, {{"shape", shape}})
                       : tile::build(b, "tile.tile_load", {buffer, outer, k}, {{"shape", shape}});
    if (transposed) t = tile::build(b, "tile.transpose", {t});
    if (mma_policy_) t = tile::build(b, "tile.tile_cast", {t}, {{"to", *mma_policy_}});
    return t;
  }

  // An integer product element as the reference computes it
  // (graph/linalg_ops.cpp): each product x * y in fp64 and the running sum,
  // exact, in increasing k; an error once either passes 2^53 in magnitude,
  // and when the result leaves its type. The product is clamped to 2^62
  // before it becomes an int64, which the 2^53 check then rejects; the
  // int64 sum cannot overflow before its check stops it. One lane per
  // element: integer products are seldom hot.
  Value* integer_dot(ir::OpBuilder& b, Value* gm, Value* gn) {
    const NumericsPolicy i64 = default_policy(DType::int64);
    const double clamp = 0x1p62;
    const std::string op(root_.name());
    const std::string passed =
        op + " of integers passed 2^53 in magnitude, beyond exact accumulation; cast the operands to a float first";
    ir::Operation* loop = tile::build_for(
        b, tile::build_int(b, 0), k_, tile::build_int(b, 1), {tile::build_int(b, 0)},
        [&](ir::OpBuilder& lb, std::span<Value* const> a) {
          Value* k = a[0];
          Value* x = tile::build(lb, "tile.load_elem", ta_ ? values({a_, k, gm}) : values({a_, gm, k}));
          Value* y = tile::build(lb, "tile.load_elem", tb_ ? values({b_, gn, k}) : values({b_, k, gn}));
          Value* xy = op2(lb, "mul", cast(lb, LaneProgram::decode(lb, x), kF64), cast(lb, LaneProgram::decode(lb, y), kF64));
          Value* big = tile::build_real(lb, clamp, kF64);
          Value* neg_big = tile::build_real(lb, -clamp, kF64);
          xy = select(lb, cmp(lb, "gt", xy, big), big, select(lb, cmp(lb, "lt", xy, neg_big), neg_big, xy));
          Value* term = check_exact(lb, cast(lb, xy, i64), passed);
          return values({check_exact(lb, op2(lb, "add", a[1], term), passed)});
        });
    const DType out = root_.result(0)->type().dtype();
    return check_fits(b, loop->result(0), out,
                      op + " result overflows its " + std::string(name(out)) + " result; cast the operands to int64 or a float first");
  }

  // Columns per epilogue run: the `gemm_vector` knob, cut to a power of
  // two dividing BN so runs never cross a tile row (1: no runs).
  std::int64_t run_length() const {
    const std::int64_t want = kernel_.attrs().has("gemm_vector") ? kernel_.attrs().get_int("gemm_vector") : 1;
    if (want < 1 || want > 16) {
      raise(ErrorCode::ArgumentInvalid, "gemm kernel with gemm_vector " + std::to_string(want) + "; expected 1 to 16",
            kernel_.location());
    }
    std::int64_t v = 1;
    while (v * 2 <= want && bn_ % (v * 2) == 0) v *= 2;
    return v;
  }

  Value* zeros(ir::OpBuilder& b) {
    return tile::build(b, "tile.zeros", {}, {{"shape", ir::fixed_shape({bm_, bn_})}, {"policy", acc_policy_}});
  }

  // The group's output tile (m0_, n0_), in bands of kRasterRows tile rows:
  // group ids run down a band's rows first, then across its columns, so the
  // groups resident at once share a few A row panels and B column panels,
  // which stay in the L2 cache. Row-major order had each wave of resident
  // groups stream all of B from memory (a [8192, 4096] x [4096, 16384]
  // product read B 32 times). The order changes no tile's arithmetic, so not
  // the bits.
  void place_tile(ir::OpBuilder& b) {
    Value* gid = tile::build(b, "tile.group_id", {});
    auto i = [&](std::int64_t v) { return tile::build_int(b, v); };
    Value* tiles_m = op2(b, "div", op2(b, "add", m_, i(bm_ - 1)), i(bm_));
    Value* tiles_n = op2(b, "div", op2(b, "add", n_, i(bn_ - 1)), i(bn_));
    Value* band_size = op2(b, "mul", i(kRasterRows), tiles_n);
    Value* first_row = op2(b, "mul", op2(b, "div", gid, band_size), i(kRasterRows));
    Value* left = op2(b, "sub", tiles_m, first_row);
    Value* rows = select(b, cmp(b, "lt", left, i(kRasterRows)), left, i(kRasterRows));
    Value* in_band = op2(b, "rem", gid, band_size);
    m0_ = op2(b, "mul", op2(b, "add", first_row, op2(b, "rem", in_band, rows)), i(bm_));
    n0_ = op2(b, "mul", op2(b, "div", in_band, rows), i(bn_));
  }

  // One loop over K in BK steps (mma_flat): the loads of a step are issued
  // three steps ahead of their use on the CUDA Tile IR target.
  Value* flat_product(ir::OpBuilder& b) {
    ir::Operation* loop = tile::build_for(
        b, tile::build_int(b, 0), k_, tile::build_int(b, bk_), {zeros(b)},
        [&](ir::OpBuilder& kb, std::span<Value* const> kk) {
          return values({tile::build(kb, "tile.mma", {operand(kb, true, kk[0]), operand(kb, false, kk[0]), kk[1]})});
        },
        /*prefetch=*/3);
    return loop->result(0);
  }

  // The staged form (mma_staged): per BK-chunk, A's [BM, BK] and B's
  // [BK, BN] boxes (as stored: transposed operands are copied as their
  // [BK, BM] / [BN, BK] boxes and transposed as tiles) are copied into
  // shared buffers, and the mma reads them there.
  Value* staged_product(ir::OpBuilder& b) {
    const NumericsPolicy& pa = root_.operand(0)->type().policy;
    const NumericsPolicy& pb = root_.operand(1)->type().policy;
    auto buffer = [&](const NumericsPolicy& p, std::int64_t rows, std::int64_t cols) {
      return tile::build(b, "tile.smem_alloc", {},
                         {{"shape", ir::fixed_shape({rows, cols})}, {"policy", default_policy(p.storage)}, {"swizzle", std::string("xor")}});
    };
    Value* sa = ta_ ? buffer(pa, bk_, bm_) : buffer(pa, bm_, bk_);
    Value* sb = tb_ ? buffer(pb, bn_, bk_) : buffer(pb, bk_, bn_);
    ir::Operation* loop = tile::build_for(
        b, tile::build_int(b, 0), k_, tile::build_int(b, bk_), {zeros(b)},
        [&](ir::OpBuilder& kb, std::span<Value* const> kk) {
          Value* k = kk[0];
          kb.create("tile.cp_async", ta_ ? values({sa, a_, k, m0_}) : values({sa, a_, m0_, k}));
          kb.create("tile.cp_async", tb_ ? values({sb, b_, n0_, k}) : values({sb, b_, k, n0_}));
          kb.create("tile.cp_async_wait", {}, {{"pending", std::int64_t{0}}});
          kb.create("tile.barrier", {});
          auto whole = [&](Value* s, bool transposed) {
            const ir::Type& t = s->type();
            Value* zero = tile::build_int(kb, 0);
            Value* v = tile::build(kb, "tile.tile_load", {s, zero, tile::build_int(kb, 0)},
                                   {{"shape", ir::fixed_shape({t.shape[0].size, t.shape[1].size})}});
            return transposed ? tile::build(kb, "tile.transpose", {v}) : v;
          };
          Value* at = whole(sa, ta_);
          Value* bt = whole(sb, tb_);
          return values({tile::build(kb, "tile.mma", {at, bt, kk[1]})});
        },
        /*prefetch=*/stages_);
    return loop->result(0);
  }

  Value* blocked_product(ir::OpBuilder& b) {
    Value* one = tile::build_int(b, 1);
    Value* block = tile::build_int(b, kReductionBlock);
    auto ceil_div = [&](Value* x) {
      return op2(b, "div", op2(b, "add", x, tile::build_int(b, kReductionBlock - 1)), block);
    };
    Value* num_blocks = ceil_div(k_);
    Value* num_super = ceil_div(num_blocks);
    ir::Operation* outer = tile::build_for(
        b, tile::build_int(b, 0), num_super, one, {zeros(b)}, [&](ir::OpBuilder& sb, std::span<Value* const> s) {
          Value* b_lo = op2(sb, "mul", s[0], block);
          Value* b_hi = op2(sb, "min", num_blocks, op2(sb, "add", b_lo, block));
          ir::Operation* mid = tile::build_for(
              sb, b_lo, b_hi, one, {zeros(sb)}, [&](ir::OpBuilder& bb, std::span<Value* const> blk) {
                Value* k_lo = op2(bb, "mul", blk[0], block);
                Value* k_hi = op2(bb, "min", k_, op2(bb, "add", k_lo, block));
                ir::Operation* inner = tile::build_for(
                    bb, k_lo, k_hi, tile::build_int(bb, bk_), {zeros(bb)},
                    [&](ir::OpBuilder& kb, std::span<Value* const> kk) {
                      Value* at = operand(kb, true, kk[0]);
                      Value* bt = operand(kb, false, kk[0]);
                      return values({tile::build(kb, "tile.mma", {at, bt, kk[1]})});
                    });
                return values({tile::build(bb, "tile.tile_add", {blk[1], inner->result(0)})});
              });
          return values({tile::build(sb, "tile.tile_add", {s[1], mid->result(0)})});
        });
    return outer->result(0);
  }

  const ir::Operation& kernel_;
  const ir::Block& body_;
  const ir::Operation& root_;
  ir::Module& out_;
  std::string name_;
  std::int64_t bm_ = 128, bn_ = 128, bk_ = 64;
  bool ta_ = false, tb_ = false;
  bool staged_ = false;  // the mma_staged form
  std::int64_t stages_ = kStagedPrefetch;  // its pipeline's depth
  bool direct_ = false;  // no epilogue: the accumulator tile goes straight to the result
  bool integer_ = false;  // an integer product: one lane per element (integer_dot)
  std::size_t a_index_ = 0, b_index_ = 1;
  NumericsPolicy acc_policy_;
  std::optional<NumericsPolicy> mma_policy_;
  Value *a_ = nullptr, *b_ = nullptr, *m_ = nullptr, *k_ = nullptr, *n_ = nullptr, *m0_ = nullptr, *n0_ = nullptr;
};

}  // namespace

bool gemm_covers(const ir::Operation& kernel, std::string* why) {
  auto fail = [&](const std::string& reason) {
    if (why) *why = reason;
    return false;
  };
  const ir::Operation& root = kernel_root_op(kernel);
  const ir::Block& body = kernel_body(kernel);
  if (root.name() != "graph.matmul" && root.name() != "graph.gemm") {
    return fail("'" + std::string(root.name()) + "' is not a matrix product");
  }
  std::size_t root_index = 0;
  for (const auto& op : body.ops()) {
    if (op.get() == &root) break;
    if (!is_splat_constant(*op)) return fail("'" + std::string(op->name()) + "' precedes the matrix product");
    ++root_index;
  }
  for (std::size_t k = 0; k < 2; ++k) {
    const Value* x = root.operand(k);
    if (argument_index(body, x) == body.num_arguments()) return fail("a matrix operand is not a kernel input");
    if (is_float(x->type().dtype()) != is_float(root.result(0)->type().dtype())) {
      return fail("a " + std::string(root.name()) + " mixing integer and float operands");
    }
    if (auto bad = unsupported_policy(buffer_policy(x->type().policy))) return fail("a matrix operand has " + *bad);
  }
  // The matrix operands are bound as per-batch 2-D views, so the epilogue
  // reads neither of them.
  for (const auto& op : body.ops()) {
    if (op.get() == &root || op.get() == body.terminator()) continue;
    for (const Value* v : op->operands()) {
      if (v == root.operand(0) || v == root.operand(1)) {
        return fail("the epilogue op '" + std::string(op->name()) + "' reads a matrix operand");
      }
    }
  }
  if (auto bad = unsupported_policy(root.result(0)->type().policy, /*stochastic=*/true)) return fail("the product has " + *bad);
  if (auto bad = lane_ops_unsupported(body, root_index + 1, /*stochastic=*/true)) return fail(*bad);
  return true;
}

TileKernel lower_gemm(const ir::Operation& kernel, ir::Module& out, const std::string& name) {
  return GemmBuilder(kernel, out, name).build();
}

}  // namespace tessera::schedule::templates
