// Graph IR shape ops (reshape, transpose, broadcast_to, slice, concat, split,
// split_qkv, gather), random ops (rand, randn, dropout) and graph.lookup: reference kernels
// against hand-derived results, exact movement of encodings (NaN payloads,
// -0.0, packed fp4/int4), type inference with symbolic dims, and every error.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numbers>

#include "tessera/graph/executor.h"
#include "tessera/ir/builder.h"
#include "tessera/ir/dialect.h"
#include "tessera/numerics/philox.h"
#include "tessera/runtime/tensor.h"
#include "tessera/support/error.h"

namespace {

using tessera::ArgumentError;
using tessera::DType;
using tessera::DtypeError;
using tessera::Error;
using tessera::ErrorCode;
using tessera::NumericsPolicy;
using tessera::ShapeError;
using tessera::Tensor;
using tessera::graph::execute_op;
using tessera::ir::AttrMap;
using tessera::ir::Dim;
using tessera::ir::Shape;
using tessera::ir::Type;
using Sizes = std::vector<std::int64_t>;
using Codes = std::vector<std::uint64_t>;

constexpr std::int64_t kEnd = std::numeric_limits<std::int64_t>::max();

NumericsPolicy pol(DType d) {
  return tessera::default_policy(d);
}

Tensor vals(std::vector<double> v, Sizes shape, DType d = DType::fp32) {
  return Tensor::from_values(v, std::move(shape), pol(d));
}

// 0, 1, 2, ... n-1 as fp32 of the given shape.
Tensor iota(Sizes shape, DType d = DType::fp32) {
  std::int64_t n = 1;
  for (auto s : shape) n *= s;
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i);
  return vals(v, std::move(shape), d);
}

Tensor run1(std::string_view op, std::vector<Tensor> inputs, const AttrMap& attrs) {
  auto out = execute_op(op, inputs, attrs);
  EXPECT_EQ(out.size(), 1u);
  return out.at(0);
}

std::vector<Type> infer(std::string_view op, std::vector<Type> operands, AttrMap attrs) {
  const auto& def = tessera::ir::Registry::global().get(op);
  return tessera::ir::infer_result_types(def, operands, tessera::ir::complete_attrs(def, std::move(attrs)), {});
}

// A dim written as an int (fixed) or a string (symbol); int, not int64_t, so a
// literal 0 is not ambiguous with a null pointer.
struct D {
  D(int n) : dim(Dim::fixed(n)) {}                // NOLINT(google-explicit-constructor)
  D(const char* name) : dim(Dim::named(name)) {}  // NOLINT(google-explicit-constructor)
  Dim dim;
};

Shape sym(std::initializer_list<D> dims) {
  Shape s;
  for (const auto& d : dims) s.push_back(d.dim);
  return s;
}

Type ttype(Shape s, DType d = DType::fp32) {
  return Type::tensor(std::move(s), pol(d));
}

// Expects `f` to throw an Error of `code` whose message contains every piece.
template <typename F>
void expect_error(F&& f, ErrorCode code, std::vector<std::string> pieces) {
  try {
    f();
    ADD_FAILURE() << "no error raised";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    for (const auto& p : pieces)
      EXPECT_NE(e.message().find(p), std::string::npos) << "'" << p << "' not in: " << e.message();
  }
}

// fp32 codes with a NaN payload and a negative zero among ordinary values.
Codes special_fp32_codes() {
  return {0x7FC00123u, 0x80000000u, 0x3F800000u, 0xFF800001u, 0x00000001u, 0xC0490FDBu};
}

// ---------------------------------------------------------------- reshape --

TEST(Reshape, KeepsRowMajorOrder) {
  Tensor y = run1("graph.reshape", {iota({2, 3})}, AttrMap{{"shape", sym({3, 2})}});
  EXPECT_EQ(y.shape(), (Sizes{3, 2}));
  EXPECT_EQ(y.to_values(), (std::vector<double>{0, 1, 2, 3, 4, 5}));
  Tensor z = run1("graph.reshape", {iota({2, 3})}, AttrMap{{"shape", sym({6, 1, 1})}});
  EXPECT_EQ(z.shape(), (Sizes{6, 1, 1}));
  Tensor s = run1("graph.reshape", {iota({1, 1})}, AttrMap{{"shape", Shape{}}});
  EXPECT_EQ(s.shape(), Sizes{});
  Tensor e = run1("graph.reshape", {iota({0, 3})}, AttrMap{{"shape", sym({3, 0, 5})}});
  EXPECT_EQ(e.shape(), (Sizes{3, 0, 5}));
}

TEST(Reshape, MovesEncodingsExactly) {
  Codes c = special_fp32_codes();
  Tensor x = Tensor::from_codes(c, {2, 3}, pol(DType::fp32));
  EXPECT_EQ(run1("graph.reshape", {x}, AttrMap{{"shape", sym({3, 2})}}).codes(), c);
  Codes f4(24);
  for (std::size_t i = 0; i < f4.size(); ++i) f4[i] = (i * 7) % 16;  // every fp4 code, incl. -0 (8)
  Tensor p = Tensor::from_codes(f4, {4, 6}, pol(DType::fp4_e2m1));
  Tensor q = run1("graph.reshape", {p}, AttrMap{{"shape", sym({2, 3, 4})}});
  EXPECT_EQ(q.codes(), f4);
  EXPECT_EQ(q.dtype(), DType::fp4_e2m1);
}

