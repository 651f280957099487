// Python surface of compiled executables (tessera/schedule/executable.h):
// what @tessera.jit runs when TESSERA_BACKEND=compiled, and the Schedule IR,
// Tile IR and target text inspect_ir shows.
#include <nanobind/stl/map.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "ir_module.h"
#include "tessera/ir/text.h"
#include "tessera/runtime/profiler.h"
#include "tessera/schedule/executable.h"

namespace nb = nanobind;

namespace tessera::python {

void bind_schedule(nb::module_& m) {
  nb::class_<schedule::Executable>(m, "Executable", "A Graph IR function compiled through Schedule IR.")
      .def(
          "run",
          [](const schedule::Executable& e, const std::vector<Tensor>& args) {
            std::vector<Tensor> out;
            {
              nb::gil_scoped_release release;
              out = e.run(args);
            }
            return out;
          },
          nb::arg("args"))
      .def(
          "run_graph",
          [](const schedule::Executable& e, const std::vector<Tensor>& args) {
            std::vector<Tensor> out;
            {
              nb::gil_scoped_release release;
              out = e.run_graph(args);
            }
            return out;
          },
          nb::arg("args"),
          "run() through a CUDA graph built on the first call for these argument shapes and replayed, with new "
          "buffer addresses, on later calls (CUDA executables only).")
      .def_prop_ro("graphs", &schedule::Executable::graphs)
      .def_prop_ro("direct_graphs", &schedule::Executable::direct_graphs,
                   "How many of the graphs replay by setting their nodes, without walking the steps.")
      .def_prop_ro("run_plans", &schedule::Executable::run_plans,
                   "How many argument signatures run() replays from a recorded run plan, without walking the steps.")
      .def_prop_ro("plan_refusals", &schedule::Executable::plan_refusals,
                   "For each argument signature whose runs walk the steps, why it has no run plan.")
      .def("schedule_ir", &schedule::Executable::schedule_ir)
      .def("tile_ir", &schedule::Executable::tile_ir)
      .def("target", &schedule::Executable::target)
      .def("ptx", &schedule::Executable::ptx)
      .def_prop_ro("device", &schedule::Executable::device)
      .def_prop_ro("compile_seconds", &schedule::Executable::compile_seconds)
      .def_prop_ro("kernels", [](const schedule::Executable& e) {
        nb::list out;
        for (const auto& k : e.kernels()) {
          nb::dict d;
          d["name"] = k.name;
          d["family"] = k.family;
          d["variant"] = k.variant;
          d["cache_hit"] = k.cache_hit;
          d["compile_seconds"] = k.compile_seconds;
          out.append(d);
        }
        return out;
      });
  m.def(
      "compile_executable",
      [](const IRModule& module, const std::string& function, int num_threads, const std::string& device,
         const std::map<std::string, std::string>& variants) {
        schedule::ExecutableOptions options;
        options.num_threads = num_threads;
        options.device = device;
        options.variants = variants;
        return schedule::compile_executable(*module.module, function, options);
      },
      nb::arg("module"), nb::arg("function"), nb::arg("num_threads") = 0, nb::arg("device") = "cpu",
      nb::arg("variants") = std::map<std::string, std::string>{});
  m.def(
      "schedule_ir",
      [](const IRModule& module, const std::string& function, const std::map<std::string, std::string>& variants,
         const std::string& device) {
        // A CUDA executable's knobs are shown as it runs them; the CPU's
        // schedule stays the target-neutral one. Long constants (a
        // function's table, design 0030) print elided.
        const ir::PrintOptions shown{.elide_lists_over = 64};
        if (device == "cpu") {
          return ir::print_module(schedule::schedule_module(*module.module, function, variants), shown);
        }
        return ir::print_module(schedule::device_schedule_module(*module.module, function, variants, device), shown);
      },
      nb::arg("module"), nb::arg("function"), nb::arg("variants") = std::map<std::string, std::string>{},
      nb::arg("device") = "cpu");
  m.def("default_backend", &schedule::default_backend);
  // The profiler (tessera/runtime/profiler.h); tessera.profile wraps these.
  m.def("_profiler_start", &profiler::start);
  m.def("_profiler_stop", [] {
    nb::list out;
    for (const profiler::Record& r : profiler::stop()) {
      nb::dict d;
      d["kind"] = r.kind;
      d["name"] = r.name;
      d["function"] = r.function;
      d["ops"] = r.ops;
      d["family"] = r.family;
      d["device"] = r.device;
      d["start_us"] = r.start_us;
      d["duration_us"] = r.duration_us;
      d["bytes"] = r.bytes;
      d["flops"] = r.flops;
      d["cache_hit"] = r.cache_hit;
      out.append(d);
    }
    return out;
  });
  m.def("_peak_bandwidth_gbs", &profiler::peak_bandwidth_gbs, nb::arg("device"));
}

}  // namespace tessera::python
