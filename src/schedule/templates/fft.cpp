// The FFT template: graph.fft and graph.fft_resize (graph/fft_ops.cpp) ->
// one Tile IR kernel each, computing exactly what the reference kernels do,
// in their order, so results are bit for bit the reference's on every
// backend (docs/design/0022-compiled-fft.md).
//
//   fft         one group per line along the axis (or a few adjacent lines,
//               pack_lines). Groups of Stockham passes run in registers
//               (fused_group); the first reads the operand (line_input:
//               rounded to the part type T; real input of a splittable
//               length pairs its points, a real result of one unsplits its
//               half spectrum, c2r otherwise builds the Hermitian spectrum),
//               the last stores the result (store_bin: hermitian weights,
//               the normalization), and shared memory carries the line
//               between groups, with a barrier after each. Bluestein lines
//               load into shared memory first and multiply by the chirp.
//               Each butterfly is the reference's arithmetic: twiddle
//               products (ac - bd) + (ad + bc)i rounded to T, the radix-R
//               sums left to right, a twiddle of exactly 1 skipped
//               (docs/design/0033-fft-pass-groups-adjacent-lines.md).
//   fft_resize  one lane per result element: the operand's element, or 0
//               past its end on the axis.
//
// The twiddles come from the same fft::Plan the reference builds (one fp64
// formula rounded once to T): the radix-R twiddles are literals in the
// kernel; the pass twiddles, Bluestein's chirp and its kernel FFT_M(b) are
// one constant table, an input the executable uploads once. So a compiled
// line and a reference line are the same sequence of roundings of the same
// values; only the lanes that run them differ.
//
// Complex buffers are passed as their parts (Tensor::as_parts): element k
// of a complex64 tensor is parts 2k (real) and 2k + 1 (imaginary).
#include <algorithm>
#include <cmath>
#include <span>

#include "graph/fft_plan.h"
#include "graph/shape_rules.h"
#include "schedule/templates/lane_program.h"
#include "schedule/templates/row_loops.h"
#include "schedule/templates/templates.h"
#include "tessera/schedule/schedule_dialect.h"
#include "tessera/tile/tile_builder.h"
#include "tessera/tile/tile_dialect.h"

namespace tessera::schedule::templates {
namespace {

using ir::Type;
using ir::Value;

constexpr std::int64_t kResizeLanes = 256;
// Points a lane holds in registers while it runs a group of Stockham passes
// (the `fft_points` knob's default: each radix-4 pass alone; CUDA sets 16).
constexpr std::int64_t kFusedPoints = 4;
// The most lanes a group takes (a CUDA block's threads), and the fewest.
constexpr std::int64_t kMostGroupLanes = 1024;
constexpr std::int64_t kWarp = 32;
// Shared memory a line may take on the CPU (its arena is heap memory).
constexpr std::int64_t kCpuLineBytes = std::int64_t{1} << 28;
// Global scratch a line may take (CUDA lines past shared memory).
constexpr std::int64_t kScratchLineBytes = std::int64_t{1} << 30;

// graph.fft's kind; graph.fft_passes (a stage of a c2c transform) is c2c.
std::string kind_of(const ir::Operation& root) {
  return root.name() == "graph.fft_passes" ? "c2c" : root.attrs().get_string("kind");
}

// The part type of a transform: the complex side's accumulation type.
DType part_type(const ir::Operation& root) {
  const bool c2r = kind_of(root) == "c2r";
  return c2r ? root.operand(0)->type().policy.accum : root.result(0)->type().policy.accum;
}

// A graph.fft_passes stage of an n-point line along the last axis, split
// after pass a into N1 = the span of passes [0, a) and N2 = n / N1
// (graph/fft_ops.cpp). Its arrays hold, for each line, the Stockham array
// between the stages, y[u N1 + k] = the N1-point DFT of x[u + c N2]:
// - the first stage (passes [0, a)) transforms N2 sub-lines u of N1 points,
//   reading x[u + c N2] and writing y[u N1 + k];
// - the second (passes [a, p)) transforms N1 sub-lines t of N2 points,
//   y[t + c N1] to X[t + m N1]: a pass with span S keeps every point in its
//   residue class mod N1 (S and its Ns are multiples of N1), so sub-line t
//   runs the pass on its own points as a pass of span S / N1, with the
//   whole line's twiddles w(S, (t + N1 j) r) (j: the butterfly's index mod
//   Ns / N1).
// Both are lines along another axis (points N2 or N1 apart), so a group
// takes adjacent sub-lines across its lanes; each keeps the reference's
// arithmetic, so the two stages give graph.fft's bits.
struct Stage {
  bool first = false;
  std::int64_t n1 = 1, n2 = 1;
  std::int64_t points() const { return first ? n1 : n2; }        // a sub-line's points
  std::int64_t sub_lines() const { return first ? n2 : n1; }     // sub-lines per line
};
std::optional<Stage> stage_of(const ir::Operation& root) {
  if (root.name() != "graph.fft_passes") return std::nullopt;
  const std::int64_t n = root.attrs().get_int("n");
  const std::int64_t first = root.attrs().get_int("first"), last = root.attrs().get_int("last");
  const std::vector<int> radices = graph::fft::stockham_radices(n);
  Stage st;
  st.first = first == 0;
  for (std::int64_t i = 0; i < (st.first ? last : first); ++i) st.n1 *= radices[static_cast<std::size_t>(i)];
  st.n2 = n / st.n1;
  return st;
}

// The points a line holds while it is transformed: n (n/2 where a real side
// splits, graph/fft_plan.h; a stage's sub-line), or Bluestein's M.
std::int64_t line_points(const ir::Operation& root) {
  if (const auto st = stage_of(root)) return st->points();
  const std::int64_t n = root.attrs().get_int("n");
  if (kind_of(root) != "c2c" && graph::fft::splits_real(n)) return n / 2;
  if (n <= 1 || !graph::fft::stockham_radices(n).empty()) return n;
  return graph::fft::bluestein_length(n, 2 * static_cast<std::int64_t>(storage_bytes(part_type(root))));
}

// Words a shared array gives each part of `points` points: one word of
// padding per kBankWords (see FftBuilder::array_at).
constexpr std::int64_t kBankWords = 32;
std::int64_t padded_points(std::int64_t points) { return points + points / kBankWords; }

// Shared bytes per line: two arrays of the line's points, two parts each.
std::int64_t line_bytes(const ir::Operation& root) {
  return fft_line_bytes(line_points(root), static_cast<std::int64_t>(storage_bytes(part_type(root))));
}

// Whether the line works in global scratch: its arrays pass the kernel's
// `fft_shared_bytes` knob (set on CUDA; targets without it hold every line
// in shared memory).
bool in_scratch(const ir::Operation& root, const ir::Operation& kernel) {
  return kernel.attrs().has("fft_shared_bytes") && line_bytes(root) > kernel.attrs().get_int("fft_shared_bytes");
}

// The dims of `x` after `axis` (the stride between a line's points) as
// kernel scalars read at run time: appended to `params` and `kernel`'s
// scalars; inner_stride multiplies them in the kernel.
void add_inner_dims(const ir::Type& x, std::int64_t axis, std::vector<std::pair<std::string, Type>>& params,
                    TileKernel& kernel) {
  for (std::size_t d = static_cast<std::size_t>(axis) + 1; d < x.shape.size(); ++d) {
    params.emplace_back("d" + std::to_string(d), Type::lane(DType::int64));
    kernel.scalars.push_back(KernelScalar{KernelScalar::Kind::input_dim, d, 0});
  }
}
// Their product, from the kernel's arguments `first` on.
Value* inner_stride(ir::OpBuilder& b, const ir::Block& fb, std::size_t first, std::size_t count) {
  Value* inner = tile::build_int(b, 1);
  for (std::size_t k = 0; k < count; ++k) inner = index_op(b, "mul", inner, fb.argument(first + k));
  return inner;
}

struct Cx {
  Value* re;
  Value* im;
};

// One of a group's two line arrays: a shared array, or (for a line longer
// than shared memory allows) the group's slice of a global scratch buffer,
// starting at element `base`.
struct Array {
  Value* buffer;
  Value* base = nullptr;        // null: 0
  std::int64_t part_words = 0;  // where the imaginary parts start, from base
  bool padded = false;          // shared by several lanes: see FftBuilder::array_at
};

class FftBuilder {
 public:
  FftBuilder(const ir::Operation& kernel, ir::Module& out, const std::string& name)
      : kernel_(kernel), root_(kernel_root_op(kernel)), out_(out), name_(name) {}

