// Types of kernel expressions: literals (weak, as Python's), arithmetic with
// numpy-style promotion, comparisons, and/or/not, conditional expressions,
// and buffer element access (x[i, j]), with their uniformity.
#include "frontend/sema_checker.h"
#include "tessera/graph/promotion.h"

namespace tessera::frontend::sema_detail {

using ast::Expr;
using ast::ExprKind;
using Kind = KType::Kind;

void Checker::require_bool(const Expr& e, const ExprInfo& info, const std::string& what) const {
  if (!info.type.is_lane() || info.type.dtype != DType::bool_)
    fail(e, what + " must be a bool (a comparison), got " + info.type.str());
}
void Checker::require_int(const Expr& e, const ExprInfo& info, const std::string& what) const {
  if (!info.type.is_lane() || is_float(info.type.dtype) || info.type.dtype == DType::bool_)
    fail(e, what + " must be an integer, got " + info.type.str());
}
void Checker::require_lane(const Expr& e, const ExprInfo& info, const std::string& what) const {
  if (!info.type.is_lane()) fail(e, what + " must be a scalar, got " + info.type.str());
}

ExprInfo& Checker::record(const Expr& e, ExprInfo info) {
  ExprInfo& slot = analysis_.exprs[&e];
  slot = std::move(info);
  return slot;
}

const ExprInfo& Checker::analyze(const Expr& e) {
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
    case ExprKind::logical: return analyze_logical(e);
    case ExprKind::ternary: return analyze_ternary(e);
    case ExprKind::call: return analyze_call(e);
    case ExprKind::attribute: return analyze_attribute(e);
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

const ExprInfo& Checker::analyze_logical(const Expr& e) {
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

const ExprInfo& Checker::analyze_ternary(const Expr& e) {
  const ExprInfo& c = analyze(*e.args[1]);
  require_bool(*e.args[1], c, "the condition of a conditional expression");
  if (!c.uniform) divergence_.push_back(e.args[1]->offset);
  const ExprInfo a = analyze(*e.args[0]);
  const ExprInfo b = analyze(*e.args[2]);
  if (!c.uniform) divergence_.pop_back();
  ExprInfo out;
  if (a.type.is_lane() && b.type.is_lane()) {
    out = binary_promote(e.offset, e.length, a, b);
    out.type.weak = a.type.weak && b.type.weak;
  } else if (a.type.same(b.type) && a.type.kind == Kind::tile) {
    out.type = a.type;
  } else {
    fail(e, "the two values of a conditional expression differ: " + a.type.str() + " and " + b.type.str());
  }
  out.uniform = a.uniform && b.uniform && c.uniform;
  return record(e, out);
}

ExprInfo Checker::binary_promote(std::size_t offset, std::size_t length, const ExprInfo& a, const ExprInfo& b) const {
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
      fail(offset, error.message(), length, error.code());
    }
  }
  ExprInfo i{KType::lane(out, a.type.weak && b.type.weak), a.uniform && b.uniform};
  i.op_dtype = out;
  return i;
}

ExprInfo Checker::binary_result(const std::string& op, const Expr& lhs, const ExprInfo& a, const Expr& rhs,
                                const ExprInfo& b, std::size_t offset, std::size_t length) const {
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
  ExprInfo i = binary_promote(offset, length, a, b);
  DType d = i.op_dtype;
  if (op == "/" && !is_float(d))
    fail(offset, "'/' on integers: use '//' for integer (floor) division, or convert an operand with f32(...)", length);
  if ((op == "//" || op == "%") && is_float(d))
    fail(offset, "'" + op + "' is only defined on integers in kernels; got " + std::string(name(d)), length);
  if (op == "**" && !is_float(d)) fail(offset, "'**' needs floating operands; convert with f32(...)", length);
  if (a.constant && b.constant && !is_float(d)) {
    i.constant = fold_int_op(op, *a.constant, *b.constant);
    if (!i.constant && (op == "//" || op == "%") && *b.constant == 0) fail(offset, "integer division by zero", length);
  }
  return i;
}

const ExprInfo& Checker::analyze_unary(const Expr& e) {
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

const ExprInfo& Checker::analyze_compare(const Expr& e) {
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
    acc = binary_promote(e.offset, e.length, acc, operands[k]);
  }
  i.op_dtype = acc.type.dtype;
  return record(e, i);
}

// x[i], x[i, j] on gmem/smem buffers; returns the element type.
KType Checker::check_element_access(const Expr& e, bool write) {
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
  ExprInfo i{elem, uniform_load(base.type, uniform)};
  i.builtin = "tile.load_elem";
  record(e, i);
  return elem;
}

void Checker::check_writable(const Expr& base_expr, const KType& type) const {
  if (type.kind == Kind::gmem && !type.mut)
    fail(base_expr, "cannot write to parameter '" + type.param + "': it is not declared mut (write '" + type.param +
                        ": mut " + std::string(name(type.dtype)) + "[...]' in a .tsr file, '" + type.param +
                        ": tessera.mut(tessera." + std::string(name(type.dtype)) + "[...])' in Python)");
}
}  // namespace tessera::frontend::sema_detail
