// Tessera Tile IR -> CUDA Tile IR (see lower.h for the subset and the ABI).
#include "tessera/backends/cuda_tile/lower.h"

#include <limits>
#include <map>
#include <optional>

#include "tessera/backends/cuda_tile/bytecode.h"
#include "tessera/support/error.h"

namespace tessera::cuda_tile {

namespace {

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

class Lowering {
 public:
  Lowering(const ir::Operation& func, const LowerOptions& options) : func_(func), options_(options), m_("tessera") {}

  LoweredKernel run() {
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
    b_ = &m_.begin_entry(ir::function_name(func_), types, names);
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
          if (dim.is_symbolic() && !symbols_.count(dim.symbol)) symbols_[dim.symbol] = buf.dims.back();
        }
        buffers_[a] = buf;
      } else {
        values_[a] = buf.ptr;
      }
    }
    plan_aligned_views(body);
    lower_block(body);
    m_.end_entry();
    return LoweredKernel{ir::function_name(func_), m_.bytes(), m_.text()};
  }

 private:
  struct Buffer {
    Value ptr;
    std::vector<Value> dims;
    // Partition views of the whole buffer, by tile shape (plan_aligned_views).
    std::map<std::vector<std::int64_t>, Value> aligned;
  };

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
  bool multiple_of(const ir::Value* v, std::int64_t d, int depth = 0) const {
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
    if (n == "tile.add" || n == "tile.sub") {
      return multiple_of(op->operand(0), d, depth + 1) && multiple_of(op->operand(1), d, depth + 1);
    }
    if (n == "tile.cast") return multiple_of(op->operand(0), d, depth + 1);
    return false;
  }

  bool aligned_offsets(const ir::Operation& op, std::size_t first, std::size_t count,
                       const std::vector<std::int64_t>& shape) const {
    if (count != shape.size()) return false;
    for (std::size_t i = 0; i < count; ++i) {
      if (!multiple_of(op.operand(first + i), shape[i])) return false;
    }
    return true;
  }

  // Makes, at the entry, the partition views the aligned loads and stores of
  // `block` (nested regions included) will index.
  void plan_aligned_views(const ir::Block& block) {
    for (const auto& op : block.ops()) {
      for (std::size_t r = 0; r < op->num_regions(); ++r) {
        for (std::size_t b = 0; b < op->region(r).num_blocks(); ++b) plan_aligned_views(op->region(r).block(b));
      }
      const bool load = op->name() == "tile.tile_load", store = op->name() == "tile.tile_store";
      if (!load && !store) continue;
      auto it = buffers_.find(op->operand(0));
      if (it == buffers_.end()) continue;  // lower_op reports it
      const ir::Type& t = load ? op->result()->type() : op->operand(op->num_operands() - 1)->type();
      std::vector<std::int64_t> shape;
      for (const ir::Dim& d : t.shape) {
        if (d.is_symbolic()) break;
        shape.push_back(d.size);
      }
      const std::size_t count = load ? op->num_operands() - 1 : op->num_operands() - 2;
      if (shape.size() != t.shape.size() || !aligned_offsets(*op, 1, count, shape)) continue;
      Buffer& buf = it->second;
      if (buf.aligned.count(shape) || t.dtype() != op->operand(0)->type().dtype()) continue;
      const std::optional<Elem> e = elem_of(t.dtype());
      if (!e) continue;
      std::vector<Value> zeros(shape.size());
      for (Value& z : zeros) z = i64(0);
      buf.aligned[shape] = tile_view(*op, buf, zeros, shape, *e, /*at_origin=*/true);
    }
  }

  // The partition view and tile index of an aligned access, or nullopt.
  std::optional<std::pair<Value, std::vector<Value>>> aligned_access(const ir::Operation& op, const Buffer& buf,
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

  Elem elem(DType d, const ir::Operation& op) {
    if (auto e = elem_of(d)) return *e;
    cannot(op, "dtype " + std::string(tessera::name(d)) + " has no CUDA Tile IR element type");
  }

  Value get(const ir::Value* v, const ir::Operation& op) {
    auto it = values_.find(v);
    if (it == values_.end()) cannot(op, "an operand is a buffer or a value this target did not lower");
    return it->second;
  }

  TypeRef scalar(Elem e) { return m_.tile(e, {}); }

  Value i64(std::int64_t v) { return b_->constant_int(scalar(Elem::i64), v); }

  // A value of the element type: float ops round to nearest even here, as
  // the policy must say.
  void require_nearest(const ir::Operation& op, const NumericsPolicy& p) {
    if (p.rounding != Rounding::nearest_even) cannot(op, "only round-to-nearest-even arithmetic is expressible");
  }

  // floor division of int64 (Python //): truncate, then step down when the
  // remainder is nonzero and its sign differs from the divisor's.
  Value floordiv(Value a, Value b) {
    const Value q = b_->binary("divi", a, b);
    const Value r = b_->binary("remi", a, b);
    const Value zero = i64(0);
    const Value r_nonzero = b_->cmp(r, zero, Cmp::ne);
    const Value signs_differ = b_->binary("xori", b_->cmp(r, zero, Cmp::lt), b_->cmp(b, zero, Cmp::lt));
    const Value adjust = b_->binary("andi", r_nonzero, signs_differ);
    return b_->select(adjust, b_->binary("subi", q, i64(1)), q);
  }

  // Tessera's saturating integer add/sub/mul (the exact result clamped to the
  // dtype's range, as the CPU backend's iadd/isub/imul) from the target's
  // wrapping ops: the wrapped result, an overflow test, and a select of the
  // bound the exact result passed. Index arithmetic of group-level kernels
  // (offsets from group_id) comes through here; these are scalar ops.
  Value saturating(std::string_view kind, Value a, Value b) {
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

  void lower_lane_binary(const ir::Operation& op, std::string_view kind) {
    const Value a = get(op.operand(0), op), b = get(op.operand(1), op);
    const ir::Type& t = op.result()->type();
    const bool fl = is_float(m_.elem_of(a.type));
    if (fl) require_nearest(op, t.policy);
    if (!fl && (kind == "add" || kind == "sub" || kind == "mul") &&
        !(op.attrs().has("nowrap") && op.attrs().get_bool("nowrap"))) {
      // Tessera's integer add/sub/mul saturate; CUDA Tile IR's wrap.
      values_[op.result()] = saturating(kind, a, b);
      return;
    }
    if (!fl && kind == "floordiv") {
      values_[op.result()] = floordiv(a, b);
      return;
    }
    static const std::map<std::string_view, std::pair<const char*, const char*>> kOps = {
        {"add", {"addf", "addi"}}, {"sub", {"subf", "subi"}}, {"mul", {"mulf", "muli"}}, {"div", {"divf", "divi"}},
        {"rem", {nullptr, "remi"}}, {"min", {"minf", "mini"}}, {"max", {"maxf", "maxi"}}};
    auto it = kOps.find(kind);
    const char* name = it == kOps.end() ? nullptr : (fl ? it->second.first : it->second.second);
    if (name == nullptr) cannot(op, "no CUDA Tile IR op for this operand type");
    values_[op.result()] = b_->binary(name, a, b);
  }

  // The view of gmem buffer `buf` starting at element offsets `offs`: a
  // tensor view whose base is offset to the tile's corner and whose extents
  // are what remains of the buffer past it (at least 0), partitioned into
  // one tile of `shape` padded with zeros. Loads read zeros past the
  // buffer's bounds and stores skip those elements, as Tile IR requires, at
  // any offset (not only multiples of the tile shape).
  Value tile_view(const ir::Operation& op, const Buffer& buf, const std::vector<Value>& offs,
                  const std::vector<std::int64_t>& shape, Elem e, bool at_origin = false) {
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

  std::vector<std::int64_t> fixed_shape(const ir::Operation& op, const ir::Shape& s) {
    std::vector<std::int64_t> out;
    for (const ir::Dim& d : s) {
      if (d.is_symbolic()) cannot(op, "tile shape '" + d.str() + "' must be fixed (specialize it with jit)");
      out.push_back(d.size);
    }
    return out;
  }

  const Buffer& gmem(const ir::Operation& op, const ir::Value* v) {
    auto it = buffers_.find(v);
    if (it == buffers_.end() || !v->type().is_gmem()) {
      cannot(op, "only global buffers (kernel parameters) are expressible; shared buffers are not lowered yet");
    }
    return it->second;
  }

  std::vector<Value> index_zeros(std::size_t rank) {
    std::vector<Value> out;
    for (std::size_t i = 0; i < rank; ++i) out.push_back(b_->constant_int(scalar(Elem::i32), 0));
    return out;
  }

  void lower_op(const ir::Operation& op) {
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
    } else if (n == "tile.group_id" || n == "tile.num_groups") {
      const auto xyz = n == "tile.group_id" ? b_->tile_block_id() : b_->num_tile_blocks();
      values_[op.result()] = b_->convert(scalar(Elem::i64), xyz[0]);
    } else if (n == "tile.add" || n == "tile.sub" || n == "tile.mul" || n == "tile.div" || n == "tile.rem" ||
               n == "tile.min" || n == "tile.max" || n == "tile.floordiv") {
      lower_lane_binary(op, n.substr(5));
    } else if (n == "tile.zeros") {
      const ir::Type& t = op.result()->type();
      const Elem e = elem(t.dtype(), op);
      const TypeRef tt = m_.tile(e, fixed_shape(op, t.shape));
      values_[op.result()] = is_float(e) ? b_->constant_float(tt, 0.0) : b_->constant_int(tt, 0);
    } else if (n == "tile.tile_load") {
      const Buffer& buf = gmem(op, op.operand(0));
      const ir::Type& t = op.result()->type();
      const Elem e = elem(t.dtype(), op);
      std::vector<Value> offs;
      for (std::size_t i = 1; i < op.num_operands(); ++i) offs.push_back(get(op.operand(i), op));
      const std::vector<std::int64_t> shape = fixed_shape(op, t.shape);
      if (auto a = aligned_access(op, buf, 1, offs.size(), shape)) {
        values_[op.result()] = b_->load_view(m_.tile(e, shape), a->first, a->second);
        return;
      }
      const Value view = tile_view(op, buf, offs, shape, e);
      values_[op.result()] = b_->load_view(m_.tile(e, shape), view, index_zeros(shape.size()));
    } else if (n == "tile.tile_store") {
      const Buffer& buf = gmem(op, op.operand(0));
      const Value tile = get(op.operand(op.num_operands() - 1), op);
      std::vector<Value> offs;
      for (std::size_t i = 1; i + 1 < op.num_operands(); ++i) offs.push_back(get(op.operand(i), op));
      const std::vector<std::int64_t> shape = m_.shape_of(tile.type);
      if (auto a = aligned_access(op, buf, 1, offs.size(), shape)) {
        b_->store_view(tile, a->first, a->second);
        return;
      }
      const Value view = tile_view(op, buf, offs, shape, m_.elem_of(tile.type));
      b_->store_view(tile, view, index_zeros(shape.size()));
    } else if (n == "tile.mma") {
      if (op.attrs().has("async") && op.attrs().get_bool("async")) cannot(op, "async mma (made by tile-pipeline)");
      values_[op.result()] = b_->mma(get(op.operand(0), op), get(op.operand(1), op), get(op.operand(2), op));
    } else if (n == "tile.tile_cast") {
      const ir::Type& t = op.result()->type();
      require_nearest(op, t.policy);
      const Value x = get(op.operand(0), op);
      values_[op.result()] = b_->convert(m_.tile(elem(t.dtype(), op), m_.shape_of(x.type)), x);
    } else if (n == "tile.tile_add") {
      values_[op.result()] = b_->binary("addf", get(op.operand(0), op), get(op.operand(1), op));
    } else if (n == "tile.for") {
      std::vector<Value> inits;
      for (std::size_t i = 3; i < op.num_operands(); ++i) inits.push_back(get(op.operand(i), op));
      const auto args = b_->begin_for(get(op.operand(0), op), get(op.operand(1), op), get(op.operand(2), op), inits);
      const ir::Block& body = op.region(0).block(0);
      for (std::size_t i = 0; i < body.num_arguments(); ++i) values_[body.argument(i)] = args[i];
      const ir::Operation* yield = body.terminator();
      for (const auto& inner : body.ops()) {
        if (inner.get() != yield) lower_op(*inner);
      }
      std::vector<Value> next;
      for (std::size_t i = 0; i < yield->num_operands(); ++i) next.push_back(get(yield->operand(i), *yield));
      const auto results = b_->end_for(next);
      for (std::size_t i = 0; i < results.size(); ++i) values_[op.result(i)] = results[i];
    } else if (n == "return") {
      b_->ret();
    } else if (n == "tile.linear_id" || n == "tile.group_size") {
      cannot(op, "lane-level code (one value per tile of a group) is not vectorized into tiles by this target yet");
    } else {
      cannot(op, "no mapping to CUDA Tile IR yet");
    }
  }

  void lower_block(const ir::Block& block) {
    for (const auto& op : block.ops()) lower_op(*op);
  }

  const ir::Operation& func_;
  LowerOptions options_;
  Module m_;
  Body* b_ = nullptr;
  std::map<const ir::Value*, Value> values_;
  std::map<const ir::Value*, Buffer> buffers_;
  std::map<std::string, Value> symbols_;
};

}  // namespace

LoweredKernel lower_kernel(const ir::Operation& kernel_func, const LowerOptions& options) {
  return Lowering(kernel_func, options).run();
}

}  // namespace tessera::cuda_tile
