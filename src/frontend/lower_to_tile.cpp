// Lowering of checked kernels to Tile IR (docs/design/0003-tile-ir.md).
//
// The syntax tree is walked once with a map from variable names to SSA
// values. Structured control flow becomes tile.for / tile.if / tile.while
// with block arguments: a variable assigned in a loop body that existed
// before the loop is carried (an init, a block argument and a yielded
// value); an `if` carries the variables either branch assigns, plus those
// first assigned in both branches (sema lists them; their init is a zero of
// their type that both branches overwrite). Swapping shared buffers (`s0, s1 = s1, s0`) thus becomes
// loop-carried smem values. Types and implicit conversions come from sema.
#include <algorithm>

#include "frontend/sema.h"
#include "tessera/ir/builder.h"
#include "tessera/ir/ir.h"
#include "tessera/ir/verifier.h"
#include "tessera/tile/tile_builder.h"

namespace tessera::frontend {

using ast::Expr;
using ast::ExprKind;
using ast::Stmt;
using ast::StmtKind;
using Kind = KType::Kind;

namespace {

const ast::Keyword* find_keyword(const Expr& call, std::string_view name) {
  for (const ast::Keyword& k : call.keywords)
    if (k.name == name) return &k;
  return nullptr;
}

class Lowerer {
 public:
  Lowerer(const KernelDecl& decl, const Analysis& analysis) : decl_(decl), kernel_(*decl.ast), an_(analysis) {}

  ir::Operation& run(ir::Module& module) {
    std::vector<std::pair<std::string, ir::Type>> params;
    for (const KernelParam& p : decl_.params) {
      if (p.is_buffer) {
        ir::Shape shape;
        for (const DimSpec& d : p.dims) shape.push_back(specialize_dim(d, an_.constants, p.location));
        params.emplace_back(p.name, ir::Type::gmem(shape, default_policy(p.dtype), p.is_mut));
      } else {
        params.emplace_back(p.name, ir::Type::lane(p.dtype));
      }
    }
    tile::KernelOptions options;
    if (!decl_.group_shape.empty()) options.group_shape = decl_.group_shape;
    options.shared_bytes = decl_.shared_bytes;
    options.source = decl_.location.file + ":" + std::to_string(decl_.location.line);
    std::string name = decl_.name;
    for (int i = 1; module.lookup(name); ++i) name = decl_.name + "_" + std::to_string(i);
    ir::Operation* func = tile::build_kernel(module, name, params, options, decl_.location);
    ir::Block& body = ir::function_body(*func);
    for (std::size_t i = 0; i < decl_.params.size(); ++i) env_[decl_.params[i].name] = body.argument(i);
    ir::OpBuilder builder(body);
    b_ = &builder;
    lower_body(kernel_.body);
    tile::finish_kernel(*func);
    ir::verify_function(*func);
    return *func;
  }

 private:
  SourceLocation loc(std::size_t offset, std::size_t span = 1) const { return kernel_.locate(offset, span); }
  SourceLocation loc(const Expr& e) const { return loc(e.offset, e.length); }

  ir::Value* op(std::string_view name, std::vector<ir::Value*> operands, ir::AttrMap attrs, const SourceLocation& at) {
    return tile::build(*b_, name, std::move(operands), std::move(attrs), at);
  }
  void effect(std::string_view name, std::vector<ir::Value*> operands, ir::AttrMap attrs, const SourceLocation& at) {
    b_->create(name, std::move(operands), std::move(attrs), at);
  }

  ir::Value* constant(const KType& type, double real, std::int64_t integer, const SourceLocation& at) {
    DType d = type.dtype;
    ir::AttrMap attrs;
    if (d == DType::bool_)
      attrs.set("value", integer != 0);
    else if (is_float(d))
      attrs.set("value", real);
    else
      attrs.set("value", integer);
    attrs.set("policy", default_policy(d));
    return op("tile.const", {}, std::move(attrs), at);
  }
  ir::Value* index_const(std::int64_t v, const SourceLocation& at) {
    return constant(KType::lane(DType::int64), static_cast<double>(v), v, at);
  }