  TileKernel build() {
    const DType part = part_type(root_);
    return part == DType::fp64 ? build_typed<double>() : build_typed<float>();
  }

 private:
  template <class T>
  TileKernel build_typed() {
    const ir::Type& x = root_.operand(0)->type();
    const ir::Type& y = root_.result(0)->type();
    const std::string kind = kind_of(root_);
    stage_ = stage_of(root_);
    const std::int64_t axis = graph::normalize_axis(root_.attrs().get_int("axis"), x.rank());
    n_ = root_.attrs().get_int("n");
    const bool inverse = root_.attrs().get_bool("inverse");
    c2r_ = kind == "c2r";
    complex_in_ = is_complex(x.dtype());
    in_len_ = x.shape[static_cast<std::size_t>(axis)].size;
    out_len_ = y.shape[static_cast<std::size_t>(axis)].size;
    t_ = default_policy(std::is_same_v<T, double> ? DType::fp64 : DType::fp32);
    // A real side of a splittable length runs a complex line of n/2 points:
    // real input splits its spectrum after, a real result unsplits the half
    // spectrum before (graph/fft_plan.h, splits_real).
    split_ = kind == "r2c" && graph::fft::splits_real(n_);
    unsplit_ = c2r_ && graph::fft::splits_real(n_);
    last_axis_ = axis + 1 == static_cast<std::int64_t>(x.rank());
    len_ = split_ || unsplit_ ? n_ / 2 : stage_ ? stage_->points() : n_;
    const graph::fft::Plan<T> plan(stage_ ? n_ : len_, inverse);
    m_ = plan.bluestein_length();
    const std::int64_t points = m_ > 0 ? m_ : len_;
    if (kernel_.attrs().has("fft_points")) fused_points_ = kernel_.attrs().get_int("fft_points");

    TileKernel result;
    std::vector<std::pair<std::string, Type>> params;
    params.emplace_back("in0", Type::gmem({ir::Dim::named("m0")}, complex_in_ ? part_buffer_policy(x.policy)
                                                                              : buffer_policy(x.policy)));
    out_policy_ = c2r_ ? buffer_policy(y.policy) : part_buffer_policy(y.policy);
    params.emplace_back("out", Type::gmem({ir::Dim::named("n")}, out_policy_, /*is_mut=*/true));
    // The table: every pass's twiddles w(span, q), then Bluestein's chirp
    // and kernel, as (re, im) pairs at T.
    ConstantTable table{t_.storage, {}};
    auto append = [&](const std::vector<graph::fft::Cx<T>>& values) {
      const std::int64_t at = static_cast<std::int64_t>(table.values.size());
      for (const auto& c : values) {
        table.values.push_back(static_cast<double>(c.re));
        table.values.push_back(static_cast<double>(c.im));
      }
      return at;
    };
    using Pass = typename graph::fft::Plan<T>::Pass;
    std::vector<PassPlan> passes, forward, inverse_m;
    // Plan pass p for a line on which the spans `ns` are done; residue_scale
    // as PassPlan's (0, or a second stage's N1, which divides the spans).
    auto plan_pass = [&](const Pass& p, std::int64_t ns, std::int64_t residue_scale) {
      PassPlan pp{p.radix, ns, residue_scale > 0 ? p.span / residue_scale : p.span, 0, {}, residue_scale};
      // A pass with Ns = 1 and no residue has every twiddle 1: never read.
      if (ns > 1 || residue_scale > 0) pp.table_at = append(p.outer);
      for (const auto& w : p.inner) pp.inner.push_back({static_cast<double>(w.re), static_cast<double>(w.im)});
      return pp;
    };
    auto plan_passes = [&](std::span<const Pass> from) {
      std::vector<PassPlan> out;
      std::int64_t ns = 1;
      for (const Pass& p : from) {
        out.push_back(plan_pass(p, ns, 0));
        ns = p.span;
      }
      return out;
    };
    if (stage_ && stage_->first) {
      // Passes [0, a): the N1-point transform's own passes.
      passes = plan_passes(std::span(plan.passes()).first(static_cast<std::size_t>(root_.attrs().get_int("last"))));
    } else if (stage_) {
      // Passes [a, p) on the residue classes mod N1 (stage_of), reading the
      // whole line's twiddles.
      const auto& all = plan.passes();
      for (auto i = static_cast<std::size_t>(root_.attrs().get_int("first")); i < all.size(); ++i) {
        passes.push_back(plan_pass(all[i], all[i - 1].span / stage_->n1, stage_->n1));
      }
    } else if (m_ == 0) {
      passes = plan_passes(plan.passes());
    } else {
      forward = plan_passes(plan.forward_m());
      inverse_m = plan_passes(plan.inverse_m());
      chirp_at_ = append(plan.chirp());
      kernel_at_ = append(plan.kernel());
    }
    if (split_ || unsplit_) split_at_ = append(graph::fft::split_twiddles<T>(n_, inverse));
    const bool has_table = !table.values.empty();
    if (has_table) {
      params.emplace_back("table", Type::gmem({ir::Dim::fixed(static_cast<std::int64_t>(table.values.size()))}, t_));
      result.tables.push_back(std::move(table));
    }
    // A line whose two arrays pass the `fft_shared_bytes` knob works in its
    // group's slice of a global scratch buffer instead (a barrier orders a
    // group's global writes before its reads as it does shared ones).
    const bool global = in_scratch(root_, kernel_);
    if (global) {
      params.emplace_back("scratch", Type::gmem({ir::Dim::named("s")}, t_, /*is_mut=*/true));
      result.scratch = GroupScratch{t_.storage, 4 * points};
    }
    const std::size_t first_scalar = 2 + (has_table ? 1 : 0) + (global ? 1 : 0);
    add_inner_dims(x, axis, params, result);
    const std::vector<PassPlan>& line_passes = m_ == 0 ? passes : forward;
    fused_points_ = cheapest_points(line_passes, points);
    pack_lines(x, axis, global, sizeof(T), points, line_lanes(line_passes, points, fused_points_));
    if (stage_) result.lines_per_row = stage_->sub_lines();
    part_words_ = padded_points(points);
    line_words_ = line_words_for(points, lines_);
    // The two shared arrays, each rounded up to the shared alignment.
    const std::int64_t array_bytes = lines_ * line_words_ * static_cast<std::int64_t>(sizeof(T));
    const std::int64_t shared =
        global ? 0 : 2 * ((array_bytes + tile::kSharedAlignment - 1) / tile::kSharedAlignment) * tile::kSharedAlignment;
    ir::Operation* func = tile::build_kernel(
        out_, name_, params,
        {.group_shape = std::vector<std::int64_t>{lanes_ * lines_}, .shared_bytes = std::max<std::int64_t>(shared, 49152)},
        kernel_.location());
    ir::Block& fb = ir::function_body(*func);
    ir::OpBuilder b(fb);
    in_ = fb.argument(0);
    out_buffer_ = fb.argument(1);
    table_ = has_table ? fb.argument(2) : nullptr;
    Value* inner = inner_stride(b, fb, first_scalar, result.scalars.size());
    Value* g = tile::build(b, "tile.group_id", {});
    // Lines across the group's lanes (pack_lines): lane l works on line
    // g lines + l mod lines as lane l / lines of that line's lanes (lines
    // along another axis), or on line g lines + l / lanes as lane l mod lanes
    // (lines along the last axis).
    Value* id = tile::build(b, "tile.linear_id", {});
    Value* column = nullptr;
    lane_ = id;
    if (lines_ > 1 && lines_across_) {
      column = op2(b, "rem", id, integer(b, lines_));
      lane_ = op2(b, "div", id, integer(b, lines_));
    } else if (lines_ > 1) {
      column = op2(b, "div", id, integer(b, lanes_));
      lane_ = op2(b, "rem", id, integer(b, lanes_));
    }
    Value* line = lines_ == 1 ? g : index_op(b, "add", index_op(b, "mul", g, integer(b, lines_)), column);
    in_stride_ = out_stride_ = inner;
    if (stage_) {
      // Sub-line u (first stage) or t (second) of line o (stage_of).
      Value* o = op2(b, "div", line, integer(b, stage_->sub_lines()));
      Value* u = op2(b, "rem", line, integer(b, stage_->sub_lines()));
      Value* start = index_op(b, "mul", o, integer(b, n_));
      in_base_ = index_op(b, "add", start, u);
      in_stride_ = integer(b, stage_->first ? stage_->n2 : stage_->n1);
      out_base_ = stage_->first ? index_op(b, "add", start, index_op(b, "mul", u, integer(b, stage_->n1))) : in_base_;
      out_stride_ = stage_->first ? integer(b, 1) : in_stride_;
      residue_ = u;
    } else {
      Value* o = op2(b, "div", line, inner);
      Value* i = op2(b, "rem", line, inner);
      in_base_ = index_op(b, "add", index_op(b, "mul", index_op(b, "mul", o, integer(b, in_len_)), inner), i);
      out_base_ = index_op(b, "add", index_op(b, "mul", index_op(b, "mul", o, integer(b, out_len_)), inner), i);
    }
    // A line of one group of passes (no Bluestein) never needs the arrays.
    // Where every group between the first and the last gives each lane one
    // item, those groups work in place (read, barrier, write): one array,
    // half the shared memory, so more groups fit on a multiprocessor.
    const bool direct = m_ == 0 && !passes.empty();
    const auto direct_groups = direct ? pass_groups(passes, fused_points_) : std::vector<std::pair<std::size_t, std::size_t>>{};
    const bool arrays_used = !direct || direct_groups.size() > 1 || split_;
    bool in_place = direct && !global;
    for (std::size_t k = 1; k + (split_ ? 0 : 1) < direct_groups.size(); ++k) {
      in_place = in_place && len_ / group_points(passes, direct_groups[k]) == lanes_;
    }
    Array arrays[2];
    if (arrays_used && global) {
      Value* scratch = fb.argument(first_scalar - 1);
      Value* base = index_op(b, "mul", g, integer(b, 4 * points));
      arrays[0] = {scratch, base, points};
      arrays[1] = {scratch, index_op(b, "add", base, integer(b, 2 * points)), points};
    } else if (arrays_used) {
      // One array per line of the group, line_words_ apart.
      Value* at = lines_ == 1 ? nullptr : index_op(b, "mul", column, integer(b, line_words_));
      arrays[0] = {shared_array(b, t_, lines_ * line_words_), at, part_words_, lanes_ > 1};
      arrays[1] = in_place ? arrays[0] : Array{shared_array(b, t_, lines_ * line_words_), at, part_words_, lanes_ > 1};
    }
    // A first stage leaves the normalization to the second.
    const T norm = stage_ && stage_->first
                       ? T(1)
                       : static_cast<T>(graph::fft::norm_factor(root_.attrs().get_string("norm"), n_, inverse));
    bluestein_scale_ = static_cast<double>(plan.bluestein_scale());
    norm_ = static_cast<double>(norm);
    int cur = 0;
    // Groups of passes run in registers between the arrays (fused_group).
    // Without Bluestein, the first group reads the operand and the last
    // stores the result: the line touches shared memory only between groups.
    auto run_groups = [&](const std::vector<PassPlan>& ps, std::int64_t length, bool from_operand, bool to_result) {
      const auto groups = pass_groups(ps, fused_points_);
      for (std::size_t k = 0; k < groups.size(); ++k) {
        const bool first = from_operand && k == 0;
        const bool last = to_result && k + 1 == groups.size();
        fused_group(b, ps, groups[k], length, first ? nullptr : &arrays[cur], last ? nullptr : &arrays[1 - cur]);
        if (!last) {
          b.create("tile.barrier", {});
          cur = 1 - cur;
        }
      }
    };
    if (direct && split_) {
      // The split pass reads bins k and h - k of the half-length spectrum.
      run_groups(passes, len_, true, false);
      lane_loop(b, integer(b, 0), out_len_, [&](ir::OpBuilder& lb, Value* k) {
        Value* h = integer(lb, len_);
        const Cx a = load_point(lb, arrays[cur], op2(lb, "rem", k, h));
        const Cx c = load_point(lb, arrays[cur], op2(lb, "rem", index_op(lb, "sub", h, k), h));
        store_bin(lb, k, split_point(lb, a, c, table_point(lb, split_at_, k)));
      });
    } else if (direct) {
      run_groups(passes, len_, true, true);
    } else if (stage_) {
      raise(ErrorCode::Internal, "fft: a stage of passes needs the direct form");
    } else {
      load_line(b, arrays[0], points);
      b.create("tile.barrier", {});
      if (m_ > 0) {
        run_groups(forward, m_, false, false);
        // a_k *= FFT_M(b)_k, in place: each point is read and written by one lane.
        lane_loop(b, integer(b, 0), m_, [&](ir::OpBuilder& lb, Value* k) {
          store_point(lb, arrays[cur], k, mul(lb, load_point(lb, arrays[cur], k), table_point(lb, kernel_at_, k)));
        });
        b.create("tile.barrier", {});
        run_groups(inverse_m, m_, false, false);
      }
      store_line(b, arrays[cur]);
    }
    tile::finish_kernel(*func);
    // The parts of each product are stored side by side: g++ would fuse
    // their products into vfmaddsub (backends/cpu/emitter.cpp).
    func->attrs().set("vectorize", false);
    result.func = func;
    result.lanes_per_group = lanes_ * lines_;
    result.rows_per_group = lines_;
    result.rows_of = std::pair<std::size_t, std::size_t>{0, static_cast<std::size_t>(axis)};
    result.group_per_row = true;
    return result;
  }

