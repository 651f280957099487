// Host tile library: buffer views, element loads/stores with bounds checks, cp_async.
//
// A View is a strided window onto encodings of dtype D: a kernel's gmem
// parameter (shape and strides from the launch) or a shared buffer (row-major
// inside the group's shared arena; the xor swizzle is a bank-conflict layout
// on GPUs and has no observable effect, so the host keeps row-major order).
// Element accesses check every index against its extent and fault with a
// message naming the kernel, the buffer, the dim, the index and the extent.
// cp_async runs as a synchronous copy at its issue point: a copy's result is
// observable only after the wait + barrier that covers it (the contract's
// memory visibility rule), so completing it early changes nothing.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "tessera_cpu/abi.h"
#include "tessera_cpu/numerics.h"

namespace tessera_cpu {

template <DType D, int R>
struct View {
  storage_t<D>* data;
  std::int64_t shape[R];
  std::int64_t strides[R];
  const char* name;    // parameter or shared buffer name, for messages
  const char* kernel;  // kernel name, for messages
  Overflow overflow;   // the buffer's overflow mode for stores
};

// The view of gmem parameter `index`.
template <DType D, int R>
inline View<D, R> gmem(const LaunchArgs& a, int index, const char* name, const char* kernel, Overflow o) {
  const BufferArg& b = a.params[index].buffer;
  View<D, R> v{static_cast<storage_t<D>*>(b.data), {}, {}, name, kernel, o};
  for (int d = 0; d < R; ++d) {
    v.shape[d] = b.shape[d];
    v.strides[d] = b.strides[d];
  }
  return v;
}

// The view of gmem parameter `index` of a kernel compiled for contiguous
// buffers: its innermost stride is checked to be 1 and then is the constant
// 1, so offsets in the innermost index are affine with unit step and g++
// vectorizes lane loops over it with contiguous loads and stores.
template <DType D, int R>
inline View<D, R> gmem_unit(const LaunchArgs& a, int index, const char* name, const char* kernel, Overflow o) {
  View<D, R> v = gmem<D, R>(a, index, name, kernel, o);
  if (R > 0 && v.shape[R - 1] > 1 && v.strides[R - 1] != 1) {
    fail(kFaultArgument, "kernel '%s': buffer '%s' has innermost stride %lld; the kernel was compiled for "
         "contiguous buffers", kernel, name, static_cast<long long>(v.strides[R - 1]));
  }
  if constexpr (R > 0) v.strides[R - 1] = 1;
  return v;
}

// A row-major shared buffer of static shape at `offset` bytes into the arena.
template <DType D, int R>
inline View<D, R> smem(unsigned char* arena, std::size_t offset, const std::int64_t (&shape)[R], const char* name,
                       const char* kernel) {
  View<D, R> v{reinterpret_cast<storage_t<D>*>(arena + offset), {}, {}, name, kernel, Overflow::inf_nan};
  std::int64_t stride = 1;
  for (int d = R - 1; d >= 0; --d) {
    v.shape[d] = shape[d];
    v.strides[d] = stride;
    stride *= shape[d];
  }
  return v;
}

template <DType D, int R>
[[noreturn]] __attribute__((noinline, cold)) inline void index_fault(const View<D, R>& v, int dim, std::int64_t index,
                                                                     const char* what) {
  fail(kFaultIndex, "kernel '%s': %s index %lld out of range for dim %d of '%s' (extent %lld)", v.kernel, what,
       static_cast<long long>(index), dim, v.name, static_cast<long long>(v.shape[dim]));
}

template <DType D, int R>
inline std::int64_t element_offset(const View<D, R>& v, const std::int64_t (&idx)[R], const char* what) {
  std::int64_t off = 0;
  for (int d = 0; d < R; ++d) {
    if (static_cast<std::uint64_t>(idx[d]) >= static_cast<std::uint64_t>(v.shape[d])) index_fault(v, d, idx[d], what);
    off += idx[d] * v.strides[d];
  }
  return off;
}

// tile.check_span: start, or the fault of a load of the first element of
// [start, start + count) outside the 1-D buffer.
template <DType D>
inline std::int64_t check_span(const View<D, 1>& v, std::int64_t start, std::int64_t count) {
  const std::int64_t n = v.shape[0];
  if (start < 0 || start > n - count) [[unlikely]] index_fault(v, 0, start < 0 || start >= n ? start : n, "load");
  return start;
}

// tile.load_elem
template <DType D, int R>
inline value_t<D> load(const View<D, R>& v, const std::int64_t (&idx)[R]) {
  return decode<D>(v.data[element_offset(v, idx, "load")]);
}

// tile.store_elem: the value (of dtype S) is encoded with the buffer's overflow mode.
template <DType S, DType D, int R>
inline void store(const View<D, R>& v, const std::int64_t (&idx)[R], value_t<S> value) {
  v.data[element_offset(v, idx, "store")] = encode<D, S>(value, v.overflow);
}

// ---- branch-free accesses for vectorized lane loops ----
//
// In a lane loop whose ops cannot fault otherwise (the emitter decides), an
// access computes "in bounds" as a value instead of branching to a throw:
// `ok` is the lane's flag, cleared at its first out-of-range access. A load
// out of range reads nothing (its value is 0); a store happens only while the
// lane's flag is still set, so a lane has no side effect after its first
// fault, as when the access threw. The loop records the lowest faulting lane
// and, after it, re-runs that lane with the checked (throwing) accessors and
// stores that do not write (store_dry) to raise the same message as before.
// Written this way g++ turns the accesses into masked vector loads and
// stores.

template <DType D, int R>
inline std::int64_t masked_offset(const View<D, R>& v, const std::int64_t (&idx)[R], bool& in) {
  std::int64_t off = 0;
  in = true;
  for (int d = 0; d < R; ++d) {
    in &= static_cast<std::uint64_t>(idx[d]) < static_cast<std::uint64_t>(v.shape[d]);
    off += idx[d] * v.strides[d];
  }
  return off;
}

template <DType D, int R>
inline value_t<D> load_m(const View<D, R>& v, const std::int64_t (&idx)[R], bool& ok) {
  bool in;
  const std::int64_t off = masked_offset(v, idx, in);
  ok &= in;
  return in ? decode<D>(v.data[off]) : value_t<D>{};
}

// O is the buffer's overflow mode, known when the kernel is compiled.
template <DType S, Overflow O, DType D, int R>
inline void store_m(const View<D, R>& v, const std::int64_t (&idx)[R], value_t<S> value, bool& ok) {
  bool in;
  const std::int64_t off = masked_offset(v, idx, in);
  ok &= in;
  if (ok) {
    if constexpr (D == S && D == DType::fp32 && O == Overflow::inf_nan) {
      v.data[off] = value;  // an fp32 value is its own encoding
    } else {
      v.data[off] = encode<D, S>(value, O);
    }
  }
}

// Accesses of a loop whose indices the emitter proved in range before it
// (every index affine in the loop variable, its first and last checked):
// plain loads and stores, which vectorize to plain vector accesses (and,
// unlike masked ones, train a CPU's hardware prefetcher).
template <DType D, int R>
inline value_t<D> load_u(const View<D, R>& v, const std::int64_t (&idx)[R]) {
  std::int64_t off = 0;
  for (int d = 0; d < R; ++d) off += idx[d] * v.strides[d];
  return decode<D>(v.data[off]);
}
template <DType S, Overflow O, DType D, int R>
inline void store_u(const View<D, R>& v, const std::int64_t (&idx)[R], value_t<S> value) {
  std::int64_t off = 0;
  for (int d = 0; d < R; ++d) off += idx[d] * v.strides[d];
  if constexpr (D == S && D == DType::fp32 && O == Overflow::inf_nan) {
    v.data[off] = value;
  } else {
    v.data[off] = encode<D, S>(value, O);
  }
}

// Whether [first, last] lies in [0, extent): the hoisted check of load_u / store_u.
inline bool span_in(std::int64_t first, std::int64_t last, std::int64_t extent) {
  return static_cast<std::uint64_t>(first) < static_cast<std::uint64_t>(extent) &&
         static_cast<std::uint64_t>(last) < static_cast<std::uint64_t>(extent);
}

// How many of the lanes 0 .. lanes-1 satisfy base + coef * lane < bound
// (coef >= 0: they are a prefix): the lanes a guarded full-group loop runs.
inline std::int64_t lanes_below(std::int64_t base, std::int64_t coef, std::int64_t bound, std::int64_t lanes) {
  if (base >= bound) return 0;
  std::int64_t room = 0;
  if (coef == 0 || __builtin_sub_overflow(bound, base, &room)) return lanes;
  const std::int64_t n = room / coef + (room % coef != 0 ? 1 : 0);
  return n < lanes ? n : lanes;
}

// The diagnosis re-run's store: checks the index like store(), writes nothing.
template <DType S, DType D, int R>
inline void store_dry(const View<D, R>& v, const std::int64_t (&idx)[R], value_t<S>) {
  (void)element_offset(v, idx, "store");
}

// tile.prefetch: asks the cache for elements [start, start + count) of a
// 1-D view, a cache line at a time and at most 64 KiB; the part outside the
// view is skipped. The templates issue it for the next row of a row-wise
// kernel, whose masked vector loads do not train the hardware prefetcher of
// some CPUs (an AMD Zen 4 streamed a 64 MiB row-wise pass at 10 GB/s with
// them, against 40 with plain loads).
// Always inlined: as a function, g++ finds it free of side effects (a
// prefetch is not one) and deletes the call.
// Write = true asks for the lines to be written (a buffer the kernel stores to).
template <bool Write = false, DType D>
[[gnu::always_inline]] inline void prefetch(const View<D, 1>& v, std::int64_t start, std::int64_t count) {
  const std::int64_t lo = std::max<std::int64_t>(start, 0);
  const std::int64_t hi = std::min<std::int64_t>({start + count, v.shape[0], lo + (std::int64_t{64} << 10) / static_cast<std::int64_t>(sizeof(*v.data))});
  if (v.strides[0] != 1) return;
  constexpr std::int64_t kLine = 64 / static_cast<std::int64_t>(sizeof(storage_t<D>));
  for (std::int64_t i = lo; i < hi; i += kLine) __builtin_prefetch(v.data + i, Write ? 1 : 0);
}

// The lowest faulting lane of a lane loop; kNoFault when none faulted.
inline constexpr std::int64_t kNoFault = INT64_MAX;

// Raised when the re-run of a faulting lane does not fault again (its index
// depended on memory written since, by another tile of the loop).
[[noreturn]] __attribute__((noinline, cold)) inline void lane_fault_lost(const char* kernel, std::int64_t lane) {
  fail(kFaultIndex,
       "kernel '%s': an element load or store of tile %lld was out of range (its index depended on memory another "
       "tile wrote in the same barrier interval, so it is not reported exactly)",
       kernel, static_cast<long long>(lane));
}

// The encoding a zero-filled element gets: the encoding of 0 (for e8m0,
// which has no zero, the encoder's result for 0).
template <DType D>
inline storage_t<D> zero_code() {
  return encode<D, DType::fp64>(0.0);
}

// Copies run synchronously at their issue point, so the latency of reading a
// box from memory is not hidden by a later wait as on a GPU. Instead each
// copy prefetches the box its source will most likely be copied from next:
// kernels walk a buffer in equal steps (the K loop of a tiled GEMM), so the
// next box is this one moved by the step since the previous copy from the
// same source on this thread. A wrong guess costs only the prefetches.
struct CopyStride {
  const void* src = nullptr;
  std::int64_t r0 = 0, c0 = 0;
};

template <DType S, int R>
inline void prefetch_next_box(const View<S, R>& src, std::int64_t r0, std::int64_t c0, std::int64_t rows,
                              std::int64_t cols) {
  thread_local CopyStride last[4];
  thread_local unsigned next_slot = 0;
  CopyStride* slot = nullptr;
  for (CopyStride& c : last)
    if (c.src == src.data) slot = &c;
  if (slot == nullptr) {
    slot = &last[next_slot++ % 4];
    *slot = CopyStride{src.data, r0, c0};
    return;
  }
  const std::int64_t nr0 = r0 + (r0 - slot->r0), nc0 = c0 + (c0 - slot->c0);
  slot->r0 = r0;
  slot->c0 = c0;
  if (nr0 == r0 && nc0 == c0) return;
  const std::int64_t src_rows = R == 2 ? src.shape[0] : 1;
  const std::int64_t src_cols = src.shape[R - 1];
  const std::int64_t cs = src.strides[R - 1];
  const std::int64_t rs = R == 2 ? src.strides[0] : 0;
  const std::int64_t c_lo = std::max<std::int64_t>(nc0, 0), c_hi = std::min<std::int64_t>(nc0 + cols, src_cols);
  const std::int64_t r_lo = std::max<std::int64_t>(nr0, 0), r_hi = std::min<std::int64_t>(nr0 + rows, src_rows);
  if (c_lo >= c_hi || r_lo >= r_hi || cs != 1) return;
  constexpr std::int64_t kLine = 64 / static_cast<std::int64_t>(sizeof(storage_t<S>));
  for (std::int64_t r = r_lo; r < r_hi; ++r) {
    const storage_t<S>* row = src.data + r * rs;
    for (std::int64_t c = c_lo; c < c_hi; c += kLine) __builtin_prefetch(row + c, 0, 1);
    __builtin_prefetch(row + c_hi - 1, 0, 1);
  }
}

// tile.cp_async: the box of `src` starting at `off` with dst's shape is copied
// into dst; elements past src's bounds (or before 0) read as zero.
template <DType D, DType S, int R>
inline void cp_async(const View<D, R>& dst, const View<S, R>& src, const std::int64_t (&off)[R]) {
  static_assert(R == 1 || R == 2, "cp_async copies 1-D or 2-D boxes");
  const std::int64_t rows = R == 2 ? dst.shape[0] : 1;
  const std::int64_t cols = dst.shape[R - 1];
  const std::int64_t src_rows = R == 2 ? src.shape[0] : 1;
  const std::int64_t src_cols = src.shape[R - 1];
  const std::int64_t r0 = R == 2 ? off[0] : 0;
  const std::int64_t c0 = off[R - 1];
  const std::int64_t src_rs = R == 2 ? src.strides[0] : 0;
  const std::int64_t src_cs = src.strides[R - 1];
  const storage_t<D> zero = zero_code<D>();
  prefetch_next_box(src, r0, c0, rows, cols);
  // Columns [c_lo, c_hi) of the box lie inside the source.
  const std::int64_t c_lo = std::clamp<std::int64_t>(-c0, 0, cols);
  const std::int64_t c_hi = std::clamp<std::int64_t>(src_cols - c0, c_lo, cols);
  for (std::int64_t r = 0; r < rows; ++r) {
    storage_t<D>* out = dst.data + r * cols;
    const std::int64_t sr = r0 + r;
    if (sr < 0 || sr >= src_rows) {
      std::fill(out, out + cols, zero);
      continue;
    }
    std::fill(out, out + c_lo, zero);
    std::fill(out + c_hi, out + cols, zero);
    const storage_t<S>* in = src.data + sr * src_rs + c0 * src_cs;
    if constexpr (D == S) {
      if (src_cs == 1) {
        std::memcpy(out + c_lo, in + c_lo, static_cast<std::size_t>(c_hi - c_lo) * sizeof(storage_t<D>));
        continue;
      }
      for (std::int64_t c = c_lo; c < c_hi; ++c) out[c] = in[c * src_cs];
    } else {
      for (std::int64_t c = c_lo; c < c_hi; ++c) out[c] = encode<D, S>(decode<S>(in[c * src_cs]), dst.overflow);
    }
  }
}

}  // namespace tessera_cpu
