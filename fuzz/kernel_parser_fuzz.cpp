// libFuzzer target: the kernel-language parser and semantic checker.
//
// Every input is parsed as a .tsr file and as Python source. Parsing either
// succeeds or raises a tessera::Error of a user-facing kind; anything else
// (a crash, a sanitizer report, a hang, another exception type, or an
// internal error) is a bug the fuzzer reports. Build and run: scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "tessera/frontend/kernel_language.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  for (auto dialect : {tessera::frontend::SourceDialect::tsr, tessera::frontend::SourceDialect::python}) {
    try {
      std::vector<tessera::frontend::KernelDecl> kernels =
          tessera::frontend::parse_kernels(text, "fuzz.tsr", 1, dialect);
      // Specializing every shape symbol exercises the constant paths too.
      for (const auto& k : kernels) {
        tessera::frontend::Constants constants;
        for (const std::string& s : k.shape_symbols) constants[s] = 64;
        tessera::frontend::check_kernel(k, constants);
      }
    } catch (const tessera::Error& e) {
      if (e.kind() == tessera::ErrorKind::Internal) {
        std::fprintf(stderr, "internal error: %s\n", e.what());
        std::abort();
      }
      // A location, when given, must point into the input.
      if (e.where().valid() && e.where().line > static_cast<int>(size) + 2) {
        std::fprintf(stderr, "error location out of range: %s\n", e.what());
        std::abort();
      }
    }
  }
  return 0;
}
