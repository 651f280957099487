// Registration functions of the tessera._C extension, one per area.
#pragma once

#include <nanobind/nanobind.h>

#include "tessera/numerics/dtype.h"

namespace tessera::python {

void bind_errors(nanobind::module_& m);
void bind_numerics(nanobind::module_& m);
void bind_tools(nanobind::module_& m);

// A dtype argument: a tessera.DType, or a string naming one.
DType dtype_argument(nanobind::handle value, const char* what);

}  // namespace tessera::python
