#include "tessera/graph/executor.h"

#include <unordered_map>
#include <unordered_set>

#include "tessera/ir/builder.h"
#include "tessera/ir/dialect.h"
#include "tessera/runtime/tensor.h"
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

SymbolBindings bind_arguments(const ir::Operation& func, std::span<const Tensor> args) {
  const ir::Block& body = ir::function_body(func);
  if (args.size() != body.num_arguments()) {
    raise(ErrorCode::ArgumentInvalid, "function '" + ir::function_name(func) + "' takes " +
                                          std::to_string(body.num_arguments()) + " argument(s), got " +
                                          std::to_string(args.size()));
  }
  SymbolBindings bindings;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const ir::Value* param = body.argument(i);
    std::string what = "argument '" + (param->name().empty() ? std::to_string(i) : param->name()) + "'";
    bind_symbols(param->type(), args[i].shape(), bindings, what);
    if (args[i].policy() != param->type().policy) {
      raise(ErrorCode::DtypeUnsupported, what + " has policy " + print_policy(args[i].policy()) + ", expected " +
                                             print_policy(param->type().policy));
    }
  }
  return bindings;
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

// Runs functions op by op, holding each value until its last use and
// counting the bytes held (ExecutionStats).
class Runner {
 public:
  Runner(const ir::Module* module, ExecutionStats* stats, const OpRunner* run_op = nullptr)
      : module_(module), stats_(stats), run_op_(run_op) {}

  // `args_owned`: the arguments count as live bytes of this run (false for a
  // callee, whose arguments the caller holds and has counted).
  // `wanted` (when not empty): which of the function's results to return;
  // pure ops that none of them needs are not run.
  std::vector<Tensor> run(const ir::Operation& func, std::span<const Tensor> args, bool args_owned,
                          std::span<const bool> wanted = {}) {
    const ir::Block& body = ir::function_body(func);
    SymbolBindings bindings = bind_arguments(func, args);
    const std::unordered_set<const ir::Operation*> skipped = unneeded_ops(func, wanted);
    // Operand k of `op` is read: any op's, and the return's wanted ones.
    auto reads = [&](const ir::Operation& op, std::size_t k) { return !op.def().is_terminator || wanted.empty() || wanted[k]; };
    // Position of each value's last use (the return counts).
    std::unordered_map<const ir::Value*, std::size_t> last_use;
    std::size_t position = 0;
    for (const auto& op_ptr : body.ops()) {
      if (!skipped.count(op_ptr.get())) {
        for (std::size_t k = 0; k < op_ptr->num_operands(); ++k) {
          if (reads(*op_ptr, k)) last_use[op_ptr->operand(k)] = position;
        }
      }
      ++position;
    }
    std::unordered_map<const ir::Value*, Tensor> env;
    std::unordered_map<const ir::Value*, bool> counted;
    auto hold = [&](const ir::Value* v, Tensor t, bool count) {
      if (count) add_live(bytes_of(t));
      counted[v] = count;
      env.emplace(v, std::move(t));
    };
    auto release = [&](const ir::Value* v) {
      auto it = env.find(v);
      if (it == env.end()) return;
      if (counted[v]) add_live(-bytes_of(it->second));
      env.erase(it);
    };
    for (std::size_t i = 0; i < args.size(); ++i) {
      const ir::Value* param = body.argument(i);
      hold(param, args[i], args_owned);
      if (!last_use.count(param)) release(param);
    }
    position = 0;
    for (const auto& op_ptr : body.ops()) {
      const ir::Operation& op = *op_ptr;
      if (skipped.count(&op)) {
        ++position;
        continue;
      }
      std::vector<Tensor> inputs;
      inputs.reserve(op.num_operands());
      for (std::size_t k = 0; k < op.num_operands(); ++k) {
        if (reads(op, k)) inputs.push_back(env.at(op.operand(k)));
      }
      if (op.def().is_terminator) {
        for (const auto& [v, t] : env) {
          if (counted[v]) add_live(-bytes_of(t));
        }
        return inputs;
      }
      std::vector<ir::Type> types;
      for (ir::Value* r : op.results()) types.push_back(concretize(r->type(), bindings));
      auto results = op.name() == "call" ? run_call(op, inputs, types)
                     : run_op_            ? (*run_op_)(op, inputs, types)
                                          : run_kernel(op, inputs, types);
      if (stats_) ++stats_->ops_executed;
      for (std::size_t i = 0; i < results.size(); ++i) {
        hold(op.result(i), std::move(results[i]), true);
        if (!last_use.count(op.result(i))) release(op.result(i));
      }
      for (ir::Value* v : op.operands()) {
        if (auto it = last_use.find(v); it != last_use.end() && it->second == position) release(v);
      }
      ++position;
    }
    raise(ErrorCode::VerifyFailed, "function '" + ir::function_name(func) + "' has no return");
  }

