// The C++ text of individual Tile IR ops for the CPU emitter.
//
// Lane arithmetic follows the contract's numerics (docs/design/0003-tile-ir.md,
// execution model 7): an op on lane<T> computes in double and rounds once to
// T through tsr::round_to (numerics.h). fp64, and fp32 with the default
// overflow rule, use native arithmetic instead, which is the same correctly
// rounded IEEE operation and vectorizes; transcendental functions are always
// evaluated in double first, as the reference executor does.
#include "backends/cpu/emit_ops.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <set>

#include "backends/cpu/emitter.h"
#include "tessera/ir/dialect.h"
#include "tessera/numerics/convert.h"
#include "tessera/support/error.h"

namespace tessera::cpu::detail {

namespace {

[[noreturn]] void unsupported(const ir::Operation& op, const std::string& what) {
  raise(ErrorCode::Compile, "CPU backend: " + what + " (op '" + std::string(op.name()) + "')", op.location());
}

using codegen::short_name;

// fp64, and fp32 overflowing to infinity, compute natively.
bool native_float(const NumericsPolicy& p) {
  return p.storage == DType::fp64 ||
         (p.storage == DType::fp32 && p.overflow == Overflow::inf_nan && p.rounding == Rounding::nearest_even);
}

std::string as_double(const std::string& e) {
  return "static_cast<double>(" + e + ")";
}

std::string rounded(const NumericsPolicy& p, const std::string& double_expr) {
  if (p.storage == DType::fp64) return double_expr;
  return "tsr::round_to<" + cpp_dtype(p.storage) + ">(" + double_expr + cpp_rounding_args(p) + ")";
}

std::string where(const ir::Operation& op, const LaneContext& ctx) {
  std::string w = "kernel '" + ctx.kernel_name + "' op " + std::string(op.name());
  if (op.location().valid()) w += " at " + op.location().prefix();
  return cpp_string_literal(w);
}

std::string index_list(const std::vector<std::string>& args, std::size_t first, std::size_t last) {
  std::string s = "{";
  for (std::size_t i = first; i < last; ++i)
    s += (i > first ? ", " : "") + ("static_cast<std::int64_t>(" + args[i] + ")");
  return s + "}";
}

// Float arithmetic and integer min/max (the rest: codegen::common_lane_expr).
std::string binary(const ir::Operation& op, const std::string& n, const std::vector<std::string>& a) {
  const NumericsPolicy& p = op.result(0)->type().policy;
  const DType d = p.storage;
  if (is_float(d)) {
    static const std::map<std::string, std::string> infix = {{"add", "+"}, {"sub", "-"}, {"mul", "*"}, {"div", "/"}};
    if (auto it = infix.find(n); it != infix.end()) {
      if (native_float(p)) return "(" + a[0] + " " + it->second + " " + a[1] + ")";
      return rounded(p, "(" + as_double(a[0]) + " " + it->second + " " + as_double(a[1]) + ")");
    }
    if (n == "rem") return rounded(p, "std::fmod(" + as_double(a[0]) + ", " + as_double(a[1]) + ")");
    if (n == "pow") return rounded(p, "std::pow(" + as_double(a[0]) + ", " + as_double(a[1]) + ")");
    // min/max pick an operand (or NaN): exact in every format.
    if (n == "min" || n == "max") {
      return "static_cast<" + cpp_value_type(d) + ">(tsr::nan_" + n + "(" + as_double(a[0]) + ", " + as_double(a[1]) +
             "))";
    }
    unsupported(op, "floating-point '" + n + "' is not defined");
  }
  if (n == "min") return "std::min<std::int64_t>(" + a[0] + ", " + a[1] + ")";
  if (n == "max") return "std::max<std::int64_t>(" + a[0] + ", " + a[1] + ")";
  unsupported(op, "integer '" + n + "' is not defined");
}

std::string unary(const ir::Operation& op, const std::string& n, const std::string& x) {
  const NumericsPolicy& p = op.result(0)->type().policy;
  const DType d = p.storage;
  // Integer neg/abs and float neg are codegen::common_lane_expr's.
  if (!is_float(d)) unsupported(op, "'" + n + "' needs a floating-point operand");
  // The absolute value is exact in every signed float format.
  if (n == "abs") return "std::fabs(" + x + ")";
  // exp, log, tanh, erf, sin and cos are Tessera's own
  // (tessera/numerics/elementary.h, trigonometric.h), the reference's and the
  // CUDA kernels' too; sqrt is correctly rounded anyway.
  if (n == "exp" || n == "log" || n == "tanh" || n == "erf" || n == "sin" || n == "cos") {
    return rounded(p, "tessera::elementary::" + n + "(" + as_double(x) + ")");
  }
  if (n == "sqrt") return rounded(p, "std::sqrt(" + as_double(x) + ")");
  if (n == "exp_or_nan") return "tessera::elementary::exp_f32_or_nan(" + x + ")";
  unsupported(op, "unknown unary op");
}

std::string constant(const ir::Operation& op) {
  const codegen::ConstantValue c = codegen::constant_value(op);
  switch (c.kind) {
    case codegen::ConstantValue::Kind::boolean: return c.boolean ? "true" : "false";
    case codegen::ConstantValue::Kind::integer: return cpp_int_literal(c.integer);
    case codegen::ConstantValue::Kind::real: break;
  }
  return cpp_literal(c.real, c.policy.storage, c.policy.overflow, c.policy.rounding);
}

// A load_elem marked in_bounds whose index is a tile.check_span of the same
// buffer, or that plus a constant below the span's count: the check before
// it proved the index in range (templates' other in_bounds proofs stay
// checked on the CPU, which then catches a broken one).
bool covered_by_span_check(const ir::Operation& load) {
  const ir::Attribute* proven = load.attrs().find("in_bounds");
  if (proven == nullptr || !std::get<bool>(*proven) || load.num_operands() != 2) return false;
  const ir::Value* index = load.operand(1);
  std::int64_t offset = 0;
  const ir::Operation* d = index->defining_op();
  if (d != nullptr && d->name() == "tile.add") {
    for (int k = 0; k < 2; ++k) {
      std::optional<std::int64_t> c = codegen::constant_integer(d->operand(1 - k));
      const ir::Operation* span = d->operand(k)->defining_op();
      if (c && span != nullptr && span->name() == "tile.check_span") {
        offset = *c;
        d = span;
        break;
      }
    }
  }
  return d != nullptr && d->name() == "tile.check_span" && d->operand(0) == load.operand(0) && offset >= 0 &&
         offset < d->attrs().get_int("count");
}

// tile.tile_reduce {fn = max, axis = 1} in line: the runtime's
// tile_reduce takes each row's max in index order through nan_max, one
// dependent compare-and-select per element, which was a quarter of the
// CPU's blocked attention forward. Here eight running maxima vectorize;
// the bits stay the sequential form's: NaN if any element is NaN, else
// the largest value, and where that is zero the last zero of the row (a
// tie takes the later element, so +0 or -0 is order-dependent). Written in
// line rather than in the runtime headers, whose hash keys every cached
// kernel.
std::string row_max(const ir::Operation& op, const std::string& result, const std::string& x, std::int64_t row_count,
                    std::int64_t col_count) {
  const ir::Type& t = op.operand(0)->type();
  const std::string rows = std::to_string(row_count), cols = std::to_string(col_count);
  const std::string T = "tsr::value_t<" + cpp_dtype(t.dtype()) + ">";
  return "tsr::Tile<" + cpp_dtype(t.dtype()) + ", " + rows + ", 1> " + result + ";\n"
         "  for (int r_ = 0; r_ < " + rows + "; ++r_) {\n"
         "    const " + T + "* row_ = " + x + ".v()[r_];\n"
         "    " + T + " m8_[8];\n"
         "    bool nan_ = false;\n"
         "    for (int l_ = 0; l_ < 8; ++l_) m8_[l_] = -std::numeric_limits<" + T + ">::infinity();\n"
         "    int c_ = 0;\n"
         "    for (; c_ + 8 <= " + cols + "; c_ += 8) {\n"
         "      for (int l_ = 0; l_ < 8; ++l_) {\n"
         "        const " + T + " v_ = row_[c_ + l_];\n"
         "        nan_ |= v_ != v_;\n"
         "        m8_[l_] = v_ > m8_[l_] ? v_ : m8_[l_];\n"
         "      }\n"
         "    }\n"
         "    for (; c_ < " + cols + "; ++c_) {\n"
         "      nan_ |= row_[c_] != row_[c_];\n"
         "      m8_[0] = row_[c_] > m8_[0] ? row_[c_] : m8_[0];\n"
         "    }\n"
         "    " + T + " m_ = m8_[0];\n"
         "    for (int l_ = 1; l_ < 8; ++l_) m_ = m8_[l_] > m_ ? m8_[l_] : m_;\n"
         "    if (nan_) {\n"
         "      m_ = std::numeric_limits<" + T + ">::quiet_NaN();\n"
         "    } else if (m_ == 0) {\n"
         "      for (int k_ = " + cols + " - 1; k_ >= 0; --k_) {\n"
         "        if (row_[k_] == 0) {\n"
         "          m_ = row_[k_];\n"
         "          break;\n"
         "        }\n"
         "      }\n"
         "    }\n"
         "    " + result + ".v()[r_][0] = m_;\n"
         "  }";
}

}  // namespace

std::string cpp_dtype(DType dtype) {
  return "DType::" + std::string(name(dtype) == "bool" ? "bool_" : name(dtype));
}

std::string cpp_value_type(DType dtype) {
  if (dtype == DType::fp64) return "double";
  if (dtype == DType::bool_) return "bool";
  if (is_float(dtype)) return "float";
  return "std::int64_t";
}

std::string cpp_overflow(Overflow overflow) {
  return overflow == Overflow::saturate ? "Overflow::saturate" : "Overflow::inf_nan";
}

std::string cpp_int_literal(std::int64_t value) {
  if (value == std::numeric_limits<std::int64_t>::min()) return "std::numeric_limits<std::int64_t>::min()";
  return "std::int64_t{" + std::to_string(value) + "}";
}

std::string cpp_literal(double value, DType dtype, Overflow overflow, Rounding rounding) {
  if (rounding == Rounding::stochastic) rounding = Rounding::nearest_even;  // a constant has no element index
  if (dtype == DType::bool_) return value != 0.0 ? "true" : "false";
  if (!is_float(dtype)) {
    EncodeOptions o;
    o.rounding = rounding;
    return cpp_int_literal(static_cast<std::int64_t>(decode_value(encode_value(value, dtype, o), dtype)));
  }
  double r = value;
  if (dtype != DType::fp64) {
    EncodeOptions o;
    o.overflow = overflow;
    o.rounding = rounding;
    r = decode_value(encode_value(value, dtype, o), dtype);
  }
  const std::string t = dtype == DType::fp64 ? "double" : "float";
  if (std::isnan(r)) return "std::numeric_limits<" + t + ">::quiet_NaN()";
  if (std::isinf(r)) return std::string(r < 0 ? "-" : "") + "std::numeric_limits<" + t + ">::infinity()";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", r);  // hexadecimal: exact
  return "static_cast<" + t + ">(" + std::string(buf) + ")";
}

std::string cpp_string_literal(const std::string& text) {
  std::string s = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      s += '\\';
      s += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      s += ' ';
    } else {
      s += c;
    }
  }
  return s + "\"";
}

