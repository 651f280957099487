// Graph IR shape ops: reshape, transpose, broadcast_to, slice, concat, split,
// split_qkv, gather.
//
// These ops only move elements, so their reference kernels move encodings
// (Tensor::codes / from_codes) and never decode and re-encode: every bit
// pattern, NaN payloads and -0.0 included, arrives unchanged, and packed
// sub-byte formats (fp4, fp6, int4) move exactly like byte formats. Results
// keep the input's policy.
//
// Symbolic dims. A result dim is symbolic only when it provably equals an
// input dim: reshape moves symbols whole (the multiset of symbols of input and
// target must be equal and the fixed dims must multiply to the same count),
// full slices and untouched axes keep their symbol, and ops that would need
// arithmetic on a symbol (slicing part of it, concatenating or splitting
// along it) raise a ShapeError asking for a static dim.
#include <algorithm>
#include <cmath>

#include "graph/complex_kernels.h"
#include "graph/kernel_support.h"
#include "graph/op_families.h"
#include "graph/shape_rules.h"
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

std::string ints_str(const Sizes& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

}  // namespace

// A kernel that moves 64-bit codes, extended to complex128 (16-byte
// elements, no 64-bit code): it moves the real parts and the imaginary
// parts as fp64 tensors (strided views of the parts), and the two results
// are joined. Other dtypes run the kernel as it is.
ir::ReferenceKernel moving_parts_of_complex128(ir::ReferenceKernel kernel) {
  return [kernel](const KernelCall& call) {
    const bool wide = std::any_of(call.inputs.begin(), call.inputs.end(),
                                  [](const Tensor& t) { return t.dtype() == DType::complex128; });
    if (!wide) return kernel(call);
    std::vector<ir::Type> part_types;
    for (const ir::Type& rt : call.result_types) part_types.push_back(ir::Type::tensor(rt.shape, default_policy(DType::fp64)));
    auto moved = [&](std::int64_t part) {
      std::vector<Tensor> inputs;
      for (const Tensor& t : call.inputs) {
        if (t.dtype() != DType::complex128) {
          inputs.push_back(t);
          continue;
        }
        const Tensor parts = t.as_parts();
        Sizes strides(t.shape().size(), 2);
        for (std::size_t k = strides.size(); k-- > 1;) strides[k - 1] = strides[k] * t.shape()[k];
        inputs.push_back(parts.as_strided(t.shape(), strides, part));
      }
      return kernel(KernelCall{inputs, call.attrs, part_types});
    };
    const std::vector<Tensor> re = moved(0), im = moved(1);
    std::vector<Tensor> out;
    for (std::size_t r = 0; r < re.size(); ++r) {
      const std::vector<double> re_values = re[r].to_values(), im_values = im[r].to_values();
      std::vector<Complex> z(re_values.size());
      for (std::size_t i = 0; i < z.size(); ++i) z[i] = Complex(re_values[i], im_values[i]);
      out.push_back(make_complex_result(z, call.result_types[r]));
    }
    return out;
  };
}

namespace {

// The result tensor holding `codes` (row-major) with the result type's shape and policy.
Tensor result_from_codes(std::span<const std::uint64_t> codes, const ir::Type& type) {
  return Tensor::from_codes(codes, sizes_of(type), type.policy);
}

// Product of the sizes in [begin, end).
std::int64_t span_product(const Sizes& sizes, std::size_t begin, std::size_t end) {
  std::int64_t p = 1;
  for (std::size_t i = begin; i < end; ++i) p *= sizes[i];
  return p;
}

// Raises unless every fixed dim of a shape attribute is >= 0.
void check_target_dims(const Shape& shape, std::string_view op, std::string_view attr) {
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (!shape[i].is_symbolic() && shape[i].size < 0) {
      raise(ErrorCode::ShapeMismatch, std::string(op) + " attribute '" + std::string(attr) + "' " + shape_str(shape) +
                                          " has negative dim " + std::to_string(shape[i].size) + " at position " +
                                          std::to_string(i) +
                                          "; Graph IR shapes are explicit (tessera.ops.reshape resolves -1)");
    }
  }
}

