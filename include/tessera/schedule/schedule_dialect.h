// Schedule IR: one op per kernel (ARCHITECTURE.md, "Schedule IR").
//
// A Schedule IR function is a Graph IR function whose body has been
// partitioned into `schedule.kernel` ops. Each kernel holds, in its region,
// the Graph IR ops it fuses (one fusion group) and carries the decisions the
// later levels need as attributes:
//
//   %3 = "schedule.kernel"(%x, %b) {buffers = [0], domain = shape<[B, 64]>, family = "elementwise",
//          name = "k1", result_types = "tensor<[B, 64] fp32>", tile = [4096], variant = "tile"}
//          : (tensor<[B, 64] fp32>, tensor<[64] fp32>) -> (tensor<[B, 64] fp32>) {
//     ^(%a: tensor<[B, 64] fp32>, %c: tensor<[64] fp32>):
//     %4 = graph.add %a, %c : tensor<[B, 64] fp32>
//     %5 = graph.relu %4 : tensor<[B, 64] fp32>
//     schedule.yield %5
//   }
//
// - family: the op family whose template lowers the kernel to Tile IR
//   (elementwise, reduction, gemm, normalization, view, constant, copy,
//   random, collective, opaque).
// - domain: the iteration domain (the shape the kernel's lanes cover).
// - tile: the tiling knobs autotuning may change (never the numerics: the
//   reduction order is fixed by the shape alone, docs/design/0005).
// - variant: the implementation chosen by the VariantChooser ("tile": a
//   generated Tile IR kernel; "view": no code, the result aliases the
//   operand; "constant": data made once when the executable is built;
//   "none": no implementation exists yet).
// - buffers: per result, the buffer slot from schedule-plan-buffers
//   (-1: a function result, which gets its own allocation).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tessera/ir/ir.h"

namespace tessera::schedule {

enum class Family {
  elementwise,
  reduction,
  gemm,
  normalization,
  view,
  constant,
  copy,
  random,
  collective,
  sparse,
  attention,
  fft,
  complex,
  opaque
};

std::string_view family_name(Family family);
// ArgumentError naming the valid families for an unknown name.
Family parse_family(std::string_view name);
// The family a Graph IR op belongs to (opaque for ops no template covers).
Family family_of(const ir::Operation& graph_op);

bool is_kernel_op(const ir::Operation& op);
Family kernel_family(const ir::Operation& kernel);
const std::string& kernel_name(const ir::Operation& kernel);
std::string kernel_variant(const ir::Operation& kernel);  // "" before schedule-choose-variants
// The kernel's body block (arguments = the kernel's operands).
ir::Block& kernel_body(const ir::Operation& kernel);
// The op a kernel is named after in messages: its first op that is not a
// constant copied in (a constant kernel's own constant otherwise).
const ir::Operation& kernel_root_op(const ir::Operation& kernel);
// A graph.constant holding one value for every element (partition copies it
// into the kernels that read it; templates make it a literal).
bool is_splat_constant(const ir::Operation& op);
// The schedule.kernel ops of a function, in order.
std::vector<ir::Operation*> kernels_of(const ir::Operation& func);

}  // namespace tessera::schedule
