// Run plans: a plain run's launches replayed without walking the steps (run_plan.h).
#include "schedule/run_plan.h"

#include <algorithm>
#include <cstring>
#include <new>

#include "tessera/runtime/cuda.h"
#include "tessera/support/error.h"

namespace tessera::schedule {
namespace {

bool same_storage(const std::weak_ptr<const std::byte>& a, const std::weak_ptr<const std::byte>& b) {
  return !a.owner_before(b) && !b.owner_before(a);
}

const std::byte* address(const Tensor& t) { return static_cast<const std::byte*>(t.device_data()); }

bool same_view(const Tensor& a, const Tensor& b) {
  return address(a) == address(b) && a.shape() == b.shape() && a.strides() == b.strides() && a.policy() == b.policy();
}

}  // namespace

std::vector<std::int64_t> argument_aliases(std::span<const Tensor> args) {
  const auto plain = [](const Tensor& t) { return t.defined() && !is_packed(t.dtype()) && t.numel() > 0; };
  std::vector<std::weak_ptr<const std::byte>> handles;
  for (const Tensor& a : args) handles.push_back(a.storage_handle());
  std::vector<std::int64_t> out(args.size(), -1);
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (!plain(args[i])) continue;
    for (std::size_t j = 0; j < i; ++j) {
      if (args[j].defined() && same_storage(handles[i], handles[j])) {
        out[i] = plain(args[j]) && same_view(args[i], args[j]) ? static_cast<std::int64_t>(j) : -2;
        break;
      }
    }
  }
  return out;
}

PlanRecorder::PlanRecorder(std::span<const Tensor> args, std::vector<Tensor> held)
    : args_(args.begin(), args.end()), plan_(std::make_unique<RunPlan>()) {
  for (const Tensor& a : args_) {
    if (!a.defined() || is_packed(a.dtype()) || a.numel() == 0) {
      refuse("an argument is empty or packed");
      return;
    }
    arg_handles_.push_back(a.storage_handle());
  }
  // An argument on an earlier one's storage must be the same view of it
  // (f(x, x)): a launch's tensor then takes the first, and the plan's
  // signature (argument_aliases) says which arguments are one tensor.
  const std::vector<std::int64_t> aliases = argument_aliases(args_);
  if (std::find(aliases.begin(), aliases.end(), -2) != aliases.end()) {
    refuse("two arguments are different views of one storage");
    return;
  }
  for (const Tensor& t : held) {
    if (t.defined()) held_.push_back(t.storage_handle());
  }
}

auto PlanRecorder::rebase(std::size_t position, const Where& w, const Tensor& t) {
  return RunPlan::Rebase{position, w.argument, w.source, w.delta, t.shape(), t.strides(), t.policy(), 0};
}

void PlanRecorder::refuse(std::string why) {
  if (refusal_.empty()) refusal_ = std::move(why);
}

void PlanRecorder::allocated(const Tensor& t) {
  if (refused()) return;
  if (is_packed(t.dtype()) || t.numel() == 0) return refuse("an empty or packed buffer");
  allocations_.push_back({t.storage_handle(), address(t), t.shape(), t.policy(), plan_->launches_.size(), std::nullopt,
                          false});
}

void PlanRecorder::gathered(const Tensor& view, const Tensor& copy) {
  if (refused()) return;
  const Where w = locate(view);
  if (!w.found || w.held) return refuse("a view the run copies is neither in an argument nor in a buffer of the run");
  if (is_packed(copy.dtype()) || copy.numel() == 0) return refuse("an empty or packed buffer");
  const std::size_t index = plan_->launches_.size();
  if (!w.argument) allocations_[w.source].last_launch = index;
  RunPlan::Planned planned;
  planned.into = allocations_.size();
  planned.rebases.push_back(rebase(0, w, view));
  allocations_.push_back({copy.storage_handle(), address(copy), copy.shape(), copy.policy(), index, std::nullopt, true});
  plan_->launches_.push_back(std::move(planned));
}

PlanRecorder::Where PlanRecorder::locate(const Tensor& t) const {
  Where w;
  if (!t.defined() || is_packed(t.dtype()) || t.numel() == 0) return w;
  const auto h = t.storage_handle();
  for (std::size_t a = 0; a < args_.size(); ++a) {
    if (same_storage(h, arg_handles_[a])) return {true, true, false, a, address(t) - address(args_[a])};
  }
  // The latest allocation of that storage (the handle names one allocation).
  for (std::size_t j = allocations_.size(); j-- > 0;) {
    if (same_storage(h, allocations_[j].handle)) return {true, false, false, j, address(t) - allocations_[j].base};
  }
  for (const auto& held : held_) {
    if (same_storage(h, held)) return {true, false, true, 0, 0};
  }
  return w;
}

void PlanRecorder::launch(std::size_t step, const cuda::CompiledKernel* gpu, const cpu::CompiledKernel* host,
                          std::int64_t grid, const std::vector<cpu::KernelArg>& args,
                          const cuda::KernelLaunchOptions& options, const cpu::LaunchOptions& host_options) {
  if (refused()) return;
  const std::size_t index = plan_->launches_.size();
  RunPlan::Planned planned;
  planned.step = step;
  planned.grid = grid;
  planned.args = args;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const Tensor* t = std::get_if<Tensor>(&args[i].value);
    if (t == nullptr) continue;
    const Where w = locate(*t);
    if (!w.found) return refuse("a kernel reads a tensor that is neither an argument, a buffer of the run, nor held");
    if (w.held) continue;  // the executable keeps it: the launch keeps it too
    if (!w.argument) allocations_[w.source].last_launch = index;
    planned.rebases.push_back(rebase(i, w, *t));
    planned.args[i] = cpu::KernelArg(Tensor());  // not held by the plan
  }
  // A generated kernel: its block is launched again with the addresses
  // rewritten, and its tensor maps (which embed addresses) encoded anew.
  if (gpu != nullptr) {
    planned.prepared = cuda::prepare_launch(*gpu, grid, args, options);
    if (!planned.prepared) return refuse("an empty grid");
    if (!gpu->tma_maps.empty()) planned.mapped = gpu;
    for (RunPlan::Rebase& r : planned.rebases) r.param_offset = cuda::param_address_offset(r.position);
  }
  if (host != nullptr) {
    planned.host_prepared = cpu::prepare_launch(*host, grid, args);
    planned.host = host;
    planned.host_options = host_options;
    if (!planned.host_prepared) return refuse("packed sub-byte operands, or an empty grid");
  }
  plan_->launches_.push_back(std::move(planned));
}

