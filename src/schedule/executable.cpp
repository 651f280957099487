// Compiled executables (tessera/schedule/executable.h).
#include "tessera/schedule/executable.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <mutex>
#include <new>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "graph/kernel_support.h"
#include "schedule/compile_progress.h"
#include "schedule/graph_steps.h"
#include "schedule/run_plan.h"
#include "schedule/variant_overrides.h"
#include "schedule/views.h"
#include "tessera/autodiff/autodiff.h"
#include "tessera/graph/executor.h"
#include "tessera/ir/builder.h"
#include "tessera/ir/pass.h"
#include "tessera/ir/text.h"
#include "tessera/ir/verifier.h"
#include "tessera/backends/cuda_tile/lower.h"
#include "tessera/backends/cuda_tile/runtime.h"
#include "tessera/runtime/profiler.h"
#include "tessera/schedule/lower_to_tile.h"
#include "tessera/schedule/passes.h"
#include "tessera/schedule/schedule_dialect.h"
#include "tessera/support/error.h"

namespace tessera::schedule {

namespace {

struct Step {
  const ir::Operation* kernel = nullptr;
  std::string variant;
  std::vector<std::int64_t> buffers;
  // variant "tile": compiled for the CPU or for a CUDA device
  std::shared_ptr<cpu::CompiledKernel> compiled;
  std::shared_ptr<cuda::CompiledKernel> gpu;
  // variant "tile_ir" (the Mapper's choice): the template's kernel through the CUDA Tile IR target
  std::shared_ptr<cuda_tile::CompiledKernel> tile_gpu;
  TileKernel tile;
  // variant "constant"
  Tensor constant;
  // The kernel's constant tables (TileKernel::tables), on the executable's device.
  std::vector<Tensor> tables;
  // Values whose last reader is this step (or results nobody reads), and
  // the buffer slots whose tensor one of them was: a run drops both once
  // the step is queued (release_plan).
  std::vector<const ir::Value*> release;
  std::vector<std::int64_t> release_slots;
};

// Which values each step is the last to read, so that a run holds each
// intermediate only while a later step needs it: the caching allocator then
// gives its block to a later result (stream order makes that safe on a
// GPU), and a step's peak memory is what is live at that step rather than
// every intermediate of the function. Returned values and arguments are
// never dropped. A slot is emptied with the value it holds at that point (a
// later result may have taken it over in place, and then keeps it).
void release_plan(std::vector<Step>& steps, const ir::Operation& func) {
  std::unordered_map<const ir::Value*, std::size_t> last;
  std::unordered_set<const ir::Value*> kept;
  for (ir::Value* v : ir::function_results(func)) kept.insert(v);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    for (const ir::Value* v : steps[i].kernel->operands()) last[v] = i;
    for (const ir::Value* r : steps[i].kernel->results()) last.emplace(r, i);  // read by nobody: dropped at once
  }
  const ir::Block& body = ir::function_body(func);
  for (std::size_t a = 0; a < body.num_arguments(); ++a) kept.insert(body.argument(a));
  for (const auto& [v, i] : last) {
    if (!kept.count(v)) steps[i].release.push_back(v);
  }
  // Replay the run's slot use: launched kernels put their results in their
  // slots (run_impl); constants, views, collectives and reference kernels
  // take none.
  std::unordered_map<const ir::Value*, std::int64_t> slot_of;
  std::vector<const ir::Value*> holder;
  for (Step& step : steps) {
    const std::string& v = step.variant;
    if (v != "constant" && v != "reference" && v != "view" && v != "collective") {
      for (std::size_t j = 0; j < step.buffers.size(); ++j) {
        const std::int64_t slot = step.buffers[j];
        if (slot < 0) continue;
        if (holder.size() <= static_cast<std::size_t>(slot)) holder.resize(static_cast<std::size_t>(slot) + 1);
        holder[static_cast<std::size_t>(slot)] = step.kernel->result(j);
        slot_of[step.kernel->result(j)] = slot;
      }
    }
    for (const ir::Value* dropped : step.release) {
      auto s = slot_of.find(dropped);
      if (s == slot_of.end() || holder[static_cast<std::size_t>(s->second)] != dropped) continue;
      holder[static_cast<std::size_t>(s->second)] = nullptr;
      step.release_slots.push_back(s->second);
    }
  }
}

std::vector<std::int64_t> concrete_sizes(const ir::Type& type, const graph::SymbolBindings& bindings) {
  return graph::sizes_of(graph::concretize(type, bindings));
}

// A copy of a Graph IR module that keeps every op's source location (the
// user's line when traced), so errors from the executable point at user code.
ir::Module copy_graph_module(const ir::Module& module) {
  ir::Module out;
  for (const auto& f : module.functions()) {
    auto copy = ir::make_function(ir::function_name(*f), f->location());
    const ir::Block& src = ir::function_body(*f);
    ir::Block& body = ir::function_body(*copy);
    std::vector<ir::Value*> args;
    for (std::size_t i = 0; i < src.num_arguments(); ++i) {
      args.push_back(body.add_argument(src.argument(i)->type(), src.argument(i)->name()));
    }
    ir::OpBuilder b(body);
    std::vector<ir::Value*> results = autodiff::inline_function(b, *f, args);
    b.create("return", results, {}, src.terminator() ? src.terminator()->location() : SourceLocation{});
    out.add_function(std::move(copy));
  }
  return out;
}

Tensor make_constant(const ir::Operation& op) {
  const ir::Type& t = op.result(0)->type();
  auto sizes = ir::static_sizes(t.shape);
  if (!sizes) raise(ErrorCode::ShapeMismatch, "graph.constant with a symbolic shape", op.location());
  std::vector<double> values = op.attrs().get_reals("value");
  if (values.size() == 1) values.assign(static_cast<std::size_t>(graph::numel_of(*sizes)), values[0]);
  return Tensor::from_values(values, *sizes, t.policy);
}


// The columns of parameter `index` when the kernel takes it as a 2-D view (0: flat).
std::int64_t matrix_cols(const std::vector<std::pair<std::size_t, std::int64_t>>& views, std::size_t index) {
  for (const auto& [i, cols] : views) {
    if (i == index) return cols;
  }
  return 0;
}

// One batch matrix of `t` (rows x cols, row-major) as a 2-D view.
// (Metadata only: the same on the host and on a device.)
Tensor matrix_view(const Tensor& t, std::int64_t index, std::int64_t rows, std::int64_t cols) {
  if (rows * cols == 0) return Tensor::empty({rows, cols}, t.policy(), t.device());
  return t.as_strided({rows, cols}, {cols, 1}, index * rows * cols);
}

// Index inputs in range, on the host, before any kernel reads them.
void check_indices(const TileKernel& tk, const std::vector<Tensor>& inputs, const std::vector<std::int64_t>& domain) {
  for (const IndexCheck& c : tk.index_checks) {
    const std::int64_t n = c.bound_in_domain ? domain.at(c.dim) : inputs.at(c.bound_input).shape().at(c.dim);
    // A device index tensor is read through a host copy (this synchronizes).
    const Tensor& indices = inputs.at(c.input);
    for (double v : (indices.is_cpu() ? indices : indices.to("cpu")).to_values()) {
      if (!(v >= static_cast<double>(-n) && v < static_cast<double>(n))) {
        raise(ErrorCode::IndexOutOfRange, c.op + " index " + std::to_string(static_cast<long long>(v)) +
                                              " is out of range for axis " + std::to_string(c.dim) + " of size " +
                                              std::to_string(n) + " (valid: -" + std::to_string(n) + " to " +
                                              std::to_string(n - 1) + ")");
      }
    }
  }
}

// InverseIndex's offsets [n + 1] and order [numel(indices)] (a stable counting sort).
std::vector<Tensor> inverse_index(const Tensor& indices, std::int64_t n) {
  const auto values = (indices.is_cpu() ? indices : indices.to("cpu")).to_values();
  std::vector<double> offsets(static_cast<std::size_t>(n) + 1, 0.0), order(values.size());
  auto wrap = [n](double v) { return static_cast<std::size_t>(v < 0 ? static_cast<std::int64_t>(v) + n : static_cast<std::int64_t>(v)); };
  for (double v : values) offsets[wrap(v) + 1] += 1.0;
  for (std::size_t i = 1; i < offsets.size(); ++i) offsets[i] += offsets[i - 1];
  std::vector<double> next(offsets.begin(), offsets.end() - 1);
  for (std::size_t j = 0; j < values.size(); ++j) order[static_cast<std::size_t>(next[wrap(values[j])]++)] = static_cast<double>(j);
  const NumericsPolicy i64 = default_policy(DType::int64);
  Tensor o = Tensor::from_values(offsets, {n + 1}, i64);
  Tensor p = Tensor::from_values(order, {static_cast<std::int64_t>(order.size())}, i64);
  if (!indices.is_cpu()) return {o.to(indices.device()), p.to(indices.device())};
  return {o, p};
}

// One launch of a compiled step on its backend.
struct Launcher {
  const cpu::LaunchOptions* cpu = nullptr;
  const cuda::KernelLaunchOptions* gpu = nullptr;
  GraphRecorder* graph = nullptr;
  // Scratch buffers (TileKernel::scratch) a CUDA graph's kernels use when the
  // graph runs, after every step is recorded: held until then.
  std::vector<Tensor>* held = nullptr;
  // A plain run being recorded as a run plan (run_plan.h), and the
  // executable's first step (a launch's step index is its distance from it).
  PlanRecorder* plan = nullptr;
  const Step* first_step = nullptr;
  void operator()(const Step& step, std::int64_t grid, std::vector<cpu::KernelArg> args) const {
    if (plan && !graph) {
      plan->launch(static_cast<std::size_t>(&step - first_step), step.tile_gpu ? nullptr : step.gpu.get(),
                   step.tile_gpu || step.gpu ? nullptr : step.compiled.get(), grid, args, *gpu, *cpu);
    }
    if (step.tile_gpu && graph) {
      graph->record(*step.tile_gpu, grid, std::move(args), *gpu);
    } else if (step.tile_gpu) {
      cuda_tile::LaunchOptions o;
      o.stream = gpu->stream;
      o.synchronize = gpu->check_faults;
      o.fault_record = gpu->fault_record;
      cuda_tile::launch(*step.tile_gpu, grid, std::move(args), o);
    } else if (step.gpu && graph) {
      graph->record(*step.gpu, grid, std::move(args), *gpu);
    } else if (step.gpu) {
      cuda::launch(*step.gpu, grid, std::move(args), *gpu);
    } else {
      cpu::launch(*step.compiled, grid, std::move(args), *cpu);
    }
  }
};

// Launches a step's tile kernel: flat buffers and scalars; a matrix kernel
// once per batch matrix with its operands' 2-D views.

void launch_kernel(const Step& step, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                   const std::vector<std::int64_t>& domain, const Launcher& launch);

// Kernels address packed sub-byte storage (int4, fp4, fp6) one code per byte:
// such inputs are unpacked once for the step and such results packed after
// it (CPU only: the CUDA backend takes no sub-byte buffers).
void launch_step(const Step& step, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                 const std::vector<std::int64_t>& domain, const Launcher& launch) {
  const auto packed = [](const Tensor& t) { return is_packed(t.dtype()); };
  if (std::none_of(inputs.begin(), inputs.end(), packed) && std::none_of(outputs.begin(), outputs.end(), packed)) {
    return launch_kernel(step, inputs, outputs, domain, launch);
  }
  if (launch.plan) launch.plan->refuse("packed sub-byte operands are unpacked around the kernel");
  std::vector<Tensor> in = inputs, out = outputs;
  for (Tensor& t : in) {
    if (packed(t)) t = t.to_byte_codes();
  }
  for (Tensor& t : out) {
    if (packed(t)) t = Tensor::empty(t.shape(), default_policy(DType::uint8));
  }
  launch_kernel(step, in, out, domain, launch);
  for (std::size_t j = 0; j < out.size(); ++j) {
    if (packed(outputs[j])) outputs[j].store_byte_codes(out[j]);
  }
}

void launch_kernel(const Step& step, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                   const std::vector<std::int64_t>& domain, const Launcher& launch) {
  const TileKernel& tk = step.tile;
  if (launch.graph && (!tk.index_checks.empty() || tk.inverse)) {
    // Inside a graph the indices are not computed yet when the launches are recorded.
    raise(ErrorCode::ArgumentInvalid, "it checks its indices through a host copy, which cannot happen inside a CUDA "
                                      "graph; call the function without capture_graph");
  }
  if (launch.plan && (!tk.index_checks.empty() || tk.inverse)) launch.plan->refuse("indices are read on the host");
  check_indices(tk, inputs, domain);
  std::vector<Tensor> extra;
  if (tk.inverse) extra = inverse_index(inputs.at(tk.inverse->input), domain.at(tk.inverse->dim));
  std::optional<Tensor> scratch;  // allocated once the grid is known
  auto args_for = [&](std::int64_t batch, const Tensor* a_view, const Tensor* b_view) {
    std::vector<cpu::KernelArg> kargs;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      if (tk.matrix && i == tk.matrix->a) {
        kargs.emplace_back(*a_view);
      } else if (tk.matrix && i == tk.matrix->b) {
        kargs.emplace_back(*b_view);
      } else if (const std::int64_t cols = matrix_cols(tk.matrix_inputs, i); cols > 0) {
        kargs.emplace_back(inputs[i].reshape({inputs[i].numel() / cols, cols}));
      } else {
        const Tensor flat = inputs[i].reshape({inputs[i].numel()});
        const bool codes = std::find(tk.code_inputs.begin(), tk.code_inputs.end(), i) != tk.code_inputs.end();
        kargs.emplace_back(is_complex(flat.dtype()) ? flat.as_parts() : codes ? flat.as_codes() : flat);
      }
    }
    for (std::size_t j = 0; j < outputs.size(); ++j) {
      const Tensor& t = outputs[j];
      if (tk.matrix && tk.matrix->matrix_outputs) {
        const std::int64_t m = domain[domain.size() - 2], n = domain.back();
        kargs.emplace_back(matrix_view(t, batch, m, n));
      } else if (const std::int64_t cols = matrix_cols(tk.matrix_outputs, j); cols > 0) {
        kargs.emplace_back(t.reshape({t.numel() / cols, cols}));
      } else {
        const Tensor flat = t.reshape({t.numel()});
        kargs.emplace_back(is_complex(flat.dtype()) ? flat.as_parts() : tk.code_outputs ? flat.as_codes() : flat);
      }
    }
    for (const Tensor& t : extra) kargs.emplace_back(t);
    for (const Tensor& t : step.tables) kargs.emplace_back(t);
    if (scratch) kargs.emplace_back(*scratch);
    for (const KernelScalar& s : tk.scalars) {
      switch (s.kind) {
        case KernelScalar::Kind::dim: kargs.emplace_back(domain.at(s.index)); break;
        case KernelScalar::Kind::input_dim: kargs.emplace_back(inputs.at(s.input).shape().at(s.index)); break;
        case KernelScalar::Kind::batch: kargs.emplace_back(batch); break;
      }
    }
    return kargs;
  };
  if (!tk.matrix) {
    std::int64_t n = graph::numel_of(domain);
    if (tk.rows_of) {
      const Tensor& x = inputs.at(tk.rows_of->first);
      const std::int64_t length = x.shape().at(tk.rows_of->second);
      n = length == 0 ? 0 : x.numel() / length * tk.lines_per_row;
    }
    if (tk.last_axis_strip > 0) {
      const std::int64_t c = domain.back();
      n = c == 0 ? 0 : n / c * ((c + tk.last_axis_strip - 1) / tk.last_axis_strip);
    }
    const std::int64_t lanes = tk.lanes_per_group;
    std::int64_t grid = (n + lanes - 1) / lanes;
    if (tk.group_per_row) grid = (n + tk.rows_per_group - 1) / tk.rows_per_group;
    if (!tk.axis_blocks.empty()) {
      grid = 0;
      for (const AxisBlocks& ab : tk.axis_blocks) {
        const auto& shape = inputs.at(ab.input).shape();
        std::int64_t groups = (shape.at(ab.axis) + ab.block - 1) / ab.block;
        for (std::size_t d = 0; d < ab.axis; ++d) groups *= shape[d];
        grid += groups;
      }
    }
    if (tk.row_tiled) {
      const std::int64_t c = domain.back();
      grid = c == 0 ? 0 : n / c * ((c + lanes - 1) / lanes);
    }
    if (tk.scratch) {
      // Stream order lets the allocator hand the block on once the launch is
      // queued; a graph's launches run later, so the recording holds it.
      scratch = Tensor::empty({std::max<std::int64_t>(grid, 1) * tk.scratch->per_group},
                              default_policy(tk.scratch->dtype), outputs.at(0).device());
      if (launch.graph && launch.held) launch.held->push_back(*scratch);
      if (launch.plan) launch.plan->allocated(*scratch);
    }
    launch(step, grid, args_for(0, nullptr, nullptr));
    return;
  }
  const MatrixLaunch& ml = *tk.matrix;
  const Tensor& a = inputs.at(ml.a);
  const Tensor& b = inputs.at(ml.b);
  const auto& sa = a.shape();
  const auto& sb = b.shape();
  const std::int64_t ar = sa[sa.size() - 2], ac = sa.back(), br = sb[sb.size() - 2], bc = sb.back();
  const std::int64_t m = domain[domain.size() - 2], nn = domain.back();
  const std::vector<std::int64_t> batch(domain.begin(), domain.end() - 2);
  const auto a_batch = graph::broadcast_offsets(std::vector<std::int64_t>(sa.begin(), sa.end() - 2), batch);
  const auto b_batch = graph::broadcast_offsets(std::vector<std::int64_t>(sb.begin(), sb.end() - 2), batch);
  const std::int64_t grid = ((m + ml.bm - 1) / ml.bm) * ((nn + ml.bn - 1) / ml.bn);
  for (std::size_t i = 0; i < a_batch.size(); ++i) {
    const Tensor av = matrix_view(a, a_batch[i], ar, ac);
    const Tensor bv = matrix_view(b, b_batch[i], br, bc);
    launch(step, grid, args_for(static_cast<std::int64_t>(i), &av, &bv));
  }
}

}  // namespace

