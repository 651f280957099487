// Python surface of autodiff (tessera.autodiff): the Graph IR transforms on
// the functions of a traced module, splicing a transformed function into an
// enclosing trace, and custom rules for named ops written in Python.
//
// The Python package traces a user function into a function of an IRModule
// (python/src/ir_module.h), asks for its VJP/JVP/value-and-grad here, and
// either executes the new function on the reference executor (called on
// tensors) or splices it into the enclosing trace (called on traced values).
// A rule registered from Python is a callable the C++ transform invokes with
// a RuleBuilder: the callable records tessera.ops on traced values into the
// function the transform is building.
#include <nanobind/stl/function.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "bindings.h"
#include "ir_module.h"
#include "tensor_args.h"
#include "tessera/autodiff/autodiff.h"
#include "tessera/graph/executor.h"
#include "tessera/ir/builder.h"
#include "tessera/ir/pass.h"
#include "tessera/ir/text.h"
#include "tessera/ir/verifier.h"
#include "tessera/schedule/eager.h"

namespace nb = nanobind;

namespace tessera::python {

std::vector<ir::Value*> splice_function(ir::Block& body, const ir::Operation& callee,
                                        const std::vector<ir::Value*>& args, const SourceLocation& location) {
  ir::Block& callee_body = ir::function_body(callee);
  if (args.size() != callee_body.num_arguments()) {
    raise(ErrorCode::Internal, "splice: @" + ir::function_name(callee) + " takes " +
                                   std::to_string(callee_body.num_arguments()) + " arguments, got " +
                                   std::to_string(args.size()));
  }
  ir::OpBuilder b(body);
  // Tangents and cotangents may arrive at another policy than the parameter's
  // (an fp32 cotangent for a bf16 result, say): convert them explicitly.
  std::vector<ir::Value*> converted;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const ir::Type& want = callee_body.argument(i)->type();
    ir::Value* v = args[i];
    if (!(v->type().policy == want.policy)) {
      v = b.create("graph.cast", {v}, ir::AttrMap{{"policy", want.policy}}, location)->result(0);
    }
    converted.push_back(v);
  }
  return autodiff::inline_function(b, callee, converted);
}

std::vector<ir::Value*> call_function(ir::Block& body, const ir::Module& module, const std::string& callee,
                                      const std::vector<ir::Value*>& args, nb::dict extra,
                                      const SourceLocation& location) {
  const ir::Operation* target = module.lookup(callee);
  if (target == nullptr) raise(ErrorCode::Internal, "call: no function '" + callee + "' in the trace's module");
  ir::AttrMap attrs;
  for (auto [key, value] : extra) {
    std::string name = nb::cast<std::string>(key);
    if (nb::isinstance<nb::bool_>(value)) {
      attrs.set(name, nb::cast<bool>(value));
    } else {
      attrs.set(name, nb::cast<std::string>(value));
    }
  }
  ir::OpBuilder b(body);
  return autodiff::create_call(b, *target, args, std::move(attrs), location)->results();
}

namespace {

// Python's list of result flags as the executors' span of bools (a
// std::vector<bool> has no contiguous bools to point at).
class ResultMask {
 public:
  explicit ResultMask(const std::vector<bool>& wanted) : n_(wanted.size()), flags_(new bool[wanted.size() + 1]) {
    for (std::size_t k = 0; k < n_; ++k) flags_[k] = wanted[k];
  }
  std::span<const bool> span() const { return {flags_.get(), n_}; }

 private:
  std::size_t n_;
  std::unique_ptr<bool[]> flags_;
};

nb::object attribute_to_python(const ir::Attribute& a) {
  return std::visit(
      [](const auto& v) -> nb::object {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, ir::Shape>) {
          return nb::tuple(shape_to_python(v));
        } else {
          return nb::cast(v);
        }
      },
      a);
}

nb::dict attrs_to_python(const ir::AttrMap& attrs) {
  nb::dict out;
  for (const auto& [name, value] : attrs.items()) out[name.c_str()] = attribute_to_python(value);
  return out;
}

ir::Module& mod(const IRModule& m) {
  return *m.module;
}

const ir::Operation& function(const IRModule& m, const std::string& name) {
  const ir::Operation* f = m.module->lookup(name);
  if (f == nullptr) raise(ErrorCode::Internal, "autodiff: no function '" + name + "' in the traced module");
  return *f;
}