std::shared_ptr<const RunPlan> PlanRecorder::finish(std::span<const Tensor> results, const std::string& device) {
  if (refused()) return nullptr;
  RunPlan& plan = *plan_;
  plan.device_ = device;
  std::vector<bool> kept(allocations_.size(), false);  // a result's buffer lives on
  for (const Tensor& r : results) {
    const Where w = locate(r);
    if (!w.found) {
      refuse("a result is neither an argument, a buffer of the run, nor held");
      return nullptr;
    }
    if (w.held) {
      plan.results_.push_back({r, {}});
      continue;
    }
    if (!w.argument) kept[w.source] = true;
    plan.results_.push_back({Tensor(), rebase(0, w, r)});
  }
  // Each buffer is made before the launch it was allocated before (or
  // before the end, when no launch follows) and dropped after its last
  // launch unless a result lives in it.
  for (std::size_t j = 0; j < allocations_.size(); ++j) {
    const Allocation& a = allocations_[j];
    plan.buffers_.push_back({a.shape, a.policy});
    if (!a.last_launch && !kept[j]) continue;  // never read: nothing to make
    if (a.first_launch >= plan.launches_.size()) {
      refuse("a result buffer no kernel writes");
      return nullptr;
    }
    if (!a.gathered) plan.launches_[a.first_launch].allocate.push_back(j);
    if (!kept[j]) plan.launches_[*a.last_launch].release.push_back(j);
  }
  return std::shared_ptr<const RunPlan>(plan_.release());
}

const Tensor& RunPlan::source(const Rebase& r, std::span<const Tensor> args, const std::vector<Tensor>& buffers) {
  return r.argument ? args[r.source] : buffers[r.source];
}

Tensor RunPlan::rebuild(const Rebase& r, std::span<const Tensor> args, const std::vector<Tensor>& buffers) {
  const Tensor& from = source(r, args, buffers);
  if (r.delta == 0 && from.shape() == r.shape && from.strides() == r.strides && from.policy() == r.policy) return from;
  return from.view_bytes(r.delta, r.shape, r.strides, r.policy);
}

void RunPlan::run(const Planned& p, std::span<const Tensor> args, std::vector<Tensor>& buffers, const Launch& launch,
                  Scratch& scratch) const {
  auto at = [&](const Rebase& r) { return const_cast<std::byte*>(address(source(r, args, buffers)) + r.delta); };
  if (p.into) {
    buffers[*p.into] = rebuild(p.rebases.front(), args, buffers).contiguous();
    return;
  }
  if (p.prepared) {
    scratch.block.assign(p.prepared->params.begin(), p.prepared->params.end());
    for (const Rebase& r : p.rebases) {
      const std::byte* address_of = at(r);
      std::memcpy(scratch.block.data() + r.param_offset, &address_of, sizeof address_of);
    }
    // A map that cannot describe a new buffer: prepared anew below, as the walk would.
    if (!p.mapped || cuda::refresh_tensor_maps(*p.mapped, *p.prepared, scratch.block)) {
      void* params[] = {scratch.block.data(), nullptr};
      p.prepared->function->launch(p.prepared->config, params);
      return;
    }
  }
  if (p.host_prepared) {
    scratch.addresses.assign(p.args.size(), nullptr);
    for (const Rebase& r : p.rebases) scratch.addresses[r.position] = at(r);
    cpu::launch_prepared(*p.host, *p.host_prepared, scratch.addresses, p.host_options);
    return;
  }
  std::vector<cpu::KernelArg> launch_args = p.args;
  for (const Rebase& r : p.rebases) launch_args[r.position] = rebuild(r, args, buffers);
  launch(p.step, p.grid, std::move(launch_args));
}

std::vector<Tensor> RunPlan::replay(std::span<const Tensor> args, const Launch& launch, const Failed& failed) const {
  std::vector<Tensor> buffers(buffers_.size());
  Scratch scratch;
  for (const Planned& p : launches_) {
    for (const std::size_t j : p.allocate) {
      try {
        buffers[j] = Tensor::empty(buffers_[j].shape, buffers_[j].policy, device_);
      } catch (const std::bad_alloc&) {
        std::int64_t n = 1;
        for (const std::int64_t d : buffers_[j].shape) n *= d;
        raise(ErrorCode::OutOfMemory, "cannot allocate a buffer of " + std::to_string(n) + " elements on " + device_);
      }
    }
    try {
      run(p, args, buffers, launch, scratch);
    } catch (const Error& e) {
      if (!p.into) failed(p.step, e);  // a gather belongs to no step's kernel
      throw;
    }
    for (const std::size_t j : p.release) buffers[j] = Tensor();
  }
  std::vector<Tensor> out;
  for (const Result& r : results_) {
    out.push_back(r.held.defined() ? r.held : rebuild(r.where, args, buffers));
  }
  return out;
}

}  // namespace tessera::schedule
