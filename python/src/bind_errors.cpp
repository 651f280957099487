// Turns tessera::Error into the matching Python exception of tessera.errors,
// carrying the stable code and the source location.
#include <nanobind/stl/string.h>

#include "bindings.h"
#include "tessera/support/error.h"

namespace nb = nanobind;

namespace tessera::python {

void bind_errors(nb::module_& m) {
  nb::register_exception_translator([](const std::exception_ptr& pointer, void*) {
    try {
      std::rethrow_exception(pointer);
    } catch (const Error& error) {
      nb::gil_scoped_acquire gil;
      nb::object module = nb::module_::import_("tessera.errors");
      nb::object cls = module.attr(std::string(kind_name(error.kind())).c_str());
      const SourceLocation& where = error.where();
      nb::object instance =
          cls(error.what(), nb::arg("code") = error.code_string(), nb::arg("message") = error.message(),
              nb::arg("file") = where.valid() ? nb::cast(where.file) : nb::none(),
              nb::arg("line") = where.valid() ? nb::cast(where.line) : nb::none(),
              nb::arg("col") = where.valid() ? nb::cast(where.column) : nb::none());
      PyErr_SetObject(cls.ptr(), instance.ptr());
    }
  });
  // Lets tests check the translation of every kind without a real failure.
  m.def("_raise_error", [](int code, const std::string& message) { raise(static_cast<ErrorCode>(code), message); });
}

}  // namespace tessera::python
