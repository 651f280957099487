// The binary interface between libtessera's CPU launcher and a generated kernel.
//
// This header is compiled twice: into libtessera (src/backends/cpu/launcher.cpp)
// and into every generated kernel (through tessera_cpu.h, from the copy the
// backend writes next to the compile cache). Both sides must agree on the
// layout below, so it holds only plain structs of fixed-width fields, and
// kAbiVersion is part of the cache key and checked when a kernel is loaded.
//
// A generated shared object exports two C functions:
//
//   unsigned tessera_cpu_abi_version();
//   int tessera_cpu_run_groups(const tessera_cpu::LaunchArgs*, std::int64_t begin,
//                              std::int64_t end, tessera_cpu::Fault*);
//
// run_groups runs groups [begin, end) one after another and returns 0, or 1
// after recording in *fault the first failure (the lowest group id of the
// range that failed, since groups run in increasing order). No exception
// ever leaves the shared object.
#pragma once

#include <cstdint>

namespace tessera_cpu {

inline constexpr std::uint32_t kAbiVersion = 1;

// Per-dimension view of one global buffer (a kernel's gmem parameter).
// Strides are in elements; data points at element 0.
inline constexpr int kMaxRank = 8;
struct BufferArg {
  void* data;
  std::int64_t shape[kMaxRank];
  std::int64_t strides[kMaxRank];
  std::int32_t rank;
  std::int32_t dtype;  // tessera::DType, for the launcher's own checks
};

// One kernel parameter: a buffer, or a scalar held both ways (the generated
// code reads the field matching the parameter's dtype).
struct ParamValue {
  BufferArg buffer;
  double real;
  std::int64_t integer;
};

struct LaunchArgs {
  std::uint32_t abi_version;
  const ParamValue* params;
  std::int32_t num_params;
  // Values of the kernel's shape symbols, in the order the emitter listed them.
  const std::int64_t* symbols;
  std::int32_t num_symbols;
  std::int64_t grid;  // number of groups of the launch
};

// Where a failing group leaves its message (truncated to fit).
inline constexpr int kFaultMessageBytes = 1024;
struct Fault {
  std::int64_t group;
  std::int32_t code;  // 1 = index out of range, 2 = invalid argument (division by zero, overflow), 3 = internal
  char message[kFaultMessageBytes];
};

}  // namespace tessera_cpu
