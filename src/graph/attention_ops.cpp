// Graph IR attention: graph.flash_attn and graph.flash_attn_bwd
// (docs/design/0015-flash-attention.md).
//
//   flash_attn(q [B, Hq, Sq, D], k [B, Hkv, Sk, D], v [B, Hkv, Sk, D])
//       -> o [B, Hq, Sq, D], lse [B, Hq, Sq] (at the accumulation type)
//   flash_attn_bwd(q, k, v, delta, lse, do) -> dq, dk, dv
//       delta [B, Hq, Sq] (at the accumulation type) = rowsum(do * o)
//
// Attributes: scale (real, the caller's default is 1/sqrt(D)), causal, and
// dropout (the probability pd of dropping a probability, default 0) with the
// Philox stream (seed, offset) of its mask. The forward also takes v_scale
// (default 1: o = (a / l) * v_scale, v's descale for fp8 inputs) and out (o's
// policy, default q's: fp8 inputs give bf16 or fp32 results); a forward
// with either is forward-only (its VJP raises).
// Query head h reads key/value head h / (Hq / Hkv) (grouped-query
// attention). D is 64, 128 or 256.
//
// The causal mask is aligned to the bottom-right corner: query row i sees
// keys j <= i + (Sk - Sq). With Sq == Sk that is the usual lower triangle;
// with Sq < Sk (decoding against a KV cache) the last query row sees every
// key. Sq > Sk with causal would leave the first Sq - Sk rows without any
// key, a mask that cannot apply: it is an error.
//
// Padded problems (valid_queries, valid_keys; 0, the default, means all):
// the Schedule IR pass pad-ragged-attention pads ragged lengths up to whole
// blocks for the blocked kernels and writes these. Keys j >= valid_keys are
// seen by no query row (their dk and dv are 0), and the causal mask aligns
// the valid corner: row i sees keys j <= i + (valid_keys - valid_queries).
// Query rows past valid_queries are ordinary rows (they see every valid
// key); the pass zero-pads do, delta and lse, so in the backward they add
// nothing. With them the op's results on the valid rows are the unpadded
// op's. They are written after autodiff, so the autodiff rules refuse them,
// and they cannot combine with dropout, whose counters count the padding.
//
// Arithmetic, in the accumulation type `acc` (fp32 for bf16/fp16 and fp32
// storage, fp64 for fp64), each step rounded once, in this order; the
// compiled kernels (schedule/templates/attention.cpp) do exactly this, so
// results agree bit for bit:
//
//   forward, per query row i: m = -inf, l = 0, a[d] = 0; for each visible
//   key j in increasing order (online softmax, one key at a time):
//     s = q_i . k_j   (fma over d = 0 .. D-1)     x = s * scale
//     m' = max(m, x)  alpha = exp(m - m')         p = exp(x - m')
//     l = l * alpha + p (fma)                     a[d] = a[d] * alpha + p * v_j[d] (fma)
//     m = m'
//   o[d] = a[d] / l (then * v_scale when it is not 1), lse = m + log(l).
//
//   backward: delta_i is given (the VJP computes rowsum(do * o) with
//   graph.sum, once per query row), and for each visible (i, j)
//     p = exp(q_i . k_j * scale - lse_i)   dp = do_i . v_j   ds = p * (dp - delta_i)
//   (with dropout, the forward's p * v is pk * v and the backward's dp is dpm: below)
//   dq_i[d] = scale * sum over j (increasing) of ds * k_j[d]
//   dk_j[d] = scale * sum over (h in the group, then i increasing) of ds * q_i[d]
//   dv_j[d] =         sum over the same (h, i) of p * do_i[d]
//   every sum a chain of fmas from zero in that fixed order: each output
//   element is owned by one summation, no atomics, deterministic.
//
// exp and log are tessera::elementary's (the compiled kernels' too).
//
// Dropout (pd > 0) drops entries of the probability matrix P, as
// graph.dropout would on P materialized: with n = ((b Hq + h) Sq + i) Sk + j
// the row-major index of (b, h, i, j) in [B, Hq, Sq, Sk], the entry is kept
// iff u_n >= pd, u_n = (philox(seed, offset + n) >> 8) 2^-24 (graph/
// random_ops.cpp). With kp = 1 - pd rounded to acc, the forward accumulates
// pk = keep ? p / kp : 0 in place of p (the normalizer l keeps every p, and
// lse is the undropped one); the backward uses pk for dv and
// dpm = keep ? dp / kp : 0 in place of dp (delta = rowsum(do * o) still holds). So
// the mask is a pure function of (seed, offset, n): the backward redraws it,
// and the op stays deterministic (and pure) given its attributes.
#include <cmath>
#include <limits>