// The Python transforms check the word first; this names it again for direct callers.
autodiff::TangentPrecision tangent_precision(const std::string& word) {
  if (word == "full") return autodiff::TangentPrecision::full;
  if (word == "storage") return autodiff::TangentPrecision::storage;
  raise(ErrorCode::ArgumentInvalid, "precision must be 'full' or 'storage', got '" + word + "'");
}

nb::list types_to_python(const std::vector<ir::Value*>& values) {
  nb::list out;
  for (ir::Value* v : values) out.append(nb::make_tuple(shape_to_python(v->type().shape), v->type().policy));
  return out;
}

// (parameter types, result types) of a function, each as (dims, policy).
nb::tuple signature(const IRModule& m, const std::string& name) {
  const ir::Operation& f = function(m, name);
  ir::Block& body = ir::function_body(f);
  std::vector<ir::Value*> params;
  for (std::size_t i = 0; i < body.num_arguments(); ++i) params.push_back(body.argument(i));
  return nb::make_tuple(types_to_python(params), types_to_python(ir::function_results(f)));
}

// Every op name in a function's body, in order (tests and the benchmark count them).
std::vector<std::string> op_names_of(const IRModule& m, const std::string& name) {
  std::vector<std::string> out;
  for (const auto& op : ir::function_body(function(m, name)).ops()) out.emplace_back(op->name());
  return out;
}

// The function names that ops anywhere in the module refer to through string attributes
// (`call`'s callee and its custom rule functions).
std::set<std::string> referenced_functions(const ir::Module& module) {
  std::set<std::string> names;
  for (const auto& f : module.functions()) {
    for (const auto& op : ir::function_body(*f).ops()) {
      for (const auto& [attr, value] : op->attrs().items()) {
        if (const auto* s = std::get_if<std::string>(&value)) {
          if (module.lookup(*s) != nullptr) names.insert(*s);
        }
      }
    }
  }
  return names;
}

// Removes the named functions that nothing refers to any more (the temporary
// functions of a transform once spliced); returns the names removed.
std::vector<std::string> drop_unreferenced(const IRModule& m, const std::vector<std::string>& names) {
  std::vector<std::string> dropped;
  // Dropping one function can free another (a VJP function that called a primal), so repeat.
  bool changed = true;
  while (changed) {
    changed = false;
    auto refs = referenced_functions(*m.module);
    auto& fs = m.module->functions();
    for (auto it = fs.begin(); it != fs.end(); ++it) {
      const std::string& n = ir::function_name(**it);
      if (std::find(names.begin(), names.end(), n) == names.end() || refs.contains(n)) continue;
      dropped.push_back(n);
      fs.erase(it);
      changed = true;
      break;
    }
  }
  return dropped;
}

std::string new_function_name(const IRModule& m, const std::string& base) {
  if (m.module->lookup(base) == nullptr) return base;
  for (int i = 1;; ++i) {
    std::string candidate = base + "_" + std::to_string(i);
    if (m.module->lookup(candidate) == nullptr) return candidate;
  }
}

// Records ops at a rule's insertion point while a Python rule runs; values are
// small integer ids as in GraphBuilder. Valid only during the callback.
class RuleBuilder {
 public:
  RuleBuilder(ir::OpBuilder& builder, SourceLocation location) : builder_(&builder), location_(std::move(location)) {}

  std::size_t remember(ir::Value* v) {
    values_.push_back(v);
    return values_.size() - 1;
  }
  ir::Value* value(std::size_t id) const {
    if (builder_ == nullptr) {
      raise(ErrorCode::Internal, "a custom autodiff rule's traced values were used after the rule returned");
    }
    if (id >= values_.size()) raise(ErrorCode::Internal, "unknown traced value id in a custom rule");
    return values_[id];
  }
  nb::tuple describe(std::size_t id) const {
    const ir::Type& t = values_[id]->type();
    return nb::make_tuple(id, shape_to_python(t.shape), t.policy);
  }
  void close() { builder_ = nullptr; }

  nb::list add_op(const std::string& op_name, const std::vector<std::size_t>& operands, nb::dict attrs,
                  const std::string& file, int line, const std::string& line_text) {
    SourceLocation loc = located(file, line, line_text);
    const ir::OpDef* def = &ir::Registry::global().get(op_name, loc);
    ir::AttrMap converted;
    try {
      converted = attrs_from_python(*def, attrs);
    } catch (const Error& e) {
      raise(e.code(), e.message(), loc);
    }
    std::vector<ir::Value*> values;
    for (auto id : operands) values.push_back(value(id));
    ir::Operation* op = builder_->create(*def, std::move(values), std::move(converted), loc);
    nb::list out;
    for (ir::Value* r : op->results()) out.append(describe(remember(r)));
    return out;
  }

