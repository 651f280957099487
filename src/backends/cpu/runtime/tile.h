// Host tile library: register tiles, tile load/store, mma, casts, transposes, reduce_sum.
//
// A Tile<D, R, C> holds R x C values of dtype D (1-D tiles use R = 1) for the
// whole group; tile ops run once per group at group level. Loads read zeros
// past the source's bounds and stores skip elements past the destination's
// bounds, so tiled kernels need no code for shapes that do not divide the
// tile size.
//
// mma computes acc + a x b with each product exact and each addition rounded
// once to the accumulator's dtype, k increasing: for an fp32 accumulator and
// operands of 32 bits or fewer that is exactly std::fma in float (a fused
// multiply-add rounds a*b + c once), for fp64 std::fma in double; narrower
// accumulators round the exact sum once through libtessera's encoder. The
// register-blocked micro-kernel keeps an 8 x 32 (AVX-512) or 6 x 16 (AVX2)
// block of fp32 accumulators in registers while k runs; the order of operations per element is the same as
// the plain triple loop, so blocking never changes a bit.
#pragma once

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessera_cpu/memory.h"
#include "tessera_cpu/numerics.h"

namespace tessera_cpu {

// The values live in a 64-byte aligned heap block, so that handing a tile on
// (the emitter moves a tile value at its only use: a loop-carried
// accumulator, a branch result) is a pointer swap instead of a copy of the
// whole block. Copies still copy the values. Freed blocks go to a small
// per-thread pool of this tile type and are reused: allocating them afresh
// on every launch let the allocator return the memory to the system and
// fault it back in, which cost more than a small kernel's work.
template <DType D, int R, int C>
class Tile {
 public:
  using Array = value_t<D>[R][C];
  Tile() : p_(allocate()) {}
  Tile(const Tile& o) : p_(allocate()) { std::memcpy(p_, o.p_, sizeof(Array)); }
  Tile(Tile&& o) noexcept : p_(o.p_) { o.p_ = nullptr; }
  Tile& operator=(const Tile& o) {
    if (this != &o) {
      if (p_ == nullptr) p_ = allocate();
      std::memcpy(p_, o.p_, sizeof(Array));
    }
    return *this;
  }
  Tile& operator=(Tile&& o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  ~Tile() { release(p_); }

  Array& v() { return *reinterpret_cast<Array*>(p_); }
  const Array& v() const { return *reinterpret_cast<const Array*>(p_); }

 private:
  struct Pool {
    static constexpr int kBlocks = 16;
    value_t<D>* blocks[kBlocks];
    int n = 0;
    ~Pool() {
      while (n > 0) std::free(blocks[--n]);
    }
  };
  static Pool& pool() {
    thread_local Pool p;
    return p;
  }
  static value_t<D>* allocate() {
    Pool& free_blocks = pool();
    if (free_blocks.n > 0) return free_blocks.blocks[--free_blocks.n];
    constexpr std::size_t bytes = (sizeof(Array) + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, bytes);
    if (p == nullptr) throw std::bad_alloc();
    return static_cast<value_t<D>*>(p);
  }
  static void release(value_t<D>* p) {
    if (p == nullptr) return;
    Pool& free_blocks = pool();
    if (free_blocks.n < Pool::kBlocks) {
      free_blocks.blocks[free_blocks.n++] = p;
    } else {
      std::free(p);
    }
  }
  value_t<D>* p_;
};

template <DType D, int R, int C>
inline Tile<D, R, C> zeros() {
  Tile<D, R, C> t;
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < C; ++j) t.v()[i][j] = value_t<D>{};
  return t;
}

// tile.tile_load from a 2-D view: rows [o0, o0 + R), cols [o1, o1 + C).
template <DType D, int R, int C, DType S>
inline Tile<D, R, C> tile_load(const View<S, 2>& src, std::int64_t o0, std::int64_t o1) {
  Tile<D, R, C> t;
  const std::int64_t c_lo = std::clamp<std::int64_t>(-o1, 0, C);
  const std::int64_t c_hi = std::clamp<std::int64_t>(src.shape[1] - o1, c_lo, C);
  for (int i = 0; i < R; ++i) {
    value_t<D>* out = t.v()[i];
    const std::int64_t r = o0 + i;
    if (r < 0 || r >= src.shape[0]) {
      std::fill(out, out + C, value_t<D>{});
      continue;
    }
    std::fill(out, out + c_lo, value_t<D>{});
    std::fill(out + c_hi, out + C, value_t<D>{});
    const storage_t<S>* in = src.data + r * src.strides[0] + o1 * src.strides[1];
    if constexpr (D == S) {
      if (src.strides[1] == 1) {
        decode_row<D>(in + c_lo, c_hi - c_lo, out + c_lo);
        continue;
      }
    }
    for (std::int64_t j = c_lo; j < c_hi; ++j) out[j] = convert<D, S>(decode<S>(in[j * src.strides[1]]));
  }
  return t;
}

// tile.tile_load from a 1-D view: elements [o0, o0 + C).
template <DType D, int R, int C, DType S>
inline Tile<D, R, C> tile_load(const View<S, 1>& src, std::int64_t o0) {
  static_assert(R == 1, "a 1-D source loads a 1-D tile");
  Tile<D, R, C> t;
  for (int j = 0; j < C; ++j) {
    const std::int64_t e = o0 + j;
    t.v()[0][j] = (e < 0 || e >= src.shape[0]) ? value_t<D>{} : convert<D, S>(decode<S>(src.data[e * src.strides[0]]));
  }
  return t;
}

// tile.tile_store to a 2-D view; elements past the bounds are skipped.
template <DType D, int R, int C, DType S>
inline void tile_store(const View<D, 2>& dst, std::int64_t o0, std::int64_t o1, const Tile<S, R, C>& t) {
  const std::int64_t c_lo = std::clamp<std::int64_t>(-o1, 0, C);
  const std::int64_t c_hi = std::clamp<std::int64_t>(dst.shape[1] - o1, c_lo, C);
  for (int i = 0; i < R; ++i) {
    const std::int64_t r = o0 + i;
    if (r < 0 || r >= dst.shape[0]) continue;
    storage_t<D>* out = dst.data + r * dst.strides[0] + o1 * dst.strides[1];
    for (std::int64_t j = c_lo; j < c_hi; ++j) out[j * dst.strides[1]] = encode<D, S>(t.v()[i][j], dst.overflow);
  }
}

template <DType D, int R, int C, DType S>
inline void tile_store(const View<D, 1>& dst, std::int64_t o0, const Tile<S, R, C>& t) {
  static_assert(R == 1, "a 1-D destination stores a 1-D tile");
  for (int j = 0; j < C; ++j) {
    const std::int64_t e = o0 + j;
    if (e >= 0 && e < dst.shape[0]) dst.data[e * dst.strides[0]] = encode<D, S>(t.v()[0][j], dst.overflow);
  }
}

// tile.tile_cast: each element rounded once to D.
template <DType D, DType S, int R, int C>
inline Tile<D, R, C> tile_cast(const Tile<S, R, C>& t, Overflow o, Rounding mode = Rounding::nearest_even) {
  Tile<D, R, C> r;
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < C; ++j) r.v()[i][j] = convert<D, S>(t.v()[i][j], o, mode);
  return r;
}

