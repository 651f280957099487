// NCCL, opened with dlopen on first use (nccl_api.h), with NVLink multicast
// off (NCCL_NVLS_ENABLE=0) and channels connected when communicators are made
// (NCCL_RUNTIME_CONNECT=0) unless the environment says otherwise. TESSERA_NCCL_LIBRARY
// names the library file when it is not libnccl.so.2 on the loader's path
// or under CUDA_HOME.
#include <dlfcn.h>

#include <cstdlib>
#include <type_traits>

#include "backends/cuda/driver_api.h"
#include "backends/cuda/nccl_api.h"
#include "tessera/support/error.h"

namespace tessera::cuda::detail {
namespace {

struct LoadedNccl {
  NcclApi api{};
  std::string failure;
};

const LoadedNccl& loaded() {
  static const LoadedNccl* state = [] {
    auto* s = new LoadedNccl();  // stays loaded for the process
    // NVLink multicast (NVLS) stays off unless the user set it: NCCL reads
    // the variable when it makes communicators, after this.
    setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);
    // Communicators connect their channels when they are made, where every
    // member is present, rather than at a first collective that a failed
    // peer never joins (the host would block there, unwatched).
    setenv("NCCL_RUNTIME_CONNECT", "0", /*overwrite=*/0);
    void* library = nullptr;
    if (const char* path = std::getenv("TESSERA_NCCL_LIBRARY"); path && *path) {
      library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
      if (library == nullptr) {
        const char* e = dlerror();
        s->failure = std::string("NCCL is unavailable: TESSERA_NCCL_LIBRARY=") + path + ": " + (e ? e : "?");
        return s;
      }
      s->api.library = path;
    } else {
      const char* names[] = {"libnccl.so.2", "libnccl.so"};
      library = open_library(names, 2, s->api.library, s->failure);
      if (library == nullptr) {
        s->failure = "NCCL is unavailable: " + s->failure;
        return s;
      }
    }
    NcclApi& a = s->api;
    std::string missing;
    auto get = [&](auto& slot, const char* name, bool required = true) {
      slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(dlsym(library, name));
      if (!slot && required) missing += (missing.empty() ? "" : ", ") + std::string(name);
    };
    get(a.ncclGetVersion, "ncclGetVersion");
    get(a.ncclGetErrorString, "ncclGetErrorString");
    get(a.ncclGetLastError, "ncclGetLastError", false);
    get(a.ncclCommInitAll, "ncclCommInitAll");
    get(a.ncclGetUniqueId, "ncclGetUniqueId");
    get(a.ncclCommInitRank, "ncclCommInitRank");
    get(a.ncclCommDestroy, "ncclCommDestroy");
    get(a.ncclCommAbort, "ncclCommAbort");
    get(a.ncclCommGetAsyncError, "ncclCommGetAsyncError");
    get(a.ncclGroupStart, "ncclGroupStart");
    get(a.ncclGroupEnd, "ncclGroupEnd");
    get(a.ncclSend, "ncclSend");
    get(a.ncclRecv, "ncclRecv");
    get(a.ncclAllReduce, "ncclAllReduce");
    get(a.ncclReduceScatter, "ncclReduceScatter");
    get(a.ncclAllGather, "ncclAllGather");
    get(a.ncclBroadcast, "ncclBroadcast");
    if (!missing.empty()) s->failure = "NCCL is unavailable: " + a.library + " lacks " + missing;
    return s;
  }();
  return *state;
}

}  // namespace

const NcclApi& nccl() {
  const LoadedNccl& s = loaded();
  if (!s.failure.empty()) raise(ErrorCode::DeviceUnavailable, s.failure);
  return s.api;
}

std::string nccl_failure() {
  try {
    return loaded().failure;
  } catch (const std::exception& e) {
    return e.what();
  }
}

void check_nccl(ncclResult rc, const char* what) {
  if (rc == kNcclSuccess) return;
  const NcclApi& a = nccl();
  std::string text = a.ncclGetErrorString(rc);
  if (a.ncclGetLastError != nullptr) {
    if (const char* last = a.ncclGetLastError(nullptr); last && *last) text += ": " + std::string(last);
  }
  raise(ErrorCode::Device, std::string(what) + " failed: " + text);
}

}  // namespace tessera::cuda::detail
