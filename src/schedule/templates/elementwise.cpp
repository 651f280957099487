// The elementwise template: a fused chain of Graph IR elementwise ops over
// one domain -> one Tile IR kernel with one lane per element.
//
//   kernel(in_0: gmem<[n0] P0>, ..., out_0: gmem<[n] Q0 mut>, ..., d0: lane<int64>, ...)
//     group_shape = [T] (T = the kernel's tile knob)
//     i = group_id * T + linear_id
//     if i < n:
//       each input is read at its broadcast offset of i (decoded to fp64)
//       each op computes in fp64 like its reference kernel, then rounds to
//       its accumulation type and encodes to its storage type
//       each output is stored at i
//
// Buffers are passed flat (row-major, contiguous): the executable hands the
// template contiguous tensors. The domain's dims d0.. are passed as scalars
// only when an input is broadcast; an input broadcast over leading dims only
// (a bias) costs one remainder, one over trailing dims only (a row scale)
// one division, anything else the full multi-index.
#include <cmath>
#include <map>
#include <numbers>
#include <set>
#include <unordered_map>

#include "schedule/templates/templates.h"
#include "tessera/ir/builder.h"
#include "tessera/schedule/schedule_dialect.h"
#include "tessera/support/error.h"
#include "tessera/tile/tile_builder.h"

namespace tessera::schedule::templates {
namespace {

using ir::Type;

const NumericsPolicy kF64 = default_policy(DType::fp64);
const NumericsPolicy kI64 = default_policy(DType::int64);
const NumericsPolicy kBool = default_policy(DType::bool_);

// Graph IR op (without "graph.") -> the Tile IR lane op computing it in fp64.
const std::map<std::string_view, const char*> kBinaries = {{"add", "add"}, {"sub", "sub"}, {"mul", "mul"},
                                                           {"div", "div"}, {"pow", "pow"}, {"maximum", "max"},
                                                           {"minimum", "min"}};
const std::map<std::string_view, const char*> kComparisons = {{"eq", "eq"}, {"ne", "ne"}, {"lt", "lt"},
                                                              {"le", "le"}, {"gt", "gt"}, {"ge", "ge"}};
const std::map<std::string_view, const char*> kUnaries = {{"neg", "neg"}, {"abs", "abs"},   {"exp", "exp"},
                                                          {"log", "log"}, {"sqrt", "sqrt"}, {"tanh", "tanh"}};
// Ops Builder::lower_op spells out as formulas of several lane ops.
const std::set<std::string_view> kComposites = {"rsqrt", "sigmoid", "silu", "relu",         "gelu",
                                                "where", "cast",    "constant", "broadcast_to"};

bool covered(std::string_view op_name) {
  if (!op_name.starts_with("graph.")) return false;
  const std::string_view n = op_name.substr(std::string_view("graph.").size());
  return kBinaries.count(n) || kComparisons.count(n) || kUnaries.count(n) || kComposites.count(n);
}

// Storage the template can read and write: byte-aligned formats rounded to
// nearest even (the backends' kernel-parameter rule).
std::optional<std::string> unsupported_policy(const NumericsPolicy& p) {
  if (p.rounding != Rounding::nearest_even) {
    return "rounding '" + std::string(rounding_name(p.rounding)) + "' (compiled kernels round to nearest even)";
  }
  const DType d = p.storage;
  if (d == DType::fp4_e2m1 || d == DType::fp6_e2m3 || d == DType::fp6_e3m2 || d == DType::int4 || d == DType::e8m0) {
    return "storage '" + std::string(name(d)) + "' (packed or scale formats are not kernel parameters yet)";
  }
  return std::nullopt;
}

// One graph value inside the lane program: its storage-typed lane and its
// decoded fp64 (or bool) lane.
struct LaneValue {
  ir::Value* stored = nullptr;   // lane<P> (P = the value's policy)
  ir::Value* decoded = nullptr;  // lane<fp64>, or lane<bool> for bool values
};

class Builder {
 public:
  Builder(const ir::Operation& kernel, ir::Module& out, const std::string& name)
      : kernel_(kernel), body_(kernel_body(kernel)), out_(out), name_(name) {}

