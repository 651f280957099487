// The `canonicalize` pass: algebraic rewrites that keep every result
// bitwise identical, then dead code elimination.
//
// A rewrite fires only when the replacement has exactly the replaced
// value's type (shape and policy), and only for the ops it names (matched by
// name, so a rewrite whose op is not registered never fires). Why each one
// is exact:
//
// - transpose(transpose(x, p1), p2) -> transpose(x, c), c[i] = p1[p2[i]],
//   or x when c is the identity; transpose(x, identity) -> x;
//   reshape(reshape(x)) -> reshape(x); reshape and broadcast_to to the
//   operand's own type -> x. These ops move encodings without decoding them
//   (shape_ops.cpp), so composing or dropping them moves the same bits.
// - Arithmetic identities: neg(neg(x)) -> x, mul(x, 1) -> x, x - (+0) -> x,
//   x + (-0) -> x, cast(x) to x's own policy -> x, cast(cast(x, w), x's
//   policy) -> x when w holds every value of x's format (the constant also when
//   reshaped or broadcast, which keeps every element equal). The reference computes in
//   double from decoded operands, rounds to the accumulation type and
//   encodes to storage. -(-v), v * 1, v - (+0) and v + (-0) equal v in
//   double for every v (signed zeros included: -0 - (+0) = -0,
//   +0 + (-0) = +0), so the result is v again whenever decoding is exact
//   (every storage dtype but int64, whose values beyond 2^53 a double
//   cannot hold) and the accumulation type holds every storage value; only
//   then do they fire. neg(neg(x)) needs a signed float storage besides:
//   integer negation saturates (-(-128) is 127 in int8). Ties between NaN
//   encodings: the reference writes canonical NaNs (keeping the sign), so
//   a NaN with a non-canonical payload keeps its payload after the rewrite.
// - Scaling through data movement: mul(m(x), c) -> m(mul(x, c)) for m a
//   transpose, reshape or broadcast_to used only by the mul and c a
//   one-element constant. Every element of either side is the same element
//   of x times the same c, rounded by the same policy, so moving the
//   multiply before the data movement changes nothing but the number of
//   multiplies (fewer, for broadcast_to). Not done under stochastic
//   rounding, whose random bits depend on the element's index.
//
// - Transposes into products: matmul/gemm(transpose(x), y) -> gemm(x, y)
//   with the operand's transpose flag flipped, for a transpose of the last
//   two dims (either operand): the product reads the same elements of x and
//   sums them in the same order, so every result is the same.
//
// Rewrites repeat until none applies; dead ops are erased after each sweep.
#include <bit>
#include <functional>
#include <numeric>

#include "graph/passes/pass_support.h"
#include "tessera/graph/promotion.h"
#include "tessera/support/error.h"

