// What the C-family emitters (the CPU backend's host C++, the CUDA backend's
// CUDA C++) spell the same way for Tile IR lane ops: op classification, the
// value of a constant, and the expressions whose text does not depend on the
// target (ids, comparisons, logic, select, reduce_sum, integer arithmetic
// through the tsr:: helpers both header libraries define). Each backend keeps
// what differs: literals, float arithmetic, casts, element access.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tessera/ir/ir.h"

namespace tessera::codegen {

// "tile.add" -> "add".
std::string short_name(const ir::Operation& op);

// True for the ops a lane expression computes (pure lane ops, load_elem,
// reduce_sum).
bool is_lane_value_op(const ir::Operation& op);

// The value a tile.const holds, integers clamped to their type's range.
struct ConstantValue {
  NumericsPolicy policy;
  enum class Kind { boolean, integer, real } kind = Kind::real;
  bool boolean = false;
  std::int64_t integer = 0;
  double real = 0.0;
};
ConstantValue constant_value(const ir::Operation& op);
// The integer a tile.const defining `v` holds; nullopt for anything else.
std::optional<std::int64_t> constant_integer(const ir::Value* v);

// The expression of `op` (operand expressions `a`) when its spelling is the
// same on every C-family target; nullopt otherwise. `dtype_name` spells a
// dtype for the target's header library, `fault` is the argument its integer
// helpers take to report a fault (division by zero, negative power).
std::optional<std::string> common_lane_expr(const ir::Operation& op, const std::vector<std::string>& a,
                                            const std::function<std::string(DType)>& dtype_name,
                                            const std::function<std::string()>& fault);

}  // namespace tessera::codegen
