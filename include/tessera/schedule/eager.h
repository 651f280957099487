// Eager ops on compiled kernels: tessera.ops.* outside @jit as cached
// single-op executables.
//
// Each call looks up an executable by the op, its attributes, the operands'
// policies and their shape pattern: every dim other than 0 and 1 becomes a
// symbol, equal sizes sharing one symbol (a [256, 1024] x [1024, 1024]
// matmul is [S0, S1] x [S1, S1]), so one kernel serves every shape of that
// pattern. Ops whose shape rules need static dims (a reshape's target, a
// concat axis) fall back to a kernel for the exact shapes. The first call of
// a pattern compiles (one host-compiler invocation, then the disk cache);
// later calls run the cached executable.
//
// TESSERA_EAGER=compiled selects this path on the host; the default there
// stays the reference executor until the common op families are compiled
// when Tessera is built (docs/design/0005-schedule-ir.md says why). Ops on
// cuda tensors always take it, compiled for their device (NVRTC, cached on
// disk, shape-generic the same way); a 0-d host operand (a Python scalar)
// is copied to that device, and any other operand on another device is a
// DeviceError naming both.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "tessera/ir/attribute.h"
#include "tessera/ir/dialect.h"
#include "tessera/runtime/tensor.h"

namespace tessera::schedule {

// Runs op `def` on `inputs` through a cached compiled executable. Ops no
// template covers are a CompileError naming the op (TESSERA_EAGER=reference
// runs them on the reference executor).
std::vector<Tensor> run_op_compiled(const ir::OpDef& def, std::span<const Tensor> inputs, const ir::AttrMap& attrs);

// "compiled" or "reference", from $TESSERA_EAGER (default "reference").
std::string eager_backend();

// Executables compiled so far for eager ops (a test and benchmark hook).
std::size_t eager_cache_size();

}  // namespace tessera::schedule
