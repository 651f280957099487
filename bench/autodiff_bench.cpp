// Autodiff cost: the time to build the backward graph (value_and_grad_function,
// which includes verifying the new function and removing dead ops) of a
// 1,000-op forward graph, and the ratio of backward to forward op counts for
// an MLP (2 layers, gelu, softmax cross-entropy) and an attention block
// (gemm, softmax_safe, gemm). Prints a table.
//
// Op counts: forward = the function's ops (constants included, `return`
// excluded); backward = the ops the transformed function has beyond its copy
// of the forward ones.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "tessera/autodiff/autodiff.h"
#include "tessera/ir/builder.h"
#include "tessera/ir/verifier.h"

namespace {

using namespace tessera;
using Values = std::vector<ir::Value*>;

ir::Type ty(ir::Shape shape, const char* policy = "fp32") {
  return ir::Type::tensor(std::move(shape), parse_policy(policy));
}
ir::Shape fixed(std::vector<std::int64_t> s) {
  return ir::fixed_shape(s);
}

ir::Value* op(ir::OpBuilder& b, const char* name, Values operands, ir::AttrMap attrs = {}) {
  return b.create(name, std::move(operands), std::move(attrs))->result();
}

const ir::Operation& add_function(ir::Module& m, const std::string& name, const std::vector<ir::Type>& params,
                                  const std::function<Values(ir::OpBuilder&, const Values&)>& body) {
  auto f = ir::make_function(name);
  ir::Block& block = ir::function_body(*f);
  Values args;
  for (std::size_t i = 0; i < params.size(); ++i)
    args.push_back(block.add_argument(params[i], "p" + std::to_string(i)));
  ir::OpBuilder b(block);
  b.create("return", body(b, args));
  ir::verify_function(*f);
  return *m.add_function(std::move(f));
}

std::size_t ops_of(const ir::Operation& f) {
  return ir::function_body(f).ops().size() - 1;  // without the return
}

// A chain of 999 elementwise ops on [B, 256] fp32 (mul/add with a parameter,
// tanh, sigmoid, x*x in turn) and a final sum: 1,000 ops.
const ir::Operation& chain(ir::Module& m) {
  ir::Type t = ty({ir::Dim::named("B"), ir::Dim::fixed(256)});
  return add_function(m, "chain", {t, t}, [](ir::OpBuilder& b, const Values& a) {
    ir::Value* h = a[0];
    for (int i = 0; i < 999; ++i) {
      switch (i % 5) {
        case 0: h = op(b, "graph.mul", {h, a[1]}); break;
        case 1: h = op(b, "graph.add", {h, a[1]}); break;
        case 2: h = op(b, "graph.tanh", {h}); break;
        case 3: h = op(b, "graph.sigmoid", {h}); break;
        default: h = op(b, "graph.mul", {h, h}); break;
      }
    }
    return Values{op(b, "graph.sum", {h})};
  });
}

// loss = mean(logsumexp(z) - sum(onehot * z)), z = gelu(x W1 + b1) W2 + b2.
const ir::Operation& mlp(ir::Module& m) {
  return add_function(
      m, "mlp",
      {ty(fixed({32, 64})), ty(fixed({64, 128})), ty(fixed({128})), ty(fixed({128, 10})), ty(fixed({10})),
       ty(fixed({32, 10}))},
      [](ir::OpBuilder& b, const Values& a) {
        ir::Value* h = op(b, "graph.gelu", {op(b, "graph.add", {op(b, "graph.gemm", {a[0], a[1]}), a[2]})});
        ir::Value* z = op(b, "graph.add", {op(b, "graph.gemm", {h, a[3]}), a[4]});
        ir::Value* lse = op(b, "graph.logsumexp", {z});
        ir::Value* picked =
            op(b, "graph.sum", {op(b, "graph.mul", {a[5], z})}, ir::AttrMap{{"axes", std::vector<std::int64_t>{-1}}});
        return Values{op(b, "graph.mean", {op(b, "graph.sub", {lse, picked})})};
      });
}

// out = softmax_safe(q k^T / sqrt(d)) v
const ir::Operation& attention(ir::Module& m) {
  ir::Type t = ty(fixed({4, 16, 32}));
  return add_function(m, "attention", {t, t, t}, [](ir::OpBuilder& b, const Values& a) {
    ir::Value* s = op(b, "graph.gemm", {a[0], a[1]}, ir::AttrMap{{"transpose_b", true}});
    ir::Value* scale =
        op(b, "graph.constant", {},
           ir::AttrMap{{"value", std::vector<double>{0.125}}, {"shape", fixed({})}, {"policy", parse_policy("fp32")}});
    ir::Value* p = op(b, "graph.softmax_safe", {op(b, "graph.mul", {s, scale})});
    return Values{op(b, "graph.gemm", {p, a[2]})};
  });
}

std::vector<int> all_params(const ir::Operation& f) {
  std::vector<int> wrt;
  for (std::size_t i = 0; i < ir::function_body(f).num_arguments(); ++i) wrt.push_back(static_cast<int>(i));
  return wrt;
}

// Median wall time (ms) of building value_and_grad of a fresh 1,000-op chain.
double build_time_ms(int reps, std::size_t* fwd, std::size_t* bwd) {
  std::vector<double> times;
  for (int r = 0; r < reps; ++r) {
    ir::Module m;
    const auto& f = chain(m);
    auto t0 = std::chrono::steady_clock::now();
    const auto& g = autodiff::value_and_grad_function(m, f, all_params(f), "chain_grad");
    auto t1 = std::chrono::steady_clock::now();
    times.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    *fwd = ops_of(f);
    *bwd = ops_of(g) - ops_of(f);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

void row(const char* name, std::size_t fwd, std::size_t bwd) {
  std::printf("%-40s %8zu %9zu %8.2f\n", name, fwd, bwd, static_cast<double>(bwd) / static_cast<double>(fwd));
}

}  // namespace

int main() {
  std::size_t fwd = 0, bwd = 0;
  double ms = build_time_ms(9, &fwd, &bwd);
  std::printf(
      "backward graph of a %zu-op forward graph ([B, 256] fp32 chain): %.2f ms to build "
      "(median of 9; %zu backward ops)\n\n",
      fwd, ms, bwd);
  std::printf("%-40s %8s %9s %8s\n", "function", "fwd ops", "bwd ops", "bwd/fwd");
  row("1,000-op elementwise chain (grad)", fwd, bwd);
  {
    ir::Module m;
    const auto& f = mlp(m);
    const auto& g = autodiff::value_and_grad_function(m, f, {1, 2, 3, 4}, "mlp_grad");
    row("MLP 2 layers, gelu, softmax CE (grad W,b)", ops_of(f), ops_of(g) - ops_of(f));
  }
  {
    ir::Module m;
    const auto& f = attention(m);
    const auto& g = autodiff::vjp_function(m, f, all_params(f), "attention_vjp");
    row("attention gemm/softmax/gemm (vjp q,k,v)", ops_of(f), ops_of(g) - ops_of(f));
  }
  return 0;
}