void require_supported_policy(const NumericsPolicy& policy, const std::string& what) {
  if (policy.rounding == Rounding::stochastic) {
    raise(ErrorCode::Compile, "CPU backend: " + what +
                                  " uses rounding 'stochastic', which needs each element's index; round with "
                                  "tile.round_stochastic instead");
  }
}

std::string cpp_rounding_args(const NumericsPolicy& p) {
  std::string s = ", " + cpp_overflow(p.overflow);
  if (p.rounding == Rounding::toward_zero) s += ", tessera::Rounding::toward_zero";
  return s;
}

std::string cpp_type(const ir::Type& type, const std::function<std::int64_t(const ir::Dim&)>& resolve) {
  const std::string d = cpp_dtype(type.dtype());
  switch (type.kind) {
    case ir::TypeKind::lane: return cpp_value_type(type.dtype());
    case ir::TypeKind::tile: {
      const std::int64_t rows = type.rank() == 2 ? resolve(type.shape[0]) : 1;
      const std::int64_t cols = resolve(type.shape.back());
      return "tsr::Tile<" + d + ", " + std::to_string(rows) + ", " + std::to_string(cols) + ">";
    }
    case ir::TypeKind::smem:
    case ir::TypeKind::gmem: return "tsr::View<" + d + ", " + std::to_string(type.rank()) + ">";
    case ir::TypeKind::tensor: break;
  }
  raise(ErrorCode::Compile, "CPU backend: kernels take no tensor values, got " + ir::print_type(type));
}

