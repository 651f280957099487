// Tile IR kernel -> one C++ translation unit (the program structure).
//
// A kernel is an SPMD program of one group. The emitted function runs one
// group: ops every tile of a group runs together (tile values, shared
// allocation, cp_async, barriers, mma, and control flow containing any of
// them) become group-level C++, run once; every maximal run of other ops in a
// block becomes one `for (lane = 0; lane < kGroupSize; ++lane)` loop (a
// "segment"). A barrier ends a segment, so every tile finishes the code
// before the barrier before any tile starts the code after it: barrier
// semantics hold exactly, and within a segment tiles do not observe each
// other (the contract leaves unsynchronised cross-tile accesses unordered).
//
// Where values live:
//   local       a lane value used only inside the segment defining it:
//               a plain C++ variable inside the lane loop;
//   lane array  a lane value used after its segment (across a barrier, or by
//               group-level code) or carried by group-level control flow:
//               `T v[kGroupSize]`, indexed by lane;
//   group       parameters, loop counters of group-level loops, tiles and
//               buffer views: one variable for the group.
// Group-level code reads a lane array at lane 0: the contract requires the
// operands of group-cooperative ops and the conditions of control flow around
// them to be uniform, which tile-verify-sync checks.
//
// Lane ops whose result the uniformity analysis (tessera/tile/uniformity.h)
// proves equal in every tile, and whose operands are group values, are
// hoisted: computed once per group, at group level, where they stand in the
// program. That reorders them before earlier lane code of their segment,
// which is safe because they have no effects (a uniform load reads a buffer
// no op of the kernel writes).
#include "backends/cpu/emitter.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "backends/common/index_bounds.h"
#include "backends/common/kernel_params.h"
#include "backends/cpu/emit_ops.h"
#include "tessera/ir/text.h"
#include "tessera/ir/verifier.h"
#include "tessera/support/error.h"
#include "tessera/tile/passes.h"
#include "tessera/tile/tile_dialect.h"
#include "tessera/tile/uniformity.h"

namespace tessera::cpu::detail {
namespace {

enum class Storage { local, lane_array, group };

bool has_type_kind(const ir::Operation& op, ir::TypeKind kind) {
  for (const ir::Value* v : op.operands())
    if (v->type().kind == kind) return true;
  for (std::size_t i = 0; i < op.num_results(); ++i)
    if (op.result(i)->type().kind == kind) return true;
  return false;
}

[[noreturn]] void unsupported(const ir::Operation& op, const std::string& what) {
  raise(ErrorCode::Compile, "CPU backend: " + what + " (op '" + std::string(op.name()) + "')", op.location());
}

class Emitter {
 public:
  Emitter(const ir::Operation& func, const CompileOptions& options, std::string unit)
      : func_(func), options_(options), unit_(std::move(unit)) {}

  EmittedKernel run() {
    codegen::KernelHeader header = codegen::read_kernel_header(func_, "CPU backend");
    out_.name = std::move(header.name);
    out_.group_shape = std::move(header.group_shape);
    out_.group_size = header.group_size;
    lane_id_ = out_.group_shape.empty() ? "group" : "lane";
    out_.specialized = options_.specialize;

    const ir::Block& body = ir::function_body(func_);
    uniform_ = std::make_unique<tile::UniformityAnalysis>(func_);
    collect_writes(body);
    bind_params(body);
    // Symbols a scalar argument binds, or specialized outside the launcher's
    // extent range, are not index bounds.
    scalar_symbols_ = codegen::unbounded_symbols(out_.params, options_.specialize);
    bounds_ = std::make_unique<codegen::IndexBounds>(func_, scalar_symbols_);
    assign_segments(body);
    // Groups of one tile with no group-level op are independent iterations of
    // one loop: the kernel runs a whole range of groups as one lane loop
    // (nothing is hoisted then, since group_linear_id() varies per iteration).
    batched_ = out_.group_shape.empty();
    for (const auto& op : body.ops())
      if (!op->def().is_terminator && segment_.at(op.get()) < 0) batched_ = false;
    classify_block(body, nullptr);

    indent_ = 1;
    emit_group_block(body);
    const std::int64_t budget = tile::shared_budget(func_);
    if (shared_cursor_ > budget) {
      raise(ErrorCode::Compile, "kernel '" + out_.name + "' uses " + std::to_string(shared_cursor_) +
                                    " bytes of shared memory, more than its budget of " + std::to_string(budget));
    }
    out_.shared_bytes = shared_cursor_;
    out_.source = assemble();
    return out_;
  }

 private:
  // ---- analysis ----

  bool group_level(const ir::Operation& op) {
    if (auto it = group_level_.find(&op); it != group_level_.end()) return it->second;
    bool g = tile::is_group_cooperative(op) || has_type_kind(op, ir::TypeKind::tile);
    for (std::size_t r = 0; r < op.num_regions() && !g; ++r)
      for (const auto& inner : op.region(r).block().ops())
        if (group_level(*inner)) g = true;
    group_level_[&op] = g;
    return g;
  }

  // Gives every op directly in a group-level block its segment (-1 = group level).
  void assign_segments(const ir::Block& block) {
    int current = -1;
    for (const auto& op : block.ops()) {
      if (op->def().is_terminator || group_level(*op)) {
        segment_[op.get()] = -1;
        current = -1;
        for (std::size_t r = 0; r < op->num_regions(); ++r) assign_segments(op->region(r).block());
        continue;
      }
      if (current < 0) current = next_segment_++;
      segment_[op.get()] = current;
    }
  }

  int segment_of(const ir::Operation* op) const {
    while (true) {
      if (auto it = segment_.find(op); it != segment_.end()) return it->second;
      op = op->parent_block()->parent_region()->parent_op();
    }
  }

  std::string fresh(const std::string& hint = "v") { return hint + std::to_string(next_value_++); }

  void bind_params(const ir::Block& body) {
    for (std::size_t i = 0; i < body.num_arguments(); ++i) {
      const ir::Value* arg = body.argument(i);
      const ir::Type& t = arg->type();
      KernelParam p = codegen::describe_kernel_param(*arg, i, out_.name, "CPU backend", /*sub_byte_buffers=*/true);
      if (t.is_gmem()) {
        require_supported_policy(t.policy, "parameter '" + p.name + "'");
        for (const ir::Dim& d : t.shape)
          for (const std::string& sym : codegen::dim_symbols(d)) symbol_index(sym);
      }
      std::string cname = "p_" + codegen::c_identifier(p.name);
      name_[arg] = cname;
      storage_[arg] = Storage::group;
      out_.params.push_back(std::move(p));
    }
  }

  // The C++ expression for a symbol's value: a constant when specialized.
  std::string symbol_expr(const std::string& name) {
    if (auto it = options_.specialize.find(name); it != options_.specialize.end()) return cpp_int_literal(it->second);
    return "sym_" + codegen::c_identifier(name) + "_" + std::to_string(symbol_index(name));
  }

  int symbol_index(const std::string& name) {
    auto it = std::find(out_.symbols.begin(), out_.symbols.end(), name);
    if (it != out_.symbols.end()) return static_cast<int>(it - out_.symbols.begin());
    out_.symbols.push_back(name);
    return static_cast<int>(out_.symbols.size()) - 1;
  }

  std::int64_t resolve_dim(const ir::Dim& d) {
    return codegen::resolve_static_dim(d, options_.specialize, out_.name, "CPU backend");
  }

  std::string type_of(const ir::Type& t) {
    return cpp_type(t, [this](const ir::Dim& d) { return resolve_dim(d); });
  }

