// The few CUDA driver, NVRTC and cuBLAS types and entry points Tessera uses,
// declared here so the library builds without the CUDA toolkit: every symbol
// is resolved with dlsym from libraries opened on first use (ARCHITECTURE.md
// decision 6). Values of enums and attributes are the stable ABI numbers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tessera::cuda::detail {

// ---- driver API ----------------------------------------------------------
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;
using CUgraph = struct CUgraph_st*;
using CUgraphExec = struct CUgraphExec_st*;
using CUgraphNode = struct CUgraphNode_st*;

// CUDA_KERNEL_NODE_PARAMS (the _v2 layout of cuGraphAddKernelNode_v2 and
// cuGraphExecKernelNodeSetParams_v2).
struct KernelNodeParams {
  CUfunction func;
  unsigned grid_x, grid_y, grid_z;
  unsigned block_x, block_y, block_z;
  unsigned shared_bytes;
  void** kernel_params;
  void** extra;
  void* kern;  // CUkernel; unused when func is set
  CUcontext ctx;
};

// CUDA_MEMCPY3D (the _v2 layout of cuGraphAddMemcpyNode and
// cuGraphExecMemcpyNodeSetParams); memory types are CUmemorytype values.
struct Memcpy3DParams {
  std::size_t src_x_bytes, src_y, src_z, src_lod;
  int src_memory_type;
  const void* src_host;
  CUdeviceptr src_device;
  void* src_array;
  void* reserved0;
  std::size_t src_pitch, src_height;
  std::size_t dst_x_bytes, dst_y, dst_z, dst_lod;
  int dst_memory_type;
  void* dst_host;
  CUdeviceptr dst_device;
  void* dst_array;
  void* reserved1;
  std::size_t dst_pitch, dst_height;
  std::size_t width_bytes, height, depth;
};
constexpr int kMemoryTypeDevice = 2;

constexpr CUresult kCudaSuccess = 0;
constexpr CUresult kCudaErrorOutOfMemory = 2;
constexpr CUresult kCudaErrorNotReady = 600;
constexpr CUresult kCudaErrorPeerAccessAlreadyEnabled = 704;

// CUdevice_attribute values.
constexpr int kAttrMaxThreadsPerBlock = 1;
constexpr int kAttrMaxSharedPerBlock = 8;
constexpr int kAttrMultiprocessorCount = 16;
constexpr int kAttrMemoryClockRate = 36;
constexpr int kAttrGlobalMemoryBusWidth = 37;
constexpr int kAttrL2CacheSize = 38;
constexpr int kAttrComputeMajor = 75;
constexpr int kAttrComputeMinor = 76;
constexpr int kAttrMaxSharedPerBlockOptin = 97;
// CUfunction_attribute: the dynamic shared memory a launch may ask for.
constexpr int kFuncAttrMaxDynamicShared = 8;
constexpr unsigned kEventDefault = 0;
constexpr unsigned kStreamNonBlocking = 1;
constexpr int kCaptureModeThreadLocal = 1;
constexpr int kCaptureModeRelaxed = 2;