namespace {

// What the profiler records of one kernel launch (tessera/runtime/profiler.h).
profiler::Record profile_record(const Step& step, const std::string& function, const std::string& device,
                                const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs) {
  const ir::Operation& k = *step.kernel;
  const ir::Block& body = kernel_body(k);
  profiler::Record r;
  r.kind = "kernel";
  r.name = kernel_name(k);
  r.function = function;
  r.family = std::string(family_name(kernel_family(k)));
  r.device = device;
  std::size_t num_ops = 0;
  for (const auto& op : body.ops()) {
    if (op.get() == body.terminator()) break;
    r.ops += (r.ops.empty() ? "" : "+") + std::string(op->name());
    ++num_ops;
  }
  double largest = 0.0;
  for (const std::vector<Tensor>* list : {&inputs, &outputs}) {
    for (const Tensor& t : *list) {
      r.bytes += static_cast<double>(t.numel()) * static_cast<double>(t.element_bytes());
      largest = std::max(largest, static_cast<double>(t.numel()));
    }
  }
  const ir::Operation& root = kernel_root_op(k);
  if (kernel_family(k) == Family::gemm && !outputs.empty()) {
    // 2 M N K: K from the first matrix operand, as the op reads it.
    for (std::size_t i = 0; i < body.num_arguments(); ++i) {
      if (body.argument(i) != root.operand(0) || i >= inputs.size()) continue;
      const auto& s = inputs[i].shape();
      const bool ta = root.attrs().has("transpose_a") && root.attrs().get_bool("transpose_a");
      const std::int64_t kdim = s.size() < 2 ? 1 : (ta ? s[s.size() - 2] : s.back());
      r.flops = 2.0 * static_cast<double>(outputs[0].numel()) * static_cast<double>(kdim);
    }
  } else {
    r.flops = largest * static_cast<double>(num_ops);
  }
  return r;
}

}  // namespace

