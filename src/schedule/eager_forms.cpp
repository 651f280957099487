// Canonical forms of eager op calls (eager_forms.h).
#include "schedule/eager_forms.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>

#include "graph/shape_rules.h"
#include "schedule/templates/lane_program.h"
#include "schedule/templates/templates.h"
#include "tessera/schedule/passes.h"
#include "tessera/ir/builder.h"
#include "tessera/support/error.h"

namespace tessera::schedule::detail {
namespace {

using Sizes = std::vector<std::int64_t>;

std::int64_t product(const Sizes& s, std::size_t from, std::size_t to) {
  std::int64_t p = 1;
  for (std::size_t d = from; d < to; ++d) p *= s[d];
  return p;
}

bool is_elementwise(const ir::OpDef& def) {
  return templates::lane_op_covered(def.name) && def.name != "graph.constant" && def.name != "graph.broadcast_to";
}

bool is_reduction(const ir::OpDef& def) {
  return def.name == "graph.sum" || def.name == "graph.mean" || def.name == "graph.max" || def.name == "graph.min";
}

bool is_row_normalization(const ir::OpDef& def) {
  static const std::set<std::string> kOps = {"graph.softmax_safe",    "graph.logsumexp",    "graph.layernorm_safe",
                                             "graph.rmsnorm_safe",    "graph.softmax_linear", "graph.norm_linear"};
  return kOps.count(def.name) != 0;
}

// ---- collapsing ----

// Elementwise: numpy broadcasting, right-aligned. Returns the collapsed
// operand shapes and the broadcast result shape, or nothing when the
// operands do not broadcast (the op's rules then raise).
std::optional<std::pair<std::vector<Sizes>, Sizes>> collapse_elementwise(std::span<const Tensor> inputs) {
  std::size_t rank = 0;
  for (const Tensor& t : inputs) rank = std::max(rank, t.rank());
  std::vector<Sizes> padded;
  Sizes out(rank, 1);
  for (const Tensor& t : inputs) {
    Sizes p(rank - t.rank(), 1);
    p.insert(p.end(), t.shape().begin(), t.shape().end());
    for (std::size_t d = 0; d < rank; ++d) {
      if (p[d] == out[d] || p[d] == 1) continue;
      if (out[d] != 1) return std::nullopt;
      out[d] = p[d];
    }
    padded.push_back(std::move(p));
  }
  // Groups of adjacent dims (dims of result size 1 dropped) over which every
  // operand is either full or broadcast throughout.
  std::vector<std::vector<std::size_t>> groups;
  auto broadcast = [&](std::size_t i, std::size_t d) { return padded[i][d] != out[d]; };
  for (std::size_t d = 0; d < rank; ++d) {
    if (out[d] == 1) continue;
    bool joins = !groups.empty();
    if (joins) {
      const std::size_t prev = groups.back().back();
      for (std::size_t i = 0; i < padded.size() && joins; ++i) joins = broadcast(i, d) == broadcast(i, prev);
    }
    if (joins) {
      groups.back().push_back(d);
    } else {
      groups.push_back({d});
    }
  }
  std::vector<Sizes> shapes(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    for (const auto& g : groups) {
      std::int64_t n = 1;
      for (std::size_t d : g) n *= padded[i][d];
      shapes[i].push_back(n);
    }
    // Leading broadcast dims are implicit (right alignment).
    auto first = std::find_if(shapes[i].begin(), shapes[i].end(), [](std::int64_t n) { return n != 1; });
    shapes[i].erase(shapes[i].begin(), first);
  }
  return std::make_pair(std::move(shapes), std::move(out));
}

// Reductions: merges adjacent dims that are all reduced or all kept (dims
// of size 1 dropped). Returns the collapsed shape and its reduced axes.
std::pair<Sizes, std::vector<std::int64_t>> collapse_reduction(const Sizes& shape, const std::vector<std::int64_t>& axes) {
  std::vector<bool> reduced(shape.size(), axes.empty());
  for (std::int64_t a : axes) reduced[static_cast<std::size_t>(a)] = true;
  Sizes out;
  std::vector<std::int64_t> out_axes;
  int prev = -1;  // -1 none, 0 kept, 1 reduced
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    const int kind = reduced[d] ? 1 : 0;
    if (kind == prev) {
      out.back() *= shape[d];
      continue;
    }
    out.push_back(shape[d]);
    if (kind == 1) out_axes.push_back(static_cast<std::int64_t>(out.size() - 1));
    prev = kind;
  }
  return {out, out_axes};
}

// ---- patterns ----

// Symbols named by first appearance: S0, S1, ... (the forms below name
// their symbols with other letters, so old and new names never collide).
void renumber(std::vector<ir::Shape>& shapes) {
  std::map<std::string, std::string> names;
  for (auto& s : shapes) {
    for (ir::Dim& d : s) {
      if (!d.is_symbolic()) continue;
      auto it = names.find(d.symbol);
      if (it == names.end()) it = names.emplace(d.symbol, "S" + std::to_string(names.size())).first;
      d.symbol = it->second;
    }
  }
}

ir::Dim dim_for(std::int64_t n, const std::string& symbol) {
  return n <= 1 ? ir::Dim::fixed(n) : ir::Dim::named(symbol);
}

bool infers(const ir::OpDef& def, std::span<const Tensor> inputs, const std::vector<ir::Shape>& shapes,
            const ir::AttrMap& attrs) {
  std::vector<ir::Type> types;
  for (std::size_t i = 0; i < inputs.size(); ++i) types.push_back(ir::Type::tensor(shapes[i], inputs[i].policy()));
  try {
    ir::infer_result_types(def, types, attrs, {});
    return true;
  } catch (const Error&) {
    return false;
  }
}

// Equal sizes share a symbol; then each occurrence is split off into a
// fresh symbol wherever the op's shape rules still accept the pattern.
std::vector<ir::Shape> search_pattern(const ir::OpDef& def, std::span<const Tensor> inputs, const ir::AttrMap& attrs) {
  std::vector<ir::Shape> shapes;
  for (const Tensor& t : inputs) {
    ir::Shape s;
    for (std::int64_t n : t.shape()) s.push_back(dim_for(n, "v" + std::to_string(n)));
    shapes.push_back(std::move(s));
  }
  if (!infers(def, inputs, shapes, attrs)) {
    // Shape rules that need static sizes (a reshape's target, say): the exact shapes.
    shapes.clear();
    for (const Tensor& t : inputs) shapes.push_back(ir::fixed_shape(t.shape()));
    return shapes;
  }
  std::size_t fresh = 0;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    for (std::size_t d = 0; d < shapes[i].size(); ++d) {
      if (!shapes[i][d].is_symbolic()) continue;
      const ir::Dim kept = shapes[i][d];
      shapes[i][d] = ir::Dim::named("f" + std::to_string(fresh++));
      if (!infers(def, inputs, shapes, attrs)) shapes[i][d] = kept;
    }
  }
  renumber(shapes);
  return shapes;
}

