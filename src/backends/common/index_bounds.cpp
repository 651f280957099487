// IndexBounds (index_bounds.h): one forward walk over the kernel body.
#include "backends/common/index_bounds.h"

#include <algorithm>

#include "backends/common/c_lane_expr.h"

namespace tessera::codegen {

namespace {
constexpr std::uint64_t kPlainLimit = std::uint64_t{1} << 62;
}  // namespace

IndexBounds::IndexBounds(const ir::Operation& func, const std::unordered_set<std::string>& scalar_symbols,
                         std::uint64_t linear_id_limit)
    : scalar_symbols_(scalar_symbols), linear_id_limit_(linear_id_limit) {
  visit(ir::function_body(func));
}

const std::uint64_t* IndexBounds::bound(const ir::Value* v) const {
  auto it = bound_.find(v);
  return it == bound_.end() ? nullptr : &it->second;
}

void IndexBounds::visit(const ir::Block& block) {
  for (const auto& owned : block.ops()) {
    const ir::Operation& op = *owned;
    const std::string n = short_name(op);
    if (n == "for" && op.num_operands() >= 3) {
      const std::uint64_t* lo = bound(op.operand(0));
      const std::uint64_t* hi = bound(op.operand(1));
      if (lo && hi) bound_[op.region(0).block().argument(0)] = std::max(*lo, *hi);
    }
    for (std::size_t r = 0; r < op.num_regions(); ++r) visit(op.region(r).block());
    if (op.num_results() != 1 || !op.result(0)->type().is_lane() || is_float(op.result(0)->type().dtype()) ||
        op.result(0)->type().dtype() == DType::bool_)
      continue;
    const ir::Value* result = op.result(0);
    if (n == "const") {
      const ConstantValue c = constant_value(op);
      if (c.kind == ConstantValue::Kind::integer && c.integer >= 0) bound_[result] = static_cast<std::uint64_t>(c.integer);
    } else if (n == "linear_id") {
      bound_[result] = linear_id_limit_;
    } else if (n == "group_id" || n == "num_groups") {
      bound_[result] = kIndexLimit;
    } else if (n == "symbol") {
      if (scalar_symbols_.count(op.attrs().get_string("name")) == 0) bound_[result] = kIndexLimit;
    } else if ((n == "div" || n == "rem") && op.num_operands() == 2) {
      // By a positive constant c: a / c <= a, a % c <= min(a, c - 1).
      const std::uint64_t* a = bound(op.operand(0));
      const std::int64_t c = constant_integer(op.operand(1)).value_or(0);
      if (a == nullptr || c <= 0) continue;
      const auto cu = static_cast<std::uint64_t>(c);
      bound_[result] = n == "div" ? *a / cu : std::min(*a, cu - 1);
    } else if ((n == "add" || n == "mul" || n == "min") && op.num_operands() == 2) {
      const std::uint64_t* a = bound(op.operand(0));
      const std::uint64_t* b = bound(op.operand(1));
      if (n == "min") {
        if (a && b) bound_[result] = std::min(*a, *b);
        continue;
      }
      if (!a || !b) continue;
      const bool add = n == "add";
      const bool fits = add ? (*a < kPlainLimit && *b < kPlainLimit - *a)
                            : (*a == 0 || *b == 0 || *b < kPlainLimit / *a);
      if (fits) {
        bound_[result] = add ? *a + *b : *a * *b;
        plain_.insert(&op);
      }
    }
  }
}

}  // namespace tessera::codegen
