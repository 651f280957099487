// The partitioner: a global Graph IR function and its arguments' shardings
// in, the function one device runs on its shards out (tessera/dist/sharding.h).
//
// It walks the global ops in order. For each, the op's sharding rule says
// which shardings the operands must have; the partitioner converts each
// operand with the fewest collectives (a conversion of one value to one
// sharding is made once and reused), writes the op on the shards, and
// checks the shard shapes it got against the rule's result shardings.
#include <algorithm>
#include <map>
#include <unordered_map>

#include "tessera/dist/layout.h"
#include "tessera/dist/sharding.h"
#include "tessera/ir/builder.h"
#include "tessera/ir/pass.h"
#include "tessera/ir/text.h"
#include "tessera/ir/verifier.h"
#include "tessera/support/error.h"

namespace tessera::dist {

std::int64_t MeshView::size(std::string_view axis) const {
  for (std::size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] == axis) return sizes[i];
  }
  std::string known;
  for (const auto& a : axes) known += (known.empty() ? "" : ", ") + a;
  raise(ErrorCode::ArgumentInvalid, "mesh axis '" + std::string(axis) + "' is not an axis of the mesh (" + known + ")");
}

std::int64_t MeshView::coord(std::string_view axis) const {
  for (std::size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] == axis) return coords.empty() ? 0 : coords[i];
  }
  return size(axis);  // raises
}

std::int64_t MeshView::part(std::int64_t n, const std::string& axis) const {
  if (axis.empty()) return n;
  return block_part(n, size(axis), coord(axis)).length;
}

std::string MeshView::describe() const {
  std::string out;
  for (std::size_t i = 0; i < axes.size(); ++i) out += (i ? ", " : "") + axes[i] + "=" + std::to_string(sizes[i]);
  return out;
}

std::vector<std::int64_t> shard_sizes(const std::vector<std::int64_t>& global, const ir::Sharding& sharding,
                                      const MeshView& mesh) {
  std::vector<std::int64_t> out = global;
  for (std::size_t d = 0; d < out.size() && d < sharding.dims.size(); ++d) out[d] = mesh.part(out[d], sharding.dims[d]);
  return out;
}

namespace {

std::vector<std::int64_t> global_sizes(const ir::Value* v) {
  auto sizes = ir::static_sizes(v->type().shape);
  if (!sizes) {
    raise(ErrorCode::ShapeMismatch, "a sharded function needs static shapes, got " + print_type(v->type()));
  }
  return *sizes;
}

// Checks that a sharding names mesh axes, each once, and fits the rank.
void check_sharding(const ir::Sharding& s, std::size_t rank, const MeshView& mesh, const std::string& what) {
  if (s.dims.size() != rank) {
    raise(ErrorCode::ShapeMismatch, what + ": " + print_sharding(s) + " has " + std::to_string(s.dims.size()) +
                                        " dim(s) for a tensor of rank " + std::to_string(rank));
  }
  std::vector<std::string> seen;
  auto note = [&](const std::string& a) {
    if (a.empty()) return;
    mesh.size(a);
    if (std::find(seen.begin(), seen.end(), a) != seen.end()) {
      raise(ErrorCode::ShapeMismatch, what + ": " + print_sharding(s) + " uses mesh axis '" + a + "' twice");
    }
    seen.push_back(a);
  };
  for (const auto& a : s.dims) note(a);
  for (const auto& a : s.partial) note(a);
}

class Partitioner {
 public:
  Partitioner(const MeshView& mesh, ir::Block& body) : mesh_(mesh), b_(body) {}

  void bind(const ir::Value* global, ir::Value* local, const ir::Sharding& s) { map_[global] = {local, s}; }
  const ir::Sharding& sharding_of(const ir::Value* global) const { return at(global).sharding; }

