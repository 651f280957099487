// The IR printer: custom and generic text forms (tessera/ir/text.h).
//
// Names are assigned per function before anything is printed, so the output
// depends only on the IR's structure: block arguments print their name hint
// (or %arg<N>), op results are numbered %0, %1, ... in definition order with
// one number per op (%1:2 for an op with two results, used as %1#0 / %1#1).
// Nested ops are numbered in the same sequence (an op before the ops of its
// regions); regions print after the op's types as
// `{ ^(%arg: type, ...): ops }`, and names are unique in the whole function.
#include <cctype>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "tessera/ir/dialect.h"
#include "tessera/ir/text.h"
#include "tessera/support/error.h"

namespace tessera::ir {
namespace {

bool is_identifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '$')) return false;
  }
  return true;
}

// A function name that is not an identifier prints quoted, like a string attribute.
std::string symbol_text(const std::string& name) {
  return "@" + (is_identifier(name) ? name : print_attribute(Attribute(name)));
}

class FunctionPrinter {
 public:
  FunctionPrinter(const Operation& func, const PrintOptions& options) : func_(func), options_(options) {}

  std::string print() {
    if (func_.name() != "func")
      raise(ErrorCode::Internal, "print_function expects a 'func' op, got '" + std::string(func_.name()) + "'");
    if (func_.num_regions() != 1 || func_.region(0).num_blocks() != 1) {
      raise(ErrorCode::Compile, "function " + symbol_name() + " must have exactly one region with one block");
    }
    const Block& body = function_body(func_);
    next_argument_ = body.num_arguments();
    name_values(body);

    std::string out = "func " + symbol_name() + "(";
    for (std::size_t i = 0; i < body.num_arguments(); ++i) {
      if (i) out += ", ";
      out += value_ref(body.argument(i)) + ": " + print_type(body.argument(i)->type());
    }
    out += ") -> (";
    std::vector<Value*> results = function_results(func_);
    for (std::size_t i = 0; i < results.size(); ++i) {
      if (i) out += ", ";
      out += results[i] ? print_type(results[i]->type()) : "<null>";
    }
    out += ")";
    AttrMap extra = func_.attrs();
    extra.erase("sym_name");
    if (!extra.empty()) out += " attributes " + print_attr_map(extra);
    out += " {\n";
    for (const auto& op : body.ops()) out += "  " + print_op(*op, "  ") + "\n";
    return out + "}\n";
  }

 private:
  std::string symbol_name() const {
    const Attribute* name = func_.attrs().find("sym_name");
    if (!name || kind_of(*name) != AttrKind::string) return "@<unnamed>";
    return symbol_text(std::get<std::string>(*name));
  }

  void name_values(const Block& body) {
    for (std::size_t i = 0; i < body.num_arguments(); ++i) name_argument(body.argument(i), i);
    name_ops(body);
  }

  // Block arguments keep their hint; otherwise arg<N> (then arg<N>_<k>),
  // with N counting arguments across the function.
  void name_argument(Value* arg, std::size_t index) {
    std::string name = arg->name();
    if (!is_identifier(name) || used_.count(name)) name = "arg" + std::to_string(index);
    for (int k = 1; used_.count(name); ++k) name = "arg" + std::to_string(index) + "_" + std::to_string(k);
    used_.insert(name);
    names_[arg] = name;
  }

  void name_ops(const Block& block) {
    for (const auto& op : block.ops()) {
      if (op->num_results() > 0) {
        std::string base = std::to_string(next_result_++);
        if (op->num_results() == 1) {
          names_[op->result(0)] = base;
        } else {
          for (std::size_t r = 0; r < op->num_results(); ++r) names_[op->result(r)] = base + "#" + std::to_string(r);
        }
        groups_[op.get()] = base;
      }
      for (std::size_t r = 0; r < op->num_regions(); ++r) {
        for (std::size_t b = 0; b < op->region(r).num_blocks(); ++b) {
          const Block& inner = op->region(r).block(b);
          for (std::size_t i = 0; i < inner.num_arguments(); ++i) name_argument(inner.argument(i), next_argument_++);
          name_ops(inner);
        }
      }
    }
  }

