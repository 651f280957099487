// schedule-tile: the tiling knobs of each kernel, kept as the `tile`
// attribute for the templates (and, later, autotuning) to read. Knobs never
// change numerics: reduction orders depend on the shape alone.
#include "tessera/schedule/passes.h"
#include "tessera/schedule/schedule_dialect.h"

namespace tessera::schedule {

void assign_tiles(ir::Operation& func) {
  for (ir::Operation* k : kernels_of(func)) {
    if (k->attrs().has("tile")) continue;  // set by hand or by an autotuner: keep it
    switch (kernel_family(*k)) {
      // Lanes per group: one element per lane, enough lanes per group that
      // the per-group cost vanishes on the CPU and a GPU block is full.
      case Family::elementwise: k->attrs().set("tile", std::vector<std::int64_t>{1024}); break;
      // M, N, K block of the GEMM template.
      // Lanes per group: one output element per lane; fewer lanes than
      // elementwise kernels since each lane loops over its reduced elements.
      case Family::reduction:
      case Family::normalization: k->attrs().set("tile", std::vector<std::int64_t>{64}); break;
      case Family::gemm: k->attrs().set("tile", std::vector<std::int64_t>{128, 128, 64}); break;
      default: break;
    }
  }
}

}  // namespace tessera::schedule
