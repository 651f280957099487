// Which collectives the current thread runs: a worker of an index launch is
// a shard, a member of its mesh axis's communicator. Graph IR collectives
// (graph.allreduce, graph.all_gather, graph.reduce_scatter) over an axis of
// more than one member, in eager ops and in compiled executables alike, run
// through the communicator the thread's scope names.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "tessera/dist/communicator.h"

namespace tessera::dist {

struct ShardBinding {
  std::shared_ptr<Communicator> comm;
  std::size_t rank = 0;
};

// While alive, this thread is member `rank` of `comm` for mesh axis `axis`
// (scopes nest; the innermost binding of an axis wins).
class ShardScope {
 public:
  ShardScope(std::string axis, std::shared_ptr<Communicator> comm, std::size_t rank);
  ~ShardScope();
  ShardScope(const ShardScope&) = delete;
  ShardScope& operator=(const ShardScope&) = delete;
};

// The thread's binding for `axis`, or null.
const ShardBinding* current_shard(std::string_view axis);
// The binding a collective `op` over `axis` with `axis_size` members needs:
// CollectiveError when the thread is no shard of that axis, or the axis's
// communicator has another size.
const ShardBinding& require_shard(std::string_view axis, std::int64_t axis_size, std::string_view op);

}  // namespace tessera::dist