// search_pattern, remembered: the search runs the shape rules once per
// dim, and each rejection is a thrown error (about 20 us), so an spmm's ten
// operands cost 0.25 ms a call. The key is what the search reads: the op,
// the operand shapes and policies, and the attributes; up to kPatternMemo
// of them.
constexpr std::size_t kPatternMemo = 4096;
std::vector<ir::Shape> general_pattern(const ir::OpDef& def, std::span<const Tensor> inputs, const ir::AttrMap& attrs) {
  std::string key = def.name + " " + ir::print_attr_map(attrs);
  for (const Tensor& t : inputs) {
    key += " [";
    for (std::int64_t n : t.shape()) key += std::to_string(n) + ",";
    key += "] " + print_policy(t.policy());
  }
  static std::mutex mutex;
  static std::unordered_map<std::string, std::vector<ir::Shape>> memo;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = memo.find(key); it != memo.end()) return it->second;
  }
  std::vector<ir::Shape> shapes = search_pattern(def, inputs, attrs);
  std::lock_guard<std::mutex> lock(mutex);
  if (memo.size() >= kPatternMemo) memo.clear();
  memo.emplace(std::move(key), shapes);
  return shapes;
}


EagerForm plain(const ir::OpDef& def, std::span<const Tensor> inputs, const ir::AttrMap& attrs) {
  EagerForm f{std::vector<Tensor>(inputs.begin(), inputs.end()), attrs, {}, {}};
  f.pattern = general_pattern(def, inputs, attrs);
  return f;
}

