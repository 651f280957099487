// Transforms built from jvp_function / vjp_function / value_and_grad_function
// (autodiff.h): the C++ counterparts of tessera.grad, tessera.hvp,
// tessera.jacfwd and tessera.jacrev. grad_function and hvp_function return
// Graph IR functions (printable, differentiable again); jacfwd and jacrev
// evaluate a Jacobian on the reference executor, one basis vector at a time.
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "tessera/ir/ir.h"
#include "tessera/runtime/tensor.h"

namespace tessera::autodiff {

// (primals...) -> (gradients of the args in `wrt`...) for a func with one
// rank-0 float result (value_and_grad_function without the value).
ir::Operation& grad_function(ir::Module& module, const ir::Operation& func, const std::vector<int>& wrt,
                             std::string_view new_name);

// Hessian-vector product of a func with one rank-0 float result:
// (primals..., tangents...) -> (H v restricted to each parameter...), where
// `tangents` has one entry per parameter (the direction v) and H is the
// Hessian over all parameters: forward mode over reverse mode (jvp of grad).
ir::Operation& hvp_function(ir::Module& module, const ir::Operation& func, std::string_view new_name);

// The Jacobian of result `result` of `func` with respect to parameter
// `argnum` at `args`, shaped result.shape + param.shape, in the tangent
// policy (fp64 for fp64 values, fp32 otherwise). jacfwd runs one JVP per
// element of the parameter; jacrev one VJP per element of the result. Both
// add their transformed function to `module` once (named
// "<func>__jacfwd"/"<func>__jacrev_<result>").
Tensor jacfwd(ir::Module& module, const ir::Operation& func, std::span<const Tensor> args, int argnum = 0,
              int result = 0);
Tensor jacrev(ir::Module& module, const ir::Operation& func, std::span<const Tensor> args, int argnum = 0,
              int result = 0);

}  // namespace tessera::autodiff