// tile.transpose: r[j][i] = t[i][j].
template <DType D, int R, int C>
inline Tile<D, C, R> transpose(const Tile<D, R, C>& t) {
  Tile<D, C, R> r;
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < C; ++j) r.v()[j][i] = t.v()[i][j];
  return r;
}

// ---- mma ----

// The exact value hi + lo (|lo| <= half an ulp of hi) rounded once to A:
// when hi is a midpoint of A's grid, lo breaks the tie.
template <DType A>
inline double round_exact(double hi, double lo) {
  const double r = static_cast<double>(round_to<A>(hi));
  if (lo == 0.0 || r == hi || !std::isfinite(r)) return r;
  const double other = 2.0 * hi - r;
  if (!std::isfinite(other) || other == r || static_cast<double>(round_to<A>(other)) != other ||
      (other + r) / 2.0 != hi) {
    return r;
  }
  return (lo > 0.0) == (other > r) ? other : r;
}

// acc + a * b rounded once to A (a fused multiply-add at A).
template <DType A>
inline value_t<A> fma_step(value_t<A> acc_v, double a, double b) {
  if constexpr (A == DType::fp64) {
    return std::fma(a, b, acc_v);
  } else {
    const double acc = acc_v;
    const double p = a * b;
    const double s = acc + p;
    if (!std::isfinite(s)) return round_to<A>(s);
    const double pe = std::fma(a, b, -p);
    const double bp = s - acc;
    const double e = (acc - (s - bp)) + (p - bp);
    if (pe == 0.0) return static_cast<value_t<A>>(round_exact<A>(s, e));
    const double t = e + pe;
    const double hi = s + t;
    const double bt = hi - s;
    const double lo = (s - (hi - bt)) + (t - bt);
    return static_cast<value_t<A>>(round_exact<A>(hi, lo));
  }
}

