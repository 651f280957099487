// The builtin dialect: functions, their terminator and calls, shared by every level.
#include "tessera/ir/dialect.h"
#include "tessera/support/error.h"

namespace tessera::ir {

void register_builtin_dialect(Registry& registry) {
  registry.add(OpDef{
      .name = "func",
      .summary = "A function: one region with one block; block arguments are the parameters.",
      .attrs = {{.name = "sym_name", .kind = AttrKind::string, .required = true},
                // Kernel functions (docs/design/0003-tile-ir.md): absent on Graph IR functions.
                {.name = "kernel", .kind = AttrKind::boolean, .doc = "true for a Tile IR kernel"},
                {.name = "group_shape", .kind = AttrKind::int_list, .doc = "tiles per group; absent = one"},
                {.name = "shared_bytes", .kind = AttrKind::integer, .doc = "shared-memory budget in bytes"},
                {.name = "source", .kind = AttrKind::string, .doc = "file:line of the kernel's definition"},
                {.name = "shared_used", .kind = AttrKind::integer, .doc = "bytes planned by tile-plan-shared"},
                {.name = "resident_groups", .kind = AttrKind::integer,
                 .doc = "groups a GPU should fit on one multiprocessor at once (a register budget); absent = the "
                        "backend's choice"},
                {.name = "vectorize", .kind = AttrKind::boolean,
                 .doc = "false keeps a host compiler's vectorizer out of a CPU kernel (one storing complex parts side by "
                        "side, which g++ would fuse into vfmaddsub); absent = vectorized"},
                {.name = "mesh", .kind = AttrKind::string, .doc = "a sharded function's mesh axes and sizes, \"dp=2, tp=4\""}},
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
  // The result types are an attribute (the callee's result types as text) so
  // that inference sees one op, as it does for every other op: a parser or
  // builder never has to look another function up. The executor and the
  // autodiff transforms check them against the callee.
  registry.add(OpDef{
      .name = "call",
      .summary = "Calls the module's function `callee`; `remat`, `custom_jvp`, `custom_vjp_fwd` and "
                 "`custom_vjp_bwd` tell autodiff how to differentiate it.",
      .operands = {"args"},
      .variadic = true,
      .attrs = {{.name = "callee", .kind = AttrKind::string, .required = true},
                {.name = "result_types",
                 .kind = AttrKind::string,
                 .required = true,
                 .doc = "the callee's result types, e.g. \"tensor<[4] fp32>, tensor<[] fp32>\""},
                {.name = "remat", .kind = AttrKind::boolean, .doc = "checkpoint: recompute in the backward pass"},
                {.name = "custom_jvp", .kind = AttrKind::string, .doc = "(primals, tangents) -> (results, tangents)"},
                {.name = "custom_vjp_fwd", .kind = AttrKind::string, .doc = "(primals) -> (results, residuals)"},
                {.name = "custom_vjp_bwd",
                 .kind = AttrKind::string,
                 .doc = "(residuals, cotangents) -> (cotangents of primals)"}},
      .infer =
          [](std::span<const Type>, const AttrMap& attrs) {
            if (attrs.has("custom_vjp_fwd") != attrs.has("custom_vjp_bwd")) {
              raise(ErrorCode::ArgumentInvalid, "custom_vjp_fwd and custom_vjp_bwd must be given together");
            }
            if (attrs.get_string("callee").empty()) raise(ErrorCode::ArgumentInvalid, "attribute 'callee' is empty");
            return parse_type_list(attrs.get_string("result_types"));
          },
  });
}

}  // namespace tessera::ir
