// The Graph IR module a trace records into, shared by the tracing bindings
// (bind_graph.cpp) and the autodiff bindings (bind_autodiff.cpp).
//
// A trace nested in another (a function transformed by tessera.grad inside
// @jit, or inside another transform) records a new function into its
// enclosing trace's module, so the transformed functions, the functions that
// `call` ops name (custom rules, checkpoints) and the enclosing function all
// live in one module; the transformed function is then spliced into the
// enclosing trace.
#pragma once

#include <nanobind/nanobind.h>

#include <memory>
#include <string>
#include <vector>

#include "tessera/ir/ir.h"
#include "tessera/support/error.h"

namespace tessera::python {

struct IRModule {
  std::shared_ptr<ir::Module> module;
};

// Appends a copy of `callee`'s body to the end of `body` with its parameters
// replaced by `args` (cast to the parameters' policies where they differ) and
// returns the values the callee returns. Defined in bind_autodiff.cpp.
std::vector<ir::Value*> splice_function(ir::Block& body, const ir::Operation& callee,
                                        const std::vector<ir::Value*>& args, const SourceLocation& location);

// Appends `call {callee}` to the end of `body` (callee: a function of `module`) with
// `extra` attributes (remat, custom_jvp, custom_vjp_fwd, custom_vjp_bwd) and returns
// its results. Defined in bind_autodiff.cpp.
std::vector<ir::Value*> call_function(ir::Block& body, const ir::Module& module, const std::string& callee,
                                      const std::vector<ir::Value*>& args, nanobind::dict extra,
                                      const SourceLocation& location);

}  // namespace tessera::python
