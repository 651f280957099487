// Python surface of the distributed layer (tessera/dist/*.h): meshes,
// layouts, distributed tensors, communicators and the SPMD runner that
// tessera.dist, tessera.index_launch and the collectives are built on.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <thread>

#include "bindings.h"
#include "tessera/backends/cpu/cpu_backend.h"
#include "tessera/dist/communicator.h"
#include "tessera/dist/nccl.h"
#include "tessera/dist/dist_tensor.h"
#include "tessera/dist/layout.h"
#include "tessera/dist/mesh.h"
#include "tessera/dist/shard_scope.h"
#include "tessera/dist/sharding.h"
#include "ir_module.h"
#include "tessera/ir/ir.h"
#include "tessera/dist/spmd.h"

namespace nb = nanobind;

namespace tessera::python {

using dist::Communicator;
using dist::DistTensor;
using dist::Layout;
using dist::Mesh;

void bind_dist(nb::module_& m) {
  m.def("virtual_cuda_devices", &dist::virtual_cuda_devices,
        "How many cuda:N virtual devices TESSERA_VIRTUAL_DEVICES asks for (0: none).");
  m.def("memory_device", &dist::memory_device, nb::arg("device"),
        "Where a mesh device keeps its memory: \"cpu\" for virtual devices, else the GPU.");
  m.def("collective_timeout", &dist::collective_timeout_seconds);

  nb::class_<Mesh>(m, "Mesh", "A grid of devices with named axes (tessera/dist/mesh.h).")
      .def(nb::new_([](std::vector<std::string> devices, std::vector<std::string> axes, std::vector<std::int64_t> shape) {
             return std::make_shared<Mesh>(std::move(devices), std::move(axes), std::move(shape));
           }),
           nb::arg("devices"), nb::arg("axes"), nb::arg("shape"))
      .def_prop_ro("devices", &Mesh::devices)
      .def_prop_ro("axes", &Mesh::axes)
      .def_prop_ro("shape", &Mesh::shape)
      .def_prop_ro("size", &Mesh::size)
      .def("axis_size", &Mesh::axis_size, nb::arg("axis"))
      .def("coords", &Mesh::coords, nb::arg("rank"))
      .def("axis_group", &Mesh::axis_group, nb::arg("axis"), nb::arg("rank"))
      .def("rank_of", &Mesh::rank_of, nb::arg("coords"))
      .def("describe", &Mesh::describe);

  nb::class_<Layout>(m, "Layout", "How a distributed tensor is split over a mesh (tessera/dist/layout.h).")
      .def_static(
          "resolve",
          [](std::vector<std::string> partition, std::vector<std::string> mesh_axes, std::vector<std::string> partial,
             std::int64_t cyclic_block, std::size_t rank, const Mesh& mesh) {
            dist::ShardSpec s{std::move(partition), std::move(mesh_axes), std::move(partial), cyclic_block};
            return Layout::resolve(s, rank, mesh);
          },
          nb::arg("partition"), nb::arg("mesh_axes"), nb::arg("partial"), nb::arg("cyclic_block"), nb::arg("rank"),
          nb::arg("mesh"))
      .def_static("replicated", &Layout::replicated, nb::arg("rank"))
      .def_prop_ro("rank", &Layout::rank)
      .def_prop_ro("partial", &Layout::partial)
      .def_prop_ro("dim_axes",
                   [](const Layout& l) {
                     std::vector<std::vector<std::string>> v;
                     for (const auto& d : l.dims()) v.push_back(d.mesh_axes);
                     return v;
                   })
      .def("splits", &Layout::splits, nb::arg("axis"))
      .def("shard_shape", &Layout::shard_shape, nb::arg("shape"), nb::arg("mesh"), nb::arg("rank"))
      .def("describe", &Layout::describe)
      .def("__eq__", [](const Layout& a, const Layout& b) { return a == b; });

  nb::class_<DistTensor>(m, "DistTensor", "A tensor with one real shard per mesh device (tessera/dist/dist_tensor.h).")
      .def_static(
          "zeros",
          [](std::vector<std::int64_t> shape, const Layout& layout, std::shared_ptr<Mesh> mesh, nb::handle policy) {
            return DistTensor::zeros(std::move(shape), layout, std::move(mesh), policy_argument(policy, "dtype"));
          },
          nb::arg("shape"), nb::arg("layout"), nb::arg("mesh"), nb::arg("policy"))
      .def_static(
          "scatter",
          [](const Tensor& global, const Layout& layout, std::shared_ptr<Mesh> mesh) {
            return DistTensor::scatter(global, layout, std::move(mesh));
          },
          nb::arg("tensor"), nb::arg("layout"), nb::arg("mesh"))
      .def_static(
          "from_shards",
          [](std::vector<std::int64_t> shape, const Layout& layout, std::shared_ptr<Mesh> mesh, nb::handle policy,
             std::vector<Tensor> shards) {
            return DistTensor::from_shards(std::move(shape), layout, std::move(mesh), policy_argument(policy, "dtype"),
                                           std::move(shards));
          },
          nb::arg("shape"), nb::arg("layout"), nb::arg("mesh"), nb::arg("policy"), nb::arg("shards"))
      .def_prop_ro("shape", &DistTensor::shape)
      .def_prop_ro("policy", &DistTensor::policy)
      .def_prop_ro("layout", &DistTensor::layout)
      .def_prop_ro("mesh", [](const DistTensor& t) { return std::const_pointer_cast<Mesh>(t.mesh_ptr()); })
      .def_prop_ro("shards", &DistTensor::shards)
      .def("gather", [](const DistTensor& t) {
        nb::gil_scoped_release release;
        return t.gather();
      })
      .def("parts", &DistTensor::parts, nb::arg("axis"))
      .def("reshard", [](const DistTensor& t, const Layout& to) {
        nb::gil_scoped_release release;
        return t.reshard(to);
      }, nb::arg("layout"))
      .def("describe", &DistTensor::describe);

  nb::class_<Communicator>(m, "Communicator", "Collectives among the members of one mesh axis (tessera/dist/communicator.h).")
      .def_prop_ro("backend", [](const Communicator& c) { return std::string(c.backend()); })
      .def_prop_ro("axis", &Communicator::axis)
      .def_prop_ro("members", &Communicator::members)
      .def(
          "allreduce",
          [](Communicator& c, std::size_t rank, const Tensor& x, const std::string& op, const std::string& algorithm) {
            const dist::Algorithm a = dist::parse_algorithm(algorithm);
            nb::gil_scoped_release release;
            return c.allreduce(rank, x, dist::parse_reduce_op(op), a);
          },
          nb::arg("rank"), nb::arg("x"), nb::arg("op") = "sum", nb::arg("algorithm") = "rank_order")
      .def(
          "all_gather",
          [](Communicator& c, std::size_t rank, const Tensor& x, std::int64_t dim) {
            nb::gil_scoped_release release;
            return c.all_gather(rank, x, dim);
          },
          nb::arg("rank"), nb::arg("x"), nb::arg("dim") = 0)
      .def(
          "reduce_scatter",
          [](Communicator& c, std::size_t rank, const Tensor& x, std::int64_t dim, const std::string& op,
             const std::string& algorithm) {
            const dist::Algorithm a = dist::parse_algorithm(algorithm);
            nb::gil_scoped_release release;
            return c.reduce_scatter(rank, x, dim, dist::parse_reduce_op(op), a);
          },
          nb::arg("rank"), nb::arg("x"), nb::arg("dim") = 0, nb::arg("op") = "sum", nb::arg("algorithm") = "rank_order")
      .def(
          "all_to_all",
          [](Communicator& c, std::size_t rank, const Tensor& x, std::int64_t split_dim, std::int64_t concat_dim) {
            nb::gil_scoped_release release;
            return c.all_to_all(rank, x, split_dim, concat_dim);
          },
          nb::arg("rank"), nb::arg("x"), nb::arg("split_dim") = 0, nb::arg("concat_dim") = 0)
      .def(
          "broadcast",
          [](Communicator& c, std::size_t rank, const Tensor& x, std::size_t root) {
            nb::gil_scoped_release release;
            return c.broadcast(rank, x, root);
          },
          nb::arg("rank"), nb::arg("x"), nb::arg("root") = 0)
      .def("fail", &Communicator::fail, nb::arg("rank"), nb::arg("why"))
      .def("completed", &Communicator::completed, nb::arg("rank"));

  m.def(
      "local_communicator",
      [](std::string axis, std::vector<std::string> members, std::optional<double> timeout) {
        return dist::make_local_communicator(std::move(axis), std::move(members),
                                             timeout ? *timeout : dist::collective_timeout_seconds());
      },
      nb::arg("axis"), nb::arg("members"), nb::arg("timeout") = nb::none());

  m.def(
      "nccl_communicator",
      [](std::string axis, std::vector<std::string> members, std::optional<double> timeout,
         std::optional<std::vector<int>> owners, int this_process, std::shared_ptr<Communicator> coordinator) {
        const double t = timeout ? *timeout : dist::collective_timeout_seconds();
        nb::gil_scoped_release release;  // ncclCommInitAll waits on every GPU
        if (owners) {
          return dist::make_nccl_communicator(std::move(axis), std::move(members), std::move(*owners), this_process,
                                              std::move(coordinator), t);
        }
        return dist::make_nccl_communicator(std::move(axis), std::move(members), t);
      },
      nb::arg("axis"), nb::arg("members"), nb::arg("timeout") = nb::none(), nb::arg("owners") = nb::none(),
      nb::arg("this_process") = 0, nb::arg("coordinator") = nb::none(),
      "A communicator of the nccl backend over GPUs of this process, or (owners=, coordinator=) over GPUs of "
      "several processes (tessera/dist/nccl.h).");
  m.def("nccl_available", &dist::nccl_available, "Whether libnccl loads.");
  m.def("nccl_unavailable_reason", &dist::nccl_unavailable_reason, "Why libnccl does not load (\"\" when it does).");

  // with _C.ShardScope(axis, comm, rank): the thread is that member for Graph IR collectives.
  struct PyShardScope {
    PyShardScope(std::string a, std::shared_ptr<Communicator> c, std::size_t r)
        : axis(std::move(a)), comm(std::move(c)), rank(r) {}
    std::string axis;
    std::shared_ptr<Communicator> comm;
    std::size_t rank;
    std::unique_ptr<dist::ShardScope> scope;
  };
  nb::class_<PyShardScope>(m, "ShardScope", "Makes the current thread a shard of a mesh axis (tessera/dist/shard_scope.h).")
      .def(nb::init<std::string, std::shared_ptr<Communicator>, std::size_t>(), nb::arg("axis"), nb::arg("comm"),
           nb::arg("rank"))
      .def("__enter__",
           [](PyShardScope& s) {
             s.scope = std::make_unique<dist::ShardScope>(s.axis, s.comm, s.rank);
             return &s;
           },
           nb::rv_policy::reference)
      .def("__exit__", [](PyShardScope& s, nb::args) {
        s.scope.reset();
        return false;
      });

  // with _C.ThreadLimit(n): this thread's CPU launches use at most n threads.
  struct PyThreadLimit {
    explicit PyThreadLimit(int n) : threads(n) {}
    int threads;
    std::unique_ptr<cpu::ScopedThreadLimit> limit;
  };
  nb::class_<PyThreadLimit>(m, "ThreadLimit", "Caps the CPU threads of this thread's launches (cpu_backend.h).")
      .def(nb::init<int>(), nb::arg("threads"))
      .def("__enter__",
           [](PyThreadLimit& t) {
             t.limit = std::make_unique<cpu::ScopedThreadLimit>(t.threads);
             return &t;
           },
           nb::rv_policy::reference)
      .def("__exit__", [](PyThreadLimit& t, nb::args) {
        t.limit.reset();
        return false;
      });

  m.def(
      "partition_mesh",
      [](const IRModule& module, const std::string& func, const Mesh& mesh, const std::vector<Layout>& args) {
        std::vector<ir::Sharding> shardings;
        for (std::size_t i = 0; i < args.size(); ++i) {
          shardings.push_back(dist::sharding_of(args[i], "argument #" + std::to_string(i)));
        }
        dist::MeshPartition p = dist::partition_mesh(*module.module, func, mesh, shardings);
        nb::list results;
        auto globals = ir::function_results(*module.module->lookup(func));
        for (std::size_t r = 0; r < p.results.size(); ++r) {
          const ir::Type& t = globals[r]->type();
          results.append(nb::make_tuple(*ir::static_sizes(t.shape), t.policy, dist::layout_of(p.results[r], mesh),
                                        ir::print_sharding(p.results[r])));
        }
        return nb::make_tuple(p.functions, p.function_of_rank, results);
      },
      nb::arg("module"), nb::arg("function"), nb::arg("mesh"), nb::arg("layouts"),
      "Partitions a traced function over a mesh: (per-shard function names, function of each rank, and per "
      "result (global shape, policy, layout, sharding text)).");
  m.def(
      "layout_sharding", [](const Layout& layout) { return ir::print_sharding(dist::sharding_of(layout, "the layout")); },
      nb::arg("layout"), "A layout's sharding text in Graph IR (\"shard[-, tp] partial(dp)\").");
  m.def("reduce_in_rank_order", [](const std::vector<Tensor>& xs, const std::string& op) {
    return dist::reduce_in_rank_order(xs, dist::parse_reduce_op(op));
  }, nb::arg("xs"), nb::arg("op") = "sum");

  // run_spmd(n, fn, comms): fn(rank) for every rank on its own thread; a
  // rank that raises fails its rank in every communicator at once (so peers
  // blocked in a collective raise instead of waiting). Returns each rank's
  // exception (None where it returned); the caller picks which to raise.
  m.def(
      "run_spmd",
      [](std::size_t n, nb::callable fn, std::vector<std::shared_ptr<Communicator>> comms) {
        std::vector<nb::object> errors(n);
        auto work = [&](std::size_t rank) {
          nb::gil_scoped_acquire acquire;
          try {
            fn(rank);
          } catch (nb::python_error& e) {
            errors[rank] = nb::borrow(e.value());
            std::string why;
            try {
              why = nb::cast<std::string>(nb::str(e.value()));
            } catch (...) {
              why = "an exception";
            }
            const std::string type = nb::cast<std::string>(nb::getattr(e.type(), "__name__"));
            for (const auto& c : comms) c->fail(rank, type + ": " + why);
          }
        };
        {
          nb::gil_scoped_release release;
          // `work` catches every Python error itself, so run_spmd sees none.
          dist::run_spmd(n, work, [](std::size_t, const std::string&) {});
        }
        nb::list out;
        for (auto& e : errors) out.append(e.is_valid() ? e : nb::none());
        return out;
      },
      nb::arg("n"), nb::arg("fn"), nb::arg("comms"));
}

}  // namespace tessera::python
