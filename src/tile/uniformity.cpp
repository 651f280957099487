// Uniformity analysis of Tile IR kernels (tessera/tile/uniformity.h).
//
// The analysis starts from "everything uniform" and marks values divergent
// until nothing changes; marks only ever go from uniform to divergent, so the
// loop ends (at most one sweep per value) and the result is the greatest
// fixed point, which is what loop-carried values need.
#include "tessera/tile/uniformity.h"

#include "tessera/tile/tile_dialect.h"

namespace tessera::tile {
namespace {

std::string where_text(const ir::Operation& op) {
  const SourceLocation& loc = op.location();
  if (!loc.valid()) return "";
  return " at " + std::to_string(loc.line) + ":" + std::to_string(loc.column);
}

bool is_parameter(const ir::Value* v, const ir::Operation& func) {
  return v->is_block_argument() && v->owner_block() == &ir::function_body(func);
}

}  // namespace

UniformityAnalysis::UniformityAnalysis(const ir::Operation& func) : func_(func) {
  all_uniform_ = group_tile_count(func) == 1;
  const ir::Block& body = ir::function_body(func);
  collect_writes(body);
  do {
    changed_ = false;
    run(body, true);
  } while (changed_);
}

void UniformityAnalysis::collect_writes(const ir::Block& block) {
  for (const auto& op : block.ops()) {
    if (writes_buffer(*op)) {
      const ir::Value* buf = accessed_buffer(*op);
      bool named = is_parameter(buf, func_) || (buf->defining_op() && buf->defining_op()->name() == "tile.smem_alloc");
      if (named) {
        written_.insert(buf);
        if (buf->type().is_gmem()) writes_gmem_ = true;
      } else if (buf->type().is_gmem()) {
        writes_gmem_ = true;
        written_.insert(buf);
      } else {
        writes_smem_arg_ = true;
      }
    }
    for (std::size_t r = 0; r < op->num_regions(); ++r) {
      for (std::size_t b = 0; b < op->region(r).num_blocks(); ++b) collect_writes(op->region(r).block(b));
    }
  }
}

// May a write somewhere in the kernel change what `buffer` reads? smem
// allocations are distinct from each other and from global memory; a buffer
// carried through block arguments may be any buffer of its kind; mut gmem
// parameters may alias each other, read-only ones are never written.
bool UniformityAnalysis::buffer_written(const ir::Value* buffer) const {
  const ir::Type& t = buffer->type();
  bool named =
      is_parameter(buffer, func_) || (buffer->defining_op() && buffer->defining_op()->name() == "tile.smem_alloc");
  if (t.is_smem()) {
    if (named) return written_.count(buffer) > 0 || writes_smem_arg_;
    if (writes_smem_arg_) return true;
    for (const ir::Value* w : written_) {
      if (w->type().is_smem()) return true;
    }
    return false;
  }
  if (!named) return writes_gmem_;
  if (written_.count(buffer)) return true;
  return t.mut && writes_gmem_;
}

bool UniformityAnalysis::mark(const ir::Value* v, bool uniform, const std::string& reason) {
  if (uniform || all_uniform_ || divergent_.count(v)) return false;
  divergent_.insert(v);
  reasons_[v] = reason;
  changed_ = true;
  return true;
}

void UniformityAnalysis::run(const ir::Block& block, bool uniform_control) {
  for (const auto& op_ptr : block.ops()) {
    const ir::Operation& op = *op_ptr;
    if (!uniform_control && !all_uniform_) divergent_ops_.insert(&op);
    std::string_view name = op.name();
    // The first divergent operand, if any, explains a divergent result.
    auto divergent_operand = [&](std::size_t from, std::size_t to) -> const ir::Value* {
      for (std::size_t i = from; i < to && i < op.num_operands(); ++i) {
        if (!is_uniform(op.operand(i))) return op.operand(i);
      }
      return nullptr;
    };
    auto because = [&](const ir::Value* v) { return why_divergent(v); };

    if (name == "tile.linear_id") {
      mark(op.result(0), false, "it depends on tile.linear_id" + where_text(op));
      continue;
    }
    if (name == "tile.strands") {
      // Conservative: the strand index and accumulators are per strand, so
      // nothing inside the body and no result is taken as uniform.
      const ir::Block& inner = op.region(0).block();
      const std::string reason = "it is a strand value of tile.strands" + where_text(op);
      for (std::size_t i = 0; i < inner.num_arguments(); ++i) mark(inner.argument(i), false, reason);
      if (!all_uniform_) divergent_regions_.insert(&op);
      run(inner, false);
      for (std::size_t i = 0; i < op.num_results(); ++i) mark(op.result(i), false, reason);
      continue;
    }
    if (name == "tile.for" || name == "tile.if" || name == "tile.while") {
      const ir::Value* decider = nullptr;
      if (name == "tile.for") decider = divergent_operand(0, 3);
      if (name == "tile.if") decider = divergent_operand(0, 1);
      if (name == "tile.while") {
        const ir::Operation* cond = op.region(0).block().terminator();
        if (cond && cond->num_operands() > 0 && !is_uniform(cond->operand(0))) decider = cond->operand(0);
      }
      bool regions_uniform = uniform_control && decider == nullptr;
      if (!regions_uniform && !all_uniform_) divergent_regions_.insert(&op);
      std::string control_reason =
          decider ? "its control flow (" + std::string(name) + where_text(op) + ") is divergent: " + because(decider)
                  : "";
      // Block arguments: the inits, and what the regions pass back.
      std::size_t first_init = name == "tile.for" ? 3 : name == "tile.if" ? 1 : 0;
      std::size_t iters = op.num_operands() - first_init;
      for (std::size_t r = 0; r < op.num_regions(); ++r) {
        const ir::Block& inner = op.region(r).block();
        std::size_t arg0 = name == "tile.for" ? 1 : 0;
        if (name == "tile.for" && inner.num_arguments() > 0) {
          // iv = lo + k * step: uniform when lo and step are, whatever hi is.
          const ir::Value* d = divergent_operand(0, 1);
          if (!d) d = divergent_operand(2, 3);
          if (d) mark(inner.argument(0), false, because(d));
        }
        for (std::size_t i = 0; i < iters && arg0 + i < inner.num_arguments(); ++i) {
          const ir::Value* init = op.operand(first_init + i);
          if (!is_uniform(init)) mark(inner.argument(arg0 + i), false, because(init));
          // Loop-carried: what the loop's own regions pass to this argument.
          const ir::Operation* feed = nullptr;
          std::size_t feed_first = 0;
          if (name == "tile.for") feed = inner.terminator();
          if (name == "tile.while") {
            feed = r == 0 ? op.region(1).block().terminator() : op.region(0).block().terminator();
            feed_first = r == 0 ? 0 : 1;
          }
          if (feed && feed_first + i < feed->num_operands()) {
            const ir::Value* v = feed->operand(feed_first + i);
            if (v && !is_uniform(v)) mark(inner.argument(arg0 + i), false, because(v));
          }
        }
        run(inner, regions_uniform);
      }
      // Results: divergent control, or a divergent value leaving a region.
      for (std::size_t i = 0; i < op.num_results(); ++i) {
        if (!control_reason.empty()) {
          mark(op.result(i), false, control_reason);
          continue;
        }
        for (std::size_t r = 0; r < op.num_regions(); ++r) {
          if (name == "tile.while" && r == 1) continue;
          const ir::Operation* term = op.region(r).block().terminator();
          std::size_t first = name == "tile.while" ? 1 : 0;
          if (term && first + i < term->num_operands() && !is_uniform(term->operand(first + i))) {
            mark(op.result(i), false, because(term->operand(first + i)));
          }
        }
        if (!is_uniform(op.operand(first_init + i))) mark(op.result(i), false, because(op.operand(first_init + i)));
      }
      continue;
    }
    if (op.num_results() == 0) continue;
    const ir::Value* bad = divergent_operand(0, op.num_operands());
    std::string reason = bad ? because(bad) : "";
    // A tile_load is group-cooperative: its tile is one group value, so only
    // lane loads can see different data in different tiles.
    if (!bad && (name == "tile.load_elem" || name == "tile.load_vector" || name == "tile.reduce_sum") && buffer_written(op.operand(0))) {
      reason = "it reads a buffer the kernel writes (" + std::string(name) + where_text(op) + ")";
    }
    if (!reason.empty()) {
      for (std::size_t i = 0; i < op.num_results(); ++i) mark(op.result(i), false, reason);
    }
  }
}

bool UniformityAnalysis::is_uniform(const ir::Value* value) const {
  if (all_uniform_) return true;
  return !divergent_.count(value);
}

bool UniformityAnalysis::in_uniform_control(const ir::Operation& op) const {
  return all_uniform_ || !divergent_ops_.count(&op);
}

bool UniformityAnalysis::regions_uniform(const ir::Operation& op) const {
  return all_uniform_ || !divergent_regions_.count(&op);
}

std::string UniformityAnalysis::why_divergent(const ir::Value* value) const {
  auto it = reasons_.find(value);
  return it == reasons_.end() ? std::string() : it->second;
}

}  // namespace tessera::tile
