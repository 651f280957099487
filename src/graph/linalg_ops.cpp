// Graph IR matrix products: graph.gemm and graph.matmul.
//
// Operands have rank >= 2: the last two dims are the matrix, the leading dims
// are batch dims that broadcast numpy-style. gemm takes `transpose_a` and
// `transpose_b` (swap an operand's last two dims first); matmul is gemm
// without them. a is [..., M, K] and b is [..., K, N] after the transposes;
// the two K dims must be equal (the same size, or the same symbol).
//
// Result policy: for floats, the operands' policy when they are identical,
// else promote_policies(a, b); graph.gemm's optional `out` attribute gives a
// float result a wider storage at the same accumulation (bf16 operands into
// an fp32 result: the accumulator rounded once, to fp32, instead of to bf16).
// Integer products are
// computed exactly and stored in the promoted policy's accumulation type
// (int32 by default, int64 for int64 operands), as sums of integers are
// (reduction_ops.cpp): a partial sum beyond 2^53 in magnitude or a result
// outside that type's range is an ArgumentError. bool and e8m0 operands are a
// DtypeError.
//
// Fixed order: for each output element (row-major), acc = 0; for k = 0 .. K-1
// in order, acc = acc + a[m, k] * b[k, n] rounded once to the accumulation
// type (a fused multiply-add in that type; the product is exact in double for
// operands of 32 bits or fewer, accumulate.h). Then acc is encoded to storage.
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

struct MatmulShapes {
  Shape batch;
  Dim m, n;
};

NumericsPolicy result_policy(const NumericsPolicy& a, const NumericsPolicy& b, const std::string& op) {
  if (a.storage == DType::bool_ || b.storage == DType::bool_) {
    raise(ErrorCode::DtypeUnsupported, op + " does not take bool operands; cast them to an integer or float first");
  }
  // Identical policies are kept as they are: promote_policies widens the
  // accumulation to the storage's default, which would turn a deliberate
  // fp16 @accum(fp16) product into an fp32-accumulated one.
  if (a.storage == DType::e8m0 || b.storage == DType::e8m0) promote_dtypes(a.storage, b.storage);  // DtypeError
  NumericsPolicy p = a == b ? a : promote_policies(a, b);
  if (!is_float(p.storage)) return default_policy(p.accum);
  return p;
}

// The `out` override: a float storage holding every value of the promoted
// storage, at the same accumulation and with default modifiers.
NumericsPolicy out_policy(const NumericsPolicy& promoted, const NumericsPolicy& out, const std::string& op) {
  const bool ok = is_float(promoted.storage) && is_float(out.storage) && out.accum == promoted.accum &&
                  bit_width(out.storage) >= bit_width(promoted.storage) &&
                  (out.storage == promoted.storage || out.storage == out.accum) &&
                  out.rounding == Rounding::nearest_even && out.overflow == Overflow::inf_nan && !out.loss_scale;
  if (!ok) {
    raise(ErrorCode::DtypeUnsupported, op + " out = " + print_policy(out) + " does not widen the product's " +
                                           print_policy(promoted) + "; it must be a float storage at the "
                                           "accumulation type (" + std::string(name(promoted.accum)) +
                                           ") with no rounding or scaling modifiers");
  }
  return out;
}

MatmulShapes check_shapes(const Shape& a, const Shape& b, bool ta, bool tb, const std::string& op) {
  if (a.size() < 2 || b.size() < 2) {
    raise(ErrorCode::ShapeMismatch, op + " needs operands of rank >= 2, got a " + shape_str(a) + " and b " +
                                        shape_str(b) + "; reshape vectors to [1, K] or [K, 1]");
  }
  std::size_t ra = a.size(), rb = b.size();
  std::size_t a_m = ta ? ra - 1 : ra - 2, a_k = ta ? ra - 2 : ra - 1;
  std::size_t b_k = tb ? rb - 1 : rb - 2, b_n = tb ? rb - 2 : rb - 1;
  if (a[a_k] != b[b_k]) {
    raise(ErrorCode::ShapeMismatch, op + " contraction dims differ: a (shape " + shape_str(a) + ") dim " +
                                        std::to_string(a_k) + " is " + a[a_k].str() + " but b (shape " + shape_str(b) +
                                        ") dim " + std::to_string(b_k) + " is " + b[b_k].str());
  }
  Shape batch_a(a.begin(), a.end() - 2), batch_b(b.begin(), b.end() - 2);
  return MatmulShapes{broadcast_shapes(batch_a, batch_b, "batch dims"), a[a_m], b[b_n]};
}

