// Graph IR reductions: graph.sum, graph.mean, graph.max, graph.min, graph.argmax.
//
// sum/mean/max/min reduce over `axes` (empty: every axis; negative axes count
// from the end) and drop the reduced dims unless `keepdims`. argmax reduces one
// `axis` and returns int64 indices.
//
// Fixed order: for each output element (row-major over the kept dims), the
// reduced elements are visited in row-major order of the reduced axes and the
// running sum is rounded once to the accumulation type after every add
// (accumulate.h), so results are reproducible bit for bit. mean is that sum
// divided by the count, rounded to the accumulation type.
//
// Result policies:
// - floats: sum, mean, max and min keep the operand's policy.
// - integers (and bool): sum is computed exactly and stored in the
//   accumulation type (int32 for int4/int8/int16/int32/uint8/bool by default,
//   int64 for int64), with that type's default policy, so small integer types
//   do not wrap. A running sum beyond 2^53 in magnitude (no longer exact in the
//   reference) or a total outside the result type's range is an ArgumentError
//   (cast to int64 or a float first); nothing saturates silently. mean of an
//   integer tensor is a DtypeError: cast to a float first. max/min keep the
//   operand's policy.
// - complex: sum and mean keep the operand's policy, each part summed as a
//   float sum at the part accumulation type; max and min are DtypeErrors.
// - argmax: int64; the first index of the maximum; NaN counts as larger than
//   everything, so the first NaN wins.
//
// Empty reductions: sum over an axis of size 0 is 0; mean, max, min and argmax
// over an empty axis are a ShapeError naming the op and the axis.
//
// Two ops split a long float sum into its canonical order's outer level
// (schedule pass split-long-sums, docs/design/0036), so a sum to a few
// outputs spreads over many groups with the same bits:
// - graph.superblock_sums(x) {axes, superblocks}: axes adjacent; the result
//   is [kept dims.., S] at the operand's accumulation type (its default
//   policy), S = ceil(reduced length / kSumBlock^2); entry (o, s) is
//   superblock s of output element o's canonical sum (its blocks summed left
//   to right from zero, each block's strands and tree). `superblocks` gives
//   S where the reduced dims are symbols (an eager shape pattern), and must
//   match it where they are sizes; 0 derives it.
// - graph.superblock_total(p) {count, shape, policy}: p's last axis summed
//   left to right from zero at p's type, divided by `count` when it is
//   positive (a mean), rounded to `policy`, shaped `shape` (the kept dims,
//   with any kept ones; absent: p's dims but the last). canonical_sum's
//   outer loop, so superblock_total(superblock_sums(x)) is sum(x) (mean(x))
//   to the bit.
//
// Two more split a float sum over the leading axis of a matrix (a bias
// gradient) at its blocks (schedule pass split-column-sums, docs/design/0039),
// so its column sums spread over a group per block:
// - graph.block_sums(x): x [R, C] float; the result is [ceil(R / kSumBlock), C]
//   at x's accumulation type, entry (b, c) the canonical sum of block b of
//   column c (its strands from zero and their tree).
// - graph.block_total(p) {count, shape, policy}: p [B, C]; each column's
//   block sums by the canonical order's outer levels (superblocks of
//   kSumBlock blocks from zero, their sums from zero), divided by `count`
//   when positive, rounded to `policy`, shaped `shape` (absent: [C]). So
//   block_total(block_sums(x)) is sum(x, axis=0) (mean) to the bit.
#include <cmath>
#include <limits>

#include "graph/accumulate.h"
#include "graph/complex_kernels.h"
#include "graph/kernel_support.h"
#include "graph/op_families.h"
#include "graph/shape_rules.h"
#include "tessera/graph/promotion.h"
#include "tessera/support/error.h"

