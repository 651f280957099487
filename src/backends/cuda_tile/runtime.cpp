// compile_kernel / launch for the CUDA Tile IR target (see runtime.h). The
// cache helpers (hashing, the cache root, atomic writes) and the argument
// binder are the CPU backend's, as for the NVRTC path.
#include "tessera/backends/cuda_tile/runtime.h"

#include <algorithm>
#include <cstdlib>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>
#include <string_view>
#include <unordered_map>

#include "backends/common/kernel_params.h"
#include "backends/cpu/compile_cache.h"
#include "backends/cpu/launch_binding.h"
#include "tessera/backends/cuda_tile/cubin_resources.h"
#include "tessera/backends/cuda_tile/lower.h"
#include "tessera/backends/cuda_tile/toolchain.h"
#include "tessera/numerics/convert.h"
#include "tessera/numerics/dtype.h"
#include "tessera/support/error.h"
#include "tessera/version.h"

namespace tessera::cuda_tile {

namespace detail {

struct LoadedKernel {
  cuda::Module module;
  cuda::Function function;
};

// The kernel without alignment assumptions, compiled when a launch first needs it.
struct PlainForm {
  std::mutex mutex;
  const ir::Operation* func = nullptr;
  CompileOptions options;
  std::shared_ptr<const CompiledKernel> kernel;
  const CompiledKernel& get() {
    std::lock_guard<std::mutex> lock(mutex);
    if (!kernel) kernel = std::make_shared<const CompiledKernel>(compile_kernel(*func, options));
    return *kernel;
  }
};

namespace {

std::mutex& cache_mutex() {
  static std::mutex m;
  return m;
}
std::unordered_map<std::string, std::shared_ptr<const LoadedKernel>>& memory_cache() {
  static std::unordered_map<std::string, std::shared_ptr<const LoadedKernel>> m;
  return m;
}

std::shared_ptr<const LoadedKernel> load(int device, const std::string& name, std::vector<char> cubin) {
  cuda::CompiledProgram program;
  program.cubin = std::move(cubin);
  auto k = std::make_shared<LoadedKernel>();
  k->module = cuda::Module::load(device, program);
  k->function = k->module.function(name);  // tileiras keeps the entry's name unmangled
  return k;
}

// The signature the binder checks arguments against: the parameters, every
// shape symbol their dims read (so A: [M, K] and B: [K, N] must agree on K),
// and the group shape.
cpu::CompiledKernel signature(const ir::Operation& func) {
  codegen::KernelHeader header = codegen::read_kernel_header(func, "cuda_tile target");
  cpu::CompiledKernel s;
  s.name = header.name;
  s.group_shape = header.group_shape;
  s.group_size = header.group_size;
  const ir::Block& body = ir::function_body(func);
  for (std::size_t i = 0; i < body.num_arguments(); ++i) {
    const ir::Value* arg = body.argument(i);
    cpu::KernelParam p = codegen::describe_kernel_param(*arg, i, s.name, "cuda_tile target", false);
    if (p.is_buffer) {
      for (const ir::Dim& d : p.type.shape) {
        for (const std::string& sym : codegen::dim_symbols(d)) {
          if (std::find(s.symbols.begin(), s.symbols.end(), sym) == s.symbols.end()) s.symbols.push_back(sym);
        }
      }
    }
    s.params.push_back(std::move(p));
  }
  return s;
}

}  // namespace
}  // namespace detail

std::string device_arch(int device) {
  const cuda::DeviceProperties p = cuda::device_properties(device);
  return "sm_" + std::to_string(p.compute_major) + std::to_string(p.compute_minor);
}

namespace {

// $name as an integer from 1 to `most`, or nothing when unset.
std::optional<int> int_from_env(const char* name, int most) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return std::nullopt;
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (*end != '\0' || v < 1 || v > most) {
    raise(ErrorCode::ArgumentInvalid, std::string(name) + " must be an integer from 1 to " + std::to_string(most) +
                                          ", got '" + text + "'");
  }
  return static_cast<int>(v);
}

// A cubin's blocks per multiprocessor, with and without its shared memory
// counted; nothing where the cubin or the architecture does not say.
struct Fit {
  std::optional<int> blocks, without_shared;
  std::optional<CubinResources> resources;
};
Fit fit_of(const std::vector<std::uint8_t>& cubin, const std::string& entry, const std::string& arch) {
  Fit f;
  f.resources = read_cubin_resources({reinterpret_cast<const char*>(cubin.data()), cubin.size()}, entry);
  if (!f.resources) return f;
  f.blocks = blocks_per_multiprocessor(*f.resources, arch);
  f.without_shared = blocks_per_multiprocessor(*f.resources, arch, /*ignore_shared=*/true);
  return f;
}

std::string describe(const CubinResources& r) {
  return std::to_string(r.threads) + " threads, " + std::to_string(r.registers) + " registers, " +
         std::to_string(r.shared_bytes) + " bytes of shared memory";
}

// The entry's occupancy hint, checked. tileiras chooses how many stages of
// a loop's loads to keep in shared memory, and with the loops' own latency
// hints it may keep more than leaves room for the blocks the hint asks for:
// the D = 128 attention forward took 115816 bytes, 208 past what two blocks
// may take of an H200's 228 KiB, so one block ran per multiprocessor (that
// kernel measured as fast as its fitted form, 421 against 417 TFLOP/s: the
// check makes the hint mean what it says, docs/design/0040). Where registers and
// threads allow the hint and only shared memory does not, the kernel is
// lowered again with one latency for every loop, 3, 2, 4 then 1, and the
// first cubin that reaches the hint is kept (else the first). The kept
// lowering's text starts with a comment that says so. Not done when
// `options.latency` is set: that is a measurement's fixed choice.
void fit_occupancy(const ir::Operation& kernel_func, LowerOptions options, LoweredKernel& lowered,
                   std::vector<std::uint8_t>& cubin) {
  const std::optional<int> hint = entry_occupancy(kernel_func, options);
  if (!hint || options.latency) return;
  const Fit first = fit_of(cubin, lowered.name, options.arch);
  if (!first.blocks || *first.blocks >= *hint || !first.without_shared || *first.without_shared < *hint) return;
  std::vector<std::vector<std::uint8_t>> tried{lowered.bytecode};
  for (const int latency : {3, 2, 4, 1}) {
    options.latency = latency;
    LoweredKernel again = lower_kernel(kernel_func, options);
    if (std::find(tried.begin(), tried.end(), again.bytecode) != tried.end()) continue;
    tried.push_back(again.bytecode);
    std::vector<std::uint8_t> bin = run_tileiras(again.bytecode, options.arch);
    const Fit f = fit_of(bin, again.name, options.arch);
    if (f.blocks && *f.blocks >= *hint) {
      again.text = "// occupancy " + std::to_string(*hint) + " on " + options.arch + ": latency " +
                   std::to_string(latency) + " for every loop (" + describe(*f.resources) +
                   "); the loops' own latency hints gave " + std::to_string(*first.blocks) + " (" +
                   describe(*first.resources) + ")\n" + again.text;
      lowered = std::move(again);
      cubin = std::move(bin);
      return;
    }
  }
}

}  // namespace

