// Helpers shared by the Tile IR op families (src/tile/*_ops.cpp): operand
// type checks that raise DtypeError/ShapeError naming the op and operand,
// and attribute-spec shorthands.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/ir/dialect.h"
#include "tessera/ir/ir.h"
#include "tessera/ir/type.h"

namespace tessera::tile {

// Each op family registers itself; tile_dialect.cpp calls them all.
void register_lane_ops(ir::Registry& registry);
void register_memory_ops(ir::Registry& registry);
void register_async_ops(ir::Registry& registry);
void register_tile_value_ops(ir::Registry& registry);
void register_tile_math_ops(ir::Registry& registry);
void register_control_flow_ops(ir::Registry& registry);

bool is_integer(DType dtype);

// "operand 'lhs' of tile.add" style names used in messages.
std::string operand_label(std::string_view op, std::string_view operand);

void require_kind(const ir::Type& t, ir::TypeKind kind, std::string_view op, std::string_view operand);
// A lane<int*> index/offset/bound.
void require_index(const ir::Type& t, std::string_view op, std::string_view operand);
void require_buffer(const ir::Type& t, std::string_view op, std::string_view operand);
// A buffer the op may write: smem, or gmem marked mut (a Privilege error otherwise).
void require_writable_buffer(const ir::Type& t, std::string_view op, std::string_view operand);
// lane<bool>
void require_bool_lane(const ir::Type& t, std::string_view op, std::string_view operand);
// Equal types (both operands of a binary lane op, a yield against a result, ...).
void require_same(const ir::Type& a, const ir::Type& b, std::string_view op, std::string_view what);
// Shapes whose dims agree where both are known (fixed sizes or the same symbol).
bool dims_agree(const ir::Dim& a, const ir::Dim& b);

// Region structure: `op` has `regions` regions of one block each.
void require_regions(const ir::Operation& op, std::size_t regions);
// The block's argument types equal `types` (what = "the body" / "the then region").
void require_block_args(const ir::Block& block, std::span<const ir::Type> types, std::string_view what);
// The block ends in `terminator` whose operands (from operand `first` on)
// have the types `types`.
void require_terminator(const ir::Block& block, std::string_view terminator, std::size_t first,
                        std::span<const ir::Type> types, std::string_view what);

std::vector<ir::Type> types_of(std::span<const ir::Type> types, std::size_t from);

}  // namespace tessera::tile