  TileKernel build() {
    const ir::Shape& domain = kernel_.attrs().get_shape("domain");
    rank_ = domain.size();
    const std::int64_t lanes = kernel_.attrs().has("tile") ? kernel_.attrs().get_ints("tile").at(0) : 1024;
    // Parameters: inputs, outputs, then the domain dims when an input broadcasts.
    std::vector<std::pair<std::string, Type>> params;
    for (std::size_t k = 0; k < body_.num_arguments(); ++k) {
      const Type& t = body_.argument(k)->type();
      params.emplace_back("in" + std::to_string(k), Type::gmem({ir::Dim::named("m" + std::to_string(k))}, t.policy));
    }
    const ir::Operation& yield = *body_.terminator();
    for (std::size_t j = 0; j < yield.num_operands(); ++j) {
      params.emplace_back("out" + std::to_string(j),
                          Type::gmem({ir::Dim::named("n")}, yield.operand(j)->type().policy, /*is_mut=*/true));
    }
    bool broadcasts = false;
    for (std::size_t k = 0; k < body_.num_arguments(); ++k) {
      broadcasts = broadcasts || body_.argument(k)->type().shape != domain;
    }
    TileKernel result;
    if (broadcasts) {
      for (std::size_t d = 0; d < rank_; ++d) {
        params.emplace_back("d" + std::to_string(d), Type::lane(DType::int64));
        result.scalars.push_back(KernelScalar{KernelScalar::Kind::dim, d});
      }
    }
    ir::Operation* func =
        tile::build_kernel(out_, name_, params, {.group_shape = std::vector<std::int64_t>{lanes}}, kernel_.location());
    ir::Block& fb = ir::function_body(*func);
    ir::OpBuilder b(fb);
    const std::size_t num_in = body_.num_arguments();
    const std::size_t num_out = yield.num_operands();
    for (std::size_t d = 0; broadcasts && d < rank_; ++d) dims_.push_back(fb.argument(num_in + num_out + d));
    ir::Value* gid = tile::build(b, "tile.group_id", {});
    ir::Value* lid = tile::build(b, "tile.linear_id", {});
    ir::Value* i = tile::build(b, "tile.add", {tile::build(b, "tile.mul", {gid, tile::build_int(b, lanes)}), lid});
    ir::Value* n = tile::build(b, "tile.symbol", {}, {{"name", std::string("n")}});
    ir::Value* in_range = tile::build(b, "tile.cmp", {i, n}, {{"pred", std::string("lt")}});
    tile::build_if(
        b, in_range, {},
        [&](ir::OpBuilder& then, std::span<ir::Value* const>) {
          i_ = i;
          for (std::size_t k = 0; k < num_in; ++k) inputs_[body_.argument(k)] = fb.argument(k);
          for (const auto& op : body_.ops()) {
            if (op.get() == body_.terminator()) break;
            lower_op(then, *op);
          }
          for (std::size_t j = 0; j < num_out; ++j) {
            const LaneValue& v = value(then, yield.operand(j));
            then.create("tile.store_elem", {fb.argument(num_in + j), i, v.stored});
          }
          return std::vector<ir::Value*>{};
        },
        [](ir::OpBuilder&, std::span<ir::Value* const>) { return std::vector<ir::Value*>{}; });
    tile::finish_kernel(*func);
    result.func = func;
    result.lanes_per_group = lanes;
    return result;
  }

 private:
  // ---- values ----
  const LaneValue& value(ir::OpBuilder& b, const ir::Value* v) {
    auto it = values_.find(v);
    if (it != values_.end()) return it->second;
    // A kernel input: read at its broadcast offset, decode.
    ir::Value* buffer = inputs_.at(v);
    ir::Value* stored = tile::build(b, "tile.load_elem", {buffer, offset_of(b, v->type().shape)});
    return values_[v] = LaneValue{stored, decode(b, stored)};
  }

  ir::Value* decode(ir::OpBuilder& b, ir::Value* stored) {
    const DType d = stored->type().dtype();
    if (d == DType::bool_ || d == DType::fp64) return stored;
    return tile::build(b, "tile.cast", {stored}, {{"to", kF64}});
  }

  // A bool lane as 1.0 / 0.0 where arithmetic reads it.
  ir::Value* as_real(ir::OpBuilder& b, const LaneValue& v) {
    if (v.decoded->type().dtype() != DType::bool_) return v.decoded;
    return tile::build(b, "tile.select", {v.decoded, real(b, 1.0), real(b, 0.0)});
  }

  // A value as a condition: nonzero (NaN counts) is true.
  ir::Value* as_bool(ir::OpBuilder& b, const LaneValue& v) {
    if (v.decoded->type().dtype() == DType::bool_) return v.decoded;
    return tile::build(b, "tile.cast", {v.decoded}, {{"to", kBool}});
  }

  ir::Value* real(ir::OpBuilder& b, double x) { return tile::build_real(b, x, kF64); }

