// Tile IR kernel -> C++ translation unit for the host tile header library.
//
// The internal interface of the CPU backend's emitter (emitter.cpp for the
// program structure, emit_ops.cpp for the C++ of each op). See emitter.cpp
// for how the SPMD program is split at barriers.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tessera/backends/cpu/cpu_backend.h"
#include "tessera/ir/ir.h"

namespace tessera::cpu::detail {

struct EmittedKernel {
  std::string name;
  std::string source;
  std::vector<KernelParam> params;
  std::vector<std::string> symbols;  // read from LaunchArgs::symbols in this order
  std::map<std::string, std::int64_t> specialized;
  std::vector<std::int64_t> group_shape;
  std::int64_t group_size = 1;
  std::int64_t shared_bytes = 0;  // arena bytes the kernel uses
};

// `unit` non-empty: the kernel is one of several in a translation unit; its
// code goes into namespace `unit`, it exports entry_symbol(unit), and the
// unit supplies kUnitPrologue and kUnitEpilogue once.
EmittedKernel emit_kernel(const ir::Operation& kernel_func, const CompileOptions& options,
                          const std::string& unit = "");
// The exported entry of a kernel: tessera_cpu_run_groups[_unit].
std::string entry_symbol(const std::string& unit);
// The header library comes first: g++ uses its precompiled form only for
// the first include of a unit (precompiled_header_dir).
inline constexpr const char* kUnitPrologue =
    "#include \"tessera_cpu/tessera_cpu.h\"\n\n"
    "#include <algorithm>\n#include <cmath>\n#include <cstdint>\n#include <limits>\n\n";
inline constexpr const char* kUnitEpilogue =
    "extern \"C\" unsigned tessera_cpu_abi_version() noexcept { return tsr::kAbiVersion; }\n\n";

// C++ spellings shared by the emitter files.
std::string cpp_dtype(DType dtype);       // "DType::fp32"
std::string cpp_value_type(DType dtype);  // "float", "double", "std::int64_t", "bool"
std::string cpp_overflow(Overflow overflow);
// ", <overflow>" and, for toward_zero, ", <rounding>": the trailing arguments
// of tsr::round_to, convert and tile_cast for a result of policy `p`.
std::string cpp_rounding_args(const NumericsPolicy& p);
// An exact C++ literal of `value` rounded once to `dtype` (value type).
std::string cpp_literal(double value, DType dtype, Overflow overflow, Rounding rounding = Rounding::nearest_even);
std::string cpp_int_literal(std::int64_t value);
std::string cpp_string_literal(const std::string& text);

}  // namespace tessera::cpu::detail
