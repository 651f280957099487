// Registration functions of the tessera._C extension, one per area.
#pragma once

#include <nanobind/nanobind.h>

#include "tessera/ir/type.h"
#include "tessera/numerics/policy.h"

namespace tessera::python {

void bind_errors(nanobind::module_& m);
void bind_numerics(nanobind::module_& m);
void bind_tools(nanobind::module_& m);
void bind_tensor(nanobind::module_& m);
void bind_graph(nanobind::module_& m);
void bind_autodiff(nanobind::module_& m);
void bind_kernel(nanobind::module_& m);
void bind_schedule(nanobind::module_& m);
void bind_dist(nanobind::module_& m);
void bind_p2p(nanobind::module_& m);  // after bind_dist: adds methods to its Communicator
// TESSERA_CRASH_TRACE (set, not 0): fatal signals print the native stack (crash_trace.cpp).
void install_crash_trace();
void bind_mpi(nanobind::module_& m);

// A dtype argument: a tessera.DType, or a string naming one.
DType dtype_argument(nanobind::handle value, const char* what);
// A policy argument: a tessera.Policy, a tessera.DType (its default policy),
// or text ("fp16", "bf16 @accum(fp32)").
NumericsPolicy policy_argument(nanobind::handle value, const char* what);
// The Python tessera.DType object for `dtype`.
nanobind::object dtype_object(DType dtype);
// A shape as Python sees it: a list of ints (fixed dims) and strs (symbols).
nanobind::list shape_to_python(const ir::Shape& shape);

}  // namespace tessera::python
