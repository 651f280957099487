// Nested regions in the IR text form: round trips of custom and generic
// forms, block-argument naming, scoping of names and located errors.
#include <gtest/gtest.h>

#include "tessera/ir/text.h"
#include "tessera/ir/verifier.h"
#include "tessera/support/error.h"

namespace tessera::ir {
namespace {

const char* kNested =
    R"(func @nest(%n: lane<int64>, %x: gmem<[n] fp32 mut>) -> () attributes {group_shape = [32], kernel = true} {
  %0 = tile.const {policy = policy<int64>, value = 0} : lane<int64>
  %1 = tile.const {policy = policy<int64>, value = 1} : lane<int64>
  %2:2 = tile.for %0, %n, %1, %0, %1 : lane<int64>, lane<int64> {
    ^(%i: lane<int64>, %a: lane<int64>, %b: lane<int64>):
    %3 = tile.cmp %a, %b {pred = "lt"} : lane<bool>
    %4:2 = tile.if %3, %a, %b : lane<int64>, lane<int64> {
      ^(%p: lane<int64>, %q: lane<int64>):
      %5 = tile.while %p : lane<int64> {
        ^(%v: lane<int64>):
        %6 = tile.cmp %v, %n {pred = "lt"} : lane<bool>
        tile.condition %6, %v
      } {
        ^(%w: lane<int64>):
        %7 = tile.add %w, %i : lane<int64>
        tile.yield %7
      }
      tile.yield %5, %q
    } {
      ^(%p2: lane<int64>, %q2: lane<int64>):
      tile.yield %q2, %p2
    }
    tile.yield %4#1, %4#0
  }
  return
}
)";

TEST(IrRegions, CustomAndGenericRoundTrip) {
  Module m = parse_module(kNested);
  verify(m);
  std::string printed = print_module(m);
  EXPECT_EQ(print_module(parse_module(printed)), printed);
  std::string generic = print_module(m, {.generic = true});
  EXPECT_NE(generic.find("\"tile.while\"(%p) : (lane<int64>) -> (lane<int64>) {"), std::string::npos) << generic;
  EXPECT_EQ(print_module(parse_module(generic)), printed);
  EXPECT_EQ(print_module(parse_module(generic), {.generic = true}), generic);
  // Numbering runs through nested ops in order; argument names are kept.
  EXPECT_NE(printed.find("      %7 = tile.add %w, %i : lane<int64>\n"), std::string::npos) << printed;
  EXPECT_NE(printed.find("tile.yield %4#1, %4#0"), std::string::npos) << printed;
}

TEST(IrRegions, StructureOfParsedOps) {
  Module m = parse_module(kNested);
  Operation& loop = *std::next(function_body(*m.functions()[0]).ops().begin(), 2)->get();
  ASSERT_EQ(loop.name(), "tile.for");
  ASSERT_EQ(loop.num_regions(), 1u);
  const Block& body = loop.region(0).block();
  EXPECT_EQ(body.num_arguments(), 3u);
  EXPECT_EQ(body.argument(0)->name(), "i");
  EXPECT_EQ(body.parent_region(), &loop.region(0));
  const Operation& branch = *std::next(body.ops().begin())->get();
  EXPECT_EQ(branch.name(), "tile.if");
  EXPECT_EQ(branch.num_regions(), 2u);
  EXPECT_EQ(branch.parent_block(), &body);
}

TEST(IrRegions, UnnamedBlockArgumentsGetUniqueNames) {
  Module m = parse_module(kNested);
  Operation& loop = *std::next(function_body(*m.functions()[0]).ops().begin(), 2)->get();
  loop.region(0).block().argument(1)->set_name("");
  loop.region(0).block().argument(2)->set_name("n");  // taken by a parameter
  std::string printed = print_module(m);
  EXPECT_NE(printed.find("^(%i: lane<int64>, %arg3: lane<int64>, %arg4: lane<int64>):"), std::string::npos) << printed;
  EXPECT_EQ(print_module(parse_module(printed)), printed);
}

SourceLocation error_at(const std::string& text) {
  try {
    Module m = parse_module(text, "t.tir");
    verify(m);
  } catch (const Error& e) {
    return e.where();
  }
  ADD_FAILURE() << "no error for:\n" << text;
  return {};
}

TEST(IrRegions, LocatedErrors) {
  std::string head = "func @k(%n: lane<int64>) -> () {\n";
  // Inner names are not visible after their region.
  SourceLocation loc = error_at(head +
                                "  tile.for %n, %n, %n {\n    ^(%i: lane<int64>):\n    tile.yield\n  }\n"
                                "  %0 = tile.neg %i : lane<int64>\n  return\n}\n");
  EXPECT_EQ(loc.line, 6);
  EXPECT_EQ(loc.column, 17);
  // A block argument that reuses a visible name.
  loc = error_at(head + "  tile.for %n, %n, %n {\n    ^(%n: lane<int64>):\n    tile.yield\n  }\n  return\n}\n");
  EXPECT_EQ(loc.line, 3);
  EXPECT_EQ(loc.column, 7);
  // An op after a region's terminator.
  loc = error_at(head +
                 "  tile.for %n, %n, %n {\n    ^(%i: lane<int64>):\n    tile.yield\n    tile.barrier\n  }\n"
                 "  return\n}\n");
  EXPECT_EQ(loc.line, 5);
  EXPECT_EQ(loc.column, 5);
  // `return` inside a region: the loop's verifier names it.
  try {
    Module m = parse_module(head + "  tile.for %n, %n, %n {\n    ^(%i: lane<int64>):\n    return\n  }\n  return\n}\n");
    verify(m);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.where().line, 2);
    EXPECT_NE(e.message().find("it ends with 'return'"), std::string::npos) << e.message();
  }
}

TEST(IrRegions, GraphIrUnchanged) {
  const char* text =
      "func @f(%x: tensor<[B, 4] fp16 @accum(fp32)>) -> (tensor<[B, 4] fp16 @accum(fp32)>) {\n"
      "  %0 = graph.add %x, %x : tensor<[B, 4] fp16 @accum(fp32)>\n  return %0\n}\n";
  Module m = parse_module(text);
  EXPECT_EQ(print_module(m), text);
}

}  // namespace
}  // namespace tessera::ir
