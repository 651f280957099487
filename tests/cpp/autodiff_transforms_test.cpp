// The autodiff transforms beyond single-op rules: zero derivatives of
// non-differentiable ops, the missing-rule error and custom rules for a named
// op, stop_gradient, fan-out, policies of gradients, loss scaling and
// overflow, dropout mask reuse, custom_vjp / custom_jvp calls, collective
// adjoints on a one-member axis, higher order, argument checks, and the
// executor's `call` and the inline-calls pass. Expected values are computed
// by hand in the tests.
#include "autodiff_test_util.h"
#include "tessera/ir/pass.h"
#include "tessera/ir/text.h"

namespace {

using namespace adtest;

ir::Value* cst(ir::OpBuilder& b, double v, const char* policy = "fp64", std::vector<std::int64_t> shape = {}) {
  return op(
      b, "graph.constant", {},
      ir::AttrMap{
          {"value", std::vector<double>{v}}, {"shape", ir::fixed_shape(shape)}, {"policy", parse_policy(policy)}});
}
ir::Value* sum_all(ir::OpBuilder& b, ir::Value* v) {
  return op(b, "graph.sum", {v});
}
ir::Value* cast(ir::OpBuilder& b, ir::Value* v, const char* policy) {
  return op(b, "graph.cast", {v}, ir::AttrMap{{"policy", parse_policy(policy)}});
}

// value_and_grad of `f` wrt every parameter, run on `args`.
Tensors grad(ir::Module& m, const ir::Operation& f, const Tensors& args, const std::string& name = "value_and_grad") {
  std::vector<int> wrt;
  for (std::size_t i = 0; i < args.size(); ++i) wrt.push_back(static_cast<int>(i));
  return run(m, autodiff::value_and_grad_function(m, f, wrt, name), args);
}

std::vector<double> vals(const Tensor& t) {
  return t.to_values();
}

bool has_op(const ir::Operation& f, std::string_view name) {
  for (const auto& o : ir::function_body(f).ops()) {
    if (o->name() == name) return true;
  }
  return false;
}

TEST(AutodiffZero, ComparisonsArgmaxIotaRandAndIntegerCastsHaveNoDerivative) {
  ir::Module m;
  const auto& f = add_function(m, "f", {ty({4})}, [](ir::OpBuilder& b, const Values& a) {
    ir::Value* x = a[0];
    ir::Value* mask = cast(b, op(b, "graph.gt", {x, cst(b, 0.0)}), "fp64");  // 0/1, no derivative
    ir::Value* idx = cast(b, op(b, "graph.argmax", {x}), "fp64");
    ir::Value* io =
        op(b, "graph.iota", {}, ir::AttrMap{{"shape", ir::fixed_shape({4})}, {"policy", parse_policy("fp64")}});
    ir::Value* r =
        op(b, "graph.rand", {},
           ir::AttrMap{{"shape", ir::fixed_shape({4})}, {"policy", parse_policy("fp64")}, {"seed", std::int64_t{3}}});
    ir::Value* rounded = cast(b, cast(b, x, "int32"), "fp64");
    ir::Value* y = op(b, "graph.mul", {x, op(b, "graph.add", {op(b, "graph.add", {mask, io}), r})});
    return Values{sum_all(b, op(b, "graph.add", {op(b, "graph.add", {y, idx}), rounded}))};
  });
  Tensor x = f64({-1.5, 2.25, 0.5, -0.25}, {4});
  Tensors out = grad(m, f, {x});
  auto r =
      graph::execute_op(
          "graph.rand", {},
          ir::AttrMap{{"shape", ir::fixed_shape({4})}, {"policy", parse_policy("fp64")}, {"seed", std::int64_t{3}}})[0]
          .to_values();
  // d/dx sum(x * (mask + iota + r)) = mask + iota + r; argmax and the integer cast add nothing.
  std::vector<double> want = {0 + 0 + r[0], 1 + 1 + r[1], 1 + 2 + r[2], 0 + 3 + r[3]};
  EXPECT_EQ(vals(out[1]), want);
}

TEST(AutodiffZero, StopGradientBlocksOneFactor) {
  ir::Module m;
  const auto& f = add_function(m, "f", {ty({3})}, [](ir::OpBuilder& b, const Values& a) {
    return Values{sum_all(b, op(b, "graph.mul", {a[0], op(b, "graph.stop_gradient", {a[0]})}))};
  });
  Tensors out = grad(m, f, {f64({1.0, -2.0, 3.5}, {3})});
  EXPECT_EQ(vals(out[1]), (std::vector<double>{1.0, -2.0, 3.5}));  // x, not 2x
}

void register_test_op() {
  if (ir::Registry::global().find("test.norule")) return;
  ir::Registry::global().add(ir::OpDef{
      .name = "test.norule",
      .summary = "An op registered without autodiff rules (tests only): 2x.",
      .operands = {"x"},
      .infer = [](std::span<const ir::Type> in, const ir::AttrMap&) { return std::vector<ir::Type>{in[0]}; },
      .reference =
          [](const ir::KernelCall& call) {
            auto v = call.inputs[0].to_values();
            for (double& e : v) e *= 2;
            return std::vector<Tensor>{Tensor::from_values(v, call.inputs[0].shape(), call.inputs[0].policy())};
          },
  });
}

TEST(AutodiffRulesRegistry, MissingRuleNamesTheOpAndFunctionThenACustomRuleIsUsed) {
  register_test_op();
  ir::Module m;
  const auto& f = add_function(m, "f", {ty({2})}, [](ir::OpBuilder& b, const Values& a) {
    return Values{sum_all(b, op(b, "test.norule", {a[0]}))};
  });
  try {
    autodiff::vjp_function(m, f, {0}, "f_vjp");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("no VJP rule for op 'test.norule' (in @f"), std::string::npos) << e.message();
  }
  try {
    autodiff::jvp_function(m, f, "f_jvp");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("no JVP rule for op 'test.norule'"), std::string::npos) << e.message();
  }
  EXPECT_EQ(m.lookup("f_vjp"), nullptr);  // a failed transform adds nothing
  // A hand-written rule for the named op: deliberately 3 * ct, to see it used.
  autodiff::register_vjp("test.norule", [](autodiff::RuleContext& c, ir::Operation&, const Values& ct) {
    return Values{c.op("graph.mul", {ct[0], c.scalar(3.0, ct[0]->type().policy)})};
  });
  EXPECT_TRUE(autodiff::has_vjp("test.norule"));
  EXPECT_FALSE(autodiff::has_jvp("test.norule"));
  Tensors out = grad(m, f, {f64({1.0, 2.0}, {2})});
  EXPECT_EQ(vals(out[0]), (std::vector<double>{6.0}));
  EXPECT_EQ(vals(out[1]), (std::vector<double>{3.0, 3.0}));
  EXPECT_THROW(autodiff::register_vjp("graph.nosuchop", {}), Error);
}

