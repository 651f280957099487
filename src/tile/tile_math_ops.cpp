// Tile IR tile arithmetic: elementwise math on whole register tiles, row and
// column reductions, constant tiles and the causal fill, the vocabulary of a
// blocked online softmax (the FlashAttention forward of
// schedule/templates/attention.cpp). Like tile.tile_add they are group-level
// values (docs/design/0003-tile-ir.md): every lane of the group sees the
// whole tile.
//
// Numerics: each element of a result is one operation rounded once to the
// tile's dtype. tile.tile_reduce combines a row (or column) in increasing
// index order on the CPU and PTX backends; the CUDA Tile IR target reduces
// in its own fixed tree (the order depends on the shape alone). exp and log
// are Tessera's elementary functions; with `fast` the CUDA Tile IR target
// may use its own approximation instead (its bits are then its own).
#include <string>

#include "tessera/support/error.h"
#include "tile/tile_support.h"

namespace tessera::tile {
namespace {

using ir::AttrKind;
using ir::AttrMap;
using ir::OpDef;
using ir::Type;

void require_float_tile(const Type& t, std::string_view op, std::string_view operand) {
  require_kind(t, ir::TypeKind::tile, op, operand);
  if (t.rank() != 2) {
    raise(ErrorCode::ShapeMismatch, operand_label(op, operand) + " must be a 2-D tile, got " + ir::print_type(t));
  }
  if (t.dtype() != DType::fp32 && t.dtype() != DType::fp64) {
    raise(ErrorCode::DtypeUnsupported,
          operand_label(op, operand) + " must be an fp32 or fp64 tile, got " + ir::print_type(t));
  }
}

void require_fixed(const Type& t, std::string_view op, std::string_view operand) {
  for (const auto& d : t.shape) {
    if (d.is_symbolic()) {
      raise(ErrorCode::ShapeMismatch, operand_label(op, operand) + " needs a tile of fixed shape, got " + ir::print_type(t));
    }
  }
}

// Raises unless attribute `fn` of `op` names one of `names`, listing them.
void require_fn(const std::string& fn, std::string_view op, std::initializer_list<const char*> names) {
  std::string listed;
  for (const char* n : names) {
    if (fn == n) return;
    listed += (listed.empty() ? "" : ", ") + std::string(n);
  }
  raise(ErrorCode::ArgumentInvalid, std::string(op) + " fn '" + fn + "' is not one of " + listed);
}

}  // namespace

void register_tile_math_ops(ir::Registry& r) {
  r.add(OpDef{
      .name = "tile.tile_full",
      .summary = "A 2-D tile of `shape` with every element `value` (rounded once to `policy`).",
      .attrs = {{.name = "shape", .kind = AttrKind::shape, .required = true},
                {.name = "policy", .kind = AttrKind::policy, .required = true},
                {.name = "value", .kind = AttrKind::real, .required = true}},
      .infer =
          [](std::span<const Type>, const AttrMap& a) {
            const Type t = Type::tile(a.get_shape("shape"), a.get_policy("policy"));
            require_float_tile(t, "tile.tile_full", "result");
            require_fixed(t, "tile.tile_full", "result");
            return std::vector<Type>{t};
          },
  });
  r.add(OpDef{
      .name = "tile.tile_binary",
      .summary = "Elementwise `fn` (add, sub, mul, div, max, min) of two float tiles of one dtype, each result "
                 "rounded once. A dim of size 1 in either operand broadcasts against the other's.",
      .operands = {"x", "y"},
      .attrs = {{.name = "fn", .kind = AttrKind::string, .required = true}},
      .infer =
          [](std::span<const Type> in, const AttrMap& a) {
            const std::string& fn = a.get_string("fn");
            require_fn(fn, "tile.tile_binary", {"add", "sub", "mul", "div", "max", "min"});
            require_float_tile(in[0], "tile.tile_binary", "x");
            require_float_tile(in[1], "tile.tile_binary", "y");
            require_fixed(in[0], "tile.tile_binary", "x");
            require_fixed(in[1], "tile.tile_binary", "y");
            if (in[0].policy != in[1].policy) {
              raise(ErrorCode::DtypeUnsupported, "tile.tile_binary operands differ in type: " + ir::print_type(in[0]) +
                                                     " and " + ir::print_type(in[1]));
            }
            ir::Shape shape;
            for (std::size_t d = 0; d < 2; ++d) {
              const std::int64_t x = in[0].shape[d].size, y = in[1].shape[d].size;
              if (x != y && x != 1 && y != 1) {
                raise(ErrorCode::ShapeMismatch, "tile.tile_binary shapes " + ir::print_shape(in[0].shape) + " and " +
                                                    ir::print_shape(in[1].shape) + " do not broadcast (dim " +
                                                    std::to_string(d) + ")");
              }
              shape.push_back(ir::Dim::fixed(std::max(x, y)));
            }
            return std::vector<Type>{Type::tile(shape, in[0].policy)};
          },
  });
  r.add(OpDef{
      .name = "tile.tile_unary",
      .summary = "Elementwise `fn` (exp, log, neg) of a float tile, rounded once; `fast` lets the CUDA Tile IR "
                 "target use its own exp/log.",
      .operands = {"x"},
      .attrs = {{.name = "fn", .kind = AttrKind::string, .required = true},
                {.name = "fast", .kind = AttrKind::boolean}},
      .infer =
          [](std::span<const Type> in, const AttrMap& a) {
            const std::string& fn = a.get_string("fn");
            require_fn(fn, "tile.tile_unary", {"exp", "log", "neg"});
            require_float_tile(in[0], "tile.tile_unary", "x");
            return std::vector<Type>{in[0]};
          },
  });
  r.add(OpDef{
      .name = "tile.tile_reduce",
      .summary = "The `fn` (max or sum) of each row (axis = 1: [R, C] -> [R, 1]) or column (axis = 0: -> [1, C]) "
                 "of a float tile, at its dtype, each step rounded once.",
      .operands = {"x"},
      .attrs = {{.name = "fn", .kind = AttrKind::string, .required = true},
                {.name = "axis", .kind = AttrKind::integer, .required = true}},
      .infer =
          [](std::span<const Type> in, const AttrMap& a) {
            const std::string& fn = a.get_string("fn");
            require_fn(fn, "tile.tile_reduce", {"max", "sum"});
            const std::int64_t axis = a.get_int("axis");
            if (axis != 0 && axis != 1) {
              raise(ErrorCode::ArgumentInvalid, "tile.tile_reduce axis " + std::to_string(axis) + " is not 0 or 1");
            }
            require_float_tile(in[0], "tile.tile_reduce", "x");
            require_fixed(in[0], "tile.tile_reduce", "x");
            ir::Shape shape = in[0].shape;
            shape[static_cast<std::size_t>(axis)] = ir::Dim::fixed(1);
            return std::vector<Type>{Type::tile(shape, in[0].policy)};
          },
  });
  r.add(OpDef{
      .name = "tile.tile_causal_fill",
      .summary = "x with every element (r, c) where col0 + c > row0 + r + diag replaced by `value` (a causal "
                 "mask aligned by diag; the offsets are lane index values equal in every lane). With rows = false "
                 "the row drops out: columns col0 + c > row0 + diag (padding keys).",
      .operands = {"x", "row0", "col0", "diag"},
      .attrs = {{.name = "value", .kind = AttrKind::real, .required = true},
                {.name = "rows", .kind = AttrKind::boolean, .default_value = ir::Attribute(true)}},
      .infer =
          [](std::span<const Type> in, const AttrMap&) {
            require_float_tile(in[0], "tile.tile_causal_fill", "x");
            require_index(in[1], "tile.tile_causal_fill", "row0");
            require_index(in[2], "tile.tile_causal_fill", "col0");
            require_index(in[3], "tile.tile_causal_fill", "diag");
            return std::vector<Type>{in[0]};
          },
  });
}

}  // namespace tessera::tile
