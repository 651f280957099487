// decode-fp8-attention (before pad-ragged-attention, where the blocked
// attention kernels run): an fp8 forward (graph.flash_attn on fp8_e4m3 or
// fp8_e5m2 codes) of at least kDecodeAheadRows query rows gets q, k and v
// cast to bf16 first (graph.cast: exact, bf16 holds every e4m3 and e5m2
// value) and runs as a bf16 problem with the same attributes: the scale
// (which carries q's and k's descales), v_scale and the result policy.
//
// Why (docs/design/0043-fp8-and-d256-blocked-attention.md): the blocked
// forward decodes fp8 tiles as it loads them, so a K or V block is decoded
// once per query block that reads it. At S = 8192 on an H200 that ran at
// 0.35-0.65x the bf16 forward's TFLOP/s; the casts ahead cost one pass over
// q, k and v (1 byte read, 2 written per element), small beside an
// O(S^2 D) kernel. With few query blocks (decoding against a KV cache) the
// kernel is bound by reading K and V, and decoding in the kernel reads half
// the bytes, so those stay fp8.
//
// The values are the same either way: both forms multiply the same decoded
// values on the tensor cores.
#include "schedule/templates/templates.h"
#include "tessera/ir/builder.h"
#include "tessera/schedule/passes.h"

namespace tessera::schedule {
namespace {

// Four query blocks of the default 64 rows: from there each K and V block
// would be decoded four times or more in the kernel.
constexpr std::int64_t kDecodeAheadRows = 4 * templates::kAttentionBlockRows;

}  // namespace

int decode_fp8_attention(ir::Operation& func, bool cuda) {
  // fp8 storage: the rule of every fp8 dtype is the same.
  if (!attention_blocks_wanted(cuda, DType::fp8_e4m3)) return 0;
  ir::Block& body = ir::function_body(func);
  std::vector<ir::Operation*> found;
  for (const auto& op : body.ops()) {
    if (op->name() != "graph.flash_attn" || !templates::is_fp8(op->operand(0)->type().dtype())) continue;
    if (!templates::blocked_attention_fits(*op)) continue;
    const ir::Dim& sq = op->operand(0)->type().shape[2];
    if (sq.is_symbolic() || sq.size < kDecodeAheadRows) continue;
    found.push_back(op.get());
  }
  for (ir::Operation* op : found) {
    ir::OpBuilder b(body);
    b.set_insertion_point(body.find(op));
    const SourceLocation at = op->location();
    std::vector<ir::Value*> operands;
    for (std::size_t i = 0; i < op->num_operands(); ++i) {
      NumericsPolicy p = op->operand(i)->type().policy;
      p.storage = DType::bf16;
      operands.push_back(b.create("graph.cast", {op->operand(i)}, {{"policy", p}}, at)->result(0));
    }
    ir::AttrMap attrs = op->attrs();
    // The result policy stays the fp8 op's (bf16 unless `out` says otherwise).
    attrs.set("out", op->result(0)->type().policy);
    ir::Operation* decoded = b.create(op->name(), operands, attrs, at);
    for (std::size_t r = 0; r < op->num_results(); ++r) op->result(r)->replace_all_uses_with(decoded->result(r));
    body.erase(op);
  }
  return static_cast<int>(found.size());
}

}  // namespace tessera::schedule
