// Eager ops on compiled kernels (tessera/schedule/eager.h).
#include "tessera/schedule/eager.h"

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "tessera/ir/builder.h"
#include "tessera/ir/pass.h"
#include "tessera/ir/text.h"
#include "tessera/schedule/executable.h"
#include "tessera/support/error.h"

namespace tessera::schedule {
namespace {

struct Cache {
  std::mutex mutex;
  std::unordered_map<std::string, std::shared_ptr<Executable>> executables;
};

Cache& cache() {
  static Cache c;
  return c;
}

// Operand shapes with every dim > 1 a symbol, equal sizes sharing one.
std::vector<ir::Shape> shape_pattern(std::span<const Tensor> inputs) {
  std::map<std::int64_t, std::string> symbol_of;
  std::vector<ir::Shape> shapes;
  for (const Tensor& t : inputs) {
    ir::Shape s;
    for (std::int64_t d : t.shape()) {
      if (d <= 1) {
        s.push_back(ir::Dim::fixed(d));
        continue;
      }
      auto it = symbol_of.find(d);
      if (it == symbol_of.end()) it = symbol_of.emplace(d, "S" + std::to_string(symbol_of.size())).first;
      s.push_back(ir::Dim::named(it->second));
    }
    shapes.push_back(std::move(s));
  }
  return shapes;
}

// func @eager(args of `shapes`) { results = op(args); return results }
ir::Module one_op_module(const ir::OpDef& def, std::span<const Tensor> inputs, const std::vector<ir::Shape>& shapes,
                         const ir::AttrMap& attrs) {
  ir::Module m;
  auto func = ir::make_function("eager", {});
  ir::Block& body = ir::function_body(*func);
  std::vector<ir::Value*> args;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    args.push_back(body.add_argument(ir::Type::tensor(shapes[i], inputs[i].policy()), "a" + std::to_string(i)));
  }
  ir::OpBuilder b(body);
  ir::Operation* op = b.create(def, args, attrs, {});
  b.create("return", op->results(), {}, {});
  m.add_function(std::move(func));
  return m;
}

std::string eager_backend_value() {
  const char* env = std::getenv("TESSERA_EAGER");
  return env && *env ? env : "reference";
}

}  // namespace

std::string eager_backend() {
  const std::string value = eager_backend_value();
  if (value != "reference" && value != "compiled") {
    raise(ErrorCode::ArgumentInvalid, "TESSERA_EAGER is '" + value + "'; expected 'compiled' or 'reference'");
  }
  return value;
}

std::size_t eager_cache_size() {
  std::lock_guard<std::mutex> lock(cache().mutex);
  return cache().executables.size();
}

namespace {

// The device an eager op runs on: its tensor operands' (one device), where a
// 0-d host tensor (a Python scalar) goes along to a GPU operand's device.
std::string device_of(const ir::OpDef& def, std::vector<Tensor>& inputs) {
  std::string device = "cpu";
  std::size_t first = 0;
  for (std::size_t i = 0; i < inputs.size() && device == "cpu"; ++i) {
    if (!inputs[i].is_cpu()) {
      device = inputs[i].device();
      first = i;
    }
  }
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].device() == device) continue;
    if (inputs[i].is_cpu() && inputs[i].rank() == 0) {
      inputs[i] = inputs[i].to(device);
      continue;
    }
    raise(ErrorCode::Device, def.name + ": operand " + std::to_string(first) + " is on " + device + " and operand " +
                                 std::to_string(i) + " on " + inputs[i].device() + "; move them to one device with .to(...)");
  }
  return device;
}

}  // namespace

std::vector<Tensor> run_op_compiled(const ir::OpDef& def, std::span<const Tensor> given, const ir::AttrMap& attrs) {
  std::vector<Tensor> owned(given.begin(), given.end());
  const std::string device = device_of(def, owned);
  const std::span<const Tensor> inputs(owned);
  const ir::AttrMap full = ir::complete_attrs(def, attrs);
  // The shape-generic pattern when the op's shape rules accept it, else the exact shapes.
  std::vector<ir::Shape> shapes = shape_pattern(inputs);
  {
    std::vector<ir::Type> types;
    for (std::size_t i = 0; i < inputs.size(); ++i) types.push_back(ir::Type::tensor(shapes[i], inputs[i].policy()));
    try {
      ir::infer_result_types(def, types, full, {});
    } catch (const Error&) {
      shapes.clear();
      for (const Tensor& t : inputs) shapes.push_back(ir::fixed_shape(t.shape()));
    }
  }
  std::string key = device + " " + def.name + " " + ir::print_attr_map(full);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    key += " " + ir::print_type(ir::Type::tensor(shapes[i], inputs[i].policy()));
  }
  std::shared_ptr<Executable> exe;
  {
    std::lock_guard<std::mutex> lock(cache().mutex);
    auto it = cache().executables.find(key);
    if (it != cache().executables.end()) exe = it->second;
  }
  if (!exe) {
    // Concrete types first: bad operands get the reference's errors, not a symbolic variant of them.
    std::vector<ir::Type> concrete;
    for (const Tensor& t : inputs) concrete.push_back(ir::Type::tensor(ir::fixed_shape(t.shape()), t.policy()));
    ir::infer_result_types(def, concrete, full, {});
    ir::Module m = one_op_module(def, inputs, shapes, full);
    ExecutableOptions options;
    options.device = device;
    exe = compile_executable(m, "eager", options);
    std::lock_guard<std::mutex> lock(cache().mutex);
    cache().executables.emplace(key, exe);
  }
  return exe->run(inputs);
}

}  // namespace tessera::schedule