// ---- reshape ----------------------------------------------------------------

std::vector<std::string> sorted_symbols(const Shape& s) {
  std::vector<std::string> out;
  for (const auto& d : s) {
    if (d.is_symbolic()) out.push_back(d.symbol);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::int64_t fixed_part(const Shape& s) {
  std::int64_t p = 1;
  for (const auto& d : s) {
    if (!d.is_symbolic()) p *= d.size;
  }
  return p;
}

std::vector<ir::Type> infer_reshape(std::span<const ir::Type> in, const AttrMap& attrs) {
  const Shape& target = attrs.get_shape("shape");
  check_target_dims(target, "graph.reshape", "shape");
  const Shape& src = in[0].shape;
  auto src_syms = sorted_symbols(src);
  auto dst_syms = sorted_symbols(target);
  if (src_syms != dst_syms) {
    raise(ErrorCode::ShapeMismatch, "cannot reshape " + shape_str(src) + " to " + shape_str(target) +
                                        ": symbolic dims must appear in both shapes the same number of times "
                                        "(reshape moves a symbol whole and cannot split or merge it)");
  }
  std::int64_t a = fixed_part(src), b = fixed_part(target);
  if (a != b) {
    std::string what = src_syms.empty() ? " elements" : " (product of the fixed dims)";
    raise(ErrorCode::ShapeMismatch, "cannot reshape " + shape_str(src) + " to " + shape_str(target) + ": " +
                                        std::to_string(a) + " vs " + std::to_string(b) + what);
  }
  return {ir::Type::tensor(target, in[0].policy)};
}

std::vector<Tensor> run_reshape(const KernelCall& call) {
  auto codes = call.inputs[0].codes();
  return {result_from_codes(codes, call.result_types[0])};
}

// ---- transpose --------------------------------------------------------------

// The permutation with negative entries wrapped; ShapeError unless it is one.
Sizes normalize_perm(const Sizes& perm, std::size_t rank) {
  if (perm.size() != rank) {
    raise(ErrorCode::ShapeMismatch, "perm " + ints_str(perm) + " has " + std::to_string(perm.size()) +
                                        " entries, the operand has rank " + std::to_string(rank));
  }
  Sizes out;
  std::vector<bool> seen(rank, false);
  for (auto p : perm) {
    std::int64_t a = normalize_axis(p, rank, "perm entry");
    if (seen[uz(a)]) {
      raise(ErrorCode::ShapeMismatch,
            "perm " + ints_str(perm) + " is not a permutation: axis " + std::to_string(a) + " appears twice");
    }
    seen[uz(a)] = true;
    out.push_back(a);
  }
  return out;
}

std::vector<ir::Type> infer_transpose(std::span<const ir::Type> in, const AttrMap& attrs) {
  Sizes perm = normalize_perm(attrs.get_ints("perm"), in[0].rank());
  Shape out;
  for (auto p : perm) out.push_back(in[0].shape[uz(p)]);
  return {ir::Type::tensor(out, in[0].policy)};
}

std::vector<Tensor> run_transpose(const KernelCall& call) {
  Sizes perm = normalize_perm(call.attrs.get_ints("perm"), call.inputs[0].rank());
  auto codes = call.inputs[0].permute(perm).codes();
  return {result_from_codes(codes, call.result_types[0])};
}

// ---- broadcast_to -----------------------------------------------------------

std::vector<ir::Type> infer_broadcast_to(std::span<const ir::Type> in, const AttrMap& attrs) {
  const Shape& target = attrs.get_shape("shape");
  check_target_dims(target, "graph.broadcast_to", "shape");
  const Shape& src = in[0].shape;
  std::string why;
  if (src.size() > target.size()) {
    why = "the target has fewer dims";
  } else {
    for (std::size_t k = 0; k < src.size() && why.empty(); ++k) {
      const Dim& s = src[src.size() - 1 - k];
      const Dim& t = target[target.size() - 1 - k];
      if (!(s == t || s.is_fixed(1))) {
        why = "operand dim " + std::to_string(src.size() - 1 - k) + " is " + s.str() + ", target dim " +
              std::to_string(target.size() - 1 - k) + " is " + t.str() + " (only size-1 dims broadcast)";
      }
    }
  }
  if (!why.empty()) {
    raise(ErrorCode::ShapeMismatch, "cannot broadcast " + shape_str(src) + " to " + shape_str(target) + ": " + why);
  }
  return {ir::Type::tensor(target, in[0].policy)};
}

std::vector<Tensor> run_broadcast_to(const KernelCall& call) {
  const Tensor& x = call.inputs[0];
  auto offsets = broadcast_offsets(x.shape(), sizes_of(call.result_types[0]));
  auto codes = x.codes();
  std::vector<std::uint64_t> out(offsets.size());
  for (std::size_t i = 0; i < offsets.size(); ++i) out[i] = codes[uz(offsets[i])];
  return {result_from_codes(out, call.result_types[0])};
}

// ---- slice ------------------------------------------------------------------

constexpr std::int64_t kToEnd = kSliceToEnd;

struct SliceAttrs {
  Sizes starts, stops, steps;
};

SliceAttrs slice_attrs(const AttrMap& attrs, std::size_t rank) {
  SliceAttrs s{attrs.get_ints("starts"), attrs.get_ints("stops"), attrs.get_ints("steps")};
  if (s.steps.empty()) s.steps.assign(rank, 1);
  auto check_len = [rank](const Sizes& v, std::string_view name) {
    if (v.size() != rank) {
      raise(ErrorCode::ShapeMismatch, "slice attribute '" + std::string(name) + "' " + ints_str(v) + " has " +
                                          std::to_string(v.size()) + " entries, the operand has rank " +
                                          std::to_string(rank) + " (one per axis)");
    }
  };
  check_len(s.starts, "starts");
  check_len(s.stops, "stops");
  check_len(s.steps, "steps");
  for (std::size_t a = 0; a < rank; ++a) {
    if (s.steps[a] <= 0) {
      raise(ErrorCode::ArgumentInvalid,
            "slice step on axis " + std::to_string(a) + " is " + std::to_string(s.steps[a]) + "; steps must be > 0");
    }
  }
  return s;
}

std::vector<ir::Type> infer_slice(std::span<const ir::Type> in, const AttrMap& attrs) {
  const Shape& src = in[0].shape;
  SliceAttrs s = slice_attrs(attrs, src.size());
  Shape out;
  for (std::size_t a = 0; a < src.size(); ++a) {
    if (src[a].is_symbolic()) {
      if (s.starts[a] == 0 && s.stops[a] >= kToEnd && s.steps[a] == 1) {
        out.push_back(src[a]);
        continue;
      }
      raise(ErrorCode::ShapeMismatch,
            "slice of axis " + std::to_string(a) + " (symbolic dim '" + src[a].symbol + "') with start " +
                std::to_string(s.starts[a]) + ", stop " + std::to_string(s.stops[a]) + ", step " +
                std::to_string(s.steps[a]) +
                " has a size that depends on the dim: the dim must be static unless the slice is full "
                "(start 0, stop >= 2^62, step 1)");
    }
    out.push_back(Dim::fixed(resolve_slice(s.starts[a], s.stops[a], s.steps[a], src[a].size).size));
  }
  return {ir::Type::tensor(out, in[0].policy)};
}

std::vector<Tensor> run_slice(const KernelCall& call) {
  const Tensor& x = call.inputs[0];
  SliceAttrs s = slice_attrs(call.attrs, x.rank());
  const Sizes& in_sizes = x.shape();
  auto in_strides = contiguous_strides(in_sizes);
  std::vector<AxisSlice> ax;
  Sizes out_sizes;
  std::int64_t base = 0;
  for (std::size_t a = 0; a < x.rank(); ++a) {
    ax.push_back(resolve_slice(s.starts[a], s.stops[a], s.steps[a], in_sizes[a]));
    out_sizes.push_back(ax.back().size);
    base += ax.back().start * in_strides[a];
  }
  auto codes = x.codes();
  std::int64_t n = numel_of(out_sizes);
  std::vector<std::uint64_t> out(uz(n));
  Sizes idx(x.rank(), 0);
  std::int64_t off = base;
  for (std::int64_t e = 0; e < n; ++e) {
    out[uz(e)] = codes[uz(off)];
    for (std::size_t d = x.rank(); d-- > 0;) {
      if (++idx[d] < out_sizes[d]) {
        off += ax[d].step * in_strides[d];
        break;
      }
      off -= ax[d].step * in_strides[d] * (out_sizes[d] - 1);
      idx[d] = 0;
    }
  }
  return {result_from_codes(out, call.result_types[0])};
}

// ---- concat -----------------------------------------------------------------

std::vector<ir::Type> infer_concat(std::span<const ir::Type> in, const AttrMap& attrs) {
  if (in.empty()) raise(ErrorCode::ArgumentInvalid, "concat needs at least one operand");
  const ir::Type& first = in[0];
  std::int64_t axis = normalize_axis(attrs.get_int("axis"), first.rank());
  Shape out = first.shape;
  for (std::size_t k = 1; k < in.size(); ++k) {
    if (in[k].policy != first.policy) {
      raise(ErrorCode::DtypeUnsupported, "concat operands 0 (" + print_policy(first.policy) + ") and " +
                                             std::to_string(k) + " (" + print_policy(in[k].policy) +
                                             ") have different policies; cast them to one policy first");
    }
    if (in[k].rank() != first.rank()) {
      raise(ErrorCode::ShapeMismatch, "concat operand " + std::to_string(k) + " " + shape_str(in[k].shape) +
                                          " has rank " + std::to_string(in[k].rank()) + ", operand 0 " +
                                          shape_str(first.shape) + " has rank " + std::to_string(first.rank()));
    }
    for (std::size_t d = 0; d < first.rank(); ++d) {
      if (static_cast<std::int64_t>(d) == axis) continue;
      if (in[k].shape[d] != first.shape[d]) {
        raise(ErrorCode::ShapeMismatch, "concat along axis " + std::to_string(axis) + ": operand " + std::to_string(k) +
                                            " " + shape_str(in[k].shape) + " differs from operand 0 " +
                                            shape_str(first.shape) + " in dim " + std::to_string(d) + " (" +
                                            in[k].shape[d].str() + " vs " + first.shape[d].str() + ")");
      }
    }
  }
  if (in.size() > 1) {
    std::int64_t total = 0;
    for (std::size_t k = 0; k < in.size(); ++k) {
      const Dim& d = in[k].shape[uz(axis)];
      if (d.is_symbolic()) {
        raise(ErrorCode::ShapeMismatch, "concat along axis " + std::to_string(axis) +
                                            " needs static sizes there: operand " + std::to_string(k) +
                                            " has symbolic dim '" + d.symbol + "'");
      }
      total += d.size;
    }
    out[uz(axis)] = Dim::fixed(total);
  }
  return {ir::Type::tensor(out, first.policy)};
}

std::vector<Tensor> run_concat(const KernelCall& call) {
  const ir::Type& rt = call.result_types[0];
  Sizes out_sizes = sizes_of(rt);
  std::int64_t axis = normalize_axis(call.attrs.get_int("axis"), out_sizes.size());
  std::int64_t outer = span_product(out_sizes, 0, uz(axis));
  std::int64_t inner = span_product(out_sizes, uz(axis) + 1, out_sizes.size());
  std::vector<std::vector<std::uint64_t>> codes;
  for (const Tensor& t : call.inputs) codes.push_back(t.codes());
  std::vector<std::uint64_t> out;
  out.reserve(uz(numel_of(out_sizes)));
  for (std::int64_t o = 0; o < outer; ++o) {
    for (std::size_t k = 0; k < call.inputs.size(); ++k) {
      std::int64_t chunk = call.inputs[k].shape()[uz(axis)] * inner;
      auto begin = codes[k].begin() + o * chunk;
      out.insert(out.end(), begin, begin + chunk);
    }
  }
  return {result_from_codes(out, rt)};
}

// ---- split ------------------------------------------------------------------

std::vector<ir::Type> infer_split(std::span<const ir::Type> in, const AttrMap& attrs) {
  const ir::Type& x = in[0];
  std::int64_t axis = normalize_axis(attrs.get_int("axis"), x.rank());
  const Sizes& sizes = attrs.get_ints("sizes");
  if (sizes.empty()) raise(ErrorCode::ArgumentInvalid, "split attribute 'sizes' is empty; give at least one size");
  std::int64_t total = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] < 0) {
      raise(ErrorCode::ArgumentInvalid,
            "split size " + std::to_string(i) + " is " + std::to_string(sizes[i]) + "; sizes must be >= 0");
    }
    total += sizes[i];
  }
  const Dim& d = x.shape[uz(axis)];
  if (d.is_symbolic()) {
    raise(ErrorCode::ShapeMismatch, "split along axis " + std::to_string(axis) + " needs a static dim, got '" +
                                        d.symbol + "' in " + shape_str(x.shape));
  }
  if (total != d.size) {
    raise(ErrorCode::ShapeMismatch, "split sizes " + ints_str(sizes) + " sum to " + std::to_string(total) +
                                        ", but axis " + std::to_string(axis) + " of " + shape_str(x.shape) +
                                        " has size " + std::to_string(d.size));
  }
  std::vector<ir::Type> out;
  for (auto s : sizes) {
    Shape shape = x.shape;
    shape[uz(axis)] = Dim::fixed(s);
    out.push_back(ir::Type::tensor(shape, x.policy));
  }
  return out;
}

