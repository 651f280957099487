// Table-driven gradient test over every differentiable Graph IR op: for each
// case a one-op function is built, jvp_function and vjp_function are applied
// and run in fp64 on fresh random inputs (seed printed), and the results are
// compared with float64 central differences computed here. Second order:
// the VJP of the VJP and the JVP of the VJP against central differences of
// the first derivatives. A coverage test makes sure every registered graph op
// has both rules and is either in the table or declared non-differentiable.
#include <set>

#include "autodiff_test_util.h"

namespace {

using namespace adtest;

using Gen = std::function<Tensor(std::mt19937_64&)>;
struct Arg {
  ir::Type type;
  Gen gen;  // nullptr: normal(0, 1)
};
struct Case {
  std::string label;
  std::string op;
  std::vector<Arg> args;
  ir::AttrMap attrs;
  double tol = 1e-6;
  bool second_order = true;
};

constexpr double kStep = 1e-5;

Gen uniform(double lo, double hi, std::vector<std::int64_t> shape, bool random_sign = false) {
  return [=](std::mt19937_64& g) {
    std::uniform_real_distribution<double> u(lo, hi);
    std::bernoulli_distribution coin(0.5);
    std::vector<double> v(static_cast<std::size_t>(numel(shape)));
    for (double& x : v) x = u(g) * (random_sign && coin(g) ? -1.0 : 1.0);
    return f64(v, shape);
  };
}
Gen indices(std::int64_t lo, std::int64_t hi, std::vector<std::int64_t> shape) {
  return [=](std::mt19937_64& g) {
    std::uniform_int_distribution<std::int64_t> u(lo, hi - 1);
    std::vector<double> v(static_cast<std::size_t>(numel(shape)));
    for (double& x : v) x = static_cast<double>(u(g));
    return Tensor::from_values(v, shape, default_policy(DType::int64));
  };
}
Gen booleans(std::vector<std::int64_t> shape) {
  return [=](std::mt19937_64& g) {
    std::bernoulli_distribution coin(0.5);
    std::vector<double> v(static_cast<std::size_t>(numel(shape)));
    for (double& x : v) x = coin(g) ? 1.0 : 0.0;
    return Tensor::from_values(v, shape, default_policy(DType::bool_));
  };
}
// Values spaced at least 0.3 apart (no ties for max/min), in random order.
Gen distinct(std::vector<std::int64_t> shape) {
  return [=](std::mt19937_64& g) {
    std::vector<double> v(static_cast<std::size_t>(numel(shape)));
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = 0.3 * static_cast<double>(i) - 1.0;
    std::shuffle(v.begin(), v.end(), g);
    return f64(v, shape);
  };
}

Arg x(std::vector<std::int64_t> shape, Gen gen = nullptr) {
  return Arg{ty(shape), std::move(gen)};
}

Tensors inputs_for(const std::vector<Arg>& args, std::mt19937_64& gen) {
  Tensors out;
  for (const Arg& a : args) out.push_back(a.gen ? a.gen(gen) : random_like(a.type, gen));
  return out;
}

std::vector<ir::Type> param_types(const ir::Operation& f) {
  std::vector<ir::Type> out;
  const ir::Block& b = ir::function_body(f);
  for (std::size_t i = 0; i < b.num_arguments(); ++i) out.push_back(b.argument(i)->type());
  return out;
}

// Random tensor of `t`'s tangent type (zeros in the slots of non-float values).
Tensor random_tangent(const ir::Type& t, std::mt19937_64& gen) {
  ir::Type tt = autodiff::tangent_type(t);
  if (!autodiff::tangent_policy(t)) return Tensor::zeros(sizes(tt), tt.policy);
  return random_like(tt, gen);
}

// Checks vjp_function(f) against central differences of <ct, f(x)>.
void check_vjp(ir::Module& m, const ir::Operation& f, const Tensors& x, double tol, std::mt19937_64& gen,
               const std::string& label) {
  std::vector<int> wrt;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (is_float_tensor(x[i])) wrt.push_back(static_cast<int>(i));
  }
  const auto& fv = autodiff::vjp_function(m, f, wrt, ir::function_name(f) + "_vjp");
  Tensors y = run(m, f, x);
  Tensors cts;
  for (ir::Value* r : ir::function_results(f)) cts.push_back(random_tangent(r->type(), gen));
  Tensors in = x;
  in.insert(in.end(), cts.begin(), cts.end());
  Tensors out = run(m, fv, in);
  ASSERT_EQ(out.size(), y.size() + wrt.size()) << label;
  for (std::size_t k = 0; k < wrt.size(); ++k) {
    const Tensor& xk = x[static_cast<std::size_t>(wrt[k])];
    std::vector<double> fd(static_cast<std::size_t>(xk.numel()));
    for (std::size_t j = 0; j < fd.size(); ++j) {
      Tensors plus = x, minus = x;
      plus[static_cast<std::size_t>(wrt[k])] = nudged(xk, j, kStep);
      minus[static_cast<std::size_t>(wrt[k])] = nudged(xk, j, -kStep);
      fd[j] = (weighted(run(m, f, plus), cts) - weighted(run(m, f, minus), cts)) / (2 * kStep);
    }
    const Tensor& g = out[y.size() + k];
    EXPECT_EQ(g.shape(), xk.shape()) << label;
    expect_close(g.to_values(), fd, tol, label + ": VJP of argument " + std::to_string(wrt[k]));
  }
}

