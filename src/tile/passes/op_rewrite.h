// The walk the op-by-op Tile IR rewrites share (tile-scalarize-vectors,
// tile-expand-narrow): every op of the given names, in every block of a
// function, nested regions first, handed to `rewrite` with a builder placed
// before it; `rewrite` replaces its results, and the op is erased after.
#pragma once

#include <initializer_list>
#include <string_view>
#include <vector>

#include "tessera/ir/builder.h"

namespace tessera::tile::detail {

inline bool named(const ir::Operation& op, std::initializer_list<std::string_view> names) {
  for (std::string_view n : names) {
    if (op.name() == n) return true;
  }
  return false;
}

template <class Rewrite>
int rewrite_block(ir::Block& block, std::initializer_list<std::string_view> names, const Rewrite& rewrite) {
  int count = 0;
  std::vector<ir::Operation*> matched;
  for (const auto& op : block.ops()) {
    for (std::size_t r = 0; r < op->num_regions(); ++r) count += rewrite_block(op->region(r).block(), names, rewrite);
    if (named(*op, names)) matched.push_back(op.get());
  }
  for (ir::Operation* op : matched) {
    ir::OpBuilder b(block);
    b.set_insertion_point(block.find(op));
    rewrite(b, *op);
    block.erase(op);
    ++count;
  }
  return count;
}

// Rewrites every op named in `names`; returns how many.
template <class Rewrite>
int rewrite_ops(ir::Operation& func, std::initializer_list<std::string_view> names, const Rewrite& rewrite) {
  int count = 0;
  for (std::size_t r = 0; r < func.num_regions(); ++r) count += rewrite_block(func.region(r).block(), names, rewrite);
  return count;
}

}  // namespace tessera::tile::detail
