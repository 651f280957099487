// JVP and VJP rules of graph.fft and graph.fft_resize (graph/fft_ops.cpp),
// in the convention of docs/design/0016-complex-and-fft.md: the VJP is the
// transpose of the (linear) JVP under the bilinear pairing sum(a * b).
//
// Every transform is linear, so its JVP is the same op on the tangent. The
// transposes, with s the op's normalization factor and F the DFT matrix of
// its sign (symmetric, so F^T = F):
//
//   c2c   y = s F x                ct -> s F ct: the same op
//   r2c   y = s (F x)[0 .. n/2]    ct -> real(s F pad_n(ct)): c2c of the
//                                  cotangent zero-padded to n, real part
//   c2r   y = s real(F herm(c))    ct -> s w * (F ct)[0 .. n/2]: r2c of the
//                                  real cotangent with hermitian_weights
//                                  (w = 1 for bin 0 and, n even, bin n/2;
//                                  2 for the bins whose mirror herm() fills)
//   fft_resize to length m         ct -> fft_resize of ct back to the
//                                  operand's length (crop and zero-pad are
//                                  each other's transposes)
//
// A real operand of a c2c transform gets the real part of its cotangent
// (the engine's fit to the operand type). The r2c with hermitian_weights
// exists only as the c2r transpose; its own transpose (a third-order
// derivative of irfft) is not built and says so.
#include "autodiff/rules/rules.h"
#include "tessera/support/error.h"

namespace tessera::autodiff::rules {

namespace {

ir::AttrMap with(const ir::AttrMap& attrs, std::initializer_list<std::pair<const char*, ir::Attribute>> changes) {
  ir::AttrMap out = attrs;
  for (const auto& [key, value] : changes) out.set(key, value);
  return out;
}

}  // namespace

void register_fft_rules() {
  register_builtin_jvp("graph.fft", [](RuleContext& c, ir::Operation& op, const Values& t) {
    return Values{c.op("graph.fft", {t[0]}, op.attrs())};
  });
  register_builtin_vjp("graph.fft", [](RuleContext& c, ir::Operation& op, const Values& ct) {
    const ir::AttrMap& a = op.attrs();
    const std::string& kind = a.get_string("kind");
    if (kind == "c2c") return Values{c.op("graph.fft", {ct[0]}, a)};
    if (kind == "c2r") {
      return Values{c.op("graph.fft", {ct[0]}, with(a, {{"kind", std::string("r2c")}, {"hermitian_weights", true}}))};
    }
    if (a.get_bool("hermitian_weights")) {
      raise(ErrorCode::Compile, "graph.fft: the VJP of a hermitian-weighted r2c transform (a third derivative of "
                                "irfft) is not built");
    }
    const std::int64_t n = a.get_int("n");
    Value* padded = c.op("graph.fft_resize", {ct[0]}, ir::AttrMap{{"axis", a.get_int("axis")}, {"length", n}});
    Value* full = c.op("graph.fft", {padded}, with(a, {{"kind", std::string("c2c")}}));
    return Values{c.op("graph.real", {full})};
  });
  register_builtin_jvp("graph.fft_resize", [](RuleContext& c, ir::Operation& op, const Values& t) {
    return Values{c.op("graph.fft_resize", {t[0]}, op.attrs())};
  });
  register_builtin_vjp("graph.fft_resize", [](RuleContext& c, ir::Operation& op, const Values& ct) {
    const ir::Type& x = op.operand(0)->type();
    std::int64_t axis = op.attrs().get_int("axis");
    if (axis < 0) axis += static_cast<std::int64_t>(x.rank());
    const std::int64_t len = x.shape[static_cast<std::size_t>(axis)].size;
    return Values{c.op("graph.fft_resize", {ct[0]}, ir::AttrMap{{"axis", axis}, {"length", len}})};
  });
}

}  // namespace tessera::autodiff::rules
