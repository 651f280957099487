// schedule-partition: Graph IR ops -> schedule.kernel fusion groups.
//
// Ops are visited in program order. An elementwise op joins the group of one
// of its operands when that group computes over the same domain (elementwise
// chains, GEMM epilogues, reduction consumers) and joining keeps the group
// graph acyclic: none of the op's other operands may come from a group that
// itself depends on the joined group. A softmax's gradient (softmax_linear
// of a softmax_safe) joins that softmax's kernel, and a cast rounding a
// normalization's fp32 result to bf16 or fp16 joins the normalization's.
// With column prologues ($TESSERA_COLUMN_PROLOGUE=1), block sums join the
// elementwise group computing their operand, as its prologue
// (block_sums_prologue_fusible). Every other op starts a group.
// Constants are not grouped: a splat constant is copied into each group
// that reads it (the template makes it a literal); any other constant, or a
// splat one the function returns or a non-fusing kernel reads, becomes a
// kernel of family "constant".
//
// Kernels are then built in a topological order of the group graph (ties:
// the group whose first op comes first), so the order of ops without a data
// dependence is kept; groups with effects (random, collective, opaque) are
// chained in program order so their effects keep their order too.
#include <algorithm>
#include <queue>
#include <set>
#include <unordered_map>

#include "tessera/ir/builder.h"
#include "tessera/ir/dialect.h"
#include "tessera/schedule/lower_to_tile.h"
#include "tessera/schedule/passes.h"
#include "tessera/schedule/schedule_dialect.h"

namespace tessera::schedule {
namespace {

struct Group {
  Family family;
  ir::Shape domain;
  std::vector<ir::Operation*> ops;  // program order
  std::set<int> deps;               // groups this one depends on, transitively
  std::size_t first_position = 0;
  int effect_predecessor = -1;  // the previous group with effects (their order is kept)
  bool lane_fusible = true;     // every op computes per lane in any template (sibling fusion)
  bool prologue = false;        // a reduction whose elementwise ops before it compute its operand
};

bool fuses_elementwise(Family f) {
  return f == Family::elementwise || f == Family::gemm || f == Family::reduction;
}

bool has_effect(const ir::Operation& op) {
  return op.def().effect != ir::Effect::pure;
}

class Partitioner {
 public:
  Partitioner(ir::Operation& func, bool column_prologues) : body_(ir::function_body(func)), prologues_(column_prologues) {}

  void run() {
    for (const auto& op : body_.ops()) {
      if (is_kernel_op(*op)) return;  // already Schedule IR
    }
    std::size_t position = 0;
    int last_effect_group = -1;
    for (auto& holder : body_.ops()) {
      ir::Operation* op = holder.get();
      position_[op] = position++;
      if (op == body_.terminator()) break;
      if (op->name() == "graph.constant") {
        constants_.push_back(op);
        continue;
      }
      const Family family = family_of(*op);
      const bool siblings = family == Family::elementwise && lane_fusible(*op);
      if (siblings) merge_sibling_operands(*op);
      int g = family == Family::elementwise ? epilogue_group(*op) : softmax_gradient_group(*op);
      if (g < 0 && family == Family::elementwise) g = joinable_group(*op);
      if (g < 0 && family == Family::reduction) g = prologue_group(*op);
      if (g < 0 && siblings) g = sibling_group(*op);
      if (g < 0) {
        g = static_cast<int>(groups_.size());
        groups_.push_back(Group{family, op->result(0)->type().shape, {}, {}, position_[op]});
      }
      add_to_group(op, g);
      if (family == Family::normalization) pull_widening_casts(*op, g);
      if (has_effect(*op) || family == Family::opaque) {
        if (last_effect_group >= 0 && last_effect_group != g) {
          depend(g, last_effect_group);
          groups_[static_cast<std::size_t>(g)].effect_predecessor = last_effect_group;
        }
        last_effect_group = g;
      }
    }
    sink_tails();
    place_constants();
    build_kernels();
  }

 private:
  // The group of an operand's defining op, or -1 (argument, constant).
  int group_of(const ir::Value* v) const {
    const ir::Operation* d = v->defining_op();
    if (!d) return -1;
    auto it = group_.find(d);
    return it == group_.end() ? -1 : it->second;
  }

