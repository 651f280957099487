// Graph IR sparse products: graph.spmm and graph.sddmm (docs/design/0013-sparse.md).
//
// A CSR matrix reaches these ops as its values plus eight integer pattern
// operands, all int32 or int64:
//
//   start [M], end [M], col [nnz]     row m holds slots start[m] .. end[m]-1,
//                                     slot j in column col[j]
//   t_start [K], t_end [K], t_col [nnz], t_perm [nnz], t_inv [nnz]
//                                     the same pattern transposed (CSC): slot
//                                     s of the transpose is slot t_perm[s] of
//                                     the original, and t_inv is its inverse
//
// start/end are indptr[:-1] and indptr[1:] (two views of one tensor): the
// row count is then a dim of an operand, where indptr's M + 1 would need
// arithmetic on a symbolic dim. The transposed pattern is never read by the
// forward kernels; it is there for the gradients (autodiff/rules/
// sparse_rules.cpp), whose transposed products are spmm over it, so that
// every kernel stays row-split and free of atomics. tessera.sparse builds and
// validates all eight on the host, once per pattern.
//
//   spmm(values [nnz], b [K, N], pattern)  -> [M, N]
//       out[m, n] = sum over j in row m, left to right, of values[j] * b[col[j], n]
//   sddmm(x [M, D], y [D, K], pattern)      -> [nnz]
//       out[j] = sum over d = 0 .. D-1 of x[m, d] * y[d, col[j]], j in row m
//
// Each step is acc + a*b rounded once to the accumulation type (a fused
// multiply-add in that type: fp32 for 16-bit storage by default, the
// policy's accum otherwise), like graph.gemm's; acc is then encoded to
// storage. Result policy: the two dense operands' when identical, else the
// promoted one; floats only.
#include <cmath>

#include "graph/accumulate.h"
#include "graph/kernel_support.h"
#include "graph/op_families.h"
#include "graph/shape_rules.h"
#include "tessera/graph/promotion.h"
#include "tessera/support/error.h"

