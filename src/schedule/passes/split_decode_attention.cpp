// split-decode-attention (before pad-ragged-attention, where the blocked
// attention kernels run): a graph.flash_attn forward with few query rows per
// head (decoding against a KV cache) is rewritten so that it fills the GPU
// and reads each key/value head once (docs/design/0045-split-decode-attention.md):
//
//   fold   the g = Hq / Hkv query heads that read one key/value head become
//          g Sq query rows of one head: q [B, Hq, Sq, D] is reshaped to
//          [B, Hkv, g Sq, D] (query head h reads key head h / g, so the
//          heads of a group are adjacent). Without the fold each query head
//          walks its K and V on its own: the cache is read g times.
//   split  the Sk keys become n chunks of c = Sk / n keys, each a head of
//          its own: k, v [B, Hkv, Sk, D] reshape to [B, Hkv n, c, D], q is
//          broadcast to every chunk, and one flash_attn (fp32 results)
//          gives each chunk's normalized partial o_i and its logsumexp
//          lse_i. A combine in plain Graph IR merges the chunks in a fixed
//          order: m = max_i lse_i, w_i = exp(lse_i - m), s = sum_i w_i,
//          o = (sum_i w_i o_i) / s, lse = m + log(s). Without the split a
//          decode step of one sequence runs B Hkv blocks on a GPU of 132
//          SMs, each walking the whole cache.
//
// Which problems: every row of a group must see the same keys (not causal,
// or one query row, whose bottom-right causal mask hides nothing), the
// folded rows must fit one query block, and dropout is excluded by
// blocked_attention_fits. n depends on the shape alone (B, Hkv, Sk), never
// on the device, so the result's bits are the same on every GPU and run:
// caches of kMinSplitCache keys or more, enough chunks for
// kSplitTargetBlocks blocks, each of at least kMinSplitKeys keys, n dividing
// Sk, and a chunk padded to whole key blocks (pad-ragged-attention, after
// this pass) by at most an eighth.
#include "schedule/templates/templates.h"
#include "tessera/ir/builder.h"
#include "tessera/schedule/passes.h"

