// The sparse template: graph.spmm and graph.sddmm (graph/sparse_ops.cpp) ->
// one Tile IR kernel each, computing exactly what the reference kernels do,
// in their order, so results are bit for bit the reference's on every
// backend:
//
//   spmm   each output element (m, n): acc = 0, then for j = start[m] ..
//          end[m]-1 in order acc = fma(values[j], b[col[j], n], acc) at
//          the accumulation type; stored rounded to the result's storage.
//          A lane computes a strip of S adjacent elements of one row (the
//          `spmm_strip` knob: 64 on the CPU, where the row's indices and
//          values are then read once per 64 outputs, the strip's
//          accumulators held in shared memory; 1 on CUDA), lane i
//          taking strip i mod ceil(N / S) of row i / ceil(N / S); the
//          grid holds the rows' strips (TileKernel::last_axis_strip). With
//          N = 1 (spmv) the lane keeps its row's chain in one register.
//          On CUDA (the `spmm_vector` knob, V) a lane takes a run of V
//          adjacent outputs of a row instead, its accumulators in
//          registers, and reads each nonzero's V values of b as one vector
//          (16 bytes): the row's indices and values once per V outputs and a
//          quarter (fp32) of the load instructions. A run past N takes the
//          element path. Each element still adds its terms in the same
//          order, so neither width ever shows in the bits.
//   sddmm  one lane per slot j: its row m is found by binary search over
//          start (the largest m with start[m] <= j; empty rows share their
//          start with the next row, so that m's row is never empty), then
//          acc = fma(x[m, d], y[d, col[j]], acc) for d = 0 .. D-1.
//
// Row-split: every output element is written by one lane, which sums its
// terms in one fixed order. No atomics, no cross-lane combination, so the
// result cannot depend on the grid, the group size or the backend.
//
// The transposed-pattern operands are not read (the gradients use them).
// Operands may arrive as splat constants inside the kernel (Schedule IR
// copies those into the groups that read them); they become literals.
#include <functional>
#include <optional>
#include <set>

#include "graph/passes/pass_support.h"
#include "schedule/templates/lane_program.h"
#include "schedule/templates/row_loops.h"
#include "schedule/templates/templates.h"
#include "tessera/schedule/schedule_dialect.h"
#include "tessera/tile/tile_builder.h"

namespace tessera::schedule::templates {
namespace {

using ir::Type;
using ir::Value;

constexpr std::int64_t kLanes = 256;

class SparseBuilder {
 public:
  SparseBuilder(const ir::Operation& kernel, ir::Module& out, const std::string& name)
      : kernel_(kernel), body_(kernel_body(kernel)), root_(kernel_root_op(kernel)), out_(out), name_(name) {}

