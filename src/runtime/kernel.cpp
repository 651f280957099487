// Kernel objects: parse -> specialize (lower + Tile IR passes) -> compile -> launch.
//
// The autotuner lives in autotune.cpp; this file holds the kernel's shared
// state (declaration, source, caches), specialization, launch, inspection
// and loading kernels from .tsr files.
#include "tessera/runtime/kernel.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "backends/cpu/compile_cache.h"
#include "runtime/kernel_state.h"
#include "tessera/ir/text.h"
#include "tessera/support/error.h"
#include "tessera/tile/passes.h"

namespace tessera {

// ---- KernelSpecialization ----

KernelSpecialization::KernelSpecialization(ir::Module module, ir::Operation* func, ir::Module tile_target_module,
                                           ir::Operation* tile_target_func, KernelConstants constants)
    : module_(std::move(module)),
      func_(func),
      tile_target_module_(std::move(tile_target_module)),
      tile_target_func_(tile_target_func),
      constants_(std::move(constants)) {}

std::string KernelSpecialization::tile_ir() const {
  return ir::print_function(*func_);
}

std::string KernelSpecialization::target_source(const std::string& cache_dir) const {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (compiled_) return compiled_->source;
  }
  cpu::CompileOptions options;
  options.cache_dir = cache_dir;
  return cpu::emit_kernel_source(*func_, options);
}

const cpu::CompiledKernel& KernelSpecialization::compiled(const std::string& cache_dir) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!compiled_) {
    cpu::CompileOptions options;
    options.cache_dir = cache_dir;
    compiled_ = std::make_shared<const cpu::CompiledKernel>(cpu::compile_kernel(*func_, options));
  }
  return *compiled_;
}

bool KernelSpecialization::is_compiled() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return compiled_ != nullptr;
}

// ---- helpers ----

namespace detail {

std::string constants_text(const KernelConstants& constants) {
  std::string out;
  for (const auto& [name, value] : constants) out += (out.empty() ? "" : " ") + name + "=" + std::to_string(value);
  return out;
}

std::int64_t resolve_grid(const Grid& grid, const KernelSpecialization& spec, const std::string& kernel) {
  if (const auto* n = std::get_if<std::int64_t>(&grid)) return *n;
  const GridFunction& f = std::get<GridFunction>(grid);
  if (!f) raise(ErrorCode::ArgumentInvalid, "kernel '" + kernel + "': the grid function is empty");
  return f(spec.constants());
}

void rethrow_located(const Error& error, const std::string& file, int column_offset) {
  SourceLocation where = error.where();
  // Only errors placed in the kernel's own text move.
  // Called from inside a handler: `throw;` keeps the exception's own class.
  if (column_offset == 0 || !where.valid() || where.file != file) throw;
  where.column += column_offset;
  where.line_text = std::string(static_cast<std::size_t>(column_offset), ' ') + where.line_text;
  raise(error.code(), error.message(), std::move(where));
}

}  // namespace detail

using detail::constants_text;

namespace {

[[noreturn]] void relocate(const detail::KernelState& state, const Error& error) {
  detail::rethrow_located(error, state.decl.location.file, state.column_offset);
}

}  // namespace

// ---- Kernel ----

Kernel::Kernel(frontend::KernelDecl decl, std::string source, int column_offset)
    : state_(std::make_shared<detail::KernelState>()) {
  state_->decl = std::move(decl);
  state_->source = std::move(source);
  state_->column_offset = column_offset;
  state_->source_hash = cpu::detail::sha256_hex(state_->source);
}

Kernel::Kernel(std::shared_ptr<detail::KernelState> state, KernelConstants constants)
    : state_(std::move(state)), constants_(std::move(constants)) {}

const std::string& Kernel::name() const {
  return state_->decl.name;
}
const frontend::KernelDecl& Kernel::decl() const {
  return state_->decl;
}
const std::string& Kernel::source() const {
  return state_->source;
}
const std::string& Kernel::source_hash() const {
  return state_->source_hash;
}

