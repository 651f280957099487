// The deterministic reduction every collective backend must reproduce
// (communicator.h): element by element in rank order, each step rounded to
// the accumulation type, the result rounded once to the storage.
#include <cmath>
#include <cstring>
#include <limits>

#include "dist/shard_copy.h"
#include "tessera/dist/communicator.h"
#include "tessera/numerics/convert.h"
#include "tessera/support/error.h"

namespace tessera::dist {
namespace {

// x rounded to the accumulation type (to nearest; fp64 exact).
double to_accum(double x, DType accum) {
  if (accum == DType::fp64) return x;
  if (accum == DType::fp32) return static_cast<double>(static_cast<float>(x));
  return decode_value(encode_value(x, accum), accum);
}

double combine(double acc, double v, ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::mean: return acc + v;
    case ReduceOp::max: return (std::isnan(acc) || std::isnan(v)) ? std::numeric_limits<double>::quiet_NaN() : std::max(acc, v);
    case ReduceOp::min: return (std::isnan(acc) || std::isnan(v)) ? std::numeric_limits<double>::quiet_NaN() : std::min(acc, v);
  }
  return acc;
}

}  // namespace

ReduceOp parse_reduce_op(std::string_view text) {
  if (text == "sum") return ReduceOp::sum;
  if (text == "mean") return ReduceOp::mean;
  if (text == "max") return ReduceOp::max;
  if (text == "min") return ReduceOp::min;
  raise(ErrorCode::ArgumentInvalid, "collective op '" + std::string(text) + "'; expected \"sum\", \"mean\", \"max\" or \"min\"");
}

std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::mean: return "mean";
    case ReduceOp::max: return "max";
    case ReduceOp::min: return "min";
  }
  return "?";
}

Tensor reduce_in_rank_order(const std::vector<Tensor>& xs, ReduceOp op) {
  if (xs.empty()) raise(ErrorCode::Internal, "reduce_in_rank_order of no tensors");
  const NumericsPolicy& p = xs[0].policy();
  const std::int64_t n = xs[0].numel();
  std::vector<Tensor> host;
  for (const Tensor& x : xs) host.push_back((x.is_cpu() ? x : x.to("cpu")).contiguous());
  if (p.storage == DType::fp32 && p.accum == DType::fp32 && p.rounding == Rounding::nearest_even &&
      p.overflow == Overflow::inf_nan && op != ReduceOp::mean) {
    // fp32 at fp32: the same steps on floats directly.
    Tensor out = Tensor::empty(xs[0].shape(), p);
    auto* o = static_cast<float*>(out.data());
    if (n > 0) std::memcpy(o, host[0].data(), static_cast<std::size_t>(n) * sizeof(float));
    for (std::size_t r = 1; r < host.size(); ++r) {
      const auto* v = static_cast<const float*>(host[r].data());
      for (std::int64_t i = 0; i < n; ++i) {
        o[i] = static_cast<float>(combine(o[i], v[i], op));
      }
    }
    return out;
  }
  if (!is_float(p.storage)) {
    // Integers: exact in double below 2^53, checked; the result saturates like every integer result.
    std::vector<double> acc = host[0].to_values();
    for (std::size_t r = 1; r < host.size(); ++r) {
      const std::vector<double> v = host[r].to_values();
      for (std::int64_t i = 0; i < n; ++i) {
        acc[static_cast<std::size_t>(i)] = combine(acc[static_cast<std::size_t>(i)], v[static_cast<std::size_t>(i)], op);
        if (std::fabs(acc[static_cast<std::size_t>(i)]) > 9007199254740992.0) {
          raise(ErrorCode::Collective, "an integer " + std::string(reduce_op_name(op)) + " over " +
                                           std::to_string(xs.size()) + " members passed 2^53 at element " +
                                           std::to_string(i));
        }
      }
    }
    if (op == ReduceOp::mean) {
      for (double& a : acc) a = std::trunc(a / static_cast<double>(xs.size()));
    }
    return Tensor::from_values(acc, xs[0].shape(), p);
  }
  std::vector<double> acc = host[0].to_values();
  for (double& a : acc) a = to_accum(a, p.accum);
  for (std::size_t r = 1; r < host.size(); ++r) {
    const std::vector<double> v = host[r].to_values();
    for (std::size_t i = 0; i < acc.size(); ++i) acc[i] = to_accum(combine(acc[i], v[i], op), p.accum);
  }
  if (op == ReduceOp::mean) {
    for (double& a : acc) a = to_accum(a / static_cast<double>(xs.size()), p.accum);
  }
  return Tensor::from_values(acc, xs[0].shape(), p);
}

}  // namespace tessera::dist
