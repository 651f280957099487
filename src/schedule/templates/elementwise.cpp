// The elementwise template: a fused chain of Graph IR elementwise ops over
// one domain -> one Tile IR kernel with one lane per element.
//
//   kernel(in_0: gmem<[m0] P0>, ..., out_0: gmem<[n] Q0 mut>, ..., d0: lane<int64>, ...)
//     group_shape = [T] (T = the kernel's tile knob)
//     i = group_id * T + linear_id
//     if i < n:
//       each op is lowered per lane (lane_program.h), reading inputs at
//       their broadcast offsets of i
//       each output is stored at i
//
// Buffers are passed flat (row-major, contiguous): the executable hands the
// template contiguous tensors. The domain's dims d0.. are passed as scalars
// only when an input is broadcast.
//
// With a broadcast input, a flat lane index would need a division per
// element to find the broadcast offset. When the domain has rank >= 2 and a
// static last dim C >= kMinRowTile, the kernel is row-tiled instead: group g
// covers columns [c*T, c*T + T) of row g / ceil(C/T) (T = min(tile, C rounded
// up to 64)), so the divisions are per group and each lane knows its
// (row..., column) index.
//
// With the `lane_elements` knob U > 1 (CUDA executables), each lane takes U
// elements, T apart (consecutive lanes still touch consecutive elements):
// a group covers T * U elements (T * U columns of a row when row-tiled, U
// lowered to fit the row), so the per-thread setup of a GPU kernel (its
// parameters, group index and fault record) is paid once per U elements and
// a thread has U independent loads in flight. Every element's value is the
// same whatever U is.
//
// With the `lane_vector` knob V > 1 (CUDA executables: 16 bytes of the
// kernel's narrowest buffer), each lane takes runs of V consecutive
// elements instead of single ones (docs/design/0018): a run whose elements
// all exist reads the inputs whose elements are consecutive along it (those
// spanning the domain, and row-tiled biases) with one tile.load_vector each,
// computes its V elements' lane programs and writes each output with one
// tile.store_vector, so a GPU moves 16 bytes per access with one bounds
// check; the run at the domain's end takes the element-by-element form.
// Row-tiled, V is cut to a power of two dividing the row, so runs never
// cross rows. With U as well, a lane takes U runs, T * V elements apart.
#include <algorithm>
#include <tuple>
#include <utility>

#include "schedule/templates/lane_program.h"
#include "schedule/templates/row_loops.h"
#include "schedule/templates/templates.h"
#include "tessera/schedule/schedule_dialect.h"
#include "tessera/tile/tile_builder.h"

