// The Tile IR dialect's registration and the kernel/op queries of
// tessera/tile/tile_dialect.h.
#include "tessera/tile/tile_dialect.h"

#include "tile/tile_support.h"

namespace tessera::ir {

// Called by the Registry's constructor with the builtin and graph dialects.
void register_tile_dialect(Registry& registry) {
  tile::register_lane_ops(registry);
  tile::register_memory_ops(registry);
  tile::register_async_ops(registry);
  tile::register_tile_value_ops(registry);
  tile::register_tile_math_ops(registry);
  tile::register_control_flow_ops(registry);
}

}  // namespace tessera::ir

namespace tessera::tile {

bool is_kernel(const ir::Operation& func) {
  const ir::Attribute* k = func.attrs().find("kernel");
  return func.name() == "func" && k && ir::kind_of(*k) == ir::AttrKind::boolean && std::get<bool>(*k);
}

std::int64_t group_tile_count(const ir::Operation& func) {
  const ir::Attribute* shape = func.attrs().find("group_shape");
  if (!shape || ir::kind_of(*shape) != ir::AttrKind::int_list) return 1;
  std::int64_t n = 1;
  for (std::int64_t d : std::get<std::vector<std::int64_t>>(*shape)) n *= d;
  return n;
}

std::int64_t shared_budget(const ir::Operation& func) {
  const ir::Attribute* b = func.attrs().find("shared_bytes");
  if (!b || ir::kind_of(*b) != ir::AttrKind::integer) return kDefaultSharedBytes;
  return std::get<std::int64_t>(*b);
}

bool is_group_cooperative(const ir::Operation& op) {
  std::string_view n = op.name();
  return n == "tile.barrier" || n == "tile.lane_shuffle" || n == "tile.cp_async" || n == "tile.cp_async_wait" || n == "tile.mma_wait" ||
         n == "tile.smem_alloc" || n == "tile.tile_load" || n == "tile.tile_store" || n == "tile.mma" ||
         n == "tile.transpose" || n == "tile.tile_reduce" || n == "tile.tile_binary";
}

std::string lane_shuffle_group_error(const ir::Operation& shuffle, std::int64_t group_size) {
  const std::int64_t x = shuffle.attrs().get_int("xor");
  if (group_size % (2 * x) == 0) return "";
  return "a shuffle across lanes " + std::to_string(x) + " apart in a group of " + std::to_string(group_size) +
         " lanes (the group's size must be a multiple of " + std::to_string(2 * x) + ")";
}

bool is_control_flow(const ir::Operation& op) {
  std::string_view n = op.name();
  return n == "tile.for" || n == "tile.if" || n == "tile.while" || n == "tile.strands";
}

ir::Value* accessed_buffer(const ir::Operation& op) {
  std::string_view n = op.name();
  bool access = n == "tile.load_elem" || n == "tile.store_elem" || n == "tile.load_vector" || n == "tile.store_vector" || n == "tile.tile_load" || n == "tile.tile_store" ||
                n == "tile.reduce_sum" || n == "tile.cp_async";
  return access && op.num_operands() > 0 ? op.operand(0) : nullptr;
}

bool writes_buffer(const ir::Operation& op) {
  std::string_view n = op.name();
  return n == "tile.store_elem" || n == "tile.store_vector" || n == "tile.tile_store" || n == "tile.cp_async";
}

}  // namespace tessera::tile
