// The reference executor: runs Graph IR functions and single ops on host
// tensors with each op's reference kernel (ARCHITECTURE.md decision 4).
//
// Calling a function binds its parameters' symbolic dims to the argument
// sizes (the same symbol must get the same size everywhere; a mismatch is a
// ShapeError naming the parameter, the dim and both sizes) and checks each
// argument's policy against the parameter's. Ops run in program order.
#pragma once

#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "tessera/ir/dialect.h"
#include "tessera/ir/ir.h"
#include "tessera/runtime/tensor.h"

namespace tessera::graph {

using SymbolBindings = std::map<std::string, std::int64_t, std::less<>>;

// Binds `type`'s symbols against `sizes`; `what` names the value in errors
// ("argument 'x'").
void bind_symbols(const ir::Type& type, const std::vector<std::int64_t>& sizes, SymbolBindings& bindings,
                  const std::string& what);
// `type` with every symbol replaced by its binding.
ir::Type concretize(const ir::Type& type, const SymbolBindings& bindings);

// Checks `args` against `func`'s parameters (count, policies) and binds the
// symbols of their shapes: what every path that runs a Graph IR function
// (this executor, compiled executables) does first.
SymbolBindings bind_arguments(const ir::Operation& func, std::span<const Tensor> args);

std::vector<Tensor> execute(const ir::Operation& func, std::span<const Tensor> args);

// What one execution measured. Live bytes are the storage bytes of the values
// the executor holds: arguments and op results, each released right after
// its last use in its function (results of a `call` are held by the caller,
// the callee's own values only while it runs), so peak_live_bytes is the most
// memory a run needing only those values would hold at once.
struct ExecutionStats {
  std::int64_t peak_live_bytes = 0;
  std::int64_t ops_executed = 0;  // ops run, inside called functions too (not counting return)
};

// Like execute(func, args), resolving `call` ops against `module` (the
// version without a module raises for a call), and filling `stats` when given.
// `wanted` (when not empty, one flag per result of `func`): only those
// results are returned, and the pure ops none of them needs are not run (a
// gradient's staged function computes the loss too; grad() does not want
// it).
std::vector<Tensor> execute(const ir::Module& module, const ir::Operation& func, std::span<const Tensor> args,
                            ExecutionStats* stats = nullptr, std::span<const bool> wanted = {});

// Runs one op of a function (not `call`, not the terminator) on its inputs,
// given its result types with the call's sizes bound.
using OpRunner = std::function<std::vector<Tensor>(const ir::Operation& op, std::span<const Tensor> inputs,
                                                   std::span<const ir::Type> result_types)>;
// The same walk (argument checks, symbol bindings, calls, live-value
// release) with each op run by `run_op` instead of its reference kernel: how
// eager transforms run their staged functions on compiled single-op kernels
// (tessera/schedule/eager.h).
std::vector<Tensor> execute_with(const ir::Module& module, const ir::Operation& func, std::span<const Tensor> args,
                                 const OpRunner& run_op, std::span<const bool> wanted = {});

// Runs one op eagerly: attributes are completed and checked, result types
// inferred from the inputs, then the reference kernel runs.
std::vector<Tensor> execute_op(std::string_view op_name, std::span<const Tensor> inputs, const ir::AttrMap& attrs);
std::vector<Tensor> execute_op(const ir::OpDef& def, std::span<const Tensor> inputs, const ir::AttrMap& attrs);

}  // namespace tessera::graph
