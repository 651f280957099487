// Device tile library, part 1: the launch ABI, lane numerics, buffer views,
// bounds-checked element access, faults, cp.async and reduce_sum. Generated
// CUDA kernels (src/backends/cuda/codegen/) include "tessera/tile.cuh"; NVRTC
// compiles it without host headers (embedded in libtessera, like numerics.cuh).
//
// Numerics equal the CPU backend's (src/backends/cpu/runtime/numerics.h): a
// lane op on dtype T computes exactly (or in double) and rounds once to T;
// fp32 and fp64 use the hardware's correctly rounded __fadd_rn/__dadd_rn...
// (generated code is compiled with --fmad=false, so nothing is contracted).
// Integer arithmetic saturates at the dtype's range; faults (an element index
// out of bounds, an integer division by zero) are recorded in the launch's
// Fault record and the faulting access is skipped; the launcher raises them.
#pragma once

#include "tessera/numerics.cuh"
#include "tessera/numerics/elementary.h"
#include "tessera/numerics/narrow_elementary.h"
#include "tessera/numerics/trigonometric.h"

namespace tsr {

typedef long long i64;
typedef unsigned long long u64;
typedef unsigned int u32;
using namespace tessera::device;

// ---- launch ABI (mirrored by src/backends/cuda/codegen/launch_abi.h) ----

constexpr int kMaxRank = 8;
constexpr int kMaxParams = 16;
constexpr int kMaxSymbols = 16;
struct Buf {
  void* data;
  i64 shape[kMaxRank];
  i64 strides[kMaxRank];
};
struct Fault {
  int code;   // 0 none, 1 index out of range, 2 invalid argument
  int kind;   // 0 load, 1 store, 2 division by zero, 3 negative exponent, 4 loop step, 5 check_range
  int param;  // parameter index (>= 0) or -1 - shared buffer number
  int dim;
  i64 index;
  i64 extent;
  i64 group;
};
// A tensor map for the bulk tensor copy engine (TMA), encoded on the host
// (the driver's 128-byte CUtensorMap), read by the device from the kernel
// parameter (kernels that use one take Params as __grid_constant__).
constexpr int kMaxTmaMaps = 4;
struct alignas(64) TmaMap {
  unsigned long long bits[16];
};
struct Params {
  Buf buf[kMaxParams];
  double real[kMaxParams];
  i64 integer[kMaxParams];
  i64 sym[kMaxSymbols];
  i64 grid;
  Fault* fault;
  TmaMap tma[kMaxTmaMaps];
};

__device__ __forceinline__ void fault(Fault* f, int code, int kind, int param, int dim, i64 index, i64 extent,
                                      i64 group) {
  if (f == nullptr) return;
  if (atomicCAS(&f->code, 0, -1) == 0) {  // the first fault is reported
    f->kind = kind;
    f->param = param;
    f->dim = dim;
    f->index = index;
    f->extent = extent;
    f->group = group;
    __threadfence();
    atomicExch(&f->code, code);
  }
}

// ---- storage and value types by dtype code ----

template <int D>
struct Traits;
#define TSR_TRAITS(D, S, V, F)          \
  template <>                           \
  struct Traits<D> {                    \
    typedef S storage;                  \
    typedef V value;                    \
    static constexpr bool is_float = F; \
  };
TSR_TRAITS(kFp64, double, double, true)
TSR_TRAITS(kFp32, float, float, true)
TSR_TRAITS(kFp16, unsigned short, float, true)
TSR_TRAITS(kBf16, unsigned short, float, true)
TSR_TRAITS(kFp8E4m3, unsigned char, float, true)
TSR_TRAITS(kFp8E5m2, unsigned char, float, true)
TSR_TRAITS(kFp6E2m3, unsigned char, float, true)
TSR_TRAITS(kFp6E3m2, unsigned char, float, true)
TSR_TRAITS(kFp4E2m1, unsigned char, float, true)
TSR_TRAITS(kE8m0, unsigned char, float, true)
TSR_TRAITS(kInt4, unsigned char, i64, false)
TSR_TRAITS(kInt8, signed char, i64, false)
TSR_TRAITS(kInt16, short, i64, false)
TSR_TRAITS(kInt32, int, i64, false)
TSR_TRAITS(kInt64, i64, i64, false)
TSR_TRAITS(kUint8, unsigned char, i64, false)
TSR_TRAITS(kBool, unsigned char, bool, false)
#undef TSR_TRAITS

template <int D>
__device__ __forceinline__ i64 int_min() {
  if (D == kUint8) return 0;
  const int b = integer_bits(D);
  return b >= 64 ? (i64)(1ull << 63) : -(i64)(1ull << (b - 1));
}
template <int D>
__device__ __forceinline__ i64 int_max() {
  if (D == kUint8) return 255;
  const int b = integer_bits(D);
  return b >= 64 ? (i64)((1ull << 63) - 1) : (i64)((1ull << (b - 1)) - 1);
}
template <int D>
__device__ __forceinline__ i64 saturate(i64 v) {
  return v < int_min<D>() ? int_min<D>() : (v > int_max<D>() ? int_max<D>() : v);
}

// An encoding of D -> its value (exact).
template <int D>
__device__ __forceinline__ typename Traits<D>::value decode_s(typename Traits<D>::storage s) {
  if constexpr (D == kFp64 || D == kFp32) {
    return s;
  } else if constexpr (D == kBool) {
    return s != 0;
  } else if constexpr (!Traits<D>::is_float) {
    return (i64)s;
  } else {
    return decode_f32((u64)s, D);
  }
}

// double -> value of D, rounded once (nearest even or toward zero, overflow rule `ov`).
template <int D>
__device__ __forceinline__ typename Traits<D>::value round_to(double x, int ov, int rounding = kNearestEven) {
  if constexpr (D == kFp64) {
    return x;
  } else if constexpr (D == kBool) {
    return x != 0.0;
  } else if constexpr (D == kFp32) {
    if (ov == kInfNan && rounding == kNearestEven) return __double2float_rn(x);
    return __uint_as_float((u32)encode(x, D, rounding, ov));
  } else if constexpr (Traits<D>::is_float) {
    return decode_f32(encode(x, D, rounding, ov), D);
  } else {
    // An int64 at nearest even from a double inside its range: one
    // conversion instruction (an exponent shared through an fp64 slot of
    // shared memory took the generic encode's ~40 instructions).
    if constexpr (D == kInt64) {
      if (rounding == kNearestEven && fabs(x) < 0x1p62) return __double2ll_rn(x);
    }
    return (i64)decode(encode(x, D, rounding, kInfNan), D);
  }
}

// double -> value of D rounded stochastically with the bits Philox(seed,
// index) draws (tile.round_stochastic), as the reference encodes element `index`.
template <int D>
__device__ __forceinline__ typename Traits<D>::value round_stochastic(double x, u64 seed, i64 index, int ov) {
  if constexpr (D == kFp64) {
    return x;
  } else {
    const u64 bits = encode(x, D, kStochastic, ov, seed, (u64)index);
    if constexpr (D == kFp32) {
      return __uint_as_float((u32)bits);
    } else if constexpr (Traits<D>::is_float) {
      return decode_f32(bits, D);
    } else {
      return (i64)decode(bits, D);
    }
  }
}

// A value of dtype S as dtype D (tile.cast): one rounding.
template <int D, int S>
__device__ __forceinline__ typename Traits<D>::value convert(typename Traits<S>::value v, int ov,
                                                            int rounding = kNearestEven) {
  if constexpr (D == S) {
    return v;
  } else if constexpr (!Traits<D>::is_float && !Traits<S>::is_float && D != kBool) {
    return saturate<D>((i64)v);
  } else {
    if constexpr (S == kFp32 && Traits<D>::is_float && D != kFp64) {
      // float32 -> a narrower float at nearest even: the float32 fast path,
      // which gives encode()'s bits for every float (the value is exact in
      // double, so rounding it from float or from double is one rounding).
      // The generic encode from double was most of an elementwise kernel's
      // instructions: every bf16 result rounds through here.
      if (rounding == kNearestEven) return decode_f32(encode_f32_nearest_even(v, D, ov == kSaturate), D);
    }
    if constexpr (D == kFp32 && Traits<S>::is_float && S != kFp64) {
      // A narrower float's value is an fp32 value: no rounding, and no
      // trip through double (two F2F per operand of every bf16 add). Only a
      // saturating policy changes anything (infinities to the largest value).
      if (ov != kSaturate) return v;
    }
    return round_to<D>((double)v, ov, rounding);
  }
}

// A value of D -> its encoding (the value is already representable in D).
template <int D>
__device__ __forceinline__ typename Traits<D>::storage encode_v(typename Traits<D>::value v, int ov) {
  if constexpr (D == kFp64) {
    return v;
  } else if constexpr (D == kFp32) {
    if (ov == kSaturate && isinf(v)) return round_to<D>((double)v, ov);
    return v;
  } else if constexpr (D == kBool) {
    return v ? 1 : 0;
  } else if constexpr (!Traits<D>::is_float) {
    return (typename Traits<D>::storage)saturate<D>(v);
  } else {
    return (typename Traits<D>::storage)encode_f32_nearest_even(v, D, ov == kSaturate);
  }
}

// encode_v for a lane value, which its dtype already holds exactly (every
// op making a lane<bf16> rounds to bf16): a bf16 value is the top half of
// its float, NaN mapped as encode_f32_nearest_even maps it, so the store is
// a shift and a NaN test where encode_v converts again. A saturating store
// keeps encode_v (an infinity becomes the largest value).
template <int D>
__device__ __forceinline__ typename Traits<D>::storage encode_lane(typename Traits<D>::value v, int ov) {
  if constexpr (D == kBf16) {
    if (ov != kSaturate) return (unsigned short)with_signed_quiet_nan(v, (unsigned short)(__float_as_uint(v) >> 16), 0x7FC0u);
  }
  return encode_v<D>(v, ov);
}

// ---- lane arithmetic ----

__device__ __forceinline__ double nan_min(double a, double b) {
  return (isnan(a) || isnan(b)) ? __longlong_as_double(0x7FF8000000000000ll) : (a < b ? a : b);
}
__device__ __forceinline__ double nan_max(double a, double b) {
  return (isnan(a) || isnan(b)) ? __longlong_as_double(0x7FF8000000000000ll) : (a > b ? a : b);
}
// tile.code: the code a store of x (a value of format `dtype`, at most 16
// bits) writes; x is exact in it, so only a NaN changes (to the quiet NaN).
__device__ __forceinline__ i64 storage_code(float x, int dtype) { return (i64)encode_f32_nearest_even(x, dtype, false); }
__device__ __forceinline__ i64 frexp_exponent(double x) {
  // A normal x: its biased exponent, without frexp's subnormal handling.
  const i64 biased = (i64)((__double_as_longlong(x) >> 52) & 0x7ff);
  if (biased != 0 && biased != 0x7ff) return biased - 1022;
  if (!isfinite(x)) return 0;
  int e = 0;
  frexp(x, &e);
  return e;
}
__device__ __forceinline__ int clamp_exponent(i64 e) {
  return (int)(e < -4000 ? -4000 : (e > 4000 ? 4000 : e));
}
// ldexp(1.0, e): 2^e from its bits (0 below the subnormals, infinity above).
__device__ __forceinline__ double pow2_f64(i64 e) {
  if (e > 1023) return __longlong_as_double(0x7FF0000000000000ll);
  if (e >= -1022) return __longlong_as_double((e + 1023) << 52);
  if (e >= -1074) return __longlong_as_double(1ll << (e + 1074));
  return 0.0;
}
// ldexp(x, e) of a double: where 2^e is a normal double, one multiply (the
// exact product x 2^e rounded once, which is ldexp's result, subnormal or
// infinite ones included); CUDA's ldexp scales by several multiplies.
__device__ __forceinline__ double ldexp_f64(double x, i64 e) {
  if (e >= -1022 && e <= 1023) return x * pow2_f64(e);
  return ldexp(x, clamp_exponent(e));
}
constexpr i64 kI64Max = (i64)((1ull << 63) - 1);
constexpr i64 kI64Min = (i64)(1ull << 63);
template <int D>
__device__ __forceinline__ i64 iadd(i64 a, i64 b) {
  const i64 r = (i64)((u64)a + (u64)b);
  if (((a ^ r) & (b ^ r)) < 0) return saturate<D>(b > 0 ? kI64Max : kI64Min);
  return saturate<D>(r);
}
template <int D>
__device__ __forceinline__ i64 isub(i64 a, i64 b) {
  const i64 r = (i64)((u64)a - (u64)b);
  if (((a ^ b) & (a ^ r)) < 0) return saturate<D>(b < 0 ? kI64Max : kI64Min);
  return saturate<D>(r);
}
template <int D>
__device__ __forceinline__ i64 imul(i64 a, i64 b) {
  const i64 lo = (i64)((u64)a * (u64)b);
  const i64 hi = __mul64hi(a, b);
  if (hi != (lo >> 63)) return saturate<D>(((a < 0) != (b < 0)) ? kI64Min : kI64Max);
  return saturate<D>(lo);
}
// Division faults leave 0 and record the fault.
struct Where {
  Fault* fault;
  i64 group;
  // The first out-of-range access of this thread (kind 0 load, 1 store),
  // held here by selects rather than recorded at once behind a branch: a
  // branch per access split a loop's loads into basic blocks of their own,
  // each add waiting for its load before the next load was issued. The
  // emitted kernel calls report() when it ends.
  mutable bool bad = false;
  mutable int bad_kind = 0, bad_param = 0, bad_dim = 0;
  mutable i64 bad_index = 0, bad_extent = 0;
  __device__ __forceinline__ void note(bool ok, int kind, int param, int dim, i64 index, i64 extent) const {
    const bool first = !ok && !bad;
    bad_kind = first ? kind : bad_kind;
    bad_param = first ? param : bad_param;
    bad_dim = first ? dim : bad_dim;
    bad_index = first ? index : bad_index;
    bad_extent = first ? extent : bad_extent;
    bad = bad || !ok;
  }
  __device__ __forceinline__ void report() const {
    if (bad) tsr::fault(fault, 1, bad_kind, bad_param, bad_dim, bad_index, bad_extent, group);
  }
};
__device__ __forceinline__ bool divisor_ok(i64 b, const Where& w) {
  if (b != 0) return true;
  fault(w.fault, 2, 2, -1, 0, 0, 0, w.group);
  return false;
}
// tile.check_range: x, or a fault record (kind 5) holding x and hi.
__device__ __forceinline__ i64 check_range(i64 x, i64 lo, i64 hi, const Where& w) {
  if (x < lo || x > hi) fault(w.fault, 2, 5, -1, 0, x, hi, w.group);
  return x;
}
template <int D>
__device__ __forceinline__ i64 idiv(i64 a, i64 b, const Where& w) {
  if (!divisor_ok(b, w)) return 0;
  if (b == -1) return isub<D>(0, a);
  return saturate<D>(a / b);
}
__device__ __forceinline__ i64 irem(i64 a, i64 b, const Where& w) {
  if (!divisor_ok(b, w)) return 0;
  if (b == -1) return 0;
  return a % b;
}
template <int D>
__device__ __forceinline__ i64 ifloordiv(i64 a, i64 b, const Where& w) {
  if (!divisor_ok(b, w)) return 0;
  if (b == -1) return isub<D>(0, a);
  i64 q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return saturate<D>(q);
}
template <int D>
__device__ __forceinline__ i64 ipow(i64 a, i64 e, const Where& w) {
  if (e < 0) {
    fault(w.fault, 2, 3, -1, 0, e, 0, w.group);
    return 0;
  }
  i64 r = 1;
  while (e > 0) {
    if (e & 1) r = imul<kInt64>(r, a);
    e >>= 1;
    if (e > 0) a = imul<kInt64>(a, a);
  }
  return saturate<D>(r);
}

// ---- buffer views ----

// A global buffer (kernel parameter): strides in elements.
template <int D, int R>
struct GView {
  typedef typename Traits<D>::storage S;
  S* data;
  i64 shape[R];
  i64 strides[R];
  int param;
  __device__ __forceinline__ i64 rows() const { return R == 2 ? shape[0] : 1; }
  __device__ __forceinline__ i64 cols() const { return shape[R - 1]; }
  // Element (r, c) of a 2-D buffer, or element c of a 1-D one.
  __device__ __forceinline__ S* at(i64 r, i64 c) const {
    return R == 2 ? data + r * strides[0] + c * strides[1] : data + c * strides[0];
  }
};
template <int D, int R>
__device__ __forceinline__ GView<D, R> gview(const Buf& b, int param) {
  GView<D, R> v;
  v.data = (typename Traits<D>::storage*)b.data;
  for (int i = 0; i < R; ++i) {
    v.shape[i] = b.shape[i];
    v.strides[i] = b.strides[i];
  }
  v.param = param;
  return v;
}

// A buffer the kernel was compiled to read with innermost stride 1
// (KernelCompileOptions::contiguous_buffers; launch() checks it): the stride
// is the constant 1, so offsets in the innermost index fold into the
// addresses of the accesses instead of a 64-bit multiply-add each.
template <int D, int R>
__device__ __forceinline__ GView<D, R> gview_unit(const Buf& b, int param) {
  GView<D, R> v = gview<D, R>(b, param);
  if constexpr (R > 0) v.strides[R - 1] = 1;
  return v;
}

// A shared buffer of ROWS x COLS (1-D: ROWS = 1) in dynamic shared memory.
// The xor swizzle permutes 16-byte chunks within a row (chunk ^= row & MASK),
// so 16-byte copies and ldmatrix rows stay contiguous while the rows of a
// tile fall into different banks.
// MASK = kPanel128 is the same swizzle in the layout the Hopper tensor cores
// (wgmma) read through shared-memory descriptors with 128-byte swizzling:
// the columns are cut into panels 128 bytes wide, each panel is stored whole
// (ROWS rows of 128 bytes, panel after panel), and within a panel chunk ^=
// row & 7. With the buffer 1024-byte aligned this is the hardware's pattern
// (address bits [4:6] ^= bits [7:9]). Needs ROWS % 8 == 0 and rows that are
// whole panels; the emitter picks it only then.
constexpr int kPanel128 = -128;
template <int D, int ROWS, int COLS, int MASK, int RANK>
struct SView {
  typedef typename Traits<D>::storage S;
  static constexpr int kDType = D;
  static constexpr int kRows = ROWS;
  static constexpr int kCols = COLS;
  static constexpr bool kTransposed = false;  // TView (tile_mma.cuh) reads a buffer transposed
  static constexpr int kPerChunk = 16 / (int)sizeof(S) > 0 ? 16 / (int)sizeof(S) : 1;
  static constexpr int kPanel = 128 / (int)sizeof(S);  // elements per panel row (kPanel128)
  S* data;
  int id;  // -1 - allocation number, for fault messages
  __device__ __forceinline__ S* at(i64 r, i64 c) const {
    if constexpr (MASK == kPanel128) {
      const int ri = (int)r, ci = (int)c;
      const int in = ci % kPanel;
      const int chunk = (in / kPerChunk) ^ (ri & 7);
      return data + (ci / kPanel) * (ROWS * kPanel) + ri * kPanel + chunk * kPerChunk + in % kPerChunk;
    } else if constexpr (MASK == 0) {
      return data + r * COLS + c;
    } else {
      const int chunk = (int)(c / kPerChunk) ^ ((int)r & MASK);
      return data + r * COLS + chunk * kPerChunk + c % kPerChunk;
    }
  }
};

// ---- element access (bounds-checked; faults skip the access) ----

// Whether idx lies inside `extent` in every dim; else the first dim that
// does not is noted in w (Where::note) for the report at the kernel's end.
template <int R>
__device__ __forceinline__ bool in_bounds(const i64 (&idx)[R], const i64* extent, int kind, int param,
                                          const Where& w) {
  bool ok = true;
  int dim = 0;
  i64 index = 0, ext = 0;
#pragma unroll
  for (int d = 0; d < R; ++d) {
    const bool in = idx[d] >= 0 && idx[d] < extent[d];
    const bool first = ok && !in;
    dim = first ? d : dim;
    index = first ? idx[d] : index;
    ext = first ? extent[d] : ext;
    ok = ok && in;
  }
  w.note(ok, kind, param, dim, index, ext);
  return ok;
}

template <int D, int R>
__device__ __forceinline__ typename Traits<D>::value load(const GView<D, R>& v, const i64 (&idx)[R], const Where& w) {
  i64 off = 0;
#pragma unroll
  for (int d = 0; d < R; ++d) off += idx[d] * v.strides[d];
  return in_bounds(idx, v.shape, 0, v.param, w) ? decode_s<D>(v.data[off]) : typename Traits<D>::value(0);
}
template <int D, int R>
__device__ __forceinline__ void store(const GView<D, R>& v, const i64 (&idx)[R], typename Traits<D>::value x, int ov,
                                      const Where& w) {
  i64 off = 0;
#pragma unroll
  for (int d = 0; d < R; ++d) off += idx[d] * v.strides[d];
  if (in_bounds(idx, v.shape, 1, v.param, w)) v.data[off] = encode_lane<D>(x, ov);
}
// ---- lane vectors (tile.load_vector, tile.store_vector) ----

// A run of V elements [i, i + V) moves in the widest words (at most 16
// bytes) that divide its bytes, when the run lies inside a contiguous view
// and starts at such a word: one check for the run instead of one per
// element. Otherwise each element takes the checked path above, which
// faults (and reads zero / skips the store) element by element.
template <int BYTES>
struct VectorWord;
template <>
struct VectorWord<16> { typedef uint4 type; };
template <>
struct VectorWord<8> { typedef uint2 type; };
template <>
struct VectorWord<4> { typedef unsigned type; };
template <>
struct VectorWord<2> { typedef unsigned short type; };
template <>
struct VectorWord<1> { typedef unsigned char type; };
template <int D, int V>
struct VectorRun {
  typedef typename Traits<D>::storage S;
  static constexpr int kBytes = V * (int)sizeof(S);
  static constexpr int kWord = kBytes % 16 == 0 ? 16 : kBytes % 8 == 0 ? 8 : kBytes % 4 == 0 ? 4 : kBytes % 2 == 0 ? 2 : 1;
  static constexpr int kWords = kBytes / kWord;
  typedef typename VectorWord<kWord>::type W;
  union Bits {
    W words[kWords];
    S elems[V];
  };
  __device__ __forceinline__ static bool whole(const GView<D, 1>& v, i64 i) {
    return i >= 0 && i <= v.shape[0] - V && v.strides[0] == 1 && ((unsigned long long)(v.data + i) % kWord) == 0;
  }
};
// A run's codes as loaded (tile.load_vector): its elements decode where
// they are used. Decoded inside the load (or right after its whole-run
// test's branch joined), each run's data was waited for before the next
// run's test and load, so a lane's runs loaded ahead were in flight one at
// a time; as codes, nothing between consecutive loads uses their data.
template <int D, int V>
struct LoadedRun {
  typename VectorRun<D, V>::Bits bits;
  __device__ __forceinline__ typename Traits<D>::value operator[](int k) const { return decode_s<D>(bits.elems[k]); }
};
// The aligned forms of a run's load and stores: the run is in bounds (its
// template proves it: `in_bounds`) and the buffer contiguous and 16-byte
// aligned (the kernel's launch checks it: CompiledKernel::aligned_buffers),
// and a run of V elements starts at a multiple of V, so its words move
// unchecked, with no per-element fallback beside them.
template <int V, int D>
__device__ __forceinline__ LoadedRun<D, V> load_vector_aligned(const GView<D, 1>& v, i64 i) {
  typedef VectorRun<D, V> Run;
  LoadedRun<D, V> out;
  const typename Run::W* src = reinterpret_cast<const typename Run::W*>(v.data + i);
#pragma unroll
  for (int k = 0; k < Run::kWords; ++k) out.bits.words[k] = src[k];
  return out;
}
template <int V, int D>
__device__ __forceinline__ LoadedRun<D, V> load_vector(const GView<D, 1>& v, i64 i, const Where& w) {
  typedef VectorRun<D, V> Run;
  LoadedRun<D, V> out;
  if (Run::whole(v, i)) {
    out = load_vector_aligned<V>(v, i);
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const i64 idx[1] = {i + k};
      // The element's code, or zero's where it faults (the checked load's value).
      out.bits.elems[k] = in_bounds(idx, v.shape, 0, v.param, w) ? v.data[(i + k) * v.strides[0]] : typename Run::S();
    }
  }
  return out;
}
// tile.prefetch {bulk}: elements [start, start + count) of a contiguous 1-D
// buffer, clipped to the buffer and to 16-byte boundaries, fetched into L2
// by one bulk request (sm_90; a hint: nothing elsewhere, nothing for an
// empty or strided range). Reads nothing into the thread and never faults.
template <int D>
__device__ __forceinline__ void prefetch_l2(const GView<D, 1>& v, i64 start, i64 count) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const i64 lo = start < 0 ? 0 : start;
  const i64 hi = start + count > v.shape[0] ? v.shape[0] : start + count;
  if (v.strides[0] != 1 || hi <= lo) return;
  const unsigned long long first = ((unsigned long long)(v.data + lo) + 15ull) & ~15ull;
  unsigned long long last = (unsigned long long)(v.data + hi) & ~15ull;
  if (last <= first) return;
  if (last - first > (1ull << 30)) last = first + (1ull << 30);  // the request's size is 32 bits
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(first), "r"((unsigned)(last - first)) : "memory");
#else
  (void)v;
  (void)start;
  (void)count;
