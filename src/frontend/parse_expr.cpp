// Kernel expressions, with Python's precedence (lowest first): conditional
// expressions, or, and, not, comparisons (chained), + -, * / // % @, unary
// - + ~, **, then calls, attributes and subscripts on atoms. A minus on a
// number literal folds into the literal so that -1 and -0.5 are literals.
#include <limits>
#include <set>

#include "frontend/parser.h"

namespace tessera::frontend::parse_detail {

using ast::Expr;
using ast::ExprKind;
using ast::ExprPtr;

// expr (',' expr)* [','] -> a tuple when there is a comma.
ExprPtr Parser::parse_expr_list() {
  std::size_t start = peek().offset;
  ExprPtr first = parse_expr();
  if (!is_op(",")) return first;
  ExprPtr t = node(ExprKind::tuple, start);
  t->args.push_back(std::move(first));
  while (is_op(",")) {
    advance();
    if (at(TokenKind::newline) || at(TokenKind::end) || is_op("=") || is_op(";") || is_op(")")) break;
    t->args.push_back(parse_expr());
  }
  return finish(std::move(t));
}

ExprPtr Parser::parse_expr() {
  DepthGuard guard(*this);
  std::size_t start = peek().offset;
  if (is_name("lambda")) fail(start, "lambda is not supported in kernels", 6);
  ExprPtr value = parse_or();
  if (is_name("if")) {
    advance();
    ExprPtr cond = parse_or();
    if (!is_name("else")) unexpected("'else' in a conditional expression");
    advance();
    ExprPtr other = parse_expr();
    ExprPtr t = node(ExprKind::ternary, start);
    t->args.push_back(std::move(value));
    t->args.push_back(std::move(cond));
    t->args.push_back(std::move(other));
    return finish(std::move(t));
  }
  return value;
}

// `operand (word operand)*`, left-associative: `or` over `and` over `not`.
ExprPtr Parser::parse_logical(std::string_view word, ExprPtr (Parser::*operand)()) {
  std::size_t start = peek().offset;
  ExprPtr lhs = (this->*operand)();
  while (is_name(word)) {
    advance();
    ExprPtr e = node(ExprKind::logical, start);
    e->text = std::string(word);
    e->args.push_back(std::move(lhs));
    e->args.push_back((this->*operand)());
    lhs = finish(std::move(e));
  }
  return lhs;
}
ExprPtr Parser::parse_or() {
  return parse_logical("or", &Parser::parse_and);
}
ExprPtr Parser::parse_and() {
  return parse_logical("and", &Parser::parse_not);
}

ExprPtr Parser::parse_not() {
  DepthGuard guard(*this);
  if (is_name("not")) {
    std::size_t start = advance().offset;
    ExprPtr e = node(ExprKind::unary, start);
    e->text = "not";
    e->args.push_back(parse_not());
    return finish(std::move(e));
  }
  return parse_comparison();
}
ExprPtr Parser::parse_comparison() {
  std::size_t start = peek().offset;
  ExprPtr first = parse_arith();
  static const std::set<std::string, std::less<>> kCmp = {"<", "<=", ">", ">=", "==", "!="};
  if (!(at(TokenKind::op) && kCmp.count(peek().text))) {
    if (is_name("in") || is_name("is"))
      fail(peek().offset, "'" + peek().text + "' comparisons are not supported in kernels", 2);
    return first;
  }
  ExprPtr e = node(ExprKind::compare, start);
  e->args.push_back(std::move(first));
  while (at(TokenKind::op) && kCmp.count(peek().text)) {
    e->ops.push_back(advance().text);
    e->args.push_back(parse_arith());
  }
  return finish(std::move(e));
}
ExprPtr Parser::binary(std::size_t start, std::string op, ExprPtr lhs, ExprPtr rhs) {
  ExprPtr e = node(ExprKind::binary, start);
  e->text = std::move(op);
  e->args.push_back(std::move(lhs));
  e->args.push_back(std::move(rhs));
  return finish(std::move(e));
}
ExprPtr Parser::parse_arith() {
  std::size_t start = peek().offset;
  ExprPtr lhs = parse_term();
  while (is_op("+") || is_op("-")) {
    std::string op = advance().text;
    lhs = binary(start, op, std::move(lhs), parse_term());
  }
  return lhs;
}
ExprPtr Parser::parse_term() {
  std::size_t start = peek().offset;
  ExprPtr lhs = parse_factor();
  while (is_op("*") || is_op("/") || is_op("//") || is_op("%") || is_op("@")) {
    std::string op = advance().text;
    lhs = binary(start, op, std::move(lhs), parse_factor());
  }
  return lhs;
}
ExprPtr Parser::parse_factor() {
  DepthGuard guard(*this);
  if (is_op("-") || is_op("+") || is_op("~")) {
    std::size_t start = peek().offset;
    std::string op = advance().text;
    if (op == "~") fail(start, "bitwise operators are not supported in kernels");
    ExprPtr operand = parse_factor();
    // Fold a minus into a literal so that -1 and -0.5 are literals.
    if (op == "-" && operand->kind == ExprKind::integer &&
        operand->int_value != std::numeric_limits<std::int64_t>::min()) {
      operand->int_value = -operand->int_value;
      operand->offset = start;
      return finish(std::move(operand));
    }
    if (op == "-" && operand->kind == ExprKind::real) {
      operand->real_value = -operand->real_value;
      operand->offset = start;
      return finish(std::move(operand));
    }
    ExprPtr e = node(ExprKind::unary, start);
    e->text = op;
    e->args.push_back(std::move(operand));
    return finish(std::move(e));
  }
  return parse_power();
}
ExprPtr Parser::parse_power() {
  std::size_t start = peek().offset;
  ExprPtr base = parse_postfix();
  if (is_op("**")) {
    advance();
    return binary(start, "**", std::move(base), parse_factor());
  }
  return base;
}

ExprPtr Parser::parse_postfix() {
  DepthGuard guard(*this);
  std::size_t start = peek().offset;
  ExprPtr e = parse_atom();
  while (true) {
    if (is_op(".")) {
      advance();
      ExprPtr a = node(ExprKind::attribute, start);
      // Keywords are fine after a dot: cp_async.shared.global is the specification's spelling.
      if (!at(TokenKind::name)) unexpected("an attribute name after '.'");
      a->text = advance().text;
      a->args.push_back(std::move(e));
      e = finish(std::move(a));
    } else if (is_op("(")) {
      e = parse_call_args(std::move(e), start);
    } else if (is_op("[")) {
      e = parse_subscript(std::move(e), start);
    } else {
      return e;
    }
  }
}

// `callee(args, keyword=value, ...)` from the `(`.
ExprPtr Parser::parse_call_args(ExprPtr callee, std::size_t start) {
  advance();
  ExprPtr c = node(ExprKind::call, start);
  c->args.push_back(std::move(callee));
  bool keywords_started = false;
  while (!is_op(")")) {
    if (is_op("*") || is_op("**")) fail(peek().offset, "argument unpacking is not supported in kernels");
    if (at(TokenKind::name) && is_op("=", 1)) {
      ast::Keyword k;
      k.offset = peek().offset;
      k.name = advance().text;
      advance();
      for (const ast::Keyword& other : c->keywords)
        if (other.name == k.name) fail(k.offset, "keyword argument '" + k.name + "' is repeated", k.name.size());
      k.value = parse_expr();
      c->keywords.push_back(std::move(k));
      keywords_started = true;
    } else {
      if (keywords_started) fail(peek().offset, "positional argument follows keyword argument");
      c->args.push_back(parse_expr());
    }
    if (!is_op(",")) break;
    advance();
  }
  expect_op(")", "to close the call");
  return finish(std::move(c));
}

// `base[index, ...]` from the `[`.
ExprPtr Parser::parse_subscript(ExprPtr base, std::size_t start) {
  advance();
  ExprPtr s = node(ExprKind::subscript, start);
  s->args.push_back(std::move(base));
  if (is_op("]")) unexpected("an index");
  while (!is_op("]")) {
    s->args.push_back(parse_subscript_item());
    if (!is_op(",")) break;
    advance();
  }
  expect_op("]", "to close the subscript");
  // x[(i, j)] means x[i, j].
  if (s->args.size() == 2 && s->args[1]->kind == ExprKind::tuple) {
    ExprPtr tuple = std::move(s->args[1]);
    s->args.pop_back();
    for (ExprPtr& item : tuple->args) s->args.push_back(std::move(item));
  }
  return finish(std::move(s));
}

ExprPtr Parser::parse_subscript_item() {
  std::size_t start = peek().offset;
  ExprPtr lo;
  if (!is_op(":")) {
    lo = parse_expr();
    if (!is_op(":")) return lo;
  }
  advance();  // ':'
  ExprPtr s = node(ExprKind::slice, start);
  s->args.push_back(lo ? std::move(lo) : finish(node(ExprKind::none, start)));
  if (is_op("]") || is_op(",")) {
    s->args.push_back(finish(node(ExprKind::none, peek().offset)));
  } else {
    s->args.push_back(parse_expr());
  }
  if (is_op(":")) fail(peek().offset, "slice steps are not supported in kernels");
  return finish(std::move(s));
}

ExprPtr Parser::parse_atom() {
  const Token& t = peek();
  std::size_t start = t.offset;
  switch (t.kind) {
    case TokenKind::integer: {
      ExprPtr e = node(ExprKind::integer, start);
      e->int_value = advance().int_value;
      return finish(std::move(e));
    }
    case TokenKind::real: {
      ExprPtr e = node(ExprKind::real, start);
      e->real_value = advance().real_value;
      return finish(std::move(e));
    }
    case TokenKind::string: {
      ExprPtr e = node(ExprKind::string, start);
      e->text = advance().text;
      while (at(TokenKind::string)) e->text += advance().text;  // implicit concatenation
      return finish(std::move(e));
    }
    case TokenKind::name: {
      if (t.text == "True" || t.text == "False") {
        ExprPtr e = node(ExprKind::boolean, start);
        e->int_value = advance().text == "True" ? 1 : 0;
        return finish(std::move(e));
      }
      if (t.text == "None") {
        advance();
        return finish(node(ExprKind::none, start));
      }
      if (is_keyword(t.text)) unexpected("an expression");
      ExprPtr e = node(ExprKind::name, start);
      e->text = advance().text;
      return finish(std::move(e));
    }
    case TokenKind::op: {
      if (t.text == "...") {
        advance();
        return finish(node(ExprKind::ellipsis, start));
      }
      if (t.text == "(") return parse_parenthesized(start);
      if (t.text == "[") return parse_list(start);
      if (t.text == "{") return parse_dict(start);
      break;
    }
    default: break;
  }
  unexpected("an expression");
}

// `()`, `(x)` (kept as x, with the parentheses in its span) or a tuple.
ExprPtr Parser::parse_parenthesized(std::size_t start) {
  advance();
  if (is_op(")")) {
    advance();
    return finish(node(ExprKind::tuple, start));
  }
  ExprPtr first = parse_expr();
  if (is_op(")")) {
    advance();
    // Keep the parentheses in the span for carets.
    first->offset = start;
    return finish(std::move(first));
  }
  ExprPtr tuple = node(ExprKind::tuple, start);
  tuple->args.push_back(std::move(first));
  while (is_op(",")) {
    advance();
    if (is_op(")")) break;
    tuple->args.push_back(parse_expr());
  }
  expect_op(")", "to close the tuple");
  return finish(std::move(tuple));
}

ExprPtr Parser::parse_list(std::size_t start) {
  advance();
  ExprPtr list = node(ExprKind::list, start);
  while (!is_op("]")) {
    list->args.push_back(parse_expr());
    if (!is_op(",")) break;
    advance();
  }
  expect_op("]", "to close the list");
  return finish(std::move(list));
}

// `{"key": value, ...}`: string keys only (autotune spaces).
ExprPtr Parser::parse_dict(std::size_t start) {
  advance();
  ExprPtr dict = node(ExprKind::dict, start);
  while (!is_op("}")) {
    if (!at(TokenKind::string)) unexpected("a string key");
    ast::Keyword k;
    k.offset = peek().offset;
    k.name = advance().text;
    expect_op(":", "after the key");
    k.value = parse_expr();
    dict->keywords.push_back(std::move(k));
    if (!is_op(",")) break;
    advance();
  }
  expect_op("}", "to close the dict");
  return finish(std::move(dict));
}

}  // namespace tessera::frontend::parse_detail
