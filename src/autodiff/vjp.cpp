// Reverse mode: vjp_function and value_and_grad_function
// (tessera/autodiff/autodiff.h).
//
// The new function first copies the primal ops (the forward pass; plain calls
// are inlined), recording a step per op, then walks the steps in reverse and
// emits each op's VJP rule on the cotangents of its results (the backward
// pass). Cotangents are keyed by the new function's values and summed at the
// tangent policy when a value has several uses. Only ops with an operand that
// depends on a differentiated parameter ("active") get backward ops.
//
// Calls: a remat call stays a call in the forward pass, so its intermediates
// die inside it; in the backward pass its callee's ops are emitted again
// (recomputed) right before their own backward ops. A custom_vjp call runs
// custom_vjp_fwd forward (results and residuals) and custom_vjp_bwd backward.
// A call with only a custom_jvp is transposed: its JVP function is linear in
// the tangents, so the VJP of it with respect to the tangents is the
// transpose (added to the module once, as @<custom_jvp>_transpose).
#include "autodiff/internal.h"
#include "graph/kernel_support.h"
#include "graph/passes/pass_support.h"
#include "tessera/ir/verifier.h"

namespace tessera::autodiff {

namespace {

using Values = std::vector<ir::Value*>;

struct Step {
  CallKind kind = CallKind::plain;  // plain: an ordinary op
  ir::Operation* op = nullptr;      // the op in the new function (for custom_vjp: the fwd call)
  const ir::Operation* src = nullptr;
  Values results;  // the step's primal results
};

class VjpBuilder {
 public:
  VjpBuilder(ir::Module& module, std::string func_name, ir::Block& block)
      : module_(module), func_name_(std::move(func_name)), b_(block) {}

  ir::OpBuilder& builder() { return b_; }
  ValueMap& cast_cache() { return cast_cache_; }
  ScalarCache& scalars() { return scalars_; }
  void activate(ir::Value* v) {
    if (differentiable(v)) active_.insert(v);
  }
  ir::Value* cotangent(ir::Value* v) const {
    auto it = ct_.find(v);
    return it == ct_.end() ? nullptr : it->second;
  }

  void accumulate(ir::Value* v, ir::Value* c, const SourceLocation& loc) {
    if (!c || !differentiable(v)) return;
    RuleContext ctx(b_, loc, &cast_cache_, &scalars_);
    c = ctx.fit_to(c, v->type());
    auto [it, inserted] = ct_.emplace(v, c);
    if (!inserted) it->second = ctx.op("graph.add", {it->second, c});
  }

  // Emits `src` bound to `args`, appending a step per op; returns its results.
  Values forward(const ir::Block& src, const Values& args, std::vector<Step>& steps, int depth) {
    if (depth > 64) raise(ErrorCode::Compile, "calls nest deeper than 64 in @" + func_name_ + " (recursion?)");
    ValueMap map;
    for (std::size_t i = 0; i < args.size(); ++i) map[src.argument(i)] = args[i];
    for (const auto& op_ptr : src.ops()) {
      const ir::Operation& op = *op_ptr;
      Values operands = mapped_operands(op, map);
      if (op.def().is_terminator) return operands;
      Values results;
      CallKind kind = op.name() == "call" ? call_kind(op, false) : CallKind::plain;
      if (op.name() == "call" && kind == CallKind::plain) {
        results = forward(ir::function_body(resolve_callee(module_, op)), operands, steps, depth + 1);
      } else {
        Step s{kind, nullptr, &op, {}};
        if (kind == CallKind::custom_vjp) {
          const ir::Operation& fwd = lookup(op, "custom_vjp_fwd");
          s.op = create_call(b_, fwd, operands, {}, op.location());
          if (s.op->num_results() < op.num_results()) {
            raise(ErrorCode::ArgumentInvalid,
                  "custom_vjp_fwd @" + ir::function_name(fwd) + " returns " + std::to_string(s.op->num_results()) +
                      " values, fewer than the " + std::to_string(op.num_results()) + " results of the call",
                  op.location());
          }
          Values all = s.op->results();
          s.results.assign(all.begin(), all.begin() + static_cast<long>(op.num_results()));
        } else {
          s.op = clone_op(b_, op, operands);
          s.results = s.op->results();
        }
        bool any = false;
        for (ir::Value* v : operands) any = any || active_.count(v);
        if (any && op.def().effect != ir::Effect::state) {
          for (ir::Value* r : s.results) activate(r);
        }
        results = s.results;
        steps.push_back(std::move(s));
      }
      for (std::size_t i = 0; i < results.size(); ++i) map[op.result(i)] = results[i];
    }
    raise(ErrorCode::VerifyFailed, "a function body in @" + func_name_ + " has no return");
  }

