// tile-pipeline: software pipelining of tile.for {prefetch = N}.
//
// Supported pattern: the loop body begins with pure lane ops and M >= 1
// tile.cp_async copies whose destinations are distinct shared buffers
// allocated outside the loop and used only inside it, whose sources are
// defined outside the loop and not written by it, and whose offsets depend
// only on the induction variable and values from outside the loop; the body
// issues no other copy and its cp_async_wait ops all have pending = 0.
//
// Transformation (N stages): each copied buffer gets N-1 more allocations,
// B_0 (the original) .. B_{N-1}. A prologue issues the copies of iterations
// 0 .. N-2 into B_0 .. B_{N-2}. The loop is unrolled by N (step * N); its
// j-th sub-iteration, for iv t_j = t + j * step, first issues the copies of
// iteration t_j + (N-1) * step into B_{(j+N-1) mod N}, then runs the rest of
// the original body on B_j, with its waits relaxed to pending = M * (N-1)
// (the copies issued after this iteration's own, so this iteration's have
// landed). Sub-iterations after the first are guarded by t_j < hi, a
// uniform condition. Copies are issued unconditionally so the wait counts
// hold; those past the end read zeros or unused data into buffers nothing
// reads. After the loop, tile.cp_async_wait {pending = 0} and tile.barrier
// retire them. Each iteration thus reads exactly the data it copied before,
// so results are unchanged. Loops that do not match are left unchanged with
// a `remark` attribute saying why.
//
// Async mma (the accumulator stays in flight): when every read of the
// copied buffers in the body is a tile_load used only as an operand of a
// tile.mma of the body whose acc is a loop-carried value and whose result
// only goes back to the yield at that position (the GEMM main loop), those
// mmas become async = true (P of them per iteration) and each sub-iteration
// runs the rest of the body with its waits relaxed to pending = M * (N-2),
// then tile.mma_wait {pending = P} (the previous iteration's mmas have
// completed; 0 when the guard skipped this one's), tile.barrier, and only
// then issues the copies of t_j + (N-1) * step, into the buffers the
// previous iteration's mmas read. The tensor cores work on iteration k
// while the group waits for, and issues, the copies around it. After the
// loop, tile.mma_wait {pending = 0} completes the last mmas.
#include <algorithm>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "tessera/ir/builder.h"
#include "tessera/support/error.h"
#include "tessera/tile/passes.h"
#include "tessera/tile/tile_builder.h"
#include "tessera/tile/tile_dialect.h"