namespace tessera::schedule {
namespace {

// Two blocks per SM of a 132-SM Hopper part; fixed, so the chunking (and
// with it the summation order) depends on the problem's shape alone.
constexpr std::int64_t kSplitTargetBlocks = 256;
// Two key blocks of 64: a chunk shorter than that spends more on loading
// its queries and on the combine than on its keys.
constexpr std::int64_t kMinSplitKeys = 128;
// Caches shorter than this are not split: the split adds six small kernels
// (q's broadcast, the cut of lse and the combine), which cost more than the
// walk they save there. On an H200 (B = 1, Hq = 32, Hkv = 8, D = 128; a
// call's time, CUDA graph replay) 1024 keys took 143 us split against 65
// whole, 8192 keys 186 against 190, while the attention kernel itself ran
// 3x faster split (37 us against 114).
constexpr std::int64_t kMinSplitCache = 4096;

using ir::Dim;
using ir::Value;

Value* reshape(ir::OpBuilder& b, Value* x, ir::Shape to, const SourceLocation& at) {
  return b.create("graph.reshape", {x}, {{"shape", std::move(to)}}, at)->result(0);
}

Value* unary(ir::OpBuilder& b, const char* op, Value* x, const SourceLocation& at) {
  return b.create(op, {x}, {}, at)->result(0);
}

Value* binary(ir::OpBuilder& b, const char* op, Value* x, Value* y, const SourceLocation& at) {
  return b.create(op, {x, y}, {}, at)->result(0);
}

Value* reduce_chunks(ir::OpBuilder& b, const char* op, Value* x, bool keepdims, const SourceLocation& at) {
  return b.create(op, {x}, {{"axes", std::vector<std::int64_t>{2}}, {"keepdims", keepdims}}, at)->result(0);
}

// The number of key chunks for `heads` query blocks over sk keys with key
// blocks of bn: 1 when splitting does not pay or no chunking fits.
std::int64_t key_chunks(std::int64_t heads, std::int64_t sk, std::int64_t bn) {
  if (sk < kMinSplitCache) return 1;
  const std::int64_t wanted = (kSplitTargetBlocks + heads - 1) / heads;
  for (std::int64_t n = std::min(wanted, sk / kMinSplitKeys); n >= 2; --n) {
    if (sk % n != 0) continue;
    const std::int64_t c = sk / n, padded = (c + bn - 1) / bn * bn;
    if (padded * 8 <= c * 9) return n;
  }
  return 1;
}

struct DecodeShape {
  std::int64_t B, Hq, Hkv, Sq, Sk, D;
  std::int64_t g() const { return Hq / Hkv; }
  std::int64_t rows() const { return g() * Sq; }  // query rows per key head after the fold
};

// The shape of a forward this pass takes, or nullopt.
std::optional<DecodeShape> decode_shape(const ir::Operation& op, bool cuda, std::int64_t bm) {
  if (op.name() != "graph.flash_attn" || !attention_blocks_wanted(cuda, op.operand(0)->type().dtype()) ||
      !templates::blocked_attention_fits(op)) {
    return std::nullopt;
  }
  if (op.attrs().get_int("valid_queries") != 0 || op.attrs().get_int("valid_keys") != 0) return std::nullopt;
  const ir::Shape& q = op.operand(0)->type().shape;
  const ir::Shape& k = op.operand(1)->type().shape;
  for (const Dim& d : {q[0], q[2], k[2]}) {
    if (d.is_symbolic() || d.size == 0) return std::nullopt;
  }
  const DecodeShape s{q[0].size, q[1].size, k[1].size, q[2].size, k[2].size, q[3].size};
  if (op.attrs().get_bool("causal") && s.Sq != 1) return std::nullopt;
  if (s.rows() > bm) return std::nullopt;
  return s;
}

}  // namespace

int split_decode_attention(ir::Operation& func, bool cuda) {
  if (!switch_from_env("TESSERA_ATTENTION_SPLIT").value_or(true)) return 0;
  const std::vector<std::int64_t> tile =
      attention_tile_from_env().value_or(std::vector<std::int64_t>{templates::kAttentionBlockRows,
                                                                   templates::kAttentionBlockKeys});
  ir::Block& body = ir::function_body(func);
  struct Found {
    ir::Operation* op;
    DecodeShape s;
    std::int64_t n;  // key chunks
  };
  std::vector<Found> found;
  for (const auto& op : body.ops()) {
    const std::optional<DecodeShape> s = decode_shape(*op, cuda, tile[0]);
    if (!s) continue;
    const std::int64_t n = key_chunks(s->B * s->Hkv, s->Sk, tile[1]);
    if (s->g() == 1 && n == 1) continue;
    found.push_back(Found{op.get(), *s, n});
  }
  for (auto [op, s, n] : found) {
    ir::OpBuilder b(body);
    b.set_insertion_point(body.find(op));
    const SourceLocation at = op->location();
    const std::int64_t r = s.rows(), c = s.Sk / n;
    Value* q = reshape(b, op->operand(0), ir::fixed_shape({s.B, s.Hkv, r, s.D}), at);
    Value* k = op->operand(1);
    Value* v = op->operand(2);
    ir::AttrMap attrs = op->attrs();
    attrs.set("causal", false);  // one query row: the bottom-right mask hides nothing
    if (n > 1) {
      // Chunk i of key head h is head h n + i; its query rows are head h's.
      Value* q1 = reshape(b, q, ir::fixed_shape({s.B, s.Hkv, 1, r, s.D}), at);
      Value* qn = b.create("graph.broadcast_to", {q1}, {{"shape", ir::fixed_shape({s.B, s.Hkv, n, r, s.D})}}, at)->result(0);
      q = reshape(b, qn, ir::fixed_shape({s.B, s.Hkv * n, r, s.D}), at);
      k = reshape(b, k, ir::fixed_shape({s.B, s.Hkv * n, c, s.D}), at);
      v = reshape(b, v, ir::fixed_shape({s.B, s.Hkv * n, c, s.D}), at);
      NumericsPolicy partial = op->result(0)->type().policy;
      partial.storage = DType::fp32;  // the partials keep the accumulator's precision for the combine
      attrs.set("out", partial);
    }
    ir::Operation* split = b.create("graph.flash_attn", {q, k, v}, attrs, at);
    Value* o = split->result(0);
    Value* lse = split->result(1);
    if (n > 1) {
      Value* o_parts = reshape(b, o, ir::fixed_shape({s.B, s.Hkv, n, r, s.D}), at);
      Value* lse_parts = reshape(b, lse, ir::fixed_shape({s.B, s.Hkv, n, r}), at);
      Value* m = reduce_chunks(b, "graph.max", lse_parts, true, at);                          // [B, Hkv, 1, r]
      Value* w = unary(b, "graph.exp", binary(b, "graph.sub", lse_parts, m, at), at);      // [B, Hkv, n, r]
      Value* total = reduce_chunks(b, "graph.sum", w, true, at);                              // [B, Hkv, 1, r]
      Value* w5 = reshape(b, w, ir::fixed_shape({s.B, s.Hkv, n, r, 1}), at);
      Value* weighted = reduce_chunks(b, "graph.sum", binary(b, "graph.mul", o_parts, w5, at), false, at);
      o = binary(b, "graph.div", weighted, reshape(b, total, ir::fixed_shape({s.B, s.Hkv, r, 1}), at), at);
      lse = binary(b, "graph.add", m, unary(b, "graph.log", total, at), at);
      const NumericsPolicy& want = op->result(0)->type().policy;
      if (!(o->type().policy == want)) o = b.create("graph.cast", {o}, {{"policy", want}}, at)->result(0);
    }
    op->result(0)->replace_all_uses_with(reshape(b, o, op->result(0)->type().shape, at));
    op->result(1)->replace_all_uses_with(reshape(b, lse, op->result(1)->type().shape, at));
    body.erase(op);
  }
  return static_cast<int>(found.size());
}

}  // namespace tessera::schedule
