// TMA planning for the CUDA emitter (tma_plan.h).
#include "backends/cuda/codegen/tma_plan.h"

#include <algorithm>

namespace tessera::cuda::detail {

TmaPlan plan_tma(const ir::Block& body, const std::function<bool(const ir::Type&)>& panel_type,
                 const std::function<std::pair<std::int64_t, std::int64_t>(const ir::Type&)>& rows_cols) {
  std::vector<const ir::Operation*> copies;
  std::function<void(const ir::Block&)> walk = [&](const ir::Block& b) {
    for (const auto& op : b.ops()) {
      if (op->name() == "tile.cp_async") copies.push_back(op.get());
      for (std::size_t r = 0; r < op->num_regions(); ++r) walk(op->region(r).block());
    }
  };
  walk(body);
  TmaPlan plan;
  for (const ir::Operation* c : copies) {
    const ir::Value* dst = c->operand(0);
    const ir::Value* src = c->operand(1);
    if (!panel_type(dst->type()) || dst->defining_op() == nullptr || dst->defining_op()->name() != "tile.smem_alloc" ||
        !src->is_block_argument() || src->owner_block() != &body || src->type().rank() != 2)
      return {};
    for (const ir::Use& u : dst->uses()) {
      if (u.user->name() != "tile.cp_async" && u.user->name() != "tile.tile_load") return {};
      if (u.user->name() == "tile.cp_async" && u.operand_index != 0) return {};
    }
    const std::int64_t rows = rows_cols(dst->type()).first;
    if (rows > 256) return {};  // a TMA box has at most 256 rows
    const std::int64_t bytes = storage_bytes(dst->type().dtype());
    const TmaMapSpec spec{static_cast<int>(src->index()), rows, 128 / bytes, bytes};
    auto it = std::find(plan.maps.begin(), plan.maps.end(), spec);
    if (it == plan.maps.end()) {
      if (plan.maps.size() >= kMaxTmaMaps) return {};
      plan.maps.push_back(spec);
      it = plan.maps.end() - 1;
    }
    plan.map_of[c] = static_cast<int>(it - plan.maps.begin());
    if (std::find(plan.destinations.begin(), plan.destinations.end(), dst) == plan.destinations.end())
      plan.destinations.push_back(dst);
  }
  return plan;
}

}  // namespace tessera::cuda::detail