namespace tessera::schedule::templates {

using ir::Type;

namespace {
constexpr std::int64_t kMinRowTile = 64;
constexpr std::int64_t kAheadGroups = 2;
constexpr std::int64_t kMaxLaneVector = 16;
}  // namespace

TileKernel lower_elementwise(const ir::Operation& kernel, ir::Module& out, const std::string& name) {
  const ir::Block& body = kernel_body(kernel);
  const ir::Shape& domain = kernel.attrs().get_shape("domain");
  const std::int64_t lanes = group_lanes(kernel, 1024);
  const ir::Operation& yield = *body.terminator();
  const std::size_t num_in = body.num_arguments();
  const std::size_t num_out = yield.num_operands();
  // Parameters: inputs, outputs, then the domain dims when an input broadcasts.
  std::vector<std::pair<std::string, Type>> params;
  bool any_broadcast = false;
  for (std::size_t k = 0; k < num_in; ++k) {
    const Type& t = body.argument(k)->type();
    params.emplace_back("in" + std::to_string(k),
                        Type::gmem({ir::Dim::named("m" + std::to_string(k))}, buffer_policy(t.policy)));
    any_broadcast = any_broadcast || broadcasts(body.argument(k), domain);
  }
  for (std::size_t j = 0; j < num_out; ++j) {
    params.emplace_back("out" + std::to_string(j),
                        Type::gmem({ir::Dim::named("n")}, buffer_policy(yield.operand(j)->type().policy), /*is_mut=*/true));
  }
  // Row tiling (see above): T lanes per group over one row's columns.
  std::int64_t lanes_used = lanes;
  const bool row_tiled = any_broadcast && domain.size() >= 2 && !domain.back().is_symbolic() &&
                         domain.back().size >= kMinRowTile;
  if (row_tiled) {
    lanes_used = std::min(lanes, (domain.back().size + kMinRowTile - 1) / kMinRowTile * kMinRowTile);
  }
  // Elements per lane (see above).
  std::int64_t per_lane = kernel.attrs().has("lane_elements") ? kernel.attrs().get_int("lane_elements") : 1;
  if (per_lane < 1) raise(ErrorCode::ArgumentInvalid, "elementwise kernel with lane_elements " + std::to_string(per_lane),
                          kernel.location());
  // Elements per run (see above).
  std::int64_t vector = kernel.attrs().has("lane_vector") ? kernel.attrs().get_int("lane_vector") : 1;
  if (vector < 1 || vector > kMaxLaneVector) {
    raise(ErrorCode::ArgumentInvalid, "elementwise kernel with lane_vector " + std::to_string(vector) + "; expected 1 to " +
                                          std::to_string(kMaxLaneVector), kernel.location());
  }
  if (row_tiled && vector > 1) {
    const std::int64_t c = domain.back().size;
    std::int64_t v = 1;
    while (v * 2 <= vector && c % (v * 2) == 0) v *= 2;
    vector = v;
    const std::int64_t runs = c / vector;  // runs per row
    lanes_used = std::min(lanes, (runs + kMinRowTile - 1) / kMinRowTile * kMinRowTile);
  }
  if (row_tiled) {
    per_lane = std::max<std::int64_t>(1, std::min(per_lane, domain.back().size / (lanes_used * vector)));
  }
  const std::int64_t step = lanes_used * vector;   // elements (or columns) a group's lanes cover at once
  const std::int64_t span = step * per_lane;       // elements (or columns) per group
  TileKernel result;
  result.row_tiled = row_tiled;
  for (std::size_t d = 0; any_broadcast && d < domain.size(); ++d) {
    params.emplace_back("d" + std::to_string(d), Type::lane(DType::int64));
    result.scalars.push_back(KernelScalar{KernelScalar::Kind::dim, d});
  }
  ir::Operation* func =
      tile::build_kernel(out, name, params, {.group_shape = std::vector<std::int64_t>{lanes_used}}, kernel.location());
  ir::Block& fb = ir::function_body(*func);
  ir::OpBuilder b(fb);
  std::vector<ir::Value*> dims;
  for (std::size_t d = 0; any_broadcast && d < domain.size(); ++d) dims.push_back(fb.argument(num_in + num_out + d));
  ir::Value* gid = tile::build(b, "tile.group_id", {});
  ir::Value* lid = tile::build(b, "tile.linear_id", {});
  ir::Value* group_base = nullptr;  // the flat index of lane 0 (uniform)
  ir::Value* row = nullptr;         // row-tiled: the group's row, and its first column
  ir::Value* col0 = nullptr;
  // A row-tiled lane's flat index and guard, at column `col` of the group's row.
  auto row_lane = [&](ir::OpBuilder& eb, ir::Value* col) {
    return std::pair{op2(eb, "add", op2(eb, "mul", row, dims.back()), col), cmp(eb, "lt", col, dims.back())};
  };
  // A flat lane's guard at flat index `at`.
  auto flat_guard = [&](ir::OpBuilder& eb, ir::Value* at) {
    return cmp(eb, "lt", at, tile::build(eb, "tile.symbol", {}, {{"name", std::string("n")}}));
  };
  ir::Value* i = nullptr;  // with one element per lane: the lane's, and its guard
  ir::Value* in_range = nullptr;
  std::vector<ir::Value*> index;
  if (row_tiled) {
    const std::int64_t c = domain.back().size;
    ir::Value* chunks = tile::build_int(b, (c + span - 1) / span);
    row = op2(b, "div", gid, chunks);
    col0 = op2(b, "mul", op2(b, "rem", gid, chunks), tile::build_int(b, span));
    ir::Value* col = per_lane == 1 && vector == 1 ? op2(b, "add", col0, lid) : nullptr;
    group_base = op2(b, "add", op2(b, "mul", row, dims.back()), col0);
    if (col) std::tie(i, in_range) = row_lane(b, col);
    // The row's multi-index over the leading dims (per group: uniform).
    index.assign(domain.size(), nullptr);
    index.back() = col;
    ir::Value* rest = row;
    for (std::size_t d = domain.size() - 1; d-- > 0;) {
      index[d] = d == 0 ? rest : op2(b, "rem", rest, dims[d]);
      if (d > 0) rest = op2(b, "div", rest, dims[d]);
    }
  } else {
    group_base = op2(b, "mul", gid, tile::build_int(b, span));
    if (per_lane == 1 && vector == 1) {
      i = op2(b, "add", group_base, lid);
      in_range = flat_guard(b, i);
    }
  }
  // The elements of the group kAheadGroups further on, for each input that
  // spans the domain (its offsets are the lanes' own): a CPU hint, as
  // masked vector loads do not train every CPU's hardware prefetcher (the
  // CUDA emitter drops it).
  ir::Value* ahead = op2(b, "add", group_base, tile::build_int(b, kAheadGroups * lanes_used));
  for (std::size_t k = 0; k < num_in; ++k) {
    if (body.argument(k)->type().shape == domain && !lookup_table(body.argument(k))) {
      b.create("tile.prefetch", {fb.argument(k), ahead, tile::build_int(b, lanes_used)});
    }
  }
  // The stored outputs of the element at flat index `at` (multi-index
  // `lane_index` when row-tiled): its lane program, input k bound to
  // `loaded[k]` when given (the element's value from a run), else read from
  // its buffer.
  auto outputs_at = [&](ir::OpBuilder& eb, ir::Value* at, const std::vector<ir::Value*>& lane_index,
                        const std::vector<ir::Value*>& loaded) {
    LaneProgram lanes_of(domain, at, dims);
    if (row_tiled) lanes_of.set_index(lane_index);
    for (std::size_t k = 0; k < num_in; ++k) {
      if (loaded.empty() || loaded[k] == nullptr) {
        lanes_of.bind_input(body.argument(k), fb.argument(k));
      } else {
        lanes_of.bind_value(body.argument(k), LaneValue{loaded[k], LaneProgram::decode(eb, loaded[k])});
      }
    }
    for (const auto& op : body.ops()) {
      if (op.get() == body.terminator()) break;
      lanes_of.lower_op(eb, *op);
    }
    std::vector<ir::Value*> outputs;
    for (std::size_t j = 0; j < num_out; ++j) outputs.push_back(lanes_of.value(eb, yield.operand(j)).stored);
    return outputs;
  };
  // The lane's element at flat index `at` (multi-index `lane_index` when row-tiled), where `guard` holds.
  auto element = [&](ir::OpBuilder& eb, ir::Value* at, ir::Value* guard, const std::vector<ir::Value*>& lane_index) {
    if_then(eb, guard, [&](ir::OpBuilder& then) {
      const std::vector<ir::Value*> outputs = outputs_at(then, at, lane_index, {});
      for (std::size_t j = 0; j < num_out; ++j) then.create("tile.store_elem", {fb.argument(num_in + j), at, outputs[j]});
    });
  };
  // A run of `vector` elements from flat index `at` (multi-index
  // `lane_index` when row-tiled) whose elements all exist.
  auto run = [&](ir::OpBuilder& eb, ir::Value* at, const std::vector<ir::Value*>& lane_index) {
    LaneProgram first(domain, at, dims);
    if (row_tiled) first.set_index(lane_index);
    std::vector<std::vector<ir::Value*>> loaded(num_in);
    for (std::size_t k = 0; k < num_in; ++k) {
      const ir::Shape& shape = body.argument(k)->type().shape;
      const bool consecutive = shape == domain || (row_tiled && !shape.empty() && shape.back() == domain.back());
      if (!consecutive || lookup_table(body.argument(k))) continue;  // read per element by its lane program
      loaded[k] = eb.create("tile.load_vector", {fb.argument(k), first.offset_of(eb, shape)}, {{"count", vector}})->results();
    }
    std::vector<std::vector<ir::Value*>> stored(num_out);
    for (std::int64_t e = 0; e < vector; ++e) {
      ir::Value* at_e = e == 0 ? at : index_op(eb, "add", at, tile::build_int(eb, e));
      std::vector<ir::Value*> index_e = lane_index;
      if (row_tiled && e > 0) index_e.back() = index_op(eb, "add", lane_index.back(), tile::build_int(eb, e));
      std::vector<ir::Value*> element_values(num_in, nullptr);
      for (std::size_t k = 0; k < num_in; ++k) {
        if (!loaded[k].empty()) element_values[k] = loaded[k][static_cast<std::size_t>(e)];
      }
      const std::vector<ir::Value*> outputs = outputs_at(eb, at_e, index_e, element_values);
      for (std::size_t j = 0; j < num_out; ++j) stored[j].push_back(outputs[j]);
    }
    for (std::size_t j = 0; j < num_out; ++j) {
      std::vector<ir::Value*> operands{fb.argument(num_in + j), at};
      operands.insert(operands.end(), stored[j].begin(), stored[j].end());
      eb.create("tile.store_vector", operands);
    }
  };
  // The lane's run from flat index `at` (column `col` of the group's row
  // when row-tiled): whole, or element by element at the domain's end.
  auto run_or_tail = [&](ir::OpBuilder& eb, ir::Value* at, ir::Value* col) {
    ir::Value* limit = row_tiled ? dims.back() : tile::build(eb, "tile.symbol", {}, {{"name", std::string("n")}});
    ir::Value* from = row_tiled ? col : at;
    std::vector<ir::Value*> lane_index = index;
    if (row_tiled) lane_index.back() = col;
    if_then(
        eb, cmp(eb, "le", op2(eb, "add", from, tile::build_int(eb, vector)), limit),
        [&](ir::OpBuilder& whole) { run(whole, at, lane_index); },
        [&](ir::OpBuilder& tail) {
          for (std::int64_t e = 0; e < vector; ++e) {
            ir::Value* at_e = e == 0 ? at : op2(tail, "add", at, tile::build_int(tail, e));
            std::vector<ir::Value*> index_e = lane_index;
            if (row_tiled && e > 0) index_e.back() = op2(tail, "add", col, tile::build_int(tail, e));
            ir::Value* guard = cmp(tail, "lt", row_tiled ? index_e.back() : at_e, limit);
            element(tail, at_e, guard, index_e);
          }
        },
        /*likely=*/true);
  };
  if (vector > 1) {
    // Runs at u = 0, T V, .., (U - 1) T V from the group's first element.
    tile::build_for(b, tile::build_int(b, 0), tile::build_int(b, span), tile::build_int(b, step), {},
                    [&](ir::OpBuilder& lb, std::span<ir::Value* const> u) {
                      ir::Value* offset = op2(lb, "add", u[0], op2(lb, "mul", lid, tile::build_int(lb, vector)));
                      if (row_tiled) {
                        ir::Value* col = op2(lb, "add", col0, offset);
                        run_or_tail(lb, op2(lb, "add", op2(lb, "mul", row, dims.back()), col), col);
                      } else {
                        run_or_tail(lb, op2(lb, "add", group_base, offset), nullptr);
                      }
                      return std::vector<ir::Value*>{};
                    });
  } else if (per_lane == 1) {
    element(b, i, in_range, index);
  } else {
    // Lane elements at u = 0, T, .., (U - 1) T from the group's first.
    tile::build_for(b, tile::build_int(b, 0), tile::build_int(b, span), tile::build_int(b, lanes_used), {},
                    [&](ir::OpBuilder& lb, std::span<ir::Value* const> u) {
                      std::vector<ir::Value*> lane_index = index;
                      if (row_tiled) {
                        lane_index.back() = op2(lb, "add", op2(lb, "add", col0, u[0]), lid);
                        const auto [at, guard] = row_lane(lb, lane_index.back());
                        element(lb, at, guard, lane_index);
                      } else {
                        ir::Value* at = op2(lb, "add", op2(lb, "add", group_base, u[0]), lid);
                        element(lb, at, flat_guard(lb, at), lane_index);
                      }
                      return std::vector<ir::Value*>{};
                    });
  }
  tile::finish_kernel(*func);
  result.func = func;
  result.lanes_per_group = span;  // elements per group: the grid's divisor
  return result;
}

bool elementwise_covers(const ir::Operation& kernel, std::string* why) {
  if (auto bad = lane_ops_unsupported(kernel_body(kernel), 0, /*stochastic=*/true)) {
    if (why) *why = *bad;
    return false;
  }
  return true;
}

}  // namespace tessera::schedule::templates