std::string lane_expr(const ir::Operation& op, const std::vector<std::string>& a, const LaneContext& ctx) {
  const std::string n = short_name(op);
  if (n == "const") return constant(op);
  if (n == "symbol") return ctx.symbol(op.attrs().get_string("name"));
  if (n == "linear_id") return ctx.linear_id;
  if (n == "num_groups") return "args.grid";
  if (ctx.bounds && ctx.bounds->plain(op)) return "(" + a[0] + (n == "add" ? " + " : " * ") + a[1] + ")";
  if (auto e = codegen::common_lane_expr(op, a, cpp_dtype, [&] { return where(op, ctx); })) return *e;
  if (n == "neg" || n == "abs" || n == "exp" || n == "log" || n == "sqrt" || n == "tanh" || n == "erf" ||
      n == "cos" || n == "sin" || n == "exp_or_nan")
    return unary(op, n, a[0]);
  if (n == "philox") {
    return "static_cast<std::int64_t>(tessera::random_bits32(static_cast<std::uint64_t>(" +
           cpp_int_literal(op.attrs().get_int("seed")) + "), static_cast<std::uint64_t>(" + a[0] + ")))";
  }
  if (n == "fma") {
    const NumericsPolicy& p = op.result(0)->type().policy;
    if (native_float(p)) return "std::fma(" + a[0] + ", " + a[1] + ", " + a[2] + ")";
    return rounded(p, "std::fma(" + as_double(a[0]) + ", " + as_double(a[1]) + ", " + as_double(a[2]) + ")");
  }
  if (n == "ldexp") {
    const NumericsPolicy& p = op.result(0)->type().policy;
    if (native_float(p)) return "tsr::scale_pow2(" + a[0] + ", " + a[1] + ")";
    return rounded(p, "tsr::scale_pow2(" + as_double(a[0]) + ", " + a[1] + ")");
  }
  if (n == "frexp_exp") return "tsr::frexp_exponent(" + as_double(a[0]) + ")";
  if (n == "code") return "tsr::storage_code<" + cpp_dtype(op.operand(0)->type().dtype()) + ">(" + a[0] + ")";
  if (n == "check_range") {
    return "tsr::check_range(" + a[0] + ", " + cpp_int_literal(op.attrs().get_int("lo")) + ", " +
           cpp_int_literal(op.attrs().get_int("hi")) + ", " + cpp_string_literal(op.attrs().get_string("what")) + ")";
  }
  if (n == "round_stochastic") {
    const NumericsPolicy& to = op.attrs().get_policy("to");
    return "tsr::round_stochastic<" + cpp_dtype(to.storage) + ">(" + as_double(a[0]) + ", static_cast<std::uint64_t>(" +
           cpp_int_literal(op.attrs().get_int("seed")) + "), " + a[1] + ", " + cpp_overflow(to.overflow) + ")";
  }
  if (n == "cmp") unsupported(op, "unknown predicate '" + op.attrs().get_string("pred") + "'");
  if (n == "cast") {
    const NumericsPolicy& to = op.attrs().get_policy("to");
    require_supported_policy(to, "tile.cast");
    return "tsr::convert<" + cpp_dtype(to.storage) + ", " + cpp_dtype(op.operand(0)->type().dtype()) + ">(" + a[0] +
           cpp_rounding_args(to) + ")";
  }
  if (n == "check_span") {
    return "tsr::check_span(" + a[0] + ", " + a[1] + ", " + cpp_int_literal(op.attrs().get_int("count")) + ")";
  }
  if (n == "load_elem") {
    if (ctx.access == Access::masked) return "tsr::load_m(" + a[0] + ", " + index_list(a, 1, a.size()) + ", lane_ok)";
    if (ctx.access == Access::unchecked || covered_by_span_check(op)) {
      return "tsr::load_u(" + a[0] + ", " + index_list(a, 1, a.size()) + ")";
    }
    return "tsr::load(" + a[0] + ", " + index_list(a, 1, a.size()) + ")";
  }
  return binary(op, n, a);
}

