// tessera._C: the compiled half of the Python package. All semantics live in
// libtessera; this module only converts arguments and results.
#include "bindings.h"

NB_MODULE(_C, m) {
  m.doc() = "Tessera's C++ core";
  tessera::python::install_crash_trace();
  tessera::python::bind_errors(m);
  tessera::python::bind_numerics(m);
  tessera::python::bind_tools(m);
  tessera::python::bind_tensor(m);
  tessera::python::bind_graph(m);
  tessera::python::bind_autodiff(m);
  tessera::python::bind_kernel(m);
  tessera::python::bind_schedule(m);
  tessera::python::bind_dist(m);
  tessera::python::bind_p2p(m);
  tessera::python::bind_mpi(m);
}