  struct PassPlan {
    int radix;
    std::int64_t ns;        // the span of the transforms already done
    std::int64_t span;      // ns * radix
    std::int64_t table_at;  // where w(span, q) starts in the table (in parts)
    std::vector<std::pair<double, double>> inner;  // w(radix, q)
    // A second stage's pass (stage_of): the twiddle of index j mod Ns is the
    // whole line's w(span residue_scale, (t + residue_scale j) r), t the
    // sub-line's residue. 0 elsewhere.
    std::int64_t residue_scale = 0;
  };

  // Lanes a line wants: the `fft_lanes` knob (CUDA) caps them; enough for
  // one item each in its pass groups between the first and the last (which
  // then work in place), or in every group of a line with fewer than three.
  // A last group with more items loops (1024 points: 64, 64 and 256 items,
  // 64 lanes). One lane where the knob is absent (the CPU). `cap`: the
  // groups' most points (pass_groups).
  std::int64_t line_lanes(const std::vector<PassPlan>& ps, std::int64_t points, std::int64_t cap) const {
    if (!kernel_.attrs().has("fft_lanes")) return 1;
    const std::int64_t most = kernel_.attrs().get_int("fft_lanes");
    const auto groups = pass_groups(ps, cap);
    std::int64_t items = 1;
    for (std::size_t k = 0; k < groups.size(); ++k) {
      const bool middle = k > 0 && k + 1 < groups.size();
      if (middle || groups.size() < 3) items = std::max(items, points / group_points(ps, groups[k]));
    }
    std::int64_t lanes = 1;
    while (lanes < most && lanes < items) lanes *= 2;
    return std::min(lanes, most);
  }