std::string store_stmt(const ir::Operation& op, const std::vector<std::string>& a, Access access) {
  const DType value_dtype = op.operand(op.num_operands() - 1)->type().dtype();
  const std::string idx = index_list(a, 1, a.size() - 1);
  if (access == Access::unchecked) {
    const ir::Type& buf = op.operand(0)->type();
    const Overflow o = buf.is_gmem() ? buf.policy.overflow : Overflow::inf_nan;
    return "tsr::store_u<" + cpp_dtype(value_dtype) + ", " + cpp_overflow(o) + ">(" + a[0] + ", " + idx + ", " +
           a.back() + ");";
  }
  if (access == Access::masked) {
    // The view's overflow mode as a constant (smem views always use inf_nan).
    const ir::Type& buf = op.operand(0)->type();
    const Overflow o = buf.is_gmem() ? buf.policy.overflow : Overflow::inf_nan;
    return "tsr::store_m<" + cpp_dtype(value_dtype) + ", " + cpp_overflow(o) + ">(" + a[0] + ", " + idx + ", " +
           a.back() + ", lane_ok);";
  }
  const std::string fn = access == Access::dry ? "tsr::store_dry<" : "tsr::store<";
  return fn + cpp_dtype(value_dtype) + ">(" + a[0] + ", " + idx + ", " + a.back() + ");";
}

