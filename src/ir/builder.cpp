#include "tessera/ir/builder.h"

namespace tessera::ir {

void rethrow_for_op(const Error& e, std::string_view op_name, const SourceLocation& location) {
  std::string message = e.message();
  std::string prefix = "in '" + std::string(op_name) + "': ";
  if (message.rfind(prefix, 0) != 0) message = prefix + message;
  raise(e.code(), std::move(message), e.where().valid() ? e.where() : location);
}

std::vector<Type> infer_result_types(const OpDef& def, std::span<const Type> operand_types, const AttrMap& attrs,
                                     const SourceLocation& location) {
  std::size_t want = def.operands.size();
  bool count_ok = def.variadic ? operand_types.size() + 1 >= want : operand_types.size() == want;
  if (!count_ok) {
    raise(ErrorCode::ArgumentInvalid,
          "'" + def.name + "' takes " + (def.variadic ? "at least " + std::to_string(want - 1) : std::to_string(want)) +
              " operand(s), got " + std::to_string(operand_types.size()),
          location);
  }
  if (!def.infer) return {};
  // Inference runs on shapes alone: a sharded function's values are shards,
  // and their shardings are the partitioner's business (tessera/dist/sharding.h).
  std::vector<Type> plain(operand_types.begin(), operand_types.end());
  for (Type& t : plain) t.sharding.reset();
  try {
    return def.infer(plain, attrs);
  } catch (const Error& e) {
    rethrow_for_op(e, def.name, location);
  }
}

Operation* OpBuilder::create(std::string_view op_name, std::vector<Value*> operands, AttrMap attrs,
                             SourceLocation location) {
  const OpDef& def = Registry::global().get(op_name, location);
  return create(def, std::move(operands), std::move(attrs), std::move(location));
}

Operation* OpBuilder::create(const OpDef& def, std::vector<Value*> operands, AttrMap attrs, SourceLocation location) {
  AttrMap full;
  try {
    full = complete_attrs(def, std::move(attrs));
  } catch (const Error& e) {
    raise(e.code(), e.message(), location);
  }
  std::vector<Type> operand_types;
  operand_types.reserve(operands.size());
  for (Value* v : operands) operand_types.push_back(v->type());
  std::vector<Type> result_types = infer_result_types(def, operand_types, full, location);
  auto op = std::make_unique<Operation>(def, std::move(operands), std::move(result_types), std::move(full),
                                        std::move(location));
  if (has_pos_) return block_->insert(pos_, std::move(op));
  return block_->append(std::move(op));
}

}  // namespace tessera::ir
