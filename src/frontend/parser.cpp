// The kernel language parser: tokens -> syntax tree (ast.h) and KernelDecl.
//
// A recursive-descent parser for the Python subset kernels use, with
// Python's precedence. Decorators and parameter annotations are interpreted
// here into the KernelDecl fields (group shape, shared budget, autotune space,
// parameter types); bodies are left to sema.cpp and lower_to_tile.cpp. Both
// source dialects share everything except what is only valid in one of them
// (`tile[...]`/`shared(...)` decorator modifiers and the `mut` prefix in .tsr
// files; `tile=`/`shared=` keywords and `tessera.mut(...)` in Python).
#include <algorithm>
#include <limits>
#include <set>

#include "frontend/ast.h"
#include "frontend/lexer.h"
#include "frontend/sema.h"
#include "tessera/frontend/kernel_language.h"

namespace tessera::frontend {

using ast::Expr;
using ast::ExprKind;
using ast::ExprPtr;
using ast::Stmt;
using ast::StmtKind;
using ast::StmtPtr;

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

namespace {

constexpr int kMaxDepth = 200;  // nesting limit, so hostile input cannot overflow the stack

const std::set<std::string, std::less<>> kKeywords = {
    "def",    "if",       "elif",     "else", "for",    "in",    "while",  "return",  "pass",
    "break",  "continue", "and",      "or",   "not",    "True",  "False",  "None",    "is",
    "lambda", "class",    "import",   "from", "with",   "try",   "except", "finally", "raise",
    "yield",  "global",   "nonlocal", "del",  "assert", "async", "await"};

class Parser {
 public:
  Parser(std::vector<Token> tokens, std::shared_ptr<const std::string> source, std::string file, int first_line,
         SourceDialect dialect)
      : tokens_(std::move(tokens)),
        source_(std::move(source)),
        file_(std::move(file)),
        first_line_(first_line),
        dialect_(dialect) {}

  std::vector<KernelDecl> parse_file() {
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

 private:
  // ---- token helpers ----
  const Token& peek(std::size_t ahead = 0) const { return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)]; }
  bool at(TokenKind kind) const { return peek().kind == kind; }
  bool is_op(std::string_view op, std::size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::op && peek(ahead).text == op;
  }
  bool is_name(std::string_view name) const { return at(TokenKind::name) && peek().text == name; }
  const Token& advance() {
    const Token& t = peek();
    if (pos_ < tokens_.size() - 1) ++pos_;
    prev_end_ = t.offset + t.length;
    return t;
  }
  void skip_newlines() {
    while (at(TokenKind::newline)) advance();
  }
  [[noreturn]] void fail(std::size_t at_offset, const std::string& message, std::size_t span = 1,
                         ErrorCode code = ErrorCode::ParseSyntax) const {
    raise(code, message, locate_source(file_, *source_, first_line_, at_offset, span));
  }
  std::string describe(const Token& t) const {
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
  [[noreturn]] void unexpected(const std::string& expected) const {
    const Token& t = peek();
    fail(t.offset, "expected " + expected + ", found " + describe(t), std::max<std::size_t>(1, t.length));
  }
  void expect_op(std::string_view op, const std::string& context = {}) {
    if (!is_op(op)) unexpected("'" + std::string(op) + "'" + (context.empty() ? "" : " " + context));
    advance();
  }
  std::string expect_name(const std::string& what) {
    if (!at(TokenKind::name) || kKeywords.count(peek().text)) unexpected(what);
    return advance().text;
  }
  void expect_newline() {
    if (at(TokenKind::end)) return;
    if (!at(TokenKind::newline)) unexpected("end of line");
    advance();
  }

  ExprPtr node(ExprKind kind, std::size_t offset) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->offset = offset;
    return e;
  }
  ExprPtr finish(ExprPtr e) {
    e->length = prev_end_ > e->offset ? prev_end_ - e->offset : 1;
    return e;
  }

  struct DepthGuard {
    Parser& p;
    DepthGuard(Parser& parser) : p(parser) {
      if (++p.depth_ > kMaxDepth) p.fail(p.peek().offset, "nested too deeply (more than 200 levels)");
    }
    ~DepthGuard() { --p.depth_; }
  };

