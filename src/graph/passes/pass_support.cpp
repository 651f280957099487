// Helpers shared by the Graph IR passes (see pass_support.h).
#include "graph/passes/pass_support.h"

#include <bit>
#include <cstdint>
#include <type_traits>

#include "tessera/ir/dialect.h"

namespace tessera::graph {

namespace {

void walk_block(ir::Block& block, const std::function<void(ir::Block&)>& fn) {
  for (auto& op : block.ops()) {
    for (std::size_t r = 0; r < op->num_regions(); ++r) {
      ir::Region& region = op->region(r);
      for (std::size_t b = 0; b < region.num_blocks(); ++b) walk_block(region.block(b), fn);
    }
  }
  fn(block);
}

std::uint64_t bits_of(double v) {
  return std::bit_cast<std::uint64_t>(v);
}

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (bits_of(a[i]) != bits_of(b[i])) return false;
  }
  return true;
}

bool same_policy(const NumericsPolicy& a, const NumericsPolicy& b) {
  if (a.storage != b.storage || a.accum != b.accum || a.rounding != b.rounding || a.overflow != b.overflow) {
    return false;
  }
  if (a.loss_scale.has_value() != b.loss_scale.has_value()) return false;
  return !a.loss_scale || bits_of(*a.loss_scale) == bits_of(*b.loss_scale);
}

bool identical(const ir::Attribute& a, const ir::Attribute& b) {
  if (a.index() != b.index()) return false;
  return std::visit(
      [&](const auto& x) -> bool {
        using T = std::decay_t<decltype(x)>;
        const T& y = std::get<T>(b);
        if constexpr (std::is_same_v<T, double>) {
          return bits_of(x) == bits_of(y);
        } else if constexpr (std::is_same_v<T, std::vector<double>>) {
          return same_bits(x, y);
        } else if constexpr (std::is_same_v<T, NumericsPolicy>) {
          return same_policy(x, y);
        } else {
          return x == y;
        }
      },
      a);
}

void mix(std::size_t& h, std::size_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
}

}  // namespace

void for_each_block(ir::Module& module, const std::function<void(ir::Block&)>& fn) {
  for (auto& func : module.functions()) {
    for (std::size_t r = 0; r < func->num_regions(); ++r) {
      ir::Region& region = func->region(r);
      for (std::size_t b = 0; b < region.num_blocks(); ++b) walk_block(region.block(b), fn);
    }
  }
}

bool is_removable(const ir::Operation& op) {
  return op.def().effect == ir::Effect::pure && !op.def().is_terminator && op.num_regions() == 0;
}

bool erase_dead_ops(ir::Block& block) {
  bool any = false;
  for (bool changed = true; changed;) {
    changed = false;
    // Reverse order: erasing a user first lets its operands' definitions
    // die in the same sweep.
    auto& ops = block.ops();
    for (auto it = ops.end(); it != ops.begin();) {
      --it;
      ir::Operation* op = it->get();
      if (!is_removable(*op) || !op->results_unused()) continue;
      // Erase through the iterator we hold (Block::erase would search for it).
      op->drop_operands();
      it = ops.erase(it);
      changed = any = true;
    }
  }
  return any;
}

const ir::Operation* defining_constant(const ir::Value* v) {
  const ir::Operation* op = v->defining_op();
  return op && op->name() == "graph.constant" ? op : nullptr;
}

std::optional<double> splat_value(const ir::Value* v) {
  const ir::Operation* c = defining_constant(v);
  if (!c) return std::nullopt;
  const ir::Attribute* value = c->attrs().find("value");
  if (!value || !std::holds_alternative<std::vector<double>>(*value)) return std::nullopt;
  const auto& values = std::get<std::vector<double>>(*value);
  if (values.empty()) return std::nullopt;
  for (double x : values) {
    if (bits_of(x) != bits_of(values[0])) return std::nullopt;
  }
  return values[0];
}

bool identical_attrs(const ir::AttrMap& a, const ir::AttrMap& b) {
  const auto& x = a.items();
  const auto& y = b.items();
  if (x.size() != y.size()) return false;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (x[i].first != y[i].first || !identical(x[i].second, y[i].second)) return false;
  }
  return true;
}

std::size_t hash_attrs(const ir::AttrMap& attrs) {
  std::size_t h = attrs.items().size();
  for (const auto& [name, value] : attrs.items()) {
    mix(h, std::hash<std::string>{}(name));
    mix(h, value.index());
    // Hash the scalar content cheaply; lists hash their size and first
    // element. Equality (identical_attrs) decides; the hash only buckets.
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, double>) {
            mix(h, bits_of(x));
          } else if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, std::int64_t>) {
            mix(h, static_cast<std::size_t>(x));
          } else if constexpr (std::is_same_v<T, std::string>) {
            mix(h, std::hash<std::string>{}(x));
          } else if constexpr (std::is_same_v<T, std::vector<double>>) {
            mix(h, x.size());
            if (!x.empty()) mix(h, bits_of(x[0]));
          } else if constexpr (std::is_same_v<T, std::vector<std::int64_t>>) {
            mix(h, x.size());
            for (auto v : x) mix(h, static_cast<std::size_t>(v));
          } else if constexpr (std::is_same_v<T, NumericsPolicy>) {
            mix(h, static_cast<std::size_t>(x.storage));
            mix(h, static_cast<std::size_t>(x.accum));
          } else {
            mix(h, x.size());  // Shape
          }
        },
        value);
  }
  return h;
}

ir::Operation* create_if_typed(ir::Block& block, ir::Block::OpList::iterator pos, std::string_view op_name,
                               std::vector<ir::Value*> operands, ir::AttrMap attrs, const std::vector<ir::Type>& want,
                               const SourceLocation& location) {
  const ir::OpDef* def = ir::Registry::global().find(op_name);
  if (!def) return nullptr;
  try {
    ir::AttrMap full = ir::complete_attrs(*def, std::move(attrs));
    std::vector<ir::Type> in;
    in.reserve(operands.size());
    for (ir::Value* v : operands) in.push_back(v->type());
    if (ir::infer_result_types(*def, in, full, location) != want) return nullptr;
    ir::OpBuilder builder(block);
    builder.set_insertion_point(pos);
    return builder.create(*def, std::move(operands), std::move(full), location);
  } catch (const Error&) {
    // The rewrite does not apply to these operands (the op rejects them).
    return nullptr;
  }
}

}  // namespace tessera::graph
