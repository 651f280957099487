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

// The include directory that holds the header library's precompiled form,
// <dir>/pch-<hash>/tessera_cpu/tessera_cpu.h.gch: the one in `prebuilt_dir`
// (tessera-prebuild's, read-only) when it exists, else the one in
// `cache_dir`, built once (from the headers in `include_dir`, with `flags`)
// and shared by every later compile with the same compiler, flags and
// headers. Put before `include_dir` on the include path: g++ takes the .gch
// in place of the header, which saves parsing about 120k preprocessed lines
// (about 1 s) in every kernel compile; an unusable .gch (another compiler
// wrote it) is skipped by g++ itself, so the result never depends on it.
// Empty when the compiler is not g++ (clang++ does not read .gch files for
// #include) or TESSERA_CPU_PCH=0 (1 or unset: on; anything else is an
// ArgumentError). Raises CompileError when the headers fail to compile.
std::string precompiled_header_dir(const HostCompiler& cxx, const std::vector<std::string>& flags,
                                   const std::string& prebuilt_dir, const std::string& cache_dir,
                                   const std::string& include_dir);

// Compiles `source` into the shared object `output` with `include_dirs` on
// the include path, in order. On failure raises CompileError quoting the
// compiler's output.
void compile_shared_object(const HostCompiler& cxx, const std::vector<std::string>& flags,
                           const std::vector<std::string>& include_dirs, const std::string& source,
                           const std::string& output);

// Compiles the translation units `sources` (whose definitions together make
// one shared object: exactly one of them defines the unit's ABI version) each
// into an object file, at most `jobs` at a time, then links the objects into
// the shared object `output`. A multi-kernel unit split this way compiles on
// several cores; the kernels are independent, so the object's code is the
// one-unit build's. On failure raises CompileError quoting the compiler.
void compile_shared_object_from_parts(const HostCompiler& cxx, const std::vector<std::string>& flags,
                                      const std::vector<std::string>& include_dirs,
                                      const std::vector<std::string>& sources,
                                      const std::string& output, int jobs);

// How many compiler processes a unit may use: $TESSERA_CPU_COMPILE_JOBS (1 to
// 64; an ArgumentError otherwise), else the machine's hardware threads, at
// most 8.
int compile_jobs();

// The file libtessera was loaded from.
std::string libtessera_path();

}  // namespace tessera::cpu::detail