bool maskable_lane_op(const ir::Operation& op) {
  const std::string n = short_name(op);
  if (op.def().dialect() != "tile") return false;
  if (n == "if") {
    for (std::size_t r = 0; r < op.num_regions(); ++r)
      for (const auto& inner : op.region(r).block().ops())
        if (!maskable_lane_op(*inner)) return false;
    return true;
  }
  if (n == "yield" || n == "store_elem" || n == "prefetch") return true;
  // Loops could run unbounded on a masked value (and tile.for checks its
  // step); reduce_sum allocates; integer division, remainder and power fault.
  if (op.num_regions() != 0 || n == "reduce_sum" || n == "check_range" || n == "check_span") return false;
  if (!is_lane_value_op(op)) return false;
  if (op.num_results() == 1 && !is_float(op.result(0)->type().dtype())) {
    if (n == "div" || n == "floordiv" || n == "rem" || n == "pow") return false;
  }
  return true;
}

std::string group_stmt(const ir::Operation& op, const std::vector<std::string>& a, const std::string& result,
                       const std::function<std::int64_t(const ir::Dim&)>& resolve) {
  const std::string n = short_name(op);
  auto tile_dims = [&](const ir::Type& t) {
    const std::int64_t rows = t.rank() == 2 ? resolve(t.shape[0]) : 1;
    return std::to_string(rows) + ", " + std::to_string(resolve(t.shape.back()));
  };
  if (n == "tile_load") {
    const ir::Type& t = op.result(0)->type();
    std::string offsets;
    for (std::size_t i = 1; i < a.size(); ++i) offsets += ", " + a[i];
    return "auto " + result + " = tsr::tile_load<" + cpp_dtype(t.dtype()) + ", " + tile_dims(t) + ">(" + a[0] +
           offsets + ");";
  }
  if (n == "tile_store") {
    std::string s = "tsr::tile_store(" + a[0];
    for (std::size_t i = 1; i < a.size(); ++i) s += ", " + a[i];
    return s + ");";
  }
  if (n == "zeros") {
    const ir::Type& t = op.result(0)->type();
    return "auto " + result + " = tsr::zeros<" + cpp_dtype(t.dtype()) + ", " + tile_dims(t) + ">();";
  }
  if (n == "mma") return "auto " + result + " = tsr::mma(" + a[0] + ", " + a[1] + ", " + a[2] + ");";
  if (n == "tile_add") return "auto " + result + " = tsr::tile_add(" + a[0] + ", " + a[1] + ");";
  if (n == "tile_cast") {
    const NumericsPolicy& to = op.attrs().get_policy("to");
    require_supported_policy(to, "tile.tile_cast");
    return "auto " + result + " = tsr::tile_cast<" + cpp_dtype(to.storage) + ">(" + a[0] + cpp_rounding_args(to) +
           ");";
  }
  if (n == "tile_full" || n == "tile_causal_fill") {
    const ir::Type& t = op.result(0)->type();
    const std::string v = cpp_literal(op.attrs().get_real("value"), t.dtype(), Overflow::inf_nan, Rounding::nearest_even);
    if (n == "tile_full") {
      return "auto " + result + " = tsr::tile_full<" + cpp_dtype(t.dtype()) + ", " + tile_dims(t) + ">(" + v + ");";
    }
    if (op.attrs().has("rows") && !op.attrs().get_bool("rows")) {
      // Without the row: columns col0 + c > row0 + diag. Written in line
      // rather than in the runtime headers, whose hash keys every cached
      // kernel.
      const std::string rows = std::to_string(t.shape.at(0).size), cols = std::to_string(t.shape.at(1).size);
      return "auto " + result + " = " + a[0] + ";\n  for (int c_ = 0; c_ < " + cols + "; ++c_) {\n    if (" + a[2] +
             " + c_ > " + a[1] + " + " + a[3] + ") {\n      for (int r_ = 0; r_ < " + rows + "; ++r_) " + result +
             ".v()[r_][c_] = " + v + ";\n    }\n  }";
    }
    return "auto " + result + " = tsr::tile_causal_fill(" + a[0] + ", " + a[1] + ", " + a[2] + ", " + a[3] + ", " + v +
           ");";
  }
  if (n == "tile_binary" || n == "tile_unary" || n == "tile_reduce") {
    const std::string fn = "tsr::TileFn::" + op.attrs().get_string("fn");
    if (n == "tile_binary") return "auto " + result + " = tsr::tile_binary<" + fn + ">(" + a[0] + ", " + a[1] + ");";
    if (n == "tile_unary") return "auto " + result + " = tsr::tile_unary<" + fn + ">(" + a[0] + ");";
    const ir::Type& x = op.operand(0)->type();
    if (op.attrs().get_string("fn") == "max" && op.attrs().get_int("axis") == 1 && x.rank() == 2) {
      return row_max(op, result, a[0], resolve(x.shape[0]), resolve(x.shape[1]));
    }
    return "auto " + result + " = tsr::tile_reduce<" + fn + ", " + std::to_string(op.attrs().get_int("axis")) + ">(" +
           a[0] + ");";
  }
  if (n == "transpose") return "auto " + result + " = tsr::transpose(" + a[0] + ");";
  if (n == "cp_async") {
    const ir::Type& dst = op.operand(0)->type();
    if (dst.rank() > 2) unsupported(op, "cp_async copies 1-D or 2-D boxes");
    return "tsr::cp_async(" + a[0] + ", " + a[1] + ", " + index_list(a, 2, a.size()) + ");";
  }
  if (n == "cp_async_wait") {
    return "// tile.cp_async_wait {pending = " + std::to_string(op.attrs().get_int("pending")) +
           "}: host copies complete when issued";
  }
  if (n == "mma_wait") {
    return "// tile.mma_wait {pending = " + std::to_string(op.attrs().get_int("pending")) +
           "}: host mmas complete when issued";
  }
  if (n == "barrier") return "// tile.barrier: every tile has finished the code above";
  unsupported(op, "the op is not supported at group level");
}

}  // namespace tessera::cpu::detail
