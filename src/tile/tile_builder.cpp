// Tile IR construction helpers (tessera/tile/tile_builder.h).
#include "tessera/tile/tile_builder.h"

#include "tessera/support/error.h"

namespace tessera::tile {

ir::Operation* build_kernel(ir::Module& module, std::string name,
                            const std::vector<std::pair<std::string, ir::Type>>& params, const KernelOptions& options,
                            SourceLocation location) {
  auto func = ir::make_function(std::move(name), std::move(location));
  func->attrs().set("kernel", true);
  if (options.group_shape) func->attrs().set("group_shape", *options.group_shape);
  if (options.shared_bytes) func->attrs().set("shared_bytes", *options.shared_bytes);
  if (options.resident_groups) func->attrs().set("resident_groups", *options.resident_groups);
  if (!options.source.empty()) func->attrs().set("source", options.source);
  ir::Block& body = ir::function_body(*func);
  for (const auto& [param, type] : params) {
    if (!type.is_gmem() && !type.is_lane()) {
      raise(ErrorCode::KernelType,
            "kernel parameter '" + param + "' must be a gmem buffer or a lane scalar, got " + ir::print_type(type));
    }
    body.add_argument(type, param);
  }
  return module.add_function(std::move(func));
}

void finish_kernel(ir::Operation& kernel) {
  ir::Block& body = ir::function_body(kernel);
  ir::Operation* last = body.terminator();
  if (last && last->name() == "return") return;
  ir::OpBuilder(body).create("return", {});
}

ir::Value* build(ir::OpBuilder& b, std::string_view op, std::vector<ir::Value*> operands, ir::AttrMap attrs,
                 SourceLocation location) {
  ir::Operation* created = b.create(op, std::move(operands), std::move(attrs), std::move(location));
  if (created->num_results() != 1) {
    raise(ErrorCode::Internal, "tile::build expects '" + std::string(op) + "' to have one result, it has " +
                                   std::to_string(created->num_results()));
  }
  return created->result(0);
}

ir::Value* build_real(ir::OpBuilder& b, double value, NumericsPolicy policy) {
  return build(b, "tile.const", {}, {{"value", value}, {"policy", policy}});
}

ir::Value* build_int(ir::OpBuilder& b, std::int64_t value, DType dtype) {
  return build(b, "tile.const", {}, {{"value", value}, {"policy", default_policy(dtype)}});
}

ir::Value* build_bool(ir::OpBuilder& b, bool value) {
  return build(b, "tile.const", {}, {{"value", value}, {"policy", default_policy(DType::bool_)}});
}

void build_region(ir::Operation& op, const std::vector<ir::Type>& arg_types, const BodyFn& body,
                  std::string_view terminator, const std::vector<std::string>& arg_names, SourceLocation location) {
  ir::Block& block = op.add_region().add_block();
  std::vector<ir::Value*> args;
  for (std::size_t i = 0; i < arg_types.size(); ++i) {
    args.push_back(block.add_argument(arg_types[i], i < arg_names.size() ? arg_names[i] : std::string()));
  }
  ir::OpBuilder inner(block);
  std::vector<ir::Value*> results = body(inner, args);
  inner.create(terminator, std::move(results), {}, std::move(location));
}

namespace {

std::vector<ir::Type> types_of(const std::vector<ir::Value*>& values) {
  std::vector<ir::Type> out;
  for (ir::Value* v : values) out.push_back(v->type());
  return out;
}

}  // namespace

ir::Operation* build_for(ir::OpBuilder& b, ir::Value* lo, ir::Value* hi, ir::Value* step, std::vector<ir::Value*> inits,
                         const BodyFn& body, std::optional<std::int64_t> prefetch, std::vector<std::string> arg_names,
                         SourceLocation location) {
  std::vector<ir::Type> arg_types{lo->type()};
  for (ir::Value* v : inits) arg_types.push_back(v->type());
  std::vector<ir::Value*> operands{lo, hi, step};
  operands.insert(operands.end(), inits.begin(), inits.end());
  ir::AttrMap attrs;
  if (prefetch) attrs.set("prefetch", *prefetch);
  ir::Operation* op = b.create("tile.for", std::move(operands), std::move(attrs), location);
  build_region(*op, arg_types, body, "tile.yield", arg_names, location);
  return op;
}

ir::Operation* build_strands(ir::OpBuilder& b, ir::Value* lo, ir::Value* hi, std::int64_t count,
                             std::vector<ir::Value*> inits, const BodyFn& body, SourceLocation location) {
  std::vector<ir::Type> arg_types{lo->type()};
  for (ir::Value* v : inits) arg_types.push_back(v->type());
  std::vector<ir::Value*> operands{lo, hi};
  operands.insert(operands.end(), inits.begin(), inits.end());
  ir::AttrMap attrs;
  attrs.set("count", count);
  ir::Operation* op = b.create("tile.strands", std::move(operands), std::move(attrs), location);
  build_region(*op, arg_types, body, "tile.yield", {}, location);
  return op;
}

ir::Operation* build_if(ir::OpBuilder& b, ir::Value* cond, std::vector<ir::Value*> inits, const BodyFn& then_body,
                        const BodyFn& else_body, SourceLocation location) {
  std::vector<ir::Type> arg_types = types_of(inits);
  std::vector<ir::Value*> operands{cond};
  operands.insert(operands.end(), inits.begin(), inits.end());
  ir::Operation* op = b.create("tile.if", std::move(operands), {}, location);
  build_region(*op, arg_types, then_body, "tile.yield", {}, location);
  build_region(*op, arg_types, else_body, "tile.yield", {}, location);
  return op;
}

ir::Operation* build_while(ir::OpBuilder& b, std::vector<ir::Value*> inits, const BodyFn& before, const BodyFn& after,
                           SourceLocation location) {
  std::vector<ir::Type> arg_types = types_of(inits);
  ir::Operation* op = b.create("tile.while", std::move(inits), {}, location);
  build_region(*op, arg_types, before, "tile.condition", {}, location);
  build_region(*op, arg_types, after, "tile.yield", {}, location);
  return op;
}

}  // namespace tessera::tile
