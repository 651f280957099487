// The kernel language's syntax tree (private to src/frontend/).
//
// One node type per category (Expr, Stmt) with a kind tag keeps the tree
// simple to build, walk and copy; every node records the byte offset and
// length of its text so diagnostics can point at it. The parser builds the
// tree, sema (sema*.cpp) checks it and records types, lower_to_tile.cpp walks
// it again to emit Tile IR.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tessera/support/error.h"

namespace tessera::frontend::ast {

enum class ExprKind : std::uint8_t {
  name,       // text
  integer,    // int_value (size literals such as 8_KiB are folded to bytes)
  real,       // real_value
  boolean,    // int_value 0/1
  string,     // text
  none,       // None
  ellipsis,   // ...
  binary,     // op, args[0], args[1]
  unary,      // op, args[0]
  compare,    // ops[i] between args[i] and args[i + 1] (chained)
  logical,    // op ("and"/"or"), args[0], args[1]
  ternary,    // args[0] if args[1] else args[2]
  call,       // args[0] = callee, args[1..] positional, keywords
  attribute,  // args[0].text
  subscript,  // args[0][args[1..]]
  slice,      // args[0]:args[1] (either may be a `none` node when omitted); step unsupported
  tuple,      // args
  list,       // args
  dict,       // keywords (string keys)
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Keyword {
  std::string name;
  std::size_t offset = 0;  // of the keyword's name
  ExprPtr value;
};

struct Expr {
  ExprKind kind = ExprKind::none;
  std::size_t offset = 0;  // byte offset of the node's first character in the source
  std::size_t length = 1;  // bytes the node spans (for the caret underline)
  std::string text;        // name, attribute name, string value, or operator
  std::int64_t int_value = 0;
  double real_value = 0;
  std::vector<std::string> ops;  // compare operators
  std::vector<ExprPtr> args;
  std::vector<Keyword> keywords;
};

enum class StmtKind : std::uint8_t {
  expr,        // value
  assign,      // targets = value (targets: one expr; a tuple for `a, b = ...`)
  aug_assign,  // target op= value
  if_,         // cond, body, orelse (an elif is an if alone in orelse)
  for_,        // target (a name), iter, body
  while_,      // cond, body
  return_,     // value (may be null)
  pass,
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  StmtKind kind = StmtKind::pass;
  std::size_t offset = 0;
  std::size_t length = 1;
  std::string op;  // aug_assign: "+", "-", ...
  ExprPtr target;  // assign / aug_assign / for
  ExprPtr value;   // expr / assign / aug_assign / return / if cond / while cond / for iter
  Body body;
  Body orelse;
};

// A parameter as written: `x: f32[n]`, `y: mut f32[n]`, `alpha: f32`, or the
// Python spellings `x: tessera.f32["n"]`, `y: tessera.mut(tessera.f32["n"])`.
struct Param {
  std::string name;
  std::size_t offset = 0;
  ExprPtr annotation;  // as parsed; interpreted by the parser into KernelParam
};

// One kernel definition: decorator data is interpreted by the parser into
// KernelDecl; the body is kept here.
struct Kernel {
  std::string name;
  std::size_t offset = 0;  // of the `def`'s name
  Body body;
  // The whole source the offsets index into, shared by every kernel of one
  // parse_kernels call, plus what is needed to turn an offset into a
  // SourceLocation.
  std::shared_ptr<const std::string> source;
  std::string file;
  int first_line = 1;

  SourceLocation locate(std::size_t at, std::size_t span = 1) const {
    SourceLocation loc = tessera::locate(file, *source, at, static_cast<int>(span));
    loc.line += first_line - 1;
    return loc;
  }
};

}  // namespace tessera::frontend::ast
