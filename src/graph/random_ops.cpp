// Graph IR random ops: rand, randn, dropout (Effect::random).
//
// Counter scheme. Every draw is 32 bits from Philox4x32-10
// (tessera/numerics/philox.h): bits(c) = random_bits32(seed, c), where the
// counter c is a 64-bit element counter. With n the element's row-major index
// in the result and `offset` the op's attribute:
//
//   rand     u_n  = (bits(offset + n) >> 8) * 2^-24                  in [0, 1)
//   randn    u1_n = ((bits(offset + 2n) >> 8) + 1) * 2^-24            in (0, 1]
//            u2_n = (bits(offset + 2n + 1) >> 8) * 2^-24              in [0, 1)
//            z_n  = sqrt(-2 ln u1_n) * cos(2 pi u2_n)       (Box-Muller, cosine branch)
//   dropout  keep element n iff u_n >= p, u_n as for rand; kept elements are
//            x_n / (1 - p), dropped ones are 0 (even when x_n is NaN or inf).
//
// So a result depends only on (seed, offset, n): it is the same however the
// work is split, and a caller that wants fresh numbers for the next draw
// advances `offset` by the counters used (n for rand and dropout, 2n for
// randn); tessera.ops.philox keys do exactly that. Values are computed in
// double and go through make_result (rounded once to the accumulation type,
// then encoded with the policy's rounding). rand clamps to the largest value
// below 1 of the storage and accumulation formats, so it stays in [0, 1) even
// where rounding to a narrow format would reach 1.0. dropout with p = 0 is
// the identity and returns the operand's encodings unchanged.
#include <cmath>
#include <limits>
#include <numbers>

#include "graph/kernel_support.h"
#include "graph/op_families.h"
#include "graph/shape_rules.h"
#include "tessera/numerics/convert.h"
#include "tessera/numerics/elementary.h"
#include "tessera/numerics/trigonometric.h"
#include "tessera/numerics/philox.h"
#include "tessera/support/error.h"

