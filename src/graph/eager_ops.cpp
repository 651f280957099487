#include "tessera/graph/eager_ops.h"

#include <string>

#include "tessera/graph/executor.h"

namespace tessera::ops {

std::vector<Tensor> call(std::string_view name, const std::vector<Tensor>& inputs, const ir::AttrMap& attrs) {
  std::string full = name.find('.') == std::string_view::npos ? "graph." + std::string(name) : std::string(name);
  return graph::execute_op(full, inputs, attrs);
}

namespace {
Tensor one(std::string_view name, const std::vector<Tensor>& inputs, const ir::AttrMap& attrs = {}) {
  return call(name, inputs, attrs).at(0);
}
}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  return one("add", {a, b});
}
Tensor sub(const Tensor& a, const Tensor& b) {
  return one("sub", {a, b});
}
Tensor mul(const Tensor& a, const Tensor& b) {
  return one("mul", {a, b});
}
Tensor div(const Tensor& a, const Tensor& b) {
  return one("div", {a, b});
}
Tensor exp(const Tensor& x) {
  return one("exp", {x});
}
Tensor relu(const Tensor& x) {
  return one("relu", {x});
}
Tensor cast(const Tensor& x, const NumericsPolicy& policy) {
  return one("cast", {x}, {{"policy", policy}});
}
Tensor sum(const Tensor& x, std::vector<std::int64_t> axes, bool keepdims) {
  return one("sum", {x}, {{"axes", std::move(axes)}, {"keepdims", keepdims}});
}
Tensor gemm(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b) {
  return one("gemm", {a, b}, {{"transpose_a", transpose_a}, {"transpose_b", transpose_b}});
}
Tensor matmul(const Tensor& a, const Tensor& b) {
  return one("matmul", {a, b});
}
Tensor softmax_safe(const Tensor& x, std::int64_t axis) {
  return one("softmax_safe", {x}, {{"axis", axis}});
}

}  // namespace tessera::ops
