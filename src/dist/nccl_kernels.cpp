// The nccl backend's device kernels (nccl_kernels.h), CUDA C++ compiled by
// NVRTC once per architecture on first use and loaded on each device. They
// reuse the device numerics header, so every rounding is the host's.
#include "dist/nccl_kernels.h"

#include <map>
#include <mutex>

#include "tessera/support/error.h"

namespace tessera::dist::detail {
namespace {

constexpr const char* kSource = R"cuda(
#include "tessera/numerics.cuh"
using namespace tessera::device;

enum { kSum = 0, kMean = 1, kMax = 2, kMin = 3 };
enum { kRankOrder = 0, kRing = 1, kTree = 2 };
#define TESSERA_MAX_TREE 64

__device__ __forceinline__ u64 load_bits(const unsigned char* p, i64 i, int es) {
  switch (es) {
    case 1: return p[i];
    case 2: return ((const unsigned short*)p)[i];
    case 4: return ((const u32*)p)[i];
    default: return ((const u64*)p)[i];
  }
}

__device__ __forceinline__ void store_bits(unsigned char* p, i64 i, int es, u64 b) {
  switch (es) {
    case 1: p[i] = (unsigned char)b; break;
    case 2: ((unsigned short*)p)[i] = (unsigned short)b; break;
    case 4: ((u32*)p)[i] = (u32)b; break;
    default: ((u64*)p)[i] = b; break;
  }
}

// As the host's to_accum (src/dist/rank_order.cpp): to nearest, fp64 exact.
__device__ __forceinline__ double to_accum(double x, int accum) {
  if (accum == kFp64) return x;
  if (accum == kFp32) return (double)(float)x;
  return decode(encode(x, accum), accum);
}

__device__ __forceinline__ double combine_op(double a, double v, int op) {
  if (op == kMax || op == kMin) {
    if (a != a || v != v) return __longlong_as_double(0x7FF8000000000000LL);
    return op == kMax ? (v > a ? v : a) : (v < a ? v : a);
  }
  return a + v;
}

__device__ __forceinline__ float combine_f32(float a, float v, int op) {
  if (op == kMax || op == kMin) {
    if (a != a || v != v) return __int_as_float(0x7FC00000);
    return op == kMax ? (v > a ? v : a) : (v < a ? v : a);
  }
  return a + v;
}

// The member a ring combination of element i starts at: the one after the
// flat part (numpy.array_split of `total` into `members`) holding it.
__device__ __forceinline__ int ring_first(i64 i, int members, i64 inner, i64 len, i64 dim, i64 start, i64 total) {
  const i64 flat = (i / (len * inner)) * (dim * inner) + (start + (i / inner) % len) * inner + i % inner;
  const i64 q = total / members, rem = total % members;
  const i64 big = rem * (q + 1);
  const i64 part = flat < big ? flat / (q + 1) : rem + (q > 0 ? (flat - big) / q : 0);
  return (int)((part + 1) % members);
}

// Every storage format, at any accumulation type: values as doubles,
// rounded as the host rounds them.
extern "C" __global__ void tessera_combine(unsigned char* out, const unsigned char* parts, i64 n, int members,
                                           int algorithm, int op, int storage, int accum, int rounding,
                                           int overflow, int es, i64 inner, i64 len, i64 dim, i64 start,
                                           i64 total) {
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
    if (algorithm == kTree) {
      // Neighbours combine pairwise, level by level; each partial is rounded to the storage.
      u64 level[TESSERA_MAX_TREE];
      for (int m = 0; m < members; ++m) level[m] = load_bits(parts + (i64)m * n * es, i, es);
      int count = members;
      while (count > 1) {
        int next = 0;
        for (int k = 0; k < count; k += 2) {
          if (k + 1 == count) {
            level[next++] = level[k];
            continue;
          }
          double a = to_accum(decode(level[k], storage), accum);
          a = to_accum(combine_op(a, decode(level[k + 1], storage), op), accum);
          level[next++] = encode(a, storage, rounding, overflow);
        }
        count = next;
      }
      store_bits(out, i, es, level[0]);
      continue;
    }
    const int first = algorithm == kRing ? ring_first(i, members, inner, len, dim, start, total) : 0;
    double acc = to_accum(decode(load_bits(parts + (i64)first * n * es, i, es), storage), accum);
    for (int k = 1; k < members; ++k) {
      int m = first + k;
      if (m >= members) m -= members;
      acc = to_accum(combine_op(acc, decode(load_bits(parts + (i64)m * n * es, i, es), storage), op), accum);
    }
    if (op == kMean) acc = to_accum(acc / members, accum);
    store_bits(out, i, es, encode(acc, storage, rounding, overflow));
  }
}

// One element's combination at fp32 over the members, from member `first`
// around (code(m): member m's storage code), rounded once to the storage.
template <class Code>
__device__ __forceinline__ u32 combine_element_f32(const Code& code, int members, int first, int op, int storage,
                                                   int saturate) {
  float acc = decode_f32(code(first), storage);
  for (int k = 1; k < members; ++k) {
    int m = first + k;
    if (m >= members) m -= members;
    acc = combine_f32(acc, decode_f32(code(m), storage), op);
  }
  if (op == kMean) acc = (float)((double)acc / members);
  return encode_f32_nearest_even(acc, storage, saturate != 0);
}

// fp32 accumulation to nearest of fp32, fp16 and bf16 storage, in rank or
// ring order: float arithmetic, which is the double arithmetic of
// tessera_combine rounded once to float (24 * 2 + 2 <= 53 bits).
extern "C" __global__ void tessera_combine_f32(unsigned char* out, const unsigned char* parts, i64 n, int members,
                                               int algorithm, int op, int storage, int saturate, int es, i64 inner,
                                               i64 len, i64 dim, i64 start, i64 total) {
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
    const int first = algorithm == kRing ? ring_first(i, members, inner, len, dim, start, total) : 0;
    auto code = [&](int m) { return load_bits(parts + (i64)m * n * es, i, es); };
    store_bits(out, i, es, combine_element_f32(code, members, first, op, storage, saturate));
  }
}