 private:
  static std::int64_t bytes_of(const Tensor& t) {
    return static_cast<std::int64_t>(storage_bytes_for(t.dtype(), t.numel()));
  }
  void add_live(std::int64_t delta) {
    live_ += delta;
    if (stats_ && live_ > stats_->peak_live_bytes) stats_->peak_live_bytes = live_;
  }

  std::vector<Tensor> run_call(const ir::Operation& op, std::span<const Tensor> inputs,
                               std::span<const ir::Type> types) {
    const std::string& callee_name = op.attrs().get_string("callee");
    if (!module_) {
      raise(ErrorCode::ArgumentInvalid,
            "'call' of @" + callee_name +
                " needs the module holding the callee: run the function with "
                "execute(module, func, args)",
            op.location());
    }
    const ir::Operation* callee = module_->lookup(callee_name);
    if (!callee) {
      raise(ErrorCode::ArgumentInvalid, "'call' names @" + callee_name + ", which the module does not define",
            op.location());
    }
    if (++depth_ > 256)
      raise(ErrorCode::ArgumentInvalid, "calls nest deeper than 256 (recursion through @" + callee_name + "?)",
            op.location());
    std::vector<Tensor> results;
    try {
      results = run(*callee, inputs, false);
    } catch (const Error& e) {
      ir::rethrow_for_op(e, "call @" + callee_name, op.location());
    }
    --depth_;
    if (results.size() != types.size()) {
      raise(ErrorCode::VerifyFailed,
            "'call' of @" + callee_name + " expects " + std::to_string(types.size()) +
                " result(s), the callee returned " + std::to_string(results.size()),
            op.location());
    }
    for (std::size_t i = 0; i < results.size(); ++i) {
      if (results[i].shape() != sizes_of(types[i]) || results[i].policy() != types[i].policy) {
        raise(ErrorCode::VerifyFailed,
              "'call' of @" + callee_name + " result #" + std::to_string(i) + " is " + describe(results[i]) +
                  ", but the call's result_types say " + ir::print_type(types[i]),
              op.location());
      }
    }
    return results;
  }

  // The ops of `func` that no wanted result needs and that have no effect
  // (pure, not a call): none when `wanted` is empty.
  static std::unordered_set<const ir::Operation*> unneeded_ops(const ir::Operation& func, std::span<const bool> wanted) {
    std::unordered_set<const ir::Operation*> skipped;
    if (wanted.empty()) return skipped;
    const ir::Block& body = ir::function_body(func);
    const ir::Operation* ret = body.terminator();
    if (!ret || ret->num_operands() != wanted.size()) {
      raise(ErrorCode::ArgumentInvalid, "function '" + ir::function_name(func) + "' returns " +
                                            std::to_string(ret ? ret->num_operands() : 0) + " results; " +
                                            std::to_string(wanted.size()) + " were marked wanted or not");
    }
    std::unordered_set<const ir::Value*> needed;
    for (std::size_t k = 0; k < wanted.size(); ++k) {
      if (wanted[k]) needed.insert(ret->operand(k));
    }
    std::vector<const ir::Operation*> ops;
    for (const auto& op : body.ops()) ops.push_back(op.get());
    for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
      const ir::Operation* op = *it;
      if (op->def().is_terminator) continue;
      bool keep = op->def().effect != ir::Effect::pure || op->name() == "call";
      for (std::size_t r = 0; r < op->num_results() && !keep; ++r) keep = needed.count(op->result(r)) != 0;
      if (!keep) {
        skipped.insert(op);
        continue;
      }
      for (const ir::Value* v : op->operands()) needed.insert(v);
    }
    return skipped;
  }

  static std::vector<std::int64_t> sizes_of(const ir::Type& t) {
    std::vector<std::int64_t> out;
    for (const auto& d : t.shape) out.push_back(d.size);
    return out;
  }

  const ir::Module* module_;
  ExecutionStats* stats_;
  const OpRunner* run_op_;
  std::int64_t live_ = 0;
  int depth_ = 0;
};

}  // namespace

std::vector<Tensor> execute(const ir::Operation& func, std::span<const Tensor> args) {
  return Runner(nullptr, nullptr).run(func, args, true);
}

std::vector<Tensor> execute(const ir::Module& module, const ir::Operation& func, std::span<const Tensor> args,
                            ExecutionStats* stats, std::span<const bool> wanted) {
  if (stats) *stats = ExecutionStats{};
  return Runner(&module, stats).run(func, args, true, wanted);
}

std::vector<Tensor> execute_with(const ir::Module& module, const ir::Operation& func, std::span<const Tensor> args,
                                 const OpRunner& run_op, std::span<const bool> wanted) {
  return Runner(&module, nullptr, &run_op).run(func, args, true, wanted);
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