TEST(AutodiffNumerics, FanOutSumsAndGradientPolicies) {
  ir::Module m;
  const auto& f = add_function(m, "f", {ty({3}, "bf16")}, [](ir::OpBuilder& b, const Values& a) {
    ir::Value* x = a[0];
    return Values{sum_all(b, op(b, "graph.add", {op(b, "graph.mul", {x, x}), x}))};
  });
  Tensor x = Tensor::from_values(std::vector<double>{1.5, -0.25, 3.0}, {3}, parse_policy("bf16"));
  Tensors out = grad(m, f, {x});
  EXPECT_EQ(out[1].policy(), default_policy(DType::fp32));        // gradients of bf16 values are fp32
  EXPECT_EQ(vals(out[1]), (std::vector<double>{4.0, 0.5, 7.0}));  // 2x + 1

  ir::Module m2;
  const auto& f2 = add_function(m2, "f", {ty({2})}, [](ir::OpBuilder& b, const Values& a) {
    return Values{sum_all(b, op(b, "graph.exp", {a[0]}))};
  });
  Tensors out2 = grad(m2, f2, {f64({0.5, 1.0}, {2})});
  EXPECT_EQ(out2[1].policy(), default_policy(DType::fp64));
  EXPECT_EQ(vals(out2[1]), (std::vector<double>{std::exp(0.5), std::exp(1.0)}));
}