namespace tessera::tile {
namespace {

using ValueMap = std::unordered_map<const ir::Value*, ir::Value*>;

ir::Value* lookup(const ValueMap& map, ir::Value* v) {
  auto it = map.find(v);
  return it == map.end() ? v : it->second;
}

// Copies `op` (and its regions) before `pos` in `block`, mapping operands;
// results and block arguments are added to `map`.
ir::Operation* clone_into(ir::Block& block, ir::Block::OpList::iterator pos, const ir::Operation& op, ValueMap& map,
                          const std::function<void(ir::Operation&, const ir::Operation&)>& adjust = {}) {
  std::vector<ir::Value*> operands;
  for (ir::Value* v : op.operands()) operands.push_back(lookup(map, v));
  std::vector<ir::Type> types;
  for (ir::Value* r : op.results()) types.push_back(r->type());
  auto copy =
      std::make_unique<ir::Operation>(op.def(), std::move(operands), std::move(types), op.attrs(), op.location());
  ir::Operation* made = block.insert(pos, std::move(copy));
  for (std::size_t i = 0; i < op.num_results(); ++i) map[op.result(i)] = made->result(i);
  for (std::size_t r = 0; r < op.num_regions(); ++r) {
    ir::Region& region = made->add_region();
    for (std::size_t b = 0; b < op.region(r).num_blocks(); ++b) {
      const ir::Block& from = op.region(r).block(b);
      ir::Block& to = region.add_block();
      for (std::size_t a = 0; a < from.num_arguments(); ++a) {
        map[from.argument(a)] = to.add_argument(from.argument(a)->type(), from.argument(a)->name());
      }
      for (const auto& inner : from.ops()) clone_into(to, to.ops().end(), *inner, map, adjust);
    }
  }
  if (adjust) adjust(*made, op);
  return made;
}

std::string at_text(const ir::Operation& op) {
  const SourceLocation& loc = op.location();
  return loc.valid() ? " at " + std::to_string(loc.line) + ":" + std::to_string(loc.column) : "";
}

void walk(const ir::Block& block, const std::function<void(const ir::Operation&)>& f) {
  for (const auto& op : block.ops()) {
    f(*op);
    for (std::size_t r = 0; r < op->num_regions(); ++r) walk(op->region(r).block(), f);
  }
}

struct Plan {
  std::vector<const ir::Operation*> lead;           // the leading ops (pure lane ops and copies), in order
  std::vector<const ir::Operation*> copies;         // the leading copies
  std::unordered_set<const ir::Operation*> needed;  // leading pure ops the copies' offsets need
  std::unordered_set<const ir::Operation*> async;   // the mmas that may stay in flight (empty: none)
};

// The body's mmas that may become async, or empty: every use of a copied
// buffer in the body is a tile_load (optionally through tile.transpose) used
// only as operand a or b of a tile.mma directly in the body, whose acc is a
// loop-carried value and whose result is used only by the yield, at that
// value's position.
std::unordered_set<const ir::Operation*> async_mmas(const ir::Operation& loop, const Plan& plan) {
  const ir::Block& body = loop.region(0).block();
  const ir::Operation* yield = body.terminator();
  std::unordered_set<const ir::Operation*> mmas;
  auto only_use = [](const ir::Value* v) -> const ir::Use* { return v->uses().size() == 1 ? &v->uses()[0] : nullptr; };
  for (const ir::Operation* c : plan.copies) {
    for (const ir::Use& u : c->operand(0)->uses()) {
      if (u.user == c) continue;
      if (u.user->name() != "tile.tile_load" || u.user->parent_block() != &body) return {};
      const ir::Use* use = only_use(u.user->result(0));
      if (use && use->user->name() == "tile.transpose" && use->user->parent_block() == &body)
        use = only_use(use->user->result(0));
      if (!use || use->user->name() != "tile.mma" || use->operand_index > 1 || use->user->parent_block() != &body)
        return {};
      const ir::Operation* mma = use->user;
      const ir::Value* acc = mma->operand(2);
      const ir::Use* out = only_use(mma->result(0));
      if (!acc->is_block_argument() || acc->owner_block() != &body || acc->index() == 0 || !out || out->user != yield ||
          out->operand_index + 1 != acc->index())
        return {};
      mmas.insert(mma);
    }
  }
  return mmas;
}

// Empty when `loop` matches the supported pattern; otherwise why not.
std::string match(const ir::Operation& loop, std::int64_t stages, Plan& plan) {
  if (stages < 2) return "prefetch = 1 leaves no copy to overlap; nothing to pipeline";
  const ir::Block& body = loop.region(0).block();
  const ir::Value* iv = body.argument(0);
  for (const auto& op : body.ops()) {
    bool pure = op->def().effect == ir::Effect::pure && op->num_regions() == 0 && !op->def().is_terminator;
    if (op->name() == "tile.cp_async") {
      plan.copies.push_back(op.get());
    } else if (!pure) {
      break;
    }
    plan.lead.push_back(op.get());
  }
  if (plan.copies.empty()) return "the body does not begin with tile.cp_async copies";
  // What the copies' operands need from the leading pure ops.
  std::function<std::string(const ir::Value*)> need = [&](const ir::Value* v) -> std::string {
    if (v == iv || !ir::defined_within(v, &loop)) return "";
    const ir::Operation* def = v->defining_op();
    if (!def || std::find(plan.lead.begin(), plan.lead.end(), def) == plan.lead.end()) {
      return "a copy operand depends on a value the loop carries or computes after its copies";
    }
    if (!plan.needed.insert(def).second) return "";
    for (const ir::Value* o : def->operands()) {
      if (auto why = need(o); !why.empty()) return why;
    }
    return "";
  };
  std::unordered_set<const ir::Value*> dsts;
  for (const ir::Operation* c : plan.copies) {
    const ir::Value* dst = c->operand(0);
    const ir::Value* src = c->operand(1);
    if (!dst->defining_op() || dst->defining_op()->name() != "tile.smem_alloc" || ir::defined_within(dst, &loop)) {
      return "the destination of the tile.cp_async" + at_text(*c) + " is not a tile.smem_alloc made before the loop";
    }
    if (!dsts.insert(dst).second) return "two leading copies share a destination buffer";
    for (const ir::Use& u : dst->uses()) {
      if (!ir::is_within(u.user, &loop) || u.user == &loop) {
        return "the copied buffer is also used outside the loop ('" + std::string(u.user->name()) + "'" +
               at_text(*u.user) + ")";
      }
    }
    if (ir::defined_within(src, &loop)) return "the source of the tile.cp_async" + at_text(*c) + " is defined in the loop";
    for (std::size_t i = 1; i < c->num_operands(); ++i) {
      if (auto why = need(c->operand(i)); !why.empty()) return why;
    }
  }
  std::string why;
  int waits = 0;
  walk(body, [&](const ir::Operation& op) {
    if (!why.empty()) return;
    if (op.name() == "tile.cp_async" && std::find(plan.copies.begin(), plan.copies.end(), &op) == plan.copies.end()) {
      why = "the body issues another tile.cp_async" + at_text(op) + " after its leading copies";
    } else if (op.name() == "tile.cp_async_wait") {
      ++waits;
      if (op.attrs().get_int("pending") != 0)
        why = "a tile.cp_async_wait" + at_text(op) + " in the body has pending != 0";
    } else if (writes_buffer(op) && accessed_buffer(op)->type().is_gmem()) {
      for (const ir::Operation* c : plan.copies) {
        const ir::Value* src = c->operand(1);
        if (accessed_buffer(op) == src || (src->type().mut && accessed_buffer(op)->type().mut)) {
          why = "the loop writes global memory a copy reads ('" + std::string(op.name()) + "'" + at_text(op) +
                "), so copies cannot be issued early";
        }
      }
    }
  });
  if (!why.empty()) return why;
  if (waits == 0) return "the body has no tile.cp_async_wait before using its copies";
  plan.async = async_mmas(loop, plan);
  return "";
}

void transform(ir::Operation& loop, std::int64_t stages, const Plan& plan) {
  ir::Block& parent = *loop.parent_block();
  auto loop_pos = parent.find(&loop);
  ir::OpBuilder b(parent);
  b.set_insertion_point(loop_pos);
  const ir::Block& body = loop.region(0).block();
  ir::Value* iv = body.argument(0);
  ir::Value* lo = loop.operand(0);
  ir::Value* hi = loop.operand(1);
  ir::Value* step = loop.operand(2);
  DType index_dtype = lo->type().dtype();
  SourceLocation loc = loop.location();
  const bool async = !plan.async.empty();
  const std::int64_t per_iteration_mmas = static_cast<std::int64_t>(plan.async.size());
  // Copies in flight past the one a sub-iteration waits for: N-1 stages when
  // the next copies are issued first, N-2 when they follow the async mmas.
  const std::int64_t relaxed = static_cast<std::int64_t>(plan.copies.size()) * (async ? stages - 2 : stages - 1);

  // buffers[c][k]: B_k of copy c.
  std::vector<std::vector<ir::Value*>> buffers;
  for (const ir::Operation* c : plan.copies) {
    ir::Value* dst = c->operand(0);
    ir::Operation* alloc = dst->defining_op();
    ir::Block& home = *alloc->parent_block();
    std::vector<ir::Value*> set{dst};
    auto after = std::next(home.find(alloc));
    for (std::int64_t k = 1; k < stages; ++k) {
      ValueMap none;
      ir::Operation* extra = clone_into(home, after, *alloc, none);
      extra->attrs().erase("offset");
      set.push_back(extra->result(0));
    }
    buffers.push_back(std::move(set));
  }
  // iv + k * step, built with `builder`.
  auto offset_iv = [&](ir::OpBuilder& builder, ir::Value* base, std::int64_t k) -> ir::Value* {
    if (k == 0) return base;
    ir::Value* kk = build_int(builder, k, index_dtype);
    return build(builder, "tile.add", {base, build(builder, "tile.mul", {step, kk}, {}, loc)}, {}, loc);
  };
  // The copies of the iteration whose iv is `t`, into buffer index `k`.
  auto issue = [&](ir::OpBuilder& builder, ir::Value* t, std::int64_t k) {
    ValueMap map{{iv, t}};
    for (const ir::Operation* op : plan.lead) {
      if (plan.needed.count(op)) clone_into(builder.block(), builder.block().ops().end(), *op, map);
    }
    for (std::size_t c = 0; c < plan.copies.size(); ++c) {
      const ir::Operation* copy = plan.copies[c];
      std::vector<ir::Value*> operands{buffers[c][static_cast<std::size_t>(k)], copy->operand(1)};
      for (std::size_t i = 2; i < copy->num_operands(); ++i) operands.push_back(lookup(map, copy->operand(i)));
      builder.create("tile.cp_async", std::move(operands), {}, copy->location());
    }
  };

  // Prologue: the copies of iterations 0 .. N-2, before the loop.
  for (std::int64_t k = 0; k + 1 < stages; ++k) {
    ir::Value* t = offset_iv(b, lo, k);
    ValueMap map{{iv, t}};
    for (const ir::Operation* op : plan.lead) {
      if (plan.needed.count(op)) clone_into(parent, loop_pos, *op, map);
    }
    for (std::size_t c = 0; c < plan.copies.size(); ++c) {
      const ir::Operation* copy = plan.copies[c];
      std::vector<ir::Value*> operands{buffers[c][static_cast<std::size_t>(k)], copy->operand(1)};
      for (std::size_t i = 2; i < copy->num_operands(); ++i) operands.push_back(lookup(map, copy->operand(i)));
      b.create("tile.cp_async", std::move(operands), {}, copy->location());
    }
  }

  ir::Value* wide_step = build(b, "tile.mul", {step, build_int(b, stages, index_dtype)}, {}, loc);
  std::vector<ir::Value*> inits(loop.operands().begin() + 3, loop.operands().end());
  std::vector<std::string> names;
  for (std::size_t a = 0; a < body.num_arguments(); ++a) names.push_back(body.argument(a)->name());
  auto relax = [&](ir::Operation& op, const ir::Operation& original) {
    if (op.name() == "tile.cp_async_wait") op.attrs().set("pending", relaxed);
    if (plan.async.count(&original) != 0) op.attrs().set("async", true);
  };
  auto mma_wait = [&](ir::OpBuilder& builder, std::int64_t pending) {
    builder.create("tile.mma_wait", {}, {{"pending", pending}}, loc);
  };
  // The rest of the original body for iteration `t` on buffers index `k`,
  // starting from `current` iter values; returns the yielded values.
  // With async mmas, barriers between the body's last mma and its yield
  // (with only pure ops around them) are dropped: the barrier after the
  // tile.mma_wait that follows orders the same accesses.
  std::unordered_set<const ir::Operation*> dropped;
  if (async) {
    std::vector<const ir::Operation*> trailing;
    for (auto it = std::next(body.ops().rbegin()); it != body.ops().rend(); ++it) {
      const ir::Operation& op = **it;
      if (op.name() == "tile.barrier") {
        trailing.push_back(&op);
      } else if (plan.async.count(&op) != 0 || op.def().effect != ir::Effect::pure || op.num_regions() != 0) {
        if (plan.async.count(&op) != 0) dropped.insert(trailing.begin(), trailing.end());
        break;
      }
    }
  }
  auto rest = [&](ir::OpBuilder& builder, ir::Value* t, std::int64_t k, std::span<ir::Value* const> current) {
    ValueMap map{{iv, t}};
    for (std::size_t i = 0; i < current.size(); ++i) map[body.argument(1 + i)] = current[i];
    for (std::size_t c = 0; c < plan.copies.size(); ++c)
      map[plan.copies[c]->operand(0)] = buffers[c][static_cast<std::size_t>(k)];
    std::vector<ir::Value*> yielded;
    for (const auto& op : body.ops()) {
      if (std::find(plan.copies.begin(), plan.copies.end(), op.get()) != plan.copies.end()) continue;
      if (dropped.count(op.get()) != 0) continue;
      if (op.get() == body.terminator()) {
        for (ir::Value* v : op->operands()) yielded.push_back(lookup(map, v));
        continue;
      }
      clone_into(builder.block(), builder.block().ops().end(), *op, map, relax);
    }
    return yielded;
  };
  ir::Operation* pipelined = build_for(
      b, lo, hi, wide_step, inits,
      [&](ir::OpBuilder& nb, std::span<ir::Value* const> args) {
        ir::Value* t = args[0];
        std::vector<ir::Value*> current(args.begin() + 1, args.end());
        for (std::int64_t j = 0; j < stages; ++j) {
          ir::Value* tj = offset_iv(nb, t, j);
          if (!async) issue(nb, offset_iv(nb, tj, stages - 1), (j + stages - 1) % stages);
          if (j == 0) {
            current = rest(nb, tj, 0, current);
            if (async) mma_wait(nb, per_iteration_mmas);
          } else {
            ir::Value* in_range = build(nb, "tile.cmp", {tj, hi}, {{"pred", std::string("lt")}}, loc);
            ir::Operation* guard = build_if(
                nb, in_range, current,
                [&](ir::OpBuilder& tb, std::span<ir::Value* const> a) {
                  std::vector<ir::Value*> out = rest(tb, tj, j, a);
                  if (async) mma_wait(tb, per_iteration_mmas);
                  return out;
                },
                [&](ir::OpBuilder& eb, std::span<ir::Value* const> a) {
                  if (async) mma_wait(eb, 0);
                  return std::vector<ir::Value*>(a.begin(), a.end());
                },
                loc);
            current = guard->results();
          }
          if (async) {
            // The previous sub-iteration's mmas are complete in every tile:
            // their buffers take the next copies.
            nb.create("tile.barrier", {}, {}, loc);
            issue(nb, offset_iv(nb, tj, stages - 1), (j + stages - 1) % stages);
          }
        }
        return current;
      },
      std::nullopt, names, loc);
  pipelined->attrs().set("remark", "pipelined: " + std::to_string(stages) + " stages, " +
                                       std::to_string(plan.copies.size()) + " copy group(s) per iteration" +
                                       (async ? ", " + std::to_string(per_iteration_mmas) + " async mma(s)" : ""));
  if (async) mma_wait(b, 0);
  b.create("tile.cp_async_wait", {}, {{"pending", std::int64_t{0}}}, loc);
  b.create("tile.barrier", {}, {}, loc);
  for (std::size_t i = 0; i < loop.num_results(); ++i) loop.result(i)->replace_all_uses_with(pipelined->result(i));
  parent.erase(&loop);
}

void pipeline_block(ir::Block& block, int& count) {
  std::vector<ir::Operation*> ops;
  for (auto& op : block.ops()) ops.push_back(op.get());
  for (ir::Operation* op : ops) {
    for (std::size_t r = 0; r < op->num_regions(); ++r) pipeline_block(op->region(r).block(), count);
    if (op->name() != "tile.for" || !op->attrs().has("prefetch")) continue;
    std::int64_t stages = op->attrs().get_int("prefetch");
    Plan plan;
    std::string why = match(*op, stages, plan);
    if (!why.empty()) {
      op->attrs().set("remark", "not pipelined: " + why);
      continue;
    }
    transform(*op, stages, plan);
    ++count;
  }
}

}  // namespace

int pipeline_loops(ir::Operation& func) {
  int count = 0;
  pipeline_block(ir::function_body(func), count);
  return count;
}

}  // namespace tessera::tile
