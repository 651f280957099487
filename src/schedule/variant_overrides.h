// The Mapper's kernel variants (ExecutableOptions::variants) and the
// "reference" variant: a kernel's ops run one by one on the reference
// executor, the oracle, when a Mapper asks for it (to bisect a numerical
// difference between the compiled code and the reference).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "tessera/ir/ir.h"
#include "tessera/runtime/tensor.h"

namespace tessera::schedule {

// Sets the variant of every kernel that contains an op named in `variants`
// ("graph.matmul" -> "reference"). Kernels without code (views, constants,
// collectives) keep theirs. ArgumentError for a variant name other than
// "tile" and "reference", or "tile" for a kernel no template covers.
void apply_variant_overrides(ir::Operation& func, const std::map<std::string, std::string>& variants);

// The default mapper's NVIDIA target per kernel, before the Mapper's own
// choices (docs/design/0014-cuda-tile-target.md, "Which target wins where"):
// on cuda:`device` of sm_90 or newer, with a usable tileiras that targets
// it, every elementwise kernel the CUDA Tile IR target can express takes the
// "tile_ir" variant (measured 1.3-1.9x the PTX path on an H100, the same
// bits), and so does every GEMM on tensor-core operands it can express
// (bf16, fp16, fp8 at fp32 accumulation); every other kernel stays on the
// PTX path. TESSERA_CUDA_TILE_DEFAULT=0 keeps every kernel on the PTX path.
void choose_default_nvidia_targets(ir::Operation& func, int device);
// Whether the default mapper sends kernels to CUDA Tile IR at all: tileiras
// found and usable, and TESSERA_CUDA_TILE_DEFAULT not 0 (a device must also
// be one its tileiras targets: choose_default_nvidia_targets checks that).
bool cuda_tile_default_enabled();

// The results of `kernel` (its body's yielded values) computed by the
// reference executor from `inputs` (on any device), placed on `device`.
std::vector<Tensor> run_reference_kernel(const ir::Operation& kernel, const std::vector<Tensor>& inputs,
                                         const std::string& device);

}  // namespace tessera::schedule
