// Python surface of kernels (tessera._C.Kernel): parsing from .tsr files or
// Python function source, jit specialization, launch (on the CPU, or on
// cuda:N when the tensors live there), autotune and inspect_ir. Arguments
// arrive already converted by python/tessera/kernel.py (tessera.Tensor, bool,
// int or float); this file only moves them into C++, releases the GIL while
// kernels run, and calls back into Python for grid functions and autotune
// progress.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "tessera/backends/cuda_tile/toolchain.h"
#include "tessera/runtime/kernel.h"
#include "tessera/support/error.h"

namespace nb = nanobind;

namespace tessera::python {
namespace {

nb::dict constants_to_python(const KernelConstants& constants) {
  nb::dict out;
  for (const auto& [name, value] : constants) out[name.c_str()] = value;
  return out;
}

KernelConstants constants_from_python(const nb::dict& d) {
  KernelConstants out;
  for (auto [key, value] : d) {
    const std::string name = nb::cast<std::string>(nb::str(key));
    if (nb::isinstance<nb::bool_>(value) || !nb::isinstance<nb::int_>(value)) {
      raise(ErrorCode::ArgumentInvalid,
            "jit(" + name + "=...): compile-time values are integers, got " + nb::cast<std::string>(nb::repr(value)));
    }
    out[name] = nb::cast<std::int64_t>(value);
  }
  return out;
}

std::vector<cpu::KernelArg> args_from_python(const Kernel& k, const nb::list& args) {
  std::vector<cpu::KernelArg> out;
  out.reserve(args.size());
  std::size_t i = 0;
  for (nb::handle a : args) {
    if (nb::isinstance<Tensor>(a)) {
      out.emplace_back(nb::cast<Tensor>(a));
    } else if (nb::isinstance<nb::bool_>(a)) {
      out.emplace_back(nb::cast<bool>(a));
    } else if (nb::isinstance<nb::int_>(a)) {
      out.emplace_back(nb::cast<std::int64_t>(a));
    } else if (nb::isinstance<nb::float_>(a)) {
      out.emplace_back(nb::cast<double>(a));
    } else {
      const std::string param = i < k.decl().params.size() ? " ('" + k.decl().params[i].name + "')" : "";
      raise(ErrorCode::ArgumentInvalid, "kernel '" + k.name() + "' argument " + std::to_string(i) + param +
                                            " must be a tessera.Tensor, a numpy array or a Python number, got " +
                                            nb::cast<std::string>(nb::str(nb::handle(a.type().ptr()))));
    }
    ++i;
  }
  return out;
}

const char* event_kind(AutotuneEvent::Kind kind) {
  switch (kind) {
    case AutotuneEvent::Kind::start: return "start";
    case AutotuneEvent::Kind::measured: return "measured";
    case AutotuneEvent::Kind::failed: return "failed";
    case AutotuneEvent::Kind::chosen: return "chosen";
    case AutotuneEvent::Kind::cached: return "cached";
  }
  return "unknown";
}

// Grid: None (the default extent), an int, or a callable of the constants dict.
Grid grid_from_python(nb::handle grid) {
  if (grid.is_none()) return std::int64_t{-1};
  if (nb::isinstance<nb::int_>(grid) && !nb::isinstance<nb::bool_>(grid)) return nb::cast<std::int64_t>(grid);
  if (PyCallable_Check(grid.ptr()) != 0) {
    nb::object f = nb::borrow(grid);
    return GridFunction([f](const KernelConstants& c) -> std::int64_t {
      nb::gil_scoped_acquire gil;
      nb::object r = f(constants_to_python(c));
      if (!nb::isinstance<nb::int_>(r) || nb::isinstance<nb::bool_>(r)) {
        raise(ErrorCode::ArgumentInvalid,
              "the grid function must return an int (the number of groups), got " + nb::cast<std::string>(nb::repr(r)));
      }
      return nb::cast<std::int64_t>(r);
    });
  }
  raise(ErrorCode::ArgumentInvalid,
        "a kernel grid is the number of groups (an int) or a function of the "
        "compile-time constants returning one, got " +
            nb::cast<std::string>(nb::repr(grid)));
}

KernelLaunchOptions options_from_python(nb::handle progress, int num_threads) {
  KernelLaunchOptions options;
  options.cpu.num_threads = num_threads;
  if (!progress.is_none()) {
    nb::object f = nb::borrow(progress);
    options.progress = [f](const AutotuneEvent& e) {
      nb::gil_scoped_acquire gil;
      nb::dict d;
      d["kind"] = event_kind(e.kind);
      d["kernel"] = e.kernel;
      d["index"] = e.index;
      d["total"] = e.total;
      d["constants"] = constants_to_python(e.constants);
      d["median_seconds"] = e.median_seconds;
      d["compile_seconds"] = e.compile_seconds;
      d["message"] = e.message;
      d["text"] = e.describe();
      f(d);
    };
  }
  return options;
}

nb::list params_to_python(const Kernel& k) {
  nb::list out;
  for (const frontend::KernelParam& p : k.decl().params) {
    nb::list dims;
    for (const frontend::DimSpec& d : p.dims) dims.append(d.str());
    nb::dict entry;
    entry["name"] = p.name;
    entry["buffer"] = p.is_buffer;
    entry["mut"] = p.is_mut;
    entry["dtype"] = dtype_object(p.dtype);
    entry["dims"] = dims;
    out.append(entry);
  }
  return out;
}

frontend::SourceDialect dialect_named(const std::string& name) {
  if (name == "tsr") return frontend::SourceDialect::tsr;
  if (name == "python") return frontend::SourceDialect::python;
  raise(ErrorCode::ArgumentInvalid, "kernel source dialect is 'tsr' or 'python', got '" + name + "'");
}

}  // namespace

void bind_kernel(nb::module_& m) {
  nb::class_<Kernel>(m, "Kernel", "A kernel of the kernel language, with the compile-time constants fixed so far.")
      .def_prop_ro("name", &Kernel::name)
      .def_prop_ro("constants", [](const Kernel& k) { return constants_to_python(k.constants()); })
      .def_prop_ro("tuned_names", &Kernel::tuned_names)
      .def_prop_ro("params", &params_to_python)
      .def_prop_ro("group_shape", [](const Kernel& k) { return k.decl().group_shape; })
      .def_prop_ro("shape_symbols", [](const Kernel& k) { return k.decl().shape_symbols; })
      .def_prop_ro("target", [](const Kernel& k) { return k.decl().target.empty() ? "cuda" : k.decl().target; })
      .def_prop_ro("autotune_space",
                   [](const Kernel& k) {
                     nb::dict out;
                     for (const auto& [name, values] : k.decl().autotune_space) out[name.c_str()] = nb::cast(values);
                     return out;
                   })
      .def_prop_ro("location",
                   [](const Kernel& k) {
                     const SourceLocation& l = k.decl().location;
                     return nb::make_tuple(l.file, l.line);
                   })
      .def("jit", [](const Kernel& k, const nb::dict& constants) { return k.jit(constants_from_python(constants)); })
      .def(
          "launch",
          [](const Kernel& k, nb::handle grid, const nb::list& args, nb::handle progress, int num_threads,
             const std::string& nvidia_target) {
            Grid g = grid_from_python(grid);
            std::vector<cpu::KernelArg> converted = args_from_python(k, args);
            KernelLaunchOptions options = options_from_python(progress, num_threads);
            options.nvidia_target = nvidia_target;  // "cuda" or "cuda_tile"
            nb::gil_scoped_release release;
            k.launch(g, std::move(converted), options);
          },
          nb::arg("grid").none(), nb::arg("args"), nb::arg("progress").none(), nb::arg("num_threads") = 0,
          nb::arg("nvidia_target") = "")
      .def(
          "autotune",
          [](const Kernel& k, nb::handle grid, const nb::list& args, nb::handle progress, int num_threads) {
            Grid g = grid_from_python(grid);
            std::vector<cpu::KernelArg> converted = args_from_python(k, args);
            KernelLaunchOptions options = options_from_python(progress, num_threads);
            KernelConstants chosen;
            {
              nb::gil_scoped_release release;
              chosen = k.autotune(g, converted, options);
            }
            return constants_to_python(chosen);
          },
          nb::arg("grid").none(), nb::arg("args"), nb::arg("progress").none(), nb::arg("num_threads") = 0)
      .def(
          "inspect_ir",
          [](const Kernel& k, const std::string& level, const std::string& target, const std::string& arch,
             const std::string& nvidia_target) {
            KernelLaunchOptions options;
            options.target = target;                // "" = where the last launch ran
            options.arch = arch;                    // for "ptx"
            options.nvidia_target = nvidia_target;  // the kernel's NVIDIA target
            nb::gil_scoped_release release;
            return k.inspect_ir(level, options);
          },
          nb::arg("level"), nb::arg("target") = "", nb::arg("arch") = "", nb::arg("nvidia_target") = "");
  m.def(
      "_tileiras",
      [] {
        const cuda_tile::Toolchain& t = cuda_tile::toolchain();
        return nb::make_tuple(t.found && t.reason.empty(), t.found ? t.version : std::string(), t.reason);
      },
      "(usable, version, why not): the tileiras the cuda_tile target runs (tests skip without it).");
  m.def("load_kernels", &load_kernels, nb::arg("path"), "The kernels of a .tsr file, in order of definition.");
  m.def(
      "kernels_from_source",
      [](const std::string& source, const std::string& file, int first_line, const std::string& dialect,
         int column_offset) {
        return kernels_from_source(source, file, first_line, dialect_named(dialect), column_offset);
      },
      nb::arg("source"), nb::arg("file"), nb::arg("first_line") = 1, nb::arg("dialect") = "tsr",
      nb::arg("column_offset") = 0);
}

}  // namespace tessera::python
