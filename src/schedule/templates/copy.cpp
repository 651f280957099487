// The copy template: graph.concat, graph.gather, graph.slice_embed,
// graph.slice {copy = true}, graph.iota and graph.scatter_add -> one Tile IR kernel with one lane per
// result element, which finds its source by index arithmetic on the result's
// multi-index (result dims d0.. are kernel scalars).
//
//   concat:      the operand whose range along the axis holds the index
//   gather:      x at (pre, wrap(indices[j]), post); the executable checks the
//                indices' range on the host first (a clear IndexError)
//   slice_embed: x where the index lies on the slice's lattice, else 0
//   slice:       x at start + index * step along each axis
//   iota:        the index along the axis
//   scatter_add: the sum, in increasing j, of the updates whose index is
//                this element's; the executable passes the inverse index
//                (InverseIndex), so each lane reads only its own updates
//
// Moving ops store the loaded value unchanged (same policy in and out).
#include <functional>
#include <optional>
#include <set>

#include "graph/shape_rules.h"
#include "schedule/templates/lane_program.h"
#include "schedule/templates/templates.h"
#include "tessera/schedule/schedule_dialect.h"
#include "tessera/tile/tile_builder.h"

namespace tessera::schedule::templates {
namespace {

using ir::Type;
using ir::Value;

const NumericsPolicy kF64 = default_policy(DType::fp64);

std::vector<Value*> none() {
  return {};
}

// Ops that only move elements copy codes, never values, so that NaN payloads
// survive. Sub-byte formats have no code dtype; they have no NaN payloads
// either, so decoding and encoding a value moves it exactly.
bool moves_codes(const ir::Operation& root) {
  const std::string_view n = root.name();
  const DType d = root.result(0)->type().dtype();
  if (is_packed(d)) return false;
  return n == "graph.concat" || n == "graph.gather" || n == "graph.slice_embed" || n == "graph.slice";
}


class CopyBuilder {
 public:
  CopyBuilder(const ir::Operation& kernel, ir::Module& out, const std::string& name)
      : kernel_(kernel), body_(kernel_body(kernel)), root_(kernel_root_op(kernel)), out_(out), name_(name) {}

  TileKernel build() {
    const ir::Shape& domain = kernel_.attrs().get_shape("domain");
    rank_ = domain.size();
    const std::int64_t lanes = group_lanes(kernel_, 1024);
    const std::size_t num_in = body_.num_arguments();
    TileKernel result;
    // Moving ops take their data operands and result as codes.
    const bool moving = moves_codes(root_);
    if (moving) {
      result.code_outputs = true;
      for (std::size_t k = 0; k < root_.num_operands(); ++k) {
        if (root_.name() != "graph.gather" || k == 0) result.code_inputs.push_back(index_of(root_.operand(k)));
      }
    }
    auto param_policy = [&](const NumericsPolicy& p, bool codes) {
      return codes ? default_policy(code_dtype(p.storage)) : p;
    };
    std::vector<std::pair<std::string, Type>> params;
    for (std::size_t k = 0; k < num_in; ++k) {
      const bool codes = std::find(result.code_inputs.begin(), result.code_inputs.end(), k) != result.code_inputs.end();
      params.emplace_back("in" + std::to_string(k), Type::gmem({ir::Dim::named("m" + std::to_string(k))},
                                                                param_policy(body_.argument(k)->type().policy, codes)));
    }
    params.emplace_back("out", Type::gmem({ir::Dim::named("n")}, param_policy(root_.result(0)->type().policy, moving),
                                          /*is_mut=*/true));
    const bool scatter = root_.name() == "graph.scatter_add";
    if (scatter) {
      params.emplace_back("offsets", Type::gmem({ir::Dim::named("no")}, default_policy(DType::int64)));
      params.emplace_back("order", Type::gmem({ir::Dim::named("nj")}, default_policy(DType::int64)));
    }
    for (std::size_t d = 0; d < rank_; ++d) {
      params.emplace_back("d" + std::to_string(d), Type::lane(DType::int64));
      result.scalars.push_back(KernelScalar{KernelScalar::Kind::dim, d});
    }
    // Every operand's dims, in order.
    for (std::size_t k = 0; k < root_.num_operands(); ++k) {
      const std::size_t in = index_of(root_.operand(k));
      for (std::size_t d = 0; d < root_.operand(k)->type().rank(); ++d) {
        params.emplace_back("x" + std::to_string(k) + "_" + std::to_string(d), Type::lane(DType::int64));
        result.scalars.push_back(KernelScalar{KernelScalar::Kind::input_dim, d, in});
      }
    }
    ir::Operation* func =
        tile::build_kernel(out_, name_, params, {.group_shape = std::vector<std::int64_t>{lanes}}, kernel_.location());
    ir::Block& fb = ir::function_body(*func);
    ir::OpBuilder b(fb);
    std::size_t next = num_in + 1;
    out_buffer_ = fb.argument(num_in);
    if (scatter) offsets_ = fb.argument(next++), order_ = fb.argument(next++);
    for (std::size_t d = 0; d < rank_; ++d) dims_.push_back(fb.argument(next++));
    for (std::size_t k = 0; k < root_.num_operands(); ++k) {
      operands_.push_back(fb.argument(index_of(root_.operand(k))));
      std::vector<Value*> dims;
      for (std::size_t d = 0; d < root_.operand(k)->type().rank(); ++d) dims.push_back(fb.argument(next++));
      operand_dims_.push_back(dims);
    }

    const std::int64_t run = row_run();
    if (run > 1) {
      build_runs(b, lanes, run);
      result.last_axis_strip = run;
    } else {
      Value* i = global_lane(b, lanes);
      below_n(b, i, [&](ir::OpBuilder& then) {
        set_result_index(then, i);
        Value* stored = nullptr;
        const std::string_view op = root_.name();
        if (op == "graph.concat") stored = concat(then);
        else if (op == "graph.gather") stored = gather(then, result);
        else if (op == "graph.slice_embed") stored = slice_embed(then);
        else if (op == "graph.slice") stored = slice(then);
        else if (op == "graph.iota") stored = iota(then);
        else stored = scatter_add(then, result);
        then.create("tile.store_elem", {out_buffer_, i, stored});
      });
    }
    tile::finish_kernel(*func);
    result.func = func;
    result.lanes_per_group = lanes;
    return result;
  }