  // The init tile.if needs for a value every branch assigns (a variable first
  // assigned in both branches, a ternary's result): a zero of `type`, which
  // no branch reads.
  ir::Value* overwritten_init(const KType& type, const SourceLocation& at) {
    if (type.kind == Kind::tile) return zeros(type, at);
    return constant(type, 0.0, 0, at);
  }

  // A tile of `type` (its extents and dtype) filled with zeros.
  ir::Value* zeros(const KType& type, const SourceLocation& at) {
    return op("tile.zeros", {}, {{"shape", ir::fixed_shape(type.sizes)}, {"policy", default_policy(type.dtype)}}, at);
  }

  ir::Value* coerce(ir::Value* v, DType to, const SourceLocation& at) {
    if (v->type().dtype() == to) return v;
    if (v->type().is_tile()) return op("tile.tile_cast", {v}, {{"to", default_policy(to)}}, at);
    return op("tile.cast", {v}, {{"to", default_policy(to)}}, at);
  }
  ir::Value* as_index(ir::Value* v, const SourceLocation& at) { return coerce(v, DType::int64, at); }

  // ---- statements ----
  void lower_body(const ast::Body& body) {
    for (const auto& s : body) lower_stmt(*s);
  }

  void lower_stmt(const Stmt& s) {
    switch (s.kind) {
      case StmtKind::pass:
      case StmtKind::return_: return;
      case StmtKind::expr:
        if (s.value->kind != ExprKind::string) lower(*s.value);
        return;
      case StmtKind::assign: lower_assign(s); return;
      case StmtKind::aug_assign: lower_aug_assign(s); return;
      case StmtKind::if_: lower_if(s); return;
      case StmtKind::for_: lower_for(s); return;
      case StmtKind::while_: lower_while(s); return;
    }
  }

  void lower_assign(const Stmt& s) {
    if (s.target->kind == ExprKind::tuple) {
      std::vector<ir::Value*> values;
      for (const auto& v : s.value->args) values.push_back(lower_for_target(*v));
      for (std::size_t i = 0; i < values.size(); ++i) assign(*s.target->args[i], values[i]);
      return;
    }
    assign(*s.target, lower_for_target(*s.value));
  }

  ir::Value* lower_for_target(const Expr& value) {
    const ExprInfo& info = an_.info(value);
    return lower(value, info.type.is_lane() ? std::optional<DType>(info.type.dtype) : std::nullopt);
  }

  void assign(const Expr& target, ir::Value* value) {
    SourceLocation at = loc(target);
    if (target.kind == ExprKind::name) {
      auto it = env_.find(target.text);
      if (it != env_.end() && it->second->type().is_lane()) value = coerce(value, it->second->type().dtype(), at);
      env_[target.text] = value;
      return;
    }
    store_element(target, value, at);
  }

  void store_element(const Expr& subscript, ir::Value* value, const SourceLocation& at) {
    ir::Value* buffer = lower(*subscript.args[0]);
    std::vector<ir::Value*> operands{buffer};
    for (std::size_t i = 1; i < subscript.args.size(); ++i) operands.push_back(as_index(lower(*subscript.args[i]), at));
    operands.push_back(coerce(value, buffer->type().dtype(), at));
    effect("tile.store_elem", std::move(operands), {}, at);
  }

  void lower_aug_assign(const Stmt& s) {
    SourceLocation at = loc(s.offset, s.length);
    const ExprInfo& target_info = an_.info(*s.target);
    DType d = target_info.op_dtype;
    ir::Value* current = lower(*s.target);
    ir::Value* rhs = lower(*s.value, d);
    ir::Value* result = arith(s.op, coerce(current, d, at), coerce(rhs, d, at), at);
    if (s.target->kind == ExprKind::name) {
      env_[s.target->text] = coerce(result, current->type().dtype(), at);
    } else {
      store_element(*s.target, result, at);
    }
  }

  // Names carried by a loop: assigned in the body and defined before it.
  std::vector<std::string> carried(const ast::Body& body, const std::string& exclude = {}) const {
    std::vector<std::string> out;
    for (const std::string& n : assigned_names(body))
      if (n != exclude && env_.count(n)) out.push_back(n);
    return out;
  }

  std::vector<ir::Value*> values_of(const std::vector<std::string>& names) const {
    std::vector<ir::Value*> out;
    for (const std::string& n : names) out.push_back(env_.at(n));
    return out;
  }

