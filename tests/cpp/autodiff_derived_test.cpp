// grad_function, hvp_function, jacfwd and jacrev (tessera/autodiff/derived.h)
// against derivatives worked out by hand for the test functions.
#include <cmath>

#include "autodiff_test_util.h"
#include "tessera/autodiff/derived.h"
#include "tessera/ir/text.h"

namespace {

using namespace adtest;
using namespace tessera::autodiff;

// f(x, y) = sum(x * x * y): df/dx = 2xy, df/dy = x^2;
// H v = (2y vx + 2x vy, 2x vx).
ir::Operation& sum_xxy(ir::Module& m) {
  return add_function(m, "f", {ty({4}), ty({4})}, [](ir::OpBuilder& b, const Values& a) -> Values {
    ir::Value* xx = op(b, "graph.mul", {a[0], a[0]});
    return {op(b, "graph.sum", {op(b, "graph.mul", {xx, a[1]})})};
  });
}

std::vector<double> random_values(std::size_t n, std::mt19937_64& gen) {
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> v(n);
  for (double& x : v) x = normal(gen);
  return v;
}

TEST(AutodiffDerived, GradFunctionReturnsOnlyTheGradients) {
  std::mt19937_64 gen(run_seed());
  ir::Module m;
  ir::Operation& f = sum_xxy(m);
  ir::Operation& g = grad_function(m, f, {0, 1}, "df");
  const auto x = random_values(4, gen), y = random_values(4, gen);
  Tensors out = run(m, g, {f64(x, {4}), f64(y, {4})});
  ASSERT_EQ(out.size(), 2u);
  std::vector<double> gx(4), gy(4);
  for (int i = 0; i < 4; ++i) {
    gx[i] = 2 * x[i] * y[i];
    gy[i] = x[i] * x[i];
  }
  expect_close(out[0].to_values(), gx, 1e-14, "df/dx");
  expect_close(out[1].to_values(), gy, 1e-14, "df/dy");
  EXPECT_THROW(grad_function(m, f, {0}, "df"), tessera::Error);  // name taken
}

TEST(AutodiffDerived, HvpMatchesTheHandDerivedHessian) {
  std::mt19937_64 gen(run_seed() + 1);
  ir::Module m;
  ir::Operation& f = sum_xxy(m);
  ir::Operation& h = hvp_function(m, f, "hvp");
  const auto x = random_values(4, gen), y = random_values(4, gen);
  const auto vx = random_values(4, gen), vy = random_values(4, gen);
  Tensors out = run(m, h, {f64(x, {4}), f64(y, {4}), f64(vx, {4}), f64(vy, {4})});
  ASSERT_EQ(out.size(), 2u);
  std::vector<double> hx(4), hy(4);
  for (int i = 0; i < 4; ++i) {
    hx[i] = 2 * y[i] * vx[i] + 2 * x[i] * vy[i];
    hy[i] = 2 * x[i] * vx[i];
  }
  expect_close(out[0].to_values(), hx, 1e-13, "(H v)_x");
  expect_close(out[1].to_values(), hy, 1e-13, "(H v)_y");
  // The result is Graph IR that prints (and so can be inspected and re-parsed).
  EXPECT_NE(ir::print_module(m).find("func @hvp"), std::string::npos);
}

// g(x) = exp(x) * sum(x) on [2, 3]: dg_i/dx_j = delta_ij exp(x_i) S + exp(x_i).
TEST(AutodiffDerived, JacobiansForwardAndReverseMatchTheFormula) {
  std::mt19937_64 gen(run_seed() + 2);
  ir::Module m;
  ir::Operation& g = add_function(m, "g", {ty({2, 3})}, [](ir::OpBuilder& b, const Values& a) -> Values {
    return {op(b, "graph.mul", {op(b, "graph.exp", {a[0]}), op(b, "graph.sum", {a[0]})})};
  });
  const auto x = random_values(6, gen);
  double s = 0;
  for (double v : x) s += v;
  std::vector<double> want(36);
  for (int i = 0; i < 6; ++i) {
    for (int j = 0; j < 6; ++j) want[i * 6 + j] = (i == j ? std::exp(x[i]) * s : 0.0) + std::exp(x[i]);
  }
  const Tensors args = {f64(x, {2, 3})};
  for (bool forward : {true, false}) {
    Tensor jac = forward ? jacfwd(m, g, args) : jacrev(m, g, args);
    EXPECT_EQ(jac.shape(), (std::vector<std::int64_t>{2, 3, 2, 3}));
    EXPECT_EQ(jac.dtype(), DType::fp64);
    expect_close(jac.to_values(), want, 1e-13, forward ? "jacfwd" : "jacrev");
  }
  // A second call reuses the transformed function instead of adding another.
  const std::size_t functions = m.functions().size();
  jacfwd(m, g, args);
  jacrev(m, g, args);
  EXPECT_EQ(m.functions().size(), functions);
}

TEST(AutodiffDerived, JacobianErrorsNameTheProblem) {
  ir::Module m;
  ir::Operation& g = add_function(m, "g", {ty({3}), ty({3}, "int32")}, [](ir::OpBuilder& b, const Values& a) -> Values {
    return {op(b, "graph.exp", {a[0]})};
  });
  const Tensors args = {f64({1, 2, 3}, {3}),
                        Tensor::from_values(std::vector<double>{1, 2, 3}, {3}, default_policy(DType::int32))};
  try {
    jacfwd(m, g, args, 2);
    FAIL() << "argnum 2 accepted";
  } catch (const tessera::Error& e) {
    EXPECT_NE(std::string(e.what()).find("argnum 2 is out of range"), std::string::npos) << e.what();
  }
  try {
    jacrev(m, g, args, 1);
    FAIL() << "an integer parameter accepted";
  } catch (const tessera::Error& e) {
    EXPECT_NE(std::string(e.what()).find("parameter 1 of @g has type tensor<[3] int32"), std::string::npos)
        << e.what();
  }
}

}  // namespace
