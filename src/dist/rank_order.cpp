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

Algorithm parse_algorithm(std::string_view text) {
  if (text == "rank_order") return Algorithm::rank_order;
  if (text == "ring") return Algorithm::ring;
  if (text == "tree") return Algorithm::tree;
  if (text == "native") return Algorithm::native;
  raise(ErrorCode::ArgumentInvalid, "collective algorithm '" + std::string(text) +
                                        "'; expected \"rank_order\", \"ring\", \"tree\" or \"native\"");
}

std::string_view algorithm_name(Algorithm a) {
  switch (a) {
    case Algorithm::rank_order: return "rank_order";
    case Algorithm::ring: return "ring";
    case Algorithm::tree: return "tree";
    case Algorithm::native: return "native";
  }
  return "?";
}

namespace {

// Elements [begin, end) of a contiguous host tensor, as values.
std::vector<double> values_of(const Tensor& t, std::int64_t begin, std::int64_t end) {
  if (is_packed(t.dtype())) {
    const std::vector<double> all = t.to_values();
    return std::vector<double>(all.begin() + begin, all.begin() + end);
  }
  return t.reshape({t.numel()}).as_strided({end - begin}, {1}, begin).to_values();
}

// The rank-order reduction of elements [begin, end), as values: floats at
// the accumulation type, integers exactly (checked against 2^53).
std::vector<double> reduce_values(const std::vector<Tensor>& host, ReduceOp op, std::int64_t begin, std::int64_t end) {
  const NumericsPolicy& p = host[0].policy();
  std::vector<double> acc = values_of(host[0], begin, end);
  const bool integer = !is_float(p.storage);
  if (!integer)
    for (double& a : acc) a = to_accum(a, p.accum);
  for (std::size_t r = 1; r < host.size(); ++r) {
    const std::vector<double> v = values_of(host[r], begin, end);
    for (std::size_t i = 0; i < acc.size(); ++i) {
      acc[i] = combine(acc[i], v[i], op);
      if (integer) {
        if (std::fabs(acc[i]) > 9007199254740992.0) {
          raise(ErrorCode::Collective, "an integer " + std::string(reduce_op_name(op)) + " over " +
                                           std::to_string(host.size()) + " members passed 2^53 at element " +
                                           std::to_string(begin + static_cast<std::int64_t>(i)));
        }
      } else {
        acc[i] = to_accum(acc[i], p.accum);
      }
    }
  }
  if (op == ReduceOp::mean) {
    const auto count = static_cast<double>(host.size());
    for (double& a : acc) a = integer ? std::trunc(a / count) : to_accum(a / count, p.accum);
  }
  return acc;
}

bool plain_fp32(const NumericsPolicy& p) {
  return p.storage == DType::fp32 && p.accum == DType::fp32 && p.rounding == Rounding::nearest_even &&
         p.overflow == Overflow::inf_nan;
}

// a (op) b in float, as reduce_range_in_place's fp32 loops combine (NaN wins max and min).
float combine_f32(float a, float b, ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::mean: return a + b;
    case ReduceOp::max: return (a != a || b != b) ? std::numeric_limits<float>::quiet_NaN() : (b > a ? b : a);
    case ReduceOp::min: return (a != a || b != b) ? std::numeric_limits<float>::quiet_NaN() : (b < a ? b : a);
  }
  return a;
}

}  // namespace

bool reduce_range_in_place(const std::vector<Tensor>& host, ReduceOp op, std::int64_t begin, std::int64_t end,
                           const Tensor& out) {
  const NumericsPolicy& p = host[0].policy();
  if (end <= begin) return true;
  if (plain_fp32(p) && op != ReduceOp::mean) {
    // fp32 at fp32: float operations, which are the double ones rounded once.
    float* o = static_cast<float*>(out.data()) + begin;
    const std::int64_t n = end - begin;
    std::memcpy(o, static_cast<const float*>(host[0].data()) + begin, static_cast<std::size_t>(n) * sizeof(float));
    for (std::size_t r = 1; r < host.size(); ++r) {
      const float* v = static_cast<const float*>(host[r].data()) + begin;
      switch (op) {
        case ReduceOp::sum:
          for (std::int64_t i = 0; i < n; ++i) o[i] = o[i] + v[i];
          break;
        case ReduceOp::max:
          for (std::int64_t i = 0; i < n; ++i)
            o[i] = (o[i] != o[i] || v[i] != v[i]) ? std::numeric_limits<float>::quiet_NaN() : (v[i] > o[i] ? v[i] : o[i]);
          break;
        case ReduceOp::min:
          for (std::int64_t i = 0; i < n; ++i)
            o[i] = (o[i] != o[i] || v[i] != v[i]) ? std::numeric_limits<float>::quiet_NaN() : (v[i] < o[i] ? v[i] : o[i]);
          break;
        case ReduceOp::mean: break;
      }
    }
    return true;
  }
  if (is_packed(p.storage)) return false;  // packed results are computed whole
  const Tensor chunk = Tensor::from_values(reduce_values(host, op, begin, end), {end - begin}, p);
  const std::size_t es = static_cast<std::size_t>(storage_bytes(p.storage));
  std::memcpy(static_cast<std::byte*>(out.data()) + static_cast<std::size_t>(begin) * es, chunk.data(),
              static_cast<std::size_t>(end - begin) * es);
  return true;
}

