// The IR verifier (tessera/ir/verifier.h): re-checks everything the builder
// and parser guarantee, because passes edit IR directly and can break it.
//
// Regions: every block of an op's region must point back at its region and
// end with a terminator other than `return` (which ends only function
// bodies); what that terminator must be and the types it passes are the
// op's own verify rule. A value is visible in the block that defines it, after
// its definition, and in every region nested below that point.
#include "tessera/ir/verifier.h"

#include <cmath>
#include <unordered_set>

#include "tessera/ir/builder.h"
#include "tessera/ir/dialect.h"

namespace tessera::ir {
namespace {

std::string func_label(const Operation& func) {
  const Attribute* name = func.attrs().find("sym_name");
  if (!name || kind_of(*name) != AttrKind::string) return "<unnamed function>";
  return "function @" + std::get<std::string>(*name);
}

// Attribute equality where NaN equals NaN: complete_attrs copies values, and
// a dense constant holding NaN must still count as unchanged.
bool same_real(double a, double b) {
  return a == b || (std::isnan(a) && std::isnan(b));
}
bool same_attribute(const Attribute& a, const Attribute& b) {
  if (a.index() != b.index()) return false;
  if (const auto* x = std::get_if<double>(&a)) return same_real(*x, std::get<double>(b));
  if (const auto* x = std::get_if<std::vector<double>>(&a)) {
    const auto& y = std::get<std::vector<double>>(b);
    if (x->size() != y.size()) return false;
    for (std::size_t i = 0; i < x->size(); ++i) {
      if (!same_real((*x)[i], y[i])) return false;
    }
    return true;
  }
  return a == b;
}

class Verifier {
 public:
  explicit Verifier(const Operation& func) : func_(func) {}

  void run() {
    if (func_.name() != "func") {
      raise(ErrorCode::VerifyFailed, "expected a 'func' op at module level, got '" + std::string(func_.name()) + "'",
            func_.location());
    }
    const Attribute* name = func_.attrs().find("sym_name");
    if (!name || kind_of(*name) != AttrKind::string) {
      raise(ErrorCode::VerifyFailed, "'func' needs a string attribute 'sym_name'", func_.location());
    }
    if (func_.num_regions() != 1 || func_.region(0).num_blocks() != 1) {
      raise(ErrorCode::VerifyFailed, func_label(func_) + " must have exactly one region holding one block",
            func_.location());
    }
    const Block& body = function_body(func_);
    Operation* last = body.terminator();
    if (!last || last->name() != "return") {
      raise(ErrorCode::VerifyFailed,
            func_label(func_) + " must end with 'return'" +
                (last ? " (its last op is '" + std::string(last->name()) + "')" : " (its body is empty)"),
            last ? last->location() : func_.location());
    }
    std::unordered_set<const Value*> visible;
    verify_block(body, visible);
  }

 private:
  [[noreturn]] void fail(const Operation& op, std::size_t index, const std::string& what) const {
    raise(
        ErrorCode::VerifyFailed,
        "in '" + std::string(op.name()) + "' (op #" + std::to_string(index) + " of " + func_label(func_) + "): " + what,
        op.location());
  }

  // `visible`: values defined in enclosing blocks. This block adds its own
  // and takes them out again when it ends (one set for the whole function:
  // a copy per nested block made verifying unrolled kernels quadratic).
  void verify_block(const Block& block, std::unordered_set<const Value*>& visible) {
    for (std::size_t i = 0; i < block.num_arguments(); ++i) visible.insert(block.argument(i));
    std::size_t index = 0;
    for (const auto& op_ptr : block.ops()) {
      const Operation& op = *op_ptr;
      if (op.parent_block() != &block) fail(op, index, "the op's parent block is not the block holding it");
      if (op.name() == "func") fail(op, index, "functions cannot be nested inside a function");
      if (op.def().is_terminator && op_ptr.get() != block.terminator()) {
        fail(op, index, "a terminator must be the last op of its block");
      }
      if (op.name() == "return" && block.parent_region() != &func_.region(0)) {
        fail(op, index, "'return' ends only a function body; end this region with its op's terminator");
      }
      verify_op(op, index, visible);
      for (std::size_t r = 0; r < op.num_regions(); ++r) {
        const Region& region = op.region(r);
        if (region.parent_op() != &op)
          fail(op, index, "region #" + std::to_string(r) + " does not point back at its op");
        if (region.num_blocks() == 0) fail(op, index, "region #" + std::to_string(r) + " has no block");
        for (std::size_t b = 0; b < region.num_blocks(); ++b) {
          const Block& inner = region.block(b);
          if (inner.parent_region() != &region) {
            fail(op, index,
                 "block #" + std::to_string(b) + " of region #" + std::to_string(r) +
                     " does not point back at its region");
          }
          const Operation* term = inner.terminator();
          if (!term || !term->def().is_terminator) {
            fail(op, index,
                 "region #" + std::to_string(r) + " must end with a terminator" +
                     (term ? " (its last op is '" + std::string(term->name()) + "')" : " (it is empty)"));
          }
          verify_block(inner, visible);
        }
      }
      for (Value* result : op.results()) visible.insert(result);
      ++index;
    }
    for (std::size_t i = 0; i < block.num_arguments(); ++i) visible.erase(block.argument(i));
    for (const auto& op_ptr : block.ops()) {
      for (Value* result : op_ptr->results()) visible.erase(result);
    }
  }

