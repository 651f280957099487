// Finding and running `tileiras`, NVIDIA's assembler from CUDA Tile IR
// bytecode to a cubin. Nothing here is needed to build Tessera or to write
// bytecode; only turning bytecode into a cubin needs the tool.
//
// Where it is looked for, first found wins:
//   1. $TESSERA_TILEIRAS (the path of the tileiras binary);
//   2. the `nvidia-cuda-tileiras` pip package: nvidia/cu13/bin/tileiras in
//      the site-packages of $VIRTUAL_ENV, or beside the directory holding
//      libtessera (the Python package's own site-packages);
//   3. $CUDA_HOME/bin/tileiras;
//   4. tileiras on $PATH.
// tileiras needs libnvvm and ptxas of its own release: it finds them through
// CUDA_HOME and PATH, which run_tileiras() points at the toolkit directory
// holding tileiras (for the pip layout: nvidia/cu13, where the
// `nvidia-nvvm` and `nvidia-cuda-nvcc` wheels of the same version put
// lib/libnvvm.so.4 and bin/ptxas).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::cuda_tile {

struct Toolchain {
  bool found = false;
  std::string tileiras;      // path of the binary
  std::string home;          // the toolkit directory (bin/..) used as CUDA_HOME
  std::string source;        // "TESSERA_TILEIRAS", "pip (…)", "CUDA_HOME", "PATH"
  std::string version;       // "13.5.37" from `tileiras --version`
  std::vector<std::string> archs;  // "sm_80", "sm_90", ... from `tileiras --help`
  bool has_nvvm = false;     // home/lib/libnvvm.so.4 or home/nvvm/lib64/libnvvm.so
  bool has_ptxas = false;    // home/bin/ptxas
  std::string reason;        // why not found, or what is missing beside it
};

// The toolchain, looked up once per process (the environment is read then).
const Toolchain& toolchain();
// Looks again (tests change the environment).
Toolchain find_toolchain();

// Runs tileiras on `bytecode` for `arch` ("sm_90") and returns the cubin.
// Raises CompileError with tileiras's output when it fails, and when the
// tool is absent (saying where it was looked for).
std::vector<std::uint8_t> run_tileiras(const std::vector<std::uint8_t>& bytecode, const std::string& arch);
// Runs the disassembler beside tileiras (tileirdisasm) and returns its text;
// empty when there is none.
std::string disassemble(const std::vector<std::uint8_t>& bytecode);

}  // namespace tessera::cuda_tile
