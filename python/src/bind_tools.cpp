// `tessera info` and the command line, for the Python console script.
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <iostream>
#include <sstream>

#include "bindings.h"
#include "tessera/runtime/system_info.h"
#include "tessera/tools/cli.h"
#include "tessera/tools/opt.h"

namespace nb = nanobind;

namespace tessera::python {

void bind_tools(nb::module_& m) {
  m.def("version", &version);
  m.def("info_report", &info_report);
  m.def("compile_cache_dir", &compile_cache_dir);
  m.def("run_cli", [](const std::vector<std::string>& args) {
    std::ostringstream out, err;
    const int status = run_cli(args, out, err);
    return std::make_tuple(status, out.str(), err.str());
  });
  // tessera-opt reads its input from the process's standard input ("-").
  m.def("run_opt", [](const std::vector<std::string>& args) {
    std::ostringstream out, err;
    const int status = run_opt(args, std::cin, out, err);
    return std::make_tuple(status, out.str(), err.str());
  });
}

}  // namespace tessera::python
