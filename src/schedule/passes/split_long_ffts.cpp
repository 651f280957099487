// split-long-ffts (before partitioning, where FFT lines have a shared-memory
// limit): a c2c graph.fft along the last axis whose line is too long for
// shared memory becomes two graph.fft_passes, the passes before and after a
// split point, each transforming sub-lines short enough to stay on chip
// (docs/design/0034-fft-stages.md). Between them the line's Stockham array
// goes through global memory once, in the operand's complex type, whose
// parts are the arithmetic's, so the stored values are exact and the two
// stages give the transform's bits. A line that no split fits (or Bluestein,
// real sides, other axes, a complex type wider than its arithmetic) keeps
// the global-scratch form.
#include <cmath>

#include "graph/fft_plan.h"
#include "graph/shape_rules.h"
#include "schedule/templates/templates.h"
#include "tessera/ir/builder.h"
#include "tessera/schedule/passes.h"

namespace tessera::schedule {
namespace {

// The pass after which the line splits: both stages' sub-lines within
// `limit` bytes, the sub-lines as even as the radices allow (each stage then
// has enough sub-lines for adjacent ones to share a group); 0 when none fits.
std::size_t split_point(std::int64_t n, std::int64_t part_bytes, std::int64_t limit) {
  const std::vector<int> radices = graph::fft::stockham_radices(n);
  std::size_t best = 0;
  std::int64_t best_longer = 0;
  std::int64_t n1 = 1;
  for (std::size_t a = 1; a < radices.size(); ++a) {
    n1 *= radices[a - 1];
    const std::int64_t n2 = n / n1;
    if (templates::fft_line_bytes(n1, part_bytes) > limit || templates::fft_line_bytes(n2, part_bytes) > limit) continue;
    const std::int64_t longer = std::max(n1, n2);
    if (best == 0 || longer < best_longer) {
      best = a;
      best_longer = longer;
    }
  }
  return best;
}

}  // namespace

int split_long_ffts(ir::Operation& func, bool cuda) {
  // Both knobs are read on every target, so a bad value is an error there too.
  const bool stages = fft_stages_enabled();
  const std::optional<std::int64_t> limit = fft_shared_limit(cuda);
  if (!limit || !stages) return 0;
  ir::Block& body = ir::function_body(func);
  std::vector<std::pair<ir::Operation*, std::size_t>> found;
  for (const auto& op : body.ops()) {
    if (op->name() != "graph.fft" || op->attrs().get_string("kind") != "c2c") continue;
    const ir::Type& x = op->operand(0)->type();
    if (!is_complex(x.dtype()) || complex_part(x.policy.storage) != x.policy.accum || op->result(0)->type() != x) continue;
    if (graph::normalize_axis(op->attrs().get_int("axis"), x.rank()) + 1 != static_cast<std::int64_t>(x.rank())) continue;
    const std::int64_t n = op->attrs().get_int("n");
    const std::int64_t part_bytes = static_cast<std::int64_t>(storage_bytes(x.policy.accum));
    if (graph::fft::stockham_radices(n).empty() || templates::fft_line_bytes(n, part_bytes) <= *limit) continue;
    if (const std::size_t a = split_point(n, part_bytes, *limit); a > 0) found.emplace_back(op.get(), a);
  }
  for (const auto& [op, a] : found) {
    ir::OpBuilder builder(body);
    builder.set_insertion_point(body.find(op));
    const ir::AttrMap& attrs = op->attrs();
    const std::int64_t n = attrs.get_int("n");
    auto stage = [&](ir::Value* x, std::int64_t first, std::int64_t last) {
      return builder
          .create("graph.fft_passes", {x},
                  {{"axis", attrs.get_int("axis")},
                   {"n", n},
                   {"inverse", attrs.get_bool("inverse")},
                   {"norm", attrs.get_string("norm")},
                   {"first", first},
                   {"last", last}},
                  op->location())
          ->result(0);
    };
    const auto passes = static_cast<std::int64_t>(graph::fft::stockham_radices(n).size());
    ir::Value* result = stage(stage(op->operand(0), 0, static_cast<std::int64_t>(a)), static_cast<std::int64_t>(a), passes);
    op->result(0)->replace_all_uses_with(result);
    body.erase(op);
  }
  return static_cast<int>(found.size());
}

}  // namespace tessera::schedule