  // ---- indexing ----
  ir::Value* dim(std::size_t d) const { return dims_.at(d); }

  ir::Value* product(ir::OpBuilder& b, std::size_t from, std::size_t to) {
    ir::Value* p = nullptr;
    for (std::size_t d = from; d < to; ++d) p = p ? tile::build(b, "tile.mul", {p, dim(d)}) : dim(d);
    return p ? p : tile::build_int(b, 1);
  }

  // The flat offset of element i of the domain in an operand of `shape`
  // (right-aligned numpy broadcasting: a dim of size 1 against a larger one
  // is read at 0).
  ir::Value* offset_of(ir::OpBuilder& b, const ir::Shape& shape) {
    const ir::Shape& domain = kernel_.attrs().get_shape("domain");
    if (shape == domain) return i_;
    const std::size_t lead = rank_ - shape.size();
    std::vector<bool> kept(rank_, false);  // domain dims the operand varies along
    for (std::size_t d = 0; d < shape.size(); ++d) kept[lead + d] = !shape[d].is_fixed(1) || domain[lead + d].is_fixed(1);
    std::size_t first = rank_, last = 0;
    for (std::size_t d = 0; d < rank_; ++d) {
      if (kept[d]) first = std::min(first, d), last = d + 1;
    }
    if (first == rank_) return tile::build_int(b, 0);
    bool contiguous = true;
    for (std::size_t d = first; d < last; ++d) contiguous = contiguous && kept[d];
    if (contiguous) {
      // Dims [first, last): offset = (i / prod(last..)) % prod(first..last).
      ir::Value* x = i_;
      if (last < rank_) x = tile::build(b, "tile.div", {x, product(b, last, rank_)});
      if (first > 0) x = tile::build(b, "tile.rem", {x, product(b, first, last)});
      return x;
    }
    // General: the operand's row-major offset of the multi-index.
    ir::Value* offset = tile::build_int(b, 0);
    ir::Value* stride = tile::build_int(b, 1);
    ir::Value* rest = i_;
    for (std::size_t d = rank_; d-- > 0;) {
      ir::Value* idx = tile::build(b, "tile.rem", {rest, dim(d)});
      rest = tile::build(b, "tile.div", {rest, dim(d)});
      if (!kept[d]) continue;
      offset = tile::build(b, "tile.add", {offset, tile::build(b, "tile.mul", {idx, stride})});
      stride = tile::build(b, "tile.mul", {stride, dim(d)});
    }
    return offset;
  }

  // ---- ops ----
  // Rounds an fp64 result like make_result: to the accumulation type, then to storage.
  LaneValue finish(ir::OpBuilder& b, ir::Value* x, const NumericsPolicy& p, bool via_accum = true) {
    if (p.storage == DType::bool_) {
      ir::Value* bit = x->type().dtype() == DType::bool_ ? x : tile::build(b, "tile.cast", {x}, {{"to", kBool}});
      return {bit, bit};
    }
    ir::Value* y = x;
    if (via_accum && p.accum != p.storage && p.accum != DType::fp64) {
      y = tile::build(b, "tile.cast", {y}, {{"to", default_policy(p.accum)}});
    }
    ir::Value* stored = tile::build(b, "tile.cast", {y}, {{"to", p}});
    return {stored, decode(b, stored)};
  }

  ir::Value* sigmoid(ir::OpBuilder& b, ir::Value* x) {
    // The reference's split by sign: 1/(1+e^-x) for x >= 0, e^x/(1+e^x) below.
    ir::Value* one = real(b, 1.0);
    ir::Value* pos = tile::build(b, "tile.div", {one, tile::build(b, "tile.add", {one, unary(b, "exp", neg(b, x))})});
    ir::Value* e = unary(b, "exp", x);
    ir::Value* negv = tile::build(b, "tile.div", {e, tile::build(b, "tile.add", {one, e})});
    ir::Value* ge = tile::build(b, "tile.cmp", {x, real(b, 0.0)}, {{"pred", std::string("ge")}});
    return tile::build(b, "tile.select", {ge, pos, negv});
  }

  ir::Value* unary(ir::OpBuilder& b, const char* op, ir::Value* x) { return tile::build(b, std::string("tile.") + op, {x}); }
  ir::Value* neg(ir::OpBuilder& b, ir::Value* x) { return tile::build(b, "tile.neg", {x}); }
  ir::Value* bin(ir::OpBuilder& b, const char* op, ir::Value* x, ir::Value* y) {
    return tile::build(b, std::string("tile.") + op, {x, y});
  }

