// Statements and control flow in kernels: assignments (variables keep one
// type; buffers need mut), if/for/while with the scoping rules (a name first
// assigned in a branch or a loop is not visible after it unless both branches
// assign it), loop headers over range()/tile.range(), and `return`.
#include <algorithm>
#include <map>

#include "frontend/sema_checker.h"

namespace tessera::frontend::sema_detail {

using ast::Expr;
using ast::ExprKind;
using ast::Stmt;
using ast::StmtKind;
using Kind = KType::Kind;

void Checker::check_body(const ast::Body& body, bool top_level) {
  for (std::size_t i = 0; i < body.size(); ++i) {
    const Stmt& s = *body[i];
    bool last = top_level && i + 1 == body.size();
    check_stmt(s, last);
  }
}

void Checker::check_stmt(const Stmt& s, bool last_at_top) {
  switch (s.kind) {
    case StmtKind::pass: return;
    case StmtKind::return_:
      if (s.value) fail(*s.value, "kernels return nothing: write results into a mut buffer");
      if (!last_at_top)
        fail(s.offset, "'return' is only allowed as the kernel's last statement (wrap the rest in an if)", 6);
      return;
    case StmtKind::expr: check_expr_stmt(*s.value); return;
    case StmtKind::assign: check_assign(s); return;
    case StmtKind::aug_assign: check_aug_assign(s); return;
    case StmtKind::if_: check_if(s); return;
    case StmtKind::for_: check_for(s); return;
    case StmtKind::while_: check_while(s); return;
  }
}

void Checker::check_expr_stmt(const Expr& e) {
  if (e.kind == ExprKind::string) return;  // docstring
  if (e.kind == ExprKind::ellipsis) fail(e, "'...' is not a statement in a kernel body");
  analyze(e);
}

void Checker::check_assign(const Stmt& s) {
  const Expr& target = *s.target;
  if (target.kind == ExprKind::tuple) {
    if (s.value->kind != ExprKind::tuple)
      fail(*s.value,
           "assigning to " + std::to_string(target.args.size()) + " names needs as many values (a, b = x, y)");
    if (s.value->args.size() != target.args.size())
      fail(*s.value, "assigning " + std::to_string(s.value->args.size()) + " values to " +
                         std::to_string(target.args.size()) + " targets");
    // Every value is evaluated before any target is written (so a swap works).
    std::vector<const ExprInfo*> values;
    for (const auto& v : s.value->args) values.push_back(&analyze(*v));
    for (std::size_t i = 0; i < target.args.size(); ++i) assign_to(*target.args[i], *s.value->args[i], *values[i]);
    return;
  }
  if (s.value->kind == ExprKind::tuple) fail(*s.value, "a tuple is not a kernel value; unpack it (a, b = x, y)");
  const ExprInfo& value = analyze(*s.value);
  assign_to(target, *s.value, value);
}

void Checker::assign_to(const Expr& target, const Expr& value_expr, const ExprInfo& value) {
  if (target.kind == ExprKind::name) {
    bind(target, value_expr, value);
  } else if (target.kind == ExprKind::subscript) {
    KType elem = check_element_access(target, true);
    store_value(value_expr, value, elem.dtype, "an element of '" + buffer_name(target) + "'");
  } else {
    fail(target, "cannot assign to this expression; assign to a name or a buffer element (y[i] = ...)");
  }
}

std::string Checker::buffer_name(const Expr& subscript) {
  return subscript.args[0]->kind == ExprKind::name ? subscript.args[0]->text : "buffer";
}

// A lane value stored into an element of dtype `dtype`: converted like numpy assignment.
void Checker::store_value(const Expr& value_expr, const ExprInfo& value, DType dtype, const std::string& where) {
  if (!value.type.is_lane())
    fail(value_expr, "cannot store " + value.type.str() + " into " + where + ", which holds " +
                         std::string(name(dtype)) + " scalars");
  (void)dtype;
}

void Checker::bind(const Expr& target, const Expr& value_expr, const ExprInfo& value) {
  const std::string& var = target.text;
  if (is_reserved(var)) fail(target, "cannot assign to '" + var + "': it is a built-in name");
  if (is_shape_symbol(var)) fail(target, "cannot assign to '" + var + "': it is a shape symbol of the parameters");
  if (is_autotune_name(var)) fail(target, "cannot assign to '" + var + "': it is a compile-time (autotune) parameter");
  if (value.type.kind == Kind::none || value.type.kind == Kind::dtype || value.type.kind == Kind::namespace_)
    fail(value_expr, "this expression has no value to assign (" + value.type.str() + ")");
  KType type = value.type;
  type.weak = false;
  auto it = env_.find(var);
  if (it != env_.end()) {
    const Var& old = it->second;
    if (old.is_param && old.type.kind == Kind::gmem)
      fail(target, "cannot rebind buffer parameter '" + var + "'; write its elements (" + var + "[i] = ...)");
    bool ok = old.type.same(type) ||
              (value.type.weak && old.type.is_lane() && value.type.is_lane() && value.type.dtype != DType::bool_);
    if (!ok)
      fail(value_expr, "'" + var + "' is " + old.type.str() +
                           (old.is_param ? " (a parameter)" : " (assigned on line " + line_of(old.def_offset) + ")") +
                           " but is assigned " + value.type.str() + " here; a variable keeps one type (convert with " +
                           std::string(name(old.type.dtype)) + "(...))");
    // A weak literal takes the variable's type.
    analysis_.exprs[&value_expr].type.dtype = old.type.dtype;
    analysis_.exprs[&value_expr].type.weak = false;
  } else {
    Var v;
    v.type = type;
    v.def_offset = target.offset;
    env_[var] = v;
  }
  if (!value.uniform || divergent()) nonuniform_.insert(var);
  analysis_.exprs[&target] = ExprInfo{env_[var].type, !nonuniform_.count(var)};
}

void Checker::check_aug_assign(const Stmt& s) {
  const Expr& target = *s.target;
  if (target.kind != ExprKind::name && target.kind != ExprKind::subscript)
    fail(target, "augmented assignment needs a name or a buffer element");
  if (s.value->kind == ExprKind::tuple) fail(*s.value, "a tuple is not a kernel value");
  const ExprInfo& current = analyze(target);
  const ExprInfo& rhs = analyze(*s.value);
  ExprInfo result = binary_result(s.op, target, current, *s.value, rhs, s.offset, s.length);
  if (target.kind == ExprKind::name) {
    Var& v = env_.at(target.text);
    if (!v.type.same(result.type))
      fail(s.offset,
           "'" + target.text + "' is " + v.type.str() + " but '" + target.text + " " + s.op + "= ...' gives " +
               result.type.str() + "; a variable keeps one type",
           s.length);
    if (v.is_param && v.type.kind == Kind::gmem) fail(target, "cannot rebind buffer parameter '" + target.text + "'");
    if (!result.uniform || divergent()) nonuniform_.insert(target.text);
  } else {
    check_element_access(target, true);
  }
  analysis_.exprs[&target].op_dtype = result.op_dtype;
}

void Checker::check_if(const Stmt& s) {
  const ExprInfo& cond = analyze(*s.value);
  require_bool(*s.value, cond, "an if condition");
  bool diverges = !cond.uniform;
  if (diverges) divergence_.push_back(s.value->offset);
  std::map<std::string, Var> before = env_;
  check_body(s.body, false);
  std::map<std::string, Var> then_env = std::move(env_);
  env_ = before;
  check_body(s.orelse, false);
  std::map<std::string, Var> else_env = std::move(env_);
  if (diverges) divergence_.pop_back();
  env_ = before;
  for (auto& [name, var] : then_env) {
    if (before.count(name)) continue;
    auto other = else_env.find(name);
    if (other == else_env.end()) {
      dropped_[name] = "'" + name + "' is only assigned in one branch of the if on line " + line_of(s.offset);
      continue;
    }
    if (!var.type.same(other->second.type))
      fail(other->second.def_offset,
           "'" + name + "' is " + var.type.str() + " in one branch of the if and " + other->second.type.str() +
               " in the other",
           name.size());
    if (var.type.kind != Kind::lane && var.type.kind != Kind::tile) {
      dropped_[name] = "'" + name + "' (" + var.type.str() + ") is first assigned inside the if on line " +
                       line_of(s.offset) + "; allocate it before the if";
      continue;
    }
    env_[name] = var;
    analysis_.if_exports[&s].emplace_back(name, var.type);
  }
  for (auto& [name, var] : else_env)
    if (!before.count(name) && !then_env.count(name))
      dropped_[name] = "'" + name + "' is only assigned in one branch of the if on line " + line_of(s.offset);
}

void Checker::check_for(const Stmt& s) {
  const Expr& iter = *s.value;
  if (iter.kind != ExprKind::call) fail(iter, "a kernel loop iterates over range(...) or tile.range(...)");
  std::string callee = dotted_name(*iter.args[0]);
  if (callee != "range" && callee != "tile.range") {
    fail(iter, "a kernel loop iterates over range(...) or tile.range(...)" + suggest_callable(callee));
  }
  ExprInfo& info = analysis_.exprs[&iter];
  info.builtin = callee;
  bool uniform = true;
  std::size_t positional = iter.args.size() - 1;
  if (positional < 1 || positional > 3) fail(iter, callee + "() takes 1 to 3 positional arguments (start, stop, step)");
  for (std::size_t i = 1; i < iter.args.size(); ++i) {
    const ExprInfo& a = analyze(*iter.args[i]);
    require_int(*iter.args[i], a, "a loop bound");
    uniform = uniform && a.uniform;
  }
  for (const ast::Keyword& k : iter.keywords) {
    if (callee == "tile.range" && (k.name == "step" || k.name == "prefetch")) {
      if (k.name == "step" && positional == 3) fail(k.offset, "the step is given twice", 4);
      const ExprInfo& a = analyze(*k.value);
      require_int(*k.value, a, k.name + "=");
      if (k.name == "prefetch") {
        if (!a.constant || *a.constant < 1) fail(*k.value, "prefetch= must be a compile-time integer >= 1");
      } else {
        uniform = uniform && a.uniform;
      }
    } else {
      std::string hint = callee == "tile.range" ? suggest(k.name, {"step", "prefetch"}) : "";
      unknown_keyword(k.offset, k.name, callee + "()", hint);
    }
  }
  const Expr* step = positional == 3 ? iter.args[3].get() : nullptr;
  for (const ast::Keyword& k : iter.keywords)
    if (k.name == "step") step = k.value.get();
  if (step) {
    const ExprInfo& si = analysis_.info(*step);
    if (si.constant && *si.constant <= 0)
      fail(*step, "a loop step must be positive, got " + std::to_string(*si.constant));
  }
  if (!uniform) divergence_.push_back(iter.offset);
  std::map<std::string, Var> before = env_;
  const std::string& var = s.target->text;
  if (is_reserved(var)) fail(*s.target, "cannot use the built-in name '" + var + "' as a loop variable");
  if (before.count(var))
    fail(*s.target, "loop variable '" + var + "' is already a variable (assigned on line " +
                        line_of(before.at(var).def_offset) + "); use a new name");
  if (is_shape_symbol(var)) fail(*s.target, "loop variable '" + var + "' is a shape symbol of the parameters");
  if (is_autotune_name(var)) fail(*s.target, "loop variable '" + var + "' is a compile-time parameter");
  Var v;
  v.type = KType::lane(DType::int64);
  v.def_offset = s.target->offset;
  env_[var] = v;
  if (!uniform || divergent()) nonuniform_.insert(var);
  analysis_.exprs[s.target.get()] = ExprInfo{v.type, !nonuniform_.count(var)};
  check_loop_body(s, before);
  if (!uniform) divergence_.pop_back();
}

void Checker::check_loop_body(const Stmt& s, const std::map<std::string, Var>& before) {
  check_body(s.body, false);
  for (auto& [name, var] : env_)
    if (!before.count(name))
      dropped_[name] = "'" + name + "' is only defined inside the loop on line " + line_of(s.offset);
  // Carried variables keep their type (checked at assignment); loop-local ones end here.
  std::map<std::string, Var> after;
  for (auto& [name, var] : env_)
    if (before.count(name)) after[name] = var;
  env_ = std::move(after);
}

void Checker::check_while(const Stmt& s) {
  const ExprInfo& cond = analyze(*s.value);
  require_bool(*s.value, cond, "a while condition");
  // The condition is re-evaluated with the carried values; uniformity of
  // carried names converges through the outer fixed point.
  bool diverges = !cond.uniform;
  if (diverges) divergence_.push_back(s.value->offset);
  std::map<std::string, Var> before = env_;
  check_loop_body(s, before);
  if (diverges) divergence_.pop_back();
}
}  // namespace tessera::frontend::sema_detail
