// Semantic checks of kernels: names, types, mutability, divergence, shared budget.
//
// Uniformity is tracked flow-insensitively per variable name: a name is
// non-uniform when any assignment to it gives it a lane-varying value or
// happens under lane-divergent control flow. The analysis runs over the
// kernel until that set stops growing, then once more raising the
// divergence errors, so loops whose carried values turn divergent late are
// handled without unrolling. This is conservative (it may call a value
// divergent that is uniform at some point) but never the reverse.
#include "frontend/sema.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include "tessera/graph/promotion.h"

namespace tessera::frontend {

using ast::Expr;
using ast::ExprKind;
using ast::Stmt;
using ast::StmtKind;
using Kind = KType::Kind;

bool KType::same(const KType& o) const {
  if (kind != o.kind || dtype != o.dtype) return false;
  if (kind == Kind::tile || kind == Kind::smem) return sizes == o.sizes && swizzle_xor == o.swizzle_xor;
  if (kind == Kind::gmem) return param == o.param;
  return true;
}

namespace {
std::string sizes_text(const std::vector<std::int64_t>& sizes) {
  std::string out = "[";
  for (std::size_t i = 0; i < sizes.size(); ++i) out += (i ? ", " : "") + std::to_string(sizes[i]);
  return out + "]";
}
}  // namespace

std::string KType::str() const {
  std::string d(name(dtype));
  switch (kind) {
    case Kind::none: return "no value";
    case Kind::lane: return d + " scalar";
    case Kind::tile: return "tile " + sizes_text(sizes) + " " + d;
    case Kind::smem: return "shared buffer " + sizes_text(sizes) + " " + d;
    case Kind::gmem: return std::string(mut ? "mut " : "") + "buffer '" + param + "' of " + d;
    case Kind::dtype: return "the dtype " + d;
    case Kind::namespace_: return "a namespace";
  }
  return "value";
}

const ExprInfo& Analysis::info(const ast::Expr& e) const {
  auto it = exprs.find(&e);
  if (it == exprs.end()) raise(ErrorCode::Internal, "kernel expression was not analyzed");
  return it->second;
}

std::optional<std::int64_t> fold_int(const Expr& e, const Constants& constants) {
  switch (e.kind) {
    case ExprKind::integer: return e.int_value;
    case ExprKind::name: {
      auto it = constants.find(e.text);
      if (it == constants.end()) return std::nullopt;
      return it->second;
    }
    case ExprKind::unary: {
      if (e.text != "-" && e.text != "+") return std::nullopt;
      auto v = fold_int(*e.args[0], constants);
      if (!v || *v == std::numeric_limits<std::int64_t>::min()) return std::nullopt;
      return e.text == "-" ? -*v : *v;
    }
    case ExprKind::binary: {
      auto a = fold_int(*e.args[0], constants);
      auto b = fold_int(*e.args[1], constants);
      if (!a || !b) return std::nullopt;
      std::int64_t r = 0;
      if (e.text == "+") {
        if (__builtin_add_overflow(*a, *b, &r)) return std::nullopt;
      } else if (e.text == "-") {
        if (__builtin_sub_overflow(*a, *b, &r)) return std::nullopt;
      } else if (e.text == "*") {
        if (__builtin_mul_overflow(*a, *b, &r)) return std::nullopt;
      } else if (e.text == "//" || e.text == "%") {
        if (*b == 0 || (*a == std::numeric_limits<std::int64_t>::min() && *b == -1)) return std::nullopt;
        std::int64_t q = *a / *b;
        if ((*a % *b != 0) && ((*a < 0) != (*b < 0))) --q;  // floor, as Python
        r = e.text == "//" ? q : *a - q * *b;
      } else {
        return std::nullopt;
      }
      return r;
    }
    default: return std::nullopt;
  }
}

namespace {
void collect_assigned_target(const Expr& t, std::vector<std::string>& out) {
  if (t.kind == ExprKind::name) {
    if (std::find(out.begin(), out.end(), t.text) == out.end()) out.push_back(t.text);
  } else if (t.kind == ExprKind::tuple) {
    for (const auto& a : t.args) collect_assigned_target(*a, out);
  }
}
void collect_assigned(const ast::Body& body, std::vector<std::string>& out) {
  for (const auto& s : body) {
    if ((s->kind == StmtKind::assign || s->kind == StmtKind::aug_assign || s->kind == StmtKind::for_) && s->target)
      collect_assigned_target(*s->target, out);
    collect_assigned(s->body, out);
    collect_assigned(s->orelse, out);
  }
}
}  // namespace

std::vector<std::string> assigned_names(const ast::Body& body) {
  std::vector<std::string> out;
  collect_assigned(body, out);
  return out;
}

ir::Dim specialize_dim(const DimSpec& dim, const Constants& constants, const SourceLocation& where) {
  auto value_of = [&](const std::string& sym, std::int64_t size) -> std::optional<std::int64_t> {
    if (sym.empty()) return size;
    auto it = constants.find(sym);
    if (it == constants.end()) return std::nullopt;
    return it->second;
  };
  std::optional<std::int64_t> lhs = value_of(dim.lhs, dim.size);
  if (dim.op == 0) return lhs ? ir::Dim::fixed(*lhs) : ir::Dim::named(dim.lhs);
  std::optional<std::int64_t> rhs = value_of(dim.rhs_symbol, dim.rhs_size);
  if (lhs && rhs) {
    if (dim.op == '*') {
      std::int64_t r = 0;
      if (__builtin_mul_overflow(*lhs, *rhs, &r))
        raise(ErrorCode::ShapeMismatch, "dimension " + dim.str() + " overflows int64", where);
      return ir::Dim::fixed(r);
    }
    if (*rhs <= 0 || *lhs % *rhs != 0)
      raise(ErrorCode::ShapeConstraint,
            "dimension " + dim.str() + " needs " + dim.lhs + " divisible by " +
                (dim.rhs_symbol.empty() ? std::to_string(dim.rhs_size) : dim.rhs_symbol) + ", but " + dim.lhs + " = " +
                std::to_string(*lhs) + " and the divisor is " + std::to_string(*rhs),
            where);
    return ir::Dim::fixed(*lhs / *rhs);
  }
  std::string l = lhs ? std::to_string(*lhs) : dim.lhs;
  std::string r = rhs ? std::to_string(*rhs) : dim.rhs_symbol;
  return ir::Dim::named(l + std::string(1, dim.op) + r);
}

DType reduce_accum_dtype(DType dtype) {
  if (dtype == DType::fp64) return DType::fp64;
  if (is_float(dtype)) return DType::fp32;
  return DType::int64;
}

DType default_mma_accum(DType dtype) {
  if (dtype == DType::fp64) return DType::fp64;
  if (is_float(dtype)) return DType::fp32;
  return DType::int32;
}

std::int64_t shared_alloc_bytes(DType dtype, const std::vector<std::int64_t>& sizes) {
  std::int64_t n = storage_bytes(dtype);
  for (std::int64_t s : sizes) n *= s;
  return (n + 127) / 128 * 128;
}

namespace {

std::string size_text(std::int64_t bytes) {
  if (bytes % 1024 == 0) return std::to_string(bytes / 1024) + "_KiB";
  return std::to_string(bytes) + " bytes";
}

// closest_match, plus one swap of adjacent letters ("alpah" -> "alpha",
// "stpe" -> "step"), the most common typo in short names.
std::string suggest(std::string_view name, const std::vector<std::string_view>& candidates) {
  std::string best = closest_match(name, candidates);
  if (!best.empty()) return best;
  for (std::string_view c : candidates) {
    if (c.size() != name.size() || c == name) continue;
    std::size_t i = 0;
    while (i < c.size() && c[i] == name[i]) ++i;
    if (i + 1 < c.size() && c[i] == name[i + 1] && c[i + 1] == name[i] && c.substr(i + 2) == name.substr(i + 2))
      return std::string(c);
  }
  return {};
}

bool same_expr(const Expr& a, const Expr& b) {
  if (a.kind != b.kind || a.text != b.text || a.int_value != b.int_value || a.real_value != b.real_value ||
      a.args.size() != b.args.size() || a.ops != b.ops || !a.keywords.empty() || !b.keywords.empty())
    return false;
  for (std::size_t i = 0; i < a.args.size(); ++i)
    if (!same_expr(*a.args[i], *b.args[i])) return false;
  return true;
}

// Every built-in callable, by canonical dotted name (without "tessera.").
const std::vector<std::string_view> kCallables = {"tile.linear_id",
                                                  "group_linear_id",
                                                  "group_tile_count",
                                                  "tshared.alloc",
                                                  "tbarrier",
                                                  "reduce_sum",
                                                  "range",
                                                  "tile.range",
                                                  "cp_async.shared.global",
                                                  "cp_async.wait",
                                                  "tile.load",
                                                  "tile.store",
                                                  "tile.mma",
                                                  "tile.zeros",
                                                  "min",
                                                  "max",
                                                  "abs",
                                                  "sqrt",
                                                  "exp",
                                                  "log"};
// Names that are values or namespaces.
const std::vector<std::string_view> kBuiltinNames = {"tile", "tshared", "cp_async", "grid_groups", "tessera"};

struct Var {
  KType type;
  std::size_t def_offset = 0;
  bool is_param = false;
};

class Checker {
 public:
  Checker(const KernelDecl& decl, const Constants& given) : decl_(decl), kernel_(*decl.ast) {
    // Autotune defaults first, then the specialization.
    for (const auto& [name, values] : decl.autotune_space) analysis_.constants[name] = values.front();
    for (const auto& [name, value] : given) {
      bool known = std::find(decl.shape_symbols.begin(), decl.shape_symbols.end(), name) != decl.shape_symbols.end();
      for (const auto& [n, v] : decl.autotune_space) known = known || n == name;
      if (!known) {
        std::vector<std::string_view> candidates(decl.shape_symbols.begin(), decl.shape_symbols.end());
        for (const auto& [n, v] : decl.autotune_space) candidates.push_back(n);
        std::string hint = suggest(name, candidates);
        std::string all;
        for (std::string_view c : candidates) all += (all.empty() ? "" : ", ") + std::string(c);
        raise(ErrorCode::ArgumentInvalid,
              "kernel '" + decl.name + "' has no compile-time parameter '" + name + "'" +
                  (hint.empty() ? "" : "; did you mean '" + hint + "'?") +
                  (all.empty() ? " (it has none)" : " (it has: " + all + ")"),
              decl.location);
      }
      analysis_.constants[name] = value;
    }
    for (const std::string& sym : decl.shape_symbols) {
      auto it = analysis_.constants.find(sym);
      if (it != analysis_.constants.end() && it->second < 0)
        raise(ErrorCode::ArgumentInvalid,
              "shape symbol '" + sym + "' specialized to a negative size " + std::to_string(it->second), decl.location);
    }
  }

