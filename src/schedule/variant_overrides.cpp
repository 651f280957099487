// The Mapper's kernel variants (variant_overrides.h).
#include "schedule/variant_overrides.h"

#include <algorithm>
#include <unordered_map>

#include <cstdlib>
#include <cstring>

#include "schedule/templates/templates.h"
#include "schedule/views.h"
#include "tessera/schedule/passes.h"
#include "tessera/runtime/cuda.h"
#include "tessera/backends/cuda_tile/lower.h"
#include "tessera/backends/cuda_tile/runtime.h"
#include "tessera/backends/cuda_tile/toolchain.h"
#include "tessera/graph/executor.h"
#include "tessera/schedule/lower_to_tile.h"
#include "tessera/schedule/schedule_dialect.h"
#include "tessera/support/error.h"

namespace tessera::schedule {

void apply_variant_overrides(ir::Operation& func, const std::map<std::string, std::string>& variants) {
  if (variants.empty()) return;
  for (const auto& [op, variant] : variants) {
    if (variant != "tile" && variant != "tile_ir" && variant != "reference") {
      raise(ErrorCode::ArgumentInvalid, "kernel variant '" + variant + "' for " + op +
                                            ": expected \"tile\" (the generated kernel), \"tile_ir\" (the "
                                            "generated kernel through the CUDA Tile IR target) or \"reference\" "
                                            "(the reference executor)");
    }
  }
  for (ir::Operation* k : kernels_of(func)) {
    const Family family = kernel_family(*k);
    if (family == Family::view || family == Family::constant || family == Family::collective) continue;
    for (const auto& op : kernel_body(*k).ops()) {
      auto it = variants.find(std::string(op->name()));
      if (it == variants.end()) continue;
      if ((it->second == "tile" || it->second == "tile_ir") && !has_tile_template(*k)) {
        raise(ErrorCode::ArgumentInvalid, "kernel variant '" + it->second + "' for " + it->first +
                                              ": no template covers kernel " + kernel_name(*k),
              op->location());
      }
      k->attrs().set("variant", it->second);
      break;
    }
  }
}

bool cuda_tile_default_enabled() {
  if (const char* e = std::getenv("TESSERA_CUDA_TILE_DEFAULT"); e != nullptr && std::strcmp(e, "0") == 0) return false;
  const cuda_tile::Toolchain& tools = cuda_tile::toolchain();
  return tools.found && tools.reason.empty();
}

void choose_default_nvidia_targets(ir::Operation& func, int device) {
  if (!cuda_tile_default_enabled() || cuda::device_properties(device).compute_major < 9) return;
  const cuda_tile::Toolchain& tools = cuda_tile::toolchain();
  const std::string arch = cuda_tile::device_arch(device);
  if (std::find(tools.archs.begin(), tools.archs.end(), arch) == tools.archs.end()) return;
  for (ir::Operation* k : kernels_of(func)) {
    // Attention (forward and backward) is a candidate in its blocked
    // tensor-core form; the lane form is no faster here than on the PTX path.
    const bool attention = kernel_family(*k) == Family::attention && !k->attrs().has("attn_blocked") &&
                           templates::cuda_tile_attention(*k);
    const bool candidate = attention || kernel_family(*k) == Family::elementwise || tensor_core_gemm(*k);
    if (!candidate || kernel_variant(*k) != "tile") continue;
    if (attention) k->attrs().set("attn_blocked", true);  // the form the probe lowers and the target runs
    // Whether the target expresses it: lowered in a scratch module (no
    // tileiras run); what it cannot express stays on the PTX path.
    try {
      ir::Module scratch;
      const TileKernel t = lower_kernel(*k, scratch, "probe");
      cuda_tile::lower_kernel(*t.func);
    } catch (const CompileError&) {
      if (attention) k->attrs().erase("attn_blocked");
      continue;
    }
    k->attrs().set("variant", std::string("tile_ir"));
  }
}

std::vector<Tensor> run_reference_kernel(const ir::Operation& kernel, const std::vector<Tensor>& inputs,
                                         const std::string& device) {
  const ir::Block& body = kernel_body(kernel);
  std::unordered_map<const ir::Value*, Tensor> values;
  for (std::size_t i = 0; i < body.num_arguments(); ++i) {
    values[body.argument(i)] = inputs.at(i).is_cpu() ? inputs[i] : inputs[i].to("cpu");
  }
  for (const auto& op : body.ops()) {
    if (op.get() == body.terminator()) break;
    std::vector<Tensor> in;
    for (ir::Value* v : op->operands()) in.push_back(values.at(v));
    std::vector<Tensor> out = graph::execute_op(op->name(), in, op->attrs());
    for (std::size_t r = 0; r < op->num_results(); ++r) values[op->result(r)] = out.at(r);
  }
  std::vector<Tensor> results;
  for (ir::Value* v : body.terminator()->operands()) {
    const Tensor& t = values.at(v);
    results.push_back(device == "cpu" ? t : t.to(device));
  }
  return results;
}

}  // namespace tessera::schedule
