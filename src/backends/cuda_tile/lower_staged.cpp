// Shared buffers as tile values: the target's own staging.
//
// A shared buffer that the kernel fills only with whole-buffer writes
// (cp_async of a window of a global buffer, tile_store of a tile of its
// shape) and reads only whole (tile_load at offset 0 of its shape) holds, at
// each point, one tile: the last one written. Such a buffer is lowered as
// that tile value: a cp_async becomes a load of the window (carrying the
// latency hint of the tile.range(prefetch=) loop around it), a tile_load is
// the value, and barriers and waits order nothing more. tileiras then stages
// those loads itself (shared memory, bulk tensor copies, its own software
// pipeline), as it does for kernels written with global tiles, instead of
// the per-group global copies of lowering.h ("Shared buffers").
//
// Buffers a loop carries (double buffering swaps them) carry their values
// instead of pointers; a staged buffer made outside a loop and written in it
// is carried through the loop as an extra value.
//
// The conditions, checked per family of buffers (an alloc and the loop
// arguments, results and yields it flows through); a family that fails any
// keeps the global copies:
// - every buffer is an alloc or a tile.for's argument or result, and every
//   use is one of the whole-buffer accesses above, a tile.for operand or a
//   tile.for's yield;
// - writes are nested in tile.for loops only (no if, no strands), so the
//   value is known on every path;
// - a loop yields its buffer arguments as a permutation of themselves, and
//   takes distinct buffers, none of which is used again after the loop
//   (buffers are references: that keeps one name per buffer in scope).
#include <algorithm>
#include <map>
#include <set>

#include "backends/cuda_tile/lowering.h"

namespace tessera::cuda_tile::detail {

namespace {

bool zero_constant(const ir::Value* v) {
  const ir::Operation* d = v->defining_op();
  return d != nullptr && d->name() == "tile.const" && d->attrs().get_int("value") == 0;
}

bool same_fixed_shape(const ir::Shape& a, const ir::Shape& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].is_symbolic() || b[i].is_symbolic() || a[i].size != b[i].size) return false;
  }
  return true;
}

// A tile_load or tile_store of the whole buffer (operand 0): offsets all
// constant zeros, the tile's shape and dtype the buffer's.
bool whole_buffer_access(const ir::Operation& op) {
  const bool load = op.name() == "tile.tile_load";
  const std::size_t last = load ? op.num_operands() : op.num_operands() - 1;
  for (std::size_t i = 1; i < last; ++i) {
    if (!zero_constant(op.operand(i))) return false;
  }
  const ir::Type& buffer = op.operand(0)->type();
  const ir::Type& tile = load ? op.result()->type() : op.operand(op.num_operands() - 1)->type();
  return tile.dtype() == buffer.dtype() && same_fixed_shape(tile.shape, buffer.shape);
}

// Whether every op enclosing `op` (up to the function) is a tile.for.
bool only_loops_around(const ir::Operation& op) {
  for (const ir::Block* b = op.parent_block(); b != nullptr;) {
    const ir::Region* r = b->parent_region();
    const ir::Operation* parent = r == nullptr ? nullptr : r->parent_op();
    if (parent == nullptr || parent->name() == "func") return true;
    if (parent->name() != "tile.for") return false;
    b = parent->parent_block();
  }
  return true;
}

// The ancestor of `op` (itself included) that lies in `block`, or nullptr.
const ir::Operation* ancestor_in(const ir::Operation& op, const ir::Block* block) {
  for (const ir::Operation* o = &op; o != nullptr;) {
    if (o->parent_block() == block) return o;
    const ir::Region* r = o->parent_block() == nullptr ? nullptr : o->parent_block()->parent_region();
    o = r == nullptr ? nullptr : r->parent_op();
  }
  return nullptr;
}

// Whether `use` comes before `loop` in program order, not inside it.
bool before(const ir::Operation& use, const ir::Operation& loop) {
  const ir::Operation* a = ancestor_in(use, loop.parent_block());
  if (a == nullptr || a == &loop) return false;
  for (const auto& o : loop.parent_block()->ops()) {
    if (o.get() == a) return true;
    if (o.get() == &loop) return false;
  }
  return false;
}

}  // namespace