  Analysis run() {
    check_declaration();
    // Grow the non-uniform set to a fixed point, then check with errors on.
    for (int pass = 0; pass < 10000; ++pass) {
      std::size_t before = nonuniform_.size();
      run_pass(false);
      if (nonuniform_.size() == before) break;
    }
    run_pass(true);
    return std::move(analysis_);
  }

 private:
  // ---- diagnostics ----
  [[noreturn]] void fail(std::size_t at, const std::string& message, std::size_t span = 1,
                         ErrorCode code = ErrorCode::KernelType) const {
    raise(code, message, kernel_.locate(at, span));
  }
  [[noreturn]] void fail(const Expr& e, const std::string& message, ErrorCode code = ErrorCode::KernelType) const {
    fail(e.offset, message, e.length, code);
  }
  std::string line_of(std::size_t offset) const { return std::to_string(kernel_.locate(offset).line); }

  void check_declaration() {
    std::set<std::string> params;
    for (const KernelParam& p : decl_.params) {
      if (is_reserved(p.name))
        raise(ErrorCode::KernelType, "parameter '" + p.name + "' shadows the built-in '" + p.name + "'", p.location);
      params.insert(p.name);
    }
    for (const KernelParam& p : decl_.params) {
      for (const DimSpec& d : p.dims) {
        for (const std::string& s : {d.lhs, d.rhs_symbol}) {
          if (s.empty()) continue;
          if (params.count(s))
            raise(ErrorCode::KernelType,
                  "shape symbol '" + s + "' of parameter '" + p.name + "' is also a parameter name", p.location);
          if (s != "grid_groups" && is_reserved(s))
            raise(ErrorCode::KernelType, "shape symbol '" + s + "' of parameter '" + p.name + "' shadows a built-in",
                  p.location);
        }
      }
    }
    for (const auto& [name, values] : decl_.autotune_space) {
      bool clash = params.count(name) || is_reserved(name) ||
                   std::find(decl_.shape_symbols.begin(), decl_.shape_symbols.end(), name) != decl_.shape_symbols.end();
      if (clash)
        raise(ErrorCode::KernelType, "autotune name '" + name + "' is already a parameter, shape symbol or built-in",
              decl_.location);
    }
    const ast::Body& body = kernel_.body;
    if (body.size() == 1 && body[0]->kind == StmtKind::expr && body[0]->value->kind == ExprKind::ellipsis)
      fail(*body[0]->value, "kernel '" + decl_.name + "' has no body ('...'): write its statements");
  }

  bool is_reserved(const std::string& name) const {
    DType d;
    if (try_parse_dtype(name, d)) return true;
    for (std::string_view c : kCallables)
      if (c == name) return true;
    for (std::string_view c : kBuiltinNames)
      if (c == name) return true;
    return name == "mut" || name == "kernel" || name == "dict";
  }