Cubin build_cubin(const ir::Operation& kernel_func, const std::string& arch, const std::string& cache_dir,
                  bool use_cache, bool assume_aligned) {
  LowerOptions lower_options;
  lower_options.assume_aligned = assume_aligned;
  lower_options.arch = arch;
  lower_options.latency = int_from_env("TESSERA_CUDA_TILE_LATENCY", 10);
  lower_options.occupancy = int_from_env("TESSERA_CUDA_TILE_OCCUPANCY", 32);
  if (const char* e = std::getenv("TESSERA_CUDA_TILE_EXP2"); e != nullptr && *e != '\0') {
    if (std::string_view(e) != "0" && std::string_view(e) != "1") {
      raise(ErrorCode::ArgumentInvalid, std::string("TESSERA_CUDA_TILE_EXP2 must be 0 or 1, got '") + e + "'");
    }
    lower_options.scaled_exp2 = std::string_view(e) == "1";
  }
  LoweredKernel lowered = lower_kernel(kernel_func, lower_options);  // CompileError for what it cannot express
  Cubin c;
  c.name = lowered.name;
  c.text = lowered.text;
  c.fault_param = lowered.fault_param;
  c.faults = lowered.faults;
  c.flat_lanes = lowered.flat_lanes;
  c.symbol_params = lowered.symbol_params;
  c.shared_bytes = lowered.shared_bytes;
  c.arch = arch;
  const Toolchain& tools = toolchain();
  if (!tools.found) raise(ErrorCode::Compile, "cuda_tile target: " + tools.reason);
  c.tileiras_version = tools.version;
  if (std::find(tools.archs.begin(), tools.archs.end(), arch) == tools.archs.end()) {
    std::string known;
    for (const std::string& a : tools.archs) known += (known.empty() ? "" : ", ") + a;
    raise(ErrorCode::Compile, "cuda_tile target: tileiras " + tools.version + " does not target " + arch +
                                  " (it targets " + (known.empty() ? "nothing it listed" : known) +
                                  "); use the PTX path (target=\"cuda\") on this GPU");
  }
  const std::string bytecode(lowered.bytecode.begin(), lowered.bytecode.end());
  c.cache_key = cpu::detail::sha256_hex("tessera-cuda-tile 2\nversion " + std::string(TESSERA_VERSION_STRING) +
                                        "\narch " + arch + "\ntileiras " + tools.version + "\n" + bytecode);
  const std::string dir = cpu::detail::resolve_cache_root(cache_dir) + "/cuda_tile";
  c.path = dir + "/" + c.cache_key + ".cubin";
  if (use_cache) {
    if (const auto bin = cpu::detail::read_checked_blob(c.path)) {
      c.bytes.assign(bin->begin(), bin->end());
      c.cache_hit = true;
      // The text of the lowering that was kept (fit_occupancy).
      if (std::ifstream text(dir + "/" + c.cache_key + ".txt"); text) {
        c.text.assign(std::istreambuf_iterator<char>(text), std::istreambuf_iterator<char>());
      }
      return c;
    }
  }
  std::vector<std::uint8_t> cubin = run_tileiras(lowered.bytecode, arch);
  fit_occupancy(kernel_func, lower_options, lowered, cubin);
  c.text = lowered.text;
  const std::string_view bin(reinterpret_cast<const char*>(cubin.data()), cubin.size());
  cpu::detail::make_directories(dir);
  cpu::detail::write_file_atomic(dir + "/" + c.cache_key + ".tileirbc",
                                 std::string(lowered.bytecode.begin(), lowered.bytecode.end()));
  cpu::detail::write_file_atomic(dir + "/" + c.cache_key + ".txt", c.text);
  cpu::detail::write_checked_blob(c.path, bin);
  c.bytes.assign(bin.begin(), bin.end());
  return c;
}