  // ---- kernels ----
  struct DecoratorInfo {
    bool seen_kernel = false;
    bool autotune = false;
    std::optional<std::vector<std::int64_t>> group_shape;
    std::optional<std::int64_t> shared;
    std::vector<std::pair<std::string, std::vector<std::int64_t>>> space;
    std::size_t offset = 0;
  };

  KernelDecl parse_kernel() {
    DecoratorInfo info;
    if (!is_op("@")) unexpected("'@kernel' before a kernel definition");
    info.offset = peek().offset;
    while (is_op("@")) {
      advance();
      parse_decorator(info);
      skip_newlines();
    }
    if (!is_name("def")) unexpected("'def' after the decorator");
    advance();
    auto kernel = std::make_shared<ast::Kernel>();
    kernel->source = source_;
    kernel->file = file_;
    kernel->first_line = first_line_;
    kernel->offset = peek().offset;
    std::size_t name_length = peek().length;
    kernel->name = expect_name("the kernel's name");

    KernelDecl decl;
    decl.name = kernel->name;
    decl.location = locate_source(file_, *source_, first_line_, kernel->offset, name_length);
    if (info.group_shape) decl.group_shape = *info.group_shape;
    decl.shared_bytes = info.shared;
    decl.autotune_space = info.space;

    expect_op("(", "to open the parameter list");
    std::set<std::string> names;
    while (!is_op(")")) {
      decl.params.push_back(parse_param());
      if (!names.insert(decl.params.back().name).second)
        fail(param_offset_, "duplicate parameter '" + decl.params.back().name + "'", decl.params.back().name.size());
      if (!is_op(",")) break;
      advance();
    }
    expect_op(")", "to close the parameter list");
    if (is_op("->")) {
      advance();
      ExprPtr ret = parse_expr();
      if (ret->kind != ExprKind::none)
        fail(ret->offset, "a kernel returns nothing: write '-> None' or leave it out", ret->length);
    }
    expect_op(":", "after the parameter list");
    kernel->body = parse_block();

    // Shape symbols, in order of first appearance.
    for (const KernelParam& p : decl.params) {
      for (const DimSpec& d : p.dims) {
        for (const std::string& s : {d.lhs, d.rhs_symbol}) {
          if (!s.empty() &&
              std::find(decl.shape_symbols.begin(), decl.shape_symbols.end(), s) == decl.shape_symbols.end())
            decl.shape_symbols.push_back(s);
        }
      }
    }
    decl.ast = std::move(kernel);
    return decl;
  }

  // The dotted name of a callee: kernel, tessera.kernel, kernel.autotune, ...
  static bool dotted(const Expr& e, std::vector<std::string>& out) {
    if (e.kind == ExprKind::name) {
      out.push_back(e.text);
      return true;
    }
    if (e.kind == ExprKind::attribute && dotted(*e.args[0], out)) {
      out.push_back(e.text);
      return true;
    }
    return false;
  }

