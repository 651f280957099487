// Graph IR overflow-safe normalizations: graph.softmax_safe, graph.logsumexp,
// graph.layernorm_safe, graph.rmsnorm_safe.
//
// Each op works on the rows along `axis` (default -1) of a floating-point
// operand; results keep its policy (logsumexp drops the axis unless
// `keepdims`). "Safe" means the result is finite and correct even for inputs
// near the format's maximum with a narrow accumulation type: every
// intermediate is rounded to the accumulation type (sequentially, in row
// order, one rounding per step as in reduction_ops.cpp), and the algorithms
// are arranged so no intermediate can overflow:
//
// softmax_safe: m = max of the row; e_i = exp(x_i - m) (so e_i <= 1);
//   s = sum of e_i in order; y_i = e_i / s. A row holding NaN gives NaN; a row
//   of only -inf gives NaN (0/0, as the formula says); a row holding +inf is
//   taken as the limit: the +inf entries share the mass equally, the rest get
//   0.
// logsumexp: m + log(sum of exp(x_i - m)). NaN rows give NaN, rows of -inf
//   (and empty rows: log 0) give -inf, rows holding +inf give +inf.
// layernorm_safe: (x - mean) / sqrt(var + eps) * gamma + beta, with optional
//   gamma and beta (operands after x, each of the axis's size). The row is
//   first scaled by a power of two 2^-k so max|x| < 1 (exact), the mean is
//   taken, the deviations are scaled again by 2^-j so max|x - mean| < 1, and
//   the variance of those is taken (two passes). Squares and sums therefore
//   stay below n even at fp16 accumulation. var + eps is formed at a common
//   power-of-two scale 2^S chosen so its larger term lies in [1/4, 1), and the
//   result is (d / sqrt(t)) * 2^(k + j - S/2), so neither tiny nor huge rows
//   lose eps or overflow. The affine step is one fused multiply-add.
// rmsnorm_safe: x / sqrt(mean(x^2) + eps) * gamma, scaled the same way by
//   max|x|. An all-zero row gives zeros.
// In layernorm a constant row (every deviation zero) gives zeros even with
// eps = 0; a row holding NaN or inf gives NaN, as the formula does. eps must
// be finite and >= 0.
#include <algorithm>
#include <cmath>
#include <limits>

#include "graph/accumulate.h"
#include "graph/kernel_support.h"
#include "graph/op_families.h"
#include "graph/shape_rules.h"
#include "tessera/numerics/convert.h"
#include "tessera/numerics/elementary.h"
#include "tessera/support/error.h"

namespace tessera::graph {

namespace {

using ir::AttrMap;
using ir::KernelCall;
using ir::OpDef;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// One row along the axis: values gathered in order; results scattered back.
struct Rows {
  ReductionLayout layout;
  std::vector<double> values;
  std::int64_t axis = 0;