CompiledKernel compile_kernel(const ir::Operation& kernel_func, const CompileOptions& options) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  CompiledKernel k;
  k.device = options.device;
  k.signature = detail::signature(kernel_func);
  Cubin c = build_cubin(kernel_func, options.arch.empty() ? device_arch(options.device) : options.arch,
                        options.cache_dir, options.use_cache, options.assume_aligned);
  k.assumes_aligned = options.assume_aligned;
  if (options.assume_aligned) {
    k.plain = std::make_shared<detail::PlainForm>();
    k.plain->func = &kernel_func;
    k.plain->options = options;
    k.plain->options.assume_aligned = false;
  }
  k.name = c.name;
  k.text = std::move(c.text);
  k.arch = c.arch;
  k.tileiras_version = c.tileiras_version;
  k.cache_key = c.cache_key;
  k.cache_hit = c.cache_hit;
  k.fault_param = c.fault_param;
  k.faults = c.faults;
  k.flat_lanes = c.flat_lanes;
  k.symbol_params = c.symbol_params;
  k.shared_bytes = c.shared_bytes;
  const std::string mem_key = k.cache_key + "@" + std::to_string(options.device);
  {
    std::lock_guard<std::mutex> lock(detail::cache_mutex());
    if (auto it = detail::memory_cache().find(mem_key); options.use_cache && it != detail::memory_cache().end()) {
      k.handle = it->second;
    }
  }
  if (!k.handle) {
    k.handle = detail::load(options.device, k.name, std::move(c.bytes));
    std::lock_guard<std::mutex> lock(detail::cache_mutex());
    detail::memory_cache()[mem_key] = k.handle;
  }
  k.compile_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return k;
}

