// Tessera Tile IR -> CUDA Tile IR: the entry, buffers and group-level tiles
// (lowering.h says how the three files of the lowering divide the work).
#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "backends/common/kernel_params.h"
#include "backends/cuda_tile/lowering.h"
#include "tessera/ir/text.h"
#include "tessera/support/error.h"
#include "tessera/tile/passes.h"
#include "tessera/tile/tile_dialect.h"

namespace tessera::cuda_tile {
namespace detail {

[[noreturn]] void cannot(const ir::Operation& op, const std::string& why) {
  raise(ErrorCode::Compile,
        "cuda_tile target cannot express '" + std::string(op.name()) + "': " + why, op.location());
}

std::optional<Elem> elem_of(DType d) {
  switch (d) {
    case DType::fp64: return Elem::f64;
    case DType::fp32: return Elem::f32;
    case DType::fp16: return Elem::f16;
    case DType::bf16: return Elem::bf16;
    case DType::fp8_e4m3: return Elem::f8e4m3fn;
    case DType::fp8_e5m2: return Elem::f8e5m2;
    case DType::int8: return Elem::i8;
    case DType::int16: return Elem::i16;
    case DType::int32: return Elem::i32;
    case DType::int64: return Elem::i64;
    case DType::bool_: return Elem::i1;
    default: return std::nullopt;
  }
}

namespace {

// Ops that can fault at run time the way the CPU backend reports: element
// accesses (index out of range), integer division (by zero), check_range,
// loops whose step is not a positive constant.
bool may_fault(const ir::Operation& op) {
  const std::string_view n = op.name();
  if (n == "tile.load_elem" || n == "tile.store_elem" || n == "tile.check_range") return true;
  // Whether `v` is a constant that passes `test`.
  auto constant_that = [](const ir::Value* v, auto test) {
    const ir::Operation* d = v->defining_op();
    return d != nullptr && d->name() == "tile.const" && test(d->attrs().get_int("value"));
  };
  if (n == "tile.for") return !constant_that(op.operand(2), [](std::int64_t c) { return c > 0; });
  if ((n == "tile.div" || n == "tile.rem" || n == "tile.floordiv") && !is_float(op.result()->type().dtype())) {
    return !constant_that(op.operand(1), [](std::int64_t c) { return c != 0; });
  }
  return false;
}

}  // namespace

// The bytes of one group's copy of a shared buffer: 16-byte aligned, so each
// copy holds a multiple of 16 bytes.
std::int64_t Lowering::shared_copy_bytes(const ir::Operation& alloc) {
  const ir::Type& t = alloc.result()->type();
  const Elem e = elem(t.dtype(), alloc);
  if (e == Elem::i1) cannot(alloc, "shared buffers of bool");
  std::int64_t n = 1;
  for (std::int64_t d : fixed_shape(alloc, t.shape)) n *= d;
  return (std::max<std::int64_t>(n, 1) * bit_width(e) / 8 + 15) / 16 * 16;
}

Lowering::Lowering(const ir::Operation& func, const LowerOptions& options)
    : func_(func), options_(options), m_("tessera") {}

LoweredKernel Lowering::run() {
  const ir::Block& body = ir::function_body(func_);
  std::vector<TypeRef> types;
  std::vector<std::string> names;
  for (std::size_t i = 0; i < body.num_arguments(); ++i) {
    const ir::Value* a = body.argument(i);
    const ir::Type& t = a->type();
    const std::string pname = a->name().empty() ? "arg" + std::to_string(i) : a->name();
    if (t.is_gmem()) {
      types.push_back(m_.tile_of(m_.pointer(elem(t.dtype(), func_)), {}));
      names.push_back(pname);
      for (std::size_t d = 0; d < t.rank(); ++d) {
        types.push_back(m_.tile(Elem::i64, {}));
        names.push_back(pname + ".shape[" + std::to_string(d) + "]");
      }
    } else if (t.is_lane()) {
      types.push_back(m_.tile(elem(t.dtype(), func_), {}));
      names.push_back(pname);
    } else {
      raise(ErrorCode::Compile, "cuda_tile target: parameter '" + pname + "' of type " + ir::print_type(t) +
                                    " is not a gmem buffer or lane scalar", func_.location());
    }
  }
  // A kernel without a group shape or group-level ops runs flat: one tile
  // per index, kFlatLanes of them per tile block, the count a parameter.
  flat_ = func_.attrs().find("group_shape") == nullptr &&
          !any_op(body, [](const ir::Operation& op) { return tile::is_group_cooperative(op); });
  if (flat_) {
    types.push_back(m_.tile(Elem::i64, {}));
    names.push_back("tiles");
  }
  // Shape symbols the kernel reads that no buffer dim gives whole (tp of
  // K/tp): hidden i64 parameters, bound from the launch's solved symbols.
  std::set<std::string> plain;
  for (std::size_t i = 0; i < body.num_arguments(); ++i) {
    const ir::Type& t = body.argument(i)->type();
    if (!t.is_gmem()) continue;
    for (const ir::Dim& d : t.shape) {
      if (d.is_symbolic() && codegen::dim_symbols(d) == std::vector<std::string>{d.symbol}) plain.insert(d.symbol);
    }
  }
  // (sorted, each once)
  std::vector<std::string> symbol_params;
  for_each_op(body, [&](const ir::Operation& op) {
    if (op.name() != "tile.symbol") return;
    const std::string& name = op.attrs().get_string("name");
    if (plain.count(name) || std::binary_search(symbol_params.begin(), symbol_params.end(), name)) return;
    symbol_params.insert(std::upper_bound(symbol_params.begin(), symbol_params.end(), name), name);
  });
  for (const std::string& sym : symbol_params) {
    types.push_back(m_.tile(Elem::i64, {}));
    names.push_back(sym);
  }
  // Shared buffers: a hidden pointer each, to grid-many copies in global
  // memory the launch allocates; tile block g uses copy g (lowering.h).
  plan_staged(body);
  std::vector<const ir::Operation*> allocs;
  for_each_op(body, [&](const ir::Operation& op) {
    if (op.name() == "tile.smem_alloc" && !staged_.count(op.result())) allocs.push_back(&op);
  });
  for (std::size_t i = 0; i < allocs.size(); ++i) {
    types.push_back(m_.tile_of(m_.pointer(elem(allocs[i]->result()->type().dtype(), *allocs[i])), {}));
    names.push_back("shared#" + std::to_string(i));
    shared_bytes_.push_back(shared_copy_bytes(*allocs[i]));  // once per buffer, however often its op is lowered
  }
  const bool faults = any_op(body, may_fault);
  if (faults) {
    types.push_back(m_.tile_of(m_.pointer(Elem::i32), {}));
    names.push_back("fault");
  }
  // The entry's symbol: letters, digits and '_' only (a jit function may be
  // "<lambda>"; tileiras's code generator rejects such a name).
  const std::string entry = codegen::c_identifier(ir::function_name(func_));
  b_ = &m_.begin_entry(entry, types, names);
  if (const std::optional<int> occupancy = entry_occupancy(func_, options_)) m_.entry_hints(options_.arch, *occupancy);
  std::size_t slot = 0;
  for (std::size_t i = 0; i < body.num_arguments(); ++i) {
    const ir::Value* a = body.argument(i);
    Buffer buf;
    buf.ptr = b_->params()[slot++];
    if (options_.assume_aligned && a->type().is_gmem()) buf.ptr = b_->assume_div_by(buf.ptr, 16);
    if (a->type().is_gmem()) {
      for (std::size_t d = 0; d < a->type().rank(); ++d) {
        buf.dims.push_back(b_->params()[slot++]);
        const ir::Dim& dim = a->type().shape[d];
        if (plain.count(dim.symbol) && !symbols_.count(dim.symbol)) symbols_[dim.symbol] = buf.dims.back();
      }
      buffers_[a] = buf;
    } else {
      values_[a] = buf.ptr;
    }
  }
  for (const std::string& sym : symbol_params) symbols_[sym] = b_->params()[slot++];
  for (std::size_t i = 0; i < allocs.size(); ++i) shared_[allocs[i]] = SharedBuffer{b_->params()[slot++], shared_bytes_[i]};
  if (flat_) flat_tiles_ = b_->params()[slot++];
  if (faults) fault_ptr_ = b_->params()[slot++];
  begin_lanes(body);
  plan_aligned_views(body);
  lower_block(body);
  m_.end_entry();
  LoweredKernel out{entry, m_.bytes(), m_.text()};
  out.faults = faults_;
  out.fault_param = faults;
  out.flat_lanes = flat_ ? lanes_ : 0;
  out.symbol_params = symbol_params;
  out.shared_bytes = shared_bytes_;
  return out;
}

// ---- tiles at multiples of their shape ----
//
// A load or store whose every offset is provably a multiple of the tile's
// extent there (bm = (g // n) * 128 for 128 rows, k of range(0, K, 64) for
// 64 columns) indexes one partition view of the whole buffer, made once at
// the entry: tile index = offset / extent. That is the form tileiras turns
// into bulk tensor copies; any other offset gets a view of its own
// (tile_view below). Both read zeros and skip stores past the bounds.

// Whether `v` is a multiple of `d` by construction: constants, products
// with a multiple, sums and differences of multiples, casts of one, and a
// tile.for induction variable whose start and step are multiples.
bool Lowering::multiple_of(const ir::Value* v, std::int64_t d, int depth) const {
  if (d == 1) return true;
  if (depth > 16) return false;
  if (v->is_block_argument()) {
    const ir::Region* region = v->owner_block()->parent_region();
    const ir::Operation* loop = region == nullptr ? nullptr : region->parent_op();
    if (loop == nullptr || loop->name() != "tile.for" || v->index() != 0) return false;
    return multiple_of(loop->operand(0), d, depth + 1) && multiple_of(loop->operand(2), d, depth + 1);
  }
  const ir::Operation* op = v->defining_op();
  const std::string_view n = op->name();
  if (n == "tile.const") {
    return !is_float(elem_of(op->result()->type().dtype()).value_or(Elem::f32)) &&
           op->attrs().get_int("value") % d == 0;
  }
  if (n == "tile.mul") return multiple_of(op->operand(0), d, depth + 1) || multiple_of(op->operand(1), d, depth + 1);
  if (n == "tile.add" || n == "tile.sub" || n == "tile.min" || n == "tile.max") {
    return multiple_of(op->operand(0), d, depth + 1) && multiple_of(op->operand(1), d, depth + 1);
  }
  if (n == "tile.cast") return multiple_of(op->operand(0), d, depth + 1);
  return false;
}

bool Lowering::aligned_offsets(const ir::Operation& op, std::size_t first, std::size_t count,
                     const std::vector<std::int64_t>& shape) const {
  if (count != shape.size()) return false;
  for (std::size_t i = 0; i < count; ++i) {
    if (!multiple_of(op.operand(first + i), shape[i])) return false;
  }
  return true;
}

// Makes, at the entry, the partition views the aligned loads and stores of
// `block` (nested regions included) will index.
void Lowering::plan_aligned_views(const ir::Block& block) {
  for (const auto& op : block.ops()) {
    for (std::size_t r = 0; r < op->num_regions(); ++r) {
      for (std::size_t b = 0; b < op->region(r).num_blocks(); ++b) plan_aligned_views(op->region(r).block(b));
    }
    // The global buffer, its first offset operand, the tile's type.
    const bool load = op->name() == "tile.tile_load", store = op->name() == "tile.tile_store";
    const bool copy = op->name() == "tile.cp_async" && staged_.count(op->operand(0));
    if (!load && !store && !copy) continue;
    const std::size_t source = copy ? 1 : 0, first = source + 1;
    auto it = buffers_.find(op->operand(source));
    if (it == buffers_.end()) continue;  // lower_op reports it
    const ir::Type& t = load ? op->result()->type()
                        : copy ? op->operand(0)->type()
                               : op->operand(op->num_operands() - 1)->type();
    std::vector<std::int64_t> shape;
    for (const ir::Dim& d : t.shape) {
      if (d.is_symbolic()) break;
      shape.push_back(d.size);
    }
    const std::size_t count = store ? op->num_operands() - 2 : op->num_operands() - first;
    if (shape.size() != t.shape.size() || !aligned_offsets(*op, first, count, shape)) continue;
    Buffer& buf = it->second;
    if (buf.aligned.count(shape) || t.dtype() != op->operand(source)->type().dtype()) continue;
    const std::optional<Elem> e = elem_of(t.dtype());
    if (!e) continue;
    std::vector<Value> zeros(shape.size());
    for (Value& z : zeros) z = i64(0);
    buf.aligned[shape] = tile_view(*op, buf, zeros, shape, *e, /*at_origin=*/true);
  }
}

// The partition view and tile index of an aligned access, or nullopt.
std::optional<std::pair<Value, std::vector<Value>>> Lowering::aligned_access(const ir::Operation& op, const Buffer& buf,
                                                                   std::size_t first, std::size_t count,
                                                                   const std::vector<std::int64_t>& shape) {
  auto it = buf.aligned.find(shape);
  if (it == buf.aligned.end() || !aligned_offsets(op, first, count, shape)) return std::nullopt;
  std::vector<Value> index;
  const Value most = i64(std::numeric_limits<std::int32_t>::max());
  for (std::size_t i = 0; i < count; ++i) {
    // offset / extent is exact; past 2^31 - 1 tiles the index stays out of bounds (clamped, not wrapped).
    const Value q = b_->binary("mini", b_->binary("divi", get(op.operand(first + i), op), i64(shape[i])), most);
    index.push_back(b_->convert(scalar(Elem::i32), q));
  }
  return std::make_pair(it->second, index);
}

Elem Lowering::elem(DType d, const ir::Operation& op) {
  if (auto e = elem_of(d)) return *e;
  cannot(op, "dtype " + std::string(tessera::name(d)) + " has no CUDA Tile IR element type");
}

Value Lowering::get(const ir::Value* v, const ir::Operation& op) {
  auto it = values_.find(v);
  if (it == values_.end()) cannot(op, "an operand is a buffer or a value this target did not lower");
  return it->second;
}

// A value of the element type: float ops round to nearest even here, as
// the policy must say.
void Lowering::require_nearest(const ir::Operation& op, const NumericsPolicy& p) {
  if (p.rounding != Rounding::nearest_even) cannot(op, "only round-to-nearest-even arithmetic is expressible");
}

// floor division of int64 (Python //): truncate, then step down when the
// remainder is nonzero and its sign differs from the divisor's.
Value Lowering::floordiv(Value a, Value b) {
  const Value q = b_->binary("divi", a, b);
  const Value r = b_->binary("remi", a, b);
  const Value zero = int_like(a, 0);
  const Value r_nonzero = b_->cmp(r, zero, Cmp::ne);
  const Value signs_differ = b_->binary("xori", b_->cmp(r, zero, Cmp::lt), b_->cmp(b, zero, Cmp::lt));
  const Value adjust = b_->binary("andi", r_nonzero, signs_differ);
  return b_->select(adjust, b_->binary("subi", q, int_like(q, 1)), q);
}

// Tessera's saturating integer add/sub/mul (the exact result clamped to the
// dtype's range, as the CPU backend's iadd/isub/imul) from the target's
// wrapping ops: the wrapped result, an overflow test, and a select of the
// bound the exact result passed. Index arithmetic of group-level kernels
// (offsets from group_id) comes through here; these are scalar ops.
Value Lowering::saturating(std::string_view kind, Value a, Value b) {
  const Elem e = m_.elem_of(a.type);
  const int bits = bit_width(e);
  const std::int64_t max = bits == 64 ? std::numeric_limits<std::int64_t>::max() : (std::int64_t{1} << (bits - 1)) - 1;
  const TypeRef t = a.type;
  const Value zero = b_->constant_int(t, 0), lo = b_->constant_int(t, -max - 1), hi = b_->constant_int(t, max);
  const Value a_neg = b_->cmp(a, zero, Cmp::lt), b_neg = b_->cmp(b, zero, Cmp::lt);
  if (kind == "add" || kind == "sub") {
    const Value r = b_->binary(kind == "add" ? "addi" : "subi", a, b);
    // add: a and b share a sign that r lacks; sub: a and b differ in sign and r's differs from a's.
    const Value x = kind == "add" ? b_->binary("andi", b_->binary("xori", a, r), b_->binary("xori", b, r))
                                  : b_->binary("andi", b_->binary("xori", a, b), b_->binary("xori", a, r));
    // Overflow only happens away from a's sign side: a < 0 clamps to the minimum.
    return b_->select(b_->cmp(x, zero, Cmp::lt), b_->select(a_neg, lo, hi), r);
  }
  // mul: r / a != b detects overflow, except a == -1 (overflows only for b
  // == min, and min / -1 is itself undefined) and a == 0 (never).
  const Value r = b_->binary("muli", a, b);
  const Value one = b_->constant_int(t, 1), minus_one = b_->constant_int(t, -1);
  const Value a_is_m1 = b_->cmp(a, minus_one, Cmp::eq);
  const Value safe_a = b_->select(b_->binary("ori", a_is_m1, b_->cmp(a, zero, Cmp::eq)), one, a);
  const Value general =
      b_->binary("andi", b_->cmp(a, zero, Cmp::ne), b_->cmp(b_->binary("divi", r, safe_a), b, Cmp::ne));
  const Value overflow = b_->select(a_is_m1, b_->cmp(b, lo, Cmp::eq), general);
  return b_->select(overflow, b_->select(b_->binary("xori", a_neg, b_neg), lo, hi), r);
}

Value Lowering::tile_view(const ir::Operation& op, const Buffer& buf, const std::vector<Value>& offs,
                          const std::vector<std::int64_t>& shape, Elem e, bool at_origin) {
  const std::size_t rank = buf.dims.size();
  if (offs.size() != rank || shape.size() != rank) cannot(op, "offsets and shape must match the buffer's rank");
  // Row-major strides of the whole buffer.
  std::vector<Value> strides(rank);
  strides[rank - 1] = i64(1);
  for (std::size_t d = rank - 1; d-- > 0;) {
    strides[d] = b_->binary("muli", strides[d + 1], buf.dims[d + 1]);
    // Rows start at multiples of 16 bytes (the launch checked it).
    if (options_.assume_aligned && bit_width(e) >= 8) strides[d] = b_->assume_div_by(strides[d], 128 / bit_width(e));
  }
  Value linear = i64(0);
  std::vector<Value> extents;
  for (std::size_t d = 0; d < rank; ++d) {
    linear = b_->binary("addi", linear, b_->binary("muli", offs[d], strides[d]));
    extents.push_back(b_->binary("maxi", b_->binary("subi", buf.dims[d], offs[d]), i64(0)));
  }
  const Value base = at_origin ? buf.ptr : b_->offset(buf.ptr, linear);
  if (options_.assume_aligned) {
    // The fast form's launches have every extent and stride below 2^31
    // (runtime.cpp checks): 32-bit view shapes and strides. With 64-bit ones
    // tileiras's GEMMs ran at 0.57-0.62x the speed (H100, bf16 4096-8192).
    for (Value& x : extents) x = b_->convert(scalar(Elem::i32), x);
    for (std::size_t d = 0; d + 1 < rank; ++d) strides[d] = b_->convert(scalar(Elem::i32), strides[d]);
  }
  std::vector<std::int64_t> dyn(rank, Module::kDynamic);
  dyn[rank - 1] = Module::kDynamic;
  std::vector<std::int64_t> stride_types(rank, Module::kDynamic);
  stride_types[rank - 1] = 1;
  const TypeRef tv = m_.tensor_view(e, dyn, stride_types);
  std::vector<std::int32_t> tshape;
  for (std::int64_t s : shape) tshape.push_back(static_cast<std::int32_t>(s));
  const TypeRef pv = m_.partition_view(tshape, tv, Padding::zero);
  std::vector<Value> dyn_strides(strides.begin(), strides.end() - 1);
  return b_->make_partition_view(pv, b_->make_tensor_view(tv, base, extents, dyn_strides));
}

std::vector<std::int64_t> Lowering::fixed_shape(const ir::Operation& op, const ir::Shape& s) {
  std::vector<std::int64_t> out;
  for (const ir::Dim& d : s) {
    if (d.is_symbolic()) cannot(op, "tile shape '" + d.str() + "' must be fixed (specialize it with jit)");
    out.push_back(d.size);
  }
  return out;
}

const Lowering::Buffer& Lowering::gmem(const ir::Operation& op, const ir::Value* v) {
  auto it = buffers_.find(v);
  if (it == buffers_.end() || !v->type().is_gmem()) {
    cannot(op, "only global buffers (kernel parameters) are expressible; shared buffers are not lowered yet");
  }
  return it->second;
}

std::vector<Value> Lowering::index_zeros(std::size_t rank) {
  std::vector<Value> out;
  for (std::size_t i = 0; i < rank; ++i) out.push_back(b_->constant_int(scalar(Elem::i32), 0));
  return out;
}

void Lowering::lower_op(const ir::Operation& op) {
  const std::string_view n = op.name();
  if (is_staged_access(op)) {
    lower_staged(op);
  } else if ((n == "tile.tile_load" || n == "tile.tile_store") && op.operand(0)->type().is_smem()) {
    lower_smem_tile_access(op);
  } else if (n == "tile.tile_load") {
    const Buffer& buf = gmem(op, op.operand(0));
    const ir::Type& t = op.result()->type();
    const Elem e = elem(t.dtype(), op);
    std::vector<Value> offs;
    for (std::size_t i = 1; i < op.num_operands(); ++i) offs.push_back(get(op.operand(i), op));
    const std::vector<std::int64_t> shape = fixed_shape(op, t.shape);
    std::pair<Value, std::vector<Value>> at;
    if (auto a = aligned_access(op, buf, 1, offs.size(), shape)) {
      at = *a;
    } else {
      at = {tile_view(op, buf, offs, shape, e), index_zeros(shape.size())};
    }
    const bool ordered = tokens_ && !read_only(op.operand(0));
    Value token;
    values_[op.result()] = b_->load_view(m_.tile(e, shape), at.first, at.second,
                                         ordered ? std::optional<Value>(load_token()) : std::nullopt, &token,
                                         view_hints());
    if (ordered) after_load(token);
  } else if (n == "tile.tile_store") {
    const Buffer& buf = gmem(op, op.operand(0));
    const Value tile = get(op.operand(op.num_operands() - 1), op);
    std::vector<Value> offs;
    for (std::size_t i = 1; i + 1 < op.num_operands(); ++i) offs.push_back(get(op.operand(i), op));
    const std::vector<std::int64_t> shape = m_.shape_of(tile.type);
    std::pair<Value, std::vector<Value>> at;
    if (auto a = aligned_access(op, buf, 1, offs.size(), shape)) {
      at = *a;
    } else {
      at = {tile_view(op, buf, offs, shape, m_.elem_of(tile.type)), index_zeros(shape.size())};
    }
    const Value token =
        b_->store_view(tile, at.first, at.second, tokens_ ? std::optional<Value>(store_token()) : std::nullopt);
    if (tokens_) after_store(token);
  } else if (n == "tile.zeros") {
    const ir::Type& t = op.result()->type();
    const Elem e = elem(t.dtype(), op);
    const TypeRef tt = m_.tile(e, fixed_shape(op, t.shape));
    values_[op.result()] = is_float(e) ? b_->constant_float(tt, 0.0) : b_->constant_int(tt, 0);
  } else if (n == "tile.mma") {
    // An async mma (tile-pipeline's) completes here when it runs: its
    // mma_wait has nothing to wait for.
    values_[op.result()] = b_->mma(get(op.operand(0), op), get(op.operand(1), op), get(op.operand(2), op));
  } else if (n == "tile.tile_cast") {
    const ir::Type& t = op.result()->type();
    require_nearest(op, t.policy);
    const Value x = get(op.operand(0), op);
    values_[op.result()] = b_->convert(m_.tile(elem(t.dtype(), op), m_.shape_of(x.type)), x);
  } else if (n == "tile.transpose") {
    values_[op.result()] = b_->permute(get(op.operand(0), op), {1, 0});
  } else if (n == "tile.tile_add") {
    values_[op.result()] = b_->binary("addf", get(op.operand(0), op), get(op.operand(1), op));
  } else if (n == "tile.for") {
    lower_for(op);
  } else if (n == "return") {
    b_->ret();
  } else if (!lower_tile_math(op) && !lower_lane_op(op)) {
    cannot(op, "no mapping to CUDA Tile IR yet");
  }
}

// tile.for: a loop of the target. Its bounds must be equal in every lane;
// carried lane values take the shape their uniformity gives; the memory
// tokens are carried too when the body touches memory.
void Lowering::lower_for(const ir::Operation& op) {
  const Value lo = get(op.operand(0), op), hi = get(op.operand(1), op);
  Value step = get(op.operand(2), op);
  // The CPU backend faults on a step that is not positive; the target's loop
  // needs one, so such a loop runs once-stepped after recording the fault.
  const ir::Operation* sdef = op.operand(2)->defining_op();
  if (!(sdef && sdef->name() == "tile.const" && sdef->attrs().get_int("value") > 0)) {
    const Value bad = b_->cmp(step, int_like(step, 0), Cmp::le);
    fault_if(bad, "tile.for step must be positive" + where(op));
    step = b_->select(bad, int_like(step, 1), step);
  }
  if (varying(lo) || varying(hi) || varying(step)) {
    lower_masked_for(op, lo, hi, step);
    return;
  }
  const ir::Block& body = op.region(0).block(0);
  // Carried buffers (double buffering swaps shared buffers) are carried as
  // their pointers; they keep their dims. Staged buffers carry their values,
  // and the staged buffers from outside that the body writes are carried too.
  auto carried_buffer = [&](const ir::Value* v) -> const Buffer* {
    auto it = buffers_.find(v);
    return it == buffers_.end() ? nullptr : &it->second;
  };
  std::vector<Value> inits;
  std::vector<const Buffer*> buffers;
  std::vector<bool> staged;
  for (std::size_t i = 3; i < op.num_operands(); ++i) {
    const Buffer* buf = carried_buffer(op.operand(i));
    buffers.push_back(buf);
    staged.push_back(staged_.count(op.operand(i)) != 0);
    inits.push_back(staged.back() ? staged_value(op, op.operand(i))
                    : buf         ? buf->ptr
                                  : to_type(get(op.operand(i), op), merged_type(body.argument(i - 2), op), op));
  }
  const std::size_t carried = inits.size();
  const std::vector<const ir::Value*> through = staged_written_in(op);
  for (const ir::Value* v : through) inits.push_back(staged_value(op, v));
  const std::size_t state = inits.size();  // carried values + staged buffers carried through
  const bool memory = tokens_ && touches_memory(body);
  if (memory) {
    for (Value t : token_values()) inits.push_back(t);
  }
  const auto args = b_->begin_for(lo, hi, step, inits);
  values_[body.argument(0)] = args[0];
  for (std::size_t i = 0; i < carried; ++i) {
    if (staged[i]) {
      contents_[body.argument(i + 1)] = args[i + 1];
    } else if (buffers[i]) {
      buffers_[body.argument(i + 1)] = Buffer{args[i + 1], buffers[i]->dims, {}};
    } else {
      values_[body.argument(i + 1)] = args[i + 1];
    }
  }
  for (std::size_t i = 0; i < through.size(); ++i) contents_[through[i]] = args[1 + carried + i];
  if (memory) set_tokens(args[1 + state], args[2 + state]);
  // tile.range(prefetch=N): the loads in this loop get latency hint N.
  const std::optional<int> outer_latency = latency_;
  if (const ir::Attribute* p = op.attrs().find("prefetch")) {
    latency_ = static_cast<int>(std::clamp<std::int64_t>(std::get<std::int64_t>(*p), 1, 10));
    if (options_.latency) latency_ = std::clamp(*options_.latency, 1, 10);
  }
  const ir::Operation* yield = body.terminator();
  for (const auto& inner : body.ops()) {
    if (inner.get() != yield) lower_op(*inner);
  }
  latency_ = outer_latency;
  std::vector<Value> next;
  for (std::size_t i = 0; i < yield->num_operands(); ++i) {
    if (staged[i]) {
      next.push_back(staged_value(*yield, yield->operand(i)));
    } else if (buffers[i]) {
      const Buffer* y = carried_buffer(yield->operand(i));
      if (!y) cannot(*yield, "a loop-carried buffer yields something other than a buffer");
      next.push_back(y->ptr);
    } else {
      next.push_back(to_type(get(yield->operand(i), *yield), inits[i].type, *yield));
    }
  }
  for (const ir::Value* v : through) next.push_back(staged_value(*yield, v));
  if (memory) {
    for (Value t : token_values()) next.push_back(t);
  }
  const auto results = b_->end_for(next);
  for (std::size_t i = 0; i < carried; ++i) {
    if (staged[i]) {
      contents_[op.result(i)] = results[i];
    } else if (buffers[i]) {
      buffers_[op.result(i)] = Buffer{results[i], buffers[i]->dims, {}};
    } else {
      values_[op.result(i)] = results[i];
    }
  }
  for (std::size_t i = 0; i < through.size(); ++i) contents_[through[i]] = results[carried + i];
  if (memory) set_tokens(results[state], results[state + 1]);
}

// A loop whose bounds differ between lanes (for k in range(lane, n, 128)):
// the target's loop runs the most trips any active lane has; in trip t lane
// l runs iteration lo_l + t * step_l while t is below its own trip count,
// under that mask, and keeps its carried values otherwise.
void Lowering::lower_masked_for(const ir::Operation& op, Value lo, Value hi, Value step) {
  // Staged buffers hold one value per group; lanes running different trips could not agree on it.
  if (any_op(op.region(0).block(0), [&](const ir::Operation& inner) { return is_staged_access(inner); })) {
    cannot(op, "a loop whose bounds differ between lanes accesses a shared buffer read as a whole tile");
  }
  match(lo, hi);
  match(lo, step);
  match(hi, step);
  Value span = b_->binary("maxi", b_->binary("subi", hi, lo), int_like(lo, 0));
  Value trips = b_->binary("divi", b_->binary("subi", b_->binary("addi", span, step), int_like(step, 1)), step);
  if (mask_) trips = b_->select(widen(*mask_), trips, int_like(trips, 0));
  const Value most = most_over_lanes(trips);
  const ir::Block& body = op.region(0).block(0);
  std::vector<Value> inits;
  for (std::size_t i = 3; i < op.num_operands(); ++i) inits.push_back(widen(get(op.operand(i), op)));
  const std::size_t carried = inits.size();
  const bool memory = tokens_ && touches_memory(body);
  if (memory) {
    for (Value t : token_values()) inits.push_back(t);
  }
  const auto args = b_->begin_for(i64(0), most, i64(1), inits);
  const Value t = widen(args[0]);
  const Value active = b_->cmp(t, trips, Cmp::lt);
  values_[body.argument(0)] = b_->binary("addi", lo, b_->binary("muli", t, step));
  for (std::size_t i = 0; i < carried; ++i) values_[body.argument(i + 1)] = args[i + 1];
  if (memory) set_tokens(args[1 + carried], args[2 + carried]);
  const std::optional<Value> outer = mask_;
  mask_ = all_of(outer, active);
  const ir::Operation* yield = body.terminator();
  for (const auto& inner : body.ops()) {
    if (inner.get() != yield) lower_op(*inner);
  }
  mask_ = outer;
  std::vector<Value> next;
  for (std::size_t i = 0; i < carried; ++i) {
    next.push_back(b_->select(active, widen(get(yield->operand(i), *yield)), args[i + 1]));
  }
  if (memory) {
    for (Value tok : token_values()) next.push_back(tok);
  }
  const auto results = b_->end_for(next);
  for (std::size_t i = 0; i < carried; ++i) values_[op.result(i)] = results[i];
  if (memory) set_tokens(results[carried], results[carried + 1]);
}

void Lowering::lower_block(const ir::Block& block) {
  for (const auto& op : block.ops()) lower_op(*op);
}

}  // namespace detail

std::optional<int> entry_occupancy(const ir::Operation& kernel_func, const LowerOptions& options) {
  if (options.occupancy) return options.occupancy;
  if (const ir::Attribute* o = kernel_func.attrs().find("occupancy"); o && ir::kind_of(*o) == ir::AttrKind::integer) {
    return static_cast<int>(std::clamp<std::int64_t>(std::get<std::int64_t>(*o), 1, 32));
  }
  return std::nullopt;
}

LoweredKernel lower_kernel(const ir::Operation& kernel_func, const LowerOptions& options) {
  if (!tile::contains_op(kernel_func, "tile.narrow_unary")) return detail::Lowering(kernel_func, options).run();
  // This target has no certified fp32 evaluation: narrow unaries lower as
  // their double formula (tile-expand-narrow), on a copy.
  ir::Module copy = ir::parse_module(ir::print_function(kernel_func));
  ir::Operation& func = *copy.functions().front();
  tile::expand_narrow_unaries(func);
  return detail::Lowering(func, options).run();
}

}  // namespace tessera::cuda_tile
