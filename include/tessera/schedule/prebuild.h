// Eager kernels compiled when Tessera is built (tessera-prebuild), so that
// common eager ops never wait for the host compiler on a fresh install.
//
// The list covers the common op families for the common policies, each in
// the shape patterns eager calls collapse to (tessera/schedule/eager.h):
// elementwise unary and binary ops (with scalar, row and column
// broadcasts), comparisons, where, casts, sum/mean/max/min over all,
// trailing or leading dims, matmul, and the row normalizations, for fp32
// and (most of them) bf16 and fp16. Their objects go into a directory laid
// out like the kernel cache, which the package installs as
// tessera/prebuilt/; the CPU backend looks there after its own cache.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

namespace tessera::schedule {

struct PrebuildReport {
  std::size_t executables = 0;  // eager executables on the list
  std::size_t compiled = 0;     // of them, compiled now (the rest were present)
  std::size_t removed = 0;      // files of earlier lists removed
  double seconds = 0.0;
};

// Compiles every listed eager executable into the kernel cache at
// `cache_root` (TESSERA_CACHE_DIR's layout), on `jobs` threads (0: every
// hardware thread). `progress` (may be empty) hears each finished entry.
PrebuildReport prebuild_eager_kernels(const std::string& cache_root, int jobs,
                                      const std::function<void(const std::string&)>& progress);

}  // namespace tessera::schedule