  // The values a region yields for the carried `names`: their current values,
  // lanes converted back to the dtype of their inits.
  std::vector<ir::Value*> yielded(const std::vector<std::string>& names, const std::vector<ir::Value*>& inits,
                                  const SourceLocation& at) {
    std::vector<ir::Value*> out = values_of(names);
    for (std::size_t i = 0; i < out.size(); ++i)
      if (out[i]->type().is_lane()) out[i] = coerce(out[i], inits[i]->type().dtype(), at);
    return out;
  }

  // Runs `fn` with the builder and variable map of a region; the outer map is
  // restored afterwards (names defined inside are not visible after).
  template <typename Fn>
  std::vector<ir::Value*> in_region(ir::OpBuilder& inner, const std::vector<std::string>& names,
                                    std::span<ir::Value* const> args, std::size_t first_arg, Fn&& fn) {
    std::map<std::string, ir::Value*> saved = env_;
    ir::OpBuilder* saved_builder = b_;
    b_ = &inner;
    for (std::size_t i = 0; i < names.size(); ++i) env_[names[i]] = args[first_arg + i];
    std::vector<ir::Value*> out = fn();
    b_ = saved_builder;
    env_ = std::move(saved);
    return out;
  }

  void lower_if(const Stmt& s) {
    SourceLocation at = loc(s.offset, s.length);
    ir::Value* cond = lower(*s.value);
    std::vector<std::string> names = carried(s.body);
    for (const std::string& n : carried(s.orelse))
      if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
    std::vector<ir::Value*> inits = values_of(names);
    auto exports = an_.if_exports.find(&s);
    if (exports != an_.if_exports.end()) {
      for (const auto& [n, type] : exports->second) {
        if (std::find(names.begin(), names.end(), n) != names.end()) continue;  // already carried
        names.push_back(n);
        inits.push_back(overwritten_init(type, at));
      }
    }
    auto branch = [&](const ast::Body& body) {
      return [&, body_ptr = &body](ir::OpBuilder& inner, std::span<ir::Value* const> args) {
        return in_region(inner, names, args, 0, [&] {
          lower_body(*body_ptr);
          return yielded(names, inits, at);
        });
      };
    };
    ir::Operation* if_op = tile::build_if(*b_, cond, inits, branch(s.body), branch(s.orelse), at);
    for (std::size_t i = 0; i < names.size(); ++i) env_[names[i]] = if_op->result(i);
  }

  void lower_for(const Stmt& s) {
    SourceLocation at = loc(s.offset, s.length);
    const Expr& iter = *s.value;
    std::vector<ir::Value*> bounds;
    for (std::size_t i = 1; i < iter.args.size(); ++i) bounds.push_back(as_index(lower(*iter.args[i]), at));
    ir::Value* lo = nullptr;
    ir::Value* hi = nullptr;
    ir::Value* step = nullptr;
    if (bounds.size() == 1) {
      hi = bounds[0];
    } else {
      lo = bounds[0];
      hi = bounds[1];
      if (bounds.size() == 3) step = bounds[2];
    }
    std::optional<std::int64_t> prefetch;
    if (const ast::Keyword* k = find_keyword(iter, "step")) step = as_index(lower(*k->value), at);
    if (const ast::Keyword* k = find_keyword(iter, "prefetch")) prefetch = an_.info(*k->value).constant;
    if (!lo) lo = index_const(0, at);
    if (!step) step = index_const(1, at);
    const std::string& var = s.target->text;
    std::vector<std::string> names = carried(s.body, var);
    std::vector<std::string> arg_names{var};
    arg_names.insert(arg_names.end(), names.begin(), names.end());
    std::vector<ir::Value*> inits = values_of(names);
    ir::Operation* for_op = tile::build_for(
        *b_, lo, hi, step, inits,
        [&](ir::OpBuilder& inner, std::span<ir::Value* const> args) {
          return in_region(inner, names, args, 1, [&] {
            env_[var] = args[0];
            lower_body(s.body);
            return yielded(names, inits, at);
          });
        },
        prefetch, arg_names, at);
    for (std::size_t i = 0; i < names.size(); ++i) env_[names[i]] = for_op->result(i);
  }