// Checks jvp_function(f) against (f(x + h t) - f(x - h t)) / 2h.
void check_jvp(ir::Module& m, const ir::Operation& f, const Tensors& x, double tol, std::mt19937_64& gen,
               const std::string& label) {
  const auto& fj = autodiff::jvp_function(m, f, ir::function_name(f) + "_jvp");
  auto types = param_types(f);
  Tensors ts, plus = x, minus = x;
  for (std::size_t i = 0; i < x.size(); ++i) {
    ts.push_back(random_tangent(types[i], gen));
    if (is_float_tensor(x[i])) {
      plus[i] = axpy(x[i], kStep, ts[i]);
      minus[i] = axpy(x[i], -kStep, ts[i]);
    }
  }
  Tensors in = x;
  in.insert(in.end(), ts.begin(), ts.end());
  Tensors out = run(m, fj, in);
  Tensors yp = run(m, f, plus), ym = run(m, f, minus);
  ASSERT_EQ(out.size(), 2 * yp.size()) << label;
  for (std::size_t i = 0; i < yp.size(); ++i) {
    if (!is_float_tensor(yp[i])) continue;
    auto a = yp[i].to_values(), b = ym[i].to_values();
    for (std::size_t k = 0; k < a.size(); ++k) a[k] = (a[k] - b[k]) / (2 * kStep);
    expect_close(out[yp.size() + i].to_values(), a, tol, label + ": JVP of result " + std::to_string(i));
  }
}

void check_case(const Case& c) {
  SCOPED_TRACE(c.label);
  std::mt19937_64 gen(run_seed() ^ std::hash<std::string>{}(c.label));
  ir::Module m;
  std::vector<ir::Type> types;
  for (const Arg& a : c.args) types.push_back(a.type);
  const auto& f = add_function(
      m, "f", types, [&](ir::OpBuilder& b, const Values& args) { return b.create(c.op, args, c.attrs)->results(); });
  Tensors x = inputs_for(c.args, gen);
  check_vjp(m, f, x, c.tol, gen, c.label);
  check_jvp(m, f, x, c.tol, gen, c.label);
  if (!c.second_order) return;
  // Second order: derivatives of the VJP function (inputs: x and the cotangents).
  const ir::Operation& fv = *m.lookup("f_vjp");
  Tensors xv = x;
  for (ir::Value* r : ir::function_results(f)) xv.push_back(random_tangent(r->type(), gen));
  check_vjp(m, fv, xv, c.tol * 10, gen, c.label + " (VJP of VJP)");
  check_jvp(m, fv, xv, c.tol * 10, gen, c.label + " (JVP of VJP)");
}

ir::AttrMap attrs(std::initializer_list<std::pair<std::string, ir::Attribute>> items) {
  return ir::AttrMap(items);
}
using I = std::vector<std::int64_t>;

