// split-long-sums (before partitioning): a float graph.sum or graph.mean
// with few output elements and a long reduced length becomes
// graph.superblock_sums over the trailing or leading axes, one entry per superblock of kReductionBlock^2
// elements of the canonical order, and graph.superblock_total, which adds
// them left to right (docs/design/0036-superblock-split-sums.md). A sum to
// one element otherwise runs as one group on one multiprocessor (or one CPU
// thread); split, its superblocks run as as many groups and the small
// second kernel adds their sums in the order the canonical sum does, so the
// result keeps its bits.
#include <cstdlib>

#include "graph/accumulate.h"
#include "graph/shape_rules.h"
#include "tessera/ir/builder.h"
#include "tessera/schedule/passes.h"

namespace tessera::schedule {
namespace {

// Below this many output elements a sum splits: a group per output element
// leaves most of an H200's 132 multiprocessors idle (or a CPU's threads).
constexpr std::int64_t kFewOutputs = 1024;

}  // namespace

std::optional<SumSplit> long_sum_split(std::string_view op, const ir::Type& x, const std::vector<std::int64_t>& given_axes) {
  if (op != "graph.sum" && op != "graph.mean") return std::nullopt;
  if (!is_float(x.dtype())) return std::nullopt;  // integer sums run in element order, complex ones part by part
  auto axes = graph::normalize_axes(given_axes, x.rank());
  if (axes.empty()) {
    for (std::size_t d = 0; d < x.rank(); ++d) axes.push_back(static_cast<std::int64_t>(d));
  }
  // Trailing axes (a row's superblocks are contiguous) or leading ones (the
  // column form's lanes read consecutive columns of a superblock); other
  // adjacent axes would read strided rows.
  const bool adjacent = !axes.empty() && axes.back() - axes.front() + 1 == static_cast<std::int64_t>(axes.size());
  const bool trailing = adjacent && axes.back() + 1 == static_cast<std::int64_t>(x.rank());
  if (!trailing && !(adjacent && axes.front() == 0)) return std::nullopt;
  SumSplit split{axes, 1, 1, 0, !trailing};
  for (std::size_t d = 0; d < x.rank(); ++d) {
    const ir::Dim& dim = x.shape[d];
    if (!dim.symbol.empty()) return std::nullopt;
    const bool reduced = std::find(axes.begin(), axes.end(), static_cast<std::int64_t>(d)) != axes.end();
    (reduced ? split.length : split.outputs) *= dim.size;
  }
  split.superblocks = graph::superblock_count(split.length);
  if (split.outputs >= kFewOutputs || split.superblocks < 2) return std::nullopt;
  return split;
}

bool binary_knob(const char* name, bool fallback) {
  const char* env = std::getenv(name);
  if (!env || !*env) return fallback;
  const std::string value = env;
  if (value != "0" && value != "1") {
    raise(ErrorCode::ArgumentInvalid, std::string(name) + " is '" + value + "'; expected 1 or 0");
  }
  return value == "1";
}

bool split_sums_enabled() { return binary_knob("TESSERA_SPLIT_SUMS", true); }

namespace {

// Replaces sum or mean `op` of `length` reduced elements by `total_op` (a
// total with count, shape and policy attributes) of partial sums `parts`,
// built at op.
void replace_by_total(ir::Block& body, ir::OpBuilder& builder, ir::Operation* op, const char* total_op, ir::Value* parts,
                      std::int64_t length) {
  const ir::Type& result = op->result(0)->type();
  ir::Value* total = builder
                         .create(total_op, {parts},
                                 {{"count", op->name() == "graph.mean" ? length : std::int64_t{0}},
                                  {"shape", result.shape},
                                  {"policy", result.policy}},
                                 op->location())
                         ->result(0);
  op->result(0)->replace_all_uses_with(total);
  body.erase(op);
}

}  // namespace

int split_long_sums(ir::Operation& func) {
  if (!split_sums_enabled()) return 0;
  ir::Block& body = ir::function_body(func);
  std::vector<std::pair<ir::Operation*, SumSplit>> found;
  for (const auto& op : body.ops()) {
    if (op->name() != "graph.sum" && op->name() != "graph.mean") continue;
    if (auto split = long_sum_split(op->name(), op->operand(0)->type(), op->attrs().get_ints("axes"))) {
      found.emplace_back(op.get(), std::move(*split));
    }
  }
  for (const auto& [op, split] : found) {
    ir::OpBuilder builder(body);
    builder.set_insertion_point(body.find(op));
    ir::Value* parts =
        builder
            .create("graph.superblock_sums", {op->operand(0)}, {{"axes", split.axes}, {"superblocks", split.superblocks}},
                    op->location())
            ->result(0);
    replace_by_total(body, builder, op, "graph.superblock_total", parts, split.length);
  }
  return static_cast<int>(found.size());
}

bool column_blocks_enabled() { return binary_knob("TESSERA_COLUMN_BLOCKS", true); }

// split-column-sums: a float graph.sum or graph.mean over axis 0 of a matrix
// of more than one block of rows becomes graph.block_sums, a group per
// block of rows and run of columns, and graph.block_total, a lane per column
// adding the block sums in the canonical order (docs/design/0039). The
// column form otherwise runs a group per run of 64 columns down every row
// (128 groups for 8192 columns, one per multiprocessor of an H200), 4 bytes
// a lane; block sums read 16. On one CPU core they ran a [4096, 4096] fp32
// sum in 14.8 ms against the column form's 16.5.
int split_column_sums(ir::Operation& func) {
  if (!column_blocks_enabled()) return 0;
  ir::Block& body = ir::function_body(func);
  std::vector<ir::Operation*> found;
  for (const auto& op : body.ops()) {
    if (op->name() != "graph.sum" && op->name() != "graph.mean") continue;
    const ir::Type& x = op->operand(0)->type();
    if (!is_float(x.dtype()) || x.rank() != 2 || x.shape[0].is_symbolic() || x.shape[0].size <= graph::kSumBlock) continue;
    if (graph::normalize_axes(op->attrs().get_ints("axes"), 2) != std::vector<std::int64_t>{0}) continue;
    found.push_back(op.get());
  }
  for (ir::Operation* op : found) {
    ir::OpBuilder builder(body);
    builder.set_insertion_point(body.find(op));
    ir::Value* parts = builder.create("graph.block_sums", {op->operand(0)}, {}, op->location())->result(0);
    replace_by_total(body, builder, op, "graph.block_total", parts, op->operand(0)->type().shape[0].size);
  }
  return static_cast<int>(found.size());
}

}  // namespace tessera::schedule
