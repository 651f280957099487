// The CUDA runtime layer: devices, device memory, streams, events, run-time
// compilation (NVRTC), modules, kernel launch, CUDA graphs and the cuBLAS /
// cuBLASLt baselines.
//
// Everything is reached through libraries opened on first use (libcuda.so.1,
// libnvrtc, libcublas), so one build runs with and without GPUs. On a machine
// without a driver or device every entry point raises DeviceError with code
// DeviceUnavailable saying why; driver failures raise DeviceError naming the
// CUDA error (CUDA_ERROR_INVALID_VALUE, ...), and allocation failures raise
// OutOfMemoryError with the sizes involved.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/numerics/dtype.h"

namespace tessera::cuda {

// ---- devices ----------------------------------------------------------------

// True when the driver loads and reports at least one device. Never throws.
bool available();
// Why available() is false ("" when it is true). Never throws.
std::string unavailable_reason();
int device_count();

struct DeviceProperties {
  int ordinal = 0;
  std::string name;
  int compute_major = 0;
  int compute_minor = 0;
  int multiprocessors = 0;
  int max_threads_per_block = 0;
  int shared_bytes_per_block = 0;        // without opting in
  int shared_bytes_per_block_optin = 0;  // the most a kernel may be granted
  int l2_bytes = 0;
  std::size_t total_memory_bytes = 0;
  int memory_clock_khz = 0;  // peak memory clock
  int memory_bus_bits = 0;   // global memory bus width
  // The exact architecture NVRTC targets: "sm_90a" on Hopper (wgmma, setmaxnreg
  // need the "a" variant), "sm_80", "sm_89", ... elsewhere.
  std::string arch() const;
};
DeviceProperties device_properties(int ordinal);
// Waits for all work on the device.
void synchronize(int ordinal);
// "cuda" -> 0, "cuda:N" -> N; anything else raises ArgumentError. The ordinal
// is checked against device_count() only by the functions that use it.
int parse_device(std::string_view device);
// Free and total device memory in bytes.
std::pair<std::size_t, std::size_t> memory_info(int ordinal);
// Lets kernels on `device` read and write memory of `peer` (NVLink or PCIe
// peer-to-peer), for the life of the process. False when the hardware
// cannot; true when it now can (always for device == peer).
bool enable_peer_access(int device, int peer);

// ---- streams and events -------------------------------------------------------

// A non-blocking stream on one device. Streams own their handle (move-only).
class Stream {
 public:
  explicit Stream(int device = 0);
  ~Stream();
  Stream(Stream&& other) noexcept;
  Stream& operator=(Stream&& other) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  int device() const { return device_; }
  void* handle() const { return handle_; }
  void synchronize() const;
  // True when all work queued so far has finished.
  bool idle() const;

 private:
  int device_ = 0;
  void* handle_ = nullptr;
};

class Event {
 public:
  explicit Event(int device = 0);
  ~Event();
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  void record(const Stream& stream);
  // Records on the device's default stream (where executables launch).
  void record_default_stream();
  // Work queued on `stream` (nullptr: the default stream) after this call
  // waits until the work this event recorded is done; the host does not wait.
  void wait(const Stream* stream) const;
  // The same for the default stream of another device (cross-GPU ordering).
  void wait_on(int device) const;
  void synchronize() const;
  // True when the work it recorded is done (or nothing was recorded).
  bool done() const;
  void* handle() const { return handle_; }

 private:
  int device_ = 0;
  void* handle_ = nullptr;
};
// Milliseconds between two recorded events (both must have completed or be
// waited for; this waits on `end`).
float elapsed_ms(const Event& start, const Event& end);

// ---- device memory ------------------------------------------------------------

using DevicePtr = std::uint64_t;

// Plain allocation and release (cuMemAlloc / cuMemFree), no caching.
DevicePtr device_malloc(int device, std::size_t bytes);
void device_free(int device, DevicePtr ptr);

struct MemoryStats {
  std::size_t bytes_in_use = 0;          // handed out and not yet released
  std::size_t bytes_cached = 0;          // released to the cache, kept for reuse
  std::size_t peak_in_use = 0;           // highest bytes_in_use since the last reset
  std::uint64_t allocations = 0;         // allocate() calls
  std::uint64_t frees = 0;               // release() calls
  std::uint64_t cache_hits = 0;          // allocations served from the cache
  std::uint64_t device_allocations = 0;  // cuMemAlloc calls made
};

// The per-device caching allocator. Released blocks are kept and reused for
// later requests of about the same size (never more than twice the request),
// so steady-state loops make no driver calls. A block is reused only for the
// stream it was allocated for (0: the default stream): work still queued on
// that stream is ordered before the new user's. When the device is out of
// memory the cache is emptied and the allocation retried once.
class CachingAllocator {
 public:
  static CachingAllocator& for_device(int device);

