// compile_kernel / launch for the CUDA backend: Tile IR -> CUDA C++ -> NVRTC
// cubin (cached on disk and in memory) -> module -> launch with the CPU
// backend's argument binding.
//
// Disk cache: <root>/cuda/<key>.cubin with a sidecar <key>.cubin.sha256 (the
// cubin's hash; an entry that does not match is rebuilt) and <key>.cu (the
// source). The key is the sha256 of the source, the architecture, NVRTC's
// version, the device headers and the Tessera version. The helpers (hashing,
// the cache root, atomic writes) are the CPU backend's.
#include "tessera/backends/cuda/cuda_backend.h"

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstring>
#include <future>
#include <mutex>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "backends/cpu/compile_cache.h"
#include "backends/cpu/launch_binding.h"
#include "backends/cuda/codegen/emitter.h"
#include "backends/cuda/driver_api.h"
#include "tessera/support/error.h"
#include "tessera/version.h"

namespace tessera::cuda {

namespace detail {

// Host mirror of tsr::Params (src/backends/cuda/device/tile.cuh).
struct HostBuf {
  void* data;
  std::int64_t shape[8];
  std::int64_t strides[8];
};
struct HostFault {
  std::int32_t code, kind, param, dim;
  std::int64_t index, extent, group;
};
static_assert(sizeof(HostFault) == kFaultRecordBytes, "kFaultRecordBytes must match the device's fault record");
struct alignas(64) HostTmaMap {
  unsigned long long bits[16];
};
struct HostParams {
  HostBuf buf[16];
  double real[16];
  std::int64_t integer[16];
  std::int64_t sym[16];
  std::int64_t grid;
  void* fault;
  HostTmaMap tma[kMaxTmaMaps];
};
static_assert(offsetof(HostParams, tma) == 2624 && sizeof(HostParams) == 3136, "the launch ABI must match tile.cuh");

// Encodes the kernel's tensor maps from the buffers in the block (their
// addresses, extents and strides); false when one cannot describe its
// tensor (rank, alignment, strides, extents) or the driver has no encoder:
// the launch then runs the kernel's cp.async form.
bool encode_tma_maps(const CompiledKernel& k, HostParams& hp) {
  const DriverApi& api = driver();
  if (api.cuTensorMapEncodeTiled == nullptr || k.tma_maps.size() > kMaxTmaMaps) return false;
  constexpr std::size_t kParams = sizeof(HostParams::buf) / sizeof(HostBuf);
  for (std::size_t i = 0; i < k.tma_maps.size(); ++i) {
    const TmaMapSpec& m = k.tma_maps[i];
    if (m.param < 0 || static_cast<std::size_t>(m.param) >= kParams) return false;
    const HostBuf& b = hp.buf[static_cast<std::size_t>(m.param)];
    const std::int64_t rows = b.shape[0], cols = b.shape[1], row_stride = b.strides[0];
    const auto address = reinterpret_cast<std::uintptr_t>(b.data);
    if (b.data == nullptr || rows < 1 || cols < 1 || rows >= (1ll << 31) || cols >= (1ll << 31) || b.strides[1] != 1 ||
        row_stride < cols || address % 16 != 0 || (row_stride * m.elem_bytes) % 16 != 0 ||
        row_stride * m.elem_bytes >= (1ll << 40))
      return false;
    const unsigned long long dims[2] = {static_cast<unsigned long long>(cols), static_cast<unsigned long long>(rows)};
    const unsigned long long strides[1] = {static_cast<unsigned long long>(row_stride * m.elem_bytes)};
    const unsigned box[2] = {static_cast<unsigned>(m.box_cols), static_cast<unsigned>(m.box_rows)};
    const unsigned element_strides[2] = {1, 1};
    const int type = m.elem_bytes == 1 ? kTensorMapUint8 : kTensorMapUint16;
    if (m.elem_bytes != 1 && m.elem_bytes != 2) return false;
    if (api.cuTensorMapEncodeTiled(&hp.tma[i], type, 2, b.data, dims, strides, box, element_strides,
                                   kTensorMapInterleaveNone, kTensorMapSwizzle128B, kTensorMapL2Promotion256B,
                                   kTensorMapOobFillZeros) != kCudaSuccess)
      return false;
  }
  return true;
}

struct LoadedKernel {
  Module module;
  Function function;
};

namespace {

// The caches below are never destroyed: a cp.async form may still be
// compiling in the background when the process exits.
const std::string& headers_hash() {
  static const std::string& hash = *new std::string([] {
    std::string all;
    for (const std::string& n : device_header_names()) all += n + "\n" + std::string(device_header(n)) + "\n";
    return cpu::detail::sha256_hex(all);
  }());
  return hash;
}

std::mutex& cache_mutex() {
  static std::mutex& m = *new std::mutex;
  return m;
}
std::unordered_map<std::string, std::shared_ptr<const LoadedKernel>>& memory_cache() {
  static auto& m = *new std::unordered_map<std::string, std::shared_ptr<const LoadedKernel>>;
  return m;
}
// Kernels being compiled now, by memory key: an executable compiles its
// kernels in parallel, and two of them are often the same code (the GEMMs
// of a backward pass with the same tiles); the second waits for the first.
using PendingKernel = std::shared_future<std::shared_ptr<const LoadedKernel>>;
std::unordered_map<std::string, PendingKernel>& in_flight() {
  static auto& m = *new std::unordered_map<std::string, PendingKernel>;
  return m;
}

// The text a kernel's cache key hashes: its source without the first line,
// the comment that names the kernel, so identical code under two names is
// one entry.
std::string_view keyed_source(std::string_view source) {
  if (source.rfind("// ", 0) != 0) return source;
  const std::size_t end = source.find('\n');
  return end == std::string_view::npos ? source : source.substr(end + 1);
}

std::shared_ptr<const LoadedKernel> load(int device, const std::vector<char>& cubin) {
  CompiledProgram program;
  program.cubin = cubin;
  auto k = std::make_shared<LoadedKernel>();
  k->module = Module::load(device, program);
  k->function = k->module.function(kEntryName);
  return k;
}

}  // namespace
}  // namespace detail

std::string emit_kernel_source(const ir::Operation& kernel_func, const KernelCompileOptions& options) {
  return detail::emit_kernel(kernel_func, options).source;
}

namespace detail {
namespace {

// NVRTC compiles that a caller waits for now. A kernel's cp.async form, which
// a launch needs only when no tensor map can describe its tensors, compiles
// when none is running: an executable's kernels compile in parallel, and
// compiling both forms of every GEMM at once made each take up to 1.5x as
// long (the MLP step's first call).
struct ForegroundCompiles {
  std::mutex mutex;
  std::condition_variable idle;
  int running = 0;
};
ForegroundCompiles& foreground() {
  static ForegroundCompiles& f = *new ForegroundCompiles;
  return f;
}
class ForegroundCompile {
 public:
  ForegroundCompile() {
    std::lock_guard<std::mutex> lock(foreground().mutex);
    ++foreground().running;
  }
  ~ForegroundCompile() {
    {
      std::lock_guard<std::mutex> lock(foreground().mutex);
      --foreground().running;
    }
    foreground().idle.notify_all();
  }
  ForegroundCompile(const ForegroundCompile&) = delete;
  ForegroundCompile& operator=(const ForegroundCompile&) = delete;
};
void wait_for_foreground_compiles() {
  std::unique_lock<std::mutex> lock(foreground().mutex);
  foreground().idle.wait(lock, [] { return foreground().running == 0; });
}

// Caches, compiles (or reads from the disk cache) and loads an emitted
// kernel; options.arch names the architecture it was emitted for.
// `background`: a cp.async form, whose NVRTC run waits until no foreground
// compile runs.
CompiledKernel compile_emitted(EmittedKernel e, const KernelCompileOptions& options, bool background) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  CompiledKernel k;
  k.device = options.device;
  k.arch = options.arch;
  const std::vector<std::string> flags = {"--fmad=false", "-std=c++17"};
  std::string key_text = "tessera-cuda 1\nversion " + std::string(TESSERA_VERSION_STRING) + "\narch " + k.arch +
                         "\nnvrtc " + std::to_string(nvrtc_version()) + "\nheaders " + headers_hash() + "\nflags";
  for (const std::string& f : flags) key_text += " " + f;
  key_text += "\n";
  key_text += keyed_source(e.source);
  k.cache_key = cpu::detail::sha256_hex(key_text);
  const std::string mem_key = k.cache_key + "@" + std::to_string(options.device);