  // Decides where each value of `block` (and nested blocks) lives.
  // `owner` is the op whose region this block is (nullptr for the body).
  void classify_block(const ir::Block& block, const ir::Operation* owner) {
    if (owner != nullptr) {
      const bool g = segment_of(owner) < 0;
      const std::string_view n = owner->name();
      for (std::size_t i = 0; i < block.num_arguments(); ++i) {
        const ir::Value* arg = block.argument(i);
        if (n == "tile.if") {  // the branches see the inits themselves
          name_[arg] = name_.at(owner->operand(1 + i));
          storage_[arg] = storage_.at(owner->operand(1 + i));
          continue;
        }
        name_[arg] = fresh(n == "tile.for" && i == 0 ? "iv" : "a");
        if (!g || !arg->type().is_lane()) {
          storage_[arg] = g ? Storage::group : Storage::local;
        } else {
          storage_[arg] = (n == "tile.for" && i == 0) ? Storage::group : Storage::lane_array;
        }
      }
    }
    for (const auto& op : block.ops()) {
      for (std::size_t r = 0; r < op->num_regions(); ++r) classify_block(op->region(r).block(), op.get());
      const int seg = segment_of(op.get());
      if (hoistable(*op)) {
        hoisted_.insert(op.get());
        name_[op->result(0)] = fresh();
        storage_[op->result(0)] = Storage::group;
        continue;
      }
      for (std::size_t i = 0; i < op->num_results(); ++i) {
        const ir::Value* v = op->result(i);
        name_[v] = fresh();
        if (!v->type().is_lane()) {
          storage_[v] = Storage::group;
        } else if (seg < 0) {
          storage_[v] = Storage::lane_array;
        } else {
          bool escapes = false;
          for (const ir::Use& u : v->uses())
            if (segment_of(u.user) != seg) escapes = true;
          storage_[v] = escapes ? Storage::lane_array : Storage::local;
        }
      }
    }
  }

  void collect_writes(const ir::Block& block) {
    for (const auto& op : block.ops()) {
      if (const ir::Value* buf = tile::accessed_buffer(*op); buf && tile::writes_buffer(*op)) {
        written_.insert(buf);
        if (buf->type().is_gmem()) writes_gmem_ = true;
      }
      for (std::size_t r = 0; r < op->num_regions(); ++r) collect_writes(op->region(r).block());
    }
  }

  // A lane op directly in a segment, with a uniform result and group operands.
  bool hoistable(const ir::Operation& op) const {
    auto it = segment_.find(&op);
    if (batched_ || it == segment_.end() || it->second < 0 || !is_lane_value_op(op) || op.num_results() != 1) {
      return false;
    }
    if (!uniform_->is_uniform(op.result(0))) return false;
    // Reads move only when nothing can change what they read: no write to
    // that shared buffer, and for global buffers (parameters may alias) no
    // global write at all.
    if (const ir::Value* buf = tile::accessed_buffer(op)) {
      if (buf->type().is_gmem() ? writes_gmem_ : written_.count(buf) != 0) return false;
    }
    for (const ir::Value* v : op.operands())
      if (storage_.at(v) != Storage::group) return false;
    return true;
  }

  // tile.prefetch: a write-prefetch for a buffer the kernel may write.
  static std::string prefetch_stmt(const ir::Operation& op, const std::vector<std::string>& a) {
    return std::string("tsr::prefetch") + (op.operand(0)->type().mut ? "<true>" : "") + "(" + a[0] + ", " + a[1] + ", " +
           a[2] + ");";
  }

  bool uniform_operands(const ir::Operation& op) const {
    for (const ir::Value* v : op.operands())
      if (storage_.at(v) != Storage::group) return false;
    return true;
  }

  // ---- value references ----

  // A value read inside a lane loop.
  std::string ref(const ir::Value* v) const {
    const std::string& n = name_.at(v);
    return storage_.at(v) == Storage::lane_array ? n + "[lane]" : n;
  }
  // A value read by group-level code (uniform: lane 0's copy).
  std::string gref(const ir::Value* v) const {
    const std::string& n = name_.at(v);
    switch (storage_.at(v)) {
      case Storage::lane_array: return n + "[0]";
      case Storage::group: return n;
      case Storage::local: break;
    }
    raise(ErrorCode::Internal, "CPU emitter: lane-local value " + n + " read by group-level code");
  }

  void line(const std::string& text) {
    body_.append(static_cast<std::size_t>(indent_) * 2, ' ');
    body_ += text;
    body_ += '\n';
  }

  // Declares the storage of a lane array or a group variable `v` (not locals).
  void declare(const ir::Value* v) {
    if (storage_.at(v) == Storage::lane_array) {
      line("alignas(64) " + cpp_value_type(v->type().dtype()) + " " + name_.at(v) + "[kGroupSize];");
    } else if (storage_.at(v) == Storage::group) {
      // Tiles are assigned before they are read (control-flow results and
      // carried values always are): no zero fill of a whole tile.
      line(type_of(v->type()) + " " + name_.at(v) + (v->type().kind == ir::TypeKind::tile ? ";" : "{};"));
    }
  }

  // True when `user` is the only use of tile value `src` and runs once per
  // definition of it (same block): the assignment may move the tile (a
  // pointer swap, tile.h) instead of copying it.
  static bool last_use(const ir::Value* src, const ir::Operation* user) {
    if (src->type().kind != ir::TypeKind::tile || src->is_block_argument() || src->uses().size() != 1) return false;
    return src->defining_op()->parent_block() == user->parent_block();
  }

  // dst = src at group level, for any storage; moved where `user` (the op
  // the assignment stands for) is src's last use, or where src goes out of
  // scope right after (`dying`: a loop's carried value, handed to the
  // loop's result).
  void group_assign(const ir::Value* dst, const ir::Value* src, const ir::Operation* user = nullptr,
                    bool dying = false) {
    if (storage_.at(dst) == Storage::lane_array) {
      if (storage_.at(src) == Storage::lane_array) {
        line("std::copy_n(" + name_.at(src) + ", kGroupSize, " + name_.at(dst) + ");");
      } else {
        line("std::fill_n(" + name_.at(dst) + ", kGroupSize, " + gref(src) + ");");
      }
    } else if (dying || (user != nullptr && last_use(src, user))) {
      line(name_.at(dst) + " = std::move(" + gref(src) + ");");
    } else {
      line(name_.at(dst) + " = " + gref(src) + ";");
    }
  }

  std::vector<std::string> lane_args(const ir::Operation& op) const {
    std::vector<std::string> a;
    for (const ir::Value* v : op.operands()) a.push_back(v->type().is_lane() ? ref(v) : name_.at(v));
    return a;
  }
  std::vector<std::string> group_args(const ir::Operation& op) const {
    std::vector<std::string> a;
    for (const ir::Value* v : op.operands()) a.push_back(gref(v));
    return a;
  }

  LaneContext lane_context() {
    return LaneContext{lane_id_, [this](const std::string& s) { return symbol_expr(s); }, out_.name, access_,
                       bounds_.get()};
  }

  // ---- group-level emission ----

  void emit_group_block(const ir::Block& block) {
    std::vector<const ir::Operation*> segment;
    for (const auto& op : block.ops()) {
      if (op->def().is_terminator) break;
      if (hoisted_.count(op.get()) != 0) {
        // Group level: linear_id is uniform only with one tile per group.
        LaneContext ctx = lane_context();
        if (!out_.group_shape.empty()) ctx.linear_id = "std::int64_t{0}";
        line("const " + cpp_value_type(op->result(0)->type().dtype()) + " " + name_.at(op->result(0)) + " = " +
             lane_expr(*op, group_args(*op), ctx) + ";");
        continue;
      }
      if (op->name() == "tile.prefetch" && uniform_operands(*op)) {
        // A uniform hint runs once per group, before the lane loop that holds
        // it (inside, it would be one prefetch per lane); moving a hint
        // changes nothing else.
        line(prefetch_stmt(*op, group_args(*op)));
        continue;
      }
      if (segment_.at(op.get()) >= 0) {
        segment.push_back(op.get());
        continue;
      }
      flush(segment);
      emit_group_op(*op);
    }
    flush(segment);
  }