// Splits the row-major codes of a tensor of `sizes` along `axis` into parts of `parts` sizes.
std::vector<std::vector<std::uint64_t>> split_codes(const std::vector<std::uint64_t>& codes, const Sizes& sizes,
                                                    std::size_t axis, const Sizes& parts) {
  std::int64_t outer = span_product(sizes, 0, axis);
  std::int64_t inner = span_product(sizes, axis + 1, sizes.size());
  std::vector<std::vector<std::uint64_t>> out(parts.size());
  auto it = codes.begin();
  for (std::int64_t o = 0; o < outer; ++o) {
    for (std::size_t k = 0; k < parts.size(); ++k) {
      std::int64_t chunk = parts[k] * inner;
      out[k].insert(out[k].end(), it, it + chunk);
      it += chunk;
    }
  }
  return out;
}

std::vector<Tensor> run_split(const KernelCall& call) {
  const Tensor& x = call.inputs[0];
  std::int64_t axis = normalize_axis(call.attrs.get_int("axis"), x.rank());
  auto parts = split_codes(x.codes(), x.shape(), uz(axis), call.attrs.get_ints("sizes"));
  std::vector<Tensor> out;
  for (std::size_t k = 0; k < parts.size(); ++k) out.push_back(result_from_codes(parts[k], call.result_types[k]));
  return out;
}

