// Built-in calls in kernels: dispatch by name, argument binding, and the
// small built-ins (lane and group ids, tbarrier, reduce_sum, cp_async.wait,
// dtype conversions, min/max and scalar math). The shared-memory family is
// in sema_shared.cpp, the tile family in sema_tile_ops.cpp.
#include <algorithm>

#include "frontend/sema_checker.h"

namespace tessera::frontend::sema_detail {

using ast::Expr;
using ast::ExprKind;
using Kind = KType::Kind;

const ExprInfo& Checker::analyze_call(const Expr& e) {
  const Expr& callee = *e.args[0];
  // tshared.alloc[T](...)
  if (callee.kind == ExprKind::subscript) {
    if (dotted_name(*callee.args[0]) == "tshared.alloc") return analyze_alloc(e);
    fail(callee, "only tshared.alloc[T] is called with a type subscript");
  }
  std::string name = dotted_name(callee);
  if (name.empty()) fail(callee, "this expression is not callable");
  std::string root = name.substr(0, name.find('.'));
  if (env_.count(root)) fail(callee, "'" + root + "' is a variable, not a function");
  DType cast_to;
  if (name.find('.') == std::string::npos && try_parse_dtype(name, cast_to)) return analyze_cast(e, cast_to);
  if (name == "tshared.alloc") fail(e, "tshared.alloc needs the element type: tshared.alloc[f32](128)");
  std::vector<Arg> args = bind_args(e);
  if (name == "tile.linear_id" || name == "group_linear_id" || name == "group_tile_count") {
    expect_args(e, name, args, 0, {});
    bool uniform = name != "tile.linear_id" || decl_.group_size() == 1;
    ExprInfo i{KType::lane(DType::int64), uniform};
    i.builtin = name;
    return record(e, i);
  }
  if (name == "tbarrier") {
    expect_args(e, name, args, 0, {});
    require_uniform_control(e, "tbarrier()");
    ExprInfo i{KType{}, true};
    i.builtin = name;
    return record(e, i);
  }
  if (name == "reduce_sum") {
    expect_args(e, name, args, 1, {});
    const ExprInfo& buf = analyze(*args[0].expr);
    if (buf.type.kind != Kind::smem) fail(*args[0].expr, "reduce_sum takes a shared buffer, got " + buf.type.str());
    ExprInfo i{KType::lane(reduce_accum_dtype(buf.type.dtype)), false};
    i.builtin = name;
    return record(e, i);
  }
  if (name == "range" || name == "tile.range") fail(e, name + "(...) is only valid as the iterable of a for loop");
  if (name == "cp_async.shared.global") return analyze_cp_async(e, args);
  if (name == "cp_async.wait") {
    expect_args(e, name, args, 1, {});
    const ExprInfo& n = analyze(*args[0].expr);
    if (!n.constant || *n.constant < 0) fail(*args[0].expr, "cp_async.wait(N) takes a compile-time integer N >= 0");
    require_uniform_control(e, "cp_async.wait()");
    ExprInfo i{KType{}, true};
    i.builtin = name;
    i.constant = n.constant;
    return record(e, i);
  }
  if (name == "tile.load") return analyze_tile_load(e, args);
  if (name == "tile.store") return analyze_tile_store(e, args);
  if (name == "tile.mma") return analyze_mma(e, args);
  if (name == "tile.transpose") return analyze_transpose(e, args);
  if (name == "tile.zeros") return analyze_zeros(e, args);
  if (name == "min" || name == "max" || name == "abs" || name == "sqrt" || name == "exp" || name == "log")
    return analyze_scalar_math(e, name, args);
  if (root == "tile" || root == "tshared" || root == "cp_async") unknown_name(callee, name);
  for (std::string_view b : kBuiltinNames)
    if (b == name) fail(callee, "'" + name + "' is not a function");
  unknown_name(callee, name);
}

std::vector<Arg> Checker::bind_args(const Expr& e) {
  std::vector<Arg> args;
  for (std::size_t i = 1; i < e.args.size(); ++i) args.push_back(Arg{"", e.args[i].get(), e.args[i]->offset});
  for (const ast::Keyword& k : e.keywords) args.push_back(Arg{k.name, k.value.get(), k.offset});
  return args;
}

// Checks the positional count and that every keyword is one of `keywords`.
void Checker::expect_args(const Expr& e, const std::string& name, const std::vector<Arg>& args, std::size_t positional,
                          const std::vector<std::string_view>& keywords) const {
  std::size_t n = 0;
  for (const Arg& a : args) {
    if (a.keyword.empty()) {
      ++n;
      continue;
    }
    if (std::find(keywords.begin(), keywords.end(), a.keyword) == keywords.end()) {
      unknown_keyword(a.offset, a.keyword, name + "()", suggest(a.keyword, keywords));
    }
  }
  if (n != positional)
    fail(e, name + "() takes " + std::to_string(positional) + " positional argument" + (positional == 1 ? "" : "s") +
                ", got " + std::to_string(n));
}
const Arg* Checker::keyword(const std::vector<Arg>& args, std::string_view name) {
  for (const Arg& a : args)
    if (a.keyword == name) return &a;
  return nullptr;
}

std::int64_t Checker::const_extent(const Expr& e, const std::string& what) {
  const ExprInfo& i = analyze(e);
  if (!i.constant)
    fail(e, what + " must be a compile-time integer (a literal or an autotune/jit name), got a run-time value");
  if (*i.constant <= 0) fail(e, what + " must be positive, got " + std::to_string(*i.constant));
  if (*i.constant > (std::int64_t{1} << 24)) fail(e, what + " is too large (" + std::to_string(*i.constant) + ")");
  return *i.constant;
}

const ExprInfo& Checker::analyze_cast(const Expr& e, DType to) {
  if (e.args.size() != 2 || !e.keywords.empty()) fail(e, std::string(name(to)) + "(x) converts one value");
  const ExprInfo a = analyze(*e.args[1]);
  if (a.type.kind != Kind::lane && a.type.kind != Kind::tile)
    fail(*e.args[1], "cannot convert " + a.type.str() + " to " + std::string(name(to)));
  ExprInfo i = a;
  i.type.dtype = to;
  i.type.weak = false;
  i.constant.reset();
  i.builtin = a.type.kind == Kind::tile ? "tile.tile_cast" : "tile.cast";
  return record(e, i);
}

// min/max (promoted like arithmetic) and abs/sqrt/exp/log of one scalar.
const ExprInfo& Checker::analyze_scalar_math(const Expr& e, const std::string& name, const std::vector<Arg>& args) {
  if (name == "min" || name == "max") {
    expect_args(e, name, args, 2, {});
    const ExprInfo a = analyze(*args[0].expr);
    const ExprInfo b = analyze(*args[1].expr);
    require_lane(*args[0].expr, a, name + "() operand");
    require_lane(*args[1].expr, b, name + "() operand");
    if (a.type.dtype == DType::bool_ || b.type.dtype == DType::bool_) fail(e, name + "() of bool values");
    ExprInfo i = binary_promote(e.offset, e.length, a, b);
    i.builtin = name;
    return record(e, i);
  }
  // abs, sqrt, exp, log.
  expect_args(e, name, args, 1, {});
  const ExprInfo a = analyze(*args[0].expr);
  require_lane(*args[0].expr, a, name + "() operand");
  if (a.type.dtype == DType::bool_) fail(*args[0].expr, name + "() of a bool value");
  if (name != "abs" && !is_float(a.type.dtype) && !a.type.weak)
    fail(*args[0].expr, name + "() needs a floating value, got " + a.type.str() + "; convert with f32(...)");
  ExprInfo i{a.type, a.uniform};
  if (name != "abs" && !is_float(a.type.dtype)) i.type = KType::lane(DType::fp32);
  i.type.weak = false;
  i.op_dtype = i.type.dtype;
  i.builtin = name;
  return record(e, i);
}

}  // namespace tessera::frontend::sema_detail
