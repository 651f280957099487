// The NCCL types and entry points Tessera uses, declared here so the library
// builds without NCCL's headers: libnccl is opened with dlopen on first use
// (ARCHITECTURE.md decision 6). Enum values are NCCL's stable ABI numbers.
#pragma once

#include <cstddef>
#include <string>

namespace tessera::cuda::detail {

using ncclResult = int;
using ncclComm = struct ncclComm_st*;
using ncclStream = struct CUstream_st*;

constexpr ncclResult kNcclSuccess = 0;
constexpr ncclResult kNcclInProgress = 7;
// ncclDataType_t values.
constexpr int kNcclInt8 = 0;
constexpr int kNcclUint8 = 1;
constexpr int kNcclInt32 = 2;
constexpr int kNcclInt64 = 4;
constexpr int kNcclFloat16 = 6;
constexpr int kNcclFloat32 = 7;
constexpr int kNcclFloat64 = 8;
constexpr int kNcclBfloat16 = 9;
// ncclRedOp_t values.
constexpr int kNcclSum = 0;
constexpr int kNcclMax = 2;
constexpr int kNcclMin = 3;
constexpr int kNcclAvg = 4;

// ncclUniqueId: 128 opaque bytes, made by one rank and sent to the others.
struct NcclUniqueId {
  char internal[128];
};

struct NcclApi {
  std::string library;  // which libnccl was opened
  ncclResult (*ncclGetVersion)(int*);
  const char* (*ncclGetErrorString)(ncclResult);
  const char* (*ncclGetLastError)(ncclComm);  // optional (NCCL 2.13+): nullptr when absent
  ncclResult (*ncclCommInitAll)(ncclComm*, int, const int*);
  ncclResult (*ncclGetUniqueId)(NcclUniqueId*);
  ncclResult (*ncclCommInitRank)(ncclComm*, int, NcclUniqueId, int);
  ncclResult (*ncclCommDestroy)(ncclComm);
  ncclResult (*ncclCommAbort)(ncclComm);
  ncclResult (*ncclCommGetAsyncError)(ncclComm, ncclResult*);
  ncclResult (*ncclGroupStart)();
  ncclResult (*ncclGroupEnd)();
  ncclResult (*ncclSend)(const void*, std::size_t, int, int, ncclComm, ncclStream);
  ncclResult (*ncclRecv)(void*, std::size_t, int, int, ncclComm, ncclStream);
  ncclResult (*ncclAllReduce)(const void*, void*, std::size_t, int, int, ncclComm, ncclStream);
  ncclResult (*ncclReduceScatter)(const void*, void*, std::size_t, int, int, ncclComm, ncclStream);
  ncclResult (*ncclAllGather)(const void*, void*, std::size_t, int, ncclComm, ncclStream);
  ncclResult (*ncclBroadcast)(const void*, void*, std::size_t, int, int, ncclComm, ncclStream);
};

// The loaded library, or a DeviceError (DeviceUnavailable) saying why none is.
const NcclApi& nccl();
// Why NCCL cannot be loaded ("" when it can). Never throws.
std::string nccl_failure();
// Raises DeviceError "<what> failed: <NCCL's error string>" unless rc is success.
void check_nccl(ncclResult rc, const char* what);

}  // namespace tessera::cuda::detail
