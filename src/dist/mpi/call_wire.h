// Collective calls between processes: the mpi backend sends each member's
// call (rendezvous.h's CollectiveCall) with its messages, and a hash of
// what must agree, so that the receiver detects a mismatch and can name
// both sides' calls.
#pragma once

#include <cstdint>
#include <string>

#include "dist/rendezvous.h"

namespace tessera::dist::detail {

// A hash of what the members must agree on: the axis, the op, its
// arguments, the dtype and the shape (all but an all_gather's free dim).
std::uint64_t call_hash(const CollectiveCall& call, const std::string& axis);
// A text form that parse_call reads back (one field per line).
std::string serialize_call(const CollectiveCall& call);
CollectiveCall parse_call(const std::string& text);

}  // namespace tessera::dist::detail