  void backward(const std::vector<Step>& steps, int depth) {
    for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
      const Step& s = *it;
      Values cts;
      bool any_ct = false;
      for (ir::Value* r : s.results) {
        cts.push_back(cotangent(r));
        any_ct = any_ct || cts.back();
      }
      bool any_active = false;
      for (ir::Value* v : s.op->operands()) any_active = any_active || active_.count(v);
      if (!any_ct || !any_active || s.op->def().effect == ir::Effect::state) continue;
      const SourceLocation& loc = s.src->location();
      Values out;
      switch (s.kind) {
        case CallKind::plain: {
          VjpRule rule = require_vjp(*s.op, func_name_);
          RuleContext ctx(b_, loc, &cast_cache_, &scalars_);
          out = rule(ctx, *s.op, cts);
          if (!out.empty() && out.size() != s.op->num_operands()) {
            raise(ErrorCode::Internal, "VJP rule of '" + std::string(s.op->name()) + "' returned " +
                                           std::to_string(out.size()) + " cotangents for " +
                                           std::to_string(s.op->num_operands()) + " operands");
          }
          break;
        }
        case CallKind::remat: {
          // Recompute the callee's forward here, then differentiate it.
          std::vector<Step> inner;
          Values results =
              forward(ir::function_body(resolve_callee(module_, *s.op)), s.op->operands(), inner, depth + 1);
          for (std::size_t i = 0; i < results.size(); ++i) accumulate(results[i], cts[i], loc);
          backward(inner, depth + 1);
          continue;  // the operands got their cotangents through the recomputed ops
        }
        case CallKind::custom_vjp: out = call_custom_vjp_bwd(s, cts); break;
        case CallKind::custom_jvp: out = call_transpose(s, cts); break;
      }
      for (std::size_t i = 0; i < out.size(); ++i) {
        if (active_.count(s.op->operand(i))) accumulate(s.op->operand(i), out[i], loc);
      }
    }
  }

 private:
  const ir::Operation& lookup(const ir::Operation& call, const char* attr) {
    const std::string& name = call.attrs().get_string(attr);
    const ir::Operation* f = module_.lookup(name);
    if (!f) {
      raise(ErrorCode::ArgumentInvalid, std::string(attr) + " names @" + name + ", which the module does not define",
            call.location());
    }
    return *f;
  }

  Values materialize(RuleContext& ctx, const Values& results, const Values& cts) {
    Values out;
    for (std::size_t i = 0; i < cts.size(); ++i) out.push_back(cts[i] ? cts[i] : ctx.zeros_like(results[i]));
    return out;
  }

  // A user's derivative function was staged with full-precision derivative
  // types; under TangentPrecision::storage its derivative arguments are cast
  // to them (widening, so exact). Its results are fitted like a rule's.
  static Values fit_to_parameters(RuleContext& ctx, const ir::Operation& callee, Values args) {
    const ir::Block& body = ir::function_body(callee);
    for (std::size_t i = 0; i < args.size() && i < body.num_arguments(); ++i) {
      const NumericsPolicy& want = body.argument(i)->type().policy;
      if (args[i]->type().policy != want) args[i] = ctx.cast_to(args[i], want);
    }
    return args;
  }

  // bwd(residuals..., cotangents...) -> cotangents of the primal operands.
  Values call_custom_vjp_bwd(const Step& s, const Values& cts) {
    const ir::Operation& bwd = lookup(*s.src, "custom_vjp_bwd");
    RuleContext ctx(b_, s.src->location(), &cast_cache_, &scalars_);
    Values all = s.op->results();
    Values args(all.begin() + static_cast<long>(s.results.size()), all.end());
    for (ir::Value* c : materialize(ctx, s.results, cts)) args.push_back(c);
    ir::Operation* c = create_call(b_, bwd, fit_to_parameters(ctx, bwd, std::move(args)), {}, s.src->location());
    if (c->num_results() != s.op->num_operands()) {
      raise(ErrorCode::ArgumentInvalid,
            "custom_vjp_bwd @" + ir::function_name(bwd) + " returns " + std::to_string(c->num_results()) +
                " cotangents for " + std::to_string(s.op->num_operands()) + " primal operands",
            s.src->location());
    }
    return c->results();
  }

  // The VJP of the custom JVP function with respect to its tangents.
  Values call_transpose(const Step& s, const Values& cts) {
    const ir::Operation& jf = lookup(*s.src, "custom_jvp");
    const std::size_t n = s.op->num_operands();
    std::string name = ir::function_name(jf) + "_transpose";
    const ir::Operation* t = module_.lookup(name);
    if (!t) {
      // At full precision, as the user's JVP function was staged; the
      // arguments below are fitted to it.
      std::vector<int> wrt;
      for (std::size_t i = 0; i < n; ++i) wrt.push_back(static_cast<int>(n + i));
      t = &vjp_function(module_, jf, wrt, name, TangentPrecision::full);
    }
    RuleContext ctx(b_, s.src->location(), &cast_cache_, &scalars_);
    Values args = s.op->operands();
    for (ir::Value* v : s.op->operands()) args.push_back(ctx.zeros_like(v));
    for (ir::Value* r : s.results) args.push_back(ctx.zeros_like(r));
    for (ir::Value* c : materialize(ctx, s.results, cts)) args.push_back(c);
    ir::Operation* c = create_call(b_, *t, fit_to_parameters(ctx, *t, std::move(args)), {}, s.src->location());
    Values all = c->results();
    return Values(all.end() - static_cast<long>(n), all.end());
  }