  void parse_decorator(DecoratorInfo& info) {
    ExprPtr head = parse_postfix();
    const Expr* callee = head.get();
    const Expr* call = nullptr;
    if (head->kind == ExprKind::call) {
      call = head.get();
      callee = head->args[0].get();
    }
    std::vector<std::string> parts;
    bool ok = dotted(*callee, parts);
    bool autotune = ok && parts.size() >= 2 && parts.back() == "autotune" && parts[parts.size() - 2] == "kernel";
    bool plain = ok && parts.back() == "kernel";
    if (!autotune && !plain)
      fail(head->offset, "unknown decorator: a kernel is decorated with @kernel or @kernel.autotune(space=...)",
           head->length);
    if (info.seen_kernel)
      fail(head->offset, "a kernel has one @kernel decorator", head->length, ErrorCode::ParseDuplicateModifier);
    info.seen_kernel = true;
    info.autotune = autotune;
    if (call) {
      if (call->args.size() > 1)
        fail(call->args[1]->offset, "decorator arguments are keywords (space=, tile=, shared=)", call->args[1]->length);
      for (const ast::Keyword& k : call->keywords) {
        if (k.name == "space" && autotune) {
          info.space = parse_space(*k.value);
        } else if (k.name == "tile") {
          set_group_shape(info, *k.value, k.offset);
        } else if (k.name == "shared") {
          set_shared(info, *k.value, k.offset);
        } else {
          std::vector<std::string_view> known = {"tile", "shared"};
          if (autotune) known.push_back("space");
          std::string hint = closest_match(k.name, known);
          fail(k.offset,
               "unknown decorator argument '" + k.name + "'" + (hint.empty() ? "" : "; did you mean '" + hint + "'?"),
               k.name.size(), ErrorCode::ParseUnknownModifier);
        }
      }
      if (autotune && info.space.empty())
        fail(call->offset, "@kernel.autotune needs space=dict(NAME=[candidates, ...])", call->length);
    } else if (autotune) {
      fail(head->offset, "@kernel.autotune needs space=dict(NAME=[candidates, ...])", head->length);
    }
    // .tsr modifiers after the decorator: tile[(128,)] shared(8_KiB).
    while (!at(TokenKind::newline) && !at(TokenKind::end)) {
      ExprPtr mod = parse_postfix();
      if (mod->kind == ExprKind::subscript && mod->args[0]->kind == ExprKind::name && mod->args[0]->text == "tile") {
        // tile[(16, 8)] arrives flattened as tile[16, 8]; rebuild the tuple.
        Expr shape;
        shape.kind = ExprKind::tuple;
        shape.offset = mod->args[1]->offset;
        shape.length = mod->length - (shape.offset - mod->offset);
        for (std::size_t i = 1; i < mod->args.size(); ++i) shape.args.push_back(std::move(mod->args[i]));
        set_group_shape(info, shape, mod->offset);
      } else if (mod->kind == ExprKind::call && mod->args[0]->kind == ExprKind::name &&
                 mod->args[0]->text == "shared" && mod->args.size() == 2 && mod->keywords.empty()) {
        set_shared(info, *mod->args[1], mod->offset);
      } else {
        fail(mod->offset, "unknown kernel modifier: expected tile[(N, ...)] or shared(SIZE)", mod->length,
             ErrorCode::ParseUnknownModifier);
      }
    }
    expect_newline();
  }

  void set_group_shape(DecoratorInfo& info, const Expr& e, std::size_t at_offset) {
    if (info.group_shape) fail(at_offset, "the group shape is given twice", 4, ErrorCode::ParseDuplicateModifier);
    std::vector<const Expr*> items;
    if (e.kind == ExprKind::tuple || e.kind == ExprKind::list) {
      for (const ExprPtr& a : e.args) items.push_back(a.get());
    } else {
      items.push_back(&e);
    }
    if (items.empty() || items.size() > 3)
      fail(e.offset, "a group shape has 1 to 3 extents, e.g. tile[(128,)]", e.length);
    std::vector<std::int64_t> shape;
    std::int64_t total = 1;
    for (const Expr* item : items) {
      std::int64_t v = const_int(*item, "a group extent");
      if (v <= 0) fail(item->offset, "group extents must be positive, got " + std::to_string(v), item->length);
      if (v > 65536 || total * v > 65536) fail(item->offset, "a group holds at most 65536 tiles", item->length);
      total *= v;
      shape.push_back(v);
    }
    info.group_shape = shape;
  }

  void set_shared(DecoratorInfo& info, const Expr& e, std::size_t at_offset) {
    if (info.shared) fail(at_offset, "the shared budget is given twice", 6, ErrorCode::ParseDuplicateModifier);
    std::int64_t v = const_int(e, "a shared-memory budget");
    if (v <= 0) fail(e.offset, "the shared budget must be positive, got " + std::to_string(v), e.length);
    info.shared = v;
  }

  std::vector<std::pair<std::string, std::vector<std::int64_t>>> parse_space(const Expr& e) {
    std::vector<std::pair<std::string, std::vector<std::int64_t>>> space;
    const std::vector<ast::Keyword>* items = nullptr;
    if (e.kind == ExprKind::call && e.args[0]->kind == ExprKind::name && e.args[0]->text == "dict" &&
        e.args.size() == 1) {
      items = &e.keywords;
    } else if (e.kind == ExprKind::dict) {
      items = &e.keywords;
    } else {
      fail(e.offset, "space= takes dict(NAME=[candidates, ...])", e.length);
    }
    for (const ast::Keyword& k : *items) {
      if (k.name.empty() || kKeywords.count(k.name) ||
          !(std::isalpha(static_cast<unsigned char>(k.name[0])) || k.name[0] == '_'))
        fail(k.offset, "an autotune name must be an identifier", std::max<std::size_t>(1, k.name.size()));
      for (const auto& [name, values] : space)
        if (name == k.name)
          fail(k.offset, "autotune name '" + k.name + "' is given twice", k.name.size(),
               ErrorCode::ParseDuplicateModifier);
      const Expr& list = *k.value;
      if ((list.kind != ExprKind::list && list.kind != ExprKind::tuple) || list.args.empty())
        fail(list.offset, "the candidates of '" + k.name + "' must be a non-empty list of integers", list.length);
      std::vector<std::int64_t> values;
      for (const ExprPtr& v : list.args) values.push_back(const_int(*v, "an autotune candidate"));
      space.emplace_back(k.name, std::move(values));
    }
    if (space.empty()) fail(e.offset, "the autotune space is empty", e.length);
    return space;
  }