TEST(Reshape, SymbolicRules) {
  EXPECT_EQ(infer("graph.reshape", {ttype(sym({"B", 6}))}, AttrMap{{"shape", sym({"B", 2, 3})}})[0].shape,
            sym({"B", 2, 3}));
  EXPECT_EQ(infer("graph.reshape", {ttype(sym({"B", 6, "S"}))}, AttrMap{{"shape", sym({"S", 3, "B", 2})}})[0].shape,
            sym({"S", 3, "B", 2}));
  expect_error(
      [] {
        infer("graph.reshape", {ttype(sym({"B", 6}))}, AttrMap{{"shape", sym({"B", 4})}});
      },
      ErrorCode::ShapeMismatch, {"[B, 6]", "[B, 4]", "6 vs 4"});
  expect_error(
      [] {
        infer("graph.reshape", {ttype(sym({"B", 6}))}, AttrMap{{"shape", sym({"S", 6})}});
      },
      ErrorCode::ShapeMismatch, {"symbolic dims"});
  expect_error(
      [] {
        infer("graph.reshape", {ttype(sym({"B", "B"}))}, AttrMap{{"shape", sym({"B"})}});
      },
      ErrorCode::ShapeMismatch, {"symbolic dims"});
  expect_error(
      [] {
        infer("graph.reshape", {ttype(sym({2, 3}))}, AttrMap{{"shape", sym({-1, 3})}});
      },
      ErrorCode::ShapeMismatch, {"negative dim -1"});
}

TEST(Reshape, CountMismatchIsShapeError) {
  EXPECT_THROW(run1("graph.reshape", {iota({2, 3})}, AttrMap{{"shape", sym({4, 2})}}), ShapeError);
  expect_error(
      [] {
        run1("graph.reshape", {iota({2, 3})}, AttrMap{{"shape", sym({5})}});
      },
      ErrorCode::ShapeMismatch, {"graph.reshape", "6 vs 5 elements"});
}

TEST(Reshape, ExecutesWithBoundSymbols) {
  auto func = tessera::ir::make_function("f");
  auto& body = tessera::ir::function_body(*func);
  auto* x = body.add_argument(ttype(sym({"B", 6})), "x");
  tessera::ir::OpBuilder b(body);
  auto* r = b.create("graph.reshape", {x}, AttrMap{{"shape", sym({3, "B", 2})}});
  b.create("return", {r->result()});
  auto out = tessera::graph::execute(*func, std::vector<Tensor>{iota({4, 6})});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].shape(), (Sizes{3, 4, 2}));
  EXPECT_EQ(out[0].to_values()[23], 23.0);
}

// -------------------------------------------------------------- transpose --

