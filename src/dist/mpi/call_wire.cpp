// Collective calls on the wire (call_wire.h).
#include "dist/mpi/call_wire.h"

#include <sstream>

#include "tessera/support/error.h"

namespace tessera::dist::detail {
namespace {

std::uint64_t mix(std::uint64_t h, const std::string& s) {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return (h ^ 0xff) * 1099511628211ull;  // a separator: ("ab", "c") and ("a", "bc") differ
}

}  // namespace

std::uint64_t call_hash(const CollectiveCall& call, const std::string& axis) {
  std::uint64_t h = 1469598103934665603ull;
  h = mix(h, axis);
  h = mix(h, call.op);
  h = mix(h, call.detail);
  h = mix(h, std::string(name(call.policy.storage)));
  h = mix(h, std::to_string(call.shape.size()));
  for (std::size_t d = 0; d < call.shape.size(); ++d) {
    h = mix(h, static_cast<std::int64_t>(d) == call.free_dim ? "*" : std::to_string(call.shape[d]));
  }
  return h;
}

std::string serialize_call(const CollectiveCall& call) {
  std::string s = call.op + "\n" + call.detail + "\n" + print_policy(call.policy) + "\n" +
                  std::to_string(call.free_dim) + "\n";
  for (std::size_t d = 0; d < call.shape.size(); ++d) s += (d ? "," : "") + std::to_string(call.shape[d]);
  return s;
}

CollectiveCall parse_call(const std::string& text) {
  std::istringstream in(text);
  CollectiveCall c;
  std::string policy, free_dim, dims;
  if (!std::getline(in, c.op) || !std::getline(in, c.detail) || !std::getline(in, policy) ||
      !std::getline(in, free_dim)) {
    raise(ErrorCode::Internal, "a malformed collective call from another process: '" + text + "'");
  }
  std::getline(in, dims);
  c.policy = parse_policy(policy);
  c.free_dim = std::stoll(free_dim);
  std::istringstream d(dims);
  for (std::string n; std::getline(d, n, ',');) c.shape.push_back(std::stoll(n));
  return c;
}

}  // namespace tessera::dist::detail