  // The shard of `global` in sharding `to`, converting (once) when needed.
  ir::Value* convert(const ir::Value* global, const ir::Sharding& to, const SourceLocation& loc) {
    const Entry& e = at(global);
    if (e.sharding == to) return e.local;
    auto key = std::make_pair(global, print_sharding(to));
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
    const auto sizes = global_sizes(global);
    ir::Value* v = e.local;
    ir::Sharding cur = e.sharding;
    // 1. Pending sums: a reduce-scatter where the target splits a dim over
    //    the axis (and nothing is split over it yet), else an allreduce.
    for (const std::string& a : std::vector<std::string>(e.sharding.partial)) {
      if (std::find(to.partial.begin(), to.partial.end(), a) != to.partial.end()) continue;
      const int d = to.dim_of(a);
      if (d >= 0 && cur.dims[d].empty() && cur.dim_of(a) < 0) {
        require_even(sizes, d, a, "a reduce_scatter", global, loc);
        cur.dims[d] = a;
        erase_partial(cur, a);
        v = collective("graph.reduce_scatter", v, a, {{"dim", std::int64_t{d}}}, cur, loc);
      } else {
        erase_partial(cur, a);
        v = collective("graph.allreduce", v, a, {{"op", std::string("sum")}}, cur, loc);
      }
    }
    for (const auto& a : to.partial) {
      if (std::find(cur.partial.begin(), cur.partial.end(), a) == cur.partial.end()) {
        raise(ErrorCode::Internal, "partitioner: a rule asked for a pending sum over '" + a + "' of a value that has none");
      }
    }
    // 2. Splits the target does not have: moved to another dim by an
    //    all_to_all when that dim is free, else gathered.
    for (std::size_t d = 0; d < cur.dims.size(); ++d) {
      const std::string a = cur.dims[d];
      if (a.empty() || to.dims[d] == a) continue;
      const int e2 = to.dim_of(a);
      if (e2 >= 0 && cur.dims[e2].empty()) {
        require_even(sizes, d, a, "an all_to_all", global, loc);
        require_even(sizes, e2, a, "an all_to_all", global, loc);
        cur.dims[d].clear();
        cur.dims[e2] = a;
        v = collective("graph.all_to_all", v, a,
                       {{"split_dim", std::int64_t{e2}}, {"concat_dim", static_cast<std::int64_t>(d)}}, cur, loc);
      } else {
        require_even(sizes, d, a, "an all_gather", global, loc);
        cur.dims[d].clear();
        v = collective("graph.all_gather", v, a, {{"dim", static_cast<std::int64_t>(d)}}, cur, loc);
      }
    }
    // 3. Splits the target adds: each device takes its part (no communication).
    for (std::size_t d = 0; d < cur.dims.size(); ++d) {
      const std::string& a = to.dims[d];
      if (a.empty() || cur.dims[d] == a) continue;
      cur.dims[d] = a;
      v = collective("graph.shard_slice", v, a,
                     {{"dim", static_cast<std::int64_t>(d)}, {"size", mesh_.part(sizes[d], a)}}, cur, loc);
    }
    if (!(cur == to)) {
      raise(ErrorCode::Internal, "partitioner: converting to " + print_sharding(to) + " reached " + print_sharding(cur));
    }
    memo_[key] = v;
    return v;
  }

  ir::OpBuilder& builder() { return b_; }

 private:
  struct Entry {
    ir::Value* local;
    ir::Sharding sharding;
  };

  const Entry& at(const ir::Value* global) const {
    auto it = map_.find(global);
    if (it == map_.end()) raise(ErrorCode::Internal, "partitioner: a value is used before its op was partitioned");
    return it->second;
  }

  static void erase_partial(ir::Sharding& s, const std::string& a) {
    s.partial.erase(std::remove(s.partial.begin(), s.partial.end(), a), s.partial.end());
  }

  void require_even(const std::vector<std::int64_t>& sizes, std::size_t d, const std::string& axis,
                    const std::string& what, const ir::Value* global, const SourceLocation& loc) const {
    const std::int64_t p = mesh_.size(axis);
    if (sizes[d] % p != 0) {
      raise(ErrorCode::ShapeMismatch,
            what + " over mesh axis '" + axis + "' (" + std::to_string(p) + " members) would move dim " +
                std::to_string(d) + " of " + print_type(global->type()) + ", whose " + std::to_string(sizes[d]) +
                " elements do not split evenly; the compiler's collectives need equal parts: pad that dim to a "
                "multiple of " + std::to_string(p) + ", or lay the value out so that it stays where it is",
            loc);
    }
  }

  ir::Value* collective(const char* op, ir::Value* x, const std::string& axis, ir::AttrMap extra,
                        const ir::Sharding& result, const SourceLocation& loc) {
    extra.set("axis", axis);
    extra.set("axis_size", mesh_.size(axis));
    ir::Value* r = b_.create(op, {x}, std::move(extra), loc)->result(0);
    ir::Type t = r->type();
    t.sharding = result;
    r->set_type(std::move(t));
    return r;
  }

