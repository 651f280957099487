// Point-to-point methods of _C.Communicator (communicator.h: send, recv),
// added to the class bind_dist registers. Kept in their own file so that
// the collectives' bindings and these change independently.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "tessera/dist/communicator.h"

namespace nb = nanobind;

namespace tessera::python {

using dist::Communicator;

void bind_p2p(nb::module_& m) {
  nb::handle cls = m.attr("Communicator");
  nb::cpp_function_def<Communicator>(
      [](Communicator& c, std::size_t rank, const Tensor& x, std::size_t dst) {
        nb::gil_scoped_release release;
        c.send(rank, x, dst);
      },
      nb::scope(cls), nb::name("send"), nb::is_method(), nb::arg("rank"), nb::arg("x"), nb::arg("dst"),
      "Copies x into the mailbox from member `rank` to member `dst` and returns (buffered).");
  nb::cpp_function_def<Communicator>(
      [](Communicator& c, std::size_t rank, std::size_t src, std::vector<std::int64_t> shape, nb::handle policy) {
        const NumericsPolicy p = policy_argument(policy, "dtype");
        nb::gil_scoped_release release;
        return c.recv(rank, src, shape, p);
      },
      nb::scope(cls), nb::name("recv"), nb::is_method(), nb::arg("rank"), nb::arg("src"), nb::arg("shape"),
      nb::arg("policy"), "The oldest message from member `src` to member `rank`; it must have `shape` and `policy`.");
}

}  // namespace tessera::python
