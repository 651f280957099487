// `tessera-opt` run in-process through run_opt: exit statuses, stdin input,
// --split-input-file line numbers and separators.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "tessera/tools/opt.h"

namespace tessera {
namespace {

struct OptResult {
  int status;
  std::string out;
  std::string err;
};

OptResult run(const std::vector<std::string>& args, const std::string& input = "") {
  std::istringstream in(input);
  std::ostringstream out, err;
  int status = run_opt(args, in, out, err);
  return {status, out.str(), err.str()};
}

constexpr const char* kGood =
    "func @f(%x: tensor<[2] fp32>) -> (tensor<[2] fp32>) {\n"
    "  return %x\n"
    "}\n";
constexpr const char* kGoodPrinted =
    "func @f(%x: tensor<[2] fp32 @accum(fp32)>) -> (tensor<[2] fp32 @accum(fp32)>) {\n"
    "  return %x\n"
    "}\n";

TEST(OptTool, ReadsStdinAndPrintsCanonicalText) {
  OptResult r = run({"-"}, kGood);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, kGoodPrinted);
  EXPECT_EQ(r.err, "");
}

TEST(OptTool, ExitStatuses) {
  EXPECT_EQ(run({}).status, 2);
  EXPECT_EQ(run({"-", "--bogus"}, kGood).status, 2);
  EXPECT_EQ(run({"-", "--pass", "nope"}, kGood).status, 2);
  EXPECT_EQ(run({"a.tir", "b.tir"}).status, 2);
  EXPECT_EQ(run({"--help"}).status, 0);
  EXPECT_EQ(run({"/nonexistent/file.tir"}).status, 1);
  OptResult bad = run({"-"}, "func @f() -> () {\n  graph.nope\n  return\n}\n");
  EXPECT_EQ(bad.status, 1);
  EXPECT_EQ(bad.out, "");
  EXPECT_EQ(bad.err.rfind("<stdin>:2:3: error[TE3004]: unknown op 'graph.nope'", 0), 0u) << bad.err;
}

TEST(OptTool, SplitInputKeepsLineNumbersAndContinues) {
  const std::string text = std::string(kGood) +
                           "// -----\n"
                           "func @g() -> () {\n"
                           "  %0 = graph.neg %missing : tensor<[2] fp32>\n"
                           "  return\n"
                           "}\n"
                           "// -----   \n" +  // trailing blanks still separate
                           kGood;
  OptResult r = run({"-", "--split-input-file"}, text);
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, std::string(kGoodPrinted) + "// -----\n// -----\n" + kGoodPrinted);
  // The bad chunk's error is on line 6 of the whole input.
  EXPECT_EQ(r.err.rfind("<stdin>:6:18: error[TE3005]: use of undefined value '%missing'", 0), 0u) << r.err;
}

TEST(OptTool, GenericOutput) {
  OptResult r = run({"-", "--generic"}, kGood);
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("  \"return\"(%x) : (tensor<[2] fp32 @accum(fp32)>) -> ()\n"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace tessera
