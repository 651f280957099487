// Eager ops on compiled kernels: tessera.ops.* outside @jit as cached
// single-op executables.
//
// Each call looks up an executable by the op, its attributes, the operands'
// policies and the call's shape pattern (src/schedule/eager_forms.h): the
// call is first collapsed to its lowest rank (elementwise operands that
// match or broadcast alike merge dims, reductions merge runs of reduced or
// kept dims, row normalizations fold their leading dims), then every dim
// larger than 1 becomes a symbol. One kernel therefore serves every shape of
// a pattern: an add of two [256, 1024] tensors and of two [7] tensors share
// one, as do all 2-D matmuls. The first call of a pattern compiles (one
// host-compiler invocation) unless its kernels were compiled when Tessera was
// built (tessera-prebuild) or are in the disk cache; later calls run the
// cached executable.
//
// Compiled kernels are the default for eager ops on the host; TESSERA_EAGER
// (or else TESSERA_BACKEND) = reference selects the reference executor. Ops
// on cuda tensors always run compiled for their device (NVRTC, cached on
// disk, shape-generic the same way); a 0-d host operand (a Python scalar) is
// copied to that device, and any other operand on another device is a
// DeviceError naming both.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "tessera/ir/attribute.h"
#include "tessera/ir/dialect.h"
#include "tessera/runtime/tensor.h"
#include "tessera/schedule/executable.h"

namespace tessera::schedule {

// Runs op `def` on `inputs` through a cached compiled executable. Ops no
// template covers are a CompileError naming the op and why.
std::vector<Tensor> run_op_compiled(const ir::OpDef& def, std::span<const Tensor> inputs, const ir::AttrMap& attrs);

// The eager default on host operands: run_op_compiled, except that an op no
// template covers yet (see docs/design/0005-schedule-ir.md, "Eager ops")
// runs on the reference executor and `no_kernel` receives why, so that the
// caller can say so (Python warns with ReferenceExecutorWarning). Operands
// on a GPU never take the reference executor.
std::vector<Tensor> run_op_eager(const ir::OpDef& def, std::span<const Tensor> inputs, const ir::AttrMap& attrs,
                                 std::string& no_kernel);

// Runs Graph IR function `func` of `module` op by op, each op as an eager
// call (run_op_eager: cached, shape-generic compiled kernels): how eager
// transforms (tessera.grad, vjp, jvp, ... outside @jit) run the functions
// they stage, as a framework runs eager autograd, without a whole-function
// compile per call. The function runs on its arguments' device; results of
// ops without operands (constants, creation ops) are made on the host
// (creation ops by their eager kernels) and moved there. `no_kernel` receives "op: why" for each host op that ran on
// the reference executor because no template covers it.
// `wanted` as for graph::execute: only those results, and only the ops they need.
std::vector<Tensor> execute_eager(const ir::Module& module, const ir::Operation& func, std::span<const Tensor> args,
                                  std::vector<std::string>& no_kernel, std::span<const bool> wanted = {});
// "compiled" or "reference": $TESSERA_EAGER, else $TESSERA_BACKEND, else
// "compiled". Another value is an ArgumentError.
std::string eager_backend();

// Executables compiled (or loaded) so far for eager ops (a test and
// benchmark hook).
std::size_t eager_cache_size();

// The executable an eager call of `def` on operands of these shapes and
// policies would run, compiled now (tessera-prebuild's entry point: it
// needs no data). Returns its kernels' reports (cache hits, objects).
std::vector<KernelReport> compile_eager(const ir::OpDef& def, std::span<const Tensor> inputs, const ir::AttrMap& attrs);

}  // namespace tessera::schedule