std::vector<Case> cases() {
  const I s23{2, 3};
  auto pos = uniform(0.5, 2.0, s23);
  auto away0 = uniform(0.2, 2.0, s23, true);
  auto near = [](std::vector<std::int64_t> shape) { return uniform(0.3, 1.0, shape, true); };
  std::vector<Case> v = {
      {"add broadcast", "graph.add", {x(s23), x({3})}},
      {"sub broadcast", "graph.sub", {x({3}), x(s23)}},
      {"mul outer", "graph.mul", {x({2, 1}), x({1, 3})}},
      {"div", "graph.div", {x(s23), x({2, 1}, uniform(0.5, 2.0, {2, 1}, true))}},
      {"pow", "graph.pow", {x(s23, pos), x({})}, {}, 1e-5},
      {"neg", "graph.neg", {x(s23)}},
      {"abs", "graph.abs", {x(s23, away0)}},
      {"exp", "graph.exp", {x(s23)}, {}, 1e-5},
      {"log", "graph.log", {x(s23, pos)}},
      {"sqrt", "graph.sqrt", {x(s23, pos)}},
      {"rsqrt", "graph.rsqrt", {x(s23, pos)}, {}, 1e-5},
      {"tanh", "graph.tanh", {x(s23)}},
      {"sin", "graph.sin", {x(s23, uniform(-4.0, 4.0, s23))}},
      {"cos", "graph.cos", {x(s23, uniform(-4.0, 4.0, s23))}},
      {"sigmoid", "graph.sigmoid", {x(s23)}},
      {"relu", "graph.relu", {x(s23, away0)}},
      {"silu", "graph.silu", {x(s23)}},
      {"gelu", "graph.gelu", {x(s23)}},
      {"gelu tanh", "graph.gelu", {x(s23)}, attrs({{"approximate", std::string("tanh")}})},
      {"erf", "graph.erf", {x(s23)}},
      {"where", "graph.where", {Arg{ty(s23, "bool"), booleans(s23)}, x(s23), x({3})}},
      {"cast fp64 saturate", "graph.cast", {x(s23)}, attrs({{"policy", parse_policy("fp64 @saturate")}})},
      {"sum axis", "graph.sum", {x(s23)}, attrs({{"axes", I{1}}})},
      {"sum all keepdims", "graph.sum", {x(s23)}, attrs({{"keepdims", true}})},
      {"mean axis0", "graph.mean", {x(s23)}, attrs({{"axes", I{0}}})},
      {"mean all", "graph.mean", {x({2, 2, 2})}},
      {"max axis", "graph.max", {x(s23, distinct(s23))}, attrs({{"axes", I{1}}})},
      {"min all keepdims", "graph.min", {x(s23, distinct(s23))}, attrs({{"keepdims", true}})},
      {"gemm", "graph.gemm", {x({2, 3}), x({3, 4})}},
      {"gemm ta", "graph.gemm", {x({3, 2}), x({3, 4})}, attrs({{"transpose_a", true}})},
      {"gemm tb", "graph.gemm", {x({2, 3}), x({4, 3})}, attrs({{"transpose_b", true}})},
      {"gemm ta tb", "graph.gemm", {x({3, 2}), x({4, 3})}, attrs({{"transpose_a", true}, {"transpose_b", true}})},
      {"matmul batch broadcast", "graph.matmul", {x({2, 2, 3}), x({3, 2})}},
      {"softmax", "graph.softmax_safe", {x({2, 4})}},
      {"softmax axis0", "graph.softmax_safe", {x({3, 2})}, attrs({{"axis", std::int64_t{0}}})},
      {"softmax_linear", "graph.softmax_linear", {x({2, 4}), x({2, 4})}},
      {"softmax_linear axis0", "graph.softmax_linear", {x({3, 2}), x({3, 2})}, attrs({{"axis", std::int64_t{0}}})},
      {"norm_linear", "graph.norm_linear", {x({2, 5}), x({2, 5})}, attrs({{"center", true}, {"eps", 1e-3}})},
      {"norm_linear rms", "graph.norm_linear", {x({2, 5}), x({2, 5})}, attrs({{"center", false}, {"eps", 1e-3}})},
      {"norm_linear axis0", "graph.norm_linear", {x({4, 3}), x({4, 3})},
       attrs({{"axis", std::int64_t{0}}, {"center", true}, {"eps", 1e-3}})},
      {"logsumexp", "graph.logsumexp", {x({2, 4})}},
      {"logsumexp keepdims axis0",
       "graph.logsumexp",
       {x({3, 2})},
       attrs({{"axis", std::int64_t{0}}, {"keepdims", true}})},
      {"layernorm gamma beta", "graph.layernorm_safe", {x({2, 4}), x({4}), x({4})}, {}, 1e-5},
      {"layernorm plain axis0", "graph.layernorm_safe", {x({3, 2})}, attrs({{"axis", std::int64_t{0}}}), 1e-5},
      {"rmsnorm gamma", "graph.rmsnorm_safe", {x({2, 4}), x({4})}, {}, 1e-5},
      {"rmsnorm plain", "graph.rmsnorm_safe", {x({2, 3})}, {}, 1e-5},
      {"reshape", "graph.reshape", {x(s23)}, attrs({{"shape", ir::fixed_shape({3, 2})}})},
      {"transpose", "graph.transpose", {x({2, 3, 2})}, attrs({{"perm", I{-1, 0, 1}}})},
      {"broadcast_to", "graph.broadcast_to", {x({2, 1})}, attrs({{"shape", ir::fixed_shape({3, 2, 3})}})},
      {"slice steps", "graph.slice", {x({4, 5})}, attrs({{"starts", I{1, 0}}, {"stops", I{4, 5}}, {"steps", I{2, 2}}})},
      {"slice_embed",
       "graph.slice_embed",
       {x({2, 3})},
       attrs({{"shape", ir::fixed_shape({4, 5})}, {"starts", I{1, 0}}, {"stops", I{4, 5}}, {"steps", I{2, 2}}})},
      {"concat", "graph.concat", {x({2, 3}), x({2, 2})}, attrs({{"axis", std::int64_t{1}}})},
      {"split", "graph.split", {x({2, 5})}, attrs({{"axis", std::int64_t{1}}, {"sizes", I{2, 3}}})},
      {"split_qkv heads", "graph.split_qkv", {x({2, 12})}, attrs({{"num_heads", std::int64_t{2}}})},
      {"split_qkv", "graph.split_qkv", {x({2, 6})}},
      {"gather", "graph.gather", {x({4, 3}), Arg{ty({2, 2}, "int64"), indices(-4, 4, {2, 2})}}},
      {"scatter_add",
       "graph.scatter_add",
       {x({2, 2, 3}), Arg{ty({2, 2}, "int64"), indices(-4, 4, {2, 2})}},
       attrs({{"shape", ir::fixed_shape({4, 3})}})},
      {"dropout",
       "graph.dropout",
       {x({4, 4})},
       attrs({{"p", 0.25}, {"seed", std::int64_t{11}}, {"offset", std::int64_t{3}}})},
      {"maximum", "graph.maximum", {x(s23, near(s23)), x({3}, uniform(-3, -2, {3}))}},
      {"minimum", "graph.minimum", {x(s23, near(s23)), x({3}, uniform(2, 3, {3}))}},
  };
  auto coll = [](std::string reduce) {
    return attrs({{"axis", std::string("dp")}, {"axis_size", std::int64_t{1}}, {"op", std::move(reduce)}});
  };
  auto resize = attrs({{"axis", std::string("dp")}, {"axis_size", std::int64_t{1}}, {"dim", std::int64_t{0}}});
  v.push_back({"allreduce sum", "graph.allreduce", {x(s23)}, coll("sum")});
  v.push_back({"allreduce mean", "graph.allreduce", {x(s23)}, coll("mean")});
  v.push_back({"allreduce max", "graph.allreduce", {x(s23)}, coll("max")});
  v.push_back({"all_gather", "graph.all_gather", {x(s23)}, resize});
  v.push_back({"reduce_scatter", "graph.reduce_scatter", {x(s23)}, resize});
  v.push_back({"all_to_all", "graph.all_to_all", {x(s23)},
               attrs({{"axis", std::string("dp")}, {"axis_size", std::int64_t{1}}, {"split_dim", std::int64_t{1}},
                      {"concat_dim", std::int64_t{0}}})});
  v.push_back({"reshard", "graph.reshard", {x(s23)}, attrs({{"sharding", std::string("shard[-, -]")}})});
  // Sparse products over one fixed CSR pattern of a [3, 4] matrix: row 0
  // holds columns 0 and 2, row 1 none, row 2 columns 1, 2 and 3 (the eight
  // pattern operands of graph/sparse_ops.cpp, its transpose included).
  auto ints = [](std::vector<double> values) {
    const auto n = static_cast<std::int64_t>(values.size());
    return Arg{ty({n}, "int64"), [values, n](std::mt19937_64&) {
                 return Tensor::from_values(values, {n}, default_policy(DType::int64));
               }};
  };
  const std::vector<Arg> pattern = {ints({0, 2, 2}), ints({2, 2, 5}),       ints({0, 2, 1, 2, 3}),
                                    ints({0, 1, 2, 4}), ints({1, 2, 4, 5}), ints({0, 2, 0, 2, 2}),
                                    ints({0, 2, 1, 3, 4}), ints({0, 2, 1, 3, 4})};
  std::vector<Arg> spmm_args = {x({5}), x({4, 2})};
  spmm_args.insert(spmm_args.end(), pattern.begin(), pattern.end());
  v.push_back({"spmm", "graph.spmm", spmm_args, {}});
  std::vector<Arg> sddmm_args = {x({3, 2}), x({2, 4})};
  sddmm_args.insert(sddmm_args.end(), pattern.begin(), pattern.end());
  v.push_back({"sddmm", "graph.sddmm", sddmm_args, {}});
  return v;
}