  TileKernel build() {
    const std::int64_t lanes = group_lanes(kernel_, kLanes);
    const NumericsPolicy& p = root_.result(0)->type().policy;
    const std::size_t num_in = body_.num_arguments();
    TileKernel result;
    std::vector<std::pair<std::string, Type>> params = input_buffer_params(body_);
    params.emplace_back("out", Type::gmem({ir::Dim::named("n")}, buffer_policy(p), /*is_mut=*/true));
    // Dims read at run time: spmm needs b's N; sddmm x's M and D and y's K.
    const bool spmm = root_.name() == "graph.spmm";
    std::vector<std::pair<std::size_t, std::size_t>> dims;  // (operand, dim)
    if (spmm) dims = {{1, 1}};
    else dims = {{0, 0}, {0, 1}, {1, 1}};
    // A splat-constant operand is not a kernel input; its dims are static.
    std::vector<bool> passed;
    for (auto [operand, d] : dims) {
      const std::optional<std::size_t> argument = argument_of(root_.operand(operand));
      passed.push_back(argument.has_value());
      if (!argument) continue;
      params.emplace_back("x" + std::to_string(operand) + "_" + std::to_string(d), Type::lane(DType::int64));
      result.scalars.push_back(KernelScalar{KernelScalar::Kind::input_dim, d, *argument});
    }
    const std::int64_t strip = kernel_.attrs().has("spmm_strip") ? kernel_.attrs().get_int("spmm_strip") : 64;
    if (strip < 1 || strip > 64) {
      raise(ErrorCode::ArgumentInvalid, "spmm kernel with spmm_strip " + std::to_string(strip) + " (1 to 64)",
            kernel_.location());
    }
    acc_ = default_policy(p.accum);
    const std::int64_t vector = kernel_.attrs().has("spmm_vector") ? kernel_.attrs().get_int("spmm_vector") : 1;
    // Runs read b as vectors: b must be a kernel input (not a splat).
    const bool runs = spmm && vector > 1 && argument_of(root_.operand(1)).has_value();
    const bool strips = spmm && strip > 1 && !runs;
    tile::KernelOptions options{.group_shape = std::vector<std::int64_t>{lanes}};
    if (strips) options.shared_bytes = lanes * strip * (bit_width(acc_.storage) / 8);
    ir::Operation* func = tile::build_kernel(out_, name_, params, options, kernel_.location());
    ir::Block& fb = ir::function_body(*func);
    ir::OpBuilder b(fb);
    fb_ = &fb;
    Value* out_buffer = fb.argument(num_in);
    std::vector<Value*> dim_values;
    std::size_t next = num_in + 1;
    for (std::size_t k = 0; k < dims.size(); ++k) {
      const auto [operand, d] = dims[k];
      dim_values.push_back(passed[k] ? fb.argument(next++) : tile::build_int(b, root_.operand(operand)->type().shape[d].size));
    }
    result_ = p;

    Value* i = global_lane(b, lanes);
    Value* n = tile::build(b, "tile.symbol", {}, {{"name", std::string("n")}});
    if (runs) {
      // Lane i: run s = i mod ceil(N / V) of row m = i / ceil(N / V); the
      // grid holds the rows' runs (last_axis_strip).
      Value* N = dim_values[0];
      Value* count = op2(b, "div", index_op(b, "add", N, tile::build_int(b, vector - 1)), tile::build_int(b, vector));
      Value* m = op2(b, "div", i, count);
      Value* n0 = index_op(b, "mul", op2(b, "rem", i, count), tile::build_int(b, vector));
      if_then(b, cmp(b, "lt", m, op2(b, "div", n, N)), [&](ir::OpBuilder& t) {
        if_then(
            t, cmp(t, "le", index_op(t, "add", n0, tile::build_int(t, vector)), N),
            [&](ir::OpBuilder& rb) { spmm_run(rb, out_buffer, m, n0, N, vector); },
            [&](ir::OpBuilder& eb) {
              // The row's last, short run: element by element.
              Value* first = index_op(eb, "add", index_op(eb, "mul", m, N), n0);
              tile::build_for(eb, tile::build_int(eb, 0), op2(eb, "sub", N, n0), tile::build_int(eb, 1), {},
                              [&](ir::OpBuilder& lb, std::span<Value* const> a) {
                                Value* e = index_op(lb, "add", first, a[0]);
                                lb.create("tile.store_elem", {out_buffer, e, cast(lb, spmm_lane(lb, e, N), buffer_policy(result_))});
                                return std::vector<Value*>{};
                              });
            });
      });
    } else if (strips) {
      // Each lane's strip accumulators: `strip` elements of the group's
      // shared array at the accumulation type.
      Value* accs = tile::build(b, "tile.smem_alloc", {},
                                {{"shape", ir::fixed_shape({lanes * strip})}, {"policy", acc_}});
      Value* first = index_op(b, "mul", tile::build(b, "tile.linear_id", {}), tile::build_int(b, strip));
      // The grid holds each row's strips (none when N is 0:
      // last_axis_strip); lanes past them in the last group do nothing.
      Value* N = dim_values[0];
      Value* count = op2(b, "div", index_op(b, "add", N, tile::build_int(b, strip - 1)), tile::build_int(b, strip));
      Value* m = op2(b, "div", i, count);
      if_then(b, cmp(b, "lt", m, op2(b, "div", n, N)), [&](ir::OpBuilder& t) {
        // One column (spmv): the row's chain in one register. A strip of
        // width 1 paid the strip loop's set-up per nonzero (5-7x scipy's
        // time). The same fmas in the same order either way.
        if_then(
            t, cmp(t, "eq", N, tile::build_int(t, 1)),
            [&](ir::OpBuilder& ob) {
              ob.create("tile.store_elem", {out_buffer, m, cast(ob, spmm_lane(ob, m, N), buffer_policy(result_))});
            },
            [&](ir::OpBuilder& ob) { spmm_strip(ob, out_buffer, m, op2(ob, "rem", i, count), N, strip, accs, first); });
      });
    } else {
      if_then(b, cmp(b, "lt", i, n), [&](ir::OpBuilder& t) {
        Value* acc = spmm ? spmm_lane(t, i, dim_values[0]) : sddmm_lane(t, i, dim_values[0], dim_values[1], dim_values[2]);
        t.create("tile.store_elem", {out_buffer, i, cast(t, acc, buffer_policy(result_))});
      });
    }
    tile::finish_kernel(*func);
    result.func = func;
    result.lanes_per_group = lanes;
    // A lane per strip or run: the grid holds the rows' strips, not every element.
    if (strips) result.last_axis_strip = strip;
    if (runs) result.last_axis_strip = vector;
    return result;
  }

