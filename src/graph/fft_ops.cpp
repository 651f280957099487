// Graph IR FFT ops: graph.fft and graph.fft_resize (docs/design/0016-complex-and-fft.md).
//
//   graph.fft(x) {axis, n, inverse, kind, norm, hermitian_weights}
//     kind "c2c": x complex (or a real float, read with imaginary part 0),
//                 x.shape[axis] == n; result complex, same shape
//     kind "r2c": x a real float, x.shape[axis] == n; result complex with
//                 n/2 + 1 bins on the axis (the non-negative frequencies)
//     kind "c2r": x complex with n/2 + 1 bins on the axis, read as the half
//                 of a Hermitian spectrum of length n; result real (the
//                 part dtype), n on the axis. The imaginary parts of bin 0
//                 and (n even) bin n/2 do not reach the result, as in numpy.
//     inverse:    exp(+2 pi i jk / n) instead of exp(-2 pi i jk / n)
//     norm:       "backward" (1/n on inverse transforms), "ortho"
//                 (1/sqrt(n) both ways), "forward" (1/n on forward ones)
//     hermitian_weights (r2c only): bins 1 .. ceil(n/2) - 1 doubled, the
//                 weighting of the transpose of a c2r transform (its VJP)
//
//   graph.fft_resize(x) {axis, length}: x cropped or zero-padded at the end
//     of the axis to `length` (numpy's n argument); its own transpose.
//
//   graph.fft_passes(x) {axis, n, inverse, norm, first, last}: passes
//     [first, last) of the c2c transform of a Stockham length n along the
//     axis, x holding each line's array after pass first - 1 (the line
//     itself for first = 0); the normalization applies when `last` is the
//     final pass. x complex whose parts are its accumulation type, so the
//     stored arrays are exact; result the same type. Schedule IR splits a
//     line too long for a GPU's shared memory into two of these
//     (schedule/passes/split_long_ffts.cpp), which compute graph.fft's bits.
//
// Results: a complex operand's policy is kept (its accumulation type is that
// of each part); a real operand gives complex128 for fp64 and complex64
// otherwise. Each line along the axis is one transform of the fixed
// algorithm of fft_plan.h in the part type (fp32 for complex64, fp64 for
// complex128), so a line's result does not depend on the other lines.
#include <cmath>

#include "graph/complex_kernels.h"
#include "graph/fft_plan.h"
#include "graph/kernel_support.h"
#include "graph/op_families.h"
#include "graph/shape_rules.h"
#include "tessera/support/error.h"

