// The mpi collective backend for Python (tessera/dist/mpi.h): process
// identity under mpirun, the communicator factory, the exit hooks that
// tessera.dist._mpi installs, and what `tessera info` says about MPI.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "tessera/dist/mpi.h"
#include "tessera/runtime/tensor.h"

namespace nb = nanobind;

namespace tessera::python {

void bind_mpi(nb::module_& m) {
  m.def("mpi_launched", &dist::launched_by_mpirun, "Whether this process was started by mpirun.");
  m.def("mpi_process_rank", &dist::process_rank, "This process's rank under mpirun (0 outside it).");
  m.def("mpi_process_count", &dist::process_count, "The number of processes mpirun started (1 outside it).");
  m.def("mpi_owner", &dist::owner_of_mesh_rank, nb::arg("rank"), nb::arg("mesh_size"), nb::arg("processes"),
        "The process that drives mesh rank `rank` (ArgumentError unless the mesh size is a multiple of processes).");
  m.def("mpi_probe", [] {
    const dist::MpiProbe p = dist::probe_mpi();
    nb::dict d;
    d["available"] = p.available;
    d["reason"] = p.reason;
    d["library"] = p.library;
    d["version"] = p.version;
    d["standard"] = p.standard;
    d["cuda_aware"] = p.cuda_aware;
    d["launched"] = p.launched;
    d["process_rank"] = p.process_rank;
    d["process_count"] = p.process_count;
    return d;
  }, "What tessera info reports about MPI, as a dict.");
  m.def(
      "mpi_communicator",
      [](std::string axis, std::vector<std::string> members, std::vector<int> owners, std::optional<double> timeout) {
        nb::gil_scoped_release release;  // the first one initializes MPI
        return dist::make_mpi_communicator(std::move(axis), std::move(members), std::move(owners),
                                           timeout ? *timeout : dist::collective_timeout_seconds());
      },
      nb::arg("axis"), nb::arg("members"), nb::arg("owners"), nb::arg("timeout") = nb::none(),
      "A communicator of the mpi backend: owners[r] is the process that drives member r.");
  m.def(
      "mpi_join",
      [] {
        nb::gil_scoped_release release;
        dist::mpi_join();
      },
      "Under mpirun with several processes: MPI_Init_thread now (nothing outside mpirun).");
  m.def(
      "mpi_process_failed",
      [](const std::string& why) {
        nb::gil_scoped_release release;
        dist::mpi_process_failed(why);
      },
      nb::arg("why"), "Tells the other processes that this one stops (an uncaught exception).");
  m.def(
      "mpi_shutdown",
      [] {
        nb::gil_scoped_release release;
        dist::mpi_shutdown();
      },
      "At exit: goodbye to the other processes, then MPI_Finalize once all said it.");
  m.def(
      "mpi_adopt_local_shards",
      [](std::vector<std::int64_t> shape, const dist::Layout& layout, std::shared_ptr<dist::Mesh> mesh,
         nb::handle policy, std::vector<std::optional<Tensor>> shards) {
        return dist::mpi_adopt_local_shards(std::move(shape), layout, std::move(mesh),
                                            policy_argument(policy, "dtype"), std::move(shards));
      },
      nb::arg("shape"), nb::arg("layout"), nb::arg("mesh"), nb::arg("policy"), nb::arg("shards"),
      "A DistTensor from this process's shards (None elsewhere: host zeros stand in).");
  m.def(
      "mpi_complete_shards",
      [](const dist::DistTensor& t, std::vector<int> owners) {
        nb::gil_scoped_release release;
        return dist::mpi_complete_shards(t, owners);
      },
      nb::arg("tensor"), nb::arg("owners"), "Every shard real in every process (collective over the processes).");
  m.def(
      "mpi_tensor_bytes",
      [](const Tensor& t) {
        const std::string b = dist::tensor_to_bytes(t);
        return nb::bytes(b.data(), b.size());
      },
      nb::arg("tensor"), "A tensor's codes as bytes (host).");
  m.def(
      "mpi_tensor_from_bytes",
      [](nb::bytes b, std::vector<std::int64_t> shape, nb::handle policy) {
        return dist::tensor_from_bytes(std::string(b.c_str(), b.size()), shape, policy_argument(policy, "policy"));
      },
      nb::arg("data"), nb::arg("shape"), nb::arg("policy"), "A host tensor whose codes are `data`.");
  m.def("mpi_flight_record", &dist::mpi_flight_record, "This process's last collectives, oldest first.");
}

}  // namespace tessera::python