  nb::tuple add_constant(const Tensor& tensor, const std::string& file, int line) {
    if (builder_ == nullptr) raise(ErrorCode::Internal, "a custom autodiff rule recorded an op after returning");
    auto values = tensor.to_values();
    ir::Operation* op = builder_->create("graph.constant", {},
                                         ir::AttrMap{{"value", std::vector<double>(values.begin(), values.end())},
                                                     {"shape", ir::fixed_shape(tensor.shape())},
                                                     {"policy", tensor.policy()}},
                                         located(file, line, ""));
    return describe(remember(op->result(0)));
  }

 private:
  SourceLocation located(const std::string& file, int line, const std::string& line_text) const {
    if (file.empty()) return location_;
    SourceLocation loc;
    loc.file = file;
    loc.line = line;
    loc.column = line > 0 ? 1 : 0;
    loc.line_text = line_text;
    return loc;
  }

  ir::OpBuilder* builder_;
  SourceLocation location_;
  std::vector<ir::Value*> values_;
};

// Calls a Python rule: fn(builder, operands, results, seeds, attrs) -> ids (or None for zero), where
// seeds are the result cotangents (VJP) or the operand tangents (JVP), ids or None for zero. Returns
// one value per operand (VJP) or per result (JVP).
std::vector<ir::Value*> call_python_rule(PyObject* fn, ir::OpBuilder& builder, const ir::Operation& op,
                                         const std::vector<ir::Value*>& seeds, const std::vector<ir::Value*>& like,
                                         const char* kind) {
  nb::gil_scoped_acquire gil;
  RuleBuilder rb(builder, op.location());
  auto ids = [&](const std::vector<ir::Value*>& vs) {
    nb::list out;
    for (ir::Value* v : vs) out.append(v == nullptr ? nb::none() : nb::object(rb.describe(rb.remember(v))));
    return out;
  };
  nb::list operands = ids(op.operands());
  nb::list results = ids(op.results());
  nb::list seed_list = ids(seeds);
  nb::object out;
  std::vector<ir::Value*> values;
  try {
    out = nb::borrow<nb::object>(nb::handle(fn))(nb::cast(&rb, nb::rv_policy::reference), operands, results, seed_list,
                                                 attrs_to_python(op.attrs()));
    for (nb::handle h : out) values.push_back(h.is_none() ? nullptr : rb.value(nb::cast<std::size_t>(h)));
  } catch (...) {
    rb.close();
    throw;
  }
  rb.close();
  std::string where =
      "the " + std::string(kind) + " rule registered from Python for op '" + std::string(op.name()) + "'";
  // Empty means all zero; otherwise one per slot. The engine fits each value to its slot's tangent type.
  if (!values.empty() && values.size() != like.size()) {
    raise(ErrorCode::ArgumentInvalid, where + " returned " + std::to_string(values.size()) +
                                          " values; it must return " + std::to_string(like.size()) + " (one per " +
                                          (std::string(kind) == "VJP" ? "operand" : "result") + ", None for zero)");
  }
  return values;
}

// Rules hold their Python callables for the life of the process (rules are global, like op definitions).
PyObject* keep(nb::callable fn) {
  PyObject* p = fn.ptr();
  Py_INCREF(p);
  return p;
}

}  // namespace