struct Executable::State {
  ir::Module schedule;  // the Schedule IR function
  std::string function;
  ir::Module tile;      // the Tile IR kernels
  std::vector<Step> steps;
  std::vector<KernelReport> reports;
  double compile_seconds = 0.0;
  int num_threads = 0;
  std::string device = "cpu";
  // What a deferred fault check needs of each GPU step (made once at compile
  // time; a run's check shares it): its index, kernel, name and op, and the
  // user's line.
  struct FaultSlot {
    std::size_t index;
    std::shared_ptr<cuda::CompiledKernel> kernel;
    std::shared_ptr<cuda_tile::CompiledKernel> tile_kernel;  // a tile_ir step's (its record holds a fault word)
    std::string label;
    SourceLocation where;
  };
  std::shared_ptr<const std::vector<FaultSlot>> fault_slots;
  // The fault record of run() (uncaptured runs), made at the first one and
  // shared by all: zeroed once, and again after a check has raised its
  // fault, so each fault is raised once. Kernels record only the first fault
  // of a record, so a fault of an earlier run (not read back yet) hides a
  // later run's. One record, and with it one pending check
  // (defer_check's key), instead of an allocation, a memset and a
  // device-to-host copy for every run.
  std::mutex run_record_mutex;
  std::shared_ptr<void> run_fault_record;
  // CUDA graphs of run_graph, one per argument shapes.
  struct CapturedGraph {
    std::vector<std::vector<std::int64_t>> shapes;
    std::shared_ptr<cuda::KernelGraph> graph;
    // The graph's fault record, zeroed when it is built and kept across
    // replays: the kernel nodes' record address never changes (their
    // parameters need no update for it). A check that raises its fault zeroes
    // it again, as run()'s.
    std::shared_ptr<void> fault_record;
    // Its collective steps' buffers, in step order (graph_steps.h).
    std::vector<GraphCollective> collectives;
    // How later calls replay it without walking the steps, when they can.
    std::optional<DirectReplay> replay;
  };
  std::mutex graphs_mutex;
  std::vector<CapturedGraph> graphs;
  // Run plans of run(), one per argument signature (run_plan.h): a null
  // plan marks a signature whose run cannot be planned (it walks).
  struct PlanEntry {
    std::vector<std::vector<std::int64_t>> shapes, strides;
    std::vector<NumericsPolicy> policies;
    std::vector<std::int64_t> aliases;  // argument_aliases
    std::shared_ptr<const RunPlan> plan;
    std::string refusal;  // why a recorded run made no plan
    bool recording = false;  // a run records it now (one that raises leaves it to the next)
  };
  std::mutex plans_mutex;
  std::vector<PlanEntry> plans;
};

