// The shared-memory built-ins in kernels: tshared.alloc[T](dims, swizzle=)
// against the group's shared budget (declared with shared(SIZE), else
// kDefaultSharedBytes), and cp_async.shared.global(dst, X[a:a+n, ...]),
// whose slices must copy exactly the destination's compile-time extents.
#include "frontend/sema_checker.h"

namespace tessera::frontend::sema_detail {

using ast::Expr;
using ast::ExprKind;
using Kind = KType::Kind;

namespace {

std::string size_text(std::int64_t bytes) {
  if (bytes % 1024 == 0) return std::to_string(bytes / 1024) + "_KiB";
  return std::to_string(bytes) + " bytes";
}

// Structural equality of two expressions without keywords (`a` in `a:a+n`).
bool same_expr(const Expr& a, const Expr& b) {
  if (a.kind != b.kind || a.text != b.text || a.int_value != b.int_value || a.real_value != b.real_value ||
      a.args.size() != b.args.size() || a.ops != b.ops || !a.keywords.empty() || !b.keywords.empty())
    return false;
  for (std::size_t i = 0; i < a.args.size(); ++i)
    if (!same_expr(*a.args[i], *b.args[i])) return false;
  return true;
}

}  // namespace

const ExprInfo& Checker::analyze_alloc(const Expr& e) {
  const Expr& callee = *e.args[0];
  require_uniform_control(e, "tshared.alloc");
  if (callee.args.size() != 2) fail(callee, "tshared.alloc takes one element type: tshared.alloc[f32](...)");
  const ExprInfo& t = analyze(*callee.args[1]);
  if (t.type.kind != Kind::dtype)
    fail(*callee.args[1], "tshared.alloc[T]: T must be a dtype such as f32, got " + t.type.str());
  std::vector<Arg> args = bind_args(e);
  std::vector<const Expr*> dims;
  bool swizzle = false;
  for (const Arg& a : args) {
    if (a.keyword.empty()) {
      for (const Expr* d : tuple_items(*a.expr)) dims.push_back(d);
    } else if (a.keyword == "swizzle") {
      if (a.expr->kind != ExprKind::string || (a.expr->text != "xor" && a.expr->text != "none"))
        fail(*a.expr, "swizzle= takes \"xor\" or \"none\"");
      swizzle = a.expr->text == "xor";
    } else {
      unknown_keyword(a.offset, a.keyword, "tshared.alloc", suggest(a.keyword, {"swizzle"}));
    }
  }
  if (dims.empty() || dims.size() > 2)
    fail(e, "a shared buffer has 1 or 2 dimensions: tshared.alloc[f32](128) or (64, 64)");
  KType type;
  type.kind = Kind::smem;
  type.dtype = t.type.dtype;
  type.swizzle_xor = swizzle;
  for (const Expr* d : dims) type.sizes.push_back(const_extent(*d, "a shared buffer extent"));
  if (type.dtype == DType::e8m0) fail(*callee.args[1], "e8m0 is a scale format, not a shared buffer element type");
  std::int64_t bytes = shared_alloc_bytes(type.dtype, type.sizes);
  std::int64_t budget = decl_.shared_bytes.value_or(kDefaultSharedBytes);
  shared_total_ += bytes;
  if (shared_total_ > budget)
    fail(e, "shared allocation " + type.str() + " (" + std::to_string(bytes) +
                " bytes) brings the group's shared memory to " + std::to_string(shared_total_) +
                " bytes, over the budget of " + std::to_string(budget) + " bytes (" +
                (decl_.shared_bytes ? "declared shared(" + size_text(budget) + ")"
                                    : "the default; declare more with shared(SIZE)") +
                ")");
  ExprInfo i{type, true};
  i.builtin = "tshared.alloc";
  return record(e, i);
}

const ExprInfo& Checker::analyze_cp_async(const Expr& e, const std::vector<Arg>& args) {
  const std::string name = "cp_async.shared.global";
  expect_args(e, name, args, 2, {});
  require_uniform_control(e, name + "()");
  const ExprInfo dst = analyze(*args[0].expr);
  if (dst.type.kind != Kind::smem)
    fail(*args[0].expr, name + ": the destination must be a shared buffer, got " + dst.type.str());
  const Expr& src = *args[1].expr;
  if (src.kind != ExprKind::subscript)
    fail(src, name + ": the source must be a slice of a global buffer, such as X[t:t+128]");
  const ExprInfo base = analyze(*src.args[0]);
  if (base.type.kind != Kind::gmem)
    fail(*src.args[0], name + ": the source must be a global buffer, got " + base.type.str());
  if (base.type.dtype != dst.type.dtype)
    fail(e, name + " copies raw elements: the source is " + std::string(tessera::name(base.type.dtype)) +
                " but the destination is " + std::string(tessera::name(dst.type.dtype)));
  std::size_t rank = base.type.rank;
  if (src.args.size() - 1 != rank)
    fail(src, "'" + base.type.param + "' has " + std::to_string(rank) + " dimensions but the slice has " +
                  std::to_string(src.args.size() - 1));
  if (rank != dst.type.sizes.size())
    fail(e, name + ": the source has " + std::to_string(rank) + " dimensions and the destination " +
                std::to_string(dst.type.sizes.size()));
  for (std::size_t d = 0; d < rank; ++d) {
    const Expr& s = *src.args[d + 1];
    if (s.kind != ExprKind::slice) fail(s, name + ": each source index must be a slice a:a+n");
    const Expr& lo = *s.args[0];
    const Expr& hi = *s.args[1];
    if (lo.kind == ExprKind::none || hi.kind == ExprKind::none)
      fail(s, name + ": write both slice bounds (a:a+n) so the copied extent is known");
    const ExprInfo& lo_info = analyze(lo);
    require_int(lo, lo_info, "a slice start");
    const ExprInfo& hi_info = analyze(hi);
    require_int(hi, hi_info, "a slice stop");
    std::optional<std::int64_t> length;
    if (lo_info.constant && hi_info.constant) {
      length = *hi_info.constant - *lo_info.constant;
    } else if (hi.kind == ExprKind::binary && hi.text == "+" && same_expr(*hi.args[0], lo)) {
      length = analysis_.info(*hi.args[1]).constant;
    }
    if (!length)
      fail(s, name + ": the slice's length must be a compile-time constant: write it as a:a+n with n constant");
    if (*length != dst.type.sizes[d])
      fail(s, name + ": the slice copies " + std::to_string(*length) + " elements along dimension " +
                  std::to_string(d) + " but the destination holds " + std::to_string(dst.type.sizes[d]));
  }
  ExprInfo i{KType{}, true};
  i.builtin = name;
  return record(e, i);
}

}  // namespace tessera::frontend::sema_detail
