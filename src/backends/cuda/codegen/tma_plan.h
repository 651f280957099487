// Which cp_async copies of a wgmma kernel go through the bulk tensor copy
// engine (TMA), and the tensor maps they read (docs/guide/cuda_backend.md).
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tessera/backends/cuda/cuda_backend.h"
#include "tessera/ir/ir.h"

namespace tessera::cuda::detail {

struct TmaPlan {
  std::vector<TmaMapSpec> maps;                          // Params::tma[i]
  std::unordered_map<const ir::Operation*, int> map_of;  // cp_async -> its map
  std::vector<const ir::Value*> destinations;            // one mbarrier each, in first-copy order
};

// Every cp_async of the kernel body can take TMA, or none does (the plan is
// then empty): each is a 2-D box of a kernel parameter into a panel-layout
// buffer (`panel_type`) of at most 256 rows whose only other uses are tile
// loads, with at most kMaxTmaMaps distinct (parameter, rows, element size)
// boxes. All or nothing, so cp_async_wait counts the same groups on every
// copy. `rows_cols` resolves a buffer type's (rows, cols).
TmaPlan plan_tma(const ir::Block& body, const std::function<bool(const ir::Type&)>& panel_type,
                 const std::function<std::pair<std::int64_t, std::int64_t>(const ir::Type&)>& rows_cols);

}  // namespace tessera::cuda::detail