#endif
}
template <int V, int D>
__device__ __forceinline__ void store_vector_aligned(const GView<D, 1>& v, i64 i, const typename Traits<D>::value (&x)[V],
                                                     int ov) {
  typedef VectorRun<D, V> Run;
  typename Run::Bits bits;
#pragma unroll
  for (int k = 0; k < V; ++k) bits.elems[k] = encode_lane<D>(x[k], ov);
  typename Run::W* dst = reinterpret_cast<typename Run::W*>(v.data + i);
#pragma unroll
  for (int k = 0; k < Run::kWords; ++k) dst[k] = bits.words[k];
}
template <int V, int D>
__device__ __forceinline__ void store_vector(const GView<D, 1>& v, i64 i, const typename Traits<D>::value (&x)[V],
                                             int ov, const Where& w) {
  typedef VectorRun<D, V> Run;
  if (Run::whole(v, i)) {
    store_vector_aligned<V>(v, i, x, ov);
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const i64 idx[1] = {i + k};
      store(v, idx, x[k], ov, w);
    }
  }
}
template <int D, int RO, int CO, int M, int RANK>
__device__ __forceinline__ bool in_shared(const SView<D, RO, CO, M, RANK>& v, const i64 (&idx)[RANK], int kind,
                                          const Where& w) {
  const i64 ext[2] = {RANK == 2 ? RO : CO, CO};
  return in_bounds(idx, ext, kind, v.id, w);
}
template <int D, int RO, int CO, int M, int RANK>
__device__ __forceinline__ typename Traits<D>::value load(const SView<D, RO, CO, M, RANK>& v, const i64 (&idx)[RANK],
                                                          const Where& w) {
  if (!in_shared(v, idx, 0, w)) return typename Traits<D>::value(0);
  return decode_s<D>(*v.at(RANK == 2 ? idx[0] : 0, idx[RANK - 1]));
}
template <int D, int RO, int CO, int M, int RANK>
__device__ __forceinline__ void store(const SView<D, RO, CO, M, RANK>& v, const i64 (&idx)[RANK],
                                      typename Traits<D>::value x, int ov, const Where& w) {
  if (!in_shared(v, idx, 1, w)) return;
  *v.at(RANK == 2 ? idx[0] : 0, idx[RANK - 1]) = encode_v<D>(x, ov);
}