// Whether `v` is defined within `op`'s regions: an argument of one of its
// blocks (or of a block nested in them), or a result of an op nested there.
bool Lowering::inside(const ir::Value* v, const ir::Operation& op) {
  const ir::Operation* o = nullptr;  // the op whose region holds v's definition
  if (v->is_block_argument()) {
    const ir::Region* r = v->owner_block()->parent_region();
    o = r == nullptr ? nullptr : r->parent_op();
  } else {
    const ir::Block* b = v->defining_op()->parent_block();
    const ir::Region* r = b == nullptr ? nullptr : b->parent_region();
    o = r == nullptr ? nullptr : r->parent_op();
  }
  for (; o != nullptr;) {
    if (o == &op) return true;
    const ir::Region* r = o->parent_block() == nullptr ? nullptr : o->parent_block()->parent_region();
    o = r == nullptr ? nullptr : r->parent_op();
  }
  return false;
}

void Lowering::plan_staged(const ir::Block& body) {
  std::map<const ir::Value*, const ir::Value*> parent;
  auto find = [&](const ir::Value* v) {
    while (parent.at(v) != v) v = parent.at(v);
    return v;
  };
  auto unite = [&](const ir::Value* a, const ir::Value* b) { parent[find(a)] = find(b); };
  std::vector<const ir::Value*> values;
  auto note = [&](const ir::Value* v) {
    if (v->type().is_smem() && !parent.count(v)) {
      parent[v] = v;
      values.push_back(v);
    }
  };
  std::vector<const ir::Operation*> loops;
  for_each_op(body, [&](const ir::Operation& op) {
    for (std::size_t i = 0; i < op.num_results(); ++i) note(op.result(i));
    for (std::size_t r = 0; r < op.num_regions(); ++r) {
      for (std::size_t b = 0; b < op.region(r).num_blocks(); ++b) {
        for (std::size_t a = 0; a < op.region(r).block(b).num_arguments(); ++a) note(op.region(r).block(b).argument(a));
      }
    }
    if (op.name() == "tile.for") loops.push_back(&op);
  });
  if (values.empty()) return;
  // Families: a loop's operand, argument, result and yield at one position.
  for (const ir::Operation* loop : loops) {
    const ir::Block& lb = loop->region(0).block(0);
    for (std::size_t i = 3; i < loop->num_operands(); ++i) {
      if (!loop->operand(i)->type().is_smem()) continue;
      unite(loop->operand(i), lb.argument(i - 2));
      unite(lb.argument(i - 2), loop->result(i - 3));
      unite(lb.argument(i - 2), lb.terminator()->operand(i - 3));
    }
  }
  std::set<const ir::Value*> bad;  // family roots
  for (const ir::Value* v : values) {
    // Defined by an alloc or a loop (its results and arguments); a buffer
    // an if or a while yields has no single known value.
    const ir::Operation* owner = v->is_block_argument() ? v->owner_block()->parent_region()->parent_op()
                                                        : v->defining_op();
    if (owner == nullptr || (owner->name() != "tile.smem_alloc" && owner->name() != "tile.for")) bad.insert(find(v));
    for (const ir::Use& u : v->uses()) {
      const ir::Operation& user = *u.user;
      const std::string_view n = user.name();
      const bool first = u.operand_index == 0;
      const bool ok = (n == "tile.cp_async" && first && only_loops_around(user)) ||
                      (n == "tile.tile_load" && first && whole_buffer_access(user)) ||
                      (n == "tile.tile_store" && first && whole_buffer_access(user) && only_loops_around(user)) ||
                      (n == "tile.for" && u.operand_index >= 3) ||
                      (n == "tile.yield" && user.parent_block()->parent_region()->parent_op()->name() == "tile.for");
      if (!ok) bad.insert(find(v));
    }
  }
  for (const ir::Operation* loop : loops) {
    const ir::Block& lb = loop->region(0).block(0);
    std::set<const ir::Value*> args, yields, inits;
    std::size_t count = 0;
    bool fine = true;
    for (std::size_t i = 3; i < loop->num_operands(); ++i) {
      const ir::Value* init = loop->operand(i);
      if (!init->type().is_smem()) continue;
      ++count;
      args.insert(lb.argument(i - 2));
      yields.insert(lb.terminator()->operand(i - 3));
      inits.insert(init);
      for (const ir::Use& u : init->uses()) {
        if (u.user != loop && !before(*u.user, *loop)) fine = false;
      }
    }
    if (fine && args == yields && inits.size() == count) continue;
    for (std::size_t i = 3; i < loop->num_operands(); ++i) {
      if (loop->operand(i)->type().is_smem()) bad.insert(find(loop->operand(i)));
    }
  }
  for (const ir::Value* v : values) {
    if (!bad.count(find(v))) staged_.insert(v);
  }
}