  // This call compiles (or reads from disk) what no other call holds or is
  // compiling; `mine` tells the callers that wait on it.
  std::promise<std::shared_ptr<const LoadedKernel>> mine;
  bool owner = false;
  if (options.use_cache && !options.ptx) {
    PendingKernel theirs;
    {
      std::lock_guard<std::mutex> lock(cache_mutex());
      if (auto it = memory_cache().find(mem_key); it != memory_cache().end()) {
        k.handle = it->second;
      } else if (auto p = in_flight().find(mem_key); p != in_flight().end()) {
        theirs = p->second;
      } else {
        in_flight().emplace(mem_key, mine.get_future().share());
        owner = true;
      }
    }
    if (theirs.valid()) k.handle = theirs.get();  // rethrows the other call's CompileError
    k.cache_hit = k.handle != nullptr;
  }
  try {
    const std::string dir = cpu::detail::resolve_cache_root(options.cache_dir) + "/cuda";
    const std::string cubin_path = dir + "/" + k.cache_key + ".cubin";
    if (!k.handle && options.use_cache && !options.ptx) {
      if (const auto bin = cpu::detail::read_checked_blob(cubin_path)) {
        k.handle = load(options.device, std::vector<char>(bin->begin(), bin->end()));
        k.cache_hit = true;
      }
    }
    if (!k.handle) {
      CompileOptions co;
      co.arch = k.arch;
      co.ptx = options.ptx;
      co.extra = flags;
      std::optional<ForegroundCompile> counted;
      if (background) {
        wait_for_foreground_compiles();
      } else {
        counted.emplace();
      }
      const CompiledProgram program = compile(e.source, e.name + ".cu", options.device, co);
      counted.reset();
      k.ptx = program.ptx;
      cpu::detail::make_directories(dir);
      cpu::detail::write_file_atomic(dir + "/" + k.cache_key + ".cu", e.source);
      cpu::detail::write_checked_blob(cubin_path, std::string_view(program.cubin.data(), program.cubin.size()));
      k.handle = load(options.device, program.cubin);
    }
  } catch (...) {
    if (owner) {
      mine.set_exception(std::current_exception());
      std::lock_guard<std::mutex> lock(cache_mutex());
      in_flight().erase(mem_key);
    }
    throw;
  }
  {
    std::lock_guard<std::mutex> lock(cache_mutex());
    memory_cache()[mem_key] = k.handle;
    if (owner) in_flight().erase(mem_key);
  }
  if (owner) mine.set_value(k.handle);
  if (e.shared_bytes > 48 * 1024) {
    const int optin = device_properties(options.device).shared_bytes_per_block_optin;
    if (e.shared_bytes > optin) {
      raise(ErrorCode::Compile, "CUDA backend: kernel '" + e.name + "' needs " + std::to_string(e.shared_bytes) +
                                    " bytes of shared memory per block; the device allows " + std::to_string(optin));
    }
    k.handle->function.set_max_dynamic_shared(static_cast<int>(e.shared_bytes));
  }
  k.name = e.name;
  k.source = std::move(e.source);
  k.block_threads = e.block_threads;
  k.flat = e.flat;
  k.tiles_per_thread = e.tiles_per_thread;
  k.contiguous_buffers = options.contiguous_buffers;
  k.aligned_buffers = e.aligned_vectors;
  k.shared_bytes = e.shared_bytes;
  k.tma_maps = e.tma_maps;
  for (int i = 0; i < e.smem_count; ++i) k.shared_names.push_back("shared#" + std::to_string(i));
  k.signature.name = e.name;
  k.signature.params = std::move(e.params);
  k.signature.symbols = std::move(e.symbols);
  k.signature.specialized = std::move(e.specialized);
  k.signature.group_shape = std::move(e.group_shape);
  k.signature.group_size = e.group_size;
  k.compile_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return k;
}

}  // namespace
}  // namespace detail