 private:
  // Elements per lane where a slice or a padding (slice_embed) keeps the
  // last axis whole: each row moves contiguous on both sides, so a lane
  // moves a run of 16 bytes of codes (one wide access on a GPU) instead of
  // one element with its own index arithmetic. 1 elsewhere.
  std::int64_t row_run() const {
    const std::string_view n = root_.name();
    if ((n != "graph.slice" && n != "graph.slice_embed") || rank_ == 0 || !moves_codes(root_)) return 1;
    const NumericsPolicy& p = root_.result(0)->type().policy;
    if (is_complex(p.storage)) return 1;
    const std::size_t last = rank_ - 1;
    const ir::Shape& whole = sliced_shape();
    const std::optional<graph::AxisSlice> s = axis_slices()[last];
    if (!s || !whole_axis(*s, whole[last])) return 1;
    const std::int64_t run = 16 / static_cast<std::int64_t>(storage_bytes(code_dtype(p.storage)));
    return run >= 2 && s->size % run == 0 ? run : 1;
  }

  // The run form (row_run): lane i moves result elements [i run, i run + run).
  void build_runs(ir::OpBuilder& b, std::int64_t lanes, std::int64_t run) {
    Value* first = op2(b, "mul", global_lane(b, lanes), integer(b, run));
    below_n(b, first, [&](ir::OpBuilder& then) {
      set_result_index(then, first);
      Value* inside = nullptr;
      const std::vector<Value*> at = root_.name() == "graph.slice" ? slice_source(then) : embed_source(then, inside);
      auto copy = [&](ir::OpBuilder& cb) {
        const auto values =
            cb.create("tile.load_vector", {operands_[0], offset(cb, at, operand_dims_[0])}, {{"count", run}})->results();
        std::vector<Value*> operands = {out_buffer_, first};
        operands.insert(operands.end(), values.begin(), values.end());
        cb.create("tile.store_vector", operands);
      };
      if (!inside) {
        copy(then);
        return;
      }
      tile::build_if(
          then, inside, {},
          [&](ir::OpBuilder& tb, std::span<Value* const>) {
            copy(tb);
            return none();
          },
          [&](ir::OpBuilder& eb, std::span<Value* const>) {
            Value* zero = tile::build_int(eb, 0, out_buffer_->type().dtype());  // code 0 is +0 in every format
            std::vector<Value*> operands = {out_buffer_, first};
            operands.insert(operands.end(), static_cast<std::size_t>(run), zero);
            eb.create("tile.store_vector", operands);
            return none();
          });
    });
  }