// Ops with zero derivatives by definition (checked in autodiff_transforms_test.cpp).
const std::set<std::string> kNonDifferentiable = {"graph.eq",   "graph.ne",   "graph.lt",     "graph.le",
                                                  "graph.gt",   "graph.ge",   "graph.argmax", "graph.constant",
                                                  "graph.iota", "graph.rand", "graph.randn",  "graph.stop_gradient"};

class AutodiffRules : public ::testing::TestWithParam<Case> {};

TEST_P(AutodiffRules, MatchesCentralDifferences) {
  check_case(GetParam());
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string s;
  for (char ch : info.param.label) s += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(EveryOp, AutodiffRules, ::testing::ValuesIn(cases()), case_name);

// Ops that only the partitioner (docs/design/0007-sharding.md) or the
// compiled pipeline (graph.lookup, docs/design/0030; graph.fft_passes, 0034;
// graph.superblock_sums and graph.superblock_total, 0036; graph.block_sums
// and graph.block_total, 0039) writes, after autodiff has run: they have no
// rules.
const std::set<std::string> kPartitionerOnly = {"graph.shard_slice",      "graph.lookup",          "graph.fft_passes",
                                                  "graph.superblock_sums", "graph.superblock_total", "graph.block_sums",
                                                  "graph.block_total"};

// Ops whose gradients this table cannot check, tested elsewhere: attention's
// VJP takes no cotangent for the logsumexp result (the table sends one for
// every result), and its backward has no second derivatives; both are
// checked against JAX in tests/python/test_flash_attn.py (docs/design/0015).
// The complex ops and the FFTs take or make complex values, which the
// table's real-valued finite differences cannot perturb; their rules are
// checked against JAX's vjp and jvp in tests/python/test_complex.py and
// tests/python/test_fft.py (docs/design/0016).
const std::set<std::string> kTestedElsewhere = {
    "graph.flash_attn", "graph.flash_attn_bwd", "graph.real",      "graph.imag",
    "graph.conj",       "graph.complex",        "graph.fft",       "graph.fft_resize"};

TEST(AutodiffCoverage, EveryGraphOpHasBothRulesAndAGradientCase) {
  std::set<std::string> tested;
  for (const Case& c : cases()) tested.insert(c.op);
  for (const ir::OpDef* def : ir::Registry::global().all()) {
    if (def->dialect() != "graph") continue;
    if (kPartitionerOnly.count(def->name)) {
      EXPECT_FALSE(autodiff::has_vjp(def->name)) << def->name;
      continue;
    }
    EXPECT_TRUE(autodiff::has_jvp(def->name)) << def->name << " has no JVP rule";
    EXPECT_TRUE(autodiff::has_vjp(def->name)) << def->name << " has no VJP rule";
    EXPECT_TRUE(tested.count(def->name) || kNonDifferentiable.count(def->name) || kTestedElsewhere.count(def->name))
        << def->name << " is in neither the gradient table nor the non-differentiable list";
  }
}

}  // namespace
