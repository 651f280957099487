// Tile IR lane ops: one scalar per tile (docs/design/0003-tile-ir.md).
//
// Constants, launch ids, shape symbols, arithmetic, comparisons, logic,
// select and cast. Binary arithmetic takes two operands of one lane type
// (the front end inserts tile.cast for mixed operands), so each op's result
// type is its operands' type and the backends round once to it.
#include <string>

#include "tessera/support/error.h"
#include "tile/tile_support.h"

namespace tessera::tile {
namespace {

using ir::AttrKind;
using ir::AttrMap;
using ir::OpDef;
using ir::Type;

const Type kIndex = Type::lane(DType::int64);

std::vector<Type> one(Type t) {
  return {std::move(t)};
}

void add_id(ir::Registry& r, std::string name, std::string summary) {
  r.add(OpDef{
      .name = "tile." + name,
      .summary = std::move(summary),
      .infer = [](std::span<const Type>, const AttrMap&) { return one(kIndex); },
  });
}

enum class Domain { numeric, floating, integer };

void check_domain(const Type& t, Domain domain, const std::string& op, std::string_view operand) {
  require_kind(t, ir::TypeKind::lane, op, operand);
  DType d = t.dtype();
  if (d == DType::bool_ || d == DType::e8m0) {
    raise(ErrorCode::DtypeUnsupported, operand_label(op, operand) + " must be numeric, got " + ir::print_type(t));
  }
  if (domain == Domain::floating && !is_float(d)) {
    raise(ErrorCode::DtypeUnsupported,
          operand_label(op, operand) + " must be floating-point, got " + ir::print_type(t));
  }
  if (domain == Domain::integer && !is_integer(d)) {
    raise(ErrorCode::DtypeUnsupported, operand_label(op, operand) + " must be an integer, got " + ir::print_type(t));
  }
}

void add_binary(ir::Registry& r, std::string name, std::string summary, Domain domain) {
  std::string op = "tile." + name;
  // Integer add, sub and mul may carry `nowrap`: the producer promises the
  // result is in range (an element offset, a loop bound), so backends emit
  // plain arithmetic instead of the saturating helpers (as LLVM's nsw).
  std::vector<ir::AttrSpec> attrs;
  if (name == "add" || name == "sub" || name == "mul") {
    attrs.push_back({.name = "nowrap", .kind = AttrKind::boolean,
                     .doc = "integer result never leaves the int64 range: emitted as plain arithmetic"});
  }
  r.add(OpDef{
      .name = op,
      .summary = std::move(summary),
      .operands = {"lhs", "rhs"},
      .attrs = std::move(attrs),
      .infer =
          [op, domain](std::span<const Type> in, const AttrMap&) {
            check_domain(in[0], domain, op, "lhs");
            check_domain(in[1], domain, op, "rhs");
            require_same(in[0], in[1], op, "lhs and rhs");
            return one(in[0]);
          },
      .verify =
          [](const ir::Operation& o) {
            const ir::Attribute* nowrap = o.attrs().find("nowrap");
            if (nowrap && is_float(o.result(0)->type().dtype())) {
              raise(ErrorCode::VerifyFailed,
                    "'nowrap' applies to integer arithmetic, not " + ir::print_type(o.result(0)->type()));
            }
          },
  });
}

void add_unary(ir::Registry& r, std::string name, std::string summary, Domain domain) {
  std::string op = "tile." + name;
  r.add(OpDef{
      .name = op,
      .summary = std::move(summary),
      .operands = {"x"},
      .infer =
          [op, domain](std::span<const Type> in, const AttrMap&) {
            check_domain(in[0], domain, op, "x");
            return one(in[0]);
          },
  });
}

void add_logic(ir::Registry& r, std::string name, std::string summary, bool unary) {
  std::string op = "tile." + name;
  r.add(OpDef{
      .name = op,
      .summary = std::move(summary),
      .operands = unary ? std::vector<std::string>{"x"} : std::vector<std::string>{"lhs", "rhs"},
      .infer =
          [op, unary](std::span<const Type> in, const AttrMap&) {
            require_bool_lane(in[0], op, unary ? "x" : "lhs");
            if (!unary) require_bool_lane(in[1], op, "rhs");
            return one(in[0]);
          },
  });
}

// tile.const: the value's attribute kind must match the dtype, so a constant
// never silently changes value (3.7 stored to an int, 2 to a bool).
void verify_const(const ir::Operation& op) {
  const NumericsPolicy& p = op.attrs().get_policy("policy");
  const ir::Attribute& v = *op.attrs().find("value");
  ir::AttrKind kind = ir::kind_of(v);
  if (p.storage == DType::bool_) {
    if (kind != AttrKind::boolean) raise(ErrorCode::DtypeUnsupported, "a bool constant's value must be true or false");
  } else if (is_float(p.storage)) {
    if (kind == AttrKind::boolean) {
      raise(ErrorCode::DtypeUnsupported, "a " + std::string(name(p.storage)) + " constant's value must be a number");
    }
  } else if (kind != AttrKind::integer) {
    raise(ErrorCode::DtypeUnsupported,
          "a " + std::string(name(p.storage)) + " constant's value must be an integer, got " + ir::print_attribute(v));
  }
}

}  // namespace

void register_lane_ops(ir::Registry& r) {
  r.add(OpDef{
      .name = "tile.const",
      .summary = "A lane constant of the given policy; value is a real, an integer or a bool matching the dtype.",
      .attrs = {{.name = "value",
                 .kind = AttrKind::real,
                 .required = true,
                 .other_kinds = {AttrKind::integer, AttrKind::boolean}},
                {.name = "policy", .kind = AttrKind::policy, .required = true}},
      .infer = [](std::span<const Type>, const AttrMap& a) { return one(Type::lane(a.get_policy("policy"))); },
      .verify = verify_const,
  });
  r.add(OpDef{
      .name = "tile.symbol",
      .summary = "The value of shape symbol `name` at launch.",
      .attrs = {{.name = "name", .kind = AttrKind::string, .required = true}},
      .infer = [](std::span<const Type>, const AttrMap&) { return one(kIndex); },
  });
  add_id(r, "linear_id", "The tile's index within its group (within the launch without a group shape).");
  add_id(r, "group_id", "The group's index within the launch, in [0, num_groups).");
  add_id(r, "group_size", "The number of tiles per group (1 without a group shape).");
  add_id(r, "num_groups", "The number of groups of the launch (grid_groups).");

  add_binary(r, "add", "lhs + rhs, rounded once.", Domain::numeric);
  add_binary(r, "sub", "lhs - rhs, rounded once.", Domain::numeric);
  add_binary(r, "mul", "lhs * rhs, rounded once.", Domain::numeric);
  add_binary(r, "div", "lhs / rhs; integers truncate toward zero.", Domain::numeric);
  add_binary(r, "rem", "Remainder with the sign of the dividend (lhs).", Domain::numeric);
  add_binary(r, "min", "The smaller operand (NaN if either is NaN).", Domain::numeric);
  add_binary(r, "max", "The larger operand (NaN if either is NaN).", Domain::numeric);
  add_binary(r, "pow", "lhs raised to rhs, rounded once.", Domain::numeric);
  add_binary(r, "floordiv", "Integer division rounding toward negative infinity (Python //).", Domain::integer);
  add_unary(r, "neg", "-x.", Domain::numeric);
  add_unary(r, "abs", "|x|.", Domain::numeric);
  add_unary(r, "exp", "e^x, rounded once.", Domain::floating);
  add_unary(r, "log", "Natural logarithm, rounded once.", Domain::floating);
  add_unary(r, "sqrt", "Square root, rounded once.", Domain::floating);
  // Schedule IR templates need these to reproduce the Graph IR reference
  // kernels (computed in double, rounded once) bit for bit.
  add_unary(r, "tanh", "Hyperbolic tangent, rounded once.", Domain::floating);
  add_unary(r, "erf", "Error function, rounded once.", Domain::floating);
  add_unary(r, "cos", "Cosine, rounded once.", Domain::floating);
  add_unary(r, "sin", "Sine, rounded once.", Domain::floating);
  // A cheaper exp for fp32 lanes whose callers can redo the rare unsure
  // elements (tessera/numerics/elementary.h, exp_f32_or_nan).
  r.add(OpDef{
      .name = "tile.exp_or_nan",
      .summary = "For an fp32 lane: exactly tile.exp's result (e^x in fp64, rounded once to fp32), or NaN where the "
                 "cheaper evaluation cannot promise those bits; the caller recomputes those with tile.exp.",
      .operands = {"x"},
      .infer =
          [](std::span<const Type> in, const AttrMap&) {
            require_kind(in[0], ir::TypeKind::lane, "tile.exp_or_nan", "x");
            if (in[0].dtype() != DType::fp32) {
              raise(ErrorCode::DtypeUnsupported, operand_label("tile.exp_or_nan", "x") + " must be an fp32 lane, got " +
                                                     ir::print_type(in[0]));
            }
            return one(in[0]);
          },
  });
  // gelu, erf and exp of a bf16/fp16 lane rounded through fp32 to bf16/fp16
  // (tessera/numerics/narrow_elementary.h): most results come from fp32
  // arithmetic, certified; backends without that header expand the op into
  // the double formula (tile-expand-narrow), which defines its bits.
  r.add(OpDef{
      .name = "tile.narrow_unary",
      .summary = "fn (gelu: x/2 (1 + erf(x / sqrt 2)), erf or exp) of a bf16 or fp16 lane, computed in double, "
                 "rounded to fp32 and then to `to` (bf16 or fp16 with fp32 accumulation); exp and erf also of an fp32 "
                 "lane and to fp32.",
      .operands = {"x"},
      .attrs = {{.name = "fn", .kind = AttrKind::string, .required = true},
                {.name = "to", .kind = AttrKind::policy, .required = true}},
      .infer =
          [](std::span<const Type> in, const AttrMap& a) {
            const std::string op = "tile.narrow_unary";
            const std::string& fn = a.get_string("fn");
            if (fn != "gelu" && fn != "erf" && fn != "exp") {
              raise(ErrorCode::ArgumentInvalid, op + " attribute 'fn' must be one of gelu, erf, exp; got \"" + fn + "\"");
            }
            require_kind(in[0], ir::TypeKind::lane, op, "x");
            const NumericsPolicy& to = a.get_policy("to");
            // exp and erf also take an fp32 result, of a bf16, fp16 or fp32 lane.
            const bool fp32_result = fn != "gelu" && to.storage == DType::fp32;
            const DType x = in[0].dtype();
            if (x != DType::bf16 && x != DType::fp16 && !(fp32_result && x == DType::fp32)) {
              raise(ErrorCode::DtypeUnsupported, operand_label(op, "x") + " must be a bf16 or fp16 lane" +
                                                     (fp32_result ? std::string(", or fp32 for ") + fn + " to fp32" : "") +
                                                     ", got " + ir::print_type(in[0]));
            }
            if ((to.storage != DType::bf16 && to.storage != DType::fp16 && !fp32_result) || to != default_policy(to.storage)) {
              raise(ErrorCode::ArgumentInvalid, op + " attribute 'to' must be bf16 or fp16 (or fp32 for exp and erf) with fp32 "
                                                     "accumulation, nearest-even rounding and inf/NaN overflow; got " +
                                                     print_policy(to));
            }
            return one(Type::lane(to));
          },
  });
  // Graph IR's random ops draw Philox bits per element counter.
  r.add(OpDef{
      .name = "tile.philox",
      .summary = "32 random bits (as int64 in [0, 2^32)) from Philox4x32-10 for element counter `counter` of stream "
                 "`seed` (tessera/numerics/philox.h): the same bits on every backend.",
      .operands = {"counter"},
      .attrs = {{.name = "seed", .kind = AttrKind::integer, .required = true}},
      .infer =
          [](std::span<const Type> in, const AttrMap&) {
            check_domain(in[0], Domain::integer, "tile.philox", "counter");
            return one(kIndex);
          },
  });
  // The overflow-safe normalizations scale rows by powers of two and
  // accumulate squares with fused multiply-adds.
  r.add(OpDef{
      .name = "tile.fma",
      .summary = "a * b + c with one rounding (fp32 and fp64; narrower types compute in fp64, then round).",
      .operands = {"a", "b", "c"},
      .infer =
          [](std::span<const Type> in, const AttrMap&) {
            check_domain(in[0], Domain::floating, "tile.fma", "a");
            require_same(in[0], in[1], "tile.fma", "a and b");
            require_same(in[0], in[2], "tile.fma", "a and c");
            return one(in[0]);
          },
  });
  r.add(OpDef{
      .name = "tile.ldexp",
      .summary = "x * 2^e (e an integer lane), rounded once (exact unless it leaves the normal range).",
      .operands = {"x", "e"},
      .infer =
          [](std::span<const Type> in, const AttrMap&) {
            check_domain(in[0], Domain::floating, "tile.ldexp", "x");
            check_domain(in[1], Domain::integer, "tile.ldexp", "e");
            return one(in[0]);
          },
  });
  r.add(OpDef{
      .name = "tile.frexp_exp",
      .summary = "The exponent e with |x| = f * 2^e, f in [0.5, 1), as int64 (0 for zero, infinities and NaN).",
      .operands = {"x"},
      .infer =
          [](std::span<const Type> in, const AttrMap&) {
            check_domain(in[0], Domain::floating, "tile.frexp_exp", "x");
            return one(kIndex);
          },
  });

  r.add(OpDef{
      .name = "tile.code",
      .summary = "x's storage code as an unsigned int64: the bits a store of x writes (a float format of at most 16 "
                 "bits; NaN gives the format's quiet NaN with x's sign).",
      .operands = {"x"},
      .infer =
          [](std::span<const Type> in, const AttrMap&) {
            check_domain(in[0], Domain::floating, "tile.code", "x");
            const DType d = in[0].dtype();
            if (d == DType::fp32 || d == DType::fp64 || bit_width(d) > 16) {
              raise(ErrorCode::DtypeUnsupported, operand_label("tile.code", "x") +
                                                     " must have a float format of at most 16 bits, got " +
                                                     ir::print_type(in[0]));
            }
            return one(kIndex);
          },
  });

  r.add(OpDef{
      .name = "tile.cmp",
      .summary = "Compares lhs with rhs by `pred` (lt, le, gt, ge, eq, ne) giving lane<bool>; NaN compares unequal.",
      .operands = {"lhs", "rhs"},
      .attrs = {{.name = "pred", .kind = AttrKind::string, .required = true}},
      .infer =
          [](std::span<const Type> in, const AttrMap& a) {
            const std::string& pred = a.get_string("pred");
            if (pred != "lt" && pred != "le" && pred != "gt" && pred != "ge" && pred != "eq" && pred != "ne") {
              raise(ErrorCode::ArgumentInvalid,
                    "tile.cmp attribute 'pred' must be one of lt, le, gt, ge, eq, ne; got \"" + pred + "\"");
            }
            require_kind(in[0], ir::TypeKind::lane, "tile.cmp", "lhs");
            require_same(in[0], in[1], "tile.cmp", "lhs and rhs");
            return one(Type::lane(DType::bool_));
          },
  });
  add_logic(r, "and", "Logical and of two lane<bool>.", false);
  add_logic(r, "or", "Logical or of two lane<bool>.", false);
  add_logic(r, "not", "Logical not of a lane<bool>.", true);
  r.add(OpDef{
      .name = "tile.select",
      .summary = "a where cond is true, b otherwise.",
      .operands = {"cond", "a", "b"},
      .infer =
          [](std::span<const Type> in, const AttrMap&) {
            require_bool_lane(in[0], "tile.select", "cond");
            require_kind(in[1], ir::TypeKind::lane, "tile.select", "a");
            require_same(in[1], in[2], "tile.select", "a and b");
            return one(in[1]);
          },
  });
  r.add(OpDef{
      .name = "tile.check_range",
      .summary = "x itself when lo <= x <= hi; otherwise the kernel faults with an ArgumentError quoting `what` "
                 "and the value (an exact integer sum that overflows its result type, say).",
      .operands = {"x"},
      .attrs = {{.name = "lo", .kind = AttrKind::integer, .required = true},
                {.name = "hi", .kind = AttrKind::integer, .required = true},
                {.name = "what", .kind = AttrKind::string, .required = true}},
      .infer =
          [](std::span<const Type> in, const AttrMap& a) {
            check_domain(in[0], Domain::integer, "tile.check_range", "x");
            if (a.get_int("lo") > a.get_int("hi")) {
              raise(ErrorCode::ArgumentInvalid, "tile.check_range needs lo <= hi, got lo = " +
                                                    std::to_string(a.get_int("lo")) + " and hi = " +
                                                    std::to_string(a.get_int("hi")));
            }
            return one(in[0]);
          },
  });
  r.add(OpDef{
      .name = "tile.round_stochastic",
      .summary = "Rounds fp64 lane x to policy `to` (which rounds stochastically) with the 32 random bits "
                 "Philox(seed, index) draws: the bits the reference executor draws for element `index`.",
      .operands = {"x", "index"},
      .attrs = {{.name = "to", .kind = AttrKind::policy, .required = true},
                {.name = "seed", .kind = AttrKind::integer, .default_value = ir::Attribute(std::int64_t{0})}},
      .infer =
          [](std::span<const Type> in, const AttrMap& a) {
            check_domain(in[0], Domain::floating, "tile.round_stochastic", "x");
            check_domain(in[1], Domain::integer, "tile.round_stochastic", "index");
            const NumericsPolicy& to = a.get_policy("to");
            if (to.rounding != Rounding::stochastic) {
              raise(ErrorCode::ArgumentInvalid, "tile.round_stochastic attribute 'to' is " + print_policy(to) +
                                                    ", which does not round stochastically; use tile.cast");
            }
            if (to.storage == DType::bool_) {
              raise(ErrorCode::ArgumentInvalid, "tile.round_stochastic cannot round to bool; use tile.cast");
            }
            return one(Type::lane(to));
          },
  });
  r.add(OpDef{
      .name = "tile.cast",
      .summary = "Converts a lane value to policy `to` with a single rounding.",
      .operands = {"x"},
      .attrs = {{.name = "to", .kind = AttrKind::policy, .required = true}},
      .infer =
          [](std::span<const Type> in, const AttrMap& a) {
            require_kind(in[0], ir::TypeKind::lane, "tile.cast", "x");
            return one(Type::lane(a.get_policy("to")));
          },
  });
}

}  // namespace tessera::tile
