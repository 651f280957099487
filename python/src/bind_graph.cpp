// Python surface of Graph IR construction, for @tessera.jit tracing.
//
// A GraphBuilder records one function: parameters, then ops in call order,
// each with the user's file and line so errors raised while tracing (shape,
// dtype, attribute) point at user code. Values are handed to Python as
// small integer ids; finish() returns a GraphFunction that prints, verifies,
// runs passes and executes on the reference executor.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <memory>

#include "bindings.h"
#include "ir_module.h"
#include "tensor_args.h"
#include "tessera/graph/executor.h"
#include "tessera/ir/builder.h"
#include "tessera/ir/pass.h"
#include "tessera/ir/text.h"
#include "tessera/ir/verifier.h"

namespace nb = nanobind;

namespace tessera::python {
namespace {

class GraphFunction {
 public:
  // The module may hold more functions than the traced one: those that `call` ops name.
  GraphFunction(std::shared_ptr<ir::Module> module, std::string name)
      : module_(std::move(module)), name_(std::move(name)) {}
  const ir::Operation& func() const { return *module_->lookup(name_); }
  std::string text(bool generic) const { return ir::print_module(*module_, {.generic = generic}); }
  void verify() const { ir::verify(*module_); }
  void run_passes(const std::vector<std::string>& names) {
    ir::PassManager pm;
    for (const auto& n : names) pm.add(n);
    pm.run(*module_);
  }
  IRModule module() const { return IRModule{module_}; }
  const std::string& name() const { return name_; }
  nb::object execute(const std::vector<Tensor>& args) const {
    auto results = graph::execute(*module_, func(), args);
    return nb::cast(results);
  }
  std::size_t num_ops() const { return ir::function_body(func()).ops().size(); }

 private:
  std::shared_ptr<ir::Module> module_;
  std::string name_;
};

class GraphBuilder {
 public:
  explicit GraphBuilder(std::string name) : module_(std::make_shared<ir::Module>()) {
    func_ = module_->add_function(ir::make_function(std::move(name)));
  }
  // A nested trace: a new function in an enclosing trace's module (autodiff).
  GraphBuilder(const IRModule& module, std::string name) : module_(module.module) {
    func_ = module_->add_function(ir::make_function(std::move(name)));
  }
  IRModule module() const { return IRModule{module_}; }
  const std::string& name() const { return ir::function_name(*func_); }

  // Appends a copy of function `callee` of this module, applied to `operands`, and describes its results.
  nb::list splice(const std::string& callee, const std::vector<std::size_t>& operands, const std::string& file,
                  int line) {
    const ir::Operation* target = module_->lookup(callee);
    if (target == nullptr) raise(ErrorCode::Internal, "splice: no function '" + callee + "' in the trace's module");
    std::vector<ir::Value*> values;
    for (auto id : operands) values.push_back(value(id));
    SourceLocation loc;
    loc.file = file;
    loc.line = line;
    loc.column = line > 0 ? 1 : 0;
    nb::list out;
    for (ir::Value* r : splice_function(ir::function_body(*func_), *target, values, loc)) {
      out.append(describe(remember(r)));
    }
    return out;
  }

  // Appends `call {callee}` (a function of this module) with extra attributes (autodiff's remat and
  // custom rule functions) and describes its results.
  nb::list call(const std::string& callee, const std::vector<std::size_t>& operands, nb::dict extra,
                const std::string& file, int line) {
    std::vector<ir::Value*> values;
    for (auto id : operands) values.push_back(value(id));
    SourceLocation loc;
    loc.file = file;
    loc.line = line;
    loc.column = line > 0 ? 1 : 0;
    nb::list out;
    for (ir::Value* r : call_function(ir::function_body(*func_), *module_, callee, values, extra, loc)) {
      out.append(describe(remember(r)));
    }
    return out;
  }

  // Ends a nested trace's function (its module stays with the enclosing trace).
  void finish_function(const std::vector<std::size_t>& results) {
    std::vector<ir::Value*> values;
    for (auto id : results) values.push_back(value(id));
    ir::OpBuilder b(ir::function_body(*func_));
    b.create("return", std::move(values));
    ir::verify_function(*func_);
  }

  nb::tuple add_argument(nb::handle shape, nb::handle policy, std::string name) {
    ir::Value* v = ir::function_body(*func_).add_argument(
        ir::Type::tensor(shape_from_python(shape), policy_argument(policy, "argument dtype")), std::move(name));
    return describe(remember(v));
  }

