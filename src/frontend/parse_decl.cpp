// Kernel declarations: decorators, parameters and their types.
//
// `@kernel` / `@kernel.autotune(space=...)` with the group shape and shared
// budget (as `tile[...]`/`shared(...)` modifiers in .tsr files or `tile=` /
// `shared=` keywords in Python), then `def NAME(params):`. Each parameter's
// annotation is interpreted here into a KernelParam: dtype, `mut`, and dims
// (sizes, symbols, or K/tp-style compounds, as names or Python strings).
#include <cctype>
#include <set>

#include "frontend/parser.h"
#include "frontend/sema.h"
#include "frontend/suggest.h"

namespace tessera::frontend::parse_detail {

using ast::Expr;
using ast::ExprKind;
using ast::ExprPtr;

KernelDecl Parser::parse_kernel() {
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
  decl.target = info.target;
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

void Parser::parse_decorator(DecoratorInfo& info) {
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
      } else if (k.name == "target") {
        // The NVIDIA target of launches on cuda tensors (docs/design/0014-cuda-tile-target.md).
        if (k.value->kind != ExprKind::string || (k.value->text != "cuda" && k.value->text != "cuda_tile"))
          fail(k.value->offset, "target is \"cuda\" (CUDA C++ to PTX) or \"cuda_tile\" (CUDA Tile IR)",
               k.value->length);
        info.target = k.value->text;
      } else {
        std::vector<std::string_view> known = {"tile", "shared", "target"};
        if (autotune) known.push_back("space");
        std::string hint = closest_match(k.name, known);
        fail(k.offset, "unknown decorator argument '" + k.name + "'" + did_you_mean(hint), k.name.size(),
             ErrorCode::ParseUnknownModifier);
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
      if (mod->args.size() < 2) {
        fail(mod->offset, "tile[...] needs the group shape: one to three sizes, e.g. tile[(128,)]", mod->length,
             ErrorCode::ParseSyntax);
      }
      Expr shape;
      shape.kind = ExprKind::tuple;
      shape.offset = mod->args[1]->offset;
      shape.length = mod->length - (shape.offset - mod->offset);
      for (std::size_t i = 1; i < mod->args.size(); ++i) shape.args.push_back(std::move(mod->args[i]));
      set_group_shape(info, shape, mod->offset);
    } else if (mod->kind == ExprKind::call && mod->args[0]->kind == ExprKind::name && mod->args[0]->text == "shared" &&
               mod->args.size() == 2 && mod->keywords.empty()) {
      set_shared(info, *mod->args[1], mod->offset);
    } else {
      fail(mod->offset, "unknown kernel modifier: expected tile[(N, ...)] or shared(SIZE)", mod->length,
           ErrorCode::ParseUnknownModifier);
    }
  }
  expect_newline();
}

void Parser::set_group_shape(DecoratorInfo& info, const Expr& e, std::size_t at_offset) {
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

void Parser::set_shared(DecoratorInfo& info, const Expr& e, std::size_t at_offset) {
  if (info.shared) fail(at_offset, "the shared budget is given twice", 6, ErrorCode::ParseDuplicateModifier);
  std::int64_t v = const_int(e, "a shared-memory budget");
  if (v <= 0) fail(e.offset, "the shared budget must be positive, got " + std::to_string(v), e.length);
  info.shared = v;
}

std::vector<std::pair<std::string, std::vector<std::int64_t>>> Parser::parse_space(const Expr& e) {
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
    if (k.name.empty() || is_keyword(k.name) ||
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
std::int64_t Parser::const_int(const Expr& e, const std::string& what) {
  std::optional<std::int64_t> v = fold_int(e, {});
  if (!v) fail(e.offset, what + " must be an integer constant", e.length);
  return *v;
}

KernelParam Parser::parse_param() {
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

void Parser::interpret_annotation(const Expr& e, KernelParam& p) {
  if (e.kind == ExprKind::call) {
    std::vector<std::string> parts;
    if (dotted(*e.args[0], parts) && parts.back() == "mut") {
      if (e.args.size() != 2 || !e.keywords.empty()) fail(e.offset, "mut(...) takes one buffer type", e.length);
      if (p.is_mut) fail(e.offset, "'" + p.name + "' is marked mut twice", e.length, ErrorCode::ParseDuplicateModifier);
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

DType Parser::dtype_named(const std::string& name, std::size_t at_offset) {
  DType dtype;
  if (try_parse_dtype(name, dtype)) return dtype;
  try {
    parse_dtype(name);
  } catch (const Error& error) {
    raise(error.code(), error.message(), locate_source(file_, *source_, first_line_, at_offset, name.size()));
  }
  fail(at_offset, "unknown dtype '" + name + "'", name.size(), ErrorCode::DtypeUnknown);
}

DimSpec Parser::interpret_dim(const Expr& e) {
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
      if (t.kind == TokenKind::name && !is_keyword(t.text))
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

}  // namespace tessera::frontend::parse_detail
