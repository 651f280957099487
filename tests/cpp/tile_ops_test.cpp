// Tile IR ops: building each op with OpBuilder, result-type inference,
// operand checks and the verifier's region rules.
#include <gtest/gtest.h>

#include "tessera/ir/builder.h"
#include "tessera/ir/text.h"
#include "tessera/ir/verifier.h"
#include "tessera/support/error.h"
#include "tessera/tile/tile_builder.h"
#include "tessera/tile/tile_dialect.h"

namespace tessera::tile {
namespace {

using ir::Dim;
using ir::Type;
using ir::Value;

const NumericsPolicy kF32 = default_policy(DType::fp32);
const NumericsPolicy kF16 = default_policy(DType::fp16);

template <typename F>
ErrorCode code_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.code();
  }
  return ErrorCode::Internal;
}

struct Kernel {
  ir::Module module;
  ir::Operation* func;
  std::unique_ptr<ir::OpBuilder> b;
  Kernel(const std::vector<std::pair<std::string, Type>>& params, KernelOptions options = {}) {
    func = build_kernel(module, "k", params, options);
    b = std::make_unique<ir::OpBuilder>(ir::function_body(*func));
  }
  Value* arg(std::size_t i) const { return ir::function_body(*func).argument(i); }
};

TEST(TileOps, EveryContractOpIsRegisteredWithoutReference) {
  const char* names[] = {
      "const",   "symbol",    "linear_id",  "group_id",   "group_size", "num_groups", "add",      "sub",
      "mul",     "div",       "rem",        "min",        "max",        "pow",        "floordiv", "neg",
      "abs",     "exp",       "log",        "sqrt",       "cmp",        "and",        "or",       "not",
      "select",  "cast",      "load_elem",  "store_elem", "smem_alloc", "reduce_sum", "cp_async", "cp_async_wait",
      "barrier", "tile_load", "tile_store", "zeros",      "mma",        "tile_cast",  "for",      "if",
      "while",   "yield",     "condition"};
  for (const char* n : names) {
    const ir::OpDef* def = ir::Registry::global().find(std::string("tile.") + n);
    ASSERT_NE(def, nullptr) << n;
    EXPECT_FALSE(def->reference) << n;
    EXPECT_FALSE(def->summary.empty()) << n;
  }
}

TEST(TileOps, LaneOpsInferTypes) {
  Kernel k({{"alpha", Type::lane(kF32)}});
  auto& b = *k.b;
  Value* i = build(b, "tile.linear_id", {});
  EXPECT_EQ(i->type(), Type::lane(DType::int64));
  Value* one = build_real(b, 1.5, kF32);
  EXPECT_EQ(one->type(), Type::lane(kF32));
  Value* sum = build(b, "tile.add", {k.arg(0), one});
  EXPECT_EQ(sum->type(), Type::lane(kF32));
  Value* c = build(b, "tile.cmp", {sum, one}, {{"pred", std::string("lt")}});
  EXPECT_EQ(c->type(), Type::lane(DType::bool_));
  Value* s = build(b, "tile.select", {c, sum, one});
  EXPECT_EQ(s->type(), Type::lane(kF32));
  Value* h = build(b, "tile.cast", {s}, {{"to", kF16}});
  EXPECT_EQ(h->type(), Type::lane(kF16));
  Value* n = build(b, "tile.symbol", {}, {{"name", std::string("n")}});
  Value* q = build(b, "tile.floordiv", {n, i});
  EXPECT_EQ(q->type(), Type::lane(DType::int64));
  EXPECT_EQ(build(b, "tile.not", {c})->type(), Type::lane(DType::bool_));
  finish_kernel(*k.func);
  EXPECT_NO_THROW(ir::verify(k.module));
  // Mixed types, floats where integers are needed, exp of an integer.
  EXPECT_EQ(code_of([&] { build(b, "tile.add", {i, one}); }), ErrorCode::DtypeUnsupported);
  EXPECT_EQ(code_of([&] { build(b, "tile.floordiv", {one, one}); }), ErrorCode::DtypeUnsupported);
  EXPECT_EQ(code_of([&] { build(b, "tile.exp", {i}); }), ErrorCode::DtypeUnsupported);
  EXPECT_EQ(code_of([&] { build(b, "tile.and", {i, i}); }), ErrorCode::DtypeUnsupported);
  EXPECT_EQ(code_of([&] { build(b, "tile.cmp", {i, i}, {{"pred", std::string("lq")}}); }), ErrorCode::ArgumentInvalid);
}

