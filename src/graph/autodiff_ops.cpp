// Graph IR ops that automatic differentiation introduces (src/autodiff):
// graph.stop_gradient, graph.erf, graph.slice_embed, graph.scatter_add.
//
// stop_gradient is the identity whose derivative is zero. erf is the error
// function, which the derivative of exact GELU needs (and users may call).
// slice_embed and scatter_add are the transposes of graph.slice and
// graph.gather, so reverse mode stays within Graph IR and every derivative is
// differentiable again: slice_embed places its operand into a zero tensor of
// `shape` at the positions graph.slice with the same starts/stops/steps
// reads; scatter_add adds each update into a zero tensor of `shape` at the
// index graph.gather would read it from (repeated indices accumulate).
//
// Moving ops (stop_gradient, slice_embed) move encodings unchanged.
// scatter_add decodes, sums each output element's contributions in index
// order with one rounding to the accumulation type per add, then encodes.
#include <cmath>

#include "graph/accumulate.h"
#include "graph/kernel_support.h"
#include "graph/op_families.h"
#include "graph/shape_rules.h"
#include "tessera/graph/promotion.h"
#include "tessera/numerics/elementary.h"
#include "tessera/support/error.h"

namespace tessera::graph {

namespace {

using ir::AttrMap;
using ir::KernelCall;
using ir::OpDef;
using Sizes = std::vector<std::int64_t>;

std::size_t uz(std::int64_t v) {
  return static_cast<std::size_t>(v);
}

constexpr std::int64_t kToEnd = kSliceToEnd;

// graph.slice's semantics for one axis: start and size.
std::pair<std::int64_t, std::int64_t> resolve(std::int64_t start, std::int64_t stop, std::int64_t step,
                                              std::int64_t n) {
  const AxisSlice s = resolve_slice(start, stop, step, n);
  return {s.start, s.size};
}

Sizes steps_of(const AttrMap& attrs, std::size_t rank) {
  Sizes steps = attrs.get_ints("steps");
  if (steps.empty()) steps.assign(rank, 1);
  return steps;
}

std::vector<ir::Type> infer_slice_embed(std::span<const ir::Type> in, const AttrMap& attrs) {
  const Shape& target = attrs.get_shape("shape");
  const Shape& x = in[0].shape;
  const Sizes& starts = attrs.get_ints("starts");
  const Sizes& stops = attrs.get_ints("stops");
  Sizes steps = steps_of(attrs, target.size());
  if (x.size() != target.size() || starts.size() != target.size() || stops.size() != target.size() ||
      steps.size() != target.size()) {
    raise(ErrorCode::ShapeMismatch, "slice_embed needs the operand " + shape_str(x) + ", 'shape' " + shape_str(target) +
                                        ", starts, stops and steps all of one rank");
  }
  for (std::size_t a = 0; a < target.size(); ++a) {
    if (steps[a] <= 0) raise(ErrorCode::ArgumentInvalid, "slice_embed step on axis " + std::to_string(a) + " is <= 0");
    if (target[a].is_symbolic()) {
      if (!(starts[a] == 0 && stops[a] >= kToEnd && steps[a] == 1) || x[a] != target[a]) {
        raise(ErrorCode::ShapeMismatch, "slice_embed axis " + std::to_string(a) + " (symbolic dim '" +
                                            target[a].symbol + "') must be a full slice of an operand dim '" +
                                            target[a].symbol + "', got operand dim " + x[a].str());
      }
      continue;
    }
    auto [b, size] = resolve(starts[a], stops[a], steps[a], target[a].size);
    (void)b;
    if (!x[a].is_fixed(size)) {
      raise(ErrorCode::ShapeMismatch, "slice_embed operand dim " + std::to_string(a) + " is " + x[a].str() +
                                          ", but the slice of 'shape' " + shape_str(target) + " there has size " +
                                          std::to_string(size));
    }
  }
  return {ir::Type::tensor(target, in[0].policy)};
}

std::vector<Tensor> run_slice_embed(const KernelCall& call) {
  const ir::Type& rt = call.result_types[0];
  Sizes out_sizes = sizes_of(rt);
  const Tensor& x = call.inputs[0];
  Sizes steps = steps_of(call.attrs, out_sizes.size());
  auto strides = contiguous_strides(out_sizes);
  std::vector<std::uint64_t> out = Tensor::zeros(out_sizes, rt.policy).codes();
  auto codes = x.codes();
  std::vector<std::int64_t> start(out_sizes.size());
  for (std::size_t a = 0; a < out_sizes.size(); ++a) {
    start[a] = resolve(call.attrs.get_ints("starts")[a], call.attrs.get_ints("stops")[a], steps[a], out_sizes[a]).first;
  }
  Sizes idx(x.rank(), 0);
  for (std::size_t e = 0; e < codes.size(); ++e) {
    std::int64_t off = 0;
    for (std::size_t a = 0; a < idx.size(); ++a) off += (start[a] + idx[a] * steps[a]) * strides[a];
    out[uz(off)] = codes[e];
    for (std::size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < x.shape()[d]) break;
      idx[d] = 0;
    }
  }
  return {Tensor::from_codes(out, out_sizes, rt.policy)};
}

std::vector<ir::Type> infer_scatter_add(std::span<const ir::Type> in, const AttrMap& attrs) {
  const ir::Type& u = in[0];
  const ir::Type& idx = in[1];
  reject_scale_format(u.dtype());
  if (is_float(idx.dtype()) || idx.dtype() == DType::bool_) {
    raise(ErrorCode::DtypeUnsupported,
          "scatter_add indices must have an integer dtype, got " + std::string(name(idx.dtype())));
  }
  const Shape& target = attrs.get_shape("shape");
  std::int64_t axis = normalize_axis(attrs.get_int("axis"), target.size());
  Shape expect(target.begin(), target.begin() + axis);
  expect.insert(expect.end(), idx.shape.begin(), idx.shape.end());
  expect.insert(expect.end(), target.begin() + axis + 1, target.end());
  if (expect != u.shape) {
    raise(ErrorCode::ShapeMismatch, "scatter_add updates have shape " + shape_str(u.shape) + ", but 'shape' " +
                                        shape_str(target) + " with indices " + shape_str(idx.shape) + " on axis " +
                                        std::to_string(axis) + " needs " + shape_str(expect));
  }
  return {ir::Type::tensor(target, u.policy)};
}

std::vector<Tensor> run_scatter_add(const KernelCall& call) {
  const ir::Type& rt = call.result_types[0];
  Sizes out_sizes = sizes_of(rt);
  std::int64_t axis = normalize_axis(call.attrs.get_int("axis"), out_sizes.size());
  std::int64_t outer = 1, inner = 1, n = out_sizes[uz(axis)];
  for (std::int64_t d = 0; d < axis; ++d) outer *= out_sizes[uz(d)];
  for (std::size_t d = uz(axis) + 1; d < out_sizes.size(); ++d) inner *= out_sizes[d];
  auto index_values = call.inputs[1].to_values();
  auto updates = call.inputs[0].to_values();
  std::vector<double> out(uz(numel_of(out_sizes)), 0.0);
  const DType accum = rt.policy.accum;
  const auto m = static_cast<std::int64_t>(index_values.size());
  for (std::int64_t j = 0; j < m; ++j) {
    double v = index_values[uz(j)];
    if (!(v >= static_cast<double>(-n) && v < static_cast<double>(n))) {
      raise(ErrorCode::IndexOutOfRange, "scatter_add index " + std::to_string(v) + " is out of range for axis " +
                                            std::to_string(axis) + " of size " + std::to_string(n));
    }
    auto i = static_cast<std::int64_t>(v);
    if (i < 0) i += n;
    for (std::int64_t o = 0; o < outer; ++o) {
      for (std::int64_t k = 0; k < inner; ++k) {
        double& dst = out[uz((o * n + i) * inner + k)];
        dst = add_rounded(dst, updates[uz((o * m + j) * inner + k)], accum);
      }
    }
  }
  return {make_result(out, rt)};
}

}  // namespace

