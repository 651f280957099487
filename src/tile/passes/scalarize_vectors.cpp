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

namespace tessera::tile {
namespace {

int scalarize_block(ir::Block& block) {
  int count = 0;
  std::vector<ir::Operation*> vector_ops;
  for (const auto& op : block.ops()) {
    for (std::size_t r = 0; r < op->num_regions(); ++r) count += scalarize_block(op->region(r).block());
    if (op->name() == "tile.load_vector" || op->name() == "tile.store_vector") vector_ops.push_back(op.get());
  }
  for (ir::Operation* op : vector_ops) {
    ir::OpBuilder b(block);
    b.set_insertion_point(block.find(op));
    ir::Value* buffer = op->operand(0);
    ir::Value* start = op->operand(1);
    const bool load = op->name() == "tile.load_vector";
    const std::size_t n = load ? op->num_results() : op->num_operands() - 2;
    for (std::size_t k = 0; k < n; ++k) {
      ir::Value* at = start;
      if (k > 0) {
        ir::Value* offset = build_int(b, static_cast<std::int64_t>(k));
        // Elements of a vector that exists: the offset cannot wrap.
        at = b.create("tile.add", {start, offset}, {{"nowrap", true}}, op->location())->result(0);
      }
      if (load) {
        op->result(k)->replace_all_uses_with(b.create("tile.load_elem", {buffer, at}, {}, op->location())->result(0));
      } else {
        b.create("tile.store_elem", {buffer, at, op->operand(2 + k)}, {}, op->location());
      }
    }
    block.erase(op);
    ++count;
  }
  return count;
}

}  // namespace

int scalarize_vectors(ir::Operation& func) {
  int count = 0;
  for (std::size_t r = 0; r < func.num_regions(); ++r) count += scalarize_block(func.region(r).block());
  return count;
}

}  // namespace tessera::tile
