// Helpers shared by the autodiff tests: building small functions, running
// them on the reference executor, random fp64 inputs and float64 central
// differences (the independent reference every derivative is checked against).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "tessera/autodiff/autodiff.h"
#include "tessera/graph/executor.h"
#include "tessera/ir/builder.h"
#include "tessera/ir/verifier.h"

namespace adtest {

using namespace tessera;
using Values = std::vector<ir::Value*>;
using Tensors = std::vector<Tensor>;
using BodyFn = std::function<Values(ir::OpBuilder&, const Values&)>;

inline ir::Type ty(std::vector<std::int64_t> sizes, const char* policy = "fp64") {
  return ir::Type::tensor(ir::fixed_shape(sizes), parse_policy(policy));
}

// Adds @name(params) { body } to `m` and returns it.
inline ir::Operation& add_function(ir::Module& m, const std::string& name, const std::vector<ir::Type>& params,
                                   const BodyFn& body) {
  auto f = ir::make_function(name);
  ir::Block& block = ir::function_body(*f);
  Values args;
  for (std::size_t i = 0; i < params.size(); ++i)
    args.push_back(block.add_argument(params[i], "x" + std::to_string(i)));
  ir::OpBuilder b(block);
  b.create("return", body(b, args));
  ir::Operation* out = m.add_function(std::move(f));
  ir::verify_function(*out);
  return *out;
}

inline ir::Value* op(ir::OpBuilder& b, const std::string& name, Values operands, ir::AttrMap attrs = {}) {
  return b.create(name, std::move(operands), std::move(attrs))->result();
}

// The seed of this test run: TESSERA_TEST_SEED when set, else the clock. Printed once.
inline std::uint64_t run_seed() {
  static const std::uint64_t seed = [] {
    const char* env = std::getenv("TESSERA_TEST_SEED");
    std::uint64_t s = env ? std::strtoull(env, nullptr, 10)
                          : static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    std::cout << "[autodiff tests] random seed " << s << " (set TESSERA_TEST_SEED to repeat)\n";
    return s;
  }();
  return seed;
}

inline Tensor f64(std::vector<double> v, std::vector<std::int64_t> shape) {
  return Tensor::from_values(v, std::move(shape), default_policy(DType::fp64));
}

inline std::int64_t numel(const std::vector<std::int64_t>& s) {
  std::int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

inline std::vector<std::int64_t> sizes(const ir::Type& t) {
  return *ir::static_sizes(t.shape);
}

// Random values of `t` (normal(0,1) for floats).
inline Tensor random_like(const ir::Type& t, std::mt19937_64& gen) {
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> v(static_cast<std::size_t>(numel(sizes(t))));
  for (double& x : v) x = normal(gen);
  return Tensor::from_values(v, sizes(t), t.policy);
}

inline Tensors run(const ir::Module& m, const ir::Operation& f, const Tensors& args) {
  return graph::execute(m, f, args);
}

inline bool is_float_tensor(const Tensor& t) {
  return is_float(t.dtype());
}

// Tensor with element j of `x` moved by `delta`.
inline Tensor nudged(const Tensor& x, std::size_t j, double delta) {
  auto v = x.to_values();
  v[j] += delta;
  return Tensor::from_values(v, x.shape(), x.policy());
}

// x + s * t elementwise (same shape and policy as x).
inline Tensor axpy(const Tensor& x, double s, const Tensor& t) {
  auto v = x.to_values();
  auto w = t.to_values();
  for (std::size_t i = 0; i < v.size(); ++i) v[i] += s * w[i];
  return Tensor::from_values(v, x.shape(), x.policy());
}

// Sum over outputs of <ct_i, out_i> (outputs without a ct or non-float are skipped).
inline double weighted(const Tensors& outs, const Tensors& cts) {
  double s = 0;
  for (std::size_t i = 0; i < outs.size() && i < cts.size(); ++i) {
    if (!cts[i].defined() || !is_float_tensor(outs[i])) continue;
    auto a = outs[i].to_values();
    auto b = cts[i].to_values();
    for (std::size_t k = 0; k < a.size(); ++k) s += a[k] * b[k];
  }
  return s;
}

// Expects |got - want| <= tol * (1 + |want|) elementwise.
inline void expect_close(const std::vector<double>& got, const std::vector<double>& want, double tol,
                         const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_LE(std::fabs(got[i] - want[i]), tol * (1.0 + std::fabs(want[i])))
        << what << " element " << i << ": got " << got[i] << ", central difference " << want[i] << " (seed "
        << run_seed() << ")";
  }
}

}  // namespace adtest
