// Schedule IR -> Tile IR: picks the template of a kernel's family.
#include "tessera/schedule/lower_to_tile.h"

#include "graph/shape_rules.h"

#include "schedule/templates/lane_program.h"
#include "schedule/templates/templates.h"
#include "schedule/views.h"
#include "tessera/graph/promotion.h"
#include "tessera/schedule/schedule_dialect.h"
#include "tessera/support/error.h"

namespace tessera::schedule {

bool lane_fusible(const ir::Operation& op) {
  if (!templates::lane_op_covered(op.name())) return false;
  for (const ir::Value* v : op.operands()) {
    if (templates::unsupported_policy(v->type().policy)) return false;
  }
  return !templates::unsupported_policy(op.result(0)->type().policy);
}

const ir::Value* softmax_gradient_y(const ir::Operation& linear) { return widened_source(linear.operand(0), linear); }

bool softmax_gradient_fusible(const ir::Operation& softmax, const ir::Operation& linear) {
  if (softmax.name() != "graph.softmax_safe" || linear.name() != "graph.softmax_linear") return false;
  if (softmax_gradient_y(linear) != softmax.result(0) || linear.operand(1) == softmax.result(0) ||
      linear.operand(1) == linear.operand(0)) {
    return false;
  }
  const std::size_t rank = softmax.result(0)->type().rank();
  if (graph::normalize_axis(softmax.attrs().get_int("axis"), rank) !=
      graph::normalize_axis(linear.attrs().get_int("axis"), rank)) {
    return false;
  }
  const NumericsPolicy& y = softmax.result(0)->type().policy;
  const NumericsPolicy& dx = linear.result(0)->type().policy;
  auto at_accum = [](const NumericsPolicy& p) {
    return p.storage == p.accum && p.rounding == Rounding::nearest_even && (p.storage == DType::fp32 || p.storage == DType::fp64);
  };
  // Through the cast, y is stored in a narrower format that the
  // accumulation type holds exactly (the cast is exact).
  const bool y_read = linear.operand(0) == softmax.result(0)
                          ? at_accum(y)
                          : y.rounding == Rounding::nearest_even && at_accum(linear.operand(0)->type().policy) &&
                                linear.operand(0)->type().policy.accum == y.accum;
  return y_read && at_accum(dx) && y.accum == dx.accum;
}

bool exact_widening_cast(const ir::Operation& cast) {
  if (cast.name() != "graph.cast") return false;
  const NumericsPolicy& from = cast.operand(0)->type().policy;
  const NumericsPolicy& to = cast.result(0)->type().policy;
  if (!is_float(from.storage) || is_complex(from.storage) || to.rounding != Rounding::nearest_even) return false;
  if (to.storage == DType::fp64) return from.storage != DType::fp64;
  return to.storage == DType::fp32 && from.storage != DType::fp32 && templates::fp32_exact(from.storage);
}

bool normalization_epilogue_cast(const ir::Operation& cast) {
  if (cast.name() != "graph.cast") return false;
  const ir::Value* v = cast.operand(0);
  const ir::Operation* root = v->defining_op();
  if (!root || v->uses().size() != 1) return false;
  const std::string_view name = root->name();
  if (name != "graph.rmsnorm_safe" && name != "graph.layernorm_safe" && name != "graph.softmax_safe" &&
      name != "graph.softmax_linear" && name != "graph.norm_linear") {
    return false;
  }
  const NumericsPolicy& to = cast.result(0)->type().policy;
  return v->type().policy == default_policy(DType::fp32) && (to.storage == DType::bf16 || to.storage == DType::fp16) &&
         to.accum == DType::fp32 && to.rounding == Rounding::nearest_even && to.overflow == Overflow::inf_nan;
}

bool narrowed_gradient_holds_y(const ir::Operation& cast, const ir::Operation& softmax) {
  return graph::represents_exactly(cast.result(0)->type().dtype(), softmax.result(0)->type().dtype());
}

bool block_sums_prologue_fusible(const ir::Operation& sum) {
  return sum.name() == "graph.block_sums" && !templates::unsupported_policy(sum.operand(0)->type().policy);
}

const ir::Value* widened_source(const ir::Value* v, const ir::Operation& reader) {
  const ir::Operation* cast = v->defining_op();
  if (!cast || !exact_widening_cast(*cast)) return v;
  for (const ir::Use& use : v->uses()) {
    if (use.user != &reader) return v;
  }
  return cast->operand(0);
}

bool has_tile_template(const ir::Operation& kernel, std::string* why) {
  const Family family = kernel_family(kernel);
  if (family == Family::view || family == Family::collective) {
    auto bad = view_unsupported(kernel_root_op(kernel));
    if (why) *why = bad ? *bad : "a view runs without a kernel";
    return false;
  }
  if (family == Family::elementwise) return templates::elementwise_covers(kernel, why);
  if (family == Family::reduction) return templates::reduction_covers(kernel, why);
  if (family == Family::gemm) return templates::gemm_covers(kernel, why);
  if (family == Family::normalization) return templates::normalization_covers(kernel, why);
  if (family == Family::copy) return templates::copy_covers(kernel, why);
  if (family == Family::random) return templates::random_covers(kernel, why);
  if (family == Family::sparse) return templates::sparse_covers(kernel, why);
  if (family == Family::attention) return templates::attention_covers(kernel, why);
  if (family == Family::fft) return templates::fft_covers(kernel, why);
  if (family == Family::complex) return templates::complex_parts_covers(kernel, why);
  if (why) *why = "no Tile IR template for the " + std::string(family_name(family)) + " family yet";
  return false;
}

TileKernel lower_kernel(const ir::Operation& kernel, ir::Module& out, const std::string& name) {
  std::string why;
  if (!has_tile_template(kernel, &why)) {
    const ir::Operation& first = kernel_root_op(kernel);
    raise(ErrorCode::Compile,
          "kernel '" + kernel_name(kernel) + "' (" + std::string(first.name()) + ", family " +
              std::string(family_name(kernel_family(kernel))) + ") cannot be compiled: " + why +
              "; run it on the reference executor with TESSERA_BACKEND=reference",
          first.location());
  }
  if (kernel_family(kernel) == Family::reduction) return templates::lower_reduction(kernel, out, name);
  if (kernel_family(kernel) == Family::gemm) return templates::lower_gemm(kernel, out, name);
  if (kernel_family(kernel) == Family::normalization) return templates::lower_normalization(kernel, out, name);
  if (kernel_family(kernel) == Family::copy) return templates::lower_copy(kernel, out, name);
  if (kernel_family(kernel) == Family::random) return templates::lower_random(kernel, out, name);
  if (kernel_family(kernel) == Family::sparse) return templates::lower_sparse(kernel, out, name);
  if (kernel_family(kernel) == Family::attention) return templates::lower_attention(kernel, out, name);
  if (kernel_family(kernel) == Family::fft) return templates::lower_fft(kernel, out, name);
  if (kernel_family(kernel) == Family::complex) return templates::lower_complex_parts(kernel, out, name);
  return templates::lower_elementwise(kernel, out, name);
}

}  // namespace tessera::schedule