Executable::Executable(std::unique_ptr<State> state) : state_(std::move(state)) {}
Executable::~Executable() = default;

namespace {

bool tabulating() {
  // TESSERA_TABULATE=0 keeps the chains as they are (to compare; same bits).
  const char* env = std::getenv("TESSERA_TABULATE");
  const std::string value = env && *env ? env : "1";
  if (value != "0" && value != "1") {
    raise(ErrorCode::ArgumentInvalid, "TESSERA_TABULATE is '" + value + "'; expected '1' (tables, the default) or '0'");
  }
  return value == "1";
}

}  // namespace

ir::Module schedule_module(const ir::Module& module, const std::string& function, bool cuda) {
  if (!module.lookup(function)) raise(ErrorCode::ArgumentInvalid, "no function '" + function + "' in the module");
  // Work on a copy: the caller's Graph IR stays as it is (jit keeps it for inspect_ir).
  ir::Module copy = copy_graph_module(module);
  {
    ir::PassManager pm;
    pm.add("inline-calls");
    pm.add("dce");
    pm.run(copy);
  }
  // Only the requested function is lowered; the callees are inlined into it.
  std::erase_if(copy.functions(), [&](const auto& f) { return ir::function_name(*f) != function; });
  split_complex_parts(*copy.lookup(function));
  if (tabulating() && tabulate_functions(*copy.lookup(function)) > 0) {
    ir::PassManager pm;
    pm.add("dce");
    pm.run(copy);
  }
  split_long_ffts(*copy.lookup(function), cuda);
  decode_fp8_attention(*copy.lookup(function), cuda);
  const int split = split_decode_attention(*copy.lookup(function), cuda);
  if (pad_ragged_attention(*copy.lookup(function), cuda) + split > 0) {
    // A gradient's forward and backward pad the same q, k and v.
    ir::PassManager pm;
    pm.add("cse");
    pm.add("dce");
    pm.run(copy);
  }
  split_long_sums(*copy.lookup(function));
  split_column_sums(*copy.lookup(function));
  if (cuda && split_fp32_products(*copy.lookup(function)) > 0) {
    ir::PassManager pm;
    pm.add("cse");
    pm.add("dce");
    pm.run(copy);
  }
  lower_to_schedule(copy);
  ir::verify(copy);
  return copy;
}

ir::Module schedule_module(const ir::Module& module, const std::string& function,
                           const std::map<std::string, std::string>& variants, bool cuda) {
  ir::Module out = schedule_module(module, function, cuda);
  apply_variant_overrides(*out.lookup(function), variants);
  return out;
}

ir::Module device_schedule_module(const ir::Module& module, const std::string& function,
                                  const std::map<std::string, std::string>& variants, const std::string& device) {
  const bool cuda = device != "cpu";
  ir::Module out = schedule_module(module, function, cuda);
  ir::Operation& func = *out.lookup(function);
  set_target_knobs(func, cuda);
  if (cuda) choose_default_nvidia_targets(func, cuda::parse_device(device));
  apply_variant_overrides(func, variants);
  if (cuda) set_tile_ir_knobs(func);
  return out;
}