namespace tessera::graph {

namespace {

using ir::AttrMap;
using ir::KernelCall;
using ir::OpDef;

enum class Kind { sum, mean, max, min };

bool is_integer_like(DType d) {
  return !is_float(d) && !is_complex(d);
}

// sum and mean of a complex tensor: each part summed in the fixed order of
// the real sum at the part accumulation type (docs/design/0016).
std::vector<Tensor> run_complex_sum(const KernelCall& call, bool mean) {
  const Tensor& x = call.inputs[0];
  auto axes = normalize_axes(call.attrs.get_ints("axes"), x.rank());
  const auto values = x.to_complex_values();
  const auto layout = reduction_layout(x.shape(), axes);
  const DType accum = x.policy().accum;
  std::vector<Complex> result(static_cast<std::size_t>(layout.outer));
  for (std::int64_t o = 0; o < layout.outer; ++o) {
    const std::int64_t* offs = layout.offsets.data() + o * layout.inner;
    double part[2];
    for (int k = 0; k < 2; ++k) {
      part[k] = canonical_sum(layout.inner, accum, [&](double a, std::int64_t i) {
        const Complex z = values[static_cast<std::size_t>(offs[i])];
        return add_rounded(a, k == 0 ? z.real() : z.imag(), accum);
      });
      if (mean) part[k] = round_to(part[k] / static_cast<double>(layout.inner), accum);
    }
    result[static_cast<std::size_t>(o)] = Complex(part[0], part[1]);
  }
  return {make_complex_result(result, call.result_types[0])};
}

// Shape after reducing `axes` (sorted, normalized).
Shape reduced_shape(const Shape& in, const std::vector<std::int64_t>& axes, bool keepdims) {
  Shape out;
  std::size_t next = 0;
  for (std::size_t d = 0; d < in.size(); ++d) {
    if (next < axes.size() && axes[next] == static_cast<std::int64_t>(d)) {
      ++next;
      if (keepdims) out.push_back(Dim::fixed(1));
    } else {
      out.push_back(in[d]);
    }
  }
  return out;
}

// A reduction without identity over an axis that may be empty: reject it at
// inference when the size is known, else when the kernel runs.
void reject_empty(const std::string& op, const Shape& shape, const std::vector<std::int64_t>& axes) {
  for (auto a : axes) {
    if (shape[static_cast<std::size_t>(a)].is_fixed(0)) {
      raise(ErrorCode::ShapeMismatch, op + " over axis " + std::to_string(a) + " of size 0 (shape " + shape_str(shape) +
                                          ") has no result: the reduction is empty");
    }
  }
}

void reject_empty(const std::string& op, const std::vector<std::int64_t>& sizes,
                  const std::vector<std::int64_t>& axes) {
  reject_empty(op, ir::fixed_shape(sizes), axes);
}

NumericsPolicy sum_policy(const NumericsPolicy& in) {
  if (is_float(in.storage)) return in;
  return default_policy(in.accum);
}

// The reduced integer sum must be exact and fit the result storage.
double check_integer_sum(double acc, DType out, const std::string& op) {
  if (!is_float(out)) {
    const int bits = bit_width(out);
    const bool is_signed = info(out).is_signed;
    const double lo = is_signed ? -std::ldexp(1.0, bits - 1) : 0.0;
    const double hi = std::ldexp(1.0, is_signed ? bits - 1 : bits);
    if (acc < lo || acc >= hi) {
      raise(ErrorCode::ArgumentInvalid, op + " result " + std::to_string(static_cast<long long>(acc)) +
                                            " overflows its " + std::string(name(out)) +
                                            " result; cast the operand to int64 or a float first");
    }
  }
  return acc;
}

void add_reduction(ir::Registry& r, Kind kind, std::string name, std::string summary) {
  std::string op_name = "graph." + name;
  r.add(OpDef{
      .name = op_name,
      .summary = std::move(summary),
      .operands = {"x"},
      .attrs = {ints_attr("axes", std::vector<std::int64_t>{}), bool_attr("keepdims", false)},
      .infer =
          [op_name, kind](std::span<const ir::Type> in, const AttrMap& attrs) {
            const ir::Type& x = in[0];
            reject_scale_format(x.dtype());
            auto axes = normalize_axes(attrs.get_ints("axes"), x.rank());
            NumericsPolicy p = x.policy;
            if (is_complex(x.dtype()) && (kind == Kind::max || kind == Kind::min)) {
              raise(ErrorCode::DtypeUnsupported, op_name + " takes real operands, got " +
                                                     std::string(tessera::name(x.dtype())) +
                                                     " (complex numbers have no order)");
            }
            if (kind == Kind::mean && !is_float(x.dtype()) && !is_complex(x.dtype())) {
              raise(ErrorCode::DtypeUnsupported, op_name + " needs a floating-point operand, got " +
                                                     std::string(tessera::name(x.dtype())) +
                                                     "; cast it to a float first (graph.cast / tessera.ops.cast)");
            }
            if (kind == Kind::sum && !is_complex(x.dtype())) p = sum_policy(x.policy);
            if (kind != Kind::sum) reject_empty(op_name, x.shape, axes);
            return std::vector<ir::Type>{ir::Type::tensor(reduced_shape(x.shape, axes, attrs.get_bool("keepdims")), p)};
          },
      .reference =
          [op_name, kind](const KernelCall& call) {
            const Tensor& x = call.inputs[0];
            const ir::Type& out = call.result_types[0];
            auto axes = normalize_axes(call.attrs.get_ints("axes"), x.rank());
            if (kind != Kind::sum) reject_empty(op_name, x.shape(), axes);
            if (is_complex(x.dtype())) return run_complex_sum(call, kind == Kind::mean);
            auto values = x.to_values();
            auto layout = reduction_layout(x.shape(), axes);
            const DType accum = x.policy().accum;
            const bool integer = is_integer_like(x.dtype());
            const double limit = std::ldexp(1.0, 53);
            std::vector<double> result(static_cast<std::size_t>(layout.outer));
            for (std::int64_t o = 0; o < layout.outer; ++o) {
              const std::int64_t* offs = layout.offsets.data() + o * layout.inner;
              double acc = 0.0;
              if ((kind == Kind::sum || kind == Kind::mean) && !integer) {
                acc = canonical_sum(layout.inner, accum, [&](double a, std::int64_t i) {
                  return add_rounded(a, values[static_cast<std::size_t>(offs[i])], accum);
                });
                if (kind == Kind::mean) acc = round_to(acc / static_cast<double>(layout.inner), accum);
              } else if (kind == Kind::sum || kind == Kind::mean) {
                for (std::int64_t i = 0; i < layout.inner; ++i) {
                  acc += values[static_cast<std::size_t>(offs[i])];  // exact while |acc| <= 2^53
                  if (std::fabs(acc) > limit) {
                    raise(ErrorCode::ArgumentInvalid,
                          op_name +
                              " of integers passed 2^53 in magnitude, beyond exact accumulation; cast the "
                              "operand to a float first");
                  }
                }
                if (integer) acc = check_integer_sum(acc, out.dtype(), op_name);
                if (kind == Kind::mean) acc = round_to(acc / static_cast<double>(layout.inner), accum);
              } else {
                acc = values[static_cast<std::size_t>(offs[0])];
                for (std::int64_t i = 1; i < layout.inner && !std::isnan(acc); ++i) {
                  double v = values[static_cast<std::size_t>(offs[i])];
                  if (std::isnan(v) || (kind == Kind::max ? v > acc : v < acc)) acc = v;
                }
              }
              result[static_cast<std::size_t>(o)] = acc;
            }
            return std::vector<Tensor>{make_result(result, out)};
          },
  });
}

void add_argmax(ir::Registry& r) {
  std::string op_name = "graph.argmax";
  r.add(OpDef{
      .name = op_name,
      .summary = "Index (int64) of the first maximum along `axis`; NaN counts as the maximum.",
      .operands = {"x"},
      .attrs = {int_attr("axis", -1), bool_attr("keepdims", false)},
      .infer =
          [op_name](std::span<const ir::Type> in, const AttrMap& attrs) {
            const ir::Type& x = in[0];
            reject_scale_format(x.dtype());
            std::vector<std::int64_t> axes{normalize_axis(attrs.get_int("axis"), x.rank())};
            reject_empty(op_name, x.shape, axes);
            return std::vector<ir::Type>{ir::Type::tensor(reduced_shape(x.shape, axes, attrs.get_bool("keepdims")),
                                                          default_policy(DType::int64))};
          },
      .reference =
          [op_name](const KernelCall& call) {
            const Tensor& x = call.inputs[0];
            std::vector<std::int64_t> axes{normalize_axis(call.attrs.get_int("axis"), x.rank())};
            reject_empty(op_name, x.shape(), axes);
            auto values = x.to_values();
            auto layout = reduction_layout(x.shape(), axes);
            std::vector<double> result(static_cast<std::size_t>(layout.outer));
            for (std::int64_t o = 0; o < layout.outer; ++o) {
              const std::int64_t* offs = layout.offsets.data() + o * layout.inner;
              std::int64_t best = 0;
              double best_v = values[static_cast<std::size_t>(offs[0])];
              for (std::int64_t i = 1; i < layout.inner && !std::isnan(best_v); ++i) {
                double v = values[static_cast<std::size_t>(offs[i])];
                if (std::isnan(v) || v > best_v) best = i, best_v = v;
              }
              result[static_cast<std::size_t>(o)] = static_cast<double>(best);
            }
            return std::vector<Tensor>{make_result(result, call.result_types[0])};
          },
  });
}

void add_superblock_sums(ir::Registry& r) {
  const std::string op_name = "graph.superblock_sums";
  r.add(OpDef{
      .name = op_name,
      .summary = "Superblock sums of the canonical order over adjacent `axes`: [kept.., superblocks] at the "
                 "accumulation type.",
      .operands = {"x"},
      .attrs = {ints_attr("axes"), int_attr("superblocks", 0)},
      .infer =
          [op_name](std::span<const ir::Type> in, const AttrMap& attrs) {
            const ir::Type& x = in[0];
            const std::int64_t given = attrs.get_int("superblocks");
            if (given < 0) {
              raise(ErrorCode::ArgumentInvalid,
                    op_name + " attribute 'superblocks' must be 0 (derived) or positive, got " + std::to_string(given));
            }
            if (!is_float(x.dtype())) {
              raise(ErrorCode::DtypeUnsupported,
                    op_name + " takes a real float operand, got " + std::string(tessera::name(x.dtype())));
            }
            auto axes = normalize_axes(attrs.get_ints("axes"), x.rank());
            if (axes.empty() || axes.back() - axes.front() + 1 != static_cast<std::int64_t>(axes.size())) {
              raise(ErrorCode::ArgumentInvalid, op_name + " needs adjacent reduced axes, got " +
                                                    std::to_string(axes.size()) + " axes");
            }
            Shape out = reduced_shape(x.shape, axes, false);
            Shape reduced;
            for (auto a : axes) reduced.push_back(x.shape[static_cast<std::size_t>(a)]);
            const auto length = fixed_product(reduced);
            if (!length && given <= 0) {
              raise(ErrorCode::ShapeMismatch, op_name + " needs the reduced dims' sizes or `superblocks`, got " +
                                                  shape_str(x.shape));
            }
            if (length && given > 0 && given != superblock_count(*length)) {
              raise(ErrorCode::ShapeMismatch, op_name + " of " + shape_str(x.shape) + " has " +
                                                  std::to_string(superblock_count(*length)) + " superblocks, not " +
                                                  std::to_string(given));
            }
            out.push_back(Dim::fixed(length ? superblock_count(*length) : given));
            return std::vector<ir::Type>{ir::Type::tensor(out, default_policy(x.policy.accum))};
          },
      .reference =
          [](const KernelCall& call) {
            const Tensor& x = call.inputs[0];
            auto axes = normalize_axes(call.attrs.get_ints("axes"), x.rank());
            auto values = x.to_values();
            auto layout = reduction_layout(x.shape(), axes);
            const DType accum = x.policy().accum;
            const std::int64_t super = kSumSuperblock;
            const std::int64_t count = superblock_count(layout.inner);
            std::vector<double> result(static_cast<std::size_t>(layout.outer * count));
            for (std::int64_t o = 0; o < layout.outer; ++o) {
              for (std::int64_t s = 0; s < count; ++s) {
                const std::int64_t* offs = layout.offsets.data() + o * layout.inner + s * super;
                const std::int64_t n = std::min(super, layout.inner - s * super);
                result[static_cast<std::size_t>(o * count + s)] = canonical_sum(n, accum, [&](double a, std::int64_t i) {
                  return add_rounded(a, values[static_cast<std::size_t>(offs[i])], accum);
                });
              }
            }
            return std::vector<Tensor>{make_result(result, call.result_types[0])};
          },
  });
}

// The result type of a total of partial sums (graph.superblock_total,
// graph.block_total): `count` 0 or a mean's positive count, the `kept` dims
// of the partials p, reshaped to `shape` when given, at `policy`.
std::vector<ir::Type> total_type(const std::string& op_name, const Shape& kept, const ir::Type& p, const AttrMap& attrs) {
  if (attrs.get_int("count") < 0) {
    raise(ErrorCode::ArgumentInvalid, op_name + " attribute 'count' must be 0 (a sum) or a mean's positive count, got " +
                                          std::to_string(attrs.get_int("count")));
  }
  if (!attrs.has("shape")) return {ir::Type::tensor(kept, attrs.get_policy("policy"))};
  const Shape& shape = attrs.get_shape("shape");
  const auto a = fixed_product(shape), b = fixed_product(kept);
  if (!a || !b || *a != *b) {
    raise(ErrorCode::ShapeMismatch, op_name + " shape " + shape_str(shape) + " does not hold the " + shape_str(kept) +
                                        " outputs of " + shape_str(p.shape));
  }
  return {ir::Type::tensor(shape, attrs.get_policy("policy"))};
}

std::vector<ir::AttrSpec> total_attrs() {
  return {int_attr("count", 0), ir::AttrSpec{.name = "shape", .kind = ir::AttrKind::shape, .required = false},
          policy_attr("policy")};
}

void add_superblock_total(ir::Registry& r) {
  const std::string op_name = "graph.superblock_total";
  r.add(OpDef{
      .name = op_name,
      .summary = "The last axis summed left to right (graph.superblock_sums' outer level), over `count` when "
                 "positive, as `policy`, shaped `shape`.",
      .operands = {"p"},
      .attrs = total_attrs(),
      .infer =
          [op_name](std::span<const ir::Type> in, const AttrMap& attrs) {
            const ir::Type& p = in[0];
            if (!is_float(p.dtype()) || p.rank() == 0) {
              raise(ErrorCode::ArgumentInvalid, op_name + " takes a float tensor of rank >= 1, got " +
                                                    std::string(tessera::name(p.dtype())) + shape_str(p.shape));
            }
            return total_type(op_name, Shape(p.shape.begin(), p.shape.end() - 1), p, attrs);
          },
      .reference =
          [](const KernelCall& call) {
            const Tensor& p = call.inputs[0];
            auto values = p.to_values();
            const DType accum = p.policy().accum;
            const std::int64_t count = call.attrs.get_int("count");
            const std::int64_t n = p.shape().back();
            std::vector<double> result(values.size() / static_cast<std::size_t>(std::max<std::int64_t>(n, 1)));
            for (std::size_t o = 0; o < result.size(); ++o) {
              double acc = 0.0;
              for (std::int64_t s = 0; s < n; ++s) acc = add_rounded(acc, values[o * static_cast<std::size_t>(n) + s], accum);
              if (count > 0) acc = round_to(acc / static_cast<double>(count), accum);
              result[o] = acc;
            }
            return std::vector<Tensor>{make_result(result, call.result_types[0])};
          },
  });
}

void add_block_sums(ir::Registry& r) {
  const std::string op_name = "graph.block_sums";
  r.add(OpDef{
      .name = op_name,
      .summary = "Block sums of the canonical order down the columns of a matrix: [blocks, columns] at the "
                 "accumulation type.",
      .operands = {"x"},
      .infer =
          [op_name](std::span<const ir::Type> in, const AttrMap&) {
            const ir::Type& x = in[0];
            if (!is_float(x.dtype()) || x.rank() != 2 || x.shape[0].is_symbolic()) {
              raise(ErrorCode::ArgumentInvalid, op_name + " takes a real float matrix with a known row count, got " +
                                                    std::string(tessera::name(x.dtype())) + shape_str(x.shape));
            }
            const std::int64_t blocks = (x.shape[0].size + kSumBlock - 1) / kSumBlock;
            return std::vector<ir::Type>{ir::Type::tensor({Dim::fixed(blocks), x.shape[1]}, default_policy(x.policy.accum))};
          },
      .reference =
          [](const KernelCall& call) {
            const Tensor& x = call.inputs[0];
            auto values = x.to_values();
            const DType accum = x.policy().accum;
            const std::int64_t rows = x.shape()[0], cols = x.shape()[1];
            const std::int64_t blocks = (rows + kSumBlock - 1) / kSumBlock;
            std::vector<double> result(static_cast<std::size_t>(blocks * cols));
            for (std::int64_t b = 0; b < blocks; ++b) {
              for (std::int64_t c = 0; c < cols; ++c) {
                result[static_cast<std::size_t>(b * cols + c)] = canonical_block_sum(
                    b * kSumBlock, std::min(rows, (b + 1) * kSumBlock), accum, [&](double a, std::int64_t i) {
                      return add_rounded(a, values[static_cast<std::size_t>(i * cols + c)], accum);
                    });
              }
            }
            return std::vector<Tensor>{make_result(result, call.result_types[0])};
          },
  });
}

void add_block_total(ir::Registry& r) {
  const std::string op_name = "graph.block_total";
  r.add(OpDef{
      .name = op_name,
      .summary = "Each column of block sums by the canonical order's outer levels (graph.block_sums' total), over "
                 "`count` when positive, as `policy`, shaped `shape`.",
      .operands = {"p"},
      .attrs = total_attrs(),
      .infer =
          [op_name](std::span<const ir::Type> in, const AttrMap& attrs) {
            const ir::Type& p = in[0];
            if (!is_float(p.dtype()) || p.rank() != 2) {
              raise(ErrorCode::ArgumentInvalid, op_name + " takes a float matrix of block sums, got " +
                                                    std::string(tessera::name(p.dtype())) + shape_str(p.shape));
            }
            return total_type(op_name, Shape{p.shape[1]}, p, attrs);
          },
      .reference =
          [](const KernelCall& call) {
            const Tensor& p = call.inputs[0];
            auto values = p.to_values();
            const DType accum = p.policy().accum;
            const std::int64_t count = call.attrs.get_int("count");
            const std::int64_t blocks = p.shape()[0], cols = p.shape()[1];
            std::vector<double> result(static_cast<std::size_t>(cols));
            for (std::int64_t c = 0; c < cols; ++c) {
              double acc = canonical_block_total(blocks, accum, [&](std::int64_t b) {
                return values[static_cast<std::size_t>(b * cols + c)];
              });
              if (count > 0) acc = round_to(acc / static_cast<double>(count), accum);
              result[static_cast<std::size_t>(c)] = acc;
            }
            return std::vector<Tensor>{make_result(result, call.result_types[0])};
          },
  });
}

}  // namespace

void register_reduction_ops(ir::Registry& r) {
  add_reduction(r, Kind::sum, "sum", "Sum over `axes` (all when empty), accumulated in a fixed sequential order.");
  add_reduction(r, Kind::mean, "mean", "Mean over `axes` (all when empty): the fixed-order sum over the count.");
  add_reduction(r, Kind::max, "max", "Maximum over `axes` (all when empty); NaN if any element is NaN.");
  add_reduction(r, Kind::min, "min", "Minimum over `axes` (all when empty); NaN if any element is NaN.");
  add_argmax(r);
  add_superblock_sums(r);
  add_superblock_total(r);
  add_block_sums(r);
  add_block_total(r);
}

}  // namespace tessera::graph