TEST(AutodiffNumerics, StoragePrecisionKeepsSixteenBitFormatsAndProductsAtStorage) {
  ir::Module m;
  const auto& f = add_function(
      m, "f", {ty({3}, "bf16"), ty({3}, "fp16"), ty({3}, "fp8_e4m3"), ty({3}, "fp32"), ty({2, 3}, "bf16"),
               ty({3, 2}, "bf16")},
      [](ir::OpBuilder& b, const Values& a) {
        ir::Value* x = a[0];
        ir::Value* y = op(b, "graph.add", {op(b, "graph.mul", {x, x}), x});  // x^2 + x
        ir::Value* h = cast(b, op(b, "graph.mul", {a[1], a[1]}), "bf16");
        ir::Value* e = cast(b, op(b, "graph.mul", {a[2], a[2]}), "bf16");
        ir::Value* w = cast(b, op(b, "graph.mul", {a[3], a[3]}), "bf16");
        ir::Value* p = sum_all(b, op(b, "graph.matmul", {a[4], a[5]}));
        ir::Value* s = op(b, "graph.add", {op(b, "graph.add", {op(b, "graph.add", {y, h}), e}), w});
        return Values{op(b, "graph.add", {sum_all(b, s), p})};
      });
  const auto& g =
      autodiff::value_and_grad_function(m, f, {0, 1, 2, 3, 4, 5}, "g", autodiff::TangentPrecision::storage);
  int gemms = 0;
  for (const auto& o : ir::function_body(g).ops()) {
    if (o->name() != "graph.gemm") continue;
    ++gemms;
    for (ir::Value* v : o->operands()) EXPECT_EQ(v->type().dtype(), DType::bf16) << "a widened product operand";
    EXPECT_EQ(o->result(0)->type().dtype(), DType::bf16);
  }
  EXPECT_EQ(gemms, 2);
  auto results = ir::function_results(g);
  EXPECT_EQ(results[1]->type().policy, default_policy(DType::bf16));
  EXPECT_EQ(results[2]->type().policy, default_policy(DType::fp16));
  EXPECT_EQ(results[3]->type().policy, default_policy(DType::bf16));  // narrower than 16 bits: bf16
  EXPECT_EQ(results[4]->type().policy, default_policy(DType::fp32));  // fp32 keeps fp32
  auto values = [](std::vector<double> v, std::vector<std::int64_t> shape, const char* policy) {
    return Tensor::from_values(std::move(v), std::move(shape), parse_policy(policy));
  };
  Tensors out = run(m, g,
                    {values({1.5, -0.25, 3.0}, {3}, "bf16"), values({1.0, 2.0, -3.0}, {3}, "fp16"),
                     values({0.5, 1.0, 2.0}, {3}, "fp8_e4m3"), values({1.0, 0.5, -2.0}, {3}, "fp32"),
                     values({1, 2, 3, 4, 5, 6}, {2, 3}, "bf16"), values({1, -1, 2, -2, 3, -3}, {3, 2}, "bf16")});
  EXPECT_EQ(vals(out[1]), (std::vector<double>{4.0, 0.5, 7.0}));   // 2x + 1, exact in bf16
  EXPECT_EQ(vals(out[2]), (std::vector<double>{2.0, 4.0, -6.0}));  // 2x
  EXPECT_EQ(vals(out[3]), (std::vector<double>{1.0, 2.0, 4.0}));
  EXPECT_EQ(vals(out[4]), (std::vector<double>{2.0, 1.0, -4.0}));
  EXPECT_EQ(vals(out[5]), (std::vector<double>{0, 0, 0, 0, 0, 0}));  // row sums of b
  EXPECT_EQ(vals(out[6]), (std::vector<double>{5, 5, 7, 7, 9, 9}));  // column sums of a
  // The default is unchanged in the same module.
  const auto& full = autodiff::value_and_grad_function(m, f, {0}, "g_full");
  EXPECT_EQ(ir::function_results(full)[1]->type().policy, default_policy(DType::fp32));
}

TEST(AutodiffNumerics, IntegerParametersGetZeroGradients) {
  ir::Module m;
  const auto& f = add_function(m, "f", {ty({2}, "fp32"), ty({2}, "int32")}, [](ir::OpBuilder& b, const Values& a) {
    return Values{sum_all(b, op(b, "graph.mul", {a[0], cast(b, a[1], "fp32")}))};
  });
  Tensor x = Tensor::from_values(std::vector<double>{1.0, 2.0}, {2}, parse_policy("fp32"));
  Tensor n = Tensor::from_values(std::vector<double>{3.0, -4.0}, {2}, parse_policy("int32"));
  Tensors out = grad(m, f, {x, n});
  EXPECT_EQ(vals(out[1]), (std::vector<double>{3.0, -4.0}));
  EXPECT_EQ(vals(out[2]), (std::vector<double>{0.0, 0.0}));
  EXPECT_EQ(out[2].policy(), default_policy(DType::fp32));
}