  void run_pass(bool final_pass) {
    final_ = final_pass;
    analysis_.exprs.clear();
    analysis_.if_exports.clear();
    env_.clear();
    dropped_.clear();
    divergence_.clear();
    shared_total_ = 0;
    written_.clear();
    collect_writes(kernel_.body);
    for (const KernelParam& p : decl_.params) {
      Var v;
      v.is_param = true;
      if (p.is_buffer) {
        v.type.kind = Kind::gmem;
        v.type.dtype = p.dtype;
        v.type.mut = p.is_mut;
        v.type.param = p.name;
        v.type.rank = p.dims.size();
      } else {
        v.type = KType::lane(p.dtype);
      }
      env_[p.name] = v;
    }
    check_body(kernel_.body, true);
  }

  void collect_writes(const ast::Body& body) {
    for (const auto& s : body) {
      auto note = [&](const Expr& t) {
        if (t.kind == ExprKind::subscript && t.args[0]->kind == ExprKind::name) written_.insert(t.args[0]->text);
      };
      if (s->target) {
        note(*s->target);
        if (s->target->kind == ExprKind::tuple)
          for (const auto& a : s->target->args) note(*a);
      }
      // tile.store(T, ...) and cp_async destinations.
      if (s->kind == StmtKind::expr) note_call_writes(*s->value);
      collect_writes(s->body);
      collect_writes(s->orelse);
    }
  }
  void note_call_writes(const Expr& e) {
    if (e.kind != ExprKind::call || e.args.size() < 2 || e.args[1]->kind != ExprKind::name) return;
    std::string callee = dotted_name(*e.args[0]);
    if (callee == "tile.store" || callee == "cp_async.shared.global") written_.insert(e.args[1]->text);
  }

  static std::string dotted_name(const Expr& e) {
    if (e.kind == ExprKind::name) return e.text;
    if (e.kind == ExprKind::attribute) {
      std::string base = dotted_name(*e.args[0]);
      if (base.empty()) return {};
      std::string attr = e.text == "global_" ? "global" : e.text;  // Python cannot spell `.global`
      return base == "tessera" ? attr : base + "." + attr;
    }
    return {};
  }

  // ---- divergence ----
  bool divergent() const { return !divergence_.empty(); }
  void require_uniform_control(const Expr& e, const std::string& what) const {
    if (!final_ || !divergent()) return;
    std::size_t at = divergence_.back();
    fail(e, what + " is group-cooperative and must run under uniform control flow, but the condition on line " +
                line_of(at) + " depends on a lane-varying value (such as tile.linear_id())");
  }

  // ---- statements ----
  void check_body(const ast::Body& body, bool top_level) {
    for (std::size_t i = 0; i < body.size(); ++i) {
      const Stmt& s = *body[i];
      bool last = top_level && i + 1 == body.size();
      check_stmt(s, last);
    }
  }

