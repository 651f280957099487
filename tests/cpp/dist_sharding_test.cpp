// The partitioner and the sharding rules (tessera/dist/sharding.h): rule
// coverage of the graph dialect, uneven parts per device, sharding text in
// types, and the errors a rule gives. The per-shard programs' values are
// checked against numpy in tests/python/test_dist_jit.py; the IR in
// tests/lit/dist.
#include <gtest/gtest.h>

#include "tessera/dist/sharding.h"
#include "tessera/ir/dialect.h"
#include "tessera/ir/text.h"
#include "tessera/support/error.h"

namespace tessera::dist {
namespace {

TEST(ShardingRules, EveryGraphOpHasOne) {
  for (const ir::OpDef* def : ir::Registry::global().all()) {
    if (def->dialect() != "graph") continue;
    EXPECT_TRUE(has_sharding_rule(def->name)) << def->name << " has no sharding rule";
  }
}

TEST(ShardingRules, AnOpWithoutOneIsAnErrorNamingIt) {
  ir::Module m = ir::parse_module(R"(func @h(%x: tensor<[4] fp32>) -> (tensor<[4] fp32>) {
  %0 = graph.erf %x : tensor<[4] fp32>
  return %0
})");
  const ShardingRule saved = require_sharding_rule(*ir::function_body(*m.lookup("h")).ops().front());
  register_sharding_rule("graph.erf", {});  // what a family that forgot its rule looks like
  MeshView mesh{{"tp"}, {2}, {0}};
  try {
    partition(m, "h", mesh, {ir::Sharding::replicated(1)}, "h.shard");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("no sharding rule for op 'graph.erf'"), std::string::npos) << e.message();
  }
  register_sharding_rule("graph.erf", saved);
}

TEST(ShardingText, RoundTripsThroughTypes) {
  ir::Type t = ir::parse_type("tensor<[8, 4] bf16 @accum(fp32) shard[tp, -] partial(dp, pp)>");
  ASSERT_TRUE(t.sharding.has_value());
  EXPECT_EQ(t.sharding->dims, (std::vector<std::string>{"tp", ""}));
  EXPECT_EQ(t.sharding->partial, (std::vector<std::string>{"dp", "pp"}));
  EXPECT_EQ(ir::print_type(t), "tensor<[8, 4] bf16 @accum(fp32) shard[tp, -] partial(dp, pp)>");
  EXPECT_EQ(t.unsharded(), ir::parse_type("tensor<[8, 4] bf16 @accum(fp32)>"));
  EXPECT_THROW(ir::parse_type("tensor<[8, 4] fp32 shard[tp]>"), Error);         // rank 1 for rank 2
  EXPECT_THROW(ir::parse_type("tensor<[8, 4] fp32 shard[tp, 3]>"), Error);      // not an axis name
  EXPECT_THROW(ir::parse_type("tensor<[8, 4] fp32 partial(dp)>"), Error);       // partial without shard
  EXPECT_THROW(ir::parse_type("gmem<[8, 4] fp32 shard[tp, -]>"), Error);        // tensors only
}

TEST(Partition, UnevenPartsGiveEachDeviceItsOwnShapes) {
  ir::Module m = ir::parse_module(R"(func @f(%x: tensor<[4, 10] fp32>) -> (tensor<[4, 10] fp32>) {
  %0 = graph.exp %x : tensor<[4, 10] fp32>
  return %0
})");
  Mesh mesh({"cpu:0", "cpu:1", "cpu:2"}, {"tp"}, {3});
  ir::Sharding cols{{"", "tp"}, {}};
  MeshPartition p = partition_mesh(m, "f", mesh, {cols});
  // 10 over 3: 4, 3, 3 (numpy.array_split): two distinct functions.
  ASSERT_EQ(p.functions.size(), 2u);
  EXPECT_EQ(p.function_of_rank, (std::vector<std::size_t>{0, 1, 1}));
  EXPECT_NE(ir::print_function(*m.lookup(p.functions[0])).find("tensor<[4, 4] fp32 @accum(fp32) shard[-, tp]>"),
            std::string::npos);
  EXPECT_NE(ir::print_function(*m.lookup(p.functions[1])).find("tensor<[4, 3] fp32 @accum(fp32) shard[-, tp]>"),
            std::string::npos);
  EXPECT_EQ(p.results[0], cols);
}

// graph.fft (library_sharding.cpp): other dims keep their split, the
// transformed axis is gathered whole.
TEST(Partition, FftKeepsOtherSplitsAndGathersItsAxis) {
  const char* text = R"(func @f(%x: tensor<[4, 8] complex64>) -> (tensor<[4, 8] complex64>) {
  %0 = graph.fft %x {axis = 1, n = 8} : tensor<[4, 8] complex64>
  return %0
})";
  Mesh mesh({"cpu:0", "cpu:1"}, {"tp"}, {2});
  const ir::Sharding rows{{"tp", ""}, {}};
  ir::Module m1 = ir::parse_module(text);
  MeshPartition kept = partition_mesh(m1, "f", mesh, {rows});
  EXPECT_EQ(kept.results[0], rows);
  const std::string rows_text = ir::print_function(*m1.lookup(kept.functions[0]));
  EXPECT_EQ(rows_text.find("graph.all_gather"), std::string::npos) << rows_text;
  ir::Module m2 = ir::parse_module(text);
  MeshPartition gathered = partition_mesh(m2, "f", mesh, {ir::Sharding{{"", "tp"}, {}}});
  EXPECT_EQ(gathered.results[0], ir::Sharding::replicated(2));
  const std::string cols_text = ir::print_function(*m2.lookup(gathered.functions[0]));
  EXPECT_NE(cols_text.find("graph.all_gather"), std::string::npos) << cols_text;
}

TEST(Partition, LayoutsWithSeveralAxesPerDimOrCyclicSplitsAreRefused) {
  Mesh mesh({"cpu:0", "cpu:1", "cpu:2", "cpu:3"}, {"dp", "tp"}, {2, 2});
  Layout both = Layout::resolve(ShardSpec{{"row", "row"}, {"dp", "tp"}, {}, 0}, 2, mesh);
  EXPECT_THROW(sharding_of(both, "x"), Error);
  Layout cyclic = Layout::resolve(ShardSpec{{"row"}, {"tp"}, {}, 2}, 2, mesh);
  EXPECT_THROW(sharding_of(cyclic, "x"), Error);
  Layout ok = Layout::resolve(ShardSpec{{"col"}, {"tp"}, {"dp"}, 0}, 2, mesh);
  EXPECT_EQ(ir::print_sharding(sharding_of(ok, "x")), "shard[-, tp] partial(dp)");
  EXPECT_EQ(layout_of(sharding_of(ok, "x"), mesh), ok);
}

}  // namespace
}  // namespace tessera::dist
