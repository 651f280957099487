// What the in-process collective backends (local, nccl) share: members that
// are threads of this process, meeting in one Rendezvous, and point-to-point
// messages through the buffered local mailboxes. A backend derives from it
// and adds its collectives.
#pragma once

#include <string>
#include <vector>

#include "dist/local_p2p.h"
#include "dist/rendezvous.h"
#include "tessera/dist/communicator.h"

namespace tessera::dist::detail {

class ThreadMembers : public Communicator {
 public:
  ThreadMembers(std::string axis, std::vector<std::string> members, double timeout)
      : rv_(std::move(axis), std::move(members), timeout), p2p_(rv_.axis(), rv_.members(), timeout) {}

  const std::string& axis() const override { return rv_.axis(); }
  const std::vector<std::string>& members() const override { return rv_.members(); }

  void send(std::size_t rank, const Tensor& x, std::size_t dst) override { p2p_.send(rank, x, dst); }
  Tensor recv(std::size_t rank, std::size_t src, const std::vector<std::int64_t>& shape,
              const NumericsPolicy& policy) override {
    return p2p_.recv(rank, src, shape, policy);
  }
  // Releases the member's peers in the mailboxes and in the rendezvous.
  void fail(std::size_t rank, const std::string& why) override {
    p2p_.fail(rank, why);
    rv_.fail(rank, why);
  }
  std::uint64_t completed(std::size_t rank) const override { return rv_.completed(rank); }

 protected:
  Rendezvous rv_;
  LocalMailboxes p2p_;
};

}  // namespace tessera::dist::detail