// The same combination reading every member's part where it lies (peer
// memory over NVLink or PCIe): no staging copy; in rank order 16 bytes of
// each member at a time. ST is the storage (fp32, bf16 or fp16), a
// constant so the lanes' decoding unrolls.
#define TESSERA_MAX_PEERS 8
struct Peers {
  const unsigned char* at[TESSERA_MAX_PEERS];
};

// Lane j of member m's 16 bytes (words w[m][0..3]) when j is a constant.
template <int ES>
__device__ __forceinline__ u32 lane_bits(const u32 (&w)[4], int j) {
  return ES == 4 ? w[j] : (w[j / 2] >> ((j % 2) * 16)) & 0xFFFFu;
}

// Member m's pointer, the same way.
__device__ __forceinline__ const unsigned char* pick_ptr(const Peers& peers, int m) {
  const unsigned char* r = peers.at[0];
#pragma unroll
  for (int q = 1; q < TESSERA_MAX_PEERS; ++q)
    if (q == m) r = peers.at[q];
  return r;
}

// Writes one result to each of `outs`' first `copies` pointers (this GPU's
// output, or every member's when the kernel also does the all-gather).
__device__ __forceinline__ void store_copies(const Peers& outs, int copies, i64 v, uint4 value) {
#pragma unroll
  for (int m = 0; m < TESSERA_MAX_PEERS; ++m)
    if (m < copies) ((uint4*)pick_ptr(outs, m))[v] = value;
}

