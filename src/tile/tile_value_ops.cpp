// Tile IR tile-value ops: blocks of values held by the whole group
// (group-cooperative; docs/design/0003-tile-ir.md). Tile loads read zeros
// past the source's bounds and tile stores skip elements past the
// destination's bounds, so ragged edges need no extra code.
#include <string>

#include "tessera/support/error.h"
#include "tile/tile_support.h"

namespace tessera::tile {
namespace {

using ir::AttrKind;
using ir::AttrMap;
using ir::OpDef;
using ir::Type;

void check_tile_shape(const ir::Shape& shape, const std::string& op) {
  if (shape.empty() || shape.size() > 2) {
    raise(ErrorCode::ShapeMismatch, op + " tile shape " + ir::print_shape(shape) + " must have 1 or 2 dims");
  }
  for (const auto& d : shape) {
    if (!d.is_symbolic() && d.size <= 0) {
      raise(ErrorCode::ShapeMismatch, op + " tile shape " + ir::print_shape(shape) + " has a dim that is not positive");
    }
  }
}

void check_offsets(std::span<const Type> in, std::size_t count, const std::string& op) {
  if (count != in[0].rank()) {
    raise(ErrorCode::ShapeMismatch, op + " on a rank-" + std::to_string(in[0].rank()) + " buffer takes " +
                                        std::to_string(in[0].rank()) + " offset(s), got " + std::to_string(count));
  }
  for (std::size_t i = 0; i < count; ++i) require_index(in[1 + i], op, "offset #" + std::to_string(i));
}

std::string dim_text(const ir::Dim& d) {
  return d.str();
}

}  // namespace

void register_tile_value_ops(ir::Registry& r) {
  r.add(OpDef{
      .name = "tile.tile_load",
      .summary = "Loads a tile of `shape` from a gmem or smem buffer at the given offsets (zeros past bounds).",
      .operands = {"src", "offsets"},
      .variadic = true,
      .attrs = {{.name = "shape", .kind = AttrKind::shape, .required = true}},
      .effect = ir::Effect::state,
      .infer =
          [](std::span<const Type> in, const AttrMap& a) {
            require_buffer(in[0], "tile.tile_load", "src");
            const ir::Shape& shape = a.get_shape("shape");
            check_tile_shape(shape, "tile.tile_load");
            if (shape.size() != in[0].rank()) {
              raise(ErrorCode::ShapeMismatch, "tile.tile_load of a rank-" + std::to_string(shape.size()) +
                                                  " tile from rank-" + std::to_string(in[0].rank()) + " buffer " +
                                                  ir::print_type(in[0]));
            }
            check_offsets(in, in.size() - 1, "tile.tile_load");
            return std::vector<Type>{Type::tile(shape, in[0].policy)};
          },
  });
  r.add(OpDef{
      .name = "tile.tile_store",
      .summary = "Stores a tile (the last operand) into a smem or mut gmem buffer at the given offsets "
                 "(elements past bounds skipped).",
      .operands = {"dst", "offsets_and_tile"},
      .variadic = true,
      .effect = ir::Effect::state,
      .num_results = 0,
      .infer =
          [](std::span<const Type> in, const AttrMap&) {
            require_writable_buffer(in[0], "tile.tile_store", "dst");
            if (in.size() < 2) raise(ErrorCode::ArgumentInvalid, "tile.tile_store needs the tile to store");
            const Type& t = in.back();
            require_kind(t, ir::TypeKind::tile, "tile.tile_store", "tile");
            if (t.rank() != in[0].rank()) {
              raise(ErrorCode::ShapeMismatch, "tile.tile_store of " + ir::print_type(t) + " into buffer " +
                                                  ir::print_type(in[0]) + " of a different rank");
            }
            if (t.dtype() != in[0].dtype()) {
              raise(ErrorCode::DtypeUnsupported, "tile.tile_store stores " + ir::print_type(t) + " into " +
                                                     ir::print_type(in[0]) + "; cast the tile with tile.tile_cast");
            }
            check_offsets(in, in.size() - 2, "tile.tile_store");
            return std::vector<Type>{};
          },
  });
  r.add(OpDef{
      .name = "tile.zeros",
      .summary = "A tile of `shape` filled with zeros of `policy`.",
      .attrs = {{.name = "shape", .kind = AttrKind::shape, .required = true},
                {.name = "policy", .kind = AttrKind::policy, .required = true}},
      .infer =
          [](std::span<const Type>, const AttrMap& a) {
            check_tile_shape(a.get_shape("shape"), "tile.zeros");
            return std::vector<Type>{Type::tile(a.get_shape("shape"), a.get_policy("policy"))};
          },
  });
  r.add(OpDef{
      .name = "tile.mma",
      .summary = "acc + a x b for a: [M, K], b: [K, N], acc: [M, N]; products exact, accumulated at acc's dtype in "
                 "increasing k order. With async = true (set by tile-pipeline) the product may complete after "
                 "the op: a and b's shared buffers stay read until a tile.mma_wait retires it.",
      .operands = {"a", "b", "acc"},
      .attrs = {{.name = "async", .kind = AttrKind::boolean}},
      .infer =
          [](std::span<const Type> in, const AttrMap&) {
            const char* names[] = {"a", "b", "acc"};
            for (int i = 0; i < 3; ++i) {
              require_kind(in[i], ir::TypeKind::tile, "tile.mma", names[i]);
              if (in[i].rank() != 2) {
                raise(ErrorCode::ShapeMismatch, "operand '" + std::string(names[i]) +
                                                    "' of tile.mma must be a 2-D tile, got " + ir::print_type(in[i]));
              }
            }
            const ir::Shape& a = in[0].shape;
            const ir::Shape& b = in[1].shape;
            const ir::Shape& c = in[2].shape;
            if (!dims_agree(a[1], b[0])) {
              raise(ErrorCode::ShapeMismatch,
                    "tile.mma: a's K (" + dim_text(a[1]) + ") differs from b's K (" + dim_text(b[0]) + ")");
            }
            if (!dims_agree(a[0], c[0]) || !dims_agree(b[1], c[1])) {
              raise(ErrorCode::ShapeMismatch, "tile.mma: acc shape " + ir::print_shape(c) + " is not [M, N] = [" +
                                                  dim_text(a[0]) + ", " + dim_text(b[1]) + "]");
            }
            if (in[0].dtype() != in[1].dtype()) {
              raise(ErrorCode::DtypeUnsupported, "tile.mma operands a and b have different dtypes: " +
                                                     ir::print_type(in[0]) + " and " + ir::print_type(in[1]));
            }
            if (in[2].dtype() == DType::bool_ || in[0].dtype() == DType::bool_) {
              raise(ErrorCode::DtypeUnsupported, "tile.mma does not take bool tiles");
            }
            return std::vector<Type>{in[2]};
          },
  });
  r.add(OpDef{
      .name = "tile.transpose",
      .summary = "The transpose of a 2-D tile: x [R, C] -> [C, R], same dtype (result[j][i] = x[i][j]).",
      .operands = {"x"},
      .infer =
          [](std::span<const Type> in, const AttrMap&) {
            require_kind(in[0], ir::TypeKind::tile, "tile.transpose", "x");
            if (in[0].rank() != 2) {
              raise(ErrorCode::ShapeMismatch,
                    "operand 'x' of tile.transpose must be a 2-D tile, got " + ir::print_type(in[0]));
            }
            return std::vector<Type>{Type::tile({in[0].shape[1], in[0].shape[0]}, in[0].policy)};
          },
  });
  r.add(OpDef{
      .name = "tile.tile_cast",
      .summary = "Converts every element of a tile to policy `to` with a single rounding.",
      .operands = {"x"},
      .attrs = {{.name = "to", .kind = AttrKind::policy, .required = true}},
      .infer =
          [](std::span<const Type> in, const AttrMap& a) {
            require_kind(in[0], ir::TypeKind::tile, "tile.tile_cast", "x");
            return std::vector<Type>{Type::tile(in[0].shape, a.get_policy("to"))};
          },
  });
  r.add(OpDef{
      .name = "tile.tile_add",
      .summary = "Elementwise x + y of two floating-point tiles of one type, each sum rounded once to the dtype "
                 "(the step that combines the partial sums of a blocked accumulation).",
      .operands = {"x", "y"},
      .infer =
          [](std::span<const Type> in, const AttrMap&) {
            require_kind(in[0], ir::TypeKind::tile, "tile.tile_add", "x");
            require_kind(in[1], ir::TypeKind::tile, "tile.tile_add", "y");
            if (in[0] != in[1]) {
              raise(in[0].shape != in[1].shape ? ErrorCode::ShapeMismatch : ErrorCode::DtypeUnsupported,
                    "tile.tile_add operands differ: " + ir::print_type(in[0]) + " and " +
                                                 ir::print_type(in[1]));
            }
            if (!is_float(in[0].dtype())) {
              raise(ErrorCode::DtypeUnsupported, "tile.tile_add needs floating-point tiles, got " + ir::print_type(in[0]));
            }
            return std::vector<Type>{in[0]};
          },
  });
}

}  // namespace tessera::tile