  // `body` under `if (i < n)`, n the result's element count (a lane past
  // the end does nothing).
  void below_n(ir::OpBuilder& b, Value* i, const std::function<void(ir::OpBuilder&)>& body) {
    Value* n = tile::build(b, "tile.symbol", {}, {{"name", std::string("n")}});
    tile::build_if(
        b, cmp(b, "lt", i, n), {},
        [&](ir::OpBuilder& then, std::span<Value* const>) {
          body(then);
          return none();
        },
        [](ir::OpBuilder&, std::span<Value* const>) { return none(); });
  }

  // idx_: the result's multi-index of flat element `flat`.
  void set_result_index(ir::OpBuilder& b, Value* flat) {
    idx_.assign(rank_, nullptr);
    Value* rest = flat;
    for (std::size_t d = rank_; d-- > 0;) {
      idx_[d] = op2(b, "rem", rest, dims_[d]);
      rest = op2(b, "div", rest, dims_[d]);
    }
  }

  std::size_t index_of(const Value* v) const {
    for (std::size_t k = 0; k < body_.num_arguments(); ++k) {
      if (body_.argument(k) == v) return k;
    }
    return 0;
  }

  Value* integer(ir::OpBuilder& b, std::int64_t v) { return tile::build_int(b, v); }

  // Row-major offset of multi-index `at` in a tensor of `dims`.
  Value* offset(ir::OpBuilder& b, const std::vector<Value*>& at, const std::vector<Value*>& dims) {
    Value* off = integer(b, 0);
    for (std::size_t d = 0; d < at.size(); ++d) off = op2(b, "add", op2(b, "mul", off, dims[d]), at[d]);
    return off;
  }

  // Row-major flat index of result dims [from, to).
  Value* flat(ir::OpBuilder& b, std::size_t from, std::size_t to) {
    return offset(b, std::vector<Value*>(idx_.begin() + static_cast<std::ptrdiff_t>(from), idx_.begin() + static_cast<std::ptrdiff_t>(to)),
                  std::vector<Value*>(dims_.begin() + static_cast<std::ptrdiff_t>(from), dims_.begin() + static_cast<std::ptrdiff_t>(to)));
  }
  Value* product(ir::OpBuilder& b, const std::vector<Value*>& dims, std::size_t from, std::size_t to) {
    Value* p = integer(b, 1);
    for (std::size_t d = from; d < to; ++d) p = op2(b, "mul", p, dims[d]);
    return p;
  }

  Value* load(ir::OpBuilder& b, std::size_t operand, Value* at) {
    return tile::build(b, "tile.load_elem", {operands_[operand], at});
  }

  // An int64 index lane from an integer tensor element.
  Value* index_value(ir::OpBuilder& b, std::size_t operand, Value* at) {
    Value* v = load(b, operand, at);
    return v->type().dtype() == DType::int64 ? v : cast(b, v, default_policy(DType::int64));
  }

  Value* concat(ir::OpBuilder& b) {
    const auto axis = static_cast<std::size_t>(graph::normalize_axis(root_.attrs().get_int("axis"), rank_));
    // Nested ifs: operand k when idx[axis] < start_k + size_k.
    std::function<Value*(ir::OpBuilder&, std::size_t, Value*)> pick = [&](ir::OpBuilder& ib, std::size_t k,
                                                                            Value* start) -> Value* {
      std::vector<Value*> at = idx_;
      at[axis] = op2(ib, "sub", idx_[axis], start);
      auto read = [&, k, at](ir::OpBuilder& rb) { return load(rb, k, offset(rb, at, operand_dims_[k])); };
      if (k + 1 == operands_.size()) return read(ib);
      Value* end = op2(ib, "add", start, operand_dims_[k][axis]);
      Value* zero = tile::build_int(ib, 0, out_buffer_->type().dtype());  // code 0 is +0 in every format
      ir::Operation* branch = tile::build_if(
          ib, cmp(ib, "lt", idx_[axis], end), {zero},
          [&](ir::OpBuilder& tb, std::span<Value* const>) { return std::vector<Value*>{read(tb)}; },
          [&](ir::OpBuilder& eb, std::span<Value* const>) { return std::vector<Value*>{pick(eb, k + 1, end)}; });
      return branch->result(0);
    };
    return pick(b, 0, integer(b, 0));
  }