template <int ST>
__device__ __forceinline__ void combine_peers(const Peers& outs, int copies, const Peers& peers, i64 n, int members,
                                              int algorithm, int op, int saturate, int vectorize, i64 inner, i64 len,
                                              i64 dim, i64 start, i64 total) {
  constexpr int ES = ST == kFp32 ? 4 : 2, kPer = 16 / ES, storage = ST;
  // Rank order only: a ring's first member varies by element.
  const i64 vectors = vectorize && algorithm == kRankOrder ? n / kPer : 0;
  const i64 stride = (i64)gridDim.x * blockDim.x;
  const i64 first_thread = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  for (i64 v = first_thread; v < vectors; v += stride) {
    // Every member's 16 bytes are requested before any is used: the loads
    // of remote members are in flight together.
    u32 in[TESSERA_MAX_PEERS][4];
#pragma unroll
    for (int m = 0; m < TESSERA_MAX_PEERS; ++m) {
      if (m < members) {
        const uint4 q = ((const uint4*)pick_ptr(peers, m))[v];
        in[m][0] = q.x, in[m][1] = q.y, in[m][2] = q.z, in[m][3] = q.w;
      }
    }
    u32 res[4] = {0u, 0u, 0u, 0u};
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      float acc = decode_f32(lane_bits<ES>(in[0], j), storage);
#pragma unroll
      for (int m = 1; m < TESSERA_MAX_PEERS; ++m)
        if (m < members) acc = combine_f32(acc, decode_f32(lane_bits<ES>(in[m], j), storage), op);
      if (op == kMean) acc = (float)((double)acc / members);
      const u32 code = encode_f32_nearest_even(acc, storage, saturate != 0);
      if (ES == 4) res[j] = code;
      else res[j / 2] |= (code & 0xFFFFu) << ((j % 2) * 16);
    }
    store_copies(outs, copies, v, make_uint4(res[0], res[1], res[2], res[3]));
  }
  // What is left (or everything, unaligned): element by element.
  for (i64 i = vectors * kPer + first_thread; i < n; i += stride) {
    const int first = algorithm == kRing ? ring_first(i, members, inner, len, dim, start, total) : 0;
    auto code = [&](int m) { return load_bits(pick_ptr(peers, m), i, ES); };
    const u32 result = combine_element_f32(code, members, first, op, storage, saturate);
    for (int m = 0; m < copies; ++m) store_bits((unsigned char*)pick_ptr(outs, m), i, ES, result);
  }
}

extern "C" __global__ void tessera_combine_peers_fp32(Peers outs, int copies, Peers peers, i64 n, int members,
                                                      int algorithm, int op, int saturate, int vectorize, i64 inner,
                                                      i64 len, i64 dim, i64 start, i64 total) {
  combine_peers<kFp32>(outs, copies, peers, n, members, algorithm, op, saturate, vectorize, inner, len, dim, start, total);
}

extern "C" __global__ void tessera_combine_peers_bf16(Peers outs, int copies, Peers peers, i64 n, int members,
                                                      int algorithm, int op, int saturate, int vectorize, i64 inner,
                                                      i64 len, i64 dim, i64 start, i64 total) {
  combine_peers<kBf16>(outs, copies, peers, n, members, algorithm, op, saturate, vectorize, inner, len, dim, start, total);
}

extern "C" __global__ void tessera_combine_peers_fp16(Peers outs, int copies, Peers peers, i64 n, int members,
                                                      int algorithm, int op, int saturate, int vectorize, i64 inner,
                                                      i64 len, i64 dim, i64 start, i64 total) {
  combine_peers<kFp16>(outs, copies, peers, n, members, algorithm, op, saturate, vectorize, inner, len, dim, start, total);
}

// Rows of bytes between pitched buffers, `unit` bytes (1, 2, 4, 8 or 16)
// at a time: every address, pitch and row length is a multiple of it.
extern "C" __global__ void tessera_copy_rows(unsigned char* dst, i64 dst_pitch, const unsigned char* src,
                                             i64 src_pitch, i64 row_units, i64 rows, int unit) {
  const i64 total = row_units * rows;
  for (i64 k = (i64)blockIdx.x * blockDim.x + threadIdx.x; k < total; k += (i64)gridDim.x * blockDim.x) {
    const i64 r = k / row_units, c = (k % row_units) * unit;
    unsigned char* d = dst + r * dst_pitch + c;
    const unsigned char* s = src + r * src_pitch + c;
    switch (unit) {
      case 16: *(uint4*)d = *(const uint4*)s; break;
      case 8: *(u64*)d = *(const u64*)s; break;
      case 4: *(u32*)d = *(const u32*)s; break;
      case 2: *(unsigned short*)d = *(const unsigned short*)s; break;
      default: *d = *s; break;
    }
  }
}
)cuda";

// Members a tree combination holds per element (tessera_combine's level array).
constexpr int kMaxTree = 64;