  static bool accesses_elements(const ir::Operation& op) {
    const std::string_view n = op.name();
    if (n == "tile.load_elem" || n == "tile.store_elem") return true;
    for (std::size_t r = 0; r < op.num_regions(); ++r)
      for (const auto& inner : op.region(r).block().ops())
        if (accesses_elements(*inner)) return true;
    return false;
  }

  // One lane loop. In a batched kernel it runs the groups [begin, end) (a
  // group is its one tile), else the tiles of the group. When every op can
  // fault only through an element access, accesses are masked (memory.h) so
  // the loop vectorizes: the loop keeps the lowest faulting lane, and after
  // it that lane alone re-runs with checked accesses to raise the message
  // the checked loop would have raised.
  void flush(std::vector<const ir::Operation*>& segment) {
    if (segment.empty()) return;
    for (const ir::Operation* op : segment)
      for (std::size_t i = 0; i < op->num_results(); ++i) declare_if_array(op->result(i));
    const std::string iv = batched_ ? "group" : "lane";
    const std::string loop = batched_ ? "for (std::int64_t group = begin; group < end; ++group) {"
                                      : "for (std::int64_t lane = 0; lane < kGroupSize; ++lane) {";
    bool masked = false;
    for (const ir::Operation* op : segment) {
      if (!maskable_lane_op(*op)) {
        masked = false;
        break;
      }
      if (accesses_elements(*op)) masked = true;
    }
    if (!masked) {
      line(loop);
      ++indent_;
      if (batched_) line("current_group = group;  // a fault names this group");
      for (const ir::Operation* op : segment) emit_lane_op(*op);
      --indent_;
      line("}");
      segment.clear();
      return;
    }
    // A group whose every access is in range (and whose lane guards all
    // hold) runs a copy of the loop with plain accesses and no guards:
    // unmasked vector loads and stores, where masked ones cost several
    // times more on some x86 cores. Only a ragged or faulting group takes
    // the masked loop below.
    const bool full_group = !batched_ && emit_full_group(segment);
    line("{");
    ++indent_;
    line("std::int64_t first_fault = tsr::kNoFault;");
    line(loop);
    ++indent_;
    line("bool lane_ok = true;");
    access_ = Access::masked;
    for (const ir::Operation* op : segment) emit_lane_op(*op);
    // Arithmetic, not a select, keeps this a plain min reduction g++ vectorizes.
    line("first_fault = std::min(first_fault, " + iv + " + static_cast<std::int64_t>(lane_ok) * (tsr::kNoFault - " +
         iv + "));");
    --indent_;
    line("}");
    line("if (first_fault != tsr::kNoFault) [[unlikely]] {");
    ++indent_;
    line("const std::int64_t " + iv + " = first_fault;");
    if (batched_) line("current_group = group;");
    access_ = Access::dry;
    for (const ir::Operation* op : segment) emit_lane_op(*op);
    access_ = Access::checked;
    line("tsr::lane_fault_lost(kKernel, " + iv + ");");
    --indent_;
    line("}");
    --indent_;
    line("}");
    if (full_group) {  // the else of emit_full_group's check, and its block
      --indent_;
      line("}");
      --indent_;
      line("}");
    }
    segment.clear();
  }

  // ---- the full-group fast path ----
  // An int64 lane value base + coef * lane, base an expression valid before
  // the lane loop (saturating arithmetic: an overflow fails the range
  // checks instead of wrapping).
  struct Linear {
    std::string base;
    std::int64_t coef = 0;
  };
  static constexpr std::int64_t kMaxCoef = std::int64_t{1} << 24;
  // `v` when it is the same in every lane and computable before the loop:
  // a group-level value, a constant or a symbol.
  std::optional<std::string> uniform_expr(const ir::Value* v) {
    if (storage_.at(v) == Storage::group) return name_.at(v);
    const ir::Operation* d = v->defining_op();
    if (d == nullptr || d->num_operands() != 0) return std::nullopt;
    if (d->name() == "tile.symbol") return lane_expr(*d, {}, lane_context());
    if (auto c = codegen::constant_integer(v)) return cpp_int_literal(*c);
    return std::nullopt;
  }
  // An index built from the lane id by adds and by products with small
  // constants >= 0 (every index of an elementwise kernel) as a Linear.
  std::optional<Linear> lane_linear(const ir::Value* v) {
    if (v->type().dtype() != DType::int64) return std::nullopt;
    if (auto u = uniform_expr(v)) return Linear{*u, 0};
    const ir::Operation* d = v->defining_op();
    if (d == nullptr) return std::nullopt;
    if (d->name() == "tile.linear_id") return Linear{"std::int64_t{0}", 1};
    if (d->name() == "tile.add") {
      auto a = lane_linear(d->operand(0)), b = lane_linear(d->operand(1));
      if (!a || !b || a->coef + b->coef > kMaxCoef) return std::nullopt;
      return Linear{"tsr::iadd<DType::int64>(" + a->base + ", " + b->base + ")", a->coef + b->coef};
    }
    if (d->name() == "tile.mul") {
      for (int k = 0; k < 2; ++k) {
        auto c = codegen::constant_integer(d->operand(k));
        if (!c || *c < 0 || *c > kMaxCoef) continue;
        auto a = lane_linear(d->operand(1 - k));
        if (!a || a->coef * *c > kMaxCoef) return std::nullopt;
        return Linear{"tsr::imul<DType::int64>(" + a->base + ", " + cpp_int_literal(*c) + ")", a->coef * *c};
      }
    }
    return std::nullopt;
  }

  // What the fast path of one segment needs: the lanes it runs (a prefix
  // of the group, bounded by the guards), every access with its index, and
  // the guards whose then-branch runs alone.
  struct FullAccess {
    const ir::Operation* op;  // tile.load_elem or tile.store_elem
    Linear index;             // its last index
    std::string row;          // a rank-2 buffer's first index (uniform), else empty
  };
  struct FullGroup {
    std::vector<std::string> lane_limits;  // min(kGroupSize, these) lanes run
    std::vector<FullAccess> accesses;
    std::unordered_set<const ir::Operation*> guards;
    bool prefix_ok = true;  // lanes past the guards may be skipped
  };
  // A tile.if `index < bound` (index Linear, bound uniform) is a guard: the
  // lanes where it holds form a prefix of the group.
  std::optional<std::pair<Linear, std::string>> guard_of(const ir::Operation& op) {
    if (op.name() != "tile.if") return std::nullopt;
    const ir::Operation* c = op.operand(0)->defining_op();
    if (c == nullptr || c->name() != "tile.cmp" || c->attrs().get_string("pred") != "lt") return std::nullopt;
    auto a = lane_linear(c->operand(0));
    auto b = uniform_expr(c->operand(1));
    if (!a || !b) return std::nullopt;
    return std::make_pair(*a, *b);
  }
  // Adds the element accesses of `block` (nested ones too) to `fg`; false
  // when one is not of a form lane_linear follows.
  bool collect_accesses(const ir::Block& block, FullGroup& fg) {
    for (const auto& op : block.ops())
      if (!collect_access(*op, fg)) return false;
    return true;
  }
  bool collect_access(const ir::Operation& op, FullGroup& fg) {
    for (std::size_t r = 0; r < op.num_regions(); ++r)
      if (!collect_accesses(op.region(r).block(), fg)) return false;
    if (op.name() != "tile.load_elem" && op.name() != "tile.store_elem") return true;
    const ir::Value* buffer = op.operand(0);
    const std::size_t rank = buffer->type().rank();
    if (rank < 1 || rank > 2 || storage_.at(buffer) != Storage::group) return false;
    // A rank-2 buffer (a GEMM's staged tile, read row by row) takes a row
    // the same in every lane and a column linear in the lane.
    std::string row;
    if (rank == 2) {
      auto r = uniform_expr(op.operand(1));
      if (!r) return false;
      row = *r;
    }
    auto index = lane_linear(op.operand(rank));
    if (!index) return false;
    fg.accesses.push_back({&op, *index, row});
    return true;
  }
  static bool empty_branch(const ir::Block& b) { return b.ops().size() == 1; }  // the yield alone

