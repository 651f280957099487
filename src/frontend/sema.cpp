// Semantic checks of kernels: the public entry points of sema.h and the
// helpers lowering shares (types, constant folding, dims, accumulator dtypes).
//
// The checker itself (class Checker, sema_checker.h) is spread over the
// sema_*.cpp files, one concern each; analyze_kernel() runs it.
#include "frontend/sema.h"

#include <algorithm>
#include <limits>

#include "frontend/sema_checker.h"

namespace tessera::frontend {

using ast::Expr;
using ast::ExprKind;
using ast::StmtKind;
using Kind = KType::Kind;

bool KType::same(const KType& o) const {
  if (kind != o.kind || dtype != o.dtype) return false;
  if (kind == Kind::tile || kind == Kind::smem) return sizes == o.sizes && swizzle_xor == o.swizzle_xor;
  if (kind == Kind::gmem) return param == o.param;
  return true;
}

std::string sema_detail::sizes_text(const std::vector<std::int64_t>& sizes) {
  std::string out = "[";
  for (std::size_t i = 0; i < sizes.size(); ++i) out += (i ? ", " : "") + std::to_string(sizes[i]);
  return out + "]";
}

std::vector<const Expr*> sema_detail::tuple_items(const Expr& e) {
  std::vector<const Expr*> items;
  if (e.kind == ExprKind::tuple) {
    for (const auto& a : e.args) items.push_back(a.get());
  } else {
    items.push_back(&e);
  }
  return items;
}

std::string KType::str() const {
  using sema_detail::sizes_text;
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
      return fold_int_op(e.text, *a, *b);
    }
    default: return std::nullopt;
  }
}

std::optional<std::int64_t> fold_int_op(const std::string& op, std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (op == "+") {
    if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  } else if (op == "-") {
    if (__builtin_sub_overflow(a, b, &r)) return std::nullopt;
  } else if (op == "*") {
    if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  } else if (op == "//" || op == "%") {
    if (b == 0 || (a == std::numeric_limits<std::int64_t>::min() && b == -1)) return std::nullopt;
    std::int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) --q;  // floor, as Python
    r = op == "//" ? q : a - q * b;
  } else {
    return std::nullopt;
  }
  return r;
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

Analysis analyze_kernel(const KernelDecl& kernel, const Constants& constants) {
  if (!kernel.ast) raise(ErrorCode::Internal, "kernel '" + kernel.name + "' has no syntax tree");
  return sema_detail::Checker(kernel, constants).run();
}

void check_kernel(const KernelDecl& kernel, const Constants& constants) {
  analyze_kernel(kernel, constants);
}

}  // namespace tessera::frontend
