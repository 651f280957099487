// The complex-parts template: graph.real, graph.imag, graph.conj and
// graph.complex (graph/complex_ops.cpp), and graph.cast to or from a complex
// dtype (graph/cast_ops.cpp) -> one Tile IR kernel with one lane per result
// element, computing what the reference kernels do: each part decoded
// exactly, then rounded to the result's accumulation type (a cast: straight
// to storage) and stored. complex(re, im) broadcasts its operands as the
// reference does; a cast to complex sets the imaginary part to 0, a cast
// from complex keeps the real part.
// Complex add, sub, neg, mul, div, abs and exp (any operand complex; a real
// one has imaginary part 0) compute in fp64 lanes by the reference's formulas
// (graph/complex_ops.cpp: the naive product, Smith's quotient, a scaled
// magnitude, e^re (cos im + i sin im) with Tessera's own exp, sin and cos),
// every step rounded to fp64 as the reference rounds it, so results never
// depend on the target.
//
// Complex buffers are passed as their parts (Tensor::as_parts).
#include <limits>

#include "schedule/templates/lane_program.h"
#include "schedule/templates/row_loops.h"
#include "schedule/templates/templates.h"
#include "tessera/schedule/schedule_dialect.h"
#include "tessera/support/error.h"
#include "tessera/tile/tile_builder.h"

