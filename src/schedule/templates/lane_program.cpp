// Graph IR elementwise ops -> Tile IR lane ops (lane_program.h).
#include "schedule/templates/lane_program.h"

#include <cmath>
#include <map>
#include <numbers>
#include <set>

#include "tessera/numerics/convert.h"
#include "tessera/schedule/schedule_dialect.h"
#include "tessera/support/error.h"
#include "tessera/tile/tile_builder.h"

namespace tessera::schedule::templates {
namespace {

const NumericsPolicy kF64 = default_policy(DType::fp64);
const NumericsPolicy kBool = default_policy(DType::bool_);

// Graph IR op (without "graph.") -> the Tile IR lane op computing it in fp64.
const std::map<std::string_view, const char*> kBinaries = {{"add", "add"}, {"sub", "sub"}, {"mul", "mul"},
                                                           {"div", "div"}, {"pow", "pow"}, {"maximum", "max"},
                                                           {"minimum", "min"}};
const std::map<std::string_view, const char*> kComparisons = {{"eq", "eq"}, {"ne", "ne"}, {"lt", "lt"},
                                                              {"le", "le"}, {"gt", "gt"}, {"ge", "ge"}};
const std::map<std::string_view, const char*> kUnaries = {{"neg", "neg"}, {"abs", "abs"},   {"exp", "exp"},
                                                          {"log", "log"}, {"sqrt", "sqrt"}, {"tanh", "tanh"},
                                                          {"erf", "erf"}, {"sin", "sin"}, {"cos", "cos"}};
// Ops lower_op spells out as formulas of several lane ops.
const std::set<std::string_view> kComposites = {"rsqrt", "sigmoid",  "silu",         "relu",  "gelu",
                                                "where", "cast",     "constant",     "lookup", "broadcast_to"};

}  // namespace

bool lane_op_covered(std::string_view op_name) {
  if (!op_name.starts_with("graph.")) return false;
  const std::string_view n = op_name.substr(std::string_view("graph.").size());
  return kBinaries.count(n) || kComparisons.count(n) || kUnaries.count(n) || kComposites.count(n);
}

// Every storage format is a kernel parameter (sub-byte ones reach the CPU
// kernels unpacked, one code per byte); nearest-even and toward-zero rounding
// happen in any cast, stochastic rounding only where the template draws each
// element's bits (tile.round_stochastic).
std::optional<std::string> unsupported_policy(const NumericsPolicy& p, bool stochastic) {
  // Lanes hold one real value; complex values (two parts) have no lane type
  // yet. The FFT and complex-parts templates read complex buffers as parts.
  if (is_complex(p.storage)) return "a complex dtype (" + std::string(name(p.storage)) + ": lanes hold real values only; "
                                    "complex add, sub, mul, div, neg, abs, exp, casts, real, imag, conj, complex and the "
                                    "FFTs have kernels of their own)";
  if (p.rounding == Rounding::stochastic && !stochastic) {
    return "rounding 'stochastic' (this template rounds without per-element random bits)";
  }
  return std::nullopt;
}

NumericsPolicy buffer_policy(NumericsPolicy p) {
  if (p.rounding == Rounding::stochastic) p.rounding = Rounding::nearest_even;
  return p;
}

NumericsPolicy part_buffer_policy(NumericsPolicy p) {
  p.storage = complex_part(p.storage);
  p.accum = complex_part(p.accum);
  return buffer_policy(p);
}

std::optional<std::string> part_policies_unsupported(const ir::Operation& root) {
  std::vector<const ir::Value*> values(root.operands().begin(), root.operands().end());
  values.push_back(root.result(0));
  for (const ir::Value* v : values) {
    const NumericsPolicy& p = v->type().policy;
    if (p.rounding != Rounding::nearest_even) {
      return std::string(root.name()) + " with a " + std::string(rounding_name(p.rounding)) +
             "-rounded value: this template rounds to nearest even only";
    }
    if (is_complex(p.storage)) continue;
    if (auto bad = unsupported_policy(p)) return std::string(root.name()) + ": " + *bad;
  }
  return std::nullopt;
}

std::optional<std::string> lane_ops_unsupported(const ir::Block& body, std::size_t first, bool stochastic) {
  for (std::size_t k = 0; k < body.num_arguments(); ++k) {
    NumericsPolicy read = body.argument(k)->type().policy;
    read.rounding = Rounding::nearest_even;
    if (auto bad = unsupported_policy(read)) {
      return "input " + std::to_string(k) + " has " + *bad;
    }
  }
  std::size_t index = 0;
  for (const auto& op : body.ops()) {
    if (op.get() == body.terminator()) break;
    if (index++ < first) continue;
    if (!lane_op_covered(op->name())) return "'" + std::string(op->name()) + "' has no per-lane lowering";
    if (op->name() == "graph.constant" && !is_splat_constant(*op)) {
      return "a graph.constant with more than one value inside a fused kernel";
    }
    if (auto bad = unsupported_policy(op->result(0)->type().policy, stochastic)) {
      return "'" + std::string(op->name()) + "' has " + *bad;
    }
  }
  return std::nullopt;
}

bool lookup_table(const ir::Value* input) {
  if (input->use_empty()) return false;
  for (const ir::Use& use : input->uses()) {
    if (use.user->name() != "graph.lookup" || use.operand_index != 0) return false;
  }
  return true;
}

bool broadcasts(const ir::Value* input, const ir::Shape& domain) {
  return !lookup_table(input) && input->type().shape != domain;
}

ir::Value* real(ir::OpBuilder& b, double x) {
  return tile::build_real(b, x, kF64);
}
ir::Value* op1(ir::OpBuilder& b, const char* op, ir::Value* x) {
  return tile::build(b, std::string("tile.") + op, {x});
}
ir::Value* op2(ir::OpBuilder& b, const char* op, ir::Value* x, ir::Value* y) {
  return tile::build(b, std::string("tile.") + op, {x, y});
}
ir::Value* index_op(ir::OpBuilder& b, const char* op, ir::Value* x, ir::Value* y) {
  return tile::build(b, std::string("tile.") + op, {x, y}, {{"nowrap", true}});
}
ir::Value* cmp(ir::OpBuilder& b, const char* pred, ir::Value* x, ir::Value* y) {
  return tile::build(b, "tile.cmp", {x, y}, {{"pred", std::string(pred)}});
}
ir::Value* select(ir::OpBuilder& b, ir::Value* c, ir::Value* x, ir::Value* y) {
  return tile::build(b, "tile.select", {c, x, y});
}
std::int64_t group_lanes(const ir::Operation& kernel, std::int64_t default_lanes) {
  return kernel.attrs().has("tile") ? kernel.attrs().get_ints("tile").at(0) : default_lanes;
}

std::vector<std::pair<std::string, ir::Type>> input_buffer_params(const ir::Block& body) {
  std::vector<std::pair<std::string, ir::Type>> params;
  for (std::size_t k = 0; k < body.num_arguments(); ++k) {
    params.emplace_back("in" + std::to_string(k), ir::Type::gmem({ir::Dim::named("m" + std::to_string(k))},
                                                                  buffer_policy(body.argument(k)->type().policy)));
  }
  return params;
}

ir::Value* global_lane(ir::OpBuilder& b, std::int64_t lanes) {
  ir::Value* gid = tile::build(b, "tile.group_id", {});
  ir::Value* lid = tile::build(b, "tile.linear_id", {});
  return op2(b, "add", op2(b, "mul", gid, tile::build_int(b, lanes)), lid);
}

ir::Value* cast(ir::OpBuilder& b, ir::Value* x, const NumericsPolicy& to) {
  return tile::build(b, "tile.cast", {x}, {{"to", to}});
}

// ---- values ----
const LaneValue& LaneProgram::value(ir::OpBuilder& b, const ir::Value* v) {
  auto it = values_.find(v);
  if (it != values_.end()) return it->second;
  // A kernel input: read at its broadcast offset, decode.
  auto in = inputs_.find(v);
  if (in == inputs_.end()) raise(ErrorCode::Internal, "lane program: a value is neither computed nor an input");
  ir::Value* stored = tile::build(b, "tile.load_elem", {in->second, offset_of(b, v->type().shape)},
                                  in_bounds_ ? ir::AttrMap{{"in_bounds", true}} : ir::AttrMap{});
  return values_[v] = LaneValue{stored, decode(b, stored)};
}

ir::Value* LaneProgram::decode(ir::OpBuilder& b, ir::Value* stored) {
  const DType d = stored->type().dtype();
  if (d == DType::bool_ || d == DType::fp64) return stored;
  return cast(b, stored, kF64);
}

// A bool lane as 1.0 / 0.0 where arithmetic reads it.
ir::Value* LaneProgram::as_real(ir::OpBuilder& b, const LaneValue& v) {
  if (v.decoded->type().dtype() != DType::bool_) return v.decoded;
  return select(b, v.decoded, real(b, 1.0), real(b, 0.0));
}

// A value as a condition: nonzero (NaN counts) is true.
ir::Value* LaneProgram::as_bool(ir::OpBuilder& b, const LaneValue& v) {
  if (v.decoded->type().dtype() == DType::bool_) return v.decoded;
  return cast(b, v.decoded, kBool);
}

// ---- indexing ----
ir::Value* LaneProgram::product(ir::OpBuilder& b, std::size_t from, std::size_t to) {
  ir::Value* p = nullptr;
  for (std::size_t d = from; d < to; ++d) p = p ? op2(b, "mul", p, dims_.at(d)) : dims_.at(d);
  return p ? p : tile::build_int(b, 1);
}

// The flat offset of element i of the domain in an operand of `shape`
// (right-aligned numpy broadcasting: a dim of size 1 against a larger one is
// read at 0). An operand broadcast over leading dims only (a bias) costs one
// remainder, one over trailing dims only (a row scale) one division, anything
// else the full multi-index.
ir::Value* LaneProgram::offset_of(ir::OpBuilder& b, const ir::Shape& shape) {
  if (shape == domain_) return i_;
  const std::size_t rank = domain_.size();
  const std::size_t lead = rank - shape.size();
  std::vector<bool> kept(rank, false);  // domain dims the operand varies along
  for (std::size_t d = 0; d < shape.size(); ++d) kept[lead + d] = !shape[d].is_fixed(1) || domain_[lead + d].is_fixed(1);
  std::size_t first = rank, last = 0;
  for (std::size_t d = 0; d < rank; ++d) {
    if (kept[d]) first = std::min(first, d), last = d + 1;
  }
  if (first == rank) return tile::build_int(b, 0);
  if (!index_.empty()) {
    // Row-major over the kept dims, from the known multi-index.
    ir::Value* offset = nullptr;
    for (std::size_t d = first; d < last; ++d) {
      if (!kept[d]) continue;
      offset = offset ? op2(b, "add", op2(b, "mul", offset, dims_.at(d)), index_[d]) : index_[d];
    }
    return offset;
  }
  bool contiguous = true;
  for (std::size_t d = first; d < last; ++d) contiguous = contiguous && kept[d];
  if (contiguous) {
    // Dims [first, last): offset = (i / prod(last..)) % prod(first..last).
    ir::Value* x = i_;
    if (last < rank) x = op2(b, "div", x, product(b, last, rank));
    if (first > 0) x = op2(b, "rem", x, product(b, first, last));
    return x;
  }
  // General: the operand's row-major offset of the multi-index.
  ir::Value* offset = tile::build_int(b, 0);
  ir::Value* stride = tile::build_int(b, 1);
  ir::Value* rest = i_;
  for (std::size_t d = rank; d-- > 0;) {
    ir::Value* idx = op2(b, "rem", rest, dims_.at(d));
    rest = op2(b, "div", rest, dims_.at(d));
    if (!kept[d]) continue;
    offset = op2(b, "add", offset, op2(b, "mul", idx, stride));
    stride = op2(b, "mul", stride, dims_.at(d));
  }
  return offset;
}

// ---- ops ----
LaneValue LaneProgram::finish(ir::OpBuilder& b, ir::Value* x, const NumericsPolicy& p, bool via_accum) {
  if (p.storage == DType::bool_) {
    ir::Value* bit = x->type().dtype() == DType::bool_ ? x : cast(b, x, kBool);
    return {bit, bit};
  }
  ir::Value* y = x;
  if (via_accum && p.accum != p.storage && p.accum != DType::fp64) y = cast(b, y, default_policy(p.accum));
  ir::Value* stored = cast(b, y, p);
  return {stored, decode(b, stored)};
}

LaneValue LaneProgram::finish_stochastic(ir::OpBuilder& b, ir::Value* x, const NumericsPolicy& p, bool via_accum,
                                         ir::Value* index, std::int64_t seed) {
  ir::Value* y = x;
  // The reference rounds to the accumulation type (to nearest) even when it
  // is the storage type, and only then stochastically to storage.
  if (via_accum && is_float(p.accum) && p.accum != DType::fp64) y = cast(b, cast(b, y, default_policy(p.accum)), kF64);
  ir::Value* stored = tile::build(b, "tile.round_stochastic", {y, index}, {{"to", p}, {"seed", seed}});
  return {stored, decode(b, stored)};
}

ir::Value* LaneProgram::sigmoid(ir::OpBuilder& b, ir::Value* x) {
  // The reference's split by sign: 1/(1+e^-x) for x >= 0, e^x/(1+e^x) below.
  ir::Value* one = real(b, 1.0);
  ir::Value* pos = op2(b, "div", one, op2(b, "add", one, op1(b, "exp", op1(b, "neg", x))));
  ir::Value* e = op1(b, "exp", x);
  ir::Value* negv = op2(b, "div", e, op2(b, "add", one, e));
  return select(b, cmp(b, "ge", x, real(b, 0.0)), pos, negv);
}

bool fp32_exact(DType d) { return is_float(d) && !is_complex(d) && d != DType::fp64; }

// Ops whose result rounds through fp32 (accumulation fp32: fp32 storage
// with the plain policy, or a narrower float storage, rounded to fp32 first
// and then to storage) and whose operands are fp32 values: + - * / and sqrt
// computed in fp32 round exactly as the reference's fp64 result rounded to
// fp32 (fp64 carries more than 2 * 24 + 2 bits, so the double rounding is
// innocuous), and max/min are exact; so these run in fp32 without fp64
// conversions, and a narrower storage is one cast from the fp32 result, as
// the reference's second rounding is.
bool rounds_through_fp32(const ir::Operation& op) {
  const NumericsPolicy& p = op.result(0)->type().policy;
  const bool through = p.storage == DType::fp32 ? p == default_policy(DType::fp32)
                                                 : fp32_exact(p.storage) && p.accum == DType::fp32 &&
                                                       p.rounding != Rounding::stochastic;
  if (!through) return false;
  for (const ir::Value* v : op.operands()) {
    if (!fp32_exact(v->type().policy.storage)) return false;
  }
  return true;
}

const std::map<std::string_view, const char*> kFp32Binaries = {{"add", "add"}, {"sub", "sub"}, {"mul", "mul"},
                                                               {"div", "div"}, {"maximum", "max"},
                                                               {"minimum", "min"}};

// gelu (erf form), erf and exp of a bf16/fp16 value whose result rounds
// through fp32 to bf16/fp16: tile.narrow_unary, the same bits as the double
// formula below, mostly from fp32 arithmetic where the backend has it
// (tessera/numerics/narrow_elementary.h).
// exp and erf of a bf16, fp16 or fp32 value with a plain fp32 result, too:
// most results from exp_f32_or_nan (half the double formula's work) and
// erf_f32_or_nan (one branch-free series instead of three forms).
static bool narrow_unary(const ir::Operation& op, std::string_view name) {
  const bool gelu = name == "gelu" && op.attrs().get_string("approximate") != "tanh";
  if (!gelu && name != "erf" && name != "exp") return false;
  auto narrow = [](DType d) { return d == DType::bf16 || d == DType::fp16; };
  const NumericsPolicy& p = op.result(0)->type().policy;
  const DType x = op.operand(0)->type().policy.storage;
  if (name != "gelu" && p == default_policy(DType::fp32)) return narrow(x) || x == DType::fp32;
  return narrow(p.storage) && p == default_policy(p.storage) && narrow(x);
}

ir::Value* LaneProgram::stored_from_fp32(ir::OpBuilder& b, ir::Value* x, const NumericsPolicy& p) {
  if (x->type().dtype() != DType::fp32) x = cast(b, x, default_policy(DType::fp32));
  return x->type().policy == p ? x : cast(b, x, p);
}

LaneValue LaneProgram::from_fp32(ir::OpBuilder& b, ir::Value* x, const NumericsPolicy& p) {
  ir::Value* stored = stored_from_fp32(b, x, p);
  return LaneValue{stored, decode(b, stored)};
}

void LaneProgram::lower_op(ir::OpBuilder& b, const ir::Operation& op) {
  const std::string_view name = op.name().substr(std::string_view("graph.").size());
  const NumericsPolicy& p = op.result(0)->type().policy;
  if (narrow_unary(op, name)) {
    ir::Value* stored = tile::build(b, "tile.narrow_unary", {value(b, op.operand(0)).stored},
                                    {{"fn", std::string(name)}, {"to", p}});
    values_[op.result(0)] = LaneValue{stored, decode(b, stored)};
    return;
  }
  if (name == "lookup") {
    // One table element, at the operand's storage code (graph.lookup).
    auto table = inputs_.find(op.operand(0));
    if (table == inputs_.end()) raise(ErrorCode::Internal, "lane program: a lookup table that is not a kernel input");
    ir::Value* code = tile::build(b, "tile.code", {value(b, op.operand(1)).stored});
    ir::Value* stored = tile::build(b, "tile.load_elem", {table->second, code}, {{"in_bounds", true}});
    values_[op.result(0)] = LaneValue{stored, decode(b, stored)};
    return;
  }
  if (name == "cast" && fp32_exact(op.operand(0)->type().policy.storage) && fp32_exact(p.storage) &&
      p.rounding != Rounding::stochastic) {
    // One rounding from the operand's fp32 lane (bf16 splits of fp32
    // cotangents were two fp64 trips and a double-to-bf16 encode each).
    values_[op.result(0)] = from_fp32(b, value(b, op.operand(0)).stored, p);
    return;
  }
  if (rounds_through_fp32(op)) {
    // An operand as an fp32 lane (exact: a cast from a narrower float format).
    auto f32 = [&](std::size_t k) {
      ir::Value* stored = value(b, op.operand(k)).stored;
      return stored->type().dtype() == DType::fp32 ? stored : cast(b, stored, default_policy(DType::fp32));
    };
    ir::Value* r = nullptr;
    if (auto it = kFp32Binaries.find(name); it != kFp32Binaries.end()) {
      ir::Value* lhs = f32(0);
      r = op2(b, it->second, lhs, f32(1));
    } else if (name == "neg" || name == "abs" || name == "sqrt") {
      r = op1(b, name == "neg" ? "neg" : (name == "abs" ? "abs" : "sqrt"), f32(0));
    }
    if (r) {
      values_[op.result(0)] = from_fp32(b, r, p);
      return;
    }
  }
  auto arg = [&](std::size_t k) { return as_real(b, value(b, op.operand(k))); };
  ir::Value* x = nullptr;
  bool via_accum = true;
  if (auto it = kBinaries.find(name); it != kBinaries.end()) {
    x = op2(b, it->second, arg(0), arg(1));
  } else if (auto c = kComparisons.find(name); c != kComparisons.end()) {
    x = cmp(b, c->second, arg(0), arg(1));
  } else if (auto u = kUnaries.find(name); u != kUnaries.end()) {
    x = op1(b, u->second, arg(0));
  } else if (name == "rsqrt") {
    x = op2(b, "div", real(b, 1.0), op1(b, "sqrt", arg(0)));
  } else if (name == "sigmoid") {
    x = sigmoid(b, arg(0));
  } else if (name == "silu") {
    ir::Value* v = arg(0);
    x = op2(b, "mul", v, sigmoid(b, v));
  } else if (name == "relu") {
    ir::Value* v = arg(0);
    x = select(b, cmp(b, "ne", v, v), v, select(b, cmp(b, "gt", v, real(b, 0.0)), v, real(b, 0.0)));
  } else if (name == "gelu") {
    ir::Value* v = arg(0);
    ir::Value* half_x = op2(b, "mul", real(b, 0.5), v);
    ir::Value* inner = nullptr;
    if (op.attrs().get_string("approximate") == "tanh") {
      const double k = std::sqrt(2.0 / std::numbers::pi);
      ir::Value* cube = op2(b, "mul", op2(b, "mul", op2(b, "mul", real(b, 0.044715), v), v), v);
      inner = op1(b, "tanh", op2(b, "mul", real(b, k), op2(b, "add", v, cube)));
    } else {
      inner = op1(b, "erf", op2(b, "div", v, real(b, std::numbers::sqrt2)));
    }
    x = op2(b, "mul", half_x, op2(b, "add", real(b, 1.0), inner));
  } else if (name == "where") {
    x = select(b, as_bool(b, value(b, op.operand(0))), arg(1), arg(2));
  } else if (name == "cast") {
    // One rounding, straight to the target storage (no accumulation step).
    x = arg(0);
    via_accum = false;
  } else if (name == "broadcast_to") {
    values_[op.result(0)] = value(b, op.operand(0));
    return;
  } else if (name == "constant") {
    x = real(b, op.attrs().get_reals("value").at(0));
    via_accum = false;
  } else {
    raise(ErrorCode::Compile, "no per-lane lowering for '" + std::string(op.name()) + "'", op.location());
  }
  if (p.rounding == Rounding::stochastic && p.storage != DType::bool_) {
    // The reference's make_result: element j of the result draws Philox(seed, j).
    const std::int64_t seed = name == "cast" ? op.attrs().get_int("seed") : 0;
    values_[op.result(0)] = finish_stochastic(b, x, p, via_accum, offset_of(b, op.result(0)->type().shape), seed);
    return;
  }
  values_[op.result(0)] = finish(b, x, p, via_accum);
}

ir::Value* check_exact(ir::OpBuilder& b, ir::Value* x, const std::string& what) {
  const std::int64_t exact = std::int64_t{1} << 53;
  return tile::build(b, "tile.check_range", {x}, {{"lo", -exact}, {"hi", exact}, {"what", what}});
}

ir::Value* check_fits(ir::OpBuilder& b, ir::Value* x, DType result, const std::string& what) {
  if (result == DType::int64 || result == DType::bool_) return x;
  const int bits = bit_width(result);
  const bool is_signed = info(result).is_signed;
  const std::int64_t lo = is_signed ? -(std::int64_t{1} << (bits - 1)) : 0;
  const std::int64_t hi = (std::int64_t{1} << (is_signed ? bits - 1 : bits)) - 1;
  return tile::build(b, "tile.check_range", {x}, {{"lo", lo}, {"hi", hi}, {"what", what}});
}

NumericsPolicy exact_fold_policy(DType stored) {
  if (stored == DType::fp64) return kF64;
  return fp32_exact(stored) ? default_policy(DType::fp32) : kF64;
}

ir::Value* exact_fold_value(ir::OpBuilder& b, ir::Value* stored) {
  const DType d = stored->type().dtype();
  if (d != DType::fp64 && !fp32_exact(d)) return LaneProgram::decode(b, stored);
  const NumericsPolicy native = exact_fold_policy(d);
  return stored->type().policy == native ? stored : cast(b, stored, native);
}

}  // namespace tessera::schedule::templates