  void lower_while(const Stmt& s) {
    SourceLocation at = loc(s.offset, s.length);
    std::vector<std::string> names = carried(s.body);
    std::vector<ir::Value*> inits = values_of(names);
    ir::Operation* while_op = tile::build_while(
        *b_, inits,
        [&](ir::OpBuilder& inner, std::span<ir::Value* const> args) {
          return in_region(inner, names, args, 0, [&] {
            std::vector<ir::Value*> out{lower(*s.value)};
            for (ir::Value* v : args) out.push_back(v);
            return out;
          });
        },
        [&](ir::OpBuilder& inner, std::span<ir::Value* const> args) {
          return in_region(inner, names, args, 0, [&] {
            lower_body(s.body);
            return yielded(names, inits, at);
          });
        },
        at);
    for (std::size_t i = 0; i < names.size(); ++i) env_[names[i]] = while_op->result(i);
  }

  // ---- expressions ----
  ir::Value* arith(const std::string& o, ir::Value* a, ir::Value* b, const SourceLocation& at) {
    if (o == "+") return op("tile.add", {a, b}, {}, at);
    if (o == "-") return op("tile.sub", {a, b}, {}, at);
    if (o == "*") return op("tile.mul", {a, b}, {}, at);
    if (o == "/") return op("tile.div", {a, b}, {}, at);
    if (o == "//") return op("tile.floordiv", {a, b}, {}, at);
    if (o == "**") return op("tile.pow", {a, b}, {}, at);
    if (o == "%") {
      // Python's modulo (the sign of the divisor): a - (a // b) * b.
      ir::Value* q = op("tile.floordiv", {a, b}, {}, at);
      return op("tile.sub", {a, op("tile.mul", {q, b}, {}, at)}, {}, at);
    }
    raise(ErrorCode::Internal, "kernel lowering: unknown operator '" + o + "'", at);
  }

  ir::Value* lower(const Expr& e, std::optional<DType> want = std::nullopt) {
    const ExprInfo& info = an_.info(e);
    SourceLocation at = loc(e);
    // Integer expressions known at compile time (BK + BK, tile sizes) fold to one constant.
    if (info.constant && info.type.is_lane() && e.kind != ExprKind::call && e.kind != ExprKind::name) {
      KType t = info.type;
      if (want && t.weak) t.dtype = *want;
      if (!is_float(t.dtype) && t.dtype != DType::bool_) return constant(t, 0, *info.constant, at);
    }
    switch (e.kind) {
      case ExprKind::integer:
      case ExprKind::real:
      case ExprKind::boolean: {
        KType t = info.type;
        if (want && t.weak) t.dtype = *want;
        double real = e.kind == ExprKind::real ? e.real_value : static_cast<double>(e.int_value);
        if (!is_float(t.dtype) && t.dtype != DType::bool_ && e.kind == ExprKind::real)
          raise(ErrorCode::KernelType, "a float literal cannot become an integer value", at);
        return constant(t, real, e.int_value, at);
      }
      case ExprKind::name:
      case ExprKind::attribute: return lower_name(e, info);
      case ExprKind::binary: {
        DType d = info.op_dtype;
        ir::Value* a = coerce(lower(*e.args[0], d), d, at);
        ir::Value* b = coerce(lower(*e.args[1], d), d, at);
        return arith(e.text, a, b, at);
      }
      case ExprKind::unary: {
        if (e.text == "not") return op("tile.not", {lower(*e.args[0])}, {}, at);
        ir::Value* v = lower(*e.args[0], want ? want : std::optional<DType>(info.type.dtype));
        v = coerce(v, info.type.dtype, at);
        return e.text == "-" ? op("tile.neg", {v}, {}, at) : v;
      }
      case ExprKind::compare: {
        DType d = info.op_dtype;
        std::vector<ir::Value*> operands;
        for (const auto& a : e.args) operands.push_back(coerce(lower(*a, d), d, at));
        static const std::map<std::string, std::string> kPred = {{"<", "lt"},  {"<=", "le"}, {">", "gt"},
                                                                 {">=", "ge"}, {"==", "eq"}, {"!=", "ne"}};
        ir::Value* result = nullptr;
        for (std::size_t i = 0; i < e.ops.size(); ++i) {
          ir::Value* c = op("tile.cmp", {operands[i], operands[i + 1]}, {{"pred", kPred.at(e.ops[i])}}, at);
          result = result ? op("tile.and", {result, c}, {}, at) : c;
        }
        return result;
      }
      case ExprKind::logical: {
        // Short-circuit: the right operand runs only when the left does not decide.
        ir::Value* lhs = lower(*e.args[0]);
        bool is_and = e.text == "and";
        ir::Value* init = constant(KType::lane(DType::bool_), 0, is_and ? 0 : 1, at);
        auto evaluate = [&](ir::OpBuilder& inner, std::span<ir::Value* const>) {
          return in_region(inner, {}, {}, 0, [&] { return std::vector<ir::Value*>{lower(*e.args[1])}; });
        };
        auto keep = [](ir::OpBuilder&, std::span<ir::Value* const> args) { return std::vector<ir::Value*>{args[0]}; };
        ir::Operation* if_op = is_and ? tile::build_if(*b_, lhs, {init}, evaluate, keep, at)
                                      : tile::build_if(*b_, lhs, {init}, keep, evaluate, at);
        return if_op->result(0);
      }
      case ExprKind::ternary: {
        ir::Value* cond = lower(*e.args[1]);
        ir::Value* init = overwritten_init(info.type, at);
        auto arm = [&](const Expr& value) {
          return [&, v = &value](ir::OpBuilder& inner, std::span<ir::Value* const>) {
            return in_region(inner, {}, {}, 0, [&] {
              ir::Value* r = lower(*v, info.type.dtype);
              return std::vector<ir::Value*>{coerce(r, info.type.dtype, at)};
            });
          };
        };
        return tile::build_if(*b_, cond, {init}, arm(*e.args[0]), arm(*e.args[2]), at)->result(0);
      }
      case ExprKind::subscript: {
        std::vector<ir::Value*> operands{lower(*e.args[0])};
        for (std::size_t i = 1; i < e.args.size(); ++i) operands.push_back(as_index(lower(*e.args[i]), at));
        return op("tile.load_elem", std::move(operands), {}, at);
      }
      case ExprKind::call: return lower_call(e, info, at);
      default: break;
    }
    raise(ErrorCode::Internal, "kernel lowering: unexpected expression", at);
  }

