// Device tile library, part 3: cp_async through the bulk tensor copy engine
// (TMA, sm_90) into the panel layout wgmma reads. Included by tile.cuh.
//
// One thread issues every panel of a box (one cp.async.bulk.tensor per
// 128-byte-wide panel, the map's 128-byte swizzle writing exactly the
// kPanel128 layout) and arms the destination's mbarrier with the bytes to
// expect; the engine zero-fills what lies past the tensor's bounds, as
// cp_async's contract says. Each TMA destination has one mbarrier and two
// per-thread counters (copies issued into it, copies waited for): every
// thread waits for the latest copy before it reads the buffer (tma_settle),
// so the i-th copy's completion is phase i of the barrier and its parity is
// (issued - 1) & 1. A program reads a buffer and refills it only with a
// barrier between, so no thread can fall a whole phase behind.
#pragma once

namespace tsr {

#if __CUDA_ARCH__ >= 900
__device__ __forceinline__ void mbar_init(u32 bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(bar) : "memory");
}

__device__ __forceinline__ bool mbar_try_wait(u32 bar, u32 parity) {
  u32 done;
  asm volatile(
      "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done != 0;
}

// Waits for the latest copy into the buffer whose barrier is `bar`, once.
__device__ __forceinline__ void tma_settle(u32 bar, u32 issued, u32& waited) {
  if (waited != issued) {
    while (!mbar_try_wait(bar, (issued - 1u) & 1u)) {
    }
    waited = issued;
  }
}

// Copies the box at (r0, c0) of the map's tensor into `dst` (kPanel128
// layout, 1024-byte aligned): thread 0 arms the barrier with the box's bytes
// and issues one bulk tensor copy per panel.
template <class SV>
__device__ __forceinline__ void tma_copy(const SV& dst, const TmaMap* map, i64 r0, i64 c0, u32 bar, u32& issued,
                                         u32& waited, int tid) {
  constexpr int kPanels = (SV::kCols + SV::kPanel - 1) / SV::kPanel;
  constexpr u32 kPanelBytes = (u32)SV::kRows * 128u;
  // Only thread 0 waits for the previous copy (it re-arms the barrier, so no
  // phase can pass it by). The others mark it waited without waiting: a
  // thread that read it waited when it read (tma_settle), and one that did
  // not (a pipeline step skipped past the end) never will, while waiting
  // here could see the barrier already one phase further and never return.
  if (tid == 0) tma_settle(bar, issued, waited);
  waited = issued;
  if (tid == 0) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(kPanels * kPanelBytes)
                 : "memory");
#pragma unroll
    for (int q = 0; q < kPanels; ++q) {
      asm volatile(
          "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], "
          "[%4];\n" ::"r"(smem_addr(dst.data) + (u32)q * kPanelBytes),
          "l"(reinterpret_cast<u64>(map)), "r"((int)(c0 + (i64)q * SV::kPanel)), "r"((int)r0), "r"(bar)
          : "memory");
    }
  }
  ++issued;
}
#endif

}  // namespace tsr