CompiledKernel compile_kernel(const ir::Operation& kernel_func, const KernelCompileOptions& options) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  KernelCompileOptions emit_options = options;
  // The emitter picks the tensor-core path by architecture (wgmma on sm_90a).
  emit_options.arch = options.arch.empty() ? device_properties(options.device).arch() : options.arch;
  detail::EmittedKernel e = detail::emit_kernel(kernel_func, emit_options);
  // A kernel with tensor maps also has a cp.async form, for launches whose
  // tensors no tensor map can describe. It is emitted now (the task then
  // needs no Tile IR) and compiled in the background, after the compiles
  // that callers wait for.
  std::shared_future<std::shared_ptr<const CompiledKernel>> cp_async_form;
  if (!e.tma_maps.empty()) {
    KernelCompileOptions plain = emit_options;
    plain.no_tma = true;
    plain.ptx = false;
    detail::EmittedKernel pe = detail::emit_kernel(kernel_func, plain);
    cp_async_form = std::async(std::launch::async, [pe = std::move(pe), plain]() mutable {
                      return std::make_shared<const CompiledKernel>(
                          detail::compile_emitted(std::move(pe), plain, true));
                    }).share();
  }
  CompiledKernel k = detail::compile_emitted(std::move(e), emit_options, false);
  k.cp_async_form = std::move(cp_async_form);
  k.compile_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return k;
}

