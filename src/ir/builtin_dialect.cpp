// The builtin dialect: functions and their terminator, shared by every level.
#include "tessera/ir/dialect.h"

namespace tessera::ir {

void register_builtin_dialect(Registry& registry) {
  registry.add(OpDef{
      .name = "func",
      .summary = "A function: one region with one block; block arguments are the parameters.",
      .attrs = {{.name = "sym_name", .kind = AttrKind::string, .required = true}},
      .num_results = 0,
      .infer = [](std::span<const Type>, const AttrMap&) { return std::vector<Type>{}; },
  });
  registry.add(OpDef{
      .name = "return",
      .summary = "Ends a function body; its operands are the function's results.",
      .operands = {"values"},
      .variadic = true,
      .num_results = 0,
      .is_terminator = true,
      .infer = [](std::span<const Type>, const AttrMap&) { return std::vector<Type>{}; },
  });
}

}  // namespace tessera::ir
