// SPMD execution on in-process devices: one worker thread per device.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

namespace tessera::dist {

// Runs body(rank) for every rank in [0, n) concurrently, one thread each,
// and waits for all. A rank that raises calls on_failure(rank, message) at
// once, so that its communicators release the peers waiting for it. Then
// rethrows: the first error by rank that is not a CollectiveError (the
// cause), else the first CollectiveError.
void run_spmd(std::size_t n, const std::function<void(std::size_t)>& body,
              const std::function<void(std::size_t, const std::string&)>& on_failure);

}  // namespace tessera::dist
