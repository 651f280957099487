// The Schedule IR dialect: schedule.kernel and schedule.yield, and the
// family classification of Graph IR ops (tessera/schedule/schedule_dialect.h).
#include "tessera/schedule/schedule_dialect.h"

#include <algorithm>
#include <map>
#include <set>

#include "graph/passes/pass_support.h"
#include "tessera/ir/dialect.h"
#include "tessera/support/error.h"
#include "tile/tile_support.h"

namespace tessera::schedule {
namespace {

using ir::AttrKind;
using ir::AttrMap;
using ir::OpDef;
using ir::Type;

constexpr std::string_view kFamilies[] = {"elementwise", "reduction", "gemm",   "normalization", "view", "constant",
                                          "copy",        "random",    "collective", "sparse", "attention", "fft",
                                          "complex",     "opaque"};
constexpr std::string_view kVariants[] = {"tile", "tile_ir", "view", "constant", "collective", "none"};

std::vector<Type> operand_types(const ir::Operation& op) {
  std::vector<Type> out;
  for (ir::Value* v : op.operands()) out.push_back(v->type());
  return out;
}

// The families whose templates read each target knob (assign-tiles sets a
// knob only on them): on any other kernel a knob would be accepted and then
// ignored, so a Schedule IR file that puts one there is an error.
struct KnobFamilies {
  std::string_view knob;
  std::vector<Family> families;
};
const std::vector<KnobFamilies>& knob_families() {
  static const std::vector<KnobFamilies> table = {
      {"lane_elements", {Family::elementwise}},
      {"lane_vector", {Family::elementwise}},
      {"row_lanes", {Family::reduction, Family::normalization}},
      {"row_vector", {Family::reduction, Family::normalization}},
      {"lane_shuffles", {Family::reduction, Family::normalization}},
      {"row_held", {Family::normalization}},
      {"row_held_pairs", {Family::normalization}},
      {"row_held_threads", {Family::normalization}},
      {"row_held_run", {Family::normalization}},
      {"row_held_every_lane", {Family::normalization}},
      {"row_prefetch", {Family::normalization}},
      {"column_strands", {Family::reduction}},
      {"column_vector", {Family::reduction}},
      {"gemm_lanes", {Family::gemm}},
      {"gemm_vector", {Family::gemm}},
      {"gemm_stages", {Family::gemm}},
      {"mma_flat", {Family::gemm}},
      {"mma_staged", {Family::gemm}},
      {"spmm_strip", {Family::sparse}},
      {"spmm_vector", {Family::sparse}},
      {"fft_lanes", {Family::fft}},
      {"fft_points", {Family::fft}},
      {"fft_shared_bytes", {Family::fft}},
      {"attn_blocked", {Family::attention}},
      {"attn_tile", {Family::attention}},
  };
  return table;
}

void verify_kernel(const ir::Operation& op) {
  tile::require_regions(op, 1);
  const Family family = parse_family(op.attrs().get_string("family"));
  for (const KnobFamilies& entry : knob_families()) {
    if (!op.attrs().has(entry.knob) ||
        std::find(entry.families.begin(), entry.families.end(), family) != entry.families.end()) {
      continue;
    }
    std::string owners;
    for (Family f : entry.families) owners += (owners.empty() ? "" : " or ") + std::string(family_name(f));
    raise(ErrorCode::ArgumentInvalid, "attribute '" + std::string(entry.knob) + "' is a knob of " + owners +
                                          " kernels, not of a " + std::string(family_name(family)) + " kernel");
  }
  if (const ir::Attribute* v = op.attrs().find("variant")) {
    const auto& name = std::get<std::string>(*v);
    bool known = false;
    for (auto k : kVariants) known = known || k == name;
    if (!known) raise(ErrorCode::ArgumentInvalid, "unknown variant \"" + name + "\"; expected tile, tile_ir, view, constant, collective or none");
  }
  if (const ir::Attribute* b = op.attrs().find("buffers")) {
    const auto& slots = std::get<std::vector<std::int64_t>>(*b);
    if (slots.size() != op.num_results()) {
      raise(ErrorCode::ArgumentInvalid, "attribute 'buffers' has " + std::to_string(slots.size()) +
                                            " entries for " + std::to_string(op.num_results()) + " result(s)");
    }
  }
  const ir::Block& body = op.region(0).block();
  const std::vector<Type> args = operand_types(op);
  tile::require_block_args(body, args, "the kernel body");
  std::vector<Type> results;
  for (ir::Value* v : op.results()) results.push_back(v->type());
  tile::require_terminator(body, "schedule.yield", 0, results, "the kernel body");
  for (const auto& inner : body.ops()) {
    if (inner.get() != body.terminator() && inner->def().dialect() != "graph") {
      raise(ErrorCode::ArgumentInvalid,
            "a schedule.kernel holds Graph IR ops only, found '" + std::string(inner->name()) + "'");
    }
  }
}

}  // namespace

std::string_view family_name(Family family) {
  return kFamilies[static_cast<std::size_t>(family)];
}

Family parse_family(std::string_view name) {
  for (std::size_t i = 0; i < std::size(kFamilies); ++i) {
    if (kFamilies[i] == name) return static_cast<Family>(i);
  }
  std::string all;
  for (auto f : kFamilies) all += (all.empty() ? "" : ", ") + std::string(f);
  raise(ErrorCode::ArgumentInvalid, "unknown kernel family \"" + std::string(name) + "\"; expected one of " + all);
}

Family family_of(const ir::Operation& graph_op) {
  static const std::map<std::string, Family, std::less<>> families = [] {
    std::map<std::string, Family, std::less<>> m;
    for (const char* n : {"add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "ne", "lt", "le",
                          "gt", "ge", "neg", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sin", "cos", "sigmoid", "relu",
                          "silu", "gelu", "erf", "where", "cast", "broadcast_to", "lookup"}) {
      m[std::string("graph.") + n] = Family::elementwise;
    }
    for (const char* n : {"sum", "mean", "max", "min", "argmax", "superblock_sums", "superblock_total", "block_sums", "block_total"}) m[std::string("graph.") + n] = Family::reduction;
    for (const char* n : {"matmul", "gemm"}) m[std::string("graph.") + n] = Family::gemm;
    for (const char* n : {"softmax_safe", "softmax_linear", "logsumexp", "layernorm_safe", "rmsnorm_safe",
                          "norm_linear"}) {
      m[std::string("graph.") + n] = Family::normalization;
    }
    for (const char* n : {"reshape", "stop_gradient", "transpose", "slice", "split", "split_qkv"}) {
      m[std::string("graph.") + n] = Family::view;
    }
    m["graph.constant"] = Family::constant;
    for (const char* n : {"concat", "gather", "scatter_add", "slice_embed", "iota"}) {
      m[std::string("graph.") + n] = Family::copy;
    }
    for (const char* n : {"rand", "randn", "dropout"}) m[std::string("graph.") + n] = Family::random;
    for (const char* n : {"spmm", "sddmm"}) m[std::string("graph.") + n] = Family::sparse;
    for (const char* n : {"flash_attn", "flash_attn_bwd"}) m[std::string("graph.") + n] = Family::attention;
    for (const char* n : {"fft", "fft_resize", "fft_passes"}) m[std::string("graph.") + n] = Family::fft;
    for (const char* n : {"real", "imag", "conj", "complex"}) m[std::string("graph.") + n] = Family::complex;
    for (const char* n : {"allreduce", "all_gather", "reduce_scatter", "all_to_all", "shard_slice"}) {
      m[std::string("graph.") + n] = Family::collective;
    }
    return m;
  }();
  // Casts to or from a complex dtype and complex add, sub, mul, div, neg, abs
  // and exp compute part by part (templates/complex_parts.cpp).
  static const std::set<std::string, std::less<>> complex_lanes = {
      "graph.cast", "graph.add", "graph.sub", "graph.mul", "graph.div", "graph.neg", "graph.abs", "graph.exp"};
  if (complex_lanes.count(graph_op.name()) && graph_op.num_results() == 1) {
    bool complex = is_complex(graph_op.result(0)->type().dtype());
    for (const ir::Value* v : graph_op.operands()) complex = complex || is_complex(v->type().dtype());
    if (complex) return Family::complex;
  }
  // A slice with copy = true is written by a copy kernel, not taken as a view.
  if (graph_op.name() == "graph.slice" && graph_op.attrs().has("copy") && graph_op.attrs().get_bool("copy")) {
    return Family::copy;
  }
  auto it = families.find(graph_op.name());
  return it == families.end() ? Family::opaque : it->second;
}

bool is_kernel_op(const ir::Operation& op) {
  return op.name() == "schedule.kernel";
}

Family kernel_family(const ir::Operation& kernel) {
  return parse_family(kernel.attrs().get_string("family"));
}

const std::string& kernel_name(const ir::Operation& kernel) {
  return kernel.attrs().get_string("name");
}

std::string kernel_variant(const ir::Operation& kernel) {
  const ir::Attribute* v = kernel.attrs().find("variant");
  return v ? std::get<std::string>(*v) : std::string();
}

ir::Block& kernel_body(const ir::Operation& kernel) {
  return kernel.region(0).block();
}

const ir::Operation& kernel_root_op(const ir::Operation& kernel) {
  const ir::Block& body = kernel_body(kernel);
  // A normalization kernel's casts are prologues of its operands
  // (exact_widening_cast): its root is the normalization.
  const bool normalization = kernel.attrs().has("family") && kernel.attrs().get_string("family") == "normalization";
  // A reduction kernel's elementwise ops before its reduction are a prologue
  // computing the reduced operand (block_sums_prologue_fusible): its root is the
  // reduction.
  if (kernel.attrs().has("family") && kernel.attrs().get_string("family") == "reduction") {
    for (const auto& op : body.ops()) {
      if (op.get() != body.terminator() && family_of(*op) == Family::reduction) return *op;
    }
  }
  for (const auto& op : body.ops()) {
    if (op->name() == "graph.constant" || (normalization && op->name() == "graph.cast")) continue;
    return *op;
  }
  return *body.ops().front();
}

bool is_splat_constant(const ir::Operation& op) {
  return op.name() == "graph.constant" && graph::splat_value(op.result(0)).has_value();
}

std::vector<ir::Operation*> kernels_of(const ir::Operation& func) {
  std::vector<ir::Operation*> out;
  for (const auto& op : ir::function_body(func).ops()) {
    if (is_kernel_op(*op)) out.push_back(op.get());
  }
  return out;
}

void register_schedule_dialect(ir::Registry& r) {
  r.add(OpDef{
      .name = "schedule.kernel",
      .summary = "One kernel: a fusion group of Graph IR ops in its region, with its family, iteration domain, "
                 "tiling knobs, chosen variant and buffer plan as attributes.",
      .operands = {"inputs"},
      .variadic = true,
      .attrs = {{.name = "name", .kind = AttrKind::string, .required = true},
                {.name = "family", .kind = AttrKind::string, .required = true},
                {.name = "result_types", .kind = AttrKind::string, .required = true},
                {.name = "domain", .kind = AttrKind::shape, .doc = "the iteration domain"},
                {.name = "tile", .kind = AttrKind::int_list, .doc = "tiling knobs"},
                {.name = "stages", .kind = AttrKind::integer, .doc = "pipelining stages"},
                {.name = "variant", .kind = AttrKind::string, .doc = "tile | view | constant | none | tile_ir | ptx"},
                {.name = "buffers", .kind = AttrKind::int_list, .doc = "buffer slot per result (-1: function result)"},
                // The target knobs assign-tiles sets (passes/assign_tiles.cpp), so that
                // the Schedule IR an executable prints parses back and compiles to
                // the same kernels.
                {.name = "lane_elements", .kind = AttrKind::integer, .doc = "elements a lane takes (elementwise)"},
                {.name = "lane_vector", .kind = AttrKind::integer, .doc = "elements a lane's run takes (elementwise)"},
                {.name = "row_lanes", .kind = AttrKind::integer, .doc = "lanes sharing a row (reductions, normalizations)"},
                {.name = "row_vector", .kind = AttrKind::integer, .doc = "elements per run of a shared row"},
                {.name = "row_held", .kind = AttrKind::boolean, .doc = "rows held in registers (normalizations)"},
                {.name = "row_held_pairs", .kind = AttrKind::boolean, .doc = "held rows in pairs of strands"},
                {.name = "row_held_threads", .kind = AttrKind::integer, .doc = "threads resident per multiprocessor for held rows"},
                {.name = "row_held_run", .kind = AttrKind::integer, .doc = "adjacent strands a lane of a held row takes"},
                {.name = "row_held_every_lane", .kind = AttrKind::boolean,
                 .doc = "every lane of a held row derives its scalars (one barrier a pass)"},
                {.name = "row_prefetch", .kind = AttrKind::integer, .doc = "rows ahead a held row asks the L2 for"},
                {.name = "lane_shuffles", .kind = AttrKind::boolean, .doc = "row folds by lane shuffles"},
                {.name = "column_strands", .kind = AttrKind::integer, .doc = "blocks a pass of the strand-lane column form"},
                {.name = "column_vector", .kind = AttrKind::integer, .doc = "most adjacent columns a lane (column and block sums)"},
                {.name = "gemm_lanes", .kind = AttrKind::integer, .doc = "lanes of a GEMM tile"},
                {.name = "gemm_vector", .kind = AttrKind::integer, .doc = "elements per run of a GEMM epilogue"},
                {.name = "gemm_stages", .kind = AttrKind::integer, .doc = "pipeline stages of a staged GEMM"},
                {.name = "mma_flat", .kind = AttrKind::boolean, .doc = "a CUDA Tile IR GEMM's flat form"},
                {.name = "mma_staged", .kind = AttrKind::boolean, .doc = "a GEMM staged through shared memory"},
                {.name = "spmm_strip", .kind = AttrKind::integer, .doc = "rows of b a sparse product stages in shared memory"},
                {.name = "spmm_vector", .kind = AttrKind::integer, .doc = "outputs a lane of a sparse product takes"},
                {.name = "fft_lanes", .kind = AttrKind::integer, .doc = "lanes of an FFT line"},
                {.name = "fft_points", .kind = AttrKind::integer, .doc = "points a lane of an FFT pass takes"},
                {.name = "fft_shared_bytes", .kind = AttrKind::integer, .doc = "shared memory an FFT line may use"},
                {.name = "attn_blocked", .kind = AttrKind::boolean, .doc = "attention's blocked form"},
                {.name = "attn_tile", .kind = AttrKind::int_list, .doc = "attention's query and key blocks"}},
      .infer = [](std::span<const Type>,
                  const AttrMap& attrs) { return ir::parse_type_list(attrs.get_string("result_types")); },
      .verify = verify_kernel,
  });
  r.add(OpDef{
      .name = "schedule.yield",
      .summary = "Ends a schedule.kernel body; its operands are the kernel's results.",
      .operands = {"values"},
      .variadic = true,
      .num_results = 0,
      .is_terminator = true,
      .infer = [](std::span<const Type>, const AttrMap&) { return std::vector<Type>{}; },
  });
}

}  // namespace tessera::schedule

namespace tessera::ir {
// Called by the Registry's constructor with the other dialects.
void register_schedule_dialect(Registry& registry) {
  schedule::register_schedule_dialect(registry);
}
}  // namespace tessera::ir
