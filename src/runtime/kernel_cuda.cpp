// Kernels on GPUs: the part of Kernel that sends launches whose tensors live
// on cuda:N to the CUDA backend (tessera/backends/cuda/cuda_backend.h), times
// autotune candidates there, and shows the CUDA C++ and PTX for inspect_ir.
// kernel.cpp decides where a launch goes (arguments_device) and calls in
// here; autotune.cpp's search loop uses the CUDA candidate runner.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "runtime/kernel_state.h"
#include "tessera/backends/cuda/cuda_backend.h"
#include "tessera/runtime/cuda.h"
#include "tessera/support/error.h"

namespace tessera {

// ---- KernelSpecialization, CUDA side ----

const cuda::CompiledKernel& KernelSpecialization::cuda_compiled(int device, const std::string& cache_dir) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& slot = cuda_compiled_[device];
  if (!slot) {
    cuda::KernelCompileOptions options;
    options.device = device;
    options.cache_dir = cache_dir;
    slot = std::make_shared<const cuda::CompiledKernel>(cuda::compile_kernel(*func_, options));
  }
  return *slot;
}

namespace {

// The architecture code is emitted for: `arch`, else cuda:`device`'s own,
// else sm_90a (Hopper, the backend's main target) where there is no GPU.
std::string arch_for(int device, const std::string& arch) {
  if (!arch.empty()) return arch;
  if (cuda::available() && device < cuda::device_count()) return cuda::device_properties(device).arch();
  return "sm_90a";
}

}  // namespace

std::string KernelSpecialization::cuda_source(int device, const std::string& arch) const {
  const std::string target = arch_for(device, arch);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = cuda_compiled_.find(device); it != cuda_compiled_.end() && it->second && it->second->arch == target) {
      return it->second->source;
    }
  }
  cuda::KernelCompileOptions options;
  options.device = device;
  options.arch = target;
  return cuda::emit_kernel_source(*func_, options);
}

namespace detail {

int arguments_device(const Kernel& kernel, const std::vector<cpu::KernelArg>& args) {
  const auto& params = kernel.decl().params;
  int device = -1;
  std::string first;  // "'x' on cuda:0", the tensor that set `device`
  for (std::size_t i = 0; i < args.size(); ++i) {
    const Tensor* t = std::get_if<Tensor>(&args[i].value);
    if (t == nullptr || !t->defined()) continue;
    const std::string param = i < params.size() ? params[i].name : "argument " + std::to_string(i);
    const int here = t->is_cpu() ? -1 : cuda::parse_device(t->device());
    if (first.empty()) {
      device = here;
      first = "'" + param + "' on " + t->device();
    } else if (here != device) {
      const std::string to = device >= 0 ? "cuda:" + std::to_string(device) : "cpu";
      raise(ErrorCode::ArgumentInvalid, "kernel '" + kernel.name() + "': tensor arguments live on different " +
                                            "devices (" + first + ", '" + param + "' on " + t->device() +
                                            "); a launch runs on one device: move them with .to(\"" + to + "\")");
    }
  }
  return device;
}

void launch_on_cuda(KernelSpecialization& spec, int device, std::int64_t groups, std::vector<cpu::KernelArg> args,
                    const KernelLaunchOptions& options) {
  const cuda::CompiledKernel& compiled = spec.cuda_compiled(device, options.cache_dir);
  cuda::launch(compiled, groups, std::move(args));  // default stream; synchronizes and raises faults
}

namespace {

class CudaRunner final : public CandidateRunner {
 public:
  CudaRunner(int device, const KernelLaunchOptions& options) : device_(device), options_(options), stream_(device) {
    // Work the caller queued on the arguments (other streams) is done before
    // candidates read them on this non-blocking stream.
    cuda::synchronize(device);
  }
  Tensor scratch_from(const Tensor& host) override { return host.to("cuda:" + std::to_string(device_)); }

  void compile(KernelSpecialization& spec) override { spec.cuda_compiled(device_, options_.cache_dir); }

  double warm_up(KernelSpecialization& spec, std::int64_t groups, const std::vector<cpu::KernelArg>& args) override {
    cuda::KernelLaunchOptions launch;
    launch.stream = &stream_;
    launch.check_faults = true;  // synchronizes the stream and raises what the kernel recorded
    const auto start = std::chrono::steady_clock::now();
    cuda::launch(spec.cuda_compiled(device_, options_.cache_dir), groups, args, launch);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  std::vector<double> timed(KernelSpecialization& spec, std::int64_t groups, const std::vector<cpu::KernelArg>& args,
                            int runs) override {
    const cuda::CompiledKernel& compiled = spec.cuda_compiled(device_, options_.cache_dir);
    cuda::KernelLaunchOptions launch;
    launch.stream = &stream_;
    // The warm-up checked faults on these arguments; timed runs neither
    // record faults nor synchronize, so the events bracket the kernel alone.
    launch.check_faults = false;
    std::vector<cuda::Event> starts, ends;
    starts.reserve(static_cast<std::size_t>(runs));
    ends.reserve(static_cast<std::size_t>(runs));
    try {
      for (int r = 0; r < runs; ++r) {
        std::vector<cpu::KernelArg> copy = args;  // copied before the start event, not timed
        starts.emplace_back(device_);
        ends.emplace_back(device_);
        starts.back().record(stream_);
        cuda::launch(compiled, groups, std::move(copy), launch);
        ends.back().record(stream_);
      }
    } catch (const Error&) {
      // Nothing queued may still write the scratch copies once they go back
      // to the allocator.
      stream_.synchronize();
      throw;
    }
    stream_.synchronize();
    std::vector<double> seconds;
    for (int r = 0; r < runs; ++r) {
      const auto i = static_cast<std::size_t>(r);
      seconds.push_back(static_cast<double>(cuda::elapsed_ms(starts[i], ends[i])) * 1e-3);
    }
    return seconds;
  }

 private:
  int device_;
  KernelLaunchOptions options_;
  cuda::Stream stream_;
};

}  // namespace

std::unique_ptr<CandidateRunner> cuda_candidate_runner(int device, const KernelLaunchOptions& options) {
  return std::make_unique<CudaRunner>(device, options);
}

int parse_target(const Kernel& kernel, const std::string& target) {
  if (target == "cpu") return -1;
  if (target == "cuda" || target.rfind("cuda:", 0) == 0) {
    try {
      return cuda::parse_device(target);
    } catch (const Error&) {
      // Reported below with the kernel's name.
    }
  }
  raise(ErrorCode::ArgumentInvalid, "kernel '" + kernel.name() + "': inspect_ir target is \"cpu\", \"cuda\" or " +
                                        "\"cuda:N\", got '" + target + "'");
}

std::string cuda_ptx(const KernelSpecialization& spec, const std::string& kernel, int device, const std::string& arch) {
  cuda::CompileOptions options;
  options.arch = arch_for(device, arch);  // given, NVRTC needs no GPU
  options.ptx = true;
  // The flags the CUDA backend compiles its kernels with (no contraction).
  options.extra = {"--fmad=false", "-std=c++17"};
  return cuda::compile(spec.cuda_source(device, options.arch), kernel + ".cu", device, options).ptx;
}

}  // namespace detail
}  // namespace tessera