  std::optional<FullGroup> full_group_plan(const std::vector<const ir::Operation*>& segment) {
    FullGroup fg;
    for (const ir::Operation* op : segment) {
      if (auto g = guard_of(*op)) {
        fg.lane_limits.push_back("tsr::lanes_below(" + g->first.base + ", " + std::to_string(g->first.coef) + ", " +
                                 g->second + ", kGroupSize)");
        fg.guards.insert(op);
        // Lanes past the guard do nothing only when its else-branch is empty.
        if (op->num_results() != 0 || !empty_branch(op->region(1).block())) fg.prefix_ok = false;
        if (!collect_accesses(op->region(0).block(), fg)) return std::nullopt;
        continue;
      }
      if (!collect_access(*op, fg)) return std::nullopt;
      // Outside the guards only pure values used within the segment keep
      // skipped lanes unobservable (prefetches are hints).
      const bool pure = op->name() == "tile.prefetch" ||
                        (is_lane_value_op(*op) && op->name() != "tile.load_elem" && op->num_results() == 1 &&
                         storage_.at(op->result(0)) == Storage::local);
      if (!pure) fg.prefix_ok = false;
    }
    if (fg.accesses.empty()) return std::nullopt;
    return fg;
  }

  // Emits, for a masked segment whose accesses are all linear in the lane,
  // `if (<every access of the lanes to run in range>) { <plain loop> } else {`
  // and returns true (the caller emits the masked loop and closes the
  // brace); false when the segment has no such form.
  bool emit_full_group(const std::vector<const ir::Operation*>& segment) {
    std::optional<FullGroup> fg = full_group_plan(segment);
    if (!fg) return false;
    const std::string lanes = fresh("full_lanes");
    std::string count = "kGroupSize";
    for (const std::string& l : fg->lane_limits) count = "std::min<std::int64_t>(" + count + ", " + l + ")";
    line("{");
    ++indent_;
    line("const std::int64_t " + lanes + " = " + count + ";");
    std::string cond = lanes + (fg->prefix_ok ? " > 0" : " == kGroupSize");
    // Each access's index as base + coef * lane, exact in the loop since the
    // range checks held; a base shared by several accesses is named once.
    std::unordered_map<std::string, std::string> bases;  // base expression -> its name
    for (const FullAccess& a : fg->accesses) {
      auto [it, fresh_base] = bases.emplace(a.index.base, "");
      if (fresh_base) {
        it->second = fresh("full_base");
        line("const std::int64_t " + it->second + " = " + a.index.base + ";");
      }
      const std::string& b = it->second;
      const std::string coef = std::to_string(a.index.coef);
      const std::string& view = name_.at(a.op->operand(0));
      const bool two_d = !a.row.empty();
      if (two_d) cond += " && tsr::span_in(" + a.row + ", " + a.row + ", " + view + ".shape[0])";
      cond += " && tsr::span_in(" + b + ", tsr::iadd<DType::int64>(" + b + ", " + coef + " * (" + lanes +
              " - 1)), " + view + ".shape[" + (two_d ? "1" : "0") + "])";
      full_index_[a.op] = {two_d ? std::size_t{2} : std::size_t{1}, "(" + b + " + " + coef + " * lane)"};
    }
    line("if (" + cond + ") {");
    ++indent_;
    line("for (std::int64_t lane = 0; lane < " + lanes + "; ++lane) {");
    ++indent_;
    access_ = Access::unchecked;
    known_true_ = std::move(fg->guards);
    for (const ir::Operation* op : segment) emit_lane_op(*op);
    access_ = Access::checked;
    known_true_.clear();
    full_index_.clear();
    --indent_;
    line("}");
    --indent_;
    line("} else {");
    ++indent_;
    return true;
  }

  void declare_if_array(const ir::Value* v) {
    if (storage_.at(v) == Storage::lane_array) declare(v);
  }

  void emit_group_op(const ir::Operation& op) {
    const std::string_view n = op.name();
    if (n == "tile.for") return emit_group_for(op);
    if (n == "tile.if") return emit_group_if(op);
    if (n == "tile.while") return emit_group_while(op);
    if (n == "tile.smem_alloc") return emit_smem_alloc(op);
    if (n == "tile.lane_shuffle") return emit_lane_shuffle(op);
    if (op.num_regions() != 0) unsupported(op, "unknown control-flow op");
    std::string result = op.num_results() == 1 ? name_.at(op.result(0)) : std::string();
    if (op.num_results() > 1) unsupported(op, "ops with several results are not supported");
    line(group_stmt(op, group_args(op), result, [this](const ir::Dim& d) { return resolve_dim(d); }));
  }

  // Group level, so every lane's value exists before any lane reads another's.
  void emit_lane_shuffle(const ir::Operation& op) {
    const std::int64_t x = op.attrs().get_int("xor");
    if (const std::string why = tile::lane_shuffle_group_error(op, out_.group_size); !why.empty()) unsupported(op, why);
    const ir::Value* v = op.operand(0);
    declare_if_array(op.result(0));
    const std::string from = storage_.at(v) == Storage::lane_array ? name_.at(v) + "[lane ^ " + std::to_string(x) + "]" : gref(v);
    line("for (std::int64_t lane = 0; lane < kGroupSize; ++lane) " + name_.at(op.result(0)) + "[lane] = " + from + ";");
  }

  void emit_smem_alloc(const ir::Operation& op) {
    const ir::Type& t = op.result(0)->type();
    require_supported_policy(t.policy, "shared buffer");
    std::int64_t elems = 1;
    std::string dims;
    for (const ir::Dim& d : t.shape) {
      std::int64_t s = resolve_dim(d);
      elems *= s;
      dims += (dims.empty() ? "" : ", ") + cpp_int_literal(s);
    }
    const std::int64_t bytes = elems * storage_bytes(t.dtype());
    std::int64_t offset = 0;
    if (const ir::Attribute* o = op.attrs().find("offset"); o && ir::kind_of(*o) == ir::AttrKind::integer) {
      offset = std::get<std::int64_t>(*o);  // planned by tile-plan-shared
    } else {
      offset = next_shared_;
      next_shared_ += (bytes + tile::kSharedAlignment - 1) / tile::kSharedAlignment * tile::kSharedAlignment;
    }
    shared_cursor_ = std::max(shared_cursor_, offset + bytes);
    const std::string label = "shared#" + std::to_string(smem_count_++);
    line("const " + type_of(t) + " " + name_.at(op.result(0)) + " = tsr::smem<" + cpp_dtype(t.dtype()) + ", " +
         std::to_string(t.rank()) + ">(arena, " + std::to_string(offset) + ", {" + dims + "}, " +
         cpp_string_literal(label) + ", kKernel);");
  }

  void require_positive_step(const std::string& step) {
    line("if (" + step +
         " <= 0) tsr::fail(tsr::kFaultArgument, \"kernel '%s': tile.for step %lld is not positive\", "
         "kKernel, static_cast<long long>(" +
         step + "));");
  }

