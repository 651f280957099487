// The IR core's bookkeeping: use lists, replace_all_uses_with, erasing, the op
// registry, attribute completion, and the pass registry and pass manager.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "tessera/ir/builder.h"
#include "tessera/ir/dialect.h"
#include "tessera/ir/pass.h"
#include "tessera/ir/text.h"

namespace tessera::ir {
namespace {

Type f32(std::int64_t n) {
  return Type::tensor(fixed_shape({n}), default_policy(DType::fp32));
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(IrCore, UseListsTrackEveryOperandSlot) {
  Module m;
  Block& body = function_body(*m.add_function(make_function("f")));
  Value* x = body.add_argument(f32(4), "x");
  OpBuilder b(body);
  Operation* add = b.create("graph.add", {x, x});
  ASSERT_EQ(x->uses().size(), 2u);
  EXPECT_EQ(x->uses()[0], (Use{add, 0}));
  EXPECT_EQ(x->uses()[1], (Use{add, 1}));
  EXPECT_TRUE(add->result()->use_empty());
  EXPECT_TRUE(add->results_unused());
  Operation* neg = b.create("graph.neg", {add->result()});
  EXPECT_EQ(add->result()->uses(), (std::vector<Use>{{neg, 0}}));
  EXPECT_FALSE(add->results_unused());
  EXPECT_EQ(add->result()->defining_op(), add);
  EXPECT_TRUE(x->is_block_argument());
  EXPECT_EQ(x->owner_block(), &body);
  EXPECT_EQ(add->parent_block(), &body);

  add->set_operand(1, neg->result());
  EXPECT_EQ(x->uses(), (std::vector<Use>{{add, 0}}));
  EXPECT_EQ(neg->result()->uses(), (std::vector<Use>{{add, 1}}));
  add->drop_operands();
  EXPECT_TRUE(x->use_empty());
  EXPECT_TRUE(neg->result()->use_empty());
}

TEST(IrCore, ReplaceAllUsesWith) {
  Module m;
  Block& body = function_body(*m.add_function(make_function("f")));
  Value* x = body.add_argument(f32(4), "x");
  Value* y = body.add_argument(f32(4), "y");
  OpBuilder b(body);
  Operation* add = b.create("graph.add", {x, x});
  Operation* mul = b.create("graph.mul", {x, y});
  x->replace_all_uses_with(y);
  EXPECT_TRUE(x->use_empty());
  EXPECT_EQ(add->operand(0), y);
  EXPECT_EQ(add->operand(1), y);
  EXPECT_EQ(mul->operand(0), y);
  EXPECT_EQ(y->uses().size(), 4u);
  y->replace_all_uses_with(y);  // a no-op, not a loop
  EXPECT_EQ(y->uses().size(), 4u);
}

TEST(IrCore, EraseRefusesUsedResultsAndDropsOperands) {
  Module m;
  Block& body = function_body(*m.add_function(make_function("f")));
  Value* x = body.add_argument(f32(4), "x");
  OpBuilder b(body);
  Operation* add = b.create("graph.add", {x, x});
  Operation* neg = b.create("graph.neg", {add->result()});
  try {
    body.erase(add);
    FAIL() << "erased an op whose result is used";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Internal);
    EXPECT_EQ(e.message(), "erasing op 'graph.add' whose results are still used");
  }
  body.erase(neg);
  EXPECT_TRUE(add->result()->use_empty());
  body.erase(add);
  EXPECT_TRUE(x->use_empty());
  EXPECT_TRUE(body.ops().empty());
}

TEST(IrCore, InsertionPointAndLookup) {
  Module m;
  Operation* f = m.add_function(make_function("f"));
  m.add_function(make_function("g"));
  EXPECT_EQ(m.lookup("f"), f);
  EXPECT_EQ(m.lookup("h"), nullptr);
  Block& body = function_body(*f);
  Value* x = body.add_argument(f32(2), "x");
  OpBuilder b(body);
  Operation* ret = b.create("return", {x});
  b.set_insertion_point(body.find(ret));
  Operation* neg = b.create("graph.neg", {x});
  EXPECT_EQ(body.ops().front().get(), neg);
  EXPECT_EQ(body.terminator(), ret);
  EXPECT_EQ(function_results(*f), (std::vector<Value*>{x}));
}

TEST(IrCore, RegistryLookups) {
  const Registry& r = Registry::global();
  ASSERT_NE(r.find("graph.add"), nullptr);
  EXPECT_EQ(r.find("graph.add")->dialect(), "graph");
  EXPECT_EQ(r.find("return")->dialect(), "builtin");
  EXPECT_TRUE(r.find("return")->is_terminator);
  EXPECT_EQ(r.find("graph.nope"), nullptr);
  try {
    r.get("graph.sigmod");
    FAIL();
  } catch (const ParseError& e) {
    EXPECT_EQ(e.code(), ErrorCode::ParseUnknownOp);
    EXPECT_EQ(e.message(), "unknown op 'graph.sigmod'; did you mean 'graph.sigmoid'?");
  }
  try {
    r.get("zzzzzzzz");
    FAIL();
  } catch (const ParseError& e) {
    EXPECT_EQ(e.message(), "unknown op 'zzzzzzzz'");
  }
  bool saw_add = false;
  for (const OpDef* d : r.all()) saw_add |= d->name == "graph.add";
  EXPECT_TRUE(saw_add);
  EXPECT_EQ(r.find("graph.gelu")->find_attr("approximate")->kind, AttrKind::string);
  EXPECT_EQ(r.find("graph.gelu")->find_attr("nope"), nullptr);
}

TEST(IrCore, CompleteAttrsFillsDefaultsAndRejectsMistakes) {
  const OpDef& gelu = Registry::global().get("graph.gelu");
  AttrMap full = complete_attrs(gelu, {});
  EXPECT_EQ(full.get_string("approximate"), "none");

  auto message = [](const OpDef& def, AttrMap attrs) {
    try {
      complete_attrs(def, std::move(attrs));
    } catch (const ArgumentError& e) {
      EXPECT_EQ(e.code(), ErrorCode::ArgumentInvalid);
      return e.message();
    }
    return std::string("no error");
  };
  EXPECT_EQ(message(gelu, {{"aproximate", std::string("tanh")}}),
            "'graph.gelu' has no attribute 'aproximate'; did you mean 'approximate'?");
  EXPECT_EQ(message(gelu, {{"approximate", true}}),
            "'graph.gelu' attribute 'approximate' must be a string, got a bool");
  const OpDef& constant = Registry::global().get("graph.constant");
  EXPECT_TRUE(contains(message(constant, {}), "'graph.constant' needs attribute"));

  // An integer is accepted where a float is expected, and a list of ints for dense floats.
  const OpDef& dropout = Registry::global().get("graph.dropout");
  AttrMap d = complete_attrs(dropout, {{"p", std::int64_t{0}}, {"seed", std::int64_t{1}}});
  EXPECT_EQ(kind_of(*d.find("p")), AttrKind::real);
  EXPECT_EQ(d.get_real("p"), 0.0);
}

TEST(IrPasses, RegistryHasVerifyAndSuggestsNames) {
  EXPECT_EQ(lookup_pass("verify").name, "verify");
  try {
    lookup_pass("verfy");
    FAIL();
  } catch (const ArgumentError& e) {
    EXPECT_EQ(e.message(), "unknown pass 'verfy'; did you mean 'verify'?");
  }
  bool found = false;
  for (const PassInfo* p : registered_passes()) found |= p->name == "verify";
  EXPECT_TRUE(found);
}

Module sample() {
  return parse_module(
      "func @f(%x: tensor<[4] fp32>) -> (tensor<[4] fp32>) {\n"
      "  %0 = graph.neg %x : tensor<[4] fp32>\n"
      "  %1 = graph.neg %0 : tensor<[4] fp32>\n"
      "  return %1\n"
      "}\n");
}

TEST(IrPasses, PassManagerRunsDumpsAndTimes) {
  register_pass(PassInfo{"test-erase-first-neg", "Removes a double negation (test pass).", [](Module& m) {
                           Block& body = function_body(*m.functions()[0]);
                           Operation* second = std::next(body.ops().begin())->get();
                           Operation* first = body.ops().front().get();
                           second->result()->replace_all_uses_with(first->operand(0));
                           body.erase(second);
                           body.erase(first);
                         }});
  Module m = sample();
  PassManager pm;
  pm.add("test-erase-first-neg");
  pm.add("verify");
  std::ostringstream dump;
  pm.print_ir_after_all(&dump);
  pm.run(m);
  const std::string after =
      "func @f(%x: tensor<[4] fp32 @accum(fp32)>) -> (tensor<[4] fp32 @accum(fp32)>) {\n"
      "  return %x\n"
      "}\n";
  EXPECT_EQ(print_module(m), after);
  EXPECT_EQ(dump.str(), "// -----// IR after test-erase-first-neg //----- //\n" + after +
                            "// -----// IR after verify //----- //\n" + after);
  ASSERT_EQ(pm.timings().size(), 2u);
  EXPECT_EQ(pm.timings()[0].name, "test-erase-first-neg");
  EXPECT_GE(pm.timings()[0].milliseconds, 0.0);

  std::istringstream report(pm.timing_report());
  std::vector<std::string> lines;
  for (std::string line; std::getline(report, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0].rfind("pass", 0), 0u);
  EXPECT_EQ(lines[1].rfind("test-erase-first-neg", 0), 0u);
  EXPECT_EQ(lines[2].rfind("verify", 0), 0u);
  EXPECT_EQ(lines[3].rfind("total", 0), 0u);
  EXPECT_TRUE(contains(lines[3], "100.0"));
  // Columns line up: every row has the same length.
  for (const auto& line : lines) EXPECT_EQ(line.size(), lines[0].size()) << line;
}

TEST(IrPasses, VerifyEachCatchesABrokenPass) {
  Module m = sample();
  PassManager pm;
  pm.add(PassInfo{"test-break-types", "Sets a wrong result type.", [](Module& mod) {
                    Block& body = function_body(*mod.functions()[0]);
                    body.ops().front()->result()->set_type(Type::tensor(fixed_shape({4}), default_policy(DType::fp16)));
                  }});
  try {
    pm.run(m);
    FAIL() << "broken IR passed verification";
  } catch (const CompileError& e) {
    EXPECT_EQ(e.code(), ErrorCode::VerifyFailed);
    EXPECT_TRUE(contains(e.message(), "after pass 'test-break-types': in 'graph.neg' (op #0 of function @f)"))
        << e.message();
    EXPECT_EQ(e.where().line, 2);
  }
  Module m2 = sample();
  pm.set_verify_each(false);
  EXPECT_NO_THROW(pm.run(m2));
}

TEST(IrPasses, RegisteringTwiceIsAnError) {
  PassInfo p{"test-twice", "x", [](Module&) {}};
  register_pass(p);
  EXPECT_THROW(register_pass(p), Error);
}

}  // namespace
}  // namespace tessera::ir