  // Integer constant expressions in decorators: literals, + - * // and parentheses.
  std::int64_t const_int(const Expr& e, const std::string& what) {
    std::optional<std::int64_t> v = fold_int(e, {});
    if (!v) fail(e.offset, what + " must be an integer constant", e.length);
    return *v;
  }

  KernelParam parse_param() {
    KernelParam p;
    param_offset_ = peek().offset;
    std::size_t length = peek().length;
    p.name = expect_name("a parameter name");
    p.location = locate_source(file_, *source_, first_line_, param_offset_, length);
    if (!is_op(":"))
      fail(param_offset_, "parameter '" + p.name + "' needs a type annotation (e.g. " + p.name + ": f32[n])", length);
    advance();
    // .tsr: `mut f32[n]`.
    if (is_name("mut") && peek(1).kind == TokenKind::name) {
      if (dialect_ == SourceDialect::python)
        fail(peek().offset, "'mut T' is .tsr syntax; in Python write tessera.mut(tessera.f32[\"n\"])", 3);
      advance();
      p.is_mut = true;
    }
    ExprPtr annotation = parse_expr();
    interpret_annotation(*annotation, p);
    if (is_op("=")) fail(peek().offset, "kernel parameters take no default values");
    return p;
  }

  void interpret_annotation(const Expr& e, KernelParam& p) {
    if (e.kind == ExprKind::call) {
      std::vector<std::string> parts;
      if (dotted(*e.args[0], parts) && parts.back() == "mut") {
        if (e.args.size() != 2 || !e.keywords.empty()) fail(e.offset, "mut(...) takes one buffer type", e.length);
        if (p.is_mut)
          fail(e.offset, "'" + p.name + "' is marked mut twice", e.length, ErrorCode::ParseDuplicateModifier);
        p.is_mut = true;
        interpret_annotation(*e.args[1], p);
        return;
      }
    }
    const Expr* base = &e;
    if (e.kind == ExprKind::subscript) {
      base = e.args[0].get();
      p.is_buffer = true;
      for (std::size_t i = 1; i < e.args.size(); ++i) p.dims.push_back(interpret_dim(*e.args[i]));
      if (p.dims.empty()) fail(e.offset, "a buffer type needs at least one dimension", e.length);
      if (p.dims.size() > 4) fail(e.offset, "buffers have at most 4 dimensions", e.length);
    }
    std::vector<std::string> parts;
    if (!dotted(*base, parts))
      fail(e.offset, "expected a type such as f32, f32[n] or mut f32[n] for parameter '" + p.name + "'", e.length);
    p.dtype = dtype_named(parts.back(), base->offset + base->length - parts.back().size());
    if (p.is_mut && !p.is_buffer)
      fail(e.offset, "only buffers can be mut: scalar parameter '" + p.name + "' is passed by value", e.length,
           ErrorCode::KernelType);
  }

  DType dtype_named(const std::string& name, std::size_t at_offset) {
    DType dtype;
    if (try_parse_dtype(name, dtype)) return dtype;
    try {
      parse_dtype(name);
    } catch (const Error& error) {
      raise(error.code(), error.message(), locate_source(file_, *source_, first_line_, at_offset, name.size()));
    }
    fail(at_offset, "unknown dtype '" + name + "'", name.size(), ErrorCode::DtypeUnknown);
  }

