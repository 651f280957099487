// Kernel statements: blocks, if/elif/else, for, while and simple statements.
//
// Python's statement forms that kernels use; the others (def, class, with,
// try, break, continue, ...) are rejected here with a message saying so.
// Blocks are INDENT ... DEDENT or simple statements on the header's line.
#include <set>

#include "frontend/parser.h"

namespace tessera::frontend::parse_detail {

using ast::ExprKind;
using ast::ExprPtr;
using ast::Stmt;
using ast::StmtKind;
using ast::StmtPtr;

ast::Body Parser::parse_block() {
  DepthGuard guard(*this);
  ast::Body body;
  if (!at(TokenKind::newline)) {
    // `if c: x = 1` on one line.
    parse_simple_statements(body);
    return body;
  }
  advance();
  skip_newlines();
  if (!at(TokenKind::indent)) unexpected("an indented block");
  advance();
  while (!at(TokenKind::dedent) && !at(TokenKind::end)) {
    parse_statement(body);
    skip_newlines();
  }
  if (at(TokenKind::dedent)) advance();
  return body;
}

void Parser::parse_statement(ast::Body& body) {
  if (at(TokenKind::indent)) fail(peek().offset, "unexpected indentation", std::max<std::size_t>(1, peek().length));
  if (is_name("if")) {
    body.push_back(parse_if());
  } else if (is_name("for")) {
    body.push_back(parse_for());
  } else if (is_name("while")) {
    body.push_back(parse_while());
  } else if (is_name("def") || is_name("class") || is_name("with") || is_name("try") || is_name("lambda")) {
    fail(peek().offset, "'" + peek().text + "' is not supported inside kernels", peek().length);
  } else if (is_op("@")) {
    fail(peek().offset, "decorators are not allowed inside a kernel");
  } else {
    parse_simple_statements(body);
  }
}

// The rest of a compound statement whose keyword (at `start`) is consumed:
// its expression (condition or iterable), ':' and the block. The statement's
// span covers the header up to the expression.
StmtPtr Parser::parse_compound(StmtKind kind, std::size_t start, ExprPtr target, const std::string& colon_context) {
  auto s = std::make_unique<Stmt>();
  s->kind = kind;
  s->offset = start;
  s->target = std::move(target);
  s->value = parse_expr();
  s->length = prev_end_ - start;
  expect_op(":", colon_context);
  s->body = parse_block();
  return s;
}

StmtPtr Parser::parse_for() {
  std::size_t start = advance().offset;
  std::size_t name_at = peek().offset;
  std::string var = expect_name("a loop variable name");
  ExprPtr target = node(ExprKind::name, name_at);
  target->text = var;
  target = finish(std::move(target));
  if (is_op(",")) fail(peek().offset, "a for loop binds one name");
  if (!is_name("in")) unexpected("'in'");
  advance();
  StmtPtr s = parse_compound(StmtKind::for_, start, std::move(target), "after the loop header");
  if (is_name("else")) fail(peek().offset, "for ... else is not supported in kernels", 4);
  return s;
}

StmtPtr Parser::parse_while() {
  std::size_t start = advance().offset;
  StmtPtr s = parse_compound(StmtKind::while_, start, nullptr, "after the loop condition");
  if (is_name("else")) fail(peek().offset, "while ... else is not supported in kernels", 4);
  return s;
}

StmtPtr Parser::parse_if() {
  std::size_t start = advance().offset;  // `if` or `elif`
  StmtPtr s = parse_compound(StmtKind::if_, start, nullptr, "after the condition");
  skip_newlines_before_else();
  if (is_name("elif")) {
    s->orelse.push_back(parse_if());
  } else if (is_name("else")) {
    advance();
    expect_op(":", "after 'else'");
    s->orelse = parse_block();
  }
  return s;
}

void Parser::skip_newlines_before_else() {
  std::size_t save = pos_;
  skip_newlines();
  if (!is_name("elif") && !is_name("else")) pos_ = save;
}

void Parser::parse_simple_statements(ast::Body& body) {
  while (true) {
    body.push_back(parse_simple());
    if (!is_op(";")) break;
    advance();
    if (at(TokenKind::newline) || at(TokenKind::end)) break;
  }
  expect_newline();
}

StmtPtr Parser::parse_simple() {
  auto s = std::make_unique<Stmt>();
  s->offset = peek().offset;
  if (is_name("pass")) {
    advance();
    s->kind = StmtKind::pass;
  } else if (is_name("return")) {
    advance();
    s->kind = StmtKind::return_;
    if (!at(TokenKind::newline) && !at(TokenKind::end) && !is_op(";")) s->value = parse_expr_list();
  } else if (is_name("break") || is_name("continue")) {
    fail(peek().offset, "'" + peek().text + "' is not supported in kernels: loops run their full range", peek().length);
  } else if (at(TokenKind::name) && is_keyword(peek().text) && !is_name("not") && !is_name("True") &&
             !is_name("False") && !is_name("None")) {
    fail(peek().offset, "'" + peek().text + "' is not supported in kernels", peek().length);
  } else {
    ExprPtr first = parse_expr_list();
    static const std::set<std::string, std::less<>> kAug = {"+=", "-=", "*=", "/=", "//=", "%=", "**="};
    if (is_op("=")) {
      advance();
      s->kind = StmtKind::assign;
      s->target = std::move(first);
      s->value = parse_expr_list();
      if (is_op("=")) fail(peek().offset, "chained assignment (a = b = c) is not supported in kernels");
    } else if (at(TokenKind::op) && kAug.count(peek().text)) {
      std::string op = advance().text;
      s->kind = StmtKind::aug_assign;
      s->op = op.substr(0, op.size() - 1);
      s->target = std::move(first);
      s->value = parse_expr();
    } else {
      s->kind = StmtKind::expr;
      s->value = std::move(first);
    }
  }
  s->length = prev_end_ > s->offset ? prev_end_ - s->offset : 1;
  return s;
}

}  // namespace tessera::frontend::parse_detail
