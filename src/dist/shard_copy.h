// Host copies between a global tensor and its shards, on codes (the bytes of
// each element, so every encoding moves exactly; sub-byte formats one code
// per byte). Used by distributed tensors and the local collectives.
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/dist/layout.h"
#include "tessera/runtime/tensor.h"

namespace tessera::dist::detail {

// A contiguous host tensor of t's codes: unsigned integers of t's element
// width (one byte per element for sub-byte formats). `t` may live on a GPU.
Tensor host_codes(const Tensor& t);
// A tensor of `policy` on `device` whose elements have the codes of `codes`
// (as host_codes made them).
Tensor from_codes(const Tensor& codes, const NumericsPolicy& policy, const std::string& device);

// The elements of `global` (codes) at the runs of each dim, as a contiguous codes tensor.
Tensor take_runs(const Tensor& global, const std::vector<std::vector<Run>>& runs);
// Writes `part` (codes, the runs' shape) into `global` (codes, contiguous) at the runs.
void put_runs(const Tensor& global, const Tensor& part, const std::vector<std::vector<Run>>& runs);

// `pieces` (codes, equal but for `dim`) concatenated along `dim`, in order.
Tensor concat_codes(const std::vector<Tensor>& pieces, std::size_t dim);

// Whole dims except `dim`, which takes `run`.
std::vector<std::vector<Run>> runs_along(const std::vector<std::int64_t>& shape, std::size_t dim, Run run);

}  // namespace tessera::dist::detail
