// JVP and VJP rules of graph.flash_attn (graph/attention_ops.cpp).
//
// VJP: the backward is its own op, graph.flash_attn_bwd (q, k, v,
// delta = rowsum(do * o), the forward's lse, and o's cotangent do -> dq, dk,
// dv), which compiles to its own kernel with fixed-order sums. delta is a
// graph.sum of the products at the accumulation type, computed once per
// query row before the backward: inside it, every key block would recompute
// it (on an H200 the blocked kernel's tile reduction of do * o held 214
// registers at D = 128 and kept CUDA Tile IR from specializing its warps). A cotangent of the logsumexp result
// is not supported: tessera.ops.flash_attn returns o alone, so user code
// never reaches it, and a rule that met one raises rather than drop it.
// For bf16/fp16 inputs the backward reads the primals at their storage and
// do rounded to o's dtype, and writes fp32 gradients (its `out` attribute):
// the mixed-precision form the blocked tensor-core backward takes
// (docs/design/0015); other dtypes run at the tangent policy throughout.
//
// JVP: built from the decomposition, at the accumulation type, with
// G = Hq / Hkv and the query heads of one group as an extra batch dim:
//   S  = scale q k^T (causal: -inf where j > i + Sk - Sq)   P = softmax(S)
//   dS = scale (dq k^T + q dk^T)    dP = P (dS - rowsum(P dS))  (softmax_linear)
//   do = dP v + P dv                dlse = rowsum(P dS)
//   (with dropout, graph.dropout of dP and P with the op's stream, before the products)
// This materializes S x S per head, as any forward-mode rule of attention
// built from Graph IR ops must; a fused JVP kernel is future work.
// graph.flash_attn_bwd is differentiated the same way in neither mode: it is
// linear in do but not in q, k, v, and its rules raise (second derivatives of
// attention are not built).
#include <limits>

#include "autodiff/rules/rules.h"
#include "tessera/support/error.h"

namespace tessera::autodiff::rules {

namespace {

ir::AttrMap attn_attrs(const ir::Operation& op) {
  const ir::AttrMap& a = op.attrs();
  return ir::AttrMap{{"scale", a.get_real("scale")},   {"causal", a.get_bool("causal")},
                     {"dropout", a.get_real("dropout")}, {"seed", a.get_int("seed")},
                     {"offset", a.get_int("offset")}};
}

// A forward with a v descale or a result policy of its own (fp8 attention)
// has no backward: graph.flash_attn_bwd computes at q's policy with v as is.
void check_differentiable(const ir::Operation& op, const char* mode) {
  const ir::AttrMap& a = op.attrs();
  // Padded problems are written by a Schedule IR pass, after autodiff.
  if (a.get_int("valid_queries") != 0 || a.get_int("valid_keys") != 0) {
    raise(ErrorCode::ArgumentInvalid,
          std::string("graph.flash_attn: a padded problem (valid_queries, valid_keys) is a form the Schedule IR writes "
                      "after autodiff; its ") + mode + " rule is not built (differentiate the unpadded op)");
  }
  if ((a.has("v_scale") && a.get_real("v_scale") != 1.0) || a.has("out")) {
    raise(ErrorCode::ArgumentInvalid,
          std::string("graph.flash_attn: a forward with descales or a result dtype of its own (fp8 attention) is "
                      "forward-only; its ") + mode + " rule is not built (cast q, k and v to bf16 to train)");
  }
}

// delta = rowsum(do * o) [B, Hq, Sq], the products and their sum at the
// accumulation type (bf16 products are exact there).
Value* row_dot(RuleContext& c, const ir::Operation& op, Value* dout, Value* o) {
  const NumericsPolicy acc = default_policy(op.operand(0)->type().policy.accum);
  return c.op("graph.sum", {mul(c, c.cast_to(dout, acc), c.cast_to(o, acc))},
              ir::AttrMap{{"axes", std::vector<std::int64_t>{-1}}, {"keepdims", false}});
}

Values flash_attn_vjp(RuleContext& c, ir::Operation& op, const Values& ct) {
  check_differentiable(op, "VJP");
  if (ct.size() > 1 && ct[1]) {
    raise(ErrorCode::ArgumentInvalid,
          "graph.flash_attn: differentiating through its logsumexp result is not supported (only through o)");
  }
  if (!ct[0]) return Values{nullptr, nullptr, nullptr};
  const DType storage = op.operand(0)->type().dtype();
  if (storage == DType::bf16 || storage == DType::fp16) {
    // Mixed precision, as attention is trained everywhere: the backward reads
    // q, k, v and o at their storage and do rounded to it (tensor-core
    // operands), and writes the gradients at the tangent policy (fp32).
    Value* o = op.result(0);
    ir::AttrMap attrs = attn_attrs(op);
    attrs.set("out", *autodiff::tangent_policy(op.operand(0)->type()));
    Value* dout = c.cast_to(ct[0], o->type().policy);
    return c.ops("graph.flash_attn_bwd",
                 {op.operand(0), op.operand(1), op.operand(2), row_dot(c, op, dout, o), op.result(1), dout}, attrs);
  }
  Value* q = c.primal(op.operand(0));
  Value* k = c.primal(op.operand(1));
  Value* v = c.primal(op.operand(2));
  Value* o = c.primal(op.result(0));
  Value* lse = c.primal(op.result(1));
  Value* dout = c.cast_to(ct[0], o->type().policy);
  return c.ops("graph.flash_attn_bwd", {q, k, v, row_dot(c, op, dout, o), lse, dout}, attn_attrs(op));
}

struct Decomposition {
  RuleContext& c;
  const ir::Operation& op;
  NumericsPolicy acc;
  ir::Shape q5, kv5;  // [B, Hkv, G, Sq, D] and [B, Hkv, 1, Sk, D]