  void verify_op(const Operation& op, std::size_t index, const std::unordered_set<const Value*>& visible) const {
    const OpDef& def = op.def();
    std::size_t want = def.operands.size();
    bool count_ok = def.variadic ? op.num_operands() + 1 >= want : op.num_operands() == want;
    if (!count_ok) {
      fail(op, index,
           "takes " + (def.variadic ? "at least " + std::to_string(want - 1) : std::to_string(want)) +
               " operand(s), got " + std::to_string(op.num_operands()));
    }
    std::vector<Type> operand_types;
    for (std::size_t i = 0; i < op.num_operands(); ++i) {
      const Value* v = op.operand(i);
      if (!v) fail(op, index, "operand #" + std::to_string(i) + " is null");
      if (!visible.count(v)) {
        fail(op, index,
             "operand #" + std::to_string(i) + " is used before it is defined (or is defined outside this function)");
      }
      bool recorded = false;
      for (const Use& u : v->uses()) recorded |= u.user == &op && u.operand_index == i;
      if (!recorded) fail(op, index, "operand #" + std::to_string(i) + " is missing from its value's use list");
      operand_types.push_back(v->type());
    }
    for (std::size_t r = 0; r < op.num_results(); ++r) {
      const Value* v = op.result(r);
      if (v->defining_op() != &op || v->index() != r) {
        fail(op, index, "result #" + std::to_string(r) + " does not point back at its op");
      }
    }

    AttrMap completed;
    try {
      completed = complete_attrs(def, op.attrs());
    } catch (const Error& e) {
      fail(op, index, e.message());
    }
    // complete_attrs has already rejected unknown names, so only defaults
    // can be missing and only int-for-float values can differ.
    for (const auto& [name, value] : completed.items()) {
      const Attribute* have = op.attrs().find(name);
      if (!have) fail(op, index, "attribute '" + name + "' is missing (its default is " + print_attribute(value) + ")");
      if (!same_attribute(*have, value)) {
        fail(op, index,
             "attribute '" + name + "' must be a " + std::string(attr_kind_name(kind_of(value))) + ", got a " +
                 std::string(attr_kind_name(kind_of(*have))));
      }
    }

    std::vector<Type> inferred;
    try {
      inferred = infer_result_types(def, operand_types, op.attrs(), op.location());
    } catch (const Error& e) {
      std::string message = e.message();
      std::string prefix = "in '" + def.name + "': ";
      if (message.rfind(prefix, 0) == 0) message = message.substr(prefix.size());
      fail(op, index, message);
    }
    if (inferred.size() != op.num_results()) {
      fail(op, index,
           "has " + std::to_string(op.num_results()) + " result(s) but its operands and attributes give " +
               std::to_string(inferred.size()));
    }
    for (std::size_t r = 0; r < inferred.size(); ++r) {
      if (op.result(r)->type().unsharded() != inferred[r]) {
        fail(op, index,
             "result " + (inferred.size() > 1 ? "#" + std::to_string(r) + " " : std::string()) + "type " +
                 print_type(op.result(r)->type()) + " does not match inferred " + print_type(inferred[r]));
      }
    }
    if (def.verify) {
      try {
        def.verify(op);
      } catch (const Error& e) {
        fail(op, index, e.message());
      }
    }
  }

  const Operation& func_;
};

}  // namespace

void verify_function(const Operation& func) {
  Verifier(func).run();
}

void verify(const Module& module) {
  std::unordered_set<std::string> names;
  for (const auto& func : module.functions()) {
    verify_function(*func);
    if (!names.insert(function_name(*func)).second) {
      raise(ErrorCode::VerifyFailed, func_label(*func) + " is defined twice in the module", func->location());
    }
  }
}

}  // namespace tessera::ir