// loss = sum(exp(x)) cast to a policy carrying @loss_scale(s).
ir::Operation& scaled_loss(ir::Module& m, const char* policy) {
  std::string p = policy;
  return add_function(m, "f", {ty({2}, "fp32")}, [p](ir::OpBuilder& b, const Values& a) {
    return Values{cast(b, sum_all(b, op(b, "graph.exp", {a[0]})), p.c_str())};
  });
}

TEST(AutodiffNumerics, LossScaleSeedsAndUnscalesAndKeepsOverflowAsInf) {
  Tensor x = Tensor::from_values(std::vector<double>{0.5, 1.0}, {2}, parse_policy("fp32"));
  ir::Module plain, scaled;
  Tensors a = grad(plain, scaled_loss(plain, "fp32"), {x});
  Tensors s = grad(scaled, scaled_loss(scaled, "fp32 @loss_scale(1024.0)"), {x});
  EXPECT_EQ(vals(s[1]), vals(a[1]));  // a power-of-two scale unscales exactly
  EXPECT_EQ(vals(a[1]), (std::vector<double>{static_cast<float>(std::exp(0.5)), static_cast<float>(std::exp(1.0))}));
  // Forced overflow: exp(60) ~ 1.1e26 times a scale of 1e30 passes fp32's maximum.
  Tensor big = Tensor::from_values(std::vector<double>{60.0, 1.0}, {2}, parse_policy("fp32"));
  ir::Module over, ok;
  Tensors o = grad(over, scaled_loss(over, "fp32 @loss_scale(1e30)"), {big});
  EXPECT_TRUE(std::isfinite(vals(o[0])[0]));
  EXPECT_TRUE(std::isinf(vals(o[1])[0])) << "overflow must stay inf after unscaling, got " << vals(o[1])[0];
  Tensors k = grad(ok, scaled_loss(ok, "fp32"), {big});
  EXPECT_TRUE(std::isfinite(vals(k[1])[0]));
}

TEST(AutodiffEffects, DropoutBackwardReusesTheForwardMask) {
  ir::AttrMap d{{"p", 0.5}, {"seed", std::int64_t{5}}, {"offset", std::int64_t{17}}};
  ir::Module m;
  const auto& f = add_function(m, "f", {ty({8, 8}, "fp32")}, [&](ir::OpBuilder& b, const Values& a) {
    return Values{sum_all(b, op(b, "graph.dropout", {a[0]}, d))};
  });
  Tensor ones = Tensor::from_values(std::vector<double>(64, 1.0), {8, 8}, parse_policy("fp32"));
  auto mask = graph::execute_op("graph.dropout", {&ones, 1}, d)[0].to_values();  // 0 or 2
  Tensors out = grad(m, f, {ones});
  EXPECT_EQ(vals(out[1]), mask);
  int kept = 0;
  for (double v : mask) kept += v != 0.0;
  EXPECT_GT(kept, 10);
  EXPECT_LT(kept, 54);
}

// @g(x) = exp(x) with custom rules: fwd/bwd give 3 * ct, the custom JVP 5 * t.
void add_custom_functions(ir::Module& m) {
  auto mulc = [](ir::OpBuilder& b, ir::Value* v, double c) { return op(b, "graph.mul", {v, cst(b, c)}); };
  add_function(m, "g", {ty({2})}, [](ir::OpBuilder& b, const Values& a) { return Values{op(b, "graph.exp", {a[0]})}; });
  add_function(m, "g_fwd", {ty({2})}, [](ir::OpBuilder& b, const Values& a) {
    return Values{op(b, "graph.exp", {a[0]}), a[0]};
  });
  add_function(m, "g_bwd", {ty({2}), ty({2})},
               [&](ir::OpBuilder& b, const Values& a) { return Values{mulc(b, a[1], 3.0)}; });
  add_function(m, "g_jvp", {ty({2}), ty({2})}, [&](ir::OpBuilder& b, const Values& a) {
    return Values{op(b, "graph.exp", {a[0]}), mulc(b, a[1], 5.0)};
  });
}

ir::Operation& caller(ir::Module& m, ir::AttrMap extra) {
  const ir::Operation& g = *m.lookup("g");
  return add_function(m, "f", {ty({2})}, [&](ir::OpBuilder& b, const Values& a) {
    return Values{sum_all(b, autodiff::create_call(b, g, {a[0]}, extra)->result())};
  });
}

