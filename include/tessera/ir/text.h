// The IR's text form (ARCHITECTURE.md decision 3).
//
// Custom form, derived from each op's schema:
//
//     func @softmax_rows(%x: tensor<[B, 64] fp16>) -> (tensor<[B, 64] fp16>) {
//       %0 = graph.softmax_safe %x {axis = -1} : tensor<[B, 64] fp16>
//       %1:2 = graph.split %0 {axis = 1, sizes = [32, 32]} : tensor<[B, 32] fp16>, tensor<[B, 32] fp16>
//       return %1#0
//     }
//
// Generic form (same content, op name quoted, operand types spelled out):
//
//       %0 = "graph.softmax_safe"(%x) {axis = -1} : (tensor<[B, 64] fp16>) -> (tensor<[B, 64] fp16>)
//
// The parser reads both. Result types are inferred and checked against the
// printed ones, so a wrong type in the text is a diagnostic, not a silent
// disagreement. Values are renumbered %0, %1, ... in order of definition;
// block arguments keep their names. print(parse(print(m))) == print(m).
#pragma once

#include <string>
#include <string_view>

#include "tessera/ir/ir.h"

namespace tessera::ir {

struct PrintOptions {
  bool generic = false;
  // > 0: attribute lists longer than this print elided (print_attribute),
  // for display; the text then does not parse back.
  std::size_t elide_lists_over = 0;
};

std::string print_module(const Module& module, const PrintOptions& options = {});
std::string print_function(const Operation& func, const PrintOptions& options = {});

// Parses a module; errors are ParseError/ShapeError/DtypeError/ArgumentError
// with file:line:col and a caret line.
Module parse_module(std::string_view text, std::string_view file = "<ir>");

}  // namespace tessera::ir
