// The CUDA C++ text of lane ops (one expression per op) for the CUDA emitter.
//
// Numerics follow the contract (docs/design/0003-tile-ir.md, execution model
// 7) exactly as the CPU backend does: fp32 (overflow to infinity) and fp64
// use the correctly rounded __fadd_rn / __dadd_rn ... intrinsics; narrower
// formats compute in double and round once through tsr::round_to;
// transcendental functions are evaluated in double and rounded once.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <set>

#include "backends/cuda/codegen/emitter.h"
#include "tessera/ir/dialect.h"
#include "tessera/numerics/convert.h"
#include "tessera/support/error.h"

namespace tessera::cuda::detail {
namespace {

[[noreturn]] void unsupported(const ir::Operation& op, const std::string& what) {
  raise(ErrorCode::Compile, "CUDA backend: " + what + " (op '" + std::string(op.name()) + "')", op.location());
}

using codegen::short_name;

bool native_f32(const NumericsPolicy& p) {
  return p.storage == DType::fp32 && p.overflow == Overflow::inf_nan && p.rounding == Rounding::nearest_even;
}

std::string as_double(const std::string& e) {
  return "(double)(" + e + ")";
}

std::string rounded(const NumericsPolicy& p, const std::string& double_expr) {
  if (p.storage == DType::fp64) return double_expr;
  return "tsr::round_to<" + cu_dtype(p.storage) + ">(" + double_expr + cu_rounding_args(p) + ")";
}

// Float arithmetic and integer min/max (the rest: codegen::common_lane_expr).
std::string binary(const ir::Operation& op, const std::string& n, const std::vector<std::string>& a) {
  const NumericsPolicy& p = op.result(0)->type().policy;
  const DType d = p.storage;
  if (is_float(d)) {
    static const std::map<std::string, std::string> rn = {
        {"add", "add"}, {"sub", "sub"}, {"mul", "mul"}, {"div", "div"}};
    if (auto it = rn.find(n); it != rn.end()) {
      if (native_f32(p)) return "__f" + it->second + "_rn(" + a[0] + ", " + a[1] + ")";
      const std::string dbl = "__d" + it->second + "_rn(" + as_double(a[0]) + ", " + as_double(a[1]) + ")";
      return rounded(p, dbl);
    }
    if (n == "rem") return rounded(p, "fmod(" + as_double(a[0]) + ", " + as_double(a[1]) + ")");
    if (n == "pow") return rounded(p, "pow(" + as_double(a[0]) + ", " + as_double(a[1]) + ")");
    if (n == "min" || n == "max") {
      return "(" + cu_value_type(d) + ")tsr::nan_" + n + "(" + as_double(a[0]) + ", " + as_double(a[1]) + ")";
    }
    unsupported(op, "floating-point '" + n + "' is not defined");
  }
  if (n == "min") return "(" + a[0] + " < " + a[1] + " ? " + a[0] + " : " + a[1] + ")";
  if (n == "max") return "(" + a[0] + " > " + a[1] + " ? " + a[0] + " : " + a[1] + ")";
  unsupported(op, "integer '" + n + "' is not defined");
}

std::string unary(const ir::Operation& op, const std::string& n, const std::string& x) {
  const NumericsPolicy& p = op.result(0)->type().policy;
  const DType d = p.storage;
  // Integer neg/abs and float neg are codegen::common_lane_expr's.
  if (!is_float(d)) unsupported(op, "'" + n + "' needs a floating-point operand");
  if (n == "abs") return d == DType::fp64 ? "fabs(" + x + ")" : "fabsf(" + x + ")";
  // An fp32 square root correctly rounded in fp32 has the bits of the fp64
  // root rounded to fp32 (53 >= 2 * 24 + 2), as + - * / above.
  if (n == "sqrt" && native_f32(p)) return "__fsqrt_rn(" + x + ")";
  if (n == "sqrt") return rounded(p, "__dsqrt_rn(" + as_double(x) + ")");
  // exp, log, tanh, erf, sin and cos are Tessera's own
  // (tessera/numerics/elementary.h, trigonometric.h), the same code as the
  // reference's and the CPU kernels', so the same bits.
  if (n == "exp" || n == "log" || n == "tanh" || n == "erf" || n == "sin" || n == "cos") {
    return rounded(p, "tessera::elementary::" + n + "(" + as_double(x) + ")");
  }
  if (n == "exp_or_nan") return "tessera::elementary::exp_f32_or_nan(" + x + ")";
  unsupported(op, "unknown unary op");
}

std::string constant(const ir::Operation& op) {
  const codegen::ConstantValue c = codegen::constant_value(op);
  switch (c.kind) {
    case codegen::ConstantValue::Kind::boolean: return c.boolean ? "true" : "false";
    case codegen::ConstantValue::Kind::integer: return cu_int_literal(c.integer);
    case codegen::ConstantValue::Kind::real: break;
  }
  return cu_literal(c.real, c.policy.storage, c.policy.overflow, c.policy.rounding);
}

std::string index_list(const std::vector<std::string>& args, std::size_t first, std::size_t last) {
  std::string s = "{";
  for (std::size_t i = first; i < last; ++i) s += (i > first ? ", " : "") + ("(tsr::i64)(" + args[i] + ")");
  return s + "}";
}

}  // namespace

std::string cu_dtype(DType dtype) {
  static const char* names[] = {"kFp64",    "kFp32",    "kFp16",    "kBf16",  "kFp8E4m3", "kFp8E5m2",
                                "kFp6E2m3", "kFp6E3m2", "kFp4E2m1", "kE8m0",  "kInt4",    "kInt8",
                                "kInt16",   "kInt32",   "kInt64",   "kUint8", "kBool"};
  return std::string("tsr::") + names[static_cast<int>(dtype)];
}

std::string cu_value_type(DType dtype) {
  if (dtype == DType::fp64) return "double";
  if (dtype == DType::bool_) return "bool";
  if (is_float(dtype)) return "float";
  return "tsr::i64";
}

std::string cu_overflow(Overflow overflow) {
  return overflow == Overflow::saturate ? "tsr::kSaturate" : "tsr::kInfNan";
}

std::string cu_int_literal(std::int64_t value) {
  if (value == std::numeric_limits<std::int64_t>::min()) return "((tsr::i64)(1ull << 63))";
  return "((tsr::i64)" + std::to_string(value) + "ll)";
}

std::string cu_rounding_args(const NumericsPolicy& p) {
  std::string s = ", " + cu_overflow(p.overflow);
  if (p.rounding == Rounding::toward_zero) s += ", tsr::kTowardZero";
  return s;
}

std::string cu_literal(double value, DType dtype, Overflow overflow, Rounding rounding) {
  if (rounding == Rounding::stochastic) rounding = Rounding::nearest_even;  // a constant has no element index
  if (dtype == DType::bool_) return value != 0.0 ? "true" : "false";
  EncodeOptions o;
  o.rounding = rounding;
  if (!is_float(dtype)) {
    return cu_int_literal(static_cast<std::int64_t>(decode_value(encode_value(value, dtype, o), dtype)));
  }
  double r = value;
  if (dtype != DType::fp64) {
    o.overflow = overflow;
    r = decode_value(encode_value(value, dtype, o), dtype);
    const float f = static_cast<float>(r);
    std::uint32_t bits = 0;
    std::memcpy(&bits, &f, 4);
    char buf[64];
    std::snprintf(buf, sizeof buf, "__uint_as_float(0x%08xu)", bits);  // exact, NaN and infinity too
    return buf;
  }
  std::uint64_t bits = 0;
  std::memcpy(&bits, &r, 8);
  char buf[64];
  std::snprintf(buf, sizeof buf, "__longlong_as_double(0x%016llxll)", static_cast<unsigned long long>(bits));
  return buf;
}

std::string lane_expr(const ir::Operation& op, const std::vector<std::string>& a, const LaneContext& ctx) {
  const std::string n = short_name(op);
  if (n == "const") return constant(op);
  if (n == "symbol") return ctx.symbol(op.attrs().get_string("name"));
  if (n == "linear_id") return ctx.linear_id;
  if (n == "num_groups") return "p.grid";
  if (ctx.bounds && ctx.bounds->plain(op)) return "(" + a[0] + (n == "add" ? " + " : " * ") + a[1] + ")";
  if (auto e = codegen::common_lane_expr(op, a, cu_dtype, [] { return std::string("W"); })) return *e;
  if (n == "neg" || n == "abs" || n == "exp" || n == "log" || n == "sqrt" || n == "tanh" || n == "erf" ||
      n == "cos" || n == "sin" || n == "exp_or_nan")
    return unary(op, n, a[0]);
  if (n == "philox") {
    return "(tsr::i64)tsr::random_bits32((tsr::u64)" + cu_int_literal(op.attrs().get_int("seed")) + ", (tsr::u64)(" +
           a[0] + "))";
  }
  if (n == "fma") {
    const NumericsPolicy& p = op.result(0)->type().policy;
    if (p.storage == DType::fp64) return "fma(" + a[0] + ", " + a[1] + ", " + a[2] + ")";
    if (native_f32(p)) return "fmaf(" + a[0] + ", " + a[1] + ", " + a[2] + ")";
    return rounded(p, "fma(" + as_double(a[0]) + ", " + as_double(a[1]) + ", " + as_double(a[2]) + ")");
  }
  if (n == "ldexp") {
    const NumericsPolicy& p = op.result(0)->type().policy;
    const std::string e = "tsr::clamp_exponent(" + a[1] + ")";
    // 2^e (a power-of-two factor, the normalizations' scalings): its bits
    // directly, where ldexp scales by repeated multiplies.
    const ir::Operation* m = op.operand(0)->defining_op();
    if (p.storage == DType::fp64 && m && m->name() == "tile.const") {
      const codegen::ConstantValue c = codegen::constant_value(*m);
      if (c.kind == codegen::ConstantValue::Kind::real && c.real == 1.0) return "tsr::pow2_f64(" + a[1] + ")";
    }
    if (p.storage == DType::fp64) return "tsr::ldexp_f64(" + a[0] + ", " + a[1] + ")";
    if (native_f32(p)) return "ldexpf(" + a[0] + ", " + e + ")";
    return rounded(p, "tsr::ldexp_f64(" + as_double(a[0]) + ", " + a[1] + ")");
  }
  if (n == "frexp_exp") return "tsr::frexp_exponent(" + as_double(a[0]) + ")";
  if (n == "code") return "tsr::storage_code(" + a[0] + ", " + cu_dtype(op.operand(0)->type().dtype()) + ")";
  if (n == "check_span") {
    // A GPU records a fault and runs on: the loads the span covers would then
    // read out of range. Templates build it for the CPU alone (spmm strips).
    unsupported(op, "tile.check_span is a CPU op (its covered loads would run past a recorded fault on a GPU)");
  }
  if (n == "check_range") {
    return "tsr::check_range(" + a[0] + ", " + cu_int_literal(op.attrs().get_int("lo")) + ", " +
           cu_int_literal(op.attrs().get_int("hi")) + ", W)";
  }
  if (n == "narrow_unary") {
    // The certified fp32 evaluation (tessera/numerics/narrow_elementary.h).
    const DType to = op.attrs().get_policy("to").storage;
    return "tessera::elementary::narrow_" + op.attrs().get_string("fn") + "(" + a[0] + ", " +
           (to == DType::bf16   ? "tessera::elementary::kNarrowBf16"
            : to == DType::fp16 ? "tessera::elementary::kNarrowFp16"
                                : "tessera::elementary::kNarrowFp32") +
           ")";
  }
  if (n == "round_stochastic") {
    const NumericsPolicy& to = op.attrs().get_policy("to");
    return "tsr::round_stochastic<" + cu_dtype(to.storage) + ">(" + as_double(a[0]) + ", (tsr::u64)" +
           cu_int_literal(op.attrs().get_int("seed")) + ", " + a[1] + ", " + cu_overflow(to.overflow) + ")";
  }
  if (n == "cmp") unsupported(op, "unknown predicate '" + op.attrs().get_string("pred") + "'");
  if (n == "cast") {
    const NumericsPolicy& to = op.attrs().get_policy("to");
    require_deterministic_rounding(to, "tile.cast");
    return "tsr::convert<" + cu_dtype(to.storage) + ", " + cu_dtype(op.operand(0)->type().dtype()) + ">(" + a[0] +
           cu_rounding_args(to) + ")";
  }
  if (n == "load_elem") return load_expr(a, proven_in_bounds(op));
  return binary(op, n, a);
}

std::string store_overflow(const ir::Operation& op) { return cu_overflow(op.operand(0)->type().policy.overflow); }

// An access whose template proves its index in bounds (tile.load_elem's
// `in_bounds`, memory_ops.cpp) goes without the check and fault record.
namespace {
// An optional boolean attribute a template sets to state a proof.
bool proven(const ir::Operation& op, std::string_view attr) {
  const ir::Attribute* a = op.attrs().find(attr);
  return a != nullptr && std::get<bool>(*a);
}
}  // namespace

bool proven_in_bounds(const ir::Operation& op) { return proven(op, "in_bounds"); }
bool proven_not_nan(const ir::Operation& op) { return proven(op, "not_nan"); }

std::string load_expr(const std::vector<std::string>& a, bool unchecked) {
  if (unchecked) return "tsr::load_u(" + a[0] + ", " + index_list(a, 1, a.size()) + ")";
  return "tsr::load(" + a[0] + ", " + index_list(a, 1, a.size()) + ", W)";
}

std::string store_stmt(const ir::Operation& op, const std::vector<std::string>& a, bool unchecked) {
  if (unchecked) {
    return "tsr::store_u(" + a[0] + ", " + index_list(a, 1, a.size() - 1) + ", " + a.back() + ", " +
           store_overflow(op) + ");";
  }
  return "tsr::store(" + a[0] + ", " + index_list(a, 1, a.size() - 1) + ", " + a.back() + ", " + store_overflow(op) +
         ", W);";
}

std::string store_rounded_stmt(const std::vector<std::string>& a, bool unchecked, bool not_nan) {
  const std::string idx = index_list(a, 1, a.size() - 1);
  if (unchecked) {
    return std::string(not_nan ? "tsr::store_rounded_not_nan_u(" : "tsr::store_rounded_u(") + a[0] + ", " + idx +
           ", " + a.back() + ");";
  }
  return "tsr::store_rounded(" + a[0] + ", " + idx + ", " + a.back() + ", W);";
}

void require_deterministic_rounding(const NumericsPolicy& policy, const std::string& what) {
  if (policy.rounding == Rounding::stochastic) {
    raise(ErrorCode::Compile, "CUDA backend: " + what +
                                  " uses rounding 'stochastic', which needs each element's index; round with "
                                  "tile.round_stochastic instead");
  }
}

}  // namespace tessera::cuda::detail