#include "graph/accumulate.h"
#include "graph/kernel_support.h"
#include "graph/op_families.h"
#include "graph/shape_rules.h"
#include "tessera/numerics/elementary.h"
#include "tessera/numerics/philox.h"
#include "tessera/support/error.h"

namespace tessera::graph {

namespace {

using ir::AttrMap;
using ir::KernelCall;
using ir::OpDef;

void check_dim(const Dim& got, const Dim& want, const std::string& op, const std::string& what) {
  if (got != want) raise(ErrorCode::ShapeMismatch, op + ": " + what + " is " + got.str() + " but should be " + want.str());
}

// The checked shapes of q, k, v (shared by both ops): returns the policy.
NumericsPolicy check_qkv(std::span<const ir::Type> in, const AttrMap& attrs, const std::string& op) {
  const char* names[3] = {"q", "k", "v"};
  for (std::size_t i = 0; i < 3; ++i) {
    if (in[i].rank() != 4) {
      raise(ErrorCode::ShapeMismatch, op + ": " + names[i] + " must be [B, H, S, D], got " + shape_str(in[i].shape));
    }
    const NumericsPolicy& p = in[i].policy;
    if (!is_float(p.storage) || p.storage == DType::e8m0 || !is_float(p.accum)) {
      raise(ErrorCode::DtypeUnsupported,
            op + ": " + names[i] + " must be floating point, got " + std::string(name(p.storage)));
    }
    if (!(p == in[0].policy)) {
      raise(ErrorCode::DtypeUnsupported, op + ": q, k and v must share one policy; " + names[i] + " is " +
                                             std::string(name(p.storage)) + " but q is " +
                                             std::string(name(in[0].policy.storage)));
    }
  }
  const auto& q = in[0].shape;
  const auto& k = in[1].shape;
  const auto& v = in[2].shape;
  check_dim(k[0], q[0], op, "k's batch dim");
  check_dim(v[0], q[0], op, "v's batch dim");
  check_dim(v[1], k[1], op, "v's head count");
  check_dim(v[2], k[2], op, "v's sequence length");
  if (q[3].is_symbolic() || !(q[3].is_fixed(64) || q[3].is_fixed(128) || q[3].is_fixed(256))) {
    raise(ErrorCode::ShapeMismatch, op + ": head dim D is " + q[3].str() + "; supported D are 64, 128 and 256");
  }
  check_dim(k[3], q[3], op, "k's head dim");
  check_dim(v[3], q[3], op, "v's head dim");
  if (q[1].is_symbolic() || k[1].is_symbolic()) {
    raise(ErrorCode::ShapeMismatch, op + ": head counts must be static, got Hq = " + q[1].str() + ", Hkv = " + k[1].str());
  }
  if (k[1].size <= 0 || q[1].size % k[1].size != 0) {
    raise(ErrorCode::ShapeMismatch, op + ": q has " + q[1].str() + " heads and k/v " + k[1].str() +
                                        "; Hq must be a positive multiple of Hkv (grouped-query attention)");
  }
  const double pd = attrs.get_real("dropout");
  if (!(pd >= 0.0 && pd < 1.0)) raise(ErrorCode::ArgumentInvalid, op + ": dropout must be in [0, 1), got " + std::to_string(pd));
  if (attrs.get_int("seed") < 0 || attrs.get_int("offset") < 0) {
    raise(ErrorCode::ArgumentInvalid, op + ": the dropout stream needs seed >= 0 and offset >= 0");
  }
  // The valid corner of a padded problem (0: the whole length).
  const std::int64_t vq = attrs.get_int("valid_queries"), vk = attrs.get_int("valid_keys");
  const auto check_valid = [&](std::int64_t valid, const Dim& dim, const char* what) {
    if (valid == 0) return;
    if (dim.is_symbolic() || valid < 0 || valid > dim.size) {
      raise(ErrorCode::ArgumentInvalid, op + ": " + what + " is " + std::to_string(valid) +
                                            "; it must be in [1, " + dim.str() + "] of a static length (0: all)");
    }
    if (pd != 0.0) {
      raise(ErrorCode::ArgumentInvalid, op + ": " + what + " cannot combine with dropout (the mask's counters would "
                                            "count the padding)");
    }
  };
  check_valid(vq, q[2], "valid_queries");
  check_valid(vk, k[2], "valid_keys");
  const std::int64_t sq = vq > 0 ? vq : q[2].size, sk = vk > 0 ? vk : k[2].size;
  if (attrs.get_bool("causal") && (vq > 0 || !q[2].is_symbolic()) && (vk > 0 || !k[2].is_symbolic()) && sq > sk) {
    raise(ErrorCode::ShapeMismatch, op + ": a causal mask aligned bottom-right cannot apply with Sq = " +
                                        std::to_string(sq) + " > Sk = " + std::to_string(sk) + ": the first " +
                                        std::to_string(sq - sk) + " query rows would see no key");
  }
  return in[0].policy;
}

std::vector<ir::AttrSpec> attn_attrs() {
  return {real_attr("scale"),     bool_attr("causal", false), real_attr("dropout", 0.0),
          int_attr("seed", 0),    int_attr("offset", 0),      int_attr("valid_queries", 0),
          int_attr("valid_keys", 0)};
}

// The forward's: attn_attrs(), v_scale and the optional result policy.
std::vector<ir::AttrSpec> forward_attrs() {
  std::vector<ir::AttrSpec> a = attn_attrs();
  a.push_back(real_attr("v_scale", 1.0));
  a.push_back(ir::AttrSpec{.name = "out", .kind = ir::AttrKind::policy, .required = false});
  return a;
}

// The backward's: attn_attrs() and the optional result policy.
std::vector<ir::AttrSpec> backward_attrs() {
  std::vector<ir::AttrSpec> a = attn_attrs();
  a.push_back(ir::AttrSpec{.name = "out", .kind = ir::AttrKind::policy, .required = false});
  return a;
}

// The `out` attribute: a float storage of a byte or more.
NumericsPolicy out_policy(const AttrMap& attrs, const std::string& op) {
  const NumericsPolicy& out = attrs.get_policy("out");
  if (!is_float(out.storage) || out.storage == DType::e8m0 || is_packed(out.storage)) {
    raise(ErrorCode::DtypeUnsupported,
          op + ": the result must be a floating-point storage of a byte or more, got " + std::string(name(out.storage)));
  }
  return out;
}

// o's policy: `out` when given (a float storage, rounding to nearest), else q's.
NumericsPolicy result_policy(const NumericsPolicy& q, const AttrMap& attrs, const std::string& op) {
  const double vs = attrs.get_real("v_scale");
  if (!std::isfinite(vs) || vs <= 0.0) {
    raise(ErrorCode::ArgumentInvalid, op + ": v_scale must be a positive finite number, got " + number_text(vs));
  }
  return attrs.has("out") ? out_policy(attrs, op) : q;
}

// One (batch, head) problem's geometry, in elements; VQ and VK the valid
// corner (Sq and Sk unless padded).
struct Geometry {
  std::int64_t B, Hq, Hkv, G, Sq, Sk, D;
  bool causal;
  std::int64_t VQ, VK;
  std::int64_t off() const { return VK - VQ; }  // query row i sees keys j <= i + off (causal)
  std::int64_t key_end(std::int64_t i) const { return causal ? std::min(VK, i + off() + 1) : VK; }
  // The first query row that sees key j (Sq: none).
  std::int64_t query_begin(std::int64_t j) const {
    if (j >= VK) return Sq;
    return causal ? std::max<std::int64_t>(0, j - off()) : 0;
  }
  std::size_t q_row(std::int64_t b, std::int64_t h, std::int64_t i) const {
    return static_cast<std::size_t>(((b * Hq + h) * Sq + i) * D);
  }
  std::size_t k_row(std::int64_t b, std::int64_t h, std::int64_t j) const {
    return static_cast<std::size_t>(((b * Hkv + h) * Sk + j) * D);
  }
  // The row-major index of (b, h, i, j) in [B, Hq, Sq, Sk]: the dropout counter.
  std::uint64_t entry(std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) const {
    return static_cast<std::uint64_t>(((b * Hq + h) * Sq + i) * Sk + j);
  }
};

Geometry geometry(const KernelCall& call) {
  const auto& q = call.inputs[0].shape();
  const auto& k = call.inputs[1].shape();
  const std::int64_t vq = call.attrs.get_int("valid_queries") > 0 ? call.attrs.get_int("valid_queries") : q[2];
  const std::int64_t vk = call.attrs.get_int("valid_keys") > 0 ? call.attrs.get_int("valid_keys") : k[2];
  if (call.attrs.get_bool("causal") && vq > vk) {
    raise(ErrorCode::ShapeMismatch, "graph.flash_attn: a causal mask aligned bottom-right cannot apply with Sq = " +
                                        std::to_string(vq) + " > Sk = " + std::to_string(vk));
  }
  return Geometry{q[0], q[1], k[1], q[1] / k[1], q[2], k[2], q[3], call.attrs.get_bool("causal"), vq, vk};
}

// The steps of the header's recipe, each rounded once to `acc`.
struct Steps {
  DType acc;
  double scale;
  double pd = 0.0;  // dropout probability
  double kp = 1.0;  // 1 - pd at acc
  std::uint64_t seed = 0, offset = 0;
  Steps(DType a, const AttrMap& attrs) : acc(a), scale(round_to(attrs.get_real("scale"), a)) {
    pd = attrs.get_real("dropout");
    kp = round_to(1.0 - pd, a);
    seed = static_cast<std::uint64_t>(attrs.get_int("seed"));
    offset = static_cast<std::uint64_t>(attrs.get_int("offset"));
  }
  // x (p or dp) of entry n of the probability matrix, dropped or scaled.
  double dropped(double x, std::uint64_t n) const {
    if (pd == 0.0) return x;
    const double u = static_cast<double>(random_bits32(seed, offset + n) >> 8) / 16777216.0;
    return u >= pd ? R(x / kp) : 0.0;
  }
  double R(double x) const { return round_to(x, acc); }
  double dot(const double* a, const double* b, std::int64_t D) const {
    double s = 0.0;
    for (std::int64_t d = 0; d < D; ++d) s = fma_rounded(s, a[d], b[d], acc);
    return s;
  }
  double max(double a, double b) const {
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
    return a > b ? a : b;
  }
  double exp(double x) const { return R(tessera::elementary::exp(x)); }
  double log(double x) const { return R(tessera::elementary::log(x)); }
  double sub(double a, double b) const { return R(a - b); }
  double mul(double a, double b) const { return R(a * b); }
};

std::vector<Tensor> run_forward(const KernelCall& call) {
  const Geometry g = geometry(call);
  const auto q = call.inputs[0].to_values();
  const auto k = call.inputs[1].to_values();
  const auto v = call.inputs[2].to_values();
  const ir::Type& out = call.result_types[0];
  const Steps st(call.inputs[0].policy().accum, call.attrs);
  const double v_scale = st.R(call.attrs.get_real("v_scale"));
  std::vector<double> o(q.size()), lse(q.size() / static_cast<std::size_t>(g.D));
  std::vector<double> a(static_cast<std::size_t>(g.D));
  for (std::int64_t b = 0; b < g.B; ++b) {
    for (std::int64_t h = 0; h < g.Hq; ++h) {
      for (std::int64_t i = 0; i < g.Sq; ++i) {
        const double* qi = &q[g.q_row(b, h, i)];
        double m = -std::numeric_limits<double>::infinity(), l = 0.0;
        std::fill(a.begin(), a.end(), 0.0);
        for (std::int64_t j = 0; j < g.key_end(i); ++j) {
          const double x = st.mul(st.dot(qi, &k[g.k_row(b, h / g.G, j)], g.D), st.scale);
          const double mn = st.max(m, x);
          const double alpha = st.exp(st.sub(m, mn));
          const double p = st.exp(st.sub(x, mn));
          l = fma_rounded(p, l, alpha, st.acc);
          const double* vj = &v[g.k_row(b, h / g.G, j)];
          const double pk = st.dropped(p, g.entry(b, h, i, j));
          for (std::int64_t d = 0; d < g.D; ++d) {
            a[static_cast<std::size_t>(d)] = fma_rounded(st.mul(pk, vj[d]), a[static_cast<std::size_t>(d)], alpha, st.acc);
          }
          m = mn;
        }
        for (std::int64_t d = 0; d < g.D; ++d) {
          const double od = st.R(a[static_cast<std::size_t>(d)] / l);
          o[g.q_row(b, h, i) + static_cast<std::size_t>(d)] = v_scale == 1.0 ? od : st.mul(od, v_scale);
        }
        lse[g.q_row(b, h, i) / static_cast<std::size_t>(g.D)] = st.R(m + st.log(l));
      }
    }
  }
  return {make_result(o, out), make_result(lse, call.result_types[1])};
}

std::vector<Tensor> run_backward(const KernelCall& call) {
  const Geometry g = geometry(call);
  const auto q = call.inputs[0].to_values();
  const auto k = call.inputs[1].to_values();
  const auto v = call.inputs[2].to_values();
  const auto delta_of = call.inputs[3].to_values();  // one per query row
  const auto lse = call.inputs[4].to_values();
  const auto dout = call.inputs[5].to_values();
  const DType acc = call.result_types[0].policy.accum;
  const Steps st(acc, call.attrs);
  const std::size_t D = static_cast<std::size_t>(g.D);
  // pk (p, dropped) and ds of one (query row, key) pair, exactly as the compiled lanes compute them.
  auto pair = [&](std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j, double delta, double& pk, double& ds) {
    const std::size_t qi = g.q_row(b, h, i), kj = g.k_row(b, h / g.G, j);
    const double x = st.mul(st.dot(&q[qi], &k[kj], g.D), st.scale);
    const double p = st.exp(st.sub(x, lse[qi / D]));
    const double dp = st.dot(&dout[qi], &v[kj], g.D);
    pk = st.dropped(p, g.entry(b, h, i, j));
    ds = st.mul(p, st.sub(st.dropped(dp, g.entry(b, h, i, j)), delta));
  };
  std::vector<double> dq(q.size()), dk(k.size()), dv(k.size());
  std::vector<double> acc_q(D), acc_k(D), acc_v(D);
  for (std::int64_t b = 0; b < g.B; ++b) {
    for (std::int64_t h = 0; h < g.Hq; ++h) {
      for (std::int64_t i = 0; i < g.Sq; ++i) {
        const std::size_t qi = g.q_row(b, h, i);
        const double delta = delta_of[qi / D];
        std::fill(acc_q.begin(), acc_q.end(), 0.0);
        for (std::int64_t j = 0; j < g.key_end(i); ++j) {
          double pk, ds;
          pair(b, h, i, j, delta, pk, ds);
          const double* kj = &k[g.k_row(b, h / g.G, j)];
          for (std::size_t d = 0; d < D; ++d) acc_q[d] = fma_rounded(acc_q[d], ds, kj[d], acc);
        }
        for (std::size_t d = 0; d < D; ++d) dq[qi + d] = st.mul(acc_q[d], st.scale);
      }
    }
    for (std::int64_t hk = 0; hk < g.Hkv; ++hk) {
      for (std::int64_t j = 0; j < g.Sk; ++j) {
        std::fill(acc_k.begin(), acc_k.end(), 0.0);
        std::fill(acc_v.begin(), acc_v.end(), 0.0);
        for (std::int64_t h = hk * g.G; h < (hk + 1) * g.G; ++h) {
          for (std::int64_t i = g.query_begin(j); i < g.Sq; ++i) {
            const std::size_t qi = g.q_row(b, h, i);
            const double delta = delta_of[qi / D];
            double pk, ds;
            pair(b, h, i, j, delta, pk, ds);
            for (std::size_t d = 0; d < D; ++d) {
              acc_v[d] = fma_rounded(acc_v[d], pk, dout[qi + d], acc);
              acc_k[d] = fma_rounded(acc_k[d], ds, q[qi + d], acc);
            }
          }
        }
        const std::size_t kj = g.k_row(b, hk, j);
        for (std::size_t d = 0; d < D; ++d) {
          dk[kj + d] = st.mul(acc_k[d], st.scale);
          dv[kj + d] = acc_v[d];
        }
      }
    }
  }
  return {make_result(dq, call.result_types[0]), make_result(dk, call.result_types[1]),
          make_result(dv, call.result_types[2])};
}

ir::Type lse_type(const ir::Type& q, const NumericsPolicy& p) {
  return ir::Type::tensor({q.shape[0], q.shape[1], q.shape[2]}, default_policy(p.accum));
}

}  // namespace

void register_attention_ops(ir::Registry& r) {
  r.add(OpDef{
      .name = "graph.flash_attn",
      .summary = "softmax(q k^T * scale, causal bottom-right) v per head (grouped-query), with the logsumexp per "
                 "query row; online softmax, never the S x S matrix.",
      .operands = {"q", "k", "v"},
      .attrs = forward_attrs(),
      .num_results = 2,
      .infer =
          [](std::span<const ir::Type> in, const AttrMap& attrs) {
            const std::string op = "graph.flash_attn";
            if (in.size() != 3) raise(ErrorCode::ArgumentInvalid, op + " takes q, k and v, got " + std::to_string(in.size()) + " operands");
            const NumericsPolicy p = check_qkv(in, attrs, op);
            return std::vector<ir::Type>{ir::Type::tensor(in[0].shape, result_policy(p, attrs, op)), lse_type(in[0], p)};
          },
      .reference = run_forward,
  });
  r.add(OpDef{
      .name = "graph.flash_attn_bwd",
      .summary = "dq, dk, dv of graph.flash_attn from q, k, v, delta = rowsum(do * o), its lse, and do; fixed-order "
                 "sums, no atomics.",
      .operands = {"q", "k", "v", "delta", "lse", "do"},
      .attrs = backward_attrs(),
      .num_results = 3,
      .infer =
          [](std::span<const ir::Type> in, const AttrMap& attrs) {
            const std::string op = "graph.flash_attn_bwd";
            if (in.size() != 6) {
              raise(ErrorCode::ArgumentInvalid, op + " takes q, k, v, delta, lse and do, got " + std::to_string(in.size()) + " operands");
            }
            const NumericsPolicy p = check_qkv(in, attrs, op);
            if (in[5].shape != in[0].shape || !(in[5].policy == p)) {
              raise(ErrorCode::ShapeMismatch, op + ": do must be q's type " +
                                                  ir::print_type(ir::Type::tensor(in[0].shape, p)) + ", got " +
                                                  ir::print_type(in[5]));
            }
            // delta and lse: one value per query row, at the accumulation type.
            const ir::Type rows = lse_type(in[0], p);
            for (std::size_t i : {3, 4}) {
              if (in[i].shape != rows.shape || in[i].policy.storage != rows.policy.storage) {
                raise(ErrorCode::ShapeMismatch, op + ": " + (i == 3 ? "delta" : "lse") + " must be " +
                                                    ir::print_type(rows) + ", got " + ir::print_type(in[i]));
              }
            }
            // The gradients' policy: `out` when given (the VJP of bf16/fp16 attention asks for the
            // fp32 tangents while the operands stay at their storage), else q's.
            const NumericsPolicy grads = attrs.has("out") ? out_policy(attrs, op) : p;
            return std::vector<ir::Type>{ir::Type::tensor(in[0].shape, grads), ir::Type::tensor(in[1].shape, grads),
                                         ir::Type::tensor(in[2].shape, grads)};
          },
      .reference = run_backward,
  });
}

}  // namespace tessera::graph
