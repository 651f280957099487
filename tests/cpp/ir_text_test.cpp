// The IR text form: printing built modules against hand-written text, parsing
// back, every attribute kind bit-exactly, generic vs custom, and diagnostics.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "ir_test_ops.h"
#include "tessera/ir/builder.h"
#include "tessera/ir/text.h"

namespace tessera::ir {
namespace {

Type tensor(Shape shape, DType dtype) {
  return Type::tensor(std::move(shape), default_policy(dtype));
}

// func @f(%x: [B, 64] fp16, %<arg1>: [64] fp16): add, gelu, split via test.attrs, sink, return.
Module build_sample() {
  testing::register_test_ops();
  Module m;
  Operation* f = m.add_function(make_function("f"));
  Block& body = function_body(*f);
  Value* x = body.add_argument(tensor({Dim::named("B"), Dim::fixed(64)}, DType::fp16), "x");
  Value* y = body.add_argument(tensor({Dim::fixed(64)}, DType::fp16));  // no name: prints %arg1
  OpBuilder b(body);
  Operation* add = b.create("graph.add", {x, y});
  Operation* gelu = b.create("graph.gelu", {add->result()}, {{"approximate", std::string("tanh")}});
  Operation* pair = b.create("test.attrs", {gelu->result(), y}, {{"i", std::int64_t{3}}});
  b.create("test.sink", {pair->result(1)});
  b.create("return", {pair->result(0)});

  Operation* g = m.add_function(make_function("g"));
  b = OpBuilder(function_body(*g));
  b.create("test.barrier", {});
  b.create("return", {});
  return m;
}

constexpr const char* kSampleCustom =
    "func @f(%x: tensor<[B, 64] fp16 @accum(fp32)>, %arg1: tensor<[64] fp16 @accum(fp32)>) -> "
    "(tensor<[B, 64] fp16 @accum(fp32)>) {\n"
    "  %0 = graph.add %x, %arg1 : tensor<[B, 64] fp16 @accum(fp32)>\n"
    "  %1 = graph.gelu %0 {approximate = \"tanh\"} : tensor<[B, 64] fp16 @accum(fp32)>\n"
    "  %2:2 = test.attrs %1, %arg1 {i = 3} : tensor<[B, 64] fp16 @accum(fp32)>, tensor<[64] fp16 @accum(fp32)>\n"
    "  test.sink %2#1\n"
    "  return %2#0\n"
    "}\n"
    "\n"
    "func @g() -> () {\n"
    "  test.barrier\n"
    "  return\n"
    "}\n";

constexpr const char* kSampleGeneric =
    "func @f(%x: tensor<[B, 64] fp16 @accum(fp32)>, %arg1: tensor<[64] fp16 @accum(fp32)>) -> "
    "(tensor<[B, 64] fp16 @accum(fp32)>) {\n"
    "  %0 = \"graph.add\"(%x, %arg1) : (tensor<[B, 64] fp16 @accum(fp32)>, tensor<[64] fp16 @accum(fp32)>) -> "
    "(tensor<[B, 64] fp16 @accum(fp32)>)\n"
    "  %1 = \"graph.gelu\"(%0) {approximate = \"tanh\"} : (tensor<[B, 64] fp16 @accum(fp32)>) -> "
    "(tensor<[B, 64] fp16 @accum(fp32)>)\n"
    "  %2:2 = \"test.attrs\"(%1, %arg1) {i = 3} : (tensor<[B, 64] fp16 @accum(fp32)>, tensor<[64] fp16 "
    "@accum(fp32)>) -> (tensor<[B, 64] fp16 @accum(fp32)>, tensor<[64] fp16 @accum(fp32)>)\n"
    "  \"test.sink\"(%2#1) : (tensor<[64] fp16 @accum(fp32)>) -> ()\n"
    "  \"return\"(%2#0) : (tensor<[B, 64] fp16 @accum(fp32)>) -> ()\n"
    "}\n"
    "\n"
    "func @g() -> () {\n"
    "  \"test.barrier\"() : () -> ()\n"
    "  \"return\"() : () -> ()\n"
    "}\n";

TEST(IrText, PrintsBuiltModuleInCustomForm) {
  Module m = build_sample();
  EXPECT_EQ(print_module(m), kSampleCustom);
}

TEST(IrText, PrintsBuiltModuleInGenericForm) {
  Module m = build_sample();
  EXPECT_EQ(print_module(m, {.generic = true}), kSampleGeneric);
}

TEST(IrText, RoundTripsBothForms) {
  Module m = build_sample();
  for (bool generic : {false, true}) {
    std::string text = print_module(m, {.generic = generic});
    Module again = parse_module(text, "sample.tir");
    EXPECT_EQ(print_module(again, {.generic = generic}), text);
    // Generic text parses to the same IR as the custom text.
    EXPECT_EQ(print_module(again), kSampleCustom);
  }
}

TEST(IrText, ElidedListsShowFourElementsAndTheLength) {
  std::vector<double> values(100);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>(i) / 2;
  const Attribute reals{values};
  EXPECT_EQ(print_attribute(reals, 64), "dense<[0.0, 0.5, 1.0, 1.5, ... 100 values]>");
  EXPECT_EQ(print_attribute(reals, 100).size(), print_attribute(reals).size());  // at the limit: every value
  const Attribute ints{std::vector<std::int64_t>(70, 7)};
  EXPECT_EQ(print_attribute(ints, 64), "[7, 7, 7, 7, ... 70 values]");
  // A module printed elided is a display form: it does not parse back.
  Module m;
  Operation* f = m.add_function(make_function("c"));
  OpBuilder b(function_body(*f));
  Operation* c = b.create("graph.constant", {},
                          {{"value", values}, {"shape", Shape{Dim::fixed(100)}}, {"policy", default_policy(DType::fp32)}});
  b.create("return", {c->result()});
  const std::string shown = print_module(m, {.elide_lists_over = 64});
  EXPECT_NE(shown.find("... 100 values"), std::string::npos) << shown;
  EXPECT_THROW(parse_module(shown, "shown.tir"), Error);
  EXPECT_EQ(print_module(parse_module(print_module(m), "full.tir")), print_module(m));
}

TEST(IrText, ParsedModuleHasNamesUsesAndLocations) {
  testing::register_test_ops();
  Module m = parse_module(kSampleCustom, "sample.tir");
  ASSERT_EQ(m.functions().size(), 2u);
  Operation* f = m.lookup("f");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->location().line, 1);
  EXPECT_EQ(f->location().column, 1);
  Block& body = function_body(*f);
  EXPECT_EQ(body.argument(0)->name(), "x");
  EXPECT_EQ(body.argument(1)->name(), "arg1");
  ASSERT_EQ(body.ops().size(), 5u);
  Operation* add = body.ops().front().get();
  EXPECT_EQ(add->name(), "graph.add");
  EXPECT_EQ(add->location().file, "sample.tir");
  EXPECT_EQ(add->location().line, 2);
  EXPECT_EQ(add->location().column, 8);  // the op name, after "  %0 = "
  EXPECT_EQ(add->operand(0), body.argument(0));
  EXPECT_EQ(add->result()->uses().size(), 1u);
  // %arg1 feeds graph.add and test.attrs.
  EXPECT_EQ(body.argument(1)->uses().size(), 2u);
  Operation* attrs_op = std::next(body.ops().begin(), 2)->get();
  EXPECT_EQ(attrs_op->num_results(), 2u);
  EXPECT_EQ(function_results(*f).at(0), attrs_op->result(0));
}

TEST(IrText, ArgumentNamesThatCannotPrintFallBackToArgN) {
  Module m;
  Operation* f = m.add_function(make_function("h"));
  Block& body = function_body(*f);
  Type t = tensor({Dim::fixed(2)}, DType::fp32);
  body.add_argument(t, "arg1");       // usable as it is
  body.add_argument(t, "9lives");     // not an identifier -> %arg1, which is taken -> %arg1_1
  body.add_argument(t, "arg1");       // duplicate -> %arg2
  body.add_argument(t, "has space");  // -> %arg3
  OpBuilder(body).create("return", {body.argument(0)});
  const std::string text = print_module(m);
  EXPECT_NE(text.find("func @h(%arg1: tensor<[2] fp32 @accum(fp32)>, %arg1_1: tensor<[2] fp32 @accum(fp32)>, "
                      "%arg2: tensor<[2] fp32 @accum(fp32)>, %arg3: tensor<[2] fp32 @accum(fp32)>)"),
            std::string::npos)
      << text;
  EXPECT_EQ(print_module(parse_module(text)), text);
}

TEST(IrText, SymbolsThatAreNotIdentifiersPrintQuoted) {
  Module m;
  Operation* f = m.add_function(make_function("my fn \"quoted\""));
  OpBuilder(function_body(*f)).create("return", {});
  const std::string text = print_module(m);
  EXPECT_EQ(text, "func @\"my fn \\\"quoted\\\"\"() -> () {\n  return\n}\n");
  Module again = parse_module(text);
  EXPECT_EQ(function_name(*again.functions()[0]), "my fn \"quoted\"");
}

// Builds `%0 = test.attrs %x {name = value}`, prints, parses back and returns
// the parsed attribute (checking the text round trip on the way).
Attribute round_trip_attr(const std::string& name, const Attribute& value, std::string* printed = nullptr) {
  testing::register_test_ops();
  Module m;
  Operation* f = m.add_function(make_function("a"));
  Block& body = function_body(*f);
  Value* x = body.add_argument(tensor({Dim::fixed(1)}, DType::fp32), "x");
  OpBuilder b(body);
  Operation* op = b.create("test.attrs", {x}, {{name, value}});
  b.create("return", {op->result()});
  std::string text = print_module(m);
  if (printed) *printed = text;
  Module again = parse_module(text);
  EXPECT_EQ(print_module(again), text);
  Module generic = parse_module(print_module(m, {.generic = true}));
  EXPECT_EQ(print_module(generic), text);
  const Attribute* got = function_body(*again.functions()[0]).ops().front()->attrs().find(name);
  if (!got) throw std::runtime_error("attribute lost: " + name);
  return *got;
}

std::uint64_t bits(double v) {
  return std::bit_cast<std::uint64_t>(v);
}

TEST(IrText, RealAttributesRoundTripBitExactly) {
  const double values[] = {0.1,
                           1e-300,
                           -0.0,
                           0.0,
                           1.0,
                           -2.5,
                           5e-324,  // smallest subnormal
                           std::numeric_limits<double>::max(),
                           std::numeric_limits<double>::lowest(),
                           std::numeric_limits<double>::infinity(),
                           -std::numeric_limits<double>::infinity(),
                           1.0 / 3.0,
                           123456789012345680.0};
  for (double v : values) {
    Attribute got = round_trip_attr("f", v);
    ASSERT_EQ(kind_of(got), AttrKind::real) << v;
    EXPECT_EQ(bits(std::get<double>(got)), bits(v)) << v;
  }
  Attribute nan = round_trip_attr("f", std::numeric_limits<double>::quiet_NaN());
  EXPECT_TRUE(std::isnan(std::get<double>(nan)));
}

TEST(IrText, RealAttributeTextForms) {
  std::string text;
  round_trip_attr("f", 0.1, &text);
  EXPECT_NE(text.find("{f = 0.1}"), std::string::npos) << text;
  round_trip_attr("f", -0.0, &text);
  EXPECT_NE(text.find("{f = -0.0}"), std::string::npos) << text;
  round_trip_attr("f", 1e-300, &text);
  EXPECT_NE(text.find("{f = 1e-300}"), std::string::npos) << text;
  round_trip_attr("f", -std::numeric_limits<double>::infinity(), &text);
  EXPECT_NE(text.find("{f = -inf}"), std::string::npos) << text;
  round_trip_attr("f", std::numeric_limits<double>::quiet_NaN(), &text);
  EXPECT_NE(text.find("{f = nan}"), std::string::npos) << text;
  round_trip_attr("f", 2.0, &text);
  EXPECT_NE(text.find("{f = 2.0}"), std::string::npos) << text;
}

TEST(IrText, OtherAttributeKindsRoundTrip) {
  EXPECT_EQ(std::get<bool>(round_trip_attr("b", true)), true);
  EXPECT_EQ(std::get<bool>(round_trip_attr("b", false)), false);
  for (std::int64_t v : {std::int64_t{0}, std::int64_t{-1}, std::numeric_limits<std::int64_t>::max(),
                         std::numeric_limits<std::int64_t>::min()}) {
    EXPECT_EQ(std::get<std::int64_t>(round_trip_attr("i", v)), v);
  }
  for (std::string s : {std::string(""), std::string("say \"hi\""), std::string("back\\slash"),
                        std::string("two\nlines"), std::string("tab\there // not a comment"), std::string("{}, =")}) {
    EXPECT_EQ(std::get<std::string>(round_trip_attr("s", s)), s);
  }
  using Ints = std::vector<std::int64_t>;
  EXPECT_EQ(std::get<Ints>(round_trip_attr("ints", Ints{})), Ints{});
  EXPECT_EQ(std::get<Ints>(round_trip_attr("ints", Ints{0, -3, 9})), (Ints{0, -3, 9}));
  using Reals = std::vector<double>;
  EXPECT_EQ(std::get<Reals>(round_trip_attr("reals", Reals{})), Reals{});
  Reals reals = std::get<Reals>(round_trip_attr("reals", Reals{0.1, -0.0, 1e-300, 3.0}));
  ASSERT_EQ(reals.size(), 4u);
  EXPECT_EQ(bits(reals[0]), bits(0.1));
  EXPECT_EQ(bits(reals[1]), bits(-0.0));
  EXPECT_EQ(bits(reals[2]), bits(1e-300));
  EXPECT_EQ(reals[3], 3.0);
  NumericsPolicy p{.storage = DType::fp8_e4m3,
                   .accum = DType::fp32,
                   .rounding = Rounding::stochastic,
                   .overflow = Overflow::saturate,
                   .loss_scale = 1024.0};
  EXPECT_EQ(std::get<NumericsPolicy>(round_trip_attr("pol", p)), p);
  Shape s{Dim::named("B"), Dim::fixed(0), Dim::fixed(64)};
  EXPECT_EQ(std::get<Shape>(round_trip_attr("shp", s)), s);
  EXPECT_EQ(std::get<Shape>(round_trip_attr("shp", Shape{})), Shape{});

  std::string text;
  round_trip_attr("shp", s, &text);
  EXPECT_NE(text.find("{shp = shape<[B, 0, 64]>}"), std::string::npos) << text;
  round_trip_attr("reals", Reals{1.0, 2.5}, &text);
  EXPECT_NE(text.find("{reals = dense<[1.0, 2.5]>}"), std::string::npos) << text;
  round_trip_attr("ints", Ints{}, &text);
  EXPECT_NE(text.find("{ints = []}"), std::string::npos) << text;
  round_trip_attr("pol", default_policy(DType::bf16), &text);
  EXPECT_NE(text.find("{pol = policy<bf16 @accum(fp32)>}"), std::string::npos) << text;
}

TEST(IrText, ParsesHandWrittenAttributeSpellings) {
  testing::register_test_ops();
  // Non-canonical input: ints where floats go, dense of ints, extra spaces, comments.
  Module m = parse_module(R"(
    func @a(%x: tensor<[1] fp32>) -> (tensor<[1] fp32>) {   // header
      %0 = test.attrs %x { f = 3 , reals = dense< [1, -2] > , ints = [ ] , s = "a//b" }   : tensor<[1] fp32>
      return %0
    }
  )");
  const AttrMap& attrs = function_body(*m.functions()[0]).ops().front()->attrs();
  EXPECT_EQ(attrs.get_real("f"), 3.0);
  EXPECT_EQ(attrs.get_reals("reals"), (std::vector<double>{1.0, -2.0}));
  EXPECT_TRUE(attrs.get_ints("ints").empty());
  EXPECT_EQ(attrs.get_string("s"), "a//b");
}

// Parses `text` expecting an error; returns it.
Error parse_error(const std::string& text) {
  testing::register_test_ops();
  try {
    parse_module(text, "bad.tir");
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no error for:\n" << text;
  return Error(ErrorCode::Internal, "none");
}

TEST(IrText, Diagnostics) {
  const std::string head = "func @f(%x: tensor<[4] fp32>) -> (tensor<[4] fp32>) {\n";
  Error e = parse_error(head + "  %0 = graph.ad %x, %x : tensor<[4] fp32>\n  return %0\n}\n");
  EXPECT_EQ(e.code(), ErrorCode::ParseUnknownOp);
  EXPECT_EQ(e.message(), "unknown op 'graph.ad'; did you mean 'graph.add'?");
  EXPECT_EQ(e.where().line, 2);
  EXPECT_EQ(e.where().column, 8);

  e = parse_error(head + "  %0 = graph.add %x, %y : tensor<[4] fp32>\n  return %0\n}\n");
  EXPECT_EQ(e.code(), ErrorCode::ParseUndefinedValue);
  EXPECT_EQ(e.message(), "use of undefined value '%y'");
  EXPECT_EQ(e.where().column, 22);

  e = parse_error(head + "  %x = graph.neg %x : tensor<[4] fp32>\n  return %x\n}\n");
  EXPECT_EQ(e.code(), ErrorCode::ParseUndefinedValue);
  EXPECT_NE(e.message().find("'%x' is defined twice"), std::string::npos) << e.message();

  e = parse_error(head + "  %0 = graph.neg %x : tensor<[4] fp16>\n  return %0\n}\n");
  EXPECT_EQ(e.code(), ErrorCode::VerifyFailed);
  EXPECT_EQ(e.kind(), ErrorKind::Compile);
  EXPECT_EQ(e.message(),
            "in 'graph.neg': result type tensor<[4] fp16 @accum(fp32)> does not match inferred tensor<[4] fp32 "
            "@accum(fp32)>");
  EXPECT_EQ(e.where().line, 2);

  e = parse_error(head + "  %0 = \"graph.neg\"(%x) : (tensor<[4] fp16>) -> (tensor<[4] fp32>)\n  return %0\n}\n");
  EXPECT_EQ(e.code(), ErrorCode::VerifyFailed);
  EXPECT_NE(e.message().find("operand #0 type tensor<[4] fp16 @accum(fp32)> does not match"), std::string::npos);

  e = parse_error(head + "  %0 = graph.exp %x : tensor<[4] fp32>\n");
  EXPECT_EQ(e.code(), ErrorCode::ParseSyntax);
  EXPECT_NE(e.message().find("found end of text"), std::string::npos);

  e = parse_error(head + "  %0:2 = graph.neg %x : tensor<[4] fp32>, tensor<[4] fp32>\n  return %0#0\n}\n");
  EXPECT_EQ(e.code(), ErrorCode::VerifyFailed);
  EXPECT_NE(e.message().find("the op has 1 result(s) but 2 are named"), std::string::npos) << e.message();

  e = parse_error(head + "  return %x\n  test.barrier\n}\n");
  EXPECT_EQ(e.code(), ErrorCode::ParseSyntax);
  EXPECT_EQ(e.message(), "'return' must be the last op of function @f");
  EXPECT_EQ(e.where().line, 3);

  e = parse_error(head + "  return %x\n}\n" + head + "  return %x\n}\n");
  EXPECT_NE(e.message().find("function @f is defined twice"), std::string::npos);

  e = parse_error(head + "  %0 = test.attrs %x {i = 99999999999999999999} : tensor<[4] fp32>\n  return %0\n}\n");
  EXPECT_EQ(e.code(), ErrorCode::ParseSyntax);
  EXPECT_NE(e.message().find("does not fit in 64 bits"), std::string::npos);

  e = parse_error(head + "  %0 = test.attrs %x {s = \"open} : tensor<[4] fp32>\n  return %0\n}\n");
  EXPECT_NE(e.message().find("unterminated string"), std::string::npos);

  e = parse_error(head + "  %0 = test.attrs %x {ints = [1.5]} : tensor<[4] fp32>\n  return %0\n}\n");
  EXPECT_NE(e.message().find("write dense<[...]> for floats"), std::string::npos);

  e = parse_error(head + "  %0 = test.attrs %x {i = 1, i = 2} : tensor<[4] fp32>\n  return %0\n}\n");
  EXPECT_EQ(e.message(), "attribute 'i' is given twice");

  e = parse_error(head + "  %0 = test.attrs %x {pol = policy<fp16 @sat>} : tensor<[4] fp32>\n  return %0\n}\n");
  EXPECT_EQ(e.code(), ErrorCode::ParseUnknownModifier);
  EXPECT_EQ(e.where().line, 2);
  EXPECT_EQ(e.where().column, 42);  // "sat", after the '@'

  // Regions follow the type signature (tessera/ir/text.h), not the operand list.
  e = parse_error(head + "  %0 = \"test.attrs\"(%x) ({\n  }) : (tensor<[4] fp32>) -> (tensor<[4] fp32>)\n}\n");
  EXPECT_EQ(e.code(), ErrorCode::ParseSyntax);
  EXPECT_EQ(e.message(), "expected ':' before the op's type signature, found '('");
}

TEST(IrText, InferenceErrorsCarryTheOpLocation) {
  Error e = parse_error(
      "func @f(%x: tensor<[4] fp32>, %y: tensor<[5] fp32>) -> (tensor<[4] fp32>) {\n"
      "  // a comment line\n"
      "    %0 = graph.add %x, %y : tensor<[4] fp32>\n"
      "  return %0\n"
      "}\n");
  EXPECT_EQ(e.kind(), ErrorKind::Shape);
  EXPECT_EQ(e.where().line, 3);
  EXPECT_EQ(e.where().column, 10);
  EXPECT_EQ(e.where().file, "bad.tir");
  EXPECT_NE(std::string(e.what()).find("bad.tir:3:10: error[TE2001]: in 'graph.add':"), std::string::npos);
}

TEST(IrText, NestedRegionsPrintAfterTheTypes) {
  Module m = build_sample();
  Operation* op = function_body(*m.functions()[0]).ops().front().get();
  op->add_region().add_block();
  // An empty region is invalid IR (no terminator) but still prints, visibly.
  std::string text = print_module(m);
  EXPECT_NE(text.find(" {\n  }\n"), std::string::npos) << text;
}

}  // namespace
}  // namespace tessera::ir
