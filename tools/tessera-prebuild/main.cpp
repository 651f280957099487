// tessera-prebuild OUT_DIR [--jobs N] [--quiet]: compiles the common eager
// kernels (tessera/schedule/prebuild.h) into OUT_DIR, laid out like the
// kernel cache. The build runs it and the package installs OUT_DIR as
// tessera/prebuilt/.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tessera/schedule/prebuild.h"
#include "tessera/support/error.h"

int main(int argc, char** argv) {
  std::string out;
  int jobs = 0;
  bool quiet = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--jobs" && i + 1 < argc) {
      jobs = std::atoi(argv[++i]);
    } else if (a == "--quiet") {
      quiet = true;
    } else if (out.empty() && !a.starts_with("-")) {
      out = a;
    } else {
      std::fprintf(stderr, "usage: tessera-prebuild OUT_DIR [--jobs N] [--quiet]\n");
      return 2;
    }
  }
  if (out.empty()) {
    std::fprintf(stderr, "usage: tessera-prebuild OUT_DIR [--jobs N] [--quiet]\n");
    return 2;
  }
  try {
    const auto report = tessera::schedule::prebuild_eager_kernels(out, jobs, [&](const std::string& line) {
      if (!quiet) std::printf("  %s\n", line.c_str());
    });
    std::printf("tessera-prebuild: %zu eager executables in %s (%zu compiled now) in %.1f s\n", report.executables,
                out.c_str(), report.compiled, report.seconds);
  } catch (const tessera::Error& e) {
    std::fprintf(stderr, "tessera-prebuild: %s\n", e.what());
    return 1;
  }
  return 0;
}