// The results' true shapes, from the op's rules on the concrete operands.
std::vector<Sizes> result_shapes(const ir::OpDef& def, std::span<const Tensor> inputs, const ir::AttrMap& attrs) {
  std::vector<ir::Type> types;
  for (const Tensor& t : inputs) types.push_back(ir::Type::tensor(ir::fixed_shape(t.shape()), t.policy()));
  std::vector<Sizes> out;
  for (const ir::Type& r : ir::infer_result_types(def, types, attrs, {})) out.push_back(*ir::static_sizes(r.shape));
  return out;
}

EagerForm elementwise_form(const ir::OpDef& def, std::span<const Tensor> inputs, const ir::AttrMap& attrs) {
  auto collapsed = collapse_elementwise(inputs);
  if (!collapsed) return plain(def, inputs, attrs);
  const auto& [shapes, out] = *collapsed;
  EagerForm f{{}, attrs, {}, result_shapes(def, inputs, attrs)};
  // Symbols by the collapsed result's positions, right-aligned.
  std::size_t rank = 0;
  for (const Sizes& s : shapes) rank = std::max(rank, s.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    f.inputs.push_back(inputs[i].reshape(shapes[i]));
    ir::Shape s;
    for (std::size_t d = 0; d < shapes[i].size(); ++d) {
      s.push_back(dim_for(shapes[i][d], "p" + std::to_string(rank - shapes[i].size() + d)));
    }
    f.pattern.push_back(std::move(s));
  }
  renumber(f.pattern);
  if (!infers(def, f.inputs, f.pattern, attrs)) return plain(def, inputs, attrs);
  return f;
}

EagerForm reduction_form(const ir::OpDef& def, std::span<const Tensor> inputs, const ir::AttrMap& attrs) {
  const Tensor& x = inputs[0];
  const auto axes = graph::normalize_axes(attrs.get_ints("axes"), x.rank());
  auto [shape, new_axes] = collapse_reduction(x.shape(), axes);
  if (new_axes.empty() && x.numel() != 0) {
    // Every reduced dim has size 1: nothing to reduce after collapsing, so
    // keep the op's own form (a copy with the result's shape).
    return plain(def, inputs, attrs);
  }
  if (x.numel() == 0) return plain(def, inputs, attrs);
  EagerForm f{{x.reshape(shape)}, attrs, {}, result_shapes(def, inputs, attrs)};
  f.attrs.set("axes", new_axes.size() == shape.size() ? std::vector<std::int64_t>{} : new_axes);
  f.attrs.set("keepdims", false);
  ir::Shape s;
  for (std::size_t d = 0; d < shape.size(); ++d) s.push_back(dim_for(shape[d], "r" + std::to_string(d)));
  f.pattern.push_back(std::move(s));
  renumber(f.pattern);
  if (!infers(def, f.inputs, f.pattern, f.attrs)) return plain(def, inputs, attrs);
  return f;
}

EagerForm row_normalization_form(const ir::OpDef& def, std::span<const Tensor> inputs, const ir::AttrMap& attrs) {
  const Tensor& x = inputs[0];
  if (x.rank() <= 2 || graph::normalize_axis(attrs.get_int("axis"), x.rank()) != static_cast<std::int64_t>(x.rank()) - 1) {
    return plain(def, inputs, attrs);
  }
  const Sizes rows{product(x.shape(), 0, x.rank() - 1), x.shape().back()};
  EagerForm f{{}, attrs, {}, result_shapes(def, inputs, attrs)};
  f.attrs.set("axis", std::int64_t{-1});
  for (const Tensor& t : inputs) {
    if (t.shape() == x.shape()) {
      f.inputs.push_back(t.reshape(rows));
    } else if (t.rank() == 1) {
      f.inputs.push_back(t);
    } else {
      return plain(def, inputs, attrs);
    }
  }
  // Then the general pattern of the two-dim call.
  EagerForm g = plain(def, f.inputs, f.attrs);
  f.pattern = std::move(g.pattern);
  return f;
}