namespace {

// Dense row-major, as the kernel computes its strides from the extents
// (a dim of extent 1 may have any stride).
void require_dense(const CompiledKernel& k, const cpu::KernelParam& p, const tessera_cpu::BufferArg& b) {
  std::int64_t expect = 1;
  for (int d = b.rank - 1; d >= 0; --d) {
    if (b.shape[d] != 1 && b.strides[d] != expect) {
      raise(ErrorCode::ArgumentInvalid, "kernel '" + k.name + "' on the cuda_tile target: '" + p.name +
                                            "' is not dense row-major (dim " + std::to_string(d) + " has stride " +
                                            std::to_string(b.strides[d]) + ", expected " + std::to_string(expect) +
                                            "); pass a contiguous copy");
    }
    expect *= b.shape[d];
  }
}

// Whether the bound buffers satisfy what an assume_aligned kernel (the fast
// form, lower.h) relies on: base addresses and row strides (from the
// extents, as the kernel computes them) multiples of 16 bytes, and extents
// and row strides in elements below 2^31.
bool satisfies_fast_form(const CompiledKernel& k, const cpu::detail::BoundLaunch& bound) {
  constexpr std::int64_t limit = std::int64_t{1} << 31;
  for (std::size_t i = 0; i < bound.params.size(); ++i) {
    const cpu::KernelParam& p = k.signature.params[i];
    if (!p.is_buffer) continue;
    const tessera_cpu::BufferArg& b = bound.params[i].buffer;
    if (reinterpret_cast<std::uintptr_t>(b.data) % 16 != 0) return false;
    const std::int64_t bytes = p.type.dtype() == DType::bool_ ? 1 : storage_bytes(p.type.dtype());
    std::int64_t elements = 1;
    for (int d = b.rank - 1; d >= 0; --d) {
      if (b.shape[d] >= limit) return false;
      if (d == 0) break;
      elements *= b.shape[d];  // the stride of dim d - 1
      if (elements >= limit || elements * bytes % 16 != 0) return false;
    }
  }
  return true;
}

// A lane scalar's bytes as the kernel takes it: a rank-0 tile of its element
// type (integers little-endian at their width, floats encoded).
std::vector<unsigned char> scalar_bytes(const cpu::KernelParam& p, const tessera_cpu::ParamValue& v) {
  const DType d = p.type.dtype();
  const int bytes = d == DType::bool_ ? 1 : storage_bytes(d);
  const std::uint64_t bits = is_float(d) ? encode_value(v.real, d) : static_cast<std::uint64_t>(v.integer);
  std::vector<unsigned char> out(static_cast<std::size_t>(bytes));
  for (int i = 0; i < bytes; ++i) out[static_cast<std::size_t>(i)] = static_cast<unsigned char>(bits >> (8 * i));
  return out;
}

}  // namespace

