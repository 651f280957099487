// The kernel language parser: tokens -> syntax tree (ast.h) and KernelDecl.
//
// A recursive-descent parser for the Python subset kernels use, with
// Python's precedence. Decorators and parameter annotations are interpreted
// into the KernelDecl fields (group shape, shared budget, autotune space,
// parameter types); bodies are left to sema and lower_to_tile.cpp. Both
// source dialects share everything except what is only valid in one of them
// (`tile[...]`/`shared(...)` decorator modifiers and the `mut` prefix in .tsr
// files; `tile=`/`shared=` keywords and `tessera.mut(...)` in Python).
//
// This file holds the entry point, the file level and the token helpers;
// parser.h lists where the rest of the grammar lives.
#include "frontend/parser.h"

#include <set>

#include "frontend/sema.h"

namespace tessera::frontend {

std::string DimSpec::str() const {
  std::string out = lhs.empty() ? std::to_string(size) : lhs;
  if (op != 0) out += std::string(1, op) + (rhs_symbol.empty() ? std::to_string(rhs_size) : rhs_symbol);
  return out;
}

std::int64_t KernelDecl::group_size() const {
  std::int64_t n = 1;
  for (std::int64_t d : group_shape) n *= d;
  return n;
}

namespace parse_detail {

namespace {
constexpr int kMaxDepth = 200;  // nesting limit, so hostile input cannot overflow the stack
}  // namespace

bool is_keyword(std::string_view word) {
  static const std::set<std::string, std::less<>> kKeywords = {
      "def",    "if",       "elif",     "else", "for",    "in",    "while",  "return",  "pass",
      "break",  "continue", "and",      "or",   "not",    "True",  "False",  "None",    "is",
      "lambda", "class",    "import",   "from", "with",   "try",   "except", "finally", "raise",
      "yield",  "global",   "nonlocal", "del",  "assert", "async", "await"};
  return kKeywords.count(word) != 0;
}

bool dotted(const ast::Expr& e, std::vector<std::string>& out) {
  if (e.kind == ast::ExprKind::name) {
    out.push_back(e.text);
    return true;
  }
  if (e.kind == ast::ExprKind::attribute && dotted(*e.args[0], out)) {
    out.push_back(e.text);
    return true;
  }
  return false;
}

std::vector<KernelDecl> Parser::parse_file() {
  std::vector<KernelDecl> kernels;
  while (true) {
    skip_newlines();
    if (at(TokenKind::end)) break;
    if (is_name("import") || is_name("from")) {
      // `import tessera` / `from tessera import *` lines are allowed and ignored.
      while (!at(TokenKind::newline) && !at(TokenKind::end)) advance();
      continue;
    }
    kernels.push_back(parse_kernel());
  }
  if (kernels.empty()) fail(source_->size(), "no kernel found: expected '@kernel' followed by 'def'");
  return kernels;
}

const Token& Parser::advance() {
  const Token& t = peek();
  if (pos_ < tokens_.size() - 1) ++pos_;
  prev_end_ = t.offset + t.length;
  return t;
}

void Parser::fail(std::size_t at_offset, const std::string& message, std::size_t span, ErrorCode code) const {
  raise(code, message, locate_source(file_, *source_, first_line_, at_offset, span));
}

std::string Parser::describe(const Token& t) const {
  switch (t.kind) {
    case TokenKind::name: return "'" + t.text + "'";
    case TokenKind::integer:
    case TokenKind::real: return "number '" + source_->substr(t.offset, t.length) + "'";
    case TokenKind::string: return "a string";
    case TokenKind::op: return "'" + t.text + "'";
    case TokenKind::newline: return "end of line";
    case TokenKind::indent: return "an indented block";
    case TokenKind::dedent: return "the end of the block";
    case TokenKind::end: return "end of input";
  }
  return "token";
}

void Parser::unexpected(const std::string& expected) const {
  const Token& t = peek();
  fail(t.offset, "expected " + expected + ", found " + describe(t), std::max<std::size_t>(1, t.length));
}

void Parser::expect_op(std::string_view op, const std::string& context) {
  if (!is_op(op)) unexpected("'" + std::string(op) + "'" + (context.empty() ? "" : " " + context));
  advance();
}

std::string Parser::expect_name(const std::string& what) {
  if (!at(TokenKind::name) || is_keyword(peek().text)) unexpected(what);
  return advance().text;
}

void Parser::expect_newline() {
  if (at(TokenKind::end)) return;
  if (!at(TokenKind::newline)) unexpected("end of line");
  advance();
}

ast::ExprPtr Parser::node(ast::ExprKind kind, std::size_t offset) {
  auto e = std::make_unique<ast::Expr>();
  e->kind = kind;
  e->offset = offset;
  return e;
}

ast::ExprPtr Parser::finish(ast::ExprPtr e) {
  e->length = prev_end_ > e->offset ? prev_end_ - e->offset : 1;
  return e;
}

Parser::DepthGuard::DepthGuard(Parser& parser) : p(parser) {
  if (++p.depth_ > kMaxDepth) p.fail(p.peek().offset, "nested too deeply (more than 200 levels)");
}

}  // namespace parse_detail

std::vector<KernelDecl> parse_kernels(std::string_view source, std::string_view file, int first_line,
                                      SourceDialect dialect) {
  auto text = std::make_shared<const std::string>(source);
  std::vector<Token> tokens = tokenize(*text, file, first_line);
  parse_detail::Parser parser(std::move(tokens), text, std::string(file), first_line, dialect);
  std::vector<KernelDecl> kernels = parser.parse_file();
  std::set<std::string> names;
  for (const KernelDecl& k : kernels) {
    if (!names.insert(k.name).second)
      raise(ErrorCode::ParseSyntax, "kernel '" + k.name + "' is defined twice", k.location);
    check_kernel(k);
  }
  return kernels;
}

}  // namespace tessera::frontend