std::vector<std::string> Kernel::tuned_names() const {
  std::vector<std::string> names;
  for (const auto& [name, values] : state_->decl.autotune_space) {
    if (constants_.count(name) == 0) names.push_back(name);
  }
  return names;
}

Kernel Kernel::jit(const KernelConstants& more) const {
  KernelConstants merged = constants_;
  for (const auto& [key, value] : more) {
    auto [it, inserted] = merged.emplace(key, value);
    if (!inserted && it->second != value) {
      raise(ErrorCode::ArgumentInvalid, "kernel '" + name() + "' already has " + key + "=" +
                                            std::to_string(it->second) + "; cannot specialize it again to " +
                                            std::to_string(value));
    }
  }
  try {
    frontend::check_kernel(state_->decl, merged);
  } catch (const Error& error) {
    relocate(*state_, error);
  }
  return Kernel(state_, std::move(merged));
}

std::shared_ptr<KernelSpecialization> Kernel::specialize(const KernelConstants& extra) const {
  KernelConstants all = constants_;
  for (const auto& [name, value] : extra) all[name] = value;
  for (const auto& [name, values] : state_->decl.autotune_space) all.emplace(name, values.front());
  const std::string key = constants_text(all);

  std::lock_guard<std::mutex> lock(state_->mutex);
  if (auto it = state_->specializations.find(key); it != state_->specializations.end()) return it->second;
  ir::Module module, tile_target_module;
  ir::Operation* func = nullptr;
  ir::Operation* tile_target_func = nullptr;
  try {
    tile_target_func = &frontend::lower_kernel(tile_target_module, state_->decl, all);
    func = &frontend::lower_kernel(module, state_->decl, all);
    tile::run_kernel_passes(*func);
  } catch (const Error& error) {
    relocate(*state_, error);
  }
  auto spec = std::make_shared<KernelSpecialization>(std::move(module), func, std::move(tile_target_module),
                                                     tile_target_func, all);
  state_->specializations.emplace(key, spec);
  return spec;
}

void Kernel::launch(const Grid& grid, std::vector<cpu::KernelArg> args, const KernelLaunchOptions& options) const {
  // Tensors on cuda:N send the launch (and the autotune search) to the CUDA backend.
  const int device = detail::arguments_device(*this, args);
  const std::string nvidia = detail::nvidia_target(*this, options);
  const bool tile_target = device >= 0 && nvidia == "cuda_tile";
  if (tile_target && !tuned_names().empty()) {
    // The CUDA autotuner times candidates through the PTX path; its choice
    // would not be about the kernels this target runs.
    raise(ErrorCode::Compile, "kernel '" + name() + "': autotuning on the cuda_tile target is not supported; fix " +
                                  tuned_names().front() + " (and every autotune name) with jit()");
  }
  KernelConstants chosen;
  if (!tuned_names().empty()) chosen = autotune_choice(grid, args, options);
  std::shared_ptr<KernelSpecialization> spec = specialize(chosen);
  const cpu::CompiledKernel* compiled = device < 0 ? &spec->compiled(options.cache_dir) : nullptr;
  const std::int64_t groups = detail::resolve_grid(grid, *spec, name());
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->last_launched[constants_text(constants_)] = spec;
    state_->last_device[constants_text(constants_)] = device;
  }
  if (tile_target) {
    try {
      detail::launch_on_cuda_tile(*spec, device, groups, std::move(args), options);
    } catch (const CompileError& error) {
      relocate(*state_, error);  // the construct's column in the caller's file
    }
    return;
  }
  if (device >= 0) {
    detail::launch_on_cuda(*spec, device, groups, std::move(args), options);
    return;
  }
  cpu::launch(*compiled, groups, std::move(args), options.cpu);
}