// One MR x NR block of c = cin + a x b, k increasing, accumulators in
// registers. cin and c may be the same array (each block is read into
// registers before it is written).
template <class T, int MR, int NR, int M, int N, int K>
inline void micro_block(T (&c)[M][N], const T (&cin)[M][N], const T (&a)[M][K], const T (&b)[K][N], int i, int j) {
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float> && NR % 16 == 0) {
    // _mm512_fmadd_ps rounds each a*b + c once, exactly as std::fma.
    constexpr int V = NR / 16;
    __m512 acc[MR][V];
    for (int ii = 0; ii < MR; ++ii)
      for (int v = 0; v < V; ++v) acc[ii][v] = _mm512_loadu_ps(&cin[i + ii][j + 16 * v]);
    for (int k = 0; k < K; ++k) {
      __m512 brow[V];
      for (int v = 0; v < V; ++v) brow[v] = _mm512_loadu_ps(&b[k][j + 16 * v]);
      for (int ii = 0; ii < MR; ++ii) {
        const __m512 x = _mm512_set1_ps(a[i + ii][k]);
        for (int v = 0; v < V; ++v) acc[ii][v] = _mm512_fmadd_ps(x, brow[v], acc[ii][v]);
      }
    }
    for (int ii = 0; ii < MR; ++ii)
      for (int v = 0; v < V; ++v) _mm512_storeu_ps(&c[i + ii][j + 16 * v], acc[ii][v]);
    return;
  }
#endif
#if defined(__AVX2__) && defined(__FMA__)
  if constexpr (std::is_same_v<T, float> && NR % 8 == 0) {
    // _mm256_fmadd_ps rounds each a*b + c once, exactly as std::fma.
    constexpr int V = NR / 8;
    __m256 acc[MR][V];
    for (int ii = 0; ii < MR; ++ii)
      for (int v = 0; v < V; ++v) acc[ii][v] = _mm256_loadu_ps(&cin[i + ii][j + 8 * v]);
    for (int k = 0; k < K; ++k) {
      __m256 brow[V];
      for (int v = 0; v < V; ++v) brow[v] = _mm256_loadu_ps(&b[k][j + 8 * v]);
      for (int ii = 0; ii < MR; ++ii) {
        const __m256 x = _mm256_set1_ps(a[i + ii][k]);
        for (int v = 0; v < V; ++v) acc[ii][v] = _mm256_fmadd_ps(x, brow[v], acc[ii][v]);
      }
    }
    for (int ii = 0; ii < MR; ++ii)
      for (int v = 0; v < V; ++v) _mm256_storeu_ps(&c[i + ii][j + 8 * v], acc[ii][v]);
    return;
  }