const CompiledKernel* CompiledKernel::cp_async() const {
  return cp_async_form.valid() ? cp_async_form.get().get() : nullptr;  // waits; rethrows its CompileError
}

namespace {

// A kernel compiled for contiguous buffers reads the innermost stride as 1.
void check_unit_stride(const CompiledKernel& k, std::size_t param, const tessera_cpu::BufferArg& b) {
  if (param >= k.signature.params.size() || !k.signature.params[param].is_buffer || b.rank < 1) return;
  const std::int64_t extent = b.shape[b.rank - 1], stride = b.strides[b.rank - 1];
  if (extent > 1 && stride != 1) {
    raise(ErrorCode::ArgumentInvalid, "kernel '" + k.name + "': buffer '" + k.signature.params[param].name +
                                          "' has innermost stride " + std::to_string(stride) +
                                          "; the kernel was compiled for contiguous buffers");
  }
  const auto address = reinterpret_cast<std::uintptr_t>(b.data);
  if (k.aligned_buffers && address % kVectorAlignment != 0) {
    raise(ErrorCode::ArgumentInvalid, "kernel '" + k.name + "': buffer '" + k.signature.params[param].name +
                                          "' starts at an address that is not " + std::to_string(kVectorAlignment) +
                                          "-byte aligned; the kernel's vector accesses need aligned buffers (an "
                                          "executable copies such a view first)");
  }
}

// The parameter block and configuration of a launch; `fault` receives the
// record a checked launch allocates. nullopt for an empty grid.
std::optional<PreparedLaunch> prepare(const CompiledKernel& k, std::int64_t grid, std::vector<KernelArg>& args,
                                      const KernelLaunchOptions& options, std::shared_ptr<void>& fault) {
  if (!k.handle) raise(ErrorCode::ArgumentInvalid, "launch of a CompiledKernel that holds no compiled code");
  const std::string device = "cuda:" + std::to_string(k.device);
  cpu::detail::BoundLaunch bound = cpu::detail::bind_launch(k.signature, grid, args, device);
  if (bound.grid == 0) return std::nullopt;
  detail::HostParams hp;
  std::memset(&hp, 0, sizeof hp);
  for (std::size_t i = 0; i < bound.params.size(); ++i) {
    const tessera_cpu::ParamValue& v = bound.params[i];
    if (k.contiguous_buffers) check_unit_stride(k, i, v.buffer);
    hp.buf[i].data = v.buffer.data;
    for (int d = 0; d < 8; ++d) {
      hp.buf[i].shape[d] = v.buffer.shape[d];
      hp.buf[i].strides[d] = v.buffer.strides[d];
    }
    hp.real[i] = v.real;
    hp.integer[i] = v.integer;
  }
  for (std::size_t i = 0; i < bound.symbols.size(); ++i) hp.sym[i] = bound.symbols[i];
  hp.grid = bound.grid;
  if (!k.tma_maps.empty() && !detail::encode_tma_maps(k, hp)) {
    const CompiledKernel* plain = k.cp_async();
    if (!plain) raise(ErrorCode::Compile, "kernel '" + k.name + "' has no cp.async form to fall back to");
    return prepare(*plain, grid, args, options, fault);
  }
  const std::int64_t per_block = static_cast<std::int64_t>(k.block_threads) * k.tiles_per_thread;
  const std::int64_t blocks = k.flat ? (bound.grid + per_block - 1) / per_block : bound.grid;
  if (blocks > 0x7FFFFFFF) {
    raise(ErrorCode::ArgumentInvalid,
          "kernel '" + k.name + "': " + std::to_string(blocks) + " thread blocks exceed CUDA's grid limit of 2^31 - 1");
  }
  if (!options.check_faults && options.fault_record != 0) hp.fault = reinterpret_cast<void*>(options.fault_record);
  if (options.check_faults) {
    fault = allocate_shared(k.device, sizeof(detail::HostFault));
    const DevicePtr fp = reinterpret_cast<DevicePtr>(fault.get());
    if (options.stream != nullptr) {
      memset_async(fp, 0, sizeof(detail::HostFault), *options.stream);
    } else {
      const detail::HostFault zero{};
      copy_to_device(k.device, fp, &zero, sizeof zero);
    }
    hp.fault = fault.get();
  }
  PreparedLaunch p;
  p.function = &k.handle->function;
  p.config.grid = {static_cast<unsigned>(blocks)};
  p.config.block = {static_cast<unsigned>(k.block_threads)};
  p.config.shared_bytes = static_cast<unsigned>(k.shared_bytes);
  p.config.stream = options.stream;
  p.params.resize(sizeof hp);
  std::memcpy(p.params.data(), &hp, sizeof hp);
  return p;
}

}  // namespace