  void check_stmt(const Stmt& s, bool last_at_top) {
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

  void check_expr_stmt(const Expr& e) {
    if (e.kind == ExprKind::string) return;  // docstring
    if (e.kind == ExprKind::ellipsis) fail(e, "'...' is not a statement in a kernel body");
    analyze(e);
  }

  void check_assign(const Stmt& s) {
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

  void assign_to(const Expr& target, const Expr& value_expr, const ExprInfo& value) {
    if (target.kind == ExprKind::name) {
      bind(target, value_expr, value);
    } else if (target.kind == ExprKind::subscript) {
      KType elem = check_element_access(target, true);
      store_value(value_expr, value, elem.dtype, "an element of '" + buffer_name(target) + "'");
    } else {
      fail(target, "cannot assign to this expression; assign to a name or a buffer element (y[i] = ...)");
    }
  }

  static std::string buffer_name(const Expr& subscript) {
    return subscript.args[0]->kind == ExprKind::name ? subscript.args[0]->text : "buffer";
  }

  // A lane value stored into an element of dtype `dtype`: converted like numpy assignment.
  void store_value(const Expr& value_expr, const ExprInfo& value, DType dtype, const std::string& where) {
    if (!value.type.is_lane())
      fail(value_expr, "cannot store " + value.type.str() + " into " + where + ", which holds " +
                           std::string(name(dtype)) + " scalars");
    (void)dtype;
  }

  void bind(const Expr& target, const Expr& value_expr, const ExprInfo& value) {
    const std::string& var = target.text;
    if (is_reserved(var)) fail(target, "cannot assign to '" + var + "': it is a built-in name");
    if (std::find(decl_.shape_symbols.begin(), decl_.shape_symbols.end(), var) != decl_.shape_symbols.end())
      fail(target, "cannot assign to '" + var + "': it is a shape symbol of the parameters");
    for (const auto& [n, values] : decl_.autotune_space)
      if (n == var) fail(target, "cannot assign to '" + var + "': it is a compile-time (autotune) parameter");
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
                             " but is assigned " + value.type.str() +
                             " here; a variable keeps one type (convert with " + std::string(name(old.type.dtype)) +
                             "(...))");
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

  void check_aug_assign(const Stmt& s) {
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

  void check_if(const Stmt& s) {
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

  void check_for(const Stmt& s) {
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
    if (positional < 1 || positional > 3)
      fail(iter, callee + "() takes 1 to 3 positional arguments (start, stop, step)");
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
        std::vector<std::string_view> known = {"step", "prefetch"};
        std::string hint = callee == "tile.range" ? suggest(k.name, known) : "";
        fail(k.offset,
             "unknown keyword '" + k.name + "' for " + callee + "()" +
                 (hint.empty() ? "" : "; did you mean '" + hint + "'?"),
             k.name.size());
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
    for (const std::string& sym : decl_.shape_symbols)
      if (sym == var) fail(*s.target, "loop variable '" + var + "' is a shape symbol of the parameters");
    for (const auto& [n, values] : decl_.autotune_space)
      if (n == var) fail(*s.target, "loop variable '" + var + "' is a compile-time parameter");
    Var v;
    v.type = KType::lane(DType::int64);
    v.def_offset = s.target->offset;
    env_[var] = v;
    if (!uniform || divergent()) nonuniform_.insert(var);
    analysis_.exprs[s.target.get()] = ExprInfo{v.type, !nonuniform_.count(var)};
    check_loop_body(s, before);
    if (!uniform) divergence_.pop_back();
  }

  void check_loop_body(const Stmt& s, const std::map<std::string, Var>& before) {
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

  void check_while(const Stmt& s) {
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

  // ---- expressions ----
  void require_bool(const Expr& e, const ExprInfo& info, const std::string& what) const {
    if (!info.type.is_lane() || info.type.dtype != DType::bool_)
      fail(e, what + " must be a bool (a comparison), got " + info.type.str());
  }
  void require_int(const Expr& e, const ExprInfo& info, const std::string& what) const {
    if (!info.type.is_lane() || is_float(info.type.dtype) || info.type.dtype == DType::bool_)
      fail(e, what + " must be an integer, got " + info.type.str());
  }
  void require_lane(const Expr& e, const ExprInfo& info, const std::string& what) const {
    if (!info.type.is_lane()) fail(e, what + " must be a scalar, got " + info.type.str());
  }

  ExprInfo& record(const Expr& e, ExprInfo info) {
    ExprInfo& slot = analysis_.exprs[&e];
    slot = std::move(info);
    return slot;
  }

  const ExprInfo& analyze(const Expr& e) {
    switch (e.kind) {
      case ExprKind::integer: {
        ExprInfo i{KType::lane(DType::int64, true), true};
        i.constant = e.int_value;
        return record(e, i);
      }
      case ExprKind::real: return record(e, ExprInfo{KType::lane(DType::fp32, true), true});
      case ExprKind::boolean: return record(e, ExprInfo{KType::lane(DType::bool_, true), true});
      case ExprKind::string:
        fail(e, "a string is not a kernel value (strings only appear as keyword arguments such as swizzle=\"xor\")");
      case ExprKind::none: fail(e, "None is not a kernel value");
      case ExprKind::ellipsis: fail(e, "'...' is not a kernel value");
      case ExprKind::name: return analyze_name(e);
      case ExprKind::binary: {
        const ExprInfo& a = analyze(*e.args[0]);
        const ExprInfo& b = analyze(*e.args[1]);
        return record(e, binary_result(e.text, *e.args[0], a, *e.args[1], b, e.offset, e.length));
      }
      case ExprKind::unary: return analyze_unary(e);
      case ExprKind::compare: return analyze_compare(e);
      case ExprKind::logical: {
        const ExprInfo& a = analyze(*e.args[0]);
        require_bool(*e.args[0], a, "an operand of '" + e.text + "'");
        // The right operand only runs when the left does not decide: it is
        // under the left operand's control.
        if (!a.uniform) divergence_.push_back(e.args[0]->offset);
        const ExprInfo& b = analyze(*e.args[1]);
        if (!a.uniform) divergence_.pop_back();
        require_bool(*e.args[1], b, "an operand of '" + e.text + "'");
        return record(e, ExprInfo{KType::lane(DType::bool_), a.uniform && b.uniform});
      }
      case ExprKind::ternary: {
        const ExprInfo& c = analyze(*e.args[1]);
        require_bool(*e.args[1], c, "the condition of a conditional expression");
        if (!c.uniform) divergence_.push_back(e.args[1]->offset);
        const ExprInfo a = analyze(*e.args[0]);
        const ExprInfo b = analyze(*e.args[2]);
        if (!c.uniform) divergence_.pop_back();
        ExprInfo out;
        if (a.type.is_lane() && b.type.is_lane()) {
          out = binary_promote(e, a, b);
          out.type.weak = a.type.weak && b.type.weak;
        } else if (a.type.same(b.type) && a.type.kind == Kind::tile) {
          out.type = a.type;
        } else {
          fail(e, "the two values of a conditional expression differ: " + a.type.str() + " and " + b.type.str());
        }
        out.uniform = a.uniform && b.uniform && c.uniform;
        return record(e, out);
      }
      case ExprKind::call: return analyze_call(e);
      case ExprKind::attribute: {
        std::string dotted = dotted_name(e);
        if (dotted.empty()) fail(e, "attributes of values are not supported in kernels");
        std::string root = dotted.substr(0, dotted.find('.'));
        if (env_.count(root)) fail(e, "'" + root + "' has no attribute '" + e.text + "'");
        // A dtype written tessera.f32.
        DType d;
        if (dotted.find('.') == std::string::npos && try_parse_dtype(dotted, d)) {
          KType t;
          t.kind = Kind::dtype;
          t.dtype = d;
          return record(e, ExprInfo{t, true});
        }
        if (dotted == "grid_groups") return analyze_name_text(e, dotted);
        for (std::string_view c : kCallables)
          if (c == dotted) fail(e, "'" + dotted + "' is a function: call it (" + dotted + "(...))");
        unknown_name(e, dotted);
      }
      case ExprKind::subscript: {
        check_element_access(e, false);
        return analysis_.exprs[&e];
      }
      case ExprKind::slice: fail(e, "a slice is only valid as the source of cp_async.shared.global(dst, X[a:a+n])");
      case ExprKind::tuple: fail(e, "a tuple is not a kernel value here");
      case ExprKind::list: fail(e, "a list is not a kernel value");
      case ExprKind::dict: fail(e, "a dict is not a kernel value");
    }
    fail(e, "unsupported expression");
  }

  [[noreturn]] void unknown_name(const Expr& e, const std::string& name) const {
    std::vector<std::string_view> candidates;
    std::string root = name.substr(0, name.find('.'));
    bool dotted = name.find('.') != std::string::npos;
    if (dotted && (root == "tile" || root == "tshared" || root == "cp_async")) {
      for (std::string_view c : kCallables)
        if (c.find('.') != std::string_view::npos) candidates.push_back(c);
      std::string hint = suggest(name, candidates);
      fail(e, "unknown built-in '" + name + "'" + (hint.empty() ? "" : "; did you mean '" + hint + "'?"));
    }
    for (const auto& [n, v] : env_) candidates.push_back(n);
    for (const std::string& s : decl_.shape_symbols) candidates.push_back(s);
    for (const auto& [n, v] : decl_.autotune_space) candidates.push_back(n);
    for (std::string_view c : kCallables)
      if (c.find('.') == std::string_view::npos) candidates.push_back(c);
    for (std::string_view c : kBuiltinNames) candidates.push_back(c);
    auto dropped = dropped_.find(root);
    if (dropped != dropped_.end()) fail(e, "'" + root + "' may be undefined here: " + dropped->second);
    std::string hint = suggest(root, candidates);
    fail(e, "unknown name '" + root + "'" + (hint.empty() ? "" : "; did you mean '" + hint + "'?"));
  }

  std::string suggest_callable(const std::string& name) const {
    std::vector<std::string_view> candidates(kCallables.begin(), kCallables.end());
    std::string hint = suggest(name, candidates);
    return hint.empty() ? "" : " (did you mean '" + hint + "'?)";
  }

  const ExprInfo& analyze_name(const Expr& e) { return analyze_name_text(e, e.text); }

  const ExprInfo& analyze_name_text(const Expr& e, const std::string& name) {
    auto it = env_.find(name);
    if (it != env_.end()) {
      ExprInfo i{it->second.type, !nonuniform_.count(name)};
      if (it->second.is_param && it->second.type.is_lane()) i.builtin = "param";
      return record(e, i);
    }
    if (name == "grid_groups") {
      ExprInfo i{KType::lane(DType::int64), true};
      i.builtin = "grid_groups";
      return record(e, i);
    }
    auto c = analysis_.constants.find(name);
    bool is_symbol =
        std::find(decl_.shape_symbols.begin(), decl_.shape_symbols.end(), name) != decl_.shape_symbols.end();
    bool is_tunable = false;
    for (const auto& [n, v] : decl_.autotune_space) is_tunable = is_tunable || n == name;
    if (is_symbol || is_tunable) {
      ExprInfo i{KType::lane(DType::int64), true};
      if (c != analysis_.constants.end()) {
        i.constant = c->second;
        i.builtin = "constant";
      } else {
        i.builtin = "symbol";
      }
      return record(e, i);
    }
    DType d;
    if (try_parse_dtype(name, d)) {
      KType t;
      t.kind = Kind::dtype;
      t.dtype = d;
      return record(e, ExprInfo{t, true});
    }
    if (name == "tf32") {
      try {
        parse_dtype(name);
      } catch (const Error& error) {
        fail(e, error.message(), error.code());
      }
    }
    for (std::string_view b : kBuiltinNames)
      if (b == name) {
        KType t;
        t.kind = Kind::namespace_;
        return record(e, ExprInfo{t, true});
      }
    for (std::string_view callable : kCallables)
      if (callable == name) fail(e, "'" + name + "' is a function: call it (" + name + "(...))");
    unknown_name(e, name);
  }

  ExprInfo binary_promote(const Expr& e, const ExprInfo& a, const ExprInfo& b) const {
    DType da = a.type.dtype, db = b.type.dtype;
    DType out;
    if (a.type.weak && !b.type.weak) {
      // A Python literal takes the other operand's type; a float literal with
      // an integer gives fp32.
      out = (is_float(da) && !is_float(db)) ? DType::fp32 : db;
      if (da != DType::bool_ && db == DType::bool_) out = da == DType::int64 ? DType::int64 : DType::fp32;
    } else if (b.type.weak && !a.type.weak) {
      out = (is_float(db) && !is_float(da)) ? DType::fp32 : da;
      if (db != DType::bool_ && da == DType::bool_) out = db == DType::int64 ? DType::int64 : DType::fp32;
    } else {
      try {
        out = graph::promote_dtypes(da, db);
      } catch (const Error& error) {
        fail(e, error.message(), error.code());
      }
    }
    ExprInfo i{KType::lane(out, a.type.weak && b.type.weak), a.uniform && b.uniform};
    i.op_dtype = out;
    return i;
  }

  ExprInfo binary_result(const std::string& op, const Expr& lhs, const ExprInfo& a, const Expr& rhs, const ExprInfo& b,
                         std::size_t offset, std::size_t length) const {
    if (op == "@") fail(offset, "'@' is not a kernel operator: multiply tiles with tile.mma(a, b, acc=c)", length);
    if (a.type.kind == Kind::tile || b.type.kind == Kind::tile)
      fail(offset,
           "arithmetic on tile values is not supported ('" + op + "' on " + a.type.str() + " and " + b.type.str() +
               "); tiles are combined with tile.mma and written with tile.store",
           length);
    require_lane(lhs, a, "the left operand of '" + op + "'");
    require_lane(rhs, b, "the right operand of '" + op + "'");
    if (a.type.dtype == DType::bool_ || b.type.dtype == DType::bool_)
      fail(offset, "arithmetic '" + op + "' on bool values; use and/or/not, or convert with int64(...)", length);
    Expr dummy;
    dummy.offset = offset;
    dummy.length = length;
    ExprInfo i = binary_promote(dummy, a, b);
    DType d = i.op_dtype;
    if (op == "/" && !is_float(d))
      fail(offset, "'/' on integers: use '//' for integer (floor) division, or convert an operand with f32(...)",
           length);
    if ((op == "//" || op == "%") && is_float(d))
      fail(offset, "'" + op + "' is only defined on integers in kernels; got " + std::string(name(d)), length);
    if (op == "**" && !is_float(d)) fail(offset, "'**' needs floating operands; convert with f32(...)", length);
    if (a.constant && b.constant && !is_float(d)) {
      Expr folded;
      folded.kind = ExprKind::binary;
      folded.text = op;
      auto l = std::make_unique<Expr>();
      l->kind = ExprKind::integer;
      l->int_value = *a.constant;
      auto r = std::make_unique<Expr>();
      r->kind = ExprKind::integer;
      r->int_value = *b.constant;
      folded.args.push_back(std::move(l));
      folded.args.push_back(std::move(r));
      i.constant = fold_int(folded, {});
      if (!i.constant && (op == "//" || op == "%") && *b.constant == 0)
        fail(offset, "integer division by zero", length);
    }
    return i;
  }

  const ExprInfo& analyze_unary(const Expr& e) {
    const ExprInfo& a = analyze(*e.args[0]);
    if (e.text == "not") {
      require_bool(*e.args[0], a, "the operand of 'not'");
      return record(e, ExprInfo{KType::lane(DType::bool_), a.uniform});
    }
    require_lane(*e.args[0], a, "the operand of '" + e.text + "'");
    if (a.type.dtype == DType::bool_) fail(e, "'" + e.text + "' on a bool value");
    ExprInfo i = a;
    i.builtin.clear();
    if (e.text == "-" && a.constant) i.constant = -*a.constant;
    return record(e, i);
  }

  const ExprInfo& analyze_compare(const Expr& e) {
    bool uniform = true;
    std::vector<ExprInfo> operands;
    for (const auto& a : e.args) {
      operands.push_back(analyze(*a));
      require_lane(*a, operands.back(), "a comparison operand");
      uniform = uniform && operands.back().uniform;
    }
    ExprInfo i{KType::lane(DType::bool_), uniform};
    // One promoted dtype for the whole chain.
    ExprInfo acc = operands[0];
    for (std::size_t k = 1; k < operands.size(); ++k) {
      if ((acc.type.dtype == DType::bool_) != (operands[k].type.dtype == DType::bool_) &&
          !(acc.type.weak || operands[k].type.weak))
        fail(e, "comparing a bool with a number");
      acc = binary_promote(e, acc, operands[k]);
    }
    i.op_dtype = acc.type.dtype;
    return record(e, i);
  }

  // x[i], x[i, j] on gmem/smem buffers; returns the element type.
  KType check_element_access(const Expr& e, bool write) {
    const Expr& base_expr = *e.args[0];
    const ExprInfo base = analyze(base_expr);
    if (!base.type.is_buffer()) fail(base_expr, "only buffers can be indexed; this is " + base.type.str());
    std::size_t rank = base.type.buffer_rank();
    if (e.args.size() - 1 != rank)
      fail(e, "'" + buffer_name(e) + "' has " + std::to_string(rank) + " dimension" + (rank == 1 ? "" : "s") +
                  " but is indexed with " + std::to_string(e.args.size() - 1));
    bool uniform = true;
    for (std::size_t i = 1; i < e.args.size(); ++i) {
      if (e.args[i]->kind == ExprKind::slice)
        fail(*e.args[i], "a slice is only valid as the source of cp_async.shared.global(dst, X[a:a+n])");
      const ExprInfo& idx = analyze(*e.args[i]);
      require_int(*e.args[i], idx, "an index");
      uniform = uniform && idx.uniform;
    }
    if (write) check_writable(base_expr, base.type);
    KType elem = KType::lane(base.type.dtype);
    // Loads are uniform at uniform indices of global buffers the kernel never writes.
    bool load_uniform = uniform && base.type.kind == Kind::gmem && !written_.count(base.type.param);
    ExprInfo i{elem, load_uniform};
    i.builtin = "tile.load_elem";
    record(e, i);
    return elem;
  }

  void check_writable(const Expr& base_expr, const KType& type) const {
    if (type.kind == Kind::gmem && !type.mut)
      fail(base_expr, "cannot write to parameter '" + type.param + "': it is not declared mut (write '" + type.param +
                          ": mut " + std::string(name(type.dtype)) + "[...]')");
  }

  // ---- built-in calls ----
  const ExprInfo& analyze_call(const Expr& e) {
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
    std::vector<Arg> args = bind_args(e, name);
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
    if (name == "tile.zeros") return analyze_zeros(e, args);
    if (name == "min" || name == "max") {
      expect_args(e, name, args, 2, {});
      const ExprInfo a = analyze(*args[0].expr);
      const ExprInfo b = analyze(*args[1].expr);
      require_lane(*args[0].expr, a, name + "() operand");
      require_lane(*args[1].expr, b, name + "() operand");
      if (a.type.dtype == DType::bool_ || b.type.dtype == DType::bool_) fail(e, name + "() of bool values");
      ExprInfo i = binary_promote(e, a, b);
      i.builtin = name;
      return record(e, i);
    }
    if (name == "abs" || name == "sqrt" || name == "exp" || name == "log") {
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
    if (root == "tile" || root == "tshared" || root == "cp_async") unknown_name(callee, name);
    for (std::string_view b : kBuiltinNames)
      if (b == name) fail(callee, "'" + name + "' is not a function");
    if (name.find('.') != std::string::npos) unknown_name(callee, name);
    unknown_name(callee, name);
  }

  struct Arg {
    std::string keyword;  // empty for positional
    const Expr* expr;
    std::size_t offset;
  };

  std::vector<Arg> bind_args(const Expr& e, const std::string&) {
    std::vector<Arg> args;
    for (std::size_t i = 1; i < e.args.size(); ++i) args.push_back(Arg{"", e.args[i].get(), e.args[i]->offset});
    for (const ast::Keyword& k : e.keywords) args.push_back(Arg{k.name, k.value.get(), k.offset});
    return args;
  }

  // Checks the positional count and that every keyword is one of `keywords`.
  void expect_args(const Expr& e, const std::string& name, const std::vector<Arg>& args, std::size_t positional,
                   const std::vector<std::string_view>& keywords) const {
    std::size_t n = 0;
    for (const Arg& a : args) {
      if (a.keyword.empty()) {
        ++n;
        continue;
      }
      if (std::find(keywords.begin(), keywords.end(), a.keyword) == keywords.end()) {
        std::string hint = suggest(a.keyword, keywords);
        fail(a.offset,
             "unknown keyword '" + a.keyword + "' for " + name + "()" +
                 (hint.empty() ? "" : "; did you mean '" + hint + "'?"),
             a.keyword.size());
      }
    }
    if (n != positional)
      fail(e, name + "() takes " + std::to_string(positional) + " positional argument" + (positional == 1 ? "" : "s") +
                  ", got " + std::to_string(n));
  }
  static const Arg* keyword(const std::vector<Arg>& args, std::string_view name) {
    for (const Arg& a : args)
      if (a.keyword == name) return &a;
    return nullptr;
  }

  std::int64_t const_extent(const Expr& e, const std::string& what) {
    const ExprInfo& i = analyze(e);
    if (!i.constant)
      fail(e, what + " must be a compile-time integer (a literal or an autotune/jit name), got a run-time value");
    if (*i.constant <= 0) fail(e, what + " must be positive, got " + std::to_string(*i.constant));
    if (*i.constant > (std::int64_t{1} << 24)) fail(e, what + " is too large (" + std::to_string(*i.constant) + ")");
    return *i.constant;
  }

  const ExprInfo& analyze_alloc(const Expr& e) {
    const Expr& callee = *e.args[0];
    require_uniform_control(e, "tshared.alloc");
    if (callee.args.size() != 2) fail(callee, "tshared.alloc takes one element type: tshared.alloc[f32](...)");
    const ExprInfo& t = analyze(*callee.args[1]);
    if (t.type.kind != Kind::dtype)
      fail(*callee.args[1], "tshared.alloc[T]: T must be a dtype such as f32, got " + t.type.str());
    std::vector<Arg> args = bind_args(e, "tshared.alloc");
    std::vector<const Expr*> dims;
    bool swizzle = false;
    for (const Arg& a : args) {
      if (a.keyword.empty()) {
        if (a.expr->kind == ExprKind::tuple) {
          for (const auto& d : a.expr->args) dims.push_back(d.get());
        } else {
          dims.push_back(a.expr);
        }
      } else if (a.keyword == "swizzle") {
        if (a.expr->kind != ExprKind::string || (a.expr->text != "xor" && a.expr->text != "none"))
          fail(*a.expr, "swizzle= takes \"xor\" or \"none\"");
        swizzle = a.expr->text == "xor";
      } else {
        std::string hint = suggest(a.keyword, {"swizzle"});
        fail(a.offset,
             "unknown keyword '" + a.keyword + "' for tshared.alloc" +
                 (hint.empty() ? "" : "; did you mean '" + hint + "'?"),
             a.keyword.size());
      }
    }
    if (dims.empty() || dims.size() > 2)
      fail(e, "a shared buffer has 1 or 2 dimensions: tshared.alloc[f32](128) or (64, 64)");
    KType type;
    type.kind = Kind::smem;
    type.dtype = t.type.dtype;
    type.swizzle_xor = swizzle;
    for (const Expr* d : dims) type.sizes.push_back(const_extent(*d, "a shared buffer extent"));
    if (type.dtype == DType::e8m0) fail(*callee.args[1], "e8m0 is a scale format, not a shared buffer element type");
    std::int64_t bytes = shared_alloc_bytes(type.dtype, type.sizes);
    std::int64_t budget = decl_.shared_bytes.value_or(kDefaultSharedBytes);
    shared_total_ += bytes;
    if (shared_total_ > budget)
      fail(e, "shared allocation " + type.str() + " (" + std::to_string(bytes) +
                  " bytes) brings the group's shared memory to " + std::to_string(shared_total_) +
                  " bytes, over the budget of " + std::to_string(budget) + " bytes (" +
                  (decl_.shared_bytes ? "declared shared(" + size_text(budget) + ")"
                                      : "the default; declare more with shared(SIZE)") +
                  ")");
    ExprInfo i{type, true};
    i.builtin = "tshared.alloc";
    return record(e, i);
  }

  const ExprInfo& analyze_cast(const Expr& e, DType to) {
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

  const ExprInfo& analyze_cp_async(const Expr& e, const std::vector<Arg>& args) {
    const std::string name = "cp_async.shared.global";
    expect_args(e, name, args, 2, {});
    require_uniform_control(e, name + "()");
    const ExprInfo dst = analyze(*args[0].expr);
    if (dst.type.kind != Kind::smem)
      fail(*args[0].expr, name + ": the destination must be a shared buffer, got " + dst.type.str());
    const Expr& src = *args[1].expr;
    if (src.kind != ExprKind::subscript)
      fail(src, name + ": the source must be a slice of a global buffer, such as X[t:t+128]");
    const ExprInfo base = analyze(*src.args[0]);
    if (base.type.kind != Kind::gmem)
      fail(*src.args[0], name + ": the source must be a global buffer, got " + base.type.str());
    if (base.type.dtype != dst.type.dtype)
      fail(e, name + " copies raw elements: the source is " + std::string(tessera::name(base.type.dtype)) +
                  " but the destination is " + std::string(tessera::name(dst.type.dtype)));
    std::size_t rank = base.type.rank;
    if (src.args.size() - 1 != rank)
      fail(src, "'" + base.type.param + "' has " + std::to_string(rank) + " dimensions but the slice has " +
                    std::to_string(src.args.size() - 1));
    if (rank != dst.type.sizes.size())
      fail(e, name + ": the source has " + std::to_string(rank) + " dimensions and the destination " +
                  std::to_string(dst.type.sizes.size()));
    for (std::size_t d = 0; d < rank; ++d) {
      const Expr& s = *src.args[d + 1];
      if (s.kind != ExprKind::slice) fail(s, name + ": each source index must be a slice a:a+n");
      const Expr& lo = *s.args[0];
      const Expr& hi = *s.args[1];
      if (lo.kind == ExprKind::none || hi.kind == ExprKind::none)
        fail(s, name + ": write both slice bounds (a:a+n) so the copied extent is known");
      const ExprInfo& lo_info = analyze(lo);
      require_int(lo, lo_info, "a slice start");
      const ExprInfo& hi_info = analyze(hi);
      require_int(hi, hi_info, "a slice stop");
      std::optional<std::int64_t> length;
      if (lo_info.constant && hi_info.constant) {
        length = *hi_info.constant - *lo_info.constant;
      } else if (hi.kind == ExprKind::binary && hi.text == "+" && same_expr(*hi.args[0], lo)) {
        length = analysis_.info(*hi.args[1]).constant;
      }
      if (!length)
        fail(s, name + ": the slice's length must be a compile-time constant: write it as a:a+n with n constant");
      if (*length != dst.type.sizes[d])
        fail(s, name + ": the slice copies " + std::to_string(*length) + " elements along dimension " +
                    std::to_string(d) + " but the destination holds " + std::to_string(dst.type.sizes[d]));
    }
    ExprInfo i{KType{}, true};
    i.builtin = name;
    return record(e, i);
  }

  // A window keyword: (start, extent) or a bare start. Returns the extent or 0 when bare.
  std::int64_t window(const Arg& a, const std::string& name) {
    if (a.expr->kind == ExprKind::tuple) {
      if (a.expr->args.size() != 2) fail(*a.expr, a.keyword + "= takes (start, extent)");
      const ExprInfo& s = analyze(*a.expr->args[0]);
      require_int(*a.expr->args[0], s, name + " " + a.keyword + " start");
      return const_extent(*a.expr->args[1], name + " " + a.keyword + " extent");
    }
    const ExprInfo& s = analyze(*a.expr);
    require_int(*a.expr, s, name + " " + a.keyword + " start");
    return 0;
  }

  // The buffer and tile extents of tile.load / tile.store windows. `value`
  // gives extents for bare starts (stores).
  std::vector<std::int64_t> windows(const Expr& e, const std::string& name, const std::vector<Arg>& args,
                                    const KType& buf, const KType* value) {
    const Arg* rows = keyword(args, "rows");
    const Arg* cols = keyword(args, "cols");
    std::size_t rank = buf.buffer_rank();
    std::vector<std::int64_t> extents;
    if (!rows && !cols) {
      if (buf.kind != Kind::smem)
        fail(e, name + " of a global buffer needs index= (one element) or rows=(start, extent)" +
                    std::string(rank == 2 ? " and cols=(start, extent)" : "") + " (a tile)");
      return buf.sizes;  // the whole shared buffer
    }
    if (!rows) fail(e, name + ": cols= needs rows= too");
    if (rank == 1 && cols)
      fail(cols->offset, name + ": '" + buffer_label(buf) + "' is 1-D: give only rows=(start, extent)", 4);
    if (rank == 2 && !cols)
      fail(e, name + ": '" + buffer_label(buf) + "' is 2-D: give rows=(start, extent) and cols=(start, extent)");
    if (rank > 2) fail(e, name + " of tiles needs a 1-D or 2-D buffer");
    extents.push_back(window(*rows, name));
    if (cols) extents.push_back(window(*cols, name));
    for (std::size_t d = 0; d < extents.size(); ++d) {
      if (extents[d] == 0) {
        if (!value) fail(d == 0 ? *rows->expr : *cols->expr, name + ": give the window as (start, extent)");
        extents[d] = value->sizes[d];
      } else if (value && value->sizes[d] != extents[d]) {
        fail(e, name + ": the window is " + sizes_text(extents) + " but the value is " + value->str());
      }
    }
    return extents;
  }
  static std::string buffer_label(const KType& t) { return t.kind == Kind::gmem ? t.param : "the shared buffer"; }

  void check_index_kw(const Arg& a, const KType& buf, const std::string& name, bool& uniform) {
    std::vector<const Expr*> idx;
    if (a.expr->kind == ExprKind::tuple) {
      for (const auto& x : a.expr->args) idx.push_back(x.get());
    } else {
      idx.push_back(a.expr);
    }
    if (idx.size() != buf.buffer_rank())
      fail(*a.expr, name + ": '" + buffer_label(buf) + "' has " + std::to_string(buf.buffer_rank()) +
                        " dimensions but index= gives " + std::to_string(idx.size()));
    for (const Expr* x : idx) {
      const ExprInfo& i = analyze(*x);
      require_int(*x, i, "an index");
      uniform = uniform && i.uniform;
    }
  }

  const ExprInfo& analyze_tile_load(const Expr& e, const std::vector<Arg>& args) {
    const std::string name = "tile.load";
    expect_args(e, name, args, 1, {"index", "rows", "cols"});
    const ExprInfo buf = analyze(*args[0].expr);
    if (!buf.type.is_buffer()) fail(*args[0].expr, name + " reads a buffer, got " + buf.type.str());
    if (const Arg* index = keyword(args, "index")) {
      if (keyword(args, "rows") || keyword(args, "cols"))
        fail(e, name + ": give index= (an element) or rows=/cols= (a tile), not both");
      bool uniform = true;
      check_index_kw(*index, buf.type, name, uniform);
      ExprInfo i{KType::lane(buf.type.dtype),
                 uniform && buf.type.kind == Kind::gmem && !written_.count(buf.type.param)};
      i.builtin = "tile.load_elem";
      return record(e, i);
    }
    require_uniform_control(e, "tile.load of a tile");
    std::vector<std::int64_t> extents = windows(e, name, args, buf.type, nullptr);
    ExprInfo i{KType::tile(buf.type.dtype, extents), true};
    i.builtin = "tile.tile_load";
    return record(e, i);
  }

  const ExprInfo& analyze_tile_store(const Expr& e, const std::vector<Arg>& args) {
    const std::string name = "tile.store";
    expect_args(e, name, args, 1, {"index", "rows", "cols", "value"});
    const ExprInfo buf = analyze(*args[0].expr);
    if (!buf.type.is_buffer()) fail(*args[0].expr, name + " writes a buffer, got " + buf.type.str());
    const Arg* value = keyword(args, "value");
    if (!value) fail(e, name + " needs value=");
    check_writable(*args[0].expr, buf.type);
    const ExprInfo v = analyze(*value->expr);
    if (const Arg* index = keyword(args, "index")) {
      if (keyword(args, "rows") || keyword(args, "cols"))
        fail(e, name + ": give index= (an element) or rows=/cols= (a tile), not both");
      bool uniform = true;
      check_index_kw(*index, buf.type, name, uniform);
      store_value(*value->expr, v, buf.type.dtype, "an element of '" + buffer_label(buf.type) + "'");
      ExprInfo i{KType{}, true};
      i.builtin = "tile.store_elem";
      return record(e, i);
    }
    if (v.type.kind != Kind::tile)
      fail(*value->expr,
           name + " with rows=/cols= stores a tile, got " + v.type.str() + " (use index= for one element)");
    require_uniform_control(e, "tile.store of a tile");
    if (v.type.sizes.size() != buf.type.buffer_rank())
      fail(*value->expr, name + ": the value is " + v.type.str() + " but the buffer has " +
                             std::to_string(buf.type.buffer_rank()) + " dimensions");
    windows(e, name, args, buf.type, &v.type);
    ExprInfo i{KType{}, true};
    i.builtin = "tile.tile_store";
    return record(e, i);
  }

  const ExprInfo& analyze_mma(const Expr& e, const std::vector<Arg>& args) {
    const std::string name = "tile.mma";
    expect_args(e, name, args, 2, {"acc", "accum"});
    require_uniform_control(e, "tile.mma");
    const ExprInfo a = analyze(*args[0].expr);
    const ExprInfo b = analyze(*args[1].expr);
    for (int k = 0; k < 2; ++k) {
      const ExprInfo& t = k == 0 ? a : b;
      if (t.type.kind != Kind::tile || t.type.sizes.size() != 2)
        fail(*args[static_cast<std::size_t>(k)].expr,
             name + " multiplies 2-D tiles; operand " + (k == 0 ? "a" : "b") + " is " + t.type.str());
    }
    if (a.type.dtype != b.type.dtype)
      fail(e, name + ": the operands have different dtypes (" + std::string(tessera::name(a.type.dtype)) + " and " +
                  std::string(tessera::name(b.type.dtype)) + "); convert one with " +
                  std::string(tessera::name(a.type.dtype)) + "(...)");
    if (a.type.sizes[1] != b.type.sizes[0])
      fail(e, name + ": a is " + sizes_text(a.type.sizes) + " and b is " + sizes_text(b.type.sizes) +
                  ": a's columns must equal b's rows");
    std::vector<std::int64_t> out = {a.type.sizes[0], b.type.sizes[1]};
    DType accum = default_mma_accum(a.type.dtype);
    const Arg* acc = keyword(args, "acc");
    const Arg* accum_kw = keyword(args, "accum");
    if (accum_kw) {
      const ExprInfo& d = analyze(*accum_kw->expr);
      if (d.type.kind != Kind::dtype) fail(*accum_kw->expr, "accum= takes a dtype such as f32");
      accum = d.type.dtype;
    }
    if (acc) {
      const ExprInfo c = analyze(*acc->expr);
      if (c.type.kind != Kind::tile || c.type.sizes != out)
        fail(*acc->expr,
             name + ": acc must be a tile " + sizes_text(out) + " (a's rows by b's columns), got " + c.type.str());
      if (accum_kw && c.type.dtype != accum)
        fail(*accum_kw->expr, name + ": accum=" + std::string(tessera::name(accum)) + " disagrees with acc, which is " +
                                  std::string(tessera::name(c.type.dtype)));
      accum = c.type.dtype;
    }
    ExprInfo i{KType::tile(accum, out), true};
    i.builtin = acc ? "tile.mma" : "tile.mma_fresh";
    return record(e, i);
  }

  const ExprInfo& analyze_zeros(const Expr& e, const std::vector<Arg>& args) {
    const std::string name = "tile.zeros";
    std::size_t positional = 0;
    for (const Arg& a : args) positional += a.keyword.empty();
    if (positional < 1 || positional > 2) fail(e, name + "((M, N), dtype) takes a shape and optionally a dtype");
    expect_args(e, name, args, positional, {"dtype"});
    std::vector<const Expr*> dims;
    if (args[0].expr->kind == ExprKind::tuple) {
      for (const auto& d : args[0].expr->args) dims.push_back(d.get());
    } else {
      dims.push_back(args[0].expr);
    }
    if (dims.empty() || dims.size() > 2) fail(*args[0].expr, name + ": a tile has 1 or 2 dimensions");
    std::vector<std::int64_t> sizes;
    for (const Expr* d : dims) sizes.push_back(const_extent(*d, "a tile extent"));
    DType dtype = DType::fp32;
    const Expr* dt = positional == 2 ? args[1].expr : nullptr;
    if (const Arg* k = keyword(args, "dtype")) {
      if (dt) fail(k->offset, name + ": the dtype is given twice", 5);
      dt = k->expr;
    }
    if (dt) {
      const ExprInfo& d = analyze(*dt);
      if (d.type.kind != Kind::dtype) fail(*dt, name + ": expected a dtype such as f32, got " + d.type.str());
      dtype = d.type.dtype;
    }
    ExprInfo i{KType::tile(dtype, sizes), true};
    i.builtin = name;
    return record(e, i);
  }

  const KernelDecl& decl_;
  const ast::Kernel& kernel_;
  Analysis analysis_;
  std::map<std::string, Var> env_;
  std::map<std::string, std::string> dropped_;  // names defined only in a branch or loop, with why
  std::set<std::string> nonuniform_;
  std::set<std::string> written_;
  std::vector<std::size_t> divergence_;  // offsets of the conditions making control lane-divergent
  std::int64_t shared_total_ = 0;
  bool final_ = false;
};

}  // namespace

Analysis analyze_kernel(const KernelDecl& kernel, const Constants& constants) {
  if (!kernel.ast) raise(ErrorCode::Internal, "kernel '" + kernel.name + "' has no syntax tree");
  return Checker(kernel, constants).run();
}

void check_kernel(const KernelDecl& kernel, const Constants& constants) {
  analyze_kernel(kernel, constants);
}

}  // namespace tessera::frontend