std::shared_ptr<Executable> compile_executable(const ir::Module& module, const std::string& function,
                                               const ExecutableOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  auto state = std::make_unique<Executable::State>();
  state->function = function;
  state->num_threads = options.num_threads;
  state->device = options.device == "cpu" ? "cpu" : "cuda:" + std::to_string(cuda::parse_device(options.device));
  state->schedule = device_schedule_module(module, function, options.variants, state->device);

  ir::Operation& func = *state->schedule.lookup(function);
  std::vector<std::pair<std::size_t, std::future<cuda_tile::CompiledKernel>>> tile_ir_pending;  // by step
  for (ir::Operation* k : kernels_of(func)) {
    Step step;
    step.kernel = k;
    step.variant = kernel_variant(*k);
    step.buffers = k->attrs().get_ints("buffers");
    KernelReport report{kernel_name(*k), std::string(family_name(kernel_family(*k))), step.variant};
    if (step.variant == "tile" || step.variant == "none") {
      // lower_kernel raises the CompileError for "none", naming the op.
      step.tile = lower_kernel(*k, state->tile, function + "_" + kernel_name(*k));
      ir::verify_function(*step.tile.func);
    } else if (step.variant == "tile_ir") {
      if (state->device == "cpu") {
        raise(ErrorCode::ArgumentInvalid, "kernel " + kernel_name(*k) + ": the 'tile_ir' variant is the CUDA Tile IR "
                                              "target, which runs on CUDA devices, not on cpu");
      }
      step.tile = lower_kernel(*k, state->tile, function + "_" + kernel_name(*k));
      ir::verify_function(*step.tile.func);
      // The CompileError for a construct the target cannot express names it
      // and the user's line; the kernel never goes to the PTX path instead.
      // tileiras runs for the kernels in parallel (collected below).
      cuda_tile::CompileOptions o;
      o.device = cuda::parse_device(state->device);
      o.cache_dir = options.cuda.cache_dir;
      const ir::Operation* f = step.tile.func;
      tile_ir_pending.emplace_back(state->steps.size(),
                                   std::async(std::launch::async, [f, o] { return cuda_tile::compile_kernel(*f, o); }));
    } else if (step.variant == "constant") {
      step.constant = make_constant(*kernel_body(*k).ops().front());
      if (state->device != "cpu") step.constant = step.constant.to(state->device);
    }
    for (const ConstantTable& c : step.tile.tables) {
      Tensor t = Tensor::from_values(c.values, {static_cast<std::int64_t>(c.values.size())}, default_policy(c.dtype));
      step.tables.push_back(state->device == "cpu" ? t : t.to(state->device));
    }
    state->reports.push_back(report);
    state->steps.push_back(std::move(step));
  }
  release_plan(state->steps, func);
  // Every kernel of the executable in one host-compiler invocation.
  std::vector<const ir::Operation*> funcs;
  for (const Step& step : state->steps) {
    if (step.tile.func && step.variant != "tile_ir") funcs.push_back(step.tile.func);
  }
  std::optional<CompileProgress> progress;
  if (!funcs.empty()) {
    progress.emplace(std::to_string(funcs.size()) + (funcs.size() == 1 ? " kernel of " : " kernels of ") + function +
                     " for " + state->device);
  }
  if (!funcs.empty() && state->device != "cpu") {
    // NVRTC compiles one kernel per program; the programs compile in parallel.
    cuda::KernelCompileOptions o = options.cuda;
    o.device = cuda::parse_device(state->device);
    o.contiguous_buffers = true;  // operands are made contiguous before each launch
    std::vector<std::future<cuda::CompiledKernel>> pending;
    for (const ir::Operation* f : funcs) {
      pending.push_back(std::async(std::launch::async, [f, o] { return cuda::compile_kernel(*f, o); }));
    }
    std::size_t next = 0;
    for (std::size_t i = 0; i < state->steps.size(); ++i) {
      Step& step = state->steps[i];
      if (!step.tile.func || step.variant == "tile_ir") continue;
      step.gpu = std::make_shared<cuda::CompiledKernel>(pending[next++].get());
      state->reports[i].cache_hit = step.gpu->cache_hit;
      state->reports[i].compile_seconds = step.gpu->compile_seconds;
    }
  } else if (!funcs.empty()) {
    cpu::CompileOptions cpu_options = options.cpu;
    cpu_options.contiguous_buffers = true;  // operands are made contiguous before each launch
    std::vector<cpu::CompiledKernel> compiled = cpu::compile_kernels(funcs, cpu_options);
    std::size_t next = 0;
    for (std::size_t i = 0; i < state->steps.size(); ++i) {
      Step& step = state->steps[i];
      if (!step.tile.func) continue;
      step.compiled = std::make_shared<cpu::CompiledKernel>(std::move(compiled[next++]));
      state->reports[i].cache_hit = step.compiled->cache_hit;
      state->reports[i].compile_seconds = step.compiled->compile_seconds;
      state->reports[i].object = step.compiled->library_path;
    }
  }
  for (auto& [i, compiled] : tile_ir_pending) {
    state->steps[i].tile_gpu = std::make_shared<cuda_tile::CompiledKernel>(compiled.get());
    state->reports[i].cache_hit = state->steps[i].tile_gpu->cache_hit;
    state->reports[i].compile_seconds = state->steps[i].tile_gpu->compile_seconds;
  }
  if (state->device != "cpu") {
    // The steps whose kernels report faults: every NVRTC kernel, and the
    // tile_ir kernels that take a fault word.
    auto slots = std::make_shared<std::vector<Executable::State::FaultSlot>>();
    for (std::size_t i = 0; i < state->steps.size(); ++i) {
      const Step& s = state->steps[i];
      if (!s.gpu && !(s.tile_gpu && s.tile_gpu->fault_param)) continue;
      const ir::Operation& first = kernel_root_op(*s.kernel);
      slots->push_back({i, s.gpu, s.tile_gpu,
                        "kernel " + kernel_name(*s.kernel) + " (" + std::string(first.name()) + ")",
                        first.location()});
    }
    state->fault_slots = std::move(slots);
  }
  progress.reset();
  state->compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (profiler::active()) {
    bool hits = true;
    for (const KernelReport& r : state->reports) hits = hits && (r.variant != "tile" || r.cache_hit);
    profiler::record_compile(function, state->device, funcs.size(), hits, state->compile_seconds);
  }
  return std::shared_ptr<Executable>(new Executable(std::move(state)));
}

std::vector<Tensor> Executable::run(std::span<const Tensor> args) const {
  return run_impl(args, false);
}

std::vector<Tensor> Executable::run_graph(std::span<const Tensor> args) const {
  return run_impl(args, true);
}

std::size_t Executable::graphs() const {
  std::lock_guard<std::mutex> lock(state_->graphs_mutex);
  return state_->graphs.size();
}

std::size_t Executable::direct_graphs() const {
  std::lock_guard<std::mutex> lock(state_->graphs_mutex);
  return static_cast<std::size_t>(std::count_if(state_->graphs.begin(), state_->graphs.end(),
                                                [](const State::CapturedGraph& g) { return g.replay.has_value(); }));
}

std::size_t Executable::run_plans() const {
  std::lock_guard<std::mutex> lock(state_->plans_mutex);
  return static_cast<std::size_t>(std::count_if(state_->plans.begin(), state_->plans.end(),
                                                [](const State::PlanEntry& e) { return e.plan != nullptr; }));
}

std::vector<std::string> Executable::plan_refusals() const {
  std::lock_guard<std::mutex> lock(state_->plans_mutex);
  std::vector<std::string> out;
  for (const State::PlanEntry& e : state_->plans) {
    if (!e.refusal.empty()) out.push_back(e.refusal);
  }
  return out;
}

namespace {

// Whether a GPU kernel could not read `t` in place: a view starting at an
// address that is not cuda::kVectorAlignment-aligned (a contiguous view at
// an odd offset), which kernels with aligned vector accesses refuse
// (CompiledKernel::aligned_buffers). Such a view is copied first, as a
// strided one is.
bool misaligned_on_gpu(const Tensor& t) {
  if (t.is_cpu() || t.numel() == 0 || is_packed(t.dtype())) return false;
  return reinterpret_cast<std::uintptr_t>(t.device_data()) % cuda::kVectorAlignment != 0;
}

// TESSERA_RUN_PLANS: unset, empty or 1 replays plans; 0 walks every run.
// Anything else is an error rather than a value quietly read as one of them.
bool run_plans_enabled() {
  const char* env = std::getenv("TESSERA_RUN_PLANS");
  if (env == nullptr || *env == '\0') return true;
  const std::string_view v(env);
  if (v == "0" || v == "1") return v == "1";
  raise(ErrorCode::ArgumentInvalid, "TESSERA_RUN_PLANS is '" + std::string(v) + "'; expected 0 (walk every run) or 1 "
                                    "(replay run plans, the default)");
}

}  // namespace

