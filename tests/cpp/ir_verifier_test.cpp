// The verifier on IR broken directly through the C++ API (as a buggy pass
// would): each case checks the error code, the op named and what is wrong.
#include <gtest/gtest.h>

#include <string>

#include "ir_test_ops.h"
#include "tessera/ir/builder.h"
#include "tessera/ir/dialect.h"
#include "tessera/ir/verifier.h"

namespace tessera::ir {
namespace {

Type f32(std::int64_t n) {
  return Type::tensor(fixed_shape({n}), default_policy(DType::fp32));
}

// func @f(%x: [4] fp32) { %0 = add %x, %x; %1 = neg %0; return %1 }
struct Sample {
  Module module;
  Operation* func;
  Value* x;
  Operation* add;
  Operation* neg;
  Operation* ret;
};

Sample build() {
  Sample s;
  s.func = s.module.add_function(make_function("f"));
  Block& body = function_body(*s.func);
  s.x = body.add_argument(f32(4), "x");
  OpBuilder b(body);
  s.add = b.create("graph.add", {s.x, s.x}, {}, SourceLocation{"f.tir", 2, 8, "", 1});
  s.neg = b.create("graph.neg", {s.add->result()}, {}, SourceLocation{"f.tir", 3, 8, "", 1});
  s.ret = b.create("return", {s.neg->result()});
  return s;
}

// The verifier's error for `m`, or a test failure if it accepts it.
CompileError verify_error(const Module& m) {
  try {
    verify(m);
  } catch (const CompileError& e) {
    return e;
  } catch (const Error& e) {
    ADD_FAILURE() << "not a CompileError: " << e.what();
    return CompileError(ErrorCode::Internal, "wrong kind");
  }
  ADD_FAILURE() << "verifier accepted broken IR";
  return CompileError(ErrorCode::Internal, "none");
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(IrVerifier, AcceptsWellFormedIr) {
  Sample s = build();
  EXPECT_NO_THROW(verify(s.module));
  EXPECT_NO_THROW(verify_function(*s.func));
}

TEST(IrVerifier, WrongResultType) {
  Sample s = build();
  s.neg->result()->set_type(Type::tensor(fixed_shape({4}), default_policy(DType::fp16)));
  CompileError e = verify_error(s.module);
  EXPECT_EQ(e.code(), ErrorCode::VerifyFailed);
  EXPECT_EQ(e.message(),
            "in 'graph.neg' (op #1 of function @f): result type tensor<[4] fp16 @accum(fp32)> does not match inferred "
            "tensor<[4] fp32 @accum(fp32)>");
  EXPECT_EQ(e.where().file, "f.tir");
  EXPECT_EQ(e.where().line, 3);
}

TEST(IrVerifier, ResultTypeStaleAfterOperandChange) {
  // Re-pointing an operand at a value of another shape leaves the old result type behind.
  Sample s = build();
  Value* y = function_body(*s.func).add_argument(f32(8), "y");
  s.add->set_operand(0, y);
  s.add->set_operand(1, y);
  CompileError e = verify_error(s.module);
  EXPECT_TRUE(contains(e.message(), "in 'graph.add' (op #0 of function @f): result type tensor<[4] fp32"))
      << e.message();
}

TEST(IrVerifier, UseBeforeDefinition) {
  Sample s = build();
  s.add->set_operand(1, s.neg->result());  // neg is defined after add
  CompileError e = verify_error(s.module);
  EXPECT_EQ(e.code(), ErrorCode::VerifyFailed);
  EXPECT_TRUE(contains(e.message(), "in 'graph.add' (op #0 of function @f): operand #1 is used before it is defined"))
      << e.message();
}

TEST(IrVerifier, ValueFromAnotherFunction) {
  Sample s = build();
  Operation* g = s.module.add_function(make_function("g"));
  Block& body = function_body(*g);
  OpBuilder(body).create("return", {s.x});
  CompileError e = verify_error(s.module);
  EXPECT_TRUE(contains(e.message(), "in 'return' (op #0 of function @g): operand #0 is used before it is defined"))
      << e.message();
}

TEST(IrVerifier, MissingTerminator) {
  Sample s = build();
  Block& body = function_body(*s.func);
  // Make the return's operand unused so it can be erased, then erase it.
  body.erase(s.ret);
  CompileError e = verify_error(s.module);
  EXPECT_EQ(e.message(), "function @f must end with 'return' (its last op is 'graph.neg')");
  EXPECT_EQ(e.where().line, 3);

  Module empty;
  empty.add_function(make_function("e"));
  EXPECT_EQ(verify_error(empty).message(), "function @e must end with 'return' (its body is empty)");
}

TEST(IrVerifier, ReturnNotLast) {
  Sample s = build();
  testing::register_test_ops();
  OpBuilder(function_body(*s.func)).create("test.barrier", {});
  CompileError e = verify_error(s.module);
  EXPECT_EQ(e.message(), "function @f must end with 'return' (its last op is 'test.barrier')");

  // A return in the middle of a block that also ends in return.
  Sample t = build();
  OpBuilder b(function_body(*t.func));
  b.set_insertion_point(function_body(*t.func).find(t.neg));
  b.create("return", {t.add->result()});
  e = verify_error(t.module);
  EXPECT_EQ(e.message(), "in 'return' (op #1 of function @f): a terminator must be the last op of its block");
}

TEST(IrVerifier, WrongOperandCount) {
  Sample s = build();
  Block& body = function_body(*s.func);
  const OpDef& add = Registry::global().get("graph.add");
  auto bad = std::make_unique<Operation>(add, std::vector<Value*>{s.x}, std::vector<Type>{f32(4)}, AttrMap{},
                                         SourceLocation{});
  body.insert(body.find(s.ret), std::move(bad));
  CompileError e = verify_error(s.module);
  EXPECT_EQ(e.message(), "in 'graph.add' (op #2 of function @f): takes 2 operand(s), got 1");
}

TEST(IrVerifier, NullOperand) {
  Sample s = build();
  s.neg->set_operand(0, nullptr);
  EXPECT_EQ(verify_error(s.module).message(), "in 'graph.neg' (op #1 of function @f): operand #0 is null");
}

TEST(IrVerifier, AttributeProblems) {
  // A default attribute erased by a pass.
  Sample s = build();
  OpBuilder b(function_body(*s.func));
  b.set_insertion_point(function_body(*s.func).find(s.ret));
  Operation* gelu = b.create("graph.gelu", {s.x});
  gelu->attrs().erase("approximate");
  CompileError e = verify_error(s.module);
  EXPECT_EQ(e.message(),
            "in 'graph.gelu' (op #2 of function @f): attribute 'approximate' is missing (its default is \"none\")");

  // An attribute of the wrong kind.
  gelu->attrs().set("approximate", std::int64_t{1});
  e = verify_error(s.module);
  EXPECT_TRUE(contains(e.message(), "attribute 'approximate' must be a string, got a int")) << e.message();

  // An unknown attribute, with a hint.
  gelu->attrs().set("approximate", std::string("none"));
  gelu->attrs().set("aproximate", std::string("none"));
  e = verify_error(s.module);
  EXPECT_TRUE(contains(e.message(), "has no attribute 'aproximate'; did you mean 'approximate'?")) << e.message();

  // A value the op's inference rejects.
  gelu->attrs().erase("aproximate");
  gelu->attrs().set("approximate", std::string("fast"));
  e = verify_error(s.module);
  EXPECT_EQ(e.message(),
            "in 'graph.gelu' (op #2 of function @f): approximate must be \"none\" or \"tanh\", got \"fast\"");
}

TEST(IrVerifier, DuplicateFunctionNames) {
  Sample s = build();
  Operation* g = s.module.add_function(make_function("f"));
  OpBuilder(function_body(*g)).create("return", {});
  EXPECT_EQ(verify_error(s.module).message(), "function @f is defined twice in the module");
}

TEST(IrVerifier, NestedFunction) {
  Sample s = build();
  Block& body = function_body(*s.func);
  body.insert(body.find(s.ret), make_function("inner"));
  EXPECT_TRUE(contains(verify_error(s.module).message(), "functions cannot be nested inside a function"));
}

}  // namespace
}  // namespace tessera::ir