void register_autodiff_ops(ir::Registry& r) {
  r.add(OpDef{
      .name = "graph.stop_gradient",
      .summary = "The identity, with a zero derivative: autodiff does not differentiate through it.",
      .operands = {"x"},
      .infer = [](std::span<const ir::Type> in, const AttrMap&) { return std::vector<ir::Type>{in[0]}; },
      .reference = moving_parts_of_complex128([](const KernelCall& call) {
        auto codes = call.inputs[0].codes();
        return std::vector<Tensor>{Tensor::from_codes(codes, sizes_of(call.result_types[0]), call.result_types[0].policy)};
      }),
  });
  r.add(OpDef{
      .name = "graph.erf",
      .summary = "Elementwise error function 2/sqrt(pi) * integral_0^x exp(-t^2) dt.",
      .operands = {"x"},
      .infer =
          [](std::span<const ir::Type> in, const AttrMap&) {
            require_float(in[0], "graph.erf", "operand");
            return std::vector<ir::Type>{in[0]};
          },
      .reference =
          [](const KernelCall& call) {
            auto v = call.inputs[0].to_values();
            for (double& x : v) x = elementary::erf(x);
            return std::vector<Tensor>{make_result(v, call.result_types[0])};
          },
  });
  r.add(OpDef{
      .name = "graph.slice_embed",
      .summary = "The transpose of graph.slice: zeros of `shape` holding x at the positions the slice "
                 "starts:stops:steps reads.",
      .operands = {"x"},
      .attrs = {shape_attr("shape"), ints_attr("starts"), ints_attr("stops"),
                ints_attr("steps", std::vector<std::int64_t>{})},
      .infer = infer_slice_embed,
      .reference = moving_parts_of_complex128(run_slice_embed),
  });
  r.add(OpDef{
      .name = "graph.scatter_add",
      .summary = "The transpose of graph.gather: zeros of `shape` with each update added at the index along "
                 "`axis` gather would read it from (repeats accumulate in index order).",
      .operands = {"updates", "indices"},
      .attrs = {shape_attr("shape"), int_attr("axis", 0)},
      .infer = infer_scatter_add,
      .reference = run_scatter_add,
  });
}

}  // namespace tessera::graph
