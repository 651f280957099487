// Divergence (uniformity) analysis of kernels, and the passes that drive it.
//
// Uniformity is tracked flow-insensitively per variable name: a name is
// non-uniform when any assignment to it gives it a lane-varying value or
// happens under lane-divergent control flow. The analysis runs over the
// kernel until that set stops growing, then once more raising the
// divergence errors, so loops whose carried values turn divergent late are
// handled without unrolling. This is conservative (it may call a value
// divergent that is uniform at some point) but never the reverse.
//
// Group-cooperative operations (barriers, shared allocation, async copies,
// tile loads/stores/mma) must run under uniform control flow
// (docs/design/0003-tile-ir.md, rule 6); require_uniform_control() is the
// one place that says so.
#include "frontend/sema_checker.h"

namespace tessera::frontend::sema_detail {

using ast::Expr;
using ast::ExprKind;
using ast::StmtKind;
using Kind = KType::Kind;

Analysis Checker::run() {
  check_declaration();
  // Grow the non-uniform set to a fixed point, then check with errors on.
  for (int pass = 0; pass < 10000; ++pass) {
    std::size_t before = nonuniform_.size();
    run_pass(false);
    if (nonuniform_.size() == before) break;
  }
  run_pass(true);
  return std::move(analysis_);
}

void Checker::run_pass(bool final_pass) {
  final_ = final_pass;
  analysis_.exprs.clear();
  analysis_.if_exports.clear();
  env_.clear();
  dropped_.clear();
  divergence_.clear();
  shared_total_ = 0;
  written_.clear();
  collect_writes(kernel_.body);
  for (const KernelParam& p : decl_.params) {
    Var v;
    v.is_param = true;
    if (p.is_buffer) {
      v.type.kind = Kind::gmem;
      v.type.dtype = p.dtype;
      v.type.mut = p.is_mut;
      v.type.param = p.name;
      v.type.rank = p.dims.size();
    } else {
      v.type = KType::lane(p.dtype);
    }
    env_[p.name] = v;
  }
  check_body(kernel_.body, true);
}

void Checker::collect_writes(const ast::Body& body) {
  for (const auto& s : body) {
    auto note = [&](const Expr& t) {
      if (t.kind == ExprKind::subscript && t.args[0]->kind == ExprKind::name) written_.insert(t.args[0]->text);
    };
    if (s->target) {
      note(*s->target);
      if (s->target->kind == ExprKind::tuple)
        for (const auto& a : s->target->args) note(*a);
    }
    // tile.store(T, ...) and cp_async destinations.
    if (s->kind == StmtKind::expr) note_call_writes(*s->value);
    collect_writes(s->body);
    collect_writes(s->orelse);
  }
}
void Checker::note_call_writes(const Expr& e) {
  if (e.kind != ExprKind::call || e.args.size() < 2 || e.args[1]->kind != ExprKind::name) return;
  std::string callee = dotted_name(*e.args[0]);
  if (callee == "tile.store" || callee == "cp_async.shared.global") written_.insert(e.args[1]->text);
}

void Checker::require_uniform_control(const Expr& e, const std::string& what) const {
  if (!final_ || !divergent()) return;
  std::size_t at = divergence_.back();
  fail(e, what + " is group-cooperative and must run under uniform control flow, but the condition on line " +
              line_of(at) + " depends on a lane-varying value (such as tile.linear_id())");
}

// Loads are uniform at uniform indices of global buffers the kernel never writes.
bool Checker::uniform_load(const KType& buffer, bool uniform_index) const {
  return uniform_index && buffer.kind == Kind::gmem && !written_.count(buffer.param);
}

}  // namespace tessera::frontend::sema_detail