// ---- accesses proven in bounds (tile.load_elem / store_elem `in_bounds`) ----
// The template that built them, or an enclosing extent guard, proves the
// index inside the buffer, so no check and no fault record.
template <int D, int R>
__device__ __forceinline__ typename Traits<D>::value load_u(const GView<D, R>& v, const i64 (&idx)[R]) {
  i64 off = 0;
#pragma unroll
  for (int d = 0; d < R; ++d) off += idx[d] * v.strides[d];
  return decode_s<D>(v.data[off]);
}
template <int D, int R>
__device__ __forceinline__ void store_u(const GView<D, R>& v, const i64 (&idx)[R], typename Traits<D>::value x,
                                        int ov) {
  i64 off = 0;
#pragma unroll
  for (int d = 0; d < R; ++d) off += idx[d] * v.strides[d];
  v.data[off] = encode_lane<D>(x, ov);
}
// An encoded value stored unchecked.
template <int D, int R>
__device__ __forceinline__ void store_code_u(const GView<D, R>& v, const i64 (&idx)[R], u32 code) {
  i64 off = 0;
#pragma unroll
  for (int d = 0; d < R; ++d) off += idx[d] * v.strides[d];
  v.data[off] = (typename Traits<D>::storage)code;
}
// A float32 value rounded to nearest into D's code (bf16, fp16: infinities
// kept) and stored: tile.cast then tile.store_elem, in one step.
template <int D, int R>
__device__ __forceinline__ void store_rounded_u(const GView<D, R>& v, const i64 (&idx)[R], float x) {
  store_code_u(v, idx, encode_f32_nearest_even(x, D, false));
}
// store_rounded_u of a value its kernel proved not NaN (tile.store_elem
// `not_nan`): the rounding alone, without the NaN test and sign fix.
template <int D, int R>
__device__ __forceinline__ void store_rounded_not_nan_u(const GView<D, R>& v, const i64 (&idx)[R], float x) {
  store_code_u(v, idx, encode_f32_nearest_even_not_nan(x, D));
}
template <int D, int R>
__device__ __forceinline__ void store_rounded(const GView<D, R>& v, const i64 (&idx)[R], float x, const Where& w) {
  i64 off = 0;
#pragma unroll
  for (int d = 0; d < R; ++d) off += idx[d] * v.strides[d];
  if (in_bounds(idx, v.shape, 1, v.param, w)) v.data[off] = (typename Traits<D>::storage)encode_f32_nearest_even(x, D, false);
}
// store_vector of fp32 values rounded to the buffer's bf16/fp16 format:
// each rounded and encoded in one step (store_rounded_u's encoding; with
// NOT_NAN, a value its kernel proved not NaN, without the NaN test).
template <int V, bool NOT_NAN, int D>
__device__ __forceinline__ void store_rounded_vector_aligned(const GView<D, 1>& v, i64 i, const float (&x)[V]) {
  typedef VectorRun<D, V> Run;
  typename Run::Bits bits;
#pragma unroll
  for (int k = 0; k < V; ++k) {
    bits.elems[k] = (typename Traits<D>::storage)(NOT_NAN ? encode_f32_nearest_even_not_nan(x[k], D)
                                                          : encode_f32_nearest_even(x[k], D, false));
  }
  typename Run::W* dst = reinterpret_cast<typename Run::W*>(v.data + i);
#pragma unroll
  for (int k = 0; k < Run::kWords; ++k) dst[k] = bits.words[k];
}
template <int V, bool NOT_NAN, int D>
__device__ __forceinline__ void store_rounded_vector(const GView<D, 1>& v, i64 i, const float (&x)[V], const Where& w) {
  typedef VectorRun<D, V> Run;
  if (Run::whole(v, i)) {
    store_rounded_vector_aligned<V, NOT_NAN>(v, i, x);
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const i64 idx[1] = {i + k};
      store_rounded(v, idx, x[k], w);
    }
  }
}
template <int D, int RO, int CO, int M, int RANK>
__device__ __forceinline__ typename Traits<D>::value load_u(const SView<D, RO, CO, M, RANK>& v,
                                                            const i64 (&idx)[RANK]) {
  return decode_s<D>(*v.at(RANK == 2 ? idx[0] : 0, idx[RANK - 1]));
}
template <int D, int RO, int CO, int M, int RANK>
__device__ __forceinline__ void store_u(const SView<D, RO, CO, M, RANK>& v, const i64 (&idx)[RANK],
                                        typename Traits<D>::value x, int ov) {
  *v.at(RANK == 2 ? idx[0] : 0, idx[RANK - 1]) = encode_v<D>(x, ov);
}