namespace tessera::graph {

namespace {

using ir::AttrMap;
using ir::KernelCall;
using ir::OpDef;

constexpr double kTwoPow24 = 16777216.0;

double uniform_at(std::uint64_t seed, std::uint64_t counter) {
  return static_cast<double>(random_bits32(seed, counter) >> 8) / kTwoPow24;
}

// The seed and offset attributes as counters; negative values are rejected so
// that every (seed, offset) names one unsigned stream position.
std::pair<std::uint64_t, std::uint64_t> stream_of(const AttrMap& attrs, std::string_view op) {
  std::int64_t seed = attrs.get_int("seed"), offset = attrs.get_int("offset");
  if (seed < 0 || offset < 0) {
    raise(ErrorCode::ArgumentInvalid, std::string(op) + " needs seed >= 0 and offset >= 0, got seed " +
                                          std::to_string(seed) + ", offset " + std::to_string(offset));
  }
  return {static_cast<std::uint64_t>(seed), static_cast<std::uint64_t>(offset)};
}

std::vector<ir::Type> infer_creation(std::string_view op, const AttrMap& attrs) {
  const Shape& shape = attrs.get_shape("shape");
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (!shape[i].is_symbolic() && shape[i].size < 0) {
      raise(ErrorCode::ShapeMismatch, std::string(op) + " shape " + shape_str(shape) + " has negative dim " +
                                          std::to_string(shape[i].size) + " at position " + std::to_string(i));
    }
  }
  ir::Type t = ir::Type::tensor(shape, attrs.get_policy("policy"));
  require_float(t, op, "policy");
  stream_of(attrs, op);
  return {t};
}

// The largest value below 1.0 of a float format: the encoding just under 1.0's
// (codes of positive values are ordered like the values in every float format).
double below_one(DType dtype) {
  return decode_value(encode_value(1.0, dtype) - 1, dtype);
}

std::vector<Tensor> run_rand(const KernelCall& call) {
  const ir::Type& rt = call.result_types[0];
  auto [seed, offset] = stream_of(call.attrs, "graph.rand");
  double cap = below_one(rt.policy.storage);
  if (is_float(rt.policy.accum) && rt.policy.accum != DType::e8m0) cap = std::min(cap, below_one(rt.policy.accum));
  std::vector<double> v(static_cast<std::size_t>(numel_of(sizes_of(rt))));
  for (std::size_t n = 0; n < v.size(); ++n) v[n] = std::min(uniform_at(seed, offset + n), cap);
  return {make_result(v, rt)};
}

std::vector<Tensor> run_randn(const KernelCall& call) {
  const ir::Type& rt = call.result_types[0];
  auto [seed, offset] = stream_of(call.attrs, "graph.randn");
  std::vector<double> v(static_cast<std::size_t>(numel_of(sizes_of(rt))));
  for (std::size_t n = 0; n < v.size(); ++n) {
    double u1 = static_cast<double>((random_bits32(seed, offset + 2 * n) >> 8) + 1) / kTwoPow24;
    double u2 = uniform_at(seed, offset + 2 * n + 1);
    v[n] = std::sqrt(-2.0 * elementary::log(u1)) * elementary::cos(2.0 * std::numbers::pi * u2);
  }
  return {make_result(v, rt)};
}

double dropout_p(const AttrMap& attrs) {
  double p = attrs.get_real("p");
  if (!(p >= 0.0 && p < 1.0)) {
    raise(ErrorCode::ArgumentInvalid, "dropout probability p must be in [0, 1), got " + std::to_string(p));
  }
  return p;
}

std::vector<Tensor> run_dropout(const KernelCall& call) {
  const Tensor& x = call.inputs[0];
  const ir::Type& rt = call.result_types[0];
  double p = dropout_p(call.attrs);
  auto [seed, offset] = stream_of(call.attrs, "graph.dropout");
  if (p == 0.0) {
    auto codes = x.codes();
    return {Tensor::from_codes(codes, sizes_of(rt), rt.policy)};
  }
  auto v = x.to_values();
  // Dividing (rather than multiplying by a rounded 1/(1-p)) keeps each kept value one rounding from exact.
  const double keep = 1.0 - p;
  for (std::size_t n = 0; n < v.size(); ++n) v[n] = uniform_at(seed, offset + n) >= p ? v[n] / keep : 0.0;
  return {make_result(v, rt)};
}

}  // namespace

void register_random_ops(ir::Registry& r) {
  r.add(OpDef{
      .name = "graph.rand",
      .summary = "Uniform [0, 1) samples of `shape` and `policy`: element n is (philox(seed, offset+n) >> 8) * 2^-24.",
      .attrs = {shape_attr("shape"), policy_attr("policy"), int_attr("seed"), int_attr("offset", 0)},
      .effect = ir::Effect::random,
      .infer = [](std::span<const ir::Type>, const AttrMap& attrs) { return infer_creation("graph.rand", attrs); },
      .reference = run_rand,
  });
  r.add(OpDef{
      .name = "graph.randn",
      .summary = "Standard normal samples (Box-Muller) of `shape` and `policy`; element n uses counters offset+2n "
                 "and offset+2n+1.",
      .attrs = {shape_attr("shape"), policy_attr("policy"), int_attr("seed"), int_attr("offset", 0)},
      .effect = ir::Effect::random,
      .infer = [](std::span<const ir::Type>, const AttrMap& attrs) { return infer_creation("graph.randn", attrs); },
      .reference = run_randn,
  });
  r.add(OpDef{
      .name = "graph.dropout",
      .summary = "Zeroes element n unless u_n >= p (u_n as in graph.rand) and scales kept ones by 1/(1-p).",
      .operands = {"x"},
      .attrs = {real_attr("p"), int_attr("seed"), int_attr("offset", 0)},
      .effect = ir::Effect::random,
      .infer =
          [](std::span<const ir::Type> in, const AttrMap& attrs) {
            require_float(in[0], "graph.dropout", "operand");
            dropout_p(attrs);
            stream_of(attrs, "graph.dropout");
            return std::vector<ir::Type>{in[0]};
          },
      .reference = run_dropout,
  });
}

}  // namespace tessera::graph
