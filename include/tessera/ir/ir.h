// The IR core every level shares: values, operations, blocks, regions, modules.
//
// An Operation names its definition (an OpDef from a dialect), takes operand
// Values, defines result Values, carries attributes and may hold Regions of
// Blocks. Values know their uses, so rewrites can replace a value everywhere
// (replace_all_uses_with) and passes can ask whether a result is dead.
//
// A Module is a list of functions. A function is the op `func` whose single
// region holds one block: the block's arguments are the parameters and its
// last op is `return`. Graph IR lives in such blocks; later levels nest
// regions (loops over tiles) inside ops.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/ir/attribute.h"
#include "tessera/ir/type.h"
#include "tessera/support/error.h"

namespace tessera::ir {

struct OpDef;
class Operation;
class Block;
class Region;

struct Use {
  Operation* user;
  unsigned operand_index;
  bool operator==(const Use&) const = default;
};

class Value {
 public:
  Value(Type type, Operation* defining_op, Block* owner_block, unsigned index)
      : type_(std::move(type)), defining_op_(defining_op), owner_block_(owner_block), index_(index) {}
  Value(const Value&) = delete;
  Value& operator=(const Value&) = delete;

  const Type& type() const { return type_; }
  void set_type(Type type) { type_ = std::move(type); }
  // The op that defines this value, or nullptr for a block argument.
  Operation* defining_op() const { return defining_op_; }
  // The block whose argument this is, or nullptr for an op result.
  Block* owner_block() const { return owner_block_; }
  bool is_block_argument() const { return owner_block_ != nullptr; }
  // Result number, or argument number for block arguments.
  unsigned index() const { return index_; }
  // A name hint printers use for block arguments ("x" prints as %x).
  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }

  const std::vector<Use>& uses() const { return uses_; }
  bool use_empty() const { return uses_.empty(); }
  // Points every use of this value at `other` instead.
  void replace_all_uses_with(Value* other);

 private:
  friend class Operation;
  Type type_;
  Operation* defining_op_;
  Block* owner_block_;
  unsigned index_;
  std::string name_;
  std::vector<Use> uses_;
};

class Operation {
 public:
  // Use OpBuilder (builder.h) to create ops: it fills default attributes and
  // infers result types. This constructor takes everything as given.
  Operation(const OpDef& def, std::vector<Value*> operands, std::vector<Type> result_types, AttrMap attrs,
            SourceLocation location);
  ~Operation();
  Operation(const Operation&) = delete;
  Operation& operator=(const Operation&) = delete;

  const OpDef& def() const { return *def_; }
  std::string_view name() const;

  std::size_t num_operands() const { return operands_.size(); }
  Value* operand(std::size_t i) const { return operands_[i]; }
  const std::vector<Value*>& operands() const { return operands_; }
  void set_operand(std::size_t i, Value* value);
  // Drops every operand (and the uses they record); done before erasing.
  void drop_operands();

  std::size_t num_results() const { return results_.size(); }
  Value* result(std::size_t i = 0) const { return results_[i].get(); }
  std::vector<Value*> results() const;
  bool results_unused() const;

  AttrMap& attrs() { return attrs_; }
  const AttrMap& attrs() const { return attrs_; }

  std::size_t num_regions() const { return regions_.size(); }
  Region& region(std::size_t i) const { return *regions_[i]; }
  Region& add_region();

  const SourceLocation& location() const { return location_; }
  void set_location(SourceLocation location) { location_ = std::move(location); }

  Block* parent_block() const { return parent_; }

 private:
  friend class Block;
  const OpDef* def_;
  std::vector<Value*> operands_;
  std::vector<std::unique_ptr<Value>> results_;
  AttrMap attrs_;
  std::vector<std::unique_ptr<Region>> regions_;
  SourceLocation location_;
  Block* parent_ = nullptr;
};

class Block {
 public:
  using OpList = std::list<std::unique_ptr<Operation>>;

  explicit Block(Region* parent = nullptr) : parent_(parent) {}
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;
  ~Block();

  Value* add_argument(Type type, std::string name = {});
  std::size_t num_arguments() const { return arguments_.size(); }
  Value* argument(std::size_t i) const { return arguments_[i].get(); }

  OpList& ops() { return ops_; }
  const OpList& ops() const { return ops_; }
  Operation* append(std::unique_ptr<Operation> op);
  // Inserts before `pos` and returns the op.
  Operation* insert(OpList::iterator pos, std::unique_ptr<Operation> op);
  // Erases an op whose results have no uses (drops its operands first).
  void erase(Operation* op);
  OpList::iterator find(const Operation* op);
  Operation* terminator() const { return ops_.empty() ? nullptr : ops_.back().get(); }

  Region* parent_region() const { return parent_; }

 private:
  Region* parent_;
  std::vector<std::unique_ptr<Value>> arguments_;
  OpList ops_;
};

class Region {
 public:
  explicit Region(Operation* parent) : parent_(parent) {}
  Block& add_block();
  std::size_t num_blocks() const { return blocks_.size(); }
  Block& block(std::size_t i = 0) const { return *blocks_[i]; }
  Operation* parent_op() const { return parent_; }

 private:
  Operation* parent_;
  std::vector<std::unique_ptr<Block>> blocks_;
};

// A translation unit: functions in order, looked up by name.
class Module {
 public:
  Module() = default;
  // Drops every use first, so IR whose values cross functions (invalid, but
  // buildable and reported by the verifier) still tears down safely.
  ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  Module(Module&&) = default;
  Module& operator=(Module&&) = default;

  std::vector<std::unique_ptr<Operation>>& functions() { return functions_; }
  const std::vector<std::unique_ptr<Operation>>& functions() const { return functions_; }
  Operation* add_function(std::unique_ptr<Operation> func);
  Operation* lookup(std::string_view name) const;

 private:
  std::vector<std::unique_ptr<Operation>> functions_;
};

// Function helpers: a `func` op has attribute sym_name and one region/block.
std::unique_ptr<Operation> make_function(std::string name, SourceLocation location = {});
const std::string& function_name(const Operation& func);
Block& function_body(const Operation& func);
// The operands of the body's `return`.
std::vector<Value*> function_results(const Operation& func);

// Whether `op` is `ancestor` or nested (through regions) inside it.
bool is_within(const Operation* op, const Operation* ancestor);
// Whether value `v` is defined inside `op` (a result of an op within it, or
// an argument of a block of one of its regions, nested or not).
bool defined_within(const Value* v, const Operation* op);

}  // namespace tessera::ir