  DimSpec interpret_dim(const Expr& e) {
    auto bad = [&]() {
      fail(e.offset, "a dimension is a size, a symbol, or a symbol divided or multiplied by a symbol or size (K/tp)",
           e.length);
    };
    DimSpec d;
    if (e.kind == ExprKind::integer) {
      if (e.int_value < 0) bad();
      d.size = e.int_value;
      return d;
    }
    if (e.kind == ExprKind::name) {
      d.lhs = e.text;
      return d;
    }
    if (e.kind == ExprKind::string) {
      // Python spelling: "n", "K/tp", "128". Parsed with the same lexer.
      std::vector<Token> toks;
      try {
        toks = tokenize(e.text, "", 1);
      } catch (const Error&) {
        bad();
      }
      std::vector<Token> core;
      for (const Token& t : toks)
        if (t.kind != TokenKind::newline && t.kind != TokenKind::end) core.push_back(t);
      auto operand = [&](const Token& t, std::string& sym, std::int64_t& size) {
        if (t.kind == TokenKind::name && !kKeywords.count(t.text))
          sym = t.text;
        else if (t.kind == TokenKind::integer)
          size = t.int_value;
        else
          bad();
      };
      if (core.size() == 1) {
        operand(core[0], d.lhs, d.size);
      } else if (core.size() == 3 && core[1].kind == TokenKind::op && (core[1].text == "/" || core[1].text == "*") &&
                 core[0].kind == TokenKind::name) {
        operand(core[0], d.lhs, d.size);
        d.op = core[1].text[0];
        operand(core[2], d.rhs_symbol, d.rhs_size);
      } else {
        bad();
      }
    } else if (e.kind == ExprKind::binary && (e.text == "/" || e.text == "*") && e.args[0]->kind == ExprKind::name &&
               (e.args[1]->kind == ExprKind::name || e.args[1]->kind == ExprKind::integer)) {
      d.lhs = e.args[0]->text;
      d.op = e.text[0];
      if (e.args[1]->kind == ExprKind::name)
        d.rhs_symbol = e.args[1]->text;
      else
        d.rhs_size = e.args[1]->int_value;
    } else {
      bad();
    }
    if (d.op == '/' && d.rhs_symbol.empty() && d.rhs_size <= 0)
      fail(e.offset, "a dimension cannot be divided by " + std::to_string(d.rhs_size), e.length);
    return d;
  }

