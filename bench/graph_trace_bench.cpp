// Graph IR construction cost, as a tracer pays it: building a 1,000-op
// function with OpBuilder and verifying it, printing and parsing it back,
// and running cse + dce over it.
//
// The function is a chain of elementwise ops on tensor<[B, 256] bf16
// @accum(fp32)> (add, mul, neg, sub, maximum in turn). Every sixth op
// repeats the previous op exactly and every seventh computes a value nothing
// uses, so cse and dce have work to do. Times are per 1,000-op function.
#include <benchmark/benchmark.h>

#include <string>

#include "tessera/ir/builder.h"
#include "tessera/ir/pass.h"
#include "tessera/ir/text.h"
#include "tessera/ir/verifier.h"

namespace {

using namespace tessera;

constexpr int kOps = 1000;

ir::Module build_chain() {
  ir::Type t = ir::Type::tensor({ir::Dim::named("B"), ir::Dim::fixed(256)}, parse_policy("bf16 @accum(fp32)"));
  ir::Module m;
  auto f = ir::make_function("chain");
  ir::Block& body = ir::function_body(*f);
  ir::Value* x = body.add_argument(t, "x");
  ir::Value* y = body.add_argument(t, "y");
  ir::OpBuilder b(body);
  static const char* const kNames[] = {"graph.add", "graph.mul", "graph.neg", "graph.sub", "graph.maximum"};
  ir::Value* v = x;
  ir::Operation* last = nullptr;
  for (int i = 0; i < kOps; ++i) {
    if (i % 6 == 5 && last) {
      // An exact duplicate of the previous op (cse merges it).
      v = b.create(last->def(), last->operands(), last->attrs())->result();
      continue;
    }
    const char* name = kNames[i % 5];
    std::vector<ir::Value*> operands =
        name == std::string("graph.neg") ? std::vector<ir::Value*>{v} : std::vector<ir::Value*>{v, i % 2 ? x : y};
    last = b.create(name, operands);
    // Every seventh result is left unused (dce erases it).
    if (i % 7 != 6) v = last->result();
  }
  b.create("return", {v});
  m.add_function(std::move(f));
  return m;
}

void BM_build_and_verify(benchmark::State& state) {
  for (auto _ : state) {
    ir::Module m = build_chain();
    ir::verify(m);
    benchmark::DoNotOptimize(m.functions().data());
  }
  state.SetItemsProcessed(state.iterations() * kOps);
}

void BM_print_parse_round_trip(benchmark::State& state) {
  ir::Module m = build_chain();
  std::size_t bytes = 0;
  for (auto _ : state) {
    std::string text = ir::print_module(m);
    ir::Module back = ir::parse_module(text);
    bytes = text.size();
    benchmark::DoNotOptimize(back.functions().data());
  }
  state.SetItemsProcessed(state.iterations() * kOps);
  state.counters["text_bytes"] = static_cast<double>(bytes);
}

void BM_cse_dce(benchmark::State& state) {
  const ir::PassInfo& cse = ir::lookup_pass("cse");
  const ir::PassInfo& dce = ir::lookup_pass("dce");
  std::size_t left = 0;
  for (auto _ : state) {
    state.PauseTiming();
    ir::Module m = build_chain();
    state.ResumeTiming();
    cse.run(m);
    dce.run(m);
    left = ir::function_body(*m.functions()[0]).ops().size();
  }
  state.SetItemsProcessed(state.iterations() * kOps);
  state.counters["ops_left"] = static_cast<double>(left);
}

BENCHMARK(BM_build_and_verify)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_print_parse_round_trip)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_cse_dce)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