  void lower_op(ir::OpBuilder& b, const ir::Operation& op) {
    const std::string_view name = op.name().substr(std::string_view("graph.").size());
    const NumericsPolicy& p = op.result(0)->type().policy;
    auto arg = [&](std::size_t k) { return as_real(b, value(b, op.operand(k))); };
    ir::Value* x = nullptr;
    bool via_accum = true;
    if (auto it = kBinaries.find(name); it != kBinaries.end()) {
      x = bin(b, it->second, arg(0), arg(1));
    } else if (auto cmp = kComparisons.find(name); cmp != kComparisons.end()) {
      x = tile::build(b, "tile.cmp", {arg(0), arg(1)}, {{"pred", std::string(cmp->second)}});
    } else if (auto u = kUnaries.find(name); u != kUnaries.end()) {
      x = unary(b, u->second, arg(0));
    } else if (name == "rsqrt") {
      x = bin(b, "div", real(b, 1.0), unary(b, "sqrt", arg(0)));
    } else if (name == "sigmoid") {
      x = sigmoid(b, arg(0));
    } else if (name == "silu") {
      ir::Value* v = arg(0);
      x = bin(b, "mul", v, sigmoid(b, v));
    } else if (name == "relu") {
      ir::Value* v = arg(0);
      ir::Value* is_nan = tile::build(b, "tile.cmp", {v, v}, {{"pred", std::string("ne")}});
      ir::Value* gt = tile::build(b, "tile.cmp", {v, real(b, 0.0)}, {{"pred", std::string("gt")}});
      x = tile::build(b, "tile.select", {is_nan, v, tile::build(b, "tile.select", {gt, v, real(b, 0.0)})});
    } else if (name == "gelu") {
      ir::Value* v = arg(0);
      ir::Value* half_x = bin(b, "mul", real(b, 0.5), v);
      ir::Value* inner = nullptr;
      if (op.attrs().get_string("approximate") == "tanh") {
        const double c = std::sqrt(2.0 / std::numbers::pi);
        ir::Value* cube = bin(b, "mul", bin(b, "mul", bin(b, "mul", real(b, 0.044715), v), v), v);
        inner = unary(b, "tanh", bin(b, "mul", real(b, c), bin(b, "add", v, cube)));
      } else {
        inner = unary(b, "erf", bin(b, "div", v, real(b, std::numbers::sqrt2)));
      }
      x = bin(b, "mul", half_x, bin(b, "add", real(b, 1.0), inner));
    } else if (name == "where") {
      ir::Value* cond = as_bool(b, value(b, op.operand(0)));
      x = tile::build(b, "tile.select", {cond, arg(1), arg(2)});
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
      raise(ErrorCode::Compile, "elementwise template: no lowering for '" + std::string(op.name()) + "'",
            op.location());
    }
    values_[op.result(0)] = finish(b, x, p, via_accum);
  }

  const ir::Operation& kernel_;
  const ir::Block& body_;
  ir::Module& out_;
  std::string name_;
  std::size_t rank_ = 0;
  std::vector<ir::Value*> dims_;
  ir::Value* i_ = nullptr;
  std::unordered_map<const ir::Value*, ir::Value*> inputs_;
  std::unordered_map<const ir::Value*, LaneValue> values_;
};

}  // namespace

bool elementwise_covers(const ir::Operation& kernel, std::string* why) {
  auto fail = [&](const std::string& reason) {
    if (why) *why = reason;
    return false;
  };
  const ir::Block& body = kernel_body(kernel);
  auto check_type = [&](const Type& t, const std::string& what) -> std::optional<std::string> {
    if (auto bad = unsupported_policy(t.policy)) return what + " has " + *bad;
    return std::nullopt;
  };
  for (std::size_t k = 0; k < body.num_arguments(); ++k) {
    if (auto bad = check_type(body.argument(k)->type(), "input " + std::to_string(k))) return fail(*bad);
  }
  for (const auto& op : body.ops()) {
    if (op.get() == body.terminator()) break;
    if (!covered(op->name())) return fail("'" + std::string(op->name()) + "' has no elementwise lowering");
    if (op->name() == "graph.constant" && !is_splat_constant(*op)) {
      return fail("a graph.constant with more than one value inside an elementwise kernel");
    }
    if (auto bad = check_type(op->result(0)->type(), "'" + std::string(op->name()) + "'")) return fail(*bad);
  }
  return true;
}

TileKernel lower_elementwise(const ir::Operation& kernel, ir::Module& out, const std::string& name) {
  return Builder(kernel, out, name).build();
}

}  // namespace tessera::schedule::templates
