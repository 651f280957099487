// Sharding rules of elementwise ops (and cast, where, stop_gradient):
// operands broadcast, so a result dim is split the way its non-broadcast
// operands agree on, and a whole operand is split to match for free.
//
// Pending sums pass through only ops that are sums themselves: add and sub
// of operands pending over the same axes, neg and stop_gradient. Any other
// op needs full values and settles its operands first; keeping a partial
// through mul by a replicated value would be valid algebra, but it rounds
// each term separately, and Tessera keeps results close to the one-device
// program rather than saving a collective there.
//
// graph.lookup reads its table whole (any code can occur on any shard); x
// and the result keep x's split. (Compiled pipelines build it after
// partitioning; the rule keeps a graph that holds one partitionable.)
#include "dist/sharding_rules/rule_support.h"

namespace tessera::dist::rules {

void register_elementwise_sharding() {
  for (const char* name : {"add", "sub", "neg", "stop_gradient"}) {
    register_sharding_rule(std::string("graph.") + name,
                           [](const ShardingQuery& q) { return broadcast_plan(q, /*linear=*/true); });
  }
  for (const char* name : {"abs",   "div",     "eq",      "erf", "exp",  "ge",    "gelu", "gt",      "le",
                           "log",   "lt",      "maximum", "minimum", "mul", "ne",  "pow",  "relu",    "rsqrt",
                           "sigmoid", "silu",  "sqrt",    "tanh", "sin", "cos", "where", "cast",
                           "real",  "imag",    "conj",    "complex"}) {
    register_sharding_rule(std::string("graph.") + name,
                           [](const ShardingQuery& q) { return broadcast_plan(q, /*linear=*/false); });
  }
  register_sharding_rule("graph.lookup", [](const ShardingQuery& q) {
    const Sharding x = settled(q.operands[1]);
    ShardingPlan plan;
    plan.operands = {replicated(1), x};
    plan.results = {x};
    return plan;
  });
}

}  // namespace tessera::dist::rules
