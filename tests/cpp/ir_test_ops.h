// Test-only ops shared by the IR core tests: a "test" dialect whose ops take
// every attribute kind, so printing and parsing can be checked on values no
// Graph IR op would accept (nan, strings with quotes, extreme integers).
#pragma once

#include "tessera/ir/dialect.h"

namespace tessera::ir::testing {

// Registers, once:
//   test.attrs    variadic operands; one optional attribute of every kind
//                 (b, i, f, s, ints, reals, pol, shp); results = the operand types.
//   test.sink     one operand, no results (not a terminator).
//   test.barrier  no operands, no results.
inline void register_test_ops() {
  static const bool done = [] {
    Registry& r = Registry::global();
    r.add(OpDef{
        .name = "test.attrs",
        .summary = "Echoes its operands' types; takes every attribute kind.",
        .operands = {"inputs"},
        .variadic = true,
        .attrs = {{.name = "b", .kind = AttrKind::boolean},
                  {.name = "i", .kind = AttrKind::integer},
                  {.name = "f", .kind = AttrKind::real},
                  {.name = "s", .kind = AttrKind::string},
                  {.name = "ints", .kind = AttrKind::int_list},
                  {.name = "reals", .kind = AttrKind::real_list},
                  {.name = "pol", .kind = AttrKind::policy},
                  {.name = "shp", .kind = AttrKind::shape}},
        .infer = [](std::span<const Type> in, const AttrMap&) { return std::vector<Type>(in.begin(), in.end()); },
    });
    r.add(OpDef{
        .name = "test.sink",
        .summary = "Consumes a value.",
        .operands = {"x"},
        .effect = Effect::io,
        .num_results = 0,
        .infer = [](std::span<const Type>, const AttrMap&) { return std::vector<Type>{}; },
    });
    r.add(OpDef{
        .name = "test.barrier",
        .summary = "Does nothing, visibly.",
        .effect = Effect::io,
        .num_results = 0,
        .infer = [](std::span<const Type>, const AttrMap&) { return std::vector<Type>{}; },
    });
    return true;
  }();
  (void)done;
}

}  // namespace tessera::ir::testing