  DevicePtr allocate(std::size_t bytes, void* stream = nullptr);
  void release(DevicePtr ptr);
  MemoryStats stats() const;
  void reset_peak();
  // Returns every cached block to the driver.
  void empty_cache();
  int device() const { return device_; }

  explicit CachingAllocator(int device);
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

 private:
  struct State;
  // Returns every cached block to the driver; the caller holds the lock.
  void free_cached_locked();
  int device_;
  std::unique_ptr<State> state_;
};

// Device memory from the caching allocator whose last owner releases it.
std::shared_ptr<void> allocate_shared(int device, std::size_t bytes, void* stream = nullptr);

// Copies; the synchronous forms wait until the copy is done.
void copy_to_device(int device, DevicePtr dst, const void* src, std::size_t bytes);
void copy_to_host(int device, void* dst, DevicePtr src, std::size_t bytes);
void copy_device_to_device(int device, DevicePtr dst, DevicePtr src, std::size_t bytes);
void copy_to_device_async(DevicePtr dst, const void* src, std::size_t bytes, const Stream& stream);
void copy_to_host_async(void* dst, DevicePtr src, std::size_t bytes, const Stream& stream);
void copy_device_to_device_async(DevicePtr dst, DevicePtr src, std::size_t bytes, const Stream& stream);
void memset_async(DevicePtr dst, unsigned char value, std::size_t bytes, const Stream& stream);
// The same on the device's default stream.
void memset_async(int device, DevicePtr dst, unsigned char value, std::size_t bytes);

// ---- deferred checks -------------------------------------------------------------
//
// Work queued without synchronizing (the kernels of a compiled executable)
// leaves a check behind: it runs at the device's next host read,
// Tensor::to("cpu") (so .numpy()), or at synchronize_checks(). A check
// reads its fault records back and raises the first fault it finds.

void defer_check(int device, std::function<void()> check);
// A check of one fault record that many runs share (an executable's, a CUDA
// graph's): while a check with the same key is pending, another would read
// the same record at the same time, so none is added. Its record must stay
// allocated while the check is pending (the check holds it).
void defer_check(int device, const void* key, std::function<void()> check);
// Runs and removes the device's pending checks, oldest first. The first that
// raises propagates; the checks after it are dropped (they belong to work
// queued after the fault, whose inputs it may have spoiled).
void run_deferred_checks(int device);
std::size_t pending_checks(int device);

// ---- watched work ------------------------------------------------------------------
//
// Work that may never finish on its own: a collective whose peer process
// died or could not queue its part leaves this GPU waiting forever. Before
// the host blocks on a device (synchronize, the synchronous copies, stream
// and event waits) it settles the device's watches: it polls each until
// its work is done, its `poll` names an error, or `timeout_seconds` have
// passed since it was watched; then `abort` runs (it must make the work
// end, as ncclCommAbort does) and the wait raises CollectiveError with the
// watch's text and why.
struct Watch {
  std::string what;                                 // "allreduce #3 over mesh axis 'tp' (nccl), member cuda:1"
  double timeout_seconds = 300;                     // from watch()
  std::function<std::string()> poll;                // "" while healthy, else what went wrong
  // Given the error text, ends the work; called once. What it returns is
  // added to the error ("" for nothing).
  std::function<std::string(const std::string&)> abort;
};
// Watches the work queued so far on `device`'s default stream.
void watch(int device, Watch w);
// What the blocking calls do first; returns at once when nothing is watched.
void settle_watches(int device);
std::size_t watched(int device);

// ---- run-time compilation (NVRTC) ------------------------------------------------

struct CompileOptions {
  // "" targets the device's exact architecture (DeviceProperties::arch()).
  std::string arch;
  bool ptx = false;  // also return the PTX (compiled for compute_XX of arch)
  bool line_info = false;
  std::vector<std::string> extra;  // more nvrtc options, as given
};

struct CompiledProgram {
  std::string arch;  // "sm_90a"
  std::vector<char> cubin;
  std::string ptx;  // only when CompileOptions::ptx
  std::string log;  // NVRTC's messages (warnings) even on success
};

// Compiles one translation unit with NVRTC. `source` may #include the
// embedded device headers by name (see device_header()). Compile errors raise
// CompileError with NVRTC's log. `device` picks the architecture when
// options.arch is empty.
CompiledProgram compile(std::string_view source, std::string_view name, int device, const CompileOptions& options = {});
// NVRTC's version as major * 1000 + minor * 10, and the library it came from.
int nvrtc_version();
std::string nvrtc_library();

// The device headers embedded in the library (for example
// "tessera/numerics.cuh"), as NVRTC sees them; raises ArgumentError for an
// unknown name.
std::string_view device_header(std::string_view name);
std::vector<std::string> device_header_names();

// ---- modules and launch ---------------------------------------------------------

class Function;

// A loaded cubin or PTX image (unloaded when the last copy goes).
class Module {
 public:
  static Module load(int device, const CompiledProgram& program);
  static Module load_image(int device, const void* image);
  Function function(const std::string& name) const;
  int device() const { return device_; }