 private:
  // The body argument index of v, or nothing for a value built inside the
  // body (a splat constant, which is not a kernel input).
  std::optional<std::size_t> argument_of(const Value* v) const {
    for (std::size_t k = 0; k < body_.num_arguments(); ++k) {
      if (body_.argument(k) == v) return k;
    }
    return std::nullopt;
  }

  // The kernel buffer of operand k, or null for a splat constant.
  Value* buffer_of(std::size_t k) {
    const std::optional<std::size_t> a = argument_of(root_.operand(k));
    return a ? fb_->argument(*a) : nullptr;
  }
  // Element `at` of operand k: a load, or the literal of a splat constant.
  Value* element(ir::OpBuilder& b, std::size_t k, Value* at) {
    if (Value* buffer = buffer_of(k)) return tile::build(b, "tile.load_elem", {buffer, at});
    const Value* v = root_.operand(k);
    const double s = *graph::splat_value(v);
    const NumericsPolicy& p = v->type().policy;
    if (is_float(p.storage)) return tile::build_real(b, s, buffer_policy(p));
    return tile::build_int(b, static_cast<std::int64_t>(s));
  }
  Value* index(ir::OpBuilder& b, std::size_t k, Value* at) {
    return cast(b, element(b, k, at), default_policy(DType::int64));
  }
  Value* at_acc(ir::OpBuilder& b, Value* x) { return x->type().policy == acc_ ? x : cast(b, x, acc_); }
  Value* fma(ir::OpBuilder& b, Value* x, Value* y, Value* acc) {
    return tile::build(b, "tile.fma", {at_acc(b, x), at_acc(b, y), acc});
  }

  // Operands: 0 values, 1 b, 2 start, 3 end, 4 col.
  Value* spmm_lane(ir::OpBuilder& b, Value* i, Value* N) {
    Value* m = op2(b, "div", i, N);
    Value* col_n = op2(b, "rem", i, N);
    Value* lo = index(b, 2, m);
    Value* hi = index(b, 3, m);
    ir::Operation* loop = tile::build_for(b, lo, hi, tile::build_int(b, 1), {tile::build_real(b, 0.0, acc_)},
                                          [&](ir::OpBuilder& lb, std::span<Value* const> a) {
                                            Value* j = a[0];
                                            Value* row_of_b = index(lb, 4, j);
                                            Value* bv = element(lb, 1, index_op(lb, "add", index_op(lb, "mul", row_of_b, N), col_n));
                                            return std::vector<Value*>{fma(lb, element(lb, 0, j), bv, a[1])};
                                          });
    return loop->result(0);
  }

