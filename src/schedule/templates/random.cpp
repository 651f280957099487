// The random template: graph.rand, graph.randn and graph.dropout -> one Tile
// IR kernel with one lane per element n, drawing Philox bits for the element
// counters the reference uses (graph/random_ops.cpp):
//
//   rand     min((bits(offset + n) >> 8) 2^-24, the largest value below 1)
//   randn    Box-Muller: u1 = ((bits(offset + 2n) >> 8) + 1) 2^-24,
//            u2 = (bits(offset + 2n + 1) >> 8) 2^-24, sqrt(-2 ln u1) cos(2 pi u2)
//   dropout  x / (1 - p) where u_n >= p, else 0 (p = 0: x unchanged)
//
// so a result depends on (seed, offset, n) only: the same bits on every
// backend and however the work is split. Values are computed in fp64 and
// rounded like the reference; randn's log, sqrt and cos are the backend's
// (within an ulp of the reference's on a GPU, like exp).
#include <algorithm>
#include <numbers>
#include <set>

#include "schedule/templates/lane_program.h"
#include "schedule/templates/templates.h"
#include "tessera/numerics/convert.h"
#include "tessera/schedule/schedule_dialect.h"
#include "tessera/tile/tile_builder.h"

namespace tessera::schedule::templates {
namespace {

using ir::Type;
using ir::Value;

constexpr double kTwoPowMinus24 = 1.0 / 16777216.0;

double below_one(DType dtype) {
  return decode_value(encode_value(1.0, dtype) - 1, dtype);
}

}  // namespace

TileKernel lower_random(const ir::Operation& kernel, ir::Module& out, const std::string& name) {
  const ir::Block& body = kernel_body(kernel);
  const ir::Operation& root = kernel_root_op(kernel);
  const NumericsPolicy& p = root.result(0)->type().policy;
  const std::int64_t lanes = group_lanes(kernel, 1024);
  std::vector<std::pair<std::string, Type>> params;
  for (std::size_t k = 0; k < body.num_arguments(); ++k) {
    params.emplace_back("in" + std::to_string(k),
                        Type::gmem({ir::Dim::named("m" + std::to_string(k))}, body.argument(k)->type().policy));
  }
  params.emplace_back("out", Type::gmem({ir::Dim::named("n")}, p, /*is_mut=*/true));
  ir::Operation* func =
      tile::build_kernel(out, name, params, {.group_shape = std::vector<std::int64_t>{lanes}}, kernel.location());
  ir::Block& fb = ir::function_body(*func);
  ir::OpBuilder b(fb);
  const std::int64_t seed = root.attrs().get_int("seed");
  const std::int64_t offset = root.attrs().get_int("offset");
  Value* i = global_lane(b, lanes);
  Value* n = tile::build(b, "tile.symbol", {}, {{"name", std::string("n")}});
  tile::build_if(
      b, cmp(b, "lt", i, n), {},
      [&](ir::OpBuilder& t, std::span<Value* const>) {
        // (bits(counter) >> 8) as fp64.
        auto top24 = [&](Value* counter) {
          Value* bits = tile::build(t, "tile.philox", {counter}, {{"seed", seed}});
          return cast(t, op2(t, "div", bits, tile::build_int(t, 256)), default_policy(DType::fp64));
        };
        auto uniform = [&](Value* counter) { return op2(t, "mul", top24(counter), real(t, kTwoPowMinus24)); };
        Value* stored = nullptr;
        if (root.name() == "graph.rand") {
          double cap = below_one(p.storage);
          if (is_float(p.accum) && p.accum != DType::e8m0) cap = std::min(cap, below_one(p.accum));
          Value* u = uniform(op2(t, "add", i, tile::build_int(t, offset)));
          stored = LaneProgram::finish(t, op2(t, "min", u, real(t, cap)), p).stored;
        } else if (root.name() == "graph.randn") {
          Value* c = op2(t, "add", op2(t, "mul", i, tile::build_int(t, 2)), tile::build_int(t, offset));
          Value* u1 = op2(t, "mul", op2(t, "add", top24(c), real(t, 1.0)), real(t, kTwoPowMinus24));
          Value* u2 = uniform(op2(t, "add", c, tile::build_int(t, 1)));
          Value* radius = op1(t, "sqrt", op2(t, "mul", real(t, -2.0), op1(t, "log", u1)));
          Value* z = op2(t, "mul", radius, op1(t, "cos", op2(t, "mul", real(t, 2.0 * std::numbers::pi), u2)));
          stored = LaneProgram::finish(t, z, p).stored;
        } else {
          const double drop = root.attrs().get_real("p");
          Value* x = tile::build(t, "tile.load_elem", {fb.argument(0), i});
          if (drop == 0.0) {
            stored = x;
          } else {
            Value* u = uniform(op2(t, "add", i, tile::build_int(t, offset)));
            Value* kept = op2(t, "div", LaneProgram::decode(t, x), real(t, 1.0 - drop));
            stored = LaneProgram::finish(t, select(t, cmp(t, "ge", u, real(t, drop)), kept, real(t, 0.0)), p).stored;
          }
        }
        t.create("tile.store_elem", {fb.argument(body.num_arguments()), i, stored});
        return std::vector<Value*>{};
      },
      [](ir::OpBuilder&, std::span<Value* const>) { return std::vector<Value*>{}; });
  tile::finish_kernel(*func);
  TileKernel result;
  result.func = func;
  result.lanes_per_group = lanes;
  return result;
}

bool random_covers(const ir::Operation& kernel, std::string* why) {
  auto fail = [&](const std::string& reason) {
    if (why) *why = reason;
    return false;
  };
  const ir::Operation& root = kernel_root_op(kernel);
  static const std::set<std::string_view> kOps = {"graph.rand", "graph.randn", "graph.dropout"};
  if (!kOps.count(root.name())) return fail("'" + std::string(root.name()) + "' is not a random op");
  for (const Value* v : root.operands()) {
    if (auto bad = unsupported_policy(v->type().policy)) return fail("the operand has " + *bad);
  }
  if (auto bad = unsupported_policy(root.result(0)->type().policy)) return fail("the result has " + *bad);
  return true;
}

}  // namespace tessera::schedule::templates