  int joinable_group(const ir::Operation& op) const {
    const ir::Shape& domain = op.result(0)->type().shape;
    for (ir::Value* v : op.operands()) {
      const int g = group_of(v);
      if (g < 0) continue;
      const Group& group = groups_[static_cast<std::size_t>(g)];
      if (!fuses_elementwise(group.family) || group.domain != domain) continue;
      bool acyclic = true;
      for (ir::Value* other : op.operands()) {
        const int h = group_of(other);
        if (h >= 0 && h != g && groups_[static_cast<std::size_t>(h)].deps.count(g)) acyclic = false;
      }
      if (acyclic) return g;
    }
    return -1;
  }

  // A softmax's gradient joins the kernel of the softmax it reads (one
  // kernel, one read of the row: softmax_gradient_fusible), directly or
  // through a widening cast of y (which pull_widening_casts then brings
  // along), when its other operand does not depend on that kernel. The
  // softmax's kernel holds the softmax alone, with its operands' casts.
  int softmax_gradient_group(const ir::Operation& op) const {
    if (op.name() != "graph.softmax_linear") return -1;
    const ir::Value* y = softmax_gradient_y(op);
    const ir::Operation* softmax = y->defining_op();
    const int g = group_of(y);
    if (!softmax || g < 0 || !softmax_gradient_fusible(*softmax, op)) return -1;
    const Group& group = groups_[static_cast<std::size_t>(g)];
    if (group.family != Family::normalization) return -1;
    for (const ir::Operation* member : group.ops) {
      if (member != softmax && !exact_widening_cast(*member)) return -1;
    }
    // Operand 1 is read where it comes from: a widening cast of it joins
    // the kernel too (pull_widening_casts), whatever group it sits in now.
    const int h = group_of(widened_source(op.operand(1), op));
    if (h == g || (h >= 0 && groups_[static_cast<std::size_t>(h)].deps.count(g))) return -1;
    return g;
  }

  // A narrowing cast of a normalization's result ends that normalization's
  // kernel (normalization_epilogue_cast) when the kernel holds the
  // normalization alone, with its operands' casts: the kernel stores the
  // narrow values instead of a cast kernel reading the wide ones.
  // A softmax fused with its gradient takes the gradient's cast when the
  // cast's format holds y (the kernel keeps y in the gradient's buffer).
  int epilogue_group(const ir::Operation& op) const {
    if (!normalization_epilogue_cast(op)) return -1;
    const ir::Operation* root = op.operand(0)->defining_op();
    const int g = group_of(op.operand(0));
    if (g < 0 || groups_[static_cast<std::size_t>(g)].family != Family::normalization) return -1;
    for (const ir::Operation* member : groups_[static_cast<std::size_t>(g)].ops) {
      if (member == root || exact_widening_cast(*member)) continue;
      const bool fused_softmax = root->name() == "graph.softmax_linear" && member->name() == "graph.softmax_safe" &&
                                 softmax_gradient_y(*root) == member->result(0) && narrowed_gradient_holds_y(op, *member);
      if (!fused_softmax) return -1;
    }
    return g;
  }

  // Block sums (block_sums_prologue_fusible) join the open elementwise
  // group computing their operand, which becomes their prologue: the group
  // turns into a reduction over the block sums' domain. The template reads the operand's dims from an input of
  // the operand's shape, so the group must read one.
  int prologue_group(const ir::Operation& op) {
    if (!prologues_ || !block_sums_prologue_fusible(op)) return -1;
    const ir::Value* x = op.operand(0);
    const int g = group_of(x);
    if (g < 0 || !is_open_elementwise(g, x->type().shape)) return -1;
    Group& group = groups_[static_cast<std::size_t>(g)];
    bool dims_input = false;
    for (const ir::Operation* member : group.ops) {
      if (has_effect(*member)) return -1;
      for (const ir::Value* v : member->operands()) {
        const ir::Operation* d = v->defining_op();
        const bool outside = !d || (group_of(v) != g && d->name() != "graph.constant");
        dims_input = dims_input || (outside && v->type().shape == x->type().shape);
      }
    }
    if (!dims_input) return -1;
    group.family = Family::reduction;
    group.domain = op.result(0)->type().shape;
    group.prologue = true;
    return g;
  }

