// Upper bounds of non-negative integer lane values (the index arithmetic of
// a kernel), so an emitter can write a plain + or * where the saturating
// integer helpers could never saturate. Plain arithmetic keeps an element's
// offset affine in the lane id, which a host compiler needs before it turns
// a lane loop's element accesses into contiguous vector loads.
//
// Seeds: integer constants >= 0; linear_id, group_id and num_groups (below
// kIndexLimit: the launcher refuses larger grids); symbols that are buffer
// extents (below kIndexLimit: the launcher refuses larger extents; a symbol
// bound by a scalar argument is not a seed). add and mul of bounded operands
// stay bounded while the product or sum stays below 2^62; min of a bounded
// operand is bounded; a tile.for induction variable is bounded by its
// bounded upper limit when its lower limit is bounded (so non-negative).
// A quotient or remainder of a bounded value by a positive constant is
// bounded too. A backend that knows the group size may bound linear_id by
// it (the CUDA backend: a thread's index in its block), which lets it keep
// index arithmetic under 2^31 in 32-bit registers (fits_int32).
#pragma once

#include <cstdint>
#include <unordered_map>
#include <unordered_set>

#include "tessera/ir/ir.h"

namespace tessera::codegen {

inline constexpr std::uint64_t kIndexLimit = std::uint64_t{1} << 48;

class IndexBounds {
 public:
  // `scalar_symbols`: symbol names a scalar argument binds (not bounded).
  IndexBounds(const ir::Operation& func, const std::unordered_set<std::string>& scalar_symbols,
              std::uint64_t linear_id_limit = kIndexLimit);
  // True when `op` is an integer add or mul whose result stays in [0, 2^62).
  // (Ops their producer marked `nowrap` are plain anyway: codegen's
  // common_lane_expr writes them so on every backend.)
  bool plain(const ir::Operation& op) const { return plain_.count(&op) != 0; }
  // True when `v` is an integer lane value known to be >= 0 (and bounded).
  bool non_negative(const ir::Value* v) const { return bound(v) != nullptr; }
  // True when `v` is an integer lane value known to lie in [0, 2^31 - 2^24]:
  // it fits an int, and so does a loop's last step past it.
  bool fits_int32(const ir::Value* v) const {
    const std::uint64_t* b = bound(v);
    return b != nullptr && *b <= kInt32Limit;
  }
  static constexpr std::uint64_t kInt32Limit = (std::uint64_t{1} << 31) - (std::uint64_t{1} << 24);

 private:
  void visit(const ir::Block& block);
  const std::uint64_t* bound(const ir::Value* v) const;

  const std::unordered_set<std::string>& scalar_symbols_;
  std::uint64_t linear_id_limit_;
  std::unordered_map<const ir::Value*, std::uint64_t> bound_;
  std::unordered_set<const ir::Operation*> plain_;
};

}  // namespace tessera::codegen