bool refresh_tensor_maps(const CompiledKernel& k, const PreparedLaunch& p, std::span<unsigned char> block) {
  // The cp.async form (prepared where the maps did not fit) reads any buffer.
  if (k.tma_maps.empty() || !k.handle || p.function != &k.handle->function) return true;
  if (block.size() != sizeof(detail::HostParams)) return false;
  detail::HostParams hp;  // aligned as the encoder needs (64 bytes)
  std::memcpy(&hp, block.data(), sizeof hp);
  if (!detail::encode_tma_maps(k, hp)) return false;
  std::memcpy(block.data(), &hp, sizeof hp);
  return true;
}

std::size_t param_address_offset(std::size_t param) {
  constexpr std::size_t kParams = sizeof(detail::HostParams::buf) / sizeof(detail::HostBuf);
  if (param >= kParams) {
    raise(ErrorCode::ArgumentInvalid, "param_address_offset: parameter " + std::to_string(param) + " of at most " +
                                          std::to_string(kParams));
  }
  return offsetof(detail::HostParams, buf) + param * sizeof(detail::HostBuf) + offsetof(detail::HostBuf, data);
}

std::optional<PreparedLaunch> prepare_launch(const CompiledKernel& k, std::int64_t grid, std::vector<KernelArg> args,
                                             const KernelLaunchOptions& options) {
  if (options.check_faults) {
    raise(ErrorCode::ArgumentInvalid, "prepare_launch of kernel '" + k.name +
                                          "' needs check_faults = false (a prepared launch cannot wait for its fault "
                                          "record); give it a fault_record instead");
  }
  std::shared_ptr<void> no_fault;
  return prepare(k, grid, args, options, no_fault);
}

void launch(const CompiledKernel& k, std::int64_t grid, std::vector<KernelArg> args,
            const KernelLaunchOptions& options) {
  std::shared_ptr<void> fault;
  std::optional<PreparedLaunch> p = prepare(k, grid, args, options, fault);
  if (!p) return;
  void* params[] = {p->params.data(), nullptr};
  p->function->launch(p->config, params);
  if (!options.check_faults) return;
  if (options.stream != nullptr) options.stream->synchronize();
  detail::HostFault f{};
  copy_to_host(k.device, &f, reinterpret_cast<DevicePtr>(fault.get()), sizeof f);
  // The fault record belongs to the kernel that ran (the cp.async form when the TMA maps did not fit).
  const CompiledKernel& ran = p->function == &k.handle->function || !k.cp_async() ? k : *k.cp_async();
  if (auto bad = describe_fault(ran, &f)) raise(bad->code, bad->message);
}

std::optional<KernelFault> describe_fault(const CompiledKernel& k, const void* host_record) {
  detail::HostFault f{};
  std::memcpy(&f, host_record, sizeof f);
  if (f.code == 0) return std::nullopt;
  const std::string device = "cuda:" + std::to_string(k.device);
  std::string what;
  auto param_name = [&](int p) {
    if (p >= 0 && static_cast<std::size_t>(p) < k.signature.params.size()) return k.signature.params[p].name;
    if (p <= -1 && static_cast<std::size_t>(-1 - p) < k.shared_names.size()) return k.shared_names[-1 - p];
    return std::string("a staging buffer");
  };
  switch (f.kind) {
    case 0:
    case 1:
      what = std::string(f.kind == 0 ? "load" : "store") + " index " + std::to_string(f.index) +
             " out of range for dim " + std::to_string(f.dim) + " of '" + param_name(f.param) + "' (extent " +
             std::to_string(f.extent) + ")";
      break;
    case 2: what = "integer division by zero"; break;
    case 3: what = "negative integer exponent " + std::to_string(f.index); break;
    case 5:
      what = "integer result " + std::to_string(f.index) + " is out of range (largest allowed " +
             std::to_string(f.extent) + "): an exact integer sum overflowed its result type or passed 2^53";
      break;
    default: what = "tile.for step " + std::to_string(f.index) + " is not positive"; break;
  }
  return KernelFault{f.code == 1 ? ErrorCode::IndexOutOfRange : ErrorCode::ArgumentInvalid,
                     "kernel '" + k.name + "': " + what + " (group " + std::to_string(f.group) + " of kernel '" + k.name +
                         "', on " + device + ")"};
}

}  // namespace tessera::cuda