  nb::list add_op(const std::string& op_name, const std::vector<std::size_t>& operands, nb::dict attrs,
                  const std::string& file, int line, const std::string& line_text) {
    SourceLocation loc;
    loc.file = file;
    loc.line = line;
    loc.column = line > 0 ? 1 : 0;
    loc.line_text = line_text;
    // Point the caret at the first non-blank character of the line.
    auto first = line_text.find_first_not_of(" \t");
    if (first != std::string::npos) loc.column = static_cast<int>(first) + 1;
    const ir::OpDef* def = &ir::Registry::global().get(op_name, loc);
    ir::AttrMap converted;
    try {
      converted = attrs_from_python(*def, attrs);
    } catch (const Error& e) {
      raise(e.code(), e.message(), loc);
    }
    std::vector<ir::Value*> values;
    for (auto id : operands) values.push_back(value(id));
    ir::OpBuilder b(ir::function_body(*func_));
    ir::Operation* op = b.create(*def, std::move(values), std::move(converted), loc);
    nb::list out;
    for (ir::Value* r : op->results()) out.append(describe(remember(r)));
    return out;
  }

  // A constant holding `tensor`'s values exactly. A device tensor captured by
  // a traced function is read back once here; the executable places its
  // constants on the device it runs on.
  nb::tuple add_constant(const Tensor& tensor, const std::string& file, int line) {
    const Tensor host = tensor.device() == "cpu" ? tensor : tensor.to("cpu");
    SourceLocation loc;
    loc.file = file;
    loc.line = line;
    loc.column = line > 0 ? 1 : 0;
    ir::OpBuilder b(ir::function_body(*func_));
    auto constant = [&](std::vector<double> values, const NumericsPolicy& policy) {
      return b.create("graph.constant", {},
                      ir::AttrMap{{"value", std::move(values)}, {"shape", ir::fixed_shape(tensor.shape())}, {"policy", policy}},
                      loc);
    };
    if (is_complex(host.dtype())) {
      // A constant holds real values: a complex tensor (a closure's, say)
      // becomes graph.complex of two constants, its parts, exactly.
      std::vector<double> re, im;
      for (const std::complex<double>& z : host.to_complex_values()) {
        re.push_back(z.real());
        im.push_back(z.imag());
      }
      const NumericsPolicy part = default_policy(host.dtype() == DType::complex64 ? DType::fp32 : DType::fp64);
      ir::Value* parts[] = {constant(std::move(re), part)->result(0), constant(std::move(im), part)->result(0)};
      ir::Operation* op = b.create("graph.complex", {parts[0], parts[1]}, {}, loc);
      return describe(remember(op->result(0)));
    }
    return describe(remember(constant(host.to_values(), tensor.policy())->result(0)));
  }

  GraphFunction finish(const std::vector<std::size_t>& results) {
    std::vector<ir::Value*> values;
    for (auto id : results) values.push_back(value(id));
    ir::OpBuilder b(ir::function_body(*func_));
    b.create("return", std::move(values));
    ir::verify(*module_);
    return GraphFunction(module_, ir::function_name(*func_));
  }

 private:
  std::size_t remember(ir::Value* v) {
    values_.push_back(v);
    return values_.size() - 1;
  }
  ir::Value* value(std::size_t id) const {
    if (id >= values_.size()) raise(ErrorCode::Internal, "unknown traced value id");
    return values_[id];
  }
  nb::tuple describe(std::size_t id) const {
    const ir::Type& t = values_[id]->type();
    return nb::make_tuple(id, shape_to_python(t.shape), t.policy);
  }

