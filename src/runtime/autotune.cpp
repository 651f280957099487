// The kernel autotuner: searches a kernel's autotune space at launch.
//
// For a new key (argument shapes and dtypes, fixed constants, kernel source,
// device) every candidate of the tuned names is compiled and timed: one
// warm-up launch, then the median of several, on copies of the mutable
// arguments (made afresh from the caller's contents before each candidate),
// so the caller's outputs are written once, by the winner, in Kernel::launch.
// One search loop serves both backends; a CandidateRunner (kernel_state.h)
// compiles and times on the arguments' device: the CPU runner here (wall
// clock), the CUDA runner in kernel_cuda.cpp (CUDA events on a stream).
// Candidates that fail to compile or run (on a GPU also those needing more
// shared memory than the device has) are reported and skipped; when all
// fail, the first failure is raised. The winner is kept in memory and written
// to <cache root>/autotune/<sha256 of the key>.txt:
//
//     tessera-autotune 1
//     key <the key text>
//     BM 64
//     BN 32
//     end
//
// A file that does not have exactly this form for the current key (another
// key hashed alike, a truncated write, a name outside the space) is ignored
// and replaced by a fresh search.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "backends/cpu/compile_cache.h"
#include "backends/cpu/thread_pool.h"
#include "runtime/kernel_state.h"
#include "tessera/ir/type.h"
#include "tessera/runtime/cuda.h"
#include "tessera/support/error.h"

namespace tessera {
namespace {

using Clock = std::chrono::steady_clock;

std::string format_ms(double seconds) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(seconds < 0.01 ? 4 : 2) << seconds * 1e3 << " ms";
  return out.str();
}

// The host CPU's model name, for the device part of the key.
std::string read_cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const std::size_t colon = line.find(':');
      if (colon != std::string::npos) {
        std::string model = line.substr(colon + 1);
        model.erase(0, model.find_first_not_of(' '));
        return model;
      }
    }
  }
  return "unknown-cpu";
}

const std::string& cpu_model() {
  static const std::string model = read_cpu_model();
  return model;
}

std::int64_t scalar_as_int(const std::variant<Tensor, double, std::int64_t, bool>& v) {
  if (const auto* i = std::get_if<std::int64_t>(&v)) return *i;
  if (const auto* d = std::get_if<double>(&v)) return static_cast<std::int64_t>(*d);
  return std::get<bool>(v) ? 1 : 0;
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? "," : "") + std::to_string(shape[i]);
  return out + "]";
}

// A contiguous host copy with the same encodings.
Tensor copy_of(const Tensor& t) {
  if (t.is_cpu() && t.is_contiguous() && t.element_bytes() > 0) {
    Tensor copy = Tensor::zeros(t.shape(), t.policy());
    if (t.numel() > 0) {
      std::memcpy(copy.data(), t.data(),
                  static_cast<std::size_t>(t.numel()) * static_cast<std::size_t>(t.element_bytes()));
    }
    return copy;
  }
  if (!t.is_cpu()) return copy_of(t.to("cpu"));
  return Tensor::from_codes(t.codes(), t.shape(), t.policy());
}

// Candidates on the CPU backend, timed by the wall clock.
class CpuRunner final : public detail::CandidateRunner {
 public:
  explicit CpuRunner(const KernelLaunchOptions& options) : options_(options) {}

  Tensor scratch_from(const Tensor& host) override { return copy_of(host); }

  void compile(KernelSpecialization& spec) override { spec.compiled(options_.cache_dir); }

  double warm_up(KernelSpecialization& spec, std::int64_t groups, const std::vector<cpu::KernelArg>& args) override {
    const cpu::CompiledKernel& compiled = spec.compiled(options_.cache_dir);
    const auto start = Clock::now();
    cpu::launch(compiled, groups, args, options_.cpu);
    return std::chrono::duration<double>(Clock::now() - start).count();
  }

