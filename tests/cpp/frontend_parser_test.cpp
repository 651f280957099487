// Kernel language lexer and parser: tokens, layout, decorators, parameter
// types in both dialects, and every syntax error path.
#include <gtest/gtest.h>

#include "frontend/lexer.h"
#include "frontend_test_util.h"

namespace tessera::frontend {
namespace {

using testing::parse_error;

std::vector<TokenKind> kinds(const std::vector<Token>& tokens) {
  std::vector<TokenKind> out;
  for (const Token& t : tokens) out.push_back(t.kind);
  return out;
}

TEST(FrontendLexer, NumbersSizesAndOperators) {
  std::vector<Token> t = tokenize("a //= 8_KiB + 2_MiB ** 1.5e3 // 0x1F != 1_000\n", "f", 1);
  ASSERT_EQ(t.size(), 13u);
  EXPECT_EQ(t[0].text, "a");
  EXPECT_EQ(t[1].text, "//=");
  EXPECT_EQ(t[2].int_value, 8192);
  EXPECT_EQ(t[4].int_value, 2 * 1024 * 1024);
  EXPECT_EQ(t[5].text, "**");
  EXPECT_EQ(t[6].kind, TokenKind::real);
  EXPECT_DOUBLE_EQ(t[6].real_value, 1500.0);
  EXPECT_EQ(t[7].text, "//");
  EXPECT_EQ(t[8].int_value, 31);
  EXPECT_EQ(t[9].text, "!=");
  EXPECT_EQ(t[10].int_value, 1000);
  EXPECT_EQ(t[11].kind, TokenKind::newline);
  EXPECT_EQ(t[12].kind, TokenKind::end);
}

TEST(FrontendLexer, IndentationBracketsAndComments) {
  std::string src =
      "    def f(a,\n"
      "          b):  # comment\n"
      "\n"
      "        x = 1\n"
      "        # only a comment\n"
      "        if x:\n"
      "            y = \\\n"
      "                2\n"
      "    z\n";
  std::vector<TokenKind> k = kinds(tokenize(src, "f", 1));
  using K = TokenKind;
  std::vector<TokenKind> expected = {K::name,    K::name,    K::op,     K::name,    K::op,     K::name,    K::op,
                                     K::op,      K::newline, K::indent, K::name,    K::op,     K::integer, K::newline,
                                     K::name,    K::name,    K::op,     K::newline, K::indent, K::name,    K::op,
                                     K::integer, K::newline, K::dedent, K::dedent,  K::name,   K::newline, K::end};
  EXPECT_EQ(k, expected);
}

TEST(FrontendLexer, StringsDecodeEscapesAndTripleQuotes) {
  std::vector<Token> t = tokenize("'a\\'b' \"\"\"doc\nline\"\"\"", "f", 1);
  EXPECT_EQ(t[0].text, "a'b");
  EXPECT_EQ(t[1].text, "doc\nline");
}

struct LexError {
  const char* source;
  const char* message;
  int line, column;
};

TEST(FrontendLexer, ErrorsAreLocated) {
  const LexError cases[] = {
      {"x = 'abc\n", "unterminated string", 1, 5},
      {"x = 8_KB\n", "unknown size suffix 'KB'", 1, 7},
      {"x = 99999999999999999999\n", "does not fit in int64", 1, 5},
      {"x = 1 $ 2\n", "unexpected character '$'", 1, 7},
      {"x = (1,\n  2\n", "never closed", 1, 5},
      {"x = 1)\n", "unmatched ')'", 1, 6},
      {"x = [1)\n", "')' does not match '['", 1, 7},
      {"if a:\n    b\n  c\n", "unindent does not match", 3, 3},
      {"x = 1\\ y\n", "backslash must end the line", 1, 6},
      {"x = 1.5_KiB\n", "integer count", 1, 5},
      {"x = 1__0\n", "between digits", 1, 6},
      {"x = 0xZZ\n", "invalid digit 'Z'", 1, 7},
      {"x = r'a'\n", "string prefixes", 1, 5},
  };
  for (const LexError& c : cases) {
    SCOPED_TRACE(c.source);
    try {
      tokenize(c.source, "f.tsr", 1);
      ADD_FAILURE() << "no error";
    } catch (const ParseError& e) {
      EXPECT_NE(e.message().find(c.message), std::string::npos) << e.what();
      EXPECT_EQ(e.where().line, c.line) << e.what();
      EXPECT_EQ(e.where().column, c.column) << e.what();
      EXPECT_EQ(e.where().file, "f.tsr");
    }
  }
}

TEST(FrontendParser, DecoratorsAndParameters) {
  std::vector<KernelDecl> ks = parse_kernels(
      "import tessera\n"
      "@kernel tile[(16, 8)] shared(8_KiB)\n"
      "def f(x: f32[n], y: mut bf16[M, K/tp], s: int32, o: mut fp8_e4m3[grid_groups]):\n"
      "    pass\n"
      "\n"
      "@kernel.autotune(space=dict(BM=[128, 256], stages=[2,3]))\n"
      "def g(x: f16[m]):\n"
      "    pass\n",
      "two.tsr", 10);
  ASSERT_EQ(ks.size(), 2u);
  const KernelDecl& f = ks[0];
  EXPECT_EQ(f.name, "f");
  EXPECT_EQ(f.group_shape, (std::vector<std::int64_t>{16, 8}));
  EXPECT_EQ(f.group_size(), 128);
  EXPECT_EQ(f.shared_bytes, 8192);
  ASSERT_EQ(f.params.size(), 4u);
  EXPECT_TRUE(f.params[0].is_buffer);
  EXPECT_FALSE(f.params[0].is_mut);
  EXPECT_EQ(f.params[0].dtype, DType::fp32);
  EXPECT_EQ(f.params[1].dtype, DType::bf16);
  EXPECT_TRUE(f.params[1].is_mut);
  ASSERT_EQ(f.params[1].dims.size(), 2u);
  EXPECT_EQ(f.params[1].dims[1].str(), "K/tp");
  EXPECT_FALSE(f.params[2].is_buffer);
  EXPECT_EQ(f.params[2].dtype, DType::int32);
  EXPECT_EQ(f.params[3].dtype, DType::fp8_e4m3);
  EXPECT_EQ(f.shape_symbols, (std::vector<std::string>{"n", "M", "K", "tp", "grid_groups"}));
  EXPECT_EQ(f.location.line, 12);  // first_line 10 + 2
  EXPECT_EQ(f.location.column, 5);
  const KernelDecl& g = ks[1];
  EXPECT_TRUE(g.group_shape.empty());
  EXPECT_FALSE(g.shared_bytes.has_value());
  ASSERT_EQ(g.autotune_space.size(), 2u);
  EXPECT_EQ(g.autotune_space[0].first, "BM");
  EXPECT_EQ(g.autotune_space[0].second, (std::vector<std::int64_t>{128, 256}));
  EXPECT_EQ(g.autotune_space[1].second, (std::vector<std::int64_t>{2, 3}));
}

TEST(FrontendParser, PythonDialectAnnotationsAndDecoratorKeywords) {
  std::vector<KernelDecl> ks = parse_kernels(
      "    @tessera.kernel(tile=(128,), shared=8 * 1024)\n"
      "    def group_sum(x: tessera.f32[\"n\"], out: tessera.mut(tessera.f32[\"grid_groups\"]), a: tessera.bfloat16,\n"
      "                  w: tessera.f16[\"M\", \"K/tp\", 4]) -> None:\n"
      "        \"\"\"Docstring.\"\"\"\n"
      "        pass\n",
      "mod.py", 41, SourceDialect::python);
  ASSERT_EQ(ks.size(), 1u);
  const KernelDecl& k = ks[0];
  EXPECT_EQ(k.group_shape, (std::vector<std::int64_t>{128}));
  EXPECT_EQ(k.shared_bytes, 8192);
  EXPECT_TRUE(k.params[1].is_mut);
  EXPECT_EQ(k.params[1].dims[0].str(), "grid_groups");
  EXPECT_EQ(k.params[2].dtype, DType::bf16);
  EXPECT_FALSE(k.params[2].is_buffer);
  EXPECT_EQ(k.params[3].dims[1].str(), "K/tp");
  EXPECT_TRUE(k.params[3].dims[2].is_fixed());
  EXPECT_EQ(k.params[3].dims[2].size, 4);
  EXPECT_EQ(k.location.line, 42);
  EXPECT_EQ(k.location.column, 9);
}

TEST(FrontendParser, SpecKernelsParse) {
  for (const char* name : {"scale.tsr", "group_sum.tsr", "axpy_tiled.tsr", "tp_gemm.tsr", "gemm_tile.tsr"}) {
    SCOPED_TRACE(name);
    std::string path = testing::conformance_path(name);
    std::vector<KernelDecl> ks = parse_kernels(testing::read_text(path), path);
    ASSERT_EQ(ks.size(), 1u);
    EXPECT_EQ(ks[0].name + ".tsr", name);
  }
}

struct SyntaxCase {
  const char* source;
  ErrorCode code;
  const char* message;
  int line, column;
};

TEST(FrontendParser, SyntaxErrorsAreLocated) {
  const SyntaxCase cases[] = {
      {"def f(x: f32[n]):\n    pass\n", ErrorCode::ParseSyntax, "expected '@kernel'", 1, 1},
      {"@kernel\ndef f(x: f32[n])\n    pass\n", ErrorCode::ParseSyntax, "expected ':' after the parameter list", 2, 17},
      {"@kernel\ndef f(x):\n    pass\n", ErrorCode::ParseSyntax, "needs a type annotation", 2, 7},
      {"@kernel\ndef f(x: f32[n], x: f32[n]):\n    pass\n", ErrorCode::ParseSyntax, "duplicate parameter 'x'", 2, 18},
      {"@jit\ndef f(x: f32[n]):\n    pass\n", ErrorCode::ParseSyntax, "unknown decorator", 1, 2},
      {"@kernel tiles[(128,)]\ndef f(x: f32[n]):\n    pass\n", ErrorCode::ParseUnknownModifier,
       "unknown kernel modifier", 1, 9},
      {"@kernel tile[(128,)] tile[(64,)]\ndef f(x: f32[n]):\n    pass\n", ErrorCode::ParseDuplicateModifier,
       "group shape is given twice", 1, 22},
      {"@kernel tile[(0,)]\ndef f(x: f32[n]):\n    pass\n", ErrorCode::ParseSyntax, "must be positive", 1, 15},
      // Found by the parser fuzzer: an empty group shape read past the subscript's items.
      {"@kernel tile[()]\ndef f(x: f32[n]):\n    pass\n", ErrorCode::ParseSyntax, "tile[...] needs the group shape",
       1, 9},
      {"@kernel shared(n)\ndef f(x: f32[n]):\n    pass\n", ErrorCode::ParseSyntax, "must be an integer constant", 1,
       16},
      {"@kernel.autotune\ndef f(x: f32[n]):\n    pass\n", ErrorCode::ParseSyntax, "needs space=", 1, 2},
      {"@kernel.autotune(space=dict(BM=128))\ndef f(x: f32[n]):\n    pass\n", ErrorCode::ParseSyntax,
       "non-empty list of integers", 1, 32},
      {"@kernel.autotune(spaces=dict(BM=[1]))\ndef f(x: f32[n]):\n    pass\n", ErrorCode::ParseUnknownModifier,
       "did you mean 'space'", 1, 18},
      {"@kernel\ndef f(x: f32[n+1]):\n    pass\n", ErrorCode::ParseSyntax, "a dimension is a size, a symbol", 2, 14},
      {"@kernel\ndef f(x: f33[n]):\n    pass\n", ErrorCode::DtypeUnknown, "f33", 2, 10},
      {"@kernel\ndef f(x: tf32[n]):\n    pass\n", ErrorCode::DtypeNotStorage, "tf32", 2, 10},
      {"@kernel\ndef f(x: mut f32):\n    pass\n", ErrorCode::KernelType, "only buffers can be mut", 2, 14},
      {"@kernel\ndef f(x: f32[n]):\n    while True:\n        break\n", ErrorCode::ParseSyntax,
       "'break' is not supported", 4, 9},
      {"@kernel\ndef f(x: f32[n]):\n    for i in range(3):\n        pass\n    else:\n        pass\n",
       ErrorCode::ParseSyntax, "for ... else", 5, 5},
      {"@kernel\ndef f(x: f32[n]):\n    a = b = 1\n", ErrorCode::ParseSyntax, "chained assignment", 3, 11},
      {"@kernel\ndef f(x: f32[n]):\n    a = x[1:2:3]\n", ErrorCode::ParseSyntax, "slice steps", 3, 14},
      {"@kernel\ndef f(x: f32[n]):\n    a = 1 +\n", ErrorCode::ParseSyntax, "expected an expression", 3, 12},
      {"@kernel\ndef f(x: f32[n]):\n    a = f(b=1, 2)\n", ErrorCode::ParseSyntax, "positional argument follows", 3, 16},
      {"@kernel\ndef f(x: f32[n]):\n    with a:\n        pass\n", ErrorCode::ParseSyntax, "'with' is not supported", 3,
       5},
      {"@kernel\ndef f(x: f32[n]):\npass\n", ErrorCode::ParseSyntax, "expected an indented block", 3, 1},
      {"@kernel\ndef f(x: f32[n]):\n    pass\n@kernel\ndef f(y: f32[n]):\n    pass\n", ErrorCode::ParseSyntax,
       "defined twice", 5, 5},
      {"@kernel\ndef f(y: mut f32[n]):\n    pass\n", ErrorCode::ParseSyntax, "'mut T' is .tsr syntax", 2, 10},
  };
  for (const SyntaxCase& c : cases) {
    SCOPED_TRACE(c.source);
    SourceDialect dialect =
        std::string(c.message).find(".tsr syntax") != std::string::npos ? SourceDialect::python : SourceDialect::tsr;
    Error e = parse_error(c.source, dialect);
    EXPECT_EQ(e.code(), c.code) << e.what();
    EXPECT_NE(e.message().find(c.message), std::string::npos) << e.what();
    EXPECT_EQ(e.where().line, c.line) << e.what();
    EXPECT_EQ(e.where().column, c.column) << e.what();
    // The formatted error carries file:line:col and a caret line.
    std::string text = e.what();
    EXPECT_NE(text.find("k.tsr:" + std::to_string(c.line) + ":" + std::to_string(c.column)), std::string::npos) << text;
    EXPECT_NE(text.find("^"), std::string::npos) << text;
  }
}

TEST(FrontendParser, DeepNestingIsAnErrorNotACrash) {
  std::string deep =
      "@kernel\ndef f(x: f32[n]):\n    a = " + std::string(300, '(') + "1" + std::string(300, ')') + "\n";
  Error e = parse_error(deep);
  EXPECT_EQ(e.kind(), ErrorKind::Parse);
  std::string unary = "@kernel\ndef f(x: f32[n]):\n    a = " + std::string(5000, '-') + "1\n";
  Error u = parse_error(unary);
  EXPECT_NE(u.message().find("nested too deeply"), std::string::npos) << u.what();
}

}  // namespace
}  // namespace tessera::frontend
