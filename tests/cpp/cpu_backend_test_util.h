// Shared helpers for the CPU backend tests (tests/cpp/cpu_backend_*_test.cpp):
// shorthands to build Tile IR kernels and to compile them into a test cache.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "tessera/backends/cpu/cpu_backend.h"
#include "tessera/ir/builder.h"
#include "tessera/ir/ir.h"
#include "tessera/numerics/policy.h"
#include "tessera/runtime/tensor.h"
#include "tessera/tile/tile_builder.h"

namespace tessera::cputest {

using ir::Dim;
using ir::OpBuilder;
using ir::Type;
using ir::Value;

inline NumericsPolicy pol(DType d) {
  return default_policy(d);
}
inline Type gmem(std::vector<Dim> dims, DType d, bool is_mut = false) {
  return Type::gmem(std::move(dims), pol(d), is_mut);
}
inline Type lane(DType d) {
  return Type::lane(d);
}

inline Value* op(OpBuilder& b, std::string_view name, std::vector<Value*> operands, ir::AttrMap attrs = {}) {
  return tile::build(b, name, std::move(operands), std::move(attrs));
}
inline void stmt(OpBuilder& b, std::string_view name, std::vector<Value*> operands, ir::AttrMap attrs = {}) {
  b.create(name, std::move(operands), std::move(attrs));
}
inline Value* i64(OpBuilder& b, std::int64_t v) {
  return tile::build_int(b, v);
}
inline Value* real(OpBuilder& b, double v, DType d = DType::fp32) {
  return tile::build_real(b, v, pol(d));
}
inline Value* cmp(OpBuilder& b, const char* pred, Value* x, Value* y) {
  return op(b, "tile.cmp", {x, y}, {{"pred", std::string(pred)}});
}
inline Value* smem(OpBuilder& b, std::vector<std::int64_t> shape, DType d) {
  return op(b, "tile.smem_alloc", {}, {{"shape", ir::fixed_shape(shape)}, {"policy", pol(d)}});
}
inline Value* tile_load(OpBuilder& b, Value* src, std::vector<Value*> offsets, std::vector<std::int64_t> shape) {
  offsets.insert(offsets.begin(), src);
  return op(b, "tile.tile_load", offsets, {{"shape", ir::fixed_shape(shape)}});
}
// cp_async_wait {pending = 0} + barrier, as the front end lowers tbarrier().
inline void barrier(OpBuilder& b) {
  stmt(b, "tile.cp_async_wait", {}, {{"pending", std::int64_t{0}}});
  stmt(b, "tile.barrier", {});
}

// A cache directory shared by the test runs (so reruns hit the cache).
inline std::string test_cache_dir() {
  return (std::filesystem::temp_directory_path() / "tessera-cpu-backend-tests").string();
}
inline cpu::CompiledKernel compile(ir::Operation& kernel, cpu::CompileOptions options = {}) {
  tile::finish_kernel(kernel);
  if (options.cache_dir.empty()) options.cache_dir = test_cache_dir();
  return cpu::compile_kernel(kernel, options);
}

inline Tensor f32_tensor(const std::vector<double>& values, std::vector<std::int64_t> shape) {
  return Tensor::from_values(values, std::move(shape), pol(DType::fp32));
}

}  // namespace tessera::cputest