TEST(Transpose, TwoAndThreeDims) {
  // [[0 1 2] [3 4 5]]^T = [[0 3] [1 4] [2 5]]
  Tensor y = run1("graph.transpose", {iota({2, 3})}, AttrMap{{"perm", Sizes{1, 0}}});
  EXPECT_EQ(y.shape(), (Sizes{3, 2}));
  EXPECT_EQ(y.to_values(), (std::vector<double>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(run1("graph.transpose", {iota({2, 3})}, AttrMap{{"perm", Sizes{-1, 0}}}).to_values(), y.to_values());
  // x[i][j][k] = 6i + 3j + k, shape [2, 2, 3]; perm [2, 0, 1]: y[k][i][j] = x[i][j][k].
  Tensor z = run1("graph.transpose", {iota({2, 2, 3})}, AttrMap{{"perm", Sizes{2, 0, 1}}});
  EXPECT_EQ(z.shape(), (Sizes{3, 2, 2}));
  std::vector<double> want;
  for (int k = 0; k < 3; ++k)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j) want.push_back(6 * i + 3 * j + k);
  EXPECT_EQ(z.to_values(), want);
}

TEST(Transpose, PackedInt4AndSpecialCodesExact) {
  Codes c(12);
  for (std::size_t i = 0; i < c.size(); ++i) c[i] = (i * 5 + 3) % 16;
  Tensor x = Tensor::from_codes(c, {3, 4}, pol(DType::int4));
  Tensor y = run1("graph.transpose", {x}, AttrMap{{"perm", Sizes{1, 0}}});
  Codes want;
  for (std::size_t j = 0; j < 4; ++j)
    for (std::size_t i = 0; i < 3; ++i) want.push_back(c[i * 4 + j]);
  EXPECT_EQ(y.codes(), want);
  EXPECT_EQ(y.dtype(), DType::int4);
  Codes s = special_fp32_codes();
  Tensor f = Tensor::from_codes(s, {2, 3}, pol(DType::fp32));
  EXPECT_EQ(run1("graph.transpose", {f}, AttrMap{{"perm", Sizes{1, 0}}}).codes(),
            (Codes{s[0], s[3], s[1], s[4], s[2], s[5]}));
}

TEST(Transpose, BadPermIsShapeError) {
  expect_error(
      [] {
        run1("graph.transpose", {iota({2, 3})}, AttrMap{{"perm", Sizes{0, 0}}});
      },
      ErrorCode::ShapeMismatch, {"[0, 0]", "not a permutation", "twice"});
  expect_error(
      [] {
        run1("graph.transpose", {iota({2, 3})}, AttrMap{{"perm", Sizes{0}}});
      },
      ErrorCode::ShapeMismatch, {"1 entries", "rank 2"});
  expect_error(
      [] {
        run1("graph.transpose", {iota({2, 3})}, AttrMap{{"perm", Sizes{0, 2}}});
      },
      ErrorCode::ShapeMismatch, {"perm entry 2", "out of range"});
  EXPECT_EQ(infer("graph.transpose", {ttype(sym({"B", 4}))}, AttrMap{{"perm", Sizes{1, 0}}})[0].shape, sym({4, "B"}));
}

// ----------------------------------------------------------- broadcast_to --

TEST(BroadcastTo, ExpandsSizeOneAndLeadingDims) {
  Tensor y = run1("graph.broadcast_to", {vals({1, 2, 3}, {3})}, AttrMap{{"shape", sym({2, 3})}});
  EXPECT_EQ(y.to_values(), (std::vector<double>{1, 2, 3, 1, 2, 3}));
  Tensor z = run1("graph.broadcast_to", {vals({7, 8}, {2, 1})}, AttrMap{{"shape", sym({2, 3})}});
  EXPECT_EQ(z.to_values(), (std::vector<double>{7, 7, 7, 8, 8, 8}));
  Tensor e = run1("graph.broadcast_to", {vals({7}, {1})}, AttrMap{{"shape", sym({0, 4})}});
  EXPECT_EQ(e.shape(), (Sizes{0, 4}));
  Codes s = {0x7FC00123u, 0x80000000u};
  Tensor n = Tensor::from_codes(s, {2, 1}, pol(DType::fp32));
  EXPECT_EQ(run1("graph.broadcast_to", {n}, AttrMap{{"shape", sym({2, 2})}}).codes(), (Codes{s[0], s[0], s[1], s[1]}));
}

TEST(BroadcastTo, Errors) {
  expect_error(
      [] {
        run1("graph.broadcast_to", {iota({2, 3})}, AttrMap{{"shape", sym({3})}});
      },
      ErrorCode::ShapeMismatch, {"[2, 3]", "[3]", "fewer dims"});
  expect_error(
      [] {
        run1("graph.broadcast_to", {iota({2})}, AttrMap{{"shape", sym({3})}});
      },
      ErrorCode::ShapeMismatch, {"operand dim 0 is 2", "target dim 0 is 3"});
  EXPECT_EQ(infer("graph.broadcast_to", {ttype(sym({"B", 1}))}, AttrMap{{"shape", sym({"B", 4})}})[0].shape,
            sym({"B", 4}));
  EXPECT_EQ(infer("graph.broadcast_to", {ttype(sym({1}))}, AttrMap{{"shape", sym({"S", "B"})}})[0].shape,
            sym({"S", "B"}));
  EXPECT_THROW(infer("graph.broadcast_to", {ttype(sym({"B"}))}, AttrMap{{"shape", sym({1})}}), ShapeError);
  EXPECT_THROW(infer("graph.broadcast_to", {ttype(sym({"B"}))}, AttrMap{{"shape", sym({"S"})}}), ShapeError);
}

// ------------------------------------------------------------------ slice --

std::vector<double> slice1d(std::int64_t n, std::int64_t start, std::int64_t stop, std::int64_t step) {
  return run1("graph.slice", {iota({n})},
              AttrMap{{"starts", Sizes{start}}, {"stops", Sizes{stop}}, {"steps", Sizes{step}}})
      .to_values();
}

TEST(Slice, NumpySemantics) {
  using V = std::vector<double>;
  EXPECT_EQ(slice1d(5, 1, 4, 2), (V{1, 3}));
  EXPECT_EQ(slice1d(5, -3, kEnd, 1), (V{2, 3, 4}));
  EXPECT_EQ(slice1d(5, 0, -1, 1), (V{0, 1, 2, 3}));
  EXPECT_EQ(slice1d(5, -100, 100, 2), (V{0, 2, 4}));
  EXPECT_EQ(slice1d(5, 4, 2, 1), V{});
  EXPECT_EQ(slice1d(5, 7, kEnd, 1), V{});
  EXPECT_EQ(slice1d(5, 1, kEnd, kEnd), (V{1}));
  EXPECT_EQ(slice1d(5, 0, 5, 3), (V{0, 3}));
  EXPECT_EQ(slice1d(0, 0, kEnd, 1), V{});
  // 2-D: x = iota [3, 4]; x[1:, ::2] = [[4, 6], [8, 10]]; steps default to 1.
  Tensor y = run1("graph.slice", {iota({3, 4})},
                  AttrMap{{"starts", Sizes{1, 0}}, {"stops", Sizes{kEnd, kEnd}}, {"steps", Sizes{1, 2}}});
  EXPECT_EQ(y.shape(), (Sizes{2, 2}));
  EXPECT_EQ(y.to_values(), (V{4, 6, 8, 10}));
  Tensor z = run1("graph.slice", {iota({3, 4})}, AttrMap{{"starts", Sizes{0, 1}}, {"stops", Sizes{2, 3}}});
  EXPECT_EQ(z.to_values(), (V{1, 2, 5, 6}));
}

TEST(Slice, PackedFp4Exact) {
  Codes c(16);
  for (std::size_t i = 0; i < c.size(); ++i) c[i] = 15 - i;
  Tensor x = Tensor::from_codes(c, {4, 4}, pol(DType::fp4_e2m1));
  Tensor y = run1("graph.slice", {x}, AttrMap{{"starts", Sizes{1, 1}}, {"stops", Sizes{4, 4}}, {"steps", Sizes{2, 2}}});
  EXPECT_EQ(y.codes(), (Codes{c[5], c[7], c[13], c[15]}));
}

TEST(Slice, Errors) {
  expect_error(
      [] {
        run1("graph.slice", {iota({4})}, AttrMap{{"starts", Sizes{0}}, {"stops", Sizes{4}}, {"steps", Sizes{0}}});
      },
      ErrorCode::ArgumentInvalid, {"axis 0", "is 0", "> 0"});
  EXPECT_THROW(
      run1("graph.slice", {iota({4})}, AttrMap{{"starts", Sizes{3}}, {"stops", Sizes{0}}, {"steps", Sizes{-1}}}),
      ArgumentError);
  expect_error(
      [] {
        run1("graph.slice", {iota({2, 2})}, AttrMap{{"starts", Sizes{0}}, {"stops", Sizes{1, 1}}});
      },
      ErrorCode::ShapeMismatch, {"'starts'", "1 entries", "rank 2"});
  expect_error(
      [] {
        run1("graph.slice", {iota({2})}, AttrMap{{"stops", Sizes{1}}});
      },
      ErrorCode::ArgumentInvalid, {"starts"});
}

TEST(Slice, SymbolicDims) {
  auto t = infer("graph.slice", {ttype(sym({"B", 8}))}, AttrMap{{"starts", Sizes{0, 2}}, {"stops", Sizes{kEnd, 6}}});
  EXPECT_EQ(t[0].shape, sym({"B", 4}));
  // Any stop >= 2^62 reaches the end of every possible dim.
  auto u =
      infer("graph.slice", {ttype(sym({"B"}))}, AttrMap{{"starts", Sizes{0}}, {"stops", Sizes{std::int64_t{1} << 62}}});
  EXPECT_EQ(u[0].shape, sym({"B"}));
  expect_error(
      [] {
        infer("graph.slice", {ttype(sym({"B", 8}))}, AttrMap{{"starts", Sizes{1, 0}}, {"stops", Sizes{kEnd, 8}}});
      },
      ErrorCode::ShapeMismatch, {"axis 0", "'B'", "must be static"});
  EXPECT_THROW(infer("graph.slice", {ttype(sym({"B"}))}, AttrMap{{"starts", Sizes{0}}, {"stops", Sizes{4}}}),
               ShapeError);
  EXPECT_THROW(infer("graph.slice", {ttype(sym({"B"}))},
                     AttrMap{{"starts", Sizes{0}}, {"stops", Sizes{kEnd}}, {"steps", Sizes{2}}}),
               ShapeError);
}

// ----------------------------------------------------------------- concat --

TEST(Concat, JoinsAlongAxis) {
  Tensor a = vals({1, 2}, {2, 1}), b = vals({3, 4, 5, 6}, {2, 2});
  Tensor y = run1("graph.concat", {a, b}, AttrMap{{"axis", std::int64_t{1}}});
  EXPECT_EQ(y.shape(), (Sizes{2, 3}));
  EXPECT_EQ(y.to_values(), (std::vector<double>{1, 3, 4, 2, 5, 6}));
  Tensor z = run1("graph.concat", {b, vals({9, 9}, {1, 2}), b}, AttrMap{{"axis", std::int64_t{-2}}});
  EXPECT_EQ(z.to_values(), (std::vector<double>{3, 4, 5, 6, 9, 9, 3, 4, 5, 6}));
  Tensor e = run1("graph.concat", {iota({0, 2}), b}, AttrMap{});
  EXPECT_EQ(e.to_values(), b.to_values());
  Codes c = {0x7FC00123u, 0x80000000u};
  Tensor n = Tensor::from_codes(c, {2}, pol(DType::fp32));
  EXPECT_EQ(run1("graph.concat", {n, n}, AttrMap{}).codes(), (Codes{c[0], c[1], c[0], c[1]}));
  Codes i4 = {1, 15, 8};
  Tensor p = Tensor::from_codes(i4, {3}, pol(DType::int4));
  EXPECT_EQ(run1("graph.concat", {p, p}, AttrMap{}).codes(), (Codes{1, 15, 8, 1, 15, 8}));
}

TEST(Concat, Errors) {
  Tensor h = vals({1}, {1}, DType::fp16);
  Tensor b = Tensor::from_values(std::vector<double>{1}, {1}, tessera::parse_policy("bf16 @accum(fp32)"));
  expect_error(
      [&] {
        run1("graph.concat", {h, h, b}, AttrMap{});
      },
      ErrorCode::DtypeUnsupported, {"operands 0 (fp16 @accum(fp32)) and 2 (bf16 @accum(fp32))", "different policies"});
  EXPECT_THROW(run1("graph.concat", {h, b}, AttrMap{}), DtypeError);
  expect_error(
      [] {
        run1("graph.concat", {iota({2}), iota({1, 2})}, AttrMap{});
      },
      ErrorCode::ShapeMismatch, {"operand 1", "rank 2", "rank 1"});
  expect_error(
      [] {
        run1("graph.concat", {iota({2, 2}), iota({2, 3})}, AttrMap{});
      },
      ErrorCode::ShapeMismatch, {"operand 1", "dim 1", "3 vs 2"});
  expect_error([] { run1("graph.concat", {}, AttrMap{}); }, ErrorCode::ArgumentInvalid, {"at least one"});
  expect_error(
      [] {
        run1("graph.concat", {iota({2})}, AttrMap{{"axis", std::int64_t{1}}});
      },
      ErrorCode::ShapeMismatch, {"axis 1", "out of range"});
  EXPECT_EQ(
      infer("graph.concat", {ttype(sym({"B", 2})), ttype(sym({"B", 3}))}, AttrMap{{"axis", std::int64_t{1}}})[0].shape,
      sym({"B", 5}));
  EXPECT_EQ(infer("graph.concat", {ttype(sym({"B", 2}))}, AttrMap{})[0].shape, sym({"B", 2}));
  expect_error(
      [] {
        infer("graph.concat", {ttype(sym({"B", 2})), ttype(sym({"B", 2}))}, AttrMap{});
      },
      ErrorCode::ShapeMismatch, {"static sizes", "'B'"});
}

// ------------------------------------------------------------------ split --

TEST(Split, SizesAlongAxis) {
  auto out = execute_op("graph.split", std::vector<Tensor>{iota({5})}, AttrMap{{"sizes", Sizes{2, 0, 3}}});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].to_values(), (std::vector<double>{0, 1}));
  EXPECT_EQ(out[1].shape(), (Sizes{0}));
  EXPECT_EQ(out[2].to_values(), (std::vector<double>{2, 3, 4}));
  auto two = execute_op("graph.split", std::vector<Tensor>{iota({2, 3})},
                        AttrMap{{"axis", std::int64_t{-1}}, {"sizes", Sizes{1, 2}}});
  EXPECT_EQ(two[0].to_values(), (std::vector<double>{0, 3}));
  EXPECT_EQ(two[1].to_values(), (std::vector<double>{1, 2, 4, 5}));
  Codes c = {3, 9, 12, 0};
  auto p = execute_op("graph.split", std::vector<Tensor>{Tensor::from_codes(c, {4}, pol(DType::fp4_e2m1))},
                      AttrMap{{"sizes", Sizes{3, 1}}});
  EXPECT_EQ(p[0].codes(), (Codes{3, 9, 12}));
  EXPECT_EQ(p[1].codes(), (Codes{0}));
}