 private:
  struct Handle;
  int device_ = 0;
  std::shared_ptr<Handle> handle_;
  friend class Function;
};

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

struct LaunchConfig {
  Dim3 grid;
  Dim3 block;
  unsigned shared_bytes = 0;       // dynamic shared memory
  const Stream* stream = nullptr;  // nullptr: the device's default stream
};

class Function {
 public:
  // Lets launches ask for more than 48 KiB of dynamic shared memory.
  void set_max_dynamic_shared(int bytes) const;
  // The driver's count of this kernel's blocks of `block_threads` threads
  // that fit on one multiprocessor together.
  int active_blocks_per_multiprocessor(int block_threads, std::size_t dynamic_shared = 0) const;
  void* handle() const { return handle_; }
  const std::string& name() const { return name_; }
  int device() const { return device_; }

  // `args[i]` points at the value of parameter i, as cuLaunchKernel takes them.
  void launch(const LaunchConfig& config, void** args) const;
  template <typename... Args>
  void operator()(const LaunchConfig& config, const Args&... args) const {
    void* params[] = {const_cast<void*>(static_cast<const void*>(&args))..., nullptr};
    launch(config, params);
  }

 private:
  friend class Module;
  std::shared_ptr<Module::Handle> module_;
  void* handle_ = nullptr;
  std::string name_;
  int device_ = 0;
};

// ---- strided views ---------------------------------------------------------------

// Gathers a strided view into contiguous memory at dst, in row-major order,
// on the device's default stream without the host (a kernel compiled on first
// use; src/backends/cuda/strided_copy.cpp). `src` is the view's first
// element, `strides` count elements (any sign); elements of 1, 2, 4, 8 or 16
// bytes, at most 8 dims once size-1 dims and dims that step as one are
// merged.
void strided_copy(int device, DevicePtr dst, DevicePtr src, std::size_t element_bytes,
                  std::span<const std::int64_t> shape, std::span<const std::int64_t> strides);
// The same launch prepared, not issued (a CUDA graph's kernel node): the
// kernel, its configuration and its one by-value parameter. nullopt for an
// empty view.
struct StridedCopyLaunch {
  const Function* function = nullptr;
  LaunchConfig config;
  std::vector<unsigned char> param;
};
std::optional<StridedCopyLaunch> prepare_strided_copy(int device, DevicePtr dst, DevicePtr src,
                                                      std::size_t element_bytes, std::span<const std::int64_t> shape,
                                                      std::span<const std::int64_t> strides);

// ---- CUDA graphs ----------------------------------------------------------------

// An instantiated graph, replayable on any stream of its device.
class Graph {
 public:
  void replay(const Stream& stream) const;
  std::size_t node_count() const { return nodes_; }