  Value* gather(ir::OpBuilder& b, TileKernel& result) {
    const std::size_t xr = root_.operand(0)->type().rank();
    const auto axis = static_cast<std::size_t>(graph::normalize_axis(root_.attrs().get_int("axis"), xr));
    const std::size_t ri = root_.operand(1)->type().rank();
    result.index_checks.push_back(IndexCheck{index_of(root_.operand(1)), false, index_of(root_.operand(0)), axis, "gather"});
    const std::vector<Value*>& xd = operand_dims_[0];
    Value* j = flat(b, axis, axis + ri);
    Value* v = index_value(b, 1, j);
    v = select(b, cmp(b, "lt", v, integer(b, 0)), op2(b, "add", v, xd[axis]), v);
    Value* pre = flat(b, 0, axis);
    Value* post = flat(b, axis + ri, rank_);
    Value* post_size = product(b, xd, axis + 1, xr);
    Value* at = op2(b, "add", op2(b, "mul", op2(b, "add", op2(b, "mul", pre, xd[axis]), v), post_size), post);
    return load(b, 0, at);
  }

  // The shape a slice or slice_embed slices: the slice's operand, the
  // embedding's result.
  const ir::Shape& sliced_shape() const {
    return root_.name() == "graph.slice" ? root_.operand(0)->type().shape : root_.result(0)->type().shape;
  }
  // The op's slice of each axis of sliced_shape(); nullopt where the axis is
  // symbolic, which shape inference makes a whole axis.
  std::vector<std::optional<graph::AxisSlice>> axis_slices() const {
    const auto& starts = root_.attrs().get_ints("starts");
    const auto& stops = root_.attrs().get_ints("stops");
    std::vector<std::int64_t> steps = root_.attrs().get_ints("steps");
    if (steps.empty()) steps.assign(rank_, 1);
    const ir::Shape& shape = sliced_shape();
    std::vector<std::optional<graph::AxisSlice>> out(rank_);
    for (std::size_t a = 0; a < rank_; ++a) {
      if (!shape[a].is_symbolic()) out[a] = graph::resolve_slice(starts[a], stops[a], steps[a], shape[a].size);
    }
    return out;
  }
  static bool whole_axis(const graph::AxisSlice& s, const ir::Dim& dim) {
    return s.start == 0 && s.step == 1 && s.size == dim.size;
  }

  // The operand's multi-index of the result element at idx_, and whether
  // it lies on the slice's lattice (`inside`; null when every element does).
  std::vector<Value*> embed_source(ir::OpBuilder& b, Value*& inside) {
    const ir::Shape& shape = sliced_shape();
    const std::vector<std::optional<graph::AxisSlice>> slices = axis_slices();
    inside = nullptr;
    std::vector<Value*> at(rank_);
    for (std::size_t a = 0; a < rank_; ++a) {
      const std::optional<graph::AxisSlice>& s = slices[a];
      if (!s || whole_axis(*s, shape[a])) {
        at[a] = idx_[a];
        continue;
      }
      Value* rel = op2(b, "sub", idx_[a], integer(b, s->start));
      Value* q = op2(b, "div", rel, integer(b, s->step));
      Value* ok = op2(b, "and", cmp(b, "ge", rel, integer(b, 0)),
                      op2(b, "and", cmp(b, "eq", op2(b, "rem", rel, integer(b, s->step)), integer(b, 0)),
                          cmp(b, "lt", q, integer(b, s->size))));
      inside = inside ? op2(b, "and", inside, ok) : ok;
      at[a] = q;
    }
    return at;
  }

  Value* slice_embed(ir::OpBuilder& b) {
    Value* inside = nullptr;
    const std::vector<Value*> at = embed_source(b, inside);
    if (!inside) inside = tile::build_bool(b, true);
    Value* zero = tile::build_int(b, 0, out_buffer_->type().dtype());  // code 0 is +0 in every format
    ir::Operation* branch = tile::build_if(
        b, inside, {zero},
        [&](ir::OpBuilder& tb, std::span<Value* const>) {
          return std::vector<Value*>{load(tb, 0, offset(tb, at, operand_dims_[0]))};
        },
        [](ir::OpBuilder&, std::span<Value* const> a) { return std::vector<Value*>{a[0]}; });
    return branch->result(0);
  }

  // The operand's multi-index of the result element at idx_.
  std::vector<Value*> slice_source(ir::OpBuilder& b) {
    const std::vector<std::optional<graph::AxisSlice>> slices = axis_slices();
    std::vector<Value*> at(rank_);
    for (std::size_t a = 0; a < rank_; ++a) {
      const std::optional<graph::AxisSlice>& s = slices[a];
      at[a] = s ? op2(b, "add", integer(b, s->start), op2(b, "mul", idx_[a], integer(b, s->step))) : idx_[a];
    }
    return at;
  }

