// tile-plan-shared: places every tile.smem_alloc of a kernel in shared memory.
//
// Ops are numbered in program order (an op with regions spans the numbers of
// the ops inside it). A buffer lives from its allocation to the end of the
// last op, in the allocation's own block, that uses it or a block argument
// or result it flows into. A cp_async destination lives on after its last
// use, since the copy may land later: to the first tile.barrier of that
// block that follows a tile.cp_async_wait {pending = 0} after the use (every
// lane's copies have landed, and every lane knows it), or to the block's end
// without one. So a GEMM's epilogue buffer reuses its pipeline's operand
// buffers once the pipeline's trailing wait and barrier retire them
// (tile-pipeline emits that pair). Any other buffer lives on to the end of
// the first tile.barrier of its block after its last use (or to the block's
// end): a lane still reading it must be done before another buffer placed
// over it is written, so templates need no barrier of their own after a
// buffer's last read. Allocations are placed
// in program order at the lowest 128-aligned offset that overlaps no live
// buffer (first fit). The total is stored in the kernel's `shared_used`.
#include <algorithm>
#include <unordered_map>
#include <vector>

#include "tessera/numerics/dtype.h"
#include "tessera/support/error.h"
#include "tessera/tile/passes.h"
#include "tessera/tile/tile_dialect.h"

namespace tessera::tile {
namespace {

struct Span {
  int begin = 0, end = 0;
};

class Numbering {
 public:
  explicit Numbering(const ir::Block& body) { walk(body); }
  const Span& span(const ir::Operation* op) const { return spans_.at(op); }
  int block_end(const ir::Block* b) const { return block_end_.at(b); }

