// Forward mode: jvp_function (tessera/autodiff/autodiff.h).
//
// The new function copies the primal ops in order and, after each op with a
// nonzero operand tangent, emits the op's JVP rule. Tangents are keyed by the
// new function's values; nullptr is a symbolic zero (no ops). Calls are
// followed into their callee (plain and remat calls alike: forward mode keeps
// no residuals), except calls with a custom_jvp, which call that function.
#include <unordered_set>

#include "autodiff/internal.h"
#include "graph/passes/pass_support.h"
#include "tessera/ir/verifier.h"

namespace tessera::autodiff {

namespace {

using Values = std::vector<ir::Value*>;

class JvpBuilder {
 public:
  JvpBuilder(ir::Module& module, std::string func_name, ir::Block& block)
      : module_(module), func_name_(std::move(func_name)), b_(block) {}

  ir::OpBuilder& builder() { return b_; }
  ir::Value* tangent(ir::Value* v) const {
    auto it = tangents_.find(v);
    return it == tangents_.end() ? nullptr : it->second;
  }
  void set_tangent(ir::Value* v, ir::Value* t) {
    if (t && differentiable(v)) tangents_[v] = t;
  }
  ValueMap& cast_cache() { return cast_cache_; }
  ScalarCache& scalars() { return scalars_; }

  // Emits `src` with its parameters bound to `args`; returns what it returns.
  Values run(const ir::Block& src, const Values& args, int depth) {
    if (depth > 64) raise(ErrorCode::Compile, "calls nest deeper than 64 in @" + func_name_ + " (recursion?)");
    ValueMap map;
    for (std::size_t i = 0; i < args.size(); ++i) map[src.argument(i)] = args[i];
    for (const auto& op_ptr : src.ops()) {
      const ir::Operation& op = *op_ptr;
      Values operands = mapped_operands(op, map);
      if (op.def().is_terminator) return operands;
      Values results = op.name() == "call" ? run_call(op, operands, depth) : run_op(op, operands);
      for (std::size_t i = 0; i < results.size(); ++i) map[op.result(i)] = results[i];
    }
    raise(ErrorCode::VerifyFailed, "a function body in @" + func_name_ + " has no return");
  }

 private:
  Values run_op(const ir::Operation& op, const Values& operands) {
    ir::Operation* copy = clone_op(b_, op, operands);
    Values tans;
    bool any = false;
    for (ir::Value* v : operands) {
      tans.push_back(tangent(v));
      any = any || tans.back();
    }
    if (!any || op.def().effect == ir::Effect::state) return copy->results();
    JvpRule rule = require_jvp(*copy, func_name_);
    RuleContext ctx(b_, op.location(), &cast_cache_, &scalars_);
    Values out = rule(ctx, *copy, tans);
    if (!out.empty() && out.size() != copy->num_results()) {
      raise(ErrorCode::Internal, "JVP rule of '" + std::string(op.name()) + "' returned " + std::to_string(out.size()) +
                                     " tangents for " + std::to_string(copy->num_results()) + " results");
    }
    for (std::size_t i = 0; i < out.size(); ++i) {
      if (out[i] && differentiable(copy->result(i)))
        set_tangent(copy->result(i), ctx.fit_to(out[i], copy->result(i)->type()));
    }
    return copy->results();
  }

  Values run_call(const ir::Operation& op, const Values& operands, int depth) {
    const ir::Operation& callee = resolve_callee(module_, op);
    bool any = false;
    for (ir::Value* v : operands) any = any || tangent(v);
    switch (call_kind(op, true)) {
      case CallKind::plain:
      case CallKind::remat: return run(ir::function_body(callee), operands, depth + 1);
      case CallKind::custom_vjp:
        if (any) {
          raise(ErrorCode::Compile,
                "forward-mode differentiation of the custom_vjp call of @" + ir::function_name(callee) + " (in @" +
                    func_name_ + ") needs a custom_jvp too: a custom VJP does not define tangents",
                op.location());
        }
        return clone_op(b_, op, operands)->results();
      case CallKind::custom_jvp: break;
    }
    const std::string& jvp_name = op.attrs().get_string("custom_jvp");
    const ir::Operation* jf = module_.lookup(jvp_name);
    if (!jf) {
      raise(ErrorCode::ArgumentInvalid, "custom_jvp names @" + jvp_name + ", which the module does not define",
            op.location());
    }
    const std::size_t n = op.num_results();
    if (ir::function_results(*jf).size() != 2 * n) {
      raise(ErrorCode::ArgumentInvalid,
            "custom_jvp @" + jvp_name + " returns " + std::to_string(ir::function_results(*jf).size()) +
                " values; it must return " + std::to_string(n) + " results then " + std::to_string(n) + " tangents",
            op.location());
    }
    RuleContext ctx(b_, op.location(), &cast_cache_, &scalars_);
    Values args = operands;
    for (ir::Value* v : operands) args.push_back(tangent(v) ? tangent(v) : ctx.zeros_like(v));
    ir::Operation* c = create_call(b_, *jf, args, {}, op.location());
    Values results;
    for (std::size_t i = 0; i < n; ++i) {
      results.push_back(c->result(i));
      set_tangent(c->result(i), ctx.fit_to(c->result(n + i), c->result(i)->type()));
    }
    return results;
  }

  ir::Module& module_;
  std::string func_name_;
  ir::OpBuilder b_;
  std::unordered_map<const ir::Value*, ir::Value*> tangents_;
  ValueMap cast_cache_;
  ScalarCache scalars_;
};

}  // namespace

std::string unique_param_name(const std::string& base, std::unordered_set<std::string>& taken) {
  std::string name = base;
  for (int k = 1; !taken.insert(name).second; ++k) name = base + "_" + std::to_string(k);
  return name;
}

ir::Operation& jvp_function(ir::Module& module, const ir::Operation& func, std::string_view new_name) {
  auto f = new_function(module, new_name, func.location());
  const ir::Block& src = ir::function_body(func);
  ir::Block& body = ir::function_body(*f);
  std::unordered_set<std::string> taken;
  Values params;
  for (std::size_t i = 0; i < src.num_arguments(); ++i) {
    const ir::Value* a = src.argument(i);
    std::string base = a->name().empty() ? "a" + std::to_string(i) : a->name();
    params.push_back(body.add_argument(a->type(), unique_param_name(base, taken)));
  }
  JvpBuilder jb(module, ir::function_name(func), body);
  for (std::size_t i = 0; i < src.num_arguments(); ++i) {
    ir::Value* t =
        body.add_argument(tangent_type(src.argument(i)->type()), unique_param_name("t_" + params[i]->name(), taken));
    jb.set_tangent(params[i], t);
  }
  Values results = jb.run(src, params, 0);
  RuleContext ctx(jb.builder(), func.location(), &jb.cast_cache(), &jb.scalars());
  Values outs = results;
  for (ir::Value* r : results) outs.push_back(jb.tangent(r) ? jb.tangent(r) : ctx.zeros_like(r));
  jb.builder().create("return", outs, {}, func.location());
  graph::erase_dead_ops(body);
  ir::verify_function(*f);
  return *module.add_function(std::move(f));
}

}  // namespace tessera::autodiff