  // g now depends on h (and on what h depends on); so does every group that
  // depends on g, keeping the transitive sets exact.
  void depend(int g, int h) {
    std::set<int> add = groups_[static_cast<std::size_t>(h)].deps;
    add.insert(h);
    for (std::size_t k = 0; k < groups_.size(); ++k) {
      Group& group = groups_[k];
      if (static_cast<int>(k) == g || group.deps.count(g)) group.deps.insert(add.begin(), add.end());
    }
  }

  bool is_open_elementwise(int g, const ir::Shape& domain) const {
    const Group& group = groups_[static_cast<std::size_t>(g)];
    return group.family == Family::elementwise && group.lane_fusible && !group.ops.empty() && group.domain == domain;
  }

  // Sibling fusion, part 1: an elementwise op reading two elementwise groups
  // of its domain that do not depend on each other merges them first, so one
  // kernel computes both branches and the op.
  void merge_sibling_operands(const ir::Operation& op) {
    const ir::Shape& domain = op.result(0)->type().shape;
    int into = -1;
    for (ir::Value* v : op.operands()) {
      const int g = group_of(v);
      if (g < 0 || g == into || !is_open_elementwise(g, domain)) continue;
      if (into < 0) {
        into = g;
        continue;
      }
      const auto& a = groups_[static_cast<std::size_t>(into)];
      const auto& b = groups_[static_cast<std::size_t>(g)];
      if (!a.deps.count(g) && !b.deps.count(into)) merge(g, into);
    }
  }

  // Sibling fusion, part 2: an elementwise op that reads no group (only
  // arguments and constants) joins the latest elementwise group of its
  // domain, which cannot depend on it.
  int sibling_group(const ir::Operation& op) const {
    for (ir::Value* v : op.operands()) {
      if (group_of(v) >= 0) return -1;
    }
    const ir::Shape& domain = op.result(0)->type().shape;
    for (std::size_t g = groups_.size(); g-- > 0;) {
      if (is_open_elementwise(static_cast<int>(g), domain)) return static_cast<int>(g);
    }
    return -1;
  }

  // Moves every op of group `from` into group `into` (siblings: neither
  // depends on the other); `from` is left empty.
  void merge(int from, int into) {
    Group& src = groups_[static_cast<std::size_t>(from)];
    Group& dst = groups_[static_cast<std::size_t>(into)];
    for (ir::Operation* op : src.ops) group_[op] = into;
    dst.ops.insert(dst.ops.end(), src.ops.begin(), src.ops.end());
    in_program_order(dst.ops);
    dst.first_position = std::min(dst.first_position, src.first_position);
    std::set<int> src_deps = src.deps;
    src.ops.clear();
    src.deps.clear();
    for (Group& group : groups_) {
      if (group.deps.erase(from)) group.deps.insert(into);
    }
    for (int h : src_deps) {
      if (h != into) depend(into, h);
    }
  }

  void add_to_group(ir::Operation* op, int g) {
    group_[op] = g;
    groups_[static_cast<std::size_t>(g)].ops.push_back(op);
    if (!lane_fusible(*op)) groups_[static_cast<std::size_t>(g)].lane_fusible = false;
    for (ir::Value* v : op->operands()) {
      const int h = group_of(v);
      if (h >= 0 && h != g) depend(g, h);
    }
  }

  void in_program_order(std::vector<ir::Operation*>& ops) const {
    std::sort(ops.begin(), ops.end(),
              [&](const ir::Operation* x, const ir::Operation* y) { return position_.at(x) < position_.at(y); });
  }

  // A normalization's operand that is an exact widening cast (bf16 -> fp32,
  // as autodiff casts a gradient's inputs) read by nothing else moves into
  // the normalization's group g: the kernel reads the narrow values once
  // instead of a cast kernel writing and the normalization reading wide
  // ones (exact_widening_cast). The cast's old group keeps its other ops.
  void pull_widening_casts(const ir::Operation& op, int g) {
    for (ir::Value* v : op.operands()) {
      ir::Operation* cast = v->defining_op();
      const int h = group_of(v);
      if (!cast || h < 0 || h == g || widened_source(v, op) == v) continue;
      Group& from = groups_[static_cast<std::size_t>(h)];
      from.ops.erase(std::find(from.ops.begin(), from.ops.end(), cast));
      if (from.ops.empty()) {
        // Nothing is left to depend on.
        from.deps.clear();
        for (Group& group : groups_) group.deps.erase(h);
      }
      Group& into = groups_[static_cast<std::size_t>(g)];
      group_[cast] = g;
      into.ops.push_back(cast);
      in_program_order(into.ops);
      into.first_position = std::min(into.first_position, position_.at(cast));
      const int source = group_of(cast->operand(0));
      if (source >= 0) depend(g, source);
    }
  }

