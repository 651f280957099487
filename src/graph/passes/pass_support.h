// Helpers shared by the Graph IR passes (dce, cse, constant-fold,
// canonicalize): walking blocks, deciding what may be removed, reading
// graph.constant values, comparing attributes bit for bit, and creating
// replacement ops only when their inferred type is the one wanted.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "tessera/ir/builder.h"
#include "tessera/ir/ir.h"
#include "tessera/ir/pass.h"

namespace tessera::graph {

// The passes, one per file; register_passes.cpp registers them.
ir::PassInfo make_dce_pass();
ir::PassInfo make_cse_pass();
ir::PassInfo make_constant_fold_pass();
ir::PassInfo make_canonicalize_pass();
ir::PassInfo make_inline_calls_pass();

// Calls `fn` on the body of every function in the module and on every block
// nested in ops there (inner blocks first).
void for_each_block(ir::Module& module, const std::function<void(ir::Block&)>& fn);

// True when passes may delete, merge or move the op: its effect is pure, it
// is not a terminator and it holds no regions.
bool is_removable(const ir::Operation& op);

// Erases removable ops whose results are unused, walking the block in
// reverse until nothing changes. Returns whether anything was erased.
bool erase_dead_ops(ir::Block& block);

// The op defining `v` when it is a graph.constant, else nullptr.
const ir::Operation* defining_constant(const ir::Value* v);
// The value every element of the graph.constant defining `v` has, when they
// all have the same bits (one stored value, or all equal); else nullopt.
std::optional<double> splat_value(const ir::Value* v);

// Attribute maps equal bit for bit: unlike AttrMap::operator==, +0.0 and
// -0.0 differ and a NaN equals a NaN with the same bits.
bool identical_attrs(const ir::AttrMap& a, const ir::AttrMap& b);
std::size_t hash_attrs(const ir::AttrMap& attrs);

// Creates `op_name` before `pos` when the op is registered, the attributes
// are valid for it and its inferred result types equal `want`; otherwise
// creates nothing and returns nullptr (so a rewrite whose op another
// family has not registered yet, or whose types would change, is skipped).
ir::Operation* create_if_typed(ir::Block& block, ir::Block::OpList::iterator pos, std::string_view op_name,
                               std::vector<ir::Value*> operands, ir::AttrMap attrs, const std::vector<ir::Type>& want,
                               const SourceLocation& location);

}  // namespace tessera::graph