namespace tessera::schedule::templates {
namespace {

using ir::Type;
using ir::Value;

constexpr std::int64_t kLanes = 256;

}  // namespace

bool complex_parts_covers(const ir::Operation& kernel, std::string* why) {
  const std::optional<std::string> bad = part_policies_unsupported(kernel_root_op(kernel));
  if (bad && why) *why = *bad;
  return !bad;
}

TileKernel lower_complex_parts(const ir::Operation& kernel, ir::Module& out, const std::string& name) {
  const ir::Operation& root = kernel_root_op(kernel);
  const std::string_view op = root.name();
  const ir::Type& y = root.result(0)->type();
  const bool complex_out = is_complex(y.dtype());
  const ir::Shape& domain = y.shape;
  TileKernel result;
  std::vector<std::pair<std::string, Type>> params;
  // The kernel's inputs (an operand used twice is one input).
  const ir::Block& body = kernel_body(kernel);
  bool any_broadcast = false;
  for (std::size_t k = 0; k < body.num_arguments(); ++k) {
    const ir::Type& t = body.argument(k)->type();
    params.emplace_back("in" + std::to_string(k), Type::gmem({ir::Dim::named("m" + std::to_string(k))},
                                                            is_complex(t.dtype()) ? part_buffer_policy(t.policy)
                                                                                  : buffer_policy(t.policy)));
    any_broadcast = any_broadcast || broadcasts(body.argument(k), domain);
  }
  auto input_of = [&](const ir::Value* v) {
    for (std::size_t k = 0; k < body.num_arguments(); ++k) {
      if (body.argument(k) == v) return k;
    }
    raise(ErrorCode::Internal, std::string(op) + ": an operand is not an input of its kernel");
  };
  const NumericsPolicy out_policy = complex_out ? part_buffer_policy(y.policy) : buffer_policy(y.policy);
  params.emplace_back("out", Type::gmem({ir::Dim::named("n")}, out_policy, /*is_mut=*/true));
  for (std::size_t d = 0; any_broadcast && d < domain.size(); ++d) {
    params.emplace_back("d" + std::to_string(d), Type::lane(DType::int64));
    result.scalars.push_back(KernelScalar{KernelScalar::Kind::dim, d});
  }
  const std::int64_t lanes = group_lanes(kernel, kLanes);
  ir::Operation* func =
      tile::build_kernel(out, name, params, {.group_shape = std::vector<std::int64_t>{lanes}}, kernel.location());
  ir::Block& fb = ir::function_body(*func);
  ir::OpBuilder b(fb);
  const std::size_t num_in = body.num_arguments();
  std::vector<Value*> dims;
  for (std::size_t d = 0; any_broadcast && d < domain.size(); ++d) dims.push_back(fb.argument(num_in + 1 + d));
  auto integer = [](ir::OpBuilder& ib, std::int64_t v) { return tile::build_int(ib, v); };
  Value* i = global_lane(b, lanes);
  // The result's element count (its buffer holds two parts per element when complex).
  Value* count = tile::build(b, "tile.symbol", {}, {{"name", std::string("n")}});
  if (complex_out) count = op2(b, "div", count, integer(b, 2));
  Value* out_buffer = fb.argument(num_in);
  if_then(b, cmp(b, "lt", i, count), [&](ir::OpBuilder& tb) {
    LaneProgram lp(domain, i, dims);
    // Operand k's element as (re, im) decoded to fp64; a real operand's
    // imaginary part is 0. A real operand's stored lane is kept too.
    auto element = [&](std::size_t k, Value** stored) -> std::pair<Value*, Value*> {
      const ir::Type& t = root.operand(k)->type();
      Value* buffer = fb.argument(input_of(root.operand(k)));
      Value* at = lp.offset_of(tb, t.shape);
      if (!is_complex(t.dtype())) {
        Value* x = tile::build(tb, "tile.load_elem", {buffer, at});
        if (stored) *stored = x;
        return {LaneProgram::decode(tb, x), real(tb, 0.0)};
      }
      Value* twice = index_op(tb, "mul", at, integer(tb, 2));
      Value* re = tile::build(tb, "tile.load_elem", {buffer, twice});
      Value* im = tile::build(tb, "tile.load_elem", {buffer, index_op(tb, "add", twice, integer(tb, 1))});
      return {LaneProgram::decode(tb, re), LaneProgram::decode(tb, im)};
    };
    const bool via_accum = op != "graph.cast";
    auto store_real = [&](Value* x) {
      tb.create("tile.store_elem", {out_buffer, i, LaneProgram::finish(tb, x, out_policy, via_accum).stored});
    };
    auto store_complex = [&](Value* re, Value* im) {
      Value* twice = index_op(tb, "mul", i, integer(tb, 2));
      tb.create("tile.store_elem", {out_buffer, twice, LaneProgram::finish(tb, re, out_policy, via_accum).stored});
      tb.create("tile.store_elem", {out_buffer, index_op(tb, "add", twice, integer(tb, 1)),
                                    LaneProgram::finish(tb, im, out_policy, via_accum).stored});
    };
    if (op == "graph.complex") {
      store_complex(element(0, nullptr).first, element(1, nullptr).first);
      return;
    }
    if (op == "graph.add" || op == "graph.sub" || op == "graph.mul" || op == "graph.div") {
      const auto [ar, ai] = element(0, nullptr);
      const auto [br, bi] = element(1, nullptr);
      auto f = [&](const char* fn, Value* lhs, Value* rhs) { return op2(tb, fn, lhs, rhs); };
      if (op == "graph.add") return store_complex(f("add", ar, br), f("add", ai, bi));
      if (op == "graph.sub") return store_complex(f("sub", ar, br), f("sub", ai, bi));
      if (op == "graph.mul") {
        return store_complex(f("sub", f("mul", ar, br), f("mul", ai, bi)), f("add", f("mul", ar, bi), f("mul", ai, br)));
      }
      // Smith's quotient, both branches computed and the reference's chosen.
      Value* wide = cmp(tb, "ge", op1(tb, "abs", br), op1(tb, "abs", bi));
      Value* r1 = f("div", bi, br);
      Value* d1 = f("add", br, f("mul", bi, r1));
      Value* re1 = f("div", f("add", ar, f("mul", ai, r1)), d1);
      Value* im1 = f("div", f("sub", ai, f("mul", ar, r1)), d1);
      Value* r2 = f("div", br, bi);
      Value* d2 = f("add", bi, f("mul", br, r2));
      Value* re2 = f("div", f("add", f("mul", ar, r2), ai), d2);
      Value* im2 = f("div", f("sub", f("mul", ai, r2), ar), d2);
      return store_complex(select(tb, wide, re1, re2), select(tb, wide, im1, im2));
    }
    if (op == "graph.abs") {
      // The reference's magnitude (graph/complex_ops.cpp, complex_abs).
      const auto [re, im] = element(0, nullptr);
      Value* ax = op1(tb, "abs", re);
      Value* ay = op1(tb, "abs", im);
      Value* x_larger = cmp(tb, "ge", ax, ay);
      Value* m = select(tb, x_larger, ax, ay);
      Value* s = select(tb, x_larger, ay, ax);
      Value* r = op2(tb, "div", s, m);
      Value* h = op2(tb, "mul", m, op1(tb, "sqrt", op2(tb, "add", real(tb, 1.0), op2(tb, "mul", r, r))));
      Value* largest = real(tb, std::numeric_limits<double>::max());
      Value* x_inf = cmp(tb, "gt", ax, largest);
      Value* any_inf = op2(tb, "or", x_inf, cmp(tb, "gt", ay, largest));
      Value* finite = select(tb, cmp(tb, "eq", m, real(tb, 0.0)), m, h);
      return store_real(select(tb, any_inf, select(tb, x_inf, ax, ay), finite));
    }
    if (op == "graph.exp") {
      // The reference's formula (graph/complex_ops.cpp, complex_exp).
      const auto [re, im] = element(0, nullptr);
      Value* e = op1(tb, "exp", re);
      Value* im_out = select(tb, cmp(tb, "eq", im, real(tb, 0.0)), im, op2(tb, "mul", e, op1(tb, "sin", im)));
      return store_complex(op2(tb, "mul", e, op1(tb, "cos", im)), im_out);
    }
    if (op == "graph.neg") {
      const auto [re, im] = element(0, nullptr);
      return store_complex(op1(tb, "neg", re), op1(tb, "neg", im));
    }
    Value* stored = nullptr;
    const auto [re, im] = element(0, &stored);
    if (op == "graph.cast") {
      if (complex_out) store_complex(re, im);
      else store_real(re);
    } else if (op == "graph.real") {
      store_real(re);
    } else if (op == "graph.imag") {
      store_real(im);
    } else if (complex_out) {  // conj
      store_complex(re, op1(tb, "neg", im));
    } else {
      // conj of a real operand: the operand's encodings, unchanged.
      tb.create("tile.store_elem", {out_buffer, i, stored});
    }
  });
  tile::finish_kernel(*func);
  // A product's or quotient's parts are stored side by side: g++ would fuse
  // their products into vfmaddsub (backends/cpu/emitter.cpp).
  if (op == "graph.mul" || op == "graph.div") func->attrs().set("vectorize", false);
  result.func = func;
  result.lanes_per_group = lanes;
  return result;
}

}  // namespace tessera::schedule::templates