// The driver entry points, filled by driver() in driver.cpp.
struct DriverApi {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDriverGetVersion)(int*);
  CUresult (*cuGetErrorName)(CUresult, const char**);
  CUresult (*cuGetErrorString)(CUresult, const char**);
  CUresult (*cuDeviceGetCount)(int*);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDeviceGetName)(char*, int, CUdevice);
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice);
  CUresult (*cuDeviceTotalMem)(std::size_t*, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuDeviceCanAccessPeer)(int*, CUdevice, CUdevice);
  CUresult (*cuCtxEnablePeerAccess)(CUcontext, unsigned);
  CUresult (*cuMemAlloc)(CUdeviceptr*, std::size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemGetInfo)(std::size_t*, std::size_t*);
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void*, std::size_t);
  CUresult (*cuMemcpyDtoH)(void*, CUdeviceptr, std::size_t);
  CUresult (*cuMemcpyDtoD)(CUdeviceptr, CUdeviceptr, std::size_t);
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void*, std::size_t, CUstream);
  CUresult (*cuMemcpyDtoHAsync)(void*, CUdeviceptr, std::size_t, CUstream);
  CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, std::size_t, CUstream);
  CUresult (*cuMemsetD8Async)(CUdeviceptr, unsigned char, std::size_t, CUstream);
  CUresult (*cuPointerGetAttribute)(void*, int, CUdeviceptr);
  CUresult (*cuStreamCreate)(CUstream*, unsigned);
  CUresult (*cuStreamDestroy)(CUstream);
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuStreamQuery)(CUstream);
  CUresult (*cuEventCreate)(CUevent*, unsigned);
  CUresult (*cuEventDestroy)(CUevent);
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuEventSynchronize)(CUevent);
  CUresult (*cuEventQuery)(CUevent);
  CUresult (*cuEventElapsedTime)(float*, CUevent, CUevent);
  CUresult (*cuStreamWaitEvent)(CUstream, CUevent, unsigned);
  CUresult (*cuModuleLoadData)(CUmodule*, const void*);
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*cuFuncSetAttribute)(CUfunction, int, int);
  CUresult (*cuOccupancyMaxActiveBlocksPerMultiprocessor)(int*, CUfunction, int, std::size_t);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                             void**, void**);
  CUresult (*cuStreamBeginCapture)(CUstream, int);
  CUresult (*cuStreamEndCapture)(CUstream, CUgraph*);
  CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec*, CUgraph, unsigned long long);
  CUresult (*cuGraphLaunch)(CUgraphExec, CUstream);
  CUresult (*cuGraphExecDestroy)(CUgraphExec);
  CUresult (*cuGraphDestroy)(CUgraph);
  CUresult (*cuGraphGetNodes)(CUgraph, CUgraphNode*, std::size_t*);
  CUresult (*cuGraphCreate)(CUgraph*, unsigned);
  CUresult (*cuGraphAddKernelNode)(CUgraphNode*, CUgraph, const CUgraphNode*, std::size_t, const void*);
  CUresult (*cuGraphExecKernelNodeSetParams)(CUgraphExec, CUgraphNode, const void*);
  CUresult (*cuGraphAddChildGraphNode)(CUgraphNode*, CUgraph, const CUgraphNode*, std::size_t, CUgraph);
  CUresult (*cuGraphAddMemcpyNode)(CUgraphNode*, CUgraph, const CUgraphNode*, std::size_t, const Memcpy3DParams*,
                                   CUcontext);
  CUresult (*cuGraphExecMemcpyNodeSetParams)(CUgraphExec, CUgraphNode, const Memcpy3DParams*, CUcontext);
  // Optional (drivers for CUDA 12 and later): nullptr when absent, and TMA
  // copies then fall back to cp.async.
  CUresult (*cuTensorMapEncodeTiled)(void*, int, unsigned, void*, const unsigned long long*, const unsigned long long*,
                                     const unsigned*, const unsigned*, int, int, int, int);
};
// CUtensorMap enum values (cuTensorMapEncodeTiled).
constexpr int kTensorMapUint8 = 0;
constexpr int kTensorMapUint16 = 1;
constexpr int kTensorMapInterleaveNone = 0;
constexpr int kTensorMapSwizzle128B = 3;
constexpr int kTensorMapL2Promotion256B = 3;
constexpr int kTensorMapOobFillZeros = 0;

// The loaded driver, or a DeviceError (DeviceUnavailable) saying why none is.
const DriverApi& driver();
// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)" for a result code.
std::string error_text(CUresult rc);
// Raises DeviceError "<what> failed: <error name> (<description>)" unless rc is 0;
// CUDA_ERROR_OUT_OF_MEMORY raises OutOfMemoryError.
void check(CUresult rc, const char* what);
// Makes the device's primary context current on this thread (retained once
// per process) after checking the ordinal.
void use_device(int ordinal);
// The device's primary context (what use_device makes current).
CUcontext device_context(int ordinal);
// Destroys what is not null, for destructors (never throws).
void destroy_graph(int device, CUgraph graph, CUgraphExec exec) noexcept;

// ---- NVRTC ---------------------------------------------------------------
using nvrtcResult = int;
using nvrtcProgram = struct _nvrtcProgram*;

struct NvrtcApi {
  std::string library;  // which libnvrtc was opened
  const char* (*nvrtcGetErrorString)(nvrtcResult);
  nvrtcResult (*nvrtcVersion)(int*, int*);
  nvrtcResult (*nvrtcCreateProgram)(nvrtcProgram*, const char*, const char*, int, const char* const*,
                                    const char* const*);
  nvrtcResult (*nvrtcDestroyProgram)(nvrtcProgram*);
  nvrtcResult (*nvrtcCompileProgram)(nvrtcProgram, int, const char* const*);
  nvrtcResult (*nvrtcGetProgramLogSize)(nvrtcProgram, std::size_t*);
  nvrtcResult (*nvrtcGetProgramLog)(nvrtcProgram, char*);
  nvrtcResult (*nvrtcGetPTXSize)(nvrtcProgram, std::size_t*);
  nvrtcResult (*nvrtcGetPTX)(nvrtcProgram, char*);
  nvrtcResult (*nvrtcGetCUBINSize)(nvrtcProgram, std::size_t*);
  nvrtcResult (*nvrtcGetCUBIN)(nvrtcProgram, char*);
};
const NvrtcApi& nvrtc();