  // The most points a lane holds in a group of passes, for this line: the
  // `fft_points` knob, or half of it (down to 4) where that costs the line
  // less lane time. A group of P-point items costs each of its rounds P
  // (loads, butterflies, stores grow with P) and every group kExchangeCost
  // more (its barrier and shared round trip); the line holds its lanes for
  // the sum. A group with fewer items than the line's lanes leaves the rest
  // idle: 64 points in groups of 16 and 4 points ran the first group on 4
  // of 16 lanes (0.46x cuFFT on an H200), groups of 4 points on all 16
  // (0.75-0.78x); 1000 points keep 16 (groups of 4: 0.47x -> 0.40x), and
  // powers of two from 512 up keep 16 (as measured in 0033). Bluestein lines
  // (measured 0.50x -> 0.47x with smaller groups) and the CPU (one lane a
  // line) keep the knob.
  std::int64_t cheapest_points(const std::vector<PassPlan>& ps, std::int64_t points) const {
    constexpr std::int64_t kExchangeCost = 4;
    const std::int64_t knob = fused_points_;
    if (!kernel_.attrs().has("fft_lanes") || m_ > 0) return knob;
    std::int64_t best = knob, best_cost = 0;
    for (std::int64_t cap = knob; cap >= 4; cap /= 2) {
      const std::int64_t lanes = line_lanes(ps, points, cap);
      std::int64_t per_lane = 0;
      for (const auto& g : pass_groups(ps, cap)) {
        const std::int64_t p = group_points(ps, g);
        per_lane += (points / p + lanes - 1) / lanes * p + kExchangeCost;
      }
      if (cap == knob || lanes * per_lane < best_cost) {
        best = cap;
        best_cost = lanes * per_lane;
      }
    }
    return best;
  }