  Value* slice(ir::OpBuilder& b) { return load(b, 0, offset(b, slice_source(b), operand_dims_[0])); }

  Value* iota(ir::OpBuilder& b) {
    const auto axis = static_cast<std::size_t>(graph::normalize_axis(root_.attrs().get_int("axis"), rank_));
    return LaneProgram::finish(b, cast(b, idx_[axis], kF64), root_.result(0)->type().policy).stored;
  }

  Value* scatter_add(ir::OpBuilder& b, TileKernel& result) {
    const auto axis = static_cast<std::size_t>(graph::normalize_axis(root_.attrs().get_int("axis"), rank_));
    const std::size_t idx_input = index_of(root_.operand(1));
    result.index_checks.push_back(IndexCheck{idx_input, true, 0, axis, "scatter_add"});
    result.inverse = InverseIndex{idx_input, axis};
    const NumericsPolicy& p = root_.result(0)->type().policy;
    const NumericsPolicy acc_policy = default_policy(p.accum);
    Value* m = product(b, operand_dims_[1], 0, operand_dims_[1].size());  // number of indices
    Value* pre = flat(b, 0, axis);
    Value* post = flat(b, axis + 1, rank_);
    Value* post_size = product(b, dims_, axis + 1, rank_);
    Value* lo = tile::build(b, "tile.load_elem", {offsets_, idx_[axis]});
    Value* hi = tile::build(b, "tile.load_elem", {offsets_, op2(b, "add", idx_[axis], integer(b, 1))});
    ir::Operation* loop = tile::build_for(
        b, lo, hi, integer(b, 1), {tile::build_real(b, 0.0, acc_policy)},
        [&](ir::OpBuilder& lb, std::span<Value* const> a) {
          Value* j = tile::build(lb, "tile.load_elem", {order_, a[0]});
          Value* at = op2(lb, "add", op2(lb, "mul", op2(lb, "add", op2(lb, "mul", pre, m), j), post_size), post);
          Value* u = cast(lb, LaneProgram::decode(lb, load(lb, 0, at)), acc_policy);
          return std::vector<Value*>{op2(lb, "add", a[1], u)};
        });
    return LaneProgram::finish(b, cast(b, loop->result(0), kF64), p).stored;
  }

  const ir::Operation& kernel_;
  const ir::Block& body_;
  const ir::Operation& root_;
  ir::Module& out_;
  std::string name_;
  std::size_t rank_ = 0;
  Value* out_buffer_ = nullptr;
  Value* offsets_ = nullptr;
  Value* order_ = nullptr;
  std::vector<Value*> dims_, idx_, operands_;
  std::vector<std::vector<Value*>> operand_dims_;
};

}  // namespace

bool copy_covers(const ir::Operation& kernel, std::string* why) {
  auto fail = [&](const std::string& reason) {
    if (why) *why = reason;
    return false;
  };
  const ir::Operation& root = kernel_root_op(kernel);
  const ir::Block& body = kernel_body(kernel);
  static const std::set<std::string_view> kOps = {"graph.concat", "graph.gather", "graph.slice_embed", "graph.slice",
                                                  "graph.iota", "graph.scatter_add"};
  if (!kOps.count(root.name())) return fail("'" + std::string(root.name()) + "' has no copy lowering");
  for (const auto& op : body.ops()) {
    if (op.get() != &root && op.get() != body.terminator()) {
      return fail("'" + std::string(op->name()) + "' is fused with a copy");
    }
  }
  const bool moving = moves_codes(root);
  auto check = [moving](const NumericsPolicy& p) -> std::optional<std::string> {
    if (moving && !is_complex(p.storage)) return std::nullopt;  // codes move whatever their rounding
    return unsupported_policy(p);
  };
  for (const Value* v : root.operands()) {
    if (auto bad = check(v->type().policy)) return fail("an operand has " + *bad);
  }
  if (auto bad = check(root.result(0)->type().policy)) return fail("the result has " + *bad);
  if (root.name() == "graph.scatter_add" && !is_float(root.result(0)->type().dtype())) {
    return fail("an integer graph.scatter_add (its exact-sum check runs on the reference executor only)");
  }
  return true;
}

TileKernel lower_copy(const ir::Operation& kernel, ir::Module& out, const std::string& name) {
  return CopyBuilder(kernel, out, name).build();
}

}  // namespace tessera::schedule::templates