// ---- cp.async: a box of a global buffer -> a shared buffer ----

__device__ __forceinline__ u32 smem_addr(const void* p) {
  return (u32)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(dst)), "l"(src));
#else
  *(uint4*)dst = *(const uint4*)src;
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

// A barrier after which the tensor cores' asynchronous reads (wgmma) see the
// shared-memory writes (ordinary stores and cp.async) the block made before
// it: each thread fences its writes into the async proxy, then the block
// synchronises. Used for tile.barrier in kernels with a wgmma tile.mma.
__device__ __forceinline__ void barrier_async() {
#if __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
  __syncthreads();
}

// Copies the box at (r0, c0) of `src` with `dst`'s shape; zeros past the
// source's bounds. Threads split the box into 16-byte chunks: a chunk fully
// inside a row of a unit-stride, 16-byte aligned source is one cp.async; a
// chunk wholly outside is zero-filled; the rest go element by element.
// One commit_group per call (per thread) makes it one copy group.
template <int D, int RO, int CO, int M, int RANK, int SR>
__device__ __forceinline__ void cp_async(const SView<D, RO, CO, M, RANK>& dst, const GView<D, SR>& src, i64 r0, i64 c0,
                                         int tid, int nt) {
  typedef typename Traits<D>::storage S;
  constexpr int E = SView<D, RO, CO, M, RANK>::kPerChunk;
  constexpr bool kChunked = (CO % E) == 0 && sizeof(S) <= 16;
  constexpr int kPerRow = kChunked ? CO / E : CO;
  const i64 rows = src.rows(), cols = src.cols();
  const bool unit = src.strides[SR - 1] == 1;
  if constexpr (kChunked && sizeof(S) <= 16) {
    // The whole box inside the source, unit stride, rows 16-byte aligned
    // (checked once): one cp.async per chunk, no per-chunk checks.
    const bool rows_aligned = SR == 1 || ((src.strides[0] * (i64)sizeof(S)) & 15) == 0;
    if (unit && rows_aligned && r0 >= 0 && r0 + RO <= rows && c0 >= 0 && c0 + CO <= cols &&
        ((reinterpret_cast<u64>(src.at(r0, c0)) & 15) == 0)) {
      constexpr int kChunks = RO * kPerRow;
#pragma unroll 4
      for (int i = 0; i < (kChunks + nt - 1) / nt; ++i) {
        const int u = i * nt + tid;
        if (kChunks % nt == 0 || u < kChunks) {
          const int r = u / kPerRow, c = (u % kPerRow) * E;
          cp_async16(dst.at(r, c), src.at(r0 + r, c0 + c));
        }
      }
      cp_async_commit();
      return;
    }
  }
  for (int u = tid; u < RO * kPerRow; u += nt) {
    const int r = u / kPerRow;
    const int j = u % kPerRow;
    const i64 gr = r0 + r;
    const int c_lo = kChunked ? j * E : j;
    const int n = kChunked ? E : 1;
    const i64 gc = c0 + c_lo;
    const bool row_in = gr >= 0 && gr < rows;
    if (kChunked && row_in && unit && gc >= 0 && gc + E <= cols &&
        ((reinterpret_cast<u64>(src.at(gr, gc)) & 15) == 0)) {
      cp_async16(dst.at(r, c_lo), src.at(gr, gc));
      continue;
    }
    for (int e = 0; e < n; ++e) {
      const i64 c = gc + e;
      *dst.at(r, c_lo + e) = (row_in && c >= 0 && c < cols) ? *src.at(gr, c) : S(0);
    }
  }
  cp_async_commit();
}