  const MeshView& mesh_;
  ir::OpBuilder b_;
  std::unordered_map<const ir::Value*, Entry> map_;
  std::map<std::pair<const ir::Value*, std::string>, ir::Value*> memo_;
};

std::string where_of(const ir::Operation& op) {
  return op.location().valid() ? " at " + op.location().prefix() : std::string();
}

void partition_op(Partitioner& p, const ir::Operation& op, const MeshView& mesh) {
  const ShardingRule& rule = require_sharding_rule(op);
  ShardingQuery query{op, {}, mesh};
  for (std::size_t i = 0; i < op.num_operands(); ++i) query.operands.push_back(p.sharding_of(op.operand(i)));
  ShardingPlan plan = rule(query);
  if (plan.operands.size() != op.num_operands() || plan.results.size() != op.num_results()) {
    raise(ErrorCode::Internal, "the sharding rule of '" + std::string(op.name()) + "' gave shardings for " +
                                   std::to_string(plan.operands.size()) + " operand(s) and " +
                                   std::to_string(plan.results.size()) + " result(s)");
  }
  std::vector<ir::Value*> locals;
  for (std::size_t i = 0; i < op.num_operands(); ++i) {
    check_sharding(plan.operands[i], op.operand(i)->type().rank(), mesh, "operand #" + std::to_string(i));
    locals.push_back(p.convert(op.operand(i), plan.operands[i], op.location()));
  }
  std::vector<ir::Value*> results;
  if (plan.emit) {
    results = plan.emit(p.builder(), locals);
  } else {
    ir::Operation* local = p.builder().create(op.def(), locals, plan.attrs ? *plan.attrs : op.attrs(), op.location());
    for (std::size_t r = 0; r < local->num_results(); ++r) results.push_back(local->result(r));
  }
  if (results.size() != op.num_results()) {
    raise(ErrorCode::Internal, "the sharding rule of '" + std::string(op.name()) + "' wrote " + std::to_string(results.size()) +
                                   " result(s) for " + std::to_string(op.num_results()));
  }
  for (std::size_t r = 0; r < results.size(); ++r) {
    const ir::Value* global = op.result(r);
    check_sharding(plan.results[r], global->type().rank(), mesh, "result");
    auto want = shard_sizes(global_sizes(global), plan.results[r], mesh);
    auto got = ir::static_sizes(results[r]->type().shape);
    if (!got || *got != want) {
      raise(ErrorCode::Internal, "the sharding rule of '" + std::string(op.name()) + "' made a shard of type " +
                                     print_type(results[r]->type()) + " for " + print_sharding(plan.results[r]) +
                                     " of " + print_type(global->type()));
    }
    ir::Type t = results[r]->type();
    t.sharding = plan.results[r];
    results[r]->set_type(std::move(t));
    p.bind(global, results[r], plan.results[r]);
  }
}

}  // namespace

PartitionedFunction partition(ir::Module& module, const std::string& func_name, const MeshView& mesh,
                              const std::vector<ir::Sharding>& args, const std::string& out_name) {
  const ir::Operation* func = module.lookup(func_name);
  if (func == nullptr) raise(ErrorCode::ArgumentInvalid, "partition: no function '" + func_name + "'");
  const ir::Block& body = ir::function_body(*func);
  if (args.size() != body.num_arguments()) {
    raise(ErrorCode::ArgumentInvalid, "partition: @" + func_name + " takes " + std::to_string(body.num_arguments()) +
                                          " argument(s), got " + std::to_string(args.size()) + " sharding(s)");
  }
  auto out = ir::make_function(out_name, func->location());
  out->attrs().set("mesh", mesh.describe());
  ir::Block& local_body = ir::function_body(*out);
  Partitioner p(mesh, local_body);
  for (std::size_t i = 0; i < args.size(); ++i) {
    const ir::Value* a = body.argument(i);
    check_sharding(args[i], a->type().rank(), mesh, "argument #" + std::to_string(i));
    ir::Type t = a->type();
    auto sizes = shard_sizes(global_sizes(a), args[i], mesh);
    t.shape = ir::fixed_shape(sizes);
    t.sharding = args[i];
    p.bind(a, local_body.add_argument(std::move(t), a->name()), args[i]);
  }
  PartitionedFunction result;
  result.name = out_name;
  for (const auto& op_ptr : body.ops()) {
    const ir::Operation& op = *op_ptr;
    if (op.name() == "return") {
      std::vector<ir::Value*> values;
      for (std::size_t i = 0; i < op.num_operands(); ++i) {
        const ir::Sharding& s = p.sharding_of(op.operand(i));
        values.push_back(p.convert(op.operand(i), s, op.location()));
        result.results.push_back(s);
      }
      p.builder().create("return", std::move(values), {}, op.location());
      continue;
    }
    if (op.num_regions() != 0 || op.name() == "call") {
      raise(ErrorCode::Compile, "partition: '" + std::string(op.name()) + "'" + where_of(op) +
                                    " has a body; inline calls before partitioning (pass inline-calls)");
    }
    try {
      partition_op(p, op, mesh);
    } catch (const Error& e) {
      if (e.code() == ErrorCode::Internal) throw;
      ir::rethrow_for_op(e, op.name(), op.location());
    }
  }
  ir::Operation* added = module.add_function(std::move(out));
  ir::verify_function(*added);
  return result;
}