  std::vector<double> timed(KernelSpecialization& spec, std::int64_t groups, const std::vector<cpu::KernelArg>& args,
                            int runs) override {
    const cpu::CompiledKernel& compiled = spec.compiled(options_.cache_dir);
    std::vector<double> times;
    for (int r = 0; r < runs; ++r) {
      const auto start = Clock::now();
      cpu::launch(compiled, groups, args, options_.cpu);
      times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    }
    return times;
  }

 private:
  KernelLaunchOptions options_;
};

// The device part of the key for arguments on `device` (-1: the host).
std::string device_text(int device, const KernelLaunchOptions& options) {
  return device < 0 ? autotune_cpu_device(options) : autotune_cuda_device(cuda::device_properties(device));
}

// Every combination of the tuned names' candidates, the first name varying slowest.
std::vector<KernelConstants> candidates(const frontend::KernelDecl& decl, const std::vector<std::string>& tuned) {
  std::vector<KernelConstants> out{KernelConstants{}};
  for (const auto& [name, values] : decl.autotune_space) {
    if (std::find(tuned.begin(), tuned.end(), name) == tuned.end()) continue;
    std::vector<KernelConstants> next;
    for (const KernelConstants& partial : out) {
      for (std::int64_t v : values) {
        KernelConstants c = partial;
        c[name] = v;
        next.push_back(std::move(c));
      }
    }
    out = std::move(next);
  }
  return out;
}

std::string result_path(const std::string& cache_dir, const std::string& key) {
  return cpu::detail::resolve_cache_root(cache_dir) + "/autotune/" + cpu::detail::sha256_hex(key) + ".txt";
}

// The winner stored for `key`, or empty when there is no valid entry.
KernelConstants read_result(const std::string& path, const std::string& key, const frontend::KernelDecl& decl,
                            const std::vector<std::string>& tuned) {
  std::ifstream in(path);
  if (!in) return {};
  std::string line;
  if (!std::getline(in, line) || line != "tessera-autotune 1") return {};
  if (!std::getline(in, line) || line != "key " + key) return {};
  KernelConstants out;
  bool ended = false;
  while (std::getline(in, line)) {
    if (line == "end") {
      ended = true;
      break;
    }
    std::istringstream fields(line);
    std::string name;
    std::int64_t value = 0;
    if (!(fields >> name >> value)) return {};
    auto space = std::find_if(decl.autotune_space.begin(), decl.autotune_space.end(),
                              [&](const auto& entry) { return entry.first == name; });
    if (space == decl.autotune_space.end() ||
        std::find(space->second.begin(), space->second.end(), value) == space->second.end()) {
      return {};
    }
    out[name] = value;
  }
  if (!ended || out.size() != tuned.size()) return {};
  for (const std::string& name : tuned) {
    if (out.count(name) == 0) return {};
  }
  return out;
}

void write_result(const std::string& path, const std::string& key, const KernelConstants& winner) {
  std::string text = "tessera-autotune 1\nkey " + key + "\n";
  for (const auto& [name, value] : winner) text += name + " " + std::to_string(value) + "\n";
  text += "end\n";
  cpu::detail::make_directories(path.substr(0, path.rfind('/')));
  cpu::detail::write_file_atomic(path, text);
}

}  // namespace

std::string AutotuneEvent::describe() const {
  const std::string head = "autotune " + kernel;
  const std::string which = index > 0 ? "[" + std::to_string(index) + "/" + std::to_string(total) + "] " : "";
  switch (kind) {
    case Kind::start: return head + ": timing " + std::to_string(total) + " candidates (" + message + ")";
    case Kind::measured: {
      std::ostringstream c;
      c << std::fixed << std::setprecision(2) << compile_seconds;
      return head + " " + which + detail::constants_text(constants) + ": " + format_ms(median_seconds) +
             " (compiled in " + c.str() + " s)";
    }
    case Kind::failed: return head + " " + which + detail::constants_text(constants) + ": failed: " + message;
    case Kind::chosen:
      return head + ": chose " + detail::constants_text(constants) + " (" + format_ms(median_seconds) + ")";
    case Kind::cached: return head + ": using " + detail::constants_text(constants) + " (" + message + ")";
  }
  return head;
}

