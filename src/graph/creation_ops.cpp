// Graph IR creation ops: graph.constant and graph.iota (no operands; the
// result is made from attributes alone), plus build_constant(), which turns a
// host tensor into a graph.constant.
//
// A constant holds decoded values and rejects any its storage dtype cannot
// hold exactly, so the constant's encodings never depend on a rounding mode
// and printing, parsing and executing it are all exact.
#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "graph/kernel_support.h"
#include "graph/op_families.h"
#include "graph/shape_rules.h"
#include "tessera/graph/constants.h"
#include "tessera/numerics/convert.h"
#include "tessera/support/error.h"

namespace tessera::graph {

namespace {

using ir::AttrMap;
using ir::KernelCall;
using ir::OpDef;

// The fixed sizes of a creation op's `shape` attribute; ShapeError for
// symbolic or negative dims, or an element count past 2^62.
std::vector<std::int64_t> fixed_sizes(const AttrMap& attrs) {
  const Shape& shape = attrs.get_shape("shape");
  auto sizes = ir::static_sizes(shape);
  if (!sizes) {
    raise(ErrorCode::ShapeMismatch, "attribute 'shape' must have fixed dims only, got " + shape_str(shape));
  }
  std::int64_t n = 1;
  for (std::size_t d = 0; d < sizes->size(); ++d) {
    std::int64_t s = (*sizes)[d];
    if (s < 0) raise(ErrorCode::ShapeMismatch, "attribute 'shape' dim " + std::to_string(d) + " is negative");
    if (s != 0 && n > (std::int64_t{1} << 62) / s) {
      raise(ErrorCode::ShapeMismatch, "attribute 'shape' " + shape_str(shape) + " has more than 2^62 elements");
    }
    n *= s;
  }
  return *sizes;
}

std::string print_double(double v) {
  return ir::print_attribute(ir::Attribute{v});
}

// True when `dtype` stores `v` exactly: decoding its encoding gives back the
// same double, sign of zero and of NaN included.
bool stores_exactly(double v, DType dtype) {
  double back = decode_value(encode_value(v, dtype), dtype);
  if (std::signbit(back) != std::signbit(v)) return false;
  return std::isnan(v) ? std::isnan(back) : back == v;
}

// True when every integer 0..n is exactly a value of `dtype`.
bool holds_integers_up_to(std::int64_t n, DType dtype) {
  if (n < 0) return true;
  if (dtype == DType::e8m0) return false;  // no zero
  if (is_float(dtype)) {
    // Every integer up to 2^(mantissa bits + 1) has a significand that fits.
    const FloatFormat& f = info(dtype).format;
    double limit = std::ldexp(1.0, f.mantissa_bits + 1);
    return static_cast<double>(n) <= limit && static_cast<double>(n) <= f.max_finite();
  }
  return stores_exactly(static_cast<double>(n), dtype);
}

Tensor constant_tensor(const AttrMap& attrs, const ir::Type& type) {
  const auto& values = attrs.get_reals("value");
  auto sizes = sizes_of(type);
  std::int64_t n = numel_of(sizes);
  if (static_cast<std::int64_t>(values.size()) == n) return Tensor::from_values(values, sizes, type.policy);
  std::vector<double> full(static_cast<std::size_t>(n), values.empty() ? 0.0 : values[0]);
  return Tensor::from_values(full, sizes, type.policy);
}

void add_constant(ir::Registry& r) {
  r.add(OpDef{
      .name = "graph.constant",
      .summary = "A tensor given by its values (row-major; a single value fills the shape), each exact in storage.",
      .attrs = {{.name = "value",
                 .kind = ir::AttrKind::real_list,
                 .required = true,
                 .doc = "elements in row-major order, or one value for every element"},
                shape_attr("shape"),
                policy_attr("policy")},
      .infer =
          [](std::span<const ir::Type>, const AttrMap& attrs) {
            auto sizes = fixed_sizes(attrs);
            const NumericsPolicy& policy = attrs.get_policy("policy");
            const auto& values = attrs.get_reals("value");
            std::int64_t n = numel_of(sizes);
            std::int64_t count = static_cast<std::int64_t>(values.size());
            if (count != n && count != 1) {
              raise(ErrorCode::ShapeMismatch, "attribute 'value' has " + std::to_string(count) +
                                                  " element(s), but shape " + shape_str(attrs.get_shape("shape")) +
                                                  " needs " + std::to_string(n) + " (or 1 to fill it)");
            }
            for (std::size_t i = 0; i < values.size(); ++i) {
              if (stores_exactly(values[i], policy.storage)) continue;
              double nearest = decode_value(encode_value(values[i], policy.storage), policy.storage);
              raise(ErrorCode::ArgumentInvalid,
                    "attribute 'value' element " + std::to_string(i) + " (" + print_double(values[i]) +
                        ") is not exactly a " + std::string(name(policy.storage)) + " value (nearest is " +
                        print_double(nearest) + "); constants hold values their storage dtype stores exactly");
            }
            return std::vector<ir::Type>{ir::Type::tensor(attrs.get_shape("shape"), policy)};
          },
      .reference =
          [](const KernelCall& call) { return std::vector<Tensor>{constant_tensor(call.attrs, call.result_types[0])}; },
  });
}

void add_iota(ir::Registry& r) {
  r.add(OpDef{
      .name = "graph.iota",
      .summary = "A tensor whose every element is its index along `axis` (0, 1, 2, ...).",
      .attrs = {shape_attr("shape"), int_attr("axis", 0), policy_attr("policy")},
      .infer =
          [](std::span<const ir::Type>, const AttrMap& attrs) {
            auto sizes = fixed_sizes(attrs);
            std::int64_t axis = normalize_axis(attrs.get_int("axis"), sizes.size(), "attribute 'axis'");
            const NumericsPolicy& policy = attrs.get_policy("policy");
            std::int64_t last = sizes[static_cast<std::size_t>(axis)] - 1;
            if (numel_of(sizes) > 0 && !holds_integers_up_to(last, policy.storage)) {
              raise(ErrorCode::DtypeUnsupported, "indices 0.." + std::to_string(last) + " along axis " +
                                                     std::to_string(axis) + " are not all exact " +
                                                     std::string(name(policy.storage)) + " values");
            }
            return std::vector<ir::Type>{ir::Type::tensor(attrs.get_shape("shape"), policy)};
          },
      .reference =
          [](const KernelCall& call) {
            const ir::Type& type = call.result_types[0];
            auto sizes = sizes_of(type);
            std::int64_t axis = normalize_axis(call.attrs.get_int("axis"), sizes.size(), "attribute 'axis'");
            // Row-major: the index along `axis` is (e / inner) % size.
            std::int64_t inner = 1;
            for (std::size_t d = static_cast<std::size_t>(axis) + 1; d < sizes.size(); ++d) inner *= sizes[d];
            std::int64_t size = sizes[static_cast<std::size_t>(axis)];
            std::vector<double> values(static_cast<std::size_t>(numel_of(sizes)));
            for (std::size_t e = 0; e < values.size(); ++e) {
              values[e] = static_cast<double>((static_cast<std::int64_t>(e) / inner) % size);
            }
            return std::vector<Tensor>{Tensor::from_values(values, sizes, type.policy)};
          },
  });
}

// The tensor's elements as doubles, raising when a double cannot hold one.
std::vector<double> exact_values(const Tensor& t) {
  if (t.dtype() != DType::int64) return t.to_values();
  auto codes = t.codes();
  std::vector<double> out(codes.size());
  constexpr double two63 = 9223372036854775808.0;
  for (std::size_t i = 0; i < codes.size(); ++i) {
    auto v = std::bit_cast<std::int64_t>(codes[i]);
    double d = static_cast<double>(v);
    if (!(d >= -two63 && d < two63) || static_cast<std::int64_t>(d) != v) {
      raise(ErrorCode::ArgumentInvalid, "int64 element " + std::to_string(i) + " is " + std::to_string(v) +
                                            ", beyond 2^53 in magnitude: a double cannot hold it exactly, so a "
                                            "graph.constant cannot store it");
    }
    out[i] = d;
  }
  return out;
}

}  // namespace

void register_creation_ops(ir::Registry& registry) {
  add_constant(registry);
  add_iota(registry);
}

ir::Operation* build_constant(ir::OpBuilder& builder, const Tensor& value, SourceLocation location) {
  std::vector<double> values;
  try {
    values = exact_values(value);
    // Decoding then encoding must give the same bits, or the constant would
    // not reproduce the tensor (NaN payloads are what can differ).
    if (Tensor::from_values(values, value.shape(), value.policy()).codes() != value.codes()) {
      raise(ErrorCode::ArgumentInvalid,
            "tensor " + describe(value) + " holds encodings (NaN payloads) that decoded values cannot reproduce");
    }
  } catch (const Error& e) {
    ir::rethrow_for_op(e, "graph.constant", location);
  }
  // One value fills the shape when every element has the same bits.
  auto same_bits = [&](double v) { return std::bit_cast<std::uint64_t>(v) == std::bit_cast<std::uint64_t>(values[0]); };
  if (values.size() > 1 && std::all_of(values.begin(), values.end(), same_bits)) values.resize(1);
  AttrMap attrs{{"value", std::move(values)}, {"shape", ir::fixed_shape(value.shape())}, {"policy", value.policy()}};
  return builder.create("graph.constant", {}, std::move(attrs), std::move(location));
}

}  // namespace tessera::graph