#endif
  T acc[MR][NR];
  for (int ii = 0; ii < MR; ++ii)
    for (int jj = 0; jj < NR; ++jj) acc[ii][jj] = cin[i + ii][j + jj];
  for (int k = 0; k < K; ++k) {
    const T* brow = &b[k][j];
    for (int ii = 0; ii < MR; ++ii) {
      const T x = a[i + ii][k];
      for (int jj = 0; jj < NR; ++jj) acc[ii][jj] = std::fma(x, brow[jj], acc[ii][jj]);
    }
  }
  for (int ii = 0; ii < MR; ++ii)
    for (int jj = 0; jj < NR; ++jj) c[i + ii][j + jj] = acc[ii][jj];
}

// Columns [j0, N) of rows [i, i + R): full NR-wide blocks, then the edge
// columns element by element.
template <class T, int R, int NR, int M, int N, int K>
inline void row_panel(T (&c)[M][N], const T (&cin)[M][N], const T (&a)[M][K], const T (&b)[K][N], int i) {
  int j = 0;
  for (; j + NR <= N; j += NR) micro_block<T, R, NR>(c, cin, a, b, i, j);
  if constexpr (NR > 16 && std::is_same_v<T, float>) {
    // A 16-wide block for the rest of the columns where it fits.
    if (j + 16 <= N) {
      micro_block<T, R, 16>(c, cin, a, b, i, j);
      j += 16;
    }
  }
  for (; j < N; ++j)
    for (int ii = 0; ii < R; ++ii) {
      T x = cin[i + ii][j];
      for (int k = 0; k < K; ++k) x = std::fma(a[i + ii][k], b[k][j], x);
      c[i + ii][j] = x;
    }
}

// Register-blocked c = cin + a x b for float or double values with native
// fma: panels of MR rows, then one narrower panel for the remaining rows.
template <class T, int M, int N, int K>
inline void mma_native(T (&c)[M][N], const T (&cin)[M][N], const T (&a)[M][K], const T (&b)[K][N]) {
  // fp32: 8 x 32 = 16 AVX-512 accumulators (of 32 registers; per k, 2 row
  // loads and 8 broadcasts feed 16 FMAs), or 6 x 16 = 12 AVX2 accumulators
  // (of 16).
#if defined(__AVX512F__)
  constexpr int kFloatWidth = 32;
  constexpr int kFloatRows = 8;
#else
  constexpr int kFloatWidth = 16;
  constexpr int kFloatRows = 6;
#endif
  constexpr int MR = std::is_same_v<T, float> ? kFloatRows : 4;
  constexpr int NR = std::is_same_v<T, float> ? kFloatWidth : 64 / static_cast<int>(sizeof(T));
  int i = 0;
  for (; i + MR <= M; i += MR) row_panel<T, MR, NR>(c, cin, a, b, i);
  switch (M - i) {
    case 7: row_panel<T, 7, NR>(c, cin, a, b, i); break;
    case 6: row_panel<T, 6, NR>(c, cin, a, b, i); break;
    case 5: row_panel<T, 5, NR>(c, cin, a, b, i); break;
    case 4: row_panel<T, 4, NR>(c, cin, a, b, i); break;
    case 3: row_panel<T, 3, NR>(c, cin, a, b, i); break;
    case 2: row_panel<T, 2, NR>(c, cin, a, b, i); break;
    case 1: row_panel<T, 1, NR>(c, cin, a, b, i); break;
    default: break;
  }
}

// Integer products accumulate exactly in 64 bits; a result outside A's range faults.
template <DType A, DType TA, DType TB, int M, int N, int K>
inline void mma_int(Tile<A, M, N>& acc, const Tile<TA, M, K>& a, const Tile<TB, K, N>& b) {
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      std::int64_t x = acc.v()[i][j];
      for (int k = 0; k < K; ++k) {
        std::int64_t p;
        if (__builtin_mul_overflow(static_cast<std::int64_t>(a.v()[i][k]), static_cast<std::int64_t>(b.v()[k][j]),
                                   &p) ||
            __builtin_add_overflow(x, p, &x) || x < int_min<A>() || x > int_max<A>()) {
          fail(kFaultArgument, "tile.mma: integer accumulation overflowed its accumulator at row %d, column %d", i, j);
        }
      }
      acc.v()[i][j] = x;
    }
}

