// Thread-local shard bindings (tessera/dist/shard_scope.h).
#include "tessera/dist/shard_scope.h"

#include <vector>

#include "tessera/support/error.h"

namespace tessera::dist {
namespace {

struct Entry {
  std::string axis;
  ShardBinding binding;
};
thread_local std::vector<Entry> t_scopes;

}  // namespace

ShardScope::ShardScope(std::string axis, std::shared_ptr<Communicator> comm, std::size_t rank) {
  if (!comm || rank >= comm->size()) {
    raise(ErrorCode::ArgumentInvalid, "a shard scope needs a communicator with member " + std::to_string(rank));
  }
  t_scopes.push_back({std::move(axis), {std::move(comm), rank}});
}

ShardScope::~ShardScope() {
  t_scopes.pop_back();
}

const ShardBinding* current_shard(std::string_view axis) {
  for (auto it = t_scopes.rbegin(); it != t_scopes.rend(); ++it)
    if (it->axis == axis) return &it->binding;
  return nullptr;
}

const ShardBinding& require_shard(std::string_view axis, std::int64_t axis_size, std::string_view op) {
  const ShardBinding* b = current_shard(axis);
  if (b == nullptr) {
    raise(ErrorCode::Collective, std::string(op) + " over mesh axis '" + std::string(axis) + "' of " +
                                     std::to_string(axis_size) +
                                     " members runs per shard: call it inside a function given to "
                                     "tessera.index_launch(axis=\"" + std::string(axis) + "\")");
  }
  if (static_cast<std::int64_t>(b->comm->size()) != axis_size) {
    raise(ErrorCode::Collective, std::string(op) + " over mesh axis '" + std::string(axis) + "' expects " +
                                     std::to_string(axis_size) + " members, but this shard's axis has " +
                                     std::to_string(b->comm->size()));
  }
  return *b;
}

}  // namespace tessera::dist