// ---- split_qkv --------------------------------------------------------------

std::vector<ir::Type> infer_split_qkv(std::span<const ir::Type> in, const AttrMap& attrs) {
  const ir::Type& x = in[0];
  std::int64_t heads = attrs.get_int("num_heads");
  if (heads < 0) {
    raise(ErrorCode::ArgumentInvalid,
          "split_qkv num_heads is " + std::to_string(heads) + "; it must be >= 1, or 0 for no head axis");
  }
  if (x.rank() == 0) raise(ErrorCode::ShapeMismatch, "split_qkv needs an operand of rank >= 1, got a scalar");
  const Dim& last = x.shape.back();
  if (last.is_symbolic()) {
    raise(ErrorCode::ShapeMismatch,
          "split_qkv needs a static last dim (3*D), got '" + last.symbol + "' in " + shape_str(x.shape));
  }
  if (last.size % 3 != 0) {
    raise(ErrorCode::ShapeMismatch, "split_qkv needs a last dim divisible by 3 (q|k|v), got " +
                                        std::to_string(last.size) + " in " + shape_str(x.shape));
  }
  std::int64_t d = last.size / 3;
  Shape shape(x.shape.begin(), x.shape.end() - 1);
  if (heads == 0) {
    shape.push_back(Dim::fixed(d));
  } else {
    if (d % heads != 0) {
      raise(ErrorCode::ShapeMismatch, "split_qkv: each of q, k, v has " + std::to_string(d) +
                                          " features, not divisible by num_heads = " + std::to_string(heads));
    }
    shape.push_back(Dim::fixed(heads));
    shape.push_back(Dim::fixed(d / heads));
  }
  ir::Type t = ir::Type::tensor(shape, x.policy);
  return {t, t, t};
}