void print_autotune_event(const AutotuneEvent& event) {
  const char* log = std::getenv("TESSERA_LOG");
  if (log != nullptr && std::strcmp(log, "quiet") == 0) return;
  std::cerr << event.describe() << std::endl;
}

std::string autotune_cpu_device(const KernelLaunchOptions& options) {
  const int threads = options.cpu.num_threads > 0 ? options.cpu.num_threads : cpu::detail::default_thread_count();
  return "cpu:" + cpu_model() + " threads=" + std::to_string(threads);
}

std::string autotune_cuda_device(const cuda::DeviceProperties& device) {
  return "cuda:" + device.name + " " + device.arch() + " sms=" + std::to_string(device.multiprocessors);
}

std::string autotune_key_on(const Kernel& kernel, const std::vector<cpu::KernelArg>& args, const std::string& device) {
  const frontend::KernelDecl& decl = kernel.decl();
  std::string key = "kernel=" + kernel.name() + " source=" + kernel.source_hash() + " fixed={" +
                    detail::constants_text(kernel.constants()) + "} args=(";
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (i != 0) key += ", ";
    const auto& v = args[i].value;
    if (const Tensor* t = std::get_if<Tensor>(&v)) {
      key += std::string(name(t->dtype())) + shape_text(t->shape());
    } else if (i < decl.params.size() && std::find(decl.shape_symbols.begin(), decl.shape_symbols.end(),
                                                   decl.params[i].name) != decl.shape_symbols.end()) {
      // A scalar named like a shape symbol sets a size: its value is part of the shape.
      key += decl.params[i].name + "=" + std::to_string(scalar_as_int(v));
    } else {
      key += std::holds_alternative<double>(v) ? "real" : std::holds_alternative<bool>(v) ? "bool" : "int";
    }
  }
  return key + ") device=" + device;
}

std::string autotune_key(const Kernel& kernel, const std::vector<cpu::KernelArg>& args,
                         const KernelLaunchOptions& options) {
  return autotune_key_on(kernel, args, device_text(detail::arguments_device(kernel, args), options));
}

KernelConstants Kernel::autotune(const Grid& grid, const std::vector<cpu::KernelArg>& args,
                                 const KernelLaunchOptions& options) const {
  KernelConstants chosen = autotune_choice(grid, args, options);
  KernelConstants all = constants_;
  for (const auto& [name, value] : chosen) all[name] = value;
  return all;
}

