// Schedule IR -> Tile IR: one template per op family, shared by the CPU and
// CUDA backends (ARCHITECTURE.md decision 12).
//
// A template turns one schedule.kernel into one Tile IR kernel function
// whose parameters are the kernel's inputs (gmem, read-only), then its
// results (gmem, mut), then the scalars the template needs (TileKernel::
// scalars says which). Numerics are the reference executor's: each Graph IR
// op's result is computed in fp64 from decoded operands, rounded once to the
// op's accumulation type and then encoded to its storage type, so an
// elementwise kernel's results equal the reference bit for bit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/ir/ir.h"

namespace tessera::schedule {

// A launch-time scalar of a generated kernel.
struct KernelScalar {
  enum class Kind { numel, dim } kind;
  // dim: the kernel domain's dim `index` (its size at run time).
  std::size_t index = 0;
};

struct TileKernel {
  ir::Operation* func = nullptr;  // the Tile IR kernel, in the module passed to lower_kernel
  std::vector<KernelScalar> scalars;
  std::int64_t lanes_per_group = 1;  // grid = ceil(numel(domain) / lanes_per_group)
};

// Whether a template covers `kernel`; when not, `why` names the first op or
// construct it cannot lower.
bool has_tile_template(const ir::Operation& kernel, std::string* why = nullptr);

// Lowers `kernel` into a new function of `out` named `name`. A kernel no
// template covers is a CompileError naming the op and its location.
TileKernel lower_kernel(const ir::Operation& kernel, ir::Module& out, const std::string& name);

}  // namespace tessera::schedule
