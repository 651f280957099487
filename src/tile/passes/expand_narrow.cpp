// tile-expand-narrow: every tile.narrow_unary becomes the double formula
// that defines it -- the operand in fp64, the function (gelu as
// (0.5 x) (1 + erf(x / sqrt 2)), the reference's order), one rounding to
// fp32, one to the op's `to` (none when it is fp32) -- in the lane ops every
// backend has. Backends
// without the certified fp32 evaluation (the CPU, whose lane loops
// vectorize the double formula; CUDA Tile IR) run it before emitting.
#include <numbers>
#include <string>
#include <vector>

#include "tessera/ir/builder.h"
#include "tessera/tile/passes.h"
#include "tessera/tile/tile_builder.h"
#include "tile/passes/op_rewrite.h"

namespace tessera::tile {
namespace {

ir::Value* expand(ir::OpBuilder& b, const ir::Operation& op) {
  const NumericsPolicy f64 = default_policy(DType::fp64);
  auto binary = [&](const char* name, ir::Value* x, ir::Value* y) {
    return build(b, std::string("tile.") + name, {x, y}, {}, op.location());
  };
  ir::Value* x = build(b, "tile.cast", {op.operand(0)}, {{"to", f64}}, op.location());
  const std::string& fn = op.attrs().get_string("fn");
  ir::Value* y = nullptr;
  if (fn == "gelu") {
    ir::Value* half_x = binary("mul", build_real(b, 0.5, f64), x);
    ir::Value* erf = build(b, "tile.erf", {binary("div", x, build_real(b, std::numbers::sqrt2, f64))}, {}, op.location());
    y = binary("mul", half_x, binary("add", build_real(b, 1.0, f64), erf));
  } else {
    y = build(b, "tile." + fn, {x}, {}, op.location());
  }
  ir::Value* y32 = build(b, "tile.cast", {y}, {{"to", default_policy(DType::fp32)}}, op.location());
  const NumericsPolicy& to = op.attrs().get_policy("to");
  return to == default_policy(DType::fp32) ? y32 : build(b, "tile.cast", {y32}, {{"to", to}}, op.location());
}

bool block_contains(const ir::Block& block, std::string_view name) {
  for (const auto& op : block.ops()) {
    if (op->name() == name) return true;
    for (std::size_t r = 0; r < op->num_regions(); ++r)
      if (block_contains(op->region(r).block(), name)) return true;
  }
  return false;
}

}  // namespace

int expand_narrow_unaries(ir::Operation& func) {
  return detail::rewrite_ops(func, {"tile.narrow_unary"}, [](ir::OpBuilder& b, ir::Operation& op) {
    op.result(0)->replace_all_uses_with(expand(b, op));
  });
}

bool contains_op(const ir::Operation& func, std::string_view name) {
  for (std::size_t r = 0; r < func.num_regions(); ++r)
    if (block_contains(func.region(r).block(), name)) return true;
  return false;
}

}  // namespace tessera::tile
