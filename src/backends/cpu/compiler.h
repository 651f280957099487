// The host C++ compiler driver of the CPU backend.
//
// Finds the compiler ($TESSERA_CXX or an explicit choice, else c++, g++,
// clang++ on PATH), reads its --version (part of the cache key) and compiles
// one generated translation unit into a shared object, linked against the
// libtessera that is running so generated code calls the same numerics
// converters as the rest of the library.
#pragma once

#include <string>
#include <vector>

namespace tessera::cpu::detail {

struct HostCompiler {
  std::string path;
  std::string version;  // first line of `path --version`
};

// Raises CompileError naming what was looked for when no compiler is usable.
HostCompiler find_host_compiler(const std::string& requested);

// -std=c++20 -O3 -march=native ... (no fast-math: results must be exact).
std::vector<std::string> default_compile_flags();

// Compiles `source` into the shared object `output` with `include_dir` on the
// include path. On failure raises CompileError quoting the compiler's output.
void compile_shared_object(const HostCompiler& cxx, const std::vector<std::string>& flags,
                           const std::string& include_dir, const std::string& source, const std::string& output);

// The file libtessera was loaded from.
std::string libtessera_path();

}  // namespace tessera::cpu::detail