  // Assigns yield operands to loop-carried storage, through temporaries
  // when a yield reads another carried value (x, y = y, x).
  void carry(const std::vector<const ir::Value*>& dst, const ir::Operation& yield, std::size_t first, bool group) {
    const std::size_t n = dst.size();
    bool crossed = false;
    for (std::size_t k = 0; k < n; ++k)
      for (std::size_t j = 0; j < n; ++j)
        if (j != k && name_.at(yield.operand(first + k)) == name_.at(dst[j])) crossed = true;
    if (!crossed) {
      for (std::size_t k = 0; k < n; ++k) {
        if (name_.at(yield.operand(first + k)) == name_.at(dst[k])) continue;
        if (group) {
          group_assign(dst[k], yield.operand(first + k), &yield);
        } else {
          line(ref(dst[k]) + " = " + ref(yield.operand(first + k)) + ";");
        }
      }
      return;
    }
    line("{");
    ++indent_;
    std::vector<std::string> tmp;
    for (std::size_t k = 0; k < n; ++k) {
      const ir::Value* y = yield.operand(first + k);
      tmp.push_back(fresh("t"));
      if (group && storage_.at(dst[k]) == Storage::lane_array) {
        line("alignas(64) " + cpp_value_type(y->type().dtype()) + " " + tmp.back() + "[kGroupSize];");
        if (storage_.at(y) == Storage::lane_array) {
          line("std::copy_n(" + name_.at(y) + ", kGroupSize, " + tmp.back() + ");");
        } else {
          line("std::fill_n(" + tmp.back() + ", kGroupSize, " + gref(y) + ");");
        }
      } else {
        line("const auto " + tmp.back() + " = " + (group ? gref(y) : ref(y)) + ";");
      }
    }
    for (std::size_t k = 0; k < n; ++k) {
      if (group && storage_.at(dst[k]) == Storage::lane_array) {
        line("std::copy_n(" + tmp[k] + ", kGroupSize, " + name_.at(dst[k]) + ");");
      } else {
        line((group ? name_.at(dst[k]) : ref(dst[k])) + " = " + tmp[k] + ";");
      }
    }
    --indent_;
    line("}");
  }

  void emit_group_for(const ir::Operation& op) {
    const ir::Block& body = op.region(0).block();
    std::vector<const ir::Value*> iters;
    for (std::size_t i = 1; i < body.num_arguments(); ++i) iters.push_back(body.argument(i));
    for (std::size_t i = 0; i < op.num_results(); ++i) declare(op.result(i));
    line("{  // tile.for (group level)");
    ++indent_;
    for (std::size_t i = 0; i < iters.size(); ++i) {
      declare(iters[i]);
      group_assign(iters[i], op.operand(3 + i), &op);
    }
    const std::string lo = fresh("lo"), hi = fresh("hi"), step = fresh("step");
    line("const std::int64_t " + lo + " = " + gref(op.operand(0)) + ", " + hi + " = " + gref(op.operand(1)) + ", " +
         step + " = " + gref(op.operand(2)) + ";");
    require_positive_step(step);
    const std::string& iv = name_.at(body.argument(0));
    line("for (std::int64_t " + iv + " = " + lo + "; " + iv + " < " + hi + "; " + iv + " += " + step + ") {");
    ++indent_;
    emit_group_block(body);
    carry(iters, *body.terminator(), 0, true);
    --indent_;
    line("}");
    for (std::size_t i = 0; i < op.num_results(); ++i) group_assign(op.result(i), iters[i], nullptr, /*dying=*/true);
    --indent_;
    line("}");
  }

  // tile.if's `likely` as a C++ attribute: g++ lays out and optimizes a
  // branch it guesses cold for size, which can keep its loops from being
  // vectorized.
  static std::string branch_hint(const ir::Operation& op) {
    const ir::Attribute* a = op.attrs().find("likely");
    if (!a) return "";
    return std::get<bool>(*a) ? " [[likely]]" : " [[unlikely]]";
  }

  void emit_group_if(const ir::Operation& op) {
    for (std::size_t i = 0; i < op.num_results(); ++i) declare(op.result(i));
    line("if (" + gref(op.operand(0)) + ")" + branch_hint(op) + " {");
    for (std::size_t r = 0; r < 2; ++r) {
      if (r == 1) line("} else {");
      ++indent_;
      const ir::Block& b = op.region(r).block();
      emit_group_block(b);
      for (std::size_t i = 0; i < op.num_results(); ++i) {
        group_assign(op.result(i), b.terminator()->operand(i), b.terminator());
      }
      --indent_;
    }
    line("}");
  }

  void emit_group_while(const ir::Operation& op) {
    const ir::Block& before = op.region(0).block();
    const ir::Block& after = op.region(1).block();
    std::vector<const ir::Value*> loop_vals;
    for (std::size_t i = 0; i < before.num_arguments(); ++i) loop_vals.push_back(before.argument(i));
    for (std::size_t i = 0; i < op.num_results(); ++i) declare(op.result(i));
    line("{  // tile.while (group level)");
    ++indent_;
    for (std::size_t i = 0; i < loop_vals.size(); ++i) {
      declare(loop_vals[i]);
      group_assign(loop_vals[i], op.operand(i));
    }
    line("while (true) {");
    ++indent_;
    emit_group_block(before);
    const ir::Operation& cond = *before.terminator();
    line("if (!(" + gref(cond.operand(0)) + ")) {");
    ++indent_;
    for (std::size_t i = 0; i < op.num_results(); ++i) group_assign(op.result(i), cond.operand(1 + i));
    line("break;");
    --indent_;
    line("}");
    for (std::size_t i = 0; i < after.num_arguments(); ++i) {
      declare(after.argument(i));
      group_assign(after.argument(i), cond.operand(1 + i));
    }
    emit_group_block(after);
    carry(loop_vals, *after.terminator(), 0, true);
    --indent_;
    line("}");
    --indent_;
    line("}");
  }

  // ---- lane-level emission (inside a lane loop) ----

  // Defines a lane result: a const local or an element of its lane array.
  void define(const ir::Value* v, const std::string& expr) {
    if (storage_.at(v) == Storage::lane_array) {
      line(name_.at(v) + "[lane] = " + expr + ";");
    } else {
      line("const " + cpp_value_type(v->type().dtype()) + " " + name_.at(v) + " = " + expr + ";");
    }
  }
  // Declares a mutable local (control-flow results and loop-carried values).
  void declare_local(const ir::Value* v, const std::string& init = {}) {
    if (storage_.at(v) != Storage::local) return;
    line(cpp_value_type(v->type().dtype()) + " " + name_.at(v) + (init.empty() ? "{}" : " = " + init) + ";");
  }

  void emit_lane_block(const ir::Block& block) {
    for (const auto& op : block.ops()) {
      if (op->def().is_terminator) break;
      emit_lane_op(*op);
    }
  }

  void emit_lane_op(const ir::Operation& op) {
    const std::string_view n = op.name();
    if (n == "tile.for") return emit_lane_for(op);
    if (n == "tile.strands") return emit_lane_strands(op);
    if (n == "tile.if") return emit_lane_if(op);
    if (n == "tile.while") return emit_lane_while(op);
    if (n == "tile.store_elem") return line(store_stmt(op, full_args(op), access_));
    if (n == "tile.prefetch") return line(prefetch_stmt(op, lane_args(op)));
    if (!is_lane_value_op(op) || op.num_results() != 1) unsupported(op, "the op is not supported in lane code");
    define(op.result(0), lane_expr(op, full_args(op), lane_context()));
  }
  // lane_args, with the plain index of an access in the full-group loop.
  std::vector<std::string> full_args(const ir::Operation& op) const {
    std::vector<std::string> a = lane_args(op);
    if (auto it = full_index_.find(&op); it != full_index_.end()) a[it->second.first] = it->second.second;
    return a;
  }