  // ---- statements ----
  ast::Body parse_block() {
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

  void parse_statement(ast::Body& body) {
    if (at(TokenKind::indent)) fail(peek().offset, "unexpected indentation", std::max<std::size_t>(1, peek().length));
    if (is_name("if")) {
      body.push_back(parse_if());
    } else if (is_name("for")) {
      std::size_t start = advance().offset;
      auto s = std::make_unique<Stmt>();
      s->kind = StmtKind::for_;
      s->offset = start;
      std::size_t name_at = peek().offset;
      std::string var = expect_name("a loop variable name");
      s->target = node(ExprKind::name, name_at);
      s->target->text = var;
      s->target = finish(std::move(s->target));
      if (is_op(",")) fail(peek().offset, "a for loop binds one name");
      if (!is_name("in")) unexpected("'in'");
      advance();
      s->value = parse_expr();
      s->length = prev_end_ - start;
      expect_op(":", "after the loop header");
      s->body = parse_block();
      if (is_name("else")) fail(peek().offset, "for ... else is not supported in kernels", 4);
      body.push_back(std::move(s));
    } else if (is_name("while")) {
      std::size_t start = advance().offset;
      auto s = std::make_unique<Stmt>();
      s->kind = StmtKind::while_;
      s->offset = start;
      s->value = parse_expr();
      s->length = prev_end_ - start;
      expect_op(":", "after the loop condition");
      s->body = parse_block();
      if (is_name("else")) fail(peek().offset, "while ... else is not supported in kernels", 4);
      body.push_back(std::move(s));
    } else if (is_name("def") || is_name("class") || is_name("with") || is_name("try") || is_name("lambda")) {
      fail(peek().offset, "'" + peek().text + "' is not supported inside kernels", peek().length);
    } else if (is_op("@")) {
      fail(peek().offset, "decorators are not allowed inside a kernel");
    } else {
      parse_simple_statements(body);
    }
  }

  StmtPtr parse_if() {
    std::size_t start = advance().offset;  // `if` or `elif`
    auto s = std::make_unique<Stmt>();
    s->kind = StmtKind::if_;
    s->offset = start;
    s->value = parse_expr();
    s->length = prev_end_ - start;
    expect_op(":", "after the condition");
    s->body = parse_block();
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
  void skip_newlines_before_else() {
    std::size_t save = pos_;
    skip_newlines();
    if (!is_name("elif") && !is_name("else")) pos_ = save;
  }

  void parse_simple_statements(ast::Body& body) {
    while (true) {
      body.push_back(parse_simple());
      if (!is_op(";")) break;
      advance();
      if (at(TokenKind::newline) || at(TokenKind::end)) break;
    }
    expect_newline();
  }

  StmtPtr parse_simple() {
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
      fail(peek().offset, "'" + peek().text + "' is not supported in kernels: loops run their full range",
           peek().length);
    } else if (at(TokenKind::name) && kKeywords.count(peek().text) && !is_name("not") && !is_name("True") &&
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

  // ---- expressions ----
  // expr (',' expr)* [','] -> a tuple when there is a comma.
  ExprPtr parse_expr_list() {
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

  ExprPtr parse_expr() {
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

  ExprPtr parse_or() {
    std::size_t start = peek().offset;
    ExprPtr lhs = parse_and();
    while (is_name("or")) {
      advance();
      ExprPtr e = node(ExprKind::logical, start);
      e->text = "or";
      e->args.push_back(std::move(lhs));
      e->args.push_back(parse_and());
      lhs = finish(std::move(e));
    }
    return lhs;
  }
  ExprPtr parse_and() {
    std::size_t start = peek().offset;
    ExprPtr lhs = parse_not();
    while (is_name("and")) {
      advance();
      ExprPtr e = node(ExprKind::logical, start);
      e->text = "and";
      e->args.push_back(std::move(lhs));
      e->args.push_back(parse_not());
      lhs = finish(std::move(e));
    }
    return lhs;
  }
  ExprPtr parse_not() {
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
  ExprPtr parse_comparison() {
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
  ExprPtr binary(std::size_t start, std::string op, ExprPtr lhs, ExprPtr rhs) {
    ExprPtr e = node(ExprKind::binary, start);
    e->text = std::move(op);
    e->args.push_back(std::move(lhs));
    e->args.push_back(std::move(rhs));
    return finish(std::move(e));
  }
  ExprPtr parse_arith() {
    std::size_t start = peek().offset;
    ExprPtr lhs = parse_term();
    while (is_op("+") || is_op("-")) {
      std::string op = advance().text;
      lhs = binary(start, op, std::move(lhs), parse_term());
    }
    return lhs;
  }
  ExprPtr parse_term() {
    std::size_t start = peek().offset;
    ExprPtr lhs = parse_factor();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%") || is_op("@")) {
      std::string op = advance().text;
      lhs = binary(start, op, std::move(lhs), parse_factor());
    }
    return lhs;
  }
  ExprPtr parse_factor() {
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
  ExprPtr parse_power() {
    std::size_t start = peek().offset;
    ExprPtr base = parse_postfix();
    if (is_op("**")) {
      advance();
      return binary(start, "**", std::move(base), parse_factor());
    }
    return base;
  }

  ExprPtr parse_postfix() {
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
        advance();
        ExprPtr c = node(ExprKind::call, start);
        c->args.push_back(std::move(e));
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
        e = finish(std::move(c));
      } else if (is_op("[")) {
        advance();
        ExprPtr s = node(ExprKind::subscript, start);
        s->args.push_back(std::move(e));
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
        e = finish(std::move(s));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_subscript_item() {
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

  ExprPtr parse_atom() {
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
        if (kKeywords.count(t.text)) unexpected("an expression");
        ExprPtr e = node(ExprKind::name, start);
        e->text = advance().text;
        return finish(std::move(e));
      }
      case TokenKind::op: {
        if (t.text == "...") {
          advance();
          return finish(node(ExprKind::ellipsis, start));
        }
        if (t.text == "(") {
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
        if (t.text == "[") {
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
        if (t.text == "{") {
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
        break;
      }
      default: break;
    }
    unexpected("an expression");
  }

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

}  // namespace

std::vector<KernelDecl> parse_kernels(std::string_view source, std::string_view file, int first_line,
                                      SourceDialect dialect) {
  auto text = std::make_shared<const std::string>(source);
  std::vector<Token> tokens = tokenize(*text, file, first_line);
  Parser parser(std::move(tokens), text, std::string(file), first_line, dialect);
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