  Rows(const Tensor& x, const AttrMap& attrs) : axis(normalize_axis(attrs.get_int("axis"), x.rank())) {
    layout = reduction_layout(x.shape(), {axis});
    values = x.to_values();
  }
  std::vector<double> row(std::int64_t o) const {
    std::vector<double> r(static_cast<std::size_t>(layout.inner));
    for (std::int64_t i = 0; i < layout.inner; ++i) r[static_cast<std::size_t>(i)] = values[offset(o, i)];
    return r;
  }
  std::size_t offset(std::int64_t o, std::int64_t i) const {
    return static_cast<std::size_t>(layout.offsets[static_cast<std::size_t>(o * layout.inner + i)]);
  }
};

bool has_nan(const std::vector<double>& r) {
  return std::any_of(r.begin(), r.end(), [](double v) { return std::isnan(v); });
}

double row_max(const std::vector<double>& r) {
  double m = -kInf;
  for (double v : r) m = std::max(m, v);
  return m;
}

// Exponent e with max|r| = f * 2^e, f in [0.5, 1); 0 for an all-zero row.
int scale_exponent(const std::vector<double>& r) {
  double a = 0.0;
  for (double v : r) a = std::max(a, std::fabs(v));
  int e = 0;
  std::frexp(a, &e);
  return e;
}

// The canonical sum (of squares), then divided by the count.
double mean_of(const std::vector<double>& r, DType accum, bool squares) {
  const double acc = canonical_sum(static_cast<std::int64_t>(r.size()), accum, [&](double a, std::int64_t i) {
    const double v = r[static_cast<std::size_t>(i)];
    return squares ? fma_rounded(a, v, v, accum) : add_rounded(a, v, accum);
  });
  return round_to(acc / static_cast<double>(r.size()), accum);
}

// The denominator sqrt(ms * 2^(2K) + eps) as r * 2^shift with r in accum.
struct Denominator {
  double r;
  int shift;
};
Denominator denominator(double ms, int K, double eps, DType accum) {
  if (ms == 0.0 && eps == 0.0) return {0.0, 0};
  const int e1 = ms > 0.0 ? std::ilogb(ms) + 2 * K : std::numeric_limits<int>::min() / 2;
  const int e2 = eps > 0.0 ? std::ilogb(eps) : std::numeric_limits<int>::min() / 2;
  const int s = static_cast<int>(std::floor(std::max(e1, e2) / 2.0)) + 1;  // larger term lands in [1/4, 1)
  const double t = add_rounded(scale_rounded(ms, 2 * K - 2 * s, accum), scale_rounded(eps, -2 * s, accum), accum);
  return {round_to(std::sqrt(t), accum), K - s};
}

void softmax_row(std::vector<double>& r, DType accum) {
  if (r.empty()) return;
  const double m = row_max(r);
  if (has_nan(r) || m == -kInf) {
    std::fill(r.begin(), r.end(), kNaN);
    return;
  }
  if (m == kInf) {
    const auto k = static_cast<double>(std::count(r.begin(), r.end(), kInf));
    for (double& v : r) v = v == kInf ? round_to(1.0 / k, accum) : 0.0;
    return;
  }
  for (double& v : r) v = round_to(elementary::exp(add_rounded(v, -m, accum)), accum);
  const double s = canonical_sum(static_cast<std::int64_t>(r.size()), accum, [&](double a, std::int64_t i) {
    return add_rounded(a, r[static_cast<std::size_t>(i)], accum);
  });
  for (double& v : r) v = round_to(v / s, accum);
}

double logsumexp_row(const std::vector<double>& r, DType accum) {
  if (has_nan(r)) return kNaN;
  const double m = row_max(r);  // -inf for an empty row
  if (std::isinf(m)) return m;
  const double s = canonical_sum(static_cast<std::int64_t>(r.size()), accum, [&](double a, std::int64_t i) {
    const double v = r[static_cast<std::size_t>(i)];
    return add_rounded(a, round_to(elementary::exp(add_rounded(v, -m, accum)), accum), accum);
  });
  return add_rounded(m, round_to(elementary::log(s), accum), accum);
}

// Normalizes `r` in place; `center` selects layernorm (else rmsnorm).
void normalize_row(std::vector<double>& r, DType accum, double eps, bool center) {
  if (r.empty()) return;
  if (std::any_of(r.begin(), r.end(), [](double v) { return !std::isfinite(v); })) {
    std::fill(r.begin(), r.end(), kNaN);
    return;
  }
  const int k = scale_exponent(r);
  for (double& v : r) v = scale_rounded(v, -k, accum);
  int K = k;
  if (center) {
    const double mean = mean_of(r, accum, false);
    for (double& v : r) v = add_rounded(v, -mean, accum);
    const int j = scale_exponent(r);
    for (double& v : r) v = scale_rounded(v, -j, accum);
    K += j;
  }
  if (std::all_of(r.begin(), r.end(), [](double v) { return v == 0.0; })) return;  // zeros stay zeros
  const Denominator d = denominator(mean_of(r, accum, true), K, eps, accum);
  for (double& v : r) v = scale_rounded(round_to(v / d.r, accum), d.shift, accum);
}

void check_axis_param(const ir::Type& x, std::int64_t axis, const ir::Type& p, const std::string& op,
                      const char* what) {
  require_float(p, op, what);
  const Dim& d = x.shape[static_cast<std::size_t>(axis)];
  if (p.rank() != 1 || p.shape[0] != d) {
    raise(ErrorCode::ShapeMismatch, op + " " + what + " has shape " + shape_str(p.shape) + ", expected [" + d.str() +
                                        "] (the size of x's axis " + std::to_string(axis) + ")");
  }
}

void check_eps(double eps, const std::string& op) {
  if (!std::isfinite(eps) || eps < 0.0) {
    raise(ErrorCode::ArgumentInvalid, op + " attribute 'eps' must be finite and >= 0, got " + std::to_string(eps));
  }
}

void add_softmax(ir::Registry& r) {
  std::string op_name = "graph.softmax_safe";
  r.add(OpDef{
      .name = op_name,
      .summary = "Softmax along `axis`, max-subtracted so it never overflows.",
      .operands = {"x"},
      .attrs = {int_attr("axis", -1)},
      .infer =
          [op_name](std::span<const ir::Type> in, const AttrMap& attrs) {
            require_float(in[0], op_name, "operand");
            normalize_axis(attrs.get_int("axis"), in[0].rank());
            return std::vector<ir::Type>{in[0]};
          },
      .reference =
          [](const KernelCall& call) {
            Rows rows(call.inputs[0], call.attrs);
            std::vector<double> out(rows.values.size());
            const DType accum = call.result_types[0].policy.accum;
            for (std::int64_t o = 0; o < rows.layout.outer; ++o) {
              auto row = rows.row(o);
              softmax_row(row, accum);
              for (std::int64_t i = 0; i < rows.layout.inner; ++i)
                out[rows.offset(o, i)] = row[static_cast<std::size_t>(i)];
            }
            return std::vector<Tensor>{make_result(out, call.result_types[0])};
          },
  });
}

// The result type of an op on two float tensors of one type along `axis`
// (softmax_linear, norm_linear): that type.
ir::Type row_pair_type(std::span<const ir::Type> in, const AttrMap& attrs, const std::string& op_name,
                       const char* first, const char* second) {
  require_float(in[0], op_name, std::string("operand ") + first);
  require_float(in[1], op_name, std::string("operand ") + second);
  if (!(in[0] == in[1])) {
    raise(ErrorCode::ShapeMismatch, op_name + " needs " + first + " and " + second + " of one type, got " +
                                        ir::print_type(in[0]) + " and " + ir::print_type(in[1]));
  }
  normalize_axis(attrs.get_int("axis"), in[0].rank());
  return in[0];
}

// softmax's Jacobian at y applied to t (it is symmetric): y (t - sum(t y))
// along `axis`, each step rounded once to the accumulation type, the sum in
// the canonical order: with fp32 storage the bits of mul, sum, sub and mul
// one by one. What autodiff emits for softmax_safe's JVP and VJP, so that a
// compiled gradient is one row kernel.
void add_softmax_linear(ir::Registry& r) {
  std::string op_name = "graph.softmax_linear";
  r.add(OpDef{
      .name = op_name,
      .summary = "y * (t - sum(t * y)) along `axis`: softmax's Jacobian at its result y applied to t.",
      .operands = {"y", "t"},
      .attrs = {int_attr("axis", -1)},
      .infer =
          [op_name](std::span<const ir::Type> in, const AttrMap& attrs) {
            return std::vector<ir::Type>{row_pair_type(in, attrs, op_name, "y", "t")};
          },
      .reference =
          [](const KernelCall& call) {
            Rows ys(call.inputs[0], call.attrs), ts(call.inputs[1], call.attrs);
            std::vector<double> out(ys.values.size());
            const DType accum = call.result_types[0].policy.accum;
            for (std::int64_t o = 0; o < ys.layout.outer; ++o) {
              const auto y = ys.row(o), t = ts.row(o);
              const double s = canonical_sum(ys.layout.inner, accum, [&](double a, std::int64_t i) {
                const auto k = static_cast<std::size_t>(i);
                return add_rounded(a, round_to(y[k] * t[k], accum), accum);
              });
              for (std::int64_t i = 0; i < ys.layout.inner; ++i) {
                const auto k = static_cast<std::size_t>(i);
                out[ys.offset(o, i)] = round_to(y[k] * add_rounded(t[k], -s, accum), accum);
              }
            }
            return std::vector<Tensor>{make_result(out, call.result_types[0])};
          },
  });
}

// layernorm's (center) or rmsnorm's Jacobian at x applied to g, with the
// plain (not overflow-scaled) statistics autodiff uses:
//   xc = x - mean(x) (center) or x, r = 1/sqrt(mean(xc xc) + eps), xhat = xc r,
//   out = r (gc - xhat mean(g xhat)), gc = g - mean(g) (center) or g.
// Each step rounds once at the accumulation type (eps first to x's
// storage, as a constant of x's policy), sums in the canonical order: with
// fp32 storage the bits of the primitive ops one by one. What autodiff emits
// for layernorm_safe's and rmsnorm_safe's JVP and VJP, so that their
// gradient is one row kernel.
void add_norm_linear(ir::Registry& r) {
  std::string op_name = "graph.norm_linear";
  r.add(OpDef{
      .name = op_name,
      .summary = "r (gc - xhat mean(g xhat)) along `axis`: layernorm's (center) or rmsnorm's Jacobian at x applied to g.",
      .operands = {"x", "g"},
      .attrs = {int_attr("axis", -1), real_attr("eps", 1e-5), bool_attr("center", true)},
      .infer =
          [op_name](std::span<const ir::Type> in, const AttrMap& attrs) {
            check_eps(attrs.get_real("eps"), op_name);
            return std::vector<ir::Type>{row_pair_type(in, attrs, op_name, "x", "g")};
          },
      .reference =
          [](const KernelCall& call) {
            Rows xs(call.inputs[0], call.attrs), gs(call.inputs[1], call.attrs);
            std::vector<double> out(xs.values.size());
            const DType accum = call.result_types[0].policy.accum;
            const DType storage = call.inputs[0].dtype();
            const bool center = call.attrs.get_bool("center");
            const double eps = decode_value(encode_value(call.attrs.get_real("eps"), storage), storage);
            const std::int64_t n = xs.layout.inner;
            auto mean = [&](auto term) {
              const double s = canonical_sum(n, accum, [&](double a, std::int64_t i) { return add_rounded(a, term(i), accum); });
              return round_to(s / static_cast<double>(n), accum);
            };
            for (std::int64_t o = 0; o < xs.layout.outer; ++o) {
              const auto x = xs.row(o), g = gs.row(o);
              auto at = [](const std::vector<double>& v, std::int64_t i) { return v[static_cast<std::size_t>(i)]; };
              const double m = center ? mean([&](std::int64_t i) { return at(x, i); }) : 0.0;
              auto xc = [&](std::int64_t i) { return center ? round_to(at(x, i) - m, accum) : at(x, i); };
              const double var = mean([&](std::int64_t i) { return round_to(xc(i) * xc(i), accum); });
              const double rr = round_to(1.0 / std::sqrt(round_to(var + eps, accum)), accum);
              auto xhat = [&](std::int64_t i) { return round_to(xc(i) * rr, accum); };
              const double gm = center ? mean([&](std::int64_t i) { return at(g, i); }) : 0.0;
              const double q = mean([&](std::int64_t i) { return round_to(at(g, i) * xhat(i), accum); });
              for (std::int64_t i = 0; i < n; ++i) {
                const double gc = center ? round_to(at(g, i) - gm, accum) : at(g, i);
                const double w = round_to(gc - round_to(xhat(i) * q, accum), accum);
                out[xs.offset(o, i)] = round_to(rr * w, accum);
              }
            }
            return std::vector<Tensor>{make_result(out, call.result_types[0])};
          },
  });
}

void add_logsumexp(ir::Registry& r) {
  std::string op_name = "graph.logsumexp";
  r.add(OpDef{
      .name = op_name,
      .summary = "log(sum(exp(x))) along `axis`, computed as m + log(sum(exp(x - m))).",
      .operands = {"x"},
      .attrs = {int_attr("axis", -1), bool_attr("keepdims", false)},
      .infer =
          [op_name](std::span<const ir::Type> in, const AttrMap& attrs) {
            require_float(in[0], op_name, "operand");
            auto axis = static_cast<std::size_t>(normalize_axis(attrs.get_int("axis"), in[0].rank()));
            Shape out = in[0].shape;
            if (attrs.get_bool("keepdims")) {
              out[axis] = Dim::fixed(1);
            } else {
              out.erase(out.begin() + static_cast<std::ptrdiff_t>(axis));
            }
            return std::vector<ir::Type>{ir::Type::tensor(out, in[0].policy)};
          },
      .reference =
          [](const KernelCall& call) {
            Rows rows(call.inputs[0], call.attrs);
            std::vector<double> out(static_cast<std::size_t>(rows.layout.outer));
            const DType accum = call.result_types[0].policy.accum;
            for (std::int64_t o = 0; o < rows.layout.outer; ++o) {
              out[static_cast<std::size_t>(o)] = logsumexp_row(rows.row(o), accum);
            }
            return std::vector<Tensor>{make_result(out, call.result_types[0])};
          },
  });
}

void add_norm(ir::Registry& r, const std::string& op_name, bool center, double default_eps) {
  const std::size_t max_params = center ? 2 : 1;
  r.add(OpDef{
      .name = op_name,
      .summary = center ? "Layer normalization along `axis` with optional gamma and beta, overflow-free."
                        : "RMS normalization along `axis` with optional gamma, overflow-free.",
      .operands = {"x", "params"},
      .variadic = true,
      .attrs = {int_attr("axis", -1), real_attr("eps", default_eps)},
      .infer =
          [op_name, center, max_params](std::span<const ir::Type> in, const AttrMap& attrs) {
            require_float(in[0], op_name, "operand x");
            auto axis = normalize_axis(attrs.get_int("axis"), in[0].rank());
            check_eps(attrs.get_real("eps"), op_name);
            if (in.size() - 1 > max_params) {
              raise(ErrorCode::ArgumentInvalid, op_name + " takes x and at most " + std::to_string(max_params) +
                                                    (center ? " parameters (gamma, beta)" : " parameter (gamma)") +
                                                    ", got " + std::to_string(in.size() - 1));
            }
            for (std::size_t i = 1; i < in.size(); ++i) {
              check_axis_param(in[0], axis, in[i], op_name, i == 1 ? "gamma" : "beta");
            }
            return std::vector<ir::Type>{in[0]};
          },
      .reference =
          [center](const KernelCall& call) {
            Rows rows(call.inputs[0], call.attrs);
            const double eps = call.attrs.get_real("eps");
            const DType accum = call.result_types[0].policy.accum;
            std::vector<double> gamma, beta;
            if (call.inputs.size() > 1) gamma = call.inputs[1].to_values();
            if (call.inputs.size() > 2) beta = call.inputs[2].to_values();
            std::vector<double> out(rows.values.size());
            for (std::int64_t o = 0; o < rows.layout.outer; ++o) {
              auto row = rows.row(o);
              normalize_row(row, accum, eps, center);
              for (std::int64_t i = 0; i < rows.layout.inner; ++i) {
                const auto u = static_cast<std::size_t>(i);
                double y = row[u];
                if (!beta.empty()) {
                  y = fma_rounded(beta[u], y, gamma[u], accum);
                } else if (!gamma.empty()) {
                  y = round_to(y * gamma[u], accum);
                }
                out[rows.offset(o, i)] = y;
              }
            }
            return std::vector<Tensor>{make_result(out, call.result_types[0])};
          },
  });
}

}  // namespace

void register_normalization_ops(ir::Registry& r) {
  add_softmax(r);
  add_softmax_linear(r);
  add_norm_linear(r);
  add_logsumexp(r);
  add_norm(r, "graph.layernorm_safe", true, 1e-5);
  add_norm(r, "graph.rmsnorm_safe", false, 1e-6);
}

}  // namespace tessera::graph