TEST(TileOps, ConstValueKindMatchesDtype) {
  Kernel k({});
  auto& b = *k.b;
  build_int(b, 3);
  build_bool(b, true);
  build_real(b, 0.25, kF16);
  finish_kernel(*k.func);
  EXPECT_NO_THROW(ir::verify(k.module));
  // An integer constant written as 3.5, a bool written as 1.
  build(b, "tile.const", {}, {{"value", 3.5}, {"policy", default_policy(DType::int32)}});
  EXPECT_EQ(code_of([&] { ir::verify(k.module); }), ErrorCode::VerifyFailed);
}

TEST(TileOps, MemoryOps) {
  Type x = Type::gmem({Dim::named("n")}, kF32);
  Type y = Type::gmem({Dim::named("n")}, kF32, true);
  Kernel k({{"x", x}, {"y", y}}, {.group_shape = std::vector<std::int64_t>{128}, .shared_bytes = 8192});
  auto& b = *k.b;
  Value* i = build(b, "tile.linear_id", {});
  Value* v = build(b, "tile.load_elem", {k.arg(0), i});
  EXPECT_EQ(v->type(), Type::lane(kF32));
  b.create("tile.store_elem", {k.arg(1), i, v});
  Value* s = build(b, "tile.smem_alloc", {},
                   {{"shape", ir::fixed_shape({128})}, {"policy", kF32}, {"swizzle", std::string("xor")}});
  EXPECT_EQ(s->type(), Type::smem(ir::fixed_shape({128}), kF32, ir::Swizzle::xor_));
  Value* h = build(b, "tile.smem_alloc", {}, {{"shape", ir::fixed_shape({4, 4})}, {"policy", kF16}});
  EXPECT_EQ(build(b, "tile.reduce_sum", {s})->type(), Type::lane(DType::fp32));
  EXPECT_EQ(build(b, "tile.reduce_sum", {h})->type(), Type::lane(DType::fp32));  // fp16 sums at fp32
  EXPECT_EQ(reduce_sum_accum(DType::fp64), DType::fp64);
  EXPECT_EQ(reduce_sum_accum(DType::int8), DType::int64);
  finish_kernel(*k.func);
  EXPECT_NO_THROW(ir::verify(k.module));
  // Writing a parameter not marked mut; a wrong index count; a mismatched dtype.
  EXPECT_EQ(code_of([&] { b.create("tile.store_elem", {k.arg(0), i, v}); }), ErrorCode::Privilege);
  EXPECT_EQ(code_of([&] { b.create("tile.load_elem", {k.arg(0), i, i}); }), ErrorCode::ShapeMismatch);
  EXPECT_EQ(code_of([&] { b.create("tile.store_elem", {k.arg(1), i, i}); }), ErrorCode::DtypeUnsupported);
  EXPECT_EQ(code_of([&] { b.create("tile.load_elem", {v, i}); }), ErrorCode::DtypeUnsupported);
}

