// Tile IR analyses and passes on IR built with the tile builder API:
// uniformity, tile-verify-sync, tile-plan-shared and tile-pipeline.
#include <gtest/gtest.h>

#include "tessera/ir/pass.h"
#include "tessera/ir/text.h"
#include "tessera/ir/verifier.h"
#include "tessera/support/error.h"
#include "tessera/tile/passes.h"
#include "tessera/tile/tile_builder.h"
#include "tessera/tile/tile_dialect.h"
#include "tessera/tile/uniformity.h"

namespace tessera::tile {
namespace {

using ir::Type;
using ir::Value;

const NumericsPolicy kF32 = default_policy(DType::fp32);

Value* smem(ir::OpBuilder& b, std::int64_t n) {
  return build(b, "tile.smem_alloc", {}, {{"shape", ir::fixed_shape({n})}, {"policy", kF32}});
}

TEST(Uniformity, SourcesAndPropagation) {
  ir::Module m;
  ir::Operation* k =
      build_kernel(m, "k", {{"n", Type::lane(DType::int64)}, {"x", Type::gmem({ir::Dim::named("n")}, kF32)}},
                   {.group_shape = std::vector<std::int64_t>{4, 8}});
  EXPECT_EQ(group_tile_count(*k), 32);
  ir::OpBuilder b(ir::function_body(*k));
  Value* n = ir::function_body(*k).argument(0);
  Value* i = build(b, "tile.linear_id", {});
  Value* g = build(b, "tile.group_id", {});
  Value* gi = build(b, "tile.add", {g, n});
  Value* li = build(b, "tile.add", {g, i});
  Value* xu = build(b, "tile.load_elem", {ir::function_body(*k).argument(1), gi});  // read-only, uniform index
  Value* xd = build(b, "tile.load_elem", {ir::function_body(*k).argument(1), li});
  Value* zero = build_int(b, 0);
  Value* one = build_int(b, 1);
  // A loop carrying one value that becomes divergent in its body, one that stays uniform.
  ir::Operation* loop = build_for(b, zero, n, one, {zero, zero}, [&](ir::OpBuilder& body, std::span<Value* const> a) {
    return std::vector<Value*>{build(body, "tile.add", {a[1], i}), build(body, "tile.add", {a[2], a[0]})};
  });
  Value* c = build(b, "tile.cmp", {i, n}, {{"pred", std::string("lt")}});
  ir::Operation* branch = build_if(
      b, c, {zero},
      [&](ir::OpBuilder& t, auto) {
        t.create("tile.barrier", {});
        return std::vector<Value*>{one};
      },
      [&](ir::OpBuilder&, auto) { return std::vector<Value*>{one}; });
  finish_kernel(*k);
  ir::verify(m);

  UniformityAnalysis ua(*k);
  EXPECT_FALSE(ua.is_uniform(i));
  EXPECT_TRUE(ua.is_uniform(g));
  EXPECT_TRUE(ua.is_uniform(gi));
  EXPECT_FALSE(ua.is_uniform(li));
  EXPECT_TRUE(ua.is_uniform(xu));
  EXPECT_FALSE(ua.is_uniform(xd));
  EXPECT_FALSE(ua.is_uniform(loop->result(0)));
  EXPECT_FALSE(ua.is_uniform(loop->region(0).block().argument(1)));  // via the back edge
  EXPECT_TRUE(ua.is_uniform(loop->result(1)));
  EXPECT_TRUE(ua.is_uniform(loop->region(0).block().argument(0)));
  EXPECT_TRUE(ua.regions_uniform(*loop));
  // Both branches yield the same constant, but the condition diverges.
  EXPECT_FALSE(ua.is_uniform(branch->result(0)));
  EXPECT_FALSE(ua.regions_uniform(*branch));
  const ir::Operation& barrier = *branch->region(0).block().ops().front();
  EXPECT_FALSE(ua.in_uniform_control(barrier));
  EXPECT_NE(ua.why_divergent(c).find("tile.linear_id"), std::string::npos);
  try {
    verify_sync(*k);
    ADD_FAILURE() << "expected a KernelTypeError";
  } catch (const KernelTypeError& e) {
    EXPECT_NE(e.message().find("'tile.barrier' is group-cooperative"), std::string::npos) << e.message();
  }

  // With one tile per group everything is uniform and the barrier is legal.
  k->attrs().erase("group_shape");
  UniformityAnalysis single(*k);
  EXPECT_TRUE(single.is_uniform(i));
  EXPECT_TRUE(single.in_uniform_control(barrier));
  EXPECT_NO_THROW(verify_sync(*k));
}

TEST(Uniformity, LoadsOfWrittenBuffersAreDivergent) {
  ir::Module m;
  ir::Operation* k = build_kernel(m, "k", {{"y", Type::gmem({ir::Dim::named("n")}, kF32, true)}},
                                  {.group_shape = std::vector<std::int64_t>{8}});
  ir::OpBuilder b(ir::function_body(*k));
  Value* zero = build_int(b, 0);
  Value* s = smem(b, 8);
  Value* t = smem(b, 8);
  Value* i = build(b, "tile.linear_id", {});
  Value* v = build(b, "tile.load_elem", {s, zero});
  b.create("tile.store_elem", {s, i, v});
  Value* w = build(b, "tile.load_elem", {t, zero});
  Value* y0 = build(b, "tile.load_elem", {ir::function_body(*k).argument(0), zero});
  b.create("tile.store_elem", {ir::function_body(*k).argument(0), i, w});
  finish_kernel(*k);
  UniformityAnalysis ua(*k);
  EXPECT_FALSE(ua.is_uniform(v));   // s is written by the tiles
  EXPECT_TRUE(ua.is_uniform(w));    // t never is
  EXPECT_FALSE(ua.is_uniform(y0));  // y is written
}

TEST(PlanShared, OffsetsReuseAndBudget) {
  ir::Module m;
  ir::Operation* k = build_kernel(m, "k", {}, {.group_shape = std::vector<std::int64_t>{32}, .shared_bytes = 1024});
  ir::OpBuilder b(ir::function_body(*k));
  Value* a = smem(b, 10);  // 40 bytes
  Value* c = smem(b, 40);  // 160 bytes: offset 128 (40 rounded up)
  build(b, "tile.reduce_sum", {a});
  Value* d = smem(b, 64);  // 256 bytes; a is dead but c is live, and 256 bytes do not fit below c
  build(b, "tile.reduce_sum", {c});
  build(b, "tile.reduce_sum", {d});
  finish_kernel(*k);
  EXPECT_EQ(plan_shared(*k), 640);  // d at 384: c ends at 288, rounded up to 128
  EXPECT_EQ(a->defining_op()->attrs().get_int("offset"), 0);
  EXPECT_EQ(c->defining_op()->attrs().get_int("offset"), 128);
  EXPECT_EQ(d->defining_op()->attrs().get_int("offset"), 384);
  EXPECT_EQ(k->attrs().get_int("shared_used"), 640);
  ir::verify(m);

  k->attrs().set("shared_bytes", std::int64_t{600});
  try {
    plan_shared(*k);
    ADD_FAILURE() << "expected a budget error";
  } catch (const CompileError& e) {
    EXPECT_NE(e.message().find("of 256 bytes needs shared memory up to byte 640"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("budget is 600 bytes"), std::string::npos) << e.message();
  }
}

TEST(PlanShared, SymbolicShapeNeedsSpecialization) {
  ir::Module m;
  ir::Operation* k = build_kernel(m, "k", {});
  ir::OpBuilder b(ir::function_body(*k));
  build(b, "tile.smem_alloc", {}, {{"shape", ir::Shape{ir::Dim::named("BM")}}, {"policy", kF32}});
  finish_kernel(*k);
  EXPECT_THROW(plan_shared(*k), CompileError);
}

// A 1-D chunked sum: for t in range(0, m, 4, prefetch=N): copy x[t:t+4] to s, wait, barrier, acc += sum(s).
ir::Operation* chunked(ir::Module& m, std::int64_t prefetch) {
  ir::Operation* k = build_kernel(m, "chunks", {{"x", Type::gmem({ir::Dim::named("m")}, kF32)}},
                                  {.group_shape = std::vector<std::int64_t>{4}});
  ir::OpBuilder b(ir::function_body(*k));
  Value* x = ir::function_body(*k).argument(0);
  Value* s = smem(b, 4);
  Value* zero = build_int(b, 0);
  Value* four = build_int(b, 4);
  Value* hi = build(b, "tile.symbol", {}, {{"name", std::string("m")}});
  Value* acc0 = build_real(b, 0.0, kF32);
  build_for(b, zero, hi, four, {acc0},
            [&](ir::OpBuilder& body, std::span<Value* const> a) {
              body.create("tile.cp_async", {s, x, a[0]});
              body.create("tile.cp_async_wait", {}, {{"pending", std::int64_t{0}}});
              body.create("tile.barrier", {});
              Value* r = build(body, "tile.reduce_sum", {s});
              body.create("tile.barrier", {});
              return std::vector<Value*>{build(body, "tile.add", {a[1], r})};
            },
            prefetch, {"t", "acc"});
  finish_kernel(*k);
  return k;
}

int count_ops(const ir::Block& block, std::string_view name) {
  int n = 0;
  for (const auto& op : block.ops()) {
    n += op->name() == name;
    for (std::size_t r = 0; r < op->num_regions(); ++r) n += count_ops(op->region(r).block(), name);
  }
  return n;
}

TEST(Pipeline, ThreeStages) {
  ir::Module m;
  ir::Operation* k = chunked(m, 3);
  EXPECT_EQ(pipeline_loops(*k), 1);
  ir::verify(m);
  EXPECT_NO_THROW(verify_sync(*k));
  const ir::Block& body = ir::function_body(*k);
  // Three buffers; two prologue copies + three in the unrolled body.
  EXPECT_EQ(count_ops(body, "tile.smem_alloc"), 3);
  EXPECT_EQ(count_ops(body, "tile.cp_async"), 5);
  EXPECT_EQ(count_ops(body, "tile.reduce_sum"), 3);
  // Two guarded sub-iterations.
  EXPECT_EQ(count_ops(body, "tile.if"), 2);
  const ir::Operation* loop = nullptr;
  for (const auto& op : body.ops()) {
    if (op->name() == "tile.for") loop = op.get();
  }
  ASSERT_NE(loop, nullptr);
  EXPECT_FALSE(loop->attrs().has("prefetch"));
  // Every wait in the loop is relaxed to N-1 = 2; the epilogue waits for all.
  int relaxed = 0;
  std::function<void(const ir::Block&)> scan = [&](const ir::Block& blk) {
    for (const auto& op : blk.ops()) {
      if (op->name() == "tile.cp_async_wait") {
        EXPECT_EQ(op->attrs().get_int("pending"), 2);
        ++relaxed;
      }
      for (std::size_t r = 0; r < op->num_regions(); ++r) scan(op->region(r).block());
    }
  };
  scan(loop->region(0).block());
  EXPECT_EQ(relaxed, 3);
  auto after = std::next(const_cast<ir::Block&>(body).find(loop));
  EXPECT_EQ((*after)->name(), "tile.cp_async_wait");
  EXPECT_EQ((*after)->attrs().get_int("pending"), 0);
  EXPECT_EQ((*std::next(after))->name(), "tile.barrier");
  // Printing and parsing the result gives the same text.
  std::string text = ir::print_module(m);
  EXPECT_EQ(ir::print_module(ir::parse_module(text)), text);
}

TEST(Pipeline, UnsupportedLoopsGetRemarks) {
  ir::Module m;
  ir::Operation* k = chunked(m, 1);
  std::string before = ir::print_module(m);
  EXPECT_EQ(pipeline_loops(*k), 0);
  std::string after = ir::print_module(m);
  EXPECT_NE(after.find("remark = \"not pipelined: prefetch = 1"), std::string::npos) << after;
  // Apart from the remark, nothing changed.
  std::string stripped = after;
  auto at = stripped.find(", remark = ");
  stripped.erase(at, stripped.find('}', at) - at);
  EXPECT_EQ(stripped, before);
}

TEST(Pipeline, RegisteredPassesRunThroughThePassManager) {
  ir::Module m;
  chunked(m, 2);
  ir::PassManager pm;
  pm.add("tile-pipeline");
  pm.add("tile-verify-sync");
  pm.add("tile-plan-shared");
  pm.run(m);
  EXPECT_EQ(m.functions()[0]->attrs().get_int("shared_used"), 128 + 16);  // two 16-byte buffers, 128-aligned
}

}  // namespace
}  // namespace tessera::tile
