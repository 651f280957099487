#include "graph/kernel_support.h"

#include <cmath>

#include "runtime/strided_walk.h"
#include "tessera/numerics/convert.h"
#include "tessera/support/error.h"

namespace tessera::graph {

double round_to(double v, DType dtype) {
  switch (dtype) {
    case DType::fp64: return v;
    case DType::fp32: return static_cast<double>(static_cast<float>(v));
    default: return decode_value(encode_value(v, dtype), dtype);
  }
}

std::vector<std::int64_t> sizes_of(const ir::Type& type) {
  auto sizes = ir::static_sizes(type.shape);
  if (!sizes) raise(ErrorCode::Internal, "reference kernel got unbound symbolic shape " + ir::print_type(type));
  return *sizes;
}

std::int64_t numel_of(const std::vector<std::int64_t>& sizes) {
  std::int64_t n = 1;
  for (auto s : sizes) n *= s;
  return n;
}

Tensor make_result(std::span<const double> values, const ir::Type& type, std::uint64_t seed) {
  std::vector<double> rounded(values.begin(), values.end());
  if (type.policy.accum != DType::fp64 && is_float(type.policy.accum)) {
    for (double& v : rounded) v = round_to(v, type.policy.accum);
  }
  return Tensor::from_values(rounded, sizes_of(type), type.policy, seed);
}

std::vector<std::int64_t> broadcast_offsets(const std::vector<std::int64_t>& in_shape,
                                            const std::vector<std::int64_t>& out_shape) {
  std::size_t rank = out_shape.size();
  std::vector<std::int64_t> in_strides(rank, 0);
  std::int64_t stride = 1;
  for (std::size_t k = 0; k < in_shape.size(); ++k) {
    std::size_t i = in_shape.size() - 1 - k;
    std::size_t o = rank - 1 - k;
    in_strides[o] = in_shape[i] == 1 ? 0 : stride;
    stride *= in_shape[i];
  }
  std::vector<std::int64_t> offsets;
  offsets.reserve(static_cast<std::size_t>(numel_of(out_shape)));
  for_each_offset(out_shape, in_strides, 0, [&](std::int64_t off) { offsets.push_back(off); });
  return offsets;
}

ReductionLayout reduction_layout(const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>& axes) {
  std::size_t rank = shape.size();
  std::vector<bool> reduced(rank, false);
  for (auto a : axes) reduced[static_cast<std::size_t>(a)] = true;
  auto strides = contiguous_strides(shape);
  std::vector<std::int64_t> kept_dims, red_dims;
  ReductionLayout layout;
  for (std::size_t d = 0; d < rank; ++d) {
    if (reduced[d]) {
      red_dims.push_back(static_cast<std::int64_t>(d));
      layout.inner *= shape[d];
    } else {
      kept_dims.push_back(static_cast<std::int64_t>(d));
      layout.outer *= shape[d];
    }
  }
  layout.offsets.resize(static_cast<std::size_t>(layout.outer * layout.inner));
  auto enumerate = [&](const std::vector<std::int64_t>& dims) {
    std::vector<std::int64_t> offs{0};
    for (auto d : dims) {
      std::vector<std::int64_t> next;
      next.reserve(offs.size() * static_cast<std::size_t>(shape[static_cast<std::size_t>(d)]));
      for (auto base : offs) {
        for (std::int64_t i = 0; i < shape[static_cast<std::size_t>(d)]; ++i) {
          next.push_back(base + i * strides[static_cast<std::size_t>(d)]);
        }
      }
      offs = std::move(next);
    }
    return offs;
  };
  auto outer_offs = enumerate(kept_dims);
  auto inner_offs = enumerate(red_dims);
  for (std::size_t o = 0; o < outer_offs.size(); ++o) {
    for (std::size_t r = 0; r < inner_offs.size(); ++r) {
      layout.offsets[o * inner_offs.size() + r] = outer_offs[o] + inner_offs[r];
    }
  }
  return layout;
}

ir::AttrSpec int_attr(std::string name, std::optional<std::int64_t> d) {
  ir::AttrSpec s{.name = std::move(name), .kind = ir::AttrKind::integer, .required = !d.has_value()};
  if (d) s.default_value = *d;
  return s;
}
ir::AttrSpec real_attr(std::string name, std::optional<double> d) {
  ir::AttrSpec s{.name = std::move(name), .kind = ir::AttrKind::real, .required = !d.has_value()};
  if (d) s.default_value = *d;
  return s;
}
ir::AttrSpec bool_attr(std::string name, bool d) {
  return ir::AttrSpec{.name = std::move(name), .kind = ir::AttrKind::boolean, .required = false, .default_value = d};
}
ir::AttrSpec ints_attr(std::string name, std::optional<std::vector<std::int64_t>> d) {
  ir::AttrSpec s{.name = std::move(name), .kind = ir::AttrKind::int_list, .required = !d.has_value()};
  if (d) s.default_value = *d;
  return s;
}
ir::AttrSpec string_attr(std::string name, std::optional<std::string> d) {
  ir::AttrSpec s{.name = std::move(name), .kind = ir::AttrKind::string, .required = !d.has_value()};
  if (d) s.default_value = *d;
  return s;
}
ir::AttrSpec policy_attr(std::string name) {
  return ir::AttrSpec{.name = std::move(name), .kind = ir::AttrKind::policy, .required = true};
}
ir::AttrSpec shape_attr(std::string name) {
  return ir::AttrSpec{.name = std::move(name), .kind = ir::AttrKind::shape, .required = true};
}

}  // namespace tessera::graph
