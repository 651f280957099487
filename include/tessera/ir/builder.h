// OpBuilder: creates ops at the end of a block, inferring result types.
//
// Every creation path (C++ API, Python tracing, the IR parser) goes through
// create(), so schema checks and shape/policy inference are applied the same
// way everywhere. Errors carry the location given (the user's source line
// when tracing, the IR file position when parsing) and name the op.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "tessera/ir/dialect.h"
#include "tessera/ir/ir.h"

namespace tessera::ir {

class OpBuilder {
 public:
  explicit OpBuilder(Block& block) : block_(&block) {}

  Block& block() const { return *block_; }
  // New ops go before `pos` instead of at the end.
  void set_insertion_point(Block::OpList::iterator pos) { pos_ = pos, has_pos_ = true; }

  Operation* create(std::string_view op_name, std::vector<Value*> operands, AttrMap attrs = {},
                    SourceLocation location = {});
  Operation* create(const OpDef& def, std::vector<Value*> operands, AttrMap attrs = {},
                    SourceLocation location = {});

 private:
  Block* block_;
  Block::OpList::iterator pos_;
  bool has_pos_ = false;
};

// Checks attributes and infers result types without creating anything; the
// parser and verifier use it too. Errors are rethrown with "in 'op': " and
// `location` added.
std::vector<Type> infer_result_types(const OpDef& def, std::span<const Type> operand_types, const AttrMap& attrs,
                                     const SourceLocation& location);

// Rethrows `e` with the op name prefixed and `location` attached when e has none.
[[noreturn]] void rethrow_for_op(const Error& e, std::string_view op_name, const SourceLocation& location);

}  // namespace tessera::ir