  // Lanes per line (lanes_) and lines per group (lines_), on a cooperative
  // target (`wanted` lanes a line, line_lanes). A group has at least a warp.
  // - A line along an axis other than the last has its points `inner`
  //   elements apart, so lanes of one line would each read a sector of
  //   their own: a group takes 32 bytes' worth of adjacent lines (4
  //   complex64, 2 complex128), across its lanes (lines_across_), so a warp
  //   reads 32 contiguous bytes of each row.
  // - Lines along the last axis that want fewer than a warp's lanes share a
  //   warp, each line's lanes together.
  // Both need the shape known and the line count a multiple of the lines
  // (a group's lines may straddle two outer indices: each lane finds its
  // own line), and the group's two arrays within the `fft_shared_bytes`
  // knob. Lines in global scratch keep one per group.
  void pack_lines(const ir::Type& x, std::int64_t axis, bool global, std::size_t part_bytes, std::int64_t points,
                  std::int64_t wanted) {
    lanes_ = wanted;
    lines_ = 1;
    if (!kernel_.attrs().has("fft_lanes")) return;
    auto fits = [&](std::int64_t lines) {
      return !kernel_.attrs().has("fft_shared_bytes") ||
             2 * line_words_for(points, lines) * lines * static_cast<std::int64_t>(part_bytes) <=
                 kernel_.attrs().get_int("fft_shared_bytes");
    };
    // The line count (0 where unknown or the lines are in scratch). A
    // stage's sub-lines have their points apart, and their count is a
    // multiple of one line's sub-lines whatever the batch.
    std::int64_t count = global ? 0 : stage_ ? stage_->sub_lines() : 1;
    for (std::size_t d = 0; d < x.shape.size() && count > 0 && !stage_; ++d) {
      if (x.shape[d].is_symbolic()) count = 0;
      if (d != static_cast<std::size_t>(axis)) count *= x.shape[d].size;
    }
    const bool last_axis = last_axis_ && !stage_;
    const std::int64_t across = 32 / (2 * static_cast<std::int64_t>(part_bytes));
    if (!last_axis && count > 0 && count % across == 0 && wanted * across <= kMostGroupLanes && fits(across)) {
      lines_ = across;
      lines_across_ = true;
      lanes_ = std::max(wanted, kWarp / across);
      return;
    }
    std::int64_t lines = last_axis && count > 0 ? kWarp / std::min(wanted, kWarp) : 1;
    while (lines > 1 && (count % lines != 0 || !fits(lines))) lines /= 2;
    lines_ = lines;
    lanes_ = std::max(wanted, kWarp / lines);
  }

  // A line's words in a shared array: its two parts, padded so that the
  // lines of a group start 8 banks apart (their lanes access the same
  // offsets together).
  static std::int64_t line_words_for(std::int64_t points, std::int64_t lines) {
    const std::int64_t words = 2 * padded_points(points);
    return lines == 1 ? words : (words + kBankWords - 1) / kBankWords * kBankWords + 8;
  }

  Value* integer(ir::OpBuilder& b, std::int64_t v) const { return tile::build_int(b, v); }
  Value* real(ir::OpBuilder& b, double v) const { return tile::build_real(b, v, t_); }

  // for (k = lo + lane; k < hi; k += lanes) body(k)
  void lane_loop(ir::OpBuilder& b, Value* lo, std::int64_t hi, const std::function<void(ir::OpBuilder&, Value*)>& body) {
    tile::build_for(b, index_op(b, "add", lo, lane_), integer(b, hi), integer(b, lanes_), {},
                    [&](ir::OpBuilder& lb, std::span<Value* const> a) {
                      body(lb, a[0]);
                      return std::vector<Value*>{};
                    });
  }

  Value* part_at(ir::OpBuilder& b, Value* k, int part) {
    return index_op(b, "add", index_op(b, "mul", k, integer(b, 2)), integer(b, part));
  }
  // A shared array holds the real parts of its points, then the imaginary
  // parts: consecutive lanes reading consecutive points touch consecutive
  // words (interleaved parts would halve a GPU's shared-memory bandwidth).
  // Shared by several lanes, point k sits at k + k / 32: lanes writing
  // points a power of two apart (a group's outputs: 4 t + c after a radix-4
  // pass, 16 t + c after two) would otherwise hit one bank in 32 / stride.
  Value* array_at(ir::OpBuilder& b, const Array& a, Value* k, int part) {
    Value* at = a.base ? index_op(b, "add", a.base, k) : k;
    if (a.padded) at = index_op(b, "add", at, op2(b, "div", k, integer(b, kBankWords)));
    return part == 0 ? at : index_op(b, "add", at, integer(b, a.part_words));
  }
  // Points of a line array and entries of the constant table: their indices
  // come from the plan's sizes and the lane id alone (never from data), and
  // every pass stays inside its line, so the accesses carry `in_bounds` and
  // go unchecked on CUDA. The CPU backend checks them anyway, so the CPU
  // tests (the cooperative form too, with TESSERA_FFT_LANES) would fault on
  // a wrong index.
  static ir::AttrMap proven() { return {{"in_bounds", true}}; }
  Cx load_point(ir::OpBuilder& b, const Array& array, Value* k) {
    return {tile::build(b, "tile.load_elem", {array.buffer, array_at(b, array, k, 0)}, proven()),
            tile::build(b, "tile.load_elem", {array.buffer, array_at(b, array, k, 1)}, proven())};
  }
  void store_point(ir::OpBuilder& b, const Array& array, Value* k, Cx v) {
    b.create("tile.store_elem", {array.buffer, array_at(b, array, k, 0), v.re}, proven());
    b.create("tile.store_elem", {array.buffer, array_at(b, array, k, 1), v.im}, proven());
  }
  Cx table_point(ir::OpBuilder& b, std::int64_t at, Value* q) {
    Value* k = index_op(b, "add", index_op(b, "mul", q, integer(b, 2)), integer(b, at));
    return {tile::build(b, "tile.load_elem", {table_, k}, proven()),
            tile::build(b, "tile.load_elem", {table_, index_op(b, "add", k, integer(b, 1))}, proven())};
  }

  // The reference's complex product: (ac - bd) + (ad + bc)i, each product
  // and sum rounded to T.
  Cx mul(ir::OpBuilder& b, Cx a, Cx w) {
    Value* ac = op2(b, "mul", a.re, w.re);
    Value* bd = op2(b, "mul", a.im, w.im);
    Value* ad = op2(b, "mul", a.re, w.im);
    Value* bc = op2(b, "mul", a.im, w.re);
    return {op2(b, "sub", ac, bd), op2(b, "add", ad, bc)};
  }
  // radix_butterfly's part arithmetic (graph/fft_plan.h) as tile ops.
  struct PartOps {
    const FftBuilder& k;
    ir::OpBuilder& b;
    Value* add(Value* x, Value* y) const { return op2(b, "add", x, y); }
    Value* sub(Value* x, Value* y) const { return op2(b, "sub", x, y); }
    Value* scale(Value* x, double c) const { return op2(b, "mul", k.real(b, c), x); }
  };
  Cx add(ir::OpBuilder& b, Cx a, Cx c) { return {op2(b, "add", a.re, c.re), op2(b, "add", a.im, c.im)}; }
  // The split pass's X_k from a = Z_k mod h, c = Z_(h-k) mod h and w_k, in
  // graph::fft::split_real's order.
  Cx split_point(ir::OpBuilder& b, Cx a, Cx c, Cx w) {
    Value* half = real(b, 0.5);
    const Cx e{op2(b, "mul", op2(b, "add", a.re, c.re), half), op2(b, "mul", op2(b, "sub", a.im, c.im), half)};
    const Cx d{op2(b, "mul", op2(b, "sub", a.re, c.re), half), op2(b, "mul", op2(b, "add", a.im, c.im), half)};
    return add(b, e, mul(b, {d.im, op1(b, "neg", d.re)}, w));
  }
  // Z_k from a = X_k, b = X_(h-k) and w_k, in graph::fft::unsplit_real's order.
  Cx unsplit_point(ir::OpBuilder& b, Cx a, Cx c, Cx w) {
    const Cx e{op2(b, "add", a.re, c.re), op2(b, "sub", a.im, c.im)};
    const Cx d = mul(b, {op2(b, "sub", a.re, c.re), op2(b, "add", a.im, c.im)}, w);
    return {op2(b, "sub", e.re, d.im), op2(b, "add", e.im, d.re)};
  }
  Cx pick(ir::OpBuilder& b, Value* cond, Cx x, Cx y) {
    return {select(b, cond, x.re, y.re), select(b, cond, x.im, y.im)};
  }

