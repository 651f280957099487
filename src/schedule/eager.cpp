// Eager ops on compiled kernels (tessera/schedule/eager.h).
#include "tessera/schedule/eager.h"

#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <mutex>
#include <unordered_map>

#include "schedule/eager_forms.h"
#include "tessera/graph/executor.h"
#include "tessera/ir/builder.h"
#include "tessera/ir/pass.h"
#include "tessera/ir/text.h"
#include "tessera/schedule/passes.h"
#include "tessera/schedule/executable.h"
#include "tessera/schedule/lower_to_tile.h"
#include "tessera/schedule/schedule_dialect.h"
#include "tessera/support/error.h"

namespace tessera::schedule {
namespace {

// One cache entry: the executable, or why no template covers the op.
struct Entry {
  std::shared_ptr<Executable> executable;
  std::string no_kernel;
};

// What the canonical form of a call came to, for calls that repeat one:
// its entry, the operands' shapes in the form (collapsed) and the results'
// true shapes. Keyed by the op, the device, the attributes as given, each
// operand's shape and policy (contiguous operands only: the form depends on
// nothing else) and the knobs, such a call skips type inference, the form
// search and the entry's text key.
struct Recall {
  const Entry* entry = nullptr;
  std::vector<std::vector<std::int64_t>> input_shapes;
  std::vector<std::vector<std::int64_t>> result_shapes;
};

struct Cache {
  std::mutex mutex;
  std::unordered_map<std::string, Entry> entries;
  std::unordered_map<std::string, Recall> recalls;
};

Cache& cache() {
  static Cache c;
  return c;
}

// func @eager(args of `form.pattern`) { results = op(args); return results }
ir::Module one_op_module(const ir::OpDef& def, const detail::EagerForm& form) {
  ir::Module m;
  auto func = ir::make_function("eager", {});
  ir::Block& body = ir::function_body(*func);
  std::vector<ir::Value*> args;
  for (std::size_t i = 0; i < form.inputs.size(); ++i) {
    args.push_back(body.add_argument(ir::Type::tensor(form.pattern[i], form.inputs[i].policy()), "a" + std::to_string(i)));
  }
  ir::OpBuilder b(body);
  ir::Operation* op = b.create(def, args, form.attrs, {});
  b.create("return", op->results(), {}, {});
  m.add_function(std::move(func));
  return m;
}

// Why the Schedule IR of `m` has a kernel without a variant, or "".
std::string uncovered_kernel(const ir::Module& m) {
  const ir::Module schedule = schedule_module(m, "eager");
  for (ir::Operation* k : kernels_of(*schedule.lookup("eager"))) {
    if (kernel_variant(*k) != "none") continue;
    std::string why;
    has_tile_template(*k, &why);
    return std::string(kernel_root_op(*k).name()) + ": " + why;
  }
  return "";
}

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

struct Prepared {
  std::string device;
  detail::EagerForm form;
  const Entry* entry = nullptr;
};

template <class T>
void append_bytes(std::string& key, const T& value) {
  key.append(reinterpret_cast<const char*>(&value), sizeof value);
}

// The Recall key of a call (operands on `device` already), or nullopt when
// an operand is not contiguous.
std::optional<std::string> recall_key(const ir::OpDef& def, const std::string& device, const ir::AttrMap& attrs,
                                      std::span<const Tensor> inputs, const std::string& knobs) {
  std::string key;
  append_bytes(key, &def);
  key.append(device).push_back('\0');
  key.append(ir::print_attr_map(attrs)).push_back('\0');
  for (const Tensor& t : inputs) {
    if (!t.is_contiguous()) return std::nullopt;
    append_bytes(key, t.rank());
    for (const std::int64_t d : t.shape()) append_bytes(key, d);
    const NumericsPolicy& p = t.policy();
    append_bytes(key, p.storage);
    append_bytes(key, p.accum);
    append_bytes(key, p.rounding);
    append_bytes(key, p.overflow);
    append_bytes(key, p.loss_scale.has_value());
    if (p.loss_scale) append_bytes(key, *p.loss_scale);
  }
  key.append(knobs);
  return key;
}

// The call's canonical form and its cache entry (compiled on a miss, or
// marked uncovered when a host kernel has no template).
Prepared prepare(const ir::OpDef& def, std::span<const Tensor> given, const ir::AttrMap& attrs) {
  std::vector<Tensor> owned(given.begin(), given.end());
  Prepared p;
  p.device = device_of(def, owned);
  const std::string knobs = target_knob_key();
  const std::optional<std::string> recall = recall_key(def, p.device, attrs, owned, knobs);
  if (recall) {
    std::lock_guard<std::mutex> lock(cache().mutex);
    if (auto it = cache().recalls.find(*recall); it != cache().recalls.end()) {
      const Recall& r = it->second;
      p.entry = r.entry;
      p.form.result_shapes = r.result_shapes;
      for (std::size_t i = 0; i < owned.size(); ++i) {
        p.form.inputs.push_back(owned[i].shape() == r.input_shapes[i] ? owned[i] : owned[i].reshape(r.input_shapes[i]));
      }
      return p;
    }
  }
  const ir::AttrMap full = ir::complete_attrs(def, attrs);
  {
    // Concrete types first: bad operands get the reference's errors, not a symbolic variant of them.
    std::vector<ir::Type> concrete;
    for (const Tensor& t : owned) concrete.push_back(ir::Type::tensor(ir::fixed_shape(t.shape()), t.policy()));
    ir::infer_result_types(def, concrete, full, {});
  }
  p.form = detail::eager_form(def, owned, full);
  std::string key = p.device + " " + def.name + " " + ir::print_attr_map(p.form.attrs) + knobs;
  for (std::size_t i = 0; i < p.form.inputs.size(); ++i) {
    key += " " + ir::print_type(ir::Type::tensor(p.form.pattern[i], p.form.inputs[i].policy()));
  }
  // Later calls of this form find the entry by their recall key.
  auto remember = [&](const Entry* entry) {
    if (!recall || p.form.inputs.size() != owned.size()) return;
    Recall r;
    r.entry = entry;
    for (const Tensor& t : p.form.inputs) r.input_shapes.push_back(t.shape());
    r.result_shapes = p.form.result_shapes;
    cache().recalls.emplace(*recall, std::move(r));
  };
  {
    std::lock_guard<std::mutex> lock(cache().mutex);
    auto it = cache().entries.find(key);
    if (it != cache().entries.end()) {
      p.entry = &it->second;
      remember(p.entry);
      return p;
    }
  }
  ir::Module m = one_op_module(def, p.form);
  Entry entry;
  if (p.device == "cpu") entry.no_kernel = uncovered_kernel(m);
  if (entry.no_kernel.empty()) {
    ExecutableOptions options;
    options.device = p.device;
    entry.executable = compile_executable(m, "eager", options);
  }
  std::lock_guard<std::mutex> lock(cache().mutex);
  p.entry = &cache().entries.emplace(key, std::move(entry)).first->second;  // node-based: the pointer stays valid
  remember(p.entry);
  return p;
}

std::vector<Tensor> run_prepared(const Prepared& p) {
  std::vector<Tensor> out = p.entry->executable->run(p.form.inputs);
  if (!p.form.result_shapes.empty()) {
    for (std::size_t r = 0; r < out.size(); ++r) out[r] = out[r].reshape(p.form.result_shapes.at(r));
  }
  return out;
}

std::string env_value(const char* name) {
  const char* env = std::getenv(name);
  return env && *env ? env : "";
}

}  // namespace

std::string eager_backend() {
  std::string value = env_value("TESSERA_EAGER");
  const char* from = "TESSERA_EAGER";
  if (value.empty()) {
    value = env_value("TESSERA_BACKEND");
    from = "TESSERA_BACKEND";
  }
  if (value.empty()) return "compiled";
  if (value != "reference" && value != "compiled") {
    raise(ErrorCode::ArgumentInvalid, std::string(from) + " is '" + value + "'; expected 'compiled' or 'reference'");
  }
  return value;
}

std::size_t eager_cache_size() {
  std::lock_guard<std::mutex> lock(cache().mutex);
  std::size_t n = 0;
  for (const auto& [key, entry] : cache().entries) n += entry.executable ? 1 : 0;
  return n;
}

// A long float sum or mean to few outputs, split as split-long-sums splits
// one in a jit (docs/design/0036): the operand viewed as [outputs, length]
// (or [length, outputs] over leading axes), graph.superblock_sums with the
// superblock count as an attribute (the eager pattern has the length as a
// symbol: one compile per superblock count, not per shape), then
// graph.superblock_total, and the sum's shape. A mean's count would be an
// attribute of the total (a compile per length), so a mean divides the
// total's sum as the reference does instead, by ops taking the count as a
// tensor: the sum at the accumulation type, as fp64, over the count (one
// fp64 division, as the reference's), rounded to the accumulation type and
// then to the result's policy. `run` runs each op; nullopt where the sum
// does not split (and for stochastically rounded means).
namespace {
using RunOp = std::function<std::vector<Tensor>(const ir::OpDef&, std::span<const Tensor>, const ir::AttrMap&)>;
std::optional<std::vector<Tensor>> run_split_sum(const ir::OpDef& def, std::span<const Tensor> inputs,
                                                 const ir::AttrMap& attrs, const RunOp& run) {
  if ((def.name != "graph.sum" && def.name != "graph.mean") || inputs.size() != 1 || !split_sums_enabled()) return std::nullopt;
  const Tensor& x = inputs[0];
  const ir::AttrMap full = ir::complete_attrs(def, attrs);
  const ir::Type type = ir::Type::tensor(ir::fixed_shape(x.shape()), x.policy());
  const auto split = long_sum_split(def.name, type, full.get_ints("axes"));
  if (!split) return std::nullopt;
  const ir::Type result_type = ir::infer_result_types(def, std::vector<ir::Type>{type}, full, {}).at(0);
  const NumericsPolicy& result = result_type.policy;
  const bool mean = def.name == "graph.mean";
  if (mean && result.rounding == Rounding::stochastic) return std::nullopt;
  const std::vector<std::int64_t> result_shape = *ir::static_sizes(result_type.shape);
  const Tensor flat = split->leading ? x.reshape({split->length, split->outputs}) : x.reshape({split->outputs, split->length});
  const ir::Registry& registry = ir::Registry::global();
  auto one = [&](const char* op, std::vector<Tensor> in, const ir::AttrMap& a) { return run(registry.get(op), in, a).at(0); };
  const Tensor parts = one("graph.superblock_sums", {flat},
                           {{"axes", std::vector<std::int64_t>{split->leading ? 0 : 1}}, {"superblocks", split->superblocks}});
  const NumericsPolicy acc = parts.policy();
  Tensor total = one("graph.superblock_total", {parts}, {{"count", std::int64_t{0}}, {"policy", mean ? acc : result}});
  if (mean) {
    const NumericsPolicy f64 = default_policy(DType::fp64);
    const double count = static_cast<double>(split->length);
    const Tensor n = Tensor::from_values(std::span<const double>(&count, 1), {}, f64);
    total = one("graph.div", {one("graph.cast", {total}, {{"policy", f64}}), n}, {});
    total = one("graph.cast", {total}, {{"policy", acc}});
    if (result != acc) total = one("graph.cast", {total}, {{"policy", result}});
  }
  return std::vector<Tensor>{total.reshape(result_shape)};
}
}  // namespace

std::vector<Tensor> run_op_compiled(const ir::OpDef& def, std::span<const Tensor> inputs, const ir::AttrMap& attrs) {
  if (auto split = run_split_sum(def, inputs, attrs, run_op_compiled)) return *split;
  const Prepared p = prepare(def, inputs, attrs);
  if (!p.entry->executable) {
    // Compiling names the kernel, its family, why and the op (a CompileError).
    ExecutableOptions options;
    options.device = p.device;
    compile_executable(one_op_module(def, p.form), "eager", options);
    raise(ErrorCode::Internal, def.name + " has no compiled kernel: " + p.entry->no_kernel);
  }
  return run_prepared(p);
}

std::vector<Tensor> run_op_eager(const ir::OpDef& def, std::span<const Tensor> inputs, const ir::AttrMap& attrs,
                                 std::string& no_kernel) {
  auto run = [&](const ir::OpDef& d, std::span<const Tensor> in, const ir::AttrMap& a) { return run_op_eager(d, in, a, no_kernel); };
  if (auto split = run_split_sum(def, inputs, attrs, run)) return *split;
  const Prepared p = prepare(def, inputs, attrs);
  if (p.entry->executable) return run_prepared(p);
  no_kernel = p.entry->no_kernel;
  return graph::execute_op(def, inputs, attrs);
}

std::vector<Tensor> execute_eager(const ir::Module& module, const ir::Operation& func, std::span<const Tensor> args,
                                  std::vector<std::string>& no_kernel, std::span<const bool> wanted) {
  std::string device = "cpu";
  for (const Tensor& t : args) {
    if (!t.is_cpu()) device = t.device();
  }
  return graph::execute_with(module, func, args,
                             [&](const ir::Operation& op, std::span<const Tensor> inputs, std::span<const ir::Type>) {
                               try {
                                 // A constant's data is its attribute: made directly, never
                                 // an eager cache entry keyed by its values.
                                 std::string why;
                                 std::vector<Tensor> out = op.name() == "graph.constant"
                                                               ? graph::execute_op(op.def(), inputs, op.attrs())
                                                               : run_op_eager(op.def(), inputs, op.attrs(), why);
                                 if (!why.empty()) no_kernel.push_back(why);
                                 if (op.num_operands() == 0 && device != "cpu") {
                                   for (Tensor& t : out) t = t.to(device);
                                 }
                                 return out;
                               } catch (const Error& e) {
                                 ir::rethrow_for_op(e, op.name(), op.location());
                               }
                             },
                             wanted);
}

std::vector<KernelReport> compile_eager(const ir::OpDef& def, std::span<const Tensor> inputs, const ir::AttrMap& attrs) {
  const Prepared p = prepare(def, inputs, attrs);
  if (!p.entry->executable) raise(ErrorCode::Compile, def.name + " has no compiled kernel: " + p.entry->no_kernel);
  return p.entry->executable->kernels();
}

}  // namespace tessera::schedule
