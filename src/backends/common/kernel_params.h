// What the C-family backends check and derive alike from a kernel's
// signature: which parameter types they take, the shape symbols a dim reads,
// and C identifiers made from IR names.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "tessera/backends/cpu/cpu_backend.h"
#include "tessera/ir/ir.h"
#include "tessera/ir/type.h"

namespace tessera::codegen {

// A kernel function's name and group shape (empty: one tile per group).
struct KernelHeader {
  std::string name;
  std::vector<std::int64_t> group_shape;
  std::int64_t group_size = 1;
};
// Verifies `func` and reads its kernel attributes; CompileError when it is
// not a kernel or its group shape is empty.
KernelHeader read_kernel_header(const ir::Operation& func, std::string_view backend);

// Raises CompileError unless `type` is a lane scalar or a gmem buffer of rank
// 1 to 8. A sub-byte format (int4, fp4, fp6) is taken only where
// `sub_byte_buffers`: the CPU backend, whose launcher unpacks such a tensor to
// one code per byte around the launch. `backend` prefixes the messages
// ("CPU backend").
void check_kernel_param(const ir::Type& type, const std::string& param, const std::string& kernel,
                        std::string_view backend, bool sub_byte_buffers);

// The launch parameter block argument `arg` (number `index` of the kernel
// body) declares: name ("arg<index>" when unnamed), type, buffer and mut
// flags, after check_kernel_param.
cpu::KernelParam describe_kernel_param(const ir::Value& arg, std::size_t index, const std::string& kernel,
                                       std::string_view backend, bool sub_byte_buffers);

// The size of a tile or shared-buffer dim at compile time: its size, or the
// value `specialize` gives its symbol; CompileError naming the dim otherwise.
std::int64_t resolve_static_dim(const ir::Dim& d, const std::map<std::string, std::int64_t>& specialize,
                                const std::string& kernel, std::string_view backend);

// The symbols a dim reads, in order: "n" -> n; "K/tp" -> K, tp; "N*2" -> N.
std::vector<std::string> dim_symbols(const ir::Dim& dim);

// The symbols that bound no index (IndexBounds' `scalar_symbols`): those a
// scalar parameter binds, and those `specialize` sets outside the launcher's
// extent range [0, kIndexLimit).
std::unordered_set<std::string> unbounded_symbols(const std::vector<cpu::KernelParam>& params,
                                                  const std::map<std::string, std::int64_t>& specialize);

// `name` with every character that is not a letter or digit replaced by '_'.
std::string c_identifier(const std::string& name);

}  // namespace tessera::codegen
