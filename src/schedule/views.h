// View kernels: Graph IR ops that only reinterpret their operand's storage
// (reshape, stop_gradient, transpose, slice, split, split_qkv, and
// collectives over a one-member mesh axis) run as strided views of it, with
// no kernel and no copy. A later kernel that needs a contiguous operand
// copies it then (Tensor::reshape).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tessera/ir/ir.h"
#include "tessera/runtime/tensor.h"

namespace tessera::schedule {

// Why `op` cannot run as a view (nullopt: it can).
std::optional<std::string> view_unsupported(const ir::Operation& op);

// The results of view op `op` on `inputs`; `result_sizes` are the concrete
// result shapes.
std::vector<Tensor> apply_view(const ir::Operation& op, const std::vector<Tensor>& inputs,
                               const std::vector<std::vector<std::int64_t>>& result_sizes);

}  // namespace tessera::schedule
