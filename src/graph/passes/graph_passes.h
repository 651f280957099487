// The Graph IR's canonicalization passes, registered by name with the pass
// manager (tessera/ir/pass.h) the first time any pass is looked up.
#pragma once

namespace tessera::graph {

void register_graph_passes();

}  // namespace tessera::graph