  // Point k of the operand's line, rounded to T: a complex element, or a
  // real one with imaginary part 0.
  Cx operand_point(ir::OpBuilder& b, Value* k) {
    Value* at = index_op(b, "add", in_base_, index_op(b, "mul", k, in_stride_));
    if (!complex_in_) return {cast(b, tile::build(b, "tile.load_elem", {in_, at}), t_), real(b, 0.0)};
    // Both parts in one access (8 or 16 bytes on a GPU).
    const auto parts = b.create("tile.load_vector", {in_, part_at(b, at, 0)}, {{"count", std::int64_t{2}}})->results();
    return {cast(b, parts[0], t_), cast(b, parts[1], t_)};
  }

  // Point k (k < n) of the line to transform, rounded to T: the operand's
  // point (c2r: the Hermitian spectrum), times Bluestein's chirp.
  Cx line_input(ir::OpBuilder& b, Value* k) {
    Cx v;
    if (split_) {
      // z_k = x_2k + i x_2k+1.
      Value* even = index_op(b, "mul", k, integer(b, 2));
      v = {operand_point(b, even).re, operand_point(b, index_op(b, "add", even, integer(b, 1))).re};
    } else if (unsplit_) {
      // Z_k from X_k and X_(h-k); k = 0 reads X_0 and X_h without their
      // imaginary parts.
      Cx a = operand_point(b, k);
      Cx c = operand_point(b, index_op(b, "sub", integer(b, len_), k));
      Value* first = cmp(b, "eq", k, integer(b, 0));
      a.im = select(b, first, real(b, 0.0), a.im);
      c.im = select(b, first, real(b, 0.0), c.im);
      v = unsplit_point(b, a, c, table_point(b, split_at_, k));
    } else if (c2r_ && in_len_ < n_) {
      // Bins past n/2 are the conjugates of bins n - k.
      Value* stored = cmp(b, "lt", k, integer(b, in_len_));
      Value* source = select(b, stored, k, index_op(b, "sub", integer(b, n_), k));
      const Cx z = operand_point(b, source);
      v = {z.re, select(b, stored, z.im, op1(b, "neg", z.im))};
    } else {
      v = operand_point(b, k);
    }
    if (m_ > 0) v = mul(b, v, table_point(b, chirp_at_, k));
    return v;
  }

  void load_line(ir::OpBuilder& b, const Array& array, std::int64_t points) {
    lane_loop(b, integer(b, 0), len_, [&](ir::OpBuilder& lb, Value* k) { store_point(lb, array, k, line_input(lb, k)); });
    if (points > len_) {
      lane_loop(b, integer(b, len_), points, [&](ir::OpBuilder& lb, Value* k) {
        store_point(lb, array, k, {real(lb, 0.0), real(lb, 0.0)});
      });
    }
  }

  // Consecutive passes whose radices multiply to at most `cap` (the line's
  // fused_points_) form a group (a pass wider than that is a group of its
  // own): [from, to).
  static std::vector<std::pair<std::size_t, std::size_t>> pass_groups(const std::vector<PassPlan>& ps, std::int64_t cap) {
    std::vector<std::pair<std::size_t, std::size_t>> groups;
    for (std::size_t from = 0; from < ps.size();) {
      std::size_t to = from + 1;
      std::int64_t points = ps[from].radix;
      while (to < ps.size() && points * ps[to].radix <= cap) points *= ps[to++].radix;
      groups.emplace_back(from, to);
      from = to;
    }
    return groups;
  }

  // Stockham pass i (radix R, Ns = ns) runs butterfly j < length / R: it
  // reads x[j + r length/R] and writes y[(j / Ns) Ns R + j mod Ns + k Ns].
  // A group of passes with radices multiplying to P runs in registers: lane
  // item t < length / P reads the P points x[t + c length/P] and runs the
  // first pass's butterflies j = t + a length/P (a < P / R). Since length/P
  // is a multiple of Ns, they share j mod Ns (so their twiddles), and
  // butterfly j's output k lands at t'_k + a length/(P/R), t'_k =
  // (t / Ns) Ns R + t mod Ns + k Ns: for each k, the same shape one pass on,
  // with P / R points. So the group's passes need no exchange between
  // lanes, and each butterfly is the reference's arithmetic, so the bits
  // are the reference's. `x` null reads the operand (line_input), `y` null
  // stores the result (store_bin).
  void fused_group(ir::OpBuilder& b, const std::vector<PassPlan>& ps, std::pair<std::size_t, std::size_t> group,
                   std::int64_t length, const Array* x, const Array* y) {
    const std::int64_t points = group_points(ps, group);
    const std::int64_t items = length / points;
    // In place (x and y one array, one item per lane): every lane reads its
    // points before any lane writes.
    const bool in_place = x && y && x->buffer == y->buffer && x->base == y->base;
    if (in_place && items != lanes_) raise(ErrorCode::Internal, "fft: an in-place pass group needs one item per lane");
    auto item = [&](ir::OpBuilder& lb, Value* t) {
      std::vector<Cx> values;
      for (std::int64_t c = 0; c < points; ++c) {
        Value* k = index_op(lb, "add", t, integer(lb, c * items));
        values.push_back(x ? load_point(lb, *x, k) : line_input(lb, k));
      }
      if (in_place) lb.create("tile.barrier", {});
      butterflies(lb, ps, group.first, group.second, t, values, [&](ir::OpBuilder& sb, Value* k, Cx v) {
        if (y) {
          store_point(sb, *y, k, v);
        } else if (out_len_ < n_) {
          if_then(sb, cmp(sb, "lt", k, integer(sb, out_len_)), [&](ir::OpBuilder& tb) { store_bin(tb, k, v); });
        } else {
          store_bin(sb, k, v);
        }
      });
    };
    if (in_place) {
      item(b, lane_);
    } else {
      lane_loop(b, integer(b, 0), items, item);
    }
  }