namespace {

// A launch made ready: the kernel that runs (the plain form where the
// arguments are not aligned), its parameters packed at their natural
// alignment, and what must live until the kernel has run.
struct Prepared {
  const CompiledKernel* ran = nullptr;
  cuda::PreparedLaunch launch;
  std::shared_ptr<void> own_record;  // the fault word when the caller gave none
  cuda::DevicePtr record = 0;
  std::shared_ptr<void> shared;      // the shared buffers' copies
};

std::optional<Prepared> prepare(const CompiledKernel& k, std::int64_t grid, const std::vector<cpu::KernelArg>& args,
                                const LaunchOptions& options) {
  if (!k.handle) raise(ErrorCode::ArgumentInvalid, "launch of a cuda_tile CompiledKernel that holds no code");
  const std::string device = "cuda:" + std::to_string(k.device);
  cpu::detail::BoundLaunch bound = cpu::detail::bind_launch(k.signature, grid, args, device);
  if (bound.grid == 0) return std::nullopt;
  // Flat kernels: flat_lanes tiles per tile block, the count a parameter.
  const std::int64_t blocks = k.flat_lanes > 0 ? (bound.grid + k.flat_lanes - 1) / k.flat_lanes : bound.grid;
  if (blocks > 0x7FFFFFFF) {
    raise(ErrorCode::ArgumentInvalid, "kernel '" + k.name + "': " + std::to_string(blocks) +
                                          " groups exceed CUDA's grid limit of 2^31 - 1");
  }
  if (k.assumes_aligned && !satisfies_fast_form(k, bound)) {
    if (!k.plain) raise(ErrorCode::Internal, "kernel '" + k.name + "' assumes aligned buffers and has no plain form");
    return prepare(k.plain->get(), grid, args, options);
  }
  Prepared out;
  out.ran = &k;
  // One storage slot per kernel parameter of the ABI; `values` keeps them alive.
  std::vector<std::vector<unsigned char>> values;
  for (std::size_t i = 0; i < bound.params.size(); ++i) {
    const cpu::KernelParam& p = k.signature.params[i];
    const tessera_cpu::ParamValue& v = bound.params[i];
    if (!p.is_buffer) {
      values.push_back(scalar_bytes(p, v));
      continue;
    }
    require_dense(k, p, v.buffer);
    std::vector<unsigned char> ptr(sizeof(void*));
    std::memcpy(ptr.data(), &v.buffer.data, sizeof(void*));
    values.push_back(std::move(ptr));
    for (int d = 0; d < v.buffer.rank; ++d) {
      std::vector<unsigned char> extent(sizeof(std::int64_t));
      std::memcpy(extent.data(), &v.buffer.shape[d], sizeof(std::int64_t));
      values.push_back(std::move(extent));
    }
  }
  // The fault word: the caller's, else one of this launch's own (kept alive
  // past an unsynchronized launch by the per-device spare below).
  std::shared_ptr<void>& own_record = out.own_record;
  cuda::DevicePtr& record = out.record;
  record = options.fault_record;
  if (k.fault_param && record == 0) {
    if (options.synchronize) {
      own_record = cuda::allocate_shared(k.device, sizeof(std::int32_t));
    } else {
      static std::mutex spare_mutex;
      static std::unordered_map<int, std::shared_ptr<void>> spares;  // written, never read: no caller asked
      std::lock_guard<std::mutex> lock(spare_mutex);
      auto& spare = spares[k.device];
      if (!spare) spare = cuda::allocate_shared(k.device, sizeof(std::int32_t));
      own_record = spare;
    }
    record = reinterpret_cast<cuda::DevicePtr>(own_record.get());
    if (options.stream != nullptr) {
      cuda::memset_async(record, 0, sizeof(std::int32_t), *options.stream);
    } else {
      cuda::memset_async(k.device, record, 0, sizeof(std::int32_t));
    }
  }
  for (const std::string& sym : k.symbol_params) {
    // The binder solved every symbol of the signature (K and tp of K/tp).
    const auto at = std::find(k.signature.symbols.begin(), k.signature.symbols.end(), sym);
    if (at == k.signature.symbols.end()) {
      raise(ErrorCode::ArgumentInvalid, "kernel '" + k.name + "' on the cuda_tile target reads shape symbol '" + sym +
                                            "', which no parameter binds; specialize it with jit(" + sym + "=...)");
    }
    const std::int64_t v = bound.symbols[static_cast<std::size_t>(at - k.signature.symbols.begin())];
    std::vector<unsigned char> bytes(sizeof(std::int64_t));
    std::memcpy(bytes.data(), &v, sizeof v);
    values.push_back(std::move(bytes));
  }
  // Shared buffers: grid-many copies of each in one stream-ordered block
  // (reused only after this launch's work on the stream).
  std::shared_ptr<void>& shared = out.shared;
  if (!k.shared_bytes.empty()) {
    std::size_t total = 0;
    for (std::int64_t b : k.shared_bytes) total += static_cast<std::size_t>(b) * static_cast<std::size_t>(blocks);
    shared = cuda::allocate_shared(k.device, total, options.stream ? options.stream->handle() : nullptr);
    std::size_t at = 0;
    for (std::int64_t b : k.shared_bytes) {
      const cuda::DevicePtr p = reinterpret_cast<cuda::DevicePtr>(shared.get()) + at;
      std::vector<unsigned char> ptr(sizeof(void*));
      std::memcpy(ptr.data(), &p, sizeof(void*));
      values.push_back(std::move(ptr));
      at += static_cast<std::size_t>(b) * static_cast<std::size_t>(blocks);
    }
  }
  if (k.flat_lanes > 0) {
    std::vector<unsigned char> tiles(sizeof(std::int64_t));
    std::memcpy(tiles.data(), &bound.grid, sizeof(std::int64_t));
    values.push_back(std::move(tiles));
  }
  if (k.fault_param) {
    std::vector<unsigned char> ptr(sizeof(void*));
    std::memcpy(ptr.data(), &record, sizeof(void*));
    values.push_back(std::move(ptr));
  }
  // Packed at each value's natural alignment (its size): one blob a graph
  // node can hold, with the offset of each parameter.
  for (const auto& v : values) {
    const std::size_t align = v.size();
    std::size_t at = out.launch.params.size();
    at = (at + align - 1) / align * align;
    out.launch.params.resize(at + v.size());
    std::memcpy(out.launch.params.data() + at, v.data(), v.size());
    out.launch.offsets.push_back(at);
  }
  out.launch.function = &k.handle->function;
  out.launch.config.grid = {static_cast<unsigned>(blocks)};
  out.launch.config.block = {1, 1, 1};  // tile kernels: the CTA size is tileiras's
  out.launch.config.stream = options.stream;
  return out;
}

}  // namespace

