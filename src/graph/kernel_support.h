// Helpers for the Graph IR reference kernels (ARCHITECTURE.md decision 4).
//
// The reference discipline: decode every input to double (exact for every
// format of 32 bits or fewer), compute, round each intermediate the policy
// says to the accumulation type with round_to(), and finally encode results
// to storage with the result policy's rounding and overflow (make_result).
// Accumulation orders are fixed and written next to each kernel.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "tessera/ir/dialect.h"
#include "tessera/ir/type.h"
#include "tessera/runtime/tensor.h"

namespace tessera::graph {

// Rounds v to the nearest value of `dtype` (ties to even), as a register of
// that type would hold it. fp64 is exact; integer types round to nearest
// even and saturate at the type's range.
double round_to(double v, DType dtype);

// The number of codes of `storage` when graph.lookup can index a table by
// them (a real float format of at most 16 bits: 2^bits), else nullopt.
std::optional<std::int64_t> lookup_code_count(DType storage);

// The static sizes of a result type (the executor binds symbols first).
std::vector<std::int64_t> sizes_of(const ir::Type& type);
std::int64_t numel_of(const std::vector<std::int64_t>& sizes);

// Values in row-major order -> tensor of `type`: each value is rounded to
// the accumulation type, then encoded to storage with the policy's rounding
// and overflow (stochastic rounding keyed by `seed`).
Tensor make_result(std::span<const double> values, const ir::Type& type, std::uint64_t seed = 0);

// For each element of `out_shape` (row-major), the row-major index of the
// element of `in_shape` it reads under numpy broadcasting.
std::vector<std::int64_t> broadcast_offsets(const std::vector<std::int64_t>& in_shape,
                                            const std::vector<std::int64_t>& out_shape);

// Splits `shape` around `axes` (sorted): `outer` enumerates the kept dims in
// row-major order, `inner` the reduced dims in row-major order; element
// (o, r) lives at offsets[o * inner + r] of the row-major input.
struct ReductionLayout {
  std::int64_t outer = 1;
  std::int64_t inner = 1;
  std::vector<std::int64_t> offsets;
};
ReductionLayout reduction_layout(const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>& axes);

// A reference kernel that moves 64-bit codes (shape ops, slice_embed,
// stop_gradient), extended to complex128, whose 16-byte elements have no
// 64-bit code: it moves the real and the imaginary parts as fp64 views and
// joins them (shape_ops.cpp).
ir::ReferenceKernel moving_parts_of_complex128(ir::ReferenceKernel kernel);

// Attribute-spec shorthands for op definitions.
ir::AttrSpec int_attr(std::string name, std::optional<std::int64_t> default_value = std::nullopt);
ir::AttrSpec real_attr(std::string name, std::optional<double> default_value = std::nullopt);
ir::AttrSpec bool_attr(std::string name, bool default_value);
ir::AttrSpec ints_attr(std::string name, std::optional<std::vector<std::int64_t>> default_value = std::nullopt);
ir::AttrSpec string_attr(std::string name, std::optional<std::string> default_value = std::nullopt);
ir::AttrSpec policy_attr(std::string name);
ir::AttrSpec shape_attr(std::string name);

}  // namespace tessera::graph