  static std::int64_t group_points(const std::vector<PassPlan>& ps, std::pair<std::size_t, std::size_t> group) {
    std::int64_t points = 1;
    for (std::size_t i = group.first; i < group.second; ++i) points *= ps[i].radix;
    return points;
  }

  // Passes [i, to) on `values` (point c at t + c length/P), in registers;
  // `sink(k, v)` takes each result point.
  void butterflies(ir::OpBuilder& b, const std::vector<PassPlan>& ps, std::size_t i, std::size_t to, Value* t,
                   const std::vector<Cx>& values, const std::function<void(ir::OpBuilder&, Value*, Cx)>& sink) {
    if (i == to) {
      sink(b, t, values[0]);
      return;
    }
    const PassPlan& p = ps[i];
    const int R = p.radix;
    const std::size_t per = values.size() / static_cast<std::size_t>(R);
    Value* jm = p.ns == 1 ? integer(b, 0) : op2(b, "rem", t, integer(b, p.ns));
    Value* jd = p.ns == 1 ? t : op2(b, "div", t, integer(b, p.ns));
    // The twiddle index is jm r (a second stage's: (t + N1 jm) r), 0 for
    // every r exactly when its factor is 0: then no twiddle.
    const bool twiddled = p.ns > 1 || p.residue_scale > 0;
    Value* factor =
        p.residue_scale > 0 ? index_op(b, "add", residue_, index_op(b, "mul", jm, integer(b, p.residue_scale))) : jm;
    Value* untwiddled = twiddled ? cmp(b, "eq", factor, integer(b, 0)) : nullptr;
    std::vector<Cx> twiddles(static_cast<std::size_t>(R));
    if (twiddled) {
      for (int r = 1; r < R; ++r) {
        twiddles[static_cast<std::size_t>(r)] = table_point(b, p.table_at, index_op(b, "mul", factor, integer(b, r)));
      }
    }
    std::vector<std::vector<Cx>> outs(static_cast<std::size_t>(R), std::vector<Cx>(per));
    for (std::size_t a = 0; a < per; ++a) {
      std::vector<Cx> v;
      for (int r = 0; r < R; ++r) {
        const Cx in = values[a + static_cast<std::size_t>(r) * per];
        v.push_back(r == 0 || !twiddled ? in : pick(b, untwiddled, in, mul(b, in, twiddles[static_cast<std::size_t>(r)])));
      }
      std::vector<Cx> out(static_cast<std::size_t>(R));
      PartOps parts{*this, b};
      graph::fft::radix_butterfly(R, v.data(), out.data(), [&](int q) { return p.inner[static_cast<std::size_t>(q)]; },
                                  parts);
      for (int k = 0; k < R; ++k) outs[static_cast<std::size_t>(k)][a] = out[static_cast<std::size_t>(k)];
    }
    Value* base = index_op(b, "add", index_op(b, "mul", jd, integer(b, p.span)), jm);
    for (int k = 0; k < R; ++k) {
      butterflies(b, ps, i + 1, to, index_op(b, "add", base, integer(b, k * p.ns)), outs[static_cast<std::size_t>(k)], sink);
    }
  }

  // Bins 0 .. out_len - 1 of the transformed line (in `array`) to the result.
  void store_line(ir::OpBuilder& b, const Array& array) {
    lane_loop(b, integer(b, 0), out_len_, [&](ir::OpBuilder& lb, Value* k) { store_bin(lb, k, load_point(lb, array, k)); });
  }

  // Bin k (k < out_len) of the transformed line to the result: Bluestein's
  // last chirp and 1/M, hermitian weights, the normalization.
  void store_bin(ir::OpBuilder& b, Value* k, Cx v) {
    const bool weights = root_.attrs().has("hermitian_weights") && root_.attrs().get_bool("hermitian_weights");
    if (m_ > 0) {
      const Cx c = mul(b, v, table_point(b, chirp_at_, k));
      Value* s = real(b, bluestein_scale_);
      v = {op2(b, "mul", c.re, s), op2(b, "mul", c.im, s)};
    }
    if (weights) {
      Value* doubled = op2(b, "and", cmp(b, "gt", k, integer(b, 0)),
                           cmp(b, "lt", index_op(b, "mul", k, integer(b, 2)), integer(b, n_)));
      v = pick(b, doubled, add(b, v, v), v);
    }
    if (norm_ != 1.0) {
      Value* s = real(b, norm_);
      v = {op2(b, "mul", v.re, s), op2(b, "mul", v.im, s)};
    }
    if (unsplit_) {
      // Point k holds x_2k and x_2k+1: adjacent along the last axis.
      Value* even = index_op(b, "mul", k, integer(b, 2));
      Value* at = index_op(b, "add", out_base_, index_op(b, "mul", even, out_stride_));
      Value* re = cast(b, v.re, out_policy_);
      Value* im = cast(b, v.im, out_policy_);
      if (last_axis_) {
        b.create("tile.store_vector", {out_buffer_, at, re, im});
      } else {
        b.create("tile.store_elem", {out_buffer_, at, re});
        b.create("tile.store_elem", {out_buffer_, index_op(b, "add", at, out_stride_), im});
      }
      return;
    }
    Value* at = index_op(b, "add", out_base_, index_op(b, "mul", k, out_stride_));
    if (c2r_) {
      b.create("tile.store_elem", {out_buffer_, at, cast(b, v.re, out_policy_)});
    } else {
      b.create("tile.store_vector", {out_buffer_, part_at(b, at, 0), cast(b, v.re, out_policy_), cast(b, v.im, out_policy_)});
    }
  }

