// Tile arithmetic (tile.tile_full, tile_binary, tile_unary, tile_reduce,
// tile_causal_fill, src/tile/tile_math_ops.cpp) as CUDA Tile IR ops on whole
// tiles. Each element is one target op rounded at nearest even, as on the
// CPU and PTX backends; two things differ there and are the target's own:
// tile_reduce combines in the target's fixed tree (the order depends on the
// shape alone), and a `fast` exp or log is the target's instruction rather
// than Tessera's elementary function. A fast exp of (x c - m), with c a
// constant tile (attention's scaled scores less the row max), is exp2 of
// one fma, x (c log2 e) - m log2 e, flushing subnormals: an fma and the
// hardware's ex2 an element where the written form takes a multiply, a
// subtraction and the target's exp (docs/design/0055: 10-25% on the
// attention forward).
#include <limits>

#include "backends/cuda_tile/lowering.h"

namespace tessera::cuda_tile::detail {

namespace {

std::string_view float_op(const std::string& fn) {
  if (fn == "add") return "addf";
  if (fn == "sub") return "subf";
  if (fn == "mul") return "mulf";
  if (fn == "div") return "divf";
  if (fn == "max") return "maxf";
  return "minf";
}

}  // namespace

bool Lowering::lower_tile_math(const ir::Operation& op) {
  const std::string_view n = op.name();
  if (n != "tile.tile_full" && n != "tile.tile_binary" && n != "tile.tile_unary" && n != "tile.tile_reduce" &&
      n != "tile.tile_causal_fill") {
    return false;
  }
  const ir::Type& t = op.result()->type();
  require_nearest(op, t.policy);
  const Elem e = elem(t.dtype(), op);
  const std::vector<std::int64_t> shape = fixed_shape(op, t.shape);
  const TypeRef type = m_.tile(e, shape);
  if (n == "tile.tile_full") {
    values_[op.result()] = b_->constant_float(type, op.attrs().get_real("value"));
    return true;
  }
  const Value x = get(op.operand(0), op);
  if (n == "tile.tile_binary") {
    Value y = get(op.operand(1), op);
    // A dim of size 1 broadcasts: both operands take the result's shape.
    const Value xs = m_.shape_of(x.type) == shape ? x : b_->broadcast(type, x);
    const Value ys = m_.shape_of(y.type) == shape ? y : b_->broadcast(type, y);
    values_[op.result()] = b_->binary(float_op(op.attrs().get_string("fn")), xs, ys);
  } else if (n == "tile.tile_unary") {
    const std::string& fn = op.attrs().get_string("fn");
    const bool fast = op.attrs().has("fast") && op.attrs().get_bool("fast");
    if (fn == "neg") {
      values_[op.result()] = b_->unary("negf", x);
    } else if (fast && fn == "exp" && e == Elem::f32) {
      // The hardware's approximate exp (ex2-based).
      const std::optional<Value> folded = options_.scaled_exp2 ? scaled_exp2(op, type, shape) : std::nullopt;
      values_[op.result()] = folded ? *folded : b_->unary("exp_approx", x);
    } else if (fast) {
      values_[op.result()] = b_->unary(fn, x);  // log keeps the target's full-accuracy one
    } else {
      values_[op.result()] = lane_unary(op, fn, x);  // Tessera's exp/log, step for step
    }
  } else if (n == "tile.tile_reduce") {
    const int axis = static_cast<int>(op.attrs().get_int("axis"));
    const bool max = op.attrs().get_string("fn") == "max";
    const std::vector<std::int64_t> in = m_.shape_of(x.type);
    const std::int64_t kept = in.at(axis == 1 ? 0 : 1);
    const auto ab = b_->begin_reduce(x, axis, max ? -std::numeric_limits<double>::infinity() : -0.0,
                                     m_.tile(e, {kept}));
    const Value r = b_->end_reduce(b_->binary(max ? "maxf" : "addf", ab[0], ab[1]));
    values_[op.result()] = b_->reshape(type, r);
  } else {
    // tile.tile_causal_fill: (r, c) is filled where c - r > row0 + diag - col0.
    const Value row0 = get(op.operand(1), op), col0 = get(op.operand(2), op), diag = get(op.operand(3), op);
    if (varying(row0) || varying(col0) || varying(diag)) {
      cannot(op, "tile.tile_causal_fill offsets that differ between lanes");
    }
    const auto as_i64 = [&](Value v) {
      return m_.elem_of(v.type) == Elem::i64 ? v : b_->convert(scalar(Elem::i64), v);
    };
    const Value limit = b_->binary("subi", b_->binary("addi", as_i64(row0), as_i64(diag)), as_i64(col0));
    const TypeRef full = m_.tile(Elem::i64, shape);
    // 0..n-1 as i64 along one dim, broadcast over the other.
    const auto index = [&](std::size_t dim) {
      const std::int64_t len = shape[dim];
      const Value i = b_->convert(m_.tile(Elem::i64, {len}), b_->iota(m_.tile(Elem::i32, {len})));
      return b_->broadcast(full, b_->reshape(m_.tile(Elem::i64, dim == 0 ? std::vector<std::int64_t>{len, 1}
                                                                          : std::vector<std::int64_t>{1, len}),
                                             i));
    };
    // Without `rows` the row drops out: a mask of columns (padding keys).
    const Value cols = index(1);
    const bool by_row = !op.attrs().has("rows") || op.attrs().get_bool("rows");
    const Value masked = b_->cmp(by_row ? b_->binary("subi", cols, index(0)) : cols, splat(limit, shape), Cmp::gt);
    values_[op.result()] = b_->select(masked, b_->constant_float(type, op.attrs().get_real("value")), x);
  }
  return true;
}

std::optional<Value> Lowering::scaled_exp2(const ir::Operation& exp, TypeRef type,
                                           const std::vector<std::int64_t>& shape) {
  auto binary_def = [](const ir::Value* v, const char* fn) -> const ir::Operation* {
    const ir::Operation* d = v->defining_op();
    return d && d->name() == "tile.tile_binary" && d->attrs().get_string("fn") == fn ? d : nullptr;
  };
  const ir::Operation* sub = binary_def(exp.operand(0), "sub");
  const ir::Operation* mul = sub ? binary_def(sub->operand(0), "mul") : nullptr;
  const ir::Operation* c = mul ? mul->operand(1)->defining_op() : nullptr;
  if (!c || c->name() != "tile.tile_full" || c->result()->type().policy != exp.result()->type().policy) {
    return std::nullopt;
  }
  const Value x = get(mul->operand(0), *mul);
  if (m_.shape_of(x.type) != shape) return std::nullopt;
  constexpr double kLog2e = 1.4426950408889634;
  // c as the tile holds it (fp32), times log2 e, rounded once to fp32.
  const double scaled = static_cast<double>(static_cast<float>(c->attrs().get_real("value"))) * kLog2e;
  const Value m = get(sub->operand(1), *sub);
  const Value neg_m = b_->unary("negf", b_->binary("mulf", m, b_->constant_float(m.type, kLog2e)));
  const Value shift = m_.shape_of(m.type) == shape ? neg_m : b_->broadcast(type, neg_m);
  return b_->unary("exp2_ftz", b_->fma(x, b_->constant_float(type, scaled), shift));
}

}  // namespace tessera::cuda_tile::detail