namespace tessera::graph {

namespace {

using ir::AttrMap;
using ir::KernelCall;
using ir::OpDef;

const std::string kOp = "graph.fft";

NumericsPolicy complex_policy_of(const NumericsPolicy& p) {
  if (is_complex(p.storage)) return p;
  return default_policy(complex_of(p.storage == DType::fp64 ? DType::fp64 : DType::fp32));
}

void require_real_float(const ir::Type& t, const std::string& what) {
  if (is_complex(t.dtype())) {
    raise(ErrorCode::DtypeUnsupported, what + " takes a real input, got " + std::string(name(t.dtype())) +
                                           "; use fft for complex input");
  }
  require_float(t, what, "input");
}

std::int64_t fixed_dim(const ir::Type& t, std::int64_t axis, const std::string& what) {
  const ir::Dim& d = t.shape[static_cast<std::size_t>(axis)];
  if (d.is_symbolic()) {
    raise(ErrorCode::ShapeMismatch, what + ": the transformed axis has the symbolic size " + d.str() +
                                        "; FFT lengths must be static");
  }
  return d.size;
}

std::vector<ir::Type> infer_fft(std::span<const ir::Type> in, const AttrMap& attrs) {
  const ir::Type& x = in[0];
  const std::string& kind = attrs.get_string("kind");
  const std::string what = kOp + " (" + kind + ")";
  if (x.rank() == 0) raise(ErrorCode::ShapeMismatch, what + " needs an input of rank >= 1, got a scalar");
  const std::int64_t axis = normalize_axis(attrs.get_int("axis"), x.rank());
  const std::int64_t n = attrs.get_int("n");
  if (n < 1) raise(ErrorCode::ArgumentInvalid, what + ": the transform length n must be >= 1, got " + std::to_string(n));
  fft::norm_factor(attrs.get_string("norm"), n, false);  // validates the name
  if (attrs.get_bool("hermitian_weights") && kind != "r2c") {
    raise(ErrorCode::ArgumentInvalid, what + ": hermitian_weights applies to r2c transforms only");
  }
  const std::int64_t len = fixed_dim(x, axis, what);
  ir::Shape shape = x.shape;
  NumericsPolicy p;
  std::int64_t want = n;
  std::int64_t out_len = n;
  if (kind == "c2c") {
    if (!is_complex(x.dtype())) require_float(x, what, "input");
    p = complex_policy_of(x.policy);
  } else if (kind == "r2c") {
    require_real_float(x, what);
    p = complex_policy_of(x.policy);
    out_len = n / 2 + 1;
  } else if (kind == "c2r") {
    if (!is_complex(x.dtype())) {
      raise(ErrorCode::DtypeUnsupported, what + " takes a complex input (the half spectrum), got " +
                                             std::string(name(x.dtype())) + "; cast it to complex64 or complex128");
    }
    p = x.policy;
    p.storage = complex_part(p.storage);
    p.accum = complex_part(p.accum);
    want = n / 2 + 1;
  } else {
    raise(ErrorCode::ArgumentInvalid, kOp + ": kind must be \"c2c\", \"r2c\" or \"c2r\", got \"" + kind + "\"");
  }
  if (len != want) {
    raise(ErrorCode::ShapeMismatch, what + ": axis " + std::to_string(axis) + " has length " + std::to_string(len) +
                                        " but a transform of length " + std::to_string(n) + " reads " +
                                        std::to_string(want) + " (resize it with graph.fft_resize first)");
  }
  shape[static_cast<std::size_t>(axis)] = ir::Dim::fixed(out_len);
  return {ir::Type::tensor(shape, p)};
}

// The lines of a row-major tensor along `axis`: line (o, i) starts at
// o * len * inner + i and steps by inner.
struct Lines {
  std::int64_t outer = 1, inner = 1;
};
Lines lines_of(const std::vector<std::int64_t>& shape, std::int64_t axis) {
  Lines l;
  for (std::int64_t d = 0; d < axis; ++d) l.outer *= shape[static_cast<std::size_t>(d)];
  for (std::size_t d = static_cast<std::size_t>(axis) + 1; d < shape.size(); ++d) l.inner *= shape[d];
  return l;
}

template <class T>
std::vector<Tensor> run_typed(const KernelCall& call) {
  const Tensor& x = call.inputs[0];
  const ir::Type& out = call.result_types[0];
  const std::string& kind = call.attrs.get_string("kind");
  const std::int64_t axis = normalize_axis(call.attrs.get_int("axis"), x.rank());
  const std::int64_t n = call.attrs.get_int("n");
  const bool inverse = call.attrs.get_bool("inverse");
  const bool weights = call.attrs.get_bool("hermitian_weights");
  const T scale = static_cast<T>(fft::norm_factor(call.attrs.get_string("norm"), n, inverse));
  const std::vector<Complex> in = x.to_complex_values();
  const std::int64_t in_len = x.shape()[static_cast<std::size_t>(axis)];
  const std::vector<std::int64_t> out_sizes = sizes_of(out);
  const std::int64_t out_len = out_sizes[static_cast<std::size_t>(axis)];
  const Lines l = lines_of(x.shape(), axis);
  std::vector<Complex> result(static_cast<std::size_t>(numel_of(out_sizes)));
  // A real side of a splittable length transforms at half its length: real
  // input splits the spectrum after, a real result unsplits it before
  // (fft_plan.h, splits_real).
  const bool split = kind != "c2c" && fft::splits_real(n);
  const std::int64_t h = n / 2;
  const std::int64_t len = split ? h : n;
  std::vector<fft::Cx<T>> line(static_cast<std::size_t>(len));
  const fft::Plan<T> plan(len, inverse);  // twiddles once per call, the same values for every line
  const std::vector<fft::Cx<T>> split_w = split ? fft::split_twiddles<T>(n, inverse) : std::vector<fft::Cx<T>>{};
  for (std::int64_t o = 0; o < l.outer; ++o) {
    for (std::int64_t i = 0; i < l.inner; ++i) {
      auto at_in = [&](std::int64_t k) { return in[static_cast<std::size_t>((o * in_len + k) * l.inner + i)]; };
      line.assign(static_cast<std::size_t>(len), fft::Cx<T>{0, 0});
      if (split && kind == "c2r") {
        // k = 0 reads X_0 and X_h without their imaginary parts.
        for (std::int64_t k = 0; k < h; ++k) {
          fft::Cx<T> a{static_cast<T>(at_in(k).real()), static_cast<T>(k == 0 ? 0.0 : at_in(k).imag())};
          fft::Cx<T> b{static_cast<T>(at_in(h - k).real()), static_cast<T>(k == 0 ? 0.0 : at_in(h - k).imag())};
          line[static_cast<std::size_t>(k)] = fft::unsplit_real(a, b, split_w[static_cast<std::size_t>(k)]);
        }
      } else if (split) {
        for (std::int64_t j = 0; j < h; ++j) {
          line[static_cast<std::size_t>(j)] = {static_cast<T>(at_in(2 * j).real()), static_cast<T>(at_in(2 * j + 1).real())};
        }
      } else if (kind == "c2r") {
        // The Hermitian spectrum of length n from its first n/2 + 1 bins.
        for (std::int64_t k = 0; k < in_len; ++k) {
          const Complex z = at_in(k);
          line[static_cast<std::size_t>(k)] = {static_cast<T>(z.real()), static_cast<T>(z.imag())};
        }
        for (std::int64_t k = in_len; k < n; ++k) {
          const fft::Cx<T> m = line[static_cast<std::size_t>(n - k)];
          line[static_cast<std::size_t>(k)] = {m.re, static_cast<T>(-m.im)};
        }
      } else {
        for (std::int64_t k = 0; k < n; ++k) {
          const Complex z = at_in(k);
          line[static_cast<std::size_t>(k)] = {static_cast<T>(z.real()), static_cast<T>(z.imag())};
        }
      }
      plan.execute(line);
      for (std::int64_t k = 0; k < out_len; ++k) {
        fft::Cx<T> v;
        if (split && kind == "c2r") {
          const fft::Cx<T> z = line[static_cast<std::size_t>(k / 2)];
          v = {k % 2 == 0 ? z.re : z.im, T(0)};  // x_2j and x_2j+1 are z_j's parts
        } else if (split) {
          v = fft::split_real(line[static_cast<std::size_t>(k % h)], line[static_cast<std::size_t>((h - k) % h)],
                              split_w[static_cast<std::size_t>(k)]);
        } else {
          v = line[static_cast<std::size_t>(k)];
        }
        if (weights && k > 0 && 2 * k < n) v = {static_cast<T>(v.re + v.re), static_cast<T>(v.im + v.im)};
        if (scale != T(1)) v = {static_cast<T>(v.re * scale), static_cast<T>(v.im * scale)};
        result[static_cast<std::size_t>((o * out_len + k) * l.inner + i)] = Complex(v.re, kind == "c2r" ? 0.0 : v.im);
      }
    }
  }
  if (kind == "c2r") {
    std::vector<double> re(result.size());
    for (std::size_t k = 0; k < result.size(); ++k) re[k] = result[k].real();
    return {make_result(re, out)};
  }
  return {make_complex_result(result, out)};
}

std::vector<Tensor> run_fft(const KernelCall& call) {
  // The part type T is the complex side's accumulation type: fp32 for
  // complex64 (by default), fp64 for complex128.
  const bool c2r = call.attrs.get_string("kind") == "c2r";
  const DType accum = c2r ? call.inputs[0].policy().accum : call.result_types[0].policy.accum;
  return accum == DType::fp64 ? run_typed<double>(call) : run_typed<float>(call);
}

std::vector<ir::Type> infer_passes(std::span<const ir::Type> in, const AttrMap& attrs) {
  const ir::Type& x = in[0];
  const std::string what = "graph.fft_passes";
  if (x.rank() == 0) raise(ErrorCode::ShapeMismatch, what + " needs an input of rank >= 1, got a scalar");
  if (!is_complex(x.dtype()) || complex_part(x.policy.storage) != x.policy.accum) {
    raise(ErrorCode::DtypeUnsupported, what + " takes complex64 @accum(fp32) or complex128 @accum(fp64) (stored parts "
                                              "are the arithmetic's), got " + ir::print_type(x));
  }
  const std::int64_t axis = normalize_axis(attrs.get_int("axis"), x.rank());
  const std::int64_t n = attrs.get_int("n");
  const std::size_t passes = fft::stockham_radices(n).size();
  if (n < 2 || passes == 0) {
    raise(ErrorCode::ArgumentInvalid, what + ": n = " + std::to_string(n) + " is not a 2/3/5/7-smooth length above 1");
  }
  const std::int64_t first = attrs.get_int("first"), last = attrs.get_int("last");
  if (first < 0 || first >= last || last > static_cast<std::int64_t>(passes)) {
    raise(ErrorCode::ArgumentInvalid, what + ": passes [" + std::to_string(first) + ", " + std::to_string(last) +
                                          ") are not a range of the " + std::to_string(passes) + " passes of n = " +
                                          std::to_string(n));
  }
  fft::norm_factor(attrs.get_string("norm"), n, false);  // validates the name
  if (fixed_dim(x, axis, what) != n) {
    raise(ErrorCode::ShapeMismatch, what + ": axis " + std::to_string(axis) + " has length " +
                                        x.shape[static_cast<std::size_t>(axis)].str() + ", not n = " + std::to_string(n));
  }
  return {x};
}

template <class T>
std::vector<Tensor> run_passes_typed(const KernelCall& call) {
  const Tensor& x = call.inputs[0];
  const std::int64_t axis = normalize_axis(call.attrs.get_int("axis"), x.rank());
  const std::int64_t n = call.attrs.get_int("n");
  const bool inverse = call.attrs.get_bool("inverse");
  const auto first = static_cast<std::size_t>(call.attrs.get_int("first"));
  const auto last = static_cast<std::size_t>(call.attrs.get_int("last"));
  const fft::Plan<T> plan(n, inverse);
  const bool final = last == plan.passes().size();
  const T scale = final ? static_cast<T>(fft::norm_factor(call.attrs.get_string("norm"), n, inverse)) : T(1);
  std::vector<Complex> values = x.to_complex_values();
  const Lines l = lines_of(x.shape(), axis);
  std::vector<fft::Cx<T>> line(static_cast<std::size_t>(n));
  for (std::int64_t o = 0; o < l.outer; ++o) {
    for (std::int64_t i = 0; i < l.inner; ++i) {
      auto at = [&](std::int64_t k) { return static_cast<std::size_t>((o * n + k) * l.inner + i); };
      for (std::int64_t k = 0; k < n; ++k) {
        line[static_cast<std::size_t>(k)] = {static_cast<T>(values[at(k)].real()), static_cast<T>(values[at(k)].imag())};
      }
      plan.run_passes(line, first, last);
      for (std::int64_t k = 0; k < n; ++k) {
        fft::Cx<T> v = line[static_cast<std::size_t>(k)];
        if (scale != T(1)) v = {static_cast<T>(v.re * scale), static_cast<T>(v.im * scale)};
        values[at(k)] = Complex(v.re, v.im);
      }
    }
  }
  return {make_complex_result(values, call.result_types[0])};
}

std::vector<Tensor> run_passes(const KernelCall& call) {
  return call.inputs[0].policy().accum == DType::fp64 ? run_passes_typed<double>(call) : run_passes_typed<float>(call);
}

std::vector<Tensor> run_resize(const KernelCall& call) {
  const Tensor& x = call.inputs[0];
  const ir::Type& out = call.result_types[0];
  const std::int64_t axis = normalize_axis(call.attrs.get_int("axis"), x.rank());
  const std::int64_t in_len = x.shape()[static_cast<std::size_t>(axis)];
  const std::int64_t len = call.attrs.get_int("length");
  const Lines l = lines_of(x.shape(), axis);
  const std::vector<Complex> in = x.to_complex_values();
  std::vector<Complex> result(static_cast<std::size_t>(l.outer * len * l.inner), Complex(0.0, 0.0));
  for (std::int64_t o = 0; o < l.outer; ++o) {
    for (std::int64_t k = 0; k < std::min(in_len, len); ++k) {
      for (std::int64_t i = 0; i < l.inner; ++i) {
        result[static_cast<std::size_t>((o * len + k) * l.inner + i)] = in[static_cast<std::size_t>((o * in_len + k) * l.inner + i)];
      }
    }
  }
  if (is_complex(out.dtype())) return {Tensor::from_complex_values(result, sizes_of(out), out.policy)};
  std::vector<double> re(result.size());
  for (std::size_t k = 0; k < result.size(); ++k) re[k] = result[k].real();
  return {Tensor::from_values(re, sizes_of(out), out.policy)};  // exact: values of x or 0
}

}  // namespace

void register_fft_ops(ir::Registry& r) {
  r.add(OpDef{
      .name = kOp,
      .summary = "Discrete Fourier transform along one axis (c2c, r2c or c2r), any length, fixed order.",
      .operands = {"x"},
      .attrs = {int_attr("axis", -1), int_attr("n"), bool_attr("inverse", false), string_attr("kind", std::string("c2c")),
                string_attr("norm", std::string("backward")), bool_attr("hermitian_weights", false)},
      .infer = infer_fft,
      .reference = run_fft,
  });
  r.add(OpDef{
      .name = "graph.fft_passes",
      .summary = "A range of the Stockham passes of a c2c FFT along one axis (a long line in stages).",
      .operands = {"x"},
      .attrs = {int_attr("axis", -1), int_attr("n"), bool_attr("inverse", false),
                string_attr("norm", std::string("backward")), int_attr("first"), int_attr("last")},
      .infer = infer_passes,
      .reference = run_passes,
  });
  r.add(OpDef{
      .name = "graph.fft_resize",
      .summary = "Crops or zero-pads one axis at its end to `length` (the FFTs' n argument).",
      .operands = {"x"},
      .attrs = {int_attr("axis", -1), int_attr("length")},
      .infer =
          [](std::span<const ir::Type> in, const AttrMap& attrs) {
            const std::string what = "graph.fft_resize";
            if (in[0].rank() == 0) raise(ErrorCode::ShapeMismatch, what + " needs an input of rank >= 1, got a scalar");
            const std::int64_t axis = normalize_axis(attrs.get_int("axis"), in[0].rank());
            const std::int64_t len = attrs.get_int("length");
            if (len < 1) raise(ErrorCode::ArgumentInvalid, what + ": length must be >= 1, got " + std::to_string(len));
            if (!is_complex(in[0].dtype())) require_float(in[0], what, "input");
            fixed_dim(in[0], axis, what);
            ir::Shape shape = in[0].shape;
            shape[static_cast<std::size_t>(axis)] = ir::Dim::fixed(len);
            return std::vector<ir::Type>{ir::Type::tensor(shape, in[0].policy)};
          },
      .reference = run_resize,
  });
}

}  // namespace tessera::graph
