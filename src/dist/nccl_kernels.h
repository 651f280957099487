// The device kernels of the nccl collective backend (nccl_communicator.cpp):
// NCCL moves bytes; these combine what arrived in the order the
// deterministic reduction fixes (communicator.h), with the numerics of the
// host rank-order reduction, bit for bit, and repack tensor parts.
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/dist/communicator.h"
#include "tessera/runtime/cuda.h"

namespace tessera::dist::detail {

// Where the combined elements sit in the tensor the reduction is over, so a
// ring combination can start each element at the member after its flat
// part (communicator.h, Algorithm::ring): element i of the `n` combined ones
// is flat element (i / (len * inner)) * (dim * inner) + (start + (i / inner) % len) * inner + i % inner
// of a tensor of `total` elements split into `members` flat parts.
struct CombinePlacement {
  std::int64_t inner = 1;
  std::int64_t len = 1;
  std::int64_t dim = 1;
  std::int64_t start = 0;
  std::int64_t total = 0;
};

// Whether combine() handles `policy` on the device: unpacked floating-point
// storage, nearest-even or toward-zero rounding. The rest (integers, packed
// formats, stochastic rounding) reduce on the host.
bool device_combinable(const NumericsPolicy& policy);

// out[i] = the combination of parts[m * n + i] over members m = 0..members-1
// (storage codes of `policy`), in the order of `algorithm` (rank_order,
// ring or tree), queued on `stream` (nullptr: `device`'s default stream).
void combine(int device, cuda::DevicePtr out, cuda::DevicePtr parts, std::int64_t n, int members, ReduceOp op,
             Algorithm algorithm, const NumericsPolicy& policy, const CombinePlacement& placement,
             const cuda::Stream* stream = nullptr);

// The most members combine_peers reads from.
constexpr int kMaxPeers = 8;

// Whether combine_peers handles `policy` in the order of `algorithm` over
// `members`: fp32, bf16 or fp16 storage at fp32 accumulation to nearest,
// rank or ring order, at most kMaxPeers members.
bool peer_combinable(const NumericsPolicy& policy, Algorithm algorithm, int members);

// outs[c][i] = the combination of parts[m][i] over members m, for every
// output c (each pointer one a kernel on `device` may use: its own memory
// or a peer's with peer access enabled), as combine() computes it, queued
// on `device`'s default stream. Moves 16 bytes of each member at a time
// when every pointer allows. Several outputs: the combining kernel also
// does the all-gather, writing its part into every member's result.
void combine_peers(int device, const std::vector<cuda::DevicePtr>& outs, const std::vector<cuda::DevicePtr>& parts,
                   std::int64_t n, ReduceOp op, Algorithm algorithm, const NumericsPolicy& policy,
                   const CombinePlacement& placement);

// `rows` rows of `row_bytes` bytes from src (rows `src_pitch` bytes apart)
// to dst (rows `dst_pitch` bytes apart), queued on `stream` (nullptr:
// `device`'s default stream).
void copy_rows(int device, cuda::DevicePtr dst, std::int64_t dst_pitch, cuda::DevicePtr src, std::int64_t src_pitch,
               std::int64_t row_bytes, std::int64_t rows, const cuda::Stream* stream = nullptr);

}  // namespace tessera::dist::detail
