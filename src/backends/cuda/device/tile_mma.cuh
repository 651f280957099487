// Device tile library, part 2: register tiles distributed over the threads
// of a block, tile load/store/cast/transpose, and tile.mma (tensor cores:
// wgmma on sm_90a for bf16/fp16 operands, or fp8 e4m3/e5m2 with B K-major,
// in 128-byte-swizzled shared buffers, else mma.sync m16n8k16 on sm_80+,
// fp32 accumulation; a scalar path for every other case). Included by
// tile.cuh.
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

// The wgmma accumulator layout: the block's warpgroups (4 warps each) form a
// WGM x WGN grid; warpgroup (gm, gn) owns rows [gm * R/WGM, +R/WGM) in MI
// strips of 64 and columns [gn * NW, +NW). Within a strip, warp w of the
// group holds rows 16w .. 16w + 15 as NW/8 atoms of 16 x 8 with the
// mma.sync lane pattern (rows g and g + 8, columns 2t and 2t + 1), in the
// register order wgmma.m64nNk16 writes (strip after strip).
template <int R, int C, int WGM, int WGN>
struct WgLayout {
  static constexpr int MI = R / WGM / 64;  // m64 strips per warpgroup
  static constexpr int NW = C / WGN;       // columns per warpgroup (the wgmma N)
  static constexpr int kSlots = MI * NW / 2;
  __device__ __forceinline__ static bool coord(int tid, int s, int& r, int& c) {
    const int g = tid / 128, w = (tid / 32) % 4, l = tid % 32;
    const int i = s / (NW / 2), j = s % (NW / 2);
    const int an = j / 4, q = j % 4;
    r = (g / WGN) * (R / WGM) + i * 64 + w * 16 + l / 4 + (q >> 1) * 8;
    c = (g % WGN) * NW + an * 8 + (l % 4) * 2 + (q & 1);
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
__device__ __forceinline__ Tile<DT, R, C, L> tile_cast(const Tile<D, R, C, L>& t, int ov, int rounding = kNearestEven) {
  Tile<DT, R, C, L> o;
#pragma unroll
  for (int s = 0; s < L::kSlots; ++s) o.v[s] = convert<DT, D>(t.v[s], ov, rounding);
  return o;
}

// tile.tile_add of fp32 or fp64 tiles: slot by slot, one rounding each.
template <int D, int R, int C, class L>
__device__ __forceinline__ Tile<D, R, C, L> tile_add(const Tile<D, R, C, L>& x, const Tile<D, R, C, L>& y) {
  Tile<D, R, C, L> o;
#pragma unroll
  for (int s = 0; s < L::kSlots; ++s) o.v[s] = x.v[s] + y.v[s];
  return o;
}

// ---- tile arithmetic (tile.tile_full, tile_binary, tile_unary, tile_reduce,
// tile_causal_fill) on fp32 or fp64 tiles, each result rounded once; the
// same operations in the same order as the CPU backend's runtime/tile.h. ----
enum { kFn_add, kFn_sub, kFn_mul, kFn_div, kFn_max, kFn_min, kFn_exp, kFn_log, kFn_neg, kFn_sum };

template <class T>
__device__ __forceinline__ T tile_full(typename T::T v) {
  T t;
#pragma unroll
  for (int s = 0; s < T::kSlots; ++s) t.v[s] = v;
  return t;
}

// NaN-propagating, as the reference's maximum/minimum.
template <int F, class T>
__device__ __forceinline__ T tile_fn(T x, T y) {
  if (F == kFn_add) return x + y;
  if (F == kFn_sub) return x - y;
  if (F == kFn_mul) return x * y;
  if (F == kFn_div) return x / y;
  if (x != x || y != y) return x + y;  // a NaN
  if (F == kFn_max) return x > y ? x : y;
  return x < y ? x : y;
}

template <int F, int D, int R, int C, class L>
__device__ __forceinline__ Tile<D, R, C, L> tile_binary(const Tile<D, R, C, L>& x, const Tile<D, R, C, L>& y) {
  Tile<D, R, C, L> o;
#pragma unroll
  for (int s = 0; s < L::kSlots; ++s) o.v[s] = tile_fn<F>(x.v[s], y.v[s]);
  return o;
}

// t op y (or y op t when kStagedFirst), y staged in shared memory with a dim of 1 broadcast.
template <int F, bool kStagedFirst, int D, int R, int C, class L, class V>
__device__ __forceinline__ Tile<D, R, C, L> tile_binary_staged(const Tile<D, R, C, L>& t, const V& ys, int tid) {
  Tile<D, R, C, L> o;
#pragma unroll
  for (int s = 0; s < L::kSlots; ++s) {
    int r, c;
    const bool ok = L::coord(tid, s, r, c) && r < R;
    const typename Traits<D>::value y = ok ? decode_s<D>(*ys.at(V::kRows == 1 ? 0 : r, V::kCols == 1 ? 0 : c)) : 0;
    o.v[s] = kStagedFirst ? tile_fn<F>(y, t.v[s]) : tile_fn<F>(t.v[s], y);
  }
  return o;
}

// exp and log are Tessera's own (tessera/numerics/elementary.h), the lanes' functions.
template <int F, int D, int R, int C, class L>
__device__ __forceinline__ Tile<D, R, C, L> tile_unary(const Tile<D, R, C, L>& x) {
  typedef typename Traits<D>::value T;
  Tile<D, R, C, L> o;
#pragma unroll
  for (int s = 0; s < L::kSlots; ++s) {
    if (F == kFn_exp) o.v[s] = T(tessera::elementary::exp(double(x.v[s])));
    if (F == kFn_log) o.v[s] = T(tessera::elementary::log(double(x.v[s])));
    if (F == kFn_neg) o.v[s] = -x.v[s];
  }
  return o;
}

// Each result element walks its staged row (AXIS = 1) or column, index increasing.
template <int F, int AXIS, int D, int R, int C, class L, class V>
__device__ __forceinline__ void tile_reduce(Tile<D, R, C, L>& t, const V& src, int tid) {
  typedef typename Traits<D>::value T;
  constexpr int n = AXIS == 1 ? V::kCols : V::kRows;
#pragma unroll
  for (int s = 0; s < L::kSlots; ++s) {
    int r, c;
    if (!L::coord(tid, s, r, c) || r >= R) continue;
    T acc = F == kFn_max ? T(__longlong_as_double((i64)0xFFF0000000000000ull)) : T(0);  // -inf
    for (int k = 0; k < n; ++k) {
      const T v = decode_s<D>(AXIS == 1 ? *src.at(r, k) : *src.at(k, c));
      acc = F == kFn_max ? tile_fn<kFn_max>(acc, v) : acc + v;
    }
    t.v[s] = acc;
  }
}

template <int D, int R, int C, class L>
__device__ __forceinline__ Tile<D, R, C, L> tile_causal_fill(const Tile<D, R, C, L>& x, i64 row0, i64 col0, i64 diag,
                                                           typename Traits<D>::value fill, int tid, bool rows = true) {
  Tile<D, R, C, L> o;
#pragma unroll
  for (int s = 0; s < L::kSlots; ++s) {
    int r, c;
    L::coord(tid, s, r, c);
    o.v[s] = col0 + c > row0 + (rows ? r : 0) + diag ? fill : x.v[s];
  }
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

// A wgmma accumulator tile stored into a 2-D buffer: each thread's slots
// come in pairs of adjacent columns (2t, 2t + 1 of an atom), written as one
// store where both lie inside a unit-stride row at an aligned address: 8
// bytes for an fp32 buffer, 4 (both encoded) for a bf16 or fp16 one, which
// halves a 16-bit result's store instructions (docs/design/0032). The rest
// go element by element, past-bounds elements skipped.
template <int D, int R, int C, int WGM, int WGN, int DD>
__device__ __forceinline__ void tile_store(const GView<DD, 2>& dst, i64 r0, i64 c0,
                                           const Tile<D, R, C, WgLayout<R, C, WGM, WGN>>& t, int ov, int tid) {
  typedef WgLayout<R, C, WGM, WGN> L;
  typedef typename Traits<DD>::storage S;
  struct alignas(8) Pair {
    float x, y;
  };
  const i64 rows = dst.rows(), cols = dst.cols();
  const bool unit = dst.strides[1] == 1;
#pragma unroll
  for (int s = 0; s < L::kSlots; s += 2) {
    int r, c;
    L::coord(tid, s, r, c);
    const i64 gr = r0 + r, gc = c0 + c;
    if (gr < 0 || gr >= rows) continue;
    const bool pair = unit && gc >= 0 && gc + 1 < cols;
    if constexpr (D == kFp32 && DD == kFp32) {
      if (pair && (reinterpret_cast<u64>(dst.at(gr, gc)) & 7) == 0) {
        *reinterpret_cast<Pair*>(dst.at(gr, gc)) = Pair{t.v[s], t.v[s + 1]};
        continue;
      }
    } else if constexpr (sizeof(S) == 2) {
      if (pair && (reinterpret_cast<u64>(dst.at(gr, gc)) & 3) == 0) {
        const u32 lo = (u32)encode_v<DD>(t.v[s], ov), hi = (u32)encode_v<DD>(t.v[s + 1], ov);
        *reinterpret_cast<u32*>(dst.at(gr, gc)) = lo | (hi << 16);
        continue;
      }
    }
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      if (gc + e >= 0 && gc + e < cols) *dst.at(gr, gc + e) = encode_v<DD>(t.v[s + e], ov);
    }
  }
}

// ---- mma ----

// acc + a x b, scalar: each thread computes its own slots, k increasing, one
// fused multiply-add per step (the CPU backend's order). a and b are shared
// buffers (the mma's operands read in place, or staged there). k is the
// outer loop over a group of up to kGroup slots: the group's products of one
// k are independent (instruction-level parallelism, and a b element shared
// by slots of one column is read once), while each slot still adds its
// products in increasing k, so the bits are those of a slot-by-slot loop.
template <int AD, int BD, class AV, class BV, int D, int R, int C, class L>
__device__ __forceinline__ Tile<D, R, C, L> mma_scalar(const AV& a, const BV& b, const Tile<D, R, C, L>& acc, int tid) {
  constexpr int K = AV::kCols;
  constexpr int kGroup = 16;  // accumulators and coordinates in registers at once
  typedef typename Traits<D>::value V;
  Tile<D, R, C, L> out;
#pragma unroll
  for (int s0 = 0; s0 < L::kSlots; s0 += kGroup) {
    int rr[kGroup], cc[kGroup];
    bool live[kGroup];
    V x[kGroup];
#pragma unroll
    for (int j = 0; j < kGroup; ++j) {
      live[j] = s0 + j < L::kSlots && L::coord(tid, s0 + j, rr[j], cc[j]) && rr[j] < R;
      x[j] = s0 + j < L::kSlots ? acc.v[s0 + j] : V(0);
    }
    // Unrolled by 4 only: a fully unrolled k loop made slots x K copies
    // (8192 for a 128x128x64 fp32 tile on 128 threads), and NVRTC took
    // minutes per kernel.
#pragma unroll 4
    for (int k = 0; k < K; ++k) {
#pragma unroll
      for (int j = 0; j < kGroup; ++j) {
        if (!live[j]) continue;
        const V av = (V)decode_s<AD>(*a.at(rr[j], k));
        const V bv = (V)decode_s<BD>(*b.at(k, cc[j]));
        if constexpr (D == kFp64) {
          x[j] = __fma_rn(av, bv, x[j]);
        } else {
          x[j] = __fmaf_rn(av, bv, x[j]);
        }
      }
    }
#pragma unroll
    for (int j = 0; j < kGroup; ++j)
      if (s0 + j < L::kSlots) out.v[s0 + j] = x[j];
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

// A shared view read transposed: element (r, c) is the buffer's (c, r). The
// operand of tile.mma(x, tile.transpose(tile.load(buf))) reads an [N, K]
// buffer in place as a K-major B; the mma paths test kTransposed.
template <class V>
struct TView {
  typedef typename V::S S;
  static constexpr int kDType = V::kDType;
  static constexpr int kRows = V::kCols;
  static constexpr int kCols = V::kRows;
  static constexpr bool kTransposed = true;
  V v;
  __device__ __forceinline__ S* at(i64 r, i64 c) const { return v.at(c, r); }
};
template <class V>
__device__ __forceinline__ TView<V> tview(const V& v) {
  return TView<V>{v};
}

// tile.transpose of a register tile, the general case: `src` holds the
// [C, R] tile (staged by stage() and synchronised); t [R, C] reads it
// transposed.
template <int D, int R, int C, class L, class V>
__device__ __forceinline__ void transpose_from(Tile<D, R, C, L>& t, const V& src, int tid) {
  static_assert(V::kRows == C && V::kCols == R, "transpose_from reads the [C, R] staged tile");
#pragma unroll
  for (int s = 0; s < L::kSlots; ++s) {
    int r, c;
    const bool ok = L::coord(tid, s, r, c) && r < R;
    t.v[s] = ok ? decode_s<D>(*src.at(c, r)) : typename Traits<D>::value(0);
  }
}

#if __CUDA_ARCH__ >= 800
// One mma.sync atom, d[4] += a[4] x b[2]: m16n8k16 for bf16/fp16 (sm_80+),
// m16n8k32 for fp8 e4m3/e5m2 (sm_89+), fp32 accumulators.
#define TSR_MMA_SYNC_ATOM(DT, SHAPE, TY)                                                                     \
  template <>                                                                                              \
  __device__ __forceinline__ void mma_sync_atom<DT>(float* c, const u32* a, const u32* b) {                 \
    asm volatile("mma.sync.aligned." SHAPE ".row.col.f32." TY "." TY                                       \
                 ".f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"                  \
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])                                          \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));                      \
  }
template <int DT>
__device__ __forceinline__ void mma_sync_atom(float* c, const u32* a, const u32* b);
TSR_MMA_SYNC_ATOM(kBf16, "m16n8k16", "bf16")
TSR_MMA_SYNC_ATOM(kFp16, "m16n8k16", "f16")
#if __CUDA_ARCH__ >= 890
TSR_MMA_SYNC_ATOM(kFp8E4m3, "m16n8k32", "e4m3")
TSR_MMA_SYNC_ATOM(kFp8E5m2, "m16n8k32", "e5m2")
#endif
#undef TSR_MMA_SYNC_ATOM

// Tensor cores: acc [R, C] fp32 += a [R, K] x b [K, C] (bf16, fp16 or, on
// sm_89+, fp8 with a K-major b; in shared memory, rows of 16 bytes
// contiguous and 16-byte aligned). A fragments come from ldmatrix.x4, B
// fragments from ldmatrix.x2.trans (B is row-major [K, C]) or, for a TView
// of an [C, K] buffer (K-major B), from ldmatrix.x2 without .trans; one
// mma.sync atom per 16 x 8 block of the accumulator and k-step.
template <bool kBf16, class AV, class BV, int R, int C, int WM, int WN>
__device__ __forceinline__ Tile<kFp32, R, C, MmaLayout<R, C, WM, WN>> mma_tc(
    const AV& a, const BV& b, const Tile<kFp32, R, C, MmaLayout<R, C, WM, WN>>& acc, int tid) {
  typedef MmaLayout<R, C, WM, WN> L;
  constexpr int K = AV::kCols;
  constexpr int AM = L::AM, AN = L::AN;
  // The operands' dtype picks the instruction (kBf16 is what the emitter
  // says of it): fp8 (sm_89+): m16n8k32 with 8-bit operands, B K-major only
  // (ldmatrix cannot transpose bytes); 16-bit: m16n8k16. Either way an
  // ldmatrix row is 16 bytes: kHalf elements, and a k-step covers two.
  constexpr int DT = AV::kDType;
  constexpr bool k8 = DT == kFp8E4m3 || DT == kFp8E5m2;
  constexpr int kHalf = k8 ? 16 : 8;
  static_assert(!k8 || BV::kTransposed, "8-bit mma.sync operands must be K-major: b is a transposed [N, K] buffer");
  const int w = tid / 32, l = tid % 32;
  const int row0 = (w / WN) * AM * 16, col0 = (w % WN) * AN * 8;
  Tile<kFp32, R, C, L> d = acc;
#pragma unroll 2
  for (int k0 = 0; k0 < K; k0 += 2 * kHalf) {
    u32 af[AM][4];
    u32 bfr[AN][2];
#pragma unroll
    for (int am = 0; am < AM; ++am) {
      const int mi = l / 8;
      const void* p = a.at(row0 + am * 16 + (mi % 2) * 8 + l % 8, k0 + (mi / 2) * kHalf);
      asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                   : "=r"(af[am][0]), "=r"(af[am][1]), "=r"(af[am][2]), "=r"(af[am][3])
                   : "r"(smem_addr(p)));
    }
#pragma unroll
    for (int an = 0; an < AN; ++an) {
      if constexpr (BV::kTransposed) {
        // Lanes 0-7 address the 8 N-rows at k0, lanes 8-15 at k0 + kHalf:
        // each lane receives the col-major fragment (16-bit: b[k = 2t, 2t + 1
        // (+ 8)][n = g]; 8-bit: b[k = 4t .. 4t + 3 (+ 16)][n = g]).
        const void* p = b.at(k0 + ((l / 8) % 2) * kHalf, col0 + an * 8 + l % 8);
        asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
                     : "=r"(bfr[an][0]), "=r"(bfr[an][1])
                     : "r"(smem_addr(p)));
      } else {
        const void* p = b.at(k0 + (l % 16), col0 + an * 8);
        asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
                     : "=r"(bfr[an][0]), "=r"(bfr[an][1])
                     : "r"(smem_addr(p)));
      }
    }
