// Tile IR kernel -> CUDA C++ for the device tile header library (internal
// interface of the CUDA backend's emitter: emitter.cpp for the program
// structure and tile ops, emit_lane.cpp for lane expressions).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "backends/common/c_lane_expr.h"
#include "backends/common/index_bounds.h"
#include "tessera/backends/cuda/cuda_backend.h"
#include "tessera/ir/ir.h"

namespace tessera::cuda::detail {

struct EmittedKernel {
  std::string name;
  std::string source;
  std::vector<KernelParam> params;
  std::vector<std::string> symbols;  // read from Params::sym in this order
  std::map<std::string, std::int64_t> specialized;
  std::vector<std::int64_t> group_shape;
  std::int64_t group_size = 1;
  int block_threads = 1;
  bool flat = false;
  int tiles_per_thread = 1;  // flat kernels: tiles each thread runs
  std::int64_t shared_bytes = 0;  // planned buffers + mma staging scratch
  int smem_count = 0;
  int tensor_core_mmas = 0;  // tile.mma ops emitted on the tensor-core path
  bool aligned_vectors = false;  // runs moved as aligned words (CompiledKernel::aligned_buffers)
  std::vector<TmaMapSpec> tma_maps;  // Params::tma[i], encoded at launch
};

// The name of the __global__ function in every generated unit.
inline constexpr const char* kEntryName = "tessera_kernel";

EmittedKernel emit_kernel(const ir::Operation& kernel_func, const KernelCompileOptions& options);

struct LaneContext {
  std::string linear_id;
  std::function<std::string(const std::string&)> symbol;
  // Integer adds and muls that cannot leave [0, 2^62) are plain C.
  const codegen::IndexBounds* bounds = nullptr;
};

// Spellings shared by the emitter files.
std::string cu_dtype(DType dtype);       // "tsr::kFp32"
std::string cu_value_type(DType dtype);  // "float", "double", "tsr::i64", "bool"
std::string cu_overflow(Overflow overflow);
// ", <overflow>" and, for toward_zero, ", tsr::kTowardZero": the trailing
// arguments of tsr::round_to, convert and tile_cast for a result of policy `p`.
std::string cu_rounding_args(const NumericsPolicy& p);
std::string cu_literal(double value, DType dtype, Overflow overflow,
                       Rounding rounding = Rounding::nearest_even);  // exact bits
std::string cu_int_literal(std::int64_t value);
using codegen::is_lane_value_op;
std::string lane_expr(const ir::Operation& op, const std::vector<std::string>& args, const LaneContext& ctx);
// The overflow mode of a store into its buffer (a tsr:: constant).
std::string store_overflow(const ir::Operation& op);
// tile.load_elem's expression and tile.store_elem's statement; `unchecked`
// when the index is proven in bounds (no check, no fault record).
std::string load_expr(const std::vector<std::string>& args, bool unchecked);
std::string store_stmt(const ir::Operation& op, const std::vector<std::string>& args, bool unchecked);
// tsr::store_rounded(_u): an fp32 value (args.back()) rounded to the buffer's bf16 / fp16 and stored.
// not_nan: the value is proven not NaN (tile.store_elem `not_nan`), so the
// rounding needs no NaN fix.
std::string store_rounded_stmt(const std::vector<std::string>& args, bool unchecked, bool not_nan);
// Whether a tile.load_elem / tile.store_elem carries a true `in_bounds`.
bool proven_in_bounds(const ir::Operation& op);
bool proven_not_nan(const ir::Operation& op);
void require_deterministic_rounding(const NumericsPolicy& policy, const std::string& what);

}  // namespace tessera::cuda::detail
