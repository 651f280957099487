// tile-verify-sync: synchronisation legality of Tile IR kernels.
//
// 1. Group-cooperative ops (tessera/tile/tile_dialect.h) must run under
//    uniform control flow, with uniform operands: every tile of the group
//    must reach them together and agree on what they do.
// 2. No read (load_elem, tile_load, reduce_sum) of a shared buffer that is
//    the destination of a cp_async not yet covered by a cp_async_wait that
//    completes it followed by a barrier.
// 3. No write (cp_async, tile_store, store_elem) of a shared buffer that an
//    async tile.mma (tile-pipeline) may still be reading: a tile.mma_wait
//    that completes the mma, then a barrier, must come first.
// Parts 2 and 3 are a forward dataflow over the structured control flow. The
// state is the list of copies and async mmas possibly in flight, in issue
// order (an mma once per shared buffer it reads), each marked when a wait has
// completed it (then a barrier retires it). Branches merge by union;
// loops iterate to a fixed point, with copies renamed through the loop's
// block arguments. Shared buffers from distinct smem_alloc ops never alias,
// nor do loop arguments that a yield only permutes (double buffering); other
// buffers carried through block arguments may be any one.
#include <algorithm>
#include <unordered_map>
#include <vector>

#include "tessera/ir/dialect.h"
#include "tessera/support/error.h"
#include "tessera/tile/passes.h"
#include "tessera/tile/tile_dialect.h"
#include "tessera/tile/uniformity.h"

namespace tessera::tile {
namespace {

std::string at_text(const ir::Operation& op) {
  const SourceLocation& loc = op.location();
  return loc.valid() ? " at " + std::to_string(loc.line) + ":" + std::to_string(loc.column) : "";
}

[[noreturn]] void sync_error(const ir::Operation& op, const std::string& message) {
  raise(ErrorCode::KernelType, "'" + std::string(op.name()) + "' " + message, op.location());
}

// The first divergent deciding operand of a control-flow op.
const ir::Value* decider(const ir::Operation& op, const UniformityAnalysis& ua) {
  std::string_view n = op.name();
  if (n == "tile.while") {
    const ir::Operation* c = op.region(0).block().terminator();
    return c && c->num_operands() > 0 && !ua.is_uniform(c->operand(0)) ? c->operand(0) : nullptr;
  }
  std::size_t count = n == "tile.for" ? 3 : 1;
  for (std::size_t i = 0; i < count && i < op.num_operands(); ++i) {
    if (!ua.is_uniform(op.operand(i))) return op.operand(i);
  }
  return nullptr;
}

void check_cooperative(const ir::Block& block, const UniformityAnalysis& ua) {
  for (const auto& op_ptr : block.ops()) {
    const ir::Operation& op = *op_ptr;
    if (is_group_cooperative(op)) {
      if (!ua.in_uniform_control(op)) {
        // Name the innermost enclosing op whose own decision diverges.
        std::string why;
        for (const ir::Block* b = op.parent_block(); b && b->parent_region();
             b = b->parent_region()->parent_op()->parent_block()) {
          const ir::Operation* parent = b->parent_region()->parent_op();
          if (const ir::Value* d = decider(*parent, ua)) {
            why = ": the " + std::string(parent->name() == "tile.for" ? "bounds" : "condition") + " of '" +
                  std::string(parent->name()) + "'" + at_text(*parent) + " " +
                  std::string(parent->name() == "tile.for" ? "differ" : "differs") + " between tiles (" +
                  ua.why_divergent(d) + ")";
            break;
          }
        }
        sync_error(op, "is group-cooperative but runs under divergent control flow" + why +
                           "; every tile of the group must run it");
      }
      for (std::size_t i = 0; i < op.num_operands(); ++i) {
        if (!ua.is_uniform(op.operand(i))) {
          sync_error(op, "is group-cooperative but operand #" + std::to_string(i) + " differs between tiles (" +
                             ua.why_divergent(op.operand(i)) + ")");
        }
      }
    }
    for (std::size_t r = 0; r < op.num_regions(); ++r) check_cooperative(op.region(r).block(), ua);
  }
}

// One copy in flight (dst: the buffer it writes) or one shared operand of an
// async mma in flight (mma: true, dst: the buffer it reads).
struct Copy {
  const ir::Operation* op;
  const ir::Value* dst;
  bool waited;
  bool mma = false;
  std::uint64_t stamp = 0;  // issue order, so merged paths keep "most recent" meaningful
  bool operator==(const Copy& o) const { return op == o.op && dst == o.dst && waited == o.waited; }
};
using State = std::vector<Copy>;

bool named_smem(const ir::Value* v) {
  return v->defining_op() && v->defining_op()->name() == "tile.smem_alloc";
}

// Loop-carried shared buffers that are provably distinct from each other: the
// iter positions of a tile.for whose yield only permutes them (the manual
// double-buffering swap `a0, a1 = a1, a0`) and whose initial values are
// distinct buffers. Such block arguments hold a permutation of distinct
// allocations in every iteration, so they never alias one another.
class LoopBuffers {
 public:
  bool may_alias(const ir::Value* a, const ir::Value* b) {
    if (a == b) return true;
    if (a == nullptr || b == nullptr) return true;  // a buffer whose name went out of scope
    if (!a->type().is_smem() || !b->type().is_smem()) return false;
    if (named_smem(a) && named_smem(b)) return false;
    if (a->is_block_argument() && a->owner_block() == b->owner_block()) {
      const std::vector<bool>& distinct = distinct_args(*a->owner_block());
      return !(distinct[a->index()] && distinct[b->index()]);
    }
    return true;
  }