TEST(AutodiffCustom, CustomVjpCallUsesFwdAndBwd) {
  ir::Module m;
  add_custom_functions(m);
  const auto& f =
      caller(m, ir::AttrMap{{"custom_vjp_fwd", std::string("g_fwd")}, {"custom_vjp_bwd", std::string("g_bwd")}});
  Tensors out = grad(m, f, {f64({0.0, 1.0}, {2})});
  EXPECT_EQ(vals(out[0]), (std::vector<double>{1.0 + std::exp(1.0)}));
  EXPECT_EQ(vals(out[1]), (std::vector<double>{3.0, 3.0}));
  try {
    autodiff::jvp_function(m, f, "f_jvp");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("needs a custom_jvp too"), std::string::npos) << e.message();
  }
}

TEST(AutodiffCustom, CustomJvpCallInBothModes) {
  ir::Module m;
  add_custom_functions(m);
  const auto& f = caller(m, ir::AttrMap{{"custom_jvp", std::string("g_jvp")}});
  const auto& fj = autodiff::jvp_function(m, f, "f_jvp");
  Tensors out = run(m, fj, {f64({0.0, 1.0}, {2}), f64({1.0, 2.0}, {2})});
  EXPECT_EQ(vals(out[1]), (std::vector<double>{15.0}));  // sum(5 t)
  Tensors g = grad(m, f, {f64({0.0, 1.0}, {2})});        // reverse mode through the transposed custom JVP
  EXPECT_EQ(vals(g[1]), (std::vector<double>{5.0, 5.0}));
  EXPECT_NE(m.lookup("g_jvp_transpose"), nullptr);
}

TEST(AutodiffCollectives, AdjointsOnAOneMemberAxisAndErrorsOnLarger) {
  auto attrs = [](std::int64_t n) {
    return ir::AttrMap{{"axis", std::string("dp")}, {"axis_size", n}, {"dim", std::int64_t{0}}};
  };
  ir::Module m;
  const auto& f = add_function(m, "f", {ty({2, 3})}, [&](ir::OpBuilder& b, const Values& a) {
    ir::Value* g = op(b, "graph.all_gather", {a[0]}, attrs(1));
    ir::Value* r = op(b, "graph.reduce_scatter", {g}, attrs(1));
    ir::Value* s =
        op(b, "graph.allreduce", {r}, ir::AttrMap{{"axis", std::string("dp")}, {"axis_size", std::int64_t{1}}});
    return Values{s};
  });
  const auto& fv = autodiff::vjp_function(m, f, {0}, "f_vjp");
  EXPECT_TRUE(has_op(fv, "graph.reduce_scatter"));
  EXPECT_TRUE(has_op(fv, "graph.all_gather"));
  int allreduces = 0;
  for (const auto& o : ir::function_body(fv).ops()) allreduces += o->name() == "graph.allreduce";
  EXPECT_EQ(allreduces, 2);  // the forward's and its adjoint
  Tensor x = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor ct = f64({0.5, -1, 2, 0, 1, 3}, {2, 3});
  Tensors out = run(m, fv, {x, ct});
  EXPECT_EQ(vals(out[0]), vals(x));
  EXPECT_EQ(vals(out[1]), vals(ct));  // every collective is the identity on one member
  try {
    graph::execute_op("graph.all_gather", {&x, 1}, attrs(2));
    FAIL() << "expected an error";
  } catch (const CollectiveError& e) {
    // Outside an index launch no shard scope names a communicator for the axis.
    EXPECT_NE(e.message().find("runs per shard: call it inside a function given to tessera.index_launch"),
              std::string::npos)
        << e.message();
  }
}

TEST(AutodiffHigherOrder, GradOfGradOfCube) {
  ir::Module m;
  const auto& f = add_function(m, "f", {ty({3})}, [](ir::OpBuilder& b, const Values& a) {
    return Values{sum_all(b, op(b, "graph.mul", {op(b, "graph.mul", {a[0], a[0]}), a[0]}))};
  });
  const auto& g = autodiff::value_and_grad_function(m, f, {0}, "g");  // (x) -> (sum x^3, 3x^2)
  const auto& h = autodiff::vjp_function(m, g, {0}, "h");             // (x, ct0, ct1) -> (.., .., 6 x ct1)
  Tensor x = f64({1.0, -2.0, 0.5}, {3});
  Tensors out = run(m, h, {x, f64({0.0}, {}), f64({1.0, 1.0, 2.0}, {3})});
  EXPECT_EQ(vals(out[1]), (std::vector<double>{3.0, 12.0, 0.75}));
  EXPECT_EQ(vals(out[2]), (std::vector<double>{6.0, -12.0, 6.0}));
  const auto& hj = autodiff::jvp_function(m, g, "hj");  // tangent of 3x^2 along t is 6 x t
  Tensors o2 = run(m, hj, {x, f64({1.0, 1.0, 1.0}, {3})});
  EXPECT_EQ(vals(o2[3]), (std::vector<double>{6.0, -12.0, 3.0}));
}

