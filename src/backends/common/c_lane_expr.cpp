// Target-neutral pieces of the C-family lane-expression emitters
// (backends/common/c_lane_expr.h).
#include "backends/common/c_lane_expr.h"

#include <algorithm>
#include <map>
#include <set>
#include <variant>

#include "tessera/ir/dialect.h"

namespace tessera::codegen {

std::string short_name(const ir::Operation& op) {
  std::string_view n = op.name();
  return std::string(n.substr(n.find('.') + 1));
}

bool is_lane_value_op(const ir::Operation& op) {
  static const std::set<std::string> ops = {
      "const", "symbol", "linear_id", "group_id", "group_size", "num_groups", "add",       "sub",       "mul", "div",
      "rem",   "min",    "max",       "pow",      "floordiv",   "neg",        "abs",       "exp",       "log", "sqrt", "tanh", "erf", "fma", "ldexp", "frexp_exp", "code", "cos", "sin", "exp_or_nan", "narrow_unary", "philox", "round_stochastic", "check_range", "check_span",
      "cmp",   "and",    "or",        "not",      "select",     "cast",       "load_elem", "reduce_sum"};
  return op.def().dialect() == "tile" && ops.count(short_name(op)) != 0;
}

std::optional<std::int64_t> constant_integer(const ir::Value* v) {
  const ir::Operation* d = v->defining_op();
  if (d == nullptr || d->name() != "tile.const") return std::nullopt;
  const ConstantValue c = constant_value(*d);
  if (c.kind != ConstantValue::Kind::integer) return std::nullopt;
  return c.integer;
}

ConstantValue constant_value(const ir::Operation& op) {
  ConstantValue c;
  c.policy = op.attrs().get_policy("policy");
  const ir::Attribute& v = *op.attrs().find("value");
  const bool is_int_attr = ir::kind_of(v) == ir::AttrKind::integer;
  if (c.policy.storage == DType::bool_) {
    c.kind = ConstantValue::Kind::boolean;
    c.boolean = std::get<bool>(v);
  } else if (!is_float(c.policy.storage)) {
    c.kind = ConstantValue::Kind::integer;
    std::int64_t x = is_int_attr ? std::get<std::int64_t>(v) : static_cast<std::int64_t>(std::get<double>(v));
    const DTypeInfo& inf = info(c.policy.storage);
    if (inf.bits < 64) {
      const std::int64_t lo = inf.is_signed ? -(std::int64_t{1} << (inf.bits - 1)) : 0;
      const std::int64_t hi =
          inf.is_signed ? (std::int64_t{1} << (inf.bits - 1)) - 1 : (std::int64_t{1} << inf.bits) - 1;
      x = std::clamp(x, lo, hi);
    }
    c.integer = x;
  } else {
    c.real = is_int_attr ? static_cast<double>(std::get<std::int64_t>(v)) : std::get<double>(v);
  }
  return c;
}

std::optional<std::string> common_lane_expr(const ir::Operation& op, const std::vector<std::string>& a,
                                            const std::function<std::string(DType)>& dtype_name,
                                            const std::function<std::string()>& fault) {
  const std::string n = short_name(op);
  if (n == "group_id") return "group";
  if (n == "group_size") return "kGroupSize";
  if (n == "cmp") {
    static const std::map<std::string, std::string> preds = {{"lt", "<"},  {"le", "<="}, {"gt", ">"},
                                                             {"ge", ">="}, {"eq", "=="}, {"ne", "!="}};
    auto it = preds.find(op.attrs().get_string("pred"));
    if (it == preds.end()) return std::nullopt;  // the backend names the unknown predicate
    return "(" + a[0] + " " + it->second + " " + a[1] + ")";
  }
  // Both operands are already computed bools: the non-short-circuit forms
  // mean the same and keep lane code free of branches (vectorizable).
  if (n == "and") return "static_cast<bool>(" + a[0] + " & " + a[1] + ")";
  if (n == "or") return "static_cast<bool>(" + a[0] + " | " + a[1] + ")";
  if (n == "not") return "(!" + a[0] + ")";
  if (n == "select") return "(" + a[0] + " ? " + a[1] + " : " + a[2] + ")";
  if (n == "reduce_sum") return "tsr::reduce_sum(" + a[0] + ")";
  if (op.num_results() != 1) return std::nullopt;
  const DType d = op.result(0)->type().dtype();
  if (is_float(d)) {
    // Negation is exact in every signed float format.
    if (n == "neg") return "(-" + a[0] + ")";
    return std::nullopt;
  }
  const std::string dt = dtype_name(d);
  // `nowrap`: the producer promises the result is in range (lane_ops.cpp).
  if (const ir::Attribute* nowrap = op.attrs().find("nowrap"); nowrap && std::get<bool>(*nowrap)) {
    if (n == "add") return "(" + a[0] + " + " + a[1] + ")";
    if (n == "sub") return "(" + a[0] + " - " + a[1] + ")";
    if (n == "mul") return "(" + a[0] + " * " + a[1] + ")";
  }
  // A quotient or remainder by a positive constant cannot fault or
  // overflow: plain C arithmetic (whose truncation the helpers share), which
  // a compiler turns into shifts and multiplications (index math: an FFT
  // pass's stride arithmetic).
  if ((n == "div" || n == "rem") && constant_integer(op.operand(1)).value_or(0) > 0) {
    return "(" + a[0] + (n == "div" ? " / " : " % ") + a[1] + ")";
  }
  if (n == "add") return "tsr::iadd<" + dt + ">(" + a[0] + ", " + a[1] + ")";
  if (n == "sub") return "tsr::isub<" + dt + ">(" + a[0] + ", " + a[1] + ")";
  if (n == "mul") return "tsr::imul<" + dt + ">(" + a[0] + ", " + a[1] + ")";
  if (n == "div") return "tsr::idiv<" + dt + ">(" + a[0] + ", " + a[1] + ", " + fault() + ")";
  if (n == "floordiv") return "tsr::ifloordiv<" + dt + ">(" + a[0] + ", " + a[1] + ", " + fault() + ")";
  if (n == "rem") return "tsr::irem(" + a[0] + ", " + a[1] + ", " + fault() + ")";
  if (n == "pow") return "tsr::ipow<" + dt + ">(" + a[0] + ", " + a[1] + ", " + fault() + ")";
  if (n == "neg") return "tsr::isub<" + dt + ">(0, " + a[0] + ")";
  if (n == "abs") return "(" + a[0] + " < 0 ? tsr::isub<" + dt + ">(0, " + a[0] + ") : " + a[0] + ")";
  return std::nullopt;
}

}  // namespace tessera::codegen