#pragma unroll
    for (int am = 0; am < AM; ++am) {
#pragma unroll
      for (int an = 0; an < AN; ++an) {
        float* c = &d.v[(am * AN + an) * 4];
        mma_sync_atom<DT>(c, af[am], bfr[an]);
      }
    }
  }
  return d;
}
#endif

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// Hopper tensor cores: wgmma.mma_async, both operands read from shared
// memory through 64-bit descriptors (start address, leading and stride byte
// offsets, 128-byte swizzle), fp32 accumulators in registers.
__device__ __forceinline__ u64 wg_desc(u32 addr, u32 lbo, u32 sbo) {
  return (u64)((addr & 0x3FFFF) >> 4) | ((u64)((lbo >> 4) & 0x3FFF) << 16) | ((u64)((sbo >> 4) & 0x3FFF) << 32) |
         (1ull << 62);
}
__device__ __forceinline__ void wg_keep(float& x) {
  asm volatile("" : "+f"(x)::"memory");
}

// One wgmma.m64nNk16 (bf16/fp16) or m64nNk32 (fp8 e4m3/e5m2) of operand
// dtype DT, A K-major or MN-major (kTransA: imm-trans-a = 1), B MN-major
// (kTransB: imm-trans-b = 1) or K-major (fp8 takes K-major operands only
// and no transpose flags), accumulating into N/2 fp32 registers per thread.
// The instances differ only in N, the operand type and the transpose flags,
// so one macro writes the three N of each from per-N operand lists.
template <int N, int DT, bool kTransA, bool kTransB>
__device__ __forceinline__ void wgmma_ss(float* d, u64 da, u64 db);

