// tile-scalarize-vectors: every tile.load_vector / tile.store_vector becomes
// its `count` element ops at start + k (docs/design/0018). A backend without
// wide accesses (the CPU's, whose lane loops are SIMD across lanes already)
// runs it before emitting; the element ops give the same values and the same
// faults, element by element.
#include <string>
#include <vector>

#include "tessera/ir/builder.h"
#include "tessera/tile/passes.h"
#include "tessera/tile/tile_builder.h"
#include "tile/passes/op_rewrite.h"

namespace tessera::tile {
namespace {

// One vector op as its `count` element ops at start + k.
void scalarize(ir::OpBuilder& b, ir::Operation& op) {
  ir::Value* buffer = op.operand(0);
  ir::Value* start = op.operand(1);
  const bool load = op.name() == "tile.load_vector";
  const std::size_t n = load ? op.num_results() : op.num_operands() - 2;
  for (std::size_t k = 0; k < n; ++k) {
    ir::Value* at = start;
    if (k > 0) {
      ir::Value* offset = build_int(b, static_cast<std::int64_t>(k));
      // Elements of a vector that exists: the offset cannot wrap.
      at = b.create("tile.add", {start, offset}, {{"nowrap", true}}, op.location())->result(0);
    }
    if (load) {
      op.result(k)->replace_all_uses_with(b.create("tile.load_elem", {buffer, at}, {}, op.location())->result(0));
    } else {
      b.create("tile.store_elem", {buffer, at, op.operand(2 + k)}, {}, op.location());
    }
  }
}

}  // namespace

int scalarize_vectors(ir::Operation& func) {
  return detail::rewrite_ops(func, {"tile.load_vector", "tile.store_vector"}, scalarize);
}

}  // namespace tessera::tile