std::vector<Tensor> Executable::run_impl(std::span<const Tensor> args, bool use_graph) const {
  const ir::Operation& func = *state_->schedule.lookup(state_->function);
  const ir::Block& body = ir::function_body(func);
  const std::string& device = state_->device;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i].device() != device) {
      raise(ErrorCode::Device, "argument " + std::to_string(i) + " of " + state_->function + " is on " +
                                   args[i].device() + ", but this executable was compiled for " + device +
                                   "; move it with .to(\"" + device + "\")");
    }
  }
  // Misaligned views are copied before anything records this run's
  // addresses (its run plan, its CUDA graph), so every later step, and
  // every replay, reads aligned arguments.
  std::vector<Tensor> aligned_args;
  if (std::any_of(args.begin(), args.end(), misaligned_on_gpu)) {
    aligned_args.assign(args.begin(), args.end());
    for (Tensor& a : aligned_args) {
      if (misaligned_on_gpu(a)) a = a.contiguous();
    }
    args = aligned_args;
  }
  std::vector<Tensor> slots;
  // TESSERA_TRACE_KERNELS=1 prints each kernel's wall time to stderr.
  const char* trace_env = std::getenv("TESSERA_TRACE_KERNELS");
  const bool trace = trace_env && *trace_env && std::string(trace_env) != "0";
  cpu::LaunchOptions launch_options;
  launch_options.num_threads = state_->num_threads;
  // On a GPU the kernels queue on the device's default stream without
  // synchronizing. Each writes its first fault (an index out of range, an
  // integer division by zero: no Graph IR op can cause one today, as indices
  // are checked on the host, but a template bug must not pass silently)
  // into its slot of the executable's record (one for run(), one per CUDA
  // graph), which a deferred check reads at the next host read of the device and raises
  // naming the kernel and its op (tessera/runtime/cuda.h). TESSERA_CUDA_SYNC=1
  // (or TESSERA_TRACE_KERNELS) synchronizes after every launch instead.
  const bool on_gpu = device != "cpu";
  const char* sync_env = std::getenv("TESSERA_CUDA_SYNC");
  const bool sync_each = trace || (sync_env && *sync_env && std::string(sync_env) != "0");
  const int ordinal = on_gpu ? cuda::parse_device(device) : 0;
  std::shared_ptr<void> fault_slots;
  const std::size_t fault_bytes = state_->steps.size() * cuda::kFaultRecordBytes;
  auto new_fault_record = [&] {
    std::shared_ptr<void> record = cuda::allocate_shared(ordinal, std::max<std::size_t>(fault_bytes, 1));
    cuda::memset_async(ordinal, reinterpret_cast<cuda::DevicePtr>(record.get()), 0, fault_bytes);
    return record;
  };
  if (on_gpu && !sync_each) {
    // A program that never reads back would pile up checks: past 64, read them (one synchronization).
    if (cuda::pending_checks(ordinal) >= 64) cuda::run_deferred_checks(ordinal);
    if (!use_graph) {  // a graph's is its own (below)
      std::lock_guard<std::mutex> lock(state_->run_record_mutex);
      if (!state_->run_fault_record) state_->run_fault_record = new_fault_record();
      fault_slots = state_->run_fault_record;
    }
  }
  cuda::KernelLaunchOptions gpu_options;
  gpu_options.check_faults = sync_each;
  // A plain run of a signature seen before replays its run plan (run_plan.h,
  // docs/design/0048); the first one walks the steps and records it.
  // TESSERA_RUN_PLANS=0 walks every run. Checked and profiled runs walk.
  std::shared_ptr<const RunPlan> plan;
  std::optional<std::size_t> plan_entry;  // the entry a walking run records into
  if (!use_graph && !sync_each && !profiler::active() && run_plans_enabled()) {
    const std::vector<std::int64_t> aliases = argument_aliases(args);
    std::lock_guard<std::mutex> lock(state_->plans_mutex);
    bool seen = false;
    for (const Executable::State::PlanEntry& e : state_->plans) {
      if (e.shapes.size() != args.size() || e.aliases != aliases) continue;
      bool same = true;
      for (std::size_t i = 0; i < args.size() && same; ++i) {
        same = e.shapes[i] == args[i].shape() && e.strides[i] == args[i].strides() && e.policies[i] == args[i].policy();
      }
      if (!same) continue;
      seen = true;
      plan = e.plan;
      if (!plan && !e.recording && e.refusal.empty()) {
        plan_entry = static_cast<std::size_t>(&e - state_->plans.data());
        state_->plans[*plan_entry].recording = true;
      }
      break;
    }
    // A few signatures per executable (a shape-generic one may see many).
    if (!seen && state_->plans.size() < 16) {
      Executable::State::PlanEntry e;
      e.recording = true;
      e.aliases = aliases;
      for (const Tensor& a : args) {
        e.shapes.push_back(a.shape());
        e.strides.push_back(a.strides());
        e.policies.push_back(a.policy());
      }
      plan_entry = state_->plans.size();
      state_->plans.push_back(std::move(e));
    }
  }
  const graph::SymbolBindings bindings = plan ? graph::SymbolBindings{} : graph::bind_arguments(func, args);
  std::unordered_map<const ir::Value*, Tensor> values;
  // The arguments as the kernels read them: a view is copied first (a plan
  // replays its own copies of views).
  std::vector<Tensor> contiguous;
  for (std::size_t i = 0; i < args.size(); ++i) {
    contiguous.push_back(plan || args[i].is_contiguous() ? args[i] : args[i].contiguous());
    if (!plan) values[body.argument(i)] = contiguous.back();
  }
  // However this run ends, its entry is no longer being recorded.
  struct RecordingEnds {
    Executable::State* state;
    std::optional<std::size_t> entry;
    ~RecordingEnds() {
      if (!entry) return;
      std::lock_guard<std::mutex> lock(state->plans_mutex);
      state->plans[*entry].recording = false;
    }
  } recording_ends{state_.get(), plan_entry};
  std::optional<PlanRecorder> plan_recorder;
  if (plan_entry) {
    std::vector<Tensor> kept;  // what the executable holds: tables and constants
    for (const Step& s : state_->steps) {
      kept.insert(kept.end(), s.tables.begin(), s.tables.end());
      if (s.constant.defined()) kept.push_back(s.constant);
    }
    plan_recorder.emplace(args, std::move(kept));
    for (std::size_t i = 0; i < args.size(); ++i) {
      if (!args[i].is_contiguous()) plan_recorder->gathered(args[i], contiguous[i]);
    }
  }
  // run_graph: the launches build (first call for these shapes) or update
  // (later calls) a CUDA graph, which runs once every node is set. With
  // TESSERA_CUDA_SYNC or TESSERA_TRACE_KERNELS, which check each launch, it
  // launches one by one as run() does.
  if (use_graph && !on_gpu) {
    raise(ErrorCode::ArgumentInvalid, "run_graph needs a CUDA executable; " + state_->function + " runs on cpu");
  }
  GraphRecorder recorder;
  std::unique_lock<std::mutex> graph_lock(state_->graphs_mutex, std::defer_lock);
  // A graph being built is the executable's only once it is complete.
  Executable::State::CapturedGraph building;
  std::vector<GraphCollective>* collectives = nullptr;
  std::size_t collective_index = 0;
  const DirectReplay* replay = nullptr;
  std::vector<RecordedLaunch> recorded;  // a graph being built: its launches,
  std::vector<Tensor> allocated;         // and the buffers its run allocates
  if (use_graph && !sync_each) {
    graph_lock.lock();  // one run at a time updates a graph's nodes
    for (const Tensor& a : args) building.shapes.push_back(a.shape());
    for (auto g = state_->graphs.begin(); g != state_->graphs.end(); ++g) {
      if (g->shapes != building.shapes) continue;
      if (!g->graph->stale().empty()) {
        // Its captured collectives may not run again (their communicators
        // were aborted): dropped, and captured anew below.
        state_->graphs.erase(g);
        break;
      }
      recorder.graph = g->graph.get();
      fault_slots = g->fault_record;
      collectives = &g->collectives;
      if (g->replay) replay = &*g->replay;
      break;
    }
    if (recorder.graph == nullptr) {
      collectives = &building.collectives;
      building.graph = std::make_shared<cuda::KernelGraph>(ordinal);
      building.fault_record = fault_slots = new_fault_record();
      recorder.graph = building.graph.get();
      recorder.building = true;
      recorder.launches = &recorded;
    }
  }
  std::vector<Tensor> held;  // a graph's scratch buffers, until the graph is launched
  const Launcher launch{&launch_options, &gpu_options, recorder.graph ? &recorder : nullptr, &held,
                        plan_recorder ? &*plan_recorder : nullptr, state_->steps.data()};
  // Drops what the previous step read last (release_plan). A graph's
  // kernels run after every step is recorded, so a recording keeps them all.
  auto release = [&](const Step& done) {
    if (recorder.graph) return;
    for (const ir::Value* v : done.release) values.erase(v);
    for (const std::int64_t slot : done.release_slots) {
      if (static_cast<std::size_t>(slot) < slots.size()) slots[static_cast<std::size_t>(slot)] = Tensor();
    }
  };
  // A graph's: the function's arguments as the kernels read them (contiguous).
  std::vector<Tensor> arguments;
  if (recorder.graph) arguments = contiguous;
  std::vector<Tensor> function_results;
  // A direct replay sets the graph's nodes without walking the steps.
  if (replay) function_results = replay->update(recorder, arguments);
  if (plan) {
    function_results = plan->replay(contiguous, [&](std::size_t i, std::int64_t grid, std::vector<cpu::KernelArg> a) {
      if (fault_slots) {
        gpu_options.fault_record = reinterpret_cast<cuda::DevicePtr>(fault_slots.get()) + i * cuda::kFaultRecordBytes;
      }
      launch(state_->steps[i], grid, std::move(a));
    }, [&](std::size_t i, const Error& e) {
      const ir::Operation& k = *state_->steps[i].kernel;
      const ir::Operation& first = kernel_root_op(k);
      ir::rethrow_for_op(e, "kernel " + kernel_name(k) + " (" + std::string(first.name()) + ")", first.location());
    });
  }
  std::size_t step_index = 0;
  for (const Step& step : replay || plan ? std::span<const Step>() : std::span<const Step>(state_->steps)) {
    const std::size_t this_step = step_index++;
    if (this_step > 0) release(state_->steps[this_step - 1]);
    if (fault_slots) {
      gpu_options.fault_record =
          reinterpret_cast<cuda::DevicePtr>(fault_slots.get()) + this_step * cuda::kFaultRecordBytes;
    }
    const ir::Operation& k = *step.kernel;
    std::vector<Tensor> inputs;
    for (ir::Value* v : k.operands()) inputs.push_back(values.at(v));
    if (step.variant == "constant") {
      values[k.result(0)] = step.constant;
      continue;
    }
    if (step.variant == "reference") {
      if (plan_recorder) plan_recorder->refuse("a kernel runs on the reference executor");
      // The Mapper asked for the oracle: the kernel's ops on the reference executor, on the host.
      if (recorder.graph) {
        raise(ErrorCode::ArgumentInvalid,
              "kernel " + kernel_name(k) + " (" + std::string(kernel_root_op(k).name()) +
                  ") runs on the reference executor (the Mapper's 'reference' variant), on the host, which cannot "
                  "happen inside a CUDA graph; call the function without capture_graph",
              kernel_root_op(k).location());
      }
      try {
        std::vector<Tensor> results = run_reference_kernel(k, inputs, device);
        for (std::size_t j = 0; j < k.num_results(); ++j) values[k.result(j)] = results.at(j);
      } catch (const Error& e) {
        ir::rethrow_for_op(e, "kernel " + kernel_name(k) + " (" + std::string(kernel_root_op(k).name()) + ")",
                           kernel_root_op(k).location());
      }
      continue;
    }
    if (step.variant == "view" || step.variant == "collective") {
      // The kernel yields the view op's results that are used, in order.
      const ir::Operation& op = kernel_root_op(k);
      std::vector<std::vector<std::int64_t>> sizes;
      for (ir::Value* r : op.results()) sizes.push_back(concrete_sizes(r->type(), bindings));
      // In a graph, a collective over several shards becomes nodes: its
      // communicator's work is captured once and replayed with the graph.
      const bool graph_collective =
          recorder.graph && kernel_family(k) == Family::collective && op.attrs().get_int("axis_size") != 1;
      if (plan_recorder && step.variant == "collective") plan_recorder->refuse("a collective communicates");
      std::vector<Tensor> results;
      if (!graph_collective) {
        results = apply_view(op, inputs, sizes);
      } else {
        try {
          results = collective_in_graph(op, inputs.at(0), sizes, recorder, *collectives, collective_index);
        } catch (const Error& e) {
          ir::rethrow_for_op(e, "kernel " + kernel_name(k) + " (" + std::string(op.name()) + ")", op.location());
        }
      }
      const ir::Operation& yield = *kernel_body(k).terminator();
      for (std::size_t j = 0; j < k.num_results(); ++j) {
        for (std::size_t r = 0; r < op.num_results(); ++r) {
          if (op.result(r) == yield.operand(j)) values[k.result(j)] = results.at(r);
        }
      }
      continue;
    }
    // Kernels read their operands contiguous and, on a GPU, aligned (a
    // view's consumer copies it here; on a GPU by a gather kernel, in a
    // graph as one of its nodes).
    for (Tensor& t : inputs) {
      if (t.is_contiguous() && !misaligned_on_gpu(t)) continue;
      if (recorder.graph) {
        Tensor gathered = Tensor::empty(t.shape(), t.policy(), device);
        recorder.gather(t, gathered);
        held.push_back(gathered);  // until the graph has run
        t = gathered;
        continue;
      }
      Tensor copy = t.contiguous();
      if (plan_recorder) plan_recorder->gathered(t, copy);
      t = copy;
    }
    const auto domain =
        concrete_sizes(ir::Type::tensor(k.attrs().get_shape("domain"), k.result(0)->type().policy), bindings);
    const std::int64_t n = graph::numel_of(domain);
    std::vector<Tensor> outputs;
    for (std::size_t j = 0; j < k.num_results(); ++j) {
      const ir::Type& t = k.result(j)->type();
      const std::int64_t slot = step.buffers[j];
      Tensor out;
      if (slot >= 0 && static_cast<std::size_t>(slot) < slots.size() && slots[static_cast<std::size_t>(slot)].defined()) {
        out = slots[static_cast<std::size_t>(slot)];
      } else {
        // Every template writes each element of its outputs.
        const std::vector<std::int64_t> sizes = concrete_sizes(t, bindings);
        try {
          out = Tensor::empty(sizes, t.policy, device);
          if (recorder.building) allocated.push_back(out);
          if (plan_recorder) plan_recorder->allocated(out);
        } catch (const std::bad_alloc&) {
          const ir::Operation& first = kernel_root_op(k);
          raise(ErrorCode::OutOfMemory,
                "kernel " + kernel_name(k) + " (" + std::string(first.name()) + "): cannot allocate its result " +
                    ir::print_type(ir::Type::tensor(ir::fixed_shape(sizes), t.policy)) + " (" +
                    std::to_string(graph::numel_of(sizes)) + " elements) on " + device,
                first.location());
        }
        if (slot >= 0) {
          if (slots.size() <= static_cast<std::size_t>(slot)) slots.resize(static_cast<std::size_t>(slot) + 1);
          slots[static_cast<std::size_t>(slot)] = out;
        }
      }
      outputs.push_back(out);
      values[k.result(j)] = out;
    }
    if (n == 0) {
      if (plan_recorder) plan_recorder->refuse("a kernel has an empty domain");
      continue;
    }
    for (const auto& [input, d] : step.tile.nonempty_dims) {
      if (inputs[input].shape().at(d) == 0) {
        const ir::Operation& first = kernel_root_op(k);
        raise(ErrorCode::ShapeMismatch,
              std::string(first.name()) + " over axis " + std::to_string(d) + " of size 0 has no result: the reduction is empty",
              first.location());
      }
    }
    try {
      const auto t0 = std::chrono::steady_clock::now();
      std::optional<profiler::Span> span;
      if (profiler::active() && !recorder.graph) span.emplace(profile_record(step, state_->function, device, inputs, outputs));
      launch_step(step, inputs, outputs, domain, launch);
      if (span) span->end();
      if (trace) {
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        std::fprintf(stderr, "tessera: %s %s (%s, %s) %.3f ms\n", state_->function.c_str(), kernel_name(k).c_str(),
                     std::string(kernel_root_op(k).name()).c_str(), std::string(family_name(kernel_family(k))).c_str(),
                     ms);
      }
    } catch (const Error& e) {
      const ir::Operation& first = kernel_root_op(k);
      ir::rethrow_for_op(e, "kernel " + kernel_name(k) + " (" + std::string(first.name()) + ")", first.location());
    }
  }
  if (!replay && !plan) {
    for (ir::Value* v : ir::function_results(func)) function_results.push_back(values.at(v));
  }
  if (plan_recorder) {
    std::shared_ptr<const RunPlan> made = plan_recorder->finish(function_results, device);
    std::lock_guard<std::mutex> lock(state_->plans_mutex);
    state_->plans[*plan_entry].plan = std::move(made);
    state_->plans[*plan_entry].refusal = plan_recorder->refusal();
  }
  if (recorder.graph) {
    if (recorder.building) {
      if (!recorder.other_nodes) {
        building.replay = DirectReplay::make(std::move(recorded), arguments, function_results, allocated, device);
      }
      recorder.graph->instantiate();
      state_->graphs.push_back(std::move(building));
    }
    if (recorder.next != recorder.graph->size()) {
      raise(ErrorCode::Internal, "a graph replay of " + state_->function + " made " + std::to_string(recorder.next) +
                                     " launches; its graph has " + std::to_string(recorder.graph->size()));
    }
    std::optional<profiler::Span> span;
    if (profiler::active()) {
      profiler::Record r;
      r.kind = "graph";
      r.name = "graph replay of " + state_->function;
      r.function = state_->function;
      r.device = device;
      span.emplace(std::move(r));
    }
    recorder.graph->launch(nullptr);
    if (span) span->end();
  }
  if (fault_slots && state_->fault_slots && !state_->fault_slots->empty()) {
    // What the check needs outlives this call: the record, and the steps'
    // kernels and labels (shared with the executable). An executable
    // without GPU kernels (views and collectives only) has nothing to check.
    const std::size_t count = state_->steps.size();
    cuda::defer_check(ordinal, fault_slots.get(), [ordinal, fault_slots, count, slots = state_->fault_slots] {
      std::vector<unsigned char> host(count * cuda::kFaultRecordBytes);
      const auto device_record = reinterpret_cast<cuda::DevicePtr>(fault_slots.get());
      cuda::copy_to_host(ordinal, host.data(), device_record, host.size());
      for (const Executable::State::FaultSlot& s : *slots) {
        const unsigned char* record = host.data() + s.index * cuda::kFaultRecordBytes;
        std::optional<std::pair<ErrorCode, std::string>> bad;
        if (s.kernel) {
          if (auto f = cuda::describe_fault(*s.kernel, record)) bad.emplace(f->code, f->message);
        } else if (auto f = cuda_tile::describe_fault(*s.tile_kernel, record)) {
          bad.emplace(f->code, f->message);
        }
        if (bad) {
          // Raised once: the record's later runs (queued after this read) start from zero.
          cuda::memset_async(ordinal, device_record, 0, host.size());
          try {
            raise(bad->first, bad->second);
          } catch (const Error& e) {
            ir::rethrow_for_op(e, s.label, s.where);
          }
        }
      }
    });
  }
  return function_results;
}

