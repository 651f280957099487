// pad-ragged-attention (before partitioning, where the blocked attention
// kernels run): the blocked kernels take whole blocks of BM query rows and
// BN keys, so a sequence length that is not a multiple of its block (1000,
// 77, a prompt of any length) left attention on the scalar lane kernels,
// hundreds of times slower on a GPU. This pass pads such a problem instead
// (docs/design/0041-ragged-attention.md):
//
//   forward   q, k, v zero-padded along S to whole blocks (graph.slice_embed);
//             graph.flash_attn {valid_queries = Sq, valid_keys = Sk}; o and
//             lse cut back to Sq rows (graph.slice {copy = true}: a kernel).
//   backward  q, k, v, delta, lse and do zero-padded the same way;
//             graph.flash_attn_bwd with the same attributes; dq, dk, dv
//             cut back the same way.
//
// valid_keys hides the padding keys from every row and valid_queries keeps
// the causal mask on the valid corner (graph/attention_ops.cpp); padding
// query rows are ordinary rows whose zero do adds nothing to dk and dv. So
// the valid rows get the unpadded op's values: bit for bit on the lane
// kernels, and within the blocked kernels' tensor-core numerics there.
#include "schedule/templates/templates.h"
#include "schedule/variant_overrides.h"
#include "tessera/ir/builder.h"
#include "tessera/schedule/passes.h"

namespace tessera::schedule {
namespace {

// x zero-padded along `axis` to `length` (x itself when it already has it).
ir::Value* padded(ir::OpBuilder& b, ir::Value* x, std::size_t axis, std::int64_t length, const SourceLocation& at) {
  const ir::Shape& shape = x->type().shape;
  if (shape[axis].size == length) return x;
  ir::Shape to = shape;
  to[axis] = ir::Dim::fixed(length);
  std::vector<std::int64_t> starts(shape.size(), 0), stops;
  for (const ir::Dim& d : shape) stops.push_back(d.size);
  return b.create("graph.slice_embed", {x}, {{"shape", to}, {"starts", starts}, {"stops", stops}}, at)->result(0);
}

// The first `length` entries of x along `axis`, written by a copy kernel
// (graph.slice {copy = true}): a plain slice is a strided view, which a GPU
// consumer would gather through the host and a CUDA graph could not capture.
ir::Value* sliced(ir::OpBuilder& b, ir::Value* x, std::size_t axis, std::int64_t length, const SourceLocation& at) {
  const ir::Shape& shape = x->type().shape;
  if (shape[axis].size == length) return x;
  std::vector<std::int64_t> starts(shape.size(), 0), stops;
  for (const ir::Dim& d : shape) stops.push_back(d.size);
  stops[axis] = length;
  return b.create("graph.slice", {x}, {{"starts", starts}, {"stops", stops}, {"copy", true}}, at)->result(0);
}

std::int64_t round_up(std::int64_t n, std::int64_t block) { return (n + block - 1) / block * block; }

}  // namespace

bool attention_blocks_wanted(bool cuda, DType storage) {
  if (const std::optional<bool> knob = switch_from_env("TESSERA_ATTENTION_BLOCKED")) return *knob;
  return templates::attention_as_on_the_cpu(cuda, storage) || cuda_tile_default_enabled();
}

int pad_ragged_attention(ir::Operation& func, bool cuda) {
  ir::Block& body = ir::function_body(func);
  std::vector<std::pair<ir::Operation*, std::vector<std::int64_t>>> found;  // with its blocks
  for (const auto& op : body.ops()) {
    const bool forward = op->name() == "graph.flash_attn";
    if (!forward && op->name() != "graph.flash_attn_bwd") continue;
    if (!attention_blocks_wanted(cuda, op->operand(0)->type().dtype())) continue;
    if (!templates::blocked_attention_fits(*op)) continue;
    if (op->attrs().get_int("valid_queries") != 0 || op->attrs().get_int("valid_keys") != 0) continue;
    const ir::Dim& sq = op->operand(0)->type().shape[2];
    const ir::Dim& sk = op->operand(1)->type().shape[2];
    if (sq.is_symbolic() || sk.is_symbolic() || sq.size == 0 || sk.size == 0) continue;
    const std::vector<std::int64_t> tile = attention_blocks(*op, cuda);
    if (sq.size % tile[0] == 0 && sk.size % tile[1] == 0) continue;
    found.emplace_back(op.get(), tile);
  }
  for (const auto& [op, tile] : found) {
    ir::OpBuilder b(body);
    b.set_insertion_point(body.find(op));
    const SourceLocation at = op->location();
    const std::int64_t sq = op->operand(0)->type().shape[2].size, sk = op->operand(1)->type().shape[2].size;
    const std::int64_t pq = round_up(sq, tile[0]), pk = round_up(sk, tile[1]);
    std::vector<ir::Value*> operands;
    for (std::size_t i = 0; i < op->num_operands(); ++i) {
      // k and v (operands 1, 2) pad along the keys; q, delta, lse and do along the queries.
      operands.push_back(padded(b, op->operand(i), 2, i == 1 || i == 2 ? pk : pq, at));
    }
    ir::AttrMap attrs = op->attrs();
    attrs.set("valid_queries", sq);
    attrs.set("valid_keys", sk);
    ir::Operation* padded_op = b.create(op->name(), operands, attrs, at);
    const bool forward = op->name() == "graph.flash_attn";
    for (std::size_t r = 0; r < op->num_results(); ++r) {
      // The forward's o and lse have q's rows; the backward's dk and dv (results 1, 2) k's.
      const std::int64_t length = !forward && (r == 1 || r == 2) ? sk : sq;
      op->result(r)->replace_all_uses_with(sliced(b, padded_op->result(r), 2, length, at));
    }
    body.erase(op);
  }
  return static_cast<int>(found.size());
}

}  // namespace tessera::schedule
