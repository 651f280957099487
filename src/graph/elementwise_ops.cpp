// Graph IR elementwise ops: arithmetic, math, activations, comparisons, where.
//
// Operands broadcast numpy-style (shape_rules.h) and promote by the rules in
// tessera/graph/promotion.h. Each result element is computed in double from
// the decoded operands, rounded once to the accumulation type, then encoded
// to storage (kernel_support.h). For + - * / and sqrt that equals the
// correctly rounded operation at the accumulation type; transcendental
// functions are thereby at least as accurate as the accumulation type's own.
#include <cmath>
#include <functional>
#include <numbers>

#include "graph/complex_kernels.h"
#include "graph/kernel_support.h"
#include "graph/op_families.h"
#include "graph/shape_rules.h"
#include "tessera/graph/promotion.h"
#include "tessera/numerics/elementary.h"
#include "tessera/numerics/trigonometric.h"
#include "tessera/support/error.h"

namespace tessera::graph {

namespace {

using ir::AttrMap;
using ir::KernelCall;
using ir::OpDef;

enum class Needs { any, floating };

std::vector<Tensor> run_unary(const KernelCall& call, const std::function<double(double)>& f) {
  auto x = call.inputs[0].to_values();
  for (double& v : x) v = f(v);
  return {make_result(x, call.result_types[0])};
}

std::vector<Tensor> run_nary(const KernelCall& call, const std::function<double(std::span<const double>)>& f) {
  const auto out_sizes = sizes_of(call.result_types[0]);
  std::int64_t n = numel_of(out_sizes);
  std::vector<std::vector<double>> values;
  std::vector<std::vector<std::int64_t>> offsets;
  for (const Tensor& t : call.inputs) {
    values.push_back(t.to_values());
    offsets.push_back(broadcast_offsets(t.shape(), out_sizes));
  }
  std::vector<double> out(static_cast<std::size_t>(n));
  std::vector<double> args(call.inputs.size());
  for (std::int64_t e = 0; e < n; ++e) {
    for (std::size_t k = 0; k < args.size(); ++k) {
      args[k] = values[k][static_cast<std::size_t>(offsets[k][static_cast<std::size_t>(e)])];
    }
    out[static_cast<std::size_t>(e)] = f(args);
  }
  return {make_result(out, call.result_types[0])};
}

void add_unary(ir::Registry& r, std::string name, std::string summary, Needs needs, std::function<double(double)> f,
               std::vector<ir::AttrSpec> attrs = {}) {
  std::string op_name = "graph." + name;
  r.add(OpDef{
      .name = op_name,
      .summary = std::move(summary),
      .operands = {"x"},
      .attrs = std::move(attrs),
      .infer =
          [op_name, needs](std::span<const ir::Type> in, const AttrMap&) {
            reject_complex(in[0], op_name);
            if (is_complex(in[0].dtype())) {
              // |z| is real, at the part dtype (complex_kernels.h).
              if (op_name != "graph.abs") return std::vector<ir::Type>{in[0]};
              NumericsPolicy p = in[0].policy;
              p.storage = complex_part(p.storage);
              return std::vector<ir::Type>{ir::Type::tensor(in[0].shape, p)};
            }
            if (needs == Needs::floating) require_float(in[0], op_name, "operand");
            reject_scale_format(in[0].dtype());
            return std::vector<ir::Type>{in[0]};
          },
      .reference =
          [f, op_name](const KernelCall& call) {
            if (is_complex(call.inputs[0].dtype())) return run_complex_elementwise(op_name, call);
            return run_unary(call, f);
          },
  });
}

void add_binary(ir::Registry& r, std::string name, std::string summary, Needs needs,
                std::function<double(double, double)> f) {
  std::string op_name = "graph." + name;
  r.add(OpDef{
      .name = op_name,
      .summary = std::move(summary),
      .operands = {"lhs", "rhs"},
      .infer =
          [op_name, needs](std::span<const ir::Type> in, const AttrMap&) {
            NumericsPolicy p = promote_policies(in[0].policy, in[1].policy);
            ir::Type out = ir::Type::tensor(broadcast_shapes(in[0].shape, in[1].shape), p);
            reject_complex(out, op_name);
            if (needs == Needs::floating && !is_complex(p.storage)) require_float(out, op_name, "operand");
            return std::vector<ir::Type>{out};
          },
      .reference =
          [f, op_name](const KernelCall& call) {
            if (is_complex(call.result_types[0].dtype())) return run_complex_elementwise(op_name, call);
            return run_nary(call, [&](std::span<const double> a) { return f(a[0], a[1]); });
          },
  });
}

void add_comparison(ir::Registry& r, std::string name, std::string symbol, std::function<bool(double, double)> f) {
  std::string op_name = "graph." + name;
  r.add(OpDef{
      .name = op_name,
      .summary = "Elementwise lhs " + symbol + " rhs as bool (NaN compares unequal to everything).",
      .operands = {"lhs", "rhs"},
      .infer =
          [op_name](std::span<const ir::Type> in, const AttrMap&) {
            reject_complex(in[0], op_name);  // complex numbers have no order (and eq/ne are not built for them)
            reject_complex(in[1], op_name);
            promote_policies(in[0].policy, in[1].policy);  // rejects e8m0 and mixed modifiers
            return std::vector<ir::Type>{
                ir::Type::tensor(broadcast_shapes(in[0].shape, in[1].shape), default_policy(DType::bool_))};
          },
      .reference =
          [f](const KernelCall& call) {
            return run_nary(call, [&](std::span<const double> a) { return f(a[0], a[1]) ? 1.0 : 0.0; });
          },
  });
}

double nan_max(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  return a > b ? a : b;
}
double nan_min(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  return a < b ? a : b;
}

double sigmoid(double x) {
  // Split by sign so exp never overflows.
  if (x >= 0) return 1.0 / (1.0 + elementary::exp(-x));
  double e = elementary::exp(x);
  return e / (1.0 + e);
}

double gelu_exact(double x) {
  return 0.5 * x * (1.0 + elementary::erf(x / std::numbers::sqrt2));
}
double gelu_tanh(double x) {
  const double c = std::sqrt(2.0 / std::numbers::pi);
  return 0.5 * x * (1.0 + elementary::tanh(c * (x + 0.044715 * x * x * x)));
}

}  // namespace

void register_elementwise_ops(ir::Registry& r) {
  add_binary(r, "add", "Elementwise lhs + rhs.", Needs::any, [](double a, double b) { return a + b; });
  add_binary(r, "sub", "Elementwise lhs - rhs.", Needs::any, [](double a, double b) { return a - b; });
  add_binary(r, "mul", "Elementwise lhs * rhs.", Needs::any, [](double a, double b) { return a * b; });
  add_binary(r, "div", "Elementwise lhs / rhs (floating point only).", Needs::floating,
             [](double a, double b) { return a / b; });
  add_binary(r, "pow", "Elementwise lhs ** rhs (floating point only).", Needs::floating,
             [](double a, double b) { return std::pow(a, b); });
  add_binary(r, "maximum", "Elementwise maximum; NaN if either is NaN.", Needs::any, nan_max);
  add_binary(r, "minimum", "Elementwise minimum; NaN if either is NaN.", Needs::any, nan_min);

  add_comparison(r, "eq", "==", [](double a, double b) { return a == b; });
  add_comparison(r, "ne", "!=", [](double a, double b) { return a != b; });
  add_comparison(r, "lt", "<", [](double a, double b) { return a < b; });
  add_comparison(r, "le", "<=", [](double a, double b) { return a <= b; });
  add_comparison(r, "gt", ">", [](double a, double b) { return a > b; });
  add_comparison(r, "ge", ">=", [](double a, double b) { return a >= b; });

  add_unary(r, "neg", "Elementwise -x.", Needs::any, [](double x) { return -x; });
  add_unary(r, "abs", "Elementwise |x|.", Needs::any, [](double x) { return std::fabs(x); });
  add_unary(r, "exp", "Elementwise e^x.", Needs::floating, [](double x) { return elementary::exp(x); });
  add_unary(r, "log", "Elementwise natural logarithm.", Needs::floating, [](double x) { return elementary::log(x); });
  add_unary(r, "sqrt", "Elementwise square root.", Needs::floating, [](double x) { return std::sqrt(x); });
  add_unary(r, "rsqrt", "Elementwise 1/sqrt(x).", Needs::floating, [](double x) { return 1.0 / std::sqrt(x); });
  add_unary(r, "tanh", "Elementwise hyperbolic tangent.", Needs::floating, [](double x) { return elementary::tanh(x); });
  add_unary(r, "sin", "Elementwise sine (radians).", Needs::floating, [](double x) { return elementary::sin(x); });
  add_unary(r, "cos", "Elementwise cosine (radians).", Needs::floating, [](double x) { return elementary::cos(x); });
  add_unary(r, "sigmoid", "Elementwise 1/(1+e^-x), overflow-free.", Needs::floating, sigmoid);
  add_unary(r, "relu", "Elementwise max(x, 0); NaN stays NaN.", Needs::any,
            [](double x) { return std::isnan(x) ? x : (x > 0 ? x : 0.0); });
  add_unary(r, "silu", "Elementwise x * sigmoid(x).", Needs::floating, [](double x) { return x * sigmoid(x); });

  std::string gelu_name = "graph.gelu";
  r.add(OpDef{
      .name = gelu_name,
      .summary = "Elementwise GELU: x*Phi(x) (approximate = \"none\") or its tanh form (\"tanh\").",
      .operands = {"x"},
      .attrs = {string_attr("approximate", std::string("none"))},
      .infer =
          [gelu_name](std::span<const ir::Type> in, const AttrMap& attrs) {
            require_float(in[0], gelu_name, "operand");
            const auto& mode = attrs.get_string("approximate");
            if (mode != "none" && mode != "tanh") {
              raise(ErrorCode::ArgumentInvalid, "approximate must be \"none\" or \"tanh\", got \"" + mode + "\"");
            }
            return std::vector<ir::Type>{in[0]};
          },
      .reference =
          [](const KernelCall& call) {
            bool tanh_form = call.attrs.get_string("approximate") == "tanh";
            return run_unary(call, tanh_form ? gelu_tanh : gelu_exact);
          },
  });

  r.add(OpDef{
      .name = "graph.where",
      .summary = "Elementwise cond ? lhs : rhs; cond is bool; all three broadcast.",
      .operands = {"cond", "lhs", "rhs"},
      .infer =
          [](std::span<const ir::Type> in, const AttrMap&) {
            if (in[0].dtype() != DType::bool_) {
              raise(ErrorCode::DtypeUnsupported,
                    "condition must be bool, got " + std::string(name(in[0].dtype())) + "; compare first (graph.ne)");
            }
            NumericsPolicy p = promote_policies(in[1].policy, in[2].policy);
            reject_complex(ir::Type::tensor({}, p), "graph.where");
            Shape s = broadcast_shapes(broadcast_shapes(in[0].shape, in[1].shape), in[2].shape);
            return std::vector<ir::Type>{ir::Type::tensor(s, p)};
          },
      .reference =
          [](const KernelCall& call) {
            return run_nary(call, [](std::span<const double> a) { return a[0] != 0.0 ? a[1] : a[2]; });
          },
  });
}

}  // namespace tessera::graph
