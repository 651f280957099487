// Sharding rules of ops that make values (constant, iota) and of random
// ops (rand, randn, dropout), whose element n draws counter n of the
// global tensor: every device computes the whole value, so the bits match
// the one-device program. Collectives written by hand belong to per-shard
// code (tessera.index_launch); in a function over distributed tensors the
// partitioner inserts them, and a hand-written one is an error saying so.
#include "dist/sharding_rules/rule_support.h"
#include "tessera/support/error.h"

namespace tessera::dist::rules {

void register_creation_sharding() {
  for (const char* name : {"constant", "iota", "rand", "randn", "dropout"}) {
    register_sharding_rule(std::string("graph.") + name, replicate_all);
  }
  for (const char* name : {"allreduce", "all_gather", "reduce_scatter", "all_to_all", "shard_slice"}) {
    register_sharding_rule(std::string("graph.") + name, [](const ShardingQuery& q) -> ShardingPlan {
      raise(ErrorCode::Compile,
            "'" + std::string(q.op.name()) + "' is per-shard code: in a function over distributed tensors the compiler "
            "inserts the collectives; call tessera." + std::string(q.op.name()).substr(6) +
                " inside a function given to tessera.index_launch instead",
            q.op.location());
    });
  }
}

}  // namespace tessera::dist::rules
