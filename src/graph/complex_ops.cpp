// Graph IR complex ops: graph.real, graph.imag, graph.conj, graph.complex,
// and the complex reference kernels of the elementwise ops that take
// complex operands (add, sub, mul, div, neg, exp, abs; complex_kernels.h).
//
//   real(z), imag(z)   complex64 -> fp32, complex128 -> fp64 (a real operand:
//                      real is the identity, imag its zeros)
//   conj(z)            same dtype (the identity on real operands)
//   complex(re, im)    two floats, broadcast and promoted together; the part
//                      dtype is fp64 if the promoted float is fp64, else fp32
//
// Arithmetic is in double, part by part, by the formulas below (the
// compiled kernels compute the same ones: schedule/templates/complex_parts.cpp);
// each part of the result is then rounded once to the accumulation type and
// stored:
//   a + b, a - b, -a   part by part
//   a * b              (ar br - ai bi) + (ar bi + ai br) i, as numpy does (no
//                      recovery of infinities from NaN parts, unlike C's Annex G)
//   a / b              Smith's algorithm: with |br| >= |bi|, r = bi / br,
//                      d = br + bi r, ((ar + ai r) / d) + ((ai - ar r) / d) i;
//                      otherwise r = br / bi, d = bi + br r,
//                      ((ar r + ai) / d) + ((ai r - ar) / d) i. A zero divisor
//                      gives NaN parts.
//   |a|                with x = |ar|, y = |ai|, m the larger, s the smaller:
//                      m sqrt(1 + (s/m)^2); +inf if x or y is infinite (also
//                      with a NaN), 0 if m is 0, NaN otherwise for a NaN part.
//                      IEEE operations only, so a GPU computes the same bits
//                      (the C library's hypot differs in the last bit)
//   exp                e^ar cos(ai) + (e^ar sin(ai)) i with Tessera's own exp,
//                      sin and cos (tessera/numerics/elementary.h,
//                      trigonometric.h), and an imaginary part of +-0 kept
//                      as it is (so exp(inf + 0i) = inf + 0i). Unlike C's
//                      Annex G, a non-finite ai gives NaN parts even when
//                      ar = -inf (C: +-0 +-0i)
#include <cmath>
#include <limits>

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

NumericsPolicy part_policy(const NumericsPolicy& p) {
  NumericsPolicy out = p;
  out.storage = complex_part(p.storage);
  out.accum = complex_part(p.accum);
  return out;
}

// Each output element from its operands' broadcast elements.
template <class F>
std::vector<Complex> map_complex(const KernelCall& call, F f) {
  const auto out_sizes = sizes_of(call.result_types[0]);
  const std::int64_t n = numel_of(out_sizes);
  std::vector<std::vector<Complex>> values;
  std::vector<std::vector<std::int64_t>> offsets;
  for (const Tensor& t : call.inputs) {
    values.push_back(t.to_complex_values());
    offsets.push_back(broadcast_offsets(t.shape(), out_sizes));
  }
  std::vector<Complex> out(static_cast<std::size_t>(n));
  std::vector<Complex> args(call.inputs.size());
  for (std::int64_t e = 0; e < n; ++e) {
    for (std::size_t k = 0; k < args.size(); ++k) {
      args[k] = values[k][static_cast<std::size_t>(offsets[k][static_cast<std::size_t>(e)])];
    }
    out[static_cast<std::size_t>(e)] = f(args);
  }
  return out;
}

std::vector<Tensor> real_result(const std::vector<Complex>& z, const KernelCall& call, bool imaginary) {
  std::vector<double> parts(z.size());
  for (std::size_t i = 0; i < z.size(); ++i) parts[i] = imaginary ? z[i].imag() : z[i].real();
  return {make_result(parts, call.result_types[0])};
}

void add_part(ir::Registry& r, const std::string& op, bool imaginary) {
  r.add(OpDef{
      .name = op,
      .summary = imaginary ? "Imaginary part of a complex tensor (fp32 for complex64, fp64 for complex128)."
                           : "Real part of a complex tensor (fp32 for complex64, fp64 for complex128).",
      .operands = {"x"},
      .infer =
          [op](std::span<const ir::Type> in, const AttrMap&) {
            if (!is_complex(in[0].dtype())) require_float(in[0], op, "operand");
            return std::vector<ir::Type>{ir::Type::tensor(in[0].shape, part_policy(in[0].policy))};
          },
      .reference =
          [imaginary](const KernelCall& call) {
            return real_result(map_complex(call, [](std::span<const Complex> a) { return a[0]; }), call, imaginary);
          },
  });
}

}  // namespace

Complex complex_mul(Complex a, Complex b) {
  const double ar = a.real(), ai = a.imag(), br = b.real(), bi = b.imag();
  return {ar * br - ai * bi, ar * bi + ai * br};
}

Complex complex_div(Complex a, Complex b) {
  const double ar = a.real(), ai = a.imag(), br = b.real(), bi = b.imag();
  if (std::abs(br) >= std::abs(bi)) {
    const double r = bi / br, d = br + bi * r;
    return {(ar + ai * r) / d, (ai - ar * r) / d};
  }
  const double r = br / bi, d = bi + br * r;
  return {(ar * r + ai) / d, (ai * r - ar) / d};
}

