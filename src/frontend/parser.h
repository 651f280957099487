// The kernel language parser's class (private to src/frontend/).
//
// One recursive-descent Parser, its methods spread by grammar area:
// parser.cpp (token helpers, files, parse_kernels), parse_decl.cpp (kernels,
// decorators, parameters and dims), parse_stmt.cpp (statements and blocks),
// parse_expr.cpp (expressions, with Python's precedence). The class is shared
// through this header so that each part can call the others.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "frontend/ast.h"
#include "frontend/lexer.h"
#include "tessera/frontend/kernel_language.h"

namespace tessera::frontend::parse_detail {

// Python's reserved words: never names in kernels.
bool is_keyword(std::string_view word);

// The dotted name of a callee: kernel, tessera.kernel, kernel.autotune, ...
// Appends the parts to `out`; false when `e` is not a chain of names.
bool dotted(const ast::Expr& e, std::vector<std::string>& out);

class Parser {
 public:
  Parser(std::vector<Token> tokens, std::shared_ptr<const std::string> source, std::string file, int first_line,
         SourceDialect dialect)
      : tokens_(std::move(tokens)),
        source_(std::move(source)),
        file_(std::move(file)),
        first_line_(first_line),
        dialect_(dialect) {}

  std::vector<KernelDecl> parse_file();

 private:
  // ---- token helpers (parser.cpp) ----
  const Token& peek(std::size_t ahead = 0) const { return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)]; }
  bool at(TokenKind kind) const { return peek().kind == kind; }
  bool is_op(std::string_view op, std::size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::op && peek(ahead).text == op;
  }
  bool is_name(std::string_view name) const { return at(TokenKind::name) && peek().text == name; }
  const Token& advance();
  void skip_newlines() {
    while (at(TokenKind::newline)) advance();
  }
  [[noreturn]] void fail(std::size_t at_offset, const std::string& message, std::size_t span = 1,
                         ErrorCode code = ErrorCode::ParseSyntax) const;
  std::string describe(const Token& t) const;
  [[noreturn]] void unexpected(const std::string& expected) const;
  void expect_op(std::string_view op, const std::string& context = {});
  std::string expect_name(const std::string& what);
  void expect_newline();

  ast::ExprPtr node(ast::ExprKind kind, std::size_t offset);
  ast::ExprPtr finish(ast::ExprPtr e);

  // Counts nesting so that hostile input cannot overflow the stack.
  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& parser);
    ~DepthGuard() { --p.depth_; }
  };

  // ---- kernels, decorators, parameters (parse_decl.cpp) ----
  struct DecoratorInfo {
    bool seen_kernel = false;
    bool autotune = false;
    std::optional<std::vector<std::int64_t>> group_shape;
    std::optional<std::int64_t> shared;
    std::vector<std::pair<std::string, std::vector<std::int64_t>>> space;
    std::string target;  // target="cuda_tile"
    std::size_t offset = 0;
  };

  KernelDecl parse_kernel();
  void parse_decorator(DecoratorInfo& info);
  void set_group_shape(DecoratorInfo& info, const ast::Expr& e, std::size_t at_offset);
  void set_shared(DecoratorInfo& info, const ast::Expr& e, std::size_t at_offset);
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> parse_space(const ast::Expr& e);
  std::int64_t const_int(const ast::Expr& e, const std::string& what);
  KernelParam parse_param();
  void interpret_annotation(const ast::Expr& e, KernelParam& p);
  DType dtype_named(const std::string& name, std::size_t at_offset);
  DimSpec interpret_dim(const ast::Expr& e);

  // ---- statements (parse_stmt.cpp) ----
  ast::Body parse_block();
  void parse_statement(ast::Body& body);
  ast::StmtPtr parse_for();
  ast::StmtPtr parse_while();
  ast::StmtPtr parse_if();
  ast::StmtPtr parse_compound(ast::StmtKind kind, std::size_t start, ast::ExprPtr target,
                              const std::string& colon_context);
  void skip_newlines_before_else();
  void parse_simple_statements(ast::Body& body);
  ast::StmtPtr parse_simple();

  // ---- expressions (parse_expr.cpp) ----
  ast::ExprPtr parse_expr_list();
  ast::ExprPtr parse_expr();
  ast::ExprPtr parse_logical(std::string_view word, ast::ExprPtr (Parser::*operand)());
  ast::ExprPtr parse_or();
  ast::ExprPtr parse_and();
  ast::ExprPtr parse_not();
  ast::ExprPtr parse_comparison();
  ast::ExprPtr binary(std::size_t start, std::string op, ast::ExprPtr lhs, ast::ExprPtr rhs);
  ast::ExprPtr parse_arith();
  ast::ExprPtr parse_term();
  ast::ExprPtr parse_factor();
  ast::ExprPtr parse_power();
  ast::ExprPtr parse_postfix();
  ast::ExprPtr parse_call_args(ast::ExprPtr callee, std::size_t start);
  ast::ExprPtr parse_subscript(ast::ExprPtr base, std::size_t start);
  ast::ExprPtr parse_subscript_item();
  ast::ExprPtr parse_atom();
  ast::ExprPtr parse_parenthesized(std::size_t start);
  ast::ExprPtr parse_list(std::size_t start);
  ast::ExprPtr parse_dict(std::size_t start);

  std::vector<Token> tokens_;
  std::shared_ptr<const std::string> source_;
  std::string file_;
  int first_line_;
  SourceDialect dialect_;
  std::size_t pos_ = 0;
  std::size_t prev_end_ = 0;
  std::size_t param_offset_ = 0;
  int depth_ = 0;
};

}  // namespace tessera::frontend::parse_detail