  // Row m's strip s: output elements n0 + w, n0 = s * S, w < W = min(S,
  // N - n0), each accumulated as spmm_lane does, in the lane's accumulators
  // accs[first + w]. For each nonzero j in order, one loop over w updates
  // them all: acc_w = fma(values[j], b[col N + n0 + w], acc_w). The loop
  // carries no value and its accesses are consecutive, so the CPU backend
  // checks its ranges once and g++ vectorizes it, where 16 separate
  // accumulators carried by the nonzero loop stayed scalar (docs/design/0013).
  void spmm_strip(ir::OpBuilder& b, Value* out, Value* m, Value* s, Value* N, std::int64_t S, Value* accs,
                  Value* first) {
    Value* n0 = index_op(b, "mul", s, tile::build_int(b, S));
    // The loops run over a width known at run time: with the constant S,
    // g++ unrolled them into scalar code before vectorizing (the strips ran
    // 2-3x slower).
    Value* width = op2(b, "min", tile::build_int(b, S), op2(b, "sub", N, n0));
    Value* zero = tile::build_int(b, 0);
    Value* one = tile::build_int(b, 1);
    auto over_strip = [&](ir::OpBuilder& ob, const std::function<void(ir::OpBuilder&, Value*)>& step) {
      tile::build_for(ob, zero, width, one, {}, [&](ir::OpBuilder& lb, std::span<Value* const> a) {
        step(lb, a[0]);
        return std::vector<Value*>{};
      });
    };
    over_strip(b, [&](ir::OpBuilder& lb, Value* w) {
      lb.create("tile.store_elem", {accs, index_op(lb, "add", first, w), tile::build_real(lb, 0.0, acc_)});
    });
    tile::build_for(b, index(b, 2, m), index(b, 3, m), one, {}, [&](ir::OpBuilder& jb, std::span<Value* const> a) {
      Value* j = a[0];
      Value* value = at_acc(jb, element(jb, 0, j));  // widened once
      Value* row_of_b = index_op(jb, "add", index_op(jb, "mul", index(jb, 4, j), N), n0);
      over_strip(jb, [&](ir::OpBuilder& lb, Value* w) {
        Value* at = index_op(lb, "add", first, w);
        Value* acc = tile::build(lb, "tile.load_elem", {accs, at});
        lb.create("tile.store_elem", {accs, at, fma(lb, value, element(lb, 1, index_op(lb, "add", row_of_b, w)), acc)});
      });
      return std::vector<Value*>{};
    });
    Value* row = index_op(b, "add", index_op(b, "mul", m, N), n0);
    over_strip(b, [&](ir::OpBuilder& lb, Value* w) {
      Value* acc = tile::build(lb, "tile.load_elem", {accs, index_op(lb, "add", first, w)});
      lb.create("tile.store_elem", {out, index_op(lb, "add", row, w), cast(lb, acc, buffer_policy(result_))});
    });
  }

  // Row m's outputs n0 .. n0 + V - 1 (inside the row), each accumulated as
  // spmm_lane does, in V registers carried by the loop over the nonzeros;
  // each nonzero's V values of b are one vector load.
  void spmm_run(ir::OpBuilder& b, Value* out, Value* m, Value* n0, Value* N, std::int64_t V) {
    Value* b_buffer = buffer_of(1);
    std::vector<Value*> zeros(static_cast<std::size_t>(V), tile::build_real(b, 0.0, acc_));
    ir::Operation* loop = tile::build_for(
        b, index(b, 2, m), index(b, 3, m), tile::build_int(b, 1), zeros, [&](ir::OpBuilder& lb, std::span<Value* const> a) {
          Value* j = a[0];
          Value* value = at_acc(lb, element(lb, 0, j));  // widened once
          Value* at = index_op(lb, "add", index_op(lb, "mul", index(lb, 4, j), N), n0);
          const auto row = lb.create("tile.load_vector", {b_buffer, at}, {{"count", V}})->results();
          std::vector<Value*> accs;
          for (std::int64_t w = 0; w < V; ++w) {
            accs.push_back(fma(lb, value, row[static_cast<std::size_t>(w)], a[1 + static_cast<std::size_t>(w)]));
          }
          return accs;
        });
    std::vector<Value*> operands = {out, index_op(b, "add", index_op(b, "mul", m, N), n0)};
    for (std::size_t w = 0; w < static_cast<std::size_t>(V); ++w) {
      operands.push_back(cast(b, loop->result(w), buffer_policy(result_)));
    }
    b.create("tile.store_vector", operands);
  }