std::string Executable::schedule_ir() const {
  return ir::print_module(state_->schedule);
}
std::string Executable::tile_ir() const {
  return ir::print_module(state_->tile);
}
std::string Executable::target() const {
  std::string out;
  for (const Step& s : state_->steps) {
    if (s.gpu) {
      out += "// ---- kernel " + kernel_name(*s.kernel) + " (" + s.gpu->name + ", " + s.gpu->arch + ") ----\n" +
             s.gpu->source + "\n";
    }
    if (s.tile_gpu) {
      out += "// ---- kernel " + kernel_name(*s.kernel) + " (" + s.tile_gpu->name + ", cuda_tile " +
             s.tile_gpu->arch + ") ----\n" + s.tile_gpu->text + "\n";
    }
    if (!s.compiled) continue;
    out += "// ---- kernel " + kernel_name(*s.kernel) + " (" + s.compiled->name + ") ----\n" + s.compiled->source + "\n";
  }
  return out;
}
std::string Executable::ptx() const {
  if (state_->device == "cpu") {
    raise(ErrorCode::ArgumentInvalid, "PTX exists for CUDA executables; " + state_->function +
                                          " runs on cpu (its target code is C++: inspect_ir(\"target\"))");
  }
  cuda::KernelCompileOptions o;
  o.device = cuda::parse_device(state_->device);
  o.ptx = true;
  std::string out;
  for (const Step& s : state_->steps) {
    if (!s.gpu || !s.tile.func) continue;
    const cuda::CompiledKernel k = cuda::compile_kernel(*s.tile.func, o);
    out += "// ---- kernel " + kernel_name(*s.kernel) + " (" + k.name + ", " + k.arch + ") ----\n" + k.ptx + "\n";
  }
  return out;
}
const std::string& Executable::device() const {
  return state_->device;
}
const std::vector<KernelReport>& Executable::kernels() const {
  return state_->reports;
}
double Executable::compile_seconds() const {
  return state_->compile_seconds;
}

std::string default_backend() {
  const char* env = std::getenv("TESSERA_BACKEND");
  const std::string value = env && *env ? env : "compiled";
  if (value != "reference" && value != "compiled") {
    raise(ErrorCode::ArgumentInvalid, "TESSERA_BACKEND is '" + value + "'; expected 'compiled' or 'reference'");
  }
  return value;
}

}  // namespace tessera::schedule