std::vector<Tensor> run_gemm(const KernelCall& call, bool ta, bool tb, const std::string& op) {
  const Tensor& a = call.inputs[0];
  const Tensor& b = call.inputs[1];
  const ir::Type& out = call.result_types[0];
  const auto& sa = a.shape();
  const auto& sb = b.shape();
  const std::size_t ra = sa.size(), rb = sb.size();
  const std::int64_t M = ta ? sa[ra - 1] : sa[ra - 2];
  const std::int64_t K = ta ? sa[ra - 2] : sa[ra - 1];
  const std::int64_t N = tb ? sb[rb - 2] : sb[rb - 1];
  // Strides of (m, k) in a and (k, n) in b within one matrix.
  const std::int64_t a_sm = ta ? 1 : K, a_sk = ta ? M : 1;
  const std::int64_t b_sk = tb ? 1 : N, b_sn = tb ? K : 1;

  const auto out_sizes = sizes_of(out);
  std::vector<std::int64_t> batch(out_sizes.begin(), out_sizes.end() - 2);
  // Broadcast batch offsets, in matrices, for each output batch element.
  auto a_batch = broadcast_offsets(std::vector<std::int64_t>(sa.begin(), sa.end() - 2), batch);
  auto b_batch = broadcast_offsets(std::vector<std::int64_t>(sb.begin(), sb.end() - 2), batch);

  const auto av = a.to_values();
  const auto bv = b.to_values();
  const DType accum = out.policy.accum;
  const bool integer = !is_float(out.dtype());
  const double limit = std::ldexp(1.0, 53);
  std::vector<double> result(static_cast<std::size_t>(numel_of(out_sizes)));
  std::size_t e = 0;
  for (std::size_t bi = 0; bi < a_batch.size(); ++bi) {
    const double* pa = av.data() + a_batch[bi] * M * K;
    const double* pb = bv.data() + b_batch[bi] * K * N;
    for (std::int64_t m = 0; m < M; ++m) {
      for (std::int64_t n = 0; n < N; ++n) {
        double acc = 0.0;
        if (integer) {
          for (std::int64_t k = 0; k < K; ++k) {
            const double x = pa[m * a_sm + k * a_sk];
            const double y = pb[k * b_sk + n * b_sn];
            acc += x * y;  // exact while every partial result stays within 2^53
            if (std::fabs(x * y) > limit || std::fabs(acc) > limit) {
              raise(ErrorCode::ArgumentInvalid, op + " of integers passed 2^53 in magnitude, beyond exact "
                                                     "accumulation; cast the operands to a float first");
            }
          }
        } else {
          // The canonical GEMM order (tessera/schedule/lower_to_tile.h), the
          // compiled kernels' on every backend: k in blocks of 256, each an
          // fma chain from zero; block sums added left to right into
          // superblocks of 256 blocks, superblock sums left to right. Every
          // step rounds once at the accumulation type.
          constexpr std::int64_t kBlock = 256;
          for (std::int64_t s0 = 0; s0 < K; s0 += kBlock * kBlock) {
            double super = 0.0;
            for (std::int64_t b0 = s0; b0 < std::min(K, s0 + kBlock * kBlock); b0 += kBlock) {
              double part = 0.0;
              for (std::int64_t k = b0; k < std::min(K, b0 + kBlock); ++k) {
                part = fma_rounded(part, pa[m * a_sm + k * a_sk], pb[k * b_sk + n * b_sn], accum);
              }
              super = add_rounded(super, part, accum);
            }
            acc = add_rounded(acc, super, accum);
          }
        }
        if (integer) {
          const DTypeInfo& inf = info(out.dtype());
          const double lo = inf.is_signed ? -std::ldexp(1.0, inf.bits - 1) : 0.0;
          const double hi = std::ldexp(1.0, inf.is_signed ? inf.bits - 1 : inf.bits);
          if (acc < lo || acc >= hi) {
            raise(ErrorCode::ArgumentInvalid, op + " result " + std::to_string(static_cast<long long>(acc)) +
                                                  " overflows its " + std::string(name(out.dtype())) +
                                                  " result; cast the operands to int64 or a float first");
          }
        }
        result[e++] = acc;
      }
    }
  }
  return {make_result(result, out)};
}

void add_gemm(ir::Registry& r, const std::string& op_name, bool has_transposes) {
  std::vector<ir::AttrSpec> specs;
  if (has_transposes) {
    specs = {bool_attr("transpose_a", false), bool_attr("transpose_b", false),
             ir::AttrSpec{.name = "out", .kind = ir::AttrKind::policy, .required = false,
                          .doc = "the result's policy, when not the operands' (a float storage at their "
                                 "accumulation, at least as wide as the promoted storage)"}};
  }
  auto flag = [has_transposes](const AttrMap& attrs, const char* attr) {
    return has_transposes && attrs.get_bool(attr);
  };
  r.add(OpDef{
      .name = op_name,
      .summary = has_transposes ? "Batched a @ b with optional transposes of either operand's last two dims."
                                : "Batched a @ b over the last two dims; leading dims broadcast.",
      .operands = {"a", "b"},
      .attrs = std::move(specs),
      .infer =
          [op_name, flag](std::span<const ir::Type> in, const AttrMap& attrs) {
            NumericsPolicy p = result_policy(in[0].policy, in[1].policy, op_name);
            if (attrs.has("out")) p = out_policy(p, attrs.get_policy("out"), op_name);
            auto s =
                check_shapes(in[0].shape, in[1].shape, flag(attrs, "transpose_a"), flag(attrs, "transpose_b"), op_name);
            Shape out = s.batch;
            out.push_back(s.m);
            out.push_back(s.n);
            return std::vector<ir::Type>{ir::Type::tensor(out, p)};
          },
      .reference =
          [op_name, flag](const KernelCall& call) {
            return run_gemm(call, flag(call.attrs, "transpose_a"), flag(call.attrs, "transpose_b"), op_name);
          },
  });
}

}  // namespace

void register_linalg_ops(ir::Registry& r) {
  add_gemm(r, "graph.gemm", true);
  add_gemm(r, "graph.matmul", false);
}

}  // namespace tessera::graph