  void emit_lane_for(const ir::Operation& op) {
    const ir::Block& body = op.region(0).block();
    bool maskable = body.num_arguments() == 1;  // no carried values: independent iterations
    for (const auto& inner : body.ops()) maskable &= maskable_lane_op(*inner);
    if (maskable) return emit_masked_lane_for(op);
    std::vector<const ir::Value*> iters;
    for (std::size_t i = 1; i < body.num_arguments(); ++i) iters.push_back(body.argument(i));
    for (std::size_t i = 0; i < op.num_results(); ++i) declare_local(op.result(i));
    line("{  // tile.for");
    ++indent_;
    for (std::size_t i = 0; i < iters.size(); ++i) declare_local(iters[i], ref(op.operand(3 + i)));
    const std::string lo = fresh("lo"), hi = fresh("hi"), step = fresh("step");
    line("const std::int64_t " + lo + " = " + ref(op.operand(0)) + ", " + hi + " = " + ref(op.operand(1)) + ", " +
         step + " = " + ref(op.operand(2)) + ";");
    require_positive_step(step);
    const std::string& iv = name_.at(body.argument(0));
    line("for (std::int64_t " + iv + " = " + lo + "; " + iv + " < " + hi + "; " + iv + " += " + step + ") {");
    ++indent_;
    emit_lane_block(body);
    carry(iters, *body.terminator(), 0, false);
    --indent_;
    line("}");
    for (std::size_t i = 0; i < op.num_results(); ++i) line(ref(op.result(i)) + " = " + ref(iters[i]) + ";");
    --indent_;
    line("}");
  }

  // ---- hoisted range checks ----
  // An element access of a loop whose index is base + iv * scale: base
  // defined outside the loop (null: 0), scale a constant >= 0.
  struct SpanAccess {
    const ir::Value* buffer;
    const ir::Value* base;
    std::int64_t scale;
  };

  static bool invariant(const ir::Value* v, const ir::Operation& loop) { return !ir::defined_within(v, &loop); }
  // iv * c (or iv itself) -> c.
  static std::optional<std::int64_t> iv_scale(const ir::Value* v, const ir::Value* iv) {
    if (v == iv) return 1;
    const ir::Operation* d = v->defining_op();
    if (d == nullptr || d->name() != "tile.mul") return std::nullopt;
    for (int k = 0; k < 2; ++k) {
      if (d->operand(k) != iv) continue;
      auto c = codegen::constant_integer(d->operand(1 - k));
      if (c && *c >= 0) return c;
    }
    return std::nullopt;
  }
  // Every element access in `block` (nested ones too) as a SpanAccess of
  // `loop`'s variable `iv`, or nullopt when one is not of that form (or is
  // not of a 1-D buffer).
  static bool collect_spans(const ir::Block& block, const ir::Operation& loop, const ir::Value* iv,
                            std::vector<SpanAccess>& out) {
    for (const auto& op : block.ops()) {
      for (std::size_t r = 0; r < op->num_regions(); ++r) {
        if (!collect_spans(op->region(r).block(), loop, iv, out)) return false;
      }
      const std::string_view n = op->name();
      if (n != "tile.load_elem" && n != "tile.store_elem") continue;
      const ir::Value* buffer = op->operand(0);
      if (buffer->type().rank() != 1 || !invariant(buffer, loop)) return false;
      const ir::Value* index = op->operand(1);
      if (auto c = iv_scale(index, iv)) {
        out.push_back({buffer, nullptr, *c});
        continue;
      }
      const ir::Operation* d = index->defining_op();
      if (d == nullptr || d->name() != "tile.add") return false;
      bool matched = false;
      for (int k = 0; k < 2 && !matched; ++k) {
        auto c = iv_scale(d->operand(k), iv);
        if (c && invariant(d->operand(1 - k), loop)) {
          out.push_back({buffer, d->operand(1 - k), *c});
          matched = true;
        }
      }
      if (!matched) return false;
    }
    return true;
  }
  // The C++ condition under which `loop`'s accesses may be plain: `nonempty`
  // and every access in range for iv in [first, last]; nullopt when some
  // access is not of the form collect_spans takes.
  std::optional<std::string> range_condition(const ir::Operation& loop, const std::string& nonempty,
                                             const std::string& first, const std::string& last) {
    const ir::Block& body = loop.region(0).block();
    std::vector<SpanAccess> spans;
    if (!collect_spans(body, loop, body.argument(0), spans)) return std::nullopt;
    std::string cond = nonempty;
    for (std::size_t k = 0; k < spans.size(); ++k) {
      const SpanAccess& a = spans[k];
      // A buffer read and written at the same index (an in-place update) is one span.
      auto same = [&](const SpanAccess& b) { return b.buffer == a.buffer && b.base == a.base && b.scale == a.scale; };
      if (std::any_of(spans.begin(), spans.begin() + static_cast<std::ptrdiff_t>(k), same)) continue;
      const std::string base = a.base ? ref(a.base) : "std::int64_t{0}";
      const std::string scale = std::to_string(a.scale);
      cond += " && tsr::span_in(" + base + " + " + first + " * " + scale + ", " + base + " + " + last + " * " + scale +
              ", " + ref(a.buffer) + ".shape[0])";
    }
    return cond;
  }

  // `plain` (emitted with unchecked accesses) when `in_range` holds, else
  // `checked`; only `checked` without a condition.
  void emit_range_checked(const std::optional<std::string>& in_range, const std::function<void()>& plain,
                          const std::function<void()>& checked) {
    if (!in_range) return checked();
    line("if (" + *in_range + ") {");
    ++indent_;
    access_ = Access::unchecked;
    plain();
    access_ = Access::checked;
    --indent_;
    line("} else {");
    ++indent_;
    checked();
    --indent_;
    line("}");
  }

  // `header` (a `for (...) {` line), the body, the closing brace.
  void emit_loop(const std::string& header, const std::function<void()>& body) {
    line(header);
    ++indent_;
    body();
    --indent_;
    line("}");
  }

  // `header` (a `for (...) {` line) with masked accesses in `body`, counting
  // the iterations that faulted (an integer sum, which g++ vectorizes; a
  // bool would not). After a fault the loop re-runs checked, which raises at
  // its first faulting iteration in order; `lost` names the place if it did
  // not. Stores of later iterations may already have happened then (an
  // in-place store even twice): a kernel's outputs are not defined after a
  // fault.
  void emit_masked_loop(const std::string& header, const std::string& lost, const std::function<void()>& body) {
    const std::string faults = fresh("faults");
    line("std::int32_t " + faults + " = 0;");
    line(header);
    ++indent_;
    line("bool lane_ok = true;");
    access_ = Access::masked;
    body();
    access_ = Access::checked;
    line(faults + " += static_cast<std::int32_t>(!lane_ok);");
    --indent_;
    line("}");
    line("if (" + faults + " != 0) [[unlikely]] {");
    ++indent_;
    line(header);
    ++indent_;
    body();
    --indent_;
    line("}");
    line("tsr::lane_fault_lost(kKernel, " + lost + ");");
    --indent_;
    line("}");
  }