std::vector<Tensor> run_split_qkv(const KernelCall& call) {
  const Tensor& x = call.inputs[0];
  std::int64_t d = x.shape().back() / 3;
  auto parts = split_codes(x.codes(), x.shape(), x.rank() - 1, {d, d, d});
  // Splitting the third into heads is a row-major reshape: the codes stay in order.
  std::vector<Tensor> out;
  for (std::size_t k = 0; k < 3; ++k) out.push_back(result_from_codes(parts[k], call.result_types[k]));
  return out;
}

// ---- gather -----------------------------------------------------------------

std::vector<ir::Type> infer_gather(std::span<const ir::Type> in, const AttrMap& attrs) {
  const ir::Type& x = in[0];
  const ir::Type& idx = in[1];
  if (is_float(idx.dtype()) || idx.dtype() == DType::bool_) {
    raise(ErrorCode::DtypeUnsupported,
          "gather indices must have an integer dtype, got " + std::string(name(idx.dtype())));
  }
  std::int64_t axis = normalize_axis(attrs.get_int("axis"), x.rank());
  Shape out(x.shape.begin(), x.shape.begin() + axis);
  out.insert(out.end(), idx.shape.begin(), idx.shape.end());
  out.insert(out.end(), x.shape.begin() + axis + 1, x.shape.end());
  return {ir::Type::tensor(out, x.policy)};
}