  ir::Value* lower_name(const Expr& e, const ExprInfo& info) {
    SourceLocation at = loc(e);
    if (info.builtin == "grid_groups") return op("tile.num_groups", {}, {}, at);
    if (info.builtin == "constant") return index_const(*info.constant, at);
    if (info.builtin == "symbol") return op("tile.symbol", {}, {{"name", e.text}}, at);
    auto it = env_.find(e.text);
    if (it == env_.end()) raise(ErrorCode::Internal, "kernel lowering: '" + e.text + "' has no value", at);
    return it->second;
  }

  std::vector<ir::Value*> window_offsets(const Expr& call, const ir::Type& buffer, const SourceLocation& at) {
    std::vector<ir::Value*> offsets;
    const ast::Keyword* rows = find_keyword(call, "rows");
    const ast::Keyword* cols = find_keyword(call, "cols");
    if (!rows) {
      for (std::size_t d = 0; d < buffer.rank(); ++d) offsets.push_back(index_const(0, at));
      return offsets;
    }
    for (const ast::Keyword* k : {rows, cols}) {
      if (!k) continue;
      const Expr& start = k->value->kind == ExprKind::tuple ? *k->value->args[0] : *k->value;
      offsets.push_back(as_index(lower(start), at));
    }
    return offsets;
  }

