// compile_kernel: Tile IR kernel -> generated C++ -> cached shared object -> loaded kernel.
#include "tessera/backends/cpu/cpu_backend.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>

#include "backends/cpu/compile_cache.h"
#include "backends/cpu/compiler.h"
#include "backends/cpu/emitter.h"
#include "backends/cpu/loaded_kernel.h"
#include "tessera/support/error.h"
#include "tessera/version.h"

namespace tessera::cpu {

namespace detail {

LoadedKernel::~LoadedKernel() {
  if (handle != nullptr) ::dlclose(handle);
}

namespace {

std::shared_ptr<const LoadedKernel> load(const std::string& path, const std::string& kernel_name,
                                         const std::string& entry = "tessera_cpu_run_groups") {
  auto k = std::make_shared<LoadedKernel>();
  k->path = path;
  k->handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (k->handle == nullptr) {
    const char* why = ::dlerror();
    raise(ErrorCode::Compile, "cannot load the compiled kernel '" + kernel_name + "' from " + path + ": " +
                                  (why != nullptr ? why : "unknown dlopen error"));
  }
  using AbiFn = unsigned (*)();
  auto abi = reinterpret_cast<AbiFn>(::dlsym(k->handle, "tessera_cpu_abi_version"));
  k->run_groups = reinterpret_cast<RunGroupsFn>(::dlsym(k->handle, entry.c_str()));
  if (abi == nullptr || k->run_groups == nullptr || abi() != tessera_cpu::kAbiVersion) {
    raise(ErrorCode::Compile, "the compiled kernel at " + path + " does not export the CPU kernel ABI version " +
                                  std::to_string(tessera_cpu::kAbiVersion));
  }
  return k;
}

// The unit's kernels as at most `parts` translation units, each a run of
// whole kernels of about equal source length with the unit's includes; the
// first one also defines the unit's ABI version.
std::vector<std::string> split_unit(const std::vector<EmittedKernel>& emitted, int parts) {
  std::size_t total = 0;
  for (const EmittedKernel& e : emitted) total += e.source.size();
  std::vector<std::string> sources;
  std::size_t done = 0, current = 0;
  for (const EmittedKernel& e : emitted) {
    const std::size_t part = done * static_cast<std::size_t>(parts) / std::max<std::size_t>(total, 1);
    if (sources.empty() || part != current) {
      sources.push_back(std::string(kUnitPrologue) + (sources.empty() ? kUnitEpilogue : ""));
      current = part;
    }
    sources.back() += e.source + "\n";
    done += e.source.size();
  }
  return sources;
}

// The precompiled headers for `flags`: the prebuilt directory's, else the
// cache's (built there from `include_dir`, the cache's header_dir(), when
// missing).
std::string precompiled_headers(const HostCompiler& cxx, const std::vector<std::string>& flags,
                                const CompileCache& cache, const std::string& include_dir) {
  const CompileCache prebuilt(prebuilt_root(), /*create=*/false);
  return precompiled_header_dir(cxx, flags, prebuilt.dir(), cache.dir(), include_dir);
}

}  // namespace
}  // namespace detail

std::string precompile_headers(const CompileOptions& options) {
  const detail::HostCompiler cxx = detail::find_host_compiler(options.cxx);
  std::vector<std::string> flags = detail::default_compile_flags();
  flags.insert(flags.end(), options.extra_flags.begin(), options.extra_flags.end());
  const detail::CompileCache cache(detail::resolve_cache_root(options.cache_dir));
  return detail::precompiled_headers(cxx, flags, cache, cache.header_dir());
}

std::string emit_kernel_source(const ir::Operation& kernel_func, const CompileOptions& options) {
  return detail::emit_kernel(kernel_func, options).source;
}

CompiledKernel compile_kernel(const ir::Operation& kernel_func, const CompileOptions& options) {
  const ir::Operation* one[] = {&kernel_func};
  return std::move(compile_kernels(one, options).front());
}

std::vector<CompiledKernel> compile_kernels(std::span<const ir::Operation* const> kernel_funcs,
                                            const CompileOptions& options) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  // One kernel alone is its own unit (the form emit_kernel_source shows);
  // several share one unit, each in its namespace k<i>.
  const bool alone = kernel_funcs.size() == 1;
  std::vector<detail::EmittedKernel> emitted;
  std::string unit_source = alone ? "" : detail::kUnitPrologue;
  for (std::size_t i = 0; i < kernel_funcs.size(); ++i) {
    emitted.push_back(detail::emit_kernel(*kernel_funcs[i], options, alone ? "" : "k" + std::to_string(i)));
    unit_source += emitted.back().source + "\n";
  }
  if (!alone) unit_source += detail::kUnitEpilogue;