#define TSR_WG_REGS32 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, " \
  "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33"
#define TSR_WG_REGS64 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, " \
  "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, " \
  "%41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, " \
  "%61, %62, %63}, %64, %65"
#define TSR_WG_REGS128 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, " \
  "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, " \
  "%41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, " \
  "%61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, " \
  "%81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, " \
  "%100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, " \
  "%116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129"
#define TSR_WG_ACC32 \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define TSR_WG_ACC64 \
  TSR_WG_ACC32, \
  "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
  "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
  "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
  "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define TSR_WG_ACC128 \
  TSR_WG_ACC64, \
  "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
  "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
  "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), \
  "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), \
  "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), \
  "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), \
  "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), \
  "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
// KTY is the shape's k and the types ("k16.f32.bf16.bf16"), FLAGS what
// follows scale-d and the operand scales (", 0, 1": imm-trans-a, imm-trans-b).
#define TSR_WGMMA_SS(N, DT, TA, TB, KTY, FLAGS, REGS, ACC)                                                  \
  template <>                                                                                              \
  __device__ __forceinline__ void wgmma_ss<N, DT, TA, TB>(float* d, u64 da, u64 db) {                      \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"                                                 \
                 "wgmma.mma_async.sync.aligned.m64n" #N KTY " " REGS ", p, 1, 1" FLAGS ";\n}\n"                \
                 : ACC                                                                                     \
                 : "l"(da), "l"(db));                                                                      \
  }