namespace tessera::graph {

namespace {

using ir::AttrMap;
using ir::KernelCall;
using ir::OpDef;

constexpr std::size_t kPatternOperands = 8;
const char* const kPatternNames[kPatternOperands] = {"start", "end", "col", "t_start", "t_end", "t_col", "t_perm", "t_inv"};

NumericsPolicy float_policy(const NumericsPolicy& a, const NumericsPolicy& b, const std::string& op) {
  if (!is_float(a.storage) || !is_float(b.storage) || a.storage == DType::e8m0 || b.storage == DType::e8m0) {
    raise(ErrorCode::DtypeUnsupported, op + " takes floating-point values and dense operands, got " +
                                           std::string(name(a.storage)) + " and " + std::string(name(b.storage)));
  }
  return a == b ? a : promote_policies(a, b);
}

void check_dim(const Dim& got, const Dim& want, const std::string& op, const std::string& what) {
  if (got != want) raise(ErrorCode::ShapeMismatch, op + ": " + what + " is " + got.str() + " but should be " + want.str());
}

// Checks the pattern operands (in[first ..]) against m rows, k columns and
// nnz slots.
void check_pattern(std::span<const ir::Type> in, std::size_t first, const Dim& m, const Dim& k, const Dim& nnz,
                   const std::string& op) {
  for (std::size_t i = 0; i < kPatternOperands; ++i) {
    const ir::Type& t = in[first + i];
    if (t.dtype() != DType::int32 && t.dtype() != DType::int64) {
      raise(ErrorCode::DtypeUnsupported, op + ": pattern operand '" + kPatternNames[i] + "' must be int32 or int64, got " +
                                             std::string(name(t.dtype())));
    }
    if (t.rank() != 1) {
      raise(ErrorCode::ShapeMismatch, op + ": pattern operand '" + kPatternNames[i] + "' must be 1-D, got " +
                                          shape_str(t.shape));
    }
  }
  const Dim want[kPatternOperands] = {m, m, nnz, k, k, nnz, nnz, nnz};
  for (std::size_t i = 0; i < kPatternOperands; ++i) {
    check_dim(in[first + i].shape[0], want[i], op, std::string("the length of '") + kPatternNames[i] + "'");
  }
}

std::vector<std::int64_t> ints(const Tensor& t) {
  auto v = t.to_values();
  return std::vector<std::int64_t>(v.begin(), v.end());
}

// Raises unless (start, end, col) is a CSR pattern of k columns covering
// slots 0 .. nnz-1 exactly once, row after row: the kernels write each slot
// of an sddmm result once and read col[j] as a row of b.
void check_csr(const std::vector<std::int64_t>& start, const std::vector<std::int64_t>& end,
               const std::vector<std::int64_t>& col, std::int64_t k, const std::string& op) {
  std::int64_t next = 0;
  for (std::size_t m = 0; m < start.size(); ++m) {
    if (start[m] != next || end[m] < start[m]) {
      raise(ErrorCode::ArgumentInvalid, op + ": row " + std::to_string(m) + " spans slots [" + std::to_string(start[m]) +
                                            ", " + std::to_string(end[m]) + ") but should start at slot " +
                                            std::to_string(next) + " and not end before it (a malformed indptr)");
    }
    next = end[m];
  }
  if (next != static_cast<std::int64_t>(col.size())) {
    raise(ErrorCode::ArgumentInvalid, op + ": the rows end at slot " + std::to_string(next) + " but there are " +
                                          std::to_string(col.size()) + " slots (a malformed indptr)");
  }
  for (std::size_t j = 0; j < col.size(); ++j) {
    if (col[j] < 0 || col[j] >= k) {
      raise(ErrorCode::IndexOutOfRange, op + ": slot " + std::to_string(j) + " has column " + std::to_string(col[j]) +
                                            ", outside [0, " + std::to_string(k) + ")");
    }
  }
}

std::vector<Tensor> run_spmm(const KernelCall& call) {
  const auto values = call.inputs[0].to_values();
  const auto b = call.inputs[1].to_values();
  const auto start = ints(call.inputs[2]);
  const auto end = ints(call.inputs[3]);
  const auto col = ints(call.inputs[4]);
  const std::int64_t K = call.inputs[1].shape()[0];
  const std::int64_t N = call.inputs[1].shape()[1];
  check_csr(start, end, col, K, "graph.spmm");
  const ir::Type& out = call.result_types[0];
  const DType accum = out.policy.accum;
  std::vector<double> result(start.size() * static_cast<std::size_t>(N));
  for (std::size_t m = 0; m < start.size(); ++m) {
    for (std::int64_t n = 0; n < N; ++n) {
      double acc = 0.0;
      for (std::int64_t j = start[m]; j < end[m]; ++j) {
        acc = fma_rounded(acc, values[static_cast<std::size_t>(j)], b[static_cast<std::size_t>(col[static_cast<std::size_t>(j)] * N + n)], accum);
      }
      result[m * static_cast<std::size_t>(N) + static_cast<std::size_t>(n)] = acc;
    }
  }
  return {make_result(result, out)};
}

std::vector<Tensor> run_sddmm(const KernelCall& call) {
  const auto x = call.inputs[0].to_values();
  const auto y = call.inputs[1].to_values();
  const auto start = ints(call.inputs[2]);
  const auto end = ints(call.inputs[3]);
  const auto col = ints(call.inputs[4]);
  const std::int64_t D = call.inputs[0].shape()[1];
  const std::int64_t K = call.inputs[1].shape()[1];
  check_csr(start, end, col, K, "graph.sddmm");
  const ir::Type& out = call.result_types[0];
  const DType accum = out.policy.accum;
  std::vector<double> result(col.size());
  for (std::size_t m = 0; m < start.size(); ++m) {
    for (std::int64_t j = start[m]; j < end[m]; ++j) {
      const std::int64_t c = col[static_cast<std::size_t>(j)];
      double acc = 0.0;
      for (std::int64_t d = 0; d < D; ++d) {
        acc = fma_rounded(acc, x[m * static_cast<std::size_t>(D) + static_cast<std::size_t>(d)], y[static_cast<std::size_t>(d * K + c)], accum);
      }
      result[static_cast<std::size_t>(j)] = acc;
    }
  }
  return {make_result(result, out)};
}

std::vector<std::string> operand_names(const char* a, const char* b) {
  std::vector<std::string> names = {a, b};
  for (const char* n : kPatternNames) names.push_back(n);
  return names;
}

}  // namespace

void register_sparse_ops(ir::Registry& r) {
  r.add(OpDef{
      .name = "graph.spmm",
      .summary = "CSR [M, K] (values + pattern) @ dense b [K, N], each row summed over its slots left to right.",
      .operands = operand_names("values", "b"),
      .infer =
          [](std::span<const ir::Type> in, const AttrMap&) {
            const std::string op = "graph.spmm";
            if (in.size() != 2 + kPatternOperands) {
              raise(ErrorCode::ArgumentInvalid, op + " takes values, b and 8 pattern operands, got " +
                                                    std::to_string(in.size()) + " operands");
            }
            NumericsPolicy p = float_policy(in[0].policy, in[1].policy, op);
            if (in[0].rank() != 1) raise(ErrorCode::ShapeMismatch, op + ": values must be 1-D, got " + shape_str(in[0].shape));
            if (in[1].rank() != 2) raise(ErrorCode::ShapeMismatch, op + ": b must be [K, N], got " + shape_str(in[1].shape));
            const Dim m = in[2].rank() == 1 ? in[2].shape[0] : Dim::fixed(0);
            check_pattern(in, 2, m, in[1].shape[0], in[0].shape[0], op);
            return std::vector<ir::Type>{ir::Type::tensor({m, in[1].shape[1]}, p)};
          },
      .reference = run_spmm,
  });
  r.add(OpDef{
      .name = "graph.sddmm",
      .summary = "(x [M, D] @ y [D, K]) sampled at a CSR pattern: one value per slot, d summed in order.",
      .operands = operand_names("x", "y"),
      .infer =
          [](std::span<const ir::Type> in, const AttrMap&) {
            const std::string op = "graph.sddmm";
            if (in.size() != 2 + kPatternOperands) {
              raise(ErrorCode::ArgumentInvalid, op + " takes x, y and 8 pattern operands, got " +
                                                    std::to_string(in.size()) + " operands");
            }
            NumericsPolicy p = float_policy(in[0].policy, in[1].policy, op);
            if (in[0].rank() != 2 || in[1].rank() != 2) {
              raise(ErrorCode::ShapeMismatch, op + ": x must be [M, D] and y [D, K], got " + shape_str(in[0].shape) +
                                                  " and " + shape_str(in[1].shape));
            }
            check_dim(in[1].shape[0], in[0].shape[1], op, "y's dim 0 (the contraction)");
            const Dim nnz = in[4].rank() == 1 ? in[4].shape[0] : Dim::fixed(0);
            check_pattern(in, 2, in[0].shape[0], in[1].shape[1], nnz, op);
            return std::vector<ir::Type>{ir::Type::tensor({nnz}, p)};
          },
      .reference = run_sddmm,
  });
}

}  // namespace tessera::graph