std::vector<Tensor> run_gather(const KernelCall& call) {
  const Tensor& x = call.inputs[0];
  std::int64_t axis = normalize_axis(call.attrs.get_int("axis"), x.rank());
  const Sizes& xs = x.shape();
  std::int64_t outer = span_product(xs, 0, uz(axis));
  std::int64_t n = xs[uz(axis)];
  std::int64_t inner = span_product(xs, uz(axis) + 1, xs.size());
  // Decoding integer indices to double is exact up to 2^53; anything larger is out of range anyway.
  auto index_values = call.inputs[1].to_values();
  Sizes wrapped;
  wrapped.reserve(index_values.size());
  for (double v : index_values) {
    if (!(v >= static_cast<double>(-n) && v < static_cast<double>(n))) {
      std::string shown = std::fabs(v) < 9e18 ? std::to_string(static_cast<std::int64_t>(v)) : std::to_string(v);
      raise(ErrorCode::IndexOutOfRange, "gather index " + shown + " is out of range for axis " + std::to_string(axis) +
                                            " of size " + std::to_string(n) + " (valid: -" + std::to_string(n) +
                                            " to " + std::to_string(n - 1) + ")");
    }
    auto i = static_cast<std::int64_t>(v);
    wrapped.push_back(i < 0 ? i + n : i);
  }
  auto codes = x.codes();
  std::vector<std::uint64_t> out;
  out.reserve(uz(outer) * wrapped.size() * uz(inner));
  for (std::int64_t o = 0; o < outer; ++o) {
    for (auto i : wrapped) {
      auto begin = codes.begin() + (o * n + i) * inner;
      out.insert(out.end(), begin, begin + inner);
    }
  }
  return {result_from_codes(out, call.result_types[0])};
}

}  // namespace