 private:
  // distinct[i]: block argument i is in the permuted, distinct set.
  const std::vector<bool>& distinct_args(const ir::Block& block) {
    auto it = cache_.find(&block);
    if (it != cache_.end()) return it->second;
    std::vector<bool> in_set(block.num_arguments(), false);
    const ir::Operation* loop = block.parent_region() ? block.parent_region()->parent_op() : nullptr;
    const ir::Operation* yield = block.terminator();
    if (loop && loop->name() == "tile.for" && yield && yield->name() == "tile.yield" &&
        yield->num_operands() + 1 == block.num_arguments()) {
      // Position j (block argument j + 1) receives yield operand j.
      const std::size_t n = yield->num_operands();
      std::vector<std::size_t> image(n, n);  // the block-argument position yield j passes on
      for (std::size_t j = 0; j < n; ++j) {
        const ir::Value* y = yield->operand(j);
        if (y->type().is_smem() && y->is_block_argument() && y->owner_block() == &block && y->index() >= 1) {
          image[j] = y->index() - 1;
          in_set[j + 1] = true;
        }
      }
      // Keep only a permutation: every member's image is a member, no image twice.
      for (bool changed = true; changed;) {
        changed = false;
        std::vector<int> hits(n, 0);
        for (std::size_t j = 0; j < n; ++j) {
          if (in_set[j + 1]) ++hits[image[j]];
        }
        for (std::size_t j = 0; j < n; ++j) {
          if (in_set[j + 1] && (!in_set[image[j] + 1] || hits[image[j]] != 1)) {
            in_set[j + 1] = false;
            changed = true;
          }
        }
      }
      // The initial values (operands after lo, hi, step) must be distinct buffers.
      for (std::size_t i = 0; i < n; ++i) {
        for (std::size_t j = i + 1; j < n; ++j) {
          if (in_set[i + 1] && in_set[j + 1] && may_alias(loop->operand(3 + i), loop->operand(3 + j))) {
            in_set[i + 1] = in_set[j + 1] = false;
          }
        }
      }
    }
    return cache_.emplace(&block, std::move(in_set)).first->second;
  }

