// Device tile library, part 2: register tiles distributed over the threads
// of a block, tile load/store/cast, and tile.mma (tensor cores through
// mma.sync m16n8k16 for bf16/fp16 operands with fp32 accumulation on sm_80+;
// a scalar path for every other case). Included by tile.cuh.
//
// A register tile [R, C] is held by the NT threads of the block; a layout
// says which element each thread's slot s holds:
//   Strided<R, C, NT>      element e = s * NT + tid (row-major), any NT;
//   MmaLayout<R, C, WM, WN> the mma.sync accumulator layout: warps form a
//                          WM x WN grid over the tile's 16 x 8 atoms, each
//                          warp owns a block of atoms, each lane 4 values per
//                          atom (rows g and g + 8, columns 2t and 2t + 1).
// Accumulation order (docs/guide/cuda_backend.md): the scalar path computes
// each output element as acc, then fmaf(a[r][k], b[k][c], .) for k = 0, 1,
// ... (products exact, one rounding per step), exactly the CPU backend's
// order, so results are bit-equal to it. The tensor-core path lets the
// hardware sum 16 products of a k-step at once (fp32 accumulation, an order
// the hardware fixes), so it agrees with the CPU within a stated tolerance.
#pragma once

namespace tsr {

template <int R, int C, int NT>
struct Strided {
  static constexpr int kSlots = (R * C + NT - 1) / NT;
  __device__ __forceinline__ static bool coord(int tid, int s, int& r, int& c) {
    const int e = s * NT + tid;
    r = e / C;
    c = e % C;
    return e < R * C;
  }
};

template <int R, int C, int WM, int WN>
struct MmaLayout {
  static constexpr int AM = R / 16 / WM;  // atoms per warp along rows
  static constexpr int AN = C / 8 / WN;   // along columns
  static constexpr int kSlots = AM * AN * 4;
  __device__ __forceinline__ static bool coord(int tid, int s, int& r, int& c) {
    const int w = tid / 32, l = tid % 32;
    const int ai = s / 4, q = s % 4;
    const int am = ai / AN, an = ai % AN;
    r = ((w / WN) * AM + am) * 16 + l / 4 + (q >> 1) * 8;
    c = ((w % WN) * AN + an) * 8 + (l % 4) * 2 + (q & 1);
    return true;
  }
};

template <int D, int R, int C, class L>
struct Tile {
  typedef typename Traits<D>::value T;
  static constexpr int kRows = R;
  static constexpr int kCols = C;
  static constexpr int kSlots = L::kSlots;
  T v[L::kSlots];
};

template <class T>
__device__ __forceinline__ T zeros() {
  T t;
#pragma unroll
  for (int s = 0; s < T::kSlots; ++s) t.v[s] = typename T::T(0);
  return t;
}

template <int DT, int D, int R, int C, class L>
__device__ __forceinline__ Tile<DT, R, C, L> tile_cast(const Tile<D, R, C, L>& t, int ov) {
  Tile<DT, R, C, L> o;
#pragma unroll
  for (int s = 0; s < L::kSlots; ++s) o.v[s] = convert<DT, D>(t.v[s], ov);
  return o;
}

// Loads the box at (r0, c0) (zeros past the source's bounds).
template <int D, int R, int C, class L, int SD, int SR>
__device__ __forceinline__ void tile_load(Tile<D, R, C, L>& t, const GView<SD, SR>& src, i64 r0, i64 c0, int tid) {
  const i64 rows = src.rows(), cols = src.cols();
#pragma unroll
  for (int s = 0; s < L::kSlots; ++s) {
    int r, c;
    const bool ok = L::coord(tid, s, r, c);
    const i64 gr = r0 + r, gc = c0 + c;
    t.v[s] = (ok && gr >= 0 && gr < rows && gc >= 0 && gc < cols)
                 ? convert<D, SD>(decode_s<SD>(*src.at(gr, gc)), kInfNan)
                 : typename Traits<D>::value(0);
  }
}
template <int D, int R, int C, class L, int SD, int RO, int CO, int M, int RANK>
__device__ __forceinline__ void tile_load(Tile<D, R, C, L>& t, const SView<SD, RO, CO, M, RANK>& src, i64 r0, i64 c0,
                                          int tid) {
#pragma unroll
  for (int s = 0; s < L::kSlots; ++s) {
    int r, c;
    const bool ok = L::coord(tid, s, r, c);
    const i64 gr = r0 + r, gc = c0 + c;
    t.v[s] = (ok && gr >= 0 && gr < RO && gc >= 0 && gc < CO) ? convert<D, SD>(decode_s<SD>(*src.at(gr, gc)), kInfNan)
                                                              : typename Traits<D>::value(0);
  }
}

// Stores the tile at (r0, c0); elements past the destination's bounds are skipped.
template <int D, int R, int C, class L, int DD, int DR>
__device__ __forceinline__ void tile_store(const GView<DD, DR>& dst, i64 r0, i64 c0, const Tile<D, R, C, L>& t, int ov,
                                           int tid) {
  const i64 rows = dst.rows(), cols = dst.cols();
#pragma unroll
  for (int s = 0; s < L::kSlots; ++s) {
    int r, c;
    const bool ok = L::coord(tid, s, r, c);
    const i64 gr = r0 + r, gc = c0 + c;
    if (ok && r < R && gr >= 0 && gr < rows && gc >= 0 && gc < cols) *dst.at(gr, gc) = encode_v<DD>(t.v[s], ov);
  }
}
template <int D, int R, int C, class L, int DD, int RO, int CO, int M, int RANK>
__device__ __forceinline__ void tile_store(const SView<DD, RO, CO, M, RANK>& dst, i64 r0, i64 c0,
                                           const Tile<D, R, C, L>& t, int ov, int tid) {
#pragma unroll
  for (int s = 0; s < L::kSlots; ++s) {
    int r, c;
    const bool ok = L::coord(tid, s, r, c);
    const i64 gr = r0 + r, gc = c0 + c;
    if (ok && r < R && gr >= 0 && gr < RO && gc >= 0 && gc < CO) *dst.at(gr, gc) = encode_v<DD>(t.v[s], ov);
  }
}

// ---- mma ----

// acc + a x b, scalar: each thread computes its own slots, k increasing, one
// fused multiply-add per step (the CPU backend's order). a and b are shared
// buffers (the mma's operands read in place, or staged there).
template <int AD, int BD, class AV, class BV, int D, int R, int C, class L>
__device__ __forceinline__ Tile<D, R, C, L> mma_scalar(const AV& a, const BV& b, const Tile<D, R, C, L>& acc, int tid) {
  constexpr int K = AV::kCols;
  Tile<D, R, C, L> out;
#pragma unroll
  for (int s = 0; s < L::kSlots; ++s) {
    int r, c;
    typename Traits<D>::value x = acc.v[s];
    if (L::coord(tid, s, r, c) && r < R) {
      for (int k = 0; k < K; ++k) {
        const typename Traits<D>::value av = (typename Traits<D>::value)decode_s<AD>(*a.at(r, k));
        const typename Traits<D>::value bv = (typename Traits<D>::value)decode_s<BD>(*b.at(k, c));
        if constexpr (D == kFp64) {
          x = __fma_rn(av, bv, x);
        } else {
          x = __fmaf_rn(av, bv, x);
        }
      }
    }
    out.v[s] = x;
  }
  return out;
}

// Stages a register tile into a shared buffer (the operand of an mma that
// does not read shared memory directly).
template <int D, int R, int C, class L, int RO, int CO, int M, int RANK>
__device__ __forceinline__ void stage(const SView<D, RO, CO, M, RANK>& dst, const Tile<D, R, C, L>& t, int tid) {
#pragma unroll
  for (int s = 0; s < L::kSlots; ++s) {
    int r, c;
    if (L::coord(tid, s, r, c) && r < R) *dst.at(r, c) = encode_v<D>(t.v[s], kInfNan);
  }
}

#if __CUDA_ARCH__ >= 800
// Tensor cores: acc [R, C] fp32 += a [R, K] x b [K, C] (bf16 or fp16, in
// shared memory, rows of 8 elements contiguous and 16-byte aligned).
// A fragments come from ldmatrix.x4, B fragments from ldmatrix.x2.trans
// (B is row-major [K, C]); one mma.sync.m16n8k16 per atom and k-step.
template <bool kBf16, class AV, class BV, int R, int C, int WM, int WN>
__device__ __forceinline__ Tile<kFp32, R, C, MmaLayout<R, C, WM, WN>> mma_tc(
    const AV& a, const BV& b, const Tile<kFp32, R, C, MmaLayout<R, C, WM, WN>>& acc, int tid) {
  typedef MmaLayout<R, C, WM, WN> L;
  constexpr int K = AV::kCols;
  constexpr int AM = L::AM, AN = L::AN;
  const int w = tid / 32, l = tid % 32;
  const int row0 = (w / WN) * AM * 16, col0 = (w % WN) * AN * 8;
  Tile<kFp32, R, C, L> d = acc;
#pragma unroll 2
  for (int k0 = 0; k0 < K; k0 += 16) {
    u32 af[AM][4];
    u32 bfr[AN][2];
#pragma unroll
    for (int am = 0; am < AM; ++am) {
      const int mi = l / 8;
      const void* p = a.at(row0 + am * 16 + (mi % 2) * 8 + l % 8, k0 + (mi / 2) * 8);
      asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                   : "=r"(af[am][0]), "=r"(af[am][1]), "=r"(af[am][2]), "=r"(af[am][3])
                   : "r"(smem_addr(p)));
    }
#pragma unroll
    for (int an = 0; an < AN; ++an) {
      const void* p = b.at(k0 + (l % 16), col0 + an * 8);
      asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
                   : "=r"(bfr[an][0]), "=r"(bfr[an][1])
                   : "r"(smem_addr(p)));
    }
#pragma unroll
    for (int am = 0; am < AM; ++am) {
#pragma unroll
      for (int an = 0; an < AN; ++an) {
        float* c = &d.v[(am * AN + an) * 4];
        if constexpr (kBf16) {
          asm volatile(
              "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
              "{%0, %1, %2, %3};\n"
              : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
              : "r"(af[am][0]), "r"(af[am][1]), "r"(af[am][2]), "r"(af[am][3]), "r"(bfr[an][0]), "r"(bfr[an][1]));
        } else {
          asm volatile(
              "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
              "{%0, %1, %2, %3};\n"
              : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
              : "r"(af[am][0]), "r"(af[am][1]), "r"(af[am][2]), "r"(af[am][3]), "r"(bfr[an][0]), "r"(bfr[an][1]));
        }
      }
    }
  }
  return d;
}
#endif

}  // namespace tsr