  // Operands: 0 x [M, D], 1 y [D, K], 2 start, 3 end, 4 col.
  Value* sddmm_lane(ir::OpBuilder& b, Value* j, Value* M, Value* D, Value* K) {
    Value* one = tile::build_int(b, 1);
    // Binary search: lo = the largest m with start[m] <= j, in [lo, hi).
    ir::Operation* search = tile::build_while(
        b, {tile::build_int(b, 0), M},
        [&](ir::OpBuilder& cb, std::span<Value* const> a) {
          return std::vector<Value*>{cmp(cb, "gt", op2(cb, "sub", a[1], a[0]), one), a[0], a[1]};
        },
        [&](ir::OpBuilder& lb, std::span<Value* const> a) {
          Value* mid = op2(lb, "div", op2(lb, "add", a[0], a[1]), tile::build_int(lb, 2));
          Value* le = cmp(lb, "le", index(lb, 2, mid), j);
          return std::vector<Value*>{select(lb, le, mid, a[0]), select(lb, le, a[1], mid)};
        });
    Value* m = search->result(0);
    Value* c = index(b, 4, j);
    Value* row = index_op(b, "mul", m, D);
    ir::Operation* loop = tile::build_for(b, tile::build_int(b, 0), D, one, {tile::build_real(b, 0.0, acc_)},
                                          [&](ir::OpBuilder& lb, std::span<Value* const> a) {
                                            Value* d = a[0];
                                            Value* xv = element(lb, 0, index_op(lb, "add", row, d));
                                            Value* yv = element(lb, 1, index_op(lb, "add", index_op(lb, "mul", d, K), c));
                                            return std::vector<Value*>{fma(lb, xv, yv, a[1])};
                                          });
    return loop->result(0);
  }

  const ir::Operation& kernel_;
  const ir::Block& body_;
  const ir::Operation& root_;
  ir::Module& out_;
  std::string name_;
  ir::Block* fb_ = nullptr;
  NumericsPolicy acc_, result_;
};

}  // namespace

TileKernel lower_sparse(const ir::Operation& kernel, ir::Module& out, const std::string& name) {
  return SparseBuilder(kernel, out, name).build();
}

bool sparse_covers(const ir::Operation& kernel, std::string* why) {
  auto fail = [&](const std::string& reason) {
    if (why) *why = reason;
    return false;
  };
  const ir::Operation& root = kernel_root_op(kernel);
  static const std::set<std::string_view> kOps = {"graph.spmm", "graph.sddmm"};
  if (!kOps.count(root.name())) return fail("'" + std::string(root.name()) + "' is not a sparse op");
  const NumericsPolicy& p = root.result(0)->type().policy;
  if (auto bad = unsupported_policy(p)) return fail("the result has " + *bad);
  if (p.rounding != Rounding::nearest_even) return fail("the result rounds stochastically or toward zero (not built yet)");
  if (!is_float(p.accum)) return fail("the accumulation type is not a float");
  for (std::size_t k = 0; k < 2; ++k) {
    const NumericsPolicy& q = root.operand(k)->type().policy;
    if (auto bad = unsupported_policy(q)) return fail("operand " + std::to_string(k) + " has " + *bad);
    // The kernel converts operands to the accumulation type: exact only when it is at least as wide.
    if (info(q.storage).bits > info(p.accum).bits) {
      return fail("operand " + std::to_string(k) + " is wider than the accumulation type");
    }
  }
  return true;
}

}  // namespace tessera::schedule::templates