  const ir::Operation& kernel_;
  const ir::Operation& root_;
  ir::Module& out_;
  std::string name_;
  NumericsPolicy t_, out_policy_;
  std::int64_t n_ = 0, m_ = 0, in_len_ = 0, out_len_ = 0, lanes_ = 1;
  std::int64_t chirp_at_ = 0, kernel_at_ = 0, split_at_ = 0;
  std::int64_t len_ = 0;  // the complex line's points: n, or n/2 when real input splits
  bool split_ = false, unsplit_ = false;
  bool last_axis_ = false;  // the transformed axis is the last: a line's points are adjacent
  // The most points a lane holds in a group of passes (`fft_points` knob).
  std::int64_t fused_points_ = kFusedPoints;
  double bluestein_scale_ = 1.0, norm_ = 1.0;
  std::int64_t part_words_ = 0;  // a shared array's words per part
  std::int64_t lines_ = 1;       // adjacent lines per group
  bool lines_across_ = false;    // lines across the lanes (pack_lines)
  std::int64_t line_words_ = 0;  // a line's words in a shared array
  bool c2r_ = false, complex_in_ = false;
  Value *in_ = nullptr, *out_buffer_ = nullptr, *table_ = nullptr, *lane_ = nullptr;
  // Where a line's points are: operand point k at in_base_ + k in_stride_,
  // result point k at out_base_ + k out_stride_; a second stage's residue.
  Value *in_stride_ = nullptr, *out_stride_ = nullptr, *residue_ = nullptr;
  std::optional<Stage> stage_;
  Value *in_base_ = nullptr, *out_base_ = nullptr;
};

// graph.fft_resize: result element e at (o, k, i) of [outer, length, inner]
// is the operand's (o, k, i) when k < the operand's length, else 0.
TileKernel lower_resize(const ir::Operation& kernel, ir::Module& out, const std::string& name) {
  const ir::Operation& root = kernel_root_op(kernel);
  const ir::Type& x = root.operand(0)->type();
  const std::int64_t axis = graph::normalize_axis(root.attrs().get_int("axis"), x.rank());
  const std::int64_t in_len = x.shape[static_cast<std::size_t>(axis)].size;
  const std::int64_t len = root.attrs().get_int("length");
  const bool complex = is_complex(x.dtype());
  const NumericsPolicy p = complex ? part_buffer_policy(x.policy) : buffer_policy(x.policy);
  TileKernel result;
  std::vector<std::pair<std::string, Type>> params;
  params.emplace_back("in0", Type::gmem({ir::Dim::named("m0")}, p));
  params.emplace_back("out", Type::gmem({ir::Dim::named("n")}, p, /*is_mut=*/true));
  add_inner_dims(x, axis, params, result);
  const std::int64_t lanes = group_lanes(kernel, kResizeLanes);
  ir::Operation* func =
      tile::build_kernel(out, name, params, {.group_shape = std::vector<std::int64_t>{lanes}}, kernel.location());
  ir::Block& fb = ir::function_body(*func);
  ir::OpBuilder b(fb);
  auto integer = [](ir::OpBuilder& ib, std::int64_t v) { return tile::build_int(ib, v); };
  Value* inner = inner_stride(b, fb, 2, result.scalars.size());
  Value* e = global_lane(b, lanes);
  // The result's element count, in parts for a complex result.
  Value* total = tile::build(b, "tile.symbol", {}, {{"name", std::string("n")}});
  if (complex) total = op2(b, "div", total, integer(b, 2));
  const int parts = complex ? 2 : 1;
  // Part `part` of element `at` in a buffer of parts.
  auto part_of = [&](ir::OpBuilder& ib, Value* at, int part) {
    return parts == 1 ? at : index_op(ib, "add", index_op(ib, "mul", at, integer(ib, 2)), integer(ib, part));
  };
  if_then(b, cmp(b, "lt", e, total), [&](ir::OpBuilder& tb) {
    Value* i = op2(tb, "rem", e, inner);
    Value* row = op2(tb, "div", e, inner);
    Value* k = op2(tb, "rem", row, integer(tb, len));
    Value* o = op2(tb, "div", row, integer(tb, len));
    if_then(
        tb, cmp(tb, "lt", k, integer(tb, in_len)),
        [&](ir::OpBuilder& cb) {
          Value* from = index_op(cb, "add", index_op(cb, "mul", index_op(cb, "add", index_op(cb, "mul", o, integer(cb, in_len)), k), inner), i);
          for (int part = 0; part < parts; ++part) {
            Value* value = tile::build(cb, "tile.load_elem", {fb.argument(0), part_of(cb, from, part)});
            cb.create("tile.store_elem", {fb.argument(1), part_of(cb, e, part), value});
          }
        },
        [&](ir::OpBuilder& zb) {
          for (int part = 0; part < parts; ++part) {
            zb.create("tile.store_elem", {fb.argument(1), part_of(zb, e, part), tile::build_real(zb, 0.0, p)});
          }
        });
  });
  tile::finish_kernel(*func);
  result.func = func;
  result.lanes_per_group = lanes;
  // The grid counts result elements (the executable's numel of the domain).
  return result;
}

}  // namespace

std::int64_t fft_line_bytes(std::int64_t points, std::int64_t part_bytes) {
  return 2 * 2 * padded_points(points) * part_bytes;
}

bool fft_covers(const ir::Operation& kernel, std::string* why) {
  const ir::Operation& root = kernel_root_op(kernel);
  auto fail = [&](std::string reason) {
    if (why) *why = std::move(reason);
    return false;
  };
  if (auto bad = part_policies_unsupported(root)) return fail(*bad);
  if (root.name() == "graph.fft_passes") {
    const std::int64_t n = root.attrs().get_int("n");
    const auto passes = static_cast<std::int64_t>(graph::fft::stockham_radices(n).size());
    const std::int64_t first = root.attrs().get_int("first"), last = root.attrs().get_int("last");
    const ir::Type& x = root.operand(0)->type();
    if (first > 0 && last < passes) {
      return fail("graph.fft_passes [" + std::to_string(first) + ", " + std::to_string(last) + ") of " +
                  std::to_string(passes) + " passes: only a first stage (from pass 0) or a last one (to the end) compiles");
    }
    if (graph::normalize_axis(root.attrs().get_int("axis"), x.rank()) + 1 != static_cast<std::int64_t>(x.rank())) {
      return fail("graph.fft_passes compiles along the last axis only");
    }
  }
  if (root.name() != "graph.fft_resize") {
    const std::int64_t bytes = line_bytes(root);
    const bool scratch = in_scratch(root, kernel);
    const std::int64_t most = scratch ? kScratchLineBytes : kCpuLineBytes;
    if (bytes > most) {
      return fail("an FFT of length " + std::to_string(root.attrs().get_int("n")) + " holds " +
                  std::to_string(line_points(root)) + " points per line in " +
                  (scratch ? "global scratch" : "shared memory") + ", " + std::to_string(bytes) +
                  " bytes, above the " + std::to_string(most) + " a line may take (longer lines are not compiled)");
    }
  }
  return true;
}

TileKernel lower_fft(const ir::Operation& kernel, ir::Module& out, const std::string& name) {
  if (kernel_root_op(kernel).name() == "graph.fft_resize") return lower_resize(kernel, out, name);
  return FftBuilder(kernel, out, name).build();
}

}  // namespace tessera::schedule::templates
