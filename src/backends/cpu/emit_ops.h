// The C++ text of individual Tile IR ops for the CPU emitter (emit_ops.cpp).
//
// The structure of the program (lane loops, control flow, storage of values)
// is emitter.cpp's job; these functions only turn one op, given the C++
// expressions of its operands, into an expression or a statement.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backends/common/c_lane_expr.h"
#include "backends/common/index_bounds.h"
#include "tessera/ir/ir.h"

namespace tessera::cpu::detail {

// How lane code accesses elements (memory.h):
//   checked  load/store throw at an out-of-range index (the plain form);
//   masked   branch-free: the lane's flag `lane_ok` is cleared instead, out-of-range
//            loads read 0 and stores happen only while the flag holds, so the
//            lane loop vectorizes;
//   dry      the diagnosis re-run of a faulting lane: checked loads, stores
//            that check their index and write nothing.
// checked: throwing accessors; masked: lane flags (masked vector accesses);
// dry: checked stores that do not write (a fault's diagnosis re-run);
// unchecked: plain accesses whose range was checked before the loop.
enum class Access { checked, masked, dry, unchecked };

struct LaneContext {
  std::string linear_id;                                  // "lane" or "group"
  std::function<std::string(const std::string&)> symbol;  // symbol name -> C++ expression
  std::string kernel_name;                                // for messages in generated code
  Access access = Access::checked;
  // Integer adds and muls that cannot saturate are emitted as plain C++.
  const codegen::IndexBounds* bounds = nullptr;
};

// True when the op (and every op nested in it) can fault only through an
// element access, and cannot run unbounded on a value read out of range:
// such lane code may run with masked accesses.
bool maskable_lane_op(const ir::Operation& op);

// True for the ops lane_expr handles (pure lane ops, load_elem, reduce_sum).
using codegen::is_lane_value_op;
// The C++ expression computing op's single lane result.
std::string lane_expr(const ir::Operation& op, const std::vector<std::string>& args, const LaneContext& ctx);
// tile.store_elem as a statement.
std::string store_stmt(const ir::Operation& op, const std::vector<std::string>& args, Access access);

// The statement of a group-level op that is not control flow (tile_load,
// tile_store, zeros, mma, tile_add, tile_cast, transpose, cp_async, cp_async_wait, barrier);
// `result` names its result variable (unused for ops without one).
std::string group_stmt(const ir::Operation& op, const std::vector<std::string>& args, const std::string& result,
                       const std::function<std::int64_t(const ir::Dim&)>& resolve);

// The C++ type holding a value of `type` (lane value, tile, buffer view).
// Tile shapes must be fixed; `resolve` turns a symbolic dim into its size or
// raises.
std::string cpp_type(const ir::Type& type, const std::function<std::int64_t(const ir::Dim&)>& resolve);

// Raises CompileError for a rounding mode generated code cannot honour.
void require_supported_policy(const NumericsPolicy& policy, const std::string& what);

}  // namespace tessera::cpu::detail