// tile.mma: acc + a x b, accumulated at A.
template <DType A, DType TA, DType TB, int M, int N, int K>
inline Tile<A, M, N> mma(const Tile<TA, M, K>& a, const Tile<TB, K, N>& b, const Tile<A, M, N>& acc_in) {
  Tile<A, M, N> acc;  // returned by NRVO
  constexpr bool small_operands = (TA != DType::fp64) && (TB != DType::fp64);
  if constexpr (!Traits<A>::is_float) {
    acc = acc_in;
    mma_int<A>(acc, a, b);
  } else if constexpr (A == DType::fp32 && small_operands && Traits<TA>::is_float && Traits<TB>::is_float) {
    // The micro-kernel reads acc_in and writes acc: no copy of the accumulator.
    mma_native<float, M, N, K>(acc.v(), acc_in.v(), a.v(), b.v());
  } else if constexpr (A == DType::fp64 && TA == DType::fp64 && TB == DType::fp64) {
    mma_native<double, M, N, K>(acc.v(), acc_in.v(), a.v(), b.v());
  } else {
    acc = acc_in;
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j) {
        value_t<A> x = acc.v()[i][j];
        for (int k = 0; k < K; ++k) {
          x = fma_step<A>(x, static_cast<double>(a.v()[i][k]), static_cast<double>(b.v()[k][j]));
        }
        acc.v()[i][j] = x;
      }
  }
  return acc;
}

// tile.tile_add: x + y elementwise, rounded once to D.
template <DType D, int R, int C>
inline Tile<D, R, C> tile_add(const Tile<D, R, C>& x, const Tile<D, R, C>& y) {
  Tile<D, R, C> r;
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < C; ++j) {
      if constexpr (D == DType::fp32 || D == DType::fp64) {
        r.v()[i][j] = x.v()[i][j] + y.v()[i][j];
      } else {
        r.v()[i][j] = fma_step<D>(x.v()[i][j], 1.0, static_cast<double>(y.v()[i][j]));
      }
    }
  return r;
}

// ---- tile arithmetic (tile.tile_full, tile_binary, tile_unary, tile_reduce,
// tile_causal_fill): fp32 or fp64 tiles, each result rounded once. ----

template <DType D, int R, int C>
inline Tile<D, R, C> tile_full(value_t<D> v) {
  Tile<D, R, C> t;
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < C; ++j) t.v()[i][j] = v;
  return t;
}

enum class TileFn { add, sub, mul, div, max, min, exp, log, neg, sum };

template <TileFn F, class T>
inline T tile_fn(T x, T y) {
  if constexpr (F == TileFn::add) return x + y;
  if constexpr (F == TileFn::sub) return x - y;
  if constexpr (F == TileFn::mul) return x * y;
  if constexpr (F == TileFn::div) return x / y;
  if constexpr (F == TileFn::max) return static_cast<T>(nan_max(x, y));
  if constexpr (F == TileFn::min) return static_cast<T>(nan_min(x, y));
}

// x (R1 x C1) op y (R2 x C2): a dim of size 1 broadcasts.
template <TileFn F, DType D, int R1, int C1, int R2, int C2>
inline Tile<D, (R1 > R2 ? R1 : R2), (C1 > C2 ? C1 : C2)> tile_binary(const Tile<D, R1, C1>& x,
                                                                     const Tile<D, R2, C2>& y) {
  constexpr int R = R1 > R2 ? R1 : R2, C = C1 > C2 ? C1 : C2;
  Tile<D, R, C> r;
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < C; ++j) {
      r.v()[i][j] = tile_fn<F>(x.v()[R1 == 1 ? 0 : i][C1 == 1 ? 0 : j], y.v()[R2 == 1 ? 0 : i][C2 == 1 ? 0 : j]);
    }
  return r;
}

