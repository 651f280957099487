// Calls between functions: create_call, inline_function, resolve_callee, and
// the cloning helpers the transforms share (autodiff/internal.h).
#include <set>

#include "autodiff/internal.h"

namespace tessera::autodiff {

const ir::Operation& resolve_callee(const ir::Module& module, const ir::Operation& call_op) {
  const std::string& name = call_op.attrs().get_string("callee");
  const ir::Operation* f = module.lookup(name);
  if (!f) {
    raise(ErrorCode::ArgumentInvalid, "'call' names @" + name + ", which the module does not define",
          call_op.location());
  }
  return *f;
}

ir::Operation* create_call(ir::OpBuilder& builder, const ir::Operation& callee, std::vector<ir::Value*> args,
                           ir::AttrMap extra, SourceLocation location) {
  const ir::Block& body = ir::function_body(callee);
  const std::string& name = ir::function_name(callee);
  if (args.size() != body.num_arguments()) {
    raise(ErrorCode::ArgumentInvalid,
          "call of @" + name + " with " + std::to_string(args.size()) + " argument(s); the function takes " +
              std::to_string(body.num_arguments()),
          location);
  }
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i]->type() != body.argument(i)->type()) {
      raise(ErrorCode::ArgumentInvalid,
            "call of @" + name + ": argument #" + std::to_string(i) + " has type " + ir::print_type(args[i]->type()) +
                ", the parameter has type " + ir::print_type(body.argument(i)->type()),
            location);
    }
  }
  std::string types;
  for (ir::Value* r : ir::function_results(callee)) types += (types.empty() ? "" : ", ") + ir::print_type(r->type());
  extra.set("callee", name);
  extra.set("result_types", types);
  return builder.create("call", std::move(args), std::move(extra), std::move(location));
}

ir::Operation* clone_op(ir::OpBuilder& b, const ir::Operation& op, std::vector<ir::Value*> operands) {
  if (op.num_regions() != 0) {
    raise(ErrorCode::Compile, "autodiff cannot copy op '" + std::string(op.name()) + "': it holds regions",
          op.location());
  }
  return b.create(op.def(), std::move(operands), op.attrs(), op.location());
}

std::vector<ir::Value*> mapped_operands(const ir::Operation& op, const ValueMap& map) {
  std::vector<ir::Value*> out;
  out.reserve(op.num_operands());
  for (ir::Value* v : op.operands()) {
    auto it = map.find(v);
    out.push_back(it == map.end() ? v : it->second);
  }
  return out;
}

std::vector<ir::Value*> inline_function(ir::OpBuilder& builder, const ir::Operation& callee,
                                        const std::vector<ir::Value*>& args) {
  const ir::Block& body = ir::function_body(callee);
  if (args.size() != body.num_arguments()) {
    raise(ErrorCode::ArgumentInvalid, "inlining @" + ir::function_name(callee) + " with " +
                                          std::to_string(args.size()) + " argument(s); it takes " +
                                          std::to_string(body.num_arguments()));
  }
  ValueMap map;
  for (std::size_t i = 0; i < args.size(); ++i) map[body.argument(i)] = args[i];
  for (const auto& op : body.ops()) {
    if (op->def().is_terminator) return mapped_operands(*op, map);
    ir::Operation* copy = clone_op(builder, *op, mapped_operands(*op, map));
    for (std::size_t i = 0; i < op->num_results(); ++i) map[op->result(i)] = copy->result(i);
  }
  raise(ErrorCode::VerifyFailed, "function @" + ir::function_name(callee) + " has no return");
}

CallKind call_kind(const ir::Operation& call, bool forward) {
  const auto& a = call.attrs();
  if (forward && a.has("custom_jvp")) return CallKind::custom_jvp;
  if (a.has("custom_vjp_fwd")) return CallKind::custom_vjp;
  if (a.has("custom_jvp")) return CallKind::custom_jvp;
  if (a.has("remat") && a.get_bool("remat")) return CallKind::remat;
  return CallKind::plain;
}

std::unique_ptr<ir::Operation> new_function(const ir::Module& module, std::string_view name,
                                            const SourceLocation& location) {
  if (name.empty()) raise(ErrorCode::ArgumentInvalid, "the new function needs a name");
  if (module.lookup(name)) {
    raise(ErrorCode::ArgumentInvalid,
          "the module already has a function @" + std::string(name) + "; give the transformed function another name");
  }
  return ir::make_function(std::string(name), location);
}

void check_wrt(const ir::Operation& func, const std::vector<int>& wrt) {
  const auto n = static_cast<int>(ir::function_body(func).num_arguments());
  std::set<int> seen;
  for (int i : wrt) {
    if (i < 0 || i >= n) {
      raise(ErrorCode::ArgumentInvalid, "wrt index " + std::to_string(i) + " is out of range: @" +
                                            ir::function_name(func) + " has " + std::to_string(n) + " parameter(s)");
    }
    if (!seen.insert(i).second) {
      raise(ErrorCode::ArgumentInvalid, "wrt lists parameter " + std::to_string(i) + " twice");
    }
  }
}

}  // namespace tessera::autodiff