  std::shared_ptr<ir::Module> module_;
  ir::Operation* func_;
  std::vector<ir::Value*> values_;
};

}  // namespace

void bind_graph(nb::module_& m) {
  nb::class_<GraphFunction>(m, "GraphFunction", "A traced Graph IR function.")
      .def("text", &GraphFunction::text, nb::arg("generic") = false)
      .def("verify", &GraphFunction::verify)
      .def(
          "function_text",
          [](const GraphFunction& g, const std::string& name) {
            const ir::Operation* f = g.module().module->lookup(name);
            if (f == nullptr) raise(ErrorCode::ArgumentInvalid, "no function '" + name + "' in the module");
            return ir::print_function(*f);
          },
          nb::arg("name"))
      .def(
          "op_sites",
          [](const GraphFunction& g, const std::string& name) {
            // (op name, mesh axis or "", axis size or 0, algorithm or "") of
            // each op of the function's body, in order: what the Mapper is asked about.
            ir::Operation* f = g.module().module->lookup(name);
            if (f == nullptr) raise(ErrorCode::ArgumentInvalid, "no function '" + name + "' in the module");
            nb::list out;
            for (const auto& op : ir::function_body(*f).ops()) {
              const ir::AttrMap& a = op->attrs();
              const bool on_axis = a.has("axis") && a.has("axis_size");
              out.append(nb::make_tuple(std::string(op->name()), on_axis ? a.get_string("axis") : std::string(),
                                        on_axis ? a.get_int("axis_size") : std::int64_t{0},
                                        a.has("algorithm") ? a.get_string("algorithm") : std::string()));
            }
            return out;
          },
          nb::arg("name"))
      .def(
          "set_op_attr",
          [](GraphFunction& g, const std::string& name, std::size_t index, const std::string& attr,
             const std::string& value) {
            // Sets a string attribute of the index-th op of the body (the
            // Mapper's collective algorithm), then re-verifies the module.
            ir::Operation* f = g.module().module->lookup(name);
            if (f == nullptr) raise(ErrorCode::ArgumentInvalid, "no function '" + name + "' in the module");
            auto& ops = ir::function_body(*f).ops();
            if (index >= ops.size()) raise(ErrorCode::ArgumentInvalid, "op index out of range");
            ir::Operation& op = **std::next(ops.begin(), static_cast<std::ptrdiff_t>(index));
            op.attrs().set(attr, value);
            ir::verify(*g.module().module);
          },
          nb::arg("name"), nb::arg("index"), nb::arg("attr"), nb::arg("value"))
      .def("run_passes", &GraphFunction::run_passes, nb::arg("names"))
      .def("execute", &GraphFunction::execute, nb::arg("args"))
      .def_prop_ro("num_ops", &GraphFunction::num_ops)
      .def_prop_ro("module", &GraphFunction::module)
      .def_prop_ro("name", &GraphFunction::name);
  nb::class_<GraphBuilder>(m, "GraphBuilder", "Records a Graph IR function while tracing.")
      .def(nb::init<std::string>(), nb::arg("name"))
      .def(nb::init<const IRModule&, std::string>(), nb::arg("module"), nb::arg("name"))
      .def_prop_ro("module", &GraphBuilder::module)
      .def_prop_ro("name", &GraphBuilder::name)
      .def("splice", &GraphBuilder::splice, nb::arg("callee"), nb::arg("operands"), nb::arg("file") = "",
           nb::arg("line") = 0)
      .def("call", &GraphBuilder::call, nb::arg("callee"), nb::arg("operands"), nb::arg("extra"), nb::arg("file") = "",
           nb::arg("line") = 0)
      .def("finish_function", &GraphBuilder::finish_function, nb::arg("results"))
      .def("add_argument", &GraphBuilder::add_argument, nb::arg("shape"), nb::arg("policy"), nb::arg("name"))
      .def("add_op", &GraphBuilder::add_op, nb::arg("op_name"), nb::arg("operands"), nb::arg("attrs"),
           nb::arg("file") = "", nb::arg("line") = 0, nb::arg("line_text") = "")
      .def("add_constant", &GraphBuilder::add_constant, nb::arg("tensor"), nb::arg("file") = "", nb::arg("line") = 0)
      .def("finish", &GraphBuilder::finish, nb::arg("results"));
  m.def("parse_ir", [](const std::string& text, const std::string& file) {
    return ir::print_module(ir::parse_module(text, file));
  });
  m.def("op_names", [] {
    std::vector<std::string> names;
    for (const ir::OpDef* d : ir::Registry::global().all()) names.push_back(d->name);
    return names;
  });
  m.def("op_effect",
        [](const std::string& name) { return std::string(ir::effect_name(ir::Registry::global().get(name).effect)); });
}

nb::list shape_to_python(const ir::Shape& shape) {
  nb::list out;
  for (const auto& d : shape) {
    if (d.is_symbolic()) {
      out.append(nb::str(d.symbol.c_str()));
    } else {
      out.append(nb::int_(d.size));
    }
  }
  return out;
}

}  // namespace tessera::python
