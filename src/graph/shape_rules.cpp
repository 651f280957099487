#include "graph/shape_rules.h"

#include <algorithm>

#include "tessera/support/error.h"

namespace tessera::graph {

Shape broadcast_shapes(const Shape& a, const Shape& b, std::string_view what) {
  std::size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (std::size_t i = 0; i < rank; ++i) {
    const Dim* da = i < rank - a.size() ? nullptr : &a[i - (rank - a.size())];
    const Dim* db = i < rank - b.size() ? nullptr : &b[i - (rank - b.size())];
    if (!da) {
      out[i] = *db;
    } else if (!db) {
      out[i] = *da;
    } else if (*da == *db) {
      out[i] = *da;
    } else if (da->is_fixed(1)) {
      out[i] = *db;
    } else if (db->is_fixed(1)) {
      out[i] = *da;
    } else {
      raise(ErrorCode::ShapeMismatch, "cannot broadcast " + std::string(what) + " of shapes " + shape_str(a) +
                                          " and " + shape_str(b) + ": dim " + std::to_string(i) + " is " +
                                          da->str() + " vs " + db->str());
    }
  }
  return out;
}

std::int64_t normalize_axis(std::int64_t axis, std::size_t rank, std::string_view what) {
  auto r = static_cast<std::int64_t>(rank);
  if (axis < -r || axis >= r) {
    raise(ErrorCode::ShapeMismatch, std::string(what) + " " + std::to_string(axis) + " is out of range for rank " +
                                        std::to_string(rank));
  }
  return axis < 0 ? axis + r : axis;
}

std::vector<std::int64_t> normalize_axes(const std::vector<std::int64_t>& axes, std::size_t rank) {
  std::vector<std::int64_t> out;
  if (axes.empty()) {
    for (std::size_t i = 0; i < rank; ++i) out.push_back(static_cast<std::int64_t>(i));
    return out;
  }
  for (auto a : axes) out.push_back(normalize_axis(a, rank));
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end()) {
    raise(ErrorCode::ShapeMismatch, "axes list names the same axis twice");
  }
  return out;
}

std::optional<std::int64_t> fixed_product(std::span<const Dim> dims) {
  std::int64_t p = 1;
  for (const auto& d : dims) {
    if (d.is_symbolic()) return std::nullopt;
    p *= d.size;
  }
  return p;
}

void require_float(const Type& t, std::string_view op, std::string_view operand) {
  if (!is_float(t.dtype()) || t.dtype() == DType::e8m0) {
    raise(ErrorCode::DtypeUnsupported, std::string(op) + " needs a floating-point " + std::string(operand) +
                                           ", got " + std::string(name(t.dtype())) +
                                           "; cast it first (graph.cast / tessera.ops.cast)");
  }
}

void require_integer(const Type& t, std::string_view op, std::string_view operand) {
  if (is_float(t.dtype()) || t.dtype() == DType::bool_) {
    raise(ErrorCode::DtypeUnsupported, std::string(op) + " needs an integer " + std::string(operand) + ", got " +
                                           std::string(name(t.dtype())));
  }
}

AxisSlice resolve_slice(std::int64_t start, std::int64_t stop, std::int64_t step, std::int64_t n) {
  auto wrap = [n](std::int64_t i) {
    if (i < 0) i = i < -n ? 0 : i + n;
    return std::min(i, n);
  };
  const std::int64_t b = wrap(start), e = wrap(stop);
  return {b, step, e > b ? (e - b - 1) / step + 1 : 0};  // no overflow for huge steps
}

}  // namespace tessera::graph