namespace tessera::graph {

namespace {

using Pos = ir::Block::OpList::iterator;

// Points the uses of op's single result at `x` when the types agree.
bool replace_with(ir::Operation& op, ir::Value* x) {
  if (op.num_results() != 1 || x->type() != op.result()->type()) return false;
  op.result()->replace_all_uses_with(x);
  return true;
}

ir::Operation* producer(const ir::Value* v, std::string_view name) {
  ir::Operation* op = v->defining_op();
  return op && op->name() == name ? op : nullptr;
}

// Decoding to double and rounding to the accumulation type are exact for
// every value of this type (see the header comment).
bool arithmetic_is_exact(const ir::Type& t) {
  const NumericsPolicy& p = t.policy;
  return represents_exactly(DType::fp64, p.storage) && (!is_float(p.accum) || represents_exactly(p.accum, p.storage));
}

// `perm` with negative entries wrapped; empty when it is not a permutation of `rank`.
std::vector<std::int64_t> read_perm(const ir::Operation& op) {
  const ir::Attribute* a = op.attrs().find("perm");
  if (!a || !std::holds_alternative<std::vector<std::int64_t>>(*a)) return {};
  auto perm = std::get<std::vector<std::int64_t>>(*a);
  auto rank = static_cast<std::int64_t>(op.operand(0)->type().rank());
  if (static_cast<std::int64_t>(perm.size()) != rank) return {};
  std::vector<bool> seen(perm.size(), false);
  for (auto& p : perm) {
    if (p < 0) p += rank;
    if (p < 0 || p >= rank || seen[static_cast<std::size_t>(p)]) return {};
    seen[static_cast<std::size_t>(p)] = true;
  }
  return perm;
}

bool is_identity(const std::vector<std::int64_t>& perm) {
  for (std::size_t i = 0; i < perm.size(); ++i) {
    if (perm[i] != static_cast<std::int64_t>(i)) return false;
  }
  return true;
}

bool fold_transpose(ir::Block& block, Pos pos, ir::Operation& op) {
  auto p2 = read_perm(op);
  if (p2.empty() && op.operand(0)->type().rank() != 0) return false;
  if (is_identity(p2)) return replace_with(op, op.operand(0));
  ir::Operation* inner = producer(op.operand(0), "graph.transpose");
  if (!inner) return false;
  auto p1 = read_perm(*inner);
  if (p1.size() != p2.size()) return false;
  std::vector<std::int64_t> composed(p2.size());
  for (std::size_t i = 0; i < p2.size(); ++i) composed[i] = p1[static_cast<std::size_t>(p2[i])];
  ir::Value* x = inner->operand(0);
  if (is_identity(composed)) return replace_with(op, x);
  ir::Operation* t = create_if_typed(block, pos, "graph.transpose", {x}, ir::AttrMap{{"perm", composed}},
                                     {op.result()->type()}, op.location());
  return t && replace_with(op, t->result());
}

// reshape(reshape(x)) -> reshape(x); broadcast_to and reshape to the operand's own type -> x.
bool fold_movement(ir::Block& block, Pos pos, ir::Operation& op) {
  if (replace_with(op, op.operand(0))) return true;
  if (op.name() != "graph.reshape") return false;
  ir::Operation* inner = producer(op.operand(0), "graph.reshape");
  if (!inner) return false;
  ir::Value* x = inner->operand(0);
  if (replace_with(op, x)) return true;
  ir::Operation* r =
      create_if_typed(block, pos, "graph.reshape", {x}, op.attrs(), {op.result()->type()}, op.location());
  return r && replace_with(op, r->result());
}

bool fold_neg(ir::Block&, Pos, ir::Operation& op) {
  ir::Operation* inner = producer(op.operand(0), "graph.neg");
  if (!inner) return false;
  ir::Value* x = inner->operand(0);
  const ir::Type& t = x->type();
  if (!is_float(t.dtype()) || !info(t.dtype()).format.has_sign || !arithmetic_is_exact(t)) return false;
  if (inner->result()->type() != t) return false;
  return replace_with(op, x);
}

// The value of a splat constant, also seen through reshape and broadcast_to
// (which move its encodings unchanged, so every element is still the same):
// autodiff's seed 1.0 reaches a gradient as broadcast_to(reshape(1.0)).
std::optional<double> splat_through_movement(const ir::Value* v) {
  while (const ir::Operation* d = v->defining_op()) {
    if (d->name() != "graph.reshape" && d->name() != "graph.broadcast_to") break;
    v = d->operand(0);
  }
  return splat_value(v);
}

// Replaces op(x, c) (or op(c, x) when `commutes`) by x when c is a splat with the bits of `identity`.
bool fold_identity_operand(ir::Operation& op, double identity, bool commutes) {
  if (op.num_operands() != 2) return false;
  for (std::size_t k = 0; k < (commutes ? 2u : 1u); ++k) {
    ir::Value* x = op.operand(k);
    auto c = splat_through_movement(op.operand(1 - k));
    if (!c || std::bit_cast<std::uint64_t>(*c) != std::bit_cast<std::uint64_t>(identity)) continue;
    if (arithmetic_is_exact(x->type()) && replace_with(op, x)) return true;
  }
  return false;
}

// Whether a cast of a `from` value to `to` keeps the value: every storage
// value of `from` decodes exactly, rounds exactly to to's accumulation type
// and encodes exactly in to's storage.
bool widens_exactly(const ir::Type& from, const NumericsPolicy& to) {
  const DType s = from.policy.storage;
  return arithmetic_is_exact(from) && is_float(s) && !is_complex(s) && represents_exactly(to.storage, s) &&
         (!is_float(to.accum) || represents_exactly(to.accum, s));
}

bool fold_cast(ir::Block&, Pos, ir::Operation& op) {
  if (arithmetic_is_exact(op.operand(0)->type()) && replace_with(op, op.operand(0))) return true;
  // cast(cast(x, wide), x's policy) -> x when the first cast keeps x's
  // value: the second then rounds a value of x's format, which is x again
  // (what autodiff makes of a bf16 cotangent a rule widened and the engine
  // fitted back to bf16).
  ir::Operation* inner = producer(op.operand(0), "graph.cast");
  if (!inner) return false;
  ir::Value* x = inner->operand(0);
  return widens_exactly(x->type(), op.operand(0)->type().policy) && replace_with(op, x);
}

// mul(m(x), c) -> m(mul(x, c)) for data movement m and a one-element constant c.
bool sink_scale(ir::Block& block, Pos pos, ir::Operation& op) {
  if (op.num_operands() != 2 || op.result()->type().policy.rounding == Rounding::stochastic) return false;
  for (std::size_t k = 0; k < 2; ++k) {
    ir::Value* moved = op.operand(k);
    ir::Value* c = op.operand(1 - k);
    ir::Operation* move = moved->defining_op();
    if (!move || !is_removable(*move) || move->num_operands() != 1 || moved->uses().size() != 1) continue;
    if (move->name() != "graph.transpose" && move->name() != "graph.reshape" && move->name() != "graph.broadcast_to") {
      continue;
    }
    auto c_sizes = ir::static_sizes(c->type().shape);
    if (!defining_constant(c) || !c_sizes ||
        std::accumulate(c_sizes->begin(), c_sizes->end(), std::int64_t{1}, std::multiplies<>()) != 1) {
      continue;
    }
    ir::Value* x = move->operand(0);
    std::vector<ir::Value*> operands = k == 0 ? std::vector<ir::Value*>{x, c} : std::vector<ir::Value*>{c, x};
    ir::Type scaled_type = ir::Type::tensor(x->type().shape, op.result()->type().policy);
    ir::Operation* scaled = create_if_typed(block, pos, op.name(), operands, op.attrs(), {scaled_type}, op.location());
    if (!scaled) continue;
    ir::Operation* moved_again = create_if_typed(block, pos, move->name(), {scaled->result()}, move->attrs(),
                                                 {op.result()->type()}, move->location());
    if (!moved_again) {
      block.erase(scaled);
      continue;
    }
    return replace_with(op, moved_again->result());
  }
  return false;
}

// Whether `perm` swaps the last two dims and keeps the others in place.
bool swaps_last_two(const std::vector<std::int64_t>& perm) {
  const std::size_t r = perm.size();
  if (r < 2) return false;
  for (std::size_t i = 0; i + 2 < r; ++i) {
    if (perm[i] != static_cast<std::int64_t>(i)) return false;
  }
  return perm[r - 2] == static_cast<std::int64_t>(r - 1) && perm[r - 1] == static_cast<std::int64_t>(r - 2);
}

// matmul/gemm(transpose(x), y) -> gemm(x, y) with that operand's transpose
// flag flipped, for a transpose of the last two dims: the product reads the
// same elements and sums them in the same order, and kernels read the
// operand as stored (a strided view of it could not be copied in rows).
bool fold_transpose_into_product(ir::Block& block, Pos pos, ir::Operation& op) {
  const bool gemm = op.name() == "graph.gemm";
  auto flag = [&](const char* name) {
    const ir::Attribute* a = op.attrs().find(name);
    return gemm && a && std::get<bool>(*a);
  };
  bool flags[2] = {flag("transpose_a"), flag("transpose_b")};
  ir::Value* operands[2] = {op.operand(0), op.operand(1)};
  bool changed = false;
  for (std::size_t k = 0; k < 2; ++k) {
    ir::Operation* t = producer(operands[k], "graph.transpose");
    if (!t || !swaps_last_two(read_perm(*t))) continue;
    operands[k] = t->operand(0);
    flags[k] = !flags[k];
    changed = true;
  }
  if (!changed) return false;
  ir::AttrMap attrs{{"transpose_a", flags[0]}, {"transpose_b", flags[1]}};
  if (gemm && op.attrs().has("out")) attrs.set("out", op.attrs().get_policy("out"));
  ir::Operation* g = create_if_typed(block, pos, "graph.gemm", {operands[0], operands[1]}, attrs,
                                     {op.result()->type()}, op.location());
  return g && replace_with(op, g->result());
}

bool rewrite(ir::Block& block, Pos pos, ir::Operation& op) {
  std::string_view name = op.name();
  if (name == "graph.matmul" || name == "graph.gemm") return fold_transpose_into_product(block, pos, op);
  if (name == "graph.transpose") return fold_transpose(block, pos, op);
  if (name == "graph.reshape" || name == "graph.broadcast_to") return fold_movement(block, pos, op);
  if (name == "graph.neg") return fold_neg(block, pos, op);
  if (name == "graph.cast") return fold_cast(block, pos, op);
  if (name == "graph.sub") return fold_identity_operand(op, +0.0, false);
  if (name == "graph.add") return fold_identity_operand(op, -0.0, true);
  if (name == "graph.mul") return fold_identity_operand(op, 1.0, true) || sink_scale(block, pos, op);
  return false;
}

void canonicalize_block(ir::Block& block) {
  // Each sweep either rewrites (removing ops, or moving a multiply one step
  // towards its source) or ends the loop; the bound only guards against a
  // rewrite pair undoing each other, which would be a bug here.
  std::size_t max_sweeps = 2 * block.ops().size() + 8;
  for (std::size_t sweep = 0;; ++sweep) {
    if (sweep == max_sweeps) raise(ErrorCode::Internal, "canonicalize did not reach a fixed point");
    bool changed = false;
    auto& ops = block.ops();
    for (auto it = ops.begin(); it != ops.end(); ++it) {
      ir::Operation& op = **it;
      if (!is_removable(op) || op.num_results() != 1 || op.results_unused() || op.num_operands() == 0) continue;
      changed |= rewrite(block, it, op);
    }
    erase_dead_ops(block);
    if (!changed) return;
  }
}

}  // namespace

ir::PassInfo make_canonicalize_pass() {
  return ir::PassInfo{
      .name = "canonicalize",
      .summary =
          "Exact algebraic simplifications (transpose/reshape/neg/mul/sub/cast identities, scaling sunk "
          "through data movement), then dce.",
      .run = [](ir::Module& module) { for_each_block(module, canonicalize_block); },
  };
}

}  // namespace tessera::graph