#define TSR_WGMMA_SS_N(DT, TA, TB, KTY, FLAGS)                               \
  TSR_WGMMA_SS(64, DT, TA, TB, KTY, FLAGS, TSR_WG_REGS32, TSR_WG_ACC32)   \
  TSR_WGMMA_SS(128, DT, TA, TB, KTY, FLAGS, TSR_WG_REGS64, TSR_WG_ACC64)  \
  TSR_WGMMA_SS(256, DT, TA, TB, KTY, FLAGS, TSR_WG_REGS128, TSR_WG_ACC128)
TSR_WGMMA_SS_N(kBf16, false, true, "k16.f32.bf16.bf16", ", 0, 1")
TSR_WGMMA_SS_N(kBf16, false, false, "k16.f32.bf16.bf16", ", 0, 0")
TSR_WGMMA_SS_N(kBf16, true, true, "k16.f32.bf16.bf16", ", 1, 1")
TSR_WGMMA_SS_N(kBf16, true, false, "k16.f32.bf16.bf16", ", 1, 0")
TSR_WGMMA_SS_N(kFp16, false, true, "k16.f32.f16.f16", ", 0, 1")
TSR_WGMMA_SS_N(kFp16, false, false, "k16.f32.f16.f16", ", 0, 0")
TSR_WGMMA_SS_N(kFp16, true, true, "k16.f32.f16.f16", ", 1, 1")
TSR_WGMMA_SS_N(kFp16, true, false, "k16.f32.f16.f16", ", 1, 0")
TSR_WGMMA_SS_N(kFp8E4m3, false, false, "k32.f32.e4m3.e4m3", "")
TSR_WGMMA_SS_N(kFp8E5m2, false, false, "k32.f32.e5m2.e5m2", "")
#undef TSR_WGMMA_SS_N
#undef TSR_WGMMA_SS
#undef TSR_WG_ACC128
#undef TSR_WG_ACC64
#undef TSR_WG_ACC32
#undef TSR_WG_REGS128
#undef TSR_WG_REGS64
#undef TSR_WG_REGS32