// exp and log are Tessera's own (the lane ops' functions): the same bits as a lane's exp.
template <TileFn F, DType D, int R, int C>
inline Tile<D, R, C> tile_unary(const Tile<D, R, C>& x) {
  using T = value_t<D>;
  Tile<D, R, C> r;
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < C; ++j) {
      const T v = x.v()[i][j];
      if constexpr (F == TileFn::exp) r.v()[i][j] = static_cast<T>(tessera::elementary::exp(static_cast<double>(v)));
      if constexpr (F == TileFn::log) r.v()[i][j] = static_cast<T>(tessera::elementary::log(static_cast<double>(v)));
      if constexpr (F == TileFn::neg) r.v()[i][j] = -v;
    }
  return r;
}

// The max or sum of each row (AXIS = 1) or column (AXIS = 0), index increasing.
template <TileFn F, int AXIS, DType D, int R, int C>
inline Tile<D, AXIS == 1 ? R : 1, AXIS == 1 ? 1 : C> tile_reduce(const Tile<D, R, C>& x) {
  using T = value_t<D>;
  Tile<D, AXIS == 1 ? R : 1, AXIS == 1 ? 1 : C> r;
  constexpr int outer = AXIS == 1 ? R : C, inner = AXIS == 1 ? C : R;
  for (int o = 0; o < outer; ++o) {
    T acc = F == TileFn::max ? -std::numeric_limits<T>::infinity() : T(0);
    for (int k = 0; k < inner; ++k) {
      const T v = AXIS == 1 ? x.v()[o][k] : x.v()[k][o];
      acc = F == TileFn::max ? static_cast<T>(nan_max(acc, v)) : acc + v;
    }
    (AXIS == 1 ? r.v()[o][0] : r.v()[0][o]) = acc;
  }
  return r;
}

// Elements (r, c) with col0 + c > row0 + r + diag become `fill`.
template <DType D, int R, int C>
inline Tile<D, R, C> tile_causal_fill(const Tile<D, R, C>& x, std::int64_t row0, std::int64_t col0, std::int64_t diag,
                                      value_t<D> fill) {
  Tile<D, R, C> r = x;
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < C; ++j) {
      if (col0 + j > row0 + i + diag) r.v()[i][j] = fill;
    }
  return r;
}

// ---- reduce_sum ----

// The accumulation type of reduce_sum: fp64 for fp64, fp32 for other floats,
// int64 for integers and bool.
template <DType D>
using reduce_t =
    std::conditional_t<D == DType::fp64, double, std::conditional_t<Traits<D>::is_float, float, std::int64_t>>;

// Sums the buffer in row-major order with a fixed pairwise tree: at stride
// s = 1, 2, 4, ... element i (a multiple of 2s) adds element i + s. Every
// addition rounds once to the accumulation type.
template <DType D, int R>
inline reduce_t<D> reduce_sum(const View<D, R>& v) {
  thread_local std::vector<reduce_t<D>> work;
  std::int64_t n = 1;
  for (int d = 0; d < R; ++d) n *= v.shape[d];
  if (n == 0) return reduce_t<D>{};
  work.resize(static_cast<std::size_t>(n));
  std::int64_t e = 0;
  if constexpr (R == 1) {
    for (std::int64_t i = 0; i < v.shape[0]; ++i)
      work[e++] = static_cast<reduce_t<D>>(decode<D>(v.data[i * v.strides[0]]));
  } else {
    for (std::int64_t i = 0; i < v.shape[0]; ++i)
      for (std::int64_t j = 0; j < v.shape[1]; ++j)
        work[e++] = static_cast<reduce_t<D>>(decode<D>(v.data[i * v.strides[0] + j * v.strides[1]]));
  }
  for (std::int64_t s = 1; s < n; s *= 2) {
    for (std::int64_t i = 0; i + s < n; i += 2 * s) {
      if constexpr (Traits<D>::is_float) {
        work[i] = work[i] + work[i + s];
      } else {
        work[i] = iadd<DType::int64>(work[i], work[i + s]);
      }
    }
  }
  return work[0];
}

}  // namespace tessera_cpu
