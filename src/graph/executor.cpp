#include "tessera/graph/executor.h"

#include <unordered_map>

#include "tessera/ir/builder.h"
#include "tessera/ir/dialect.h"
#include "tessera/support/error.h"

namespace tessera::graph {

void bind_symbols(const ir::Type& type, const std::vector<std::int64_t>& sizes, SymbolBindings& bindings,
                  const std::string& what) {
  if (sizes.size() != type.rank()) {
    raise(ErrorCode::ShapeMismatch, what + " has rank " + std::to_string(sizes.size()) + ", expected rank " +
                                        std::to_string(type.rank()) + " (" + ir::print_shape(type.shape) + ")");
  }
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const ir::Dim& d = type.shape[i];
    if (!d.is_symbolic()) {
      if (d.size != sizes[i]) {
        raise(ErrorCode::ShapeMismatch, what + " dim " + std::to_string(i) + " is " + std::to_string(sizes[i]) +
                                            ", expected " + std::to_string(d.size));
      }
      continue;
    }
    auto [it, inserted] = bindings.emplace(d.symbol, sizes[i]);
    if (!inserted && it->second != sizes[i]) {
      raise(ErrorCode::ShapeSymbolBinding, what + " dim " + std::to_string(i) + " ('" + d.symbol + "') is " +
                                               std::to_string(sizes[i]) + ", but '" + d.symbol +
                                               "' is already bound to " + std::to_string(it->second));
    }
  }
}

ir::Type concretize(const ir::Type& type, const SymbolBindings& bindings) {
  ir::Type out = type;
  for (auto& d : out.shape) {
    if (!d.is_symbolic()) continue;
    auto it = bindings.find(d.symbol);
    if (it == bindings.end()) raise(ErrorCode::ShapeMismatch, "symbolic dim '" + d.symbol + "' is never bound");
    d = ir::Dim::fixed(it->second);
  }
  return out;
}

namespace {

std::vector<Tensor> run_kernel(const ir::Operation& op, std::span<const Tensor> inputs,
                               std::span<const ir::Type> result_types) {
  const auto& kernel = ir::require_reference(op.def());
  try {
    auto results = kernel(ir::KernelCall{inputs, op.attrs(), result_types});
    if (results.size() != result_types.size()) {
      raise(ErrorCode::Internal, "reference kernel returned the wrong number of results");
    }
    return results;
  } catch (const Error& e) {
    ir::rethrow_for_op(e, op.name(), op.location());
  }
}

}  // namespace

std::vector<Tensor> execute(const ir::Operation& func, std::span<const Tensor> args) {
  const ir::Block& body = ir::function_body(func);
  const std::string& fname = ir::function_name(func);
  if (args.size() != body.num_arguments()) {
    raise(ErrorCode::ArgumentInvalid, "function '" + fname + "' takes " + std::to_string(body.num_arguments()) +
                                          " argument(s), got " + std::to_string(args.size()));
  }
  SymbolBindings bindings;
  std::unordered_map<const ir::Value*, Tensor> env;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const ir::Value* param = body.argument(i);
    std::string what = "argument '" + (param->name().empty() ? std::to_string(i) : param->name()) + "'";
    bind_symbols(param->type(), args[i].shape(), bindings, what);
    if (args[i].policy() != param->type().policy) {
      raise(ErrorCode::DtypeUnsupported, what + " has policy " + print_policy(args[i].policy()) + ", expected " +
                                             print_policy(param->type().policy));
    }
    env.emplace(param, args[i]);
  }
  for (const auto& op_ptr : body.ops()) {
    const ir::Operation& op = *op_ptr;
    std::vector<Tensor> inputs;
    inputs.reserve(op.num_operands());
    for (ir::Value* v : op.operands()) inputs.push_back(env.at(v));
    if (op.def().is_terminator) return inputs;
    std::vector<ir::Type> types;
    for (ir::Value* r : op.results()) types.push_back(concretize(r->type(), bindings));
    auto results = run_kernel(op, inputs, types);
    for (std::size_t i = 0; i < results.size(); ++i) env.emplace(op.result(i), std::move(results[i]));
  }
  raise(ErrorCode::VerifyFailed, "function '" + fname + "' has no return");
}

std::vector<Tensor> execute_op(std::string_view op_name, std::span<const Tensor> inputs, const ir::AttrMap& attrs) {
  return execute_op(ir::Registry::global().get(op_name), inputs, attrs);
}

std::vector<Tensor> execute_op(const ir::OpDef& def, std::span<const Tensor> inputs, const ir::AttrMap& attrs) {
  ir::AttrMap full = ir::complete_attrs(def, attrs);
  std::vector<ir::Type> in_types;
  in_types.reserve(inputs.size());
  for (const Tensor& t : inputs) in_types.push_back(ir::Type::tensor(ir::fixed_shape(t.shape()), t.policy()));
  auto types = ir::infer_result_types(def, in_types, full, {});
  const auto& kernel = ir::require_reference(def);
  try {
    return kernel(ir::KernelCall{inputs, full, types});
  } catch (const Error& e) {
    ir::rethrow_for_op(e, def.name, {});
  }
}

}  // namespace tessera::graph