TEST(TileOps, AsyncAndTileValueOps) {
  Type a = Type::gmem({Dim::named("M"), Dim::named("K")}, kF16);
  Type c = Type::gmem({Dim::named("M"), Dim::named("N")}, kF32, true);
  Kernel k({{"A", a}, {"C", c}});
  auto& b = *k.b;
  Value* zero = build_int(b, 0);
  Value* sa = build(b, "tile.smem_alloc", {}, {{"shape", ir::fixed_shape({32, 16})}, {"policy", kF16}});
  b.create("tile.cp_async", {sa, k.arg(0), zero, zero});
  b.create("tile.cp_async_wait", {}, {{"pending", std::int64_t{0}}});
  b.create("tile.barrier", {});
  Value* ta = build(b, "tile.tile_load", {sa, zero, zero}, {{"shape", ir::fixed_shape({32, 16})}});
  EXPECT_EQ(ta->type(), Type::tile(ir::fixed_shape({32, 16}), kF16));
  Value* tb = build(b, "tile.tile_load", {k.arg(0), zero, zero}, {{"shape", ir::fixed_shape({16, 8})}});
  Value* acc = build(b, "tile.zeros", {}, {{"shape", ir::fixed_shape({32, 8})}, {"policy", kF32}});
  Value* d = build(b, "tile.mma", {ta, tb, acc});
  EXPECT_EQ(d->type(), Type::tile(ir::fixed_shape({32, 8}), kF32));
  b.create("tile.tile_store", {k.arg(1), zero, zero, d});
  EXPECT_EQ(build(b, "tile.tile_cast", {d}, {{"to", kF16}})->type(), Type::tile(ir::fixed_shape({32, 8}), kF16));
  finish_kernel(*k.func);
  EXPECT_NO_THROW(ir::verify(k.module));
  // K mismatch (16 vs 32), acc not [M, N], storing fp16 tiles into fp32 memory, bad pending.
  EXPECT_EQ(code_of([&] { b.create("tile.mma", {ta, ta, acc}); }), ErrorCode::ShapeMismatch);
  EXPECT_EQ(code_of([&] { b.create("tile.mma", {ta, tb, ta}); }), ErrorCode::ShapeMismatch);
  EXPECT_EQ(code_of([&] { b.create("tile.tile_store", {k.arg(1), zero, zero, ta}); }), ErrorCode::DtypeUnsupported);
  EXPECT_EQ(code_of([&] {
              b.create("tile.cp_async_wait", {}, {{"pending", std::int64_t{-1}}});
            }),
            ErrorCode::ArgumentInvalid);
  EXPECT_EQ(code_of([&] { b.create("tile.cp_async", {sa, k.arg(0), zero}); }), ErrorCode::ShapeMismatch);
}

TEST(TileOps, ControlFlowBuildersAndVerifier) {
  Kernel k({{"n", Type::lane(DType::int64)}});
  auto& b = *k.b;
  Value* zero = build_int(b, 0);
  Value* one = build_int(b, 1);
  Value* acc0 = build_real(b, 0.0, kF32);
  ir::Operation* loop = build_for(b, zero, k.arg(0), one, {acc0},
                                  [&](ir::OpBuilder& body, std::span<Value* const> args) {
                                    Value* f = build(body, "tile.cast", {args[0]}, {{"to", kF32}});
                                    return std::vector<Value*>{build(body, "tile.add", {args[1], f})};
                                  },
                                  2, {"i", "acc"});
  EXPECT_EQ(loop->num_results(), 1u);
  EXPECT_EQ(loop->attrs().get_int("prefetch"), 2);
  Value* cond = build(b, "tile.cmp", {k.arg(0), zero}, {{"pred", std::string("gt")}});
  ir::Operation* branch = build_if(
      b, cond, {loop->result(0)},
      [&](ir::OpBuilder& t, std::span<Value* const> a) { return std::vector<Value*>{build(t, "tile.neg", {a[0]})}; },
      [&](ir::OpBuilder&, std::span<Value* const> a) { return std::vector<Value*>{a[0]}; });
  ir::Operation* w = build_while(
      b, {zero},
      [&](ir::OpBuilder& bb, std::span<Value* const> a) {
        Value* c = build(bb, "tile.cmp", {a[0], k.arg(0)}, {{"pred", std::string("lt")}});
        return std::vector<Value*>{c, a[0]};
      },
      [&](ir::OpBuilder& ab, std::span<Value* const> a) {
        return std::vector<Value*>{build(ab, "tile.add", {a[0], one})};
      });
  EXPECT_EQ(branch->result(0)->type(), Type::lane(kF32));
  EXPECT_EQ(w->result(0)->type(), Type::lane(DType::int64));
  finish_kernel(*k.func);
  EXPECT_NO_THROW(ir::verify(k.module));

  // Round trip through text, custom and generic.
  std::string text = ir::print_module(k.module);
  EXPECT_NE(text.find("^(%i: lane<int64>, %acc: lane<fp32>):"), std::string::npos) << text;
  ir::Module back = ir::parse_module(text);
  EXPECT_EQ(ir::print_module(back), text);
  ir::Module generic = ir::parse_module(ir::print_module(k.module, {.generic = true}));
  EXPECT_EQ(ir::print_module(generic), text);

  // Break the loop's yield: the verifier names the types.
  ir::Operation* yield = loop->region(0).block().terminator();
  yield->set_operand(0, loop->region(0).block().argument(0));
  try {
    ir::verify(k.module);
    ADD_FAILURE() << "expected a verifier error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::VerifyFailed);
    EXPECT_NE(e.message().find("'tile.yield' of the body value #0 has type lane<int64>; expected lane<fp32>"),
              std::string::npos)
        << e.message();
  }
}