  const detail::HostCompiler cxx = detail::find_host_compiler(options.cxx);
  std::vector<std::string> flags = detail::default_compile_flags();
  flags.insert(flags.end(), options.extra_flags.begin(), options.extra_flags.end());
  detail::CompileCache cache(detail::resolve_cache_root(options.cache_dir));
  const std::string include_dir = cache.header_dir();

  // Not libtessera's path: objects link it by soname and resolve against
  // the copy the process has loaded, so prebuilt objects stay valid when the
  // package moves (the version, ABI and header hash pin what they call).
  std::string key_text = "tessera-cpu abi " + std::to_string(tessera_cpu::kAbiVersion) + "\nversion " +
                         TESSERA_VERSION_STRING + "\ncompiler " + cxx.path + "\n" + cxx.version + "\nheaders " +
                         detail::CompileCache::header_hash() + "\nflags";
  for (const std::string& f : flags) key_text += " " + f;
  key_text += "\n" + unit_source;
  const std::string key = detail::sha256_hex(key_text);

  // A unit of several kernels compiles in parts, one compiler process per
  // part (detail::compile_jobs()), each part a run of whole kernels of
  // about equal source length; the first part defines the unit's ABI
  // version. The cache keeps the whole unit's source (what its key hashes).
  const int jobs = alone ? 1 : std::min<int>(detail::compile_jobs(), static_cast<int>(emitted.size()));
  // The precompiled headers first (only a build needs them).
  auto include_dirs = [&] {
    std::vector<std::string> dirs;
    std::string pch = detail::precompiled_headers(cxx, flags, cache, include_dir);
    if (!pch.empty()) dirs.push_back(std::move(pch));
    dirs.push_back(include_dir);
    return dirs;
  };
  auto build = [&] {
    detail::write_file_atomic(cache.source_path(key), unit_source);
    const std::string tmp = cache.temp_object_path(key);
    std::vector<std::string> parts;
    try {
      if (jobs <= 1) {
        detail::compile_shared_object(cxx, flags, include_dirs(), cache.source_path(key), tmp);
      } else {
        const std::vector<std::string> part_sources = detail::split_unit(emitted, jobs);
        for (std::size_t i = 0; i < part_sources.size(); ++i) {
          parts.push_back(tmp + ".part" + std::to_string(i) + ".cpp");
          detail::write_file_atomic(parts.back(), part_sources[i]);
        }
        detail::compile_shared_object_from_parts(cxx, flags, include_dirs(), parts, tmp, jobs);
      }
    } catch (...) {
      std::remove(tmp.c_str());
      for (const std::string& p : parts) std::remove(p.c_str());
      throw;
    }
    for (const std::string& p : parts) std::remove(p.c_str());
    cache.publish(key, tmp);
  };
  std::string object = cache.object_path(key);
  auto load_all = [&] {
    std::vector<std::shared_ptr<const detail::LoadedKernel>> loaded;
    for (std::size_t i = 0; i < emitted.size(); ++i) {
      loaded.push_back(
          detail::load(object, emitted[i].name, detail::entry_symbol(alone ? "" : "k" + std::to_string(i))));
    }
    return loaded;
  };
  bool cache_hit = options.use_cache && cache.valid(key);
  if (!cache_hit && options.use_cache) {
    // Compiled when Tessera was built: loaded in place.
    const detail::CompileCache prebuilt(detail::prebuilt_root(), /*create=*/false);
    if (prebuilt.valid(key)) {
      object = prebuilt.object_path(key);
      cache_hit = true;
    }
  }
  if (!cache_hit) build();
  std::vector<std::shared_ptr<const detail::LoadedKernel>> loaded;
  try {
    loaded = load_all();
  } catch (const Error&) {
    // An entry that passed validation but does not load (written by a
    // different build whose library it cannot find, say) is rebuilt once.
    if (!cache_hit) throw;
    cache_hit = false;
    object = cache.object_path(key);
    build();
    loaded = load_all();
  }

  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::vector<CompiledKernel> out;
  for (std::size_t i = 0; i < emitted.size(); ++i) {
    detail::EmittedKernel& e = emitted[i];
    CompiledKernel k;
    k.name = e.name;
    k.source = std::move(e.source);
    k.cache_key = key;
    k.library_path = object;
    k.cache_hit = cache_hit;
    k.compiler = cxx.path + " (" + cxx.version + ")";
    k.params = std::move(e.params);
    k.symbols = std::move(e.symbols);
    k.specialized = std::move(e.specialized);
    k.group_shape = std::move(e.group_shape);
    k.group_size = e.group_size;
    k.handle = std::move(loaded[i]);
    k.compile_seconds = seconds;
    out.push_back(std::move(k));
  }
  return out;
}

}  // namespace tessera::cpu