TEST(Split, Errors) {
  expect_error(
      [] {
        execute_op("graph.split", std::vector<Tensor>{iota({5})}, AttrMap{{"sizes", Sizes{2, 2}}});
      },
      ErrorCode::ShapeMismatch, {"[2, 2]", "sum to 4", "size 5"});
  expect_error(
      [] {
        execute_op("graph.split", std::vector<Tensor>{iota({5})}, AttrMap{{"sizes", Sizes{6, -1}}});
      },
      ErrorCode::ArgumentInvalid, {"size 1 is -1"});
  expect_error(
      [] {
        execute_op("graph.split", std::vector<Tensor>{iota({5})}, AttrMap{{"sizes", Sizes{}}});
      },
      ErrorCode::ArgumentInvalid, {"empty"});
  expect_error(
      [] {
        infer("graph.split", {ttype(sym({"B", 4}))}, AttrMap{{"sizes", Sizes{2, 2}}});
      },
      ErrorCode::ShapeMismatch, {"static dim", "'B'"});
  auto t = infer("graph.split", {ttype(sym({"B", 4}))}, AttrMap{{"axis", std::int64_t{1}}, {"sizes", Sizes{1, 3}}});
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[1].shape, sym({"B", 3}));
}

// -------------------------------------------------------------- split_qkv --

