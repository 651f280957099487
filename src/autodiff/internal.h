// Shared by the autodiff transforms (jvp.cpp, vjp.cpp, calls.cpp): rule
// lookup that names the op, function cloning, and the kinds of `call`.
#pragma once

#include <string>
#include <unordered_map>
#include <unordered_set>

#include "tessera/autodiff/autodiff.h"

namespace tessera::autodiff {

using ValueMap = std::unordered_map<const ir::Value*, ir::Value*>;

// The rule for `op`, or a CompileError "no JVP rule for op 'x' (in @f at file:line)".
JvpRule require_jvp(const ir::Operation& op, const std::string& func_name);
VjpRule require_vjp(const ir::Operation& op, const std::string& func_name);

enum class CallKind { plain, remat, custom_jvp, custom_vjp };
// custom_vjp wins over custom_jvp in reverse mode and custom_jvp in forward mode;
// `forward` selects which.
CallKind call_kind(const ir::Operation& call, bool forward);

// Creates a copy of `op` (same def and attributes) on `operands`.
ir::Operation* clone_op(ir::OpBuilder& b, const ir::Operation& op, std::vector<ir::Value*> operands);
// Maps each operand of `op` through `map` (values not in the map stay).
std::vector<ir::Value*> mapped_operands(const ir::Operation& op, const ValueMap& map);

// A new, empty func named `name`; ArgumentError when the module has one.
std::unique_ptr<ir::Operation> new_function(const ir::Module& module, std::string_view name,
                                            const SourceLocation& location);
// `base`, or base_1, base_2, ... when taken; records the name in `taken`.
std::string unique_param_name(const std::string& base, std::unordered_set<std::string>& taken);
// Checks `wrt` against the function's parameters (range, repeats).
void check_wrt(const ir::Operation& func, const std::vector<int>& wrt);

// The gradient-relevant check: values of float type carry derivatives.
inline bool differentiable(const ir::Value* v) {
  return tangent_policy(v->type()).has_value();
}

}  // namespace tessera::autodiff