  std::unordered_map<const ir::Block*, std::vector<bool>> cache_;
};

// Copies whose destination is `from[j]` also target `to[j]`. With
// `rebinds` (the block whose arguments `from` are), entries on those block
// arguments move instead of being copied, since the arguments are rebound;
// one that moves nowhere keeps an unknown destination (may alias anything).
State rename(const State& s, const std::vector<const ir::Value*>& from, const std::vector<const ir::Value*>& to,
             const ir::Block* rebinds) {
  State out;
  for (const Copy& c : s) {
    bool renamed = false;
    for (std::size_t j = 0; j < from.size(); ++j) {
      if (c.dst != nullptr && c.dst == from[j]) {
        out.push_back(Copy{c.op, to[j], c.waited, c.mma, c.stamp});
        renamed = true;
      }
    }
    const bool rebound =
        rebinds != nullptr && c.dst != nullptr && c.dst->is_block_argument() && c.dst->owner_block() == rebinds;
    if (!rebound) {
      out.push_back(c);
    } else if (!renamed) {
      out.push_back(Copy{c.op, nullptr, c.waited, c.mma, c.stamp});
    }
  }
  return out;
}

State merge(const State& a, const State& b) {
  State out = a;
  for (const Copy& c : b) {
    auto it = std::find_if(out.begin(), out.end(), [&](const Copy& x) { return x.op == c.op && x.dst == c.dst; });
    if (it == out.end()) {
      out.push_back(c);
    } else {
      it->waited = it->waited && c.waited;
      it->stamp = std::max(it->stamp, c.stamp);
    }
  }
  std::sort(out.begin(), out.end(), [](const Copy& x, const Copy& y) { return x.stamp < y.stamp; });
  return out;
}

bool same_set(const State& a, const State& b) {
  if (a.size() != b.size()) return false;
  return std::all_of(a.begin(), a.end(), [&](const Copy& c) { return std::find(b.begin(), b.end(), c) != b.end(); });
}

// The shared buffers an mma reads in place: operands that are tile_loads of
// shared buffers (through a tile.transpose too).
std::vector<const ir::Value*> mma_shared_operands(const ir::Operation& mma) {
  std::vector<const ir::Value*> out;
  for (std::size_t i = 0; i < 2 && i < mma.num_operands(); ++i) {
    const ir::Operation* def = mma.operand(i)->defining_op();
    if (def && def->name() == "tile.transpose" && def->num_operands() == 1) def = def->operand(0)->defining_op();
    if (def && def->name() == "tile.tile_load" && def->operand(0)->type().is_smem()) out.push_back(def->operand(0));
  }
  return out;
}

// Marks all but the `pending` most recent unwaited entries of one kind as
// waited (entries of one op issued together count once).
void complete(State& s, bool mma, std::int64_t pending) {
  std::vector<std::uint64_t> stamps;
  for (const Copy& c : s) {
    if (c.mma == mma && !c.waited && std::find(stamps.begin(), stamps.end(), c.stamp) == stamps.end())
      stamps.push_back(c.stamp);
  }
  std::sort(stamps.begin(), stamps.end());
  const std::size_t keep = static_cast<std::size_t>(std::min<std::int64_t>(pending, std::ssize(stamps)));
  const std::vector<std::uint64_t> done(stamps.begin(), stamps.end() - static_cast<std::ptrdiff_t>(keep));
  for (Copy& c : s) {
    if (c.mma == mma && !c.waited && std::find(done.begin(), done.end(), c.stamp) != done.end()) c.waited = true;
  }
}

class AsyncChecker {
 public:
  State run(const ir::Block& block, State s) {
    for (const auto& op_ptr : block.ops()) s = step(*op_ptr, std::move(s));
    return s;
  }

 private:
  // A write of shared buffer `buf` by `op` must not race an async mma reading it.
  void check_write(const ir::Operation& op, const ir::Value* buf, const State& s) {
    if (!buf->type().is_smem()) return;
    for (const Copy& c : s) {
      if (!c.mma || !buffers_.may_alias(c.dst, buf)) continue;
      sync_error(op, "writes a shared buffer that the async 'tile.mma'" + at_text(*c.op) + " may still be reading (" +
                         (c.waited ? "no tile.barrier after the tile.mma_wait that completes it"
                                   : "no tile.mma_wait completes it") +
                         "); run tile.mma_wait and then tile.barrier before writing");
    }
  }