  ir::Value* lower_call(const Expr& e, const ExprInfo& info, const SourceLocation& at) {
    const std::string& name = info.builtin;
    auto arg = [&](std::size_t i) -> const Expr& { return *e.args[i + 1]; };
    if (name == "tile.linear_id") return op("tile.linear_id", {}, {}, at);
    if (name == "group_linear_id") return op("tile.group_id", {}, {}, at);
    if (name == "group_tile_count") return op("tile.group_size", {}, {}, at);
    if (name == "tbarrier") {
      effect("tile.cp_async_wait", {}, {{"pending", std::int64_t{0}}}, at);
      effect("tile.barrier", {}, {}, at);
      return nullptr;
    }
    if (name == "cp_async.wait") {
      effect("tile.cp_async_wait", {}, {{"pending", *info.constant}}, at);
      return nullptr;
    }
    if (name == "reduce_sum") return op("tile.reduce_sum", {lower(arg(0))}, {}, at);
    if (name == "tshared.alloc") {
      ir::AttrMap attrs;
      attrs.set("shape", ir::fixed_shape(info.type.sizes));
      attrs.set("policy", default_policy(info.type.dtype));
      attrs.set("swizzle", std::string(info.type.swizzle_xor ? "xor" : "none"));
      return op("tile.smem_alloc", {}, std::move(attrs), at);
    }
    if (name == "cp_async.shared.global") {
      const Expr& src = arg(1);
      std::vector<ir::Value*> operands{lower(arg(0)), lower(*src.args[0])};
      for (std::size_t d = 1; d < src.args.size(); ++d) operands.push_back(as_index(lower(*src.args[d]->args[0]), at));
      effect("tile.cp_async", std::move(operands), {}, at);
      return nullptr;
    }
    if (name == "tile.load_elem" || name == "tile.store_elem") {
      ir::Value* buffer = lower(arg(0));
      const Expr& index = *find_keyword(e, "index")->value;
      std::vector<ir::Value*> operands{buffer};
      if (index.kind == ExprKind::tuple) {
        for (const auto& i : index.args) operands.push_back(as_index(lower(*i), at));
      } else {
        operands.push_back(as_index(lower(index), at));
      }
      if (name == "tile.load_elem") return op("tile.load_elem", std::move(operands), {}, at);
      const Expr& value = *find_keyword(e, "value")->value;
      operands.push_back(coerce(lower(value, buffer->type().dtype()), buffer->type().dtype(), at));
      effect("tile.store_elem", std::move(operands), {}, at);
      return nullptr;
    }
    if (name == "tile.tile_load") {
      ir::Value* buffer = lower(arg(0));
      std::vector<ir::Value*> operands{buffer};
      for (ir::Value* o : window_offsets(e, buffer->type(), at)) operands.push_back(o);
      return op("tile.tile_load", std::move(operands), {{"shape", ir::fixed_shape(info.type.sizes)}}, at);
    }
    if (name == "tile.tile_store") {
      ir::Value* buffer = lower(arg(0));
      ir::Value* value = lower(*find_keyword(e, "value")->value);
      std::vector<ir::Value*> operands{buffer};
      for (ir::Value* o : window_offsets(e, buffer->type(), at)) operands.push_back(o);
      operands.push_back(coerce(value, buffer->type().dtype(), at));
      effect("tile.tile_store", std::move(operands), {}, at);
      return nullptr;
    }
    if (name == "tile.mma" || name == "tile.mma_fresh") {
      ir::Value* a = lower(arg(0));
      ir::Value* b = lower(arg(1));
      ir::Value* acc = name == "tile.mma" ? lower(*find_keyword(e, "acc")->value) : zeros(info.type, at);
      return op("tile.mma", {a, b, acc}, {}, at);
    }
    if (name == "tile.zeros") return zeros(info.type, at);
    if (name == "tile.transpose") return op("tile.transpose", {lower(arg(0))}, {}, at);
    if (name == "tile.cast" || name == "tile.tile_cast") return coerce(lower(arg(0)), info.type.dtype, at);
    if (name == "min" || name == "max") {
      DType d = info.op_dtype;
      return op("tile." + name, {coerce(lower(arg(0), d), d, at), coerce(lower(arg(1), d), d, at)}, {}, at);
    }
    if (name == "abs" || name == "sqrt" || name == "exp" || name == "log") {
      DType d = info.type.dtype;
      return op("tile." + name, {coerce(lower(arg(0), d), d, at)}, {}, at);
    }
    raise(ErrorCode::Internal, "kernel lowering: unhandled built-in '" + name + "'", at);
  }

  const KernelDecl& decl_;
  const ast::Kernel& kernel_;
  const Analysis& an_;
  std::map<std::string, ir::Value*> env_;
  ir::OpBuilder* b_ = nullptr;
};

}  // namespace

ir::Operation& lower_kernel(ir::Module& module, const KernelDecl& kernel, const Constants& constants) {
  Analysis analysis = analyze_kernel(kernel, constants);
  return Lowerer(kernel, analysis).run(module);
}

}  // namespace tessera::frontend
