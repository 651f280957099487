// Name resolution in kernels: built-in names, parameters, shape symbols,
// autotune names and variables, with "did you mean" suggestions.
//
// Also the checks that run once per kernel before its body: the given
// specialization only names compile-time parameters the kernel has, and no
// parameter, shape symbol or autotune name shadows another or a built-in.
#include <algorithm>
#include <set>

#include "frontend/sema_checker.h"

namespace tessera::frontend::sema_detail {

using ast::Expr;
using ast::ExprKind;
using ast::StmtKind;
using Kind = KType::Kind;

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
                                                  "tile.transpose",
                                                  "tile.zeros",
                                                  "min",
                                                  "max",
                                                  "abs",
                                                  "sqrt",
                                                  "exp",
                                                  "log"};
// Names that are values or namespaces.
const std::vector<std::string_view> kBuiltinNames = {"tile", "tshared", "cp_async", "grid_groups", "tessera"};

Checker::Checker(const KernelDecl& decl, const Constants& given) : decl_(decl), kernel_(*decl.ast) {
  // Autotune defaults first, then the specialization.
  for (const auto& [name, values] : decl.autotune_space) analysis_.constants[name] = values.front();
  for (const auto& [name, value] : given) {
    if (!is_shape_symbol(name) && !is_autotune_name(name)) {
      std::vector<std::string_view> candidates(decl.shape_symbols.begin(), decl.shape_symbols.end());
      for (const auto& [n, v] : decl.autotune_space) candidates.push_back(n);
      std::string hint = suggest(name, candidates);
      std::string all;
      for (std::string_view c : candidates) all += (all.empty() ? "" : ", ") + std::string(c);
      raise(ErrorCode::ArgumentInvalid,
            "kernel '" + decl.name + "' has no compile-time parameter '" + name + "'" + did_you_mean(hint) +
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

void Checker::check_declaration() {
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
    if (params.count(name) || is_reserved(name) || is_shape_symbol(name))
      raise(ErrorCode::KernelType, "autotune name '" + name + "' is already a parameter, shape symbol or built-in",
            decl_.location);
  }
  const ast::Body& body = kernel_.body;
  if (body.size() == 1 && body[0]->kind == StmtKind::expr && body[0]->value->kind == ExprKind::ellipsis)
    fail(*body[0]->value, "kernel '" + decl_.name + "' has no body ('...'): write its statements");
}

bool Checker::is_reserved(const std::string& name) const {
  DType d;
  if (try_parse_dtype(name, d)) return true;
  for (std::string_view c : kCallables)
    if (c == name) return true;
  for (std::string_view c : kBuiltinNames)
    if (c == name) return true;
  return name == "mut" || name == "kernel" || name == "dict";
}

bool Checker::is_shape_symbol(const std::string& name) const {
  return std::find(decl_.shape_symbols.begin(), decl_.shape_symbols.end(), name) != decl_.shape_symbols.end();
}

bool Checker::is_autotune_name(const std::string& name) const {
  for (const auto& [n, values] : decl_.autotune_space)
    if (n == name) return true;
  return false;
}

std::string Checker::dotted_name(const Expr& e) {
  if (e.kind == ExprKind::name) return e.text;
  if (e.kind == ExprKind::attribute) {
    std::string base = dotted_name(*e.args[0]);
    if (base.empty()) return {};
    std::string attr = e.text == "global_" ? "global" : e.text;  // Python cannot spell `.global`
    return base == "tessera" ? attr : base + "." + attr;
  }
  return {};
}

void Checker::unknown_name(const Expr& e, const std::string& name) const {
  std::vector<std::string_view> candidates;
  std::string root = name.substr(0, name.find('.'));
  bool dotted = name.find('.') != std::string::npos;
  if (dotted && (root == "tile" || root == "tshared" || root == "cp_async")) {
    for (std::string_view c : kCallables)
      if (c.find('.') != std::string_view::npos) candidates.push_back(c);
    std::string hint = suggest(name, candidates);
    fail(e, "unknown built-in '" + name + "'" + did_you_mean(hint));
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
  fail(e, "unknown name '" + root + "'" + did_you_mean(hint));
}

std::string Checker::suggest_callable(const std::string& name) const {
  std::vector<std::string_view> candidates(kCallables.begin(), kCallables.end());
  std::string hint = suggest(name, candidates);
  return hint.empty() ? "" : " (did you mean '" + hint + "'?)";
}

const ExprInfo& Checker::analyze_name_text(const Expr& e, const std::string& name) {
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
  if (is_shape_symbol(name) || is_autotune_name(name)) {
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
  if (try_parse_dtype(name, d)) return record_dtype(e, d);
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

// A name or attribute chain denoting a dtype (f32, tessera.f32): a value of kind dtype.
const ExprInfo& Checker::record_dtype(const Expr& e, DType dtype) {
  KType t;
  t.kind = Kind::dtype;
  t.dtype = dtype;
  return record(e, ExprInfo{t, true});
}

// `a.b.c`: a dtype written tessera.f32, grid_groups, or a misspelled or uncalled built-in.
const ExprInfo& Checker::analyze_attribute(const Expr& e) {
  std::string dotted = dotted_name(e);
  if (dotted.empty()) fail(e, "attributes of values are not supported in kernels");
  std::string root = dotted.substr(0, dotted.find('.'));
  if (env_.count(root)) fail(e, "'" + root + "' has no attribute '" + e.text + "'");
  DType d;
  if (dotted.find('.') == std::string::npos && try_parse_dtype(dotted, d)) return record_dtype(e, d);
  if (dotted == "grid_groups") return analyze_name_text(e, dotted);
  for (std::string_view c : kCallables)
    if (c == dotted) fail(e, "'" + dotted + "' is a function: call it (" + dotted + "(...))");
  unknown_name(e, dotted);
}

void Checker::unknown_keyword(std::size_t offset, const std::string& keyword, const std::string& callee,
                              const std::string& hint) const {
  fail(offset, "unknown keyword '" + keyword + "' for " + callee + did_you_mean(hint), keyword.size());
}

}  // namespace tessera::frontend::sema_detail