std::vector<const ir::Value*> Lowering::staged_written_in(const ir::Operation& loop) {
  std::vector<const ir::Value*> out;
  for_each_op(loop.region(0).block(0), [&](const ir::Operation& op) {
    if (op.name() != "tile.cp_async" && op.name() != "tile.tile_store") return;
    const ir::Value* v = op.operand(0);
    if (!staged_.count(v) || inside(v, loop)) return;
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  });
  return out;
}

// The staged buffer's value (zeros until something is written: the CPU
// backend's shared buffers start zeroed too).
Value Lowering::staged_value(const ir::Operation& op, const ir::Value* buffer) {
  auto it = contents_.find(buffer);
  if (it == contents_.end()) cannot(op, "a staged shared buffer read where its value is not known");
  return it->second;
}

void Lowering::lower_staged(const ir::Operation& op) {
  const std::string_view n = op.name();
  if (n == "tile.smem_alloc") {
    const ir::Type& t = op.result()->type();
    const Elem e = elem(t.dtype(), op);
    const TypeRef tt = m_.tile(e, fixed_shape(op, t.shape));
    contents_[op.result()] = is_float(e) ? b_->constant_float(tt, 0.0) : b_->constant_int(tt, 0);
  } else if (n == "tile.tile_load") {
    values_[op.result()] = staged_value(op, op.operand(0));
  } else if (n == "tile.tile_store") {
    contents_[op.operand(0)] = get(op.operand(op.num_operands() - 1), op);
  } else if (n == "tile.cp_async") {
    // A load of the window (zeros past the source's bounds): the buffer's value.
    const Buffer& src = gmem(op, op.operand(1));
    const ir::Type& dt = op.operand(0)->type();
    if (dt.dtype() != op.operand(1)->type().dtype()) cannot(op, "a copy between buffers of different dtypes");
    const Elem e = elem(dt.dtype(), op);
    const std::vector<std::int64_t> shape = fixed_shape(op, dt.shape);
    std::pair<Value, std::vector<Value>> at;
    if (auto a = aligned_access(op, src, 2, op.num_operands() - 2, shape)) {
      at = *a;
    } else {
      std::vector<Value> offs;
      for (std::size_t i = 2; i < op.num_operands(); ++i) offs.push_back(get(op.operand(i), op));
      at = {tile_view(op, src, offs, shape, e), index_zeros(shape.size())};
    }
    const bool ordered = tokens_ && !read_only(op.operand(1));
    Value token;
    contents_[op.operand(0)] = b_->load_view(m_.tile(e, shape), at.first, at.second,
                                             ordered ? std::optional<Value>(load_token()) : std::nullopt, &token,
                                             view_hints());
    if (ordered) after_load(token);
  } else {
    cannot(op, "not an access of a staged shared buffer");
  }
}

bool Lowering::is_staged_access(const ir::Operation& op) const {
  const std::string_view n = op.name();
  if (n == "tile.smem_alloc") return staged_.count(op.result()) != 0;
  if (n == "tile.tile_load" || n == "tile.tile_store" || n == "tile.cp_async") return staged_.count(op.operand(0)) != 0;
  return false;
}

ViewHints Lowering::view_hints() const {
  ViewHints h;
  if (!latency_) return h;
  h.arch = options_.arch;
  h.latency = latency_;
  return h;
}

}  // namespace tessera::cuda_tile::detail
