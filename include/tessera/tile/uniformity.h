// Uniformity analysis of a Tile IR kernel (docs/design/0003-tile-ir.md, section 6).
//
// A value is uniform when it is provably equal in every tile of a group:
// constants, shape symbols, group_id, group_size, num_groups, kernel
// parameters, smem allocations, tile values (group-held), and ops whose
// operands are all uniform; lane loads (load_elem, reduce_sum) are uniform
// when their buffer and indices are and no op of the kernel writes a buffer
// that may alias it
// (conservative: writes anywhere in the kernel count, not only those in the
// same barrier interval). tile.linear_id is not uniform, except in kernels
// with one tile per group, where everything is.
//
// Control flow: a region runs under uniform control when its op does and
// the op's deciding operands are uniform (tile.if's cond, tile.for's lo, hi
// and step, tile.while's condition). Results of an op whose control is
// divergent are divergent; loop-carried values are solved to a fixed point.
// The cpu-backend uses this to decide which lane values are computed once
// per group and which per lane; tile-verify-sync uses it to reject
// group-cooperative ops under divergent control.
#pragma once

#include <string>
#include <unordered_map>
#include <unordered_set>

#include "tessera/ir/ir.h"

namespace tessera::tile {

class UniformityAnalysis {
 public:
  // Analyses one function (a kernel, or any func holding Tile IR).
  explicit UniformityAnalysis(const ir::Operation& func);

  // True when `value` is equal in every tile of the group (among the tiles
  // that compute it).
  bool is_uniform(const ir::Value* value) const;
  // True when every tile of the group that reaches `op` reaches it together:
  // every enclosing region runs under uniform control.
  bool in_uniform_control(const ir::Operation& op) const;
  // True when the regions of control-flow op `op` run under uniform control.
  bool regions_uniform(const ir::Operation& op) const;
  // For a divergent value or control: a short reason ("depends on
  // tile.linear_id at 3:8"), for diagnostics; empty when uniform.
  std::string why_divergent(const ir::Value* value) const;

 private:
  void run(const ir::Block& block, bool uniform_control);
  bool mark(const ir::Value* v, bool uniform, const std::string& reason);
  void collect_writes(const ir::Block& block);
  bool buffer_written(const ir::Value* buffer) const;

  const ir::Operation& func_;
  bool all_uniform_ = false;
  std::unordered_set<const ir::Value*> divergent_;
  std::unordered_map<const ir::Value*, std::string> reasons_;
  std::unordered_set<const ir::Operation*> divergent_ops_;      // ops under divergent control
  std::unordered_set<const ir::Operation*> divergent_regions_;  // control-flow ops whose regions diverge
  std::unordered_set<const ir::Value*> written_;                // buffers written somewhere
  bool writes_gmem_ = false, writes_smem_arg_ = false;
  bool changed_ = false;
};

}  // namespace tessera::tile