  Decomposition(RuleContext& ctx, const ir::Operation& o) : c(ctx), op(o) {
    acc = default_policy(op.operand(0)->type().policy.accum);
    const ir::Shape& q = op.operand(0)->type().shape;
    const ir::Shape& k = op.operand(1)->type().shape;
    const std::int64_t G = q[1].size / k[1].size;
    q5 = {q[0], k[1], ir::Dim::fixed(G), q[2], q[3]};
    kv5 = {k[0], k[1], ir::Dim::fixed(1), k[2], k[3]};
  }
  Value* reshape(Value* x, const ir::Shape& s) { return c.op("graph.reshape", {x}, ir::AttrMap{{"shape", s}}); }
  Value* at_acc(Value* x, const ir::Shape& s) { return x ? reshape(c.cast_to(x, acc), s) : nullptr; }
  Value* qkT(Value* a, Value* b) {
    return c.op("graph.gemm", {a, b}, ir::AttrMap{{"transpose_a", false}, {"transpose_b", true}});
  }
  Value* scaled(Value* x) { return mul(c, x, c.scalar(op.attrs().get_real("scale"), acc)); }

  // softmax of the masked scores [B, Hkv, G, Sq, Sk].
  Value* probabilities(Value* q, Value* k) {
    Value* s = scaled(qkT(q, k));
    if (op.attrs().get_bool("causal")) {
      const ir::Dim sq = q5[3], sk = kv5[3];
      if (sq.is_symbolic() || sk.is_symbolic()) {
        raise(ErrorCode::ShapeMismatch, "graph.flash_attn: the forward-mode rule of a causal attention needs static "
                                        "sequence lengths, got Sq = " + sq.str() + ", Sk = " + sk.str());
      }
      const ir::Shape grid = {sq, sk};
      const NumericsPolicy i64 = default_policy(DType::int64);
      Value* i = c.op("graph.iota", {}, ir::AttrMap{{"shape", grid}, {"axis", std::int64_t{0}}, {"policy", i64}});
      Value* j = c.op("graph.iota", {}, ir::AttrMap{{"shape", grid}, {"axis", std::int64_t{1}}, {"policy", i64}});
      Value* limit = add(c, i, c.scalar(static_cast<double>(sk.size - sq.size), i64));
      Value* visible = c.op("graph.le", {j, limit});
      s = c.op("graph.where", {visible, s, c.scalar(-std::numeric_limits<double>::infinity(), acc)});
    }
    return c.op("graph.softmax_safe", {s}, ir::AttrMap{{"axis", std::int64_t{-1}}});
  }
  // Dropout of a [B, Hkv, G, Sq, Sk] matrix: its row-major index is the op's entry index n, so
  // graph.dropout with the op's stream drops the same entries.
  Value* dropped(Value* x) {
    const ir::AttrMap& a = op.attrs();
    if (a.get_real("dropout") == 0.0) return x;
    return c.op("graph.dropout", {x}, ir::AttrMap{{"p", a.get_real("dropout")}, {"seed", a.get_int("seed")},
                                                 {"offset", a.get_int("offset")}});
  }

  Values jvp(const Values& t) {
    Value* q = at_acc(c.primal(op.operand(0)), q5);
    Value* k = at_acc(c.primal(op.operand(1)), kv5);
    Value* v = at_acc(c.primal(op.operand(2)), kv5);
    Value* p = probabilities(q, k);
    Value* ds = add_maybe(c, t[0] ? qkT(at_acc(t[0], q5), k) : nullptr, t[1] ? qkT(q, at_acc(t[1], kv5)) : nullptr);
    Value* dout = nullptr;
    Value* dlse = nullptr;
    if (ds) {
      ds = scaled(ds);
      Value* dp = c.op("graph.softmax_linear", {p, ds}, ir::AttrMap{{"axis", std::int64_t{-1}}});
      dout = c.op("graph.matmul", {dropped(dp), v});
      dlse = c.op("graph.sum", {mul(c, p, ds)}, ir::AttrMap{{"axes", std::vector<std::int64_t>{-1}}, {"keepdims", false}});
    }
    if (t[2]) dout = add_maybe(c, dout, c.op("graph.matmul", {dropped(p), at_acc(t[2], kv5)}));
    if (dout) dout = c.fit_to(reshape(dout, op.result(0)->type().shape), op.result(0)->type());
    if (dlse) dlse = c.fit_to(reshape(dlse, op.result(1)->type().shape), op.result(1)->type());
    return Values{dout, dlse};
  }
};

[[noreturn]] void no_second_order(const char* mode) {
  raise(ErrorCode::ArgumentInvalid, std::string("graph.flash_attn_bwd has no ") + mode +
                                        " rule yet: second derivatives of attention are not built");
}

}  // namespace

void register_attention_rules() {
  register_builtin_jvp("graph.flash_attn", [](RuleContext& c, ir::Operation& op, const Values& t) {
    check_differentiable(op, "JVP");
    return Decomposition(c, op).jvp(t);
  });
  register_builtin_vjp("graph.flash_attn", flash_attn_vjp);
  register_builtin_jvp("graph.flash_attn_bwd",
                       [](RuleContext&, ir::Operation&, const Values&) -> Values { no_second_order("JVP"); });
  register_builtin_vjp("graph.flash_attn_bwd",
                       [](RuleContext&, ir::Operation&, const Values&) -> Values { no_second_order("VJP"); });
}

}  // namespace tessera::autodiff::rules