TEST(AutodiffShapes, SymbolicDimsInBothModes) {
  ir::Module m;
  ir::Type t = ir::Type::tensor({ir::Dim::named("B"), ir::Dim::fixed(3)}, parse_policy("fp64"));
  const auto& f = add_function(m, "f", {t, ty({3})}, [](ir::OpBuilder& b, const Values& a) {
    return Values{op(b, "graph.mean", {op(b, "graph.mul", {a[0], a[1]})})};
  });
  // d mean(x * w) / dx = w / (3B), d/dw = sum over rows of x / (3B); B = 2 here.
  Tensors g = grad(m, f, {f64({1, 2, 3, 4, 5, 6}, {2, 3}), f64({6, -12, 3}, {3})});
  expect_close(vals(g[1]), {1, -2, 0.5, 1, -2, 0.5}, 1e-15, "d/dx");
  expect_close(vals(g[2]), {5.0 / 6, 7.0 / 6, 9.0 / 6}, 1e-15, "d/dw");
  const auto& fj = autodiff::jvp_function(m, f, "f_jvp");  // the tangent of w alone: zeros for x's slot
  Tensors o = run(
      m, fj,
      {f64({1, 2, 3, 4, 5, 6}, {2, 3}), f64({6, -12, 3}, {3}), f64({0, 0, 0, 0, 0, 0}, {2, 3}), f64({6, 0, 0}, {3})});
  EXPECT_EQ(vals(o[1]), (std::vector<double>{5.0}));  // mean(x[:,0] * 6) / 3 = (1 + 4) * 6 / 6
}

TEST(AutodiffArguments, BadWrtNamesAndResults) {
  ir::Module m;
  const auto& f = add_function(m, "f", {ty({2})}, [](ir::OpBuilder&, const Values& a) { return Values{a[0]}; });
  EXPECT_THROW(autodiff::vjp_function(m, f, {1}, "v"), ArgumentError);
  EXPECT_THROW(autodiff::vjp_function(m, f, {0, 0}, "v"), ArgumentError);
  EXPECT_THROW(autodiff::jvp_function(m, f, "f"), ArgumentError);  // name taken
  try {
    autodiff::value_and_grad_function(m, f, {0}, "g");
    FAIL() << "expected an error";
  } catch (const ArgumentError& e) {
    EXPECT_NE(e.message().find("one rank-0 float value"), std::string::npos) << e.message();
  }
  const auto& v = autodiff::vjp_function(m, f, {0}, "v");  // identity: the cotangent passes through
  Tensors out = run(m, v, {f64({1, 2}, {2}), f64({3, 4}, {2})});
  EXPECT_EQ(vals(out[1]), (std::vector<double>{3, 4}));
}

TEST(AutodiffCalls, ExecutorRunsCallsAndInlineCallsRemovesThem) {
  ir::Module m;
  add_function(m, "sq", {ty({2})}, [](ir::OpBuilder& b, const Values& a) {
    return Values{op(b, "graph.mul", {a[0], a[0]})};
  });
  const ir::Operation& sq = *m.lookup("sq");
  const auto& f = add_function(m, "f", {ty({2})}, [&](ir::OpBuilder& b, const Values& a) {
    ir::Value* y = autodiff::create_call(b, sq, {a[0]})->result();
    return Values{autodiff::create_call(b, sq, {y})->result()};
  });
  Tensor x = f64({2, -3}, {2});
  EXPECT_EQ(vals(run(m, f, {x})[0]), (std::vector<double>{16, 81}));
  try {
    graph::execute(f, Tensors{x});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("needs the module"), std::string::npos) << e.message();
  }
  std::string text = ir::print_module(m);
  ir::Module parsed = ir::parse_module(text);
  EXPECT_EQ(ir::print_module(parsed), text);
  ir::lookup_pass("inline-calls").run(m);
  EXPECT_FALSE(has_op(f, "call"));
  EXPECT_EQ(vals(graph::execute(f, Tensors{x})[0]), (std::vector<double>{16, 81}));
}

}  // namespace
