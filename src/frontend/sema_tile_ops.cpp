// The tile built-ins in kernels: tile.load / tile.store of one element
// (index=) or of a tile window (rows=/cols= as (start, extent), or a whole
// shared buffer), tile.mma with its accumulator dtype, tile.transpose and
// tile.zeros.
// Tile-sized operations are group-cooperative (uniform control only).
#include "frontend/sema_checker.h"

namespace tessera::frontend::sema_detail {

using ast::Expr;
using ast::ExprKind;
using Kind = KType::Kind;

// A window keyword: (start, extent) or a bare start. Returns the extent or 0 when bare.
std::int64_t Checker::window(const Arg& a, const std::string& name) {
  if (a.expr->kind == ExprKind::tuple) {
    if (a.expr->args.size() != 2) fail(*a.expr, a.keyword + "= takes (start, extent)");
    const ExprInfo& s = analyze(*a.expr->args[0]);
    require_int(*a.expr->args[0], s, name + " " + a.keyword + " start");
    return const_extent(*a.expr->args[1], name + " " + a.keyword + " extent");
  }
  const ExprInfo& s = analyze(*a.expr);
  require_int(*a.expr, s, name + " " + a.keyword + " start");
  return 0;
}

// The buffer and tile extents of tile.load / tile.store windows. `value`
// gives extents for bare starts (stores).
std::vector<std::int64_t> Checker::windows(const Expr& e, const std::string& name, const std::vector<Arg>& args,
                                           const KType& buf, const KType* value) {
  const Arg* rows = keyword(args, "rows");
  const Arg* cols = keyword(args, "cols");
  std::size_t rank = buf.buffer_rank();
  std::vector<std::int64_t> extents;
  if (!rows && !cols) {
    if (buf.kind != Kind::smem)
      fail(e, name + " of a global buffer needs index= (one element) or rows=(start, extent)" +
                  std::string(rank == 2 ? " and cols=(start, extent)" : "") + " (a tile)");
    return buf.sizes;  // the whole shared buffer
  }
  if (!rows) fail(e, name + ": cols= needs rows= too");
  if (rank == 1 && cols)
    fail(cols->offset, name + ": '" + buffer_label(buf) + "' is 1-D: give only rows=(start, extent)", 4);
  if (rank == 2 && !cols)
    fail(e, name + ": '" + buffer_label(buf) + "' is 2-D: give rows=(start, extent) and cols=(start, extent)");
  if (rank > 2) fail(e, name + " of tiles needs a 1-D or 2-D buffer");
  extents.push_back(window(*rows, name));
  if (cols) extents.push_back(window(*cols, name));
  for (std::size_t d = 0; d < extents.size(); ++d) {
    if (extents[d] == 0) {
      if (!value) fail(d == 0 ? *rows->expr : *cols->expr, name + ": give the window as (start, extent)");
      extents[d] = value->sizes[d];
    } else if (value && value->sizes[d] != extents[d]) {
      fail(e, name + ": the window is " + sizes_text(extents) + " but the value is " + value->str());
    }
  }
  return extents;
}

void Checker::check_index_kw(const Arg& a, const KType& buf, const std::string& name, bool& uniform) {
  std::vector<const Expr*> idx = tuple_items(*a.expr);
  if (idx.size() != buf.buffer_rank())
    fail(*a.expr, name + ": '" + buffer_label(buf) + "' has " + std::to_string(buf.buffer_rank()) +
                      " dimensions but index= gives " + std::to_string(idx.size()));
  for (const Expr* x : idx) {
    const ExprInfo& i = analyze(*x);
    require_int(*x, i, "an index");
    uniform = uniform && i.uniform;
  }
}

const ExprInfo& Checker::analyze_tile_load(const Expr& e, const std::vector<Arg>& args) {
  const std::string name = "tile.load";
  expect_args(e, name, args, 1, {"index", "rows", "cols"});
  const ExprInfo buf = analyze(*args[0].expr);
  if (!buf.type.is_buffer()) fail(*args[0].expr, name + " reads a buffer, got " + buf.type.str());
  if (const Arg* index = keyword(args, "index")) {
    if (keyword(args, "rows") || keyword(args, "cols"))
      fail(e, name + ": give index= (an element) or rows=/cols= (a tile), not both");
    bool uniform = true;
    check_index_kw(*index, buf.type, name, uniform);
    ExprInfo i{KType::lane(buf.type.dtype), uniform_load(buf.type, uniform)};
    i.builtin = "tile.load_elem";
    return record(e, i);
  }
  require_uniform_control(e, "tile.load of a tile");
  std::vector<std::int64_t> extents = windows(e, name, args, buf.type, nullptr);
  ExprInfo i{KType::tile(buf.type.dtype, extents), true};
  i.builtin = "tile.tile_load";
  return record(e, i);
}

const ExprInfo& Checker::analyze_tile_store(const Expr& e, const std::vector<Arg>& args) {
  const std::string name = "tile.store";
  expect_args(e, name, args, 1, {"index", "rows", "cols", "value"});
  const ExprInfo buf = analyze(*args[0].expr);
  if (!buf.type.is_buffer()) fail(*args[0].expr, name + " writes a buffer, got " + buf.type.str());
  const Arg* value = keyword(args, "value");
  if (!value) fail(e, name + " needs value=");
  check_writable(*args[0].expr, buf.type);
  const ExprInfo v = analyze(*value->expr);
  if (const Arg* index = keyword(args, "index")) {
    if (keyword(args, "rows") || keyword(args, "cols"))
      fail(e, name + ": give index= (an element) or rows=/cols= (a tile), not both");
    bool uniform = true;
    check_index_kw(*index, buf.type, name, uniform);
    store_value(*value->expr, v, buf.type.dtype, "an element of '" + buffer_label(buf.type) + "'");
    ExprInfo i{KType{}, true};
    i.builtin = "tile.store_elem";
    return record(e, i);
  }
  if (v.type.kind != Kind::tile)
    fail(*value->expr, name + " with rows=/cols= stores a tile, got " + v.type.str() + " (use index= for one element)");
  require_uniform_control(e, "tile.store of a tile");
  if (v.type.sizes.size() != buf.type.buffer_rank())
    fail(*value->expr, name + ": the value is " + v.type.str() + " but the buffer has " +
                           std::to_string(buf.type.buffer_rank()) + " dimensions");
  windows(e, name, args, buf.type, &v.type);
  ExprInfo i{KType{}, true};
  i.builtin = "tile.tile_store";
  return record(e, i);
}

const ExprInfo& Checker::analyze_mma(const Expr& e, const std::vector<Arg>& args) {
  const std::string name = "tile.mma";
  expect_args(e, name, args, 2, {"acc", "accum"});
  require_uniform_control(e, "tile.mma");
  const ExprInfo a = analyze(*args[0].expr);
  const ExprInfo b = analyze(*args[1].expr);
  for (int k = 0; k < 2; ++k) {
    const ExprInfo& t = k == 0 ? a : b;
    if (t.type.kind != Kind::tile || t.type.sizes.size() != 2)
      fail(*args[static_cast<std::size_t>(k)].expr,
           name + " multiplies 2-D tiles; operand " + (k == 0 ? "a" : "b") + " is " + t.type.str());
  }
  if (a.type.dtype != b.type.dtype)
    fail(e, name + ": the operands have different dtypes (" + std::string(tessera::name(a.type.dtype)) + " and " +
                std::string(tessera::name(b.type.dtype)) + "); convert one with " +
                std::string(tessera::name(a.type.dtype)) + "(...)");
  if (a.type.sizes[1] != b.type.sizes[0])
    fail(e, name + ": a is " + sizes_text(a.type.sizes) + " and b is " + sizes_text(b.type.sizes) +
                ": a's columns must equal b's rows");
  std::vector<std::int64_t> out = {a.type.sizes[0], b.type.sizes[1]};
  DType accum = default_mma_accum(a.type.dtype);
  const Arg* acc = keyword(args, "acc");
  const Arg* accum_kw = keyword(args, "accum");
  if (accum_kw) {
    const ExprInfo& d = analyze(*accum_kw->expr);
    if (d.type.kind != Kind::dtype) fail(*accum_kw->expr, "accum= takes a dtype such as f32");
    accum = d.type.dtype;
  }
  if (acc) {
    const ExprInfo c = analyze(*acc->expr);
    if (c.type.kind != Kind::tile || c.type.sizes != out)
      fail(*acc->expr,
           name + ": acc must be a tile " + sizes_text(out) + " (a's rows by b's columns), got " + c.type.str());
    if (accum_kw && c.type.dtype != accum)
      fail(*accum_kw->expr, name + ": accum=" + std::string(tessera::name(accum)) + " disagrees with acc, which is " +
                                std::string(tessera::name(c.type.dtype)));
    accum = c.type.dtype;
  }
  ExprInfo i{KType::tile(accum, out), true};
  i.builtin = acc ? "tile.mma" : "tile.mma_fresh";
  return record(e, i);
}

// tile.transpose(t): a 2-D tile [R, C] -> [C, R] of the same dtype.
const ExprInfo& Checker::analyze_transpose(const Expr& e, const std::vector<Arg>& args) {
  const std::string name = "tile.transpose";
  expect_args(e, name, args, 1, {});
  require_uniform_control(e, name);
  const ExprInfo t = analyze(*args[0].expr);
  if (t.type.kind != Kind::tile || t.type.sizes.size() != 2)
    fail(*args[0].expr, name + " takes a 2-D tile, got " + t.type.str());
  ExprInfo i{KType::tile(t.type.dtype, {t.type.sizes[1], t.type.sizes[0]}), true};
  i.builtin = name;
  return record(e, i);
}

const ExprInfo& Checker::analyze_zeros(const Expr& e, const std::vector<Arg>& args) {
  const std::string name = "tile.zeros";
  std::size_t positional = 0;
  for (const Arg& a : args) positional += a.keyword.empty();
  if (positional < 1 || positional > 2) fail(e, name + "((M, N), dtype) takes a shape and optionally a dtype");
  expect_args(e, name, args, positional, {"dtype"});
  std::vector<const Expr*> dims = tuple_items(*args[0].expr);
  if (dims.empty() || dims.size() > 2) fail(*args[0].expr, name + ": a tile has 1 or 2 dimensions");
  std::vector<std::int64_t> sizes;
  for (const Expr* d : dims) sizes.push_back(const_extent(*d, "a tile extent"));
  DType dtype = DType::fp32;
  const Expr* dt = positional == 2 ? args[1].expr : nullptr;
  if (const Arg* k = keyword(args, "dtype")) {
    if (dt) fail(k->offset, name + ": the dtype is given twice", 5);
    dt = k->expr;
  }
  if (dt) {
    const ExprInfo& d = analyze(*dt);
    if (d.type.kind != Kind::dtype) fail(*dt, name + ": expected a dtype such as f32, got " + d.type.str());
    dtype = d.type.dtype;
  }
  ExprInfo i{KType::tile(dtype, sizes), true};
  i.builtin = name;
  return record(e, i);
}

}  // namespace tessera::frontend::sema_detail