KernelConstants Kernel::autotune_choice(const Grid& grid, const std::vector<cpu::KernelArg>& args,
                                        const KernelLaunchOptions& options) const {
  const std::vector<std::string> tuned = tuned_names();
  if (tuned.empty()) return {};
  const frontend::KernelDecl& decl = state_->decl;
  if (args.size() != decl.params.size()) {
    std::string names;
    for (const frontend::KernelParam& p : decl.params) names += (names.empty() ? "" : ", ") + p.name;
    raise(ErrorCode::ArgumentInvalid, "kernel '" + name() + "' takes " + std::to_string(decl.params.size()) +
                                          " argument(s) (" + names + "), got " + std::to_string(args.size()));
  }
  // Mistakes every candidate would repeat are reported once, before the search.
  if (const auto* n = std::get_if<std::int64_t>(&grid); n != nullptr && *n == -1 && !decl.group_shape.empty()) {
    raise(ErrorCode::ArgumentInvalid, "kernel '" + name() +
                                          "' has a group shape; launch it with an explicit grid (k[grid](...)), the "
                                          "number of groups");
  }
  if (const auto* n = std::get_if<std::int64_t>(&grid); n != nullptr && *n < -1) {
    raise(ErrorCode::ArgumentInvalid, "kernel '" + name() + "': grid " + std::to_string(*n) + " is negative");
  }
  const AutotuneCallback report = options.progress ? options.progress : AutotuneCallback(print_autotune_event);
  const int device = detail::arguments_device(*this, args);  // -1: the host
  const std::string key = autotune_key_on(*this, args, device_text(device, options));
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    if (auto it = state_->autotune_results.find(key); it != state_->autotune_results.end()) return it->second;
  }
  const std::string path = result_path(options.cache_dir, key);
  if (KernelConstants stored = read_result(path, key, decl, tuned); !stored.empty()) {
    AutotuneEvent e;
    e.kind = AutotuneEvent::Kind::cached;
    e.kernel = name();
    e.constants = stored;
    e.message = "cached in " + path;
    report(e);
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->autotune_results[key] = stored;
    return stored;
  }

  const std::unique_ptr<detail::CandidateRunner> runner =
      device < 0 ? std::make_unique<CpuRunner>(options) : detail::cuda_candidate_runner(device, options);
  // Host copies of the mutable buffers as the caller gave them; each
  // candidate runs on fresh copies of these on the arguments' device, so it
  // starts from the caller's contents. Inputs are shared (only read).
  std::vector<std::pair<std::size_t, Tensor>> pristine;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const Tensor* t = std::get_if<Tensor>(&args[i].value);
    if (t != nullptr && t->defined() && decl.params[i].is_mut) pristine.emplace_back(i, copy_of(*t));
  }

  const std::vector<KernelConstants> space = candidates(decl, tuned);
  AutotuneEvent start;
  start.kind = AutotuneEvent::Kind::start;
  start.kernel = name();
  start.total = static_cast<int>(space.size());
  for (const std::string& n : tuned) start.message += (start.message.empty() ? "" : ", ") + n;
  report(start);

  const int runs = std::max(1, options.autotune_runs);
  double best = 0.0;
  int best_index = -1;
  std::exception_ptr first_failure;
  for (std::size_t c = 0; c < space.size(); ++c) {
    AutotuneEvent e;
    e.kernel = name();
    e.index = static_cast<int>(c) + 1;
    e.total = static_cast<int>(space.size());
    e.constants = space[c];
    try {
      const auto compile_start = Clock::now();
      std::shared_ptr<KernelSpecialization> spec = specialize(space[c]);
      runner->compile(*spec);
      e.compile_seconds = std::chrono::duration<double>(Clock::now() - compile_start).count();
      const std::int64_t groups = detail::resolve_grid(grid, *spec, name());
      std::vector<cpu::KernelArg> scratch = args;
      for (const auto& [i, host] : pristine) scratch[i] = cpu::KernelArg(runner->scratch_from(host));
      const double warm = runner->warm_up(*spec, groups, scratch);
      // A candidate that takes seconds per run is timed fewer times.
      std::vector<double> times = runner->timed(*spec, groups, scratch, warm > 1.0 ? 1 : runs);
      std::sort(times.begin(), times.end());
      e.median_seconds = times[times.size() / 2];
      e.kind = AutotuneEvent::Kind::measured;
      if (best_index < 0 || e.median_seconds < best) {
        best = e.median_seconds;
        best_index = static_cast<int>(c);
      }
    } catch (const Error& error) {
      if (!first_failure) first_failure = std::current_exception();
      e.kind = AutotuneEvent::Kind::failed;
      e.message = error.what();
    }
    report(e);
  }
  if (best_index < 0) std::rethrow_exception(first_failure);

  const KernelConstants& winner = space[static_cast<std::size_t>(best_index)];
  AutotuneEvent done;
  done.kind = AutotuneEvent::Kind::chosen;
  done.kernel = name();
  done.constants = winner;
  done.median_seconds = best;
  done.total = static_cast<int>(space.size());
  report(done);
  try {
    write_result(path, key, winner);
  } catch (const Error& error) {
    // The choice still holds for this process; only its reuse by the next one is lost.
    AutotuneEvent w;
    w.kind = AutotuneEvent::Kind::failed;
    w.kernel = name();
    w.constants = winner;
    w.message = std::string("could not store the choice: ") + error.what();
    report(w);
  }
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->autotune_results[key] = winner;
  return winner;
}

}  // namespace tessera