  // Tail sinking: the elementwise ops at the end of a group whose results
  // only one other group reads (a GEMM's epilogue computing GELU' for the
  // backward's product, say) move into that reader when that moves fewer
  // bytes: the group then stores the tail's inputs (z in bf16) instead of its
  // results (GELU'(z) in fp32), and the reader computes the tail. The ops and
  // their roundings are the same, so the bits are.
  void sink_tails() {
    for (std::size_t g = 0; g < groups_.size(); ++g) {
      // A prologue's ops compute the reduced operand: they stay.
      if (!fuses_elementwise(groups_[g].family) || groups_[g].ops.size() < 2 || groups_[g].prologue) continue;
      int reader = -1;
      const std::set<const ir::Operation*> tail = tail_of(static_cast<int>(g), reader);
      if (tail.empty() || !sinking_pays(static_cast<int>(g), reader, tail)) continue;
      move_tail(static_cast<int>(g), reader, tail);
    }
  }

  // The group other than g that reads op's result outside `tail`: -1 when
  // only the tail reads it, -2 when g itself, the function's return or two
  // groups do.
  int outside_reader(const ir::Operation& op, int g, const std::set<const ir::Operation*>& tail) const {
    int reader = -1;
    for (const ir::Use& use : op.result(0)->uses()) {
      if (tail.count(use.user)) continue;
      const int h = group_.count(use.user) ? group_.at(use.user) : -1;
      if (h < 0 || h == g || (reader >= 0 && reader != h)) return -2;
      reader = h;
    }
    return reader;
  }

  // g's sinkable tail, latest op first, and its one reader: elementwise ops
  // (never the group's root) whose results only the tail and that reader read.
  std::set<const ir::Operation*> tail_of(int g, int& reader) const {
    std::set<const ir::Operation*> tail;
    const std::vector<ir::Operation*>& ops = groups_[static_cast<std::size_t>(g)].ops;
    for (auto it = ops.rbegin(); it + 1 != ops.rend(); ++it) {
      const ir::Operation& op = **it;
      if (family_of(op) != Family::elementwise || !lane_fusible(op) || has_effect(op) || op.num_results() != 1) {
        continue;
      }
      // An op another group reads stays (it is stored anyway).
      const int r = outside_reader(op, g, tail);
      if (r == -2 || (r >= 0 && reader >= 0 && r != reader)) continue;
      if (r >= 0) reader = r;
      if (reader >= 0) tail.insert(&op);
    }
    return tail;
  }

  // Whether moving `tail` from g into `reader` is legal (the reader's domain,
  // after its root in program order, no cycle) and stores fewer bits per
  // element: the tail's inputs g does not store yet against the tail's
  // results the reader reads.
  bool sinking_pays(int g, int reader, const std::set<const ir::Operation*>& tail) const {
    const Group& into = groups_[static_cast<std::size_t>(reader)];
    if (!fuses_elementwise(into.family) || into.ops.empty()) return false;
    const std::size_t root_position = position_.at(into.ops.front());
    auto bits = [](const ir::Value* v) { return static_cast<std::size_t>(bit_width(v->type().policy.storage)); };
    auto read_outside = [&](const ir::Value* v, int group) {
      for (const ir::Use& use : v->uses()) {
        if (!tail.count(use.user) && (!group_.count(use.user) || group_.at(use.user) != group)) return true;
      }
      return false;
    };
    std::size_t stored_now = 0, stored_after = 0;
    std::set<const ir::Value*> new_outputs;
    for (const ir::Operation* op : tail) {
      if (op->result(0)->type().shape != into.domain || position_.at(op) <= root_position) return false;
      if (read_outside(op->result(0), -1)) stored_now += bits(op->result(0));
      for (const ir::Value* v : op->operands()) {
        const int h = group_of(v);
        if (h >= 0 && h != g && groups_[static_cast<std::size_t>(h)].deps.count(reader)) return false;
        if (h == g && !tail.count(v->defining_op()) && !read_outside(v, g) && new_outputs.insert(v).second) {
          stored_after += bits(v);
        }
      }
    }
    return stored_after < stored_now;
  }

