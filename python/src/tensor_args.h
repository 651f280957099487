// Conversions shared by the tensor and graph bindings.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <optional>

#include "tessera/ir/attribute.h"
#include "tessera/ir/dialect.h"
#include "tessera/runtime/tensor.h"

namespace tessera::python {

// The numpy dtype that holds `d` natively, if any.
std::optional<nanobind::dlpack::dtype> native_dtype(DType d);
// A sequence of ints and symbol names -> Shape.
ir::Shape shape_from_python(nanobind::handle dims);
// Python attribute values -> AttrMap, converted by the op's schema.
ir::AttrMap attrs_from_python(const ir::OpDef& def, nanobind::dict attrs);

}  // namespace tessera::python
