// schedule-choose-variants: records each kernel's implementation through the
// VariantChooser interface (tessera/schedule/passes.h).
#include "schedule/views.h"
#include "tessera/schedule/lower_to_tile.h"
#include "tessera/schedule/passes.h"
#include "tessera/schedule/schedule_dialect.h"

namespace tessera::schedule {
namespace {

// The generated tile kernel wherever a template covers the kernel. Vendor
// library variants (a CPU BLAS for GEMM) join here when they exist.
class DefaultChooser final : public VariantChooser {
 public:
  std::string choose(const ir::Operation& kernel) const override {
    switch (kernel_family(kernel)) {
      case Family::view: return view_unsupported(kernel_root_op(kernel)) ? "none" : "view";
      // A one-member axis is the identity (a view); a larger one runs through
      // the communicator of the shard running the executable.
      case Family::collective:
        return kernel_root_op(kernel).attrs().get_int("axis_size") == 1 ? "view" : "collective";
      case Family::constant: return "constant";
      default: return has_tile_template(kernel) ? "tile" : "none";
    }
  }
};

}  // namespace

const VariantChooser& default_variant_chooser() {
  static const DefaultChooser chooser;
  return chooser;
}

void choose_variants(ir::Operation& func, const VariantChooser& chooser) {
  for (ir::Operation* k : kernels_of(func)) k->attrs().set("variant", chooser.choose(*k));
}

}  // namespace tessera::schedule