  // A lane-level tile.for without carried values whose body can be masked
  // (an output pass over a row) runs as a masked loop, so g++ can vectorize it.
  void emit_masked_lane_for(const ir::Operation& op) {
    const ir::Block& body = op.region(0).block();
    line("{  // tile.for (masked)");
    ++indent_;
    const std::string lo = fresh("lo"), hi = fresh("hi"), step = fresh("step");
    line("const std::int64_t " + lo + " = " + ref(op.operand(0)) + ", " + hi + " = " + ref(op.operand(1)) + ", " +
         step + " = " + ref(op.operand(2)) + ";");
    require_positive_step(step);
    const std::string& iv = name_.at(body.argument(0));
    const std::string header =
        "for (std::int64_t " + iv + " = " + lo + "; " + iv + " < " + hi + "; " + iv + " += " + step + ") {";
    // Every index in range for iv in [lo, hi - 1]: plain accesses.
    emit_range_checked(
        range_condition(op, hi + " > " + lo, lo, "(" + hi + " - 1)"),
        [&] { emit_loop(header, [&] { emit_lane_block(body); }); },
        [&] { emit_masked_loop(header, lo, [&] { emit_lane_block(body); }); });
    --indent_;
    line("}");
  }

  // tile.strands runs in rounds of `count` consecutive indices, one per
  // strand: the loop over a round's strands has independent iterations and
  // consecutive element accesses, so g++ vectorizes it. With a maskable body
  // those rounds are masked loops (emit_masked_loop). The ragged last round,
  // and every round of a body that cannot be masked, run checked.
  void emit_lane_strands(const ir::Operation& op) {
    const ir::Block& body = op.region(0).block();
    const std::int64_t count = std::get<std::int64_t>(*op.attrs().find("count"));
    const std::string count_text = std::to_string(count);
    const std::size_t n_acc = body.num_arguments() - 1;
    bool maskable = true;
    for (const auto& inner : body.ops()) maskable &= maskable_lane_op(*inner);
    for (std::size_t i = 0; i < op.num_results(); ++i) declare_local(op.result(i));
    line("{  // tile.strands");
    ++indent_;
    const std::string lo = fresh("lo"), hi = fresh("hi"), round = fresh("round"), s = fresh("s");
    line("const std::int64_t " + lo + " = " + ref(op.operand(0)) + ", " + hi + " = " + ref(op.operand(1)) + ";");
    std::vector<std::string> accs;
    for (std::size_t j = 0; j < n_acc; ++j) {
      accs.push_back(fresh("strand"));
      line(cpp_value_type(body.argument(1 + j)->type().dtype()) + " " + accs[j] + "[" + count_text + "];");
      line("for (auto& s : " + accs[j] + ") s = " + ref(op.operand(2 + j)) + ";");
    }
    // Index round + s: the body with strand s of every accumulator.
    auto emit_step = [&] {
      line("const std::int64_t " + name_.at(body.argument(0)) + " = " + round + " + " + s + ";");
      for (std::size_t j = 0; j < n_acc; ++j) {
        line(cpp_value_type(body.argument(1 + j)->type().dtype()) + " " + name_.at(body.argument(1 + j)) + " = " +
             accs[j] + "[" + s + "];");
      }
      emit_lane_block(body);
      for (std::size_t j = 0; j < n_acc; ++j)
        line(accs[j] + "[" + s + "] = " + ref(body.terminator()->operand(j)) + ";");
    };
    line("std::int64_t " + round + " = " + lo + ";");
    if (maskable) {
      // Full rounds with masked accesses. Faults are counted per strand over
      // all rounds and checked once after them: a check per round (a sum
      // across the strands) cost a quarter of a vectorized exp pass, and it
      // kept the accumulators from staying in registers. After a fault the
      // full rounds re-run checked from the start, which raises at the first
      // faulting element in order (masked rounds never touch memory out of
      // range, and a kernel's outputs are not defined after a fault).
      const std::string faults = fresh("faults");
      const std::string full_rounds =
          "for (; " + round + " <= " + hi + " - " + count_text + "; " + round + " += " + count_text + ") {";
      const std::string strands_loop = "for (std::int64_t " + s + " = 0; " + s + " < " + count_text + "; ++" + s + ") {";
      auto rounds = [&](const std::function<void()>& step) {
        emit_loop(full_rounds, [&] { emit_loop(strands_loop, step); });
      };
      auto masked_rounds = [&] {
        line("std::int32_t " + faults + "[" + count_text + "] = {};");
        rounds([&] {
          line("bool lane_ok = true;");
          access_ = Access::masked;
          emit_step();
          access_ = Access::checked;
          line(faults + "[" + s + "] += static_cast<std::int32_t>(!lane_ok);");
        });
        line("std::int32_t any_" + faults + " = 0;");
        line("for (std::int32_t f : " + faults + ") any_" + faults + " |= f;");
        line("if (any_" + faults + " != 0) [[unlikely]] {");
        ++indent_;
        line(round + " = " + lo + ";");
        rounds(emit_step);
        line("tsr::lane_fault_lost(kKernel, " + lo + ");");
        --indent_;
        line("}");
      };
      // Every index in range over the full rounds: plain accesses.
      const std::string last = "(" + lo + " + (" + hi + " - " + lo + ") / " + count_text + " * " + count_text + " - 1)";
      emit_range_checked(range_condition(op, hi + " - " + lo + " >= " + count_text, lo, last),
                         [&] { rounds(emit_step); }, masked_rounds);
    }
    line("for (; " + round + " < " + hi + "; " + round + " += " + count_text + ") {");
    ++indent_;
    line("for (std::int64_t " + s + " = 0; " + s + " < " + count_text + " && " + round + " + " + s + " < " + hi +
         "; ++" + s + ") {");
    ++indent_;
    emit_step();
    --indent_;
    line("}");
    --indent_;
    line("}");
    for (std::int64_t k = 0; k < count; ++k)
      for (std::size_t j = 0; j < n_acc; ++j)
        line(ref(op.result(static_cast<std::size_t>(k) * n_acc + j)) + " = " + accs[j] + "[" + std::to_string(k) +
             "];");
    --indent_;
    line("}");
  }

  void emit_lane_if(const ir::Operation& op) {
    for (std::size_t i = 0; i < op.num_results(); ++i) declare_local(op.result(i));
    if (known_true_.count(&op) != 0) {
      line("{  // tile.if (holds in every lane of a full group)");
      ++indent_;
      const ir::Block& b = op.region(0).block();
      emit_lane_block(b);
      for (std::size_t i = 0; i < op.num_results(); ++i)
        line(ref(op.result(i)) + " = " + ref(b.terminator()->operand(i)) + ";");
      --indent_;
      line("}");
      return;
    }
    line("if (" + ref(op.operand(0)) + ")" + branch_hint(op) + " {");
    for (std::size_t r = 0; r < 2; ++r) {
      if (r == 1) line("} else {");
      ++indent_;
      const ir::Block& b = op.region(r).block();
      emit_lane_block(b);
      for (std::size_t i = 0; i < op.num_results(); ++i)
        line(ref(op.result(i)) + " = " + ref(b.terminator()->operand(i)) + ";");
      --indent_;
    }
    line("}");
  }

  void emit_lane_while(const ir::Operation& op) {
    const ir::Block& before = op.region(0).block();
    const ir::Block& after = op.region(1).block();
    std::vector<const ir::Value*> loop_vals;
    for (std::size_t i = 0; i < before.num_arguments(); ++i) loop_vals.push_back(before.argument(i));
    for (std::size_t i = 0; i < op.num_results(); ++i) declare_local(op.result(i));
    line("{  // tile.while");
    ++indent_;
    for (std::size_t i = 0; i < loop_vals.size(); ++i) declare_local(loop_vals[i], ref(op.operand(i)));
    line("while (true) {");
    ++indent_;
    emit_lane_block(before);
    const ir::Operation& cond = *before.terminator();
    line("if (!(" + ref(cond.operand(0)) + ")) {");
    ++indent_;
    for (std::size_t i = 0; i < op.num_results(); ++i) line(ref(op.result(i)) + " = " + ref(cond.operand(1 + i)) + ";");
    line("break;");
    --indent_;
    line("}");
    for (std::size_t i = 0; i < after.num_arguments(); ++i) declare_local(after.argument(i), ref(cond.operand(1 + i)));
    emit_lane_block(after);
    carry(loop_vals, *after.terminator(), 0, false);
    --indent_;
    line("}");
    --indent_;
    line("}");
  }

