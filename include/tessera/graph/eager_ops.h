// Eager ops for C++ users: tessera::ops::add(a, b) runs the Graph IR op
// graph.add on the reference executor at once, as tessera.ops.add does in
// Python. Every Graph IR op is reachable through call(); the named helpers
// cover the common ones.
#pragma once

#include <string_view>
#include <vector>

#include "tessera/ir/attribute.h"
#include "tessera/runtime/tensor.h"

namespace tessera::ops {

// Runs `graph.<name>` (or a full op name) on `inputs`.
std::vector<Tensor> call(std::string_view name, const std::vector<Tensor>& inputs, const ir::AttrMap& attrs = {});

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor exp(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor cast(const Tensor& x, const NumericsPolicy& policy);
Tensor sum(const Tensor& x, std::vector<std::int64_t> axes = {}, bool keepdims = false);
Tensor gemm(const Tensor& a, const Tensor& b, bool transpose_a = false, bool transpose_b = false);
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor softmax_safe(const Tensor& x, std::int64_t axis = -1);

}  // namespace tessera::ops