std::string Kernel::inspect_ir(std::string_view level, const KernelLaunchOptions& options) const {
  if (level == "graph" || level == "schedule") {
    raise(ErrorCode::ArgumentInvalid, "kernel '" + name() + "' is written at the tile level: it has no " +
                                          std::string(level) +
                                          " IR (that level exists for @tessera.jit functions); inspect_ir takes "
                                          "\"tile\", \"target\" or \"ptx\" for a kernel");
  }
  if (level != "tile" && level != "target" && level != "ptx") {
    const std::string hint = closest_match(level, {"tile", "target", "ptx", "graph", "schedule"});
    raise(ErrorCode::ArgumentInvalid, "inspect_ir: unknown level '" + std::string(level) + "'" +
                                          (hint.empty() ? "" : "; did you mean '" + hint + "'?") +
                                          " (a kernel has \"tile\", \"target\" and \"ptx\")");
  }
  std::shared_ptr<KernelSpecialization> spec;
  int device = -1;  // where the code shown runs: the last launch's device unless options.target says
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    if (auto it = state_->last_launched.find(constants_text(constants_)); it != state_->last_launched.end()) {
      spec = it->second;
      device = state_->last_device[constants_text(constants_)];
    }
  }
  const std::string nvidia = detail::nvidia_target(*this, options);
  // The CUDA Tile IR text: asked for by name, or the kernel's NVIDIA target
  // is cuda_tile and its code would be shown for a GPU (or nothing ran yet).
  const bool launched = static_cast<bool>(spec);
  const bool tile_text = options.target == "cuda_tile" ||
                         (nvidia == "cuda_tile" && options.target.empty() && (device >= 0 || !launched));
  if (!options.target.empty() && options.target != "cuda_tile") device = detail::parse_target(*this, options.target);
  if (!spec) spec = specialize();
  if (level == "tile") return spec->tile_ir();
  if (level == "ptx" && tile_text) {
    raise(ErrorCode::ArgumentInvalid, "kernel '" + name() +
                                          "': the cuda_tile target has no PTX (tileiras turns CUDA Tile IR into a "
                                          "cubin directly); inspect_ir(\"target\") shows its CUDA Tile IR, and "
                                          "target=\"cuda\" the PTX path's code");
  }
  if (level == "target" && tile_text) {
    try {
      return spec->cuda_tile_text();
    } catch (const CompileError& error) {
      relocate(*state_, error);
    }
  }
  if (level == "ptx") {
    if (options.target == "cpu") {
      raise(ErrorCode::ArgumentInvalid, "kernel '" + name() +
                                            "': inspect_ir(\"ptx\") shows CUDA code; the CPU "
                                            "backend has none (use \"target\" for its C++)");
    }
    return detail::cuda_ptx(*spec, name(), std::max(device, 0), options.arch);
  }
  return device >= 0 ? spec->cuda_source(device, options.arch) : spec->target_source(options.cache_dir);
}

// ---- loading ----

std::vector<Kernel> kernels_from_source(std::string_view source, std::string_view file, int first_line,
                                        frontend::SourceDialect dialect, int column_offset) {
  std::vector<frontend::KernelDecl> decls;
  try {
    decls = frontend::parse_kernels(source, file, first_line, dialect);
  } catch (const Error& error) {
    detail::rethrow_located(error, std::string(file), column_offset);
  }
  std::vector<Kernel> kernels;
  kernels.reserve(decls.size());
  for (frontend::KernelDecl& d : decls) kernels.emplace_back(std::move(d), std::string(source), column_offset);
  return kernels;
}

std::vector<Kernel> load_kernels(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) raise(ErrorCode::ArgumentInvalid, "cannot read the kernel file '" + path + "' (missing or unreadable)");
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) raise(ErrorCode::ArgumentInvalid, "reading the kernel file '" + path + "' failed");
  std::vector<Kernel> kernels = kernels_from_source(text.str(), path, 1, frontend::SourceDialect::tsr);
  if (kernels.empty()) raise(ErrorCode::ArgumentInvalid, "the kernel file '" + path + "' defines no kernel");
  return kernels;
}

}  // namespace tessera
