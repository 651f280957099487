// Building graph.constant ops from host tensors.
//
// A graph.constant stores its elements as decoded values (doubles) in its
// `value` attribute, and the op rejects any value its storage dtype cannot
// hold exactly, so executing the constant reproduces the tensor's encodings.
// build_constant() is the one way C++ code (tracing, constant folding) turns
// a Tensor into such an op.
#pragma once

#include "tessera/ir/builder.h"
#include "tessera/runtime/tensor.h"
#include "tessera/support/error.h"

namespace tessera::graph {

// Creates `graph.constant` at the builder's insertion point holding `value`'s
// elements in row-major order, with result type tensor<shape policy>. When
// every element has the same encoding a single value is stored (it
// broadcasts to the shape). Raises ArgumentError when the constant could
// not reproduce the tensor exactly: int64 elements beyond 2^53 in magnitude
// (a double cannot hold them), or encodings that decode and re-encode to
// different bits (NaNs with non-canonical payloads).
ir::Operation* build_constant(ir::OpBuilder& builder, const Tensor& value, SourceLocation location = {});

}  // namespace tessera::graph