// acc [R, C] fp32 += a [R, K] x b [K, C], bf16, fp16 or (b K-major) fp8
// e4m3/e5m2, on the block's warpgroups. A b that is a TView of an [C, K]
// buffer is K-major like a: its descriptors address it as a's do (rows of
// 128 bytes, 1024 bytes per 8 rows), with no transpose flag. For 8-bit
// types a panel row is 128 elements and a k-step of 32 moves the start 32
// bytes, as a k-step of 16 does for 16-bit types (kBf16 is false for fp8).
// a and b are shared buffers in the kPanel128 layout, 1024-byte aligned:
// a's K panels are ROWS x 128 bytes (one wgmma row group of 8 rows is 1024 bytes: the stride byte offset), a k-step of 16 moves the start 32
// bytes within the panel; b's N panels are K x 128 bytes (the leading byte
// offset, between panels along N), 8 k-rows are 1024 bytes, a k-step moves
// the start 16 rows. An a that is a TView of a [K, M] buffer (16-bit
// types; a transposed A, as in the weight gradients X^T dY) is MN-major
// like a row-major b: M panels of K x 128 bytes, one per 64 rows of the
// product, imm-trans-a = 1. mma_wg_async issues every k-step's wgmma and commits
// them as one group without waiting: the accumulators and the shared buffers
// stay the tensor cores' until a wg_wait retires the group (an async
// tile.mma, docs/guide/cuda_backend.md). mma_wg also waits, so the shared
// buffers are free and the accumulators final on return.
template <bool kBf16, class AV, class BV, int R, int C, int WGM, int WGN>
__device__ __forceinline__ Tile<kFp32, R, C, WgLayout<R, C, WGM, WGN>> mma_wg_async(
    const AV& a, const BV& b, const Tile<kFp32, R, C, WgLayout<R, C, WGM, WGN>>& acc, int tid) {
  typedef WgLayout<R, C, WGM, WGN> L;
  // The operand dtype comes from the views (kBf16 agrees for 16-bit types).
  constexpr int kDT = AV::kDType;
  constexpr bool kBK = BV::kTransposed;  // B K-major: a TView of an [N, K] buffer
  constexpr bool kAM = AV::kTransposed;  // A MN-major: a TView of a [K, M] buffer
  static_assert(kDT == BV::kDType, "wgmma operands share a dtype");
  static_assert(sizeof(typename AV::S) == 2 || !kAM, "fp8 wgmma takes K-major operands only");
  static_assert(sizeof(typename AV::S) == 1 || kBf16 == (kDT == ::tessera::device::kBf16), "kBf16 names the dtype");
  static_assert(sizeof(typename AV::S) == 2 || kBK, "fp8 wgmma takes K-major operands only");
  constexpr int K = AV::kCols;
  constexpr u32 kEs = sizeof(typename AV::S);       // bytes per element
  constexpr int kPE = 128 / kEs;                      // elements per panel row
  constexpr int kStep = 32 / kEs;                     // the instruction's k: 32 bytes of a panel row
  constexpr u32 kAPanel = (kAM ? K : AV::kRows) * 128u;  // a's [M, 128 bytes] panels (MN-major: [K, 128 bytes])
  constexpr u32 kBPanel = (kBK ? BV::kCols : BV::kRows) * 128u;  // b's buffer rows x 128 bytes
  const int g = tid / 128;
  // This warpgroup's M rows: (R / WGM) (g / WGN) rows into every K panel,
  // or (MN-major) that many rows / 64 panels on.
  const u32 a0 = smem_addr(a.at(0, 0)) + (kAM ? (u32)((g / WGN) * (R / WGM) / 64) * kAPanel
                                               : (u32)((g / WGN) * (R / WGM)) * 128u);
  // K-major b: this warpgroup's N rows start NW * (g % WGN) rows into every panel.
  const u32 b0 = smem_addr(b.at(0, 0)) +
                 (kBK ? (u32)((g % WGN) * L::NW) * 128u : (u32)((g % WGN) * L::NW / 64) * kBPanel);
  Tile<kFp32, R, C, L> d = acc;
#pragma unroll
  for (int s = 0; s < L::kSlots; ++s) wg_keep(d.v[s]);
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
  for (int k0 = 0; k0 < K; k0 += kStep) {
    const u64 db = kBK ? wg_desc(b0 + (u32)(k0 / kPE) * kBPanel + (u32)(k0 % kPE) * kEs, 16, 1024)
                       : wg_desc(b0 + (u32)k0 * 128u, kBPanel, 1024);
#pragma unroll
    for (int i = 0; i < L::MI; ++i) {
      const u64 da = kAM ? wg_desc(a0 + (u32)i * kAPanel + (u32)k0 * 128u, kAPanel, 1024)
                         : wg_desc(a0 + (u32)(k0 / kPE) * kAPanel + (u32)i * 64u * 128u + (u32)(k0 % kPE) * kEs, 16, 1024);
      wgmma_ss<L::NW, kDT, kAM, !kBK>(&d.v[i * (L::NW / 2)], da, db);
    }
  }
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  return d;
}

