// The autodiff transforms as passes for tessera-opt (autodiff_passes.cpp).
#pragma once

namespace tessera::autodiff {

void register_autodiff_passes();

}  // namespace tessera::autodiff