 private:
  friend class GraphCapture;
  struct Handle;
  std::shared_ptr<Handle> handle_;
  std::size_t nodes_ = 0;
};

// Records the work queued on `stream` between construction and end() into a
// graph instead of running it. A capture abandoned without end() is ended and
// discarded by the destructor.
class GraphCapture {
 public:
  explicit GraphCapture(const Stream& stream);
  ~GraphCapture();
  GraphCapture(const GraphCapture&) = delete;
  GraphCapture& operator=(const GraphCapture&) = delete;
  Graph end();

 private:
  const Stream* stream_;
  bool open_ = true;
};

// Work captured for a node of a compiled graph (KernelGraph::add_work): a
// graph that owns what its work uses (staging memory, results) and the
// watches to register each time it runs.
struct CapturedWork {
  int device = 0;
  std::shared_ptr<void> graph;  // the CUgraph, destroyed with the last copy
  std::vector<std::shared_ptr<void>> keep;
  std::vector<Watch> watches;
  // Each says why the work may no longer run ("" while it may): the
  // communicators it was captured with were aborted, say.
  std::vector<std::function<std::string()>> checks;
};

// While open on a thread, work that code on that thread would queue on
// `device`'s default stream goes to stream() instead, which records it
// (cuStreamBeginCapture, relaxed mode: the thread may still allocate).
// Code that queues such work asks active(device) first: a collective
// captured into a compiled graph (tessera/dist/nccl.h). A capture
// abandoned without end() is ended and discarded by the destructor.
class WorkCapture {
 public:
  explicit WorkCapture(int device);
  ~WorkCapture();
  WorkCapture(const WorkCapture&) = delete;
  WorkCapture& operator=(const WorkCapture&) = delete;
  // The open capture of this thread for `device` (-1: its innermost for
  // any device), or nullptr.
  static WorkCapture* active(int device = -1);
  const Stream& stream() const { return stream_; }
  // Memory the captured work uses, held as long as the graph is.
  void keep(std::shared_ptr<void> block) { work_.keep.push_back(std::move(block)); }
  // A watch (cuda::watch) registered each time the captured work runs.
  void watch(Watch w) { work_.watches.push_back(std::move(w)); }
  // A condition for running the work again (CapturedWork::checks).
  void check(std::function<std::string()> why_not) { work_.checks.push_back(std::move(why_not)); }
  CapturedWork end();

 private:
  Stream stream_;
  CapturedWork work_;
  WorkCapture* outer_ = nullptr;
  bool open_ = true;
};

// ---- cuBLAS baseline ----------------------------------------------------------

// Row-major C[M, N] = A[M, K] @ B[K, N] with fp32 accumulation, for fp32,
// fp16 and bf16 operands (C has A's dtype; fp32 C for fp32). The reference
// the GPU benchmarks compare against.
void cublas_gemm(DType dtype, int m, int n, int k, DevicePtr a, DevicePtr b, DevicePtr c, const Stream& stream);
// cuBLAS's version (major * 10000 + minor * 100 + patch) and library.
int cublas_version(int device);
std::string cublas_library();

// cuBLASLt's fp8 GEMM: row-major C[M, N] = A[M, K] @ B[N, K]^T with
// fp8_e4m3 operands (B given transposed, as [N, K] row-major: the "TN" layout
// cuBLASLt requires for fp8), fp32 accumulation, unit scales, and an fp32 or
// bf16 C. M, N, K must be multiples of 16 and the pointers 16-byte aligned;
// needs sm_89 or newer. The fp8 baseline of the GPU benchmarks.
void cublaslt_gemm_fp8(int m, int n, int k, DevicePtr a, DevicePtr b_t, DevicePtr c, DType out, const Stream& stream);
// cuBLASLt's version (major * 10000 + minor * 100 + patch) and library.
std::size_t cublaslt_version();
std::string cublaslt_library();

}  // namespace tessera::cuda
