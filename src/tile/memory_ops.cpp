// Tile IR memory ops: element loads and stores on gmem/smem buffers, shared
// allocations and the deterministic shared-buffer reduction
// (docs/design/0003-tile-ir.md). Operand 0 is always the buffer.
#include <string>

#include "tessera/support/error.h"
#include "tessera/tile/tile_dialect.h"
#include "tile/tile_support.h"

namespace tessera::tile {
namespace {

constexpr std::int64_t kMaxVectorElements = 16;

using ir::AttrKind;
using ir::AttrMap;
using ir::OpDef;
using ir::Type;

void check_indices(std::span<const Type> in, std::size_t count, const std::string& op) {
  const Type& buf = in[0];
  if (count != buf.rank()) {
    raise(ErrorCode::ShapeMismatch, op + " on a rank-" + std::to_string(buf.rank()) + " buffer " + ir::print_type(buf) +
                                        " takes " + std::to_string(buf.rank()) + " index(es), got " +
                                        std::to_string(count));
  }
  for (std::size_t i = 0; i < count; ++i) require_index(in[1 + i], op, "index #" + std::to_string(i));
}

// tile.load_vector / tile.store_vector: a 1-D gmem buffer and 1 to 16 elements.
void require_vector_access(const Type& buf, std::int64_t count, const std::string& op) {
  require_buffer(buf, op, "buffer");
  if (buf.rank() != 1 || buf.is_smem()) raise(ErrorCode::ArgumentInvalid, op + " needs a 1-D gmem buffer, got " + ir::print_type(buf));
  if (count < 1 || count > kMaxVectorElements) {
    raise(ErrorCode::ArgumentInvalid, op + " moves 1 to " + std::to_string(kMaxVectorElements) + " elements, got " +
                                          std::to_string(count));
  }
}

// `in_bounds = true`: the template that built the access proves its index
// inside the buffer (an index made of lane ids and compile-time sizes only,
// never of data). The CUDA backend then emits the access without its check
// and fault record, which were most of an FFT pass's instructions; the CPU
// backend keeps checking, so a broken proof faults in the CPU tests.
ir::AttrSpec in_bounds_attr() {
  return {.name = "in_bounds",
          .kind = AttrKind::boolean,
          .required = false,
          .doc = "the index is proven inside the buffer by construction; backends may skip the bounds check"};
}

// `not_nan = true` (tile.store_elem): the template that built the store
// proves its value is not NaN (the value comes from finite operands under a
// test the kernel made). The CUDA backend then rounds to a 16-bit float
// without the NaN sign fix; every other value rounds the same either way.
ir::AttrSpec not_nan_attr() {
  return {.name = "not_nan",
          .kind = AttrKind::boolean,
          .required = false,
          .doc = "the stored value is proven not NaN; backends may skip NaN handling in the rounding"};
}

}  // namespace

DType reduce_sum_accum(DType storage) {
  if (storage == DType::fp64) return DType::fp64;
  if (is_float(storage)) return DType::fp32;
  return DType::int64;
}

void register_memory_ops(ir::Registry& r) {
  r.add(OpDef{
      .name = "tile.load_elem",
      .summary = "Reads one element of a gmem or smem buffer (one index per dim); out of bounds is a runtime error.",
      .operands = {"buffer", "indices"},
      .variadic = true,
      .attrs = {in_bounds_attr()},
      .effect = ir::Effect::state,
      .infer =
          [](std::span<const Type> in, const AttrMap&) {
            require_buffer(in[0], "tile.load_elem", "buffer");
            check_indices(in, in.size() - 1, "tile.load_elem");
            return std::vector<Type>{Type::lane(in[0].policy)};
          },
  });
  r.add(OpDef{
      .name = "tile.store_elem",
      .summary = "Writes one element (the last operand) of a smem or mut gmem buffer at the given indices.",
      .operands = {"buffer", "indices_and_value"},
      .variadic = true,
      .attrs = {in_bounds_attr(), not_nan_attr()},
      .effect = ir::Effect::state,
      .num_results = 0,
      .infer =
          [](std::span<const Type> in, const AttrMap&) {
            require_writable_buffer(in[0], "tile.store_elem", "buffer");
            if (in.size() < 2) raise(ErrorCode::ArgumentInvalid, "tile.store_elem needs the value to store");
            check_indices(in, in.size() - 2, "tile.store_elem");
            const Type& value = in.back();
            require_kind(value, ir::TypeKind::lane, "tile.store_elem", "value");
            if (value.dtype() != in[0].dtype()) {
              raise(ErrorCode::DtypeUnsupported, "tile.store_elem stores a " + ir::print_type(value) + " into buffer " +
                                                     ir::print_type(in[0]) + "; cast it to the buffer's dtype first");
            }
            return std::vector<Type>{};
          },
  });
  // A lane's run of `count` consecutive elements as one access: a backend
  // checks the run's bounds once and moves it in wide accesses where the
  // buffer is contiguous and aligned (16-byte loads on a GPU), where
  // `count` element accesses would each carry their own index arithmetic
  // and check. The values are those of the element ops, and an element
  // out of bounds faults as load_elem/store_elem would at that element.
  // `in_bounds` proves the whole run inside the buffer and its start a
  // multiple of `count`: a GPU kernel for contiguous buffers then moves it
  // as aligned words, unchecked (the CPU keeps checking).
  r.add(OpDef{
      .name = "tile.load_vector",
      .summary = "Reads elements [i, i + count) of a 1-D gmem buffer as `count` lane values; an element out of bounds "
                 "is a runtime error, as for tile.load_elem.",
      .operands = {"buffer", "start"},
      .attrs = {{.name = "count", .kind = AttrKind::integer, .required = true, .doc = "elements, 1 to 16"},
                in_bounds_attr()},
      .effect = ir::Effect::state,
      .infer =
          [](std::span<const Type> in, const AttrMap& a) {
            require_vector_access(in[0], a.get_int("count"), "tile.load_vector");
            check_indices(in, in.size() - 1, "tile.load_vector");
            return std::vector<Type>(static_cast<std::size_t>(a.get_int("count")), Type::lane(in[0].policy));
          },
  });
  // A span check for element loads that follow it: `start` itself when
  // elements [start, start + count) of the 1-D buffer exist, else the
  // kernel faults as a load of the first missing element would. A load
  // marked in_bounds whose index is the result (plus a constant below
  // count) is proven in range by the IR itself, data-dependent start
  // included, so the CPU backend emits it unchecked (a sparse strip's 16
  // loads then carry no branch each). CUDA does not take it: a GPU records a
  // fault and runs on, where the loads it covers would read out of range.
  r.add(OpDef{
      .name = "tile.check_span",
      .summary = "start itself when elements [start, start + count) of the 1-D buffer exist; otherwise a runtime error "
                 "naming the first missing element, as its tile.load_elem would. Loads in_bounds at the result plus a "
                 "constant below count are then in range.",
      .operands = {"buffer", "start"},
      .attrs = {{.name = "count", .kind = AttrKind::integer, .required = true, .doc = "elements, 1 to 64"}},
      .effect = ir::Effect::state,
      .infer =
          [](std::span<const Type> in, const AttrMap& a) {
            require_buffer(in[0], "tile.check_span", "buffer");
            const std::int64_t count = a.get_int("count");
            if (count < 1 || count > 64) {
              raise(ErrorCode::ArgumentInvalid, "tile.check_span covers 1 to 64 elements, got " + std::to_string(count));
            }
            check_indices(in, in.size() - 1, "tile.check_span");  // one index: a 1-D buffer
            return std::vector<Type>{in[1]};
          },
  });
  r.add(OpDef{
      .name = "tile.store_vector",
      .summary = "Writes its lane values to elements [i, i + count) of a mut 1-D gmem buffer (count = the number of "
                 "values); an element out of bounds is a runtime error, as for tile.store_elem.",
      .operands = {"buffer", "start", "values"},
      .variadic = true,
      .attrs = {in_bounds_attr(), not_nan_attr()},
      .effect = ir::Effect::state,
      .num_results = 0,
      .infer =
          [](std::span<const Type> in, const AttrMap&) {
            require_writable_buffer(in[0], "tile.store_vector", "buffer");
            if (in.size() < 3) raise(ErrorCode::ArgumentInvalid, "tile.store_vector needs at least one value to store");
            require_vector_access(in[0], static_cast<std::int64_t>(in.size() - 2), "tile.store_vector");
            check_indices(in.first(2), 1, "tile.store_vector");
            for (std::size_t k = 2; k < in.size(); ++k) {
              require_kind(in[k], ir::TypeKind::lane, "tile.store_vector", "value #" + std::to_string(k - 2));
              if (in[k].dtype() != in[0].dtype()) {
                raise(ErrorCode::DtypeUnsupported, "tile.store_vector stores a " + ir::print_type(in[k]) +
                                                       " into buffer " + ir::print_type(in[0]) +
                                                       "; cast it to the buffer's dtype first");
              }
            }
            return std::vector<Type>{};
          },
  });
  r.add(OpDef{
      .name = "tile.prefetch",
      .summary = "A hint that elements [start, start + count) of a 1-D gmem buffer will be read soon. It reads "
                 "nothing and never faults (a range outside the buffer is ignored); a backend may drop it.",
      .operands = {"buffer", "start", "count"},
      // `bulk = true`: one lane asks for a long range (a row another group
      // reads soon), which a GPU fetches into its L2 with one bulk request
      // (docs/design/0037); without it, CUDA drops the hint.
      .attrs = {{.name = "bulk",
                 .kind = AttrKind::boolean,
                 .required = false,
                 .doc = "a long range one lane asks for: a GPU fetches it into L2 in one bulk request"}},
      .effect = ir::Effect::state,
      .num_results = 0,
      .infer =
          [](std::span<const Type> in, const AttrMap&) {
            require_buffer(in[0], "tile.prefetch", "buffer");
            if (in[0].rank() != 1 || in[0].is_smem()) {
              raise(ErrorCode::ArgumentInvalid, "tile.prefetch needs a 1-D gmem buffer, got " + ir::print_type(in[0]));
            }
            for (std::size_t k = 1; k < 3; ++k) {
              require_kind(in[k], ir::TypeKind::lane, "tile.prefetch", k == 1 ? "start" : "count");
              if (in[k].dtype() != DType::int64) {
                raise(ErrorCode::DtypeUnsupported, std::string("tile.prefetch ") + (k == 1 ? "start" : "count") +
                                                       " must be lane<int64>, got " + ir::print_type(in[k]));
              }
            }
            return std::vector<Type>{};
          },
  });
  r.add(OpDef{
      .name = "tile.smem_alloc",
      .summary = "Allocates a shared buffer of the group (group-cooperative); `offset` is set by tile-plan-shared.",
      .attrs = {{.name = "shape", .kind = AttrKind::shape, .required = true},
                {.name = "policy", .kind = AttrKind::policy, .required = true},
                {.name = "swizzle", .kind = AttrKind::string, .default_value = ir::Attribute(std::string("none"))},
                {.name = "offset", .kind = AttrKind::integer, .doc = "byte offset in shared memory"}},
      .effect = ir::Effect::state,
      .infer =
          [](std::span<const Type>, const AttrMap& a) {
            const ir::Shape& shape = a.get_shape("shape");
            if (shape.empty() || shape.size() > 2) {
              raise(ErrorCode::ShapeMismatch,
                    "tile.smem_alloc shape " + ir::print_shape(shape) + " must have 1 or 2 dims");
            }
            for (const auto& d : shape) {
              if (!d.is_symbolic() && d.size <= 0) {
                raise(ErrorCode::ShapeMismatch,
                      "tile.smem_alloc shape " + ir::print_shape(shape) + " has a dim that is not positive");
              }
            }
            return std::vector<Type>{
                Type::smem(shape, a.get_policy("policy"), ir::parse_swizzle(a.get_string("swizzle")))};
          },
  });
  r.add(OpDef{
      .name = "tile.reduce_sum",
      .summary = "Sums a whole smem buffer in a fixed pairwise tree over row-major order (a lane op).",
      .operands = {"buffer"},
      .effect = ir::Effect::state,
      .infer =
          [](std::span<const Type> in, const AttrMap&) {
            require_kind(in[0], ir::TypeKind::smem, "tile.reduce_sum", "buffer");
            return std::vector<Type>{Type::lane(reduce_sum_accum(in[0].dtype()))};
          },
  });
}

}  // namespace tessera::tile
