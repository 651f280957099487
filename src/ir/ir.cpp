#include "tessera/ir/ir.h"

#include <algorithm>

#include "tessera/ir/dialect.h"

namespace tessera::ir {

void Value::replace_all_uses_with(Value* other) {
  if (other == this) return;
  // set_operand edits uses_, so walk a copy.
  auto uses = uses_;
  for (const Use& u : uses) u.user->set_operand(u.operand_index, other);
}

Operation::Operation(const OpDef& def, std::vector<Value*> operands, std::vector<Type> result_types, AttrMap attrs,
                     SourceLocation location)
    : def_(&def), attrs_(std::move(attrs)), location_(std::move(location)) {
  operands_.resize(operands.size(), nullptr);
  for (std::size_t i = 0; i < operands.size(); ++i) set_operand(i, operands[i]);
  results_.reserve(result_types.size());
  for (std::size_t i = 0; i < result_types.size(); ++i) {
    results_.push_back(std::make_unique<Value>(std::move(result_types[i]), this, nullptr, static_cast<unsigned>(i)));
  }
}

Operation::~Operation() {
  drop_operands();
}

std::string_view Operation::name() const {
  return def_->name;
}

void Operation::set_operand(std::size_t i, Value* value) {
  if (Value* old = operands_[i]) {
    auto& uses = old->uses_;
    auto it = std::find(uses.begin(), uses.end(), Use{this, static_cast<unsigned>(i)});
    if (it != uses.end()) uses.erase(it);
  }
  operands_[i] = value;
  if (value) value->uses_.push_back(Use{this, static_cast<unsigned>(i)});
}

void Operation::drop_operands() {
  for (std::size_t i = 0; i < operands_.size(); ++i) set_operand(i, nullptr);
}

std::vector<Value*> Operation::results() const {
  std::vector<Value*> out;
  out.reserve(results_.size());
  for (const auto& r : results_) out.push_back(r.get());
  return out;
}

bool Operation::results_unused() const {
  return std::all_of(results_.begin(), results_.end(), [](const auto& r) { return r->use_empty(); });
}

Region& Operation::add_region() {
  regions_.push_back(std::make_unique<Region>(this));
  return *regions_.back();
}

namespace {
void drop_all_operands(Operation& op) {
  op.drop_operands();
  for (std::size_t r = 0; r < op.num_regions(); ++r) {
    Region& region = op.region(r);
    for (std::size_t b = 0; b < region.num_blocks(); ++b) {
      for (auto& inner : region.block(b).ops()) drop_all_operands(*inner);
    }
  }
}
}  // namespace

Block::~Block() {
  // Ops may use each other's results, and ops nested in their regions may
  // use results of this block (a failed parse destroys such a block without
  // a Module around it): drop every operand, nested ones included, first so
  // no use list points at a destroyed op. Found by fuzz/ir_parser_fuzz.
  for (auto& op : ops_) drop_all_operands(*op);
}

Value* Block::add_argument(Type type, std::string name) {
  arguments_.push_back(
      std::make_unique<Value>(std::move(type), nullptr, this, static_cast<unsigned>(arguments_.size())));
  arguments_.back()->set_name(std::move(name));
  return arguments_.back().get();
}

Operation* Block::append(std::unique_ptr<Operation> op) {
  return insert(ops_.end(), std::move(op));
}

Operation* Block::insert(OpList::iterator pos, std::unique_ptr<Operation> op) {
  op->parent_ = this;
  return ops_.insert(pos, std::move(op))->get();
}

Block::OpList::iterator Block::find(const Operation* op) {
  return std::find_if(ops_.begin(), ops_.end(), [&](const auto& p) { return p.get() == op; });
}

void Block::erase(Operation* op) {
  if (!op->results_unused()) {
    raise(ErrorCode::Internal, "erasing op '" + std::string(op->name()) + "' whose results are still used");
  }
  auto it = find(op);
  if (it == ops_.end()) raise(ErrorCode::Internal, "erasing an op that is not in this block");
  op->drop_operands();
  ops_.erase(it);
}

Block& Region::add_block() {
  blocks_.push_back(std::make_unique<Block>(this));
  return *blocks_.back();
}

Module::~Module() {
  for (auto& f : functions_) drop_all_operands(*f);
}

Operation* Module::add_function(std::unique_ptr<Operation> func) {
  functions_.push_back(std::move(func));
  return functions_.back().get();
}

Operation* Module::lookup(std::string_view name) const {
  for (const auto& f : functions_) {
    if (function_name(*f) == name) return f.get();
  }
  return nullptr;
}

std::unique_ptr<Operation> make_function(std::string name, SourceLocation location) {
  const OpDef& def = Registry::global().get("func");
  auto func = std::make_unique<Operation>(def, std::vector<Value*>{}, std::vector<Type>{},
                                          AttrMap{{"sym_name", std::move(name)}}, std::move(location));
  func->add_region().add_block();
  return func;
}

const std::string& function_name(const Operation& func) {
  return func.attrs().get_string("sym_name");
}

Block& function_body(const Operation& func) {
  return func.region(0).block(0);
}

std::vector<Value*> function_results(const Operation& func) {
  Operation* term = function_body(func).terminator();
  if (!term || term->name() != "return") return {};
  return term->operands();
}

bool is_within(const Operation* op, const Operation* ancestor) {
  while (op) {
    if (op == ancestor) return true;
    const Block* b = op->parent_block();
    op = b && b->parent_region() ? b->parent_region()->parent_op() : nullptr;
  }
  return false;
}

bool defined_within(const Value* v, const Operation* op) {
  if (v->defining_op()) return is_within(v->defining_op(), op);
  const Block* b = v->owner_block();
  return b && b->parent_region() && is_within(b->parent_region()->parent_op(), op);
}

}  // namespace tessera::ir