  // " {\n  ^(%i: lane<int64>):\n  ops\n}" for each region, at `indent`.
  std::string print_regions(const Operation& op, const std::string& indent) const {
    std::string out;
    std::string inner = indent + "  ";
    for (std::size_t r = 0; r < op.num_regions(); ++r) {
      for (std::size_t b = 0; b < op.region(r).num_blocks(); ++b) {
        const Block& block = op.region(r).block(b);
        out += " {\n";
        if (block.num_arguments() > 0) {
          out += inner + "^(";
          for (std::size_t i = 0; i < block.num_arguments(); ++i) {
            if (i) out += ", ";
            out += value_ref(block.argument(i)) + ": " + print_type(block.argument(i)->type());
          }
          out += "):\n";
        }
        for (const auto& child : block.ops()) out += inner + print_op(*child, inner) + "\n";
        out += indent + "}";
      }
    }
    return out;
  }

  // Values from outside this function (broken IR) still print, visibly unparsable.
  std::string value_ref(const Value* v) const {
    if (!v) return "%<null>";
    auto it = names_.find(v);
    return it == names_.end() ? "%<value from outside this function>" : "%" + it->second;
  }

  std::string results_lhs(const Operation& op) const {
    if (op.num_results() == 0) return "";
    std::string lhs = "%" + groups_.at(&op);
    if (op.num_results() > 1) lhs += ":" + std::to_string(op.num_results());
    return lhs + " = ";
  }

  std::string operand_list(const Operation& op) const {
    std::string out;
    for (std::size_t i = 0; i < op.num_operands(); ++i) out += (i ? ", " : "") + value_ref(op.operand(i));
    return out;
  }

  static std::string type_list(const std::vector<Type>& types) {
    std::string out;
    for (std::size_t i = 0; i < types.size(); ++i) out += (i ? ", " : "") + print_type(types[i]);
    return out;
  }

  std::string print_op(const Operation& op, const std::string& indent) const {
    std::string out = results_lhs(op);
    std::vector<Type> result_types;
    for (Value* r : op.results()) result_types.push_back(r->type());
    std::string attrs = print_attr_map(op.attrs(), options_.elide_lists_over);
    if (options_.generic) {
      std::string types;
      for (std::size_t i = 0; i < op.num_operands(); ++i) {
        types += (i ? ", " : "") + (op.operand(i) ? print_type(op.operand(i)->type()) : std::string("<null>"));
      }
      out += "\"" + std::string(op.name()) + "\"(" + operand_list(op) + ")";
      if (!attrs.empty()) out += " " + attrs;
      return out + " : (" + types + ") -> (" + type_list(result_types) + ")" + print_regions(op, indent);
    }
    out += std::string(op.name());
    if (op.num_operands() > 0) out += " " + operand_list(op);
    if (!attrs.empty()) out += " " + attrs;
    if (!result_types.empty()) out += " : " + type_list(result_types);
    return out + print_regions(op, indent);
  }

  const Operation& func_;
  const PrintOptions& options_;
  std::unordered_map<const Value*, std::string> names_;
  std::unordered_map<const Operation*, std::string> groups_;
  std::unordered_set<std::string> used_;  // block argument names taken
  int next_result_ = 0;
  std::size_t next_argument_ = 0;  // set past the parameters by print()
};

}  // namespace

std::string print_function(const Operation& func, const PrintOptions& options) {
  return FunctionPrinter(func, options).print();
}

std::string print_module(const Module& module, const PrintOptions& options) {
  std::string out;
  for (std::size_t i = 0; i < module.functions().size(); ++i) {
    if (i) out += "\n";
    out += print_function(*module.functions()[i], options);
  }
  return out;
}

}  // namespace tessera::ir