struct Kernels {
  cuda::Module module;
  cuda::Function combine, combine_f32, copy_rows, combine_peers_fp32, combine_peers_bf16, combine_peers_fp16;
};

// The kernel parameter of tessera_combine_peers_*.
struct PeerParts {
  const unsigned char* at[kMaxPeers];
};

const Kernels& kernels(int device) {
  static std::mutex mu;
  static auto* loaded = new std::map<int, Kernels>();
  static auto* programs = new std::map<std::string, cuda::CompiledProgram>();
  std::lock_guard lock(mu);
  auto it = loaded->find(device);
  if (it != loaded->end()) return it->second;
  const std::string arch = cuda::device_properties(device).arch();
  auto p = programs->find(arch);
  if (p == programs->end()) p = programs->emplace(arch, cuda::compile(kSource, "tessera_nccl_kernels.cu", device)).first;
  Kernels k{cuda::Module::load(device, p->second), {}, {}, {}, {}, {}, {}};
  k.combine = k.module.function("tessera_combine");
  k.combine_f32 = k.module.function("tessera_combine_f32");
  k.copy_rows = k.module.function("tessera_copy_rows");
  k.combine_peers_fp32 = k.module.function("tessera_combine_peers_fp32");
  k.combine_peers_bf16 = k.module.function("tessera_combine_peers_bf16");
  k.combine_peers_fp16 = k.module.function("tessera_combine_peers_fp16");
  return loaded->emplace(device, std::move(k)).first->second;
}

cuda::LaunchConfig config_for(std::int64_t work, const cuda::Stream* stream = nullptr) {
  constexpr std::int64_t kThreads = 256, kMaxBlocks = 65535;
  const std::int64_t blocks = std::min(kMaxBlocks, std::max<std::int64_t>(1, (work + kThreads - 1) / kThreads));
  cuda::LaunchConfig c;
  c.grid.x = static_cast<unsigned>(blocks);
  c.block.x = static_cast<unsigned>(kThreads);
  c.stream = stream;
  return c;
}

int op_code(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return 0;
    case ReduceOp::mean: return 1;
    case ReduceOp::max: return 2;
    case ReduceOp::min: return 3;
  }
  return 0;
}

int algorithm_code(Algorithm a) {
  return a == Algorithm::ring ? 1 : a == Algorithm::tree ? 2 : 0;
}

}  // namespace

bool device_combinable(const NumericsPolicy& p) {
  return is_float(p.storage) && !is_packed(p.storage) && p.rounding != Rounding::stochastic;
}

void combine(int device, cuda::DevicePtr out, cuda::DevicePtr parts, std::int64_t n, int members, ReduceOp op,
             Algorithm algorithm, const NumericsPolicy& policy, const CombinePlacement& at, const cuda::Stream* stream) {
  if (n <= 0) return;
  if (!device_combinable(policy)) {
    raise(ErrorCode::Internal, "nccl combine of " + std::string(name(policy.storage)) + " on the device");
  }
  // Mean always combines in rank order (communicator.h).
  if (op == ReduceOp::mean || members < 2) algorithm = Algorithm::rank_order;
  if (algorithm == Algorithm::native) algorithm = Algorithm::rank_order;
  if (algorithm == Algorithm::tree && members > kMaxTree) {
    raise(ErrorCode::ArgumentInvalid, "a tree reduction over " + std::to_string(members) +
                                          " members on the nccl backend; it combines at most " +
                                          std::to_string(kMaxTree));
  }
  const Kernels& k = kernels(device);
  const int es = static_cast<int>(storage_bytes(policy.storage));
  auto* o = reinterpret_cast<unsigned char*>(out);
  auto* in = reinterpret_cast<const unsigned char*>(parts);
  const int alg = algorithm_code(algorithm), opc = op_code(op), storage = static_cast<int>(policy.storage);
  const bool f32_path = policy.accum == DType::fp32 && policy.rounding == Rounding::nearest_even &&
                        algorithm != Algorithm::tree &&
                        (policy.storage == DType::fp32 || policy.storage == DType::bf16 || policy.storage == DType::fp16);
  if (f32_path) {
    const int saturate = policy.overflow == Overflow::saturate ? 1 : 0;
    k.combine_f32(config_for(n, stream), o, in, n, members, alg, opc, storage, saturate, es, at.inner, at.len, at.dim,
                  at.start, at.total);
    return;
  }
  const int accum = static_cast<int>(policy.accum), rounding = static_cast<int>(policy.rounding),
            overflow = static_cast<int>(policy.overflow);
  k.combine(config_for(n, stream), o, in, n, members, alg, opc, storage, accum, rounding, overflow, es, at.inner, at.len,
            at.dim, at.start, at.total);
}