double complex_abs(Complex a) {
  const double x = std::abs(a.real()), y = std::abs(a.imag());
  const bool x_larger = x >= y;  // false with a NaN: then m = y, s = x
  const double m = x_larger ? x : y, s = x_larger ? y : x;
  const double r = s / m;
  const double h = m * std::sqrt(1.0 + r * r);
  const double largest = std::numeric_limits<double>::max();
  if (x > largest || y > largest) return x > largest ? x : y;  // +inf
  return m == 0.0 ? m : h;
}

Complex complex_exp(Complex a) {
  const double e = elementary::exp(a.real());
  const elementary::SinCos sc = elementary::sincos(a.imag());
  return {e * sc.cos, a.imag() == 0.0 ? a.imag() : e * sc.sin};
}

Tensor make_complex_result(std::span<const Complex> values, const ir::Type& type) {
  const DType accum = type.policy.accum;
  std::vector<Complex> rounded(values.begin(), values.end());
  if (accum != DType::fp64 && is_float(accum)) {
    for (Complex& v : rounded) v = Complex(round_to(v.real(), accum), round_to(v.imag(), accum));
  }
  return Tensor::from_complex_values(rounded, sizes_of(type), type.policy);
}

bool takes_complex(std::string_view op) {
  for (std::string_view n : {"graph.add", "graph.sub", "graph.mul", "graph.div", "graph.neg", "graph.exp", "graph.abs"}) {
    if (n == op) return true;
  }
  return false;
}

void reject_complex(const ir::Type& t, std::string_view op) {
  if (is_complex(t.dtype()) && !takes_complex(op)) {
    raise(ErrorCode::DtypeUnsupported, std::string(op) + " takes real operands, got " + std::string(name(t.dtype())) +
                                           "; complex tensors take add, sub, mul, div, neg, exp, abs, real, imag, "
                                           "conj and complex");
  }
}

std::vector<Tensor> run_complex_elementwise(std::string_view op, const KernelCall& call) {
  const ir::Type& out = call.result_types[0];
  if (op == "graph.abs") {
    const auto z = map_complex(call, [](std::span<const Complex> a) { return Complex(complex_abs(a[0]), 0.0); });
    return real_result(z, call, false);
  }
  std::vector<Complex> z;
  if (op == "graph.add") z = map_complex(call, [](std::span<const Complex> a) { return a[0] + a[1]; });
  else if (op == "graph.sub") z = map_complex(call, [](std::span<const Complex> a) { return a[0] - a[1]; });
  else if (op == "graph.mul") z = map_complex(call, [](std::span<const Complex> a) { return complex_mul(a[0], a[1]); });
  else if (op == "graph.div") z = map_complex(call, [](std::span<const Complex> a) { return complex_div(a[0], a[1]); });
  else if (op == "graph.neg") z = map_complex(call, [](std::span<const Complex> a) { return -a[0]; });
  else if (op == "graph.exp") z = map_complex(call, [](std::span<const Complex> a) { return complex_exp(a[0]); });
  else raise(ErrorCode::Internal, std::string(op) + " has no complex reference kernel");
  return {make_complex_result(z, out)};
}

void register_complex_ops(ir::Registry& r) {
  add_part(r, "graph.real", false);
  add_part(r, "graph.imag", true);
  r.add(OpDef{
      .name = "graph.conj",
      .summary = "Complex conjugate (the identity on real operands).",
      .operands = {"x"},
      .infer =
          [](std::span<const ir::Type> in, const AttrMap&) {
            if (!is_complex(in[0].dtype())) require_float(in[0], "graph.conj", "operand");
            return std::vector<ir::Type>{in[0]};
          },
      .reference =
          [](const KernelCall& call) {
            if (!is_complex(call.inputs[0].dtype())) return std::vector<Tensor>{call.inputs[0].contiguous()};
            const auto z = map_complex(call, [](std::span<const Complex> a) { return std::conj(a[0]); });
            return std::vector<Tensor>{make_complex_result(z, call.result_types[0])};
          },
  });
  r.add(OpDef{
      .name = "graph.complex",
      .summary = "re + i*im from two real tensors (broadcast); complex128 if they promote to fp64, else complex64.",
      .operands = {"re", "im"},
      .infer =
          [](std::span<const ir::Type> in, const AttrMap&) {
            for (std::size_t k = 0; k < 2; ++k) {
              if (is_complex(in[k].dtype())) {
                raise(ErrorCode::DtypeUnsupported, std::string("graph.complex takes real parts, but ") +
                                                       (k ? "im" : "re") + " is " + std::string(name(in[k].dtype())));
              }
              require_float(in[k], "graph.complex", k ? "im" : "re");
            }
            const NumericsPolicy p = promote_policies(in[0].policy, in[1].policy);
            const NumericsPolicy out = default_policy(complex_of(p.storage == DType::fp64 ? DType::fp64 : DType::fp32));
            return std::vector<ir::Type>{ir::Type::tensor(broadcast_shapes(in[0].shape, in[1].shape), out)};
          },
      .reference =
          [](const KernelCall& call) {
            const auto z = map_complex(call, [](std::span<const Complex> a) { return Complex(a[0].real(), a[1].real()); });
            return std::vector<Tensor>{make_complex_result(z, call.result_types[0])};
          },
  });
}

}  // namespace tessera::graph