void bind_autodiff(nb::module_& m) {
  nb::class_<IRModule>(m, "IRModule", "A Graph IR module holding traced functions and their transforms.")
      .def_prop_ro("key", [](const IRModule& self) { return reinterpret_cast<std::uintptr_t>(self.module.get()); })
      .def(
          "text", [](const IRModule& self, bool generic) { return ir::print_module(mod(self), {.generic = generic}); },
          nb::arg("generic") = false)
      .def("function_names",
           [](const IRModule& self) {
             std::vector<std::string> out;
             for (const auto& f : mod(self).functions()) out.push_back(ir::function_name(*f));
             return out;
           })
      .def("verify", [](const IRModule& self) { ir::verify(mod(self)); })
      .def("run_passes",
           [](const IRModule& self, const std::vector<std::string>& names) {
             ir::PassManager pm;
             for (const auto& n : names) pm.add(n);
             pm.run(mod(self));
           })
      .def("signature", &signature, nb::arg("name"))
      .def("op_names", &op_names_of, nb::arg("name"))
      .def("new_name", &new_function_name, nb::arg("base"))
      .def("drop_unreferenced", &drop_unreferenced, nb::arg("names"))
      .def(
          "execute",
          [](const IRModule& self, const std::string& name, const std::vector<Tensor>& args,
             const std::vector<bool>& wanted) {
            const ResultMask mask(wanted);
            return nb::cast(graph::execute(mod(self), function(self, name), args, nullptr, mask.span()));
          },
          nb::arg("name"), nb::arg("args"), nb::arg("wanted") = std::vector<bool>{})
      .def(
          "execute_eager",
          [](const IRModule& self, const std::string& name, const std::vector<Tensor>& args,
             const std::vector<bool>& wanted) {
            std::vector<std::string> no_kernel;
            const ResultMask mask(wanted);
            auto results = schedule::execute_eager(mod(self), function(self, name), args, no_kernel, mask.span());
            return nb::make_tuple(nb::cast(results), nb::cast(no_kernel));
          },
          nb::arg("name"), nb::arg("args"), nb::arg("wanted") = std::vector<bool>{})
      .def(
          "execute_with_stats",
          [](const IRModule& self, const std::string& name, const std::vector<Tensor>& args) {
            graph::ExecutionStats stats;
            auto results = graph::execute(mod(self), function(self, name), args, &stats);
            return nb::make_tuple(nb::cast(results), stats.peak_live_bytes, stats.ops_executed);
          },
          nb::arg("name"), nb::arg("args"))
      .def(
          "vjp",
          [](const IRModule& self, const std::string& name, const std::vector<int>& wrt, const std::string& new_name,
             const std::string& precision) {
            return ir::function_name(
                autodiff::vjp_function(mod(self), function(self, name), wrt, new_name, tangent_precision(precision)));
          },
          nb::arg("name"), nb::arg("wrt"), nb::arg("new_name"), nb::arg("precision") = "full")
      .def(
          "jvp",
          [](const IRModule& self, const std::string& name, const std::string& new_name) {
            return ir::function_name(autodiff::jvp_function(mod(self), function(self, name), new_name));
          },
          nb::arg("name"), nb::arg("new_name"))
      .def(
          "value_and_grad",
          [](const IRModule& self, const std::string& name, const std::vector<int>& wrt, const std::string& new_name,
             const std::string& precision) {
            return ir::function_name(autodiff::value_and_grad_function(mod(self), function(self, name), wrt, new_name,
                                                                       tangent_precision(precision)));
          },
          nb::arg("name"), nb::arg("wrt"), nb::arg("new_name"), nb::arg("precision") = "full");

  nb::class_<RuleBuilder>(m, "RuleBuilder", "Records a custom autodiff rule's ops (valid during the rule only).")
      .def("add_op", &RuleBuilder::add_op, nb::arg("op_name"), nb::arg("operands"), nb::arg("attrs"),
           nb::arg("file") = "", nb::arg("line") = 0, nb::arg("line_text") = "")
      .def("add_constant", &RuleBuilder::add_constant, nb::arg("tensor"), nb::arg("file") = "", nb::arg("line") = 0);

  m.def(
      "register_vjp",
      [](const std::string& op_name, nb::callable fn) {
        ir::Registry::global().get(op_name);  // an unknown op name fails here, with "did you mean"
        PyObject* held = keep(std::move(fn));
        autodiff::register_vjp(
            op_name, [held](autodiff::RuleContext& ctx, ir::Operation& op, const std::vector<ir::Value*>& cotangents) {
              return call_python_rule(held, ctx.builder, op, cotangents, op.operands(), "VJP");
            });
      },
      nb::arg("op_name"), nb::arg("fn"));
  m.def(
      "register_jvp",
      [](const std::string& op_name, nb::callable fn) {
        ir::Registry::global().get(op_name);
        PyObject* held = keep(std::move(fn));
        autodiff::register_jvp(
            op_name, [held](autodiff::RuleContext& ctx, ir::Operation& op, const std::vector<ir::Value*>& tangents) {
              return call_python_rule(held, ctx.builder, op, tangents, op.results(), "JVP");
            });
      },
      nb::arg("op_name"), nb::arg("fn"));
  m.def("has_vjp", [](const std::string& op_name) { return autodiff::has_vjp(op_name); });
  m.def("has_jvp", [](const std::string& op_name) { return autodiff::has_jvp(op_name); });
}

}  // namespace tessera::python