// An accumulator tile defined by ordinary instructions (zeros, loads), made
// final before any wgmma reads it: without this fence the compiler cannot
// keep a loop's wgmmas in flight across iterations and serializes them
// (ptxas C7515, "wgmma.mma_async instructions are serialized").
template <class T>
__device__ __forceinline__ T wg_fenced(T t) {
#pragma unroll
  for (int s = 0; s < T::kSlots; ++s) wg_keep(t.v[s]);
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
  return t;
}

// Waits until at most N of this warpgroup's committed wgmma groups are in
// flight (tile.mma_wait {pending = N}).
template <int N>
__device__ __forceinline__ void wg_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

template <bool kBf16, class AV, class BV, int R, int C, int WGM, int WGN>
__device__ __forceinline__ Tile<kFp32, R, C, WgLayout<R, C, WGM, WGN>> mma_wg(
    const AV& a, const BV& b, const Tile<kFp32, R, C, WgLayout<R, C, WGM, WGN>>& acc, int tid) {
  Tile<kFp32, R, C, WgLayout<R, C, WGM, WGN>> d = mma_wg_async<kBf16>(a, b, acc, tid);
  wg_wait<0>();
#pragma unroll
  for (int s = 0; s < WgLayout<R, C, WGM, WGN>::kSlots; ++s) wg_keep(d.v[s]);
  return d;
}
#endif

}  // namespace tsr
