// Lane-level Tile IR vectorized over a group's lanes (lowering.h): lane
// values as tiles of P elements or rank-0 tiles, per-lane control flow as
// masks and selects, element loads and stores as masked pointer tiles, with
// the CPU backend's semantics (saturating integers, NaN-propagating min/max,
// faults) op for op, so results match the CPU backend's bit for bit.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "backends/cuda_tile/lowering.h"
#include "tessera/support/error.h"
#include "tessera/tile/tile_dialect.h"

namespace tessera::cuda_tile::detail {

namespace {

std::int64_t int_min_of(Elem e) { return bit_width(e) == 64 ? std::numeric_limits<std::int64_t>::min() : -(std::int64_t{1} << (bit_width(e) - 1)); }
std::int64_t int_max_of(Elem e) { return bit_width(e) == 64 ? std::numeric_limits<std::int64_t>::max() : (std::int64_t{1} << (bit_width(e) - 1)) - 1; }

// Element accesses and shared buffers in memory order through tokens (a
// store then a load of the same element), as does a global buffer that a
// tile store writes and something else reads or writes too, or that is
// written in a loop. The global-tile GEMMs, which store once at the end (and
// whose shared buffers, if any, are staged), need none: tokens on their
// loads would only constrain how tileiras schedules them.
bool needs_tokens(const ir::Block& body, const std::set<const ir::Value*>& staged) {
  if (uses_op(body, "tile.load_elem") || uses_op(body, "tile.store_elem")) return true;
  std::map<const ir::Value*, int> writes, accesses;
  bool loop_store = false;
  const bool shared = any_op(body, [&](const ir::Operation& op) {
    const std::string_view n = op.name();
    if (n == "tile.smem_alloc") return staged.count(op.result()) == 0;
    if (n == "tile.tile_store" && op.operand(0)->type().is_gmem()) {
      ++writes[op.operand(0)];
      ++accesses[op.operand(0)];
      const ir::Region* r = op.parent_block()->parent_region();
      loop_store = loop_store || (r != nullptr && r->parent_op() != nullptr && r->parent_op()->name() != "func");
    } else if (n == "tile.tile_load" || n == "tile.cp_async" || n == "tile.reduce_sum") {
      for (const ir::Value* v : op.operands()) {
        if (v->type().is_gmem()) ++accesses[v];
      }
    }
    return false;
  });
  if (shared || loop_store) return true;
  for (const auto& [buffer, n] : writes) {
    if (n > 1 || accesses[buffer] > n) return true;
  }
  return false;
}

}  // namespace

bool uses_op(const ir::Block& block, std::string_view name) {
  return any_op(block, [&](const ir::Operation& op) { return op.name() == name; });
}

bool Lowering::touches_memory(const ir::Block& block) const {
  // Loads of read-only buffers (and staged copies from them) are unordered:
  // they need no tokens carried.
  return any_op(block, [&](const ir::Operation& op) {
    const std::string_view n = op.name();
    if ((n == "tile.tile_load" || n == "tile.tile_store") && staged_.count(op.operand(0))) return false;  // a value
    if (n == "tile.load_elem" || n == "tile.tile_load") return !read_only(op.operand(0));
    if (n == "tile.cp_async") return !(staged_.count(op.operand(0)) && read_only(op.operand(1)));
    return n == "tile.store_elem" || n == "tile.tile_store" || n == "tile.reduce_sum";
  });
}

void Lowering::begin_lanes(const ir::Block& body) {
  uniformity_.emplace(func_);
  begin_lane_ids(body);
  if (needs_tokens(body, staged_)) tokens_ = Tokens{b_->make_token(), {}};
}

// The lane count, the lanes' indices and the mask of the lanes that exist.
void Lowering::begin_lane_ids(const ir::Block& body) {
  if (flat_) {
    // tile = block * P + lane: group_id and linear_id are that index.
    group_lanes_ = lanes_ = kFlatLanes;
    const TypeRef vec = m_.tile(Elem::i64, {lanes_});
    const Value block = b_->convert(scalar(Elem::i64), b_->tile_block_id()[0]);
    const Value first = b_->binary("muli", block, i64(lanes_));
    lane_ids_ = b_->binary("addi", widen(first), b_->convert(vec, b_->iota(m_.tile(Elem::i32, {lanes_}))));
    mask_ = b_->cmp(*lane_ids_, widen(*flat_tiles_), Cmp::lt);
    return;
  }
  group_lanes_ = tile::group_tile_count(func_);
  lanes_ = 1;
  while (lanes_ < group_lanes_) lanes_ *= 2;
  // Without tile.linear_id every lane computes the same values: one rank-0
  // evaluation stands for all of them.
  if (group_lanes_ == 1 || !uses_op(body, "tile.linear_id")) return;
  if (lanes_ > (1 << 16)) {
    raise(ErrorCode::Compile, "cuda_tile target: a group of " + std::to_string(group_lanes_) +
                                  " lanes is more than this target's 65536", func_.location());
  }
  lane_ids_ = b_->convert(m_.tile(Elem::i64, {lanes_}), b_->iota(m_.tile(Elem::i32, {lanes_})));
  if (lanes_ != group_lanes_) {
    mask_ = b_->cmp(*lane_ids_, b_->constant_int(m_.tile(Elem::i64, {lanes_}), group_lanes_), Cmp::lt);
  }
}

// ---- shapes ----

Value Lowering::splat(Value scalar_tile, const std::vector<std::int64_t>& shape) {
  const std::vector<std::int64_t> ones(shape.size(), 1);
  return b_->broadcast(m_.reshaped(scalar_tile.type, shape), b_->reshape(m_.reshaped(scalar_tile.type, ones), scalar_tile));
}

Value Lowering::widen(Value v) { return varying(v) ? v : splat(v, {lanes_}); }

void Lowering::match(Value& a, Value& b) {
  if (varying(a) || varying(b)) {
    a = widen(a);
    b = widen(b);
  }
}

Value Lowering::constant_like(Value like, double v) { return b_->constant_float(like.type, v); }
Value Lowering::int_like(Value like, std::int64_t v) { return b_->constant_int(like.type, v); }

Value Lowering::all_of(std::optional<Value> a, std::optional<Value> b) {
  if (!a) return *b;
  if (!b) return *a;
  Value x = *a, y = *b;
  match(x, y);
  return b_->binary("andi", x, y);
}

Value Lowering::logical_not(Value x) { return b_->binary("xori", x, int_like(x, 1)); }

TypeRef Lowering::merged_type(const ir::Value* v, const ir::Operation& op) {
  const ir::Type& t = v->type();
  const Elem e = elem(t.dtype(), op);
  if (t.is_tile()) return m_.tile(e, fixed_shape(op, t.shape));
  // Flat kernels: the analysis takes group_id as uniform, which here it is not.
  return lane_type(e, lane_ids_.has_value() && (flat_ || !uniformity_->is_uniform(v)));
}

Value Lowering::to_type(Value v, TypeRef t, const ir::Operation& op) {
  if (v.type == t) return v;
  if (!varying(v) && m_.shape_of(t).size() == 1 && m_.elem_of(v.type) == m_.elem_of(t)) return widen(v);
  raise(ErrorCode::Internal, "cuda_tile lowering: a value of " + m_.type_text(v.type) + " where " + m_.type_text(t) +
                                 " was planned, in " + std::string(op.name()) + where(op));
}

std::string Lowering::where(const ir::Operation& op) const {
  return op.location().valid() ? " at " + op.location().prefix() : std::string();
}

// ---- tokens ----

std::vector<Value> Lowering::token_values() {
  Tokens& t = *tokens_;
  Value loaded = t.loaded.empty() ? b_->make_token() : t.loaded.size() == 1 ? t.loaded[0] : b_->join_tokens(t.loaded);
  t.loaded = {loaded};
  return {t.stored, loaded};
}
void Lowering::set_tokens(Value stored, Value loaded) { tokens_ = Tokens{stored, {loaded}}; }
bool Lowering::read_only(const ir::Value* buffer) const {
  return buffer->type().is_gmem() && !buffer->type().mut && buffer->owner_block() == &ir::function_body(func_);
}

Value Lowering::load_token() { return tokens_->stored; }
Value Lowering::store_token() {
  if (tokens_->loaded.empty()) return tokens_->stored;
  std::vector<Value> all{tokens_->stored};
  all.insert(all.end(), tokens_->loaded.begin(), tokens_->loaded.end());
  return b_->join_tokens(all);
}
void Lowering::after_load(Value token) { tokens_->loaded.push_back(token); }
void Lowering::after_store(Value token) { tokens_ = Tokens{token, {}}; }

// ---- faults ----

void Lowering::fault_if(Value condition, const std::string& message, ErrorCode code_of_error) {
  if (!fault_ptr_) raise(ErrorCode::Internal, "cuda_tile lowering: a fault check in a kernel without a fault word");
  const Value c = all_of(mask_, condition);
  faults_.push_back({code_of_error, "kernel '" + ir::function_name(func_) + "': " + message});
  const Value code = b_->constant_int(m_.tile(Elem::i32, m_.shape_of(c.type)), static_cast<std::int64_t>(faults_.size()));
  // Unordered with the other stores: any faulting lane's number will do.
  b_->store_ptr(varying(c) ? widen(*fault_ptr_) : *fault_ptr_, code, c);
}

// ---- element loads and stores ----

const Lowering::Buffer& Lowering::element_buffer(const ir::Operation& op, const ir::Value* v) {
  auto it = buffers_.find(v);
  if (it == buffers_.end()) cannot(op, "the buffer is not a kernel parameter or a shared allocation of this kernel");
  return it->second;
}

// tshared.alloc: this tile block's copy of the buffer (lowering.h).
void Lowering::lower_smem_alloc(const ir::Operation& op) {
  const ir::Type& t = op.result()->type();
  const SharedBuffer& shared = shared_.at(&op);
  Buffer buf;
  for (std::int64_t d : fixed_shape(op, t.shape)) buf.dims.push_back(i64(d));
  const Value group = b_->convert(scalar(Elem::i64), b_->tile_block_id()[0]);
  const std::int64_t copy_elements = shared.bytes / (bit_width(elem(t.dtype(), op)) / 8);
  buf.ptr = b_->offset(shared.base, b_->binary("muli", group, i64(copy_elements)));
  buffers_[op.result()] = buf;
}

std::pair<Value, std::optional<Value>> Lowering::element_address(const ir::Operation& op, std::size_t first,
                                                                 std::size_t count) {
  const Buffer& buf = element_buffer(op, op.operand(0));
  if (count != buf.dims.size()) cannot(op, "the indices do not match the buffer's rank");
  std::optional<Value> in_range;
  Value linear = i64(0), stride = i64(1);
  for (std::size_t d = count; d-- > 0;) {
    Value idx = get(op.operand(first + d), op);
    if (m_.elem_of(idx.type) != Elem::i64) idx = b_->convert(lane_type(Elem::i64, varying(idx)), idx);
    Value zero = int_like(idx, 0), dim = buf.dims[d];
    match(idx, dim);
    const Value ok = b_->binary("andi", b_->cmp(idx, zero, Cmp::ge), b_->cmp(idx, dim, Cmp::lt));
    in_range = all_of(in_range, ok);
    Value term = idx, s = stride;
    match(term, s);
    term = b_->binary("muli", term, s);
    match(linear, term);
    linear = b_->binary("addi", linear, term);
    if (d > 0) stride = b_->binary("muli", stride, buf.dims[d]);
  }
  fault_if(logical_not(*in_range),
           "element index out of range of '" +
               (op.operand(0)->name().empty() ? std::string("buffer") : op.operand(0)->name()) + "' in " +
               std::string(op.name()) + where(op),
           ErrorCode::IndexOutOfRange);
  const std::optional<Value> active = all_of(mask_, in_range);
  Value ptr = buf.ptr;
  const bool vec = varying(linear) || (active && varying(*active));
  if (vec) {
    ptr = widen(ptr);
    linear = widen(linear);
  }
  return {b_->offset(ptr, linear), active};
}

void Lowering::lower_load_elem(const ir::Operation& op) {
  const ir::Type& t = op.result()->type();
  if (t.dtype() != op.operand(0)->type().dtype()) cannot(op, "a load whose value type differs from its buffer's");
  auto [ptr, active] = element_address(op, 1, op.num_operands() - 1);
  const Elem e = elem(t.dtype(), op);
  const TypeRef tt = m_.tile(e, m_.shape_of(ptr.type));
  Value mask = *active;
  if (varying(ptr)) mask = widen(mask);
  const Value padding = is_float(e) ? b_->constant_float(tt, 0.0) : b_->constant_int(tt, 0);
  if (read_only(op.operand(0))) {
    values_[op.result()] = b_->load_ptr(tt, ptr, mask, padding);
    return;
  }
  Value token;
  values_[op.result()] = b_->load_ptr(tt, ptr, mask, padding, load_token(), &token);
  after_load(token);
}

void Lowering::lower_store_elem(const ir::Operation& op) {
  const ir::Value* v = op.operand(op.num_operands() - 1);
  if (v->type().dtype() != op.operand(0)->type().dtype()) {
    cannot(op, "a store whose value type differs from its buffer's");
  }
  auto [ptr, active] = element_address(op, 1, op.num_operands() - 2);
  Value value = get(v, op);
  if (varying(value)) ptr = widen(ptr);
  if (varying(ptr)) value = widen(value);
  Value mask = *active;
  if (varying(ptr)) mask = widen(mask);
  after_store(b_->store_ptr(ptr, value, mask, store_token()));
}

// The pointers of the box of `shape` at element offsets `offs` of buffer
// `buf` (row-major, its dims as given), and which of them are inside it.
std::pair<Value, Value> Lowering::box_pointers(const ir::Operation& op, const Buffer& buf,
                                               const std::vector<Value>& offs, const std::vector<std::int64_t>& shape) {
  const std::size_t rank = shape.size();
  if (rank != buf.dims.size() || offs.size() != rank) cannot(op, "offsets and shape must match the buffer's rank");
  const TypeRef it = m_.tile(Elem::i64, shape);
  Value linear = b_->constant_int(it, 0), inside = b_->constant_int(m_.tile(Elem::i1, shape), 1);
  Value stride = i64(1);
  for (std::size_t d = rank; d-- > 0;) {
    if ((shape[d] & (shape[d] - 1)) != 0) cannot(op, "tile extents must be powers of two on this target");
    // Index along dim d, broadcast over the others.
    std::vector<std::int64_t> along(rank, 1);
    along[d] = shape[d];
    Value idx = b_->convert(m_.tile(Elem::i64, {shape[d]}), b_->iota(m_.tile(Elem::i32, {shape[d]})));
    idx = b_->broadcast(it, b_->reshape(m_.tile(Elem::i64, along), idx));
    Value off = offs[d];
    if (m_.elem_of(off.type) != Elem::i64) off = b_->convert(scalar(Elem::i64), off);
    const Value at = b_->binary("addi", idx, splat(off, shape));
    const Value dim = splat(buf.dims[d], shape);
    const Value ok = b_->binary("andi", b_->cmp(at, b_->constant_int(it, 0), Cmp::ge), b_->cmp(at, dim, Cmp::lt));
    inside = b_->binary("andi", inside, ok);
    linear = b_->binary("addi", linear, b_->binary("muli", at, splat(stride, shape)));
    if (d > 0) stride = b_->binary("muli", stride, buf.dims[d]);
  }
  return {b_->offset(splat(buf.ptr, shape), linear), inside};
}

// Group-level tile loads and stores of shared buffers (this tile thread's
// memory): pointer tiles over the box, zeros read and writes skipped past
// its bounds, as for global buffers.
void Lowering::lower_smem_tile_access(const ir::Operation& op) {
  const bool load = op.name() == "tile.tile_load";
  const Buffer& buf = element_buffer(op, op.operand(0));
  const std::size_t last = load ? op.num_operands() : op.num_operands() - 1;
  std::vector<Value> offs;
  for (std::size_t i = 1; i < last; ++i) offs.push_back(get(op.operand(i), op));
  if (load) {
    const ir::Type& t = op.result()->type();
    const Elem e = elem(t.dtype(), op);
    const std::vector<std::int64_t> shape = fixed_shape(op, t.shape);
    const auto [ptrs, inside] = box_pointers(op, buf, offs, shape);
    const TypeRef tt = m_.tile(e, shape);
    Value token;
    values_[op.result()] = b_->load_ptr(tt, ptrs, inside, is_float(e) ? b_->constant_float(tt, 0.0) : b_->constant_int(tt, 0),
                                        load_token(), &token);
    after_load(token);
  } else {
    const Value tile = get(op.operand(op.num_operands() - 1), op);
    const auto [ptrs, inside] = box_pointers(op, buf, offs, m_.shape_of(tile.type));
    after_store(b_->store_ptr(ptrs, tile, inside, store_token()));
  }
}

// cp_async copies the box of a global buffer into a shared one; here the
// copy is done when the op runs (a load of the box, zeros past the source's
// bounds, and a store), so cp_async_wait has nothing to wait for.
void Lowering::lower_cp_async(const ir::Operation& op) {
  const Buffer& dst = element_buffer(op, op.operand(0));
  const Buffer& src = gmem(op, op.operand(1));
  const ir::Type& dt = op.operand(0)->type();
  const Elem e = elem(dt.dtype(), op);
  const std::vector<std::int64_t> shape = fixed_shape(op, dt.shape);
  std::vector<Value> offs;
  for (std::size_t i = 2; i < op.num_operands(); ++i) offs.push_back(get(op.operand(i), op));
  const Value view = tile_view(op, src, offs, shape, e);
  Value tile;
  if (read_only(op.operand(1))) {
    tile = b_->load_view(m_.tile(e, shape), view, index_zeros(shape.size()));
  } else {
    Value token;
    tile = b_->load_view(m_.tile(e, shape), view, index_zeros(shape.size()), load_token(), &token);
    after_load(token);
  }
  const auto [ptrs, inside] = box_pointers(op, dst, index_i64_zeros(shape.size()), shape);
  after_store(b_->store_ptr(ptrs, tile, inside, store_token()));
}

std::vector<Value> Lowering::index_i64_zeros(std::size_t rank) {
  std::vector<Value> out;
  for (std::size_t i = 0; i < rank; ++i) out.push_back(i64(0));
  return out;
}

// reduce_sum of a shared buffer: the CPU runtime's pairwise tree (element i
// plus element i + s for s = 1, 2, 4, ...), which for a power-of-two count
// is adjacent pairs summed level by level: [m] -> [m/2, 2] -> sum of each
// row. The rows are reduced from -0.0, which leaves every sum exact.
void Lowering::lower_reduce_sum(const ir::Operation& op) {
  const ir::Value* src = op.operand(0);
  if (!src->type().is_smem()) cannot(op, "reduce_sum of a global buffer is not ported to this target yet");
  const Buffer& buf = element_buffer(op, src);
  const Elem e = elem(src->type().dtype(), op);
  const Elem acc = elem(op.result()->type().dtype(), op);
  if (!is_float(acc)) cannot(op, "integer reduce_sum is not ported to this target yet");
  std::int64_t n = 1;
  for (std::int64_t d : fixed_shape(op, src->type().shape)) n *= d;
  if ((n & (n - 1)) != 0) cannot(op, "reduce_sum of " + std::to_string(n) + " elements (a power of two is expressible)");
  Buffer flat = buf;
  flat.dims = {i64(n)};
  const auto [ptrs, inside] = box_pointers(op, flat, {i64(0)}, {n});
  Value token;
  Value x = b_->load_ptr(m_.tile(e, {n}), ptrs, inside, b_->constant_float(m_.tile(e, {n}), 0.0), load_token(), &token);
  after_load(token);
  if (e != acc) x = b_->convert(m_.tile(acc, {n}), x);
  for (std::int64_t m = n; m > 1; m /= 2) {
    x = b_->reshape(m_.tile(acc, {m / 2, 2}), x);
    const auto ab = b_->begin_reduce(x, 1, -0.0, m_.tile(acc, {m / 2}));
    x = b_->end_reduce(b_->binary("addf", ab[0], ab[1]));
  }
  values_[op.result()] = b_->reshape(scalar(acc), x);
}

// ---- arithmetic ----

Value Lowering::float_binary(const ir::Operation& op, std::string_view kind, Value a, Value b) {
  const NumericsPolicy& p = op.result()->type().policy;
  require_nearest(op, p);
  if (p.overflow != Overflow::inf_nan) cannot(op, "saturating float arithmetic is not expressible yet");
  const Elem e = m_.elem_of(a.type);
  if (kind == "min" || kind == "max") {
    // NaN-propagating, and picking an operand as `a > b ? a : b` does (so
    // max(+0, -0) is -0, as on the CPU): exact in every format.
    const Value nan = b_->binary("ori", b_->cmp(a, a, Cmp::ne, true), b_->cmp(b, b, Cmp::ne, true));
    const Value pick = b_->select(b_->cmp(a, b, kind == "max" ? Cmp::gt : Cmp::lt), a, b);
    return b_->select(nan, constant_like(a, std::numeric_limits<double>::quiet_NaN()), pick);
  }
  static const std::map<std::string_view, const char*> kOps = {
      {"add", "addf"}, {"sub", "subf"}, {"mul", "mulf"}, {"div", "divf"}};
  auto it = kOps.find(kind);
  if (it == kOps.end()) cannot(op, "floating-point '" + std::string(kind) + "' is not ported to this target yet");
  if (e == Elem::f32 || e == Elem::f64) return b_->binary(it->second, a, b);
  // Narrow formats: the operation in double, then one rounding (the CPU
  // backend's rounded(p, double expression)).
  const TypeRef d = m_.tile(Elem::f64, m_.shape_of(a.type));
  return b_->convert(a.type, b_->binary(it->second, b_->convert(d, a), b_->convert(d, b)));
}

Value Lowering::int_division(const ir::Operation& op, std::string_view kind, Value a, Value b) {
  // The CPU backend's idiv / irem / ifloordiv: a zero divisor faults (the
  // result is then 0), b == -1 is negation (saturating) or a zero remainder.
  const Value zero = b_->cmp(b, int_like(b, 0), Cmp::eq);
  const Value minus_one = b_->cmp(b, int_like(b, -1), Cmp::eq);
  const ir::Operation* d = op.operand(1)->defining_op();
  if (!(d && d->name() == "tile.const" && d->attrs().get_int("value") != 0)) {
    fault_if(zero, "integer division by zero in " + std::string(op.name()) + where(op));
  }
  const Value safe = b_->select(b_->binary("ori", zero, minus_one), int_like(b, 1), b);
  Value r;
  if (kind == "rem") {
    r = b_->select(minus_one, int_like(a, 0), b_->binary("remi", a, safe));
  } else {
    const Value q = kind == "div" ? b_->binary("divi", a, safe) : floordiv(a, safe);
    r = b_->select(minus_one, saturating("sub", int_like(a, 0), a), q);
  }
  return b_->select(zero, int_like(a, 0), r);
}

void Lowering::lower_lane_binary(const ir::Operation& op, std::string_view kind) {
  Value a = get(op.operand(0), op), b = get(op.operand(1), op);
  match(a, b);
  if (is_float(m_.elem_of(a.type))) {
    values_[op.result()] = float_binary(op, kind, a, b);
    return;
  }
  const bool nowrap = op.attrs().has("nowrap") && op.attrs().get_bool("nowrap");
  Value r;
  if (kind == "add" || kind == "sub" || kind == "mul") {
    // Tessera's integer add/sub/mul saturate; the target's wrap.
    r = nowrap ? b_->binary(std::string(kind) + "i", a, b) : saturating(kind, a, b);
  } else if (kind == "div" || kind == "rem" || kind == "floordiv") {
    r = int_division(op, kind, a, b);
  } else if (kind == "min" || kind == "max") {
    r = b_->binary(kind == "min" ? "mini" : "maxi", a, b);
  } else {
    cannot(op, "integer '" + std::string(kind) + "' is not ported to this target yet");
  }
  values_[op.result()] = r;
}

Value Lowering::lane_unary(const ir::Operation& op, std::string_view kind, Value x) {
  const NumericsPolicy& p = op.result()->type().policy;
  const Elem e = m_.elem_of(x.type);
  if (!is_float(e)) {
    const Value neg = saturating("sub", int_like(x, 0), x);
    if (kind == "neg") return neg;
    if (kind == "abs") return b_->select(b_->cmp(x, int_like(x, 0), Cmp::lt), neg, x);
    cannot(op, "'" + std::string(kind) + "' needs a floating-point operand");
  }
  require_nearest(op, p);
  if (p.overflow != Overflow::inf_nan) cannot(op, "saturating float arithmetic is not expressible yet");
  // Negation and the absolute value are exact in every format.
  if (kind == "neg") return b_->unary("negf", x);
  if (kind == "abs") return b_->unary("absf", x);
  const TypeRef d = m_.tile(Elem::f64, m_.shape_of(x.type));
  if (kind == "sqrt") {
    // Correctly rounded in the target (sqrt at nearest even), as the CPU's
    // std::sqrt in double rounded once to the format is.
    if (e == Elem::f32 || e == Elem::f64) return b_->unary("sqrt", x);
    return b_->convert(x.type, b_->unary("sqrt", b_->convert(d, x)));
  }
  if (kind == "exp" || kind == "log" || kind == "tanh") {
    // In double, rounded once to the format, as the CPU backend's.
    const Value xd = e == Elem::f64 ? x : b_->convert(d, x);
    const Value y = kind == "exp" ? exp_f64(xd) : kind == "log" ? log_f64(xd) : tanh_f64(xd);
    return e == Elem::f64 ? y : b_->convert(x.type, y);
  }
  if (kind == "exp_or_nan") {
    if (e != Elem::f32) cannot(op, "exp_or_nan takes fp32");
    return exp_f32_or_nan(x);
  }
  cannot(op, "Tessera's '" + std::string(kind) + "' is not ported to this target yet (exp, log, tanh, sqrt, neg and abs are)");
}

Value Lowering::float_to_int(const ir::Operation& op, Value x, Elem to, Rounding r) {
  // The encoder's rule: round (nearest even, or toward zero), saturate to
  // the type's range, NaN -> 0. The target's ftoi truncates and leaves
  // NaN and out-of-range inputs undefined, so those are selected around it.
  const TypeRef d = m_.tile(Elem::f64, m_.shape_of(x.type));
  const TypeRef i = m_.tile(Elem::i64, m_.shape_of(x.type));
  const Value xd = m_.elem_of(x.type) == Elem::f64 ? x : b_->convert(d, x);
  const Value nan = b_->cmp(xd, xd, Cmp::ne, true);
  const Value high = b_->cmp(xd, constant_like(xd, 0x1p63), Cmp::ge);
  const Value low = b_->cmp(xd, constant_like(xd, -0x1p63), Cmp::lt);
  const Value out = b_->binary("ori", nan, b_->binary("ori", high, low));
  const Value safe = b_->select(out, constant_like(xd, 0.0), xd);
  Value v = b_->convert(i, safe);  // truncation
  if (r == Rounding::nearest_even) {
    // Below 2^52 a double may have a fraction: step the truncation by the
    // remainder's rounding, ties to the even neighbour.
    const Value t = b_->convert(d, v);
    const Value rem = b_->binary("subf", safe, t);
    const Value odd = b_->cmp(b_->binary("andi", v, int_like(v, 1)), int_like(v, 0), Cmp::ne);
    const Value half = constant_like(rem, 0.5), minus_half = constant_like(rem, -0.5);
    const Value up = b_->binary("ori", b_->cmp(rem, half, Cmp::gt),
                                b_->binary("andi", b_->cmp(rem, half, Cmp::eq), odd));
    const Value down = b_->binary("ori", b_->cmp(rem, minus_half, Cmp::lt),
                                  b_->binary("andi", b_->cmp(rem, minus_half, Cmp::eq), odd));
    v = b_->binary("subi", b_->binary("addi", v, b_->convert(i, up)), b_->convert(i, down));
  } else if (r != Rounding::toward_zero) {
    cannot(op, "a float-to-integer cast rounds to nearest even or toward zero here");
  }
  v = b_->select(nan, int_like(v, 0), b_->select(high, int_like(v, int_max_of(Elem::i64)),
                                                  b_->select(low, int_like(v, int_min_of(Elem::i64)), v)));
  if (to == Elem::i64) return v;
  v = b_->binary("maxi", b_->binary("mini", v, int_like(v, int_max_of(to))), int_like(v, int_min_of(to)));
  return b_->convert(m_.tile(to, m_.shape_of(x.type)), v);
}

Value Lowering::lane_cast(const ir::Operation& op, Value x, const NumericsPolicy& from, const NumericsPolicy& to) {
  const Elem fe = elem(from.storage, op), te = elem(to.storage, op);
  if (fe == te) return x;
  const std::vector<std::int64_t> shape = m_.shape_of(x.type);
  const TypeRef tt = m_.tile(te, shape);
  if (te == Elem::i1) {
    // x != 0 (NaN is true, as in C).
    return b_->cmp(x, is_float(fe) ? constant_like(x, 0.0) : int_like(x, 0), Cmp::ne, is_float(fe));
  }
  if (is_float(fe) && !is_float(te)) return float_to_int(op, x, te, to.rounding);
  if (is_float(te)) {
    if (te == Elem::f8e4m3fn || te == Elem::f8e5m2) cannot(op, "casts to fp8 lanes are not ported to this target yet");
    const bool narrowing = is_float(fe) ? bit_width(te) < bit_width(fe) || te == Elem::bf16 || fe == Elem::bf16
                                        : true;
    if (narrowing && to.rounding != Rounding::nearest_even) cannot(op, "only round-to-nearest-even casts are expressible");
    if (narrowing && to.overflow != Overflow::inf_nan) cannot(op, "saturating casts are not expressible yet");
    if (is_float(fe)) return b_->convert(tt, x);
    // Integers go through double first, as the CPU backend's (double)v.
    const TypeRef d = m_.tile(Elem::f64, shape);
    const Value xd = b_->convert(d, x, /*is_unsigned=*/fe == Elem::i1);
    return te == Elem::f64 ? xd : b_->convert(tt, xd);
  }
  // Integer to integer: widen (bools as 0 / 1), or saturate then narrow.
  if (bit_width(te) > bit_width(fe)) return b_->convert(tt, x, /*is_unsigned=*/fe == Elem::i1);
  const Value clamped = b_->binary("maxi", b_->binary("mini", x, int_like(x, int_max_of(te))), int_like(x, int_min_of(te)));
  return b_->convert(tt, clamped);
}

// ---- control flow ----

// The largest of a per-lane count (i64 [P], nonnegative) as a scalar, through
// a float maximum: exact below 2^53.
Value Lowering::most_over_lanes(Value counts) {
  const Value as_float = b_->convert(m_.tile(Elem::f64, {lanes_}), counts);
  const auto ab = b_->begin_reduce(as_float, 0, 0.0, scalar(Elem::f64));
  return b_->convert(scalar(Elem::i64), b_->end_reduce(b_->binary("maxf", ab[0], ab[1])));
}

void Lowering::lower_if(const ir::Operation& op) {
  Value cond = get(op.operand(0), op);
  std::vector<Value> inits;
  for (std::size_t i = 1; i < op.num_operands(); ++i) inits.push_back(get(op.operand(i), op));
  auto lower_branch = [&](std::size_t region) {
    std::vector<Value> yields;
    if (region >= op.num_regions() || op.region(region).num_blocks() == 0) return inits;
    const ir::Block& block = op.region(region).block(0);
    for (std::size_t i = 0; i < block.num_arguments(); ++i) values_[block.argument(i)] = inits[i];
    const ir::Operation* yield = block.terminator();
    for (const auto& inner : block.ops()) {
      if (inner.get() != yield) lower_op(*inner);
    }
    for (std::size_t i = 0; i < yield->num_operands(); ++i) yields.push_back(get(yield->operand(i), *yield));
    return yields;
  };
  if (varying(cond)) {
    // Per-lane condition: both branches run, each under its lanes' mask.
    const std::optional<Value> outer = mask_;
    mask_ = all_of(outer, cond);
    std::vector<Value> then_values = lower_branch(0);
    mask_ = all_of(outer, logical_not(cond));
    std::vector<Value> else_values = lower_branch(1);
    mask_ = outer;
    for (std::size_t i = 0; i < op.num_results(); ++i) {
      Value a = widen(then_values[i]), b = widen(else_values[i]);
      values_[op.result(i)] = b_->select(cond, a, b);
    }
    return;
  }
  // A condition equal in every lane: the target's own if.
  std::vector<TypeRef> types;
  for (std::size_t i = 0; i < op.num_results(); ++i) types.push_back(merged_type(op.result(i), op));
  const std::size_t results = types.size();
  bool memory = false;
  for (std::size_t r = 0; r < op.num_regions(); ++r) {
    if (op.region(r).num_blocks() != 0) memory = memory || (tokens_ && touches_memory(op.region(r).block(0)));
  }
  std::vector<Value> entry;
  if (memory) {
    entry = token_values();
    types.push_back(entry[0].type);
    types.push_back(entry[1].type);
  }
  auto finish = [&](std::vector<Value> values, const ir::Operation& at) {
    for (std::size_t i = 0; i < results; ++i) values[i] = to_type(values[i], types[i], at);
    if (memory) {
      const std::vector<Value> t = token_values();
      values.push_back(t[0]);
      values.push_back(t[1]);
    }
    return values;
  };
  b_->begin_if(cond, types);
  if (memory) set_tokens(entry[0], entry[1]);
  std::vector<Value> then_values = finish(lower_branch(0), op);
  b_->begin_else(then_values);
  if (memory) set_tokens(entry[0], entry[1]);
  std::vector<Value> else_values = finish(lower_branch(1), op);
  const std::vector<Value> out = b_->end_if(else_values);
  for (std::size_t i = 0; i < results; ++i) values_[op.result(i)] = out[i];
  if (memory) set_tokens(out[results], out[results + 1]);
}

// tile.strands: index i of [lo, hi) updates strand (i - lo) mod S, each
// strand in increasing i. Lowered as a loop over whole rounds of S indices
// (the body S times, one copy per strand), then the last partial round
// with each strand's step under an if: the same order per strand.
void Lowering::lower_strands(const ir::Operation& op) {
  Value lo = get(op.operand(0), op), hi = get(op.operand(1), op);
  const bool masked = varying(lo) || varying(hi);
  const std::int64_t strands = op.attrs().get_int("count");
  const ir::Block& body = op.region(0).block(0);
  const std::size_t n = op.num_operands() - 2;
  std::vector<std::vector<Value>> acc(static_cast<std::size_t>(strands));
  std::vector<TypeRef> types;
  for (std::size_t j = 0; j < n; ++j) {
    types.push_back(masked ? lane_type(elem(body.argument(1 + j)->type().dtype(), op), true)
                           : merged_type(body.argument(1 + j), op));
  }
  for (auto& a : acc) {
    for (std::size_t j = 0; j < n; ++j) a.push_back(to_type(get(op.operand(2 + j), op), types[j], op));
  }
  const ir::Operation* yield = body.terminator();
  auto step = [&](Value i, std::vector<Value>& a) {
    values_[body.argument(0)] = i;
    for (std::size_t j = 0; j < n; ++j) values_[body.argument(1 + j)] = a[j];
    for (const auto& inner : body.ops()) {
      if (inner.get() != yield) lower_op(*inner);
    }
    for (std::size_t j = 0; j < n; ++j) a[j] = to_type(get(yield->operand(j), *yield), types[j], *yield);
  };
  const bool memory = tokens_ && touches_memory(body);
  // Whole rounds of S indices. Bounds equal in every lane: floor(count / S)
  // rounds, then the partial round below. Bounds that differ between lanes:
  // as many rounds as the lane with the most (partial included), each
  // strand's step under the mask of the lanes whose index is still below
  // their bound.
  if (masked) match(lo, hi);
  const Value count = b_->binary("maxi", b_->binary("subi", hi, lo), int_like(lo, 0));
  Value rounds = masked ? b_->binary("divi", b_->binary("addi", count, int_like(count, strands - 1)),
                                     int_like(count, strands))
                        : b_->binary("divi", count, int_like(count, strands));
  if (masked && mask_) rounds = b_->select(*mask_, rounds, int_like(rounds, 0));
  std::vector<Value> inits;
  for (auto& a : acc) inits.insert(inits.end(), a.begin(), a.end());
  if (memory) {
    for (Value t : token_values()) inits.push_back(t);
  }
  const auto args = b_->begin_for(i64(0), masked ? most_over_lanes(rounds) : rounds, i64(1), inits);
  for (std::size_t s = 0; s < acc.size(); ++s) {
    for (std::size_t j = 0; j < n; ++j) acc[s][j] = args[1 + s * n + j];
  }
  if (memory) set_tokens(args[1 + acc.size() * n], args[2 + acc.size() * n]);
  const Value base = b_->binary("addi", lo, b_->binary("muli", masked ? widen(args[0]) : args[0], int_like(lo, strands)));
  const std::optional<Value> outer = mask_;
  for (std::int64_t s = 0; s < strands; ++s) {
    auto& a = acc[static_cast<std::size_t>(s)];
    const Value i = b_->binary("addi", base, int_like(base, s));
    if (!masked) {
      step(i, a);
      continue;
    }
    const Value active = b_->cmp(i, hi, Cmp::lt);
    mask_ = all_of(outer, active);
    std::vector<Value> stepped = a;
    step(i, stepped);
    for (std::size_t j = 0; j < n; ++j) a[j] = b_->select(active, stepped[j], a[j]);
  }
  mask_ = outer;
  std::vector<Value> next;
  for (auto& a : acc) next.insert(next.end(), a.begin(), a.end());
  if (memory) {
    for (Value t : token_values()) next.push_back(t);
  }
  const auto looped = b_->end_for(next);
  for (std::size_t s = 0; s < acc.size(); ++s) {
    for (std::size_t j = 0; j < n; ++j) acc[s][j] = looped[s * n + j];
  }
  if (memory) set_tokens(looped[acc.size() * n], looped[acc.size() * n + 1]);
  if (masked) {
    for (std::size_t s = 0; s < acc.size(); ++s) {
      for (std::size_t j = 0; j < n; ++j) values_[op.result(s * n + j)] = acc[s][j];
    }
    return;
  }
  // The partial round: strands 0 .. S-2 may each have one more index.
  const Value rest = b_->binary("addi", lo, b_->binary("muli", rounds, i64(strands)));
  for (std::int64_t s = 0; s + 1 < strands; ++s) {
    auto& a = acc[static_cast<std::size_t>(s)];
    const Value i = b_->binary("addi", rest, i64(s));
    std::vector<TypeRef> rtypes = types;
    std::vector<Value> entry;
    if (memory) {
      entry = token_values();
      rtypes.push_back(entry[0].type);
      rtypes.push_back(entry[1].type);
    }
    const std::vector<Value> before = a;
    b_->begin_if(b_->cmp(i, hi, Cmp::lt), rtypes);
    step(i, a);
    std::vector<Value> then_values = a;
    if (memory) {
      for (Value t : token_values()) then_values.push_back(t);
    }
    b_->begin_else(then_values);
    std::vector<Value> else_values = before;
    if (memory) else_values.insert(else_values.end(), entry.begin(), entry.end());
    const std::vector<Value> out = b_->end_if(else_values);
    for (std::size_t j = 0; j < n; ++j) a[j] = out[j];
    if (memory) set_tokens(out[n], out[n + 1]);
  }
  for (std::size_t s = 0; s < acc.size(); ++s) {
    for (std::size_t j = 0; j < n; ++j) values_[op.result(s * n + j)] = acc[s][j];
  }
}

// ---- dispatch ----

bool Lowering::lower_lane_op(const ir::Operation& op) {
  const std::string_view n = op.name();
  if (n == "tile.const") {
    const ir::Type& t = op.result()->type();
    const Elem e = elem(t.dtype(), op);
    if (e == Elem::i1) {
      values_[op.result()] = b_->constant_int(scalar(e), op.attrs().get_bool("value") ? 1 : 0);
    } else if (is_float(e)) {
      values_[op.result()] = b_->constant_float(scalar(e), op.attrs().get_real("value"));
    } else {
      values_[op.result()] = b_->constant_int(scalar(e), op.attrs().get_int("value"));
    }
  } else if (n == "tile.symbol") {
    auto it = symbols_.find(op.attrs().get_string("name"));
    if (it == symbols_.end()) {
      cannot(op, "shape symbol '" + op.attrs().get_string("name") +
                     "' is not a plain dim of a buffer parameter (specialize it with jit)");
    }
    values_[op.result()] = it->second;
  } else if (flat_ && (n == "tile.group_id" || n == "tile.linear_id")) {
    values_[op.result()] = *lane_ids_;
  } else if (flat_ && n == "tile.num_groups") {
    values_[op.result()] = *flat_tiles_;
  } else if (n == "tile.group_id" || n == "tile.num_groups") {
    const auto xyz = n == "tile.group_id" ? b_->tile_block_id() : b_->num_tile_blocks();
    values_[op.result()] = b_->convert(scalar(Elem::i64), xyz[0]);
  } else if (n == "tile.linear_id") {
    values_[op.result()] = lane_ids_ ? *lane_ids_ : i64(0);
  } else if (n == "tile.group_size") {
    values_[op.result()] = i64(flat_ ? 1 : group_lanes_);
  } else if (n == "tile.add" || n == "tile.sub" || n == "tile.mul" || n == "tile.div" || n == "tile.rem" ||
             n == "tile.min" || n == "tile.max" || n == "tile.floordiv") {
    lower_lane_binary(op, n.substr(5));
  } else if (n == "tile.neg" || n == "tile.abs" || n == "tile.exp" || n == "tile.log" || n == "tile.sqrt" ||
             n == "tile.tanh" || n == "tile.erf" || n == "tile.cos" || n == "tile.sin" || n == "tile.exp_or_nan") {
    values_[op.result()] = lane_unary(op, n.substr(5), get(op.operand(0), op));
  } else if (n == "tile.fma") {
    Value a = get(op.operand(0), op), b = get(op.operand(1), op), c = get(op.operand(2), op);
    if (varying(a) || varying(b) || varying(c)) a = widen(a), b = widen(b), c = widen(c);
    const Elem e = m_.elem_of(a.type);
    const NumericsPolicy& p = op.result()->type().policy;
    if ((e != Elem::f32 && e != Elem::f64) || p.overflow != Overflow::inf_nan) {
      cannot(op, "fma of " + std::string(tessera::name(p.storage)) + " lanes is not ported to this target yet");
    }
    require_nearest(op, p);
    values_[op.result()] = b_->fma(a, b, c);
  } else if (n == "tile.ldexp") {
    Value x = get(op.operand(0), op), e = get(op.operand(1), op);
    const Elem xe = m_.elem_of(x.type);
    const NumericsPolicy& p = op.result()->type().policy;
    require_nearest(op, p);
    if (p.overflow != Overflow::inf_nan) cannot(op, "saturating float arithmetic is not expressible yet");
    if (m_.elem_of(e.type) != Elem::i64) e = b_->convert(lane_type(Elem::i64, varying(e)), e);
    match(x, e);
    if (xe == Elem::f32 || xe == Elem::f64) {
      values_[op.result()] = ldexp(x, e);
    } else {
      const Value d = ldexp(b_->convert(m_.tile(Elem::f64, m_.shape_of(x.type)), x), e);
      values_[op.result()] = b_->convert(x.type, d);
    }
  } else if (n == "tile.frexp_exp") {
    values_[op.result()] = frexp_exponent(get(op.operand(0), op));
  } else if (n == "tile.cmp") {
    Value a = get(op.operand(0), op), b = get(op.operand(1), op);
    match(a, b);
    static const std::map<std::string, Cmp> kPreds = {{"lt", Cmp::lt}, {"le", Cmp::le}, {"gt", Cmp::gt},
                                                      {"ge", Cmp::ge}, {"eq", Cmp::eq}, {"ne", Cmp::ne}};
    const Cmp pred = kPreds.at(op.attrs().get_string("pred"));
    const Elem e = m_.elem_of(a.type);
    if (e == Elem::i1 && pred != Cmp::eq && pred != Cmp::ne) {
      // false < true: compare as 0 / 1, not as signed one-bit integers.
      const TypeRef w = m_.tile(Elem::i32, m_.shape_of(a.type));
      a = b_->convert(w, a), b = b_->convert(w, b);
    }
    // C's comparisons: != is true for NaN, the others false.
    values_[op.result()] = b_->cmp(a, b, pred, is_float(e) && pred == Cmp::ne);
  } else if (n == "tile.and" || n == "tile.or") {
    Value a = get(op.operand(0), op), b = get(op.operand(1), op);
    match(a, b);
    values_[op.result()] = b_->binary(n == "tile.and" ? "andi" : "ori", a, b);
  } else if (n == "tile.not") {
    values_[op.result()] = logical_not(get(op.operand(0), op));
  } else if (n == "tile.select") {
    Value c = get(op.operand(0), op), a = get(op.operand(1), op), b = get(op.operand(2), op);
    if (varying(c) || varying(a) || varying(b)) c = widen(c), a = widen(a), b = widen(b);
    values_[op.result()] = b_->select(c, a, b);
  } else if (n == "tile.cast") {
    values_[op.result()] = lane_cast(op, get(op.operand(0), op), op.operand(0)->type().policy,
                                     op.attrs().get_policy("to"));
  } else if (n == "tile.check_range") {
    const Value x = get(op.operand(0), op);
    const Value bad = b_->binary("ori", b_->cmp(x, int_like(x, op.attrs().get_int("lo")), Cmp::lt),
                                 b_->cmp(x, int_like(x, op.attrs().get_int("hi")), Cmp::gt));
    fault_if(bad, op.attrs().get_string("what") + where(op));
    values_[op.result()] = x;
  } else if (n == "tile.load_elem") {
    lower_load_elem(op);
  } else if (n == "tile.store_elem") {
    lower_store_elem(op);
  } else if (n == "tile.if") {
    lower_if(op);
  } else if (n == "tile.strands") {
    lower_strands(op);
  } else if (n == "tile.smem_alloc") {
    lower_smem_alloc(op);
  } else if (n == "tile.cp_async") {
    lower_cp_async(op);
  } else if (n == "tile.cp_async_wait" || n == "tile.mma_wait") {
    // Nothing is in flight: copies and mma complete when they run here.
  } else if (n == "tile.reduce_sum") {
    lower_reduce_sum(op);
  } else if (n == "tile.barrier") {
    // The group is one tile thread: its memory operations are already
    // ordered by the tokens (lower_smem_alloc).
  } else if (n == "tile.prefetch") {
    // A hint (bring a range toward the cache) with no effect on results;
    // the target schedules its own loads.
  } else {
    return false;
  }
  return true;
}

}  // namespace tessera::cuda_tile::detail
