// JVP and VJP rules of the complex ops (graph/complex_ops.cpp) and of abs on
// complex operands, in the convention of docs/design/0016-complex-and-fft.md:
// a JVP is the R-linear map dz -> df, and the VJP is its transpose with
// respect to the bilinear pairing <a, b> = sum(a * b) (no conjugation), so
// holomorphic ops (add, mul, div, exp) reuse their real rules unchanged and
// only the ops below, which are not holomorphic, need their own:
//
//   op             JVP                        VJP (ct = cotangent)
//   real(z)        real(t)                    complex(ct, 0)
//   imag(z)        imag(t)                    complex(0, -ct)
//   conj(z)        conj(t)                    conj(ct)
//   complex(a, b)  complex(ta, tb)            (real(ct), -imag(ct))
//   |z|            real(conj(z) t) / |z|      ct * conj(z) / |z|  (0 at z = 0)
//
// Real-to-complex promotion inside add or mul transposes to the real part
// (graph.cast complex -> real), which the engine applies when it fits a
// cotangent to a real operand.
#include "autodiff/rules/rules.h"

namespace tessera::autodiff::rules {

namespace {

Value* part(RuleContext& c, const char* which, Value* v) {
  return c.op(std::string("graph.") + which, {v});
}
Value* make_complex(RuleContext& c, Value* re, Value* im) {
  return c.op("graph.complex", {re, im});
}

// conj(z) / |z| with 0 where z = 0 (the convention sign(0) = 0).
Value* conj_sign(RuleContext& c, ir::Operation& op) {
  Value* z = c.primal(op.operand(0));
  Value* r = c.primal(op.result(0));
  const NumericsPolicy p = r->type().policy;
  Value* is_zero = c.op("graph.eq", {r, c.scalar(0.0, p)});
  Value* safe = c.op("graph.where", {is_zero, c.scalar(1.0, p), r});
  return div(c, part(c, "conj", z), safe);  // conj(0) / 1 = 0 where z = 0
}

}  // namespace

Value* complex_abs_jvp(RuleContext& c, ir::Operation& op, Value* t) {
  return part(c, "real", mul(c, conj_sign(c, op), t));
}

Value* complex_abs_vjp(RuleContext& c, ir::Operation& op, Value* ct) {
  return mul(c, ct, conj_sign(c, op));
}

void register_complex_rules() {
  for (const char* name : {"graph.real", "graph.imag", "graph.conj"}) {
    register_builtin_jvp(name, [name](RuleContext& c, ir::Operation& op, const Values& t) {
      // A real operand: real and conj are the identity, imag is zero.
      if (!is_complex(op.operand(0)->type().dtype())) {
        return Values{std::string(name) == "graph.imag" ? c.zeros_like(op.result(0)) : t[0]};
      }
      return Values{c.op(name, {t[0]})};
    });
  }
  register_builtin_vjp("graph.real", [](RuleContext& c, ir::Operation& op, const Values& ct) {
    if (!is_complex(op.operand(0)->type().dtype())) return Values{ct[0]};
    return Values{make_complex(c, ct[0], c.zeros_like(op.result(0)))};
  });
  register_builtin_vjp("graph.imag", [](RuleContext& c, ir::Operation& op, const Values& ct) {
    if (!is_complex(op.operand(0)->type().dtype())) return Values{c.zeros_like(op.operand(0))};
    return Values{make_complex(c, c.zeros_like(op.result(0)), neg(c, ct[0]))};
  });
  register_builtin_vjp("graph.conj", [](RuleContext& c, ir::Operation&, const Values& ct) {
    return Values{c.op("graph.conj", {ct[0]})};
  });
  register_builtin_jvp("graph.complex", [](RuleContext& c, ir::Operation& op, const Values& t) {
    Value* re = t[0] ? t[0] : c.zeros_like(op.operand(0));
    Value* im = t[1] ? t[1] : c.zeros_like(op.operand(1));
    return Values{make_complex(c, re, im)};
  });
  register_builtin_vjp("graph.complex", [](RuleContext& c, ir::Operation&, const Values& ct) {
    return Values{part(c, "real", ct[0]), neg(c, part(c, "imag", ct[0]))};
  });
}

}  // namespace tessera::autodiff::rules