TEST(TileOps, VerifierRegionRules) {
  auto verify_text = [](const std::string& body) {
    ir::Module m =
        ir::parse_module("func @k(%n: lane<int64>) -> () attributes {kernel = true} {\n" + body + "\n  return\n}\n");
    ir::verify(m);
  };
  // A value defined in a loop body is not visible after the loop.
  try {
    ir::Module m;
    ir::Operation* f = build_kernel(m, "k", {{"n", Type::lane(DType::int64)}});
    ir::OpBuilder b(ir::function_body(*f));
    Value* inner = nullptr;
    Value* zero = build_int(b, 0);
    build_for(b, zero, ir::function_body(*f).argument(0), zero, {}, [&](ir::OpBuilder& body, auto) {
      inner = build_int(body, 7);
      return std::vector<Value*>{};
    });
    build(b, "tile.neg", {inner});
    finish_kernel(*f);
    ir::verify(m);
    ADD_FAILURE() << "expected a dominance error";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("used before it is defined"), std::string::npos) << e.message();
  }
  // Outer values are visible inside regions.
  EXPECT_NO_THROW(verify_text(
      "  %0 = tile.const {policy = policy<int64>, value = 1} : lane<int64>\n"
      "  tile.for %0, %n, %0 {\n    ^(%i: lane<int64>):\n    %1 = tile.add %i, %n : lane<int64>\n    tile.yield\n  }"));
  // A region not ending in its terminator; a yield at function level; a condition in a for.
  EXPECT_EQ(code_of([&] {
              verify_text(
                  "  %0 = tile.const {policy = policy<int64>, value = 1} : lane<int64>\n"
                  "  tile.for %0, %n, %0 {\n    ^(%i: lane<int64>):\n    %1 = tile.add %i, %n : lane<int64>\n  }");
            }),
            ErrorCode::VerifyFailed);
  EXPECT_EQ(code_of([&] {
              verify_text(
                  "  %0 = tile.const {policy = policy<bool>, value = true} : lane<bool>\n"
                  "  tile.for %n, %n, %n {\n    ^(%i: lane<int64>):\n    tile.condition %0\n  }");
            }),
            ErrorCode::VerifyFailed);
  EXPECT_EQ(code_of([&] { verify_text("  tile.for %n, %n, %n {\n    tile.yield\n  }"); }), ErrorCode::VerifyFailed);
}

}  // namespace
}  // namespace tessera::tile
