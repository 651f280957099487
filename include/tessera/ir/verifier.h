// The verifier: checks what transformations can break.
//
// For every op: operand count against the schema, attributes against the
// schema, result types equal to what inference gives for the operand types
// (shape and policy rules live in the OpDef, decision 2), the op's own extra
// check, every operand defined before its use in the same block or as a
// block argument, and a function body ending in exactly one `return`.
// Violations raise CompileError (TE7002) naming the op, its location and
// what is wrong.
#pragma once

#include "tessera/ir/ir.h"

namespace tessera::ir {

void verify(const Module& module);
void verify_function(const Operation& func);

}  // namespace tessera::ir
