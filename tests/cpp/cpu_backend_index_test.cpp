// Index arithmetic in generated CPU kernels: adds and muls that cannot
// saturate are plain C++ (codegen::IndexBounds), kernels compiled for
// contiguous buffers read them through unit-stride views, and the launcher
// refuses extents and grids beyond the range that makes this exact.
#include <gtest/gtest.h>

#include <string>

#include "cpu_backend_test_util.h"
#include "tessera/support/error.h"

namespace tessera {
namespace {

using namespace cputest;

// y[i] = x[i * m + 1] with m a constant (bounded) or a scalar argument (not).
ir::Operation* strided_read_kernel(ir::Module& m, bool scalar_multiplier) {
  std::vector<std::pair<std::string, Type>> params = {{"x", gmem({Dim::named("n")}, DType::fp32)},
                                                      {"y", gmem({Dim::named("k")}, DType::fp32, true)}};
  if (scalar_multiplier) params.push_back({"m", lane(DType::int64)});
  ir::Operation* k = tile::build_kernel(m, scalar_multiplier ? "read_scalar" : "read_const", params);
  ir::Block& body = ir::function_body(*k);
  OpBuilder b(body);
  Value* i = op(b, "tile.linear_id", {});
  Value* mult = scalar_multiplier ? body.argument(2) : i64(b, 2);
  Value* j = op(b, "tile.add", {op(b, "tile.mul", {i, mult}), i64(b, 1)});
  stmt(b, "tile.store_elem", {body.argument(1), i, op(b, "tile.load_elem", {body.argument(0), j})});
  return k;
}

TEST(CpuBackendIndex, BoundedIndexArithmeticIsPlainAndUnboundedStaysSaturating) {
  ir::Module m;
  cpu::CompiledKernel plain = compile(*strided_read_kernel(m, false));
  EXPECT_EQ(plain.source.find("tsr::imul"), std::string::npos) << plain.source;
  EXPECT_EQ(plain.source.find("tsr::iadd"), std::string::npos) << plain.source;
  cpu::CompiledKernel saturating = compile(*strided_read_kernel(m, true));
  EXPECT_NE(saturating.source.find("tsr::imul"), std::string::npos) << saturating.source;

  Tensor x = f32_tensor({0, 1, 2, 3, 4, 5, 6, 7, 8}, {9});
  Tensor y = Tensor::zeros({4}, pol(DType::fp32));
  cpu::launch(plain, -1, {x, y});
  EXPECT_EQ(y.to_values(), (std::vector<double>{1, 3, 5, 7}));
  Tensor y2 = Tensor::zeros({4}, pol(DType::fp32));
  cpu::launch(saturating, -1, {x, y2, std::int64_t{2}});
  EXPECT_EQ(y2.to_values(), (std::vector<double>{1, 3, 5, 7}));
}

TEST(CpuBackendIndex, ContiguousBufferKernelsCheckTheInnermostStride) {
  ir::Module m;
  cpu::CompileOptions options;
  options.contiguous_buffers = true;
  cpu::CompiledKernel ck = compile(*strided_read_kernel(m, false), options);
  EXPECT_NE(ck.source.find("tsr::gmem_unit<"), std::string::npos) << ck.source;

  Tensor base = f32_tensor({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17}, {18});
  Tensor y = Tensor::zeros({4}, pol(DType::fp32));
  cpu::launch(ck, -1, {base.as_strided({9}, {1}, 0), y});
  EXPECT_EQ(y.to_values(), (std::vector<double>{1, 3, 5, 7}));
  try {
    cpu::launch(ck, -1, {base.as_strided({9}, {2}, 0), y});
    FAIL() << "expected a stride error";
  } catch (const Error& e) {
    const std::string msg = e.message();
    EXPECT_NE(msg.find("innermost stride 2"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'x'"), std::string::npos) << msg;
  }
}

TEST(CpuBackendIndex, ExtentsOfTwoToThe48OrMoreAreRefused) {
  ir::Module m;
  cpu::CompiledKernel ck = compile(*strided_read_kernel(m, false));
  Tensor one = f32_tensor({1}, {1});
  Tensor huge = one.as_strided({std::int64_t{1} << 48}, {0}, 0);  // no memory behind it
  Tensor y = Tensor::zeros({1}, pol(DType::fp32));
  try {
    cpu::launch(ck, -1, {huge, y});
    FAIL() << "expected an extent error";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.message()).find("2^48"), std::string::npos) << e.message();
  }
  EXPECT_THROW(cpu::launch(ck, std::int64_t{1} << 48, {one, y}), ArgumentError);
}

}  // namespace
}  // namespace tessera