 private:
  void walk(const ir::Block& block) {
    for (const auto& op : block.ops()) {
      Span s;
      s.begin = next_++;
      for (std::size_t r = 0; r < op->num_regions(); ++r) {
        for (std::size_t b = 0; b < op->region(r).num_blocks(); ++b) walk(op->region(r).block(b));
      }
      s.end = next_++;
      spans_[op.get()] = s;
    }
    block_end_[&block] = next_++;
  }
  int next_ = 0;
  std::unordered_map<const ir::Operation*, Span> spans_;
  std::unordered_map<const ir::Block*, int> block_end_;
};

// The ancestor of `op` (or op itself) that sits directly in `block`, if any.
const ir::Operation* ancestor_in(const ir::Operation* op, const ir::Block* block) {
  while (op && op->parent_block() != block) {
    const ir::Block* b = op->parent_block();
    op = b && b->parent_region() ? b->parent_region()->parent_op() : nullptr;
  }
  return op;
}

// Values `v` flows into through control flow: block arguments it initialises
// and results of ops whose terminators pass it on.
void flows(const ir::Value* v, std::vector<const ir::Value*>& out) {
  if (std::find(out.begin(), out.end(), v) != out.end()) return;
  out.push_back(v);
  for (const ir::Use& u : v->uses()) {
    const ir::Operation* user = u.user;
    std::string_view n = user->name();
    if (n == "tile.for" || n == "tile.if" || n == "tile.while") {
      std::size_t first = n == "tile.for" ? 3 : n == "tile.if" ? 1 : 0;
      if (u.operand_index < first) continue;
      std::size_t i = u.operand_index - first;
      std::size_t arg = i + (n == "tile.for" ? 1 : 0);
      for (std::size_t r = 0; r < user->num_regions(); ++r) {
        const ir::Block& b = user->region(r).block();
        if (arg < b.num_arguments()) flows(b.argument(arg), out);
      }
      if (i < user->num_results()) flows(user->result(i), out);
    } else if (n == "tile.yield" || n == "tile.condition") {
      const ir::Operation* parent = user->parent_block()->parent_region()->parent_op();
      std::size_t i = u.operand_index - (n == "tile.condition" ? 1 : 0);
      if (n == "tile.condition" && u.operand_index == 0) continue;
      if (i < parent->num_results()) flows(parent->result(i), out);
      // Loop-carried: the value becomes the next iteration's block argument.
      std::size_t arg = i + (parent->name() == "tile.for" ? 1 : 0);
      for (std::size_t r = 0; r < parent->num_regions(); ++r) {
        const ir::Block& b = parent->region(r).block();
        if (parent->name() != "tile.if" && arg < b.num_arguments()) flows(b.argument(arg), out);
      }
    }
  }
}

void collect_allocs(const ir::Block& block, std::vector<ir::Operation*>& out) {
  for (const auto& op : block.ops()) {
    if (op->name() == "tile.smem_alloc") out.push_back(op.get());
    for (std::size_t r = 0; r < op->num_regions(); ++r) collect_allocs(op->region(r).block(), out);
  }
}

// Where a cp_async into a buffer, issued by `top` (an op of `home`), is
// certainly complete for every lane: the end of the first tile.barrier of
// `home` after a tile.cp_async_wait {pending = 0} after `top`; otherwise the
// end of `home`.
int copy_retired(const Numbering& numbering, const ir::Block* home, const ir::Operation* top) {
  bool after = false, waited = false;
  for (const auto& op : home->ops()) {
    if (op.get() == top) {
      after = true;
      continue;
    }
    if (!after) continue;
    if (op->name() == "tile.cp_async_wait" && op->attrs().get_int("pending") == 0) waited = true;
    if (waited && op->name() == "tile.barrier") return numbering.span(op.get()).end;
  }
  return numbering.block_end(home);
}

// The end of the first tile.barrier of `home` that begins after `last`
// (every lane has finished its accesses before it), or of `home` itself.
int read_retired(const Numbering& numbering, const ir::Block* home, int last) {
  for (const auto& op : home->ops()) {
    if (op->name() == "tile.barrier" && numbering.span(op.get()).begin > last) return numbering.span(op.get()).end;
  }
  return numbering.block_end(home);
}

std::string at_text(const ir::Operation& op) {
  const SourceLocation& loc = op.location();
  return loc.valid() ? " at " + std::to_string(loc.line) + ":" + std::to_string(loc.column) : "";
}

}  // namespace

std::int64_t plan_shared(ir::Operation& func) {
  const ir::Block& body = ir::function_body(func);
  std::vector<ir::Operation*> allocs;
  collect_allocs(body, allocs);
  Numbering numbering(body);
  struct Placed {
    Span life;
    std::int64_t offset, size;
  };
  std::vector<Placed> placed;
  std::int64_t total = 0;
  std::int64_t budget = shared_budget(func);
  for (ir::Operation* alloc : allocs) {
    const ir::Type& t = alloc->result(0)->type();
    auto sizes = ir::static_sizes(t.shape);
    if (!sizes) {
      raise(ErrorCode::Compile,
            "tile-plan-shared: 'tile.smem_alloc'" + at_text(*alloc) + " has symbolic shape " +
                ir::print_shape(t.shape) + "; specialize the kernel so its size is known",
            alloc->location());
    }
    std::int64_t size = storage_bytes(t.dtype());
    for (std::int64_t d : *sizes) size *= d;
    const ir::Block* home = alloc->parent_block();
    Span life = numbering.span(alloc);
    int copies_end = life.end;  // where the last cp_async into it has landed
    std::vector<const ir::Value*> aliases;
    flows(alloc->result(0), aliases);
    for (const ir::Value* v : aliases) {
      for (const ir::Use& u : v->uses()) {
        const ir::Operation* top = ancestor_in(u.user, home);
        if (!top) continue;
        life.end = std::max(life.end, numbering.span(top).end);
        if (u.user->name() == "tile.cp_async" && u.operand_index == 0) {
          copies_end = std::max(copies_end, copy_retired(numbering, home, top));
        }
      }
    }
    life.end = std::max(read_retired(numbering, home, life.end), copies_end);
    std::vector<std::pair<std::int64_t, std::int64_t>> busy;
    for (const Placed& p : placed) {
      if (p.life.begin <= life.end && life.begin <= p.life.end) busy.emplace_back(p.offset, p.offset + p.size);
    }
    std::sort(busy.begin(), busy.end());
    std::int64_t offset = 0;
    for (const auto& [lo, hi] : busy) {
      if (offset + size <= lo) break;
      offset = std::max(offset, (hi + kSharedAlignment - 1) / kSharedAlignment * kSharedAlignment);
    }
    if (offset + size > budget) {
      raise(ErrorCode::Compile,
            "tile-plan-shared: 'tile.smem_alloc'" + at_text(*alloc) + " of " + std::to_string(size) +
                " bytes needs shared memory up to byte " + std::to_string(offset + size) + " (placed at offset " +
                std::to_string(offset) + " after the buffers live with it), but the kernel's budget is " +
                std::to_string(budget) + " bytes",
            alloc->location());
    }
    alloc->attrs().set("offset", offset);
    placed.push_back(Placed{life, offset, size});
    total = std::max(total, offset + size);
  }
  func.attrs().set("shared_used", total);
  return total;
}

}  // namespace tessera::tile
