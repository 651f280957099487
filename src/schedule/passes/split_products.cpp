// split-fp32-products (CUDA executables): fp32 products whose operands are
// bf16 values run as bf16 products on tensor cores.
//
// Autodiff's cotangents are fp32 (docs/design/0004, decision 6), so the
// backward products of a bf16 model are fp32 x fp32 GEMMs whose operands
// are either exact casts of bf16 primals or fp32 cotangents; on CUDA the
// fp32 GEMM runs the scalar path. The rewrite, for gemm/matmul with fp32
// operands and result:
//   - both operands casts of bf16 values: one gemm of the bf16 values with
//     an fp32 result (`out`): the same exact products, accumulated in fp32;
//   - one operand such a cast, the other (w) fp32: w is split exactly into
//     three bf16 pieces, p0 = bf16(w), p1 = bf16(w - p0), p2 = bf16(w - p0 -
//     p1) (each difference is exact in fp32; p0 + p1 + p2 keeps w's 24
//     significant bits), and the result is (g2 + g1) + g0 for the three
//     bf16 x bf16 products g_i with fp32 results.
// Every product of bf16 values is exact in fp32, so the results are fp32
// products accumulated in fp32, in the tensor cores' order (a function of
// the shape alone), as every tensor-core GEMM of a CUDA executable already
// is; they are not the CPU's bits. Edge cases of the split: a w within 2^-9
// of fp32's largest finite value rounds to infinity in bf16 and makes the
// element NaN, as does an infinite w (whose fp32 product would be infinite).
#include "tessera/ir/builder.h"
#include "tessera/schedule/passes.h"

namespace tessera::schedule {
namespace {

const NumericsPolicy kF32 = default_policy(DType::fp32);
const NumericsPolicy kBf16 = default_policy(DType::bf16);

bool is_product(const ir::Operation& op) {
  return op.name() == "graph.gemm" || op.name() == "graph.matmul";
}

// The bf16 value v is an exact cast of, or nullptr.
ir::Value* bf16_source(ir::Value* v) {
  const ir::Operation* def = v->defining_op();
  if (def == nullptr || def->name() != "graph.cast") return nullptr;
  ir::Value* src = def->operand(0);
  return src->type().policy == kBf16 ? src : nullptr;
}

bool flag(const ir::Operation& op, const char* name) {
  const ir::Attribute* a = op.attrs().find(name);
  return a && std::get<bool>(*a);
}

}  // namespace

int split_fp32_products(ir::Operation& func) {
  ir::Block& body = ir::function_body(func);
  std::vector<ir::Operation*> products;
  for (const auto& op : body.ops()) {
    if (is_product(*op) && op->result(0)->type().policy == kF32 && op->operand(0)->type().policy == kF32 &&
        op->operand(1)->type().policy == kF32 && !op->attrs().has("out")) {
      products.push_back(op.get());
    }
  }
  int rewritten = 0;
  for (ir::Operation* op : products) {
    ir::Value* a = op->operand(0);
    ir::Value* b = op->operand(1);
    ir::Value* na = bf16_source(a);
    ir::Value* nb = bf16_source(b);
    if (na == nullptr && nb == nullptr) continue;
    ir::OpBuilder builder(body);
    builder.set_insertion_point(body.find(op));
    const SourceLocation& at = op->location();
    auto make = [&](std::string_view name, std::vector<ir::Value*> operands, ir::AttrMap attrs = {}) {
      return builder.create(name, std::move(operands), std::move(attrs), at)->result(0);
    };
    auto product = [&](ir::Value* x, ir::Value* y) {
      return make("graph.gemm", {x, y},
                  {{"transpose_a", flag(*op, "transpose_a")}, {"transpose_b", flag(*op, "transpose_b")}, {"out", kF32}});
    };
    ir::Value* result = nullptr;
    if (na != nullptr && nb != nullptr) {
      result = product(na, nb);
    } else {
      ir::Value* wide = na != nullptr ? b : a;
      std::vector<ir::Value*> pieces;
      ir::Value* rest = wide;
      for (int k = 0; k < 3; ++k) {
        ir::Value* piece = make("graph.cast", {rest}, {{"policy", kBf16}});
        pieces.push_back(piece);
        if (k < 2) rest = make("graph.sub", {rest, make("graph.cast", {piece}, {{"policy", kF32}})});
      }
      std::vector<ir::Value*> partial;
      for (ir::Value* piece : pieces) partial.push_back(na != nullptr ? product(na, piece) : product(piece, nb));
      result = make("graph.add", {make("graph.add", {partial[2], partial[1]}), partial[0]});
    }
    op->result(0)->replace_all_uses_with(result);
    body.erase(op);
    ++rewritten;
  }
  return rewritten;
}

}  // namespace tessera::schedule
