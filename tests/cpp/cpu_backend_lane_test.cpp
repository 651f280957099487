// CPU backend: lane code (kernels without barriers), numerics, control flow,
// argument binding and runtime faults. Expectations are float64 / integer
// formulas written here, rounded once where the contract rounds.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <type_traits>
#include <cstring>
#include <random>

#include "cpu_backend_test_util.h"
#include "tessera/ir/text.h"
#include "tessera/numerics/convert.h"
#include "tessera/numerics/elementary.h"
#include "tessera/support/error.h"

namespace tessera::cputest {
namespace {

float bits_to_float(std::uint64_t c) {
  float f;
  const auto u = static_cast<std::uint32_t>(c);
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(CpuBackendLane, ScaleRoundsTheProductOnceToFp32) {
  ir::Module m;
  ir::Operation* k = tile::build_kernel(m, "scale",
                                        {{"x", gmem({Dim::named("n")}, DType::fp32)},
                                         {"y", gmem({Dim::named("n")}, DType::fp32, true)},
                                         {"s", lane(DType::fp32)}});
  ir::Block& body = ir::function_body(*k);
  OpBuilder b(body);
  Value* i = op(b, "tile.linear_id", {});
  Value* v = op(b, "tile.load_elem", {body.argument(0), i});
  stmt(b, "tile.store_elem", {body.argument(1), i, op(b, "tile.mul", {v, body.argument(2)})});
  cpu::CompiledKernel ck = compile(*k);
  // Groups of one tile run as one loop over a range of groups, with masked
  // (branch-free) element accesses.
  EXPECT_NE(ck.source.find("for (std::int64_t group = begin; group < end; ++group)"), std::string::npos) << ck.source;
  EXPECT_NE(ck.source.find("tsr::load_m("), std::string::npos) << ck.source;
  EXPECT_NE(ck.source.find("tsr::store_m<"), std::string::npos) << ck.source;

  std::mt19937_64 rng(std::random_device{}());
  std::normal_distribution<double> dist(0.0, 1e3);
  std::vector<double> xs(1001);
  for (double& x : xs) x = static_cast<float>(dist(rng));
  xs[0] = 3.4e38;  // times 0.1 stays finite
  xs[1] = 1e-45;   // a subnormal
  Tensor x = f32_tensor(xs, {1001});
  Tensor y = Tensor::zeros({1001}, pol(DType::fp32));
  cpu::launch(ck, -1, {x, y, 0.1});
  const double s = static_cast<float>(0.1);  // the scalar is rounded to fp32 once
  const auto got = y.codes();
  const auto xv = x.to_values();
  for (std::size_t e = 0; e < xs.size(); ++e) {
    const float want = static_cast<float>(xv[e] * s);  // exact product in double, one rounding
    ASSERT_EQ(bits_to_float(got[e]), want) << "element " << e;
  }
}

// for / if / while with iter values, integer ops with C and Python semantics.
// A symbol bound twice to different sizes, or not bound at all, is an error
// that says where each value came from (described only then: launches that
// bind cleanly build no strings).
TEST(CpuBackendLane, SymbolBindingErrorsNameWhereEachValueCameFrom) {
  ir::Module m;
  ir::Operation* k = tile::build_kernel(m, "pair",
                                        {{"x", gmem({Dim::named("n")}, DType::fp32)},
                                         {"y", gmem({Dim::named("n")}, DType::fp32, true)},
                                         {"n", lane(DType::int64)}});
  ir::Block& body = ir::function_body(*k);
  OpBuilder b(body);
  Value* i = op(b, "tile.linear_id", {});
  stmt(b, "tile.store_elem", {body.argument(1), i, op(b, "tile.load_elem", {body.argument(0), i})});
  cpu::CompiledKernel ck = compile(*k);
  Tensor x = f32_tensor({1, 2, 3}, {3});
  auto message = [&](Tensor y, std::int64_t n) {
    try {
      cpu::launch(ck, -1, {x, y, n});
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::ShapeSymbolBinding) << e.what();
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string dims = message(Tensor::zeros({4}, pol(DType::fp32)), 3);
  EXPECT_NE(dims.find("symbol 'n' is 3 from scalar argument 'n' but 4 from dim 0 of 'y' (shape [4])"), std::string::npos)
      << dims;
  const std::string scalar = message(Tensor::zeros({3}, pol(DType::fp32)), 5);
  EXPECT_NE(scalar.find("symbol 'n' is 5 from scalar argument 'n' but 3 from dim 0 of 'x' (shape [3])"),
            std::string::npos)
      << scalar;
  Tensor y = Tensor::zeros({3}, pol(DType::fp32));
  cpu::launch(ck, -1, {x, y, std::int64_t{3}});
  EXPECT_EQ(y.to_values(), x.to_values());
}

TEST(CpuBackendLane, StructuredControlFlowAndIntegerOps) {
  ir::Module m;
  ir::Operation* k = tile::build_kernel(m, "control", {{"out", gmem({Dim::named("n")}, DType::int64, true)}});
  ir::Block& body = ir::function_body(*k);
  OpBuilder b(body);
  Value* i = op(b, "tile.linear_id", {});
  Value* zero = i64(b, 0);
  Value* one = i64(b, 1);
  // acc = sum_{j < i} j*j
  ir::Operation* loop = tile::build_for(b, zero, i, one, {zero}, [&](OpBuilder& lb, std::span<Value* const> a) {
    return std::vector<Value*>{op(lb, "tile.add", {a[1], op(lb, "tile.mul", {a[0], a[0]})})};
  });
  Value* acc = loop->result(0);
  // t = i even ? acc // -3 : (-acc) % 7   (floordiv rounds down, rem has the dividend's sign)
  Value* even = cmp(b, "eq", op(b, "tile.rem", {i, i64(b, 2)}), zero);
  ir::Operation* branch = tile::build_if(
      b, even, {acc},
      [&](OpBuilder& tb, std::span<Value* const> a) {
        return std::vector<Value*>{op(tb, "tile.floordiv", {a[0], i64(tb, -3)})};
      },
      [&](OpBuilder& eb, std::span<Value* const> a) {
        return std::vector<Value*>{op(eb, "tile.rem", {op(eb, "tile.neg", {a[0]}), i64(eb, 7)})};
      });
  // steps of the Collatz sequence from i + 1 down to 1.
  ir::Operation* collatz = tile::build_while(
      b, {op(b, "tile.add", {i, one}), zero},
      [&](OpBuilder& wb, std::span<Value* const> a) {
        return std::vector<Value*>{cmp(wb, "ne", a[0], i64(wb, 1)), a[0], a[1]};
      },
      [&](OpBuilder& ab, std::span<Value* const> a) {
        Value* is_even = cmp(ab, "eq", op(ab, "tile.rem", {a[0], i64(ab, 2)}), i64(ab, 0));
        Value* half = op(ab, "tile.div", {a[0], i64(ab, 2)});
        Value* triple = op(ab, "tile.add", {op(ab, "tile.mul", {a[0], i64(ab, 3)}), i64(ab, 1)});
        return std::vector<Value*>{op(ab, "tile.select", {is_even, half, triple}),
                                   op(ab, "tile.add", {a[1], i64(ab, 1)})};
      });
  Value* result = op(b, "tile.add", {op(b, "tile.mul", {branch->result(0), i64(b, 1000)}), collatz->result(1)});
  stmt(b, "tile.store_elem", {body.argument(0), i, result});
  cpu::CompiledKernel ck = compile(*k);

  const std::int64_t n = 40;
  Tensor out = Tensor::zeros({n}, pol(DType::int64));
  cpu::launch(ck, -1, {out});
  const auto got = out.codes();
  for (std::int64_t e = 0; e < n; ++e) {
    std::int64_t a = 0;
    for (std::int64_t j = 0; j < e; ++j) a += j * j;
    std::int64_t t = 0;
    if (e % 2 == 0) {
      t = static_cast<std::int64_t>(std::floor(static_cast<double>(a) / -3.0));
    } else {
      t = -(a % 7);  // -a % 7 in C: the sign of -a
    }
    std::int64_t steps = 0;
    for (std::int64_t c = e + 1; c != 1; ++steps) c = c % 2 == 0 ? c / 2 : 3 * c + 1;
    ASSERT_EQ(static_cast<std::int64_t>(got[static_cast<std::size_t>(e)]), t * 1000 + steps) << "element " << e;
  }
}

// bf16 lane arithmetic rounds every op once to bf16; fp64 math is native.
TEST(CpuBackendLane, NarrowAndWideFloatArithmetic) {
  ir::Module m;
  ir::Operation* k = tile::build_kernel(m, "mixed",
                                        {{"x", gmem({Dim::named("n")}, DType::bf16)},
                                         {"y", gmem({Dim::named("n")}, DType::bf16, true)},
                                         {"z", gmem({Dim::named("n")}, DType::fp64, true)}});
  ir::Block& body = ir::function_body(*k);
  OpBuilder b(body);
  Value* i = op(b, "tile.linear_id", {});
  Value* x = op(b, "tile.load_elem", {body.argument(0), i});
  Value* third = real(b, 1.0 / 3.0, DType::bf16);
  Value* y = op(b, "tile.add", {op(b, "tile.mul", {x, x}), op(b, "tile.div", {x, third})});
  stmt(b, "tile.store_elem", {body.argument(1), i, y});
  Value* xd = op(b, "tile.cast", {x}, {{"to", pol(DType::fp64)}});
  Value* zd =
      op(b, "tile.add", {op(b, "tile.sqrt", {op(b, "tile.abs", {xd})}), op(b, "tile.exp", {op(b, "tile.neg", {xd})})});
  stmt(b, "tile.store_elem",
       {body.argument(2), i, op(b, "tile.max", {zd, op(b, "tile.pow", {xd, real(b, 2.0, DType::fp64)})})});
  cpu::CompiledKernel ck = compile(*k);

  std::vector<double> xs;
  for (int e = -50; e < 50; ++e) xs.push_back(e * 0.37 + 0.011 * e * e);
  const auto n = static_cast<std::int64_t>(xs.size());
  Tensor x_t = Tensor::from_values(xs, {n}, pol(DType::bf16));
  Tensor y_t = Tensor::zeros({n}, pol(DType::bf16));
  Tensor z_t = Tensor::zeros({n}, pol(DType::fp64));
  cpu::launch(ck, -1, {x_t, y_t, z_t});
  auto bf16 = [](double v) { return decode_value(encode_value(v, DType::bf16), DType::bf16); };
  const auto xv = x_t.to_values();
  const auto yv = y_t.to_values();
  const auto zv = z_t.to_values();
  for (std::size_t e = 0; e < xv.size(); ++e) {
    const double xe = xv[e];
    const double want_y = bf16(bf16(xe * xe) + bf16(xe / bf16(1.0 / 3.0)));
    ASSERT_EQ(yv[e], want_y) << "element " << e << " x=" << xe;
    const double want_z = std::max(std::sqrt(std::fabs(xe)) + tessera::elementary::exp(-xe), std::pow(xe, 2.0));
    ASSERT_EQ(zv[e], want_z) << "element " << e;
  }
}

ir::Operation* shift_kernel(ir::Module& m) {
  ir::Operation* k = tile::build_kernel(
      m, "shift", {{"x", gmem({Dim::named("n")}, DType::fp32)}, {"y", gmem({Dim::named("n")}, DType::fp32, true)}});
  ir::Block& body = ir::function_body(*k);
  OpBuilder b(body);
  Value* i = op(b, "tile.linear_id", {});
  Value* v = op(b, "tile.load_elem", {body.argument(0), op(b, "tile.add", {i, i64(b, 1)})});
  stmt(b, "tile.store_elem", {body.argument(1), i, v});
  return k;
}

TEST(CpuBackendLane, OutOfBoundsLoadRaisesNamingKernelParamIndexAndExtent) {
  ir::Module m;
  cpu::CompiledKernel ck = compile(*shift_kernel(m));
  Tensor x = f32_tensor({1, 2, 3, 4, 5}, {5});
  Tensor y = Tensor::zeros({5}, pol(DType::fp32));
  try {
    cpu::launch(ck, -1, {x, y});
    FAIL() << "expected an index error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::IndexOutOfRange);
    const std::string msg = e.message();
    EXPECT_NE(msg.find("'shift'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'x'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("index 5"), std::string::npos) << msg;
    EXPECT_NE(msg.find("extent 5"), std::string::npos) << msg;
    EXPECT_NE(msg.find("group 4"), std::string::npos) << msg;  // the lowest failing group
  }
  // The groups before the faulting one ran.
  EXPECT_EQ(y.to_values()[0], 2.0);
  // A grid inside the bounds runs cleanly.
  cpu::launch(ck, 4, {x, y});
  EXPECT_EQ(y.to_values(), (std::vector<double>{2, 3, 4, 5, 0}));
}

// tile.check_span proves the loads at its result plus a constant below its
// count in range: the CPU emits them unchecked (a load past the span stays
// checked), and a span past the buffer faults naming its first missing
// element, as that element's load would.
TEST(CpuBackendLane, CheckSpanCoversTheLoadsInsideItsSpan) {
  ir::Module m;
  ir::Operation* k = tile::build_kernel(m, "spans",
                                        {{"x", gmem({Dim::named("nx")}, DType::fp32)},
                                         {"y", gmem({Dim::named("ny")}, DType::fp32, true)}},
                                        {.group_shape = std::vector<std::int64_t>{3}});
  ir::Block& body = ir::function_body(*k);
  OpBuilder b(body);
  Value* i = op(b, "tile.linear_id", {});
  Value* start = op(b, "tile.check_span", {body.argument(0), op(b, "tile.mul", {i, i64(b, 4)})}, {{"count", 4}});
  auto at = [&](std::int64_t offset) {
    Value* index = offset == 0 ? start : op(b, "tile.add", {start, i64(b, offset)});
    return op(b, "tile.load_elem", {body.argument(0), index}, {{"in_bounds", true}});
  };
  Value* sum = op(b, "tile.add", {op(b, "tile.add", {at(0), at(3)}), at(1)});
  // Past the span: in_bounds claims it, but nothing proved it.
  Value* past = op(b, "tile.load_elem", {body.argument(0), op(b, "tile.add", {start, i64(b, 4)})}, {{"in_bounds", true}});
  stmt(b, "tile.store_elem", {body.argument(1), i, op(b, "tile.add", {sum, past})});
  cpu::CompiledKernel ck = compile(*k);
  EXPECT_NE(ck.source.find("tsr::check_span("), std::string::npos) << ck.source;
  const std::string kernel_code = ck.source.substr(ck.source.find("void run_group"));
  std::size_t unchecked = 0;
  for (std::size_t at_pos = kernel_code.find("tsr::load_u("); at_pos != std::string::npos;
       at_pos = kernel_code.find("tsr::load_u(", at_pos + 1)) {
    ++unchecked;
  }
  EXPECT_EQ(unchecked, 3u) << kernel_code;
  EXPECT_NE(kernel_code.find("tsr::load(p_x"), std::string::npos) << kernel_code;  // the load past the span
  std::vector<double> xs(13);
  for (std::size_t e = 0; e < xs.size(); ++e) xs[e] = static_cast<double>(e);
  Tensor x = f32_tensor(xs, {13});
  Tensor y = Tensor::zeros({3}, pol(DType::fp32));
  cpu::launch(ck, 1, {x, y});  // spans [0, 4), [4, 8), [8, 12), and x[4], x[8], x[12] past them
  EXPECT_EQ(y.to_values(), (std::vector<double>{0 + 3 + 1 + 4, 4 + 7 + 5 + 8, 8 + 11 + 9 + 12}));
  Tensor x10 = f32_tensor(std::vector<double>(xs.begin(), xs.begin() + 10), {10});
  try {
    cpu::launch(ck, 1, {x10, y});  // tile 2's span [8, 12) lacks x[10] and x[11]
    FAIL() << "expected an index error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::IndexOutOfRange);
    EXPECT_NE(e.message().find("kernel 'spans': load index 10 out of range for dim 0 of 'x' (extent 10)"),
              std::string::npos)
        << e.message();
  }
}

// Masked lane loops report what the checked loop reported: the lowest
// faulting tile, at its first faulting access in program order, and a tile
// has no side effect after its first fault.
TEST(CpuBackendLane, MaskedFaultsReportTheLowestTileAtItsFirstFaultingAccess) {
  ir::Module m;
  ir::Operation* k = tile::build_kernel(m, "two_loads",
                                        {{"z", gmem({Dim::named("nz")}, DType::fp32)},
                                         {"x", gmem({Dim::named("nx")}, DType::fp32)},
                                         {"y", gmem({Dim::fixed(8)}, DType::fp32, true)}},
                                        {.group_shape = std::vector<std::int64_t>{8}});
  ir::Block& body = ir::function_body(*k);
  OpBuilder b(body);
  Value* i = op(b, "tile.linear_id", {});
  Value* first = op(b, "tile.load_elem", {body.argument(0), i});  // faults from tile nz on
  Value* second = op(b, "tile.load_elem", {body.argument(1), op(b, "tile.mul", {i, i64(b, 2)})});
  stmt(b, "tile.store_elem", {body.argument(2), i, op(b, "tile.add", {first, second})});
  cpu::CompiledKernel ck = compile(*k);
  EXPECT_NE(ck.source.find("tsr::load_m("), std::string::npos) << ck.source;
  std::vector<double> zs(6), xs(10);
  for (std::size_t e = 0; e < zs.size(); ++e) zs[e] = 100.0 * static_cast<double>(e + 1);
  for (std::size_t e = 0; e < xs.size(); ++e) xs[e] = static_cast<double>(e + 1);
  Tensor z = f32_tensor(zs, {6});
  Tensor x = f32_tensor(xs, {10});  // tiles 5, 6, 7 read x[10], x[12], x[14]
  Tensor y = Tensor::zeros({8}, pol(DType::fp32));
  try {
    cpu::launch(ck, 1, {z, x, y});
    FAIL() << "expected an index error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::IndexOutOfRange);
    // Tile 5 is the lowest faulting tile; its first fault is the second
    // load (tile 6 faults first at the first load, but runs later).
    const std::string msg = e.message();
    EXPECT_NE(msg.find("kernel 'two_loads': load index 10 out of range for dim 0 of 'x' (extent 10)"),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("group 0"), std::string::npos) << msg;
  }
  // Tiles 0..4 stored z[i] + x[2i]; the faulting tiles stored nothing.
  EXPECT_EQ(y.to_values(), (std::vector<double>{101, 203, 305, 407, 509, 0, 0, 0}));

  // Store faults name the store; the lowest faulting group of a batched kernel.
  ir::Module m2;
  ir::Operation* k2 = tile::build_kernel(
      m2, "spread", {{"x", gmem({Dim::named("n")}, DType::fp32)}, {"y", gmem({Dim::named("m")}, DType::fp32, true)}});
  ir::Block& body2 = ir::function_body(*k2);
  OpBuilder b2(body2);
  Value* g = op(b2, "tile.linear_id", {});
  stmt(b2, "tile.store_elem",
       {body2.argument(1), op(b2, "tile.mul", {g, i64(b2, 3)}), op(b2, "tile.load_elem", {body2.argument(0), g})});
  cpu::CompiledKernel ck2 = compile(*k2);
  Tensor x2 = f32_tensor({1, 2, 3, 4, 5, 6, 7, 8, 9}, {9});
  Tensor y2 = Tensor::zeros({10}, pol(DType::fp32));  // groups 4.. store past the end
  for (int threads : {1, 3}) {
    cpu::LaunchOptions lo;
    lo.num_threads = threads;
    try {
      cpu::launch(ck2, 9, {x2, y2}, lo);
      FAIL() << "expected an index error";
    } catch (const Error& e) {
      const std::string msg = e.message();
      EXPECT_NE(msg.find("store index 12 out of range for dim 0 of 'y' (extent 10)"), std::string::npos) << msg;
      EXPECT_NE(msg.find("(group 4 of kernel 'spread')"), std::string::npos) << msg;
    }
  }
  EXPECT_EQ(y2.to_values(), (std::vector<double>{1, 0, 0, 2, 0, 0, 3, 0, 0, 4}));
}

TEST(CpuBackendLane, IntegerDivisionByZeroIsAnArgumentError) {
  ir::Module m;
  ir::Operation* k = tile::build_kernel(m, "divide", {{"out", gmem({Dim::named("n")}, DType::int32, true)}});
  ir::Block& body = ir::function_body(*k);
  OpBuilder b(body);
  Value* i = op(b, "tile.linear_id", {});
  Value* q = op(b, "tile.div", {i64(b, 100), op(b, "tile.sub", {i, i64(b, 3)})});
  stmt(b, "tile.store_elem", {body.argument(0), i, op(b, "tile.cast", {q}, {{"to", pol(DType::int32)}})});
  cpu::CompiledKernel ck = compile(*k);
  Tensor out = Tensor::zeros({6}, pol(DType::int32));
  EXPECT_THROW(cpu::launch(ck, -1, {out}), ArgumentError);
  cpu::launch(ck, 3, {out});
  EXPECT_EQ(out.to_values()[0], -33.0);  // C division truncates toward zero
  EXPECT_EQ(out.to_values()[1], -50.0);
}

TEST(CpuBackendLane, ArgumentBindingErrors) {
  ir::Module m;
  cpu::CompiledKernel ck = compile(*shift_kernel(m));
  Tensor x5 = f32_tensor({1, 2, 3, 4, 5}, {5});
  Tensor y4 = Tensor::zeros({4}, pol(DType::fp32));
  EXPECT_THROW(cpu::launch(ck, 3, {x5, y4}), ShapeError);  // n bound to 5 and 4
  Tensor y_f16 = Tensor::zeros({5}, pol(DType::fp16));
  EXPECT_THROW(cpu::launch(ck, 3, {x5, y_f16}), DtypeError);
  EXPECT_THROW(cpu::launch(ck, 3, {x5}), ArgumentError);
  EXPECT_THROW(cpu::launch(ck, 3, {x5, 2.0}), ArgumentError);
}

// gmem<[K/tp]>: tp comes from a scalar argument; K % tp must be 0.
TEST(CpuBackendLane, CompoundDimsAreChecked) {
  ir::Module m;
  ir::Operation* k = tile::build_kernel(m, "split",
                                        {{"x", gmem({Dim::named("K")}, DType::fp32)},
                                         {"w", gmem({Dim::named("K/tp")}, DType::fp32, true)},
                                         {"tp", lane(DType::int64)}});
  ir::Block& body = ir::function_body(*k);
  OpBuilder b(body);
  Value* i = op(b, "tile.linear_id", {});
  Value* idx = op(b, "tile.mul", {i, body.argument(2)});
  stmt(b, "tile.store_elem", {body.argument(1), i, op(b, "tile.load_elem", {body.argument(0), idx})});
  cpu::CompiledKernel ck = compile(*k);
  Tensor x = f32_tensor({0, 1, 2, 3, 4, 5}, {6});
  Tensor w = Tensor::zeros({3}, pol(DType::fp32));
  cpu::launch(ck, -1, {x, w, 2});
  EXPECT_EQ(w.to_values(), (std::vector<double>{0, 2, 4}));
  Tensor w2 = Tensor::zeros({2}, pol(DType::fp32));
  EXPECT_THROW(cpu::launch(ck, -1, {x, w2, 4}), ShapeError);  // 6 % 4 != 0
  EXPECT_THROW(cpu::launch(ck, -1, {x, w2, 2}), ShapeError);  // K/tp = 3, not 2
}

// With one tile per group everything is uniform; a load after a store to the
// same buffer must still see the store (it is not hoisted above it).
TEST(CpuBackendLane, LoadsAfterStoresSeeTheStoredValue) {
  ir::Module m;
  ir::Operation* k = tile::build_kernel(
      m, "store_then_load",
      {{"y", gmem({Dim::named("n")}, DType::fp32, true)}, {"z", gmem({Dim::named("n")}, DType::fp32, true)}});
  ir::Block& body = ir::function_body(*k);
  OpBuilder b(body);
  Value* i = op(b, "tile.linear_id", {});
  stmt(b, "tile.store_elem", {body.argument(0), i, real(b, 7.0)});
  stmt(b, "tile.store_elem", {body.argument(1), i, op(b, "tile.load_elem", {body.argument(0), i})});
  cpu::CompiledKernel ck = compile(*k);
  Tensor y = Tensor::zeros({3}, pol(DType::fp32));
  Tensor z = Tensor::zeros({3}, pol(DType::fp32));
  cpu::launch(ck, -1, {y, z});
  EXPECT_EQ(z.to_values(), (std::vector<double>{7, 7, 7}));
}

TEST(CpuBackendLane, GroupShapedKernelsNeedAGrid) {
  ir::Module m;
  ir::Operation* k = tile::build_kernel(m, "grouped", {{"y", gmem({Dim::named("n")}, DType::fp32, true)}},
                                        {.group_shape = std::vector<std::int64_t>{4}});
  cpu::CompiledKernel ck = compile(*k);
  Tensor y = Tensor::zeros({4}, pol(DType::fp32));
  EXPECT_THROW(cpu::launch(ck, -1, {y}), ArgumentError);
  cpu::launch(ck, 2, {y});
}

}  // namespace
}  // namespace tessera::cputest

namespace tessera::cputest {
namespace {

// tile.ldexp on the CPU is branch-free (a product of up to three powers of
// two); it must give std::ldexp's correctly rounded result for every x and
// every exponent: subnormal results (one rounding), overflow, exponents far
// out of range, zeros, infinities and NaN.
template <class F>
void check_ldexp(DType dtype) {
  ir::Module m;
  ir::Operation* k = tile::build_kernel(m, "scale2",
                                        {{"x", gmem({Dim::named("n")}, dtype)},
                                         {"e", gmem({Dim::named("n")}, DType::int64)},
                                         {"y", gmem({Dim::named("n")}, dtype, true)}});
  ir::Block& body = ir::function_body(*k);
  OpBuilder b(body);
  Value* i = op(b, "tile.linear_id", {});
  Value* x = op(b, "tile.load_elem", {body.argument(0), i});
  Value* e = op(b, "tile.load_elem", {body.argument(1), i});
  stmt(b, "tile.store_elem", {body.argument(2), i, op(b, "tile.ldexp", {x, e})});
  cpu::CompiledKernel ck = compile(*k);

  using Bits = std::conditional_t<std::is_same_v<F, float>, std::uint32_t, std::uint64_t>;
  constexpr int kBits = sizeof(F) * 8;
  std::mt19937_64 rng(7);
  std::vector<F> xs = {F(0), -F(0), std::numeric_limits<F>::infinity(), -std::numeric_limits<F>::infinity(),
                       std::numeric_limits<F>::quiet_NaN(), std::numeric_limits<F>::max(),
                       std::numeric_limits<F>::min(), std::numeric_limits<F>::denorm_min(), F(1), F(-1.5)};
  for (int n = 0; n < 3000; ++n) xs.push_back(std::bit_cast<F>(static_cast<Bits>(rng())));  // every exponent
  std::vector<std::int64_t> edges = {0, 1, -1, -22, -126, -127, -149, -150, 127, 128, 254, 300, -300, -301,
                                     -1022, -1023, -1074, -1075, 1023, 1024, 2046, -2044, -2045, -2200, -2201,
                                     2200, 2201, 5000, -5000, std::int64_t{1} << 40, -(std::int64_t{1} << 40)};
  std::vector<double> xv, ev;
  std::vector<std::uint64_t> xcodes;
  for (F xval : xs) {
    for (int r = 0; r < 4; ++r) {
      const std::int64_t ex = r < 2 ? edges[rng() % edges.size()] : static_cast<std::int64_t>(rng() % 4601) - 2300;
      xcodes.push_back(static_cast<std::uint64_t>(std::bit_cast<Bits>(xval)));
      ev.push_back(static_cast<double>(ex));
    }
  }
  const auto n = static_cast<std::int64_t>(xcodes.size());
  Tensor xt = Tensor::from_codes(xcodes, {n}, pol(dtype));
  Tensor et = Tensor::from_values(ev, {n}, pol(DType::int64));
  Tensor yt = Tensor::zeros({n}, pol(dtype));
  cpu::launch(ck, -1, {xt, et, yt});
  const auto got = yt.codes();
  for (std::int64_t j = 0; j < n; ++j) {
    const F xval = std::bit_cast<F>(static_cast<Bits>(xcodes[static_cast<std::size_t>(j)]));
    const double ex = ev[static_cast<std::size_t>(j)];
    const int ei = static_cast<int>(std::max(-100000.0, std::min(100000.0, ex)));
    const F want = std::ldexp(xval, ei);
    const F have = std::bit_cast<F>(static_cast<Bits>(got[static_cast<std::size_t>(j)]));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(have)) << kBits << "-bit ldexp(" << xval << ", " << ex << ")";
    } else {
      ASSERT_EQ(std::bit_cast<Bits>(have), std::bit_cast<Bits>(want))
          << kBits << "-bit ldexp(" << xval << ", " << ex << ") gave " << have << ", want " << want;
    }
  }
}

TEST(CpuBackendLane, LdexpIsCorrectlyRoundedForEveryExponent) {
  check_ldexp<double>(DType::fp64);
  check_ldexp<float>(DType::fp32);
}

// tile.exp_or_nan calls the shared elementary function, and tile.if's hint
// becomes a C++ attribute; a kernel that redoes the unsure elements with
// tile.exp stores exp's bits for every input, NaN and overflow included.
TEST(CpuBackendLane, ExpOrNanAndTheLikelyHint) {
  ir::Module m = ir::parse_module(R"(
func @fast_exp(%x: gmem<[n] fp32>, %y: gmem<[n] fp32 mut>) -> () attributes {kernel = true} {
  %i = tile.linear_id : lane<int64>
  %0 = tile.load_elem %x, %i : lane<fp32>
  %1 = tile.exp_or_nan %0 : lane<fp32>
  %2 = tile.cmp %1, %1 {pred = "ne"} : lane<bool>
  %3 = tile.if %2, %1 {likely = false} : lane<fp32> {
    ^(%v: lane<fp32>):
    %4 = tile.exp %0 : lane<fp32>
    tile.yield %4
  } {
    ^(%w: lane<fp32>):
    tile.yield %w
  }
  tile.store_elem %y, %i, %3
  return
}
)", "fast_exp.tir");
  cpu::CompiledKernel ck = compile(*m.lookup("fast_exp"));
  EXPECT_NE(ck.source.find("tessera::elementary::exp_f32_or_nan("), std::string::npos) << ck.source;
  EXPECT_NE(ck.source.find(") [[unlikely]] {"), std::string::npos) << ck.source;
  std::mt19937 rng(5);
  std::vector<std::uint64_t> codes;
  for (int j = 0; j < 4000; ++j) codes.push_back(rng());  // every exponent, NaN and infinities among them
  for (float v : {0.0f, -0.0f, 88.5f, -87.5f, -104.0f, -std::numeric_limits<float>::infinity()})
    codes.push_back(std::bit_cast<std::uint32_t>(v));
  for (auto& c : codes) c &= 0xffffffffu;
  const auto n = static_cast<std::int64_t>(codes.size());
  Tensor x = Tensor::from_codes(codes, {n}, pol(DType::fp32));
  Tensor y = Tensor::zeros({n}, pol(DType::fp32));
  cpu::launch(ck, -1, {x, y});
  const auto got = y.codes();
  for (std::int64_t j = 0; j < n; ++j) {
    const float xv = std::bit_cast<float>(static_cast<std::uint32_t>(codes[static_cast<std::size_t>(j)]));
    const float want = static_cast<float>(tessera::elementary::exp(static_cast<double>(xv)));
    const float have = std::bit_cast<float>(static_cast<std::uint32_t>(got[static_cast<std::size_t>(j)]));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(have)) << "exp(" << xv << ")";
    } else {
      ASSERT_EQ(std::bit_cast<std::uint32_t>(have), std::bit_cast<std::uint32_t>(want)) << "exp(" << xv << ")";
    }
  }
}

}  // namespace
}  // namespace tessera::cputest