// ---- reduce_sum: one tile sums a shared buffer ----

template <int D>
struct Reduce {
  typedef typename Traits<D>::value T;
};
template <int D>
using reduce_t = typename Traits<(D == kFp64 ? kFp64 : (Traits<D>::is_float ? kFp32 : kInt64))>::value;

template <int D>
__device__ __forceinline__ reduce_t<D> radd(reduce_t<D> a, reduce_t<D> b) {
  if constexpr (D == kFp64) {
    return __dadd_rn(a, b);
  } else if constexpr (Traits<D>::is_float) {
    return __fadd_rn(a, b);
  } else {
    return iadd<kInt64>(a, b);
  }
}

// The pairwise tree of the contract over row-major order (at stride s = 1,
// 2, 4, ... element i, a multiple of 2s, adds element i + s), computed left
// to right with a stack of partial sums: equal partials at one level merge,
// and the leftovers merge right to left at the end, which is that tree.
template <int D, int RO, int CO, int M, int RANK>
__device__ __forceinline__ reduce_t<D> reduce_sum(const SView<D, RO, CO, M, RANK>& v) {
  reduce_t<D> sum[64];
  int level[64];
  int top = 0;
  for (int i = 0; i < RO * CO; ++i) {
    reduce_t<D> x = (reduce_t<D>)decode_s<D>(*v.at(i / CO, i % CO));
    int l = 0;
    while (top > 0 && level[top - 1] == l) {
      x = radd<D>(sum[top - 1], x);
      --top;
      ++l;
    }
    sum[top] = x;
    level[top] = l;
    ++top;
  }
  if (top == 0) return reduce_t<D>(0);
  reduce_t<D> x = sum[top - 1];
  for (int t = top - 2; t >= 0; --t) x = radd<D>(sum[t], x);
  return x;
}

}  // namespace tsr

#include "tessera/tile_mma.cuh"
#include "tessera/tile_tma.cuh"