  State step(const ir::Operation& op, State s) {
    std::string_view n = op.name();
    if (n == "tile.cp_async" || n == "tile.tile_store" || n == "tile.store_elem") check_write(op, op.operand(0), s);
    if (n == "tile.mma" && op.attrs().has("async") && op.attrs().get_bool("async")) {
      s.erase(std::remove_if(s.begin(), s.end(), [&](const Copy& c) { return c.op == &op; }), s.end());
      const std::uint64_t stamp = ++clock_;
      for (const ir::Value* buf : mma_shared_operands(op)) s.push_back(Copy{&op, buf, false, true, stamp});
    } else if (n == "tile.mma_wait") {
      complete(s, true, op.attrs().get_int("pending"));
    }
    if (n == "tile.cp_async") {
      // The same op issued again into the same buffer replaces its earlier
      // entry (loop fixed points); an earlier copy by this op into another
      // buffer (renamed around a loop's back edge) stays in flight.
      s.erase(std::remove_if(s.begin(), s.end(), [&](const Copy& c) { return c.op == &op && c.dst == op.operand(0); }),
              s.end());
      s.push_back(Copy{&op, op.operand(0), false, false, ++clock_});
    } else if (n == "tile.cp_async_wait") {
      complete(s, false, op.attrs().get_int("pending"));
    } else if (n == "tile.barrier") {
      s.erase(std::remove_if(s.begin(), s.end(), [](const Copy& c) { return c.waited; }), s.end());
    } else if (n == "tile.load_elem" || n == "tile.tile_load" || n == "tile.reduce_sum") {
      const ir::Value* buf = op.operand(0);
      if (buf->type().is_smem()) {
        for (const Copy& c : s) {
          if (c.mma || !buffers_.may_alias(c.dst, buf)) continue;
          sync_error(op, "reads a shared buffer that the 'tile.cp_async'" + at_text(*c.op) + " may still be " +
                             (c.waited ? "hiding from other tiles (no tile.barrier after its wait)"
                                       : "copying into (no tile.cp_async_wait completes it)") +
                             "; wait for the copy and then run tile.barrier before reading");
        }
      }
    } else if (n == "tile.if") {
      State a = run(op.region(0).block(), s);
      State b = run(op.region(1).block(), s);
      s = merge(a, b);
    } else if (n == "tile.for") {
      // Copies follow their buffers through the loop's block arguments: in at
      // entry (init -> argument), around the back edge (yield -> argument)
      // and out at exit (argument -> result).
      const ir::Block& body = op.region(0).block();
      const ir::Operation* yield = body.terminator();
      std::vector<const ir::Value*> inits, args, yielded, results;
      for (std::size_t j = 0; j + 1 < body.num_arguments(); ++j) {
        inits.push_back(op.operand(3 + j));
        args.push_back(body.argument(j + 1));
        yielded.push_back(yield && j < yield->num_operands() ? yield->operand(j) : nullptr);
        results.push_back(j < op.num_results() ? op.result(j) : nullptr);
      }
      const State entry = rename(s, inits, args, nullptr);
      State in = entry;
      for (int i = 0; i < 64; ++i) {
        State out = merge(entry, rename(run(body, in), yielded, args, &body));
        if (same_set(out, in)) break;
        in = std::move(out);
      }
      s = rename(in, args, results, &body);
    } else if (n == "tile.while") {
      State in = s;
      State after_before;
      for (int i = 0; i < 64; ++i) {
        after_before = run(op.region(0).block(), in);
        State out = merge(s, run(op.region(1).block(), after_before));
        if (same_set(out, in)) break;
        in = std::move(out);
      }
      s = after_before;
    }
    return s;
  }

  std::uint64_t clock_ = 0;
  LoopBuffers buffers_;
};

}  // namespace

void verify_sync(const ir::Operation& func) {
  UniformityAnalysis ua(func);
  check_cooperative(ir::function_body(func), ua);
  AsyncChecker().run(ir::function_body(func), {});
}

}  // namespace tessera::tile