bool peer_combinable(const NumericsPolicy& p, Algorithm algorithm, int members) {
  return members >= 1 && members <= kMaxPeers && p.accum == DType::fp32 && p.rounding == Rounding::nearest_even &&
         (algorithm == Algorithm::rank_order || algorithm == Algorithm::ring) &&
         (p.storage == DType::fp32 || p.storage == DType::bf16 || p.storage == DType::fp16);
}

void combine_peers(int device, const std::vector<cuda::DevicePtr>& outs, const std::vector<cuda::DevicePtr>& parts,
                   std::int64_t n, ReduceOp op, Algorithm algorithm, const NumericsPolicy& policy,
                   const CombinePlacement& at) {
  if (n <= 0) return;
  const int members = static_cast<int>(parts.size()), copies = static_cast<int>(outs.size());
  if (op == ReduceOp::mean || members < 2) algorithm = Algorithm::rank_order;
  if (!peer_combinable(policy, algorithm, members) || copies < 1 || copies > kMaxPeers) {
    raise(ErrorCode::Internal, "nccl peer combine of " + std::string(name(policy.storage)) + " over " +
                                   std::to_string(members) + " members into " + std::to_string(copies) + " outputs");
  }
  PeerParts peers{}, targets{};
  bool aligned = true;
  for (int m = 0; m < members; ++m) {
    peers.at[m] = reinterpret_cast<const unsigned char*>(parts[static_cast<std::size_t>(m)]);
    aligned = aligned && parts[static_cast<std::size_t>(m)] % 16 == 0;
  }
  for (int m = 0; m < copies; ++m) {
    targets.at[m] = reinterpret_cast<const unsigned char*>(outs[static_cast<std::size_t>(m)]);
    aligned = aligned && outs[static_cast<std::size_t>(m)] % 16 == 0;
  }
  const int es = static_cast<int>(storage_bytes(policy.storage));
  const Kernels& k = kernels(device);
  const int alg = algorithm_code(algorithm), opc = op_code(op);
  const bool vectors = aligned && algorithm == Algorithm::rank_order;
  const int saturate = policy.overflow == Overflow::saturate ? 1 : 0, vectorize = vectors ? 1 : 0;
  const std::int64_t work = vectors ? std::max<std::int64_t>(1, n / (16 / es)) : n;
  const cuda::Function& f = policy.storage == DType::fp32   ? k.combine_peers_fp32
                            : policy.storage == DType::bf16 ? k.combine_peers_bf16
                                                            : k.combine_peers_fp16;
  f(config_for(work), targets, copies, peers, n, members, alg, opc, saturate, vectorize, at.inner,
    at.len, at.dim, at.start, at.total);
}

void copy_rows(int device, cuda::DevicePtr dst, std::int64_t dst_pitch, cuda::DevicePtr src, std::int64_t src_pitch,
               std::int64_t row_bytes, std::int64_t rows, const cuda::Stream* stream) {
  if (rows <= 0 || row_bytes <= 0) return;
  int unit = 16;
  while (unit > 1 && ((dst | src) % static_cast<std::uint64_t>(unit) != 0 || dst_pitch % unit != 0 ||
                      src_pitch % unit != 0 || row_bytes % unit != 0)) {
    unit /= 2;
  }
  const std::int64_t row_units = row_bytes / unit;
  kernels(device).copy_rows(config_for(row_units * rows, stream), reinterpret_cast<unsigned char*>(dst), dst_pitch,
                            reinterpret_cast<const unsigned char*>(src), src_pitch, row_units, rows, unit);
}

}  // namespace tessera::dist::detail