TEST(SplitQkv, ContiguousThirdsThenHeads) {
  // x = iota [2, 6]: q = columns 0-1, k = 2-3, v = 4-5.
  auto out = execute_op("graph.split_qkv", std::vector<Tensor>{iota({2, 6})}, AttrMap{});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].to_values(), (std::vector<double>{0, 1, 6, 7}));
  EXPECT_EQ(out[1].to_values(), (std::vector<double>{2, 3, 8, 9}));
  EXPECT_EQ(out[2].to_values(), (std::vector<double>{4, 5, 10, 11}));
  // x = iota [1, 12], D = 4, H = 2: k = features 4..7, head 1 of k = 6, 7.
  auto h = execute_op("graph.split_qkv", std::vector<Tensor>{iota({1, 12})}, AttrMap{{"num_heads", std::int64_t{2}}});
  EXPECT_EQ(h[1].shape(), (Sizes{1, 2, 2}));
  EXPECT_EQ(h[1].to_values(), (std::vector<double>{4, 5, 6, 7}));
  EXPECT_EQ(h[2].to_values(), (std::vector<double>{8, 9, 10, 11}));
  auto s = infer("graph.split_qkv", {ttype(sym({"B", "S", 24}))}, AttrMap{{"num_heads", std::int64_t{4}}});
  EXPECT_EQ(s[0].shape, sym({"B", "S", 4, 2}));
}

TEST(SplitQkv, Errors) {
  expect_error(
      [] {
        execute_op("graph.split_qkv", std::vector<Tensor>{iota({2, 7})}, AttrMap{});
      },
      ErrorCode::ShapeMismatch, {"divisible by 3", "7"});
  expect_error(
      [] {
        execute_op("graph.split_qkv", std::vector<Tensor>{iota({1, 12})}, AttrMap{{"num_heads", std::int64_t{3}}});
      },
      ErrorCode::ShapeMismatch, {"4 features", "num_heads = 3"});
  expect_error(
      [] {
        execute_op("graph.split_qkv", std::vector<Tensor>{iota({1, 12})}, AttrMap{{"num_heads", std::int64_t{-1}}});
      },
      ErrorCode::ArgumentInvalid, {"num_heads is -1"});
  expect_error([] { execute_op("graph.split_qkv", std::vector<Tensor>{iota({})}, AttrMap{}); },
               ErrorCode::ShapeMismatch, {"rank >= 1"});
  EXPECT_THROW(infer("graph.split_qkv", {ttype(sym({2, "D"}))}, AttrMap{}), ShapeError);
}

