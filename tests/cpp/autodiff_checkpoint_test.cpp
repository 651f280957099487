// Checkpointing (`call {remat = true}`): a 16-layer MLP differentiated with
// every layer checkpointed gives bit-identical gradients (and second
// derivatives equal up to fp32 summation order) to the same MLP
// written inline, while the reference executor's peak live bytes drop
// (the figure is printed). The backward graph recomputes each layer.
#include <algorithm>

#include "autodiff_test_util.h"

namespace {

using namespace adtest;

constexpr int kLayers = 16;
constexpr std::int64_t kBatch = 128, kWidth = 64;

// h' = gelu(h @ W + b): the backward pass needs the pre-activation, which
// checkpointing does not keep.
ir::Value* layer(ir::OpBuilder& b, ir::Value* h, ir::Value* w, ir::Value* bias) {
  return op(b, "graph.gelu", {op(b, "graph.add", {op(b, "graph.gemm", {h, w}), bias})});
}

std::vector<ir::Type> mlp_params() {
  std::vector<ir::Type> p{ty({kBatch, kWidth}, "fp32")};
  for (int i = 0; i < kLayers; ++i) {
    p.push_back(ty({kWidth, kWidth}, "fp32"));
    p.push_back(ty({kWidth}, "fp32"));
  }
  return p;
}

// loss = mean(h_16^2); with `remat` each layer is a checkpointed call of @layer.
const ir::Operation& build_mlp(ir::Module& m, bool remat) {
  const ir::Operation* layer_fn = nullptr;
  if (remat) {
    layer_fn =
        &add_function(m, "layer", {ty({kBatch, kWidth}, "fp32"), ty({kWidth, kWidth}, "fp32"), ty({kWidth}, "fp32")},
                      [](ir::OpBuilder& b, const Values& a) { return Values{layer(b, a[0], a[1], a[2])}; });
  }
  return add_function(m, "mlp", mlp_params(), [&](ir::OpBuilder& b, const Values& a) {
    ir::Value* h = a[0];
    for (int i = 0; i < kLayers; ++i) {
      ir::Value* w = a[static_cast<std::size_t>(1 + 2 * i)];
      ir::Value* bias = a[static_cast<std::size_t>(2 + 2 * i)];
      h = remat ? autodiff::create_call(b, *layer_fn, {h, w, bias}, ir::AttrMap{{"remat", true}})->result()
                : layer(b, h, w, bias);
    }
    return Values{op(b, "graph.mean", {op(b, "graph.mul", {h, h})})};
  });
}

Tensors mlp_inputs() {
  std::mt19937_64 gen(run_seed());
  std::normal_distribution<double> normal(0.0, 1.0);
  Tensors args;
  for (const ir::Type& t : mlp_params()) {
    std::vector<double> v(static_cast<std::size_t>(numel(sizes(t))));
    double scale = t.rank() == 2 && t.shape[0].size == kWidth ? 1.0 / 8.0 : 0.5;  // keep activations O(1)
    for (double& e : v) e = normal(gen) * scale;
    args.push_back(Tensor::from_values(v, sizes(t), t.policy));
  }
  return args;
}

std::vector<int> all_params() {
  std::vector<int> wrt;
  for (int i = 0; i < 1 + 2 * kLayers; ++i) wrt.push_back(i);
  return wrt;
}

int count_ops(const ir::Operation& f, std::string_view name) {
  int n = 0;
  for (const auto& o : ir::function_body(f).ops()) n += o->name() == name;
  return n;
}

TEST(AutodiffCheckpoint, SameGradientsLowerPeakLiveBytes) {
  ir::Module plain, remat;
  const auto& gp = autodiff::value_and_grad_function(plain, build_mlp(plain, false), all_params(), "grad");
  const auto& gr = autodiff::value_and_grad_function(remat, build_mlp(remat, true), all_params(), "grad");
  // The forward keeps 16 calls; the backward recomputes each layer's gemm
  // and add (the gelu itself is dead: its derivative reads its input).
  EXPECT_EQ(count_ops(gr, "call"), kLayers);
  EXPECT_EQ(count_ops(gp, "call"), 0);
  EXPECT_EQ(count_ops(gr, "graph.gemm"), count_ops(gp, "graph.gemm"));
  EXPECT_EQ(count_ops(gr, "graph.gelu"), 0);

  Tensors args = mlp_inputs();
  graph::ExecutionStats sp, sr;
  Tensors a = graph::execute(plain, gp, args, &sp);
  Tensors b = graph::execute(remat, gr, args, &sr);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].codes(), b[i].codes()) << "output " << i;
  std::cout << "[checkpoint] 16-layer MLP (batch " << kBatch << ", width " << kWidth << ", fp32): peak live bytes "
            << sp.peak_live_bytes << " without checkpointing, " << sr.peak_live_bytes
            << " with every layer checkpointed ("
            << 100.0 * static_cast<double>(sr.peak_live_bytes) / static_cast<double>(sp.peak_live_bytes)
            << "%); ops run " << sp.ops_executed << " vs " << sr.ops_executed << "\n";
  ::testing::Test::RecordProperty("peak_live_bytes_plain", std::to_string(sp.peak_live_bytes));
  ::testing::Test::RecordProperty("peak_live_bytes_checkpointed", std::to_string(sr.peak_live_bytes));
  EXPECT_LT(sr.peak_live_bytes, sp.peak_live_bytes * 3 / 4);
  EXPECT_GT(sr.ops_executed, sp.ops_executed);  // the price: recomputation
}

TEST(AutodiffCheckpoint, ForwardModeThroughRematCallsMatchesInline) {
  ir::Module plain, remat;
  const auto& jp = autodiff::jvp_function(plain, build_mlp(plain, false), "jvp");
  const auto& jr = autodiff::jvp_function(remat, build_mlp(remat, true), "jvp");
  Tensors args = mlp_inputs();
  Tensors in = args;
  for (const Tensor& t : args) in.push_back(t);  // tangents = primals
  Tensors a = graph::execute(plain, jp, in);
  Tensors b = graph::execute(remat, jr, in);
  EXPECT_EQ(a[1].codes(), b[1].codes());
}

TEST(AutodiffCheckpoint, SecondOrderThroughRematCallsMatchesInline) {
  // A Hessian-vector product: the VJP of value_and_grad with respect to W0.
  ir::Module plain, remat;
  Tensors outs[2];
  int k = 0;
  for (ir::Module* m : {&plain, &remat}) {
    const auto& g = autodiff::value_and_grad_function(*m, build_mlp(*m, m == &remat), {1}, "grad");
    const auto& h = autodiff::vjp_function(*m, g, {1}, "hvp");
    Tensors in = mlp_inputs();
    in.push_back(Tensor::scalar(0.0, default_policy(DType::fp32)));  // no cotangent on the loss
    in.push_back(in[1]);                                             // the vector: W0 itself
    outs[k++] = graph::execute(*m, h, in);
  }
  // Equal up to fp32 summation order: second order sums contributions that
  // reach W0 through the forward copy and through the recomputation separately.
  ASSERT_EQ(outs[0].size(), 3u);
  auto a = outs[0][2].to_values(), b = outs[1][2].to_values();
  double scale = 0, diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    scale = std::max(scale, std::fabs(a[i]));
    diff = std::max(diff, std::fabs(a[i] - b[i]));
  }
  EXPECT_GT(scale, 0.0);
  EXPECT_LE(diff, 1e-5 * scale) << "max difference " << diff << " of values up to " << scale;
}

}  // namespace