// graph.flash_attn(_bwd) on bf16/fp16 (fp32 on the CPU, or an fp8 forward) with Sq and Sk multiples of the
// default blocks (64 query rows, 64 keys), or of any length where the
// target pads ragged lengths for the blocked kernels (attention_blocks_wanted,
// pad-ragged-attention): Sq and Sk stay static, so the blocked tensor-core
// kernels (templates/attention.cpp, which need whole blocks of a known
// length) can apply; one kernel per (Sq, Sk) pair then, the price of tensor
// cores. Other calls are shape-generic in B, Sq and Sk.
EagerForm attention_form(const ir::OpDef& def, std::span<const Tensor> inputs, const ir::AttrMap& attrs) {
  EagerForm f = plain(def, inputs, attrs);
  const DType d = inputs[0].policy().storage;
  const std::int64_t sq = inputs[0].shape()[2], sk = inputs[1].shape()[2];
  const bool whole = sq % templates::kAttentionBlockRows == 0 && sk % templates::kAttentionBlockKeys == 0;
  const bool forward = def.name == "graph.flash_attn";
  if (!templates::blocked_attention_storage(d, forward) || sq == 0 || sk == 0 ||
      (!whole && !schedule::attention_blocks_wanted(!inputs[0].is_cpu(), d))) {
    return f;
  }
  // q, k, v, and for the backward o, lse and do: Sq is dim 2 of q, o, lse
  // and do, Sk dim 2 of k and v.
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (f.pattern[i].size() > 2) f.pattern[i][2] = ir::Dim::fixed(i == 1 || i == 2 ? sk : sq);
  }
  return infers(def, f.inputs, f.pattern, attrs) ? f : plain(def, inputs, attrs);
}

// The FFTs transform one axis of fixed length: the dims before it and after
// it collapse to one each, symbolic, so one kernel serves every batch of a
// transform ([outer, len, inner] along axis 1).
EagerForm fft_form(const ir::OpDef& def, std::span<const Tensor> inputs, const ir::AttrMap& attrs) {
  const Tensor& x = inputs[0];
  const std::int64_t axis = graph::normalize_axis(attrs.get_int("axis"), x.rank());
  std::int64_t outer = 1, inner = 1;
  for (std::int64_t d = 0; d < axis; ++d) outer *= x.shape()[static_cast<std::size_t>(d)];
  for (std::size_t d = static_cast<std::size_t>(axis) + 1; d < x.shape().size(); ++d) inner *= x.shape()[d];
  const std::int64_t len = x.shape()[static_cast<std::size_t>(axis)];
  ir::AttrMap a = attrs;
  a.set("axis", std::int64_t{1});
  EagerForm f{{x.reshape({outer, len, inner})}, a, {}, result_shapes(def, inputs, attrs)};
  f.pattern.push_back(ir::Shape{dim_for(outer, "p0"), ir::Dim::fixed(len), dim_for(inner, "p1")});
  renumber(f.pattern);
  if (!infers(def, f.inputs, f.pattern, a)) return plain(def, inputs, attrs);
  return f;
}

}  // namespace

EagerForm eager_form(const ir::OpDef& def, std::span<const Tensor> inputs, const ir::AttrMap& attrs) {
  if (is_elementwise(def) && !inputs.empty()) return elementwise_form(def, inputs, attrs);
  if (is_reduction(def) && inputs.size() == 1) return reduction_form(def, inputs, attrs);
  if (is_row_normalization(def) && !inputs.empty()) return row_normalization_form(def, inputs, attrs);
  if ((def.name == "graph.flash_attn" || def.name == "graph.flash_attn_bwd") && inputs.size() >= 3 &&
      inputs[0].rank() == 4 && inputs[1].rank() == 4 && inputs[2].rank() == 4) {
    return attention_form(def, inputs, attrs);
  }
  if ((def.name == "graph.fft" || def.name == "graph.fft_resize") && inputs.size() == 1 && inputs[0].rank() >= 1) {
    return fft_form(def, inputs, attrs);
  }
  return plain(def, inputs, attrs);
}

}  // namespace tessera::schedule::detail