// ----------------------------------------------------------------- gather --

TEST(Gather, NumpyTake) {
  // x = iota [3, 2] = [[0 1] [2 3] [4 5]]; take rows [2, -1, 0].
  Tensor idx = vals({2, -1, 0}, {3}, DType::int32);
  Tensor y = run1("graph.gather", {iota({3, 2}), idx}, AttrMap{});
  EXPECT_EQ(y.shape(), (Sizes{3, 2}));
  EXPECT_EQ(y.to_values(), (std::vector<double>{4, 5, 4, 5, 0, 1}));
  // axis 1 with 2-D indices: result [3] + [2, 2] -> [3, 2, 2]; y[i][a][b] = x[i][idx[a][b]].
  Tensor idx2 = vals({1, 0, 1, 1}, {2, 2}, DType::int64);
  Tensor z = run1("graph.gather", {iota({3, 2}), idx2}, AttrMap{{"axis", std::int64_t{1}}});
  EXPECT_EQ(z.shape(), (Sizes{3, 2, 2}));
  EXPECT_EQ(z.to_values(), (std::vector<double>{1, 0, 1, 1, 3, 2, 3, 3, 5, 4, 5, 5}));
  Tensor s = run1("graph.gather", {iota({4}), vals({3}, {}, DType::uint8)}, AttrMap{});
  EXPECT_EQ(s.shape(), Sizes{});
  EXPECT_EQ(s.to_values(), (std::vector<double>{3}));
  Tensor e = run1("graph.gather", {iota({4}), vals({}, {0}, DType::int32)}, AttrMap{});
  EXPECT_EQ(e.shape(), (Sizes{0}));
  Tensor i4 = vals({-2, 1}, {2}, DType::int4);
  Codes c = {0x7FC00123u, 0x80000000u, 0x3F800000u};
  EXPECT_EQ(run1("graph.gather", {Tensor::from_codes(c, {3}, pol(DType::fp32)), i4}, AttrMap{}).codes(),
            (Codes{c[1], c[1]}));
  Codes f4 = {1, 9, 14};
  EXPECT_EQ(run1("graph.gather", {Tensor::from_codes(f4, {3}, pol(DType::fp4_e2m1)), i4}, AttrMap{}).codes(),
            (Codes{9, 9}));
}

TEST(Gather, Errors) {
  expect_error(
      [] {
        run1("graph.gather", {iota({3, 2}), vals({0, 3}, {2}, DType::int32)}, AttrMap{});
      },
      ErrorCode::IndexOutOfRange, {"index 3", "axis 0", "size 3"});
  EXPECT_THROW(run1("graph.gather", {iota({3, 2}), vals({-4}, {1}, DType::int32)}, AttrMap{}), ArgumentError);
  expect_error(
      [] {
        run1("graph.gather", {iota({3, 2}), vals({-3}, {1}, DType::int32)}, AttrMap{{"axis", std::int64_t{1}}});
      },
      ErrorCode::IndexOutOfRange, {"index -3", "axis 1", "size 2"});
  expect_error(
      [] {
        run1("graph.gather", {iota({3}), vals({0}, {1}, DType::fp32)}, AttrMap{});
      },
      ErrorCode::DtypeUnsupported, {"integer", "fp32"});
  EXPECT_THROW(run1("graph.gather", {iota({3}), vals({0}, {1}, DType::bool_)}, AttrMap{}), DtypeError);
  EXPECT_THROW(run1("graph.gather", {iota({3}), vals({0}, {1}, DType::int32)}, AttrMap{{"axis", std::int64_t{1}}}),
               ShapeError);
  EXPECT_EQ(infer("graph.gather", {ttype(sym({"V", "D"})), ttype(sym({"B", "S"}), DType::int32)}, AttrMap{})[0].shape,
            sym({"B", "S", "D"}));
}

// ----------------------------------------------------------------- random --

// u_n = (bits >> 8) / 2^24, written here from the documented scheme.
double u_ref(std::uint64_t seed, std::uint64_t counter) {
  return std::ldexp(static_cast<double>(tessera::random_bits32(seed, counter) >> 8), -24);
}

AttrMap rand_attrs(Shape shape, const NumericsPolicy& p, std::int64_t seed, std::int64_t offset = 0) {
  return AttrMap{{"shape", std::move(shape)}, {"policy", p}, {"seed", seed}, {"offset", offset}};
}