// ---- cuBLAS --------------------------------------------------------------
using cublasStatus = int;
using cublasHandle = struct cublasContext*;
constexpr int kCublasOpN = 0;
constexpr int kCudaR32F = 0;
constexpr int kCudaR16F = 2;
constexpr int kCudaR16BF = 14;
constexpr int kCublasCompute32F = 68;
constexpr int kCublasGemmDefault = -1;

struct CublasApi {
  std::string library;
  cublasStatus (*cublasCreate)(cublasHandle*);
  cublasStatus (*cublasSetStream)(cublasHandle, CUstream);
  cublasStatus (*cublasGetVersion)(cublasHandle, int*);
  const char* (*cublasGetStatusName)(cublasStatus);
  cublasStatus (*cublasGemmEx)(cublasHandle, int, int, int, int, int, const void*, const void*, int, int, const void*,
                               int, int, const void*, void*, int, int, int, int);
};
const CublasApi& cublas();

// ---- cuBLASLt (the fp8 GEMM baseline) ------------------------------------
using cublasLtHandle = struct cublasLtContext*;
using cublasLtMatmulDesc = struct cublasLtMatmulDescOpaque*;
using cublasLtMatrixLayout = struct cublasLtMatrixLayoutOpaque*;
using cublasLtMatmulPreference = struct cublasLtMatmulPreferenceOpaque*;
constexpr int kCublasOpT = 1;
constexpr int kCudaR8FE4M3 = 28;
// cublasLtMatmulDescAttributes_t / cublasLtMatmulPreferenceAttributes_t values.
constexpr int kLtDescTransA = 3;
constexpr int kLtDescTransB = 4;
constexpr int kLtPrefMaxWorkspaceBytes = 1;
// Semi-opaque by value in the API: 8 words, then the heuristic's result fields.
struct CublasLtMatmulAlgo {
  std::uint64_t data[8];
};
struct CublasLtHeuristicResult {
  CublasLtMatmulAlgo algo;
  std::size_t workspace_size;
  cublasStatus state;
  float waves_count;
  int reserved[4];
};

struct CublasLtApi {
  std::string library;
  cublasStatus (*cublasLtCreate)(cublasLtHandle*);
  std::size_t (*cublasLtGetVersion)();
  const char* (*cublasLtGetStatusName)(cublasStatus);
  cublasStatus (*cublasLtMatmulDescCreate)(cublasLtMatmulDesc*, int, int);
  cublasStatus (*cublasLtMatmulDescDestroy)(cublasLtMatmulDesc);
  cublasStatus (*cublasLtMatmulDescSetAttribute)(cublasLtMatmulDesc, int, const void*, std::size_t);
  cublasStatus (*cublasLtMatrixLayoutCreate)(cublasLtMatrixLayout*, int, std::uint64_t, std::uint64_t, std::int64_t);
  cublasStatus (*cublasLtMatrixLayoutDestroy)(cublasLtMatrixLayout);
  cublasStatus (*cublasLtMatmulPreferenceCreate)(cublasLtMatmulPreference*);
  cublasStatus (*cublasLtMatmulPreferenceDestroy)(cublasLtMatmulPreference);
  cublasStatus (*cublasLtMatmulPreferenceSetAttribute)(cublasLtMatmulPreference, int, const void*, std::size_t);
  cublasStatus (*cublasLtMatmulAlgoGetHeuristic)(cublasLtHandle, cublasLtMatmulDesc, cublasLtMatrixLayout,
                                                 cublasLtMatrixLayout, cublasLtMatrixLayout, cublasLtMatrixLayout,
                                                 cublasLtMatmulPreference, int, CublasLtHeuristicResult*, int*);
  cublasStatus (*cublasLtMatmul)(cublasLtHandle, cublasLtMatmulDesc, const void*, const void*, cublasLtMatrixLayout,
                                 const void*, cublasLtMatrixLayout, const void*, const void*, cublasLtMatrixLayout,
                                 void*, cublasLtMatrixLayout, const CublasLtMatmulAlgo*, void*, std::size_t, CUstream);
};
const CublasLtApi& cublaslt();

// Opens the first of `names` that loads (also from $CUDA_HOME/lib64 and the
// usual toolkit folders); "" and a reason in `why` when none does.
void* open_library(const char* const* names, std::size_t count, std::string& opened, std::string& why);

}  // namespace tessera::cuda::detail