  void move_tail(int g, int reader, const std::set<const ir::Operation*>& tail) {
    Group& from = groups_[static_cast<std::size_t>(g)];
    Group& into = groups_[static_cast<std::size_t>(reader)];
    std::vector<ir::Operation*> moved;
    for (ir::Operation* op : from.ops) {
      if (tail.count(op)) moved.push_back(op);
    }
    for (ir::Operation* op : moved) {
      from.ops.erase(std::find(from.ops.begin(), from.ops.end(), op));
      group_[op] = reader;
      into.ops.push_back(op);
    }
    in_program_order(into.ops);
    for (ir::Operation* op : moved) {
      for (ir::Value* v : op->operands()) {
        const int h = group_of(v);
        if (h >= 0 && h != reader) depend(reader, h);
      }
    }
  }

  // A splat constant read only by groups that fuse elementwise ops is copied
  // into them; any other constant gets its own kernel.
  void place_constants() {
    for (ir::Operation* c : constants_) {
      bool inline_everywhere = is_splat_constant(*c);
      for (const ir::Use& use : c->result(0)->uses()) {
        const int g = group_.count(use.user) ? group_[use.user] : -1;
        if (g < 0 || !fuses_elementwise(groups_[static_cast<std::size_t>(g)].family)) inline_everywhere = false;
      }
      if (inline_everywhere) {
        inlined_.insert(c);
        continue;
      }
      const int g = static_cast<int>(groups_.size());
      groups_.push_back(Group{Family::constant, c->result(0)->type().shape, {}, {}, position_[c]});
      add_to_group(c, g);
      for (const ir::Use& use : c->result(0)->uses()) {
        if (group_.count(use.user)) depend(group_[use.user], g);
      }
    }
  }

  std::vector<int> topological_order() const {
    const std::size_t n = groups_.size();
    std::vector<int> pending(n, 0);
    std::vector<std::vector<int>> users(n);
    for (std::size_t g = 0; g < n; ++g) {
      for (int h : direct_deps(static_cast<int>(g))) {
        ++pending[g];
        users[static_cast<std::size_t>(h)].push_back(static_cast<int>(g));
      }
    }
    using Item = std::pair<std::size_t, int>;  // (first position, group)
    std::priority_queue<Item, std::vector<Item>, std::greater<>> ready;
    for (std::size_t g = 0; g < n; ++g) {
      if (pending[g] == 0) ready.emplace(groups_[g].first_position, static_cast<int>(g));
    }
    // Groups emptied by a merge come out first and build no kernel.
    std::vector<int> order;
    while (!ready.empty()) {
      const int g = ready.top().second;
      ready.pop();
      order.push_back(g);
      for (int u : users[static_cast<std::size_t>(g)]) {
        if (--pending[static_cast<std::size_t>(u)] == 0) ready.emplace(groups_[static_cast<std::size_t>(u)].first_position, u);
      }
    }
    if (order.size() != n) raise(ErrorCode::Internal, "schedule-partition built a cyclic group graph");
    return order;
  }

  // Groups whose results this group reads, plus the effect chain.
  std::set<int> direct_deps(int g) const {
    std::set<int> out;
    const Group& group = groups_[static_cast<std::size_t>(g)];
    for (ir::Operation* op : group.ops) {
      for (ir::Value* v : op->operands()) {
        const int h = group_of(v);
        if (h >= 0 && h != g) out.insert(h);
      }
    }
    if (group.effect_predecessor >= 0) out.insert(group.effect_predecessor);
    return out;
  }