  // ---- the translation unit ----

  std::string assemble() {
    std::ostringstream s;
    std::string source;
    if (const ir::Attribute* a = func_.attrs().find("source"); a && ir::kind_of(*a) == ir::AttrKind::string) {
      source = std::get<std::string>(*a);
    }
    s << "// Generated by the Tessera CPU backend from Tile IR kernel '" << out_.name << "'"
      << (source.empty() ? "" : " (" + source + ")") << ".\n";
    s << "// One call of run_group runs one group of " << out_.group_size << " tile(s); lane loops run the tiles.\n";
    // A kernel of a multi-kernel unit lives in its own namespace and
    // exports its own entry; the unit adds the includes and the ABI version.
    if (unit_.empty()) s << kUnitPrologue;
    s << "namespace " << unit_ << (unit_.empty() ? "" : " ") << "{\n\nusing tessera::DType;\nusing tessera::Overflow;\n\n";
    s << "constexpr const char* kKernel = " << cpp_string_literal(out_.name) << ";\n";
    s << "constexpr std::int64_t kGroupSize = " << out_.group_size << ";\n";
    s << "constexpr std::size_t kSharedBytes = " << shared_cursor_ << ";\n\n";
    // A kernel marked `vectorize = false` (one storing the two parts of
    // complex products side by side, such as an FFT's) keeps g++'s
    // vectorizer out of it: it fuses such pairs into vfmaddsub despite
    // -ffp-contract=off, rounding once where the IR rounds twice.
    const ir::Attribute* vectorize = func_.attrs().find("vectorize");
    const bool no_vectorize = vectorize && ir::kind_of(*vectorize) == ir::AttrKind::boolean && !std::get<bool>(*vectorize);
    if (no_vectorize) s << "#if defined(__GNUC__) && !defined(__clang__)\n__attribute__((optimize(\"no-tree-vectorize\")))\n#endif\n";
    if (batched_) {
      s << "// Groups of one tile without group-level ops: one call runs the groups [begin, end).\n";
      s << "void run_batch([[maybe_unused]] const tsr::LaunchArgs& args, std::int64_t begin, std::int64_t end,\n"
        << "               [[maybe_unused]] std::int64_t& current_group) {\n";
    } else {
      s << "void run_group([[maybe_unused]] const tsr::LaunchArgs& args, [[maybe_unused]] std::int64_t group,\n"
        << "               [[maybe_unused]] unsigned char* arena) {\n";
    }
    // Parameters.
    const ir::Block& body = ir::function_body(func_);
    for (std::size_t i = 0; i < body.num_arguments(); ++i) {
      const ir::Value* arg = body.argument(i);
      const ir::Type& t = arg->type();
      const std::string& n = name_.at(arg);
      if (t.is_gmem()) {
        s << "  [[maybe_unused]] const auto " << n << " = tsr::" << (options_.contiguous_buffers ? "gmem_unit<" : "gmem<")
          << cpp_dtype(t.dtype()) << ", " << t.rank()
          << ">(args, " << i << ", " << cpp_string_literal(out_.params[i].name) << ", kKernel, "
          << cpp_overflow(t.policy.overflow) << ");\n";
      } else {
        const DType d = t.dtype();
        const std::string field = (is_float(d) ? "args.params[" + std::to_string(i) + "].real"
                                               : "args.params[" + std::to_string(i) + "].integer");
        s << "  [[maybe_unused]] const " << cpp_value_type(d) << " " << n << " = static_cast<" << cpp_value_type(d)
          << ">(" << field << ");\n";
      }
    }
    for (std::size_t i = 0; i < out_.symbols.size(); ++i) {
      const std::string& sym = out_.symbols[i];
      if (options_.specialize.count(sym) != 0u) continue;
      s << "  [[maybe_unused]] const std::int64_t " << symbol_expr(sym) << " = args.symbols[" << i << "];\n";
    }
    s << body_ << "}\n\n}  // namespace\n\n";
    if (unit_.empty()) s << kUnitEpilogue;
    s << "extern \"C\" int " << entry_symbol(unit_)
      << "(const tsr::LaunchArgs* args, std::int64_t begin, std::int64_t end,\n"
      << "                                      tsr::Fault* fault) noexcept {\n"
      << (batched_ ? "  return tsr::run_batch(args, begin, end, fault, " + unit_ + "::run_batch);\n}\n"
                   : "  return tsr::run_groups(args, begin, end, fault, " + unit_ + "::kSharedBytes, " + unit_ +
                         "::run_group);\n}\n");
    return s.str();
  }

  const ir::Operation& func_;
  const CompileOptions& options_;
  std::string unit_;  // namespace of a kernel in a multi-kernel unit ("" alone)
  EmittedKernel out_;
  std::string body_;
  int indent_ = 1;
  std::string lane_id_;
  std::unordered_set<std::string> scalar_symbols_;
  std::unique_ptr<codegen::IndexBounds> bounds_;
  bool batched_ = false;             // one lane loop over a range of groups
  // tile.ifs whose condition holds in every lane of the full-group loop
  // being emitted (their then-branch is emitted alone).
  std::unordered_set<const ir::Operation*> known_true_;
  // The plain index expression of each element access in that loop.
  // An access of the full-group loop -> (the position of its linear index
  // among its operands, that index as base + coef * lane).
  std::unordered_map<const ir::Operation*, std::pair<std::size_t, std::string>> full_index_;
  Access access_ = Access::checked;  // how the lane code being emitted accesses elements
  std::unordered_map<const ir::Value*, std::string> name_;
  std::unordered_map<const ir::Value*, Storage> storage_;
  std::unordered_map<const ir::Operation*, bool> group_level_;
  std::unordered_map<const ir::Operation*, int> segment_;
  std::unique_ptr<tile::UniformityAnalysis> uniform_;
  std::unordered_set<const ir::Operation*> hoisted_;
  std::unordered_set<const ir::Value*> written_;  // buffers some op writes
  bool writes_gmem_ = false;
  int next_segment_ = 0;
  int next_value_ = 0;
  std::int64_t next_shared_ = 0;
  std::int64_t shared_cursor_ = 0;
  int smem_count_ = 0;
};

}  // namespace

EmittedKernel emit_kernel(const ir::Operation& kernel_func, const CompileOptions& options, const std::string& unit) {
  const bool vectors = tile::contains_op(kernel_func, "tile.load_vector") || tile::contains_op(kernel_func, "tile.store_vector");
  const bool narrow = tile::contains_op(kernel_func, "tile.narrow_unary");
  if (!vectors && !narrow) return Emitter(kernel_func, options, unit).run();
  // The CPU's lane loops are SIMD across lanes already: a lane's vector runs
  // as its element accesses (tile-scalarize-vectors), and narrow unaries as
  // their double formula (tile-expand-narrow), which vectorizes where the
  // certified fp32 evaluation's rare fallback would not. On a copy, so the
  // caller's kernel keeps its form.
  ir::Module copy = ir::parse_module(ir::print_function(kernel_func));
  ir::Operation& func = *copy.functions().front();
  tile::scalarize_vectors(func);
  tile::expand_narrow_unaries(func);
  return Emitter(func, options, unit).run();
}

std::string entry_symbol(const std::string& unit) {
  return unit.empty() ? "tessera_cpu_run_groups" : "tessera_cpu_run_groups_" + unit;
}

}  // namespace tessera::cpu::detail