TEST(Rand, MatchesCounterScheme) {
  Tensor a = run1("graph.rand", {}, rand_attrs(sym({10, 100}), pol(DType::fp32), 1234));
  EXPECT_EQ(a.shape(), (Sizes{10, 100}));
  auto v = a.to_values();
  for (std::size_t n = 0; n < v.size(); ++n) ASSERT_EQ(v[n], u_ref(1234, n)) << n;
  // Offset k shifts the stream: element n of offset k is element n + k of offset 0.
  auto w = run1("graph.rand", {}, rand_attrs(sym({990}), pol(DType::fp32), 1234, 10)).to_values();
  for (std::size_t n = 0; n < w.size(); ++n) ASSERT_EQ(w[n], v[n + 10]);
  auto other = run1("graph.rand", {}, rand_attrs(sym({1000}), pol(DType::fp32), 1235)).to_values();
  int same = 0;
  for (std::size_t n = 0; n < other.size(); ++n) same += other[n] == v[n];
  EXPECT_LT(same, 5);
  // fp64 holds u exactly too.
  EXPECT_EQ(run1("graph.rand", {}, rand_attrs(sym({3}), pol(DType::fp64), 9)).to_values(),
            (std::vector<double>{u_ref(9, 0), u_ref(9, 1), u_ref(9, 2)}));
}

TEST(Rand, StaysBelowOneInNarrowFormats) {
  for (DType d : {DType::fp16, DType::bf16, DType::fp8_e4m3, DType::fp8_e5m2, DType::fp6_e2m3, DType::fp4_e2m1}) {
    auto v = run1("graph.rand", {}, rand_attrs(sym({20000}), pol(d), 5)).to_values();
    double lo = 1, hi = 0, sum = 0;
    for (double x : v) lo = std::min(lo, x), hi = std::max(hi, x), sum += x;
    EXPECT_GE(lo, 0.0) << tessera::name(d);
    EXPECT_LT(hi, 1.0) << tessera::name(d);
    // Rounding shifts the mean by at most half a step of the format near 1.
    EXPECT_NEAR(sum / static_cast<double>(v.size()), 0.5, 0.26) << tessera::name(d);
  }
  // fp16: 1 - 2^-11 is the largest value below one; u within 2^-12 of 1 lands there.
  auto h = run1("graph.rand", {}, rand_attrs(sym({200000}), pol(DType::fp16), 3)).to_values();
  EXPECT_EQ(*std::max_element(h.begin(), h.end()), 1.0 - std::ldexp(1.0, -11));
}

TEST(Rand, MeanAndVariance) {
  const std::size_t n = 100000;
  auto v = run1("graph.rand", {}, rand_attrs(sym({static_cast<std::int64_t>(n)}), pol(DType::fp32), 77)).to_values();
  double mean = 0, m2 = 0;
  for (double x : v) mean += x;
  mean /= n;
  for (double x : v) m2 += (x - mean) * (x - mean);
  double var = m2 / n;
  // Uniform: mean 1/2 (sd 1/sqrt(12 n)), variance 1/12 (sd sqrt(1/180 / n)).
  EXPECT_NEAR(mean, 0.5, 5 * std::sqrt(1.0 / 12 / n));
  EXPECT_NEAR(var, 1.0 / 12, 5 * std::sqrt(1.0 / 180 / n));
}

TEST(Randn, MatchesBoxMullerAndMoments) {
  const std::size_t n = 100000;
  auto v =
      run1("graph.randn", {}, rand_attrs(sym({static_cast<std::int64_t>(n)}), pol(DType::fp64), 4242, 6)).to_values();
  for (std::size_t i = 0; i < 100; ++i) {
    double u1 = std::ldexp(static_cast<double>((tessera::random_bits32(4242, 6 + 2 * i) >> 8) + 1), -24);
    double u2 = u_ref(4242, 6 + 2 * i + 1);
    ASSERT_NEAR(v[i], std::sqrt(-2 * std::log(u1)) * std::cos(2 * std::numbers::pi * u2), 1e-15) << i;
  }
  double mean = 0, m2 = 0;
  for (double x : v) {
    ASSERT_TRUE(std::isfinite(x));
    mean += x;
  }
  mean /= n;
  for (double x : v) m2 += (x - mean) * (x - mean);
  EXPECT_NEAR(mean, 0.0, 5 / std::sqrt(double(n)));
  EXPECT_NEAR(m2 / n, 1.0, 5 * std::sqrt(2.0 / n));
  // fp16 @accum(fp32): the fp64 values rounded to fp32, then to fp16.
  auto h = run1("graph.randn", {}, rand_attrs(sym({50}), pol(DType::fp16), 4242, 6)).to_values();
  for (std::size_t i = 0; i < h.size(); ++i) {
    EXPECT_EQ(h[i], tessera::decode_value(tessera::encode_value(static_cast<float>(v[i]), DType::fp16), DType::fp16));
  }
}

TEST(RandomOps, Errors) {
  expect_error([] { run1("graph.rand", {}, rand_attrs(sym({3}), pol(DType::int32), 0)); }, ErrorCode::DtypeUnsupported,
               {"graph.rand", "floating-point", "int32"});
  expect_error([] { run1("graph.randn", {}, rand_attrs(sym({3}), pol(DType::fp32), -1)); }, ErrorCode::ArgumentInvalid,
               {"seed >= 0", "seed -1"});
  expect_error([] { run1("graph.rand", {}, rand_attrs(sym({3}), pol(DType::fp32), 0, -5)); },
               ErrorCode::ArgumentInvalid, {"offset -5"});
  expect_error(
      [] {
        run1("graph.rand", {}, rand_attrs(sym({2, -1}), pol(DType::fp32), 0));
      },
      ErrorCode::ShapeMismatch, {"negative dim -1"});
  expect_error(
      [] {
        run1("graph.rand", {}, AttrMap{{"shape", sym({2})}, {"policy", pol(DType::fp32)}});
      },
      ErrorCode::ArgumentInvalid, {"seed"});
  EXPECT_EQ(infer("graph.randn", {}, rand_attrs(sym({"B", 4}), pol(DType::bf16), 0))[0],
            ttype(sym({"B", 4}), DType::bf16));
  for (const char* op : {"graph.rand", "graph.randn", "graph.dropout"}) {
    EXPECT_EQ(tessera::ir::Registry::global().get(op).effect, tessera::ir::Effect::random) << op;
  }
}

