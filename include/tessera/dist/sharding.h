// The global view of distribution (docs/design/0007-sharding.md): a traced
// Graph IR function over whole tensors, with a sharding per argument, is
// partitioned into the function each device runs on its shards.
//
// Each op family registers one sharding rule (src/dist/sharding_rules),
// beside its autodiff rules. Given the shardings its operands have, a rule
// says which shardings it needs them in and which its results get; the
// partitioner inserts the collectives that convert each operand
// (graph.allreduce or graph.reduce_scatter for a pending sum,
// graph.all_gather to make a dim whole, graph.all_to_all to move a split to
// another dim, graph.shard_slice to split a whole dim, which costs nothing)
// and writes the op on the shards. Rules never guess: operands that want one
// dim split differently are a ShapeError naming both shardings and asking
// for tessera.dist.reshard. An op without a rule is an error naming it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/dist/layout.h"
#include "tessera/dist/mesh.h"
#include "tessera/ir/builder.h"
#include "tessera/ir/ir.h"

namespace tessera::dist {

// The mesh as the partitioner sees it: axis names and sizes, and the
// coordinates of the device a function is partitioned for (which matter only
// for the sizes of uneven parts).
struct MeshView {
  std::vector<std::string> axes;
  std::vector<std::int64_t> sizes;
  std::vector<std::int64_t> coords;

  std::int64_t size(std::string_view axis) const;  // ArgumentError for an unknown axis
  std::int64_t coord(std::string_view axis) const;
  // The length of this device's part of a dim of global size n split over
  // `axis` ("" : n), by numpy.array_split.
  std::int64_t part(std::int64_t n, const std::string& axis) const;
  // "dp=2, tp=4", the function attribute `mesh` of a sharded function.
  std::string describe() const;
};

struct ShardingQuery {
  const ir::Operation& op;                  // the global op (global types)
  std::vector<ir::Sharding> operands;       // each operand's current sharding
  const MeshView& mesh;
};

using EmitFn = std::function<std::vector<ir::Value*>(ir::OpBuilder& b, const std::vector<ir::Value*>& operands)>;

struct ShardingPlan {
  std::vector<ir::Sharding> operands;  // the shardings the op needs its operands in
  std::vector<ir::Sharding> results;
  // The op's attributes on shards when they differ (a reshape's target shape).
  std::optional<ir::AttrMap> attrs;
  // Writes the computation on the converted shards when it is not the op
  // itself with `attrs` (a mean over a split dim becomes a sum and a scale).
  EmitFn emit;
};

using ShardingRule = std::function<ShardingPlan(const ShardingQuery& query)>;

// Installs the rule of `op_name` (replacing one); the built-in rules register on first use.
void register_sharding_rule(std::string_view op_name, ShardingRule rule);
// The rule of `op`; CompileError naming the op (and where it came from) when it has none.
const ShardingRule& require_sharding_rule(const ir::Operation& op);
bool has_sharding_rule(std::string_view op_name);

struct PartitionedFunction {
  std::string name;                         // the per-shard function added to the module
  std::vector<ir::Sharding> results;        // the shardings of its results
};

// Adds to `module` the function device `mesh.coords` runs for global
// function `func` whose arguments have `args` shardings, named `out_name`.
// Every value of it carries its sharding; its shapes are the shards'. The
// global function must be inlined (no `call`) and have static shapes.
PartitionedFunction partition(ir::Module& module, const std::string& func, const MeshView& mesh,
                              const std::vector<ir::Sharding>& args, const std::string& out_name);

// The shard shape of a global shape under `sharding` on this device.
std::vector<std::int64_t> shard_sizes(const std::vector<std::int64_t>& global, const ir::Sharding& sharding,
                                      const MeshView& mesh);

// A function partitioned for every device of a mesh: devices whose shards
// have the same shapes share one function (uneven splits give at most a few).
struct MeshPartition {
  std::vector<std::string> functions;
  std::vector<std::size_t> function_of_rank;  // by mesh rank
  std::vector<ir::Sharding> results;
};
MeshPartition partition_mesh(ir::Module& module, const std::string& func, const Mesh& mesh,
                             const std::vector<ir::Sharding>& args);

// Pass "spmd-partition": every function with a `mesh` attribute ("tp=4,
// dp=2") whose parameter types carry shardings of their global shapes gets
// its per-shard function `<name>.shard` (the device at coordinate 0 of each
// axis) added after it. tessera-opt and the lit tests use it.
void register_partition_pass();

// A layout as a sharding: ArgumentError (naming `what`) for what a
// partitioned function cannot take yet: a dim split over several mesh axes,
// or a cyclic split.
ir::Sharding sharding_of(const Layout& layout, const std::string& what);
Layout layout_of(const ir::Sharding& sharding, const Mesh& mesh);

}  // namespace tessera::dist