void register_shape_ops(ir::Registry& r) {
  r.add(OpDef{
      .name = "graph.reshape",
      .summary = "Same elements in row-major order, new shape. Symbols move whole; fixed dims keep the count.",
      .operands = {"x"},
      .attrs = {shape_attr("shape")},
      .infer = infer_reshape,
      .reference = moving_parts_of_complex128(run_reshape),
  });
  r.add(OpDef{
      .name = "graph.transpose",
      .summary = "Permutes axes: result dim i is operand dim perm[i] (negative entries count from the end).",
      .operands = {"x"},
      .attrs = {ints_attr("perm")},
      .infer = infer_transpose,
      .reference = moving_parts_of_complex128(run_transpose),
  });
  r.add(OpDef{
      .name = "graph.broadcast_to",
      .summary = "Numpy broadcast of the operand to exactly `shape` (size-1 dims and missing leading dims expand).",
      .operands = {"x"},
      .attrs = {shape_attr("shape")},
      .infer = infer_broadcast_to,
      .reference = moving_parts_of_complex128(run_broadcast_to),
  });
  r.add(OpDef{
      .name = "graph.slice",
      .summary = "Numpy basic slice per axis, starts[i]:stops[i]:steps[i] (steps > 0, default 1; negative "
                 "bounds count from the end, then clamp; a stop >= 2^62 means to the end). A strided view of x, "
                 "or with copy = true a contiguous result a copy kernel writes (what a GPU consumer or a CUDA "
                 "graph needs: a view is gathered through the host there).",
      .operands = {"x"},
      .attrs = {ints_attr("starts"), ints_attr("stops"), ints_attr("steps", std::vector<std::int64_t>{}),
                ir::AttrSpec{.name = "copy", .kind = ir::AttrKind::boolean, .required = false}},
      .infer = infer_slice,
      .reference = moving_parts_of_complex128(run_slice),
  });
  r.add(OpDef{
      .name = "graph.concat",
      .summary = "Joins operands of one policy along `axis`; other dims must be equal.",
      .operands = {"inputs"},
      .variadic = true,
      .attrs = {int_attr("axis", 0)},
      .infer = infer_concat,
      .reference = moving_parts_of_complex128(run_concat),
  });
  r.add(OpDef{
      .name = "graph.split",
      .summary = "Splits along `axis` into len(sizes) results of the given sizes (which sum to the dim).",
      .operands = {"x"},
      .attrs = {int_attr("axis", 0), ints_attr("sizes")},
      .num_results = 2,  // really len(sizes)
      .infer = infer_split,
      .reference = moving_parts_of_complex128(run_split),
  });
  r.add(OpDef{
      .name = "graph.split_qkv",
      .summary = "x[..., 3*D] -> q, k, v = the contiguous thirds x[..., 0:D], x[..., D:2D], x[..., 2D:3D]; with "
                 "num_heads = H > 0 each third is reshaped to [..., H, D/H] (head h = features h*D/H to "
                 "(h+1)*D/H of its third).",
      .operands = {"x"},
      .attrs = {int_attr("num_heads", 0)},
      .num_results = 3,
      .infer = infer_split_qkv,
      .reference = moving_parts_of_complex128(run_split_qkv),
  });
  r.add(OpDef{
      .name = "graph.gather",
      .summary = "numpy.take(x, indices, axis): result shape x.shape[:axis] + indices.shape + x.shape[axis+1:]; "
                 "negative indices count from the end once; out-of-range indices are an error.",
      .operands = {"x", "indices"},
      .attrs = {int_attr("axis", 0)},
      .infer = infer_gather,
      .reference = moving_parts_of_complex128(run_gather),
  });
}

}  // namespace tessera::graph