MeshPartition partition_mesh(ir::Module& module, const std::string& func, const Mesh& mesh,
                             const std::vector<ir::Sharding>& args) {
  MeshPartition out;
  std::vector<std::string> texts;  // each function's body, printed under one name
  const std::string probe = func + ".shard_probe";
  for (std::size_t rank = 0; rank < mesh.size(); ++rank) {
    MeshView view{mesh.axes(), mesh.shape(), mesh.coords(rank)};
    PartitionedFunction f = partition(module, func, view, args, probe);
    auto& fns = module.functions();
    std::string text = ir::print_function(*fns.back());
    auto same = std::find(texts.begin(), texts.end(), text);
    if (same != texts.end()) {
      fns.pop_back();
      out.function_of_rank.push_back(static_cast<std::size_t>(same - texts.begin()));
      continue;
    }
    const std::string name = func + ".shard" + (texts.empty() ? std::string() : std::to_string(texts.size()));
    fns.back()->attrs().set("sym_name", name);
    texts.push_back(std::move(text));
    out.functions.push_back(name);
    out.function_of_rank.push_back(texts.size() - 1);
    if (rank == 0) out.results = f.results;
  }
  return out;
}

ir::Sharding sharding_of(const Layout& layout, const std::string& what) {
  ir::Sharding s;
  for (std::size_t d = 0; d < layout.rank(); ++d) {
    const DimPlacement& p = layout.dims()[d];
    if (p.cyclic_block > 0) {
      raise(ErrorCode::ArgumentInvalid, what + " is split cyclically (" + layout.describe() +
                                            "); compiled functions over distributed tensors take block splits: "
                                            "tessera.dist.reshard it to a Block layout first");
    }
    if (p.mesh_axes.size() > 1) {
      raise(ErrorCode::ArgumentInvalid, what + " splits dim " + std::to_string(d) + " over several mesh axes (" +
                                            layout.describe() + "); compiled functions over distributed tensors "
                                            "take one mesh axis per dim: reshard it first");
    }
    s.dims.push_back(p.mesh_axes.empty() ? std::string() : p.mesh_axes[0]);
  }
  s.partial = layout.partial();
  return s;
}

Layout layout_of(const ir::Sharding& sharding, const Mesh& mesh) {
  ShardSpec spec;
  for (std::size_t d = 0; d < sharding.dims.size(); ++d) {
    if (sharding.dims[d].empty()) continue;
    spec.partition.push_back(std::to_string(d));
    spec.mesh_axes.push_back(sharding.dims[d]);
  }
  spec.partial = sharding.partial;
  return Layout::resolve(spec, sharding.dims.size(), mesh);
}

namespace {

MeshView parse_mesh(const std::string& text) {
  MeshView mesh;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? text.size() : comma + 1;
    const auto eq = item.find('=');
    auto trim = [](std::string s) {
      s.erase(0, s.find_first_not_of(' '));
      s.erase(s.find_last_not_of(' ') + 1);
      return s;
    };
    if (eq == std::string::npos) {
      raise(ErrorCode::ArgumentInvalid, "mesh attribute \"" + text + "\": write axis=size pairs, \"dp=2, tp=4\"");
    }
    mesh.axes.push_back(trim(item.substr(0, eq)));
    mesh.sizes.push_back(std::stoll(item.substr(eq + 1)));
    mesh.coords.push_back(0);
  }
  return mesh;
}

}  // namespace

void register_partition_pass() {
  ir::register_pass(ir::PassInfo{
      .name = "spmd-partition",
      .summary = "Add @f.shard, the per-shard function, after each function with a `mesh` attribute whose "
                 "parameters carry shardings.",
      .run =
          [](ir::Module& module) {
            std::vector<std::string> names;
            for (const auto& f : module.functions()) {
              if (f->attrs().has("mesh")) names.push_back(ir::function_name(*f));
            }
            for (const auto& name : names) {
              const ir::Operation* f = module.lookup(name);
              MeshView mesh = parse_mesh(f->attrs().get_string("mesh"));
              std::vector<ir::Sharding> args;
              const ir::Block& body = ir::function_body(*f);
              for (std::size_t i = 0; i < body.num_arguments(); ++i) {
                const ir::Type& t = body.argument(i)->type();
                args.push_back(t.sharding ? *t.sharding : ir::Sharding::replicated(t.rank()));
              }
              partition(module, name, mesh, args, name + ".shard");
            }
          },
  });
}

}  // namespace tessera::dist