// ---------------------------------------------------------------- dropout --

AttrMap drop_attrs(double p, std::int64_t seed, std::int64_t offset = 0) {
  return AttrMap{{"p", p}, {"seed", seed}, {"offset", offset}};
}

TEST(Dropout, KeepsWhereUAtLeastPAndScales) {
  const std::size_t n = 50000;
  std::vector<double> x(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = 1.0 + 0.013 * static_cast<double>(i % 97);
  Tensor y = run1("graph.dropout", {vals(x, {static_cast<std::int64_t>(n)}, DType::fp64)}, drop_attrs(0.3, 99, 17));
  auto v = y.to_values();
  std::size_t kept = 0;
  for (std::size_t i = 0; i < n; ++i) {
    bool keep = u_ref(99, 17 + i) >= 0.3;
    ASSERT_EQ(v[i], keep ? x[i] / (1.0 - 0.3) : 0.0) << i;  // one rounding, not x * (1/(1-p))
    kept += keep;
  }
  double frac = static_cast<double>(kept) / n;
  EXPECT_NEAR(frac, 0.7, 5 * std::sqrt(0.7 * 0.3 / n));
  // Dropped NaN and inf become 0; kept ones stay NaN / inf.
  Tensor s = run1("graph.dropout", {vals({NAN, INFINITY, NAN, INFINITY}, {4})}, drop_attrs(0.5, 99));
  auto sv = s.to_values();
  for (std::size_t i = 0; i < 4; ++i) {
    if (u_ref(99, i) < 0.5) {
      EXPECT_EQ(sv[i], 0.0);
    } else {
      EXPECT_EQ(std::isnan(sv[i]), i % 2 == 0);
    }
  }
}

TEST(Dropout, PZeroIsIdentityBitForBit) {
  Codes c = special_fp32_codes();
  Tensor x = Tensor::from_codes(c, {6}, pol(DType::fp32));
  EXPECT_EQ(run1("graph.dropout", {x}, drop_attrs(0.0, 1)).codes(), c);
  Codes f4 = {1, 8, 15, 7};
  Tensor p = Tensor::from_codes(f4, {2, 2}, pol(DType::fp4_e2m1));
  EXPECT_EQ(run1("graph.dropout", {p}, drop_attrs(0.0, 1)).codes(), f4);
}

TEST(Dropout, Errors) {
  expect_error([] { run1("graph.dropout", {iota({3})}, drop_attrs(1.0, 0)); }, ErrorCode::ArgumentInvalid,
               {"[0, 1)", "1.0"});
  EXPECT_THROW(run1("graph.dropout", {iota({3})}, drop_attrs(-0.1, 0)), ArgumentError);
  EXPECT_THROW(run1("graph.dropout", {iota({3})}, drop_attrs(NAN, 0)), ArgumentError);
  expect_error([] { run1("graph.dropout", {iota({3}, DType::int32)}, drop_attrs(0.5, 0)); },
               ErrorCode::DtypeUnsupported, {"floating-point", "int32"});
}

}  // namespace

// ----------------------------------------------------------------- lookup --

TEST(Lookup, ReadsTheTableAtEachStorageCode) {
  // fp8_e4m3: 256 codes; table[c] = c / 2 as fp32.
  std::vector<double> table(256);
  for (std::size_t c = 0; c < table.size(); ++c) table[c] = static_cast<double>(c) / 2;
  const Codes codes = {0x00, 0x01, 0x38, 0x7F, 0x80, 0xFF};  // +0, the least subnormal, 1, NaN, -0, -NaN
  Tensor x = Tensor::from_codes(codes, {2, 3}, pol(DType::fp8_e4m3));
  Tensor y = run1("graph.lookup", {vals(table, {256}), x}, {});
  EXPECT_EQ(y.shape(), (Sizes{2, 3}));
  EXPECT_EQ(y.dtype(), DType::fp32);
  EXPECT_EQ(y.to_values(), (std::vector<double>{0.0, 0.5, 28.0, 63.5, 64.0, 127.5}));
}

TEST(Lookup, ErrorsNameTheOperandAndTheCodeCount) {
  expect_error([] { infer("graph.lookup", {ttype(sym({65536})), ttype(sym({4}), DType::fp32)}, {}); },
               ErrorCode::DtypeUnsupported, {"operand 'x'", "at most 16 bits", "fp32"});
  expect_error([] { infer("graph.lookup", {ttype(sym({255})), ttype(sym({4}), DType::fp8_e4m3)}, {}); },
               ErrorCode::ShapeMismatch, {"operand 'table'", "256 elements", "fp8_e4m3 code"});
  expect_error([] { infer("graph.lookup", {ttype(sym({256, 256})), ttype(sym({4}), DType::bf16)}, {}); },
               ErrorCode::ShapeMismatch, {"1-D with 65536 elements"});
  expect_error([] { infer("graph.lookup", {ttype(sym({65536}), DType::complex64), ttype(sym({4}), DType::fp16)}, {}); },
               ErrorCode::DtypeUnsupported, {"operand 'table' must be real"});
}