void launch(const CompiledKernel& k, std::int64_t grid, std::vector<cpu::KernelArg> args,
            const LaunchOptions& options) {
  std::optional<Prepared> p = prepare(k, grid, args, options);
  if (!p) return;
  std::vector<void*> params;
  for (std::size_t at : p->launch.offsets) params.push_back(p->launch.params.data() + at);
  params.push_back(nullptr);
  p->launch.function->launch(p->launch.config, params.data());
  if (!options.synchronize) return;
  if (options.stream != nullptr) {
    options.stream->synchronize();
  } else {
    cuda::synchronize(k.device);
  }
  if (p->ran->fault_param) {
    std::int32_t code = 0;
    cuda::copy_to_host(k.device, &code, p->record, sizeof code);
    if (auto bad = describe_fault(*p->ran, &code)) raise(bad->code, bad->message);
  }
}

std::optional<cuda::PreparedLaunch> prepare_launch(const CompiledKernel& k, std::int64_t grid,
                                                   std::vector<cpu::KernelArg> args, const LaunchOptions& options) {
  if (options.synchronize) {
    raise(ErrorCode::ArgumentInvalid, "prepare_launch of cuda_tile kernel '" + k.name +
                                          "' needs synchronize = false (a prepared launch cannot wait for itself)");
  }
  if (k.fault_param && options.fault_record == 0) {
    raise(ErrorCode::ArgumentInvalid, "prepare_launch of cuda_tile kernel '" + k.name +
                                          "' needs a fault_record: the kernel reports faults into one");
  }
  if (!k.shared_bytes.empty()) {
    raise(ErrorCode::ArgumentInvalid, "cuda_tile kernel '" + k.name +
                                          "' has shared buffers, whose per-launch copies a captured graph cannot "
                                          "hold yet; call without capture_graph");
  }
  std::optional<Prepared> p = prepare(k, grid, args, options);
  if (!p) return std::nullopt;
  return p->launch;
}

std::optional<KernelFault> describe_fault(const CompiledKernel& k, const void* host_record) {
  std::int32_t code = 0;
  std::memcpy(&code, host_record, sizeof code);
  if (code == 0) return std::nullopt;
  if (code < 0 || static_cast<std::size_t>(code) > k.faults.size()) {
    return KernelFault{ErrorCode::Internal, "kernel '" + k.name + "' on the cuda_tile target wrote fault number " +
                                                std::to_string(code) + ", which it does not have"};
  }
  KernelFault f = k.faults[static_cast<std::size_t>(code) - 1];
  f.message += " (on cuda:" + std::to_string(k.device) + ", cuda_tile target)";
  return f;
}

}  // namespace tessera::cuda_tile
