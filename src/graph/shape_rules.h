// Shape rules shared by the Graph IR op definitions (inference side).
//
// Dims are fixed sizes or symbols. Two dims agree when they are equal; a
// fixed 1 broadcasts against anything. A symbol against a different symbol
// or a fixed size other than 1 is a ShapeError: the compiler cannot prove
// them equal, so the user must say so (reshape, or name the dims alike).
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "tessera/ir/type.h"

namespace tessera::graph {

using ir::Dim;
using ir::Shape;
using ir::Type;

// Numpy-style broadcast of two shapes (aligned on the right).
Shape broadcast_shapes(const Shape& a, const Shape& b, std::string_view what = "operands");
// Wraps a possibly negative axis into [0, rank); ShapeError otherwise.
std::int64_t normalize_axis(std::int64_t axis, std::size_t rank, std::string_view what = "axis");
// Sorted, de-duplicated, normalized axes; empty `axes` means all axes.
std::vector<std::int64_t> normalize_axes(const std::vector<std::int64_t>& axes, std::size_t rank);
// graph.slice's numpy semantics for one axis of size n (step > 0): negative
// indices count from the end once, then both bounds clamp to [0, n]. A stop
// at or beyond kSliceToEnd means "to the end" even for a symbolic dim.
inline constexpr std::int64_t kSliceToEnd = std::int64_t{1} << 62;
struct AxisSlice {
  std::int64_t start, step, size;
};
AxisSlice resolve_slice(std::int64_t start, std::int64_t stop, std::int64_t step, std::int64_t n);
// Product of dims as a Dim when every dim is fixed, else nullopt.
std::optional<std::int64_t> fixed_product(std::span<const Dim> dims);
// Raises DtypeError unless the policy's storage is a float format.
void require_float(const Type& t, std::string_view op, std::string_view operand);
// Raises DtypeError unless the storage is an integer type.
void require_integer(const Type& t, std::string_view op, std::string_view operand);
// "[B, 64]"
inline std::string shape_str(const Shape& s) {
  return ir::print_shape(s);
}

}  // namespace tessera::graph