  void build_kernels() {
    ir::Operation* ret = body_.terminator();
    int next_name = 0;
    for (int g : topological_order()) {
      Group& group = groups_[static_cast<std::size_t>(g)];
      if (group.ops.empty()) continue;  // merged into a sibling
      std::set<const ir::Operation*> members(group.ops.begin(), group.ops.end());
      // Inputs: external operands in order of first use; inlined constants are copied in.
      std::vector<ir::Value*> inputs;
      std::vector<const ir::Operation*> copied_constants;
      for (ir::Operation* op : group.ops) {
        for (ir::Value* v : op->operands()) {
          const ir::Operation* d = v->defining_op();
          if (d && members.count(d)) continue;
          if (d && inlined_.count(d)) {
            if (std::find(copied_constants.begin(), copied_constants.end(), d) == copied_constants.end()) {
              copied_constants.push_back(d);
            }
            continue;
          }
          if (std::find(inputs.begin(), inputs.end(), v) == inputs.end()) inputs.push_back(v);
        }
      }
      // Outputs: member results read outside the group (or returned).
      std::vector<ir::Value*> outputs;
      std::vector<ir::Type> output_types;
      for (ir::Operation* op : group.ops) {
        for (ir::Value* r : op->results()) {
          bool external = false;
          for (const ir::Use& use : r->uses()) external = external || !members.count(use.user);
          if (external) {
            outputs.push_back(r);
            output_types.push_back(r->type());
          }
        }
      }
      ir::AttrMap attrs;
      attrs.set("name", "k" + std::to_string(next_name++));
      attrs.set("family", std::string(family_name(group.family)));
      attrs.set("result_types", ir::print_type_list(output_types));
      attrs.set("domain", group.domain);
      ir::OpBuilder b(body_);
      b.set_insertion_point(body_.find(ret));
      ir::Operation* kernel = b.create("schedule.kernel", inputs, std::move(attrs), group.ops.front()->location());
      ir::Block& kbody = kernel->add_region().add_block();
      std::unordered_map<const ir::Value*, ir::Value*> map;
      for (ir::Value* v : inputs) map[v] = kbody.add_argument(v->type(), v->name());
      ir::OpBuilder inner(kbody);
      auto clone = [&](const ir::Operation* op) {
        std::vector<ir::Value*> operands;
        for (ir::Value* v : op->operands()) operands.push_back(map.at(v));
        ir::Operation* copy = inner.create(op->def(), operands, op->attrs(), op->location());
        for (std::size_t i = 0; i < op->num_results(); ++i) map[op->result(i)] = copy->result(i);
      };
      for (const ir::Operation* c : copied_constants) clone(c);
      for (ir::Operation* op : group.ops) clone(op);
      std::vector<ir::Value*> yielded;
      for (ir::Value* v : outputs) yielded.push_back(map.at(v));
      inner.create("schedule.yield", yielded, {}, group.ops.back()->location());
      for (std::size_t i = 0; i < outputs.size(); ++i) outputs[i]->replace_all_uses_with(kernel->result(i));
      for (auto it = group.ops.rbegin(); it != group.ops.rend(); ++it) body_.erase(*it);
    }
    // Inlined constants now have no users left.
    for (ir::Operation* c : constants_) {
      if (inlined_.count(c)) body_.erase(c);
    }
  }

  ir::Block& body_;
  const bool prologues_;
  std::vector<Group> groups_;
  std::unordered_map<const ir::Operation*, int> group_;
  std::unordered_map<const ir::Operation*, std::size_t> position_;
  std::vector<ir::Operation*> constants_;
  std::set<const ir::Operation*> inlined_;
};

}  // namespace

bool column_prologues_enabled() {
  const bool on = binary_knob("TESSERA_COLUMN_PROLOGUE", false);
  if (on && !column_blocks_enabled()) {
    raise(ErrorCode::ArgumentInvalid, "TESSERA_COLUMN_PROLOGUE=1 fuses into block sums, which TESSERA_COLUMN_BLOCKS=0 "
                                      "turns off (column sums stay whole and take no prologue)");
  }
  return on;
}

void partition(ir::Operation& func, bool column_prologues) {
  // Schedule IR is made from Graph IR only: a Tile IR kernel (or a function
  // already partitioned) is a clear error, not a walk over ops it does not know.
  for (const auto& op : ir::function_body(func).ops()) {
    const std::string_view d = op->def().dialect();
    if (d == "graph" || op.get() == ir::function_body(func).terminator()) continue;
    raise(ErrorCode::ArgumentInvalid,
          "'" + std::string(op->name()) + "' in function '" + ir::function_name(func) +
              "' is not Graph IR: Schedule IR partitions Graph IR functions (Tile IR kernels go to the backends "
              "directly, e.g. through the kernel language)",
          op->location());
  }
  Partitioner(func, column_prologues).run();
}

}  // namespace tessera::schedule