  ir::Module& module_;
  std::string func_name_;
  ir::OpBuilder b_;
  std::unordered_set<const ir::Value*> active_;
  std::unordered_map<const ir::Value*, ir::Value*> ct_;
  ValueMap cast_cache_;
  ScalarCache scalars_;
};

struct Prepared {
  std::unique_ptr<ir::Operation> func;
  Values params;
};

Prepared prepare(const ir::Module& module, const ir::Operation& func, const std::vector<int>& wrt,
                 std::string_view new_name, std::unordered_set<std::string>& taken) {
  check_wrt(func, wrt);
  Prepared p{new_function(module, new_name, func.location()), {}};
  const ir::Block& src = ir::function_body(func);
  ir::Block& body = ir::function_body(*p.func);
  for (std::size_t i = 0; i < src.num_arguments(); ++i) {
    const ir::Value* a = src.argument(i);
    p.params.push_back(body.add_argument(
        a->type(), unique_param_name(a->name().empty() ? "a" + std::to_string(i) : a->name(), taken)));
  }
  return p;
}

ir::Operation& finish(ir::Module& module, std::unique_ptr<ir::Operation> f) {
  graph::erase_dead_ops(ir::function_body(*f));
  ir::verify_function(*f);
  return *module.add_function(std::move(f));
}

}  // namespace

ir::Operation& vjp_function(ir::Module& module, const ir::Operation& func, const std::vector<int>& wrt,
                            std::string_view new_name, TangentPrecision precision) {
  TangentPrecisionScope scope(precision);
  std::unordered_set<std::string> taken;
  Prepared p = prepare(module, func, wrt, new_name, taken);
  ir::Block& body = ir::function_body(*p.func);
  Values cts;
  for (std::size_t i = 0; i < ir::function_results(func).size(); ++i) {
    cts.push_back(body.add_argument(tangent_type(ir::function_results(func)[i]->type()),
                                    unique_param_name("ct" + std::to_string(i), taken)));
  }
  VjpBuilder vb(module, ir::function_name(func), body);
  for (int w : wrt) vb.activate(p.params[static_cast<std::size_t>(w)]);
  std::vector<Step> steps;
  Values results = vb.forward(ir::function_body(func), p.params, steps, 0);
  for (std::size_t i = 0; i < results.size(); ++i) vb.accumulate(results[i], cts[i], func.location());
  vb.backward(steps, 0);
  RuleContext ctx(vb.builder(), func.location(), &vb.cast_cache(), &vb.scalars());
  Values outs = results;
  for (int w : wrt) {
    ir::Value* param = p.params[static_cast<std::size_t>(w)];
    outs.push_back(vb.cotangent(param) ? vb.cotangent(param) : ctx.zeros_like(param));
  }
  vb.builder().create("return", outs, {}, func.location());
  return finish(module, std::move(p.func));
}

ir::Operation& value_and_grad_function(ir::Module& module, const ir::Operation& func, const std::vector<int>& wrt,
                                       std::string_view new_name, TangentPrecision precision) {
  TangentPrecisionScope scope(precision);
  auto func_results = ir::function_results(func);
  if (func_results.size() != 1 || func_results[0]->type().rank() != 0 || !differentiable(func_results[0])) {
    std::string got = func_results.size() == 1 ? ir::print_type(func_results[0]->type())
                                               : std::to_string(func_results.size()) + " results";
    raise(ErrorCode::ArgumentInvalid,
          "value_and_grad needs @" + ir::function_name(func) + " to return one rank-0 float value (a loss), got " +
              got + "; use vjp_function for other results",
          func.location());
  }
  std::unordered_set<std::string> taken;
  Prepared p = prepare(module, func, wrt, new_name, taken);
  ir::Block& body = ir::function_body(*p.func);
  VjpBuilder vb(module, ir::function_name(func), body);
  for (int w : wrt) vb.activate(p.params[static_cast<std::size_t>(w)]);
  std::vector<Step> steps;
  Values results = vb.forward(ir::function_body(func), p.params, steps, 0);
  RuleContext ctx(vb.builder(), func.location(), &vb.cast_cache(), &vb.scalars());
  const ir::Type& loss = results[0]->type();
  const NumericsPolicy tp = *tangent_policy(loss);
  // The seed and the divisor are the same value: the scale rounded to the tangent policy.
  const double scale = graph::round_to(loss.policy.loss_scale.value_or(1.0), tp.storage);
  vb.accumulate(results[0], ctx.scalar(scale, tp), func.location());
  vb.backward(steps, 0);
  Values outs = results;
  for (int w : wrt) {
    ir::Value* param = p.params[static_cast<std::size_t>(w)];
    ir::Value* g = vb.cotangent(param) ? vb.cotangent(param) : ctx.zeros_like(param);
    // Unscale; inf and NaN from an overflowing backward pass stay inf and NaN.
    if (scale != 1.0) g = ctx.op("graph.div", {g, ctx.scalar(scale, g->type().policy)});
    outs.push_back(g);
  }
  vb.builder().create("return", outs, {}, func.location());
  return finish(module, std::move(p.func));
}

}  // namespace tessera::autodiff