namespace {

// Elements [begin, end) of a contiguous host tensor as a contiguous 1-D tensor.
Tensor flat_range(const Tensor& t, std::int64_t begin, std::int64_t end) {
  return t.reshape({t.numel()}).as_strided({end - begin}, {1}, begin).contiguous();
}

}  // namespace

bool reduce_range_with(const std::vector<Tensor>& host, ReduceOp op, Algorithm algorithm, std::size_t part,
                       std::int64_t begin, std::int64_t end, const Tensor& out) {
  const std::size_t p = host.size();
  const NumericsPolicy& policy = host[0].policy();
  if (algorithm == Algorithm::native || algorithm == Algorithm::rank_order || op == ReduceOp::mean || p < 2 ||
      is_packed(policy.storage) || end <= begin) {
    return reduce_range_in_place(host, op, begin, end, out);
  }
  if (algorithm == Algorithm::ring) {
    // A ring reduce-scatter: part c is passed on from member c + 1 and
    // arrives complete at member c.
    std::vector<Tensor> rotated;
    for (std::size_t i = 1; i <= p; ++i) rotated.push_back(host[(part + i) % p]);
    return reduce_range_in_place(rotated, op, begin, end, out);
  }
  // Tree: neighbours combine pairwise, level by level; each partial is
  // rounded to the storage type, as the message carrying it would be.
  if (plain_fp32(policy)) {
    // fp32 at fp32: float operations on the members' own buffers, partials in
    // scratch vectors (no tensor views, which copy element by element).
    const std::size_t n = static_cast<std::size_t>(end - begin);
    std::vector<const float*> level;
    for (const Tensor& t : host) level.push_back(static_cast<const float*>(t.data()) + begin);
    std::vector<std::vector<float>> scratch;
    scratch.reserve(p);
    while (level.size() > 1) {
      std::vector<const float*> next;
      for (std::size_t i = 0; i < level.size(); i += 2) {
        if (i + 1 == level.size()) {
          next.push_back(level[i]);
          continue;
        }
        std::vector<float>& pair = scratch.emplace_back(n);
        const float* a = level[i];
        const float* b = level[i + 1];
        for (std::size_t k = 0; k < n; ++k) pair[k] = combine_f32(a[k], b[k], op);
        next.push_back(pair.data());
      }
      level = std::move(next);
    }
    std::memcpy(static_cast<float*>(out.data()) + begin, level[0], n * sizeof(float));
    return true;
  }
  std::vector<Tensor> level;
  for (const Tensor& t : host) level.push_back(flat_range(t, begin, end));
  const std::int64_t n = end - begin;
  while (level.size() > 1) {
    std::vector<Tensor> next;
    for (std::size_t i = 0; i < level.size(); i += 2) {
      if (i + 1 == level.size()) {
        next.push_back(level[i]);
        continue;
      }
      Tensor pair = Tensor::empty({n}, policy);
      reduce_range_in_place({level[i], level[i + 1]}, op, 0, n, pair);
      next.push_back(pair);
    }
    level = std::move(next);
  }
  const std::size_t es = static_cast<std::size_t>(storage_bytes(policy.storage));
  std::memcpy(static_cast<std::byte*>(out.data()) + static_cast<std::size_t>(begin) * es, level[0].data(),
              static_cast<std::size_t>(n) * es);
  return true;
}

Tensor reduce_in_rank_order(const std::vector<Tensor>& xs, ReduceOp op) {
  if (xs.empty()) raise(ErrorCode::Internal, "reduce_in_rank_order of no tensors");
  const NumericsPolicy& p = xs[0].policy();
  const std::int64_t n = xs[0].numel();
  std::vector<Tensor> host;
  for (const Tensor& x : xs) host.push_back((x.is_cpu() ? x : x.to("cpu")).contiguous());
  if (!is_packed(p.storage)) {
    Tensor out = Tensor::empty(xs[0].shape(), p);
    reduce_range_in_place(host, op, 0, n, out);
    return out;
  }
  return Tensor::from_values(reduce_values(host, op, 0, n), xs[0].shape(), p);  // packed formats, whole
}

}  // namespace tessera::dist
